//! Compiling a JSON Schema into a flat arena of nodes, once per tool load.
//!
//! Every subschema becomes one [`Node`] in a `Vec`, children referred to by
//! index. The compiler walks the schema with an explicit work list (no
//! recursion), and the arena has no nested boxes, so neither compiling nor
//! dropping a 100,000-level schema touches the call stack. Paths for errors
//! are parent links, turned into a JSON pointer only when an error is
//! reported, so a deep schema costs linear, not quadratic, memory.
//!
//! References: `$ref` to a definition of the root (`#/$defs/NAME`,
//! `#/definitions/NAME`) or to the root itself (`#`), recursive ones
//! included, as pydantic-based servers emit them. A definition is compiled
//! once, into one node; a reference is an edge to it, so a recursive schema
//! is a cycle in the arena, which the validator walks only as deep as the
//! value goes. What could loop without descending into the value (a
//! reference to itself, a cycle through the applicators that check the same
//! value: `oneOf`, `anyOf`, `allOf`, `not`, `if`, `dependentSchemas`) is
//! refused, and so is a fan-out of those that references multiply past
//! [`MAX_BRANCH_WORK`].
//!
//! Strictness is the point: a keyword we do not enforce is rejected, not
//! skipped, so that a tool author never believes a constraint holds when it
//! does not. A few schemas that can never be satisfied are rejected too.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::describe;
use crate::limits::Limits;
use crate::pointer::{PathArena, ROOT, Segment};

/// Deepest `const`/`enum` value a schema may hold. Those values are cloned
/// and compared by `serde_json`, which recurses; this bound keeps that safe.
pub const MAX_VALUE_DEPTH: usize = 128;

/// Most subschemas one value is checked against without descending into it
/// (a node and its in-place applicators, transitively), for a schema with
/// references: sharing a definition lets a small schema ask for
/// exponentially many checks (`A = oneOf[B, B]`, `B = oneOf[C, C]`, …).
/// Without references this is bounded by the schema's size.
pub const MAX_BRANCH_WORK: u64 = 10_000;

/// Properties at which a node gets a hash index (below, a scan is faster).
const INDEX_PROPERTIES_FROM: usize = 12;

pub(crate) type NodeId = u32;

/// A set of JSON Schema type names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Types(u8);

impl Types {
    const NAMES: [&'static str; 7] = [
        "null", "boolean", "integer", "number", "string", "array", "object",
    ];
    const INTEGER: u8 = 1 << 2;
    const NUMBER: u8 = 1 << 3;
    const NULL: u8 = 1;

    fn bit(name: &str) -> Option<u8> {
        Self::NAMES.iter().position(|n| *n == name).map(|i| 1 << i)
    }

    /// Whether a value of type `v` is admitted (`number` admits integers).
    pub(crate) fn admits(self, v: &Value) -> bool {
        let bits = match v {
            Value::Null => Self::NULL,
            Value::Bool(_) => 1 << 1,
            Value::Number(n) if describe::is_integer(n) => Self::INTEGER | Self::NUMBER,
            Value::Number(_) => Self::NUMBER,
            Value::String(_) => 1 << 4,
            Value::Array(_) => 1 << 5,
            Value::Object(_) => 1 << 6,
        };
        self.0 & bits != 0
    }

    /// `integer`, `string or null`, `integer, string or null`.
    pub(crate) fn describe(self) -> String {
        // `null` last: "string or null" reads better than "null or string".
        let names: Vec<&str> = (1..Self::NAMES.len())
            .chain([0])
            .filter(|i| self.0 & (1 << i) != 0)
            .map(|i| Self::NAMES[i])
            .collect();
        describe::or_list(&names)
    }
}

/// What an object may hold beyond its declared `properties`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Additional {
    #[default]
    Allowed,
    Forbidden,
    Schema(NodeId),
}

/// One compiled subschema.
#[derive(Debug, Default, Clone)]
pub(crate) struct Node {
    /// The `false` schema.
    pub(crate) rejects_all: bool,
    pub(crate) types: Option<Types>,
    /// Declared properties, in schema order.
    pub(crate) properties: Vec<(Box<str>, NodeId)>,
    property_index: Option<HashMap<Box<str>, NodeId>>,
    pub(crate) required: Vec<Box<str>>,
    pub(crate) additional: Additional,
    pub(crate) items: Option<NodeId>,
    pub(crate) enumeration: Option<Vec<Value>>,
    pub(crate) constant: Option<Value>,
    pub(crate) one_of: Vec<NodeId>,
    /// The other applicators (`allOf`, `anyOf`, `not`, `if`, `prefixItems`,
    /// …): boxed, as most nodes have none.
    pub(crate) more: Option<Box<Composition>>,
    /// Bounds on the value itself (numbers, lengths, `pattern`): boxed, as
    /// most nodes have none.
    pub(crate) bounds: Option<Box<crate::bounds::Bounds>>,
    pub(crate) title: Option<Box<str>>,
    /// Required properties whose schema is a single constant: how a `oneOf`
    /// tells its branches apart (`{"kind": {"const": "circle"}}`).
    pub(crate) tags: Vec<(Box<str>, Value)>,
}

/// The applicators of draft 2020-12 beyond the common ones.
#[derive(Debug, Default, Clone)]
pub(crate) struct Composition {
    /// Each must hold for the value.
    pub(crate) all_of: Vec<NodeId>,
    /// At least one must hold.
    pub(crate) any_of: Vec<NodeId>,
    /// Must not hold.
    pub(crate) not: Option<NodeId>,
    /// `if`, and `then`/`else` (absent: nothing to check on that side).
    pub(crate) condition: Option<Condition>,
    /// The schemas of an array's first items; `items` applies after them.
    pub(crate) prefix_items: Vec<NodeId>,
    /// Each member whose name matches a pattern is checked by its schema
    /// (by every pattern it matches); `additionalProperties` then applies
    /// only to members no property and no pattern names.
    pub(crate) pattern_properties: Vec<(Box<str>, regex::Regex, NodeId)>,
    /// When the first is present, the others are required.
    pub(crate) dependent_required: Vec<(Box<str>, Vec<Box<str>>)>,
    /// When the name is present, the object must hold to the schema.
    pub(crate) dependent_schemas: Vec<(Box<str>, NodeId)>,
    pub(crate) contains: Option<Contains>,
    /// `uniqueItems: true`.
    pub(crate) unique_items: bool,
    /// Each member name, as a string, must hold to this schema.
    pub(crate) property_names: Option<NodeId>,
}

