//! The audit record (issue 28): every call recorded, in order, before its
//! result is returned; tampering of each kind detected and located; a
//! full disk fails calls closed; a killed host leaves a verifiable prefix
//! and the next start continues the chain, saying so.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use toolgate::audit::verify::{Report, VerifyOptions, verify};
use toolgate::{HostConfig, ToolCall, Toolgate, TurnOptions};
use toolgate_tests::{PluginDir, TempDir, call, fixtures, test_runtime, toolgate_bin};

/// The records of a file, parsed.
fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn calls_of(records: &[Value]) -> Vec<&Value> {
    records.iter().filter(|r| r["kind"] == "call").collect()
}

fn public_key(key: &Path) -> [u8; 32] {
    let mut p = key.as_os_str().to_owned();
    p.push(".pub");
    toolgate::audit::key::parse_public(&PathBuf::from(p).display().to_string()).unwrap()
}

fn pinned(key: &Path) -> VerifyOptions {
    VerifyOptions {
        key: Some(public_key(key)),
        ..VerifyOptions::default()
    }
}

/// The configuration of a record at `dir/audit.jsonl`, key `dir/audit.key`.
fn audit_config(dir: &Path, extra: &str) -> String {
    format!(
        "[audit]\npath = \"{}\"\nsigning_key = \"{}\"\n{extra}",
        dir.join("audit.jsonl").display(),
        dir.join("audit.key").display()
    )
}

/// A command for the `toolgate` binary with its state and cache in `dir`.
fn toolgate(dir: &Path) -> Command {
    let mut cmd = Command::new(toolgate_bin());
    cmd.current_dir(dir)
        .env("TOOLGATE_STATE_DIR", dir.join("state"))
        .env("TOOLGATE_CACHE_DIR", dir.join("cache"))
        .env("RUST_LOG", "warn");
    cmd
}

/// `dir/work`, made: the working directory of a run with the built-in
/// plugins, whose grant is the working directory — the record (in `dir`)
/// may not lie inside a grant.
fn in_work(dir: &Path) -> PathBuf {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    work
}

/// [`toolgate`], run in `work`.
fn toolgate_in(dir: &Path, work: &Path) -> Command {
    let mut cmd = toolgate(dir);
    cmd.current_dir(work);
    cmd
}

fn echo_batch(n: usize) -> String {
    let calls: Vec<Value> = (0..n)
        .map(|i| json!({"id": format!("c{i}"), "name": "echo", "arguments": {"text": format!("t{i}")}}))
        .collect();
    serde_json::to_string(&calls).unwrap()
}

