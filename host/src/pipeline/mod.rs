//! The nine-point tool pipeline.
//!
//! ```text
//! materialize → pre-execute → approval → guard → execute (around) → body
//!             → post-execute → finalize content → result
//! ```
//!
//! One module per stage, so a rule lives where its stage lives. This module
//! only strings the stages together, in three steps, because the scheduler
//! needs to hold a call between them:
//!
//! 1. [`prepare`] — materialize, against the generation the call will hold
//!    until it ends. No policy runs; the scheduler classifies the call
//!    (parallel or exclusive) with the validated arguments this produces.
//! 2. [`admit`] — pre-execute, approval, guards. The scheduler runs this in
//!    model order, one call at a time, because policies must see calls in the
//!    order the model made them and may await (an approval waits for a
//!    person).
//! 3. [`complete`] — the intent ([`intent`]: the audit record's `started`,
//!    before anything of the call runs), execute (around), body,
//!    post-execute, finalize, freeze. Owns everything it needs, so the
//!    scheduler can spawn it and let bodies overlap.
//!
//! [`run_call`] is the three in a row, for a single call. [`result::notify`]
//! hands the frozen record to the observers once the scheduler commits it.
//!
//! Invariants kept here:
//! * nothing but `materialize` sees unvalidated arguments;
//! * every early exit is a [`CallRecord`] with a closed-set error naming the
//!   stage and who decided;
//! * a policy that errs, traps or times out never allows anything.

pub mod approval;
pub mod execute;
pub mod finalize;
pub mod guard;
pub mod intent;
pub mod materialize;
pub mod post_execute;
pub mod pre_execute;
pub mod result;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use tokio_util::sync::CancellationToken;

use crate::budgets::Budgets;
use crate::call::{CallInfo, CallSignal, ToolCall};
use crate::outcome::{CallRecord, Outcome, Stage};
use crate::policy::PreDecision;
use crate::registry::Generation;
use crate::tool::{DeferredContexts, ToolEntry};
use crate::turn::TurnOptions;

pub use approval::{ApprovalAnswer, ApprovalRequest, Approver};
pub use intent::Intents;

/// Settings every stage reads.
#[derive(Clone, Default)]
pub struct PipelineSettings {
    /// Time budgets of policies and calls, caps on what guests return.
    pub budgets: Budgets,
    /// Limits on arguments and values (depth, size).
    pub limits: toolgate_schema::Limits,
    /// Who answers `ask`. `None`: every `ask` is a deny.
    pub approver: Option<Arc<dyn Approver>>,
    /// Code Mode for every turn (the operator's `code_mode = true`), as if
    /// each turn said so.
    pub code_mode: bool,
    /// Who declares a call started before its body runs (the audit
    /// record); `None`: nobody.
    pub intents: Option<Arc<dyn Intents>>,
    /// `[[access]]`: which callers may see and call which tools. Replaced
    /// when a changed configuration is read (a reload), as a whole.
    pub access: Arc<arc_swap::ArcSwap<crate::identity::Access>>,
}

impl PipelineSettings {
    /// Time budget of one pre-execute/post-execute hook, guard, finalizer or
    /// observer invocation (a waterfall hook also gets the budgets of the
    /// listeners after it, which it may run through `next`).
    pub fn policy_timeout(&self) -> Duration {
        self.budgets.policy_timeout
    }

    /// The host's hard deadline of a call of `entry`, from now: its
    /// declared `timeout-ms` (or the operator's override) plus the grace,
    /// else the host default. Every call has one.
    pub fn call_deadline(&self, entry: &ToolEntry) -> Instant {
        let budget = entry
            .def
            .meta
            .timeout_ms
            .map(|ms| Duration::from_millis(ms.into()) + self.budgets.deadline_grace)
            .unwrap_or(self.budgets.default_tool_timeout);
        Instant::now() + budget
    }
}

impl std::fmt::Debug for PipelineSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineSettings")
            .field("budgets", &self.budgets)
            .field("code_mode", &self.code_mode)
            .field(
                "approver",
                &self.approver.as_ref().map(|a| a.name().to_string()),
            )
            .field("intents", &self.intents.is_some())
            .finish()
    }
}

/// A call that has been through the pipeline, ready to commit.
#[derive(Debug)]
pub struct Finished {
    pub info: Arc<CallInfo>,
    pub record: CallRecord,
    /// The call's tracing span: the commit (observers) is logged in it too.
    pub span: tracing::Span,
    /// Every policy decision on its way in, in order (the audit record's
    /// `decisions`); empty for a call refused at materialize.
    pub decisions: Vec<Decision>,
    /// From materialize to the frozen record, in microseconds.
    pub elapsed_us: u64,
    /// The id of the call's intent ([`Intents`]) when one was recorded:
    /// its body was dispatched.
    pub intent: Option<u64>,
    /// What its body told the person or heard from them (the audit
    /// record's `notes`; see [`crate::call::Notes`]).
    pub notes: Vec<serde_json::Value>,
}

