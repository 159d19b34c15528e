//! Issue 14: the tool catalog, each tool through the whole pipeline of a
//! host with the built-in plugins (their default grants on a temporary
//! working directory, the built-in policies in force): success and every
//! error path.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use serde_json::{Value, json};
use toolgate::pipeline::{ApprovalAnswer, ApprovalRequest, Approver};
use toolgate::tool::CallCard;
use toolgate::{CallRecord, ToolCall, Toolgate, TurnOptions};
use toolgate_tests::{TempDir, processes_with, test_runtime, wait_for};

/// Approves everything and keeps the cards it was shown.
#[derive(Default)]
pub(crate) struct Recorder(pub(crate) Mutex<Vec<(String, Option<CallCard>)>>);

#[async_trait]
impl Approver for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.0
            .lock()
            .unwrap()
            .push((request.call.tool_name.clone(), request.card.clone()));
        ApprovalAnswer::Approve
    }
}

/// A working directory and a host with the built-in plugins on it.
pub(crate) struct Bench {
    dir: TempDir,
    pub(crate) host: Toolgate,
    pub(crate) approver: Arc<Recorder>,
}

impl Bench {
    pub(crate) async fn new() -> Bench {
        Bench::with_config("").await
    }

    pub(crate) async fn with_config(config: &str) -> Bench {
        let dir = TempDir::new("catalog");
        std::fs::create_dir_all(dir.path().join(".git/hooks")).unwrap();
        let approver = Arc::new(Recorder::default());
        let host = Toolgate::builder()
            .runtime_options(test_runtime())
            .workdir(dir.path())
            // What the CLI protects: the configuration a start would obey.
            .authority_path(dir.path().join("toolgate.toml"), "the host's configuration")
            .config(toolgate::HostConfig::parse(config, "test").unwrap())
            .approver(approver.clone())
            .build()
            .await
            .expect("host builds");
        assert!(host.problems().is_empty(), "{:?}", host.problems());
        Bench {
            dir,
            host,
            approver,
        }
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn put(&self, rel: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
        p
    }

    pub(crate) fn get(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root().join(rel)).unwrap()
    }

    pub(crate) async fn call(&self, tool: &str, args: Value) -> CallRecord {
        self.call_in("", tool, args).await
    }

    pub(crate) async fn call_in(&self, scope: &str, tool: &str, args: Value) -> CallRecord {
        let turn = TurnOptions {
            agent_scope: scope.into(),
            ..TurnOptions::default()
        };
        self.host.call(ToolCall::new("c1", tool, args), &turn).await
    }

