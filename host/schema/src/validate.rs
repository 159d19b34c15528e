//! Validating a call's arguments against a compiled schema.
//!
//! The validator reports *every* violation (up to [`MAX_VIOLATIONS`]) as
//! `{path, expected, got}`, worded for a language model that has to fix its
//! call in one try. It keeps an explicit work list, so an instance of any
//! depth is safe; for `oneOf` each alternative is checked against its own
//! tally, and when none matches, the violations of the *closest* alternative
//! are reported (the one with most matching constant tags, else the one that fails
//! least near the surface), because "matches none of 4 alternatives" tells a
//! model nothing.
//!
//! Validation does not apply [`Limits`](crate::Limits): run the snapshot
//! ([`parse`](crate::parse) or [`check_value`](crate::check_value)) first,
//! as the host does for every call.

use serde_json::Value;

use crate::compile::{Additional, Node, NodeId, ROOT_NODE, Schema};
use crate::describe;
use crate::eq::json_eq;
use crate::pointer::{PathArena, ROOT, Segment};
use crate::violation::Violation;

/// Most violations reported for one call; the rest are counted, not listed.
pub const MAX_VIOLATIONS: usize = 32;

/// Longest list of values or names quoted in `expected`, in characters.
const MAX_LIST_CHARS: usize = 600;

impl Schema {
    /// Validates an instance, returning every violation (at most
    /// [`MAX_VIOLATIONS`], in document order).
    ///
    /// ```
    /// use serde_json::json;
    /// use toolgate_schema::Schema;
    ///
    /// let schema = Schema::compile_parameters(&json!({
    ///     "type": "object",
    ///     "properties": {
    ///         "mode": { "enum": ["fast", "slow"] },
    ///         "color": { "type": "string" },
    ///         "size": { "type": "integer" },
    ///     },
    ///     "required": ["mode"],
    ///     "additionalProperties": false,
    /// }))
    /// .unwrap();
    /// let errors = schema.validate(&json!({"mode": "medium", "colour": "red"})).unwrap_err();
    /// assert_eq!(errors[0].to_string(), r#"/mode: expected one of "fast", "slow", got "medium""#);
    /// assert_eq!(errors[1].to_string(), "/colour: expected no such property (allowed: mode, color, size), got string");
    /// ```
    pub fn validate(&self, instance: &Value) -> Result<(), Vec<Violation>> {
        self.validate_at(ROOT_NODE, instance)
    }

    /// [`validate`](Self::validate) against node `node` of this schema.
    fn validate_at(&self, node: NodeId, instance: &Value) -> Result<(), Vec<Violation>> {
        // Sized for a typical call, so that one allocation each suffices.
        let mut work = Vec::with_capacity(16);
        work.push(Work::Check {
            node,
            value: instance,
            path: ROOT,
            sink: 0,
        });
        let mut run = Run {
            schema: self,
            paths: PathArena::with_capacity(32),
            sinks: vec![Sink::new(0)],
            work,
        };
        run.run();
        let root = run.sinks.swap_remove(0);
        if root.total == 0 {
            Ok(())
        } else {
            Err(root.violations.into_iter().map(|(v, _)| v).collect())
        }
    }

    /// [`check_value`](crate::check_value), then [`validate`](Self::validate):
    /// for a value that did not come through [`parse`](crate::parse) (an
    /// embedder's). A value beyond the limits or the number contract is
    /// reported as a single violation and not validated further.
    ///
    /// ```
    /// use serde_json::json;
    /// use toolgate_schema::{Limits, Schema};
    ///
    /// let schema = Schema::compile(&json!({"type": "array"})).unwrap();
    /// let limits = Limits { max_depth: 2, ..Limits::default() };
    /// let errors = schema.validate_with_limits(&json!([[[1]]]), &limits).unwrap_err();
    /// assert_eq!(errors[0].to_string(), "/0/0: expected arrays and objects nested at most 2 levels deep, got nesting deeper than 2 levels");
    /// ```
    pub fn validate_with_limits(
        &self,
        instance: &Value,
        limits: &crate::Limits,
    ) -> Result<(), Vec<Violation>> {
        crate::check_value(instance, limits).map_err(|e| vec![e.to_violation()])?;
        self.validate(instance)
    }

    /// Whether an instance is valid (same as `validate(..).is_ok()`).
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.validate(instance).is_ok()
    }
}

/// Where violations are tallied: the call itself, or one `oneOf` branch.
struct Sink {
    /// Stored violations with their path depth.
    violations: Vec<(Violation, u32)>,
    total: usize,
    /// Violations at most one level below `base_depth`: a missing or extra
    /// property, a wrong type right there. Few of those means "close".
    shallow: usize,
    base_depth: u32,
}

impl Sink {
    fn new(base_depth: u32) -> Self {
        Sink {
            violations: Vec::new(),
            total: 0,
            shallow: 0,
            base_depth,
        }
    }
}

enum Work<'v> {
    Check {
        node: NodeId,
        value: &'v Value,
        path: u32,
        sink: u32,
    },
    /// A member that `additionalProperties: false` forbids.
    Unknown {
        node: NodeId,
        key: &'v str,
        value: &'v Value,
        path: u32,
        sink: u32,
    },
    /// Decide an applicator once its subschemas (sinks `first..`) are
    /// checked.
    Decide {
        applied: Applied,
        node: NodeId,
        value: &'v Value,
        path: u32,
        sink: u32,
        first: u32,
    },
}