impl Composition {
    /// The subschemas that check the node's own value (not a part of it):
    /// the edges a value can loop on without descending.
    fn in_place(&self) -> impl Iterator<Item = NodeId> + '_ {
        let condition = self
            .condition
            .iter()
            .flat_map(|c| std::iter::once(c.test).chain(c.then).chain(c.otherwise));
        self.all_of
            .iter()
            .chain(&self.any_of)
            .copied()
            .chain(self.not)
            .chain(condition)
            .chain(self.dependent_schemas.iter().map(|(_, id)| *id))
    }

    /// Every child id, to rewrite when references are resolved.
    fn ids_mut(&mut self) -> impl Iterator<Item = &mut NodeId> {
        let condition = self.condition.iter_mut().flat_map(|c| {
            std::iter::once(&mut c.test)
                .chain(c.then.as_mut())
                .chain(c.otherwise.as_mut())
        });
        self.all_of
            .iter_mut()
            .chain(self.any_of.iter_mut())
            .chain(self.not.as_mut())
            .chain(condition)
            .chain(self.prefix_items.iter_mut())
            .chain(self.pattern_properties.iter_mut().map(|(_, _, id)| id))
            .chain(self.dependent_schemas.iter_mut().map(|(_, id)| id))
            .chain(self.contains.as_mut().map(|c| &mut c.node))
            .chain(self.property_names.as_mut())
    }
}

/// `if` / `then` / `else`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Condition {
    pub(crate) test: NodeId,
    pub(crate) then: Option<NodeId>,
    pub(crate) otherwise: Option<NodeId>,
}

/// `contains`, with `minContains` (default 1) and `maxContains`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Contains {
    pub(crate) node: NodeId,
    pub(crate) min: u64,
    pub(crate) max: Option<u64>,
}

impl Node {
    /// The subschemas checked against this node's own value: `oneOf` and
    /// the in-place applicators.
    fn in_place(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.one_of
            .iter()
            .copied()
            .chain(self.more.iter().flat_map(|m| m.in_place()))
    }

    /// Whether a `patternProperties` pattern names `name`.
    pub(crate) fn matches_pattern(&self, name: &str) -> bool {
        self.more.as_ref().is_some_and(|m| {
            m.pattern_properties
                .iter()
                .any(|(_, regex, _)| regex.is_match(name))
        })
    }

    pub(crate) fn property(&self, name: &str) -> Option<NodeId> {
        match &self.property_index {
            Some(index) => index.get(name).copied(),
            None => self
                .properties
                .iter()
                .find(|(n, _)| &**n == name)
                .map(|(_, id)| *id),
        }
    }

    /// The single value this node admits, if it is a `const` or a one-value
    /// `enum`.
    fn single_value(&self) -> Option<&Value> {
        match (&self.constant, &self.enumeration) {
            (Some(c), _) => Some(c),
            (None, Some(values)) if values.len() == 1 => values.first(),
            _ => None,
        }
    }
}

/// A compiled schema: cheap to clone (one `Arc`), `Send + Sync`.
///
/// ```
/// use serde_json::json;
/// let schema = toolgate_schema::Schema::compile(&json!({"type": "string"})).unwrap();
/// assert!(schema.validate(&json!("hi")).is_ok());
/// ```
#[derive(Debug, Clone)]
pub struct Schema {
    pub(crate) nodes: Arc<[Node]>,
}

/// Index of the root node.
pub(crate) const ROOT_NODE: NodeId = 0;

/// A schema the compiler refused: which keyword, where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at {}", if .pointer.is_empty() { "the root" } else { .pointer.as_str() })]
pub struct CompileError {
    /// The keyword at fault, if one is.
    pub keyword: Option<String>,
    /// JSON pointer to the (sub)schema holding the keyword (`""` is the root).
    pub pointer: String,
    /// What is wrong, without the location.
    pub message: String,
}

impl Schema {
    /// Compiles any schema of the subset (see the crate docs).
    ///
    /// ```
    /// use serde_json::json;
    /// use toolgate_schema::Schema;
    ///
    /// let err = Schema::compile(&json!({
    ///     "type": "object",
    ///     "properties": { "tags": { "type": "object", "unevaluatedProperties": false } },
    /// }))
    /// .unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "unsupported keyword `unevaluatedProperties` (not supported: list the properties, or use `additionalProperties`) at /properties/tags"
    /// );
    /// assert_eq!(err.keyword.as_deref(), Some("unevaluatedProperties"));
    /// ```
    pub fn compile(schema: &Value) -> Result<Schema, CompileError> {
        Compiler {
            nodes: Vec::new(),
            node_paths: Vec::new(),
            paths: PathArena::new(),
            defs: HashMap::new(),
            refs: Vec::new(),
        }
        .run(schema)
    }

    /// Compiles a tool's `parameters`: as [`compile`](Self::compile), and the
    /// root must declare `"type": "object"` (arguments are always an object).
    pub fn compile_parameters(schema: &Value) -> Result<Schema, CompileError> {
        let is_object = match schema.get("type") {
            Some(Value::String(t)) => t == "object",
            Some(Value::Array(ts)) => ts.len() == 1 && ts[0] == "object",
            _ => false,
        };
        if !is_object {
            return Err(CompileError {
                keyword: Some("type".into()),
                pointer: String::new(),
                message: "tool parameters must be a schema with \"type\": \"object\"".into(),
            });
        }
        Self::compile(schema)
    }

    pub(crate) fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }
}

struct Compiler<'s> {
    nodes: Vec<Node>,
    /// Path (in `paths`) of each node, for post-pass errors.
    node_paths: Vec<u32>,
    paths: PathArena<'s>,
    /// The root's definitions by reference (`#/$defs/NAME`).
    defs: HashMap<String, NodeId>,
    /// Nodes that are a `$ref`, with its target, resolved after the walk.
    refs: Vec<(NodeId, &'s str)>,
}