    /// `job_output` of job `id`, polled (every 20 ms, at most 10 s) until
    /// `done` holds for it.
    async fn job_output_until(&self, id: &str, done: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let t = ok(&self.call("job_output", json!({"id": id})).await);
            if done(&t) || Instant::now() >= end {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub(crate) fn ok(r: &CallRecord) -> String {
    assert!(!r.is_error, "expected success, got {r:?}");
    r.text()
}

pub(crate) fn failed(r: &CallRecord, code: &str) -> String {
    assert!(r.is_error, "expected {code}, got success: {}", r.text());
    assert_eq!(r.code(), Some(code), "{r:?}");
    r.text()
}

/// The seed's catalog names, which models and Code Mode (issue 15) call:
/// a rename breaks them, so it breaks this test first.
#[tokio::test]
async fn the_built_in_catalog_has_the_seeds_names() {
    let b = Bench::new().await;
    let mut names: Vec<String> = b.host.generation().tools.keys().cloned().collect();
    names.sort();
    let mut want = vec![
        "read",
        "write",
        "edit",
        "read_image",
        "glob",
        "grep",
        "bash",
        "job_list",
        "job_output",
        "job_kill",
        "terminal_open",
        "terminal_write",
        "terminal_read",
        "terminal_screen",
        "terminal_resize",
        "terminal_close",
        "terminal_list",
        "todo_write",
        "web_fetch",
        "web_search",
        "list_dir",
        "lsp",
        "skill",
        "create_goal",
        "get_goal",
        "update_goal",
        "ask_user_question",
    ];
    want.sort();
    assert_eq!(names, want);
}

// ---- read ----------------------------------------------------------------

#[tokio::test]
async fn read_numbers_lines_windows_large_files_and_cuts_long_lines() {
    let b = Bench::new().await;
    b.put("a.txt", "one\ntwo\r\nthree");
    let t = ok(&b.call("read", json!({"path": "a.txt"})).await);
    assert_eq!(t, "     1\tone\n     2\ttwo\n     3\tthree\n");
    let many: String = (1..=5000).map(|i| format!("line {i}\n")).collect();
    b.put("big.txt", &many);
    let t = ok(&b.call("read", json!({"path": "big.txt"})).await);
    assert!(t.starts_with("     1\tline 1\n"), "{t}");
    assert!(t.contains("  2000\tline 2000\n") && !t.contains("line 2001\n"));
    assert!(
        t.ends_with("(lines 1–2000 of 5000 shown; read on with offset=2001)\n"),
        "{}",
        &t[t.len() - 200..]
    );
    let t = ok(&b
        .call(
            "read",
            json!({"path": "big.txt", "offset": 4999, "limit": 10}),
        )
        .await);
    assert_eq!(t, "  4999\tline 4999\n  5000\tline 5000\n");
    let e = failed(
        &b.call("read", json!({"path": "big.txt", "offset": 6000}))
            .await,
        "INVALID_INPUT",
    );
    assert!(e.contains("has 5000 lines"), "{e}");
    b.put("long.txt", "x".repeat(5000));
    let t = ok(&b.call("read", json!({"path": "long.txt"})).await);
    assert!(t.contains("(line cut at 2000 of 5000 characters)"), "{t}");
    assert!(t.len() < 2200);
    b.put("empty.txt", "");
    assert!(ok(&b.call("read", json!({"path": "empty.txt"})).await).contains("is empty"));
}

#[tokio::test]
async fn read_refuses_binaries_and_points_images_to_read_image() {
    let b = Bench::new().await;
    b.put("blob.bin", b"ab\0cd");
    let e = failed(
        &b.call("read", json!({"path": "blob.bin"})).await,
        "BINARY_FILE",
    );
    assert!(e.contains("binary"), "{e}");
    b.put("pic.png", PNG);
    let e = failed(
        &b.call("read", json!({"path": "pic.png"})).await,
        "BINARY_FILE",
    );
    assert!(e.contains("read_image"), "{e}");
}

#[tokio::test]
async fn read_errors_say_what_to_do() {
    let b = Bench::new().await;
    b.put("src/main.rs", "fn main() {}\n");
    b.put("src/lib.rs", "\n");
    let r = b.call("read", json!({"path": "src/mian.rs"})).await;
    let e = failed(&r, "NOT_FOUND");
    assert!(e.contains("did you mean `src/main.rs`"), "{e}");
    let e = failed(
        &b.call("read", json!({"path": "src/main.py"})).await,
        "NOT_FOUND",
    );
    assert!(e.contains("`src/main.rs`"), "{e}");
    let e = failed(
        &b.call("read", json!({"path": "nowhere/x.rs"})).await,
        "NOT_FOUND",
    );
    assert!(e.contains("glob"), "{e}");
    let e = failed(
        &b.call("read", json!({"path": "src"})).await,
        "INVALID_INPUT",
    );
    assert!(e.contains("directory"), "{e}");
    // An absolute path reaches only a skill's directory (none here).
    let e = failed(
        &b.call("read", json!({"path": "/etc/passwd"})).await,
        "PERMISSION_DENIED",
    );
    assert!(
        e.contains("outside the directories granted to this tool") && e.contains("relative"),
        "{e}"
    );
    failed(
        &b.call("read", json!({"path": "../x"})).await,
        "PERMISSION_DENIED",
    );
}

#[tokio::test]
async fn read_never_opens_a_fifo() {
    let b = Bench::new().await;
    let fifo = b.root().join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0);
    let started = Instant::now();
    let e = failed(
        &b.call("read", json!({"path": "pipe"})).await,
        "INVALID_INPUT",
    );
    assert!(e.contains("not a regular file"), "{e}");
    let e = failed(
        &b.call("grep", json!({"pattern": "x", "path": "pipe"}))
            .await,
        "INVALID_INPUT",
    );
    assert!(e.contains("not a regular file"), "{e}");
    // A walk passes it by.
    b.put("f.txt", "x\n");
    assert_eq!(ok(&b.call("grep", json!({"pattern": "x"})).await), "f.txt");
    assert!(started.elapsed() < Duration::from_secs(10));
}

unsafe extern "C" {
    #[link_name = "mkfifo"]
    fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
}

// ---- read_image ----------------------------------------------------------

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

#[tokio::test]
async fn read_image_returns_an_image_block_and_refuses_the_rest() {
    let b = Bench::new().await;
    b.put("pic.png", PNG);
    let r = b.call("read_image", json!({"path": "pic.png"})).await;
    assert!(!r.is_error, "{r:?}");
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["content"][0]["type"], "image", "{v}");
    assert_eq!(v["content"][0]["mimeType"], "image/png", "{v}");
    // A 1×1 GIF's header (a 0×0 one is refused as empty).
    let gif = [b"GIF89a".as_slice(), &[1, 0, 1, 0], &[0; 16]].concat();
    b.put("a.gif", &gif);
    let v = serde_json::to_value(b.call("read_image", json!({"path": "a.gif"})).await).unwrap();
    assert_eq!(v["content"][0]["mimeType"], "image/gif", "{v}");
    b.put("notes.txt", "hello");
    let e = failed(
        &b.call("read_image", json!({"path": "notes.txt"})).await,
        "UNSUPPORTED_TYPE",
    );
    assert!(e.contains("use read"), "{e}");
    let big = [PNG, &vec![0u8; 6 << 20]].concat();
    b.put("big.png", big);
    let e = failed(
        &b.call("read_image", json!({"path": "big.png"})).await,
        "TOO_LARGE",
    );
    assert!(e.contains("5242880"), "{e}");
}

/// Issue 24: an image is measured from its header before it is passed on —
/// a small file declaring 65535×65535 pixels (16 GiB decoded) is refused
/// with its size and the limit; the 1×1 twin passes.
#[tokio::test]
async fn read_image_refuses_huge_dimensions_before_passing_the_image_on() {
    let b = Bench::new().await;
    let mut huge = PNG.to_vec();
    huge[16..24].copy_from_slice(&[0, 0, 0xff, 0xff, 0, 0, 0xff, 0xff]);
    b.put("huge.png", &huge);
    let r = b.call("read_image", json!({"path": "huge.png"})).await;
    let e = failed(&r, "TOO_LARGE");
    assert!(e.contains("65535×65535") && e.contains("8192"), "{e}");
    assert!(
        !serde_json::to_string(&r).unwrap().contains("\"image\""),
        "no image block: {r:?}"
    );
    // Within the side limit but past the pixel count: 8192×4097 (8192×4096
    // is 32 Mi pixels exactly, the most allowed).
    let mut wide = PNG.to_vec();
    wide[16..24].copy_from_slice(&[0, 0, 0x20, 0, 0, 0, 0x10, 0x01]);
    b.put("wide.png", &wide);
    failed(
        &b.call("read_image", json!({"path": "wide.png"})).await,
        "TOO_LARGE",
    );
    b.put("pic.png", PNG);
    let r = b.call("read_image", json!({"path": "pic.png"})).await;
    assert!(!r.is_error, "{r:?}");
}

// ---- write and edit ------------------------------------------------------

#[tokio::test]
async fn write_creates_and_replaces_inside_the_grant_only() {
    let b = Bench::new().await;
    let t = ok(&b
        .call(
            "write",
            json!({"path": "new/deep/a.txt", "content": "héllo\n"}),
        )
        .await);
    assert_eq!(t, "Created `new/deep/a.txt` (7 bytes written)");
    assert_eq!(b.get("new/deep/a.txt"), "héllo\n");
    let t = ok(&b
        .call("write", json!({"path": "new/deep/a.txt", "content": "bye"}))
        .await);
    assert!(t.starts_with("Replaced"), "{t}");
    assert_eq!(b.get("new/deep/a.txt"), "bye");
    failed(
        &b.call("write", json!({"path": "../escape.txt", "content": "x"}))
            .await,
        "PERMISSION_DENIED",
    );
    failed(
        &b.call("write", json!({"path": "/tmp/escape.txt", "content": "x"}))
            .await,
        "INVALID_INPUT",
    );
    assert!(!b.root().parent().unwrap().join("escape.txt").exists());
    let e = failed(
        &b.call("write", json!({"path": "new", "content": "x"}))
            .await,
        "INVALID_INPUT",
    );
    assert!(e.contains("directory"), "{e}");
    // The approval card is a diff.
    let cards = b.approver.0.lock().unwrap().clone();
    let (tool, card) = &cards[1];
    assert_eq!(tool, "write");
    let card = card.as_ref().expect("write presents a card");
    assert!(card.title.starts_with("Replace new/deep/a.txt"), "{card:?}");
    let detail = card.detail.as_deref().unwrap();
    assert!(
        detail.contains("-héllo") && detail.contains("+bye"),
        "{detail}"
    );
}

#[tokio::test]
async fn without_a_read_write_grant_the_write_tools_do_not_load() {
    let dir = TempDir::new("catalog-ro");
    let host = Toolgate::builder()
        .runtime_options(test_runtime())
        .workdir(dir.path())
        .config(
            toolgate::HostConfig::parse(
                &format!(
                    "[plugins.fs-write.grants]\nfs = [{{ path = {:?}, access = \"read-only\" }}]\n",
                    dir.path().display().to_string()
                ),
                "test",
            )
            .unwrap(),
        )
        .build()
        .await
        .unwrap();
    let p = host
        .problems()
        .into_iter()
        .find(|p| p.plugin == "fs-write")
        .expect("fs-write is refused");
    assert!(
        p.message.contains("`files` seam") && p.message.contains("spawn_only = true"),
        "{p}"
    );
    assert!(!host.generation().tools.contains_key("write"));
    assert!(host.generation().tools.contains_key("read"));
}

#[tokio::test]
async fn writes_never_reach_what_the_host_protects() {
    let b = Bench::new().await;
    for path in [".git/config", ".git/hooks/pre-commit", "toolgate.toml"] {
        let e = failed(
            &b.call("write", json!({"path": path, "content": "x"})).await,
            "PERMISSION_DENIED",
        );
        assert!(e.contains("protects"), "{path}: {e}");
    }
    assert!(!b.root().join("toolgate.toml").exists());
    assert!(!b.root().join(".git/config").exists());
    // Through a symlink planted in the tree: the same answer.
    std::os::unix::fs::symlink(".git", b.root().join("g")).unwrap();
    failed(
        &b.call(
            "write",
            json!({"path": "g/hooks/post-checkout", "content": "x"}),
        )
        .await,
        "PERMISSION_DENIED",
    );
    assert!(!b.root().join(".git/hooks/post-checkout").exists());
    // A symlink as the target is not followed.
    b.put("notes.txt", "mine");
    std::os::unix::fs::symlink("notes.txt", b.root().join("host")).unwrap();
    let e = failed(
        &b.call("write", json!({"path": "host", "content": "x"}))
            .await,
        "PERMISSION_DENIED",
    );
    assert!(e.contains("symlink"), "{e}");
    assert_eq!(b.get("notes.txt"), "mine");
}

#[tokio::test]
async fn edit_replaces_exactly_and_keeps_every_other_byte() {
    let b = Bench::new().await;
    b.put("crlf.txt", "alpha\r\nbeta\r\ngamma");
    let r = b
        .call(
            "edit",
            json!({"path": "crlf.txt", "old_string": "alpha\nbeta", "new_string": "ALPHA\nBETA"}),
        )
        .await;
    let t = ok(&r);
    assert!(t.contains("1 replacement (line 1)"), "{t}");
    assert!(t.contains("     1\tALPHA\n     2\tBETA\n"), "{t}");
    // CRLF kept, the missing final newline kept.
    assert_eq!(b.get("crlf.txt"), "ALPHA\r\nBETA\r\ngamma");
    let cards = b.approver.0.lock().unwrap().clone();
    let card = cards[0].1.as_ref().expect("edit presents a card");
    assert!(card.title.contains("1 replacement"), "{card:?}");
    let diff = card.detail.as_deref().unwrap();
    assert!(
        diff.contains("--- a/crlf.txt") && diff.contains("-alpha") && diff.contains("+ALPHA"),
        "{diff}"
    );
}

#[tokio::test]
async fn edit_errors_tell_the_model_how_to_fix_the_call() {
    let b = Bench::new().await;
    b.put("f.rs", "fn a() {\n    x();\n}\nfn b() {\n    x();\n}\n");
    let r = b
        .call(
            "edit",
            json!({"path": "f.rs", "old_string": "x();", "new_string": "y();"}),
        )
        .await;
    let e = failed(&r, "NOT_UNIQUE");
    assert!(
        e.contains("occurs 2 times") && e.contains("lines 2, 5"),
        "{e}"
    );
    assert!(e.contains("replace_all"), "{e}");
    assert_eq!(
        r.error.as_ref().unwrap().details.as_ref().unwrap()["count"],
        2
    );
    let e = failed(
        &b.call(
            "edit",
            json!({"path": "f.rs", "old_string": "fn a() {\n  x();", "new_string": "z"}),
        )
        .await,
        "NO_MATCH",
    );
    assert!(e.contains("line 1") && e.contains("indentation"), "{e}");
    let e = failed(
        &b.call(
            "edit",
            json!({"path": "f.rs", "old_string": "FN A()", "new_string": "z"}),
        )
        .await,
        "NO_MATCH",
    );
    assert!(e.contains("case"), "{e}");
    let e = failed(
        &b.call(
            "edit",
            json!({"path": "f.rs", "old_string": "x();", "new_string": "x();"}),
        )
        .await,
        "INVALID_INPUT",
    );
    assert!(e.contains("the same"), "{e}");
    failed(
        &b.call(
            "edit",
            json!({"path": "f.rs", "old_string": "", "new_string": "x"}),
        )
        .await,
        "INVALID_INPUT",
    );
    let e = failed(
        &b.call(
            "edit",
            json!({"path": "g.rs", "old_string": "a", "new_string": "b"}),
        )
        .await,
        "NOT_FOUND",
    );
    assert!(e.contains("`f.rs`"), "{e}");
    b.put("bin", b"\xff\xfe\0");
    failed(
        &b.call(
            "edit",
            json!({"path": "bin", "old_string": "a", "new_string": "b"}),
        )
        .await,
        "BINARY_FILE",
    );
    // Nothing changed so far; replace_all does it.
    assert_eq!(
        b.get("f.rs"),
        "fn a() {\n    x();\n}\nfn b() {\n    x();\n}\n"
    );
    let t = ok(&b
        .call(
            "edit",
            json!({"path": "f.rs", "old_string": "x();", "new_string": "y();", "replace_all": true}),
        )
        .await);
    assert!(t.contains("2 replacements (lines 2, 5)"), "{t}");
    assert_eq!(
        b.get("f.rs"),
        "fn a() {\n    y();\n}\nfn b() {\n    y();\n}\n"
    );
}

// ---- glob and grep -------------------------------------------------------

fn set_mtime(p: &Path, secs_ago: u64) {
    let f = std::fs::File::options().write(true).open(p).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(secs_ago))
        .unwrap();
}

