//! Code Mode: `run_code` runs a JavaScript program in the interpreter
//! component (Boa), and every tool call the program makes passes the whole
//! pipeline as a call of its own.
//!
//! The tools here are the `tools` fixture component (`echo`) and native
//! Rust tools (a counter, a slow one); the policies are native, recording
//! what they saw.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};
use toolgate::approval::{ApprovalAnswer, ApprovalRequest, Approver};
use toolgate::policy::{Guard, PreExecuteHook, PreNext, ResultObserver};
use toolgate::tool::{
    Annotations, BodyContext, BodyError, Features, ToolBody, ToolDefinition, ToolMeta,
};
use toolgate::{CallInfo, CallRecord, Content, PolicyError, PreDecision, Toolgate, TurnOptions};
use toolgate_tests::{PluginDir, builder, call, fixtures};

/// What the policies saw: (tool, code-mode, parent id).
type Seen = Arc<Mutex<Vec<(String, bool, Option<String>)>>>;

struct DenyTool {
    tool: &'static str,
    seen: Seen,
}

#[async_trait]
impl Guard for DenyTool {
    async fn check(&self, call: &Arc<CallInfo>) -> Result<Option<String>, PolicyError> {
        self.seen.lock().unwrap().push((
            call.tool_name.clone(),
            call.code_mode,
            call.parent_id.clone(),
        ));
        Ok((call.tool_name == self.tool).then(|| format!("no `{}` here", self.tool)))
    }
}

/// Asks about one tool.
struct AskAbout(&'static str);

#[async_trait]
impl PreExecuteHook for AskAbout {
    async fn pre_execute(
        &self,
        call: &Arc<CallInfo>,
        next: PreNext,
    ) -> Result<PreDecision, PolicyError> {
        if call.tool_name == self.0 {
            Ok(PreDecision::Ask(format!(
                "may the program call {}?",
                self.0
            )))
        } else {
            Ok(next.run().await)
        }
    }
}

struct Record(Arc<Mutex<Vec<CallRecord>>>);

#[async_trait]
impl ResultObserver for Record {
    async fn on_result(
        &self,
        _call: &Arc<CallInfo>,
        record: &Arc<CallRecord>,
    ) -> Result<(), PolicyError> {
        self.0.lock().unwrap().push((**record).clone());
        Ok(())
    }
}

/// What the approver was asked: (tool, parent id, prompt).
type Asked = Arc<Mutex<Vec<(String, Option<String>, String)>>>;

/// Approves, and remembers who asked about what.
struct Remember(Asked);

#[async_trait]
impl Approver for Remember {
    fn name(&self) -> &str {
        "remember"
    }
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.0.lock().unwrap().push((
            request.call.tool_name.clone(),
            request.call.parent_id.clone(),
            request.prompt.clone(),
        ));
        ApprovalAnswer::Approve
    }
}

/// `count`: adds one to a shared counter and returns it (no-op-ish).
struct Count(Arc<AtomicUsize>);

#[async_trait]
impl ToolBody for Count {
    async fn is_concurrency_safe(&self, _call: &Arc<CallInfo>) -> Option<bool> {
        Some(true)
    }
    async fn execute(&self, _call: &Arc<CallInfo>, _ctx: BodyContext) -> Result<Value, BodyError> {
        Ok(json!(self.0.fetch_add(1, Ordering::SeqCst) + 1))
    }
    async fn render(
        &self,
        _call: &Arc<CallInfo>,
        value: &Value,
    ) -> Result<Vec<Content>, BodyError> {
        Ok(vec![Content::text(value.to_string())])
    }
}

fn tool(name: &str, description: &str, parameters: Value) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: description.into(),
        parameters,
        output_schema: None,
        meta: ToolMeta {
            provider: "test".into(),
            timeout_ms: None,
            annotations: Annotations::empty(),
            features: Features::CLASSIFIER,
            effects: true,
        },
    }
}

/// `slow`: waits ten seconds unless its signal fires first.
struct Slow;

