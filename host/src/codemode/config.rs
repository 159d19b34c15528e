//! `[run_code]` in the configuration: the Code Mode interpreter's limits.

use serde::{Deserialize, Serialize};
use toolgate_schema::derive::Schema;

use crate::grants::MAX_INSTANCE_MEMORY_MB;

/// `[run_code]`: the Code Mode interpreter's limits; every field defaults
/// to the constant of the same name in `codemode`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct RunCodeConfig {
    /// Tool calls one program may make.
    pub max_nested_calls: Option<usize>,
    /// Printed output kept, in KiB.
    pub max_output_kb: Option<usize>,
    /// The interpreter instance's memory, in MiB.
    pub memory_mb: Option<usize>,
    /// Wall time of one program, in milliseconds.
    pub timeout_ms: Option<u32>,
}

impl RunCodeConfig {
    /// The problems of `[run_code]`.
    pub fn check(&self, problems: &mut Vec<String>) {
        for (key, value) in [
            ("max_output_kb", self.max_output_kb),
            ("memory_mb", self.memory_mb),
            ("timeout_ms", self.timeout_ms.map(|v| v as usize)),
        ] {
            crate::config::positive(
                &format!("/run_code/{key}"),
                value.map(|v| v as u64),
                problems,
            );
        }
        if let Some(mb) = self.memory_mb
            && mb > MAX_INSTANCE_MEMORY_MB
        {
            problems.push(format!(
                "/run_code/memory_mb: {mb} is more than one instance can have ({MAX_INSTANCE_MEMORY_MB} MiB)"
            ));
        }
    }
}