#[tokio::test]
async fn glob_lists_newest_first_and_respects_gitignore() {
    let b = Bench::new().await;
    set_mtime(&b.put("src/old.rs", ""), 300);
    set_mtime(&b.put("src/new.rs", ""), 10);
    set_mtime(&b.put("src/deep/mid.rs", ""), 100);
    b.put("src/notes.md", "");
    b.put("target/debug/gen.rs", "");
    b.put(".hidden/h.rs", "");
    b.put(".env", "SECRET=1");
    b.put(".gitignore", "target/\n");
    let t = ok(&b.call("glob", json!({"pattern": "**/*.rs"})).await);
    assert_eq!(t, "src/new.rs\nsrc/deep/mid.rs\nsrc/old.rs");
    let t = ok(&b
        .call("glob", json!({"pattern": "*.rs", "path": "src"}))
        .await);
    assert_eq!(t, "src/new.rs\nsrc/old.rs");
    assert_eq!(
        ok(&b.call("glob", json!({"pattern": "**/*.py"})).await),
        "no files match"
    );
    for i in 0..120 {
        b.put(&format!("many/f{i:03}.txt"), "");
    }
    let t = ok(&b.call("glob", json!({"pattern": "many/*.txt"})).await);
    assert_eq!(t.lines().filter(|l| l.starts_with("many/")).count(), 100);
    assert!(t.contains("100 of 120 matches shown"), "{t}");
    let e = failed(
        &b.call("glob", json!({"pattern": "../**"})).await,
        "INVALID_INPUT",
    );
    assert!(e.contains("stay inside"), "{e}");
    failed(
        &b.call("glob", json!({"pattern": "a[", "path": "."})).await,
        "INVALID_INPUT",
    );
}

