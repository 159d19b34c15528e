//! Scoped layers (seed §10.2): a global layer plus one layer per agent
//! scope, and what a call from a scope sees.
//!
//! Agent scopes form a tree named by `/`-separated paths (`agents`,
//! `agents/researcher`, `agents/researcher/fetcher`). The operator configures
//! some of them (`[scopes."agents/researcher"]`): a configured scope may
//! register its own tools and policies (its own plugin directories) and may
//! *restrict* what it inherits, with `allow` and `deny` lists of tool names
//! or globs. The rules, and why:
//!
//! * **A restriction filters only what is inherited** — the tools of the
//!   global layer and of the scope's ancestors — never the scope's own
//!   registrations: a sub-agent under `deny = ["*"]` keeps its own
//!   report-back tool.
//! * **Restrictions accumulate downwards**: a scope sees its parent's view
//!   (already filtered by the parent's and every ancestor's restrictions),
//!   filtered again by its own. A grandchild can never see a tool its
//!   grandparent denied; a sibling is not affected at all.
//! * **A scope's own tool shadows an inherited tool of the same name**, for
//!   the scope and its descendants.
//! * **Policies are inherited whole.** A scope adds hooks and guards of its
//!   own (they run for its calls and its descendants'), but no restriction
//!   removes an ancestor's policy: a guard of the global layer cannot be
//!   escaped by a scope configured with `deny = ["*"]`.
//! * **Resolution**: a call's scope resolves to the deepest configured
//!   scope that is a prefix of it, segment by segment (empty segments are
//!   ignored, so `agents//researcher/` is `agents/researcher`); a scope
//!   with no configured prefix is the global layer. So every spelling of a
//!   restricted scope, and every scope beneath it, stays restricted.
//!
//! Views are resolved when a generation is assembled, not per call: a call
//! finds its view by comparing a few path segments, then runs against an
//! ordinary [`Generation`].

use std::collections::BTreeMap;
use std::sync::Arc;

use globset::{Glob, GlobMatcher, GlobSet, GlobSetBuilder};

use toolgate_schema::derive::Schema;

use super::{Generation, PluginStatus, Policies};
use crate::config::path::PluginDir;
use crate::plugin::PluginConfig;
use crate::policy::{Chain, Listener, order};

/// One agent scope's layer (`[scopes."agents/researcher"]`).
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize, serde::Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct ScopeConfig {
    /// Directories of the scope's own plugins (relative paths are relative
    /// to the configuration file's directory). Its own tools are never
    /// restricted by `allow`/`deny`.
    #[serde(default)]
    pub plugin_dirs: Vec<PluginDir>,
    /// Inherited tools (global layer and ancestors) the scope may use, by
    /// name or glob; absent: all of them.
    pub allow: Option<Vec<String>>,
    /// Inherited tools the scope may not use, by name or glob (wins over
    /// `allow`).
    #[serde(default)]
    pub deny: Vec<String>,
    /// Settings of the scope's own plugins, as under `[plugins.NAME]`.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginConfig>,
}

impl ScopeConfig {
    /// The problems of one `[scopes."NAME"]` table.
    pub fn check(&self, scope: &str, problems: &mut Vec<String>) {
        let at = format!("/scopes/{scope}");
        if let Err(why) = check_name(scope) {
            problems.push(format!("{at}: {why}"));
        }
        for (key, globs) in [
            ("allow", self.allow.as_deref().unwrap_or_default()),
            ("deny", &self.deny[..]),
        ] {
            for (i, g) in globs.iter().enumerate() {
                if let Err(e) = glob(g) {
                    problems.push(format!("{at}/{key}/{i}: {e}"));
                }
            }
        }
        for (name, p) in &self.plugins {
            p.check(&format!("{at}/plugins/{name}"), problems);
            if p.source.is_some() {
                problems.push(format!(
                    "{at}/plugins/{name}/source: a scope's plugins are files of its plugin_dirs; an OCI source goes in the global [plugins.{name}]"
                ));
            }
        }
    }
}

// Agent scope names and `allow`/`deny` patterns, checked when the
// configuration is read.

/// The longest scope name accepted, in bytes.
pub const MAX_SCOPE_BYTES: usize = 256;

