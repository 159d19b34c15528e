//! Loading plugins: from the built-in set, from a directory, from a file.
//!
//! Loading is where untrusted components are checked, once: the bytes are
//! a component (not a core module, not garbage), it is built for a contract
//! version this host speaks, it exports at least one role and every
//! function of each role with the contract's type (checked by
//! instantiating it once, under the load budget), it imports only seams it
//! was granted, and every tool it lists has a valid name, a description
//! and schemas our compiler accepts, all within the size budgets. A plugin
//! that fails any check is reported — by name, file and reason — and
//! skipped; the others load and serve (whether the host may then serve at
//! all is the host's decision: see `Toolgate::build`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::cache::Provenance;
use super::component::{ComponentPlugin, InstanceMode, Origin, Parts};
use super::contract::{self, ListedTool};
use super::log::{GuestLog, escape};
use super::manifest::Manifest;
use super::runtime::Runtime;
use super::store::{PluginContext, StoreData};
use crate::PROGRESS;
use crate::budgets::{Budgets, cut};
use crate::call::{CallSignal, ToolMeta};
use crate::cause::Cause;
use crate::grants::Grants;
use crate::policy::Role;
use crate::seams::HostSeams;
use crate::tool::ToolDefinition;

/// How long a compile runs before the log says it is compiling.
const COMPILE_NOTICE: std::time::Duration = std::time::Duration::from_secs(2);

/// A plugin that could not be loaded (or a tool of it that could not be
/// registered, or something the host adjusted), and why.
///
/// `message` is the report's sentence (what the operator reads in
/// `toolgate plugins`, the log and the reload events, what to do
/// included); the error it was made from, when there is one (an I/O error,
/// a compile error, a guest's trap), is kept as the `source()`, and what a
/// caller branches on is the [`LoadErrorKind`], not the words.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, thiserror::Error)]
#[error("plugin `{plugin}` ({origin}): {message}")]
pub struct LoadError {
    pub plugin: String,
    /// `built-in` or the file's path.
    pub origin: String,
    pub message: String,
    /// The plugin might be a policy: it did not load far enough to show it
    /// has only the tool role. A policy that fails to load stops the host
    /// from running calls unless the operator marked it `optional`.
    #[serde(skip)]
    pub may_be_policy: bool,
    /// What kind of problem, for the code that treats kinds differently.
    #[serde(skip)]
    pub kind: LoadErrorKind,
    /// The error underneath `message`, if any.
    #[serde(skip)]
    pub source: Option<Cause>,
}

/// What kind of problem a [`LoadError`] reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoadErrorKind {
    /// The plugin did not load, or something about it was adjusted or is
    /// worth saying.
    #[default]
    Other,
    /// A tool it lists was not registered (a bad name, a schema the
    /// compiler rejects): a reload refuses an update with such a tool.
    ToolNotRegistered,
    /// A bridged MCP server (the `plugin`) is not connected: its tools are
    /// missing until it is, and a call to one is told why.
    ServerDown,
}

impl LoadError {
    /// A failure of a plugin whose roles are not known (so it may be a policy).
    pub fn new(plugin: &str, origin: &Origin, message: impl Into<String>) -> Self {
        LoadError {
            plugin: plugin.to_string(),
            origin: origin.to_string(),
            message: message.into(),
            may_be_policy: true,
            ..LoadError::default()
        }
    }

    /// The same report, keeping `source` as the error underneath it.
    pub fn because(self, source: impl Into<Cause>) -> Self {
        LoadError {
            source: Some(source.into()),
            ..self
        }
    }

    /// Something worth reporting about a plugin that loads (a tool not
    /// registered, a placement adjusted).
    pub fn note(plugin: &str, origin: &Origin, message: impl Into<String>) -> Self {
        LoadError {
            may_be_policy: false,
            ..LoadError::new(plugin, origin, message)
        }
    }
}

