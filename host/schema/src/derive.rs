//! Schemas from Rust types: the `Schema` trait that `#[derive(Schema)]`
//! implements (the derive lives in `toolgate-sdk-macros`).
//!
//! Here, beside the compiler, because two sides derive schemas from types:
//! a tool author's argument types (through `toolgate-sdk`, which re-exports
//! this module as `toolgate_sdk::schema`) and the host's own configuration
//! (`#[schema(crate = "::toolgate_schema::derive")]`). Whatever either
//! derives stays inside the subset [`crate::Schema::compile`] accepts; the
//! SDK's tests compile every shape the derive produces. The mapping from
//! Rust and serde to JSON Schema is documented in `toolgate_sdk::schema`
//! and `sdk/SCHEMA.md`.

/// `#[derive(Schema)]` (from `toolgate-sdk-macros`): outside the SDK, name
/// this module with `#[schema(crate = "toolgate_schema::derive")]`.
pub use toolgate_sdk_macros::Schema;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, LinkedList, VecDeque};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use serde_json::{Map, Value, json};

/// A type whose JSON form has a schema: implemented for the standard types
/// and derived with `#[derive(Schema)]`.
pub trait Schema {
    /// The JSON Schema of this type's JSON form.
    fn schema() -> Value;

    /// Whether a struct field of this type must be present. `false` for
    /// `Option<T>`, which serde fills with `None` when the field is missing.
    fn required() -> bool {
        true
    }

    /// The type's doc comment (for derived types), e.g. to describe a tool
    /// by its arguments type.
    fn description() -> Option<&'static str> {
        None
    }

    /// Whether the JSON form is an object of named members (structs, maps):
    /// only such a type can be flattened into an internally tagged enum
    /// variant, as serde does with `#[serde(tag = "...")] enum E { V(T) }`.
    #[doc(hidden)]
    const OBJECT_SHAPED: bool = false;
}

macro_rules! leaf {
    ($schema:literal: $($t:ty),* $(,)?) => {
        $(impl Schema for $t {
            fn schema() -> Value {
                json!({ "type": $schema })
            }
        })*
    };
}

leaf!("boolean": bool);
leaf!("integer": i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize);
leaf!("number": f32, f64);
leaf!("string": String, str, char, PathBuf, Path);
leaf!("null": ());

macro_rules! integer_nonzero {
    ($($t:ty),*) => {
        $(impl Schema for $t {
            fn schema() -> Value {
                json!({ "type": "integer" })
            }
        })*
    };
}
integer_nonzero!(
    std::num::NonZeroU8,
    std::num::NonZeroU16,
    std::num::NonZeroU32,
    std::num::NonZeroU64,
    std::num::NonZeroUsize,
    std::num::NonZeroI8,
    std::num::NonZeroI16,
    std::num::NonZeroI32,
    std::num::NonZeroI64,
    std::num::NonZeroIsize
);

/// Any JSON value: the empty schema.
impl Schema for Value {
    fn schema() -> Value {
        json!({})
    }
}

/// Any JSON object.
impl Schema for Map<String, Value> {
    fn schema() -> Value {
        json!({ "type": "object" })
    }
    const OBJECT_SHAPED: bool = true;
}

/// Absent or `null` is `None`. Models often send `null` for an optional
/// field, and serde reads it as `None`, so the schema admits `null` too.
impl<T: Schema> Schema for Option<T> {
    fn schema() -> Value {
        nullable(T::schema())
    }
    fn required() -> bool {
        false
    }
}

macro_rules! forward {
    ($($t:ident),*) => {
        $(impl<T: Schema + ?Sized> Schema for $t<T> {
            fn schema() -> Value {
                T::schema()
            }
            fn required() -> bool {
                T::required()
            }
            fn description() -> Option<&'static str> {
                T::description()
            }
            const OBJECT_SHAPED: bool = T::OBJECT_SHAPED;
        })*
    };
}
forward!(Box, Rc, Arc);

impl<T: Schema + ?Sized> Schema for &T {
    fn schema() -> Value {
        T::schema()
    }
    fn required() -> bool {
        T::required()
    }
    fn description() -> Option<&'static str> {
        T::description()
    }
    const OBJECT_SHAPED: bool = T::OBJECT_SHAPED;
}

impl<T: Schema + ToOwned + ?Sized> Schema for Cow<'_, T> {
    fn schema() -> Value {
        T::schema()
    }
    fn required() -> bool {
        T::required()
    }
    fn description() -> Option<&'static str> {
        T::description()
    }
    const OBJECT_SHAPED: bool = T::OBJECT_SHAPED;
}

fn array_of<T: Schema + ?Sized>() -> Value {
    json!({ "type": "array", "items": T::schema() })
}

macro_rules! sequence {
    ($($t:ident),*) => {
        $(impl<T: Schema> Schema for $t<T> {
            fn schema() -> Value {
                array_of::<T>()
            }
        })*
    };
}
sequence!(Vec, VecDeque, LinkedList, BTreeSet);

impl<T: Schema, S> Schema for HashSet<T, S> {
    fn schema() -> Value {
        array_of::<T>()
    }
}

