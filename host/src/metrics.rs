//! The host's metrics, in the OpenMetrics text format Prometheus scrapes
//! (`toolgate serve --http` serves them at `/metrics`, behind its bearer
//! token).
//!
//! Counted where every call ends (the host's commit, whether or not an audit
//! record is kept): by tool and outcome, by the policy that denied, and the
//! call's latency from materialize to its frozen result. Read at each
//! scrape: the generation in force and the approvals pending.
//!
//! Every label value comes from a bounded set, so a client cannot grow the
//! series without end: a tool name is a registered tool's (a call to an
//! unknown name counts under `(unknown)`), an outcome is `ok`, a host code
//! or `tool_error` (a tool's own codes are the tool's, not the host's to
//! enumerate), and a denier is a loaded policy.

use std::sync::LazyLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::outcome::ErrorCode;

/// The content type of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The tool label of a call to a name no tool has.
const UNKNOWN_TOOL: &str = "(unknown)";

/// The outcome label of a tool's own failure code.
const TOOL_ERROR: &str = "tool_error";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DenialLabels {
    tool: String,
    stage: String,
    decided_by: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

/// A call's latency buckets: 50 µs to about 3.5 minutes, ×4 apart.
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 4.0, 12))
}

/// What the host counts; one per host (see the module docs).
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    denials: Family<DenialLabels, Counter>,
    duration: Family<ToolLabel, Histogram, fn() -> Histogram>,
    generation: Gauge,
    approvals_pending: Gauge,
}

/// Connections the egress proxies refused, in this process (a proxy runs
/// per spawn, not per host: a process-wide count, in every host's
/// registry).
static EGRESS_REFUSED: LazyLock<Counter> = LazyLock::new(Counter::default);

/// Counts one refusal of an egress proxy.
pub(crate) fn egress_refused() {
    EGRESS_REFUSED.inc();
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("toolgate");
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "calls",
            "Tool calls ended, by tool and outcome (ok, a host error code, or tool_error)",
            calls.clone(),
        );
        let denials = Family::<DenialLabels, Counter>::default();
        registry.register(
            "denials",
            "Policy denials, by tool, stage and the policy that denied",
            denials.clone(),
        );
        let duration = Family::<ToolLabel, Histogram, fn() -> Histogram>::new_with_constructor(
            latency as fn() -> Histogram,
        );
        registry.register(
            "call_duration_seconds",
            "A call's latency, from materialize to its frozen result",
            duration.clone(),
        );
        let generation = Gauge::default();
        registry.register(
            "generation",
            "The registry generation in force (it grows with every reload)",
            generation.clone(),
        );
        registry.register(
            "egress_refused",
            "Connections the egress proxies of this process refused",
            EGRESS_REFUSED.clone(),
        );
        let approvals_pending = Gauge::default();
        registry.register(
            "approvals_pending",
            "Calls waiting in the approval queue (0 without a queue)",
            approvals_pending.clone(),
        );
        Metrics {
            registry,
            calls,
            denials,
            duration,
            generation,
            approvals_pending,
        }
    }
}

impl Metrics {
    /// Counts one ended call: its tool's name, its failure's code (none:
    /// it succeeded), the (stage, policy) of each denial on its way, and
    /// its latency.
    pub(crate) fn call<'a>(
        &self,
        tool: &str,
        error: Option<&ErrorCode>,
        denials: impl Iterator<Item = (&'a str, &'a str)>,
        elapsed_us: u64,
    ) {
        let tool = match error {
            Some(ErrorCode::UnknownTool) => UNKNOWN_TOOL,
            _ => tool,
        };
        let outcome = match error {
            None => "ok",
            Some(ErrorCode::Tool(_)) => TOOL_ERROR,
            Some(code) => code.as_str(),
        };
        self.count(tool, outcome, denials, elapsed_us);
    }

    /// Counts one ended call of `tool` (a registered name, or
    /// [`UNKNOWN_TOOL`]) with its outcome label, its denials (stage,
    /// decider) and its latency.
    fn count<'a>(
        &self,
        tool: &str,
        outcome: &str,
        denials: impl Iterator<Item = (&'a str, &'a str)>,
        elapsed_us: u64,
    ) {
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
        for (stage, by) in denials {
            self.denials
                .get_or_create(&DenialLabels {
                    tool: tool.to_string(),
                    stage: stage.to_string(),
                    decided_by: by.to_string(),
                })
                .inc();
        }
        self.duration
            .get_or_create(&ToolLabel {
                tool: tool.to_string(),
            })
            .observe(elapsed_us as f64 / 1e6);
    }

    /// The metrics as OpenMetrics text, with the gauges read now.
    pub fn encode(&self, generation: u64, approvals_pending: Option<usize>) -> String {
        self.generation.set(generation as i64);
        if let Some(pending) = approvals_pending {
            self.approvals_pending.set(pending as i64);
        }
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call's count and latency land in their series; the text ends as
    /// OpenMetrics requires.
    #[test]
    fn a_call_is_counted_once_in_each_series() {
        let m = Metrics::default();
        m.count("bash", "ok", std::iter::empty(), 120);
        m.count(
            "bash",
            "DENIED",
            [("guard", "secrets-guard")].into_iter(),
            80,
        );
        let text = m.encode(7, Some(2));
        for line in [
            r#"toolgate_calls_total{tool="bash",outcome="ok"} 1"#,
            r#"toolgate_calls_total{tool="bash",outcome="DENIED"} 1"#,
            r#"toolgate_denials_total{tool="bash",stage="guard",decided_by="secrets-guard"} 1"#,
            r#"toolgate_call_duration_seconds_count{tool="bash"} 2"#,
            "toolgate_generation 7",
            "toolgate_approvals_pending 2",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
        // A store that cannot say keeps the last value.
        assert!(
            m.encode(7, None)
                .lines()
                .any(|l| l == "toolgate_approvals_pending 2")
        );
    }

    /// What counting costs a call (run with `--ignored --nocapture`; the
    /// figure is in BENCHMARKS.md, "Metrics").
    #[test]
    #[ignore = "a measurement"]
    fn measure_the_cost_of_counting_a_call() {
        let m = Metrics::default();
        let tools: Vec<String> = (0..20).map(|i| format!("tool_{i}")).collect();
        let mut per_call = Vec::new();
        for _ in 0..5 {
            let n = 200_000;
            let start = std::time::Instant::now();
            for i in 0..n {
                m.count(&tools[i % tools.len()], "ok", std::iter::empty(), 95);
            }
            per_call.push(start.elapsed().as_nanos() as f64 / n as f64);
        }
        per_call.sort_by(f64::total_cmp);
        println!(
            "counting a call: median {:.0} ns (runs: {per_call:.0?})",
            per_call[2]
        );
    }
}