/// The applicators whose subschemas are checked on their own tally, and
/// decided together after.
#[derive(Clone, Copy)]
enum Applied {
    /// Exactly one branch holds.
    OneOf,
    /// At least one holds.
    AnyOf,
    /// The `not` schema must fail.
    Not,
    /// `if` decides which of `then` and `else` is checked.
    If,
    /// Each item was checked against `contains` (a sink each).
    Contains,
}

struct Run<'s, 'v> {
    schema: &'s Schema,
    paths: PathArena<'v>,
    sinks: Vec<Sink>,
    work: Vec<Work<'v>>,
}

impl<'v> Run<'_, 'v> {
    fn run(&mut self) {
        while let Some(item) = self.work.pop() {
            if self.sinks[0].violations.len() >= MAX_VIOLATIONS {
                return;
            }
            match item {
                Work::Check {
                    node,
                    value,
                    path,
                    sink,
                } => self.check(node, value, path, sink),
                Work::Decide {
                    applied,
                    node,
                    value,
                    path,
                    sink,
                    first,
                } => {
                    self.decide(applied, node, value, path, sink, first);
                    // Nested decisions in these subschemas came before this
                    // one (the work list is a stack): its sinks are the last.
                    self.sinks.truncate(first as usize);
                }
                Work::Unknown {
                    node,
                    key,
                    value,
                    path,
                    sink,
                } => {
                    let node = self.schema.node(node);
                    self.emit(
                        sink,
                        path,
                        Some(Segment::Key(key)),
                        || allowed_list(node),
                        || describe::type_name(value).to_owned(),
                    );
                }
            }
        }
    }

    /// Records a violation at `path` (plus `extra`, if given).
    fn emit(
        &mut self,
        sink: u32,
        path: u32,
        extra: Option<Segment<'_>>,
        expected: impl FnOnce() -> String,
        got: impl FnOnce() -> String,
    ) {
        let depth = self.paths.depth(path) + u32::from(extra.is_some());
        let sink = &mut self.sinks[sink as usize];
        sink.total += 1;
        if depth <= sink.base_depth + 1 {
            sink.shallow += 1;
        }
        if sink.violations.len() < MAX_VIOLATIONS {
            let path = match extra {
                Some(segment) => self.paths.pointer_with(path, segment),
                None => self.paths.pointer(path),
            };
            sink.violations.push((
                Violation {
                    path,
                    expected: expected(),
                    got: got(),
                },
                depth,
            ));
        }
    }

    fn check(&mut self, id: NodeId, value: &'v Value, path: u32, sink: u32) {
        let schema = self.schema;
        let node = schema.node(id);
        if let Some(failure) = root_failure(node, value) {
            let (expected, got) = match failure {
                RootFailure::RejectsAll => (
                    "no value (the schema is `false`)".to_owned(),
                    describe::typed(value),
                ),
                RootFailure::Type => (
                    node.types.map_or_else(String::new, |t| t.describe()),
                    describe::typed(value),
                ),
                RootFailure::Const => (
                    format!(
                        "exactly {}",
                        node.constant
                            .as_ref()
                            .map_or_else(String::new, describe::constant)
                    ),
                    describe::short(value),
                ),
                RootFailure::Enum => (
                    format!(
                        "one of {}",
                        value_list(node.enumeration.as_deref().unwrap_or_default())
                    ),
                    describe::short(value),
                ),
            };
            self.emit(sink, path, None, || expected, || got);
            return;
        }
        if let Some(expected) = node.bounds.as_ref().and_then(|b| b.failure(value)) {
            // Reported, and what the value holds is still checked.
            self.emit(sink, path, None, || expected, || describe::short(value));
        }
        match value {
            Value::Object(members) => {
                for name in &node.required {
                    if !members.contains_key(&**name) {
                        self.emit(
                            sink,
                            path,
                            Some(Segment::Key(name)),
                            || "required property".to_owned(),
                            || "missing".to_owned(),
                        );
                    }
                }
                let more = node.more.as_deref();
                if let Some(more) = more {
                    for (name, others) in &more.dependent_required {
                        if !members.contains_key(&**name) {
                            continue;
                        }
                        for other in others {
                            if !members.contains_key(&**other) {
                                self.emit(
                                    sink,
                                    path,
                                    Some(Segment::Key(other)),
                                    || {
                                        format!(
                                            "required property (as {} is present)",
                                            describe::quote(name)
                                        )
                                    },
                                    || "missing".to_owned(),
                                );
                            }
                        }
                    }
                }
                if let Some(names) = more.and_then(|m| m.property_names) {
                    for key in members.keys() {
                        // A name is a string: it reaches no object, so this
                        // nested run starts no other.
                        let name = Value::String(key.clone());
                        if let Err(why) = self.schema.validate_at(names, &name) {
                            let expected = why.first().map_or("", |v| v.expected.as_str());
                            self.emit(
                                sink,
                                path,
                                Some(Segment::Key(key)),
                                || format!("a property name that is {expected}"),
                                || describe::quote(key),
                            );
                        }
                    }
                }
                let start = self.work.len();
                for (key, member) in members {
                    let child_path = self.paths.child(path, Segment::Key(key));
                    let mut named = false;
                    if let Some(child) = node.property(key) {
                        named = true;
                        self.work.push(Work::Check {
                            node: child,
                            value: member,
                            path: child_path,
                            sink,
                        });
                    }
                    for (_, regex, child) in more.map_or(&[][..], |m| &m.pattern_properties) {
                        if regex.is_match(key) {
                            named = true;
                            self.work.push(Work::Check {
                                node: *child,
                                value: member,
                                path: child_path,
                                sink,
                            });
                        }
                    }
                    if named {
                        continue;
                    }
                    let child = match node.additional {
                        Additional::Allowed => continue,
                        Additional::Schema(child) => child,
                        Additional::Forbidden => {
                            // Reported in turn with the members' own
                            // violations, to keep document order.
                            self.work.push(Work::Unknown {
                                node: id,
                                key,
                                value: member,
                                path,
                                sink,
                            });
                            continue;
                        }
                    };
                    self.work.push(Work::Check {
                        node: child,
                        value: member,
                        path: child_path,
                        sink,
                    });
                }
                self.work[start..].reverse();
                for (name, child) in more.map_or(&[][..], |m| &m.dependent_schemas) {
                    if members.contains_key(&**name) {
                        self.work.push(Work::Check {
                            node: *child,
                            value,
                            path,
                            sink,
                        });
                    }
                }
            }
            Value::Array(items) => self.items(node, id, items, value, path, sink),
            _ => {}
        }
        self.in_place(node, id, value, path, sink);
    }

    /// An array's items: `prefixItems`, then `items`; `uniqueItems`;
    /// `contains` (each item on its own tally, decided after).
    fn items(
        &mut self,
        node: &Node,
        id: NodeId,
        items: &'v [Value],
        value: &'v Value,
        path: u32,
        sink: u32,
    ) {
        let more = node.more.as_deref();
        let prefix = more.map_or(&[][..], |m| &m.prefix_items);
        let start = self.work.len();
        for (i, item) in items.iter().enumerate() {
            let Some(child) = prefix.get(i).copied().or(node.items) else {
                break;
            };
            let child_path = self.paths.child(path, Segment::Index(i));
            self.work.push(Work::Check {
                node: child,
                value: item,
                path: child_path,
                sink,
            });
        }
        self.work[start..].reverse();
        let Some(more) = more else { return };
        if more.unique_items
            && let Some((i, j)) = crate::eq::first_duplicate(items)
        {
            self.emit(
                sink,
                path,
                None,
                || "items that are all different".to_owned(),
                || format!("items {i} and {j} equal"),
            );
        }
        if let Some(contains) = &more.contains {
            let first = u32::try_from(self.sinks.len()).unwrap_or(u32::MAX);
            let depth = self.paths.depth(path) + 1;
            self.work.push(Work::Decide {
                applied: Applied::Contains,
                node: id,
                value,
                path,
                sink,
                first,
            });
            for (i, item) in items.iter().enumerate().rev() {
                self.sinks.push(Sink::new(depth));
                let child_path = self.paths.child(path, Segment::Index(i));
                self.work.push(Work::Check {
                    node: contains.node,
                    value: item,
                    path: child_path,
                    sink: first + (items.len() - 1 - i) as u32,
                });
            }
        }
    }

    /// The subschemas applied to the value itself: `allOf` into this tally,
    /// the others each on their own tally, decided after.
    fn in_place(&mut self, node: &Node, id: NodeId, value: &'v Value, path: u32, sink: u32) {
        let more = node.more.as_deref();
        let decided: [(Applied, &[NodeId]); 4] = [
            (Applied::OneOf, &node.one_of),
            (Applied::AnyOf, more.map_or(&[][..], |m| &m.any_of)),
            (
                Applied::Not,
                more.and_then(|m| m.not.as_ref())
                    .map_or(&[][..], std::slice::from_ref),
            ),
            (
                Applied::If,
                more.and_then(|m| m.condition.as_ref())
                    .map_or(&[][..], |c| std::slice::from_ref(&c.test)),
            ),
        ];
        for (applied, branches) in decided {
            if branches.is_empty() {
                continue;
            }
            let first = u32::try_from(self.sinks.len()).unwrap_or(u32::MAX);
            let depth = self.paths.depth(path);
            self.work.push(Work::Decide {
                applied,
                node: id,
                value,
                path,
                sink,
                first,
            });
            for _ in branches {
                self.sinks.push(Sink::new(depth));
            }
            for (i, &branch) in branches.iter().enumerate().rev() {
                self.work.push(Work::Check {
                    node: branch,
                    value,
                    path,
                    sink: first + i as u32,
                });
            }
        }
        for &branch in more.map_or(&[][..], |m| &m.all_of).iter().rev() {
            self.work.push(Work::Check {
                node: branch,
                value,
                path,
                sink,
            });
        }
    }

    /// Decides `applied` of node `id` from its subschemas' tallies (sinks
    /// `first..`).
    fn decide(
        &mut self,
        applied: Applied,
        id: NodeId,
        value: &'v Value,
        path: u32,
        sink: u32,
        first: u32,
    ) {
        let schema = self.schema;
        let node = schema.node(id);
        let first = first as usize;
        let holds = |run: &Self, i: usize| run.sinks[first + i].total == 0;
        match applied {
            Applied::OneOf => self.one_of(node, value, path, sink, first),
            Applied::AnyOf => {
                let branches = node.more.as_deref().map_or(&[][..], |m| &m.any_of);
                if !(0..branches.len()).any(|i| holds(self, i))
                    && !self.wrong_tag(branches, value, path, sink)
                {
                    self.closest(branches, value, path, sink, first);
                }
            }
            Applied::Not => {
                if holds(self, 0) {
                    let not = node.more.as_deref().and_then(|m| m.not);
                    let what = not.map_or_else(String::new, |n| describe_node(schema.node(n)));
                    self.emit(
                        sink,
                        path,
                        None,
                        || format!("a value that is not {what}"),
                        || describe::short(value),
                    );
                }
            }
            Applied::If => {
                let Some(condition) = node.more.as_deref().and_then(|m| m.condition) else {
                    return;
                };
                let next = if holds(self, 0) {
                    condition.then
                } else {
                    condition.otherwise
                };
                if let Some(next) = next {
                    self.work.push(Work::Check {
                        node: next,
                        value,
                        path,
                        sink,
                    });
                }
            }
            Applied::Contains => {
                let Some(contains) = node.more.as_deref().and_then(|m| m.contains) else {
                    return;
                };
                let Value::Array(items) = value else { return };
                let matched = (0..items.len()).filter(|&i| holds(self, i)).count() as u64;
                let what = describe_node(schema.node(contains.node));
                if matched < contains.min {
                    self.emit(
                        sink,
                        path,
                        None,
                        || format!("at least {} item(s) that are {what}", contains.min),
                        || format!("{matched}"),
                    );
                }
                if let Some(max) = contains.max.filter(|max| matched > *max) {
                    self.emit(
                        sink,
                        path,
                        None,
                        || format!("at most {max} item(s) that are {what}"),
                        || format!("{matched}"),
                    );
                }
            }
        }
    }

    fn one_of(&mut self, node: &Node, value: &'v Value, path: u32, sink: u32, first: usize) {
        let schema = self.schema;
        let branches = &node.one_of;
        let matched: Vec<usize> = (0..branches.len())
            .filter(|&i| self.sinks[first + i].total == 0)
            .collect();
        match matched.len() {
            1 => {}
            0 => {
                if !self.wrong_tag(branches, value, path, sink) {
                    self.closest(branches, value, path, sink, first);
                }
            }
            n => {
                let names: Vec<String> = matched
                    .iter()
                    .map(|&i| match &schema.node(branches[i]).title {
                        Some(title) => describe::quote(title),
                        None => format!("#{i}"),
                    })
                    .collect();
                self.emit(
                    sink,
                    path,
                    None,
                    || {
                        format!(
                            "a value matching exactly one of the {} alternatives",
                            branches.len()
                        )
                    },
                    || {
                        format!(
                            "{} matching {n} alternatives: {}",
                            describe::type_name(value),
                            names.join(", ")
                        )
                    },
                );
            }
        }
    }
}