/// Why `name` is not an acceptable configured scope name, if it is not:
/// 1–[`MAX_SCOPE_BYTES`] bytes of `/`-separated segments of
/// `[A-Za-z0-9_.-]`, no empty segment, no `.` or `..` segment.
///
/// ```
/// use toolgate::registry::scopes::check_name;
/// assert!(check_name("agents/researcher").is_ok());
/// assert!(check_name("agents//researcher").is_err());
/// assert!(check_name("").is_err());
/// ```
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a scope needs a name (the global layer is the top level of the file)".into());
    }
    if name.len() > MAX_SCOPE_BYTES {
        return Err(format!(
            "a scope name has at most {MAX_SCOPE_BYTES} bytes, this one {}",
            name.len()
        ));
    }
    for segment in name.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return Err(format!(
                "`{name}` is not a scope name: segments are separated by single `/` and are neither empty, `.` nor `..`"
            ));
        }
        if !segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            return Err(format!(
                "`{name}` is not a scope name: use letters, digits, `_`, `-` and `.` between the `/`"
            ));
        }
    }
    Ok(())
}

/// Compile one `allow`/`deny` pattern (a tool name or a glob).
pub fn glob(pattern: &str) -> Result<GlobMatcher, String> {
    if pattern.is_empty() {
        return Err("an empty pattern matches no tool; remove it".into());
    }
    Glob::new(pattern)
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("`{pattern}` is not a glob: {e}"))
}

fn set(patterns: &[String]) -> Result<GlobSet, String> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        glob(p)?;
        b.add(Glob::new(p).map_err(|e| e.to_string())?);
    }
    b.build().map_err(|e| e.to_string())
}

/// A scope's restriction of what it inherits.
#[derive(Clone, Debug, Default)]
pub struct ScopeRules {
    allow: Option<GlobSet>,
    deny: Option<GlobSet>,
}

impl ScopeRules {
    /// From the configuration's `allow` (absent: everything) and `deny`.
    ///
    /// ```
    /// use toolgate::registry::ScopeRules;
    /// let r = ScopeRules::new(Some(&["read_*".to_string()]), &["read_secret".to_string()]).unwrap();
    /// assert!(r.permits("read_file"));
    /// assert!(!r.permits("read_secret"));
    /// assert!(!r.permits("bash"));
    /// ```
    pub fn new(allow: Option<&[String]>, deny: &[String]) -> Result<ScopeRules, String> {
        Ok(ScopeRules {
            allow: allow.map(set).transpose()?,
            deny: if deny.is_empty() {
                None
            } else {
                Some(set(deny)?)
            },
        })
    }

    /// May an inherited tool of this name be seen?
    pub fn permits(&self, tool: &str) -> bool {
        self.allow.as_ref().is_none_or(|a| a.is_match(tool))
            && !self.deny.as_ref().is_some_and(|d| d.is_match(tool))
    }
}

/// The non-empty segments of a scope.
fn segments(scope: &str) -> impl Iterator<Item = &str> {
    scope.split('/').filter(|s| !s.is_empty())
}

/// The configured scope a name's view is resolved from (`""`: the global
/// layer), among `configured`.
pub fn resolve<'a>(scope: &str, configured: impl IntoIterator<Item = &'a str>) -> &'a str {
    let mut best: (&str, usize) = ("", 0);
    for c in configured {
        let depth = segments(c).count();
        if depth > best.1 && is_within(scope, c) {
            best = (c, depth);
        }
    }
    best.0
}

/// Is `scope` `ancestor` or beneath it (segment by segment)?
pub fn is_within(scope: &str, ancestor: &str) -> bool {
    let mut s = segments(scope);
    segments(ancestor).all(|a| s.next() == Some(a))
}

/// One configured scope's resolved view.
pub struct ScopeView {
    /// The configured name.
    pub name: String,
    depth: usize,
    /// What a call from this scope (or an unconfigured scope beneath it)
    /// runs against.
    pub view: Arc<Generation>,
}

/// One generation of the whole registry: every layer, resolved.
pub struct Registry {
    pub number: u64,
    /// The global layer's view (calls with no scope, or a scope beneath no
    /// configured one).
    pub global: Arc<Generation>,
    /// Configured scopes, deepest first.
    scopes: Vec<ScopeView>,
    /// Every plugin of every layer: what serves, what was refused.
    pub plugins: Vec<PluginStatus>,
}

impl Registry {
    /// A registry of the global layer only.
    pub fn global_only(global: Generation, plugins: Vec<PluginStatus>) -> Registry {
        Registry {
            number: global.number,
            global: Arc::new(global),
            scopes: Vec::new(),
            plugins,
        }
    }

    /// Add a configured scope's view. Parents must be added before their
    /// children (see [`compose`]).
    pub fn add_scope(&mut self, name: &str, view: Generation) {
        self.scopes.push(ScopeView {
            name: name.to_string(),
            depth: segments(name).count(),
            view: Arc::new(view),
        });
        self.scopes.sort_by_key(|s| std::cmp::Reverse(s.depth));
    }

