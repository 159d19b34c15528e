//! Per-call overhead of the whole pipeline around a no-op tool, with the
//! same six-policy stack — one pre-execute hook, two guards, the timeout
//! wrapper, one post-execute hook, one finalizer, one observer — realised
//! four ways, side by side in one run:
//!
//! * (a) native Rust policies;
//! * (b) Wasm components, warm pooled instances;
//! * (c) Wasm components, a fresh instance per call;
//! * (d) each policy a tiny native executable spawned per call with JSON on
//!   stdin/stdout (the hook model of today's coding agents).
//!
//! The tool is the same warm Wasm `echo` component everywhere; a run with no
//! policies at all gives the tool's own cost, and overhead = total − that.
//!
//! Run: `cargo bench -p toolgate-tests --bench pipeline` (optionally
//! `-- --calls N`; `-- --audit` for the audit record's cost per call at
//! each `sync` setting instead). Prints medians and p99 per variant and the ratios, the
//! heap allocations per call of (0), (a) and (b), and the same comparison
//! with a 1 MB argument (policies that do not read it must not pay for it).

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Counts heap allocations (all threads), to report allocations per call.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { std::alloc::System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

use async_trait::async_trait;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate::policy::{ExecNext, PostNext, PreNext};
use toolgate::policy::{
    ExecuteAroundHook, Finalizer, Guard, PostExecuteHook, PreExecuteHook, ResultObserver,
};
use toolgate::{
    CallInfo, CallRecord, Content, Outcome, PolicyError, PostDecision, PreDecision, ToolCall,
    Toolgate, TurnOptions,
};
use toolgate_tests::{PluginDir, builder, fixtures, native};

/// Spawn the hook process, send the request, read the answer.
async fn ask_process(role: &str, call: &Arc<CallInfo>) -> Result<serde_json::Value, PolicyError> {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_hook-proc"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| PolicyError::Failed(e.to_string()))?;
    let request = json!({
        "role": role,
        "call": {"id": call.call_id, "tool": call.tool_name, "arguments": *call.arguments, "timeout_ms": call.tool.timeout_ms},
    });
    let mut stdin = child.stdin.take().expect("piped");
    stdin
        .write_all(request.to_string().as_bytes())
        .await
        .map_err(|e| PolicyError::Failed(e.to_string()))?;
    drop(stdin);
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut out)
        .await
        .map_err(|e| PolicyError::Failed(e.to_string()))?;
    let status = child
        .wait()
        .await
        .map_err(|e| PolicyError::Failed(e.to_string()))?;
    if !status.success() {
        return Err(PolicyError::Failed(format!("hook exited with {status}")));
    }
    serde_json::from_str(&out).map_err(|e| PolicyError::Invalid(toolgate::Cause::new(e)))
}

