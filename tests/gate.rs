//! Deterministic latches for the scheduler tests.
//!
//! Components cannot share memory with the test, so the `gate` fixture tool
//! talks to a [`Coordinator`]: a TCP server on 127.0.0.1 that the test runs
//! and grants to the plugin. A gate body sends `arrive <id> <mode>`, blocks
//! until the test releases it ([`Coordinator::release`]), then sends
//! `leave <id>` and waits for `ack` before returning. Both directions are
//! request/response, so the coordinator's count of running bodies is exact
//! whenever the scheduler could start another one: a leave is recorded
//! before the body returns, hence before its slot can be refilled. Every
//! arrival is checked against the pool size and against exclusivity; a
//! violation fails the test at the next event it waits for.
//!
//! [`SchedulerWatch`] follows the scheduler itself: it records the scheduler's
//! `waiting` debug events (why it waits, how many calls run, which call is
//! next). A test waits for the scheduler to be blocked in a known state
//! before it releases anything — that is what makes "it did not start
//! another call" observable without sleeping.
//!
//! [`NativeGate`] speaks the same protocol from a native Rust tool.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use toolgate::tool::{BodyContext, BodyError, ToolBody, ToolDefinition, ToolFailure, ToolMeta};
use toolgate::{CallInfo, Content};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};

/// What the coordinator answers an arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Leave and succeed.
    Go,
    /// Leave and fail with the tool's own error `GATE_FAILED`.
    Fail,
    /// Say `spinning`, then compute forever without looking at the signal.
    Spin,
}

impl Verdict {
    fn line(self) -> &'static str {
        match self {
            Verdict::Go => "go\n",
            Verdict::Fail => "fail\n",
            Verdict::Spin => "spin\n",
        }
    }
}

/// What the coordinator saw, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Arrived(String),
    Left(String),
    /// The body was told to spin and is computing.
    Spinning(String),
    /// The connection closed without a leave: the body was stopped.
    Dropped(String),
}

#[derive(Default)]
struct State {
    pool: usize,
    /// Bodies between arrive and leave: (id, exclusive).
    in_flight: Vec<(String, bool)>,
    max_in_flight: usize,
    arrivals: Vec<String>,
    violations: Vec<String>,
    /// Verdicts given before the body arrived.
    early: HashMap<String, Verdict>,
    /// Bodies waiting for their verdict.
    waiting: HashMap<String, oneshot::Sender<Verdict>>,
}

impl State {
    fn arrive(&mut self, id: &str, exclusive: bool) {
        let running: Vec<&str> = self.in_flight.iter().map(|(i, _)| i.as_str()).collect();
        if let Some((x, _)) = self.in_flight.iter().find(|(_, e)| *e) {
            self.violations.push(format!(
                "{id} arrived while the exclusive call {x} was running"
            ));
        }
        if exclusive && !self.in_flight.is_empty() {
            self.violations.push(format!(
                "the exclusive call {id} arrived while {running:?} were running"
            ));
        }
        if self.in_flight.len() + 1 > self.pool {
            self.violations.push(format!(
                "{id} arrived while {running:?} were running: more than the pool of {}",
                self.pool
            ));
        }
        self.in_flight.push((id.to_string(), exclusive));
        self.max_in_flight = self.max_in_flight.max(self.in_flight.len());
        self.arrivals.push(id.to_string());
    }

    fn gone(&mut self, id: &str) {
        self.in_flight.retain(|(i, _)| i != id);
    }
}

/// What the coordinator saw over a whole test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub max_in_flight: usize,
    pub arrivals: Vec<String>,
    pub violations: Vec<String>,
}

