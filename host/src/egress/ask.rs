//! `[egress] ask = true`: a destination no rule allows becomes a question
//! to the call's approver instead of a refusal.
//!
//! Only what the rules leave open is asked about: `[egress] deny` refuses
//! first (final: no approval or grant reaches past it), and the address
//! classes are checked before the question — an ask never opens a
//! private, loopback or link-local address that `[egress] allow_private`
//! does not name. So the question names the call (tool, call id, scope,
//! plugin), the destination and port, and the address it resolved to
//! (the one the connection then goes to: no second resolution).
//!
//! One [`CallAsk`] per call (made by the pipeline with the call's approver:
//! the turn's, else the host's). It keeps each answer for the rest of the
//! call, by destination and port: a tool that opens 50 connections to one
//! host asks once, and 50 that open at once wait for the one question.
//! A denial is kept as well (no second question about the same place).
//! At most [`EGRESS_MAX_ASKS_PER_CALL`] destinations per call are asked
//! about; the rest are refused without asking (a flood of questions, or
//! names used to carry data out through DNS).
//!
//! The wait is the connection's own (the proxy serves each connection on
//! its task), bounded by the approver (the queue's `[approval] timeout_ms`)
//! and the call: when the call ends, its proxy and every connection
//! waiting in it go, and a queue entry waiting for them is withdrawn.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use crate::approval::{
    ApprovalAnswer, ApprovalRequest, Approver, CallCard, EGRESS_ASKED_BY, EgressAsk,
};
use crate::budgets::EGRESS_MAX_ASKS_PER_CALL;
use crate::call::{CallInfo, Client};

/// What an ask came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Approved: by whom (the approver, a person, an approval entry, a
    /// grant), for the connection's record.
    Approved(String),
    /// Refused, by whom and why.
    Refused { by: String, reason: String },
}

/// The asking of one call (see the module docs).
pub struct CallAsk {
    approver: Arc<dyn Approver>,
    call: Arc<CallInfo>,
    client: Option<Arc<Client>>,
    answers: Mutex<HashMap<(String, u16), Shared>>,
}

/// One destination's answer, shared by the connections waiting for it.
type Shared = Arc<OnceCell<Answer>>;

impl std::fmt::Debug for CallAsk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallAsk")
            .field("approver", &self.approver.name())
            .field("call", &self.call.call_id)
            .finish()
    }
}

impl CallAsk {
    /// The asking of `call`, answered by `approver`.
    pub fn new(
        approver: Arc<dyn Approver>,
        call: Arc<CallInfo>,
        client: Option<Arc<Client>>,
    ) -> Arc<CallAsk> {
        Arc::new(CallAsk {
            approver,
            call,
            client,
            answers: Mutex::new(HashMap::new()),
        })
    }

    /// The call this asks for.
    pub fn call(&self) -> &CallInfo {
        &self.call
    }

    /// What is known before `name:port` is even resolved: `Some` refusal
    /// when this call was refused it already, or when it is a new
    /// destination and the call asked about as many as it may — so a
    /// process cannot make the resolver look up names beyond the bound.
    pub fn before_resolving(&self, name: &str, port: u16) -> Option<Answer> {
        let answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        match answers.get(&(name.to_string(), port)) {
            Some(cell) => match cell.get() {
                Some(refused @ Answer::Refused { .. }) => Some(refused.clone()),
                _ => None,
            },
            None if answers.len() >= EGRESS_MAX_ASKS_PER_CALL => Some(Self::too_many()),
            None => None,
        }
    }

    fn too_many() -> Answer {
        Answer::Refused {
            by: EGRESS_ASKED_BY.into(),
            reason: format!(
                "this call asked about {EGRESS_MAX_ASKS_PER_CALL} destinations already, the \
                 most one call may; no more are asked about"
            ),
        }
    }

    /// May the call's `plugin` connect to `name:port` (resolved to
    /// `address`) through `via`? Asked once per destination per call.
    pub async fn ask(
        &self,
        plugin: &str,
        via: &str,
        name: &str,
        port: u16,
        address: IpAddr,
    ) -> Answer {
        let key = (name.to_string(), port);
        let cell = {
            let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
            match answers.get(&key) {
                Some(cell) => cell.clone(),
                None if answers.len() >= EGRESS_MAX_ASKS_PER_CALL => return Self::too_many(),
                None => {
                    let cell = Arc::new(OnceCell::new());
                    answers.insert(key, cell.clone());
                    cell
                }
            }
        };
        cell.get_or_init(|| self.question(plugin, via, name, port, address))
            .await
            .clone()
    }

