//! A zoo of argument types: every derived schema must pass the host's
//! compiler, accept what serde writes for real values, and refuse wrong
//! instances at the right path. Where serde reads an instance, the schema
//! must agree.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate_sdk::Schema;

fn compile<T: Schema>() -> toolgate_schema::Schema {
    let schema = T::schema();
    toolgate_schema::Schema::compile(&schema).unwrap_or_else(|e| {
        panic!(
            "{}: the host refuses the derived schema: {e}\n{schema:#}",
            std::any::type_name::<T>()
        )
    })
}

/// Every value serializes to an instance the schema accepts, and serde
/// reads it back.
fn accepts<T: Schema + Serialize + DeserializeOwned>(values: &[T]) {
    let schema = compile::<T>();
    for value in values {
        let instance = serde_json::to_value(value).expect("serializes");
        if let Err(v) = schema.validate(&instance) {
            panic!(
                "{}: {instance} refused: {}\n{:#}",
                std::any::type_name::<T>(),
                toolgate_schema::summarize(&v),
                T::schema()
            );
        }
        serde_json::from_value::<T>(instance).expect("serde reads what it wrote");
    }
}

/// The schema accepts the instance and serde reads it.
fn accepts_json<T: Schema + DeserializeOwned>(instance: Value) {
    let schema = compile::<T>();
    if let Err(v) = schema.validate(&instance) {
        panic!("{instance} refused: {}", toolgate_schema::summarize(&v));
    }
    if let Err(e) = serde_json::from_value::<T>(instance.clone()) {
        panic!("the schema accepts {instance} but serde refuses it: {e}");
    }
}

/// The schema refuses the instance with a violation at `path`; unless
/// `serde_too` is false (serde ignores unknown members), serde refuses it too.
fn refuses<T: Schema + DeserializeOwned>(instance: Value, path: &str, serde_too: bool) {
    let schema = compile::<T>();
    let violations = match schema.validate(&instance) {
        Ok(()) => panic!(
            "{}: {instance} accepted\n{:#}",
            std::any::type_name::<T>(),
            T::schema()
        ),
        Err(v) => v,
    };
    assert!(
        violations.iter().any(|v| v.path == path),
        "{instance}: expected a violation at {path:?}, got {}",
        toolgate_schema::summarize(&violations)
    );
    if serde_too {
        assert!(
            serde_json::from_value::<T>(instance.clone()).is_err(),
            "the schema refuses {instance} but serde reads it"
        );
    }
}

fn parameters<T: Schema>() -> toolgate_schema::Schema {
    toolgate_schema::Schema::compile_parameters(&T::schema())
        .unwrap_or_else(|e| panic!("{}: {e}", std::any::type_name::<T>()))
}

// ---------------------------------------------------------------- structs

/// Search files for a pattern.
///
/// Returns matching lines.
#[derive(Debug, Serialize, Deserialize, Schema)]
#[serde(rename_all = "camelCase")]
struct Search {
    /// Text to look for.
    pattern: String,
    /// Most matches to return.
    max_results: Option<u32>,
    include_globs: Vec<String>,
    #[serde(default)]
    case_sensitive: bool,
    #[serde(rename = "dir")]
    directory: Option<PathBuf>,
    options: Options,
    env: BTreeMap<String, String>,
    #[serde(skip)]
    cache: Option<u8>,
    r#type: Mode,
}

/// Fine-tuning.
#[derive(Debug, Serialize, Deserialize, Schema, Default)]
#[serde(default, deny_unknown_fields)]
struct Options {
    hidden: bool,
    max_depth: u16,
    /// Overrides the type's own description.
    weights: HashMap<String, Vec<Option<f64>>>,
}

/// How to match.
#[derive(Debug, Serialize, Deserialize, Schema, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Mode {
    /// Exact text.
    Literal,
    /// A regular expression.
    RegexPattern,
    #[serde(rename = "glob")]
    GlobStar,
    #[serde(skip)]
    #[allow(dead_code)]
    Hidden,
}