/// The bytes and manifest of a plugin, before loading.
#[derive(Clone)]
pub struct PluginSource {
    pub name: String,
    pub origin: Origin,
    pub bytes: Arc<[u8]>,
    pub manifest: Manifest,
    /// Why its manifest is not acceptable, if it is not: reported once the
    /// component's roles are known (so the failure is classified right).
    pub manifest_error: Option<Cause>,
    /// The trust policy's verdict on its signatures (an OCI source under
    /// `[trust]`): checked once its roles are known, since whether a
    /// signature is required depends on them.
    pub signature: Option<SignatureCheck>,
}

/// The trust policy's verdict on an OCI component's signatures (none in a
/// build without the cargo feature `oci`).
#[cfg(feature = "oci")]
pub type SignatureCheck = crate::oci::trust::SignatureCheck;
/// The trust policy's verdict on an OCI component's signatures (none in a
/// build without the cargo feature `oci`).
#[cfg(not(feature = "oci"))]
pub type SignatureCheck = std::convert::Infallible;

/// Why `check` refuses a component whose roles are now known.
fn signature_refusal(check: Option<&SignatureCheck>, policy: bool, tool: bool) -> Option<String> {
    #[cfg(feature = "oci")]
    return check.and_then(|c| c.refusal(policy, tool));
    #[cfg(not(feature = "oci"))]
    return {
        let _ = (policy, tool);
        check.map(|c| match *c {})
    };
}

impl PluginSource {
    fn error(&self, message: impl Into<String>) -> LoadError {
        LoadError::new(&self.name, &self.origin, message)
    }