    async fn question(
        &self,
        plugin: &str,
        via: &str,
        name: &str,
        port: u16,
        address: IpAddr,
    ) -> Answer {
        let call = &self.call;
        let scope = if call.agent_scope.is_empty() {
            String::new()
        } else {
            format!(", scope `{}`", call.agent_scope)
        };
        let shown = match address {
            IpAddr::V6(a) => format!("[{a}]"),
            a => a.to_string(),
        };
        let prompt = format!(
            "`{plugin}` (tool `{}`, call {}{scope}) wants to connect to {name}:{port} \
             (resolved to {shown}), which no egress rule allows. Approve to let this call \
             connect there; deny to refuse it.",
            call.tool_name, call.call_id
        );
        let request = ApprovalRequest {
            call: self.call.clone(),
            prompt,
            asked_by: EGRESS_ASKED_BY.into(),
            card: Some(CallCard {
                title: format!("egress: {name}:{port}"),
                detail: Some(format!(
                    "{plugin} connects to {name}:{port} ({shown}) via {via}"
                )),
            }),
            client: self.client.clone(),
        };
        let egress = EgressAsk {
            name: name.to_string(),
            port,
            address: address.to_string(),
            plugin: plugin.to_string(),
            via: via.to_string(),
        };
        let answer = self.approver.approve_egress(&request, &egress).await;
        tracing::info!(
            call_id = %call.call_id, plugin, name, port, approver = self.approver.name(),
            answer = %answer, "egress approval answered"
        );
        let by = self.approver.name().to_string();
        match answer {
            ApprovalAnswer::Approve => Answer::Approved(by),
            ApprovalAnswer::ApprovedBy(who) => Answer::Approved(who),
            ApprovalAnswer::Deny(reason) => Answer::Refused { by, reason },
            ApprovalAnswer::DeniedBy { by, reason } => Answer::Refused { by, reason },
            ApprovalAnswer::Unavailable(why) => Answer::Refused {
                by,
                reason: format!("nobody could be asked ({why})"),
            },
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;

    use super::*;
    use crate::call::{CallOrigin, ToolMeta};

    /// Answers every question `allow`ing or not, after `delay`, counting
    /// the egress questions.
    pub(crate) struct Counting {
        pub allow: bool,
        pub delay: std::time::Duration,
        pub egress: AtomicUsize,
        pub last: Mutex<Option<(String, EgressAsk)>>,
    }

    impl Counting {
        pub(crate) fn new(allow: bool) -> Arc<Counting> {
            Arc::new(Counting {
                allow,
                delay: std::time::Duration::from_millis(50),
                egress: AtomicUsize::new(0),
                last: Mutex::new(None),
            })
        }
    }

    #[async_trait]
    impl Approver for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        async fn approve(&self, _request: &ApprovalRequest) -> ApprovalAnswer {
            tokio::time::sleep(self.delay).await;
            if self.allow {
                ApprovalAnswer::Approve
            } else {
                ApprovalAnswer::Deny("not there".into())
            }
        }
        async fn approve_egress(
            &self,
            request: &ApprovalRequest,
            egress: &EgressAsk,
        ) -> ApprovalAnswer {
            self.egress.fetch_add(1, Ordering::SeqCst);
            *self.last.lock().unwrap() = Some((request.prompt.clone(), egress.clone()));
            self.approve(request).await
        }
    }

    pub(crate) fn call() -> Arc<CallInfo> {
        Arc::new(CallInfo::new(
            1,
            "c1".into(),
            "bash".into(),
            serde_json::json!({ "command": "curl" }),
            CallOrigin {
                agent_scope: "team".into(),
                ..CallOrigin::default()
            },
            ToolMeta::unknown(),
        ))
    }

    #[tokio::test]
    async fn a_call_asks_once_per_destination_however_many_connections() {
        let approver = Counting::new(true);
        let ask = CallAsk::new(approver.clone(), call(), None);
        let addr: IpAddr = "93.184.215.14".parse().unwrap();
        // 50 at once: one question, 50 answers.
        let answers = futures::future::join_all(
            (0..50).map(|_| ask.ask("bash", "connect", "example.org", 443, addr)),
        )
        .await;
        assert!(
            answers
                .iter()
                .all(|a| *a == Answer::Approved("counting".into()))
        );
        assert_eq!(approver.egress.load(Ordering::SeqCst), 1);
        let (prompt, asked) = approver.last.lock().unwrap().clone().unwrap();
        for shown in [
            "`bash`",
            "tool `bash`",
            "call c1",
            "scope `team`",
            "example.org:443",
            "93.184.215.14",
        ] {
            assert!(prompt.contains(shown), "{shown}: {prompt}");
        }
        assert_eq!(
            (
                asked.name.as_str(),
                asked.port,
                asked.address.as_str(),
                asked.via.as_str()
            ),
            ("example.org", 443, "93.184.215.14", "connect")
        );
        assert_eq!(ask.before_resolving("example.org", 443), None);
        assert_eq!(ask.before_resolving("new.example", 443), None);
        // Another port is another destination.
        ask.ask("bash", "connect", "example.org", 80, addr).await;
        assert_eq!(approver.egress.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_refusal_is_kept_and_the_questions_are_bounded() {
        let approver = Counting::new(false);
        let ask = CallAsk::new(approver.clone(), call(), None);
        let addr: IpAddr = "93.184.215.14".parse().unwrap();
        for _ in 0..3 {
            let a = ask.ask("bash", "connect", "example.org", 443, addr).await;
            assert_eq!(
                a,
                Answer::Refused {
                    by: "counting".into(),
                    reason: "not there".into()
                }
            );
        }
        assert_eq!(approver.egress.load(Ordering::SeqCst), 1);
        for i in 1..EGRESS_MAX_ASKS_PER_CALL {
            ask.ask("bash", "connect", &format!("h{i}.example"), 443, addr)
                .await;
        }
        assert_eq!(
            approver.egress.load(Ordering::SeqCst),
            EGRESS_MAX_ASKS_PER_CALL
        );
        // Known before resolving: a refused destination, and one past the
        // bound; an approved one or a new one under the bound is not.
        assert!(ask.before_resolving("example.org", 443).is_some());
        assert!(ask.before_resolving("one-more.example", 443).is_some());
        assert!(ask.before_resolving("h1.example", 443).is_some());
        let over = ask
            .ask("bash", "connect", "one-more.example", 443, addr)
            .await;
        assert!(
            matches!(&over, Answer::Refused { reason, .. } if reason.contains("16 destinations")),
            "{over:?}"
        );
        assert_eq!(
            approver.egress.load(Ordering::SeqCst),
            EGRESS_MAX_ASKS_PER_CALL,
            "not asked"
        );
    }
}
