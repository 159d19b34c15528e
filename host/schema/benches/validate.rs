//! Cost of the per-call checks for a typical tool: reading the arguments
//! (snapshot) and validating them against the compiled schema.
//!
//! Run with `cargo bench -p toolgate-schema`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolgate_schema::{Limits, Schema, parse};

/// A search tool's parameters, of the size most tools have.
fn typical_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "description": "Search files under a directory for a pattern.",
        "properties": {
            "pattern": { "type": "string", "description": "Text or regular expression to look for." },
            "path": { "type": "string", "description": "Directory to search, relative to the workspace." },
            "limit": { "type": ["integer", "null"], "description": "Most matches to return." },
            "mode": { "type": "string", "enum": ["literal", "regex", "glob"] },
            "include": { "type": "array", "items": { "type": "string" } },
            "options": {
                "type": "object",
                "properties": {
                    "case_sensitive": { "type": "boolean" },
                    "hidden": { "type": "boolean" },
                    "max_depth": { "type": "integer" },
                },
                "additionalProperties": false,
            },
        },
        "required": ["pattern", "path"],
        "additionalProperties": false,
    })
}

const TYPICAL_ARGS: &str = r#"{"pattern": "fn main", "path": "src", "limit": 50, "mode": "literal",
    "include": ["*.rs", "*.toml"], "options": {"case_sensitive": true, "hidden": false, "max_depth": 8}}"#;

const INVALID_ARGS: &str = r#"{"pattern": 3, "path": "src", "limit": "ten", "mode": "fuzzy",
    "include": ["*.rs", 7], "options": {"case_sensitive": "yes", "depth": 8}, "colour": "red"}"#;

fn bench(c: &mut Criterion) {
    let schema = Schema::compile_parameters(&typical_schema()).expect("the schema compiles");
    let limits = Limits::default();
    let args = parse(TYPICAL_ARGS, &limits).expect("valid JSON");
    let invalid = parse(INVALID_ARGS, &limits).expect("valid JSON");
    assert!(schema.is_valid(&args));
    assert_eq!(schema.validate(&invalid).unwrap_err().len(), 7);

    c.bench_function("validate typical args", |b| {
        b.iter(|| black_box(&schema).validate(black_box(&args)))
    });
    c.bench_function("parse + validate typical args", |b| {
        b.iter(|| {
            let value = parse(black_box(TYPICAL_ARGS), &limits).expect("valid JSON");
            black_box(&schema).validate(&value)
        })
    });
    c.bench_function("validate invalid args (7 violations)", |b| {
        b.iter(|| black_box(&schema).validate(black_box(&invalid)))
    });
    c.bench_function("compile typical schema", |b| {
        let source = typical_schema();
        b.iter(|| Schema::compile_parameters(black_box(&source)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