impl Run<'_, '_> {
    /// No alternative matched: report the violations of the closest one, or
    /// if every one fails at its root, list what each accepts.
    fn closest(&mut self, branches: &[NodeId], value: &Value, path: u32, sink: u32, first: usize) {
        let schema = self.schema;
        let best = (0..branches.len())
            .filter(|&i| root_failure(schema.node(branches[i]), value).is_none())
            .min_by_key(|&i| {
                let s = &self.sinks[first + i];
                let tags = matching_tags(schema.node(branches[i]), value);
                (std::cmp::Reverse(tags), s.shallow, s.total)
            });
        match best {
            None => {
                let alternatives: Vec<String> = branches
                    .iter()
                    .map(|&b| describe_node(schema.node(b)))
                    .collect();
                self.emit(
                    sink,
                    path,
                    None,
                    || format!("one of: {}", alternatives.join(" | ")),
                    || describe::typed(value),
                );
            }
            Some(best) => {
                let chosen = std::mem::replace(&mut self.sinks[first + best], Sink::new(0));
                let stored = chosen.violations.len();
                let parent = &mut self.sinks[sink as usize];
                for (violation, depth) in chosen.violations {
                    parent.total += 1;
                    if depth <= parent.base_depth + 1 {
                        parent.shallow += 1;
                    }
                    if parent.violations.len() < MAX_VIOLATIONS {
                        parent.violations.push((violation, depth));
                    }
                }
                parent.total += chosen.total - stored;
            }
        }
    }

