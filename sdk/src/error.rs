//! [`ToolError`]: a tool's own failure, apart from the `Tool` trait that
//! returns it and the outcome that carries it (both name it; it names
//! neither).

use crate::bindings::toolgate::plugin::types::ToolFailure;

/// A tool's own failure: a code for programs, a message for the model.
///
/// Boxed inside, so that `Result<T, ToolError>` stays one pointer wide on
/// the success path.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolError(Box<Failure>);

#[derive(Clone, Debug, PartialEq)]
struct Failure {
    name: String,
    code: String,
    message: String,
    details: Option<serde_json::Value>,
}

impl ToolError {
    /// A failure with a code (`UPPER_SNAKE_CASE`) and a message.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        let code = code.into();
        let name = code
            .split('_')
            .map(|w| {
                let mut c = w.chars();
                match c.next() {
                    Some(f) => f
                        .to_uppercase()
                        .chain(c.flat_map(char::to_lowercase))
                        .collect(),
                    None => String::new(),
                }
            })
            .collect();
        ToolError(Box::new(Failure {
            name,
            code,
            message: message.into(),
            details: None,
        }))
    }

    /// A short type name, e.g. `NotFound` (derived from the code).
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// `UPPER_SNAKE_CASE`, e.g. `NOT_FOUND`.
    pub fn code(&self) -> &str {
        &self.0.code
    }

    /// What happened, for the model.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// Anything else, as JSON.
    pub fn details(&self) -> Option<&serde_json::Value> {
        self.0.details.as_ref()
    }

    /// The arguments make sense to the schema but not to the tool.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        ToolError::new("INVALID_INPUT", message)
    }

    /// Something the call names does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        ToolError::new("NOT_FOUND", message)
    }

    /// The tool may not do this.
    pub fn permission_denied(message: impl Into<String>) -> Self {
        ToolError::new("PERMISSION_DENIED", message)
    }

    /// Attach details.
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.0.details = Some(details);
        self
    }

    pub(crate) fn into_wit(self) -> ToolFailure {
        let f = *self.0;
        ToolFailure {
            name: f.name,
            code: f.code,
            message: f.message,
            details: f.details.map(|d| d.to_string()),
        }
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.0.code, self.0.message)
    }
}

impl std::error::Error for ToolError {}

impl ToolError {
    /// A file-system error on `path`, told as the author and the model need
    /// it: a path outside every directory the operator granted this plugin
    /// is `PERMISSION_DENIED` ("not granted", with the line that grants
    /// it), not "No such file or directory" — WASI cannot tell the two
    /// apart, so this looks at whether any ancestor of `path` is visible.
    /// Other errors convert as `From<std::io::Error>` does.
    ///
    /// ```ignore
    /// let text = std::fs::read_to_string(&self.path).map_err(|e| ToolError::from_io(e, &self.path))?;
    /// ```
    pub fn from_io(error: std::io::Error, path: impl AsRef<std::path::Path>) -> Self {
        let path = path.as_ref();
        if error.kind() == std::io::ErrorKind::NotFound && !granted(path) {
            return ToolError::permission_denied(format!(
                "`{}` is not granted to this plugin: it is outside every directory the operator granted (grant one with `fs = [{{ path = \"...\", access = \"read-only\" }}]` under [plugins.NAME.grants])",
                path.display()
            ))
            .with_details(serde_json::json!({"path": path.display().to_string()}));
        }
        ToolError::from(error).with_details(serde_json::json!({"path": path.display().to_string()}))
    }
}

/// Whether some ancestor of `path` (`.` for a relative one, `/` for an
/// absolute one) is visible: the path lies inside a granted directory.
fn granted(path: &std::path::Path) -> bool {
    let mut ancestors: Vec<&std::path::Path> = path.ancestors().skip(1).collect();
    if path.is_relative() {
        ancestors.push(std::path::Path::new("."));
    }
    ancestors
        .into_iter()
        .filter(|a| !a.as_os_str().is_empty())
        .any(|a| std::fs::metadata(a).is_ok())
}

impl From<std::io::Error> for ToolError {
    fn from(e: std::io::Error) -> Self {
        // WASI's ENOTCAPABLE: the grant does not allow this (e.g. a write
        // under a read-only grant).
        if e.raw_os_error() == Some(76) {
            return ToolError::permission_denied(format!(
                "not granted: {e} (the operator's grant for this plugin does not allow it)"
            ));
        }
        use std::io::ErrorKind as K;
        let code = match e.kind() {
            K::NotFound => "NOT_FOUND",
            K::PermissionDenied => "PERMISSION_DENIED",
            K::AlreadyExists => "ALREADY_EXISTS",
            K::InvalidInput | K::InvalidData => "INVALID_INPUT",
            K::IsADirectory => "IS_A_DIRECTORY",
            K::NotADirectory => "NOT_A_DIRECTORY",
            _ => "IO_ERROR",
        };
        ToolError::new(code, e.to_string())
    }
}

/// A seam refusal or failure as the tool's own error: `PERMISSION_DENIED`
/// (not granted), `SANDBOX_UNAVAILABLE`, `INVALID_INPUT` (e.g. a working
/// directory outside the grant), `SPAWN_FAILED`.
impl From<crate::process::SpawnError> for ToolError {
    fn from(e: crate::process::SpawnError) -> Self {
        use crate::process::SpawnError as E;
        match e {
            E::NotGranted(m) => ToolError::permission_denied(m),
            E::SandboxUnavailable(m) => ToolError::new("SANDBOX_UNAVAILABLE", m),
            E::InvalidRequest(m) => ToolError::invalid_input(m),
            E::Failed(m) => ToolError::new("SPAWN_FAILED", m),
        }
    }
}
