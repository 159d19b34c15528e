//! JSON equality as JSON Schema defines it for `enum` and `const`.
//!
//! `serde_json::Value`'s `==` differs in two ways that matter here: it tells
//! `1` from `1.0` (JSON Schema says they are equal), and it recurses. This
//! one compares numbers by value and keeps its own work list.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

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

/// The first two items of `items` that are equal (`uniqueItems`), as their
/// indexes. Items are bucketed by a hash that agrees with [`json_eq`]
/// (numbers by value, members in any order) and is keyed afresh per call,
/// so that no instance can be built to collide: linear time, not quadratic.
pub(crate) fn first_duplicate(items: &[Value]) -> Option<(usize, usize)> {
    let keys = RandomState::new();
    let mut seen: HashMap<u64, Vec<usize>> = HashMap::with_capacity(items.len());
    for (j, item) in items.iter().enumerate() {
        let bucket = seen.entry(json_hash(item, &keys)).or_default();
        if let Some(&i) = bucket.iter().find(|&&i| json_eq(&items[i], item)) {
            return Some((i, j));
        }
        bucket.push(j);
    }
    None
}

/// A hash of `value` that equal values share: the sum, over every leaf
/// (scalar or empty container), of a hash of the leaf and its path from the
/// value's root. A sum does not depend on member order. Iterative.
fn json_hash(value: &Value, keys: &RandomState) -> u64 {
    let mut sum = 0u64;
    let mut work: Vec<(&Value, u64)> = vec![(value, 0)];
    while let Some((value, at)) = work.pop() {
        let leaf = match value {
            Value::Null => keys.hash_one((at, 0u8)),
            Value::Bool(b) => keys.hash_one((at, 1u8, *b)),
            Value::Number(n) => {
                // As `number_eq` compares: by value, `-0.0` as `0.0`.
                let f = n.as_f64().unwrap_or(f64::NAN);
                let f = if f == 0.0 { 0.0 } else { f };
                keys.hash_one((at, 2u8, f.to_bits()))
            }
            Value::String(s) => keys.hash_one((at, 3u8, s)),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    work.push((item, keys.hash_one((at, 4u8, i))));
                }
                if !items.is_empty() {
                    continue;
                }
                keys.hash_one((at, 4u8))
            }
            Value::Object(members) => {
                for (key, member) in members {
                    work.push((member, keys.hash_one((at, 5u8, key))));
                }
                if !members.is_empty() {
                    continue;
                }
                keys.hash_one((at, 5u8))
            }
        };
        sum = sum.wrapping_add(leaf);
    }
    sum
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
    fn duplicates_are_found_as_json_eq_finds_them() {
        assert_eq!(
            first_duplicate(&[json!(1), json!(2), json!(1.0)]),
            Some((0, 2))
        );
        assert_eq!(
            first_duplicate(&[
                json!({"a": [1, {}]}),
                json!({"b": 1}),
                json!({"a": [1.0, {}]})
            ]),
            Some((0, 2))
        );
        assert_eq!(
            first_duplicate(&[json!({"a": 1, "b": 2}), json!({"b": 2, "a": 1})]),
            Some((0, 1))
        );
        // Same leaves, other places: different.
        assert_eq!(first_duplicate(&[json!([1, 2]), json!([2, 1])]), None);
        assert_eq!(first_duplicate(&[json!([[]]), json!([]), json!({})]), None);
        assert_eq!(
            first_duplicate(&[json!({"a": {"b": 1}}), json!({"a": 1, "b": 1})]),
            None
        );
        assert_eq!(first_duplicate(&[json!(0.0), json!(-0.0)]), Some((0, 1)));
        // 100,000 distinct items: linear, and no stack.
        let many: Vec<Value> = (0..100_000).map(|i| json!([i, {"k": i}])).collect();
        assert_eq!(first_duplicate(&many), None);
    }

    #[test]
    fn types_must_match() {
        assert!(!json_eq(&json!(null), &json!(false)));
        assert!(!json_eq(&json!("1"), &json!(1)));
        assert!(!json_eq(&json!([]), &json!({})));
        assert!(!json_eq(&json!([1]), &json!([1, 1])));
    }
}