/// Issue 24: a match followed by binary content is found (it used to be
/// lost with the whole buffer); what follows the first NUL byte is not
/// searched, and `content` mode says so. Walked and named files alike.
#[tokio::test]
async fn grep_finds_the_match_before_binary_content() {
    let b = Bench::new().await;
    let mut data = b"header\nthe needle is here\n".to_vec();
    data.extend([0u8, 1, 2, 3]);
    data.extend(b"\nneedle in the binary part\n");
    b.put("mixed.dat", &data);
    b.put("plain.txt", "no match here\n");
    assert_eq!(
        ok(&b.call("grep", json!({"pattern": "needle"})).await),
        "mixed.dat"
    );
    for args in [
        json!({"pattern": "needle", "output_mode": "content"}),
        json!({"pattern": "needle", "output_mode": "content", "path": "mixed.dat"}),
    ] {
        let t = ok(&b.call("grep", args.clone()).await);
        assert_eq!(
            t,
            "mixed.dat:2:the needle is here\nmixed.dat: (binary content from byte 26 on was not searched)",
            "{args}"
        );
    }
    let t = ok(&b
        .call("grep", json!({"pattern": "needle", "output_mode": "count"}))
        .await);
    assert_eq!(t, "mixed.dat:1");
    // Only in the binary part: no match (as before).
    assert_eq!(
        ok(&b.call("grep", json!({"pattern": "binary part"})).await),
        "no matches"
    );
}