impl<'s> Compiler<'s> {
    fn run(mut self, schema: &'s Value) -> Result<Schema, CompileError> {
        let root = self.alloc(ROOT);
        let mut work: Vec<(&'s Value, NodeId, u32)> = vec![(schema, root, ROOT)];
        while let Some((schema, id, path)) = work.pop() {
            match schema {
                Value::Bool(true) => {}
                Value::Bool(false) => self.nodes[id as usize].rejects_all = true,
                Value::Object(map) => self.keywords(map, id, path, &mut work)?,
                other => {
                    return Err(self.error(
                        path,
                        None,
                        format!(
                            "a schema must be an object or a boolean, not {}",
                            describe::type_name(other)
                        ),
                    ));
                }
            }
        }
        self.link()?;
        self.finish()
    }

    fn alloc(&mut self, path: u32) -> NodeId {
        let id = NodeId::try_from(self.nodes.len()).unwrap_or(NodeId::MAX);
        self.nodes.push(Node::default());
        self.node_paths.push(path);
        id
    }

    fn child_path(&mut self, parent: u32, segments: &[Segment<'s>]) -> u32 {
        segments
            .iter()
            .fold(parent, |at, segment| self.paths.child(at, *segment))
    }

    fn error(&self, path: u32, keyword: Option<&str>, message: String) -> CompileError {
        CompileError {
            keyword: keyword.map(str::to_owned),
            pointer: self.paths.pointer(path),
            message,
        }
    }

    /// Compiles the keywords of one schema object; subschemas go on `work`.
    fn keywords(
        &mut self,
        map: &'s Map<String, Value>,
        id: NodeId,
        path: u32,
        work: &mut Vec<(&'s Value, NodeId, u32)>,
    ) -> Result<(), CompileError> {
        // Children are pushed in reverse at the end, so that errors come in
        // document order.
        let mut children: Vec<(&'s Value, NodeId, u32)> = Vec::new();
        // `if`, `then`, `else`; `contains`, `minContains`, `maxContains`:
        // read in any order, put together after.
        let mut condition: (Option<NodeId>, Option<NodeId>, Option<NodeId>) = (None, None, None);
        let mut contains: (Option<NodeId>, Option<u64>, Option<u64>) = (None, None, None);
        for (keyword, value) in map {
            let kw = Some(keyword.as_str());
            let bad = |this: &Self, message: &str| this.error(path, kw, message.to_owned());
            match keyword.as_str() {
                "type" => {
                    let names: Vec<&Value> = match value {
                        Value::String(_) => vec![value],
                        Value::Array(names) if !names.is_empty() => names.iter().collect(),
                        _ => {
                            return Err(bad(
                                self,
                                "`type` must be a type name or a non-empty array of type names",
                            ));
                        }
                    };
                    let mut bits = 0u8;
                    for name in names {
                        let name = name.as_str().unwrap_or("");
                        let Some(bit) = Types::bit(name) else {
                            return Err(self.error(
                                path,
                                kw,
                                format!(
                                    "unknown type {} (the types are {})",
                                    describe::quote(name),
                                    Types::NAMES.join(", ")
                                ),
                            ));
                        };
                        if bits & bit != 0 {
                            return Err(self.error(
                                path,
                                kw,
                                format!("type {} is listed twice", describe::quote(name)),
                            ));
                        }
                        bits |= bit;
                    }
                    self.nodes[id as usize].types = Some(Types(bits));
                }
                "properties" => {
                    let Value::Object(properties) = value else {
                        return Err(bad(self, "`properties` must be an object of schemas"));
                    };
                    for (name, sub) in properties {
                        let sub_path = self
                            .child_path(path, &[Segment::Key("properties"), Segment::Key(name)]);
                        let child = self.alloc(sub_path);
                        self.nodes[id as usize]
                            .properties
                            .push((name.as_str().into(), child));
                        children.push((sub, child, sub_path));
                    }
                }
                "required" => {
                    let Value::Array(names) = value else {
                        return Err(bad(self, "`required` must be an array of property names"));
                    };
                    let mut required: Vec<Box<str>> = Vec::with_capacity(names.len());
                    for name in names {
                        let Value::String(name) = name else {
                            return Err(bad(self, "`required` must be an array of property names"));
                        };
                        if required.iter().any(|r| **r == **name) {
                            return Err(self.error(
                                path,
                                kw,
                                format!("`required` lists {} twice", describe::quote(name)),
                            ));
                        }
                        required.push(name.as_str().into());
                    }
                    self.nodes[id as usize].required = required;
                }
                "additionalProperties" => {
                    let additional = match value {
                        Value::Bool(true) => Additional::Allowed,
                        Value::Bool(false) => Additional::Forbidden,
                        Value::Object(_) => {
                            let sub_path =
                                self.child_path(path, &[Segment::Key("additionalProperties")]);
                            let child = self.alloc(sub_path);
                            children.push((value, child, sub_path));
                            Additional::Schema(child)
                        }
                        _ => {
                            return Err(bad(
                                self,
                                "`additionalProperties` must be a boolean or a schema",
                            ));
                        }
                    };
                    self.nodes[id as usize].additional = additional;
                }
                "items" => match value {
                    Value::Bool(_) | Value::Object(_) => {
                        let sub_path = self.child_path(path, &[Segment::Key("items")]);
                        let child = self.alloc(sub_path);
                        children.push((value, child, sub_path));
                        self.nodes[id as usize].items = Some(child);
                    }
                    Value::Array(_) => {
                        return Err(bad(
                            self,
                            "`items` must be one schema; the array (tuple) form is not supported",
                        ));
                    }
                    _ => return Err(bad(self, "`items` must be a schema")),
                },
                "enum" => {
                    let Value::Array(values) = value else {
                        return Err(bad(self, "`enum` must be an array of values"));
                    };
                    if values.is_empty() {
                        return Err(bad(self, "`enum` must list at least one value"));
                    }
                    self.check_constant(value, path, keyword)?;
                    self.nodes[id as usize].enumeration = Some(values.clone());
                }
                "const" => {
                    self.check_constant(value, path, keyword)?;
                    self.nodes[id as usize].constant = Some(value.clone());
                }
                "oneOf" => {
                    let ids = self.schema_list(keyword, value, path, &mut children)?;
                    self.nodes[id as usize].one_of = ids;
                }
                "allOf" => {
                    let ids = self.schema_list(keyword, value, path, &mut children)?;
                    self.more(id).all_of.extend(ids);
                }
                "anyOf" => {
                    let ids = self.schema_list(keyword, value, path, &mut children)?;
                    self.more(id).any_of = ids;
                }
                "prefixItems" => {
                    let ids = self.schema_list(keyword, value, path, &mut children)?;
                    self.more(id).prefix_items = ids;
                }
                "not" => {
                    let child =
                        self.subschema(value, path, &[Segment::Key(keyword)], &mut children);
                    self.more(id).not = Some(child);
                }
                "propertyNames" => {
                    let child =
                        self.subschema(value, path, &[Segment::Key(keyword)], &mut children);
                    self.more(id).property_names = Some(child);
                }
                "if" | "then" | "else" | "contains" => {
                    let child =
                        self.subschema(value, path, &[Segment::Key(keyword)], &mut children);
                    match keyword.as_str() {
                        "if" => condition.0 = Some(child),
                        "then" => condition.1 = Some(child),
                        "else" => condition.2 = Some(child),
                        _ => contains.0 = Some(child),
                    }
                }
                "minContains" | "maxContains" => {
                    let Some(n) = count(value) else {
                        return Err(self.error(
                            path,
                            kw,
                            format!("`{keyword}` must be a non-negative integer"),
                        ));
                    };
                    if keyword == "minContains" {
                        contains.1 = Some(n);
                    } else {
                        contains.2 = Some(n);
                    }
                }
                "uniqueItems" => {
                    let Value::Bool(unique) = value else {
                        return Err(bad(self, "`uniqueItems` must be a boolean"));
                    };
                    if *unique {
                        self.more(id).unique_items = true;
                    }
                }
                "patternProperties" => {
                    let Value::Object(patterns) = value else {
                        return Err(bad(
                            self,
                            "`patternProperties` must be an object of schemas by regular expression",
                        ));
                    };
                    for (pattern, sub) in patterns {
                        let regex = crate::bounds::compile_pattern(keyword, pattern)
                            .map_err(|why| self.error(path, kw, why))?;
                        let child = self.subschema(
                            sub,
                            path,
                            &[Segment::Key(keyword), Segment::Key(pattern)],
                            &mut children,
                        );
                        self.more(id).pattern_properties.push((
                            pattern.as_str().into(),
                            regex,
                            child,
                        ));
                    }
                }
                "dependentRequired" => {
                    let malformed =
                        "`dependentRequired` must be an object of arrays of property names";
                    let Value::Object(dependents) = value else {
                        return Err(bad(self, malformed));
                    };
                    for (name, names) in dependents {
                        let Value::Array(names) = names else {
                            return Err(bad(self, malformed));
                        };
                        let mut required: Vec<Box<str>> = Vec::with_capacity(names.len());
                        for other in names {
                            let Value::String(other) = other else {
                                return Err(bad(self, malformed));
                            };
                            if required.iter().any(|r| **r == **other) {
                                return Err(self.error(
                                    path,
                                    kw,
                                    format!(
                                        "`dependentRequired` lists {} twice for {}",
                                        describe::quote(other),
                                        describe::quote(name)
                                    ),
                                ));
                            }
                            required.push(other.as_str().into());
                        }
                        self.more(id)
                            .dependent_required
                            .push((name.as_str().into(), required));
                    }
                }
                "dependentSchemas" => {
                    let Value::Object(dependents) = value else {
                        return Err(bad(self, "`dependentSchemas` must be an object of schemas"));
                    };
                    for (name, sub) in dependents {
                        let child = self.subschema(
                            sub,
                            path,
                            &[Segment::Key(keyword), Segment::Key(name)],
                            &mut children,
                        );
                        self.more(id)
                            .dependent_schemas
                            .push((name.as_str().into(), child));
                    }
                }
                bound if crate::bounds::is_bound(bound) => {
                    let node = &mut self.nodes[id as usize];
                    let bounds = node.bounds.get_or_insert_with(Default::default);
                    if let Err(why) = bounds.add(bound, value) {
                        return Err(self.error(path, kw, why));
                    }
                    if self.nodes[id as usize]
                        .bounds
                        .as_ref()
                        .is_some_and(|b| b.is_empty())
                    {
                        // `format` alone: an annotation.
                        self.nodes[id as usize].bounds = None;
                    }
                }
                "title" | "description" | "$comment" | "$schema" => {
                    let Value::String(text) = value else {
                        return Err(self.error(path, kw, format!("`{keyword}` must be a string")));
                    };
                    if keyword == "title" {
                        self.nodes[id as usize].title = Some(text.as_str().into());
                    }
                }
                "examples" => {
                    if !value.is_array() {
                        return Err(bad(self, "`examples` must be an array"));
                    }
                }
                // Annotations of draft 2020-12 (meta-data and content): said
                // to the model, never asserted.
                "deprecated" | "readOnly" | "writeOnly" => {
                    if !value.is_boolean() {
                        return Err(self.error(path, kw, format!("`{keyword}` must be a boolean")));
                    }
                }
                "contentMediaType" | "contentEncoding" => {
                    if !value.is_string() {
                        return Err(self.error(path, kw, format!("`{keyword}` must be a string")));
                    }
                }
                "contentSchema" => {
                    if !matches!(value, Value::Object(_) | Value::Bool(_)) {
                        return Err(bad(self, "`contentSchema` must be a schema"));
                    }
                }
                "default" => {}
                "$defs" | "definitions" => {
                    if id != ROOT_NODE {
                        return Err(bad(
                            self,
                            "definitions are supported at the root only (where `#/$defs/NAME` finds them)",
                        ));
                    }
                    let Value::Object(defs) = value else {
                        return Err(self.error(
                            path,
                            kw,
                            format!("`{keyword}` must be an object of schemas"),
                        ));
                    };
                    for (name, sub) in defs {
                        let sub_path =
                            self.child_path(path, &[Segment::Key(keyword), Segment::Key(name)]);
                        let child = self.alloc(sub_path);
                        let escaped = name.replace('~', "~0").replace('/', "~1");
                        self.defs.insert(format!("#/{keyword}/{escaped}"), child);
                        children.push((sub, child, sub_path));
                    }
                }
                "$ref" => {
                    let Value::String(target) = value else {
                        return Err(bad(self, "`$ref` must be a string"));
                    };
                    let constraint = map.keys().any(|k| {
                        !matches!(
                            k.as_str(),
                            "$ref"
                                | "title"
                                | "description"
                                | "$comment"
                                | "format"
                                | "default"
                                | "examples"
                                | "deprecated"
                                | "readOnly"
                                | "writeOnly"
                                | "$schema"
                                | "$defs"
                                | "definitions"
                        )
                    });
                    if constraint {
                        // Keywords beside the reference (draft 2020-12): the
                        // reference is one more subschema the value holds to.
                        let sub_path = self.child_path(path, &[Segment::Key(keyword)]);
                        let reference = self.alloc(sub_path);
                        self.refs.push((reference, target.as_str()));
                        self.more(id).all_of.push(reference);
                        continue;
                    }
                    self.refs.push((id, target.as_str()));
                }
                other => {
                    let hint = match other {
                        "$id" | "$anchor" | "$dynamicRef" => {
                            " (only local references are supported: `$ref` to `#`, `#/$defs/NAME` or `#/definitions/NAME`)"
                        }
                        "nullable" => " (use \"type\": [\"…\", \"null\"])",
                        "unevaluatedProperties" => {
                            " (not supported: list the properties, or use `additionalProperties`)"
                        }
                        "unevaluatedItems" => " (not supported: use `items` after `prefixItems`)",
                        _ => "",
                    };
                    return Err(self.error(
                        path,
                        kw,
                        format!("unsupported keyword `{other}`{hint}"),
                    ));
                }
            }
        }
        // `then`/`else` without `if`, `minContains`/`maxContains` without
        // `contains`: checked as schemas and values, and inert (the spec).
        if let (Some(test), then, otherwise) = condition {
            self.more(id).condition = Some(Condition {
                test,
                then,
                otherwise,
            });
        }
        if let (Some(node), min, max) = contains {
            self.more(id).contains = Some(Contains {
                node,
                min: min.unwrap_or(1),
                max,
            });
        }
        work.extend(children.into_iter().rev());
        Ok(())
    }

    /// The node's other applicators, made on first use.
    fn more(&mut self, id: NodeId) -> &mut Composition {
        self.nodes[id as usize]
            .more
            .get_or_insert_with(Default::default)
    }

    /// One subschema at `path` + `segments`, compiled later from `children`.
    fn subschema(
        &mut self,
        value: &'s Value,
        path: u32,
        segments: &[Segment<'s>],
        children: &mut Vec<(&'s Value, NodeId, u32)>,
    ) -> NodeId {
        let sub_path = self.child_path(path, segments);
        let child = self.alloc(sub_path);
        children.push((value, child, sub_path));
        child
    }

    /// `oneOf`, `allOf`, `anyOf`, `prefixItems`: a non-empty array of
    /// subschemas.
    fn schema_list(
        &mut self,
        keyword: &'s str,
        value: &'s Value,
        path: u32,
        children: &mut Vec<(&'s Value, NodeId, u32)>,
    ) -> Result<Vec<NodeId>, CompileError> {
        match value {
            Value::Array(schemas) if !schemas.is_empty() => Ok(schemas
                .iter()
                .enumerate()
                .map(|(i, sub)| {
                    self.subschema(
                        sub,
                        path,
                        &[Segment::Key(keyword), Segment::Index(i)],
                        children,
                    )
                })
                .collect()),
            _ => Err(self.error(
                path,
                Some(keyword),
                format!("`{keyword}` must be a non-empty array of schemas"),
            )),
        }
    }

    /// `const` and `enum` values must be safe to clone and compare, and
    /// within the number contract (or no instance could ever equal them).
    fn check_constant(&self, value: &Value, path: u32, keyword: &str) -> Result<(), CompileError> {
        let limits = Limits {
            max_depth: MAX_VALUE_DEPTH + usize::from(keyword == "enum"),
            max_bytes: usize::MAX,
        };
        crate::check_value(value, &limits).map_err(|e| {
            let inner = if e.pointer.is_empty() {
                String::new()
            } else {
                format!(" at {}", e.pointer)
            };
            self.error(
                path,
                Some(keyword),
                format!("`{keyword}` value{inner}: {}", e.kind),
            )
        })
    }

    /// Resolves every `$ref`: each node that is a reference is replaced,
    /// wherever it is a child, by the node it ends at; then checks that
    /// nothing loops on one value (see the module docs).
    fn link(&mut self) -> Result<(), CompileError> {
        if self.refs.is_empty() {
            return Ok(());
        }
        let n = self.nodes.len();
        let mut alias: Vec<Option<NodeId>> = vec![None; n];
        for &(id, target) in &self.refs {
            let resolved = if target == "#" {
                Some(ROOT_NODE)
            } else {
                self.defs.get(target).copied()
            };
            let Some(to) = resolved else {
                return Err(self.error(
                    self.node_paths[id as usize],
                    Some("$ref"),
                    format!(
                        "`$ref` {} does not name a definition of this schema (local references only: `#`, `#/$defs/NAME`, `#/definitions/NAME`)",
                        describe::quote(target)
                    ),
                ));
            };
            alias[id as usize] = Some(to);
        }
        // Where each node ends after following references, memoized: each
        // node is walked once. A walk that meets itself is a reference to
        // itself.
        const UNKNOWN: NodeId = NodeId::MAX;
        const WALKING: NodeId = NodeId::MAX - 1;
        let mut end: Vec<NodeId> = vec![UNKNOWN; n];
        let mut walk: Vec<usize> = Vec::new();
        for start in 0..n {
            let mut at = start;
            let found = loop {
                match end[at] {
                    WALKING => {
                        return Err(self.error(
                            self.node_paths[start],
                            Some("$ref"),
                            "`$ref` refers to itself through references only: no schema is ever reached".into(),
                        ));
                    }
                    UNKNOWN => {}
                    known => break known,
                }
                match alias[at] {
                    Some(next) => {
                        end[at] = WALKING;
                        walk.push(at);
                        at = next as usize;
                    }
                    None => {
                        end[at] = at as NodeId;
                        break at as NodeId;
                    }
                }
            };
            for visited in walk.drain(..) {
                end[visited] = found;
            }
        }
        let map = |id: &mut NodeId| *id = end[*id as usize];
        for node in &mut self.nodes {
            node.properties.iter_mut().for_each(|(_, id)| map(id));
            node.items.iter_mut().for_each(map);
            node.one_of.iter_mut().for_each(map);
            if let Additional::Schema(id) = &mut node.additional {
                map(id);
            }
            if let Some(more) = &mut node.more {
                more.ids_mut().for_each(map);
            }
        }
        if end[ROOT_NODE as usize] != ROOT_NODE {
            self.nodes[ROOT_NODE as usize] = self.nodes[end[ROOT_NODE as usize] as usize].clone();
        }
        self.check_branch_work()
    }

    /// The in-place edges (`oneOf`, `allOf`, `anyOf`, `not`, `if`/`then`/
    /// `else`, `dependentSchemas`) check the same value again: they must not
    /// form a cycle, and the checks one value can cause stay within
    /// [`MAX_BRANCH_WORK`]. Iterative (post-order over those edges).
    fn check_branch_work(&self) -> Result<(), CompileError> {
        const NEW: u8 = 0;
        const OPEN: u8 = 1;
        const DONE: u8 = 2;
        let n = self.nodes.len();
        let edges: Vec<Vec<NodeId>> = self.nodes.iter().map(|n| n.in_place().collect()).collect();
        let mut state = vec![NEW; n];
        let mut work = vec![0u64; n];
        for start in 0..n {
            if state[start] != NEW {
                continue;
            }
            // (node, next edge to visit)
            let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
            state[start] = OPEN;
            while let Some(top) = stack.len().checked_sub(1) {
                let (at, next) = stack[top];
                if let Some(&branch) = edges[at].get(next) {
                    stack[top].1 += 1;
                    let b = branch as usize;
                    match state[b] {
                        NEW => {
                            state[b] = OPEN;
                            stack.push((b, 0));
                        }
                        OPEN => {
                            return Err(self.error(
                                self.node_paths[at],
                                Some("$ref"),
                                "a subschema applied to this same value (`oneOf`, `anyOf`, `allOf`, `not`, `if`, `dependentSchemas` or a `$ref` beside other keywords) refers back to this schema without descending into the value: checking would never end".into(),
                            ));
                        }
                        _ => {}
                    }
                } else {
                    let total = edges[at]
                        .iter()
                        .fold(1u64, |t, b| t.saturating_add(work[*b as usize]));
                    if total > MAX_BRANCH_WORK {
                        return Err(self.error(
                            self.node_paths[at],
                            Some("$ref"),
                            format!(
                                "through `$ref`, this schema checks one value against {total} subschemas or more; at most {MAX_BRANCH_WORK} are allowed"
                            ),
                        ));
                    }
                    work[at] = total;
                    state[at] = DONE;
                    stack.pop();
                }
            }
        }
        Ok(())
    }

    /// Checks that need whole nodes, then freezes the arena.
    fn finish(mut self) -> Result<Schema, CompileError> {
        for i in 0..self.nodes.len() {
            let node = &self.nodes[i];
            let path = self.node_paths[i];
            if node.additional == Additional::Forbidden
                && let Some(name) = node
                    .required
                    .iter()
                    .find(|r| node.property(r).is_none() && !node.matches_pattern(r))
            {
                return Err(self.error(
                    path,
                    Some("required"),
                    format!(
                        "required property {} is not in `properties` and `additionalProperties` is false, so no value can satisfy this schema",
                        describe::quote(name)
                    ),
                ));
            }
            if let Some(types) = node.types {
                let values = node
                    .constant
                    .iter()
                    .map(|v| ("const", v))
                    .chain(node.enumeration.iter().flatten().map(|v| ("enum", v)));
                for (keyword, v) in values {
                    if !types.admits(v) {
                        return Err(self.error(
                            path,
                            Some(keyword),
                            format!(
                                "`{keyword}` value {} is not of type {}",
                                describe::constant(v),
                                types.describe()
                            ),
                        ));
                    }
                }
            }
            let tags: Vec<(Box<str>, Value)> = node
                .required
                .iter()
                .filter_map(|name| {
                    let child = &self.nodes[node.property(name)? as usize];
                    Some((name.clone(), child.single_value()?.clone()))
                })
                .collect();
            let index = (node.properties.len() >= INDEX_PROPERTIES_FROM).then(|| {
                node.properties
                    .iter()
                    .map(|(name, id)| (name.clone(), *id))
                    .collect::<HashMap<_, _>>()
            });
            let node = &mut self.nodes[i];
            node.tags = tags;
            node.property_index = index;
        }
        Ok(Schema {
            nodes: self.nodes.into(),
        })
    }
}

/// A non-negative integer (`minContains`), as JSON Schema reads one: `2.0`
/// is `2`.
fn count(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f <= u64::MAX as f64)
            .map(|f| f as u64)
    })
}

impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "compiled schema ({} nodes)", self.nodes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(schema: Value) -> CompileError {
        Schema::compile(&schema).unwrap_err()
    }

    #[test]
    fn accepts_every_supported_keyword() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$comment": "c",
            "title": "t",
            "description": "d",
            "default": {},
            "examples": [{}],
            "type": ["object", "null"],
            "properties": {
                "a": { "type": "array", "items": { "enum": [1, "x", null] } },
                "b": { "const": {"k": [1]} },
                "c": { "oneOf": [{ "type": "string" }, { "type": "integer" }] },
                "d": true,
                "e": false,
            },
            "required": ["a"],
            "additionalProperties": { "type": "boolean" },
        });
        let compiled = Schema::compile(&schema).unwrap();
        assert_eq!(compiled.nodes.len(), 10);
        Schema::compile(&json!({})).unwrap();
        Schema::compile(&json!(true)).unwrap();
        Schema::compile(&json!(false)).unwrap();
    }

