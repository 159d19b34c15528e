//! The JSON boundary between a model and a tool.
//!
//! Tool arguments come from a language model: an untrusted source. This crate
//! owns the three checks every call passes before any policy sees it, and the
//! one check every tool passes before it registers:
//!
//! 1. **Snapshot** ([`parse`], [`parse_bytes`], [`check_value`]): the
//!    arguments are read once, strictly, into an immutable
//!    [`serde_json::Value`]. Anything JSON cannot carry losslessly between
//!    the model, the host and the tool is refused with a clear
//!    [`SnapshotError`] — duplicate keys (which member wins differs between
//!    parsers), lone surrogates and invalid UTF-8, integers outside
//!    ±(2^53−1) (JavaScript clients round them silently), numbers that
//!    overflow to infinity, nesting deeper or text larger than [`Limits`].
//! 2. **Compile** ([`Schema::compile`], [`Schema::compile_parameters`]): a
//!    tool's JSON Schema is compiled once, when its plugin loads. Only a
//!    small subset is accepted (see below); any other keyword is rejected
//!    with its JSON pointer instead of being ignored, because a keyword we
//!    ignore is a constraint the tool author believes holds and does not.
//! 3. **Validate** ([`Schema::validate`]): every call's arguments are checked
//!    against the compiled schema, and *every* violation is reported as a
//!    [`Violation`] `{path, expected, got}` so that a model can fix its call
//!    in one try.
//!
//! # The subset
//!
//! Validation keywords of draft 2020-12: `type` (a name or an array of
//! names), `enum`, `const`; for objects `properties`, `required`,
//! `additionalProperties` (boolean or schema), `patternProperties`,
//! `propertyNames`, `dependentRequired`, `dependentSchemas`; for arrays
//! `items` (a single schema), `prefixItems`, `contains` with `minContains`
//! and `maxContains`, `uniqueItems`; the applicators `oneOf`, `anyOf`,
//! `allOf`, `not`, `if`/`then`/`else`; and the bounds (see `bounds.rs`):
//! `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`,
//! `multipleOf`, `minLength`, `maxLength`, `pattern` (the `regex` crate's
//! syntax: no look-around or back-references, refused at load), `minItems`,
//! `maxItems`, `minProperties`, `maxProperties`. Annotations (accepted, not
//! enforced): `description`, `title`, `default`, `examples`, `$schema`,
//! `$comment`, `format` (an annotation in draft 2020-12), `deprecated`,
//! `readOnly`, `writeOnly`, `contentMediaType`, `contentEncoding`,
//! `contentSchema`. `true` and `false` are schemas too. Local references:
//! `$ref` to `#`, `#/$defs/NAME` or `#/definitions/NAME` (the root's
//! definitions, recursive ones included; beside other keywords, a reference
//! is one more schema the value holds to). Everything else — remote `$ref`,
//! `$id`, `$anchor`, `$dynamicRef`, `unevaluatedProperties`,
//! `unevaluatedItems`, … — is a [`CompileError`]. The official
//! JSON-Schema-Test-Suite measures it (`tests/tests/all/schema_suite.rs`).
//!
//! Numbers follow the JSON Schema rules: a number with a zero fraction
//! (`1.0`) is an `integer`, and `enum`/`const` compare numbers by value.
//!
//! # Stack safety
//!
//! Nothing here recurses over input structure. The parser, the compiler, the
//! validator and the value checks all keep an explicit work list, so a schema
//! or an argument nested 100,000 levels deep yields an error (or a result),
//! never a stack overflow. Values kept from a schema (`const`, `enum`) are
//! limited to [`MAX_VALUE_DEPTH`] levels because cloning, comparing and
//! dropping a [`serde_json::Value`] *is* recursive.
//!
//! # Example
//!
//! ```
//! use serde_json::json;
//! use toolgate_schema::{Limits, Schema, parse};
//!
//! let schema = Schema::compile_parameters(&json!({
//!     "type": "object",
//!     "properties": { "limit": { "type": "integer" } },
//!     "required": ["limit"],
//!     "additionalProperties": false,
//! }))
//! .unwrap();
//! let args = parse(r#"{"limit": "ten"}"#, &Limits::default()).unwrap();
//! let violations = schema.validate(&args).unwrap_err();
//! assert_eq!(violations[0].path, "/limit");
//! assert_eq!(violations[0].expected, "integer");
//! assert_eq!(violations[0].got, "string \"ten\"");
//! ```

mod bounds;
mod compile;
pub mod derive;
mod describe;
mod eq;
mod limits;
mod pointer;
mod snapshot;
mod validate;
mod violation;

pub use bounds::{MAX_PATTERN_BYTES, MAX_PATTERN_PROGRAM_BYTES};
pub use compile::{CompileError, MAX_VALUE_DEPTH, Schema};
pub use limits::{Limits, MAX_SAFE_INTEGER};
pub use snapshot::{Position, SnapshotError, SnapshotErrorKind, check_value, parse, parse_bytes};
pub use validate::MAX_VIOLATIONS;
pub use violation::{Violation, summarize};