/// One decision of stage B (pre-execute, approval, a guard), as the audit
/// record keeps it: who decided, what, why.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    pub stage: String,
    /// The listener, guard or approver that decided (`default`: no
    /// pre-execute listener did).
    pub decided_by: String,
    /// The plugin the deciding policy belongs to (none: native or host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// `allow`, `deny`, `ask` (pre-execute); `approve`, `deny` (approval);
    /// `pass`, `deny` (a guard).
    pub verdict: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Decision {
    fn new(stage: Stage, by: &str, plugin: Option<String>, verdict: &str) -> Self {
        Decision {
            stage: stage.as_str().to_string(),
            decided_by: by.to_string(),
            plugin,
            verdict: verdict.to_string(),
            reason: None,
        }
    }

    fn because(mut self, reason: &str) -> Self {
        self.reason = Some(reason.to_string());
        self
    }
}

/// The plugin of the listener named `by` in `chain`, if it is a component's.
fn plugin_of<P: ?Sized>(chain: &crate::policy::Chain<P>, by: &str) -> Option<String> {
    chain
        .iter()
        .find(|l| l.name == by)
        .and_then(|l| match &l.source {
            crate::policy::PolicySource::Component { plugin } => Some(plugin.clone()),
            crate::policy::PolicySource::Native => None,
        })
}

/// What a call carries from one step to the next: the generation it holds
/// until it ends, its frozen view, its tool, and its span.
struct Held {
    generation: Arc<Generation>,
    info: Arc<CallInfo>,
    entry: Arc<ToolEntry>,
    span: tracing::Span,
    started: Instant,
    /// The turn's own approver, for the calls a body makes in turn (Code
    /// Mode): they are asked about where the call itself would be.
    approver: Option<Arc<dyn Approver>>,
    /// Who sent the call (the turn's client), for the questions its
    /// connections ask (`[egress] ask`).
    client: Option<Arc<crate::call::Client>>,
    /// Stage B's decisions, once it ran.
    decisions: Vec<Decision>,
}

impl Held {
    /// End the call early (a denial, an abort): frozen with no content
    /// deferred, since no body ran.
    fn early(self, outcome: Outcome) -> Finished {
        let record = CallRecord::freeze(
            self.info.call_id.clone(),
            self.info.tool_name.clone(),
            outcome,
            Vec::new(),
        );
        let mut finished = finish(self.info, record, self.span, self.started);
        finished.decisions = self.decisions;
        finished
    }
}

/// A call through materialize: arguments validated and frozen, the tool
/// resolved in the generation the call holds from now on. No policy has
/// seen it yet.
#[derive(Debug)]
pub struct Prepared(Held);

/// A call the policies let through: the next step is its body.
#[derive(Debug)]
pub struct Admitted(Held);

impl Prepared {
    /// The call as every policy (and the concurrency classifier) sees it.
    pub fn info(&self) -> &Arc<CallInfo> {
        &self.0.info
    }

    /// The tool that will run the call.
    pub fn entry(&self) -> &Arc<ToolEntry> {
        &self.0.entry
    }

    /// The generation the call holds until it ends.
    pub fn generation(&self) -> &Arc<Generation> {
        &self.0.generation
    }
}

impl Admitted {
    pub fn info(&self) -> &Arc<CallInfo> {
        &self.0.info
    }

    /// What stage B decided, in order.
    pub fn decisions(&self) -> &[Decision] {
        &self.0.decisions
    }

    /// The generation the call holds until it ends.
    pub fn generation(&self) -> &Arc<Generation> {
        &self.0.generation
    }
}

/// Shows the call only (the generation and tool are the host's).
impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held").field("call", &self.info).finish()
    }
}

/// Run one call through every stage up to the frozen record. Observers are
/// not notified here: that is the commit, [`result::notify`].
pub async fn run_call(
    generation: &Arc<Generation>,
    settings: &PipelineSettings,
    call: ToolCall,
    turn: &TurnOptions,
    token: u64,
) -> Finished {
    let prepared = match prepare(generation, settings, call, turn, token) {
        Ok(p) => p,
        Err(early) => return early,
    };
    let admitted = match admit(prepared, settings, turn).await {
        Ok(a) => a,
        Err(early) => return early,
    };
    complete(admitted, settings, &turn.cancel).await
}