#[tokio::test]
async fn grep_searches_like_ripgrep() {
    let b = Bench::new().await;
    b.put("src/a.rs", "fn main() {\n    let x = 1;\n    todo!();\n}\n");
    b.put("src/b.py", "def f():\n    # TODO later\n    return 1\n");
    b.put("src/c.bin", b"TODO\0binary");
    b.put("gen/out.rs", "todo!()\n");
    b.put(".gitignore", "gen/\n");
    b.put(".cache/x.rs", "todo!()\n");
    b.put("id_rsa", "todo private key\n");
    // files_with_matches is the default; binary, ignored, hidden and
    // secret files are skipped.
    assert_eq!(
        ok(&b.call("grep", json!({"pattern": "(?i)todo"})).await),
        "src/a.rs\nsrc/b.py"
    );
    let t = ok(&b
        .call(
            "grep",
            json!({"pattern": "todo", "case_insensitive": true, "output_mode": "content"}),
        )
        .await);
    assert_eq!(t, "src/a.rs:3:    todo!();\nsrc/b.py:2:    # TODO later");
    let t = ok(&b
        .call(
            "grep",
            json!({"pattern": "todo", "output_mode": "content", "context": 1, "type": "rust"}),
        )
        .await);
    assert_eq!(
        t,
        "src/a.rs-2-    let x = 1;\nsrc/a.rs:3:    todo!();\nsrc/a.rs-4-}"
    );
    let t = ok(&b
        .call(
            "grep",
            json!({"pattern": "1", "output_mode": "count", "glob": "*.py"}),
        )
        .await);
    assert_eq!(t, "src/b.py:1");
    let t = ok(&b
        .call(
            "grep",
            json!({"pattern": "main.*\\n.*let", "multiline": true, "output_mode": "content"}),
        )
        .await);
    assert!(
        t.contains("src/a.rs:1:fn main() {") && t.contains("src/a.rs:2:"),
        "{t}"
    );
    let t = ok(&b
        .call(
            "grep",
            json!({"pattern": ".", "output_mode": "content", "head_limit": 2}),
        )
        .await);
    assert!(
        t.starts_with("src/a.rs:1:") && t.contains("stopped after 2 entries"),
        "{t}"
    );
    let e = failed(
        &b.call("grep", json!({"pattern": "a("})).await,
        "INVALID_INPUT",
    );
    assert!(e.contains("regular expression"), "{e}");
    let e = failed(
        &b.call("grep", json!({"pattern": "a", "type": "nosuchtype"}))
            .await,
        "INVALID_INPUT",
    );
    assert!(e.contains("rust"), "{e}");
    assert_eq!(
        ok(&b.call("grep", json!({"pattern": "zzz_nothing"})).await),
        "no matches"
    );
    // One file, named.
    assert_eq!(
        ok(&b
            .call(
                "grep",
                json!({"pattern": "let", "path": "src/a.rs", "output_mode": "content"})
            )
            .await),
        "src/a.rs:2:    let x = 1;"
    );
}

// ---- bash and jobs -------------------------------------------------------

