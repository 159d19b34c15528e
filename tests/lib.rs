//! Helpers for the integration tests: fixture components (built from
//! `tests/fixtures/` by `build.rs`), temporary plugin directories, hosts.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use toolgate::plugin::RuntimeOptions;
use toolgate::{CallRecord, HostConfig, ToolCall, Toolgate, ToolgateBuilder, TurnOptions};

/// Tests that need something from outside cargo: ignored with the reason
/// where the build found it missing, failed under CI (see the module).
pub use toolgate_guest_build::needs;

/// Paths of the fixture components.
pub mod fixtures {
    include!(concat!(env!("OUT_DIR"), "/fixtures.rs"));
}

/// A directory removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "toolgate-{prefix}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl TempDir {
    /// A directory *beside* this one (`DIR.beside`), made now and removed
    /// with it: for files a test's host writes that must lie outside the
    /// grants of the directory itself (the audit record, a store: the host
    /// refuses a grant that reaches them).
    pub fn beside(&self) -> PathBuf {
        let dir = self.0.with_extension("beside");
        std::fs::create_dir_all(&dir).expect("create a directory beside a temporary one");
        dir
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        let _ = std::fs::remove_dir_all(self.0.with_extension("beside"));
    }
}

/// A plugin directory assembled for one test.
pub struct PluginDir {
    dir: TempDir,
}

impl Default for PluginDir {
    fn default() -> Self {
        Self::new()
    }
}