#[async_trait]
impl ToolBody for Slow {
    async fn is_concurrency_safe(&self, _call: &Arc<CallInfo>) -> Option<bool> {
        Some(true)
    }
    async fn execute(&self, _call: &Arc<CallInfo>, ctx: BodyContext) -> Result<Value, BodyError> {
        match ctx
            .signal
            .guard(tokio::time::sleep(Duration::from_secs(10)))
            .await
        {
            Ok(()) => Ok(Value::Null),
            Err(i) => Err(BodyError::Interrupted(i)),
        }
    }
    async fn render(
        &self,
        _call: &Arc<CallInfo>,
        _value: &Value,
    ) -> Result<Vec<Content>, BodyError> {
        Ok(vec![Content::text("slept")])
    }
}

struct Fixture {
    host: Toolgate,
    seen: Seen,
    records: Arc<Mutex<Vec<CallRecord>>>,
    asked: Asked,
    counter: Arc<AtomicUsize>,
    _dir: PluginDir,
}

async fn fixture(config: &str) -> Fixture {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS);
    let seen = Seen::default();
    let records = Arc::new(Mutex::new(Vec::new()));
    let asked = Asked::default();
    let counter = Arc::new(AtomicUsize::new(0));
    let empty = json!({"type": "object", "properties": {}, "additionalProperties": false});
    let host = builder(&dir, config)
        .code_mode(true)
        .tool(
            tool("count", "Count one. Returns the count.", empty.clone()),
            Arc::new(Count(counter.clone())),
        )
        .unwrap()
        .tool(
            tool("secret", "Read the secret.", empty.clone()),
            Arc::new(Count(Arc::default())),
        )
        .unwrap()
        .tool(
            tool("careful", "Needs a person's yes.", empty.clone()),
            Arc::new(Count(Arc::default())),
        )
        .unwrap()
        .tool(tool("slow", "Take ten seconds.", empty), Arc::new(Slow))
        .unwrap()
        .guard(
            "deny-secret",
            10,
            DenyTool {
                tool: "secret",
                seen: seen.clone(),
            },
        )
        .pre_execute("ask-careful", 10, AskAbout("careful"))
        .observer("record", 10, Record(records.clone()))
        .approver(Arc::new(Remember(asked.clone())))
        .build()
        .await
        .expect("host builds");
    Fixture {
        host,
        seen,
        records,
        asked,
        counter,
        _dir: dir,
    }
}

async fn run_code(host: &Toolgate, id: &str, code: &str) -> CallRecord {
    host.call(
        call(id, "run_code", json!({ "code": code })),
        &TurnOptions::default(),
    )
    .await
}

/// The value a `run_code` program returned (its `Result: ` line).
pub(crate) fn result_of(record: &CallRecord) -> Value {
    assert!(!record.is_error, "run_code failed: {record:?}");
    let text = record.text();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Result: "))
        .unwrap_or_else(|| panic!("no result line in {text:?}"));
    serde_json::from_str(line).expect("the result is JSON")
}