/// `toolgate audit verify --json` on `files`: (exit code, report).
fn cli_verify(dir: &Path, files: &[PathBuf], extra: &[&str]) -> (i32, Value) {
    let out = toolgate(dir)
        .args(["audit", "verify", "--json"])
        .args(extra)
        .args(files)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "verify printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

#[test]
fn run_records_10000_calls_in_model_order_and_verifies_intact() {
    let dir = TempDir::new("audit-run");
    let plugins = PluginDir::new();
    plugins.add("tools", fixtures::TOOLS);
    std::fs::write(
        dir.path().join("toolgate.toml"),
        audit_config(dir.path(), ""),
    )
    .unwrap();
    std::fs::write(dir.path().join("calls.json"), echo_batch(10_000)).unwrap();
    let out = toolgate(dir.path())
        .arg("--no-default-plugins")
        .arg("--plugins")
        .arg(plugins.path())
        .args(["run", "--compact", "calls.json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(results.len(), 10_000);
    assert!(results.iter().all(|r| r["isError"] == false));

    let file = dir.path().join("audit.jsonl");
    let all = records(&file);
    let calls = calls_of(&all);
    assert_eq!(calls.len(), 10_000, "one record per call");
    for (i, c) in calls.iter().enumerate() {
        assert_eq!(c["callId"], format!("c{i}"), "model order");
        assert_eq!(c["tool"], "echo");
        assert_eq!(c["arguments"]["text"], format!("t{i}"));
        assert_eq!(c["result"]["isError"], false);
        // The content every client is given, checkable from its text:
        // the digest of the printed result's content blocks.
        let content = serde_json::to_vec(&results[i]["content"]).unwrap();
        assert_eq!(c["result"]["contentSha256"], sha256_hex(&content), "{c}");
    }
    let seqs: Vec<u64> = all.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=all.len() as u64).collect::<Vec<_>>());
    assert_eq!(all[0]["kind"], "start");
    assert_eq!(all.last().unwrap()["kind"], "shutdown");
    // Checkpoints every 1000 records (the default), plus the shutdown.
    let checkpoints = all.iter().filter(|r| r["kind"] == "checkpoint").count();
    assert_eq!(checkpoints, all.len() / 1001);

    let report = verify(
        std::slice::from_ref(&file),
        &pinned(&dir.path().join("audit.key")),
    )
    .unwrap();
    assert!(report.intact, "{report:?}");
    assert_eq!(report.records, all.len() as u64);
    assert!(report.clean_end);
    let (code, json) = cli_verify(dir.path(), std::slice::from_ref(&file), &[]);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["intact"], true);
    assert_eq!(json["firstBroken"], Value::Null);

    // `audit show | head` (issue 44): the reader stops after one line;
    // `show` ends quietly with success, not "Broken pipe".
    let mut show = toolgate(dir.path())
        .args(["audit", "show"])
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(show.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(first.contains("host started"), "{first}");
    let out = show.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.is_empty(),
        "{:?} {stderr}",
        out.status
    );

    // `run … | head -c1`: the reader goes after one byte of a result far
    // larger than a pipe holds. `run` ends quietly (no panic, success), and
    // its 10,000 calls were recorded before it printed: nothing is lost.
    let mut run = toolgate(dir.path())
        .arg("--no-default-plugins")
        .arg("--plugins")
        .arg(plugins.path())
        .args(["run", "calls.json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut byte = [0u8; 1];
    std::io::Read::read_exact(&mut run.stdout.take().unwrap(), &mut byte).unwrap();
    assert_eq!(&byte, b"[");
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !stderr.contains("panicked"),
        "{:?} {stderr}",
        out.status
    );
    let all = records(&file);
    assert_eq!(calls_of(&all).len(), 20_000, "both runs' calls recorded");
    let report = verify(
        std::slice::from_ref(&file),
        &pinned(&dir.path().join("audit.key")),
    )
    .unwrap();
    assert!(report.intact && report.clean_end, "{report:?}");
}

/// A host (library) recording to `dir`, with checkpoints every `every`.
async fn recording_host(dir: &Path, plugins: &PluginDir, every: u64, extra: &str) -> Toolgate {
    let config = format!(
        "{}{}",
        audit_config(dir, &format!("checkpoint_every = {every}\n")),
        extra
    );
    Toolgate::builder()
        .runtime_options(test_runtime())
        .builtin_plugins(false)
        .plugin_dir(plugins.path())
        .config(HostConfig::parse(&config, "test config").unwrap())
        .build()
        .await
        .expect("host builds")
}

/// A clean record of `n` calls (checkpoints every 100), with the guard
/// denying `fail`.
async fn sample(dir: &Path, n: usize) -> PathBuf {
    let plugins = PluginDir::new();
    plugins
        .add("tools", fixtures::TOOLS)
        .add("guard", fixtures::GUARD);
    let host = recording_host(
        dir,
        &plugins,
        100,
        "[plugins.guard]\nvars = { BEHAVIOR = \"deny-tool:fail\", NAME = \"guard\" }\n",
    )
    .await;
    let calls = (0..n)
        .map(|i| {
            if i % 10 == 3 {
                ToolCall::new(
                    format!("c{i}"),
                    "fail",
                    json!({"code": "X", "message": "m"}),
                )
            } else {
                ToolCall::new(format!("c{i}"), "echo", json!({"text": format!("t{i}")}))
            }
        })
        .collect();
    let got = host
        .execute_tool_calls(calls, &TurnOptions::default())
        .await
        .expect("no scheduler failure");
    assert_eq!(got.len(), n);
    host.shutdown().await;
    dir.join("audit.jsonl")
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(path, text).unwrap();
}

fn broken(report: &Report) -> u64 {
    assert!(!report.intact, "tampering went unseen: {report:?}");
    report.first_broken.expect("a broken record is named")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_tampering_is_detected_and_located() {
    let dir = TempDir::new("audit-tamper");
    let file = sample(dir.path(), 500).await;
    let key = dir.path().join("audit.key");
    let clean = lines(&file);
    let opts = pinned(&key);
    let report = verify(std::slice::from_ref(&file), &opts).unwrap();
    assert!(report.intact, "{report:?}");

    // What the record says about a denied call: the guard, its plugin, why.
    let denied: Value = serde_json::from_str(
        clean
            .iter()
            .find(|l| l.contains("\"callId\":\"c3\""))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(denied["result"]["code"], "DENIED");
    assert_eq!(denied["result"]["decidedBy"], "guard");
    let last = denied["decisions"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["stage"], "guard");
    assert_eq!(last["verdict"], "deny");
    assert_eq!(last["plugin"], "guard");
    assert_eq!(
        last["pluginSha256"].as_str().map(str::len),
        Some(64),
        "{last}"
    );

    let seq_of = |i: usize| -> u64 {
        serde_json::from_str::<Value>(&clean[i]).unwrap()["seq"]
            .as_u64()
            .unwrap()
    };
    let tampered = dir.path().join("tampered.jsonl");
    let check = |lines: &[String]| {
        write_lines(&tampered, lines);
        verify(std::slice::from_ref(&tampered), &opts).unwrap()
    };

    // One byte changed (inside a record's arguments).
    let mut t = clean.clone();
    let i = 250;
    assert!(t[i].contains("\"t"), "{}", t[i]);
    t[i] = t[i].replacen("\"t", "\"T", 1);
    assert_eq!(broken(&check(&t)), seq_of(i), "a changed byte is located");

    // One byte changed in a checkpoint: its signature fails.
    let cp = clean
        .iter()
        .position(|l| l.contains("\"kind\":\"checkpoint\""))
        .unwrap();
    let mut t = clean.clone();
    t[cp] = t[cp].replacen("\"ts\":", "\"ts\":1", 1);
    assert_eq!(broken(&check(&t)), seq_of(cp));

    // A record deleted.
    let mut t = clean.clone();
    t.remove(300);
    let r = check(&t);
    assert_eq!(broken(&r), seq_of(300), "{r:?}");
    assert!(r.reason.unwrap().contains("missing"));

    // Two records swapped.
    let mut t = clean.clone();
    t.swap(120, 121);
    let r = check(&t);
    assert_eq!(broken(&r), seq_of(120), "{r:?}");
    assert!(r.reason.unwrap().contains("reordered"));

    // The tail cut right after a checkpoint: no shutdown checkpoint.
    let t = clean[..=cp].to_vec();
    let r = check(&t);
    assert_eq!(broken(&r), seq_of(cp) + 1, "{r:?}");
    assert_eq!(
        r.records,
        seq_of(cp),
        "the prefix up to the checkpoint verifies"
    );

    // Rewritten and re-signed with another key: the pinned key catches it.
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let forged = sample(&other, 10).await;
    let r = verify(std::slice::from_ref(&forged), &opts).unwrap();
    assert!(!r.intact && r.reason.unwrap().contains("pinned key"));
    assert!(verify(&[forged], &VerifyOptions::default()).unwrap().intact);

    // The command line: exit 1, and the JSON names the record.
    let mut t = clean.clone();
    t.swap(120, 121);
    write_lines(&tampered, &t);
    let (code, json) = cli_verify(dir.path(), std::slice::from_ref(&tampered), &[]);
    assert_eq!(code, 1, "{json}");
    assert_eq!(json["intact"], false);
    assert_eq!(json["firstBroken"], seq_of(120));
    assert!(json["reason"].as_str().unwrap().contains("reordered"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_continues_the_chain_across_files() {
    let dir = TempDir::new("audit-rotate");
    let plugins = PluginDir::new();
    plugins.add("tools", fixtures::TOOLS);
    let host = recording_host(dir.path(), &plugins, 50, "rotate_mb = 1\n").await;
    // Records of ~4 KiB arguments: 1 MiB is a few hundred of them (the
    // tool is read-only: a call has no intent, one record each).
    let big = "x".repeat(4096);
    for round in 0..12 {
        let calls = (0..100)
            .map(|i| ToolCall::new(format!("r{round}c{i}"), "echo", json!({"text": big})))
            .collect();
        host.execute_tool_calls(calls, &TurnOptions::default())
            .await
            .expect("no scheduler failure");
    }
    host.shutdown().await;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("audit.jsonl")
        })
        .collect();
    assert!(files.len() >= 3, "rotated twice: {files:?}");
    // Given in any order, verified in chain order.
    files.reverse();
    let report = verify(&files, &pinned(&dir.path().join("audit.key"))).unwrap();
    assert!(report.intact, "{report:?}");
    let calls: usize = files.iter().map(|f| calls_of(&records(f)).len()).sum();
    assert_eq!(calls, 1200);
    // A rotated file missing from the middle of the set is a break.
    let current = dir.path().join("audit.jsonl");
    let mut chain: Vec<PathBuf> = files.iter().filter(|f| **f != current).cloned().collect();
    chain.sort();
    chain.push(current.clone());
    let gone = chain.remove(1);
    let r = verify(&chain, &VerifyOptions::default()).unwrap();
    assert!(!r.intact, "{} left out: {r:?}", gone.display());
    assert_eq!(r.missing_files, vec![gone.clone()], "{r:?}");

    // The command line, given the live file alone: its rotated files
    // beside it are part of the record, and it verifies whole.
    let (code, json) = cli_verify(dir.path(), std::slice::from_ref(&current), &[]);
    assert_eq!(code, 0, "{json}");
    assert_eq!(
        json["files"].as_array().unwrap().len(),
        files.len(),
        "{json}"
    );

    // Issue 40: `bash` deleted a rotated file and verify still said
    // intact. The rotated files, oldest first; each is named after its
    // last record.
    let rotated: Vec<PathBuf> = chain_with_gone(&chain, &gone);
    assert!(rotated.len() >= 3, "three rotations at least: {rotated:?}");
    let last_seq = |p: &Path| -> u64 { p.extension().unwrap().to_str().unwrap().parse().unwrap() };
    // The first one deleted: the oldest left does not start the chain.
    std::fs::remove_file(&rotated[0]).unwrap();
    let (code, json) = cli_verify(dir.path(), std::slice::from_ref(&current), &[]);
    assert_eq!(code, 1, "{json}");
    assert_eq!(json["firstBroken"], 1, "{json}");
    assert_eq!(json["missingFiles"], json!([rotated[0]]), "{json}");
    let reason = json["reason"].as_str().unwrap();
    assert!(
        reason.contains(&rotated[0].display().to_string()) && reason.contains("--from"),
        "{reason}"
    );
    // Pruned on purpose: `--from` says where what is kept begins.
    let kept_from = (last_seq(&rotated[0]) + 1).to_string();
    let (code, json) = cli_verify(
        dir.path(),
        std::slice::from_ref(&current),
        &["--from", &kept_from],
    );
    assert_eq!(code, 0, "{json}");
    // A middle one deleted too: a gap between two files, named, `--from`
    // or not.
    std::fs::remove_file(&rotated[2]).unwrap();
    let (code, json) = cli_verify(
        dir.path(),
        std::slice::from_ref(&current),
        &["--from", &kept_from],
    );
    assert_eq!(code, 1, "{json}");
    assert_eq!(json["firstBroken"], last_seq(&rotated[1]) + 1, "{json}");
    assert_eq!(json["missingFiles"], json!([rotated[2]]), "{json}");
    let reason = json["reason"].as_str().unwrap();
    assert!(
        reason.contains(&rotated[2].display().to_string()),
        "{reason}"
    );
}

/// The rotated files of `chain` (the live file last) with `gone` back in
/// its place, oldest first.
fn chain_with_gone(chain: &[PathBuf], gone: &Path) -> Vec<PathBuf> {
    let mut rotated = chain[..chain.len() - 1].to_vec();
    rotated.push(gone.to_path_buf());
    rotated.sort();
    rotated
}

/// Records written by other threads while the host shuts down either come
/// before its shutdown checkpoint or are refused: none follows it, and
/// every one accepted is in the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_record_follows_the_shutdown_checkpoint() {
    let dir = TempDir::new("audit-close");
    let plugins = PluginDir::new();
    plugins.add("tools", fixtures::TOOLS);
    let host = recording_host(dir.path(), &plugins, 1000, "").await;
    let writers: Vec<_> = (0..2)
        .map(|t| {
            let host = host.clone();
            std::thread::spawn(move || {
                let audit = host.audit().expect("recording");
                let mut accepted = 0;
                while audit
                    .event("probe", json!({"thread": t, "n": accepted}))
                    .is_ok()
                {
                    accepted += 1;
                }
                accepted
            })
        })
        .collect();
    // Let both threads get going, then close the record under them.
    let file = dir.path().join("audit.jsonl");
    let started = toolgate_tests::eventually(std::time::Duration::from_secs(60), || {
        std::fs::read_to_string(&file).is_ok_and(|s| s.matches("probe").count() > 20)
    })
    .await;
    assert!(started, "the probes were not written");
    host.shutdown().await;
    let accepted: usize = writers.into_iter().map(|w| w.join().unwrap()).sum();
    let all = records(&file);
    assert_eq!(all.last().unwrap()["kind"], "shutdown");
    let probes = all.iter().filter(|r| r["kind"] == "probe").count();
    assert_eq!(probes, accepted, "every accepted record is in the file");
    let report = verify(
        std::slice::from_ref(&file),
        &pinned(&dir.path().join("audit.key")),
    )
    .unwrap();
    assert!(report.intact && report.clean_end, "{report:?}");
}

/// `toolgate run` with its record on a 48 KiB tmpfs (its own mount
/// namespace, `unshare -Urm`): the disk fills up mid-batch.
#[test]
fn a_full_disk_fails_calls_closed() {
    let probe = Command::new("unshare")
        .args(["-Urm", "true"])
        .status()
        .map_err(|e| e.to_string())
        .and_then(|s| {
            if s.success() {
                Ok(())
            } else {
                Err(format!("`unshare -Urm true` failed: {s}"))
            }
        });
    if !toolgate_tests::needs::present_or_skip(
        "mount_namespace",
        probe,
        "install util-linux and allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)",
    ) {
        return;
    }
    let dir = TempDir::new("audit-full");
    let plugins = PluginDir::new();
    plugins.add("tools", fixtures::TOOLS);
    let small = dir.path().join("small");
    std::fs::create_dir_all(&small).unwrap();
    let key = dir.path().join("audit.key");
    std::fs::write(
        dir.path().join("toolgate.toml"),
        format!(
            "[audit]\npath = \"{}\"\nsigning_key = \"{}\"\n",
            small.join("audit.jsonl").display(),
            key.display()
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("calls.json"), echo_batch(300)).unwrap();
    let out = toolgate(dir.path())
        .args(["audit", "keygen"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = format!(
        "mount -t tmpfs -o size=48k tmpfs {small} && {bin} --no-default-plugins --plugins {plugins} run --compact calls.json > out.json; \
         code=$?; cp {small}/audit.jsonl kept.jsonl; exit $code",
        small = small.display(),
        bin = toolgate_bin().display(),
        plugins = plugins.path().display()
    );
    let out = Command::new("unshare")
        .args(["-Urm", "sh", "-c", &script])
        .current_dir(dir.path())
        .env("TOOLGATE_STATE_DIR", dir.path().join("state"))
        .env("TOOLGATE_CACHE_DIR", dir.path().join("cache"))
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<Value> =
        serde_json::from_slice(&std::fs::read(dir.path().join("out.json")).unwrap()).unwrap();
    assert_eq!(results.len(), 300);
    let first_failed = results
        .iter()
        .position(|r| r["isError"] == true)
        .expect("48 KiB cannot hold 300 records: some call must fail");
    assert!(first_failed > 5, "the first records fit: {first_failed}");
    for r in &results[first_failed..] {
        assert_eq!(
            r["error"]["code"], "INTERNAL",
            "fails closed, and stays closed: {r}"
        );
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("audit record could not be written"),
            "{r}"
        );
    }
    // Every call answered with its result is in the record.
    let kept = dir.path().join("kept.jsonl");
    let report = verify(
        std::slice::from_ref(&kept),
        &VerifyOptions {
            key: Some(public_key(&key)),
            allow_open: true,
            ..VerifyOptions::default()
        },
    )
    .unwrap();
    assert!(report.intact, "{report:?}");
    let recorded = calls_of(&records_prefix(&kept)).len();
    assert!(recorded >= first_failed, "{recorded} < {first_failed}");

    // The next start, with room, cuts the partial line off and goes on.
    std::fs::write(
        dir.path().join("next.toml"),
        format!(
            "[audit]\npath = \"{}\"\nsigning_key = \"{}\"\n",
            kept.display(),
            key.display()
        ),
    )
    .unwrap();
    let out = toolgate(dir.path())
        .arg("--no-default-plugins")
        .arg("--plugins")
        .arg(plugins.path())
        .args(["--config", "next.toml", "run", "--compact", "calls.json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = verify(std::slice::from_ref(&kept), &pinned(&key)).unwrap();
    assert!(report.intact && report.clean_end, "{report:?}");
}

/// The complete records of a file (a partial last line left out).
fn records_prefix(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .map(|l| serde_json::from_str(l.trim_end()).unwrap())
        .collect()
}

/// A stdio server for the kill test.
struct Server {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Server {
    fn start(dir: &Path, plugins: &PluginDir) -> Server {
        let mut child = toolgate(dir)
            .arg("--no-default-plugins")
            .arg("--plugins")
            .arg(plugins.path())
            .args(["serve", "--no-watch", "--approve", "deny"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut s = Server {
            child,
            stdin,
            stdout,
        };
        s.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}).to_string());
        s.answer(0);
        s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        s
    }
    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }
    fn answer(&mut self, id: i64) -> Value {
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server closed"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }
    /// `n` echo calls from `from`, `window` in flight at a time.
    fn calls(&mut self, from: i64, n: i64, window: i64) {
        let mut next = from;
        while next < from + n {
            let end = (next + window).min(from + n);
            for id in next..end {
                self.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"echo","arguments":{"text":format!("t{id}")}}}).to_string());
            }
            let mut answered = std::collections::HashSet::new();
            while answered.len() < (end - next) as usize {
                let mut line = String::new();
                assert!(
                    self.stdout.read_line(&mut line).unwrap() > 0,
                    "server closed"
                );
                let v: Value = serde_json::from_str(&line).unwrap();
                if let Some(id) = v["id"].as_i64() {
                    assert_eq!(v["result"]["isError"], false, "{v}");
                    answered.insert(id);
                }
            }
            next = end;
        }
    }
    /// Close stdin and wait for a clean exit.
    fn stop(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }
}

#[test]
fn serve_records_10000_calls_and_a_killed_host_leaves_a_verifiable_prefix() {
    let dir = TempDir::new("audit-serve");
    let plugins = PluginDir::new();
    plugins.add("tools", fixtures::TOOLS);
    std::fs::write(
        dir.path().join("toolgate.toml"),
        audit_config(dir.path(), ""),
    )
    .unwrap();
    let file = dir.path().join("audit.jsonl");
    let key = dir.path().join("audit.key");

    let mut server = Server::start(dir.path(), &plugins);
    server.calls(1, 10_000, 64);
    server.stop();
    let all = records(&file);
    let calls = calls_of(&all);
    assert_eq!(calls.len(), 10_000, "every answered call is recorded, once");
    let mut ids: Vec<i64> = calls
        .iter()
        .map(|c| {
            c["arguments"]["text"].as_str().unwrap()[1..]
                .parse()
                .unwrap()
        })
        .collect();
    ids.sort();
    assert_eq!(ids, (1..=10_000).collect::<Vec<_>>());
    let report = verify(std::slice::from_ref(&file), &pinned(&key)).unwrap();
    assert!(report.intact && report.clean_end, "{report:?}");

    // kill -9 after 500 answered calls: they are all in the file (each
    // was written before its answer), and the prefix verifies.
    let mut server = Server::start(dir.path(), &plugins);
    server.calls(20_000, 500, 16);
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let open = VerifyOptions {
        key: Some(public_key(&key)),
        allow_open: true,
        ..VerifyOptions::default()
    };
    let report = verify(std::slice::from_ref(&file), &open).unwrap();
    assert!(report.intact && !report.clean_end, "{report:?}");
    let killed = calls_of(&records(&file)).len();
    assert_eq!(killed, 10_500);
    // Without --allow-open, the unclean end is reported.
    let report = verify(std::slice::from_ref(&file), &pinned(&key)).unwrap();
    assert!(!report.intact);
    assert_eq!(report.first_broken, Some(report.records + 1));

    // The next start continues the chain and says the last one was unclean.
    let mut server = Server::start(dir.path(), &plugins);
    server.calls(30_000, 10, 4);
    server.stop();
    let all = records(&file);
    let restart = all.iter().rev().find(|r| r["kind"] == "start").unwrap();
    assert_eq!(restart["previous"]["clean"], false, "{restart}");
    let report = verify(&[file], &pinned(&key)).unwrap();
    assert!(report.intact && report.clean_end, "{report:?}");
    assert_eq!(
        report.unclean_restarts,
        vec![restart["seq"].as_u64().unwrap()]
    );
}

#[test]
fn replay_against_a_stricter_policy_set_reports_exactly_the_calls_that_change() {
    let dir = TempDir::new("audit-replay");
    let plugins = PluginDir::new();
    plugins
        .add("tools", fixtures::TOOLS)
        .add("guard", fixtures::GUARD);
    let guard = |behavior: &str| {
        format!("[plugins.guard]\nvars = {{ BEHAVIOR = \"{behavior}\", NAME = \"guard\" }}\n")
    };
    std::fs::write(
        dir.path().join("toolgate.toml"),
        audit_config(dir.path(), &guard("deny-tool:crash")),
    )
    .unwrap();
    std::fs::write(dir.path().join("same.toml"), guard("deny-tool:crash")).unwrap();
    std::fs::write(dir.path().join("strict.toml"), guard("deny-tool:fail")).unwrap();
    let calls: Vec<Value> = (0..30)
        .map(|i| match i % 3 {
            0 => json!({"id": format!("c{i}"), "name": "fail", "arguments": {"code": "X", "message": "m"}}),
            _ => json!({"id": format!("c{i}"), "name": "echo", "arguments": {"text": "x"}}),
        })
        .collect();
    std::fs::write(
        dir.path().join("calls.json"),
        serde_json::to_string(&calls).unwrap(),
    )
    .unwrap();
    let with = |args: &[&str]| {
        let mut cmd = toolgate(dir.path());
        cmd.arg("--no-default-plugins")
            .arg("--plugins")
            .arg(plugins.path())
            .args(args);
        cmd.output().unwrap()
    };
    let out = with(&["run", "--compact", "calls.json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = dir.path().join("audit.jsonl");
    let fail_seqs: Vec<u64> = calls_of(&records(&file))
        .iter()
        .filter(|c| c["tool"] == "fail")
        .map(|c| c["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(fail_seqs.len(), 10);

    let file_arg = file.display().to_string();
    let out = with(&["--config", "strict.toml", "replay", "--json", &file_arg]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["calls"], 30);
    assert_eq!(report["changed"], 10, "{report}");
    let changed: Vec<u64> = report["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["tool"], "fail");
            assert_eq!(c["before"], "allowed");
            assert_eq!(c["after"], "denied");
            c["seq"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(changed, fail_seqs);

    let out = with(&["--config", "same.toml", "replay", "--json", &file_arg]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["changed"], 0, "{report}");
    assert_eq!(report["redecided"], 0, "{report}");
    // Replaying ran no tool and recorded nothing.
    assert_eq!(calls_of(&records(&file)).len(), 30);
    // An unreadable record is an error, not a verdict.
    let out = with(&["replay", "missing.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
}

/// SHA-256 (hex) of `bytes`, as the record writes digests.
/// Issue 44: replay called every recorded approval a redecision
/// ("approval:deny → approval:as-recorded") and a bridged call whose
/// server is absent a change (allowed → denied); the first is the same
/// decision by the same approver, the second cannot be compared.
#[test]
fn replay_keeps_recorded_approvals_and_sets_absent_bridged_tools_apart() {
    let dir = TempDir::new("audit-replay-apart");
    let plugins = PluginDir::new();
    plugins
        .add("tools", fixtures::TOOLS)
        .add("ask", fixtures::PRE_HOOK);
    std::fs::write(
        dir.path().join("toolgate.toml"),
        audit_config(
            dir.path(),
            "[plugins.ask]\nvars = { BEHAVIOR = \"ask\", NAME = \"ask\" }\n",
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("calls.json"), echo_batch(3)).unwrap();
    let with = |args: &[&str]| {
        toolgate(dir.path())
            .arg("--no-default-plugins")
            .arg("--plugins")
            .arg(plugins.path())
            .args(args)
            .output()
            .unwrap()
    };
    let out = with(&["--approve", "deny", "run", "--compact", "calls.json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = dir.path().join("audit.jsonl");
    let calls: Vec<Value> = calls_of(&records(&file)).into_iter().cloned().collect();
    assert_eq!(calls.len(), 3);
    assert!(
        calls.iter().all(|c| c["result"]["stage"] == "approval"),
        "{calls:?}"
    );
    // A call to a bridged tool whose server this policy set does not have.
    let mut bridged = calls[0].clone();
    bridged["seq"] = json!(9999);
    bridged["tool"] = json!("mcp__gone__echo");
    bridged["provider"] = json!("gone");
    bridged["decisions"] = json!([]);
    bridged["result"] = json!({"isError": false, "content": []});
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(&format!("{bridged}\n"));
    let copy = dir.path().join("with-bridged.jsonl");
    std::fs::write(&copy, text).unwrap();
    let out = with(&["replay", "--json", &copy.display().to_string()]);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(report["changed"], 0, "{report}");
    assert_eq!(report["redecided"], 0, "{report}");
    assert_eq!(report["notComparable"], json!([9999]), "{report}");
}

fn sha256_hex(bytes: &[u8]) -> String {
    toolgate::audit::chain::hex(&toolgate::audit::chain::sha256(bytes))
}

/// Waits (up to 20 s) until the record at `path` holds a record for which
/// `found` is true; returns all records then.
async fn wait_for_record(path: &Path, found: impl Fn(&Value) -> bool) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let all = records_prefix(path);
        if all.iter().any(&found) {
            return all;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no such record in {}",
            path.display()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// `[audit] sensitive`: the value at a sensitive pointer is kept as its
/// digest (never the value), the call says so and is not replayable, and
/// replay lists it as not comparable while it replays the others.
#[test]
fn sensitive_arguments_are_recorded_as_digests_and_replay_does_not_compare_them() {
    let dir = TempDir::new("audit-sensitive");
    let plugins = PluginDir::new();
    plugins
        .add("tools", fixtures::TOOLS)
        .add("guard", fixtures::GUARD);
    let config = audit_config(
        dir.path(),
        "sensitive = { echo = [\"/text\", \"/absent\"], \"*\" = [\"/message\"] }\n\
         [plugins.guard]\nvars = { BEHAVIOR = \"deny-tool:crash\", NAME = \"guard\" }\n",
    );
    std::fs::write(dir.path().join("toolgate.toml"), &config).unwrap();
    let calls = json!([
        {"id": "s", "name": "echo", "arguments": {"text": "hunter2"}},
        {"id": "f", "name": "fail", "arguments": {"code": "X", "message": "s3cr3t-token"}},
        {"id": "p", "name": "value", "arguments": {"mode": "valid"}},
    ]);
    std::fs::write(dir.path().join("calls.json"), calls.to_string()).unwrap();
    let with = |args: &[&str]| {
        toolgate(dir.path())
            .arg("--no-default-plugins")
            .arg("--plugins")
            .arg(plugins.path())
            .args(args)
            .output()
            .unwrap()
    };
    let out = with(&["run", "--compact", "calls.json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = dir.path().join("audit.jsonl");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("hunter2"), "a sensitive value was recorded");
    assert!(
        !text.contains("s3cr3t-token"),
        "a sensitive value was recorded"
    );
    let all = records(&file);
    let calls = calls_of(&all);
    let (s, f, p) = (calls[0], calls[1], calls[2]);
    assert_eq!(
        s["arguments"]["text"],
        json!({"$sha256": sha256_hex(b"\"hunter2\"")}),
        "{s}"
    );
    assert_eq!(s["sensitive"], json!(["/text"]), "only pointers present");
    assert_eq!(s["replayable"], false);
    // The digest of the arguments as given, so a known value can be checked.
    assert_eq!(s["argumentsSha256"], sha256_hex(br#"{"text":"hunter2"}"#));
    // `"*"` applies to every tool; a call without the value is untouched.
    assert_eq!(f["sensitive"], json!(["/message"]), "{f}");
    assert_eq!(f["arguments"]["code"], "X");
    assert_eq!(p["arguments"], json!({"mode": "valid"}));
    assert!(p.get("sensitive").is_none(), "{p}");
    assert_eq!(p["replayable"], true);
    let report = verify(
        std::slice::from_ref(&file),
        &pinned(&dir.path().join("audit.key")),
    )
    .unwrap();
    assert!(report.intact, "{report:?}");

    // Replay under the same policy: the sensitive calls are not compared
    // (not re-run with a digest for a value), the other one is.
    let file_arg = file.display().to_string();
    let out = with(&["replay", "--json", &file_arg]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replay: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        replay["notComparable"],
        json!([s["seq"], f["seq"]]),
        "{replay}"
    );
    assert_eq!(replay["notReplayable"], json!([]), "{replay}");
    assert_eq!(replay["changed"], 0, "{replay}");
}

/// Arguments over the record's cap are kept as their digest alone, and the
/// record says why; the call itself runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_over_the_record_cap_are_kept_as_a_digest() {
    let dir = TempDir::new("audit-large");
    let plugins = PluginDir::new();
    plugins.add("tools", fixtures::TOOLS);
    let host = recording_host(dir.path(), &plugins, 100, "").await;
    let big = "x".repeat(toolgate::budgets::AUDIT_MAX_ARGUMENT_BYTES + 1);
    let r = host
        .call(
            ToolCall::new("big", "echo", json!({"text": big})),
            &TurnOptions::default(),
        )
        .await;
    assert!(!r.is_error, "{r:?}");
    let r = host
        .call(
            ToolCall::new("small", "echo", json!({"text": "y"})),
            &TurnOptions::default(),
        )
        .await;
    assert!(!r.is_error, "{r:?}");
    host.shutdown().await;
    let file = dir.path().join("audit.jsonl");
    assert!(
        std::fs::metadata(&file).unwrap().len() < 64 << 10,
        "the big argument was written"
    );
    let all = records(&file);
    let calls = calls_of(&all);
    assert_eq!(calls[0]["arguments"], Value::Null);
    assert_eq!(calls[0]["argumentsOmitted"], "size");
    assert_eq!(calls[0]["replayable"], false);
    assert_eq!(
        calls[0]["argumentsSha256"],
        sha256_hex(json!({"text": big}).to_string().as_bytes())
    );
    assert_eq!(calls[1]["arguments"]["text"], "y");
    assert!(calls[1].get("argumentsOmitted").is_none());
}

/// Input `toolgate run` refuses before the pipeline is recorded: each
/// malformed call of a batch (with what could be read of it), and a whole
/// input that is not a batch.
#[test]
fn run_records_the_calls_it_refuses_before_the_pipeline() {
    let dir = TempDir::new("audit-rejected");
    let plugins = PluginDir::new();
    plugins.add("tools", fixtures::TOOLS);
    std::fs::write(
        dir.path().join("toolgate.toml"),
        audit_config(dir.path(), ""),
    )
    .unwrap();
    let bad = json!({"id": "b", "name": "echo", "arguments": "{not json"});
    let batch = json!([
        {"id": "a", "name": "echo", "arguments": {"text": "x"}},
        bad,
        {"id": "c"},
        {"id": "d", "name": "no-such-tool", "arguments": {}},
    ]);
    std::fs::write(dir.path().join("calls.json"), batch.to_string()).unwrap();
    let run = |file: &str| {
        toolgate(dir.path())
            .arg("--no-default-plugins")
            .arg("--plugins")
            .arg(plugins.path())
            .args(["run", "--compact", file])
            .output()
            .unwrap()
    };
    let out = run("calls.json");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = dir.path().join("audit.jsonl");
    let all = records(&file);
    let rejected: Vec<&Value> = all.iter().filter(|r| r["kind"] == "rejected").collect();
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    assert_eq!(rejected[0]["callId"], "b");
    assert_eq!(rejected[0]["tool"], "echo");
    assert_eq!(rejected[0]["input"], "calls.json");
    assert_eq!(
        rejected[0]["sha256"],
        sha256_hex(bad.to_string().as_bytes())
    );
    assert!(
        rejected[0]["reason"]
            .as_str()
            .unwrap()
            .contains("not acceptable JSON"),
        "{}",
        rejected[0]
    );
    assert_eq!(rejected[1]["callId"], "c");
    // Before the calls that ran; the unknown tool went through the
    // pipeline and has its call record.
    let calls = calls_of(&all);
    assert!(rejected[1]["seq"].as_u64() < calls[0]["seq"].as_u64());
    let ids: Vec<&str> = calls
        .iter()
        .map(|c| c["callId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "d"]);

    // A whole input that is not a batch: refused, and recorded.
    let input = r#"{"id": "x", "name": "echo"}"#;
    std::fs::write(dir.path().join("one.json"), input).unwrap();
    let out = run("one.json");
    assert!(!out.status.success());
    let all = records(&file);
    let last = all.iter().rev().find(|r| r["kind"] == "rejected").unwrap();
    assert_eq!(last["callId"], Value::Null);
    assert_eq!(last["input"], "one.json");
    assert_eq!(last["sha256"], sha256_hex(input.as_bytes()));
    assert_eq!(last["bytes"], input.len());
    assert_eq!(all.last().unwrap()["kind"], "shutdown");
    let report = verify(
        std::slice::from_ref(&file),
        &pinned(&dir.path().join("audit.key")),
    )
    .unwrap();
    assert!(report.intact, "{report:?}");
}

/// A reload that changes the configuration in force is recorded, old →
/// new digest (the first in the `plugins` record); one that changes only a
/// comment, or nothing, is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_change_is_recorded_old_to_new() {
    let dir = TempDir::new("audit-config");
    let plugins = PluginDir::new();
    plugins.add("tools", fixtures::TOOLS);
    let config = dir.path().join("toolgate.toml");
    let base = audit_config(dir.path(), "");
    std::fs::write(&config, &base).unwrap();
    let host = Toolgate::builder()
        .runtime_options(test_runtime())
        .builtin_plugins(false)
        .plugin_dir(plugins.path())
        .config_file(&config, true)
        .build()
        .await
        .expect("host builds");
    let file = dir.path().join("audit.jsonl");
    host.reload().await.unwrap();
    std::fs::write(&config, format!("# only a comment\n{base}")).unwrap();
    host.reload().await.unwrap();
    std::fs::write(&config, format!("policy_timeout_ms = 1500\n{base}")).unwrap();
    host.reload().await.unwrap();
    let all = wait_for_record(&file, |r| r["kind"] == "config").await;
    host.shutdown().await;
    let first = all.iter().find(|r| r["kind"] == "plugins").unwrap();
    let changes: Vec<&Value> = all.iter().filter(|r| r["kind"] == "config").collect();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0]["old"], first["config"]);
    assert_ne!(changes[0]["new"], changes[0]["old"]);
    assert_eq!(changes[0]["new"].as_str().unwrap().len(), 64);
    let report = verify(
        std::slice::from_ref(&file),
        &pinned(&dir.path().join("audit.key")),
    )
    .unwrap();
    assert!(report.intact, "{report:?}");
}

/// `serve` records who made each call: over stdio the client's name and
/// version; over HTTP also its session id — two sessions, two ids; a
/// stateless (2026-07-28) call, the `clientInfo` of its `_meta` (issue 44).
#[test]
fn serve_records_the_client_and_session_of_each_call() {
    let dir = TempDir::new("audit-client");
    let plugins = PluginDir::new();
    plugins.add("tools", fixtures::TOOLS);
    std::fs::write(
        dir.path().join("toolgate.toml"),
        audit_config(dir.path(), ""),
    )
    .unwrap();
    let file = dir.path().join("audit.jsonl");
    let mut server = Server::start(dir.path(), &plugins);
    server.calls(1, 3, 1);
    server.stop();
    let all = records(&file);
    for c in calls_of(&all) {
        assert_eq!(
            c["client"],
            json!({"transport": "stdio", "session": null, "name": "t", "version": "0"}),
            "{c}"
        );
    }

    // Over HTTP.
    let mut child = toolgate(dir.path())
        .arg("--no-default-plugins")
        .arg("--plugins")
        .arg(plugins.path())
        .args([
            "serve",
            "--no-watch",
            "--approve",
            "deny",
            "--http",
            "127.0.0.1:0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let url = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "no address");
        if let Some(url) = line.trim().strip_prefix("toolgate: serving MCP at ") {
            break url.to_string();
        }
    };
    line.clear();
    stderr.read_line(&mut line).unwrap();
    let token = line
        .trim()
        .split_once("the token is in ")
        .map(|(_, path)| path.trim_end_matches(" (made now)"))
        .map(|path| std::fs::read_to_string(path).unwrap().trim().to_string())
        .expect("a token file");
    std::thread::spawn(move || {
        let mut sink = String::new();
        while stderr.read_line(&mut sink).unwrap_or(0) > 0 {
            sink.clear();
        }
    });
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let post_with = |session: &str, body: &str| -> (String, String) {
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             {session}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut reply = String::new();
        let _ = std::io::Read::read_to_string(&mut stream, &mut reply);
        let (head, rest) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
        (head.to_string(), rest.to_string())
    };
    let post = |session: Option<&str>, body: &str| {
        let session = session
            .map(|s| format!("Mcp-Session-Id: {s}\r\nMcp-Protocol-Version: 2025-06-18\r\n"))
            .unwrap_or_default();
        post_with(&session, body)
    };
    let mut sessions = Vec::new();
    for (i, name) in ["h1", "h2"].iter().enumerate() {
        let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":name,"version":"9"}}});
        let (head, _) = post(None, &init.to_string());
        let session = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| panic!("no session: {head}"));
        post(
            Some(&session),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":format!("http{i}")}}});
        let (head, body) = post(Some(&session), &call.to_string());
        assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
        assert!(body.contains(&format!("http{i}")), "{body}");
        sessions.push(session);
    }
    // A stateless (2026-07-28) call names its client in its `_meta`: that
    // is the client recorded, not the SDK's stand-in peer (`rmcp x.y`).
    let call = json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{
        "name":"echo","arguments":{"text":"http2"},
        "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
                 "io.modelcontextprotocol/clientCapabilities":{},
                 "io.modelcontextprotocol/clientInfo":{"name":"h3","version":"7"}}}});
    let (head, body) = post_with(
        "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n",
        &call.to_string(),
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    assert!(body.contains("http2"), "{body}");
    let _ = child.kill();
    let _ = child.wait();
    let all = records_prefix(&file);
    let http: Vec<&Value> = all
        .iter()
        .filter(|r| r["kind"] == "call" && r["client"]["transport"] == "http")
        .collect();
    assert_eq!(http.len(), 3, "{http:?}");
    for (i, c) in http.iter().take(2).enumerate() {
        assert_eq!(c["arguments"]["text"], format!("http{i}"));
        assert_eq!(
            c["client"],
            json!({"transport": "http", "session": sessions[i], "name": format!("h{}", i + 1), "version": "9"}),
        );
    }
    assert_eq!(
        http[2]["client"],
        json!({"transport": "http", "session": null, "name": "h3", "version": "7"}),
        "{}",
        http[2]
    );
    assert_ne!(sessions[0], sessions[1]);
}

/// Issue 40, case 9: a host killed (SIGKILL) while a tool body runs
/// leaves the call's intent — written before the body started — with no
/// final record, and verify reports a call started and never finished,
/// not tampering. The call before it (the twin) has its intent and its
/// final record, which names the intent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_mid_call_leaves_its_intent_and_verify_reports_it_unfinished() {
    let dir = TempDir::new("audit-intent");
    let work = in_work(dir.path());
    std::fs::write(work.join("toolgate.toml"), audit_config(dir.path(), "")).unwrap();
    let marker = work.join("body-started");
    std::fs::write(
        work.join("calls.json"),
        json!([
            {"id": "done", "name": "bash", "arguments": {"command": "echo finished"}},
            {"id": "killed", "name": "bash", "arguments": {"command": "touch body-started && sleep 20"}},
        ])
        .to_string(),
    )
    .unwrap();
    let mut host = toolgate_in(dir.path(), &work)
        .args(["--approve", "allow", "run", "calls.json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started =
        toolgate_tests::eventually(std::time::Duration::from_secs(120), || marker.exists()).await;
    assert!(started, "the second call's body did not start");
    host.kill().unwrap(); // SIGKILL
    host.wait().unwrap();

    let file = dir.path().join("audit.jsonl");
    let all = records_prefix(&file);
    let of = |kind: &str, id: &str| -> Vec<&Value> {
        all.iter()
            .filter(|r| r["kind"] == kind && r["callId"] == id)
            .collect()
    };
    // The twin: intent, then the final record naming it.
    let (intent, done) = (of("started", "done"), of("call", "done"));
    assert_eq!((intent.len(), done.len()), (1, 1), "{all:?}");
    assert_eq!(done[0]["intent"], intent[0]["seq"], "{}", done[0]);
    assert!(intent[0]["seq"].as_u64() < done[0]["seq"].as_u64());
    assert_eq!(intent[0]["tool"], "bash");
    assert_eq!(intent[0]["arguments"]["command"], "echo finished");
    assert_eq!(intent[0]["argumentsSha256"], done[0]["argumentsSha256"]);
    // The killed call: its intent only.
    let killed = of("started", "killed");
    assert_eq!(killed.len(), 1, "no intent of the killed call: {all:?}");
    assert!(of("call", "killed").is_empty());
    let killed_seq = killed[0]["seq"].as_u64().unwrap();

    // Verified with --allow-open (the host died): intact, one call
    // unfinished.
    let key = dir.path().join("audit.key");
    let open = VerifyOptions {
        key: Some(public_key(&key)),
        allow_open: true,
        ..VerifyOptions::default()
    };
    let report = verify(std::slice::from_ref(&file), &open).unwrap();
    assert!(report.intact, "{report:?}");
    assert_eq!(report.unfinished.len(), 1, "{report:?}");
    assert_eq!(report.unfinished[0].seq, killed_seq);
    assert_eq!(report.unfinished[0].call_id, "killed");
    assert_eq!(report.unfinished[0].tool, "bash");

    // The next start (a run with nothing to do) ends the record cleanly:
    // the command line says intact — and names the unfinished call.
    std::fs::write(work.join("none.json"), "[]").unwrap();
    let out = toolgate_in(dir.path(), &work)
        .args(["run", "none.json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, json) = cli_verify(dir.path(), std::slice::from_ref(&file), &[]);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["intact"], true);
    assert_eq!(json["unfinished"][0]["seq"], killed_seq, "{json}");
    assert_eq!(json["unfinished"][0]["callId"], "killed", "{json}");
    assert_eq!(json["unfinished"].as_array().unwrap().len(), 1, "{json}");
    let out = toolgate(dir.path())
        .args(["audit", "verify"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("intact") && text.contains("started and never finished"),
        "{text}"
    );
    assert!(
        text.contains(&format!("record {killed_seq}: bash (call killed)")),
        "{text}"
    );

    // A final record that names another call's intent is a break.
    let mut t = lines(&file);
    let done_line = t
        .iter()
        .position(|l| l.contains("\"kind\":\"call\"") && l.contains("\"callId\":\"done\""))
        .unwrap();
    let at = intent[0]["seq"].as_u64().unwrap();
    t[done_line] = t[done_line].replace(
        &format!("\"intent\":{at}"),
        &format!("\"intent\":{killed_seq}"),
    );
    let tampered = dir.path().join("tampered.jsonl");
    write_lines(&tampered, &t);
    let r = verify(std::slice::from_ref(&tampered), &open).unwrap();
    assert!(!r.intact, "{r:?}");
    assert_eq!(r.first_broken, done[0]["seq"].as_u64(), "{r:?}");
    assert!(
        r.reason
            .as_deref()
            .unwrap()
            .contains(&format!("names intent {killed_seq}, which follows it")),
        "{r:?}"
    );
}

/// Issue 40, case 8: with `[audit] sensitive = { bash = ["/command"] }`,
/// the built-in `ask-destructive` quotes the command in its reason; the
/// record keeps the reason with the command replaced by the marker its
/// arguments hold. Twin: a reason quoting nothing sensitive (a `write`
/// call's) is kept verbatim.
#[test]
fn a_sensitive_value_quoted_in_a_reason_is_redacted_and_other_reasons_are_kept() {
    let dir = TempDir::new("audit-reason");
    let work = in_work(dir.path());
    std::fs::write(
        work.join("toolgate.toml"),
        audit_config(dir.path(), "sensitive = { bash = [\"/command\"] }\n"),
    )
    .unwrap();
    let command = "rm -rf \"./precious-data\"";
    std::fs::write(
        work.join("calls.json"),
        json!([
            {"id": "b", "name": "bash", "arguments": {"command": command}},
            {"id": "w", "name": "write", "arguments": {"path": "notes.txt", "content": "quarterly plan"}},
        ])
        .to_string(),
    )
    .unwrap();
    let out = toolgate_in(dir.path(), &work)
        .args(["--approve", "deny", "run", "calls.json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = dir.path().join("audit.jsonl");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        !text.contains("precious-data"),
        "the command leaked: {text}"
    );
    let all = records(&file);
    let calls = calls_of(&all);
    let reason_of = |c: &Value| -> String {
        c["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["stage"] == "pre_execute")
            .and_then(|d| d["reason"].as_str())
            .unwrap_or_else(|| panic!("no pre-execute reason: {c}"))
            .to_string()
    };
    let bash = calls.iter().find(|c| c["callId"] == "b").unwrap();
    let marker = json!({"$sha256": sha256_hex(json!(command).to_string().as_bytes())});
    assert_eq!(bash["arguments"]["command"], marker, "{bash}");
    let reason = reason_of(bash);
    assert_eq!(
        reason,
        format!("`bash` can change or delete data. Run it with {{\"command\":\"{marker}\"}}?"),
    );
    // The twin: nothing sensitive, verbatim.
    let write = calls.iter().find(|c| c["callId"] == "w").unwrap();
    let reason = reason_of(write);
    assert!(
        reason.starts_with("`write` can change or delete data. Run it with {")
            && reason.contains(r#""content":"quarterly plan""#)
            && reason.contains(r#""path":"notes.txt""#),
        "{reason}"
    );
    let report = verify(
        std::slice::from_ref(&file),
        &pinned(&dir.path().join("audit.key")),
    )
    .unwrap();
    assert!(report.intact, "{report:?}");
}

/// Which calls get an intent: one whose plugin's grant lets it change
/// something outside the host (here the `kv` store) is declared `started`
/// before its body runs, and its final record names that intent; one whose
/// plugin can change nothing (no grant at all) is recorded once — a host
/// killed mid-call leaves nothing of it undone to declare. What decides is
/// the operator's grant, not what the tool says of itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_can_change_nothing_has_no_intent() {
    for (granted, grants) in [(false, ""), (true, "[plugins.tools.grants]\nkv = true\n")] {
        let dir = TempDir::new("audit-effects");
        let plugins = PluginDir::new();
        plugins.add("tools", fixtures::TOOLS);
        let host = recording_host(dir.path(), &plugins, 1000, grants).await;
        let r = host
            .call(
                call("c1", "echo", json!({"text": "hi"})),
                &TurnOptions::default(),
            )
            .await;
        assert!(!r.is_error, "{r:?}");
        host.shutdown().await;
        let all = records(&dir.path().join("audit.jsonl"));
        let started: Vec<&Value> = all.iter().filter(|r| r["kind"] == "started").collect();
        let calls = calls_of(&all);
        assert_eq!(calls.len(), 1, "{all:?}");
        if granted {
            assert_eq!(started.len(), 1, "an effect is possible: {all:?}");
            assert_eq!(calls[0]["intent"], started[0]["seq"], "{all:?}");
        } else {
            assert!(started.is_empty(), "nothing can happen: {all:?}");
            assert!(calls[0]["intent"].is_null(), "{all:?}");
        }
    }
}
