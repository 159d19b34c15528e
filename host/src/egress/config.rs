//! `[egress]` in the configuration: the rules every egress grant shares.

use serde::{Deserialize, Serialize};
use toolgate_schema::derive::Schema;

use super::Global;

/// `[egress]`: checked for every connection egress decides (see
/// `crate::egress` and docs/operators/egress.md, "Egress").
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct EgressConfig {
    /// Destinations refused before any grant's `egress` rules: names,
    /// `*.domains`, `host:port`, addresses and CIDR blocks.
    #[serde(default)]
    pub deny: Vec<String>,
    /// CIDR blocks whose addresses may be reached although they are
    /// private, loopback, link-local, CGNAT… (refused by default).
    #[serde(default)]
    pub allow_private: Vec<String>,
    /// A destination no rule allows (and no deny rule names, at an
    /// address no class refuses) is asked about — the call's approver,
    /// the approval queue — instead of refused. Default `false`.
    #[serde(default)]
    pub ask: bool,
}

impl EgressConfig {
    /// The shared rules, or why they do not parse.
    pub fn global(&self) -> Result<Global, String> {
        let mut global = Global::parse(&self.deny, &self.allow_private)?;
        global.ask = self.ask;
        Ok(global)
    }

    /// The problems of `[egress]`.
    pub fn check(&self, problems: &mut Vec<String>) {
        if let Err(e) = Global::parse(&self.deny, &self.allow_private) {
            problems.push(format!("/egress: {e}"));
        }
    }
}
