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
//! the turn's, else the host's); the body's questions for the user
//! (`crate::seams::questions`) reach the same approver through it. It keeps each answer for the rest of the
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
//!
//! Both kinds of asker are an [`Asker`]: a call's ([`CallAsk`]: its
//! spawns' proxies, its component's `wasi:http` requests and `wasi:sockets`
//! connects) and a bridged MCP server's ([`ServerAsk`]: the proxy the
//! server runs behind for as long as it runs, whose connections no single
//! call owns — asked on the server's behalf, with the host's approver,
//! each wait bounded by `[approval] timeout_ms` since no call's end bounds
//! it).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::OnceCell;

use crate::approval::{
    ApprovalAnswer, ApprovalRequest, Approver, CallCard, EGRESS_ASKED_BY, EgressAsk,
};
use crate::budgets::{EGRESS_MAX_ASKS_PER_CALL, EGRESS_MAX_SERVER_QUESTIONS};
use crate::call::{CallInfo, CallOrigin, Client, ToolMeta};

/// Who a connection's question goes to: a call's asking ([`CallAsk`]:
/// a spawn's proxy, a component) or a bridged server's ([`ServerAsk`]:
/// its proxy, which no single call owns).
#[async_trait]
pub trait Asker: Send + Sync {
    /// What is known before `name:port` is resolved: `Some` refusal when
    /// it was refused already or when no more questions may be asked (so
    /// the resolver is not made to look up names beyond the bound).
    fn before_resolving(&self, name: &str, port: u16) -> Option<Answer>;

    /// May `plugin` connect to `name:port` (resolved to `address`)
    /// through `via`?
    async fn ask(&self, plugin: &str, via: &str, name: &str, port: u16, address: IpAddr) -> Answer;
}

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

/// The question about `name:port` among `questions`: its answer's cell,
/// and whether it was just opened; `None` when it would be new and `max`
/// are open already.
fn open_question(
    questions: &Mutex<HashMap<(String, u16), Shared>>,
    name: &str,
    port: u16,
    max: usize,
) -> Option<(Shared, bool)> {
    let mut questions = questions.lock().unwrap_or_else(|p| p.into_inner());
    let key = (name.to_string(), port);
    match questions.get(&key) {
        Some(cell) => Some((cell.clone(), false)),
        None if questions.len() >= max => None,
        None => {
            let cell = Arc::new(OnceCell::new());
            questions.insert(key, cell.clone());
            Some((cell, true))
        }
    }
}

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

    /// The call itself, shared (a question's request holds it).
    pub fn call_shared(&self) -> &Arc<CallInfo> {
        &self.call
    }

    /// Who answers the call's asks: its approval's approver. The call's
    /// questions for the user go to it too (`crate::seams::questions`).
    pub fn approver(&self) -> &Arc<dyn Approver> {
        &self.approver
    }

    /// Who sent the call, when the turn says.
    pub fn client(&self) -> Option<&Arc<Client>> {
        self.client.as_ref()
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
        let Some((cell, _)) = open_question(&self.answers, name, port, EGRESS_MAX_ASKS_PER_CALL)
        else {
            return Self::too_many();
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
        let (target, card) = destination(name, port, address);
        let prompt = format!(
            "`{plugin}` (tool `{}`, call {}{scope}) wants to connect to {target}, which no \
             egress rule allows. Approve to let this call connect there; deny to refuse it.",
            call.tool_name, call.call_id
        );
        let request = ApprovalRequest {
            call: self.call.clone(),
            prompt,
            asked_by: EGRESS_ASKED_BY.into(),
            card: Some(CallCard {
                title: format!("egress: {name}:{port}"),
                detail: Some(format!("{plugin} connects to {card} via {via}")),
            }),
            client: self.client.clone(),
        };
        let egress = egress_ask(plugin, via, name, port, address);
        let answer = self.approver.approve_egress(&request, &egress).await;
        tracing::info!(
            call_id = %call.call_id, plugin, name, port, approver = self.approver.name(),
            answer = %answer, "egress approval answered"
        );
        answered(self.approver.name(), answer)
    }
}