#[tokio::test]
async fn bash_failures_carry_output_and_status() {
    let b = Bench::new().await;
    let t = ok(&b
        .call("bash", json!({"command": "echo out; echo err >&2"}))
        .await);
    assert_eq!(t, "out\n[stderr]\nerr\n[exit code 0]");
    let r = b
        .call(
            "bash",
            json!({"command": "echo partial; echo broke >&2; exit 3"}),
        )
        .await;
    let e = failed(&r, "EXIT_STATUS");
    assert_eq!(e, "partial\n[stderr]\nbroke\n[exit code 3]");
    let d = r.error.as_ref().unwrap().details.as_ref().unwrap();
    assert_eq!(d["exit_code"], 3);
    let started = Instant::now();
    let r = b
        .call(
            "bash",
            json!({"command": "echo started; sleep 30", "timeoutMs": 1000}),
        )
        .await;
    let e = failed(&r, "TIMEOUT");
    assert!(
        e.starts_with("started\n") && e.contains("timed out after 1000 ms"),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    let e = failed(
        &b.call("bash", json!({"command": "kill -9 $$"})).await,
        "SIGNAL",
    );
    assert!(e.contains("signal 9"), "{e}");
}

#[tokio::test]
async fn bash_keeps_head_and_tail_of_long_output() {
    let b = Bench::new().await;
    let r = b
        .call("bash", json!({"command": "seq 1 200000; exit 1"}))
        .await;
    let e = failed(&r, "EXIT_STATUS");
    assert!(e.starts_with("1\n2\n3\n"), "{}", &e[..50]);
    assert!(
        e.ends_with("199999\n200000\n[exit code 1]"),
        "{}",
        &e[e.len() - 80..]
    );
    assert!(e.contains("bytes cut"), "no marker");
    assert!(e.len() < 13_000, "{}", e.len());
}

pub(crate) async fn gone(marker: &str) -> bool {
    for _ in 0..100 {
        if processes_with(marker).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn background_jobs_start_stream_and_die() {
    let b = Bench::new().await;
    let t = ok(&b
        .call(
            "bash",
            json!({"command": "for i in 1 2 3; do echo tick $i; sleep 0.2; done; sleep 41.31", "run_in_background": true}),
        )
        .await);
    assert!(t.contains("in the background as job-"), "{t}");
    let id = t
        .split(" as ")
        .nth(1)
        .unwrap()
        .split('.')
        .next()
        .unwrap()
        .to_string();
    // Until the third tick is out (the job keeps running after it).
    let t = b.job_output_until(&id, |t| t.contains("tick 3\n")).await;
    assert!(t.starts_with("tick 1\ntick 2\ntick 3\n"), "{t}");
    assert!(t.contains("running"), "{t}");
    // Incremental: from the offset it gave, nothing new yet.
    let next: u64 = t
        .rsplit("next offset ")
        .next()
        .unwrap()
        .trim_end_matches(']')
        .parse()
        .unwrap();
    assert_eq!(next, 21);
    let t = ok(&b.call("job_output", json!({"id": id, "since": 7})).await);
    assert!(t.starts_with("tick 2\ntick 3\n"), "{t}");
    let t = ok(&b.call("job_list", json!({})).await);
    assert!(
        t.contains(&id) && t.contains("running") && t.contains("sleep 41.31"),
        "{t}"
    );
    // Another agent scope sees none of it.
    assert_eq!(
        ok(&b.call_in("other", "job_list", json!({})).await),
        "no background jobs"
    );
    failed(
        &b.call_in("other", "job_kill", json!({"id": id})).await,
        "NOT_FOUND",
    );
    assert!(!processes_with("41.31").is_empty());
    let t = ok(&b.call("job_kill", json!({"id": id})).await);
    assert!(t.contains("killed"), "{t}");
    assert!(gone("41.31").await, "the job survived job_kill");
    failed(
        &b.call("job_output", json!({"id": "job-999"})).await,
        "NOT_FOUND",
    );
    // A job that exits on its own reports its status.
    let t = ok(&b
        .call(
            "bash",
            json!({"command": "echo done; exit 4", "run_in_background": true}),
        )
        .await);
    let id = t
        .split(" as ")
        .nth(1)
        .unwrap()
        .split('.')
        .next()
        .unwrap()
        .to_string();
    let t = b.job_output_until(&id, |t| t.contains("exited")).await;
    assert!(t.contains("done\n") && t.contains("exited 4"), "{t}");
}

#[tokio::test]
async fn no_job_outlives_the_host() {
    let b = Bench::new().await;
    ok(&b
        .call(
            "bash",
            json!({"command": "sleep 42.17 & sleep 42.18", "run_in_background": true}),
        )
        .await);
    // The shell and its two sleeps.
    wait_for(Duration::from_secs(10), "the job's two sleeps", || {
        processes_with("42.1").len() >= 2
    })
    .await;
    assert_eq!(b.host.running_jobs(), 1);
    drop(b);
    assert!(gone("42.1").await, "a job outlived the host");
}

fn job_id(text: &str) -> String {
    text.split(" as ")
        .nth(1)
        .unwrap()
        .split('.')
        .next()
        .unwrap()
        .to_string()
}

/// A background job is a spawn like any other: sandboxed (the host's files
/// stay out of reach), its output bounded, and an agent's jobs capped.
#[tokio::test]
async fn background_jobs_are_sandboxed_bounded_and_capped() {
    let b = Bench::new().await;
    let t = ok(&b
        .call(
            "bash",
            json!({"command": "(echo x > .git/hooks/evil) 2>/dev/null || echo blocked-git; \
                (echo y > toolgate.toml) 2>/dev/null || echo blocked-config; echo z > mine.txt; \
                head -c 3000000 /dev/zero | tr '\\0' a; echo; echo END",
                "run_in_background": true}),
        )
        .await);
    let id = job_id(&t);
    let mut t = String::new();
    for _ in 0..100 {
        t = ok(&b.call("job_output", json!({"id": id})).await);
        if t.contains("exited") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        t.contains("exited 0"),
        "{}",
        &t[t.len().saturating_sub(300)..]
    );
    assert!(!b.root().join(".git/hooks/evil").exists());
    assert!(!b.root().join("toolgate.toml").exists());
    assert_eq!(b.get("mine.txt"), "z\n");
    // 3 MB of output: the host kept the last 1 MiB, the model sees a
    // bounded head and tail of it, the end included.
    assert!(t.len() < 16 * 1024, "{} bytes shown", t.len());
    assert!(t.contains("earlier bytes not shown"), "{}", &t[..200]);
    assert!(t.contains("END\n"), "{}", &t[t.len() - 200..]);
    // Eight running jobs per agent; the ninth is refused, saying what to do.
    for i in 0..8 {
        ok(&b
            .call(
                "bash",
                json!({"command": format!("sleep 44.7{i}"), "run_in_background": true}),
            )
            .await);
    }
    let r = b
        .call(
            "bash",
            json!({"command": "sleep 44.79", "run_in_background": true}),
        )
        .await;
    assert!(r.is_error, "a ninth job started: {}", r.text());
    assert!(r.text().contains("job_kill"), "{}", r.text());
    // Another agent scope has its own allowance.
    ok(&b
        .call_in(
            "other",
            "bash",
            json!({"command": "sleep 44.78", "run_in_background": true}),
        )
        .await);
    drop(b);
    assert!(gone("44.7").await, "a job outlived the host");
}

#[tokio::test]
async fn job_timeouts_end_jobs() {
    let b = Bench::new().await;
    let t = ok(&b
        .call(
            "bash",
            json!({"command": "sleep 43.9", "run_in_background": true, "timeoutMs": 300}),
        )
        .await);
    let id = t
        .split(" as ")
        .nth(1)
        .unwrap()
        .split('.')
        .next()
        .unwrap()
        .to_string();
    assert!(gone("43.9").await, "the job outlived its timeout");
    // The table says so once the job's waiter has reaped the group (just
    // after the processes are gone): wait for that, within a bound.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let t = ok(&b.call("job_output", json!({"id": id})).await);
        if t.contains("killed") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{t}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

// ---- todo_write ----------------------------------------------------------

#[tokio::test]
async fn todo_write_validates_and_keeps_one_list_per_scope() {
    // Fresh instances: the list must live in the host, not in a warm instance.
    let b = Bench::with_config("[plugins.todo]\ninstances = \"fresh\"\n").await;
    let list = json!({"todos": [
        {"content": "Read the code", "status": "completed"},
        {"content": "Write the fix", "status": "in_progress"},
        {"content": "Run the tests", "status": "pending"}
    ]});
    let t = ok(&b.call_in("agent/a", "todo_write", list).await);
    assert_eq!(
        t,
        "Task list (1 of 3 done):\n[x] Read the code\n[>] Write the fix\n[ ] Run the tests\n"
    );
    let r = b
        .call_in(
            "agent/a",
            "todo_write",
            json!({"todos": [
                {"content": "A", "status": "in_progress"},
                {"content": "B", "status": "in_progress"}
            ]}),
        )
        .await;
    let e = failed(&r, "INVALID_INPUT");
    assert!(
        e.contains("only one may be in progress") && e.contains("items 0, 1"),
        "{e}"
    );
    let r = b
        .call_in(
            "agent/a",
            "todo_write",
            json!({"todos": [{"content": "A", "status": "doing"}]}),
        )
        .await;
    assert_eq!(r.code(), Some("INVALID_ARGS"), "{r:?}");
    failed(
        &b.call_in(
            "agent/a",
            "todo_write",
            json!({"todos": [{"content": " ", "status": "pending"}]}),
        )
        .await,
        "INVALID_INPUT",
    );
    // The list was kept (the failed writes changed nothing); the value
    // says how long the list it replaced was.
    let r = b
        .call_in(
            "agent/a",
            "todo_write",
            json!({"todos": [{"content": "Next", "status": "pending"}]}),
        )
        .await;
    ok(&r);
    // Another scope starts empty.
    let r = b
        .call_in("agent/b", "todo_write", json!({"todos": []}))
        .await;
    assert_eq!(ok(&r), "The task list is now empty.");
}

// ---- the secrets guard covers the catalog ---------------------------------

#[tokio::test]
async fn the_secrets_guard_covers_every_file_tool() {
    let b = Bench::new().await;
    b.put(".env", "TOKEN=1\n");
    b.put("keys/server.pem", "KEY\n");
    for (tool, args) in [
        ("read", json!({"path": ".env"})),
        ("read_image", json!({"path": "keys/server.pem"})),
        ("grep", json!({"pattern": "TOKEN", "path": ".env"})),
        ("glob", json!({"pattern": "**/*.pem"})),
        ("write", json!({"path": ".env", "content": "x"})),
        (
            "edit",
            json!({"path": ".env", "old_string": "TOKEN", "new_string": "X"}),
        ),
        ("list_dir", json!({"path": ".ssh"})),
    ] {
        let r = b.call(tool, args.clone()).await;
        assert_eq!(r.code(), Some("DENIED"), "{tool} {args}: {r:?}");
    }
    assert_eq!(b.get(".env"), "TOKEN=1\n");
    // Data is not a name: a .gitignore listing .env may be written, and
    // an edit may mention it.
    ok(&b
        .call(
            "write",
            json!({"path": ".gitignore", "content": ".env\n*.pem\n"}),
        )
        .await);
    ok(&b
        .call(
            "edit",
            json!({"path": ".gitignore", "old_string": "*.pem", "new_string": "*.pem\nid_rsa"}),
        )
        .await);
    // A search of the tree never returns a secret file's content.
    assert_eq!(
        ok(&b
            .call(
                "grep",
                json!({"pattern": "TOKEN|KEY", "output_mode": "content"})
            )
            .await),
        "no matches"
    );
}

// ---- web_fetch -----------------------------------------------------------

/// A small HTTP/1.1 server on loopback: one thread per connection, a
/// fixed set of pages. `port` is its own port (for redirects).
fn http_server() -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(&stream);
                let mut first = String::new();
                let _ = reader.read_line(&mut first);
                loop {
                    let mut line = String::new();
                    match reader.read_line(&mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) if line == "\r\n" => break,
                        Ok(_) => {}
                    }
                }
                let path = first.split_whitespace().nth(1).unwrap_or("/").to_string();
                let page = |status: &str, ctype: &str, body: Vec<u8>, extra: &str| {
                    let mut head = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n",
                        body.len()
                    )
                    .into_bytes();
                    head.extend(body);
                    head
                };
                let mut out = &stream;
                let answer = match path.as_str() {
                    "/page" => page(
                        "200 OK",
                        "text/html; charset=utf-8",
                        b"<html><head><title>T</title><style>.x{color:red}</style></head><body><h1>Hello</h1><p>A <a href=\"/x\">link</a>.</p><script>alert(1)</script></body></html>".to_vec(),
                        "",
                    ),
                    "/plain" => page("200 OK", "text/plain", b"just text".to_vec(), ""),
                    "/redirect-ok" => page("302 Found", "text/plain", Vec::new(), "location: /page\r\n"),
                    "/redirect-out" => page(
                        "302 Found",
                        "text/plain",
                        Vec::new(),
                        &format!("location: http://localhost:{port}/page\r\n"),
                    ),
                    "/big" => page("200 OK", "text/plain", vec![b'a'; 3 << 20], ""),
                    "/big-stream" => {
                        // No content-length: the size shows only while reading.
                        let _ = out.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n");
                        for _ in 0..48 {
                            if out.write_all(&[b'b'; 64 << 10]).is_err() {
                                return;
                            }
                        }
                        return;
                    }
                    "/image" => page("200 OK", "image/png", PNG.to_vec(), ""),
                    "/loop" => page("302 Found", "text/plain", Vec::new(), "location: /loop\r\n"),
                    "/lie" => {
                        // Announces 100 bytes, sends 10, hangs up.
                        let _ = out.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100\r\nconnection: close\r\n\r\n0123456789");
                        return;
                    }
                    "/hang" => {
                        // Headers and a first line, then nothing for a long time.
                        let _ = out.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100\r\n\r\nfirst");
                        std::thread::sleep(Duration::from_secs(30));
                        return;
                    }
                    _ => page("404 Not Found", "text/plain", b"no such page".to_vec(), ""),
                };
                let _ = out.write_all(&answer);
            });
        }
    });
    port
}