    /// When every alternative is tagged by the same property and the value's
    /// tag names none of them, that is the one thing to say:
    /// `/kind: expected one of "circle", "rect", got "square"`.
    fn wrong_tag(&mut self, branches: &[NodeId], value: &Value, path: u32, sink: u32) -> bool {
        let schema = self.schema;
        let Value::Object(members) = value else {
            return false;
        };
        let Some(&first) = branches.first() else {
            return false;
        };
        for (name, _) in &schema.node(first).tags {
            let mut tags = Vec::with_capacity(branches.len());
            for &branch in branches {
                match schema.node(branch).tags.iter().find(|(n, _)| n == name) {
                    Some((_, tag)) => tags.push(tag.clone()),
                    None => break,
                }
            }
            if tags.len() < branches.len() {
                continue;
            }
            let got = members.get(&**name);
            if got.is_some_and(|g| tags.iter().any(|t| json_eq(t, g))) {
                continue;
            }
            self.emit(
                sink,
                path,
                Some(Segment::Key(name)),
                || format!("one of {}", value_list(&tags)),
                || got.map_or_else(|| "missing".to_owned(), describe::short),
            );
            return true;
        }
        false
    }
}

#[derive(Clone, Copy)]
enum RootFailure {
    RejectsAll,
    Type,
    Const,
    Enum,
}