fn search() -> Search {
    Search {
        pattern: "fn main".into(),
        max_results: Some(5),
        include_globs: vec!["*.rs".into()],
        case_sensitive: true,
        directory: None,
        options: Options {
            hidden: true,
            max_depth: 3,
            weights: HashMap::from([("a".into(), vec![Some(1.5), None])]),
        },
        env: BTreeMap::from([("K".into(), "v".into())]),
        cache: None,
        r#type: Mode::RegexPattern,
    }
}

#[test]
fn struct_schema_shape() {
    let schema = Search::schema();
    assert_eq!(
        schema,
        json!({
            "type": "object",
            "description": "Search files for a pattern.\n\nReturns matching lines.",
            "properties": {
                "pattern": {"type": "string", "description": "Text to look for."},
                "maxResults": {"type": ["integer", "null"], "description": "Most matches to return."},
                "includeGlobs": {"type": "array", "items": {"type": "string"}},
                "caseSensitive": {"type": "boolean"},
                "dir": {"type": ["string", "null"]},
                "options": {
                    "type": "object",
                    "description": "Fine-tuning.",
                    "properties": {
                        "hidden": {"type": "boolean"},
                        "max_depth": {"type": "integer"},
                        "weights": {
                            "type": "object",
                            "additionalProperties": {"type": "array", "items": {"type": ["number", "null"]}},
                            "description": "Overrides the type's own description.",
                        },
                    },
                    "additionalProperties": false,
                },
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
                "type": {
                    "type": "string",
                    "enum": ["literal", "regex_pattern", "glob"],
                    "description": "How to match.\n\n- `literal`: Exact text.\n- `regex_pattern`: A regular expression.",
                },
            },
            "required": ["pattern", "includeGlobs", "options", "env", "type"],
            "additionalProperties": false,
        })
    );
    assert_eq!(
        Search::description(),
        Some("Search files for a pattern.\n\nReturns matching lines.")
    );
    assert_eq!(Mode::description(), Some("How to match."));
    parameters::<Search>();
    parameters::<Options>();
}

#[test]
fn struct_instances() {
    accepts(&[search()]);
    let mut s = search();
    s.directory = Some("/tmp".into());
    s.max_results = None;
    s.options = Options::default();
    accepts(&[s]);
    // What a model writes: nulls for optional fields, defaults left out.
    accepts_json::<Search>(json!({
        "pattern": "x", "maxResults": null, "includeGlobs": [], "dir": null,
        "options": {}, "env": {}, "type": "glob",
    }));
    let ok = serde_json::to_value(search()).unwrap();
    let with = |pointer: &str, v: Value| {
        let mut i = ok.clone();
        *i.pointer_mut(pointer).unwrap() = v;
        i
    };
    let without = |key: &str| {
        let mut i = ok.clone();
        i.as_object_mut().unwrap().remove(key);
        i
    };
    refuses::<Search>(with("/maxResults", json!("5")), "/maxResults", true);
    refuses::<Search>(with("/type", json!("fuzzy")), "/type", true);
    refuses::<Search>(with("/type", json!("hidden")), "/type", true);
    refuses::<Search>(
        with("/options/max_depth", json!(1.5)),
        "/options/max_depth",
        true,
    );
    refuses::<Search>(
        with("/options/weights/a/0", json!("x")),
        "/options/weights/a/0",
        true,
    );
    refuses::<Search>(with("/includeGlobs", json!("*.rs")), "/includeGlobs", true);
    refuses::<Search>(without("pattern"), "/pattern", true);
    // Unknown members: serde ignores them, the schema tells the model.
    let mut typo = ok.clone();
    typo["max_results"] = json!(3);
    refuses::<Search>(typo, "/max_results", false);
    let mut unknown = ok.clone();
    unknown["options"]["depth"] = json!(3);
    refuses::<Search>(unknown, "/options/depth", true); // deny_unknown_fields
    // A skipped field is not part of the schema.
    let mut skipped = ok;
    skipped["cache"] = json!(1);
    refuses::<Search>(skipped.clone(), "/cache", false);
    let read: Search = serde_json::from_value(skipped).unwrap();
    assert_eq!(read.cache, None, "serde ignores a skipped field too");
}

// ------------------------------------------------------------------ enums