#[tokio::test]
async fn web_fetch_without_a_grant_loads_and_refuses_with_the_line_to_add() {
    let port = http_server();
    let b = Bench::new().await;
    assert!(b.host.generation().tools.contains_key("web_fetch"));
    let r = b
        .call(
            "web_fetch",
            json!({"url": format!("http://127.0.0.1:{port}/page")}),
        )
        .await;
    let e = failed(&r, "PERMISSION_DENIED");
    assert!(
        e.contains(&format!("\"127.0.0.1:{port}\"")) && e.contains("[plugins.web-fetch.grants]"),
        "{e}"
    );
}

#[tokio::test]
async fn web_fetch_fetches_granted_hosts_and_rechecks_every_redirect() {
    let port = http_server();
    let b = Bench::with_config(&format!(
        "[plugins.web-fetch.grants]\nnetwork = [\"127.0.0.1:{port}\"]\n"
    ))
    .await;
    let url = |p: &str| format!("http://127.0.0.1:{port}{p}");
    let t = ok(&b.call("web_fetch", json!({"url": url("/page")})).await);
    assert!(t.contains("# Hello") && t.contains("[link](/x)"), "{t}");
    assert!(!t.contains("color:red") && !t.contains("alert"), "{t}");
    let t = ok(&b
        .call("web_fetch", json!({"url": url("/page"), "format": "raw"}))
        .await);
    assert!(t.starts_with("<html>"), "{t}");
    assert_eq!(
        ok(&b.call("web_fetch", json!({"url": url("/plain")})).await),
        "just text"
    );
    // A redirect on the granted host is followed...
    let t = ok(&b
        .call("web_fetch", json!({"url": url("/redirect-ok")}))
        .await);
    assert!(t.contains("# Hello"), "{t}");
    // ...one to a host that is not granted is refused, by name.
    let e = failed(
        &b.call("web_fetch", json!({"url": url("/redirect-out")}))
            .await,
        "PERMISSION_DENIED",
    );
    assert!(e.contains(&format!("add \"localhost:{port}\"")), "{e}");
    // A host that is not granted, directly.
    let e = failed(
        &b.call(
            "web_fetch",
            json!({"url": format!("http://localhost:{port}/page")}),
        )
        .await,
        "PERMISSION_DENIED",
    );
    assert!(e.contains("egress = [...]"), "{e}");
    // Oversized bodies, announced or not.
    let e = failed(
        &b.call("web_fetch", json!({"url": url("/big")})).await,
        "TOO_LARGE",
    );
    assert!(e.contains("max_bytes (2097152)"), "{e}");
    failed(
        &b.call("web_fetch", json!({"url": url("/big-stream")}))
            .await,
        "TOO_LARGE",
    );
    let t = ok(&b
        .call(
            "web_fetch",
            json!({"url": url("/big"), "max_bytes": 4 << 20}),
        )
        .await);
    assert!(t.contains("cut at 102400 bytes"), "{}", &t[t.len() - 100..]);
    failed(
        &b.call(
            "web_fetch",
            json!({"url": url("/big"), "max_bytes": 64 << 20}),
        )
        .await,
        "INVALID_INPUT",
    );
    // Not text, not found, not http.
    failed(
        &b.call("web_fetch", json!({"url": url("/image")})).await,
        "UNSUPPORTED_TYPE",
    );
    let e = failed(
        &b.call("web_fetch", json!({"url": url("/nope")})).await,
        "HTTP_STATUS",
    );
    assert!(e.contains("404") && e.contains("no such page"), "{e}");
    failed(
        &b.call("web_fetch", json!({"url": "file:///etc/passwd"}))
            .await,
        "INVALID_INPUT",
    );
    failed(
        &b.call("web_fetch", json!({"url": "not a url"})).await,
        "INVALID_INPUT",
    );
}

