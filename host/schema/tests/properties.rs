//! Property tests: instances generated from a schema validate; one mutation
//! makes an instance fail with violations that point exactly at the
//! mutation; the snapshot reads back what serde_json writes.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Map, Value, json};
use toolgate_schema::{Limits, Schema, check_value, parse};

/// A schema of the subset, as a tree we can generate instances from.
#[derive(Debug, Clone)]
enum S {
    Any,
    Null,
    Bool,
    Int,
    Num,
    Str,
    /// Lowercase strings, distinct.
    Enum(Vec<String>),
    /// A scalar constant.
    Const(Value),
    /// `type: [t, "null"]` around a scalar type.
    Nullable(Box<S>),
    Array(Box<S>),
    Object(Vec<Prop>, Extra),
    /// `oneOf` of closed objects tagged by `"kind": "k<i>"`.
    Tagged(Vec<Vec<Prop>>),
}

#[derive(Debug, Clone)]
struct Prop {
    name: String,
    schema: S,
    required: bool,
}

#[derive(Debug, Clone)]
enum Extra {
    Allow,
    Deny,
    Schema(Box<S>),
}

fn type_name(s: &S) -> &'static str {
    match s {
        S::Null => "null",
        S::Bool => "boolean",
        S::Int => "integer",
        S::Num => "number",
        S::Str => "string",
        _ => unreachable!("only scalar types are made nullable"),
    }
}

fn to_json(s: &S) -> Value {
    match s {
        S::Any => json!({}),
        S::Null | S::Bool | S::Int | S::Num | S::Str => json!({ "type": type_name(s) }),
        S::Enum(values) => json!({ "type": "string", "enum": values }),
        S::Const(v) => json!({ "const": v }),
        S::Nullable(inner) => json!({ "type": [type_name(inner), "null"] }),
        S::Array(items) => json!({ "type": "array", "items": to_json(items) }),
        S::Object(props, extra) => {
            let mut schema = object_json(props, None);
            schema["additionalProperties"] = match extra {
                Extra::Allow => json!(true),
                Extra::Deny => json!(false),
                Extra::Schema(s) => to_json(s),
            };
            schema
        }
        S::Tagged(branches) => {
            let branches: Vec<Value> = branches
                .iter()
                .enumerate()
                .map(|(i, props)| {
                    let mut schema = object_json(props, Some(i));
                    schema["additionalProperties"] = json!(false);
                    schema
                })
                .collect();
            json!({ "oneOf": branches })
        }
    }
}

fn object_json(props: &[Prop], tag: Option<usize>) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    if let Some(i) = tag {
        properties.insert("kind".into(), json!({ "const": format!("k{i}") }));
        required.push("kind".to_owned());
    }
    for p in props {
        properties.insert(p.name.clone(), to_json(&p.schema));
        if p.required {
            required.push(p.name.clone());
        }
    }
    json!({ "type": "object", "properties": properties, "required": required })
}

fn arb_scalar_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-1000i64..1000).prop_map(Value::from),
        "[a-z]{0,6}".prop_map(Value::from),
    ]
}

fn arb_props(inner: impl Strategy<Value = S> + Clone) -> impl Strategy<Value = Vec<Prop>> {
    prop::collection::btree_map("[a-e]{1,3}", (inner, any::<bool>()), 0..4).prop_map(|m| {
        m.into_iter()
            .map(|(name, (schema, required))| Prop {
                name,
                schema,
                required,
            })
            .collect()
    })
}

fn arb_schema() -> impl Strategy<Value = S> {
    let non_null = prop_oneof![Just(S::Bool), Just(S::Int), Just(S::Num), Just(S::Str)];
    let leaf = prop_oneof![
        Just(S::Any),
        Just(S::Null),
        non_null.clone(),
        prop::collection::btree_set("[a-z]{1,4}", 1..5)
            .prop_map(|s| S::Enum(s.into_iter().collect())),
        arb_scalar_value().prop_map(S::Const),
        non_null.prop_map(|t| S::Nullable(Box::new(t))),
    ];
    leaf.prop_recursive(4, 40, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(|s| S::Array(Box::new(s))),
            (
                arb_props(inner.clone()),
                prop_oneof![
                    Just(Extra::Allow),
                    Just(Extra::Deny),
                    inner.clone().prop_map(|s| Extra::Schema(Box::new(s))),
                ]
            )
                .prop_map(|(props, extra)| S::Object(props, extra)),
            prop::collection::vec(arb_props(inner), 1..4).prop_map(S::Tagged),
        ]
    })
}