/// A shape to draw.
#[derive(Debug, Serialize, Deserialize, Schema)]
enum Shape {
    /// A circle.
    Circle {
        /// Radius in pixels.
        radius: f64,
    },
    Rect {
        w: f64,
        h: f64,
    },
    /// A named stock shape.
    Named(String),
    Point(Point),
    /// Nothing at all.
    Empty,
    Dot,
}

#[derive(Debug, Serialize, Deserialize, Schema)]
struct Point {
    x: i32,
    y: i32,
}

#[test]
fn externally_tagged_enums() {
    let schema = Shape::schema();
    assert_eq!(schema["description"], "A shape to draw.");
    let branches = schema["oneOf"].as_array().unwrap();
    assert_eq!(branches.len(), 5);
    assert_eq!(
        branches[0],
        json!({"type": "string", "enum": ["Empty", "Dot"], "description": "- `Empty`: Nothing at all."})
    );
    assert_eq!(branches[1]["title"], "Circle");
    assert_eq!(branches[1]["description"], "A circle.");
    assert_eq!(
        branches[1]["properties"]["Circle"]["properties"]["radius"]["description"],
        "Radius in pixels."
    );
    accepts(&[
        Shape::Circle { radius: 1.0 },
        Shape::Rect { w: 1.0, h: 2.0 },
        Shape::Named("star".into()),
        Shape::Point(Point { x: 1, y: 2 }),
        Shape::Empty,
        Shape::Dot,
    ]);
    refuses::<Shape>(json!({"Circle": {"radius": "1"}}), "/Circle/radius", true);
    refuses::<Shape>(json!({"Rect": {"w": 1}}), "/Rect/h", true);
    refuses::<Shape>(json!({"Named": 3}), "/Named", true);
    refuses::<Shape>(json!("Square"), "", true);
    refuses::<Shape>(json!({"Circle": {"radius": 1}, "Dot": null}), "/Dot", true);
}

/// Something to do.
#[derive(Debug, Serialize, Deserialize, Schema)]
#[serde(
    tag = "kind",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
enum Action {
    /// Read a file.
    ReadFile {
        file_path: String,
        max_bytes: Option<u64>,
    },
    Delete(Target),
    Env(BTreeMap<String, String>),
    Noop,
}

/// What to delete.
#[derive(Debug, Serialize, Deserialize, Schema)]
struct Target {
    path: String,
    #[serde(default)]
    recursive: bool,
}

#[test]
fn internally_tagged_enums() {
    let schema = Action::schema();
    assert_eq!(
        schema["oneOf"][0],
        json!({
            "type": "object",
            "title": "read-file",
            "description": "Read a file.",
            "properties": {
                "kind": {"type": "string", "const": "read-file"},
                "filePath": {"type": "string"},
                "maxBytes": {"type": ["integer", "null"]},
            },
            "required": ["kind", "filePath"],
            "additionalProperties": false,
        })
    );
    assert_eq!(schema["oneOf"][1]["description"], "What to delete.");
    accepts(&[
        Action::ReadFile {
            file_path: "a".into(),
            max_bytes: Some(10),
        },
        Action::Delete(Target {
            path: "/tmp/x".into(),
            recursive: true,
        }),
        Action::Env(BTreeMap::from([("A".into(), "b".into())])),
        Action::Noop,
    ]);
    accepts_json::<Action>(json!({"kind": "delete", "path": "p"}));
    refuses::<Action>(
        json!({"kind": "read-file", "filePath": 1}),
        "/filePath",
        true,
    );
    refuses::<Action>(json!({"kind": "delete"}), "/path", true);
    refuses::<Action>(json!({"kind": "env", "A": 1}), "/A", true);
    refuses::<Action>(json!({"kind": "explode"}), "/kind", true);
    refuses::<Action>(json!({"filePath": "a"}), "/kind", true);
}

#[derive(Debug, Serialize, Deserialize, Schema)]
#[serde(tag = "op")]
enum Op {
    /// Begin.
    Start,
    Stop,
}

#[derive(Debug, Serialize, Deserialize, Schema)]
#[serde(tag = "t", content = "c")]
enum Message {
    Text(String),
    Ping,
    Move { x: i32, y: i32 },
}

