//! `ask`, answered by the client that made the call.
//!
//! A pre-execute hook that answers `ask` wants a person to decide. Over MCP
//! the person is behind the client, and the protocol has a way to reach
//! them: elicitation. So when the client declared the elicitation
//! capability, its calls get an approver of their own (the turn's
//! [`TurnOptions::approver`](toolgate::TurnOptions)) that asks it; otherwise the
//! host's approver decides (default deny). That is `serve --approve
//! client`, and what happens when the operator chose nothing: an explicit
//! `--approve allow|deny|queue` (or `[approval] mode`) wins, and the client
//! is never asked (`toolgate serve` turns elicitation off).
//!
//! The client that answers is the approver: nothing tells a person's
//! answer from the client's own. Where the client is not trusted to
//! approve its own calls, `serve --no-elicitation`
//! ([`ToolgateServer::with_elicitation`](super::ToolgateServer::with_elicitation))
//! never asks it, and `--approve` answers every `ask`.
//!
//! The answer maps fail-closed: `accept` approves, `decline` and `cancel`
//! deny, and anything else — an error, a client that goes away, a
//! malformed answer — denies too (as "nobody could be asked").
//!
//! Two protocol eras, two ways to ask:
//!
//! * a session opened with `initialize` (revisions up to 2025-11-25): the
//!   server sends an `elicitation/create` request and waits for the
//!   answer ([`ElicitingApprover`]);
//! * the stateless revision (2026-07-28): a server cannot send requests, so
//!   the call ends with an `InputRequiredResult` carrying the elicitation,
//!   and the client calls again with the answer in `inputResponses`
//!   ([`RoundTripApprover`]). The retried call goes through the whole
//!   pipeline again (it is a new request; nothing is kept between the two),
//!   and the first attempt is recorded as denied — "approval requested from
//!   the client" — so an audit shows both. Questions for the user
//!   (`ask_user_question`) go the same way, each ask under a key of its
//!   own ([`questions_input`]); a call that asks more than once gets the
//!   earlier answers back through its `requestState` ([`ANSWERS_STATE`]),
//!   since a retry carries only the latest round's responses.
//!
//! With the host's approval queue (`--approve queue`) the client is never
//! asked; a 2025 session's call waits in the queue, and a stateless one
//! cannot (see `approval::queue`, "Calls that do not wait"): its `ask`
//! is parked ([`ParkingApprover`]) and the call ends with an
//! `InputRequiredResult` carrying only a `requestState` that names the
//! entry ([`request_state`]); the client calls again with it (the SDKs
//! do, with a short backoff), and the retry is held until the entry is
//! decided ([`ApprovalQueue::resume`]) and then answered from it
//! ([`RetriedApprover`]): the approved call runs once; a denial, an
//! expiry or a withdrawal denies it, saying so. A client that declared
//! the Tasks extension gets a task instead ([`super::tasks`]). The calls a
//! Code Mode program makes are never parked (the retry would run the
//! program's earlier calls again): both approvers name
//! [`HoldingApprover`] for them, a bounded wait in the queue.
//!
//! An egress approval (`[egress] ask = true`: a connection the call's body
//! makes) is asked of an elicitating client like any `ask`; a stateless
//! call cannot end and come back in the middle of its body, so there it is
//! answered by the queue's egress grants or refused — never parked, and
//! never answered from the `inputResponses` or the `requestState` a retry
//! brought for the call's own `ask`.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputResponses,
};
use rmcp::service::{Peer, RoleServer};

use toolgate::approval::EgressAsk;
use toolgate::approval::hold::HoldingApprover;
use toolgate::approval::questions::{QuestionAnswer, QuestionRequest};
use toolgate::approval::queue::{ApprovalQueue, Parked, QUEUE, Resumed};
use toolgate::call::CallSignal;
use toolgate::pipeline::{ApprovalAnswer, ApprovalRequest, Approver};

/// Why a stateless call's connection cannot be asked about.
fn no_egress_round_trip(egress: &EgressAsk) -> ApprovalAnswer {
    ApprovalAnswer::Unavailable(format!(
        "this client's calls cannot wait for an egress approval (stateless requests), so \
         {}:{} is not asked about",
        egress.name, egress.port
    ))
}

/// The key of the approval in `inputRequests` / `inputResponses`.
pub const APPROVAL_INPUT: &str = "toolgate/approval";