    #[test]
    fn bounds_are_enforced_and_format_is_an_annotation() {
        let schema = Schema::compile_parameters(&json!({
            "type": "object",
            "properties": {
                "n": { "type": "integer", "minimum": 1, "maximum": 10 },
                "s": { "type": "string", "pattern": "^[a-z]+$", "format": "hostname" },
                "t": { "$ref": "#/$defs/T", "format": "x" },
            },
            "$defs": { "T": { "type": "array", "minItems": 1 } },
        }))
        .unwrap();
        let v = schema
            .validate(&json!({"n": 0, "s": "A", "t": []}))
            .unwrap_err();
        let found: Vec<(&str, &str)> = v
            .iter()
            .map(|v| (v.path.as_str(), v.expected.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                ("/n", "a number ≥ 1"),
                ("/s", "a string matching \"^[a-z]+$\""),
                ("/t", "an array of at least 1 items")
            ]
        );
        schema
            .validate(&json!({"n": 10, "s": "abc", "t": [1]}))
            .unwrap();
        // A pattern the engine cannot enforce is refused at load, named.
        let e = err(json!({"properties": {"s": {"pattern": "(a)\\1"}}}));
        assert_eq!(e.keyword.as_deref(), Some("pattern"));
        assert!(e.message.contains("cannot be enforced"), "{e}");
    }