/// Values that `s` accepts.
fn arb_instance(s: &S) -> BoxedStrategy<Value> {
    match s {
        S::Any => arb_scalar_value().boxed(),
        S::Null => Just(Value::Null).boxed(),
        S::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
        S::Int => prop_oneof![
            (-1_000_000i64..1_000_000).prop_map(Value::from),
            (-1000i64..1000).prop_map(|i| json!(i as f64)),
        ]
        .boxed(),
        S::Num => prop_oneof![
            (-1_000_000i64..1_000_000).prop_map(Value::from),
            (-1e6f64..1e6).prop_map(|f| json!(f)),
        ]
        .boxed(),
        S::Str => "[ -~]{0,10}".prop_map(Value::from).boxed(),
        S::Enum(values) => prop::sample::select(values.clone())
            .prop_map(Value::from)
            .boxed(),
        S::Const(v) => Just(v.clone()).boxed(),
        S::Nullable(inner) => prop_oneof![Just(Value::Null), arb_instance(inner)].boxed(),
        S::Array(items) => prop::collection::vec(arb_instance(items), 0..4)
            .prop_map(Value::Array)
            .boxed(),
        S::Object(props, extra) => {
            let extras = match extra {
                Extra::Allow => {
                    prop::collection::btree_map("X[a-c]", arb_scalar_value(), 0..2).boxed()
                }
                Extra::Deny => Just(BTreeMap::new()).boxed(),
                Extra::Schema(s) => {
                    prop::collection::btree_map("X[a-c]", arb_instance(s), 0..3).boxed()
                }
            };
            (arb_members(props), extras)
                .prop_map(|(mut members, extras)| {
                    members.extend(extras);
                    Value::Object(members)
                })
                .boxed()
        }
        S::Tagged(branches) => {
            let options: Vec<BoxedStrategy<Value>> = branches
                .iter()
                .enumerate()
                .map(|(i, props)| {
                    arb_members(props)
                        .prop_map(move |mut members| {
                            members.insert("kind".into(), json!(format!("k{i}")));
                            Value::Object(members)
                        })
                        .boxed()
                })
                .collect();
            proptest::strategy::Union::new(options).boxed()
        }
    }
}

fn arb_members(props: &[Prop]) -> BoxedStrategy<Map<String, Value>> {
    let members: Vec<BoxedStrategy<Option<(String, Value)>>> = props
        .iter()
        .map(|p| {
            let name = p.name.clone();
            let value = arb_instance(&p.schema).prop_map(move |v| Some((name.clone(), v)));
            if p.required {
                value.boxed()
            } else {
                prop_oneof![Just(None), value].boxed()
            }
        })
        .collect();
    members
        .prop_map(|members| members.into_iter().flatten().collect())
        .boxed()
}

/// A place where one change must make the instance invalid.
#[derive(Debug)]
enum Site {
    /// Replace the value at `path` with one `s` refuses.
    Replace(Vec<String>, S),
    /// Remove the required member at `path`.
    Remove(Vec<String>),
    /// Add a member `ZZ` to the closed object at `path`.
    Add(Vec<String>),
}

fn sites(s: &S, v: &Value, path: &mut Vec<String>, out: &mut Vec<Site>) {
    if !matches!(s, S::Any) {
        out.push(Site::Replace(path.clone(), s.clone()));
    }
    match (s, v) {
        (S::Array(items), Value::Array(values)) => {
            for (i, item) in values.iter().enumerate() {
                path.push(i.to_string());
                sites(items, item, path, out);
                path.pop();
            }
        }
        (S::Object(props, extra), Value::Object(members)) => {
            object_sites(props, members, path, out);
            if matches!(extra, Extra::Deny) {
                out.push(Site::Add(path.clone()));
            }
            if let Extra::Schema(extra) = extra {
                for (key, member) in members {
                    if key.starts_with('X') {
                        path.push(key.clone());
                        sites(extra, member, path, out);
                        path.pop();
                    }
                }
            }
        }
        (S::Tagged(branches), Value::Object(members)) => {
            let tag = members["kind"].as_str().unwrap_or_default();
            let i: usize = tag[1..].parse().unwrap_or_default();
            object_sites(&branches[i], members, path, out);
            out.push(Site::Add(path.clone()));
        }
        _ => {}
    }
}

