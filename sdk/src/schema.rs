//! Argument schemas from Rust types.
//!
//! A tool's `parameters` schema is what the model sees and what the host
//! validates every call against, so it must say exactly what the tool's
//! `Deserialize` accepts. Writing it by hand lets the two drift; here it is
//! derived from the argument type instead: `#[derive(Deserialize, Schema)]`.
//!
//! The output stays inside the JSON Schema subset the host compiles (`type`,
//! `properties`, `required`, `additionalProperties`, `items`, `enum`,
//! `const`, `oneOf`, plus `description`/`title`), and the SDK's tests compile
//! every shape the derive produces with the host's own compiler. See
//! `sdk/SCHEMA.md` for the mapping and for why this is a small derive of our
//! own rather than `schemars`.
//!
//! ```
//! use serde::Deserialize;
//! use toolgate_sdk::Schema;
//!
//! /// Search files for a pattern.
//! #[derive(Deserialize, Schema)]
//! struct SearchArgs {
//!     /// Text to look for.
//!     pattern: String,
//!     /// Most matches to return.
//!     limit: Option<u32>,
//! }
//!
//! let schema = SearchArgs::schema();
//! assert_eq!(schema["description"], "Search files for a pattern.");
//! assert_eq!(schema["required"], serde_json::json!(["pattern"]));
//! assert_eq!(schema["properties"]["limit"]["type"], serde_json::json!(["integer", "null"]));
//! assert_eq!(schema["additionalProperties"], false);
//! ```

//!
//! Shapes the subset cannot state exactly are refused at compile time, e.g.
//! an untagged enum (serde takes the first variant that fits, `oneOf` needs
//! exactly one):
//!
//! ```compile_fail
//! #[derive(serde::Deserialize, toolgate_sdk::Schema)]
//! #[serde(untagged)]
//! enum Either { Number(u32), Text(String) }
//! ```
//!
//! `flatten`:
//!
//! ```compile_fail
//! #[derive(serde::Deserialize, toolgate_sdk::Schema)]
//! struct Inner { a: u8 }
//! #[derive(serde::Deserialize, toolgate_sdk::Schema)]
//! struct Outer { #[serde(flatten)] inner: Inner }
//! ```
//!
//! tuples of several fields (an array of mixed types):
//!
//! ```compile_fail
//! #[derive(serde::Deserialize, toolgate_sdk::Schema)]
//! struct Pair(u8, String);
//! ```
//!
//! a custom deserializer without `#[schema(with = "Type")]`:
//!
//! ```compile_fail
//! fn parse<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u8, D::Error> { todo!() }
//! #[derive(serde::Deserialize, toolgate_sdk::Schema)]
//! struct Args { #[serde(deserialize_with = "parse")] n: u8 }
//! ```
//!
//! and an internally tagged variant whose payload is not an object:
//!
//! ```compile_fail
//! #[derive(serde::Deserialize, toolgate_sdk::Schema)]
//! #[serde(tag = "kind")]
//! enum Named { Name(String) }
//! ```
//!
//! The same types with the shape fixed compile:
//!
//! ```
//! fn parse<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u8, D::Error> { todo!() }
//! #[derive(serde::Deserialize, toolgate_sdk::Schema)]
//! enum Either { Number(u32), Text(String) }
//! #[derive(serde::Deserialize, toolgate_sdk::Schema)]
//! struct Inner { a: u8 }
//! #[derive(serde::Deserialize, toolgate_sdk::Schema)]
//! struct Outer { inner: Inner }
//! #[derive(serde::Deserialize, toolgate_sdk::Schema)]
//! struct Pair { first: u8, second: String }
//! #[derive(serde::Deserialize, toolgate_sdk::Schema)]
//! struct Args { #[serde(deserialize_with = "parse")] #[schema(with = "u8")] n: u8 }
//! #[derive(serde::Deserialize, toolgate_sdk::Schema)]
//! #[serde(tag = "kind")]
//! enum Named { Name { name: String } }
//! ```

pub use toolgate_schema::derive::*;