/// What the client is asked: the question, the tool, its arguments.
pub fn question(request: &ApprovalRequest) -> String {
    let mut args = request.call.arguments.to_string();
    if args.len() > 2_000 {
        let mut end = 2_000;
        while !args.is_char_boundary(end) {
            end -= 1;
        }
        args.truncate(end);
        args.push('…');
    }
    format!(
        "`{}` asks for approval: {}\n\ntool: {}\narguments: {}\n\nAccept to run the call, decline to refuse it.",
        request.asked_by, request.prompt, request.call.tool_name, args
    )
}

fn params(request: &ApprovalRequest) -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question(request),
        requested_schema: ElicitationSchema::new(Default::default()),
    }
}

/// What an elicitation answer means for the call.
pub fn answer(result: &ElicitResult) -> ApprovalAnswer {
    match result.action {
        ElicitationAction::Accept => ApprovalAnswer::Approve,
        ElicitationAction::Decline => {
            ApprovalAnswer::Deny("the client declined the elicitation".into())
        }
        ElicitationAction::Cancel => {
            ApprovalAnswer::Deny("the client cancelled the elicitation".into())
        }
        // An action this version does not know: not an approval.
        _ => ApprovalAnswer::Unavailable("the client answered with an unknown action".into()),
    }
}

/// Asks the client with an `elicitation/create` request (sessions opened
/// with `initialize`).
pub struct ElicitingApprover {
    peer: Peer<RoleServer>,
}

impl ElicitingApprover {
    pub fn new(peer: Peer<RoleServer>) -> Self {
        ElicitingApprover { peer }
    }
}

#[async_trait]
impl Approver for ElicitingApprover {
    fn name(&self) -> &str {
        "mcp-elicitation"
    }

    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        // Waits as long as the person takes; the call's cancellation (or
        // the client going away) drops this wait.
        match self.peer.create_elicitation(params(request)).await {
            Ok(result) => answer(&result),
            Err(e) => ApprovalAnswer::Unavailable(format!("the elicitation failed: {e}")),
        }
    }

    /// One form elicitation for all the questions (see [`super::questions`]).
    async fn ask_questions(&self, request: &QuestionRequest) -> QuestionAnswer {
        let (params, keys) = match super::questions::form(request) {
            Ok(p) => p,
            Err(why) => return QuestionAnswer::Unavailable(why),
        };
        match self.peer.create_elicitation(params).await {
            Ok(result) => {
                super::questions::answers(&request.questions, &keys, &result, self.name())
            }
            Err(e) => QuestionAnswer::Unavailable(format!("the elicitation failed: {e}")),
        }
    }
}

/// The prefix of the key of questions for the user (`ask_user_question`)
/// in `inputRequests` / `inputResponses`.
pub const QUESTIONS_INPUT: &str = "toolgate/questions-";

/// The key of `questions` (their JSON's SHA-256, 16 hex digits): the
/// same questions asked again on the retry — or by another call of the
/// same Code Mode program — find their answer; other questions do not.
pub fn questions_input(questions: &toolgate::approval::questions::Questions) -> String {
    use sha2::Digest as _;
    let json = serde_json::to_vec(questions).unwrap_or_default();
    let digest = sha2::Sha256::digest(&json);
    format!(
        "{QUESTIONS_INPUT}{}",
        toolgate::audit::chain::hex(&digest[..8])
    )
}

/// The prefix of a `requestState` that carries the answers a stateless
/// call got so far: its client's retry brings only the latest round's
/// `inputResponses`, and a call that asks twice (an approval, then a
/// question; two questions) needs the earlier ones again. The client is
/// the one who answered them, so it may read them; nothing else is in it.
pub const ANSWERS_STATE: &str = "toolgate-answers:";

/// The largest answers state: 256 KiB (8 asks of 4 questions, each with
/// an answer of 4,000 characters in the user's own words, fit; past it
/// the state is not sent, and the earlier questions are asked again).
pub const MAX_ANSWERS_STATE_BYTES: usize = 256 << 10;

/// The answers a `requestState` carried ([`ANSWERS_STATE`]); none from a
/// state that is not one (a queue's entry, another server's). `Err`: one
/// of ours that does not parse, or is over the cap.
pub fn carried_answers(state: Option<&str>) -> Result<InputResponses, String> {
    let Some(json) = state.and_then(|s| s.strip_prefix(ANSWERS_STATE)) else {
        return Ok(InputResponses::new());
    };
    if json.len() > MAX_ANSWERS_STATE_BYTES {
        return Err(format!(
            "`requestState` is over {MAX_ANSWERS_STATE_BYTES} bytes: call again without it"
        ));
    }
    serde_json::from_str(json).map_err(|e| {
        format!("`requestState` is not one this server gave ({e}): call again without it")
    })
}