fn object_sites(
    props: &[Prop],
    members: &Map<String, Value>,
    path: &mut Vec<String>,
    out: &mut Vec<Site>,
) {
    for p in props {
        let Some(member) = members.get(&p.name) else {
            continue;
        };
        path.push(p.name.clone());
        if p.required {
            out.push(Site::Remove(path.clone()));
        }
        sites(&p.schema, member, path, out);
        path.pop();
    }
}

/// A value `s` refuses at its root.
fn wrong_value(s: &S) -> Value {
    match s {
        S::Any => unreachable!("anything is valid"),
        S::Null => json!(0),
        S::Bool => json!("true"),
        S::Int => json!(1.5),
        S::Num => json!("1"),
        S::Str => json!(7),
        S::Enum(_) => json!("NOT-IN-ENUM"),
        S::Const(_) => json!([[["never a constant"]]]),
        S::Nullable(inner) => wrong_value(inner),
        S::Array(_) | S::Tagged(_) => json!(false),
        S::Object(..) => json!([]),
    }
}

fn at<'a>(v: &'a mut Value, path: &[String]) -> &'a mut Value {
    path.iter().fold(v, |v, seg| match v {
        Value::Array(items) => &mut items[seg.parse::<usize>().unwrap()],
        Value::Object(members) => members.get_mut(seg).unwrap(),
        _ => unreachable!("paths only go through containers"),
    })
}

fn pointer(path: &[String]) -> String {
    path.iter().map(|seg| format!("/{seg}")).collect()
}

fn arb_case() -> impl Strategy<Value = (S, Value)> {
    arb_schema().prop_flat_map(|s| {
        let instance = arb_instance(&s);
        (Just(s), instance)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn generated_instances_validate((s, instance) in arb_case()) {
        let schema = Schema::compile(&to_json(&s)).unwrap();
        let result = schema.validate(&instance);
        prop_assert!(result.is_ok(), "{} rejected {}: {:?}", to_json(&s), instance, result);
    }

    #[test]
    fn a_mutation_is_reported_where_it_is((s, instance) in arb_case(), pick in any::<Index>()) {
        let schema = Schema::compile(&to_json(&s)).unwrap();
        let mut found = Vec::new();
        sites(&s, &instance, &mut Vec::new(), &mut found);
        prop_assume!(!found.is_empty());
        let site = &found[pick.index(found.len())];
        let mut mutated = instance.clone();
        let expected_path = match site {
            Site::Replace(path, sub) => {
                *at(&mut mutated, path) = wrong_value(sub);
                pointer(path)
            }
            Site::Remove(path) => {
                let (key, parent) = path.split_last().unwrap();
                at(&mut mutated, parent).as_object_mut().unwrap().shift_remove(key);
                pointer(path)
            }
            Site::Add(path) => {
                at(&mut mutated, path).as_object_mut().unwrap().insert("ZZ".into(), json!(1));
                format!("{}/ZZ", pointer(path))
            }
        };
        let violations = schema.validate(&mutated).unwrap_err();
        prop_assert!(
            violations.iter().all(|v| v.path == expected_path),
            "{site:?} in {instance} → {mutated}: expected every violation at {expected_path:?}, got {violations:?}"
        );
    }

    #[test]
    fn snapshot_reads_back_what_serde_json_writes((s, instance) in arb_case()) {
        let _ = s;
        let text = serde_json::to_string_pretty(&instance).unwrap();
        let read = parse(&text, &Limits::default()).unwrap();
        prop_assert_eq!(&read, &instance);
        let compact = serde_json::to_string(&instance).unwrap();
        let fits = Limits { max_bytes: compact.len(), ..Limits::default() };
        prop_assert!(check_value(&instance, &fits).is_ok());
        let tight = Limits { max_bytes: compact.len() - 1, ..Limits::default() };
        prop_assert!(check_value(&instance, &tight).is_err());
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,64}") {
        let _ = parse(&text, &Limits::default());
    }
}