/// The test's side of the gate protocol.
pub struct Coordinator {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    /// Events received, and those seen so far (a test drives the
    /// coordinator through shared references, beside the turn it runs).
    events: tokio::sync::Mutex<(mpsc::UnboundedReceiver<Event>, Vec<Event>)>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl Coordinator {
    /// Listen on an ephemeral port of 127.0.0.1; at most `pool` bodies may
    /// be running at once.
    pub async fn start(pool: usize) -> Coordinator {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the coordinator");
        let addr = listener.local_addr().expect("coordinator address");
        let state = Arc::new(Mutex::new(State {
            pool,
            ..State::default()
        }));
        let (tx, events) = mpsc::unbounded_channel();
        let server = tokio::spawn({
            let state = state.clone();
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(serve(stream, state.clone(), tx.clone()));
                }
            }
        });
        Coordinator {
            addr,
            state,
            events: tokio::sync::Mutex::new((events, Vec::new())),
            server,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The configuration of the `gate` plugin: where the coordinator is, the
    /// grant to reach it, and `modes_dir` (read-only) for `class: "file"`.
    pub fn plugin_config(&self, modes_dir: Option<&std::path::Path>) -> String {
        let fs = match modes_dir {
            Some(d) => format!(
                "fs = [{{ path = {:?}, access = \"read-only\" }}]\n",
                d.display().to_string()
            ),
            None => String::new(),
        };
        format!(
            "[plugins.gate]\nvars = {{ GATE_ADDR = \"{addr}\" }}\n[plugins.gate.grants]\nnetwork = [\"{addr}\"]\n{fs}",
            addr = self.addr
        )
    }

    /// Let `id` go (now if it has arrived, else as soon as it does).
    pub fn release(&self, id: &str, verdict: Verdict) {
        let mut s = lock(&self.state);
        match s.waiting.remove(id) {
            Some(tx) => {
                let _ = tx.send(verdict);
            }
            None => {
                s.early.insert(id.to_string(), verdict);
            }
        }
    }

    /// Wait until `event` has happened. Panics at the first violation.
    pub async fn until(&self, event: Event) {
        let mut events = self.events.lock().await;
        let (rx, seen) = &mut *events;
        loop {
            self.check();
            if seen.contains(&event) {
                return;
            }
            let next = rx.recv().await.expect("the coordinator is running");
            seen.push(next);
        }
    }

    pub async fn arrived(&self, id: &str) {
        self.until(Event::Arrived(id.into())).await
    }

    pub async fn left(&self, id: &str) {
        self.until(Event::Left(id.into())).await
    }

    /// The ids of the bodies running now.
    pub fn in_flight(&self) -> Vec<String> {
        lock(&self.state)
            .in_flight
            .iter()
            .map(|(i, _)| i.clone())
            .collect()
    }

    pub fn report(&self) -> Report {
        let s = lock(&self.state);
        Report {
            max_in_flight: s.max_in_flight,
            arrivals: s.arrivals.clone(),
            violations: s.violations.clone(),
        }
    }

    fn check(&self) {
        let v = lock(&self.state).violations.clone();
        assert!(v.is_empty(), "scheduling violations: {v:#?}");
    }
}

async fn serve(stream: TcpStream, state: Arc<Mutex<State>>, tx: mpsc::UnboundedSender<Event>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let Ok(Some(line)) = lines.next_line().await else {
        return;
    };
    let mut words = line.split_whitespace();
    let (Some("arrive"), Some(id), Some(mode)) = (words.next(), words.next(), words.next()) else {
        lock(&state)
            .violations
            .push(format!("unexpected first line {line:?}"));
        return;
    };
    let id = id.to_string();
    let (verdict_tx, verdict_rx) = oneshot::channel();
    {
        let mut s = lock(&state);
        s.arrive(&id, mode == "exclusive");
        match s.early.remove(&id) {
            Some(v) => {
                let _ = verdict_tx.send(v);
            }
            None => {
                s.waiting.insert(id.clone(), verdict_tx);
            }
        }
    }
    let _ = tx.send(Event::Arrived(id.clone()));
    let dropped = |state: &Mutex<State>| {
        let mut s = lock(state);
        s.gone(&id);
        s.waiting.remove(&id);
        let _ = tx.send(Event::Dropped(id.clone()));
    };
    // Either the test gives a verdict, or the body goes away (cancelled).
    let verdict = tokio::select! {
        v = verdict_rx => match v {
            Ok(v) => v,
            Err(_) => return dropped(&state),
        },
        _ = lines.next_line() => return dropped(&state),
    };
    if write.write_all(verdict.line().as_bytes()).await.is_err() {
        return dropped(&state);
    }
    match lines.next_line().await {
        Ok(Some(l)) if verdict == Verdict::Spin && l == "spinning" => {
            let _ = tx.send(Event::Spinning(id.clone()));
            // It never says anything again; the connection closes when the
            // host stops it.
            let _ = lines.next_line().await;
            dropped(&state)
        }
        Ok(Some(l)) if l == format!("leave {id}") => {
            // Recorded before the ack: the body has not returned yet.
            lock(&state).gone(&id);
            let _ = tx.send(Event::Left(id.clone()));
            let _ = write.write_all(b"ack\n").await;
        }
        _ => dropped(&state),
    }
}

/// One `waiting` event of the scheduler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// `slot`, `barrier`, `exclusive`, `finish`, `cancelled`, `failed`.
    pub reason: String,
    /// Calls whose bodies were running (not yet joined).
    pub running: u64,
    /// The position of the next call to dispatch.
    pub next: u64,
}

impl Waiting {
    pub fn new(reason: &str, running: u64, next: u64) -> Self {
        Waiting {
            reason: reason.into(),
            running,
            next,
        }
    }
}

/// Follows the scheduler through its `waiting` debug events. Installed as
/// the default subscriber of the current thread: use it from a
/// `#[tokio::test]` (a current-thread runtime, so the scheduler and the
/// bodies it spawns run on this thread).
pub struct SchedulerWatch {
    events: mpsc::UnboundedReceiver<Waiting>,
    _guard: tracing::subscriber::DefaultGuard,
}