/// Answers from the `inputResponses` of a retried stateless call (and the
/// earlier rounds' answers its `requestState` carried), or records that
/// the client must be asked (the 2026-07-28 revision).
pub struct RoundTripApprover {
    responses: InputResponses,
    needed: Mutex<Option<InputRequests>>,
}

impl RoundTripApprover {
    /// `responses`: what the client answered so far, by input key; only
    /// the keys this server asks by are kept (they go back in the state).
    pub fn new(mut responses: InputResponses) -> Arc<Self> {
        responses.retain(|k, _| {
            k == APPROVAL_INPUT
                || k.strip_prefix(QUESTIONS_INPUT)
                    .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        });
        Arc::new(RoundTripApprover {
            responses,
            needed: Mutex::new(None),
        })
    }

    fn need(&self, key: String, request: InputRequest) {
        self.needed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(InputRequests::new)
            .insert(key, request);
    }

    /// The input the client must provide before the call can go on, if the
    /// call asked and there was no answer yet; with the `requestState`
    /// that carries the answers it gave so far.
    pub fn take_needed(&self) -> Option<(InputRequests, Option<String>)> {
        let needed = self
            .needed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        let state = (!self.responses.is_empty())
            .then(|| serde_json::to_string(&self.responses).ok())
            .flatten()
            .map(|json| format!("{ANSWERS_STATE}{json}"))
            .filter(|s| s.len() <= ANSWERS_STATE.len() + MAX_ANSWERS_STATE_BYTES);
        Some((needed, state))
    }
}

#[async_trait]
impl Approver for RoundTripApprover {
    fn name(&self) -> &str {
        "mcp-elicitation"
    }

    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        match self.responses.get(APPROVAL_INPUT) {
            Some(value) => match serde_json::from_value::<ElicitResult>(value.clone()) {
                Ok(result) => answer(&result),
                Err(e) => ApprovalAnswer::Unavailable(format!(
                    "the client's answer under `{APPROVAL_INPUT}` is not an elicitation result: {e}"
                )),
            },
            None => {
                self.need(
                    APPROVAL_INPUT.to_string(),
                    InputRequest::Elicitation(ElicitRequest::new(params(request))),
                );
                ApprovalAnswer::Unavailable(
                    "approval requested from the client; the call runs when it answers".into(),
                )
            }
        }
    }

    async fn approve_egress(
        &self,
        _request: &ApprovalRequest,
        egress: &EgressAsk,
    ) -> ApprovalAnswer {
        no_egress_round_trip(egress)
    }

    /// The form elicitation of a 2025 session ([`super::questions`]),
    /// carried by an `InputRequiredResult` under the ask's own key
    /// ([`questions_input`]); the retry's answer is checked as there.
    /// The call runs again from its start with the answers at hand, so an
    /// ask is answered by the same key on every run.
    async fn ask_questions(&self, request: &QuestionRequest) -> QuestionAnswer {
        let key = questions_input(&request.questions);
        let (params, keys) = match super::questions::form(request) {
            Ok(p) => p,
            Err(why) => return QuestionAnswer::Unavailable(why),
        };
        match self.responses.get(&key) {
            Some(value) => match serde_json::from_value::<ElicitResult>(value.clone()) {
                Ok(result) => {
                    super::questions::answers(&request.questions, &keys, &result, self.name())
                }
                Err(e) => QuestionAnswer::Unavailable(format!(
                    "the client's answer under `{key}` is not an elicitation result: {e}"
                )),
            },
            None => {
                self.need(key, InputRequest::Elicitation(ElicitRequest::new(params)));
                QuestionAnswer::Unavailable(
                    "the questions were sent to the client; the call runs again with its answer"
                        .into(),
                )
            }
        }
    }
}

/// The prefix of a `requestState` that names a pending entry of the
/// approval queue.
pub const QUEUE_STATE: &str = "toolgate-approval:";

/// The `requestState` that names entry `id`.
pub fn request_state(id: &str) -> String {
    format!("{QUEUE_STATE}{id}")
}