#[test]
fn unit_only_and_adjacently_tagged_enums() {
    assert_eq!(
        Op::schema(),
        json!({
            "type": "object",
            "properties": {"op": {"type": "string", "enum": ["Start", "Stop"], "description": "- `Start`: Begin."}},
            "required": ["op"],
            "additionalProperties": false,
        })
    );
    parameters::<Op>();
    accepts(&[Op::Start, Op::Stop]);
    refuses::<Op>(json!({"op": "Pause"}), "/op", true);

    accepts(&[
        Message::Text("hi".into()),
        Message::Ping,
        Message::Move { x: 1, y: -1 },
    ]);
    refuses::<Message>(json!({"t": "Text", "c": 1}), "/c", true);
    refuses::<Message>(json!({"t": "Move", "c": {"x": 1}}), "/c/y", true);
    refuses::<Message>(json!({"t": "Text"}), "/c", true);
}

// ------------------------------------------------------- the rest of serde

macro_rules! casings {
    ($($name:ident $field_struct:ident = $rule:literal),* $(,)?) => {$(
        #[derive(Debug, Serialize, Deserialize, Schema)]
        #[serde(rename_all = $rule)]
        enum $name { VeryTasty, A, Z42 { inner_value: u8 }, HttpServer(u8) }

        #[derive(Debug, Serialize, Deserialize, Schema)]
        #[serde(rename_all = $rule)]
        struct $field_struct { very_tasty: u8, a: u8, z42: u8, http_server_2: u8 }
    )*};
}

casings! {
    Lower LowerF = "lowercase",
    Upper UpperF = "UPPERCASE",
    Pascal PascalF = "PascalCase",
    Camel CamelF = "camelCase",
    Snake SnakeF = "snake_case",
    ScreamingSnake ScreamingSnakeF = "SCREAMING_SNAKE_CASE",
    Kebab KebabF = "kebab-case",
    ScreamingKebab ScreamingKebabF = "SCREAMING-KEBAB-CASE",
}

#[test]
fn every_serde_casing_matches_serde() {
    macro_rules! check {
        ($($name:ident $field_struct:ident),*) => {$(
            accepts(&[
                $name::VeryTasty,
                $name::A,
                $name::Z42 { inner_value: 1 },
                $name::HttpServer(2),
            ]);
            accepts(&[$field_struct { very_tasty: 1, a: 2, z42: 3, http_server_2: 4 }]);
        )*};
    }
    check!(
        Lower LowerF, Upper UpperF, Pascal PascalF, Camel CamelF, Snake SnakeF,
        ScreamingSnake ScreamingSnakeF, Kebab KebabF, ScreamingKebab ScreamingKebabF
    );
    assert_eq!(
        CamelF::schema()["required"],
        json!(["veryTasty", "a", "z42", "httpServer2"])
    );
}

/// An identifier.
#[derive(Debug, Serialize, Deserialize, Schema)]
struct Id(u64);

#[derive(Debug, Serialize, Deserialize, Schema)]
#[serde(transparent)]
struct Tags {
    inner: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, Schema)]
struct Nothing;

#[derive(Debug, Serialize, Deserialize, Schema)]
struct Raw {
    r: u8,
    g: u8,
    b: u8,
}

/// A colour.
#[derive(Debug, Serialize, Deserialize, Schema, Clone, Copy)]
#[serde(from = "Raw", into = "Raw")]
struct Color(u8, u8, u8);

impl From<Raw> for Color {
    fn from(r: Raw) -> Self {
        Color(r.r, r.g, r.b)
    }
}

impl From<Color> for Raw {
    fn from(c: Color) -> Self {
        Raw {
            r: c.0,
            g: c.1,
            b: c.2,
        }
    }
}

fn parse_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
}

/// Odds and ends.
#[derive(Debug, Serialize, Deserialize, Schema)]
struct Misc {
    id: Id,
    tags: Tags,
    nothing: Nothing,
    color: Color,
    #[serde(deserialize_with = "parse_number", serialize_with = "as_string")]
    #[schema(with = "String")]
    count: u32,
    /// Anything at all.
    extra: Value,
    letter: char,
    bytes: [u8; 4],
    name: Box<str>,
    mode: Option<Mode>,
    shape: Option<Shape>,
    nested: Option<Option<u8>>,
    #[serde(alias = "colour")]
    tint: u8,
    #[serde(default = "default_level")]
    level: i8,
}