/// Step 1, stage A (materialize): token, Code Mode collapse, cancellation,
/// lookup, lossless snapshot and validation of the arguments. `Err` is the
/// finished early result. `generation` is held by the call until it ends.
// The `Err` is not an error but the call's early result, moved once into
// the scheduler's slots: boxing it would buy nothing.
#[allow(clippy::result_large_err)]
pub fn prepare(
    generation: &Arc<Generation>,
    settings: &PipelineSettings,
    call: ToolCall,
    turn: &TurnOptions,
    token: u64,
) -> Result<Prepared, Finished> {
    let span = tracing::info_span!("call", token, id = %call.id, tool = %call.name);
    let started = Instant::now();
    let ready = span.in_scope(|| materialize::run(generation, settings, call, turn, token));
    match ready {
        Ok((info, entry)) => Ok(Prepared(Held {
            generation: generation.clone(),
            info,
            entry,
            span,
            started,
            approver: turn.approver.clone(),
            client: turn.client.clone(),
            decisions: Vec::new(),
        })),
        Err(early) => Err(finish(early.info, early.record, span, started)),
    }
}

/// Step 2, stage B: the pre-execute waterfall, approval and the guard chain.
/// `Err` is the finished early result: a denial, or `ABORTED_BEFORE_DISPATCH`
/// if the turn is cancelled meanwhile (an approval waiting for a person is
/// not waited for once the turn is cancelled).
pub async fn admit(
    prepared: Prepared,
    settings: &PipelineSettings,
    turn: &TurnOptions,
) -> Result<Admitted, Finished> {
    let mut held = prepared.0;
    let span = held.span.clone();
    let mut decisions = Vec::new();
    let decided = tokio::select! {
        biased;
        _ = turn.cancel.cancelled() => Err(materialize::aborted_before_dispatch(&held.info)),
        decided = policy_stages(&held, settings, turn, &mut decisions).instrument(span) => decided,
    };
    held.decisions = decisions;
    match decided {
        // Cancelled while in its policies (a policy on the synchronous path
        // cannot be dropped, but the epoch callback stops it): it was never
        // dispatched, whatever the interrupted policy answered.
        _ if turn.cancel.is_cancelled() => {
            let outcome = materialize::aborted_before_dispatch(&held.info);
            Err(held.early(outcome))
        }
        Ok(()) => Ok(Admitted(held)),
        Err(outcome) => Err(held.early(outcome)),
    }
}

async fn policy_stages(
    held: &Held,
    settings: &PipelineSettings,
    turn: &TurnOptions,
    decisions: &mut Vec<Decision>,
) -> Result<(), Outcome> {
    let info = &held.info;
    let policies = &held.generation.policies;
    let decided = pre_execute::run(&policies.pre_execute, info, settings.policy_timeout()).await;
    let plugin = plugin_of(&policies.pre_execute, &decided.by);
    let stage = Stage::PreExecute;
    match decided.decision {
        PreDecision::Allow => decisions.push(Decision::new(stage, &decided.by, plugin, "allow")),
        PreDecision::Deny(reason) => {
            decisions.push(Decision::new(stage, &decided.by, plugin, "deny").because(&reason));
            return Err(pre_execute::denied(&decided.by, reason));
        }
        PreDecision::Ask(prompt) => {
            decisions.push(Decision::new(stage, &decided.by, plugin, "ask").because(&prompt));
            // The turn's own approver (a served client's) wins over the host's.
            let approver = turn.approver.as_ref().or(settings.approver.as_ref());
            // The tool's card for the person asked (a diff, say), within
            // the policy budget; a tool without one, or one that fails, is
            // asked about without a card.
            let card = if approver.is_some()
                && held
                    .entry
                    .def
                    .meta
                    .features
                    .contains(crate::tool::Features::PRESENT_CALL)
            {
                match tokio::time::timeout(
                    settings.policy_timeout(),
                    held.entry.body.present_call(info),
                )
                .await
                {
                    Ok(Ok(card)) => card,
                    _ => None,
                }
            } else {
                None
            };
            let answered = approval::run(
                approver,
                info,
                prompt,
                &decided.by,
                card,
                turn.client.clone(),
            )
            .await;
            let stage = Stage::Approval;
            match &answered {
                Ok(by) => decisions.push(Decision::new(stage, by, None, "approve")),
                Err(e) => decisions.push(
                    Decision::new(
                        stage,
                        e.decided_by.as_deref().unwrap_or("approval"),
                        None,
                        "deny",
                    )
                    .because(&e.message),
                ),
            }
            answered.map(drop).map_err(Outcome::failure)?;
        }
    }
    let checked = guard::run(&policies.guards, info, settings.policy_timeout()).await;
    // Every guard before the one that denied passed (the chain stops at
    // the first reason).
    let denier = checked.as_ref().err().and_then(|e| e.decided_by.clone());
    for g in policies.guards.iter() {
        let plugin = plugin_of(&policies.guards, &g.name);
        if Some(&g.name) == denier.as_ref() {
            let reason = checked.as_ref().err().map(|e| e.message.as_str());
            decisions.push(
                Decision::new(Stage::Guard, &g.name, plugin, "deny").because(reason.unwrap_or("")),
            );
            break;
        }
        decisions.push(Decision::new(Stage::Guard, &g.name, plugin, "pass"));
    }
    checked.map_err(Outcome::failure)
}