#[async_trait]
impl Asker for CallAsk {
    fn before_resolving(&self, name: &str, port: u16) -> Option<Answer> {
        CallAsk::before_resolving(self, name, port)
    }

    async fn ask(&self, plugin: &str, via: &str, name: &str, port: u16, address: IpAddr) -> Answer {
        CallAsk::ask(self, plugin, via, name, port, address).await
    }
}

/// The destination as a question shows it, and as its card does: a name
/// with the address it resolved to, or an address alone — a component's
/// `wasi:sockets` connect names no host, and the question says so.
fn destination(name: &str, port: u16, address: IpAddr) -> (String, String) {
    let shown = match address {
        IpAddr::V6(a) => format!("[{a}]"),
        a => a.to_string(),
    };
    if name.parse::<IpAddr>().ok() == Some(address) {
        (
            format!(
                "the address {shown}:{port} (an address, no name: it connects by address, \
                 so no name was looked up)"
            ),
            format!("{shown}:{port} (an address, no name)"),
        )
    } else {
        (
            format!("{name}:{port} (resolved to {shown})"),
            format!("{name}:{port} ({shown})"),
        )
    }
}

fn egress_ask(plugin: &str, via: &str, name: &str, port: u16, address: IpAddr) -> EgressAsk {
    EgressAsk {
        name: name.to_string(),
        port,
        address: address.to_string(),
        plugin: plugin.to_string(),
        via: via.to_string(),
    }
}

/// The approver's answer as an ask's ([`Answer`]), `approver` naming who
/// answered when the answer names nobody.
fn answered(approver: &str, answer: ApprovalAnswer) -> Answer {
    let by = approver.to_string();
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

/// The asking of a bridged MCP server (a stdio server under the sandbox,
/// its network through a proxy of its own for as long as it runs): its
/// connections belong to no single call, so the question is the
/// server's — `mcp:NAME` is the plugin and the tool an approval entry and
/// an egress grant name — and says which call it is making when exactly
/// one call to it is in flight (several, or none: it says that instead).
///
/// Unlike a call's, an answer is not kept: the connections waiting for
/// the same destination at the same time share one question, and its
/// answer is theirs; the next connection asks again — unless an egress
/// grant answers it (the queue checks its grants before making an entry:
/// `toolgate approvals grant ID` on the first entry answers the rest).
/// Bounds: at most [`EGRESS_MAX_SERVER_QUESTIONS`] questions open at once
/// (more are refused without asking), and each waits at most the
/// approval timeout (`[approval] timeout_ms`), whatever the approver
/// does, after which the connection is refused saying so. A connection
/// waiting is an HTTP `CONNECT` (or SOCKS5 request) the client has not
/// been answered yet: clients wait for it like for a slow proxy.
pub struct ServerAsk {
    approver: Arc<dyn Approver>,
    /// `mcp:NAME`.
    plugin: String,
    timeout: Duration,
    in_flight: Mutex<Vec<Arc<CallInfo>>>,
    open: Mutex<HashMap<(String, u16), Shared>>,
}

impl std::fmt::Debug for ServerAsk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerAsk")
            .field("approver", &self.approver.name())
            .field("server", &self.plugin)
            .finish()
    }
}

/// A call to a bridged server, in flight while this is held (see
/// [`ServerAsk::in_flight`]).
pub struct InFlight {
    ask: Arc<ServerAsk>,
    call: Arc<CallInfo>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut calls = self.ask.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = calls.iter().position(|c| Arc::ptr_eq(c, &self.call)) {
            calls.swap_remove(i);
        }
    }
}

