//! Issue 42: interactive terminals — the `terminal_*` tools of the built-in
//! `bash` plugin over the `terminals` seam, each call through the whole
//! pipeline of a host with the built-in plugins: real programs on real
//! pseudo-terminals in the sandbox (a Python REPL, a curses program, a
//! shell), their limits, their scopes, and their end.

use std::time::Duration;

use serde_json::{Value, json};

use crate::catalog::{Bench, failed, gone, ok};

/// The id in `terminal_open`'s answer ("Opened terminal term-N …").
fn opened(text: &str) -> String {
    text.split("Opened terminal ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .unwrap_or_else(|| panic!("no terminal id in {text}"))
        .to_string()
}

impl Bench {
    async fn open(&self, args: Value) -> String {
        opened(&ok(&self.call("terminal_open", args).await))
    }

    /// Types `input`, then reads until `done` holds for all that came since
    /// (every 100 ms, at most 15 s): what a model does with a slow program.
    async fn type_until(&self, id: &str, input: &str, done: impl Fn(&str) -> bool) -> String {
        let mut seen = ok(&self
            .call("terminal_write", json!({"id": id, "input": input}))
            .await);
        let end = std::time::Instant::now() + Duration::from_secs(15);
        while !done(&seen) && std::time::Instant::now() < end {
            seen.push_str(&ok(&self
                .call("terminal_read", json!({"id": id, "wait_ms": 500}))
                .await));
        }
        seen
    }
}

/// A Python REPL, driven as a person would: define a function, call it,
/// interrupt a long call with Ctrl-C, and go on in the same session.
#[tokio::test]
async fn a_python_repl_is_defined_called_and_interrupted() {
    let b = Bench::new().await;
    let id = b
        .open(json!({"command": "python3 -q -i -c 'MARK=45.61'", "yield_ms": 1000}))
        .await;
    let t = b
        .type_until(&id, "def double(x): return 2 * x\n\n", |t| {
            t.contains(">>> ")
        })
        .await;
    assert!(!t.contains("Error"), "{t}");
    let t = b
        .type_until(&id, "print(double(21))\n", |t| t.contains("42\n"))
        .await;
    assert!(t.contains("42\n"), "{t}");
    // A call that would take 30 s, interrupted after it started.
    let t = b
        .type_until(&id, "import time; time.sleep(30)\n", |_| true)
        .await;
    assert!(!t.contains("KeyboardInterrupt"), "{t}");
    let t = b
        .type_until(&id, "\u{3}", |t| t.contains("KeyboardInterrupt"))
        .await;
    assert!(
        t.contains("KeyboardInterrupt"),
        "Ctrl-C did not interrupt: {t}"
    );
    // The session lives on, its definitions with it.
    let t = b
        .type_until(&id, "print(double(5))\n", |t| t.contains("10\n"))
        .await;
    assert!(t.contains("10\n"), "{t}");
    // The stream is plain text: no escape sequences reach the model.
    assert!(!t.contains('\u{1b}'), "{t:?}");
    let t = ok(&b.call("terminal_list", json!({})).await);
    assert!(t.contains(&id) && t.contains("running"), "{t}");
    assert_eq!(b.host.running_terminals(), 1);
    let t = ok(&b.call("terminal_close", json!({"id": id})).await);
    assert!(t.contains("closed"), "{t}");
    assert!(gone("45.61").await, "the REPL outlived terminal_close");
    // A closed terminal takes no input, and says why.
    let r = b
        .call("terminal_write", json!({"id": id, "input": "1\n"}))
        .await;
    assert!(r.is_error && r.text().contains("was closed"), "{r:?}");
}

/// A program that exits reports its status; its output stays readable.
#[tokio::test]
async fn a_program_that_exits_says_how() {
    let b = Bench::new().await;
    let id = b
        .open(json!({"command": "echo made-it; exit 3", "yield_ms": 2000}))
        .await;
    let mut t = String::new();
    for _ in 0..50 {
        t = ok(&b.call("terminal_list", json!({})).await);
        if t.contains("exited") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(t.contains(&format!("{id}  exited 3")), "{t}");
    let r = b
        .call("terminal_write", json!({"id": id, "input": "x"}))
        .await;
    assert!(
        r.is_error && r.text().contains("exited with status 3"),
        "{r:?}"
    );
}

const CURSES: &str = r#"
import curses

def main(scr):
    curses.curs_set(0)
    while True:
        scr.erase()
        rows, cols = scr.getmaxyx()
        scr.addstr(0, 0, f"size {rows}x{cols}")
        scr.addstr(5, 10, "HELLO SCREEN")
        scr.refresh()
        key = scr.getch()
        if key == ord("q"):
            return

curses.wrapper(main)
print("curses done")
"#;

/// A full-screen program is read as its screen: where it drew, what the
/// size is after a resize, and the normal screen back when it quits.
#[tokio::test]
async fn a_full_screen_program_is_read_as_a_person_sees_it() {
    let b = Bench::new().await;
    b.put("draw.py", CURSES);
    let id = b
        .open(json!({"command": "python3 draw.py", "rows": 20, "cols": 60, "yield_ms": 1500}))
        .await;
    let mut screen = Value::Null;
    for _ in 0..50 {
        let r = b.call("terminal_screen", json!({"id": id})).await;
        assert!(!r.is_error, "{r:?}");
        screen = r.structured_content.clone().unwrap_or_default();
        if screen["lines"][5]
            .as_str()
            .is_some_and(|l| l.contains("HELLO"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(screen["lines"][5], "          HELLO SCREEN", "{screen}");
    assert_eq!(screen["lines"][0], "size 20x60", "{screen}");
    assert_eq!(screen["alternate_screen"], true, "{screen}");
    assert_eq!(screen["lines"].as_array().unwrap().len(), 20);
    let shown = ok(&b.call("terminal_screen", json!({"id": id})).await);
    assert!(shown.contains("full-screen program"), "{shown}");
    assert!(shown.contains("          HELLO SCREEN\n"), "{shown}");
    // The program is told of a resize and redraws.
    ok(&b
        .call(
            "terminal_resize",
            json!({"id": id, "rows": 30, "cols": 100}),
        )
        .await);
    let mut first = String::new();
    for _ in 0..50 {
        let r = b.call("terminal_screen", json!({"id": id})).await;
        first = r.structured_content.unwrap()["lines"][0]
            .as_str()
            .unwrap_or("")
            .to_string();
        if first == "size 30x100" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(first, "size 30x100");
    // Out of bounds: said, with the bounds.
    let t = failed(
        &b.call(
            "terminal_resize",
            json!({"id": id, "rows": 1000, "cols": 80}),
        )
        .await,
        "INVALID_INPUT",
    );
    assert!(t.contains("2 to 200"), "{t}");
    // `q` quits; the normal screen is back, with what it printed after.
    ok(&b
        .call("terminal_write", json!({"id": id, "input": "q"}))
        .await);
    let mut t = String::new();
    for _ in 0..50 {
        t = ok(&b.call("terminal_screen", json!({"id": id})).await);
        if t.contains("curses done") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        t.contains("curses done") && !t.contains("full-screen"),
        "{t}"
    );
}

/// A terminal is a spawn like `bash`'s: the host's files stay out of reach
/// from its shell; an agent's terminals are its own and capped; input and
/// sizes are bounded.
#[tokio::test]
async fn terminals_are_sandboxed_scoped_and_capped() {
    let b = Bench::new().await;
    let id = b.open(json!({"command": "sh", "yield_ms": 300})).await;
    let t = b
        .type_until(
            &id,
            "(echo x > .git/hooks/evil) 2>/dev/null || echo blocked-$((1+1))-git; \
             (echo y > toolgate.toml) 2>/dev/null || echo blocked-$((1+2))-config; \
             echo z > mine.txt; tty; echo END-$((6*7))\n",
            |t| t.contains("END-42"),
        )
        .await;
    // (The typed line is echoed: what counts is what the shell printed.)
    assert!(t.contains("blocked-2-git"), "{t}");
    assert!(t.contains("/dev/pts/"), "no terminal of its own: {t}");
    assert!(!b.root().join(".git/hooks/evil").exists());
    assert_eq!(b.get("mine.txt"), "z\n");
    // An absent protected path a sandbox created is taken back when the
    // sandbox ends (the post-run watch, as for `bash` and jobs; while it
    // runs, the host's readers of authority know it may be there).
    ok(&b.call("terminal_close", json!({"id": id})).await);
    assert!(!b.root().join("toolgate.toml").exists());
    // Another agent scope sees none of it.
    assert_eq!(
        ok(&b.call_in("other", "terminal_list", json!({})).await),
        "no terminals"
    );
    failed(
        &b.call_in("other", "terminal_screen", json!({"id": id}))
            .await,
        "NOT_FOUND",
    );
    failed(
        &b.call("terminal_read", json!({"id": "term-999"})).await,
        "NOT_FOUND",
    );
    // Bounded input and waits, said with the bound.
    let t = failed(
        &b.call(
            "terminal_write",
            json!({"id": id, "input": "x".repeat(64 * 1024 + 1)}),
        )
        .await,
        "INVALID_INPUT",
    );
    assert!(t.contains("65536"), "{t}");
    let t = failed(
        &b.call("terminal_read", json!({"id": id, "wait_ms": 60_000}))
            .await,
        "INVALID_INPUT",
    );
    assert!(t.contains("30000"), "{t}");
    // Eight open terminals per agent; the ninth is refused, saying what to do.
    for i in 0..8 {
        b.open(json!({"command": format!("sleep 47.3{i}"), "yield_ms": 0}))
            .await;
    }
    let r = b
        .call(
            "terminal_open",
            json!({"command": "sleep 47.39", "yield_ms": 0}),
        )
        .await;
    assert!(r.is_error, "a ninth terminal opened: {}", r.text());
    assert!(r.text().contains("terminal_close"), "{}", r.text());
    // Another agent scope has its own allowance.
    b.call_in(
        "other",
        "terminal_open",
        json!({"command": "sleep 47.38", "yield_ms": 0}),
    )
    .await;
    assert_eq!(b.host.running_terminals(), 9);
    drop(b);
    assert!(gone("47.3").await, "a terminal outlived the host");
}

/// Output beyond what one answer shows keeps its head and tail, and what
/// the host no longer keeps is counted, not lost silently.
#[tokio::test]
async fn long_output_is_bounded_and_said_so() {
    let b = Bench::new().await;
    let id = b
        .open(json!({"command": "head -c 3000000 /dev/zero | tr '\\0' a; echo; echo END", "yield_ms": 0}))
        .await;
    let mut t = String::new();
    for _ in 0..100 {
        t = ok(&b
            .call("terminal_read", json!({"id": id, "wait_ms": 500}))
            .await);
        if t.contains("END") {
            break;
        }
    }
    assert!(t.contains("END"), "{}", &t[t.len().saturating_sub(200)..]);
    assert!(t.len() < 16 * 1024, "{} bytes shown", t.len());
    assert!(t.contains("bytes not shown"), "{}", &t[..200.min(t.len())]);
}

/// Code Mode: a program drives a terminal with nested calls, each through
/// the pipeline (the approver sees `terminal_open` and `terminal_write`).
#[tokio::test(flavor = "multi_thread")]
async fn a_program_drives_a_terminal_in_code_mode() {
    let b = Bench::with_config("code_mode = true\n").await;
    let r = b
        .call(
            "run_code",
            json!({"code": r#"
                const opened = await tools.terminal_open({ command: "sh", yield_ms: 300 });
                const id = opened.terminal.id;
                let seen = (await tools.terminal_write({ id, input: "echo sum-$((20+22))\n", yield_ms: 300 })).output;
                for (let i = 0; i < 50 && !seen.includes("sum-42"); i++) {
                    seen += (await tools.terminal_read({ id, wait_ms: 300 })).output;
                }
                const closed = await tools.terminal_close({ id });
                return { id, found: seen.includes("sum-42"), status: closed.status };
            "#}),
        )
        .await;
    let result = crate::code_mode::result_of(&r);
    let t = r.text();
    assert_eq!(result["found"], true, "{t}");
    assert_eq!(result["status"], "closed", "{t}");
    let asked: Vec<String> = b
        .approver
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(tool, _)| tool.clone())
        .collect();
    assert!(
        asked.contains(&"terminal_open".to_string())
            && asked.contains(&"terminal_write".to_string()),
        "{asked:?}"
    );
    assert_eq!(b.host.running_terminals(), 0);
}
