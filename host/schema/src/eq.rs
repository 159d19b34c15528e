//! JSON equality as JSON Schema defines it for `enum` and `const`.
//!
//! `serde_json::Value`'s `==` differs in two ways that matter here: it tells
//! `1` from `1.0` (JSON Schema says they are equal), and it recurses. This
//! one compares numbers by value and keeps its own work list.

use serde_json::{Number, Value};

/// Whether `a` and `b` are the same JSON value (numbers by value, object
/// members in any order).
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    let mut work = vec![(a, b)];
    while let Some(pair) = work.pop() {
        match pair {
            (Value::Null, Value::Null) => {}
            (Value::Bool(x), Value::Bool(y)) if x == y => {}
            (Value::Number(x), Value::Number(y)) if number_eq(x, y) => {}
            (Value::String(x), Value::String(y)) if x == y => {}
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                work.extend(x.iter().zip(y));
            }
            (Value::Object(x), Value::Object(y)) if x.len() == y.len() => {
                for (key, v) in x {
                    match y.get(key) {
                        Some(w) => work.push((v, w)),
                        None => return false,
                    }
                }
            }
            _ => return false,
        }
    }
    true
}

fn number_eq(x: &Number, y: &Number) -> bool {
    if x.is_f64() || y.is_f64() {
        return x.as_f64() == y.as_f64();
    }
    let wide = |n: &Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    wide(x) == wide(y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value() {
        assert!(json_eq(&json!(1), &json!(1.0)));
        assert!(json_eq(&json!([1, {"a": 2.0}]), &json!([1.0, {"a": 2}])));
        assert!(!json_eq(&json!(1), &json!(1.5)));
        assert!(!json_eq(&json!(-1), &json!(u64::MAX)));
        assert!(json_eq(&json!(u64::MAX), &json!(u64::MAX)));
    }

    #[test]
    fn objects_ignore_member_order() {
        assert!(json_eq(&json!({"a": 1, "b": 2}), &json!({"b": 2, "a": 1})));
        assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(!json_eq(&json!({"a": 1}), &json!({"b": 1})));
    }

    #[test]
    fn types_must_match() {
        assert!(!json_eq(&json!(null), &json!(false)));
        assert!(!json_eq(&json!("1"), &json!(1)));
        assert!(!json_eq(&json!([]), &json!({})));
        assert!(!json_eq(&json!([1]), &json!([1, 1])));
    }
}
