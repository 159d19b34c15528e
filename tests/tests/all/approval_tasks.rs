//! Issue 29's last two answers to a stateless (2026-07-28) client whose
//! call meets the approval queue, against a real `toolgate serve --http
//! --approve queue`:
//!
//! * the Tasks extension (`io.modelcontextprotocol/tasks`, its 2026-07-28
//!   revision): a client that declares it gets a task, follows it with
//!   `tasks/get`, and the decision moves it on — raw JSON-RPC from
//!   `tests/mcp/approvals_tasks.py` (the MCP Python SDK 2.3.0 does not
//!   speak the extension);
//! * a Code Mode program's nested call that asks: it waits in the queue,
//!   bounded, instead of ending the request, so the program's earlier
//!   calls never run twice — the SDK's own `Client.call_tool` of
//!   `run_code` (`tests/mcp/approvals_stateless.py --code`).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::approvals::{Served, entry_for, report_of, result_text, stateless_client};

/// `tests/mcp/approvals_tasks.py ARGS` against `server`, running.
fn tasks_client(server: &Served, args: &[&str]) -> std::process::Child {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/approvals_tasks.py");
    std::process::Command::new(crate::serve::python())
        .arg(script)
        .args(["--http", &format!("http://{}/mcp", server.addr)])
        .args(["--token", &server.mcp_token])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Its report, once it is done.
fn tasks_report(client: std::process::Child) -> Value {
    let out = client.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The call records of the audit record matching `pick`, once `until`
/// holds of them (10 s at most).
fn audited(
    server: &Served,
    pick: impl Fn(&Value) -> bool,
    until: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let audit = server.dir.path().join("state/toolgate/audit.jsonl");
    let start = Instant::now();
    loop {
        let records: Vec<Value> = std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["kind"] == "call" && pick(r))
            .collect();
        if until(&records) || start.elapsed() > Duration::from_secs(10) {
            return records;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A client that declares the Tasks extension gets a task (`working`,
/// naming the entry) instead of an `InputRequiredResult`; `tasks/get`
/// follows it while nobody decides; the approval runs the call and the
/// task completes with its result inlined; a denial completes it with the
/// denial's message (an `isError` result, as the revision wants for what
/// is not a JSON-RPC error). Unknown ids, a client that did not declare
/// the extension, and a call without it are answered as the revision
/// says.
#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn a_tasks_client_follows_its_call_from_the_queue_to_its_result() {
    let server = Served::start(
        "approvals-tasks",
        "[approval]\ntimeout_ms = 60000\nretry_hold_ms = 1000\n",
    );
    let client = tasks_client(&server, &["--probe", "echo approved", "echo denied"]);
    let list = server.pending(2);
    let approved = entry_for(&list, "echo approved").to_string();
    let denied = entry_for(&list, "echo denied").to_string();
    // Nobody decides for a while (the client's `tasks/update` accepting
    // its own approval decides nothing): the tasks are followed, still
    // working.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(server.pending(2).len(), 2, "one entry per call, still");
    let out = server.approvals(&["approve", &approved]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = server.approvals(&["deny", &denied, "--message", "not on a Friday"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = tasks_report(client);

    let call = &report["calls"][0];
    let created = &call["created"]["result"];
    assert_eq!(created["resultType"], "task", "{call}");
    assert_eq!(created["status"], "working", "{call}");
    let task_id = created["taskId"].as_str().unwrap();
    assert!(
        task_id.starts_with("t-") && task_id.len() == 34,
        "{task_id}"
    );
    assert_eq!(
        created["ttlMs"],
        60_000 + 600_000,
        "the wait, then the keep time"
    );
    assert_eq!(created["pollIntervalMs"], 1000);
    assert!(
        created["createdAt"].as_str().unwrap().ends_with('Z'),
        "{created}"
    );
    assert_eq!(
        call["statuses"],
        serde_json::json!(["working", "completed"]),
        "{call}"
    );
    let fin = &call["final"]["result"];
    assert_eq!(fin["resultType"], "complete", "{fin}");
    assert_eq!(fin["taskId"], task_id);
    assert_eq!(fin["result"]["isError"], false, "{fin}");
    assert!(result_text(&fin["result"]).contains("approved"), "{fin}");
    assert!(
        fin["statusMessage"].as_str().unwrap().contains(&approved),
        "who decided, and what: {fin}"
    );

    let d = &report["calls"][1]["final"]["result"];
    assert_eq!(d["status"], "completed", "{d}");
    assert_eq!(d["result"]["isError"], true, "{d}");
    assert!(result_text(&d["result"]).contains("not on a Friday"), "{d}");
    assert_eq!(
        d["result"]["_meta"]["toolgate/error"]["code"], "DENIED",
        "{d}"
    );

    let probes = &report["probes"];
    assert_eq!(
        probes["selfApprove"]["result"]["resultType"], "complete",
        "acknowledged, and ignored: {probes}"
    );
    let unknown = &probes["unknown"]["error"];
    assert_eq!(unknown["code"], -32602, "{probes}");
    assert!(
        unknown["message"].as_str().unwrap().contains("no task"),
        "{probes}"
    );
    assert_eq!(
        probes["undeclared"]["error"]["code"], -32021,
        "tasks/get without declaring the extension: {probes}"
    );
    assert_eq!(probes["cancelUnknown"]["error"]["code"], -32602, "{probes}");
    assert_eq!(
        probes["update"]["result"]["resultType"], "complete",
        "{probes}"
    );
    assert_eq!(
        probes["getAgain"]["result"]["status"], "completed",
        "an ended task is kept: {probes}"
    );
    let without = &probes["withoutTasks"]["result"];
    assert_eq!(without["resultType"], "input_required", "{probes}");
    assert!(
        without["requestState"]
            .as_str()
            .unwrap()
            .starts_with("toolgate-approval:a-"),
        "{probes}"
    );
    let replay = &probes["replay"]["result"];
    assert_eq!(replay["isError"], true, "{probes}");
    assert!(
        result_text(replay).contains("ran its call already"),
        "the task's approval ran its call; a retry naming it runs nothing: {probes}"
    );
    assert_eq!(server.pending(1).len(), 1, "only the probe's entry waits");

    // The audit record: the task's run under the task's id, approved by
    // whoever decided.
    let runs = audited(&server, |r| r["callId"] == task_id, |rs| !rs.is_empty());
    assert_eq!(runs.len(), 1, "{runs:?}");
    let decided: Vec<&Value> = runs[0]["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["stage"] == "approval")
        .collect();
    assert_eq!(decided[0]["decidedBy"], "api:tester", "{runs:?}");
}

/// `tasks/cancel` withdraws the pending entry and the task ends
/// `cancelled`; an entry nobody decides expires at `[approval] timeout_ms`
/// and its task completes with the reason.
#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn a_cancelled_task_withdraws_its_entry_and_an_expired_one_says_so() {
    let server = Served::start("approvals-tasks-end", "[approval]\ntimeout_ms = 3000\n");
    let cancels = tasks_client(&server, &["--cancel", "echo cancelled"]);
    let cancelled = tasks_report(cancels);
    let c = &cancelled["calls"][0];
    assert_eq!(c["created"]["result"]["resultType"], "task", "{c}");
    assert_eq!(c["cancel"]["result"]["resultType"], "complete", "{c}");
    assert_eq!(c["final"]["result"]["status"], "cancelled", "{c}");
    assert!(
        c["final"]["result"]["statusMessage"]
            .as_str()
            .unwrap()
            .contains("withdrawn"),
        "{c}"
    );
    assert!(server.pending(0).is_empty(), "the entry is withdrawn");

    let started = Instant::now();
    let expires = tasks_report(tasks_client(&server, &["echo expires"]));
    let e = &expires["calls"][0]["final"]["result"];
    assert_eq!(e["status"], "completed", "{e}");
    assert_eq!(e["result"]["isError"], true, "{e}");
    assert!(
        result_text(&e["result"]).contains("nobody decided within 3000 ms"),
        "{e}"
    );
    assert!(started.elapsed() >= Duration::from_millis(2900));
}

/// The program: a `todo_write` (a call with an effect, which does not
/// ask: it must not run twice), then a `bash` call, which asks; a denial
/// is caught and returned.
const PROGRAM: &str = r#"
const plan = await tools.todo_write({ todos: [{ content: "run it once", status: "pending" }] });
try {
  const ran = await tools.bash({ command: "echo nested-ran" });
  return { plan, ran };
} catch (e) {
  return { code: e.code, message: e.message };
}
"#;

/// A 2026-07-28 client's Code Mode program whose nested `bash` call asks:
/// the call waits in the queue (no `InputRequiredResult`, whose retry
/// would run the program's `todo_write` again); approved while it waits, it
/// runs and the program goes on. Not decided within the hold (the
/// shorter of `retry_hold_ms` and the program's time left), the nested
/// call is denied naming the entry, which stays pending; approved then,
/// the program run again runs that call once without a new entry, and a
/// third run asks anew.
#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn a_stateless_program_s_nested_ask_waits_in_the_queue_and_its_earlier_calls_run_once() {
    // Decided while the program waits.
    let server = Served::start(
        "approvals-codemode",
        "code_mode = true\n[approval]\ntimeout_ms = 60000\nretry_hold_ms = 10000\n",
    );
    let client = stateless_client(&server, &["--code", PROGRAM]);
    let list = server.pending(1);
    assert_eq!(list[0]["tool"], "bash", "{list:?}");
    let id = list[0]["id"].as_str().unwrap().to_string();
    let out = server.approvals(&["approve", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = report_of(client);
    let program = &report["programs"][0]["result"];
    assert_eq!(program["isError"], false, "{program}");
    let text = result_text(program);
    assert!(
        text.contains("run it once") && text.contains("nested-ran"),
        "the nested call ran after the approval: {text}"
    );
    assert!(server.pending(0).is_empty());
    let writes = audited(&server, |r| r["tool"] == "todo_write", |rs| !rs.is_empty());
    assert_eq!(
        writes.len(),
        1,
        "the program's first call ran once: {writes:?}"
    );
    let bash = audited(&server, |r| r["tool"] == "bash", |rs| !rs.is_empty());
    assert_eq!(bash.len(), 1, "one bash call, approved: {bash:?}");
    assert_eq!(bash[0]["codeMode"], true, "{bash:?}");
    drop(server);

    // Not decided in time.
    let server = Served::start(
        "approvals-codemode-late",
        "code_mode = true\n[approval]\ntimeout_ms = 60000\nretry_hold_ms = 1500\n",
    );
    let started = Instant::now();
    let first = report_of(stateless_client(&server, &["--code", PROGRAM]));
    let took = started.elapsed();
    let list = server.pending(1);
    let id = list[0]["id"].as_str().unwrap().to_string();
    let said = result_text(&first["programs"][0]["result"]);
    assert!(
        said.contains("DENIED") && said.contains(&format!("approval `{id}` is pending")),
        "the denial names the entry: {said}"
    );
    assert!(
        said.contains("nobody decided within 1500 ms") && said.contains("run the program again"),
        "and says what to do: {said}"
    );
    assert!(took >= Duration::from_millis(1400), "held: {took:?}");
    let out = server.approvals(&["approve", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let second = report_of(stateless_client(&server, &["--code", PROGRAM]));
    let ran = result_text(&second["programs"][0]["result"]);
    assert!(
        ran.contains("nested-ran"),
        "the approval runs the re-run's call: {ran}"
    );
    assert!(server.pending(0).is_empty(), "no new entry for it");
    // The approval ran its call: a third run asks anew.
    let third = report_of(stateless_client(&server, &["--code", PROGRAM]));
    let asked = result_text(&third["programs"][0]["result"]);
    let list = server.pending(1);
    let again = list[0]["id"].as_str().unwrap();
    assert_ne!(again, id);
    assert!(
        asked.contains(&format!("approval `{again}` is pending")),
        "{asked}"
    );
}