struct WatchLayer(mpsc::UnboundedSender<Waiting>);

#[derive(Default)]
struct Fields {
    message: String,
    reason: String,
    running: u64,
    next: u64,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "reason" => self.reason = value.to_string(),
            "message" => self.message = value.to_string(),
            _ => {}
        }
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "running" => self.running = value,
            "next" => self.next = value,
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for WatchLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().target() != "toolgate::scheduler" {
            return;
        }
        let mut f = Fields::default();
        event.record(&mut f);
        if f.message == "waiting" {
            let _ = self.0.send(Waiting {
                reason: f.reason,
                running: f.running,
                next: f.next,
            });
        }
    }
}

impl SchedulerWatch {
    pub fn install() -> SchedulerWatch {
        let (tx, events) = mpsc::unbounded_channel();
        let subscriber = tracing_subscriber::registry().with(WatchLayer(tx));
        SchedulerWatch {
            events,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    /// The next time the scheduler waits.
    pub async fn next(&mut self) -> Waiting {
        self.events.recv().await.expect("the watch is installed")
    }

    /// Forget what the scheduler reported so far (between turns).
    pub fn clear(&mut self) {
        while self.events.try_recv().is_ok() {}
    }

    /// The next time the scheduler waits, which must be `expected`.
    pub async fn expect(&mut self, expected: Waiting) {
        let got = self.next().await;
        assert_eq!(got, expected, "the scheduler waited in another state");
    }
}

/// A native tool speaking the gate protocol (arguments `{id}`), with a
/// classifier that answers `answer` — counted only if `declares_classifier`.
pub struct NativeGate {
    pub addr: SocketAddr,
    pub answer: Option<bool>,
    /// What the scheduler must make of it (reported on arrival).
    pub exclusive: bool,
}

impl NativeGate {
    /// The definition of a native gate tool named `name`.
    pub fn definition(name: &str, declares_classifier: bool) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: "A native latch for the scheduler tests.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"],
                "additionalProperties": false
            }),
            output_schema: None,
            meta: ToolMeta {
                provider: "native-gate".into(),
                timeout_ms: None,
                annotations: toolgate::tool::Annotations::empty(),
                features: if declares_classifier {
                    toolgate::tool::Features::CLASSIFIER
                } else {
                    toolgate::tool::Features::empty()
                },
                effects: true,
            },
        }
    }

    async fn talk(&self, id: &str) -> std::io::Result<String> {
        let stream = TcpStream::connect(self.addr).await?;
        let (read, mut write) = stream.into_split();
        let mut lines = BufReader::new(read).lines();
        let mode = if self.exclusive {
            "exclusive"
        } else {
            "parallel"
        };
        write
            .write_all(format!("arrive {id} {mode}\n").as_bytes())
            .await?;
        let verdict = lines.next_line().await?.unwrap_or_default();
        write.write_all(format!("leave {id}\n").as_bytes()).await?;
        lines.next_line().await?;
        Ok(verdict)
    }
}

#[async_trait]
impl ToolBody for NativeGate {
    async fn is_concurrency_safe(&self, _call: &Arc<CallInfo>) -> Option<bool> {
        self.answer
    }

    async fn execute(&self, call: &Arc<CallInfo>, _ctx: BodyContext) -> Result<Value, BodyError> {
        let id = call.arguments["id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match self.talk(&id).await {
            Ok(v) if v == "go" => Ok(json!(format!("{id} done"))),
            Ok(v) => Err(BodyError::Failure(ToolFailure {
                name: "GateFailed".into(),
                code: "GATE_FAILED".into(),
                message: format!("{id}: verdict {v}"),
                details: None,
            })),
            Err(e) => Err(BodyError::Internal(toolgate::Cause::new(e))),
        }
    }

    async fn render(
        &self,
        _call: &Arc<CallInfo>,
        value: &Value,
    ) -> Result<Vec<Content>, BodyError> {
        Ok(vec![Content::Text(
            value.as_str().unwrap_or_default().into(),
        )])
    }
}

/// A native tool whose body panics: a bug in the host's process, which the
/// scheduler must treat as its own failure (the body runs as a task).
pub struct Boom;

#[async_trait]
impl ToolBody for Boom {
    async fn is_concurrency_safe(&self, _call: &Arc<CallInfo>) -> Option<bool> {
        Some(true)
    }

    async fn execute(&self, _call: &Arc<CallInfo>, _ctx: BodyContext) -> Result<Value, BodyError> {
        panic!("boom: a deliberate panic in a native tool body")
    }

    async fn render(
        &self,
        _call: &Arc<CallInfo>,
        _value: &Value,
    ) -> Result<Vec<Content>, BodyError> {
        Ok(Vec::new())
    }
}
