//! Short, model-friendly renderings of values for violation messages.
//!
//! A violation is read by a language model that must fix its call, so it
//! names types the way JSON Schema does and quotes scalars as JSON, but never
//! echoes a long string or a whole object back (that costs tokens and can
//! carry the very injection a policy is meant to stop).

use serde_json::Value;

/// Longest string (in characters) quoted in full.
const MAX_QUOTED_CHARS: usize = 40;
/// Longest rendering of a schema constant.
const MAX_CONSTANT_CHARS: usize = 80;

/// `s` cut to `max_chars` characters, with `…` when cut.
pub(crate) fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        None => s.to_owned(),
        Some((cut, _)) => format!("{}…", &s[..cut]),
    }
}

/// `s` as a JSON string literal, shortened if long.
pub(crate) fn quote(s: &str) -> String {
    let count = s.chars().count();
    if count <= MAX_QUOTED_CHARS {
        json_quote(s)
    } else {
        let cut = s
            .char_indices()
            .nth(MAX_QUOTED_CHARS)
            .map_or(s.len(), |(i, _)| i);
        let quoted = json_quote(&s[..cut]);
        format!("{}…\" ({count} characters)", &quoted[..quoted.len() - 1])
    }
}

fn json_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

/// The JSON Schema type name of a value (`integer` for whole numbers).
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_integer(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether a number is whole (so matches `type: integer`): `1` and `1.0` are.
pub(crate) fn is_integer(n: &serde_json::Number) -> bool {
    n.is_i64()
        || n.is_u64()
        || n.as_f64()
            .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

/// A value as the model would recognise it: scalars as JSON, containers by
/// kind and size. Used for `got` after an `enum`/`const` mismatch.
pub(crate) fn short(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quote(s),
        Value::Array(items) => match items.len() {
            0 => "empty array".to_owned(),
            1 => "array of 1 item".to_owned(),
            n => format!("array of {n} items"),
        },
        Value::Object(map) => match map.len() {
            0 => "empty object".to_owned(),
            1 => "object with 1 property".to_owned(),
            n => format!("object with {n} properties"),
        },
    }
}

/// A value prefixed by its type: `string "ten"`, `number 1.5`, `object`.
/// Used for `got` after a `type` mismatch.
pub(crate) fn typed(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {}", quote(s)),
        Value::Array(_) | Value::Object(_) => short(v),
    }
}

/// A constant from a schema, as compact JSON (shortened if long). Schema
/// constants are at most [`MAX_VALUE_DEPTH`](crate::MAX_VALUE_DEPTH) deep,
/// so serializing them is safe.
pub(crate) fn constant(v: &Value) -> String {
    match v {
        Value::String(s) => quote(s),
        Value::Array(_) | Value::Object(_) => {
            let text = serde_json::to_string(v).unwrap_or_else(|_| short(v));
            truncate(&text, MAX_CONSTANT_CHARS)
        }
        _ => short(v),
    }
}

/// `a`, `a or b`, `a, b or c`.
pub(crate) fn or_list<S: AsRef<str>>(items: &[S]) -> String {
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(if i + 1 == items.len() { " or " } else { ", " });
        }
        out.push_str(item.as_ref());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_values_briefly() {
        assert_eq!(typed(&json!("ten")), "string \"ten\"");
        assert_eq!(typed(&json!(1.5)), "number 1.5");
        assert_eq!(typed(&json!(true)), "boolean true");
        assert_eq!(typed(&json!(null)), "null");
        assert_eq!(typed(&json!({"a": 1})), "object with 1 property");
        assert_eq!(short(&json!([1, 2])), "array of 2 items");
        assert_eq!(short(&json!("a\"b")), r#""a\"b""#);
        assert_eq!(constant(&json!({"k": [1]})), r#"{"k":[1]}"#);
    }

    #[test]
    fn long_strings_are_cut_on_a_character_boundary() {
        let long = "é".repeat(100);
        let q = quote(&long);
        assert!(q.starts_with("\"éééé"));
        assert!(q.ends_with("…\" (100 characters)"), "{q}");
        assert_eq!(q.chars().filter(|&c| c == 'é').count(), 40);
        assert_eq!(truncate("abc", 2), "ab…");
        assert_eq!(truncate("abc", 3), "abc");
    }

    #[test]
    fn whole_numbers_are_integers() {
        assert_eq!(type_name(&json!(1)), "integer");
        assert_eq!(type_name(&json!(1.0)), "integer");
        assert_eq!(type_name(&json!(-0.0)), "integer");
        assert_eq!(type_name(&json!(1.5)), "number");
    }

    #[test]
    fn lists() {
        assert_eq!(or_list(&["a"]), "a");
        assert_eq!(or_list(&["a", "b"]), "a or b");
        assert_eq!(or_list(&["a", "b", "c"]), "a, b or c");
    }
}
