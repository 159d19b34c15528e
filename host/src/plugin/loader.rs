//! Loading plugins: from the built-in set, from a directory, from a file.
//!
//! Loading is where untrusted components are checked, once: the bytes are
//! a component (not a core module, not garbage), it is built for a
//! compatible contract, it exports at least one role, it imports only seams
//! it was granted, and every tool it lists has a valid name and schemas our
//! compiler accepts. A plugin that fails any check is reported — by name,
//! file and reason — and skipped; the others load and serve.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::component::{ComponentPlugin, Indices, InstanceMode, Origin, Parts};
use super::grants::Grants;
use super::manifest::Manifest;
use super::roles;
use super::runtime::Runtime;
use super::store::CallScope;
use crate::bindings::exports::toolgate::plugin::{
    execute_around_hook, finalizer, guard, post_execute_hook, pre_execute_hook, result_observer,
    tool,
};
use crate::bindings::wit;
use crate::call::CallSignal;
use crate::policy::Role;
use crate::tool::{ToolDefinition, ToolMeta};

/// A plugin that could not be loaded (or a tool of it that could not be
/// registered), and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, thiserror::Error)]
#[error("plugin `{plugin}` ({origin}): {message}")]
pub struct LoadError {
    pub plugin: String,
    /// `built-in` or the file's path.
    pub origin: String,
    pub message: String,
}

/// The bytes and manifest of a plugin, before loading.
#[derive(Clone)]
pub struct PluginSource {
    pub name: String,
    pub origin: Origin,
    pub bytes: Arc<[u8]>,
    pub manifest: Manifest,
}

impl PluginSource {
    fn error(&self, message: impl Into<String>) -> LoadError {
        LoadError {
            plugin: self.name.clone(),
            origin: self.origin.to_string(),
            message: message.into(),
        }
    }
}

