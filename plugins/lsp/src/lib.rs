//! The `lsp` tool: code intelligence from the language servers the host
//! runs (`[lsp]`: rust-analyzer, pyright, typescript-language-server,
//! clangd, gopls), through the host's `lsp` seam.
//!
//! The operations are the ones the agents people use expose (Claude
//! Code's LSP tool): `definition`, `references`, `hover`,
//! `documentSymbol`, `workspaceSymbol`, `implementation`, `incomingCalls`,
//! `outgoingCalls`, `diagnostics` and `rename`. Positions are 1-based, and
//! a symbol may be named instead of a column — models are poor at columns
//! — which is found on the line here. `rename` never writes: it returns the
//! server's edit as a unified diff, for the model to apply with `edit`
//! (so approval and guards see the change).
//!
//! The host translates paths: the server's answers name files as this
//! component would open them, so each location is shown with its line.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate_sdk::lsp::{self, LspError, chars_of_utf16};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError};

/// Locations, symbols or diagnostics shown at most; the rest are counted.
pub const MAX_SHOWN: usize = 200;
/// The longest diff `rename` returns: 256 KiB.
pub const MAX_DIFF_BYTES: usize = 256 << 10;
/// How long one question may wait for the server, a cold start and its
/// first indexing included (the host caps it at 120 s).
pub const REQUEST_MS: u32 = 110_000;
/// How long `diagnostics` waits for the server to publish.
pub const DIAGNOSTICS_MS: u32 = 20_000;

/// What to ask.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Schema)]
#[serde(rename_all = "camelCase")]
pub enum Operation {
    Definition,
    References,
    Hover,
    DocumentSymbol,
    WorkspaceSymbol,
    Implementation,
    IncomingCalls,
    OutgoingCalls,
    Diagnostics,
    Rename,
}

impl Operation {
    fn name(self) -> &'static str {
        match self {
            Operation::Definition => "definition",
            Operation::References => "references",
            Operation::Hover => "hover",
            Operation::DocumentSymbol => "documentSymbol",
            Operation::WorkspaceSymbol => "workspaceSymbol",
            Operation::Implementation => "implementation",
            Operation::IncomingCalls => "incomingCalls",
            Operation::OutgoingCalls => "outgoingCalls",
            Operation::Diagnostics => "diagnostics",
            Operation::Rename => "rename",
        }
    }

    fn needs_position(self) -> bool {
        !matches!(
            self,
            Operation::DocumentSymbol | Operation::WorkspaceSymbol | Operation::Diagnostics
        )
    }
}

/// Ask the language server about code: where a symbol is defined
/// (`definition`, `implementation`), where it is used (`references`), its
/// type and docs (`hover`), a file's outline (`documentSymbol`), symbols
/// by name across the project (`workspaceSymbol`, with `query`), who
/// calls a function and what it calls (`incomingCalls`, `outgoingCalls`),
/// the compiler's errors and warnings in a file now (`diagnostics`), and
/// a rename across the project (`rename`, with `new_name`: returns a diff
/// to apply with `edit`; nothing is written). Positions: `line` is
/// 1-based; give `symbol` (its name as written on that line) rather than
/// `column` (1-based, in characters) when you can.
#[derive(Deserialize, Schema)]
pub struct Lsp {
    /// What to ask.
    operation: Operation,
    /// The file the question is about (for `workspaceSymbol`: any file
    /// of the project, which picks the language server).
    file: String,
    /// The line, 1-based (operations about a position).
    line: Option<u32>,
    /// The symbol's name on that line (instead of `column`).
    symbol: Option<String>,
    /// The column, 1-based, in characters (when `symbol` is not given).
    column: Option<u32>,
    /// `workspaceSymbol`: the name (or part of it) to look for.
    query: Option<String>,
    /// `rename`: the new name.
    new_name: Option<String>,
    /// `references`: include the declaration itself (default true).
    include_declaration: Option<bool>,
}