    #[test]
    fn rejects_each_unsupported_keyword_with_its_pointer() {
        for keyword in [
            "nullable",
            "unevaluatedProperties",
            "unevaluatedItems",
            "$id",
            "$anchor",
            "$dynamicRef",
            "$dynamicAnchor",
            "$vocabulary",
            "discriminator",
        ] {
            let mut inner = serde_json::Map::new();
            inner.insert(keyword.into(), json!(1));
            let e = err(json!({
                "type": "object",
                "properties": { "x": { "type": "array", "items": inner } },
            }));
            assert_eq!(e.keyword.as_deref(), Some(keyword));
            assert_eq!(e.pointer, "/properties/x/items");
            assert!(
                e.to_string()
                    .starts_with(&format!("unsupported keyword `{keyword}`")),
                "{e}"
            );
            assert!(e.to_string().ends_with(" at /properties/x/items"), "{e}");
        }
    }

    #[test]
    fn hints_for_common_substitutes() {
        assert_eq!(
            err(json!({"unevaluatedItems": {}})).to_string(),
            "unsupported keyword `unevaluatedItems` (not supported: use `items` after `prefixItems`) at the root"
        );
        assert!(
            err(json!({"$ref": "#/x"}))
                .message
                .contains("does not name a definition")
        );
        assert!(
            err(json!({"$id": "x"}))
                .message
                .contains("local references")
        );
    }