struct Proc(&'static str);

#[async_trait]
impl PreExecuteHook for Proc {
    async fn pre_execute(
        &self,
        call: &Arc<CallInfo>,
        _next: PreNext,
    ) -> Result<PreDecision, PolicyError> {
        let a = ask_process(self.0, call).await?;
        Ok(if a["decision"] == "allow" {
            PreDecision::Allow
        } else {
            PreDecision::Deny("denied".into())
        })
    }
}

#[async_trait]
impl Guard for Proc {
    async fn check(&self, call: &Arc<CallInfo>) -> Result<Option<String>, PolicyError> {
        let a = ask_process(self.0, call).await?;
        Ok(a["deny"].as_str().map(str::to_string))
    }
}

#[async_trait]
impl ExecuteAroundHook for Proc {
    async fn around_execute(
        &self,
        call: &Arc<CallInfo>,
        next: ExecNext,
    ) -> Result<Outcome, PolicyError> {
        let a = ask_process(self.0, call).await?;
        Ok(next
            .run(a["deadline_ms"].as_u64().map(Duration::from_millis))
            .await)
    }
}

#[async_trait]
impl PostExecuteHook for Proc {
    async fn post_execute(
        &self,
        call: &Arc<CallInfo>,
        _r: &Arc<Outcome>,
        _next: PostNext,
    ) -> Result<PostDecision, PolicyError> {
        let a = ask_process(self.0, call).await?;
        Ok(if a["decision"] == "accept" {
            PostDecision::Accept
        } else {
            PostDecision::Block("blocked".into())
        })
    }
}

#[async_trait]
impl Finalizer for Proc {
    async fn finalize_content(
        &self,
        call: &Arc<CallInfo>,
        _r: &Arc<Outcome>,
    ) -> Result<Option<Vec<Content>>, PolicyError> {
        ask_process(self.0, call).await?;
        Ok(None)
    }
}

#[async_trait]
impl ResultObserver for Proc {
    async fn on_result(
        &self,
        call: &Arc<CallInfo>,
        _r: &Arc<CallRecord>,
    ) -> Result<(), PolicyError> {
        ask_process(self.0, call).await.map(|_| ())
    }
}

/// The six-policy stack as Wasm components; `fresh` for a new instance per call.
async fn wasm(dir: &PluginDir, fresh: bool) -> Toolgate {
    wasm_with(dir, fresh, "").await
}

/// (b) or (c), with `extra` configuration (an `[audit]` table).
async fn wasm_with(dir: &PluginDir, fresh: bool, extra: &str) -> Toolgate {
    let instances = if fresh { "fresh" } else { "pooled" };
    let mut config = extra.to_string();
    for (name, fixture, behavior) in [
        ("pre", fixtures::PRE_HOOK, "allow"),
        ("guard-1", fixtures::GUARD, "pass"),
        ("guard-2", fixtures::GUARD, "pass"),
        ("timeout", fixtures::PLUGIN_TIMEOUT, ""),
        ("post", fixtures::POST_HOOK, "accept"),
        ("finalizer", fixtures::FINALIZER, "keep"),
        ("observer", fixtures::OBSERVER, "ok"),
    ] {
        dir.add(name, fixture);
        config.push_str(&format!(
            "[plugins.{name}]\ninstances = {instances:?}\nvars = {{ BEHAVIOR = {behavior:?} }}\n"
        ));
    }
    builder(dir, &config).build().await.expect("host")
}

async fn native_stack(dir: &PluginDir) -> Toolgate {
    let b = |s: &str| s.to_string();
    builder(dir, "")
        .pre_execute(
            "pre",
            10,
            native::Pre {
                name: b("pre"),
                behavior: b("allow"),
            },
        )
        .guard(
            "guard-1",
            10,
            native::NativeGuard {
                name: b("guard-1"),
                behavior: b("pass"),
            },
        )
        .guard(
            "guard-2",
            20,
            native::NativeGuard {
                name: b("guard-2"),
                behavior: b("pass"),
            },
        )
        .execute_around("timeout", 0, native::Timeout)
        .post_execute(
            "post",
            10,
            native::Post {
                behavior: b("accept"),
            },
        )
        .finalizer(
            "finalizer",
            10,
            native::Fin {
                behavior: b("keep"),
            },
        )
        .observer(
            "observer",
            10,
            native::Obs {
                behavior: b("ok"),
                seen: Default::default(),
            },
        )
        .build()
        .await
        .expect("host")
}

async fn process_stack(dir: &PluginDir) -> Toolgate {
    builder(dir, "")
        .pre_execute("pre", 10, Proc("pre-execute"))
        .guard("guard-1", 10, Proc("guard"))
        .guard("guard-2", 20, Proc("guard"))
        .execute_around("timeout", 0, Proc("execute-around"))
        .post_execute("post", 10, Proc("post-execute"))
        .finalizer("finalizer", 10, Proc("finalizer"))
        .observer("observer", 10, Proc("observer"))
        .build()
        .await
        .expect("host")
}

struct Stats {
    median: Duration,
    p99: Duration,
}

impl Stats {
    fn of(mut samples: Vec<Duration>) -> Stats {
        samples.sort();
        Stats {
            median: samples[samples.len() / 2],
            p99: samples[(samples.len() * 99 / 100).min(samples.len() - 1)],
        }
    }
}

fn call() -> ToolCall {
    ToolCall::new("b", "echo", json!({"text": "x"}))
}

/// A call whose argument is about a megabyte of text (within the default
/// 1 MiB argument limit).
fn large_call() -> ToolCall {
    ToolCall::new("b", "echo", json!({"text": "x".repeat(1_000_000)}))
}

/// `calls` timed calls, appended to `samples`.
async fn sample(host: &Toolgate, calls: usize, samples: &mut Vec<Duration>) {
    sample_with(host, call, calls, samples).await
}

async fn sample_with(
    host: &Toolgate,
    make: fn() -> ToolCall,
    calls: usize,
    samples: &mut Vec<Duration>,
) {
    let turn = TurnOptions::default();
    for _ in 0..calls {
        let c = make();
        let t = Instant::now();
        let r = host.call(c, &turn).await;
        samples.push(t.elapsed());
        assert!(!r.is_error, "{r:?}");
    }
}

/// Interleaved rounds over `variants`: each gets a slice of every round, so
/// a noisy neighbour slows them alike and the ratios hold.
async fn interleaved(variants: &[&Toolgate], make: fn() -> ToolCall, calls: usize) -> Vec<Stats> {
    let rounds = 20;
    let per_round = (calls / rounds).max(1);
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
    for _ in 0..rounds {
        for (i, host) in variants.iter().enumerate() {
            sample_with(host, make, per_round, &mut samples[i]).await;
        }
    }
    samples.into_iter().map(Stats::of).collect()
}

/// Heap allocations per call (median-free: a plain average over `calls`).
async fn allocations(host: &Toolgate, calls: usize) -> f64 {
    let mut ignored = Vec::with_capacity(calls);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    sample(host, calls, &mut ignored).await;
    (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / calls as f64
}

async fn warm_up(host: &Toolgate) {
    // Compile caches, instance pools, allocator.
    let mut ignored = Vec::new();
    sample(host, 50, &mut ignored).await;
}

async fn measure(host: &Toolgate, calls: usize) -> Stats {
    warm_up(host).await;
    let mut samples = Vec::with_capacity(calls);
    sample(host, calls, &mut samples).await;
    Stats::of(samples)
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let calls = args
        .iter()
        .position(|a| a == "--calls")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000usize);
    if args.iter().any(|a| a == "--audit") {
        audit_costs(calls).await;
        return;
    }
    let dirs: Vec<PluginDir> = (0..5).map(|_| PluginDir::new()).collect();
    for d in &dirs {
        d.add("tools", fixtures::TOOLS);
    }
    let baseline = builder(&dirs[0], "").build().await.expect("host");
    let a = native_stack(&dirs[1]).await;
    let b = wasm(&dirs[2], false).await;
    let c = wasm(&dirs[3], true).await;
    let d = process_stack(&dirs[4]).await;

    if args.iter().any(|a| a == "--raw") {
        raw(calls).await;
        return;
    }
    if args.iter().any(|a| a == "--breakdown") {
        breakdown(calls).await;
        return;
    }
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    if let Some(v) = only {
        // Profiling aid: run one variant for a long time, print its median.
        let guards;
        let host = match v.as_str() {
            "g6" => {
                // Six Wasm guards and nothing else: the cost of one
                // component policy invocation, times six.
                let dir = PluginDir::new();
                dir.add("tools", fixtures::TOOLS);
                for i in 0..6 {
                    dir.add(&format!("guard-{i}"), fixtures::GUARD);
                }
                guards = builder(&dir, "").build().await.expect("host");
                std::mem::forget(dir);
                &guards
            }
            "0" => &baseline,
            "a" => &a,
            "b" => &b,
            "c" => &c,
            "d" => &d,
            other => panic!("--only takes 0, a, b, c or d, not {other}"),
        };
        let s = measure(host, calls).await;
        println!(
            "({v}) median {:.1} µs, p99 {:.1} µs",
            us(s.median),
            us(s.p99)
        );
        return;
    }
    // Interleaved rounds for the baseline, (a) and (b): each gets a slice of
    // every round, so a noisy neighbour slows them alike and the ratio
    // holds. (c) and (d) run on their own afterwards: fresh instances and
    // process spawns disturb the caches, the allocator and the kernel for
    // whatever runs next, and would tax their neighbours' figures.
    let variants = [&baseline, &a, &b];
    for host in variants {
        warm_up(host).await;
    }
    let mut stats = interleaved(&variants, call, calls).await.into_iter();
    let (base, ra, rb) = (
        stats.next().unwrap(),
        stats.next().unwrap(),
        stats.next().unwrap(),
    );
    let allocs: Vec<f64> = {
        let mut v = Vec::new();
        for host in variants {
            v.push(allocations(host, 1000).await);
        }
        v
    };
    let mut large = interleaved(&variants, large_call, (calls / 10).max(100))
        .await
        .into_iter();
    let (lbase, la, lb) = (
        large.next().unwrap(),
        large.next().unwrap(),
        large.next().unwrap(),
    );
    let rc = measure(&c, calls / 2).await;
    let rd = measure(&d, (calls / 40).max(50)).await;

    println!("pipeline overhead around a no-op Wasm tool, six policies (median / p99 per call)");
    println!(
        "  {:<44} {:>10} {:>10} {:>12}",
        "variant", "median µs", "p99 µs", "overhead µs"
    );
    println!(
        "  {:<44} {:>10.1} {:>10.1} {:>12}",
        "(0) no policies (the tool alone)",
        us(base.median),
        us(base.p99),
        "-"
    );
    let over = |s: &Stats| us(s.median) - us(base.median);
    for (name, s) in [
        ("(a) native Rust policies", &ra),
        ("(b) Wasm components, warm instances", &rb),
        ("(c) Wasm components, fresh instance per call", &rc),
        ("(d) a process per policy (spawn + JSON)", &rd),
    ] {
        println!(
            "  {:<44} {:>10.1} {:>10.1} {:>12.1}",
            name,
            us(s.median),
            us(s.p99),
            over(s)
        );
    }
    println!();
    println!(
        "  (b)/(a) overhead: {:.2}x   (target ≤ 3x)",
        over(&rb) / over(&ra).max(0.001)
    );
    println!(
        "  (d)/(b) overhead: {:.0}x   (target ≥ 100x)",
        over(&rd) / over(&rb).max(0.001)
    );
    println!(
        "  (c)/(b) overhead: {:.2}x",
        over(&rc) / over(&rb).max(0.001)
    );
    println!();
    println!(
        "  heap allocations per call: (0) {:.1}, (a) {:.1}, (b) {:.1} — the policies add (a) {:.1}, (b) {:.1}",
        allocs[0],
        allocs[1],
        allocs[2],
        allocs[1] - allocs[0],
        allocs[2] - allocs[0]
    );
    let lover = |s: &Stats| us(s.median) - us(lbase.median);
    println!(
        "  with a 1 MB argument: (0) {:.1} µs, (a) {:.1} µs (+{:.1}), (b) {:.1} µs (+{:.1}) — (b)'s overhead {:.1} µs vs {:.1} µs with a small one",
        us(lbase.median),
        us(la.median),
        lover(&la),
        us(lb.median),
        lover(&lb),
        lover(&lb),
        over(&rb)
    );
}

/// `-- --audit`: the audit record's cost per call at each `sync` setting,
/// side by side in one run: (0) the tool alone and (b) the six Wasm
/// policies, each with the record off (`enabled = false`) and at `sync =
/// "none"`, `"batch"` (the default) and `"always"`, and at `"batch"` with
/// the tool granted `kv` (a tool that may have effects: each call's intent
/// is recorded before its body runs, a second record), all ten hosts
/// interleaved (each gets a slice of every round). The records go to a
/// directory under `$TMPDIR`: its file system decides what `fdatasync`
/// costs.
async fn audit_costs(calls: usize) {
    const SYNCS: [&str; 5] = ["off", "none", "batch", "always", "intent"];
    let dir = toolgate_tests::TempDir::new("pipeline-audit");
    let config = |sync: &str, stack: &str| match sync {
        "off" => "[audit]\nenabled = false\n".to_string(),
        _ => {
            let (mode, grants) = match sync {
                "intent" => ("batch", "[plugins.tools.grants]\nkv = true\n"),
                other => (other, ""),
            };
            format!(
                "[audit]\npath = \"{}\"\nsigning_key = \"{}\"\nsync = \"{mode}\"\n{grants}",
                dir.path().join(format!("{stack}-{sync}.jsonl")).display(),
                dir.path().join("audit.key").display()
            )
        }
    };
    let mut dirs = Vec::new();
    let mut hosts = Vec::new();
    for sync in SYNCS {
        let tool = PluginDir::new();
        tool.add("tools", fixtures::TOOLS);
        hosts.push(
            builder(&tool, &config(sync, "0"))
                .build()
                .await
                .expect("host"),
        );
        dirs.push(tool);
        let stack = PluginDir::new();
        stack.add("tools", fixtures::TOOLS);
        hosts.push(wasm_with(&stack, false, &config(sync, "b")).await);
        dirs.push(stack);
    }
    for host in &hosts {
        warm_up(host).await;
    }
    let variants: Vec<&Toolgate> = hosts.iter().collect();
    let stats = interleaved(&variants, call, calls).await;
    for host in &hosts {
        host.shutdown().await;
    }
    println!(
        "the audit record's cost per call, {calls} calls per host interleaved (median / p99 µs; the record's cost = median − median with it off)"
    );
    println!(
        "  {:<22} {:>10} {:>10} {:>10}   {:>10} {:>10} {:>10}",
        "[audit]", "(0) med", "p99", "record", "(b) med", "p99", "record"
    );
    for (i, sync) in SYNCS.iter().enumerate() {
        let (s0, sb) = (&stats[2 * i], &stats[2 * i + 1]);
        let label = match *sync {
            "off" => "enabled = false".to_string(),
            "intent" => "\"batch\", with intent".to_string(),
            _ => format!("sync = \"{sync}\""),
        };
        let cost = |s: &Stats, off: &Stats| {
            if i == 0 {
                "-".to_string()
            } else {
                format!("{:+.1}", us(s.median) - us(off.median))
            }
        };
        println!(
            "  {:<22} {:>10.1} {:>10.1} {:>10}   {:>10.1} {:>10.1} {:>10}",
            label,
            us(s0.median),
            us(s0.p99),
            cost(s0, &stats[0]),
            us(sb.median),
            us(sb.p99),
            cost(sb, &stats[1]),
        );
    }
}

/// Profiling aid (`-- --breakdown`): one Wasm policy of each role alone
/// around the tool, interleaved, to see where a stack's time goes.
async fn breakdown(calls: usize) {
    let single = |name: &'static str, fixture: &'static str, behavior: &'static str| async move {
        let dir = PluginDir::new();
        dir.add("tools", fixtures::TOOLS);
        dir.add(name, fixture);
        let host = builder(
            &dir,
            &format!("[plugins.{name}]\nvars = {{ BEHAVIOR = {behavior:?} }}\n"),
        )
        .build()
        .await
        .expect("host");
        (name, host, dir)
    };
    let hosts = vec![
        single("none", fixtures::TOOLS, ""),
        single("pre", fixtures::PRE_HOOK, "allow"),
        single("guard", fixtures::GUARD, "pass"),
        single("timeout", fixtures::PLUGIN_TIMEOUT, ""),
        single("post", fixtures::POST_HOOK, "accept"),
        single("finalizer", fixtures::FINALIZER, "keep"),
        single("observer", fixtures::OBSERVER, "ok"),
    ];
    let mut built = Vec::new();
    for h in hosts {
        built.push(h.await);
    }
    for (_, host, _) in &built {
        warm_up(host).await;
    }
    let make = if std::env::args().any(|a| a == "--large") {
        large_call
    } else {
        call
    };
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); built.len()];
    for _ in 0..20 {
        for (i, (_, host, _)) in built.iter().enumerate() {
            sample_with(host, make, (calls / 20).max(2), &mut samples[i]).await;
        }
    }
    let base = Stats::of(samples[0].clone()).median;
    for ((name, _, _), s) in built.iter().zip(samples) {
        let m = Stats::of(s).median;
        println!(
            "  {name:<10} median {:>7.1} µs  (+{:.1} µs)",
            us(m),
            us(m) - us(base)
        );
    }
}

/// Profiling aid (`-- --raw`): the guard called directly through its
/// adapter (`Guard::check`), no pipeline around it.
async fn raw(calls: usize) {
    let dir = PluginDir::new();
    dir.add("guard", fixtures::GUARD);
    let host = builder(&dir, "[plugins.guard]\nvars = { BEHAVIOR = \"pass\" }\n")
        .build()
        .await
        .expect("host");
    let generation = host.generation();
    let guard = generation.policies.guards[0].policy.clone();
    let info = Arc::new(CallInfo::new(
        1,
        "c1".into(),
        "echo".into(),
        serde_json::json!({"text": "x"}),
        TurnOptions::default().origin(),
        toolgate::tool::ToolMeta::unknown(),
    ));
    let mut samples = Vec::new();
    for i in 0..calls + 100 {
        let t = Instant::now();
        let r = guard.check(&info).await;
        if i >= 100 {
            samples.push(t.elapsed());
        }
        assert_eq!(r.unwrap(), None);
    }
    let s = Stats::of(samples);
    println!(
        "raw guard invoke: median {:.2} µs, p99 {:.2} µs",
        us(s.median),
        us(s.p99)
    );
}