fn as_string<S: serde::Serializer>(n: &u32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&n.to_string())
}

/// serde reads the `deserialize` side of a rename.
#[derive(Debug, Serialize, Deserialize, Schema)]
#[serde(rename_all(serialize = "UPPERCASE"))]
struct Sides {
    #[serde(rename(serialize = "out", deserialize = "in"))]
    both: u8,
    #[serde(rename(serialize = "only_out"))]
    plain: u8,
}

#[test]
fn renames_follow_the_deserialize_side() {
    assert_eq!(Sides::schema()["required"], json!(["in", "plain"]));
    accepts_json::<Sides>(json!({"in": 1, "plain": 2}));
    refuses::<Sides>(json!({"out": 1, "plain": 2}), "/in", true);
}

fn default_level() -> i8 {
    3
}

fn misc() -> Misc {
    Misc {
        id: Id(7),
        tags: Tags {
            inner: vec!["a".into()],
        },
        nothing: Nothing,
        color: Color(1, 2, 3),
        count: 12,
        extra: json!({"any": [1, "thing"]}),
        letter: 'x',
        bytes: [1, 2, 3, 4],
        name: "n".into(),
        mode: Some(Mode::Literal),
        shape: Some(Shape::Dot),
        nested: Some(None),
        tint: 4,
        level: -1,
    }
}

#[test]
fn newtypes_transparent_from_with_and_options() {
    assert_eq!(
        Id::schema(),
        json!({"type": "integer", "description": "An identifier."})
    );
    assert_eq!(
        Tags::schema(),
        json!({"type": "array", "items": {"type": "string"}})
    );
    assert_eq!(Nothing::schema(), json!({"type": "null"}));
    assert_eq!(Color::schema()["description"], "A colour.");
    assert_eq!(Color::schema()["required"], json!(["r", "g", "b"]));
    let schema = Misc::schema();
    assert_eq!(schema["properties"]["count"], json!({"type": "string"}));
    assert_eq!(
        schema["properties"]["mode"]["enum"],
        json!(["literal", "regex_pattern", "glob", null])
    );
    assert_eq!(
        schema["properties"]["shape"]["oneOf"][1],
        json!({"type": "null"})
    );
    assert_eq!(
        schema["properties"]["extra"],
        json!({"description": "Anything at all."})
    );
    assert_eq!(
        schema["required"],
        json!([
            "id", "tags", "nothing", "color", "count", "extra", "letter", "bytes", "name", "tint"
        ])
    );
    parameters::<Misc>();

    let mut other = misc();
    other.mode = None;
    other.shape = Some(Shape::Circle { radius: 2.0 });
    other.nested = None;
    accepts(&[misc(), other]);
    accepts_json::<Misc>(json!({
        "id": 1, "tags": [], "nothing": null, "color": {"r": 0, "g": 0, "b": 0},
        "count": "5", "extra": null, "letter": "y", "bytes": [0, 0, 0, 0],
        "name": "", "mode": null, "shape": null, "tint": 0,
    }));
    let ok = serde_json::to_value(misc()).unwrap();
    let with = |key: &str, v: Value| {
        let mut i = ok.clone();
        i[key] = v;
        i
    };
    refuses::<Misc>(with("count", json!(5)), "/count", true);
    // serde also reads a struct from an array of its fields; the schema
    // advertises (and accepts) only the object form.
    refuses::<Misc>(with("color", json!([1, 2, 3])), "/color", false);
    refuses::<Misc>(with("nothing", json!({})), "/nothing", true);
    refuses::<Misc>(with("shape", json!("Square")), "/shape", true);
    refuses::<Misc>(with("mode", json!("loose")), "/mode", true);
    // Aliases are accepted by serde but not advertised: the schema is stricter.
    let mut alias = ok.clone();
    alias.as_object_mut().unwrap().remove("tint");
    alias["colour"] = json!(1);
    refuses::<Misc>(alias, "/colour", false);
}

// ------------------------------------------------------ generics and depth