    #[test]
    fn pointers_escape_property_names() {
        let e = err(json!({"properties": {"a/b~c": {"oneOf": [{}, {"unevaluatedItems": {}}]}}}));
        assert_eq!(e.pointer, "/properties/a~1b~0c/oneOf/1");
    }

    #[test]
    fn first_error_in_document_order() {
        let e = err(json!({
            "properties": {
                "a": { "properties": { "deep": { "not": {"unevaluatedItems": {}} } } },
                "b": { "unevaluatedItems": true },
            }
        }));
        assert_eq!(e.pointer, "/properties/a/properties/deep/not");
    }

    #[test]
    fn rejects_malformed_keyword_values() {
        let cases = [
            (json!({"type": "float"}), "type", "unknown type \"float\""),
            (json!({"type": []}), "type", "`type` must be a type name"),
            (
                json!({"type": ["string", "string"]}),
                "type",
                "listed twice",
            ),
            (json!({"type": 3}), "type", "`type` must be"),
            (json!({"properties": []}), "properties", "object of schemas"),
            (
                json!({"properties": {"a": 1}}),
                "",
                "a schema must be an object or a boolean, not integer",
            ),
            (
                json!({"required": "a"}),
                "required",
                "array of property names",
            ),
            (
                json!({"required": [1]}),
                "required",
                "array of property names",
            ),
            (
                json!({"required": ["a", "a"]}),
                "required",
                "lists \"a\" twice",
            ),
            (
                json!({"additionalProperties": 1}),
                "additionalProperties",
                "boolean or a schema",
            ),
            (json!({"items": [{}]}), "items", "tuple"),
            (json!({"items": "x"}), "items", "must be a schema"),
            (json!({"enum": []}), "enum", "at least one"),
            (json!({"enum": {}}), "enum", "array of values"),
            (json!({"oneOf": []}), "oneOf", "non-empty"),
            (json!({"oneOf": {}}), "oneOf", "non-empty"),
            (json!({"description": 1}), "description", "must be a string"),
            (json!({"title": null}), "title", "must be a string"),
            (json!({"examples": 1}), "examples", "must be an array"),
            (json!({"const": 9007199254740993u64}), "const", "outside"),
            (
                json!({"type": "string", "enum": ["a", 1]}),
                "enum",
                "`enum` value 1 is not of type string",
            ),
            (
                json!({"type": "integer", "const": 1.5}),
                "const",
                "not of type integer",
            ),
            (
                json!({"properties": {"a": {}}, "required": ["b"], "additionalProperties": false}),
                "required",
                "required property \"b\" is not in `properties`",
            ),
        ];
        for (schema, keyword, needle) in cases {
            let e = err(schema.clone());
            if keyword.is_empty() {
                assert_eq!(e.keyword, None, "{schema}");
            } else {
                assert_eq!(e.keyword.as_deref(), Some(keyword), "{schema}: {e}");
            }
            assert!(e.message.contains(needle), "{schema}: {e}");
        }
        assert_eq!(
            err(json!("string")).to_string(),
            "a schema must be an object or a boolean, not string at the root"
        );
    }