impl PluginDir {
    pub fn new() -> Self {
        PluginDir {
            dir: TempDir::new("plugins"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Copy a fixture component in as `NAME.wasm`.
    pub fn add(&self, name: &str, fixture: &str) -> &Self {
        std::fs::copy(fixture, self.path().join(format!("{name}.wasm"))).expect("copy a fixture");
        self
    }

    /// Write arbitrary bytes as `NAME.wasm`.
    pub fn add_bytes(&self, name: &str, bytes: &[u8]) -> &Self {
        std::fs::write(self.path().join(format!("{name}.wasm")), bytes)
            .expect("write a plugin file");
        self
    }

    /// Write `NAME.toml` (the plugin's manifest).
    pub fn manifest(&self, name: &str, toml: &str) -> &Self {
        std::fs::write(self.path().join(format!("{name}.toml")), toml).expect("write a manifest");
        self
    }
}

/// A compile cache shared by the tests of one build: every fixture is
/// compiled once, not once per test.
pub fn test_runtime() -> RuntimeOptions {
    RuntimeOptions {
        cache_dir: Some(PathBuf::from(env!("OUT_DIR")).join("compile-cache")),
        // The cache's key and the journal beside the cache, never in the
        // real home's state directory.
        state_dir: Some(PathBuf::from(env!("OUT_DIR")).join("compile-cache-state")),
        ..RuntimeOptions::default()
    }
}

/// A builder without built-ins, loading `dir`, configured by `config` TOML.
pub fn builder(dir: &PluginDir, config: &str) -> ToolgateBuilder {
    Toolgate::builder()
        .runtime_options(test_runtime())
        .builtin_plugins(false)
        .plugin_dir(dir.path())
        .config(HostConfig::parse(config, "test config").expect("test config is valid"))
        // State in memory: the shared state directory would carry one
        // run's counters into the next.
        .state_store(std::sync::Arc::new(
            toolgate::store::sqlite::SqliteKv::memory(),
        ))
}

/// Build a host on `dir` with `config`.
pub async fn host(dir: &PluginDir, config: &str) -> Toolgate {
    builder(dir, config).build().await.expect("host builds")
}

/// A call.
pub fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall::new(id, name, arguments)
}

/// Run one call in a fresh turn.
pub async fn run(host: &Toolgate, name: &str, arguments: Value) -> CallRecord {
    host.call(call("c1", name, arguments), &TurnOptions::default())
        .await
}

/// The record as the JSON a client would see.
pub fn json(record: &CallRecord) -> Value {
    serde_json::to_value(record).expect("records serialize")
}

/// The `toolgate` binary of this build (`target/<profile>/toolgate`, beside
/// the test binary's `deps/`). `cargo test` at the top builds it;
/// `cargo test -p toolgate-tests` alone does not rebuild it, so a missing one
/// fails with the command that builds it.
pub fn toolgate_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .join("toolgate");
    assert!(
        bin.is_file(),
        "{} is missing: build it first (`cargo build -p toolgate-cli`; `cargo test` at the top builds it)",
        bin.display()
    );
    bin
}

/// Gives the state directory `state` (the host's own: `$TOOLGATE_STATE_DIR`,
/// or `$XDG_STATE_HOME/toolgate`) the compile-cache key that every server of
/// the shared compile cache `cache` uses.
///
/// A cache entry verifies only under the key that wrote it, and the key lives
/// in the state directory. Servers that each have their own state directory
/// (their own token, audit record and store) but share a cache would each
/// find the others' entries unverifiable and compile again — at start, the
/// compile a warm cache exists to save. The key is made once (32 random
/// bytes, `0600`) beside the cache, as `CACHE.key`, and copied into `state`
/// (created `0700`).
pub fn share_cache_key(cache: &Path, state: &Path) {
    use std::io::Read;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let shared = cache.with_extension("key");
    if !shared.exists() {
        let mut key = [0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .expect("read /dev/urandom");
        // A file of its own for each writer (tests of one process race
        // here too), complete before it is linked.
        static N: AtomicU64 = AtomicU64::new(0);
        let tmp = shared.with_extension(format!(
            "key.{}.{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(shared.parent().unwrap()).unwrap();
        write_private(&tmp, &key);
        // The first writer wins; a loser reads the winner's key.
        let _ = std::fs::hard_link(&tmp, &shared);
        let _ = std::fs::remove_file(&tmp);
    }
    let key = std::fs::read(&shared).expect("read the shared compile-cache key");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(state)
        .expect("create the state directory");
    write_private(&state.join("cache.key"), &key);

    fn write_private(path: &Path, bytes: &[u8]) {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .and_then(|mut f| f.write_all(bytes))
            .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
}

pub mod gate;
pub mod native;
pub mod stack;

/// Whether what `script` (a `tests/mcp/setup-*.sh`) installs into `dir` is
/// there, by the script's own `--check`; else what is missing and the
/// command that installs it. The build ran the script (or found it could
/// not, and ignored the tests that need it).
pub fn installed(script: &Path, dir: &Path) -> Result<(), String> {
    let out = std::process::Command::new("bash")
        .arg(script)
        .arg("--check")
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{}; run `bash {} {}`",
        String::from_utf8_lossy(&out.stderr).trim(),
        script.display(),
        dir.display()
    ))
}

/// Polls `f` (every 10 ms) until it holds or `limit` passes; whether it
/// held.
pub async fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// [`eventually`], failing the test with `what` if `f` never held.
pub async fn wait_for(limit: Duration, what: &str, f: impl FnMut() -> bool) {
    assert!(eventually(limit, f).await, "timed out waiting for: {what}");
}

/// A live process found by [`processes_with`].
#[derive(Clone, Debug)]
pub struct Process {
    pub pid: i32,
    /// Its arguments, joined by spaces.
    pub cmdline: String,
}

/// The live processes (not zombies, not this test process) whose command
/// line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<Process> {
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter_map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if !cmdline.contains(marker) {
                return None;
            }
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let state = stat[stat.rfind(')')? + 1..].split_whitespace().next()?;
            (state != "Z" && state != "X").then_some(Process { pid, cmdline })
        })
        .collect()
}

/// A working directory for one test (canonical), removed on drop.
pub struct Tree {
    _dir: TempDir,
    /// The directory (canonical).
    pub path: PathBuf,
}

