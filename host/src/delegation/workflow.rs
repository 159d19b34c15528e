//! `workflow(steps)`: a declared graph of sub-agent steps, each started
//! once the steps it reads from have answered, independent ones at the
//! same time (at most `[delegation] max_parallel`), each step's answer
//! handed to the steps that name it in `inputs`. A step whose input
//! failed does not run: it fails with that reason, and so on down.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};

use super::agents::State;
use super::spawn::{Spec, note, summary};
use super::{Delegation, failure};
use crate::call::CallInfo;
use crate::history::Viewer;
use crate::tool::{BodyContext, BodyError};

/// A step's id, at most (64 bytes of letters, digits, `-` and `_`).
pub const MAX_STEP_ID_BYTES: usize = 64;

/// One step as the model declares it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub id: String,
    pub prompt: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub tools: Option<Value>,
    #[serde(default)]
    pub inputs: Vec<String>,
    #[serde(default)]
    pub model: Option<String>,
}

/// The steps in an order where each comes after its inputs, or why the
/// graph is not one.
pub fn order(steps: &[Step], max_steps: usize) -> Result<Vec<usize>, String> {
    if steps.is_empty() || steps.len() > max_steps {
        return Err(format!(
            "a workflow has 1 to {max_steps} steps ([delegation] max_steps); this one has {}",
            steps.len()
        ));
    }
    let mut index = BTreeMap::new();
    for (i, s) in steps.iter().enumerate() {
        if s.id.is_empty()
            || s.id.len() > MAX_STEP_ID_BYTES
            || !s
                .id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(format!(
                "step id {:?}: 1 to {MAX_STEP_ID_BYTES} letters, digits, `-` or `_`",
                s.id
            ));
        }
        if index.insert(s.id.as_str(), i).is_some() {
            return Err(format!("step id {:?} is used twice", s.id));
        }
    }
    for s in steps {
        for input in &s.inputs {
            if !index.contains_key(input.as_str()) {
                return Err(format!(
                    "step {:?} reads from {input:?}, which is not a step",
                    s.id
                ));
            }
            if input == &s.id {
                return Err(format!("step {:?} reads from itself", s.id));
            }
        }
    }
    // Kahn's order; what is left over is a cycle.
    let mut placed: BTreeSet<usize> = BTreeSet::new();
    let mut out = Vec::with_capacity(steps.len());
    while out.len() < steps.len() {
        let next: Vec<usize> = (0..steps.len())
            .filter(|i| !placed.contains(i))
            .filter(|&i| {
                steps[i]
                    .inputs
                    .iter()
                    .all(|n| placed.contains(&index[n.as_str()]))
            })
            .collect();
        if next.is_empty() {
            let left: Vec<&str> = (0..steps.len())
                .filter(|i| !placed.contains(i))
                .map(|i| steps[i].id.as_str())
                .collect();
            return Err(format!(
                "the steps {} read from each other in a cycle",
                left.join(", ")
            ));
        }
        for i in next {
            placed.insert(i);
            out.push(i);
        }
    }
    Ok(out)
}

/// What became of one step.
#[derive(Clone, Debug)]
enum Done {
    Answered(String),
    Failed(String),
}