impl ServerAsk {
    /// The asking of the bridged server `server` (`[mcp.servers.NAME]`),
    /// answered by `approver` within `timeout`.
    pub fn new(approver: Arc<dyn Approver>, server: &str, timeout: Duration) -> Arc<ServerAsk> {
        Arc::new(ServerAsk {
            approver,
            plugin: format!("mcp:{server}"),
            timeout,
            in_flight: Mutex::new(Vec::new()),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// `call` is being made to the server until the guard is dropped.
    pub fn in_flight(self: &Arc<Self>, call: Arc<CallInfo>) -> InFlight {
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(call.clone());
        InFlight {
            ask: self.clone(),
            call,
        }
    }

    /// The call named as the question's context: the one in flight, if
    /// exactly one is.
    fn context(&self) -> (Option<Arc<CallInfo>>, usize) {
        let calls = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        match calls.as_slice() {
            [one] => (Some(one.clone()), 1),
            more => (None, more.len()),
        }
    }

    fn too_many() -> Answer {
        Answer::Refused {
            by: EGRESS_ASKED_BY.into(),
            reason: format!(
                "{EGRESS_MAX_SERVER_QUESTIONS} questions about this server's connections are \
                 open already, the most at once; no more are asked until they are answered"
            ),
        }
    }

    async fn question(&self, via: &str, name: &str, port: u16, address: IpAddr) -> Answer {
        let (context, calls) = self.context();
        let during = match (&context, calls) {
            (Some(c), _) => {
                let scope = if c.agent_scope.is_empty() {
                    String::new()
                } else {
                    format!(", scope `{}`", c.agent_scope)
                };
                format!(
                    "while serving call {} (tool `{}`{scope})",
                    c.call_id, c.tool_name
                )
            }
            (None, 0) => "while no call to it is in flight".to_string(),
            (None, n) => format!("while {n} calls to it are in flight"),
        };
        let (target, card) = destination(name, port, address);
        let prompt = format!(
            "the MCP server `{}` ({during}) wants to connect to {target}, which no egress \
             rule allows. Approve to let this connection through (an egress grant for \
             `{}` lets the next ones through too); deny to refuse it.",
            self.plugin, self.plugin
        );
        // The question is the server's: the entry's tool (and a grant's,
        // by default) is `mcp:NAME`; the call in flight is context only.
        let call = Arc::new(CallInfo::new(
            0,
            context
                .as_ref()
                .map(|c| c.call_id.clone())
                .unwrap_or_default(),
            self.plugin.clone(),
            serde_json::json!({}),
            CallOrigin::default(),
            ToolMeta::unknown(),
        ));
        let request = ApprovalRequest {
            call,
            prompt,
            asked_by: EGRESS_ASKED_BY.into(),
            card: Some(CallCard {
                title: format!("egress: {name}:{port}"),
                detail: Some(format!("{} connects to {card} via {via}", self.plugin)),
            }),
            client: None,
        };
        let egress = egress_ask(&self.plugin, via, name, port, address);
        let answer = match tokio::time::timeout(
            self.timeout,
            self.approver.approve_egress(&request, &egress),
        )
        .await
        {
            Ok(a) => a,
            Err(_) => ApprovalAnswer::Unavailable(format!(
                "no answer within {} ms (`[approval] timeout_ms`)",
                self.timeout.as_millis()
            )),
        };
        tracing::info!(
            server = %self.plugin, call_id = context.as_ref().map(|c| c.call_id.as_str()).unwrap_or(""),
            name, port, approver = self.approver.name(), answer = %answer,
            "egress approval answered (bridged server)"
        );
        answered(self.approver.name(), answer)
    }
}

#[async_trait]
impl Asker for ServerAsk {
    fn before_resolving(&self, name: &str, port: u16) -> Option<Answer> {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        (!open.contains_key(&(name.to_string(), port)) && open.len() >= EGRESS_MAX_SERVER_QUESTIONS)
            .then(Self::too_many)
    }

    async fn ask(
        &self,
        _plugin: &str,
        via: &str,
        name: &str,
        port: u16,
        address: IpAddr,
    ) -> Answer {
        let Some((cell, first)) =
            open_question(&self.open, name, port, EGRESS_MAX_SERVER_QUESTIONS)
        else {
            return Self::too_many();
        };
        // Removes the question once answered (or abandoned): its answer
        // was for the connections that waited for it.
        struct Close<'a>(&'a ServerAsk, Option<(String, u16)>, Shared);
        impl Drop for Close<'_> {
            fn drop(&mut self) {
                if let Some(key) = self.1.take() {
                    let mut open = self.0.open.lock().unwrap_or_else(|p| p.into_inner());
                    if open.get(&key).is_some_and(|c| Arc::ptr_eq(c, &self.2)) {
                        open.remove(&key);
                    }
                }
            }
        }
        let _close = Close(self, first.then(|| (name.to_string(), port)), cell.clone());
        cell.get_or_init(|| self.question(via, name, port, address))
            .await
            .clone()
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

    /// Never answers (a person who walked away).
    struct Silent;

    #[async_trait]
    impl Approver for Silent {
        fn name(&self) -> &str {
            "silent"
        }
        async fn approve(&self, _request: &ApprovalRequest) -> ApprovalAnswer {
            std::future::pending().await
        }
    }

    /// A bridged server's question names the one call in flight (or says
    /// there is none, or several); connections waiting at once share it,
    /// a later one asks again; the questions open at once are bounded, and
    /// each waits at most the timeout.
    #[tokio::test]
    async fn a_server_asks_on_its_own_behalf_naming_the_call_in_flight() {
        let approver = Counting::new(true);
        let ask = ServerAsk::new(approver.clone(), "fetcher", Duration::from_secs(30));
        let addr: IpAddr = "93.184.215.14".parse().unwrap();
        let a = Asker::ask(&*ask, "ignored", "connect", "example.org", 443, addr).await;
        assert_eq!(a, Answer::Approved("counting".into()));
        let (prompt, asked) = approver.last.lock().unwrap().clone().unwrap();
        assert!(
            prompt.contains("MCP server `mcp:fetcher` (while no call to it is in flight)"),
            "{prompt}"
        );
        assert_eq!(asked.plugin, "mcp:fetcher");
        let one = ask.in_flight(call());
        let answers = futures::future::join_all(
            (0..10).map(|_| Asker::ask(&*ask, "", "connect", "example.org", 443, addr)),
        )
        .await;
        assert!(answers.iter().all(|a| matches!(a, Answer::Approved(_))));
        assert_eq!(
            approver.egress.load(Ordering::SeqCst),
            2,
            "one question for ten"
        );
        let (prompt, _) = approver.last.lock().unwrap().clone().unwrap();
        assert!(
            prompt.contains("while serving call c1 (tool `bash`, scope `team`)"),
            "{prompt}"
        );
        let two = ask.in_flight(call());
        Asker::ask(&*ask, "", "connect", "example.org", 443, addr).await;
        let (prompt, _) = approver.last.lock().unwrap().clone().unwrap();
        assert!(
            prompt.contains("while 2 calls to it are in flight"),
            "{prompt}"
        );
        drop((one, two));
        assert!(ask.in_flight.lock().unwrap().is_empty());

        // Bounded: 16 open questions at once, the 17th refused unasked;
        // each ends at the timeout.
        let silent = ServerAsk::new(Arc::new(Silent), "slow", Duration::from_millis(300));
        let started = std::time::Instant::now();
        let all = futures::future::join_all((0..=EGRESS_MAX_SERVER_QUESTIONS).map(|i| {
            let silent = silent.clone();
            async move {
                // The last one starts once the others are open.
                if i == EGRESS_MAX_SERVER_QUESTIONS {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Asker::ask(&*silent, "", "connect", &format!("h{i}.example"), 443, addr).await
            }
        }))
        .await;
        let over = &all[EGRESS_MAX_SERVER_QUESTIONS];
        assert!(
            matches!(over, Answer::Refused { reason, .. } if reason.contains("16 questions")),
            "{over:?}"
        );
        assert!(all[..EGRESS_MAX_SERVER_QUESTIONS].iter().all(|a| matches!(
            a,
            Answer::Refused { reason, .. } if reason.contains("no answer within 300 ms")
        )));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            silent.open.lock().unwrap().is_empty(),
            "closed once answered"
        );
    }
}
