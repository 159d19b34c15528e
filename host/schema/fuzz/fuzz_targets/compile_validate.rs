//! Fuzz the whole boundary: snapshot → compile → validate.
//!
//! Input: `schema JSON` `\0` `instance JSON` (a NUL can never appear in JSON
//! text, so the split is unambiguous). Besides "never panic, never overflow
//! the stack", it checks invariants that tie the pieces together:
//!
//! - whatever `parse_bytes` accepts, serde_json accepts, and `check_value`
//!   accepts under the same limits (one contract, two entry points);
//! - whatever `parse_bytes` calls a syntax error, serde_json refuses too;
//! - `validate` returns between 1 and `MAX_VIOLATIONS` violations on error,
//!   and every violation's path points into the instance (or at a missing
//!   required member of an object that is there).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolgate_schema::{
    Limits, MAX_VIOLATIONS, Schema, SnapshotErrorKind, check_value, parse_bytes,
};

fn snapshot(bytes: &[u8], limits: &Limits) -> Option<Value> {
    match parse_bytes(bytes, limits) {
        Ok(value) => {
            assert!(
                serde_json::from_slice::<Value>(bytes).is_ok(),
                "serde_json refuses what the snapshot accepted"
            );
            if let Err(e) = check_value(&value, limits) {
                panic!("check_value refuses a parsed value: {e}");
            }
            Some(value)
        }
        Err(e) => {
            if matches!(e.kind, SnapshotErrorKind::Syntax(_)) {
                assert!(
                    serde_json::from_slice::<Value>(bytes).is_err(),
                    "serde_json accepts what the snapshot calls a syntax error: {e}"
                );
            }
            let _ = e.to_string();
            let _ = e.to_violation();
            None
        }
    }
}

fn parent(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_depth: 64,
        max_bytes: 64 * 1024,
    };
    let (schema_bytes, instance_bytes) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b"{}"[..]),
    };
    let Some(schema_value) = snapshot(schema_bytes, &limits) else {
        return;
    };
    let _ = Schema::compile_parameters(&schema_value);
    let schema = match Schema::compile(&schema_value) {
        Ok(schema) => schema,
        Err(e) => {
            assert!(!e.message.is_empty());
            let _ = e.to_string();
            return;
        }
    };
    let Some(instance) = snapshot(instance_bytes, &limits) else {
        return;
    };
    if let Err(violations) = schema.validate(&instance) {
        assert!(!violations.is_empty() && violations.len() <= MAX_VIOLATIONS);
        for v in &violations {
            let here = instance.pointer(&v.path).is_some();
            let missing = v.got == "missing" && instance.pointer(parent(&v.path)).is_some();
            assert!(
                here || missing,
                "violation path {:?} is not in the instance",
                v.path
            );
            assert!(!v.expected.is_empty() && !v.got.is_empty());
        }
    }
});