/// Step 3, stages C–E up to the frozen record: the intent (nothing runs
/// until it is recorded; a failure to record it ends the call), the
/// execute waterfall and the body (under `cancel` fused with every
/// deadline set on the way in), post-execute, finalize, freeze. Observers
/// are notified at commit.
pub async fn complete(
    admitted: Admitted,
    settings: &PipelineSettings,
    cancel: &CancellationToken,
) -> Finished {
    let Held {
        generation,
        info,
        entry,
        span,
        started,
        approver,
        client,
        decisions,
    } = admitted.0;
    // A call that can change nothing outside the host (its plugin's grant
    // allows no write, process, network or store) leaves nothing to
    // declare: if the host dies mid-call, nothing of it happened.
    let intent = match &settings.intents {
        Some(intents) if entry.def.meta.effects => {
            let declared = intents
                .started(&info, &generation, client.as_deref())
                .instrument(span.clone())
                .await;
            match declared {
                Ok(id) => id,
                Err(error) => {
                    let record = CallRecord::freeze(
                        info.call_id.clone(),
                        info.tool_name.clone(),
                        Outcome::failure(error),
                        Vec::new(),
                    );
                    let mut finished = finish(info, record, span, started);
                    finished.decisions = decisions;
                    return finished;
                }
            }
        }
        _ => None,
    };
    // The call's connections ask its approver (the turn's, else the
    // host's) about destinations no egress rule allows, once each; its
    // body's questions for the user go to the same approver.
    let mut extensions = crate::call::Extensions::new();
    // Who sent the call, for the seams that answer by it (`history`).
    if let Some(c) = &client {
        extensions.insert(c.clone());
    }
    if let Some(a) = approver.clone().or_else(|| settings.approver.clone()) {
        extensions.insert(crate::egress::ask::CallAsk::new(a, info.clone(), client));
    }
    let record = async {
        let policies = &generation.policies;
        // C. execute: the finalizers in force are fixed now; then the around
        // waterfall wraps the body, with the caller's cancellation fused in
        // and the call's hard deadline (every call has one).
        let finalizers = finalize::snapshot(&policies.finalizers, &entry);
        let deferred = DeferredContexts::default();
        let signal = CallSignal::new(cancel.clone(), Some(settings.call_deadline(&entry)));
        let outcome = execute::run(
            &policies.execute_around,
            &entry,
            &info,
            signal,
            deferred.clone(),
            execute::BodyAsks {
                approver,
                extensions,
            },
            &settings.limits,
        )
        .await;

        // D. post-execute waterfall, then materialize → finalize → materialize.
        let outcome = post_execute::run(
            &policies.post_execute,
            &entry,
            &info,
            outcome,
            settings.policy_timeout(),
            &settings.limits,
        )
        .await;
        let outcome = finalize::run(&finalizers, &info, outcome, settings).await;

        // E. freeze. Observers are notified at commit. The value of a tool
        // with an output schema is kept (MCP `structuredContent`): see
        // `outcome`.
        let contexts = std::mem::take(&mut *deferred.lock().unwrap_or_else(|p| p.into_inner()));
        CallRecord::freeze_keeping(
            info.call_id.clone(),
            info.tool_name.clone(),
            outcome,
            contexts,
            entry.output.is_some(),
        )
    }
    .instrument(span.clone())
    .await;
    let mut finished = finish(info, record, span, started);
    finished.decisions = decisions;
    finished.intent = intent;
    finished.notes = finished.info.notes.take();
    finished
}

fn finish(
    info: Arc<CallInfo>,
    record: CallRecord,
    span: tracing::Span,
    started: Instant,
) -> Finished {
    let elapsed_us = started.elapsed().as_micros() as u64;
    span.in_scope(|| {
        tracing::info!(
            stage = "result",
            is_error = record.is_error,
            code = record.code().unwrap_or(""),
            elapsed_us,
            "call finished"
        )
    });
    Finished {
        info,
        record,
        span,
        decisions: Vec::new(),
        elapsed_us,
        intent: None,
        notes: Vec::new(),
    }
}