impl<T: Schema> Schema for [T] {
    fn schema() -> Value {
        array_of::<T>()
    }
}

/// The length is not part of the schema (the subset has no `minItems`);
/// serde refuses a wrong length when the tool reads its arguments.
impl<T: Schema, const N: usize> Schema for [T; N] {
    fn schema() -> Value {
        array_of::<T>()
    }
}

/// Types that serde reads from a JSON object key exactly as written.
pub trait MapKey {}
impl MapKey for String {}
impl MapKey for Box<str> {}
impl MapKey for Arc<str> {}
impl MapKey for Rc<str> {}
impl MapKey for Cow<'_, str> {}

fn map_of<V: Schema>() -> Value {
    json!({ "type": "object", "additionalProperties": V::schema() })
}

impl<K: MapKey, V: Schema> Schema for BTreeMap<K, V> {
    fn schema() -> Value {
        map_of::<V>()
    }
    const OBJECT_SHAPED: bool = true;
}

impl<K: MapKey, V: Schema, S> Schema for HashMap<K, V, S> {
    fn schema() -> Value {
        map_of::<V>()
    }
    const OBJECT_SHAPED: bool = true;
}

/// Whether `schema` admits `null` already.
fn admits_null(schema: &Value) -> bool {
    let Value::Object(map) = schema else {
        return schema == &Value::Bool(true);
    };
    let type_ok = match map.get("type") {
        None => true,
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        Some(_) => false,
    };
    let enum_ok = map
        .get("enum")
        .and_then(Value::as_array)
        .is_none_or(|values| values.contains(&Value::Null));
    let const_ok = map.get("const").is_none_or(Value::is_null);
    let one_of_ok = map
        .get("oneOf")
        .and_then(Value::as_array)
        .is_none_or(|branches| branches.iter().any(admits_null));
    type_ok && enum_ok && const_ok && one_of_ok
}

/// `schema`, also admitting `null`: `"type": [T, "null"]` where it can,
/// else one more `oneOf` alternative.
pub fn nullable(schema: Value) -> Value {
    if admits_null(&schema) {
        return schema;
    }
    let Value::Object(mut map) = schema else {
        // `false`: nothing but null.
        return json!({ "type": "null" });
    };
    if map.contains_key("oneOf") {
        // Keep the annotations on the outside.
        let mut outer = Map::new();
        for key in ["title", "description"] {
            if let Some(v) = map.remove(key) {
                outer.insert(key.to_owned(), v);
            }
        }
        outer.insert(
            "oneOf".to_owned(),
            json!([Value::Object(map), { "type": "null" }]),
        );
        return Value::Object(outer);
    }
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            map.insert("type".to_owned(), json!([t, "null"]));
        }
        Some(Value::Array(ts)) => ts.push(json!("null")),
        _ => {}
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.push(Value::Null);
    }
    if let Some(c) = map.remove("const") {
        map.insert("enum".to_owned(), json!([c, null]));
    }
    Value::Object(map)
}

/// What `#[derive(Schema)]` expands to. Not a stable API.
#[doc(hidden)]
pub mod __private {
    use std::cell::RefCell;

    pub use serde_json::{Map, Value, json};

    pub use super::nullable;

    /// One property of a derived object.
    pub struct Field {
        pub name: &'static str,
        pub schema: Value,
        pub required: bool,
        pub description: Option<&'static str>,
    }

    /// Sets `description` on a schema (the field's doc wins over the type's).
    pub fn describe(schema: &mut Value, description: Option<&str>) {
        let Some(description) = description else {
            return;
        };
        if *schema == Value::Bool(true) {
            *schema = json!({});
        }
        if let Value::Object(map) = schema {
            map.insert("description".to_owned(), json!(description));
        }
    }

    /// Appends a paragraph to a schema's description.
    pub fn describe_more(schema: &mut Value, more: Option<&str>) {
        let Some(more) = more else {
            return;
        };
        if let Value::Object(map) = schema {
            let text = match map.get("description").and_then(Value::as_str) {
                Some(existing) => format!("{existing}\n\n{more}"),
                None => more.to_owned(),
            };
            map.insert("description".to_owned(), json!(text));
        }
    }

    /// A closed object: unknown members are refused, so a model learns of a
    /// typo instead of having the field silently ignored.
    pub fn object(title: Option<&str>, description: Option<&str>, fields: Vec<Field>) -> Value {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for field in fields {
            let mut schema = field.schema;
            describe(&mut schema, field.description);
            if field.required {
                required.push(json!(field.name));
            }
            properties.insert(field.name.to_owned(), schema);
        }
        let mut map = Map::new();
        map.insert("type".to_owned(), json!("object"));
        if let Some(title) = title {
            map.insert("title".to_owned(), json!(title));
        }
        if let Some(description) = description {
            map.insert("description".to_owned(), json!(description));
        }
        map.insert("properties".to_owned(), Value::Object(properties));
        if !required.is_empty() {
            map.insert("required".to_owned(), Value::Array(required));
        }
        map.insert("additionalProperties".to_owned(), json!(false));
        Value::Object(map)
    }