/// What the server answered.
#[derive(Serialize, Deserialize, Schema)]
pub struct Answer {
    /// The operation.
    operation: String,
    /// The answer as text: locations as `path:line:column` with their
    /// line, symbols, diagnostics, hover text.
    text: String,
    /// How many results the server gave.
    count: u32,
    /// `rename`: the unified diff of the edit (not applied).
    diff: Option<String>,
}

fn tool_error(e: LspError) -> ToolError {
    match e {
        LspError::NotConfigured(m) => ToolError::new("NOT_CONFIGURED", m),
        LspError::Refused(m) => ToolError::permission_denied(m),
        LspError::Server(m) => ToolError::new("SERVER_ERROR", m),
        LspError::Timeout(m) => ToolError::new("TIMEOUT", m),
        LspError::InvalidRequest(m) => ToolError::invalid_input(m),
    }
}

impl Tool for Lsp {
    const NAME: &'static str = "lsp";
    type Output = Answer;

    fn execute(self, _call: &Call) -> Result<Answer, ToolError> {
        let op = self.operation;
        let position = if op.needs_position() {
            Some(self.position()?)
        } else {
            None
        };
        let ask = |method: &str, params: Value| {
            lsp::request(&self.file, method, &params, REQUEST_MS).map_err(tool_error)
        };
        let pos = || json!({ "position": position.clone().expect("a position") });
        let (text, count, diff) = match op {
            Operation::Definition | Operation::Implementation => {
                let method = if op == Operation::Definition {
                    "textDocument/definition"
                } else {
                    "textDocument/implementation"
                };
                let found = locations(&ask(method, pos())?);
                (show_locations(&found), found.len(), None)
            }
            Operation::References => {
                let mut params = pos();
                params["context"] =
                    json!({ "includeDeclaration": self.include_declaration.unwrap_or(true) });
                let found = locations(&ask("textDocument/references", params)?);
                (show_locations(&found), found.len(), None)
            }
            Operation::Hover => {
                let answer = ask("textDocument/hover", pos())?;
                let text = hover_text(&answer["contents"]);
                let n = usize::from(!text.is_empty());
                (
                    if text.is_empty() {
                        "No hover information here.".into()
                    } else {
                        text
                    },
                    n,
                    None,
                )
            }
            Operation::DocumentSymbol => {
                let answer = ask("textDocument/documentSymbol", json!({}))?;
                let mut lines = Vec::new();
                outline(&answer, 0, &mut lines);
                (shown(lines.clone(), "No symbols."), lines.len(), None)
            }
            Operation::WorkspaceSymbol => {
                let query = self
                    .query
                    .clone()
                    .ok_or_else(|| ToolError::invalid_input("`workspaceSymbol` needs `query`"))?;
                let answer = ask("workspace/symbol", json!({ "query": query }))?;
                let lines: Vec<String> = answer
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|s| {
                        let at = locations(&s["location"]);
                        let place = at
                            .first()
                            .map_or(String::new(), |l| format!(" — {}", l.at()));
                        format!(
                            "{} {}{}",
                            kind_name(&s["kind"]),
                            s["name"].as_str().unwrap_or("?"),
                            place
                        )
                    })
                    .collect();
                (shown(lines.clone(), "No symbols match."), lines.len(), None)
            }
            Operation::IncomingCalls | Operation::OutgoingCalls => {
                let items = ask("textDocument/prepareCallHierarchy", pos())?;
                let Some(item) = items.as_array().and_then(|a| a.first()).cloned() else {
                    return Ok(Answer {
                        operation: op.name().into(),
                        text: "No function or method at this position.".into(),
                        count: 0,
                        diff: None,
                    });
                };
                let (method, side) = if op == Operation::IncomingCalls {
                    ("callHierarchy/incomingCalls", "from")
                } else {
                    ("callHierarchy/outgoingCalls", "to")
                };
                let calls = ask(method, json!({ "item": item }))?;
                let lines: Vec<String> = calls
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        let it = &c[side];
                        let at = Location::of(&it["uri"], &it["selectionRange"]);
                        format!(
                            "{} {} — {}",
                            kind_name(&it["kind"]),
                            it["name"].as_str().unwrap_or("?"),
                            at.map_or("?".into(), |l| l.at())
                        )
                    })
                    .collect();
                let none = if op == Operation::IncomingCalls {
                    "No callers."
                } else {
                    "No calls."
                };
                (shown(lines.clone(), none), lines.len(), None)
            }
            Operation::Diagnostics => {
                let found = lsp::diagnostics(&self.file, DIAGNOSTICS_MS).map_err(tool_error)?;
                let lines: Vec<String> = found
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|d| diagnostic_line(&self.file, d))
                    .collect();
                (shown(lines.clone(), "No diagnostics."), lines.len(), None)
            }
            Operation::Rename => {
                let new_name = self
                    .new_name
                    .clone()
                    .ok_or_else(|| ToolError::invalid_input("`rename` needs `new_name`"))?;
                let mut params = pos();
                params["newName"] = Value::String(new_name);
                let edit = ask("textDocument/rename", params)?;
                let (diff, files, notes) = rename_diff(&edit)?;
                let mut text = if files == 0 {
                    "The server proposes no change here.".to_string()
                } else {
                    format!(
                        "The rename changes {files} file{}. Nothing was written: apply the diff with `edit`.",
                        if files == 1 { "" } else { "s" }
                    )
                };
                for n in notes {
                    text.push('\n');
                    text.push_str(&n);
                }
                (text, files, (!diff.is_empty()).then_some(diff))
            }
        };
        Ok(Answer {
            operation: op.name().into(),
            text,
            count: count as u32,
            diff,
        })
    }

    fn render(a: Answer) -> Vec<ContentBlock> {
        let mut text = a.text;
        if let Some(diff) = a.diff {
            text.push_str("\n\n");
            text.push_str(&diff);
        }
        vec![Content::text(text)]
    }

    fn output_schema() -> Option<Value> {
        Some(Answer::schema())
    }

    fn timeout_ms() -> Option<u32> {
        // Above the longest wait for the server (the host's 120 s cap).
        Some(125_000)
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

impl Lsp {
    /// The LSP position (0-based line, UTF-16 character) of `line` and
    /// `symbol` or `column`.
    fn position(&self) -> Result<Value, ToolError> {
        let line_no = self.line.filter(|l| *l >= 1).ok_or_else(|| {
            ToolError::invalid_input(format!(
                "`{}` needs `line` (1-based) and `symbol` or `column`",
                self.operation.name()
            ))
        })?;
        let text =
            std::fs::read_to_string(&self.file).map_err(|e| ToolError::from_io(e, &self.file))?;
        let line = text.lines().nth(line_no as usize - 1).ok_or_else(|| {
            ToolError::invalid_input(format!(
                "`{}` has {} lines; there is no line {line_no}",
                self.file,
                text.lines().count()
            ))
        })?;
        let chars = match (&self.symbol, self.column) {
            (Some(symbol), _) => find_symbol(line, symbol).ok_or_else(|| {
                ToolError::invalid_input(format!(
                    "`{symbol}` is not on line {line_no} of `{}`: {}",
                    self.file,
                    line.trim()
                ))
            })?,
            (None, Some(c)) if c >= 1 => c as usize - 1,
            _ => {
                return Err(ToolError::invalid_input(
                    "give `symbol` (its name on the line) or `column` (1-based)",
                ));
            }
        };
        let character: usize = line.chars().take(chars).map(char::len_utf16).sum();
        Ok(json!({ "line": line_no - 1, "character": character }))
    }
}

/// The character index of `symbol` on `line`: the first occurrence that is
/// a whole word, else the first at all.
pub fn find_symbol(line: &str, symbol: &str) -> Option<usize> {
    if symbol.is_empty() {
        return None;
    }
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let whole = line.match_indices(symbol).find(|(i, _)| {
        !word(line[..*i].chars().next_back()) && !word(line[i + symbol.len()..].chars().next())
    });
    let (i, _) = whole.or_else(|| line.match_indices(symbol).next())?;
    Some(line[..i].chars().count())
}

/// A place in a file, 1-based, in characters.
#[derive(Clone, Debug, PartialEq)]
pub struct Location {
    pub path: String,
    pub line: u32,
    pub column: u32,
}

impl Location {
    fn of(uri: &Value, range: &Value) -> Option<Location> {
        let path = uri.as_str()?.to_string();
        let line = range["start"]["line"].as_u64()? as u32;
        let utf16 = range["start"]["character"].as_u64()? as usize;
        let column = source_line(&path, line).map_or(utf16, |l| chars_of_utf16(&l, utf16)) + 1;
        Some(Location {
            path,
            line: line + 1,
            column: column as u32,
        })
    }

    fn at(&self) -> String {
        format!("{}:{}:{}", self.path, self.line, self.column)
    }
}

/// Line `line` (0-based) of the file at `path`, when it is one this
/// component can read.
fn source_line(path: &str, line: u32) -> Option<String> {
    if path.contains("://") {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().nth(line as usize).map(str::to_string)
}

/// The locations of a `Location`, `Location[]` or `LocationLink[]`.
pub fn locations(answer: &Value) -> Vec<Location> {
    let one = |v: &Value| {
        if v.get("targetUri").is_some() {
            let range = if v["targetSelectionRange"].is_object() {
                &v["targetSelectionRange"]
            } else {
                &v["targetRange"]
            };
            Location::of(&v["targetUri"], range)
        } else {
            Location::of(&v["uri"], &v["range"])
        }
    };
    match answer {
        Value::Array(a) => a.iter().filter_map(one).collect(),
        Value::Object(_) => one(answer).into_iter().collect(),
        _ => Vec::new(),
    }
}

fn show_locations(found: &[Location]) -> String {
    let lines: Vec<String> = found
        .iter()
        .map(|l| match source_line(&l.path, l.line - 1) {
            Some(text) => format!("{}: {}", l.at(), text.trim()),
            None => l.at(),
        })
        .collect();
    shown(lines, "Nothing found.")
}

/// At most [`MAX_SHOWN`] lines, the rest counted; `none` when empty.
fn shown(lines: Vec<String>, none: &str) -> String {
    if lines.is_empty() {
        return none.to_string();
    }
    let total = lines.len();
    let mut text = lines
        .into_iter()
        .take(MAX_SHOWN)
        .collect::<Vec<_>>()
        .join("\n");
    if total > MAX_SHOWN {
        text.push_str(&format!("\n… and {} more", total - MAX_SHOWN));
    }
    text
}

/// Hover contents (`MarkupContent`, `MarkedString` or a list of them) as
/// text.
pub fn hover_text(contents: &Value) -> String {
    match contents {
        Value::String(s) => s.trim().to_string(),
        Value::Array(a) => a
            .iter()
            .map(hover_text)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n"),
        Value::Object(o) => match (o.get("language"), o.get("value")) {
            (Some(lang), Some(v)) => format!(
                "```{}\n{}\n```",
                lang.as_str().unwrap_or(""),
                v.as_str().unwrap_or("").trim()
            ),
            (None, Some(v)) => v.as_str().unwrap_or("").trim().to_string(),
            _ => String::new(),
        },
        _ => String::new(),
    }
}

/// LSP's `SymbolKind` by number.
fn kind_name(kind: &Value) -> &'static str {
    const KINDS: [&str; 26] = [
        "file",
        "module",
        "namespace",
        "package",
        "class",
        "method",
        "property",
        "field",
        "constructor",
        "enum",
        "interface",
        "function",
        "variable",
        "constant",
        "string",
        "number",
        "boolean",
        "array",
        "object",
        "key",
        "null",
        "enum-member",
        "struct",
        "event",
        "operator",
        "type-parameter",
    ];
    kind.as_u64()
        .and_then(|k| KINDS.get((k as usize).wrapping_sub(1)))
        .copied()
        .unwrap_or("symbol")
}

/// A `documentSymbol` answer (hierarchical or flat) as indented lines.
fn outline(symbols: &Value, depth: usize, out: &mut Vec<String>) {
    for s in symbols.as_array().into_iter().flatten() {
        let range = if s["selectionRange"].is_object() {
            &s["selectionRange"]
        } else {
            &s["location"]["range"]
        };
        let line = range["start"]["line"].as_u64().map_or(0, |l| l + 1);
        let detail = s["detail"]
            .as_str()
            .filter(|d| !d.is_empty())
            .map(|d| format!(" — {d}"))
            .unwrap_or_default();
        out.push(format!(
            "{}{} {} (line {line}){detail}",
            "  ".repeat(depth),
            kind_name(&s["kind"]),
            s["name"].as_str().unwrap_or("?")
        ));
        outline(&s["children"], depth + 1, out);
    }
}

fn diagnostic_line(file: &str, d: &Value) -> String {
    let line = d["range"]["start"]["line"].as_u64().unwrap_or(0) as u32;
    lsp::diagnostic_line(file, d, source_line(file, line).as_deref())
}

/// The byte offset in `text` of an LSP position (0-based line, UTF-16
/// character), clamped to the line's end.
pub fn offset(text: &str, line: u64, character: u64) -> Option<usize> {
    let mut start = 0;
    for _ in 0..line {
        start += text[start..].find('\n')? + 1;
    }
    let rest = &text[start..];
    let end = rest.find('\n').unwrap_or(rest.len());
    let mut units = 0u64;
    for (i, c) in rest[..end].char_indices() {
        if units >= character {
            return Some(start + i);
        }
        units += c.len_utf16() as u64;
    }
    Some(start + end)
}

/// `edits` (LSP `TextEdit`s) applied to `text`.
pub fn apply_edits(text: &str, edits: &[Value]) -> Result<String, String> {
    let mut spans = Vec::new();
    for e in edits {
        let r = &e["range"];
        let at = |p: &Value| {
            offset(
                text,
                p["line"].as_u64().unwrap_or(u64::MAX),
                p["character"].as_u64().unwrap_or(0),
            )
        };
        let (Some(a), Some(b)) = (at(&r["start"]), at(&r["end"])) else {
            return Err("the server's edit names a line past the file's end".into());
        };
        if b < a {
            return Err("the server's edit ends before it starts".into());
        }
        spans.push((a, b, e["newText"].as_str().unwrap_or("").to_string()));
    }
    spans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut out = text.to_string();
    let mut last = usize::MAX;
    for (a, b, new) in spans {
        if b > last {
            return Err("the server's edits overlap".into());
        }
        out.replace_range(a..b, &new);
        last = a;
    }
    Ok(out)
}

/// A `WorkspaceEdit` as a unified diff of every file it changes: the diff,
/// the number of files, and notes on what a diff cannot show (files to
/// create, rename or delete).
pub fn rename_diff(edit: &Value) -> Result<(String, usize, Vec<String>), ToolError> {
    let mut per_file: Vec<(String, Vec<Value>)> = Vec::new();
    let mut notes = Vec::new();
    if let Some(changes) = edit["changes"].as_object() {
        for (path, edits) in changes {
            per_file.push((path.clone(), edits.as_array().cloned().unwrap_or_default()));
        }
    }
    for change in edit["documentChanges"].as_array().into_iter().flatten() {
        match change["kind"].as_str() {
            Some("create") => notes.push(format!(
                "Also create `{}`.",
                change["uri"].as_str().unwrap_or("?")
            )),
            Some("rename") => notes.push(format!(
                "Also rename `{}` to `{}`.",
                change["oldUri"].as_str().unwrap_or("?"),
                change["newUri"].as_str().unwrap_or("?")
            )),
            Some("delete") => notes.push(format!(
                "Also delete `{}`.",
                change["uri"].as_str().unwrap_or("?")
            )),
            _ => per_file.push((
                change["textDocument"]["uri"]
                    .as_str()
                    .unwrap_or("?")
                    .to_string(),
                change["edits"].as_array().cloned().unwrap_or_default(),
            )),
        }
    }
    let mut diff = String::new();
    for (path, edits) in &per_file {
        if path.contains("://") {
            return Err(ToolError::permission_denied(format!(
                "the rename would change `{path}`, outside the files this tool may read"
            )));
        }
        let old = std::fs::read_to_string(path).map_err(|e| ToolError::from_io(e, path))?;
        let new = apply_edits(&old, edits).map_err(ToolError::invalid_input)?;
        diff.push_str(
            &similar::TextDiff::from_lines(&old, &new)
                .unified_diff()
                .context_radius(3)
                .header(&format!("a/{path}"), &format!("b/{path}"))
                .to_string(),
        );
    }
    if diff.len() > MAX_DIFF_BYTES {
        let mut end = MAX_DIFF_BYTES;
        while !diff.is_char_boundary(end) {
            end -= 1;
        }
        diff.truncate(end);
        notes.push(format!(
            "The diff is cut at {MAX_DIFF_BYTES} bytes: rename in smaller steps."
        ));
    }
    Ok((diff, per_file.len(), notes))
}

toolgate_sdk::export! { tools: [Lsp] }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symbol_is_found_as_a_whole_word_first() {
        assert_eq!(find_symbol("let parser = parse(x);", "parse"), Some(13));
        assert_eq!(find_symbol("reparse()", "parse"), Some(2));
        assert_eq!(find_symbol("é = parse()", "parse"), Some(4));
        assert_eq!(find_symbol("nothing", "parse"), None);
    }

    #[test]
    fn positions_count_utf16_and_edits_apply_from_the_end() {
        let text = "fn a() {}\nlet 😀x = a();\n";
        // 😀 is two UTF-16 units: `x` is at character 6.
        assert_eq!(offset(text, 1, 6), Some(10 + 4 + 4));
        let edits = vec![
            json!({"range": {"start": {"line": 0, "character": 3}, "end": {"line": 0, "character": 4}}, "newText": "b"}),
            json!({"range": {"start": {"line": 1, "character": 10}, "end": {"line": 1, "character": 11}}, "newText": "b"}),
        ];
        assert_eq!(
            apply_edits(text, &edits).unwrap(),
            "fn b() {}\nlet 😀x = b();\n"
        );
        let overlapping = vec![
            json!({"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 5}}, "newText": ""}),
            json!({"range": {"start": {"line": 0, "character": 3}, "end": {"line": 0, "character": 4}}, "newText": "b"}),
        ];
        assert!(apply_edits(text, &overlapping).is_err());
        assert_eq!(chars_of_utf16("let 😀x", 6), 5);
    }

    #[test]
    fn locations_links_and_hovers_of_every_shape() {
        let l = locations(
            &json!([{"targetUri": "x.rs", "targetRange": {"start": {"line": 2, "character": 0}}, "targetSelectionRange": {"start": {"line": 3, "character": 4}}}]),
        );
        assert_eq!(
            l,
            vec![Location {
                path: "x.rs".into(),
                line: 4,
                column: 5
            }]
        );
        assert_eq!(
            locations(&json!({"uri": "y.py", "range": {"start": {"line": 0, "character": 0}}}))
                .len(),
            1
        );
        assert!(locations(&Value::Null).is_empty());
        assert_eq!(
            hover_text(&json!({"kind": "markdown", "value": " fn a() "})),
            "fn a()"
        );
        assert_eq!(
            hover_text(&json!([{"language": "rust", "value": "fn a()"}, "docs"])),
            "```rust\nfn a()\n```\n\ndocs"
        );
    }
}