#[tokio::test]
async fn web_fetch_fails_closed_on_peers_that_lie_loop_or_hang() {
    let port = http_server();
    let b = Bench::with_config(&format!(
        "[plugins.web-fetch.grants]\nnetwork = [\"127.0.0.1:{port}\"]\n[tools.web_fetch]\ntimeout_ms = 1500\n"
    ))
    .await;
    let url = |p: &str| format!("http://127.0.0.1:{port}{p}");
    // A redirect loop on a granted host ends at the redirect limit.
    let e = failed(
        &b.call("web_fetch", json!({"url": url("/loop")})).await,
        "TOO_MANY_REDIRECTS",
    );
    assert!(e.contains("more than 5 times"), "{e}");
    // A body shorter than announced is a failure, not a shorter page.
    let r = b.call("web_fetch", json!({"url": url("/lie")})).await;
    let e = failed(&r, "FETCH_FAILED");
    assert!(!e.contains("0123456789"), "{e}");
    // A peer that stops sending: the call ends at its budget...
    let started = Instant::now();
    let r = b.call("web_fetch", json!({"url": url("/hang")})).await;
    failed(&r, "TIMEOUT");
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    // ...and the tool still works afterwards.
    assert_eq!(
        ok(&b.call("web_fetch", json!({"url": url("/plain")})).await),
        "just text"
    );
}