/// How the host wants one plugin loaded (resolved from config + manifest).
#[derive(Clone, Debug)]
pub struct LoadSettings {
    pub grants: Arc<Grants>,
    pub mode: InstanceMode,
    pub limits: toolgate_schema::Limits,
    pub max_idle: usize,
    /// Per-tool timeout overrides from the operator.
    pub tool_timeouts: std::collections::BTreeMap<String, u32>,
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
    let err = |message: String| LoadError {
        plugin: name.clone(),
        origin: path.display().to_string(),
        message,
    };
    if !valid_plugin_name(&name) {
        return Err(err(format!(
            "the file name `{name}` is not a valid plugin name (use letters, digits, `-` and `_`)"
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| err(format!("cannot read the file: {e}")))?;
    let manifest_path = path.with_extension("toml");
    let manifest = if manifest_path.exists() {
        let text = std::fs::read_to_string(&manifest_path).map_err(|e| {
            err(format!(
                "cannot read its manifest {}: {e}",
                manifest_path.display()
            ))
        })?;
        Manifest::parse(&text, &manifest_path.display().to_string())
            .map_err(|e| err(e.to_string()))?
    } else {
        Manifest::default()
    };
    Ok(PluginSource {
        name,
        origin: Origin::File(path.to_path_buf()),
        bytes: bytes.into(),
        manifest,
    })
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
    check_header(&source.bytes).map_err(|m| source.error(m))?;
    let component = {
        let runtime = runtime.clone();
        let bytes = source.bytes.clone();
        tokio::task::spawn_blocking(move || match &runtime.cache {
            Some(cache) => cache.load_or_compile(&runtime.engine, &bytes),
            None => wasmtime::component::Component::new(&runtime.engine, &bytes),
        })
        .await
        .map_err(|e| source.error(format!("compilation panicked: {e}")))?
        .map_err(|e| {
            source.error(format!(
                "is not a valid component: {}",
                first_line(&format!("{e:#}"))
            ))
        })?
    };
    let shape = roles::inspect(&runtime.engine, &component).map_err(|m| source.error(m))?;
    check_seams(&source, &shape, &settings.grants)?;
    let pre = runtime.linker.instantiate_pre(&component).map_err(|e| {
        source.error(format!(
            "imports something this host does not provide: {}",
            first_line(&format!("{e:#}"))
        ))
    })?;
    let mut indices = Indices::default();
    let idx_err = |role: Role, e: wasmtime::Error| {
        source.error(format!(
            "its `{}` export is incomplete: {e:#}",
            role.interface()
        ))
    };
    for role in &shape.roles {
        match role {
            Role::Tool => {
                indices.tool = Some(tool::GuestIndices::new(&pre).map_err(|e| idx_err(*role, e))?)
            }
            Role::PreExecute => {
                indices.pre_execute =
                    Some(pre_execute_hook::GuestIndices::new(&pre).map_err(|e| idx_err(*role, e))?)
            }
            Role::ExecuteAround => {
                indices.execute_around = Some(
                    execute_around_hook::GuestIndices::new(&pre).map_err(|e| idx_err(*role, e))?,
                )
            }
            Role::PostExecute => {
                indices.post_execute = Some(
                    post_execute_hook::GuestIndices::new(&pre).map_err(|e| idx_err(*role, e))?,
                )
            }
            Role::Guard => {
                indices.guard = Some(guard::GuestIndices::new(&pre).map_err(|e| idx_err(*role, e))?)
            }
            Role::Finalizer => {
                indices.finalizer =
                    Some(finalizer::GuestIndices::new(&pre).map_err(|e| idx_err(*role, e))?)
            }
            Role::Observer => {
                indices.observer =
                    Some(result_observer::GuestIndices::new(&pre).map_err(|e| idx_err(*role, e))?)
            }
        }
    }
    let plugin = Arc::new(ComponentPlugin::new(Parts {
        name: source.name.clone(),
        origin: source.origin.clone(),
        roles: shape.roles.clone(),
        wit_version: shape.version.clone(),
        imports: shape.imports.clone(),
        mode: settings.mode,
        grants: settings.grants.clone(),
        limits: settings.limits,
        runtime: runtime.clone(),
        pre,
        indices,
        max_idle: settings.max_idle,
    }));
    let (tools, problems) = if shape.roles.contains(&Role::Tool) {
        list_tools(&plugin, &source, settings).await?
    } else {
        (Vec::new(), Vec::new())
    };
    Ok(Loaded {
        plugin,
        tools,
        problems,
    })
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

/// A component that imports a seam it was not granted does not load.
fn check_seams(
    source: &PluginSource,
    shape: &roles::Shape,
    grants: &Grants,
) -> Result<(), LoadError> {
    for seam in &shape.seams {
        let granted = match seam.as_str() {
            "shell" => grants.shell,
            "subprocess" => !grants.subprocess.is_empty(),
            _ => false,
        };
        if !granted {
            let line = match seam.as_str() {
                "shell" => "shell = true".to_string(),
                _ => "subprocess = [\"<program>\", ...]".to_string(),
            };
            return Err(source.error(format!(
                "imports the `{seam}` seam, which is not granted (grant: {}); to grant it, add `{line}` under [plugins.{}.grants] in toolgate.toml",
                grants.source, source.name
            )));
        }
    }
    Ok(())
}

/// How long `list-tools` may take.
const LIST_TOOLS_BUDGET: Duration = Duration::from_secs(10);

async fn list_tools(
    plugin: &Arc<ComponentPlugin>,
    source: &PluginSource,
    settings: &LoadSettings,
) -> Result<(Vec<LoadedTool>, Vec<LoadError>), LoadError> {
    let signal = CallSignal::new(
        Default::default(),
        Some(std::time::Instant::now() + LIST_TOOLS_BUDGET),
    );
    let specs = plugin
        .invoke(CallScope::with_signal(signal), |store, ex| {
            Box::pin(async move { ex.tool()?.call_list_tools(store).await })
        })
        .await
        .map_err(|e| source.error(format!("`list-tools` failed: {e}")))?;
    let mut tools: Vec<LoadedTool> = Vec::new();
    let mut problems = Vec::new();
    for spec in specs {
        let name = spec.name.clone();
        match check_spec(spec, &source.name, settings) {
            Ok(t) if tools.iter().any(|x| x.def.name == t.def.name) => problems.push(source.error(
                format!("lists the tool `{name}` twice; the second is ignored"),
            )),
            Ok(t) => tools.push(t),
            Err(m) => problems.push(source.error(format!("tool `{name}` is not registered: {m}"))),
        }
    }
    Ok((tools, problems))
}

/// Tool names: what every model API accepts.
pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn check_spec(
    spec: wit::ToolSpec,
    provider: &str,
    settings: &LoadSettings,
) -> Result<LoadedTool, String> {
    if !valid_tool_name(&spec.name) {
        return Err("its name must be 1–64 characters of [A-Za-z0-9_-]".into());
    }
    if spec.description.trim().is_empty() {
        return Err("its description is empty (the model needs one)".into());
    }
    let limits = toolgate_schema::Limits::default();
    let parameters: Value = toolgate_schema::parse(&spec.parameters, &limits)
        .map_err(|e| format!("its parameters are not acceptable JSON: {e}"))?;
    let compiled = toolgate_schema::Schema::compile_parameters(&parameters)
        .map_err(|e| format!("its parameters schema is not accepted: {e}"))?;
    let (output_schema, output) = match &spec.output_schema {
        None => (None, None),
        Some(text) => {
            let v: Value = toolgate_schema::parse(text, &limits)
                .map_err(|e| format!("its output schema is not acceptable JSON: {e}"))?;
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
    Ok(LoadedTool {
        def: ToolDefinition {
            name: spec.name,
            description: spec.description,
            parameters,
            output_schema,
            meta: ToolMeta {
                provider: provider.to_string(),
                timeout_ms,
                annotations: spec.annotations,
                features: spec.features,
            },
        },
        parameters: compiled,
        output,
    })
}
