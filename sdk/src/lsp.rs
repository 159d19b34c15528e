//! The `lsp` seam (since contract 0.2.4): questions to the language
//! servers the operator configured (`[lsp]`), about files in the
//! component's preopened `fs` grants. The host picks the server by the
//! file's extension, starts it for the file's project (sandboxed, the
//! project read-only), sends it the file as it is on disk now, and turns
//! the server's `file://` URIs into guest paths (and guest paths under
//! `uri` keys of `params` into its URIs).

use crate::bindings::toolgate::plugin::lsp as raw;
pub use crate::bindings::toolgate::plugin::lsp::LspError;

/// Ask `method` about `file` with `params` (a JSON object; for
/// `textDocument/*` methods the host sets `textDocument`), waiting at
/// most `timeout_ms` (0: 30 s). Returns the result as JSON.
pub fn request(
    file: &str,
    method: &str,
    params: &serde_json::Value,
    timeout_ms: u32,
) -> Result<serde_json::Value, LspError> {
    let answer = raw::request(file, method, &params.to_string(), timeout_ms)?;
    serde_json::from_str(&answer)
        .map_err(|e| LspError::Server(format!("the host's answer is not JSON: {e}")))
}

/// The diagnostics of `file` as it is now (a JSON array of LSP
/// diagnostics), waiting at most `wait_ms` (0: 10 s) for the server to
/// publish them.
pub fn diagnostics(file: &str, wait_ms: u32) -> Result<serde_json::Value, LspError> {
    let answer = raw::diagnostics(file, wait_ms)?;
    serde_json::from_str(&answer)
        .map_err(|e| LspError::Server(format!("the host's answer is not JSON: {e}")))
}

/// What an error says (each case carries a sentence for the model).
pub fn message(e: &LspError) -> &str {
    match e {
        LspError::NotConfigured(m)
        | LspError::Refused(m)
        | LspError::Server(m)
        | LspError::Timeout(m)
        | LspError::InvalidRequest(m) => m,
    }
}

/// One LSP diagnostic of `file` on one line:
/// `file:line:column: severity: message [code] (source)`, 1-based;
/// `line_text` (the text of the diagnostic's line, when the caller has it)
/// turns the server's UTF-16 column into characters.
pub fn diagnostic_line(file: &str, d: &serde_json::Value, line_text: Option<&str>) -> String {
    use serde_json::Value;
    let severity = match d["severity"].as_u64() {
        Some(1) => "error",
        Some(2) => "warning",
        Some(3) => "info",
        Some(4) => "hint",
        _ => "diagnostic",
    };
    let line = d["range"]["start"]["line"].as_u64().unwrap_or(0) + 1;
    let utf16 = d["range"]["start"]["character"].as_u64().unwrap_or(0) as usize;
    let column = line_text.map_or(utf16, |l| chars_of_utf16(l, utf16)) + 1;
    let code = match &d["code"] {
        Value::String(s) => format!(" [{s}]"),
        Value::Number(n) => format!(" [{n}]"),
        _ => String::new(),
    };
    let source = d["source"]
        .as_str()
        .map(|s| format!(" ({s})"))
        .unwrap_or_default();
    format!(
        "{file}:{line}:{column}: {severity}: {}{code}{source}",
        d["message"].as_str().unwrap_or("").trim()
    )
}

/// How many characters of `line` its first `utf16` UTF-16 units hold (LSP
/// counts columns in UTF-16 units).
pub fn chars_of_utf16(line: &str, utf16: usize) -> usize {
    let mut units = 0;
    for (i, c) in line.chars().enumerate() {
        if units >= utf16 {
            return i;
        }
        units += c.len_utf16();
    }
    line.chars().count()
}