    /// `{"type": "string", "const": name}`: a tag value.
    pub fn tag(name: &str) -> Value {
        json!({ "type": "string", "const": name })
    }

    /// Strings from a fixed list (unit variants).
    pub fn string_enum(names: &[&str], description: Option<&str>) -> Value {
        let mut schema = json!({ "type": "string", "enum": names });
        describe(&mut schema, description);
        schema
    }

    /// Alternatives; a single one is returned as is.
    pub fn one_of(mut branches: Vec<Value>, description: Option<&str>) -> Value {
        let mut schema = if branches.len() == 1 {
            branches.pop().unwrap_or_default()
        } else {
            json!({ "oneOf": branches })
        };
        describe(&mut schema, description);
        schema
    }

    /// Adds a constant tag member in front of an object schema (an
    /// internally tagged newtype variant: serde writes the tag among the
    /// payload's own members).
    pub fn with_tag(
        schema: Value,
        tag_name: &str,
        variant: &str,
        description: Option<&str>,
    ) -> Value {
        let Value::Object(mut map) = schema else {
            // OBJECT_SHAPED types have object schemas; nothing else gets here.
            return schema;
        };
        let mut properties = Map::new();
        properties.insert(tag_name.to_owned(), tag(variant));
        if let Some(Value::Object(own)) = map.remove("properties") {
            properties.extend(own);
        }
        let mut required = vec![json!(tag_name)];
        if let Some(Value::Array(own)) = map.remove("required") {
            required.extend(own);
        }
        let mut out = Map::new();
        out.insert("type".to_owned(), json!("object"));
        out.insert("title".to_owned(), json!(variant));
        map.remove("type");
        map.remove("title");
        let own_description = map.remove("description");
        if let Some(d) = description.map(|d| json!(d)).or(own_description) {
            out.insert("description".to_owned(), d);
        }
        out.insert("properties".to_owned(), Value::Object(properties));
        out.insert("required".to_owned(), Value::Array(required));
        out.extend(map);
        Value::Object(out)
    }

    thread_local! {
        static IN_PROGRESS: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
    }

    /// Marks a derived type's schema as being built, so that a type that
    /// contains itself fails with a clear message instead of overflowing the
    /// stack (the subset has no `$ref` to express recursion).
    pub struct Building(());

    pub fn building<T: ?Sized>() -> Building {
        let name = std::any::type_name::<T>();
        IN_PROGRESS.with(|stack| {
            let mut stack = stack.borrow_mut();
            if stack.contains(&name) {
                let chain = stack.join(" → ");
                drop(stack);
                panic!(
                    "Schema: `{name}` contains itself ({chain} → {name}); \
                     tool schemas cannot be recursive (there is no `$ref`). Break the cycle, \
                     e.g. with #[schema(with = \"serde_json::Value\")] on the field."
                );
            }
            stack.push(name);
        });
        Building(())
    }

    impl Drop for Building {
        fn drop(&mut self) {
            let _ = IN_PROGRESS.try_with(|stack| stack.borrow_mut().pop());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives() {
        assert_eq!(bool::schema(), json!({"type": "boolean"}));
        assert_eq!(u64::schema(), json!({"type": "integer"}));
        assert_eq!(f32::schema(), json!({"type": "number"}));
        assert_eq!(<&str>::schema(), json!({"type": "string"}));
        assert_eq!(char::schema(), json!({"type": "string"}));
        assert_eq!(<()>::schema(), json!({"type": "null"}));
        assert_eq!(Value::schema(), json!({}));
        assert_eq!(Box::<str>::schema(), json!({"type": "string"}));
        assert_eq!(Cow::<str>::schema(), json!({"type": "string"}));
    }

    #[test]
    fn containers() {
        assert_eq!(
            Vec::<u8>::schema(),
            json!({"type": "array", "items": {"type": "integer"}})
        );
        assert_eq!(<[bool; 3]>::schema(), Vec::<bool>::schema());
        assert_eq!(
            HashMap::<String, Vec<String>>::schema(),
            json!({"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}})
        );
        const { assert!(BTreeMap::<String, u8>::OBJECT_SHAPED) };
        const { assert!(!Vec::<u8>::OBJECT_SHAPED) };
    }

    #[test]
    fn options_admit_null() {
        assert!(!Option::<u8>::required());
        assert_eq!(Option::<u8>::schema(), json!({"type": ["integer", "null"]}));
        assert_eq!(Option::<Option<u8>>::schema(), Option::<u8>::schema());
        assert_eq!(Option::<Value>::schema(), json!({}));
        assert_eq!(
            nullable(json!({"type": "string", "enum": ["a"]})),
            json!({"type": ["string", "null"], "enum": ["a", null]})
        );
        assert_eq!(nullable(json!({"const": 1})), json!({"enum": [1, null]}));
        assert_eq!(
            nullable(
                json!({"description": "d", "oneOf": [{"type": "string"}, {"type": "integer"}]})
            ),
            json!({"description": "d", "oneOf": [
                {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                {"type": "null"},
            ]})
        );
        assert_eq!(nullable(json!(false)), json!({"type": "null"}));
    }
}
