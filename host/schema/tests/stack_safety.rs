//! Deep schemas and deep arguments give an error or a result, never a stack
//! overflow. Each test runs on a thread with a deliberately small stack, so
//! that recursion proportional to depth would crash here first.

use serde_json::{Value, json};
use toolgate_schema::{Limits, Schema, SnapshotErrorKind, check_value, parse, parse_bytes};

const DEPTH: usize = 100_000;
/// Far less than any platform's default; recursion per level would need MBs.
const SMALL_STACK: usize = 256 * 1024;

fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(f)
        .expect("spawn test thread")
        .join()
        .expect("test thread panicked");
}

/// `serde_json::Value`'s own drop recurses: take deep values apart by hand.
fn drop_deep(value: Value) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(members) => stack.extend(members.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// A schema nested `depth` times through `keyword`.
fn deep_schema(depth: usize, wrap: impl Fn(Value) -> Value) -> Value {
    let mut schema = json!({"type": "integer"});
    for _ in 0..depth {
        schema = wrap(schema);
    }
    schema
}

/// `{key: value, ..rest}`, built by moving `value` in: `json!` would go
/// through `serde_json::to_value`, which recurses over `value`.
fn object_of(key: &str, value: Value) -> Value {
    with(json!({}), key, value)
}

fn with(mut object: Value, key: &str, value: Value) -> Value {
    if let Value::Object(map) = &mut object {
        map.insert(key.to_owned(), value);
    }
    object
}

/// Wraps a schema in one more level.
type Wrap = fn(Value) -> Value;

#[test]
fn deep_schemas_compile_and_validate() {
    on_small_stack(|| {
        let wrappers: [(&str, Wrap); 11] = [
            ("properties", |s| {
                let schema = json!({"type": "object", "required": ["a"]});
                with(schema, "properties", object_of("a", s))
            }),
            ("items", |s| with(json!({"type": "array"}), "items", s)),
            ("oneOf", |s| {
                object_of("oneOf", Value::Array(vec![s, json!({"type": "string"})]))
            }),
            ("additionalProperties", |s| {
                with(json!({"type": "object"}), "additionalProperties", s)
            }),
            ("allOf", |s| {
                object_of("allOf", Value::Array(vec![s, json!({})]))
            }),
            ("anyOf", |s| {
                object_of("anyOf", Value::Array(vec![s, json!({"type": "string"})]))
            }),
            // An even number of `not`s: the innermost schema again.
            ("not", |s| object_of("not", s)),
            ("if", |s| {
                with(json!({"then": true, "else": false}), "if", s)
            }),
            ("prefixItems", |s| {
                with(
                    json!({"type": "array"}),
                    "prefixItems",
                    Value::Array(vec![s]),
                )
            }),
            ("patternProperties", |s| {
                with(
                    json!({"type": "object"}),
                    "patternProperties",
                    object_of("^a", s),
                )
            }),
            ("contains", |s| {
                with(json!({"minContains": 0}), "contains", s)
            }),
        ];
        for (name, wrap) in wrappers {
            let schema_json = deep_schema(DEPTH, wrap);
            let schema = Schema::compile(&schema_json)
                .unwrap_or_else(|e| panic!("{name}: a deep schema compiles: {e}"));
            // Shallow instances validate as usual.
            match name {
                "properties" => {
                    let v = schema.validate(&json!({})).unwrap_err();
                    assert_eq!(v[0].path, "/a");
                }
                "items" | "prefixItems" => assert!(schema.is_valid(&json!([]))),
                // Only the innermost `{"type": "integer"}` takes a number.
                "oneOf" | "allOf" | "not" | "if" => {
                    assert!(schema.is_valid(&json!(5)), "{name}");
                    assert!(!schema.is_valid(&json!("s")), "{name}");
                }
                "anyOf" => {
                    assert!(schema.is_valid(&json!(5)));
                    assert!(schema.is_valid(&json!("s")));
                    assert!(!schema.is_valid(&json!(null)));
                }
                _ => assert!(schema.is_valid(&json!({}))),
            }
            // Dropping the compiled schema is flat; its source is not.
            drop(schema);
            drop_deep(schema_json);
        }
    });
}

#[test]
fn deep_schema_error_has_a_full_pointer() {
    on_small_stack(|| {
        let mut schema_json = json!({"type": "array", "unevaluatedItems": false});
        for _ in 0..DEPTH {
            schema_json = object_of("items", schema_json);
        }
        let err = Schema::compile(&schema_json).unwrap_err();
        assert_eq!(err.keyword.as_deref(), Some("unevaluatedItems"));
        assert_eq!(err.pointer.len(), "/items".len() * DEPTH);
        drop_deep(schema_json);
    });
}

#[test]
fn deep_argument_text_is_refused_by_the_depth_limit() {
    on_small_stack(|| {
        let text = "[".repeat(DEPTH) + &"]".repeat(DEPTH);
        let err = parse(&text, &Limits::default()).unwrap_err();
        assert_eq!(err.kind, SnapshotErrorKind::TooDeep { max_depth: 64 });
        assert_eq!(err.pointer, "/0".repeat(64));
        assert_eq!(
            err.to_string(),
            format!(
                "nesting deeper than 64 levels at {} (line 1, column 65)",
                "/0".repeat(64)
            )
        );

        let text = "{\"a\":".repeat(DEPTH) + "1" + &"}".repeat(DEPTH);
        let err = parse_bytes(text.as_bytes(), &Limits::default()).unwrap_err();
        assert_eq!(err.kind, SnapshotErrorKind::TooDeep { max_depth: 64 });

        // Even unclosed, and even with the limit raised, the reader itself
        // never recurses (it fails on the missing brackets instead).
        let text = "[".repeat(DEPTH);
        let huge = Limits {
            max_depth: usize::MAX,
            max_bytes: usize::MAX,
        };
        let err = parse(&text, &huge).unwrap_err();
        assert!(matches!(err.kind, SnapshotErrorKind::Syntax(_)), "{err}");
    });
}

#[test]
fn deep_in_memory_arguments_are_checked_and_validated() {
    on_small_stack(|| {
        let mut deep = json!(1);
        for _ in 0..DEPTH {
            deep = Value::Array(vec![deep]);
        }
        let err = check_value(&deep, &Limits::default()).unwrap_err();
        assert_eq!(err.kind, SnapshotErrorKind::TooDeep { max_depth: 64 });
        assert_eq!(err.pointer, "/0".repeat(64));

        // The validator itself needs no limit: against a shallow schema it
        // stops where the schema stops, against a deep one it keeps going.
        let shallow = Schema::compile(&json!({"type": "array"})).unwrap();
        assert!(shallow.is_valid(&deep));
        let schema_json = deep_schema(DEPTH, |s| with(json!({"type": "array"}), "items", s));
        let schema = Schema::compile(&schema_json).unwrap();
        assert!(schema.is_valid(&deep));

        // A wrong leaf 100,000 levels down is reported with its full path.
        let mut wrong = json!("leaf");
        for _ in 0..DEPTH {
            wrong = Value::Array(vec![wrong]);
        }
        let violations = schema.validate(&wrong).unwrap_err();
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].path, "/0".repeat(DEPTH));
        assert_eq!(violations[0].expected, "integer");

        // Deep objects, and deep values under an unconstrained schema.
        let mut deep_object = json!(null);
        for _ in 0..DEPTH {
            deep_object = object_of("k", deep_object);
        }
        assert!(Schema::compile(&json!({})).unwrap().is_valid(&deep_object));
        assert!(check_value(&deep_object, &Limits::default()).is_err());

        drop_deep(deep);
        drop_deep(wrong);
        drop_deep(deep_object);
        drop_deep(schema_json);
    });
}

#[test]
fn deep_constants_are_refused_not_cloned() {
    on_small_stack(|| {
        let mut deep = json!(1);
        for _ in 0..DEPTH {
            deep = Value::Array(vec![deep]);
        }
        let schema_json = object_of("const", deep);
        let err = Schema::compile(&schema_json).unwrap_err();
        assert_eq!(err.keyword.as_deref(), Some("const"));
        assert!(err.message.contains("nesting deeper than 128"), "{err}");
        drop_deep(schema_json);
    });
}