impl Delegation {
    pub(super) async fn workflow(
        &self,
        call: &Arc<CallInfo>,
        ctx: &BodyContext,
        owner: &Viewer,
    ) -> Result<Value, BodyError> {
        let steps: Vec<Step> =
            serde_json::from_value(call.arguments.get("steps").cloned().unwrap_or(Value::Null))
                .map_err(|e| failure("INVALID_ARGS", format!("`steps`: {e}")))?;
        order(&steps, self.limits.max_steps).map_err(|e| failure("INVALID_ARGS", e))?;
        let started = Instant::now();
        let mut done: BTreeMap<String, Done> = BTreeMap::new();
        let mut report: BTreeMap<String, Value> = BTreeMap::new();
        let mut ended_agents = Vec::new();
        let mut running = FuturesUnordered::new();
        let mut waiting: Vec<&Step> = steps.iter().collect();
        loop {
            // Steps whose inputs failed fail; those whose inputs answered
            // start, while there is room.
            let mut i = 0;
            while i < waiting.len() {
                let s = waiting[i];
                let failed_input = s.inputs.iter().find_map(|n| match done.get(n) {
                    Some(Done::Failed(why)) => Some((n, why)),
                    _ => None,
                });
                if let Some((bad, reason)) = failed_input {
                    let why = format!("its input step {bad:?} failed ({reason})");
                    report.insert(
                        s.id.clone(),
                        json!({"id": s.id, "state": "skipped", "reason": why}),
                    );
                    done.insert(s.id.clone(), Done::Failed(why));
                    waiting.remove(i);
                    continue;
                }
                let ready = s
                    .inputs
                    .iter()
                    .all(|n| matches!(done.get(n), Some(Done::Answered(_))));
                if ready && running.len() < self.limits.max_parallel {
                    let mut prompt = s.prompt.clone();
                    for n in &s.inputs {
                        if let Some(Done::Answered(a)) = done.get(n) {
                            prompt.push_str(&format!("\n\n[The answer of step {n:?}]\n{a}"));
                        }
                    }
                    let spec = Spec {
                        description: s.description.as_deref().unwrap_or(&s.id),
                        prompt,
                        tools: s.tools.as_ref(),
                        model: s.model.as_deref(),
                        background: false,
                        fork: false,
                    };
                    let at = started.elapsed().as_millis() as u64;
                    let spawned = self.spawn(call, ctx, owner, spec).await;
                    running.push(async move {
                        match spawned {
                            Ok((agent, run)) => {
                                let ended = self.run_foreground(&agent, run).await;
                                (s, at, Ok((agent, ended)))
                            }
                            Err(e) => (s, at, Err(e)),
                        }
                    });
                    waiting.remove(i);
                    continue;
                }
                i += 1;
            }
            let Some((s, at, result)) = running.next().await else {
                break;
            };
            let end = started.elapsed().as_millis() as u64;
            let (outcome, mut v) = match result {
                Ok((agent, ended)) => {
                    let v = summary(&agent, &ended);
                    let outcome = match &ended.state {
                        State::Answered => Done::Answered(ended.answer.clone()),
                        // The others end with it (the call's cancellation
                        // is theirs); each is still recorded.
                        State::Interrupted => Done::Failed("interrupted".into()),
                        other => Done::Failed(format!(
                            "{}: {}",
                            other.name(),
                            v["reason"].as_str().unwrap_or("")
                        )),
                    };
                    ended_agents.push((agent, ended));
                    (outcome, v)
                }
                Err(e) => {
                    let why = e.to_string();
                    (
                        Done::Failed(why.clone()),
                        json!({"state": "failed", "reason": why}),
                    )
                }
            };
            v["id"] = json!(s.id);
            v["startedMs"] = json!(at);
            v["endedMs"] = json!(end);
            report.insert(s.id.clone(), v);
            done.insert(s.id.clone(), outcome);
        }
        note(
            call,
            &ended_agents
                .iter()
                .map(|(a, e)| (&**a, e))
                .collect::<Vec<_>>(),
        );
        if ctx.signal.token().is_cancelled() {
            return Err(BodyError::Interrupted(crate::call::Interrupt::Cancelled));
        }
        let failed: Vec<&String> = done
            .iter()
            .filter(|(_, d)| matches!(d, Done::Failed(_)))
            .map(|(k, _)| k)
            .collect();
        Ok(json!({
            "steps": steps.iter().filter_map(|s| report.get(&s.id)).collect::<Vec<_>>(),
            "failed": failed,
            "elapsedMs": started.elapsed().as_millis() as u64,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(id: &str, inputs: &[&str]) -> Step {
        Step {
            id: id.into(),
            prompt: "p".into(),
            description: None,
            tools: None,
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            model: None,
        }
    }

    #[test]
    fn a_graph_orders_or_says_why_not() {
        let o = order(
            &[step("c", &["a", "b"]), step("a", &[]), step("b", &[])],
            16,
        )
        .unwrap();
        assert_eq!(o, vec![1, 2, 0]);
        let e = order(&[step("a", &["b"]), step("b", &["a"])], 16).unwrap_err();
        assert!(e.contains("cycle"), "{e}");
        assert!(
            order(&[step("a", &["zz"])], 16)
                .unwrap_err()
                .contains("not a step")
        );
        assert!(
            order(&[step("a", &[]), step("a", &[])], 16)
                .unwrap_err()
                .contains("twice")
        );
        assert!(order(&[step("a b", &[])], 16).is_err());
        assert!(order(&[], 16).is_err());
        assert!(
            order(&[step("a", &[]), step("b", &[])], 1)
                .unwrap_err()
                .contains("max_steps")
        );
    }
}