/// Why `value` fails `node` right at the node, before looking inside.
fn root_failure(node: &Node, value: &Value) -> Option<RootFailure> {
    if node.rejects_all {
        return Some(RootFailure::RejectsAll);
    }
    if node.types.is_some_and(|t| !t.admits(value)) {
        return Some(RootFailure::Type);
    }
    if node.constant.as_ref().is_some_and(|c| !json_eq(c, value)) {
        return Some(RootFailure::Const);
    }
    if node
        .enumeration
        .as_ref()
        .is_some_and(|values| !values.iter().any(|c| json_eq(c, value)))
    {
        return Some(RootFailure::Enum);
    }
    None
}

/// How many of a branch's constant tags `value` carries.
fn matching_tags(node: &Node, value: &Value) -> usize {
    let Value::Object(members) = value else {
        return 0;
    };
    node.tags
        .iter()
        .filter(|(name, tag)| members.get(&**name).is_some_and(|v| json_eq(v, tag)))
        .count()
}

/// A short description of what a `oneOf` alternative accepts.
fn describe_node(node: &Node) -> String {
    if node.rejects_all {
        return "nothing".to_owned();
    }
    if let Some(c) = &node.constant {
        return describe::constant(c);
    }
    if let Some(values) = &node.enumeration {
        return value_list(values);
    }
    if !node.tags.is_empty() {
        let tags: Vec<String> = node
            .tags
            .iter()
            .map(|(name, v)| format!("{}: {}", describe::quote(name), describe::constant(v)))
            .collect();
        return format!("object with {}", tags.join(", "));
    }
    if node.required.len() == 1
        && node.additional == Additional::Forbidden
        && node.properties.len() == 1
    {
        return format!(
            "object with property {}",
            describe::quote(&node.required[0])
        );
    }
    let base = node
        .types
        .map_or_else(|| "value".to_owned(), |t| t.describe());
    match &node.title {
        Some(title) => format!("{base} ({title})"),
        None => base,
    }
}

/// `"a", "b", 3` — cut with a count when very long.
fn value_list(values: &[Value]) -> String {
    let mut out = String::new();
    for (i, v) in values.iter().enumerate() {
        let item = describe::constant(v);
        if i > 0 && out.len() + item.len() > MAX_LIST_CHARS {
            out.push_str(&format!(", … ({} more)", values.len() - i));
            break;
        }
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&item);
    }
    out
}