    /// The same registry with another global layer: the scope views are
    /// kept as they are (a reload recomposes them).
    pub fn with_global(&self, global: Generation) -> Registry {
        Registry {
            number: global.number,
            global: Arc::new(global),
            scopes: self
                .scopes
                .iter()
                .map(|s| ScopeView {
                    name: s.name.clone(),
                    depth: s.depth,
                    view: s.view.clone(),
                })
                .collect(),
            plugins: self.plugins.clone(),
        }
    }

    /// The view a call from `scope` runs against.
    pub fn view(&self, scope: &str) -> &Arc<Generation> {
        if scope.is_empty() || self.scopes.is_empty() {
            return &self.global;
        }
        self.scopes
            .iter()
            .find(|s| is_within(scope, &s.name))
            .map(|s| &s.view)
            .unwrap_or(&self.global)
    }

    /// The configured scope `scope` resolves to (`""`: global).
    pub fn resolved_name(&self, scope: &str) -> &str {
        resolve(scope, self.scopes.iter().map(|s| s.name.as_str()))
    }

    /// Every configured scope's view, deepest first.
    pub fn scopes(&self) -> &[ScopeView] {
        &self.scopes
    }
}

fn relist<P: ?Sized>(chain: &Chain<P>, into: &mut Vec<Listener<P>>) {
    into.extend(chain.iter().map(|l| {
        Listener::new(
            l.name.clone(),
            l.priority,
            l.source.clone(),
            l.policy.clone(),
        )
        .self_bounded(l.self_bounded)
    }));
}

fn merge<P: ?Sized>(parent: &Chain<P>, own: &Chain<P>) -> Chain<P> {
    let mut all = Vec::with_capacity(parent.len() + own.len());
    relist(parent, &mut all);
    relist(own, &mut all);
    order(all)
}

/// A scope's view: its parent's view with the inherited tools filtered by
/// `rules`, plus the scope's own layer (`own`: its plugins' tools and
/// chains, assembled alone), whose tools shadow inherited ones and are
/// never filtered. Policies: the parent's and its own, in one order.
pub fn compose(parent: &Generation, own: Generation, rules: &ScopeRules) -> Generation {
    let mut tools: BTreeMap<_, _> = parent
        .tools
        .iter()
        .filter(|(name, _)| rules.permits(name))
        .map(|(n, t)| (n.clone(), t.clone()))
        .collect();
    for (name, t) in own.tools {
        tools.insert(name, t);
    }
    let p = &parent.policies;
    let o = &own.policies;
    let policies = Policies {
        pre_execute: merge(&p.pre_execute, &o.pre_execute),
        execute_around: merge(&p.execute_around, &o.execute_around),
        post_execute: merge(&p.post_execute, &o.post_execute),
        guards: merge(&p.guards, &o.guards),
        finalizers: merge(&p.finalizers, &o.finalizers),
        observers: merge(&p.observers, &o.observers),
    };
    let mut plugins = parent.plugins.clone();
    plugins.extend(own.plugins);
    let mut problems = parent.problems.clone();
    problems.extend(own.problems);
    let mut blocked = parent.blocked.clone();
    blocked.extend(own.blocked);
    Generation {
        number: parent.number,
        tools_digest: Generation::digest_tools(&tools),
        tools,
        policies,
        plugins,
        problems,
        blocked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "agents/researcher", "a.b/c-d/e_f"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "/a", "a/", "a//b", "a/../b", "a/./b", "a b", "a/ü"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert!(check_name(&"a".repeat(MAX_SCOPE_BYTES + 1)).is_err());
    }

    #[test]
    fn resolution_is_by_segments() {
        let configured = ["agents", "agents/researcher"];
        let r = |s| resolve(s, configured.iter().copied());
        assert_eq!(r(""), "");
        assert_eq!(r("other"), "");
        assert_eq!(r("agents"), "agents");
        assert_eq!(r("agents/writer"), "agents");
        assert_eq!(r("agents/researcher"), "agents/researcher");
        assert_eq!(r("agents//researcher/"), "agents/researcher");
        assert_eq!(r("agents/researcher/fetcher/x"), "agents/researcher");
        // A prefix of a segment is not a prefix of the scope.
        assert_eq!(r("agents/researcher2"), "agents");
        assert_eq!(r("agentsx"), "");
    }

    #[test]
    fn rules() {
        let all = ScopeRules::new(None, &[]).unwrap();
        assert!(all.permits("anything"));
        let none = ScopeRules::new(None, &["*".into()]).unwrap();
        assert!(!none.permits("bash"));
        let some = ScopeRules::new(Some(&["read_*".into(), "{grep,glob}".into()]), &[]).unwrap();
        assert!(some.permits("read_file") && some.permits("grep") && !some.permits("bash"));
        assert!(ScopeRules::new(Some(&["[".into()]), &[]).is_err());
    }
}
