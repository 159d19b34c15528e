//! The schema compiler against the official JSON-Schema-Test-Suite, draft
//! 2020-12 (issue 45: "schemas as servers write them"), installed by
//! `tests/mcp/setup-schema-suite.sh`.
//!
//! Every group of the suite (a schema and the instances it must accept or
//! refuse) is compiled. Either the compiler refuses the schema at load,
//! naming the keyword — the tool would not register, so no constraint is
//! believed that does not hold — or every instance must be judged as the
//! suite says. A schema that compiles and then judges one instance wrongly
//! fails this test. The counts (passed, refused at load, by keyword) are
//! printed, and BENCHMARKS.md quotes them.
//!
//! The `optional/` directory (format assertions, bignums, ECMA-262 regex
//! details) is not required of an implementation and is not run.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;
use toolgate_schema::Schema;
use toolgate_tests::needs;

fn suite() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("schema-suite");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/setup-schema-suite.sh");
    needs::expect(
        "schema_suite",
        toolgate_tests::installed(&script, &dir).map(|()| dir.join("draft2020-12")),
    )
}

#[test]
#[cfg_attr(
    not(has_schema_suite),
    ignore = "needs the JSON-Schema-Test-Suite: run `bash tests/mcp/setup-schema-suite.sh target/tmp/schema-suite`"
)]
fn every_schema_the_compiler_takes_judges_every_instance_as_the_suite_says() {
    let dir = suite();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() > 40, "the suite's files: {files:?}");
    let (mut passed, mut refused) = (0usize, 0usize);
    let mut refused_by: BTreeMap<String, usize> = BTreeMap::new();
    let mut failed = Vec::new();
    for file in &files {
        let name = file.file_stem().unwrap().to_string_lossy().to_string();
        let groups: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        for group in &groups {
            let tests = group["tests"].as_array().unwrap();
            match Schema::compile(&group["schema"]) {
                Err(e) => {
                    refused += tests.len();
                    *refused_by
                        .entry(e.keyword.clone().unwrap_or_else(|| "(none)".into()))
                        .or_default() += tests.len();
                }
                Ok(schema) => {
                    for test in tests {
                        if schema.is_valid(&test["data"]) == test["valid"].as_bool().unwrap() {
                            passed += 1;
                        } else {
                            failed.push(format!(
                                "{name}: {} / {} (valid: {})",
                                group["description"].as_str().unwrap_or("?"),
                                test["description"].as_str().unwrap_or("?"),
                                test["valid"]
                            ));
                        }
                    }
                }
            }
        }
    }
    println!(
        "JSON-Schema-Test-Suite draft 2020-12: {passed} passed, {refused} refused at load, {} failed",
        failed.len()
    );
    println!("refused at load, by keyword: {refused_by:?}");
    assert!(
        failed.is_empty(),
        "{} instances judged against the suite:\n{}",
        failed.len(),
        failed.join("\n")
    );
    // The keywords this compiler enforces are exercised, not all refused.
    assert!(passed > 300, "{passed} passed");
}