/// `no such property (allowed: color, size)`, and the `patternProperties`
/// (`; names matching ^x-`).
fn allowed_list(node: &Node) -> String {
    let patterns: Vec<&str> = node
        .more
        .iter()
        .flat_map(|m| m.pattern_properties.iter().map(|(source, _, _)| &**source))
        .collect();
    if node.properties.is_empty() && patterns.is_empty() {
        return "no such property (no properties are allowed)".to_owned();
    }
    let mut out = String::from("no such property (allowed: ");
    let start = out.len();
    for (i, (name, _)) in node.properties.iter().enumerate() {
        if i > 0 && out.len() - start + name.len() > MAX_LIST_CHARS {
            out.push_str(&format!(", … ({} more)", node.properties.len() - i));
            break;
        }
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(name);
    }
    if !patterns.is_empty() {
        if !node.properties.is_empty() {
            out.push_str("; ");
        }
        out.push_str("names matching ");
        let start = out.len();
        for (i, source) in patterns.iter().enumerate() {
            if i > 0 && out.len() - start + source.len() > MAX_LIST_CHARS {
                out.push_str(&format!(", … ({} more)", patterns.len() - i));
                break;
            }
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(source);
        }
    }
    out.push(')');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::violation::summarize;
    use serde_json::json;

    fn schema(s: Value) -> Schema {
        Schema::compile(&s).unwrap()
    }

    fn violations(s: &Schema, v: Value) -> Vec<Violation> {
        s.validate(&v).unwrap_err()
    }

    fn one(path: &str, expected: &str, got: &str) -> Violation {
        Violation {
            path: path.into(),
            expected: expected.into(),
            got: got.into(),
        }
    }

    #[test]
    fn type_keyword() {
        let s = schema(json!({"type": "integer"}));
        assert!(s.is_valid(&json!(3)));
        assert!(s.is_valid(&json!(3.0)));
        assert!(s.is_valid(&json!(-0.0)));
        assert_eq!(
            violations(&s, json!(3.5)),
            vec![one("", "integer", "number 3.5")]
        );
        assert_eq!(
            violations(&s, json!("ten")),
            vec![one("", "integer", "string \"ten\"")]
        );

        let s = schema(json!({"type": "number"}));
        assert!(s.is_valid(&json!(3)) && s.is_valid(&json!(3.5)));
        assert_eq!(
            violations(&s, json!(true)),
            vec![one("", "number", "boolean true")]
        );

        let s = schema(json!({"type": ["string", "null"]}));
        assert!(s.is_valid(&json!(null)) && s.is_valid(&json!("x")));
        assert_eq!(
            violations(&s, json!([1])),
            vec![one("", "string or null", "array of 1 item")]
        );

        let s = schema(json!({"type": ["integer", "string", "null"]}));
        assert_eq!(
            violations(&s, json!({})),
            vec![one("", "integer, string or null", "empty object")]
        );
        for (t, ok, bad) in [
            ("null", json!(null), json!(0)),
            ("boolean", json!(false), json!("false")),
            ("string", json!(""), json!(1)),
            ("array", json!([]), json!({})),
            ("object", json!({}), json!([])),
        ] {
            let s = schema(json!({ "type": t }));
            assert!(s.is_valid(&ok), "{t}");
            assert_eq!(violations(&s, bad)[0].expected, t);
        }
    }

    #[test]
    fn properties_and_required() {
        let s = schema(json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["path", "limit"],
        }));
        assert!(s.is_valid(&json!({"path": "/a", "limit": 1, "other": true})));
        assert_eq!(
            violations(&s, json!({"limit": "ten"})),
            vec![
                one("/path", "required property", "missing"),
                one("/limit", "integer", "string \"ten\""),
            ]
        );
        // `properties` and `required` apply to objects only.
        assert!(schema(json!({"required": ["a"]})).is_valid(&json!("not an object")));
    }

    #[test]
    fn additional_properties() {
        let closed = schema(json!({
            "properties": {"color": {}, "size": {}},
            "additionalProperties": false,
        }));
        assert!(closed.is_valid(&json!({"color": 1})));
        assert_eq!(
            violations(&closed, json!({"colour": "red", "size": 1})),
            vec![one(
                "/colour",
                "no such property (allowed: color, size)",
                "string"
            )]
        );
        let empty = schema(json!({"additionalProperties": false}));
        assert_eq!(
            violations(&empty, json!({"a/b": 1}))[0],
            one(
                "/a~1b",
                "no such property (no properties are allowed)",
                "integer"
            )
        );
        let typed =
            schema(json!({"properties": {"n": {}}, "additionalProperties": {"type": "integer"}}));
        assert!(typed.is_valid(&json!({"n": "x", "a": 1, "b": 2})));
        assert_eq!(
            violations(&typed, json!({"a": 1, "b": "2"})),
            vec![one("/b", "integer", "string \"2\"")]
        );
        assert!(schema(json!({"additionalProperties": true})).is_valid(&json!({"x": 1})));
    }

    #[test]
    fn items() {
        let s = schema(json!({"type": "array", "items": {"type": "string"}}));
        assert!(s.is_valid(&json!(["a", "b"])));
        assert!(s.is_valid(&json!([])));
        assert_eq!(
            violations(&s, json!(["a", 1, "c", null])),
            vec![one("/1", "string", "number 1"), one("/3", "string", "null")]
        );
        let none = schema(json!({"items": false}));
        assert!(none.is_valid(&json!([])));
        assert_eq!(violations(&none, json!([1]))[0].path, "/0");
    }

    #[test]
    fn enum_and_const() {
        let s =
            schema(json!({"properties": {"mode": {"type": "string", "enum": ["fast", "slow"]}}}));
        assert_eq!(
            violations(&s, json!({"mode": "medium"})),
            vec![one("/mode", "one of \"fast\", \"slow\"", "\"medium\"")]
        );
        let s = schema(json!({"enum": [1, "one", null, [1]]}));
        assert!(s.is_valid(&json!(1.0)));
        assert!(s.is_valid(&json!([1.0])));
        assert_eq!(
            violations(&s, json!({"a": 1}))[0],
            one("", "one of 1, \"one\", null, [1]", "object with 1 property")
        );
        let s = schema(json!({"const": "x"}));
        assert!(s.is_valid(&json!("x")));
        assert_eq!(
            violations(&s, json!("y")),
            vec![one("", "exactly \"x\"", "\"y\"")]
        );
        let s = schema(json!({"const": {"a": [1, 2]}}));
        assert!(s.is_valid(&json!({"a": [1.0, 2]})));
        assert_eq!(
            violations(&s, json!({"a": [2, 1]}))[0].expected,
            "exactly {\"a\":[1,2]}"
        );
    }

    #[test]
    fn long_enums_are_cut() {
        let values: Vec<String> = (0..500).map(|i| format!("value-{i:04}")).collect();
        let s = schema(json!({"enum": values}));
        let v = &violations(&s, json!("nope"))[0];
        assert!(v.expected.len() < 700, "{}", v.expected);
        assert!(v.expected.ends_with("more)"), "{}", v.expected);
    }

    #[test]
    fn false_schema() {
        let s = schema(json!({"properties": {"x": false}}));
        assert!(s.is_valid(&json!({})));
        assert_eq!(
            violations(&s, json!({"x": 1})),
            vec![one("/x", "no value (the schema is `false`)", "number 1")]
        );
    }

    #[test]
    fn long_strings_are_shortened_in_got() {
        let s = schema(json!({"type": "integer"}));
        let got = &violations(&s, json!("x".repeat(1000)))[0].got;
        assert!(got.len() < 80, "{got}");
        assert!(got.ends_with("(1000 characters)"));
    }

    #[test]
    fn one_of_exactly_one() {
        let s = schema(json!({"oneOf": [{"type": "string"}, {"type": "integer"}]}));
        assert!(s.is_valid(&json!("a")));
        assert!(s.is_valid(&json!(1)));
        assert_eq!(
            violations(&s, json!(1.5)),
            vec![one("", "one of: string | integer", "number 1.5")]
        );
        let overlap = schema(json!({"oneOf": [
            {"type": "number", "title": "Float"},
            {"type": "integer"},
            {"type": "string"},
        ]}));
        assert_eq!(
            violations(&overlap, json!(1)),
            vec![one(
                "",
                "a value matching exactly one of the 3 alternatives",
                "integer matching 2 alternatives: \"Float\", #1"
            )]
        );
    }

    #[test]
    fn one_of_reports_the_branch_whose_tag_matches() {
        let s = schema(json!({"oneOf": [
            {
                "type": "object",
                "properties": {"kind": {"const": "circle"}, "radius": {"type": "number"}},
                "required": ["kind", "radius"],
                "additionalProperties": false,
            },
            {
                "type": "object",
                "properties": {"kind": {"const": "rect"}, "w": {"type": "number"}, "h": {"type": "number"}},
                "required": ["kind", "w", "h"],
                "additionalProperties": false,
            },
        ]}));
        assert!(s.is_valid(&json!({"kind": "rect", "w": 1, "h": 2})));
        // Fewer violations against "circle", but the tag says "rect".
        assert_eq!(
            violations(&s, json!({"kind": "rect", "w": "1", "h": "2", "x": 0})),
            vec![
                one("/w", "number", "string \"1\""),
                one("/h", "number", "string \"2\""),
                one("/x", "no such property (allowed: kind, w, h)", "integer"),
            ]
        );
        assert_eq!(
            violations(&s, json!({"kind": "square"})),
            vec![one("/kind", "one of \"circle\", \"rect\"", "\"square\"")]
        );
        assert_eq!(
            violations(&s, json!({"radius": 1})),
            vec![one("/kind", "one of \"circle\", \"rect\"", "missing")]
        );
        assert_eq!(
            violations(&s, json!("circle")),
            vec![one(
                "",
                "one of: object with \"kind\": \"circle\" | object with \"kind\": \"rect\"",
                "string \"circle\""
            )]
        );
    }

    #[test]
    fn one_of_prefers_fewer_surface_violations() {
        // Externally tagged enum, as serde writes it.
        let s = schema(json!({"oneOf": [
            {"type": "string", "enum": ["Stop"]},
            {
                "type": "object",
                "properties": {"Move": {
                    "type": "object",
                    "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}, "z": {"type": "integer"}},
                    "required": ["x", "y", "z"],
                    "additionalProperties": false,
                }},
                "required": ["Move"],
                "additionalProperties": false,
            },
            {
                "type": "object",
                "properties": {"Say": {"type": "string"}},
                "required": ["Say"],
                "additionalProperties": false,
            },
        ]}));
        assert_eq!(
            violations(&s, json!({"Move": {"x": "1", "y": "2", "z": "3"}})),
            vec![
                one("/Move/x", "integer", "string \"1\""),
                one("/Move/y", "integer", "string \"2\""),
                one("/Move/z", "integer", "string \"3\""),
            ]
        );
        assert_eq!(
            violations(&s, json!({"Say": 5})),
            vec![one("/Say", "string", "number 5")]
        );
        assert_eq!(
            violations(&s, json!("Go")),
            vec![one(
                "",
                "one of: \"Stop\" | object with property \"Move\" | object with property \"Say\"",
                "string \"Go\""
            )]
        );
    }

    #[test]
    fn nested_one_of_in_items() {
        let s = schema(json!({"type": "array", "items": {"oneOf": [
            {"type": "integer"},
            {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "boolean"}]}},
        ]}}));
        assert!(s.is_valid(&json!([1, ["a", true], 2, []])));
        assert_eq!(
            violations(&s, json!([1, ["a", 3], "x"])),
            vec![
                one("/1/1", "one of: string | boolean", "number 3"),
                one("/2", "one of: integer | array", "string \"x\""),
            ]
        );
    }

    #[test]
    fn violations_are_capped() {
        let s = schema(json!({"type": "array", "items": {"type": "string"}}));
        let v = violations(&s, json!(vec![0; 1000]));
        assert_eq!(v.len(), MAX_VIOLATIONS);
        assert_eq!(v[31].path, "/31");
    }

    #[test]
    fn all_of_any_of_not_report_what_failed() {
        let s = schema(json!({
            "type": "object",
            "allOf": [
                {"properties": {"n": {"type": "integer"}}},
                {"properties": {"n": {"minimum": 3}}},
            ],
            "properties": {
                "id": {"anyOf": [{"type": "string", "minLength": 2}, {"type": "integer"}]},
                "mode": {"not": {"const": "unsafe"}},
            },
        }));
        assert!(s.is_valid(&json!({"n": 4, "id": "ab", "mode": "safe"})));
        assert!(s.is_valid(&json!({"id": 7})));
        assert_eq!(
            violations(&s, json!({"n": 1.5})),
            vec![
                one("/n", "integer", "number 1.5"),
                one("/n", "a number ≥ 3", "1.5")
            ]
        );
        // No alternative: the closest one's violations.
        assert_eq!(
            violations(&s, json!({"id": "a"})),
            vec![one("/id", "a string of at least 2 characters", "\"a\"")]
        );
        assert_eq!(
            violations(&s, json!({"id": 1.5})),
            vec![one("/id", "one of: string | integer", "number 1.5")]
        );
        assert_eq!(
            violations(&s, json!({"mode": "unsafe"})),
            vec![one("/mode", "a value that is not \"unsafe\"", "\"unsafe\"")]
        );
    }

    #[test]
    fn if_then_else_checks_the_side_the_condition_picks() {
        let s = schema(json!({
            "if": {"properties": {"kind": {"const": "file"}}, "required": ["kind"]},
            "then": {"required": ["path"]},
            "else": {"required": ["url"]},
        }));
        assert!(s.is_valid(&json!({"kind": "file", "path": "a"})));
        assert!(s.is_valid(&json!({"kind": "web", "url": "u"})));
        assert_eq!(
            violations(&s, json!({"kind": "file", "url": "u"})),
            vec![one("/path", "required property", "missing")]
        );
        assert_eq!(
            violations(&s, json!({"kind": "web"})),
            vec![one("/url", "required property", "missing")]
        );
        // `then` without `if` is inert.
        assert!(schema(json!({"then": false})).is_valid(&json!(1)));
    }

    #[test]
    fn object_applicators() {
        let s = schema(json!({
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "patternProperties": {"^x-": {"type": "integer"}, "^x-n": {"minimum": 0}},
            "additionalProperties": false,
            "dependentRequired": {"card": ["cvc"]},
            "dependentSchemas": {"debug": {"required": ["level"]}},
            "propertyNames": {"maxLength": 8},
        }));
        assert!(s.is_valid(&json!({"name": "a", "x-a": 1, "x-n": 2})));
        assert_eq!(
            violations(&s, json!({"x-a": "s", "x-n": -1, "other": 1})),
            vec![
                one("/x-a", "integer", "string \"s\""),
                one("/x-n", "a number ≥ 0", "-1"),
                one(
                    "/other",
                    "no such property (allowed: name; names matching ^x-, ^x-n)",
                    "integer"
                ),
            ]
        );
        let s = schema(json!({
            "dependentRequired": {"card": ["cvc"]},
            "dependentSchemas": {"debug": {"required": ["level"]}},
            "propertyNames": {"maxLength": 4},
        }));
        assert_eq!(
            violations(&s, json!({"card": 1, "debug": true, "level": 1})),
            vec![
                one(
                    "/cvc",
                    "required property (as \"card\" is present)",
                    "missing"
                ),
                one(
                    "/debug",
                    "a property name that is a string of at most 4 characters",
                    "\"debug\""
                ),
                one(
                    "/level",
                    "a property name that is a string of at most 4 characters",
                    "\"level\""
                ),
            ]
        );
        assert_eq!(
            violations(&s, json!({"debug": 1})),
            vec![
                one(
                    "/debug",
                    "a property name that is a string of at most 4 characters",
                    "\"debug\""
                ),
                one("/level", "required property", "missing"),
            ]
        );
    }

    #[test]
    fn array_applicators() {
        let s = schema(json!({
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "integer"}],
            "items": {"type": "boolean"},
            "uniqueItems": true,
        }));
        assert!(s.is_valid(&json!(["a", 1, true, false])));
        assert!(s.is_valid(&json!(["a"])));
        assert_eq!(
            violations(&s, json!([1, "a", true, true])),
            vec![
                one("", "items that are all different", "items 2 and 3 equal"),
                one("/0", "string", "number 1"),
                one("/1", "integer", "string \"a\""),
            ]
        );
        let c =
            schema(json!({"contains": {"type": "integer"}, "minContains": 2, "maxContains": 3}));
        assert!(c.is_valid(&json!([1, "a", 2])));
        assert!(c.is_valid(&json!("not an array")));
        assert_eq!(
            violations(&c, json!([1, "a"])),
            vec![one("", "at least 2 item(s) that are integer", "1")]
        );
        assert_eq!(
            violations(&c, json!([1, 2, 3, 4])),
            vec![one("", "at most 3 item(s) that are integer", "4")]
        );
        // `contains` of 100,000 items, each on its own tally.
        let many: Vec<Value> = (0..100_000).map(|i| json!(format!("s{i}"))).collect();
        assert_eq!(violations(&c, Value::Array(many)).len(), 1);
    }

    #[test]
    fn summary() {
        let s = schema(json!({"properties": {"a": {"type": "string"}}, "required": ["b"]}));
        let v = violations(&s, json!({"a": 1}));
        assert_eq!(
            summarize(&v),
            "/b: expected required property, got missing; /a: expected string, got number 1"
        );
        assert_eq!(
            serde_json::to_value(&v[0]).unwrap(),
            json!({"path": "/b", "expected": "required property", "got": "missing"})
        );
    }
}