    #[test]
    fn constants_are_depth_limited() {
        let mut deep = json!(1);
        for _ in 0..MAX_VALUE_DEPTH {
            deep = json!([deep]);
        }
        Schema::compile(&json!({ "const": deep.clone() })).unwrap();
        Schema::compile(&json!({ "enum": [deep.clone()] })).unwrap();
        let deeper = json!([deep]);
        let e = err(json!({ "properties": {"x": { "const": deeper }} }));
        assert_eq!(e.pointer, "/properties/x");
        assert!(e.message.contains("nesting deeper than 128"), "{e}");
    }

    #[test]
    fn parameters_root_must_be_an_object_schema() {
        Schema::compile_parameters(&json!({"type": "object"})).unwrap();
        Schema::compile_parameters(&json!({"type": ["object"]})).unwrap();
        for schema in [
            json!({}),
            json!(true),
            json!({"type": "string"}),
            json!({"type": ["object", "null"]}),
            json!({"oneOf": [{"type": "object"}]}),
        ] {
            let e = Schema::compile_parameters(&schema).unwrap_err();
            assert_eq!(e.keyword.as_deref(), Some("type"));
            assert_eq!(
                e.to_string(),
                "tool parameters must be a schema with \"type\": \"object\" at the root"
            );
        }
        // The rest of the schema is still checked.
        assert!(
            Schema::compile_parameters(&json!({"type": "object", "unevaluatedItems": {}})).is_err()
        );
    }

    #[test]
    fn tags_are_required_single_value_properties() {
        let s = Schema::compile(&json!({
            "properties": {
                "kind": {"const": "circle"},
                "v": {"enum": [2]},
                "o": {"const": 1},
                "many": {"enum": [1, 2]},
            },
            "required": ["kind", "v", "many"],
        }))
        .unwrap();
        let root = s.node(ROOT_NODE);
        assert_eq!(
            root.tags,
            vec![("kind".into(), json!("circle")), ("v".into(), json!(2))]
        );
    }