impl Tree {
    pub fn new(tag: &str) -> Tree {
        let dir = TempDir::new(tag);
        let path = dir.path().canonicalize().unwrap();
        Tree { _dir: dir, path }
    }
    pub fn join(&self, p: &str) -> PathBuf {
        self.path.join(p)
    }
    /// Writes `text` at `p`, making its directories.
    pub fn write(&self, p: &str, text: &str) {
        let path = self.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    pub fn read(&self, p: &str) -> String {
        std::fs::read_to_string(self.join(p)).unwrap()
    }
    /// `name` in the directory beside the tree (see [`TempDir::beside`]):
    /// outside every grant of the tree.
    pub fn beside(&self, name: &str) -> PathBuf {
        self._dir.beside().canonicalize().unwrap().join(name)
    }
}

/// One MCP 2026-07-28 (stateless) `tools/call` over HTTP, as a client
/// behind a load balancer makes it: one `POST /mcp` with the protocol
/// headers, no session, `Connection: close`. `Ok` with the JSON-RPC
/// message answering `id` (it must come exactly once; a second one is an
/// `Err`), `Err` with the HTTP status or the transport error (a read that
/// outlasts `timeout` is one: a call must never hang).
pub fn stateless_call(
    addr: &str,
    token: &str,
    id: u64,
    tool: &str,
    arguments: Value,
    timeout: Duration,
) -> Result<Value, String> {
    stateless_call_with(addr, token, id, tool, arguments, None, timeout)
}

/// [`stateless_call`], retrying with `request_state` (the
/// `requestState` of an `InputRequiredResult`) when given.
pub fn stateless_call_with(
    addr: &str,
    token: &str,
    id: u64,
    tool: &str,
    arguments: Value,
    request_state: Option<&str>,
    timeout: Duration,
) -> Result<Value, String> {
    use std::io::{Read, Write};
    let mut params = serde_json::json!({
        "name": tool, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}});
    if let Some(state) = request_state {
        params["requestState"] = Value::String(state.to_string());
    }
    let body =
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
            .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nAuthorization: Bearer {token}\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = std::net::TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(timeout)).unwrap();
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    let mut reply = Vec::new();
    stream
        .read_to_end(&mut reply)
        .map_err(|e| format!("read (after {timeout:?} it is a hang): {e}"))?;
    let reply = String::from_utf8_lossy(&reply);
    let (head, body) = reply.split_once("\r\n\r\n").ok_or("no HTTP head")?;
    let status = head.split_whitespace().nth(1).unwrap_or("?");
    if status != "200" {
        return Err(format!("HTTP {status}"));
    }
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    let messages: Vec<Value> = if body.trim_start().starts_with('{') {
        serde_json::from_str(body.trim()).into_iter().collect()
    } else {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .collect()
    };
    let mut answers = messages
        .into_iter()
        .filter(|m| m["id"] == id && (m.get("result").is_some() || m.get("error").is_some()));
    let answer = answers
        .next()
        .ok_or_else(|| format!("no answer to {id} in: {body}"))?;
    if answers.next().is_some() {
        return Err(format!("call {id} was answered twice: {body}"));
    }
    Ok(answer)
}

/// A chunked HTTP/1.1 body, joined.
pub fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The status of `GET path` at `addr` (0 when nothing answers).
/// One raw HTTP/1.1 exchange with `addr` (the request as given, ending the
/// connection); the status, the head and the body. Status 0: nothing
/// listens there.
pub fn http_exchange(addr: &str, request: &str) -> (u16, String, String) {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return (0, String::new(), String::new());
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.write_all(request.as_bytes());
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    let reply = String::from_utf8_lossy(&reply);
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

pub fn http_get_status(addr: &str, path: &str) -> u16 {
    use std::io::{BufRead, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return 0;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = stream.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    let mut line = String::new();
    let _ = std::io::BufReader::new(stream).read_line(&mut line);
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// One HTTP/1.1 request read from `s`, as the local servers of the tests
/// (a search provider, a model) read theirs: its head (request line and
/// headers, as text) and its body (`content-length` bytes). `None` when the
/// peer closes before the head ends.
pub async fn read_http_request(s: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head, body_at) = loop {
        let n = s.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break (String::from_utf8_lossy(&buf[..i]).into_owned(), i + 4);
        }
    };
    let len: usize = http_header(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < body_at + len {
        let n = s.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some((head, buf.split_off(body_at)))
}

/// The value of header `name` (any case) in an HTTP head.
pub fn http_header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}