/// A program's memory is drawn from the budget of all instances, like a
/// plugin's: 30 MiB of strings fit its own cap (64 MiB by default) but not
/// a 20 MiB host budget.
#[tokio::test(flavor = "multi_thread")]
async fn a_program_draws_from_the_hosts_memory_budget() {
    let code =
        "let a = []; for (let i = 0; i < 30; i++) a.push('x'.repeat(1 << 20)); return a.length;";
    let f = fixture("").await;
    assert_eq!(result_of(&run_code(&f.host, "fits", code).await), json!(30));
    let f = fixture("[limits]\nguest_memory_mb = 20\n").await;
    let r = run_code(&f.host, "m", code).await;
    assert!(r.is_error, "{r:?}");
    assert!(r.text().contains("guest_memory_mb"), "{}", r.text());
    let r = run_code(&f.host, "n", "return 'alive';").await;
    assert_eq!(result_of(&r), json!("alive"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_program_calls_three_tools_and_catches_a_guard_denial() {
    let f = fixture("").await;
    let r = run_code(
        &f.host,
        "p1",
        r#"
        const echoed = await tools.echo({ text: "hi" });
        const n = await tools.count();
        let denied;
        try {
            await tools.secret();
        } catch (e) {
            denied = { code: e.code, message: e.message, name: e.name };
        }
        console.log("done");
        return { echoed, n, denied };
        "#,
    )
    .await;
    let v = result_of(&r);
    assert_eq!(v["n"], json!("1"));
    // `echo` declares an output schema: the program gets its value.
    assert_eq!(v["echoed"], json!({"text": "hi"}), "{v}");
    assert_eq!(v["denied"]["code"], "DENIED", "{v}");
    assert_eq!(v["denied"]["name"], "ToolError");
    assert!(
        v["denied"]["message"]
            .as_str()
            .unwrap()
            .contains("no `secret` here"),
        "{v}"
    );
    assert!(r.text().starts_with("done"), "{}", r.text());

    // The guard saw three code-mode calls, each with the program as parent.
    let seen = f.seen.lock().unwrap().clone();
    let nested: Vec<_> = seen.iter().filter(|(t, _, _)| t != "run_code").collect();
    assert_eq!(nested.len(), 3, "{seen:?}");
    for (tool, code_mode, parent) in &nested {
        assert!(*code_mode, "{tool} was not a code-mode call");
        assert_eq!(parent.as_deref(), Some("p1"), "{tool}");
    }
    // Every nested call produced its own observer record, before the
    // program's own; ids say whose they are.
    let records = f.records.lock().unwrap().clone();
    let ids: Vec<(&str, &str)> = records
        .iter()
        .map(|r| (r.id.as_str(), r.name.as_str()))
        .collect();
    assert_eq!(
        ids,
        [
            ("p1/1", "echo"),
            ("p1/2", "count"),
            ("p1/3", "secret"),
            ("p1", "run_code"),
        ]
    );
    assert_eq!(records[2].code(), Some("DENIED"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ask_in_a_nested_call_reaches_the_approver() {
    let f = fixture("").await;
    let r = run_code(&f.host, "p2", "return await tools.careful();").await;
    assert_eq!(result_of(&r), json!("1"));
    let asked = f.asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        vec![(
            "careful".to_string(),
            Some("p2".to_string()),
            "may the program call careful?".to_string()
        )]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_loop_ends_as_timeout_and_the_host_serves_the_next_call() {
    let f = fixture("").await;
    let started = Instant::now();
    let r = f
        .host
        .call(
            call(
                "loop",
                "run_code",
                json!({"code": "while (true) {}", "timeoutMs": 300}),
            ),
            &TurnOptions::default(),
        )
        .await;
    let took = started.elapsed();
    assert_eq!(r.code(), Some("TIMEOUT"), "{r:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // The next program runs (a fresh instance; the engine is fine).
    let r = run_code(&f.host, "after", "return 1 + 1;").await;
    assert_eq!(result_of(&r), json!(2));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_nested_call_ends_with_the_programs_deadline() {
    let f = fixture("").await;
    // Compile and warm the interpreter first: the deadline counts from
    // the call's start, and a cold start on a loaded machine could spend
    // it before the program reaches `tools.slow()`.
    assert_eq!(
        result_of(&run_code(&f.host, "warm", "return 0;").await),
        json!(0)
    );
    let started = Instant::now();
    let r = f
        .host
        .call(
            call(
                "p6",
                "run_code",
                json!({"code": "await tools.slow(); return 1;", "timeoutMs": 1000}),
            ),
            &TurnOptions::default(),
        )
        .await;
    assert_eq!(r.code(), Some("TIMEOUT"), "{r:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // The nested call was stopped with it, and still recorded.
    let records = f.records.lock().unwrap().clone();
    let slow = records
        .iter()
        .find(|r| r.id == "p6/1")
        .expect("the nested call's record");
    assert!(slow.is_error, "{slow:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_nested_call_limit_holds() {
    let f = fixture("[run_code]\nmax_nested_calls = 5\n").await;
    let r = run_code(
        &f.host,
        "p3",
        r#"
        let ok = 0, refused = [];
        for (let i = 0; i < 8; i++) {
            try { await tools.count(); ok++; } catch (e) { refused.push(e.code); }
        }
        return { ok, refused };
        "#,
    )
    .await;
    let v = result_of(&r);
    assert_eq!(v["ok"], 5);
    assert_eq!(
        v["refused"],
        json!([
            "NESTED_CALL_LIMIT",
            "NESTED_CALL_LIMIT",
            "NESTED_CALL_LIMIT"
        ])
    );
    // The refused calls never reached the pipeline.
    assert_eq!(f.counter.load(Ordering::SeqCst), 5);
    assert_eq!(
        f.records
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.name == "count")
            .count(),
        5
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn promise_all_is_one_batch_through_the_scheduler() {
    let f = fixture("").await;
    let r = run_code(
        &f.host,
        "p4",
        r#"
        const all = await Promise.all([tools.count(), tools.count(), tools.call("count", {})]);
        return all.map(Number).sort();
        "#,
    )
    .await;
    assert_eq!(result_of(&r), json!([1, 2, 3]));
    let records = f.records.lock().unwrap().clone();
    let ids: Vec<_> = records.iter().map(|r| r.id.as_str()).collect();
    // Committed in the order the program made them.
    assert_eq!(ids, ["p4/1", "p4/2", "p4/3", "p4"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_name_their_line_and_column() {
    let f = fixture("").await;
    let r = run_code(&f.host, "s", "let x = 1;\nlet = ;\n").await;
    assert_eq!(r.code(), Some("SYNTAX_ERROR"), "{r:?}");
    let e = r.error.as_ref().unwrap();
    assert_eq!(e.details.as_ref().unwrap()["line"], 2, "{e:?}");

    let r = run_code(&f.host, "u", "const a = 1;\n\nnull.boom;\n").await;
    assert_eq!(r.code(), Some("UNCAUGHT_EXCEPTION"), "{r:?}");
    let e = r.error.as_ref().unwrap();
    assert_eq!(e.details.as_ref().unwrap()["line"], 3, "{e:?}");
    assert!(e.message.contains("TypeError"), "{}", e.message);

    // A stalled program (a promise nothing settles) is told so.
    let r = run_code(&f.host, "w", "await new Promise(() => {});").await;
    assert_eq!(r.code(), Some("STALLED"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn code_mode_shows_only_run_code_and_refuses_direct_calls() {
    let f = fixture("").await;
    let tools = f.host.tools();
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0].name, "run_code");
    let d = &tools[0].description;
    assert!(d.contains("echo(args: { text: string"), "{d}");
    assert!(d.contains("count(args: {}): Promise<any>"), "{d}");
    // A direct call is refused at materialize, before any policy.
    let before = f.seen.lock().unwrap().len();
    let r = f
        .host
        .call(call("d", "count", json!({})), &TurnOptions::default())
        .await;
    assert_eq!(r.code(), Some("DENIED"));
    assert_eq!(r.error.as_ref().unwrap().stage.as_str(), "materialize");
    assert_eq!(f.seen.lock().unwrap().len(), before);
    // A program cannot start another program.
    let r = run_code(
        &f.host,
        "p5",
        "try { await tools.run_code({code: '1'}); } catch (e) { return e.code; }",
    )
    .await;
    assert_eq!(result_of(&r), json!("DENIED"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_program_reaches_nothing_but_its_tools() {
    let f = fixture("").await;
    // No Node/browser globals that reach out, no `require`, no `fetch`;
    // `std`/`os` (QuickJS's modules, which an engine might add) are not
    // there either.
    let r = run_code(
        &f.host,
        "h",
        r#"return [typeof fetch, typeof require, typeof process, typeof std, typeof os,
                   typeof XMLHttpRequest, typeof setTimeout];"#,
    )
    .await;
    assert_eq!(
        result_of(&r),
        json!([
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined"
        ])
    );
    // Printed output is capped.
    let f = fixture("[run_code]\nmax_output_kb = 1\n").await;
    let r = run_code(
        &f.host,
        "o",
        "for (let i = 0; i < 1000; i++) console.log('xxxxxxxxxx');",
    )
    .await;
    assert!(!r.is_error, "{r:?}");
    let text = r.text();
    assert!(text.len() < 1200, "{}", text.len());
    assert!(text.contains("[output truncated]"));
    // Memory: a program that allocates without end fails, the host goes on.
    let r = run_code(
        &f.host,
        "m",
        "let a = []; while (true) a.push('x'.repeat(1 << 20));",
    )
    .await;
    assert!(r.is_error, "{r:?}");
    // Endless recursion ends as an error (Boa's recursion limit); the host
    // goes on.
    let r = run_code(
        &f.host,
        "r",
        "function f() { return f() + 1; }\nreturn f();",
    )
    .await;
    assert!(r.is_error, "{r:?}");
    let r = run_code(&f.host, "n", "return 'alive';").await;
    assert_eq!(result_of(&r), json!("alive"));
}

/// What a pure-Rust engine might open that QuickJS did not: each of these
/// ends within its deadline or the memory cap, with an error naming why,
/// and the host serves the next program.
#[tokio::test(flavor = "multi_thread")]
async fn hostile_programs_end_with_a_clear_error() {
    let f = fixture("").await;
    assert_eq!(
        result_of(&run_code(&f.host, "warm", "return 0;").await),
        json!(0)
    );
    let with_timeout = |id: &'static str, code: String| {
        let host = f.host.clone();
        async move {
            let started = Instant::now();
            let r = host
                .call(
                    call(id, "run_code", json!({"code": code, "timeoutMs": 2000})),
                    &TurnOptions::default(),
                )
                .await;
            let took = started.elapsed();
            assert!(took < Duration::from_secs(10), "{id} took {took:?}");
            r
        }
    };
    // Runaway recursion: one of Boa's runtime limits (its stack, its
    // recursion depth) ends the program — an engine limit, which a `catch`
    // does not swallow — at the program's line.
    let r = with_timeout(
        "rec",
        "function f(n) { return f(n + 1) + 1; }\ntry { f(0); } catch (e) { return 'caught'; }"
            .into(),
    )
    .await;
    assert_eq!(r.code(), Some("UNCAUGHT_EXCEPTION"), "{r:?}");
    let e = r.error.as_ref().unwrap();
    assert!(e.message.contains("recursed too deep"), "{}", e.message);
    assert!(e.message.len() < 400, "one line: {}", e.message);
    assert_eq!(e.details.as_ref().unwrap()["line"], 1, "{e:?}");
    // After an `await`, Boa drops the limit's error and leaves the program
    // pending: it ends as `STALLED`, and the message says why it may be.
    let r = with_timeout(
        "rec-async",
        "await tools.count();\nconst f = (n) => f(n + 1) + 1;\nreturn f(0);".into(),
    )
    .await;
    assert!(r.is_error, "{r:?}");
    assert!(r.text().contains("recursed"), "{}", r.text());
    // Recursion through a native function (each level is Rust stack too).
    let r = with_timeout(
        "native-rec",
        "const f = () => [0].map(f);\nreturn f();".into(),
    )
    .await;
    assert!(r.is_error, "{r:?}");
    // A program nested deeper than the parser's stack can hold.
    let r = with_timeout(
        "parse",
        format!("return {}1{};", "(".repeat(200_000), ")".repeat(200_000)),
    )
    .await;
    assert!(r.is_error, "{r:?}");
    // JSON nested as deep.
    let r = with_timeout(
        "json",
        "return JSON.parse('['.repeat(1e6) + ']'.repeat(1e6)).length;".into(),
    )
    .await;
    assert!(r.is_error, "{r:?}");
    // A string of a gigabyte: refused (a RangeError or the memory cap).
    let r = with_timeout(
        "huge",
        "const s = 'x'.repeat(2 ** 30); return s.length;".into(),
    )
    .await;
    assert!(r.is_error, "{r:?}");
    assert!(
        ["UNCAUGHT_EXCEPTION", "TRAPPED"].contains(&r.code().unwrap_or("")),
        "{r:?}"
    );
    // Doubling a string until it no longer fits.
    let r = with_timeout("double", "let s = 'x'; while (true) s += s;".into()).await;
    assert!(r.is_error, "{r:?}");
    // A regular expression that backtracks exponentially: the deadline.
    let r = with_timeout(
        "regex",
        "return /^(a+)+$/.test('a'.repeat(40) + 'b');".into(),
    )
    .await;
    assert_eq!(r.code(), Some("TIMEOUT"), "{r:?}");
    let r = run_code(&f.host, "after", "return 'alive';").await;
    assert_eq!(result_of(&r), json!("alive"));
}

/// `noop`: returns `null` at once, with a classifier (parallel).
struct Noop;

#[async_trait]
impl ToolBody for Noop {
    async fn is_concurrency_safe(&self, _call: &Arc<CallInfo>) -> Option<bool> {
        Some(true)
    }
    async fn execute(&self, _call: &Arc<CallInfo>, _ctx: BodyContext) -> Result<Value, BodyError> {
        Ok(Value::Null)
    }
    async fn render(
        &self,
        _call: &Arc<CallInfo>,
        _value: &Value,
    ) -> Result<Vec<Content>, BodyError> {
        Ok(vec![Content::text("ok")])
    }
}

/// `mark`: records when its body ran.
struct Mark(Arc<Mutex<Option<Instant>>>);

#[async_trait]
impl ToolBody for Mark {
    async fn is_concurrency_safe(&self, _call: &Arc<CallInfo>) -> Option<bool> {
        Some(true)
    }
    async fn execute(&self, _call: &Arc<CallInfo>, _ctx: BodyContext) -> Result<Value, BodyError> {
        *self.0.lock().unwrap() = Some(Instant::now());
        Ok(Value::Null)
    }
    async fn render(
        &self,
        _call: &Arc<CallInfo>,
        _value: &Value,
    ) -> Result<Vec<Content>, BodyError> {
        Ok(vec![Content::text("ok")])
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The figures in BENCHMARKS.md ("Code Mode"). Run with
/// `cargo test -p toolgate-tests --test all -- --ignored --nocapture code_mode::measure`.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement, not a test: run it by name"]
async fn measure() {
    let empty = json!({"type": "object", "properties": {}, "additionalProperties": false});
    let marked = Arc::new(Mutex::new(None));
    let build = |code_mode: bool, cache: bool| {
        let mut runtime = toolgate_tests::test_runtime();
        if !cache {
            runtime.cache_dir = None;
        }
        Toolgate::builder()
            .runtime_options(runtime)
            .builtin_plugins(false)
            .code_mode(code_mode)
            .tool(tool("noop", "Do nothing.", empty.clone()), Arc::new(Noop))
            .unwrap()
            .tool(
                tool("mark", "Note the time.", empty.clone()),
                Arc::new(Mark(marked.clone())),
            )
            .unwrap()
            .build()
    };

    // 1. run_code start to its first nested call.
    let first_call = |host: Toolgate, id: &'static str| {
        let marked = marked.clone();
        async move {
            let started = Instant::now();
            let r = run_code(&host, id, "await tools.mark(); return 1;").await;
            assert!(!r.is_error, "{r:?}");
            marked.lock().unwrap().take().unwrap() - started
        }
    };
    let host = build(true, false).await.unwrap();
    let cold = first_call(host.clone(), "cold").await;
    let host_cached = build(true, true).await.unwrap();
    let _ = first_call(host_cached.clone(), "fill").await;
    let host_cached = build(true, true).await.unwrap();
    let cached = first_call(host_cached, "cached").await;
    let mut warm = Vec::new();
    for _ in 0..50 {
        warm.push(first_call(host.clone(), "warm").await);
    }
    println!(
        "run_code start → first nested call: first program of a host, no compile cache {cold:?}; \
         first program, compile cache hit {cached:?}; later programs (fresh instance each) median {:?}",
        median(warm)
    );

    // 2. 100 nested no-op calls against 100 direct calls.
    let direct_host = build(false, true).await.unwrap();
    let mut direct = Vec::new();
    let mut nested = Vec::new();
    for round in 0..7 {
        let started = Instant::now();
        for i in 0..100 {
            let r = direct_host
                .call(
                    call(&format!("d{round}-{i}"), "noop", json!({})),
                    &TurnOptions::default(),
                )
                .await;
            assert!(!r.is_error);
        }
        direct.push(started.elapsed());
        let started = Instant::now();
        let r = run_code(
            &host,
            "n",
            "for (let i = 0; i < 100; i++) await tools.noop(); return 100;",
        )
        .await;
        assert_eq!(result_of(&r), json!(100));
        nested.push(started.elapsed());
    }
    let (direct, nested) = (median(direct), median(nested));
    println!(
        "100 no-op calls: direct {direct:?} ({:?}/call); nested in one program {nested:?} ({:?}/call); ratio {:.2}",
        direct / 100,
        nested / 100,
        nested.as_secs_f64() / direct.as_secs_f64()
    );

    // 3. The model-facing list of the built-in catalog, with and without Code Mode.
    let size = |code_mode: bool| async move {
        let host = Toolgate::builder()
            .runtime_options(toolgate_tests::test_runtime())
            .code_mode(code_mode)
            .build()
            .await
            .unwrap();
        let tools = host.tools();
        (
            tools.len(),
            serde_json::to_string(&tools).unwrap().chars().count(),
        )
    };
    let (n_plain, plain) = size(false).await;
    let (n_code, code) = size(true).await;
    println!(
        "model-facing list of the built-in plugins: {n_plain} tools, {plain} characters; Code Mode: {n_code} tool, {code} characters ({:.0}%)",
        100.0 * code as f64 / plain as f64
    );
}