    /// The SHA-256 of the bytes, in hex.
    pub fn sha256(&self) -> String {
        use sha2::{Digest, Sha256};
        Sha256::digest(&self.bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// How the host wants one plugin loaded (resolved from config + manifest).
#[derive(Clone)]
pub struct LoadSettings {
    pub grants: Arc<Grants>,
    pub mode: InstanceMode,
    pub limits: toolgate_schema::Limits,
    pub budgets: Budgets,
    pub max_idle: usize,
    /// The SHA-256 the operator expects the file to have.
    pub sha256: Option<String>,
    /// Per-tool timeout overrides from the operator.
    pub tool_timeouts: std::collections::BTreeMap<String, u32>,
    /// The host-wide seam state (the plugin gets its share of what it is
    /// granted).
    pub seams: HostSeams,
    /// The name's last verified version held a policy role (the
    /// lifecycle's ledger): whatever this version's bytes claim, a failure
    /// to load it is a policy's (it blocks the host), and a signature
    /// `[trust]` requires of policies is required of it.
    pub known_policy: bool,
}

/// A tool as checked at load.
#[derive(Clone, Debug)]
pub struct LoadedTool {
    pub def: ToolDefinition,
    pub parameters: toolgate_schema::Schema,
    pub output: Option<toolgate_schema::Schema>,
}

/// A loaded plugin and the problems found with some of its tools.
pub struct Loaded {
    pub plugin: Arc<ComponentPlugin>,
    pub tools: Vec<LoadedTool>,
    pub problems: Vec<LoadError>,
    /// How long loading took (compile or cache, instantiate, `list-tools`).
    pub load_time: std::time::Duration,
}

/// The `*.wasm` files of a directory (sorted by name), each with its
/// optional `NAME.toml` manifest. Unreadable entries are reported, not fatal.
pub fn scan_dir(dir: &Path) -> Result<(Vec<PluginSource>, Vec<LoadError>), std::io::Error> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
        .collect();
    paths.sort();
    let mut sources = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        match read_source(&path) {
            Ok(s) => sources.push(s),
            Err(e) => problems.push(e),
        }
    }
    Ok((sources, problems))
}

/// Read one `.wasm` file (and its manifest, if any).
pub fn read_source(path: &Path) -> Result<PluginSource, LoadError> {
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let origin = Origin::File(path.to_path_buf());
    let err = |message: String| LoadError::new(&name, &origin, message);
    if !valid_plugin_name(&name) {
        return Err(err(format!(
            "the file name `{name}` is not a valid plugin name (use letters, digits, `-` and `_`)"
        )));
    }
    let bytes =
        std::fs::read(path).map_err(|e| err(format!("cannot read the file: {e}")).because(e))?;
    let manifest_path = path.with_extension("toml");
    let (manifest, manifest_error) = if manifest_path.exists() {
        match std::fs::read_to_string(&manifest_path) {
            Err(e) => (
                Manifest::default(),
                Some(Cause::new(ManifestUnreadable {
                    path: manifest_path.clone(),
                    source: e,
                })),
            ),
            Ok(text) => match Manifest::parse(&text, &manifest_path.display().to_string()) {
                Ok(m) => (m, None),
                Err(e) => (Manifest::default(), Some(Cause::new(e))),
            },
        }
    } else {
        (Manifest::default(), None)
    };
    Ok(PluginSource {
        name,
        origin,
        bytes: bytes.into(),
        manifest,
        manifest_error,
        signature: None,
    })
}

/// A manifest that exists but cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read its manifest {}: {source}", path.display())]
struct ManifestUnreadable {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

fn valid_plugin_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Why bytes are not a component, if they are not.
fn check_header(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 8 || &bytes[0..4] != b"\0asm" {
        return Err("not a WebAssembly file (it does not start with the `\\0asm` magic)".into());
    }
    match bytes[4..8] {
        [0x0d, 0x00, 0x01, 0x00] => Ok(()),
        [0x01, 0x00, 0x00, 0x00] => Err(
            "a core WebAssembly module, not a component; build it for `wasm32-wasip2` (or wrap it with `wasm-tools component new`)".into(),
        ),
        _ => Err(format!(
            "an unsupported WebAssembly binary version {:02x?}",
            &bytes[4..8]
        )),
    }
}

/// Load a plugin.
pub async fn load(
    runtime: &Arc<Runtime>,
    source: PluginSource,
    settings: &LoadSettings,
) -> Result<Loaded, LoadError> {
    let started = Instant::now();
    if let Some(expected) = &settings.sha256 {
        let found = source.sha256();
        if !found.eq_ignore_ascii_case(expected) {
            return Err(source.error(format!(
                "its SHA-256 is {found}, not the {expected} the configuration expects ([plugins.{}] sha256); the file was not loaded",
                source.name
            )));
        }
    }
    check_header(&source.bytes).map_err(|m| source.error(m))?;
    let (component, provenance) = {
        let runtime = runtime.clone();
        let bytes = source.bytes.clone();
        let builtin = (source.origin == Origin::Builtin).then(|| source.name.clone());
        let compiling = tokio::task::spawn_blocking(move || {
            // A built-in's code was compiled with the binary (see
            // `precompiled`): nothing to compile, cache or no cache.
            if let Some(name) = builtin
                && let Some(c) = super::precompiled::precompiled(&runtime.engine, &name, &bytes)
            {
                return Ok((c, Provenance::Embedded));
            }
            match &runtime.cache {
                Some(cache) => cache.lookup_or_compile(&runtime.engine, &bytes),
                None => super::cache::compile(&runtime.engine, &bytes),
            }
        });
        tokio::pin!(compiling);
        // A first compile of a large component takes seconds (tens, in a
        // debug build): say so when it starts to, not only when it ends.
        tokio::select! {
            done = &mut compiling => done,
            () = tokio::time::sleep(COMPILE_NOTICE) => {
                tracing::info!(
                    target: PROGRESS,
                    plugin = %source.name,
                    origin = %source.origin,
                    "compiling the plugin (not in the compile cache): a first compile takes a while; the compile cache keeps it for the next start"
                );
                compiling.await
            }
        }
        .map_err(|e| {
            source
                .error(format!("compilation panicked: {e}"))
                .because(Cause::new(e))
        })?
        .map_err(|e| {
            source
                .error(format!(
                    "is not a valid component: {}",
                    first_line(&format!("{e:#}"))
                ))
                .because(e)
        })?
    };
    if let Provenance::Compiled(took) = provenance {
        let ms = took.as_millis() as u64;
        if took >= SLOW_COMPILE {
            tracing::warn!(
                plugin = %source.name,
                origin = %source.origin,
                compile_ms = ms,
                "compiling the plugin took {ms} ms (its first use; the compile cache keeps it for the next start)"
            );
        } else {
            tracing::info!(
                target: PROGRESS,
                plugin = %source.name,
                origin = %source.origin,
                compile_ms = ms,
                "compiled the plugin in {ms} ms (not in the compile cache)"
            );
        }
    }
    let shape = contract::inspect(&runtime.engine, &component).map_err(|m| source.error(m))?;
    // From here on the roles are known: a tool-only plugin that fails does
    // not hold the host's policies back.
    let tool_only = shape.roles.iter().all(|r| *r == Role::Tool);
    // What these bytes say of their roles decides nothing until they are
    // verified: a name that was a policy stays one (see
    // `lifecycle::ledger`).
    let policy = !tool_only || settings.known_policy;
    let fail = |e: LoadError| LoadError {
        may_be_policy: policy,
        ..e
    };
    if let Some(e) = &source.manifest_error {
        return Err(fail(source.error(e.to_string()).because(e.clone())));
    }
    if let Some(why) = signature_refusal(
        source.signature.as_ref(),
        policy,
        shape.roles.contains(&Role::Tool),
    ) {
        let why = if tool_only && settings.known_policy {
            format!(
                "{why} (its last verified version had a policy role; a version that claims otherwise is not believed before it verifies)"
            )
        } else {
            why
        };
        return Err(fail(source.error(why)));
    }
    check_seams(&source, &shape, &settings.grants).map_err(fail)?;
    let path = contract::call_path(&shape, &settings.grants);
    let pre = runtime
        .linkers
        .instantiate_pre(&component, path)
        .map_err(|e| {
            fail(
                source
                    .error(format!(
                        "imports something this host does not provide: {}",
                        first_line(&format!("{e:#}"))
                    ))
                    .because(e),
            )
        })?;
    let exports =
        contract::export_loader(&shape, &component, &pre).map_err(|m| fail(source.error(m)))?;
    let name: Arc<str> = source.name.as_str().into();
    let context = Arc::new(PluginContext {
        name: name.clone(),
        grants: settings.grants.clone(),
        budgets: settings.budgets,
        log: GuestLog::new(
            name.clone(),
            settings.budgets.log_lines_per_second,
            settings.budgets.max_log_line_bytes,
        ),
        seams: settings.seams.for_plugin(&name, &settings.grants),
        memory: runtime.memory.clone(),
        policy_ticks: ticks(settings.budgets.policy_timeout, runtime.options.epoch_tick),
        // The asynchronous path only: the synchronous path's stubs would
        // need to end the borrows their dynamic functions receive.
        sentinel: path == super::component::CallPath::Async
            && super::ungranted::wants_sentinel(
                source.origin == Origin::Builtin,
                shape.imports.iter(),
                &settings.grants,
            ),
    });
    let plugin = Arc::new(ComponentPlugin::new(Parts {
        name: source.name.clone(),
        origin: source.origin.clone(),
        roles: shape.roles.clone(),
        contract: shape.version,
        wit_version: shape.wit_version.clone(),
        imports: shape.imports.clone(),
        mode: settings.mode,
        path,
        context,
        limits: settings.limits,
        engine: runtime.engine.clone(),
        pre,
        exports,
        max_idle: settings.max_idle,
    }));
    // One instance now, under the load budget: it runs the component's
    // initialisation and checks the type of every export it has.
    let deadline = Instant::now() + settings.budgets.load_timeout;
    let signal = || CallSignal::new(Default::default(), Some(deadline));
    let budget_ms = settings.budgets.load_timeout.as_millis();
    let within = |what: &str, e: super::component::InvokeError| {
        fail(match e {
            super::component::InvokeError::Interrupted(_) => source.error(format!(
                "{what} did not finish within the load budget ({budget_ms} ms, `[limits] load_timeout_ms`)"
            )),
            other => source
                .error(format!("{what} failed: {other}"))
                .because(Cause::new(other)),
        })
    };
    let (tools, problems) = if shape.roles.contains(&Role::Tool) {
        let listed = contract::list_tools(&plugin, signal())
            .await
            .map_err(|e| within("`list-tools`", e))?;
        check_tools(listed, &source, settings)
    } else {
        plugin
            .warm_up(crate::plugin::store::CallScope::new(None, signal()))
            .await
            .map_err(|e| within("instantiating it", e))?;
        (Vec::new(), Vec::new())
    };
    tracing::debug!(
        plugin = %source.name,
        contract = ?shape.version,
        path = ?path,
        code = ?provenance,
        elapsed_us = started.elapsed().as_micros() as u64,
        "plugin loaded"
    );
    Ok(Loaded {
        plugin,
        tools,
        problems,
        load_time: started.elapsed(),
    })
}

/// Whether a component can only be a tool provider, read from the names
/// of its exports without compiling it (the roles it exports are named
/// `toolgate:plugin/<role>@<version>`). `false` — it may be a policy —
/// when it exports any other role of the contract, or when the bytes do
/// not parse: a plugin still loading that may be a policy must hold the
/// calls back (see `lifecycle`), one that is only a tool need not.
pub fn tool_only(bytes: &[u8]) -> bool {
    use wasmparser::{Parser, Payload};
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload {
            Err(_) => return false,
            Ok(Payload::ModuleSection { .. } | Payload::ComponentSection { .. }) => depth += 1,
            Ok(Payload::End(_)) => depth = depth.saturating_sub(1),
            Ok(Payload::ComponentExportSection(exports)) if depth == 0 => {
                for export in exports {
                    let Ok(export) = export else {
                        return false;
                    };
                    // A name not of the contract: `inspect` ignores it too.
                    if let Some((pkg, iface, _)) = contract::split_name(export.name.name)
                        && pkg == contract::PACKAGE
                        && iface != Role::Tool.interface()
                    {
                        return false;
                    }
                }
            }
            Ok(_) => {}
        }
    }
    true
}

/// A compile at least this long is logged as a warning (shorter ones at
/// `info`): the operator sees what a plugin's first use costs the start.
pub const SLOW_COMPILE: std::time::Duration = std::time::Duration::from_secs(1);

/// `budget` in epoch ticks (at least one).
fn ticks(budget: std::time::Duration, tick: std::time::Duration) -> u32 {
    let n = budget.as_nanos().div_ceil(tick.as_nanos().max(1));
    u32::try_from(n).unwrap_or(u32::MAX).max(1)
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

/// A component that imports a seam it was not granted does not load; the
/// error names every seam missing, and every line that would grant them.
fn check_seams(
    source: &PluginSource,
    shape: &contract::Shape,
    grants: &Grants,
) -> Result<(), LoadError> {
    let mut missing: Vec<(&str, &str)> = Vec::new();
    for seam in &shape.seams {
        let line = match crate::seams::find::<StoreData>(seam) {
            Some(s) => match (s.granted)(grants) {
                Ok(()) => continue,
                Err(line) => line,
            },
            None => "(unknown seam)",
        };
        missing.push((seam, line));
    }
    missing.sort_unstable();
    let and = |items: Vec<String>| match items.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    };
    match missing.len() {
        0 => Ok(()),
        1 => Err(source.error(format!(
            "imports the `{}` seam, which is not granted (grant: {}); to grant it, add `{}` under [plugins.{}.grants] in toolgate.toml",
            missing[0].0, grants.source, missing[0].1, source.name
        ))),
        _ => Err(source.error(format!(
            "imports the {} seams, which are not granted (grant: {}); to grant them, add {} under [plugins.{}.grants] in toolgate.toml",
            and(missing.iter().map(|(s, _)| format!("`{s}`")).collect()),
            grants.source,
            and(missing.iter().map(|(_, l)| format!("`{l}`")).collect()),
            source.name
        ))),
    }
}

/// Check what `list-tools` returned: at most `max_tools_per_plugin`, each
/// with a valid name and acceptable schemas.
fn check_tools(
    listed: Vec<ListedTool>,
    source: &PluginSource,
    settings: &LoadSettings,
) -> (Vec<LoadedTool>, Vec<LoadError>) {
    let mut tools: Vec<LoadedTool> = Vec::new();
    let mut problems = Vec::new();
    let max = settings.budgets.max_tools_per_plugin;
    if listed.len() > max {
        problems.push(LoadError::note(
            &source.name,
            &source.origin,
            format!(
                "lists {} tools, more than the host accepts from one plugin ({max}, `[limits] max_tools_per_plugin`); the first {max} are considered",
                listed.len()
            ),
        ));
    }
    for spec in listed.into_iter().take(max) {
        let shown = escape(&cut(spec.name.clone(), 80)).into_owned();
        match check_spec(spec, &source.name, settings) {
            Ok((t, _)) if tools.iter().any(|x| x.def.name == t.def.name) => {
                problems.push(LoadError::note(
                    &source.name,
                    &source.origin,
                    format!("lists the tool `{shown}` twice; the second is ignored"),
                ))
            }
            Ok((t, note)) => {
                if let Some(note) = note {
                    problems.push(LoadError::note(
                        &source.name,
                        &source.origin,
                        format!("tool `{shown}`: {note}"),
                    ));
                }
                tools.push(t)
            }
            Err(m) => problems.push(LoadError {
                kind: LoadErrorKind::ToolNotRegistered,
                ..LoadError::note(
                    &source.name,
                    &source.origin,
                    format!("tool `{shown}` is not registered: {m}"),
                )
            }),
        }
    }
    (tools, problems)
}

/// Tool names: what every model API accepts.
pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Check one listed tool; the note says what was adjusted (a cut description).
fn check_spec(
    spec: ListedTool,
    provider: &str,
    settings: &LoadSettings,
) -> Result<(LoadedTool, Option<String>), String> {
    if !valid_tool_name(&spec.name) {
        return Err("its name must be 1–64 characters of [A-Za-z0-9_-]".into());
    }
    if spec.description.trim().is_empty() {
        return Err("its description is empty (the model needs one)".into());
    }
    let budgets = &settings.budgets;
    let mut note = None;
    let description = if spec.description.len() > budgets.max_description_bytes {
        note = Some(format!(
            "its description of {} bytes was cut to the host's limit ({}, `[limits] max_description_bytes`)",
            spec.description.len(),
            budgets.max_description_bytes
        ));
        cut(spec.description, budgets.max_description_bytes)
    } else {
        spec.description
    };
    let limits = toolgate_schema::Limits::default();
    let schema_json = |what: &str, text: &str| -> Result<Value, String> {
        if text.len() > budgets.max_schema_bytes {
            return Err(format!(
                "its {what} schema is {} bytes, more than the host accepts ({}, `[limits] max_schema_bytes`)",
                text.len(),
                budgets.max_schema_bytes
            ));
        }
        toolgate_schema::parse(text, &limits)
            .map_err(|e| format!("its {what} schema is not acceptable JSON: {e}"))
    };
    let parameters = schema_json("parameters", &spec.parameters)?;
    let compiled = toolgate_schema::Schema::compile_parameters(&parameters)
        .map_err(|e| format!("its parameters schema is not accepted: {e}"))?;
    let (output_schema, output) = match &spec.output_schema {
        None => (None, None),
        Some(text) => {
            let v = schema_json("output", text)?;
            let c = toolgate_schema::Schema::compile(&v)
                .map_err(|e| format!("its output schema is not accepted: {e}"))?;
            (Some(v), Some(c))
        }
    };
    let timeout_ms = settings
        .tool_timeouts
        .get(&spec.name)
        .copied()
        .or(spec.timeout_ms);
    Ok((
        LoadedTool {
            def: ToolDefinition {
                name: spec.name,
                description,
                parameters,
                output_schema,
                meta: ToolMeta {
                    provider: provider.to_string(),
                    timeout_ms,
                    annotations: spec.annotations,
                    features: spec.features,
                    effects: settings.grants.may_have_effects(),
                },
            },
            parameters: compiled,
            output,
        },
        note,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report says what happened; the I/O error it was made from is
    /// kept underneath, for the log and for callers.
    #[test]
    fn an_unreadable_file_keeps_its_io_error() {
        let Err(e) = read_source(Path::new("/nonexistent-toolgate-dir/p.wasm")) else {
            panic!("a file that does not exist was read");
        };
        assert!(e.message.starts_with("cannot read the file: "), "{e}");
        assert_eq!(e.kind, LoadErrorKind::Other);
        let io = e
            .source
            .as_ref()
            .and_then(|c| c.downcast_ref::<std::io::Error>())
            .expect("the io::Error is kept");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        let source = std::error::Error::source(&e).expect("a source()");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
    }
}