    #[test]
    fn large_objects_get_an_index() {
        let properties: serde_json::Map<String, Value> =
            (0..40).map(|i| (format!("p{i}"), json!({}))).collect();
        let s = Schema::compile(&json!({ "properties": properties })).unwrap();
        let root = s.node(ROOT_NODE);
        assert!(root.property_index.is_some());
        assert!(root.property("p39").is_some());
        assert!(root.property("p40").is_none());
    }

    #[test]
    fn schema_is_send_sync_and_cheap_to_clone() {
        fn assert_send_sync<T: Send + Sync + Clone + fmt::Debug>() {}
        assert_send_sync::<Schema>();
        let s = Schema::compile(&json!({})).unwrap();
        let t = s.clone();
        assert!(Arc::ptr_eq(&s.nodes, &t.nodes));
    }

    #[test]
    fn local_references_recursive_ones_too() {
        // What pydantic emits for nested models (FastMCP, mcp-server-time).
        let schema = Schema::compile(&json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    },
                    "required": ["name"],
                    "additionalProperties": false,
                },
                "Color": {"enum": ["red", "green"]},
            },
            "properties": {
                "tree": {"$ref": "#/$defs/Node", "description": "the root"},
                "color": {"$ref": "#/$defs/Color", "default": "red"},
                "again": {"$ref": "#"},
            },
            "additionalProperties": false,
        }))
        .unwrap();
        let good = json!({"tree": {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}, "color": "red", "again": {"color": "green"}});
        assert!(schema.validate(&good).is_ok());
        let bad = json!({"tree": {"name": "a", "children": [{"name": 5}]}, "color": "blue", "again": {"x": 1}});
        let violations = schema.validate(&bad).unwrap_err();
        let paths: Vec<&str> = violations.iter().map(|v| v.path.as_str()).collect();
        assert!(paths.contains(&"/tree/children/0/name"), "{paths:?}");
        assert!(paths.contains(&"/color"), "{paths:?}");
        assert!(paths.contains(&"/again/x"), "{paths:?}");
        // `definitions`, a root that is a reference (pydantic v1).
        let v1 = Schema::compile(&json!({
            "$ref": "#/definitions/M",
            "definitions": {"M": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        }))
        .unwrap();
        assert!(v1.validate(&json!({"n": 1})).is_ok());
        assert!(v1.validate(&json!({"n": "x"})).is_err());
        assert!(v1.validate(&json!(3)).is_err());
        // A name with `/` and `~`, escaped in the pointer.
        Schema::compile(&json!({"$defs": {"a/b~c": {}}, "items": {"$ref": "#/$defs/a~1b~0c"}}))
            .unwrap();
    }

    #[test]
    fn references_that_would_loop_or_explode_are_refused() {
        let e = err(
            json!({"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}, "items": {"$ref": "#/$defs/A"}}),
        );
        assert!(e.message.contains("refers to itself"), "{e}");
        assert!(
            err(json!({"$ref": "#"}))
                .message
                .contains("refers to itself")
        );
        let e = err(
            json!({"$defs": {"A": {"oneOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}}, "items": {"$ref": "#/$defs/A"}}),
        );
        assert!(e.message.contains("never end"), "{e}");
        // 2^20 checks of one value from a few lines of schema.
        let mut defs = serde_json::Map::new();
        for i in 0..20 {
            defs.insert(
                format!("D{i}"),
                json!({"oneOf": [{"$ref": format!("#/$defs/D{}", i + 1)}, {"$ref": format!("#/$defs/D{}", i + 1)}]}),
            );
        }
        defs.insert("D20".into(), json!({"type": "string"}));
        let e = err(json!({"$defs": defs, "items": {"$ref": "#/$defs/D0"}}));
        assert!(e.message.contains("at most 10000"), "{e}");
        // The same through `allOf`, `anyOf`, `not` and `if`/`then`.
        let mut defs = serde_json::Map::new();
        for i in 0..20 {
            let next = json!({"$ref": format!("#/$defs/D{}", i + 1)});
            defs.insert(
                format!("D{i}"),
                match i % 4 {
                    0 => json!({"allOf": [next, next]}),
                    1 => json!({"anyOf": [next, next]}),
                    2 => json!({"not": next, "if": next}),
                    _ => json!({"if": next, "then": next}),
                },
            );
        }
        defs.insert("D20".into(), json!({"type": "string"}));
        let e = err(json!({"$defs": defs, "items": {"$ref": "#/$defs/D0"}}));
        assert!(e.message.contains("at most 10000"), "{e}");
        let e = err(
            json!({"$defs": {"A": {"anyOf": [{"not": {"$ref": "#/$defs/A"}}]}}, "items": {"$ref": "#/$defs/A"}}),
        );
        assert!(e.message.contains("never end"), "{e}");
        // Unknown targets, remote ones, definitions below the root,
        // constraints next to a reference.
        assert!(
            err(json!({"$ref": "#/$defs/none"}))
                .message
                .contains("does not name")
        );
        assert!(
            err(json!({"$ref": "other.json#/x"}))
                .message
                .contains("does not name")
        );
        let e = err(json!({"properties": {"a": {"$defs": {}}}}));
        assert!(e.message.contains("at the root only"), "{e}");
        // A reference beside other keywords is one more schema the value
        // holds to (draft 2020-12), and may loop like any other.
        let beside = Schema::compile(
            &json!({"$defs": {"A": {"minLength": 2}}, "properties": {"a": {"$ref": "#/$defs/A", "type": "string"}}}),
        )
        .unwrap();
        assert!(beside.is_valid(&json!({"a": "xy"})));
        assert!(!beside.is_valid(&json!({"a": "x"})));
        assert!(!beside.is_valid(&json!({"a": 12})));
        let e = err(
            json!({"$defs": {"A": {"type": "object", "$ref": "#/$defs/A"}}, "items": {"$ref": "#/$defs/A"}}),
        );
        assert!(e.message.contains("never end"), "{e}");
    }

    #[test]
    fn a_long_reference_chain_is_stack_safe() {
        let mut defs = serde_json::Map::new();
        for i in 0..50_000 {
            defs.insert(
                format!("D{i}"),
                json!({"$ref": format!("#/$defs/D{}", i + 1)}),
            );
        }
        defs.insert("D50000".into(), json!({"type": "string"}));
        let schema =
            Schema::compile(&json!({"$defs": defs, "items": {"$ref": "#/$defs/D0"}})).unwrap();
        assert!(schema.validate(&json!(["x"])).is_ok());
        assert!(schema.validate(&json!([1])).is_err());
    }
}