/// One page of results.
#[derive(Debug, Serialize, Deserialize, Schema)]
struct Page<T> {
    items: Vec<T>,
    next: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, Schema)]
struct L1 {
    l2: L2,
}
#[derive(Debug, Serialize, Deserialize, Schema)]
struct L2 {
    l3: Vec<L3>,
}
#[derive(Debug, Serialize, Deserialize, Schema)]
struct L3 {
    l4: Option<L4>,
}
#[derive(Debug, Serialize, Deserialize, Schema)]
struct L4 {
    l5: BTreeMap<String, L5>,
}
#[derive(Debug, Serialize, Deserialize, Schema)]
struct L5 {
    l6: Box<L6>,
}
#[derive(Debug, Serialize, Deserialize, Schema)]
struct L6 {
    leaf: Option<Vec<BTreeMap<String, Option<Box<Shape>>>>>,
    page: Page<Page<Action>>,
}

fn deep() -> L1 {
    L1 {
        l2: L2 {
            l3: vec![L3 {
                l4: Some(L4 {
                    l5: BTreeMap::from([(
                        "k".into(),
                        L5 {
                            l6: Box::new(L6 {
                                leaf: Some(vec![BTreeMap::from([
                                    ("a".into(), Some(Box::new(Shape::Named("x".into())))),
                                    ("b".into(), None),
                                ])]),
                                page: Page {
                                    items: vec![Page {
                                        items: vec![Action::Noop],
                                        next: None,
                                    }],
                                    next: Some("2".into()),
                                },
                            }),
                        },
                    )]),
                }),
            }],
        },
    }
}

#[test]
fn generics_and_deep_nesting() {
    assert_eq!(Page::<u8>::description(), Some("One page of results."));
    parameters::<Page<Shape>>();
    accepts(&[Page {
        items: vec![Shape::Dot, Shape::Named("n".into())],
        next: None,
    }]);
    parameters::<L1>();
    accepts(&[deep()]);
    let mut wrong = serde_json::to_value(deep()).unwrap();
    wrong["l2"]["l3"][0]["l4"]["l5"]["k"]["l6"]["leaf"][0]["a"] = json!({"Named": 1});
    refuses::<L1>(wrong, "/l2/l3/0/l4/l5/k/l6/leaf/0/a/Named", true);
    let mut wrong = serde_json::to_value(deep()).unwrap();
    wrong["l2"]["l3"][0]["l4"]["l5"]["k"]["l6"]["page"]["items"][0]["items"][0] =
        json!({"kind": "delete", "path": 1});
    refuses::<L1>(wrong, "/l2/l3/0/l4/l5/k/l6/page/items/0/items/0/path", true);
}

// ------------------------------------------------------------- recursion

#[derive(Debug, Serialize, Deserialize, Schema)]
struct Tree {
    children: Vec<Tree>,
}

#[derive(Debug, Serialize, Deserialize, Schema)]
struct Cut {
    #[schema(with = "serde_json::Value")]
    children: Vec<Cut>,
}

#[test]
fn recursive_types_fail_clearly() {
    let panic = std::panic::catch_unwind(Tree::schema).unwrap_err();
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("contains itself"), "{message}");
    assert!(message.contains("schema_zoo::Tree"), "{message}");
    // The guard was released: other schemas still build on this thread.
    parameters::<Point>();
    // The suggested way out works.
    accepts(&[Cut {
        children: vec![Cut { children: vec![] }],
    }]);
}

#[test]
fn every_derived_schema_compiles() {
    fn both<T: Schema>() {
        compile::<T>();
        compile::<Option<T>>();
        compile::<Vec<T>>();
        compile::<BTreeMap<String, T>>();
    }
    both::<Search>();
    both::<Options>();
    both::<Mode>();
    both::<Shape>();
    both::<Point>();
    both::<Action>();
    both::<Target>();
    both::<Op>();
    both::<Message>();
    both::<Id>();
    both::<Tags>();
    both::<Nothing>();
    both::<Color>();
    both::<Misc>();
    both::<Page<Misc>>();
    both::<L1>();
    both::<Lower>();
    both::<ScreamingKebabF>();
    both::<Value>();
    both::<Option<Option<Shape>>>();
}