/// The entry a `requestState` names, if it is one of ours.
pub fn queued_entry(state: &str) -> Option<&str> {
    state
        .strip_prefix(QUEUE_STATE)
        .filter(|id| id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
}

/// Parks a stateless call's `ask` in the host's queue (a grant still
/// approves at once), and remembers the entry the client must call again
/// about.
pub struct ParkingApprover {
    queue: Arc<ApprovalQueue>,
    parked: Mutex<Option<String>>,
}

impl ParkingApprover {
    pub fn new(queue: Arc<ApprovalQueue>) -> Arc<Self> {
        Arc::new(ParkingApprover {
            queue,
            parked: Mutex::new(None),
        })
    }

    /// The entry the call was parked as, if it was.
    pub fn take_parked(&self) -> Option<String> {
        self.parked.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

#[async_trait]
impl Approver for ParkingApprover {
    fn name(&self) -> &str {
        QUEUE
    }

    fn nested(&self, signal: &CallSignal) -> Option<Arc<dyn Approver>> {
        Some(HoldingApprover::new(self.queue.clone(), signal.clone()))
    }

    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        match self.queue.park(request).await {
            Parked::Answered(answer) => answer,
            Parked::Pending(entry) => {
                let reason = format!(
                    "approval requested in the approval queue (`{}`); the client calls again \
                     with the request state, and the call runs once it is approved",
                    entry.id
                );
                *self.parked.lock().unwrap_or_else(|p| p.into_inner()) = Some(entry.id.clone());
                ApprovalAnswer::DeniedBy {
                    by: QUEUE.into(),
                    reason,
                }
            }
        }
    }

    async fn approve_egress(
        &self,
        request: &ApprovalRequest,
        egress: &EgressAsk,
    ) -> ApprovalAnswer {
        self.queue.egress_granted(request, egress).await
    }

    async fn ask_questions(&self, _request: &QuestionRequest) -> QuestionAnswer {
        QuestionAnswer::Unavailable(toolgate::approval::questions::not_stateless())
    }
}

/// Answers a stateless client's retry from the entry it named.
pub struct RetriedApprover {
    queue: Arc<ApprovalQueue>,
    resumed: Resumed,
}

impl RetriedApprover {
    pub fn new(queue: Arc<ApprovalQueue>, resumed: Resumed) -> Arc<Self> {
        Arc::new(RetriedApprover { queue, resumed })
    }
}

#[async_trait]
impl Approver for RetriedApprover {
    fn name(&self) -> &str {
        QUEUE
    }

    fn nested(&self, signal: &CallSignal) -> Option<Arc<dyn Approver>> {
        Some(HoldingApprover::new(self.queue.clone(), signal.clone()))
    }

    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.queue.answer_retry(&self.resumed, &request.call).await
    }

    async fn approve_egress(
        &self,
        request: &ApprovalRequest,
        egress: &EgressAsk,
    ) -> ApprovalAnswer {
        self.queue.egress_granted(request, egress).await
    }

    async fn ask_questions(&self, _request: &QuestionRequest) -> QuestionAnswer {
        QuestionAnswer::Unavailable(toolgate::approval::questions::not_stateless())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What a retry's `requestState` may carry back: only our answers
    /// state is read, a broken or oversized one is refused, and only the
    /// keys this server asks by are kept (and sent back).
    #[test]
    fn the_answers_state_is_checked_and_keeps_only_our_keys() {
        assert!(carried_answers(None).unwrap().is_empty());
        assert!(
            carried_answers(Some("toolgate-approval:a-1"))
                .unwrap()
                .is_empty()
        );
        let e = carried_answers(Some("toolgate-answers:{nope")).unwrap_err();
        assert!(e.contains("not one this server gave"), "{e}");
        let big = format!(
            "{ANSWERS_STATE}{{\"k\": \"{}\"}}",
            "x".repeat(MAX_ANSWERS_STATE_BYTES)
        );
        assert!(carried_answers(Some(&big)).unwrap_err().contains("over"));

        let ours = format!("{QUESTIONS_INPUT}0123456789abcdef");
        let state = format!(
            "{ANSWERS_STATE}{}",
            json!({
                APPROVAL_INPUT: {"action": "accept", "content": {}},
                ours.clone(): {"action": "decline"},
                "toolgate/questions-../../x": {"action": "accept"},
                "junk": "x".repeat(1000),
            })
        );
        let a = RoundTripApprover::new(carried_answers(Some(&state)).unwrap());
        let mut keys: Vec<&String> = a.responses.keys().collect();
        keys.sort();
        assert_eq!(keys, [&APPROVAL_INPUT.to_string(), &ours]);
        a.need(
            "toolgate/x".into(),
            InputRequest::Elicitation(ElicitRequest::new(
                ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message: "m".into(),
                    requested_schema: ElicitationSchema::new(Default::default()),
                },
            )),
        );
        let (_, state) = a.take_needed().unwrap();
        let back = carried_answers(state.as_deref()).unwrap();
        assert_eq!(back.len(), 2, "{back:?}");
    }
}
