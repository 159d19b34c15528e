//! `[auth]` (issue 45): `serve --http` as an OAuth 2.1 resource server,
//! against a real authorization server — the certified `oidc-provider`
//! library (npm), run by `tests/mcp/oidc_provider.mjs` — and the official
//! MCP Python SDK's OAuth client, which finds that server from nothing but
//! the endpoint's URL.
//!
//! Hostile cases, each presented to a live server: no token; a token for
//! another resource; an expired one; `alg: none`; HS256 keyed with the
//! issuer's public key; a key the issuer never published; a tampered
//! claim; a token without the required scope; an opaque token after its
//! revocation; another caller's session id.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_tests::http_exchange;

use crate::oci::free_port;
use crate::serve::{HttpServer, Setup, setup};

/// The authorization server: `oidc-provider` on a port of its own.
struct Authority {
    child: Child,
    addr: String,
    issuer: String,
}

impl Drop for Authority {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Authority {
    /// Tokens for `resource` (any other may be asked for too).
    fn start(resource: &str) -> Authority {
        let module = crate::bridge::servers().join("clients/node_modules/oidc-provider");
        let port = free_port();
        let mut child = Command::new("node")
            .arg(script("oidc_provider.mjs"))
            .arg(&module)
            .arg(port.to_string())
            .arg(resource)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run node (the authorization server)");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let issuer = line
            .trim()
            .strip_prefix("ready ")
            .unwrap_or_else(|| panic!("the authorization server did not start: {line:?}"))
            .to_string();
        // Drained, not closed: it warns on stdout as it goes, and a
        // write to a closed pipe would end it.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        Authority {
            child,
            addr: format!("127.0.0.1:{port}"),
            issuer,
        }
    }

    /// A token for `client` (client credentials), for `resource`.
    fn token(&self, client: &str, scope: Option<&str>, resource: &str) -> String {
        let mut form = format!(
            "grant_type=client_credentials&resource={}",
            encode(resource)
        );
        if let Some(scope) = scope {
            form.push_str(&format!("&scope={}", encode(scope)));
        }
        let answer = self.post("/token", client, &form);
        answer["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token for {client}: {answer}"))
            .to_string()
    }

    /// Revoke `token` (RFC 7009), as `client`.
    fn revoke(&self, client: &str, token: &str) {
        self.post(
            "/token/revocation",
            client,
            &format!("token={}&token_type_hint=access_token", encode(token)),
        );
    }

    fn post(&self, path: &str, client: &str, form: &str) -> Value {
        use base64::Engine as _;
        let basic =
            base64::engine::general_purpose::STANDARD.encode(format!("{client}:{client}-secret"));
        let (status, head, body) = http_exchange(
            &self.addr,
            &format!(
                "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Basic {basic}\r\n\
                 Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{form}",
                self.addr,
                form.len()
            ),
        );
        assert!(
            status == 200 || path.ends_with("revocation"),
            "{path}: {status}\n{head}\n{body}"
        );
        serde_json::from_str(&body).unwrap_or(Value::Null)
    }
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp").join(name)
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A forged variant of a real token (`tests/mcp/forge_token.mjs`).
fn forge(kind: &str, token: &str, jwks: &str) -> String {
    let out = Command::new("node")
        .arg(script("forge_token.mjs"))
        .args([kind, token, jwks])
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `tests/mcp/oauth_client.py` (the official Python SDK's OAuth client)
/// against `server` at `addr`, with `args` (the grant) and `calls`
/// (`TOOL=ARGS_JSON`): its report.
fn sdk_client(
    addr: &str,
    authority: &Authority,
    server: &HttpServer,
    args: &[&str],
    calls: &[&str],
) -> Value {
    let out = Command::new(crate::serve::python())
        .arg(script("oauth_client.py"))
        .args(["--http", &format!("http://{addr}/mcp")])
        .args(["--issuer", &authority.issuer])
        .args(args)
        .args(calls)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the client failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A server with `[auth]` trusting `authority`, at its own address, every
/// `ask` approved.
fn served(s: &Setup, authority: &Authority, addr: &str, extra: &str) -> HttpServer {
    served_asking(s, authority, addr, extra, "allow")
}

/// [`served`], with `--approve approve`.
fn served_asking(
    s: &Setup,
    authority: &Authority,
    addr: &str,
    extra: &str,
    approve: &str,
) -> HttpServer {
    std::fs::write(s.work().join("introspection-secret"), "toolgate-secret\n").unwrap();
    s.configure(&format!(
        "[auth]\nissuer = \"{issuer}\"\nresource = \"http://{addr}/mcp\"\n\
         required_scopes = [\"tools\"]\nclaims = [\"groups\"]\nleeway_seconds = 0\n{extra}\
         [auth.introspection]\nurl = \"{issuer}/token/introspection\"\nclient_id = \"toolgate\"\n\
         client_secret_file = \"introspection-secret\"\n",
        issuer = authority.issuer
    ));
    HttpServer::start_on(s, addr, &["--approve", approve])
}

/// One raw `tools/call` (stateless, 2026-07-28) with `token`; the status,
/// the head and the body.
fn call(addr: &str, token: &str, tool: &str, arguments: Value) -> (u16, String, String) {
    request(
        addr,
        token,
        None,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

fn request(
    addr: &str,
    token: &str,
    session: Option<&str>,
    method: &str,
    mut params: Value,
) -> (u16, String, String) {
    let stateless = session.is_none() && method != "initialize";
    if stateless {
        // Beside whatever `_meta` the caller gave.
        if !params["_meta"].is_object() {
            params["_meta"] = json!({});
        }
        params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
        params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let version = if stateless {
        "2026-07-28"
    } else {
        "2025-11-25"
    };
    // 2026-07-28: the method (and the tool) in headers too, for balancers.
    let routing = match (stateless, params["name"].as_str()) {
        (false, _) => String::new(),
        (true, Some(name)) => format!("Mcp-Method: {method}\r\nMcp-Name: {name}\r\n"),
        (true, None) => format!("Mcp-Method: {method}\r\n"),
    };
    let session = session
        .map(|s| format!("Mcp-Session-Id: {s}\r\n"))
        .unwrap_or_default();
    let auth = if token.is_empty() {
        String::new()
    } else {
        format!("Authorization: Bearer {token}\r\n")
    };
    let (status, head, body) = http_exchange(
        addr,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\n{auth}{session}{routing}\
             MCP-Protocol-Version: {version}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    // Through a balancer the body may come chunked.
    let body = match header(&head, "transfer-encoding") {
        Some(te) if te.eq_ignore_ascii_case("chunked") => toolgate_tests::dechunk(&body),
        _ => body,
    };
    (status, head, body)
}

/// The value of header `name` in `head`.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The audit record's call records, once `n` of them are written.
fn audited(s: &Setup, n: usize) -> Vec<Value> {
    let file = s.work().join("state/toolgate/audit.jsonl");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let records: Vec<Value> = std::fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["kind"] == "call")
            .collect();
        if records.len() >= n || Instant::now() > deadline {
            return records;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[cfg_attr(
    not(all(has_mcp_servers, has_mcp_client)),
    ignore = "needs oidc-provider from npm and the MCP Python SDK from PyPI: run \
              `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers` and \
              `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn the_sdk_finds_the_authorization_server_and_calls_as_itself() {
    let addr = format!("127.0.0.1:{}", free_port());
    let authority = Authority::start(&format!("http://{addr}/mcp"));
    let s = setup();
    let server = served(&s, &authority, &addr, "");
    let report = sdk_client(
        &addr,
        &authority,
        &server,
        &["--client", "agent", "--secret", "agent-secret"],
        &[r#"echo={"text":"hi"}"#],
    );
    assert!(
        report["tools"].as_array().unwrap().contains(&json!("echo")),
        "{report}"
    );
    assert_eq!(report["results"][0]["isError"], false, "{report}");
    assert_eq!(report["results"][0]["structuredContent"]["text"], "hi");
    // It found its way from the 401: this server's metadata, then the
    // authorization server's, then its token endpoint.
    let requested: Vec<&str> = report["requested"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    let metadata = format!("GET http://{addr}/.well-known/oauth-protected-resource/mcp");
    assert!(requested.contains(&metadata.as_str()), "{requested:?}");
    assert!(
        requested.contains(&format!("POST {}/token", authority.issuer).as_str()),
        "{requested:?}"
    );
    // The record says who called: the token's subject and the claims the
    // operator named, not the name the client gave itself.
    let records = audited(&s, 1);
    let record = records
        .iter()
        .find(|r| r["tool"] == "echo")
        .unwrap_or_else(|| panic!("no record of the call: {records:?}"));
    let caller = &record["client"]["caller"];
    // No trace context was sent: none is recorded.
    assert!(record["client"].get("trace").is_none(), "{record}");
    assert_eq!(caller["subject"], "agent", "{record}");
    assert_eq!(caller["issuer"], json!(authority.issuer));
    assert_eq!(caller["clientId"], "agent");
    assert_eq!(caller["claims"], json!({"groups": ["ops"]}));
    assert!(
        caller["scopes"]
            .as_array()
            .unwrap()
            .contains(&json!("tools"))
    );
}

/// An MCP client run by a person, as the SDK runs it: it registers itself
/// with the authorization server (dynamic client registration), sends its
/// user to sign in (the authorization-code grant with PKCE) and calls with
/// the user's token — and the record names the user and the client the
/// authorization server registered, not anything the client said of itself.
#[test]
#[cfg_attr(
    not(all(has_mcp_servers, has_mcp_client)),
    ignore = "needs oidc-provider from npm and the MCP Python SDK from PyPI: run \
              `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers` and \
              `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn a_client_registers_itself_and_its_user_signs_in() {
    let addr = format!("127.0.0.1:{}", free_port());
    let authority = Authority::start(&format!("http://{addr}/mcp"));
    let s = setup();
    // `bash` for the ops group: alice's group, no client's.
    s.add_plugin("caller-guard", toolgate_tests::fixtures::CALLER_GUARD);
    let server = served(&s, &authority, &addr, "");
    let report = sdk_client(
        &addr,
        &authority,
        &server,
        &["--sign-in", "--scope", "tools"],
        &[
            r#"echo={"text":"signed in"}"#,
            r#"bash={"command":"echo as-alice"}"#,
        ],
    );
    assert_eq!(report["results"][0]["isError"], false, "{report}");
    assert_eq!(report["results"][1]["isError"], false, "{report}");
    assert!(
        report["results"][1].to_string().contains("as-alice"),
        "{report}"
    );
    let requested: Vec<&str> = report["requested"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    // Discovery from the 401, registration, the user's visit to the
    // authorization endpoint, the code traded for a token.
    for wanted in [
        format!("GET http://{addr}/.well-known/oauth-protected-resource/mcp"),
        format!("POST {}/reg", authority.issuer),
        format!("GET {}/auth?", authority.issuer),
        format!("POST {}/token", authority.issuer),
    ] {
        assert!(
            requested.iter().any(|r| r.starts_with(&wanted)),
            "{wanted} not in {requested:?}"
        );
    }
    let registered = report["client_id"].as_str().unwrap();
    assert!(
        ![
            "agent",
            "guest",
            "noscope",
            "short",
            "opaque-agent",
            "toolgate"
        ]
        .contains(&registered),
        "{report}"
    );
    let records = audited(&s, 2);
    let record = records
        .iter()
        .find(|r| r["tool"] == "bash")
        .unwrap_or_else(|| panic!("no record of the call: {records:?}"));
    let caller = &record["client"]["caller"];
    assert_eq!(caller["subject"], "alice", "{record}");
    assert_eq!(caller["clientId"], registered, "{record}");
    assert_eq!(caller["claims"], json!({"groups": ["ops"]}), "{record}");
    assert_eq!(record["result"]["isError"], false, "{record}");
}

#[test]
#[cfg_attr(
    not(has_mcp_servers),
    ignore = "needs oidc-provider from npm: run `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers`"
)]
fn tokens_not_made_for_this_server_by_its_issuer_are_refused() {
    let addr = format!("127.0.0.1:{}", free_port());
    let resource = format!("http://{addr}/mcp");
    let authority = Authority::start(&resource);
    let s = setup();
    let server = served(&s, &authority, &addr, "");
    let jwks = format!("{}/jwks", authority.issuer);
    let metadata_url = format!("http://{addr}/.well-known/oauth-protected-resource/mcp");

    // No token: 401 and the way to the authorization server.
    let (status, head, _) = call(&addr, "", "echo", json!({"text": "x"}));
    assert_eq!(status, 401, "{head}");
    let challenge = header(&head, "www-authenticate").expect("a challenge");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")),
        "{challenge}"
    );
    let (status, _, body) = http_exchange(
        &addr,
        &format!(
            "GET /.well-known/oauth-protected-resource/mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        ),
    );
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(doc["resource"], json!(resource));
    assert_eq!(doc["authorization_servers"], json!([authority.issuer]));

    // A good token: served.
    let good = authority.token("agent", Some("tools"), &resource);
    let (status, head, body) = call(&addr, &good, "echo", json!({"text": "x"}));
    assert_eq!(status, 200, "{head}\n{body}\n{}", server.log());

    // Each forgery or misuse: 401 invalid_token, saying why.
    let refused = |token: &str, why: &str| {
        let (status, head, body) = call(&addr, token, "echo", json!({"text": "x"}));
        assert_eq!(status, 401, "{why}: {head}\n{body}");
        let challenge = header(&head, "www-authenticate").unwrap();
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{why}: {challenge}"
        );
        assert!(body.contains(why), "{why}: {body}");
    };
    let other = authority.token("agent", Some("tools"), "http://other.example/mcp");
    refused(&other, "not for this resource");
    refused(&forge("none", &good, &jwks), "the token's header");
    refused(&forge("hs256", &good, &jwks), "does not allow");
    refused(
        &forge("unknown-key", &good, &jwks),
        "signature does not verify",
    );
    refused(
        &forge("tampered", &good, &jwks),
        "signature does not verify",
    );
    refused("not-a-token", "not active");
    let short = authority.token("short", Some("tools"), &resource);
    std::thread::sleep(Duration::from_millis(2100));
    refused(&short, "expired");

    // Valid, but without the scope `/mcp` requires: 403, naming it.
    let unscoped = authority.token("noscope", None, &resource);
    let (status, head, _) = call(&addr, &unscoped, "echo", json!({"text": "x"}));
    assert_eq!(status, 403, "{head}");
    let challenge = header(&head, "www-authenticate").unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"tools\""),
        "{challenge}"
    );

    // An opaque token is asked about on every request: after its
    // revocation it stops at once.
    let opaque = authority.token("opaque-agent", Some("tools"), &resource);
    assert_eq!(opaque.split('.').count(), 1, "an opaque token: {opaque}");
    let (status, head, body) = call(&addr, &opaque, "echo", json!({"text": "x"}));
    assert_eq!(status, 200, "{head}\n{body}");
    authority.revoke("opaque-agent", &opaque);
    refused(&opaque, "not active");

    // A session is its opener's: another caller holding its id finds none.
    let (status, head, _) = request(
        &addr,
        &good,
        None,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "raw", "version": "1"}}),
    );
    assert_eq!(status, 200, "{head}");
    let session = header(&head, "mcp-session-id")
        .expect("a session")
        .to_string();
    let guest = authority.token("guest", Some("tools"), &resource);
    let (status, _, _) = request(&addr, &guest, Some(&session), "tools/list", json!({}));
    assert_eq!(status, 404, "another caller's session");
    let (status, head, _) = request(&addr, &good, Some(&session), "tools/list", json!({}));
    assert_eq!(status, 200, "its opener's: {head}");
}

#[test]
#[cfg_attr(
    not(has_mcp_servers),
    ignore = "needs oidc-provider from npm: run `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers`"
)]
fn a_guard_decides_by_the_caller_its_token_names() {
    let addr = format!("127.0.0.1:{}", free_port());
    let resource = format!("http://{addr}/mcp");
    let authority = Authority::start(&resource);
    let s = setup();
    // Written with plain wit-bindgen: `bash` for the `ops` group only.
    s.add_plugin("caller-guard", toolgate_tests::fixtures::CALLER_GUARD);
    let server = served(&s, &authority, &addr, "");
    let ops = authority.token("agent", Some("tools"), &resource);
    let guest = authority.token("guest", Some("tools"), &resource);
    let bash = json!({"command": "echo from-bash"});

    let answer = |token: &str| {
        // The guard's file may still be compiling when the server first
        // answers: until it loads, calls wait for it or are refused, never
        // run without it (asserted by the guest's call below either way).
        let (status, head, body) = call(&addr, token, "bash", bash.clone());
        assert_eq!(status, 200, "{head}\n{body}\n{}", server.log());
        body
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let body = loop {
        let body = answer(&ops);
        if body.contains("from-bash") || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        body.contains("from-bash"),
        "the ops caller runs bash: {body}"
    );
    let body = answer(&guest);
    assert!(
        body.contains(
            "only the ops group may run bash; guest (client guest, over http) is not in it"
        ),
        "{body}"
    );
    assert!(!body.contains("from-bash"), "{body}");
    // Other tools pass for everyone.
    let (status, _, body) = call(&addr, &guest, "echo", json!({"text": "hi"}));
    assert_eq!(status, 200);
    assert!(body.contains("\"isError\":false"), "{body}");
    // The record names the guest as the one refused.
    let records = audited(&s, 3);
    let refused = records
        .iter()
        .find(|r| r["client"]["caller"]["subject"] == "guest" && r["tool"] == "bash")
        .unwrap_or_else(|| panic!("no record of the guest's bash: {records:?}"));
    assert_eq!(refused["result"]["decidedBy"], "caller-guard", "{refused}");

    // `toolgate replay` decides each recorded call for its recorded caller:
    // the same policies, the same decisions.
    let file = s.work().join("state/toolgate/audit.jsonl");
    let replay = |file: &Path| -> Value {
        let out = s
            .other_command(&["replay", "--json"])
            .arg(file)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "replay printed no JSON ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    };
    let report = replay(&file);
    assert!(report["calls"].as_u64().unwrap() >= 3, "{report}");
    assert_eq!(report["changed"], 0, "{report}");
    assert_eq!(report["notComparable"], json!([]), "{report}");
    // The ops caller's bash call, recorded without the caller's groups:
    // now the guard refuses it — the recorded caller is what decides.
    let text = std::fs::read_to_string(&file).unwrap();
    let mut seq = 0;
    let edited: Vec<String> = text
        .lines()
        .map(|line| {
            let mut r: Value = serde_json::from_str(line).unwrap();
            if r["kind"] == "call"
                && r["tool"] == "bash"
                && r["client"]["caller"]["subject"] == "agent"
                && r["result"]["isError"] == false
            {
                r["client"]["caller"]["claims"] = json!({});
                seq = r["seq"].as_u64().unwrap();
            }
            r.to_string()
        })
        .collect();
    assert_ne!(seq, 0, "no allowed bash call of the ops caller in {text}");
    let edited_file = s.work().join("edited.jsonl");
    std::fs::write(&edited_file, edited.join("\n") + "\n").unwrap();
    let report = replay(&edited_file);
    let change = report["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["seq"] == seq)
        .unwrap_or_else(|| panic!("no change for seq {seq}: {report}"));
    assert_eq!(change["before"], "allowed", "{report}");
    assert_eq!(change["after"], "denied", "{report}");
    assert_eq!(change["decidedBy"], "guard:caller-guard", "{report}");
}

/// The names `tools/list` gives the holder of `token`.
fn listed(addr: &str, token: &str) -> Vec<String> {
    let (status, head, body) = request(addr, token, None, "tools/list", json!({}));
    assert_eq!(status, 200, "{head}\n{body}");
    let answer = sse_or_json(&body);
    // A list behind a token is no shared cache's to keep (SEP-2549).
    assert_eq!(answer["result"]["cacheScope"], "private", "{answer}");
    assert_eq!(answer["result"]["ttlMs"], 0, "{answer}");
    answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// A JSON-RPC answer, whether the body is JSON or an SSE stream.
fn sse_or_json(body: &str) -> Value {
    if let Ok(v) = serde_json::from_str(body.trim()) {
        return v;
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|m| m.get("result").is_some() || m.get("error").is_some())
        .unwrap_or_else(|| panic!("no answer in {body}"))
}

#[test]
#[cfg_attr(
    not(has_mcp_servers),
    ignore = "needs oidc-provider from npm: run `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers`"
)]
fn each_caller_sees_only_the_tools_it_may_call() {
    let addr = format!("127.0.0.1:{}", free_port());
    let resource = format!("http://{addr}/mcp");
    let authority = Authority::start(&resource);
    let s = setup();
    // `echo` for the ops group; `crash` for the subject `guest` only.
    s.configure(
        "[[access]]\ntools = [\"echo\"]\nclaims = { groups = \"ops\" }\n\
         [[access]]\ntools = [\"cra*\"]\nsubjects = [\"guest\"]\n",
    );
    let server = served(&s, &authority, &addr, "");
    let ops = authority.token("agent", Some("tools"), &resource);
    let guest = authority.token("guest", Some("tools"), &resource);

    let seen_by_ops = listed(&addr, &ops);
    let seen_by_guest = listed(&addr, &guest);
    assert!(seen_by_ops.contains(&"echo".to_string()), "{seen_by_ops:?}");
    assert!(
        !seen_by_ops.contains(&"crash".to_string()),
        "{seen_by_ops:?}"
    );
    assert!(
        !seen_by_guest.contains(&"echo".to_string()),
        "{seen_by_guest:?}"
    );
    assert!(
        seen_by_guest.contains(&"crash".to_string()),
        "{seen_by_guest:?}"
    );
    // Tools no rule names: everyone's.
    assert!(
        seen_by_guest.contains(&"read".to_string()) && seen_by_ops.contains(&"read".to_string())
    );

    // Called by name anyway: the answer a tool nobody has gets, naming
    // nothing the caller may not see.
    let (_, _, hidden) = call(&addr, &guest, "echo", json!({"text": "x"}));
    let (_, _, nobody) = call(&addr, &guest, "ech0", json!({"text": "x"}));
    let hidden = sse_or_json(&hidden)["result"].clone();
    let nobody = sse_or_json(&nobody)["result"].clone();
    assert_eq!(hidden["isError"], true, "{hidden}");
    assert_eq!(
        hidden["_meta"]["toolgate/error"]["code"], "UNKNOWN_TOOL",
        "{hidden}"
    );
    assert_eq!(
        hidden["content"][0]["text"]
            .as_str()
            .unwrap()
            .replace("`echo`", "`ech0`"),
        nobody["content"][0]["text"].as_str().unwrap(),
        "a hidden tool and a missing one look alike"
    );
    assert!(!hidden.to_string().contains("\"echo\""), "{hidden}");
    // The ops caller calls it.
    let (status, _, body) = call(&addr, &ops, "echo", json!({"text": "for ops"}));
    assert_eq!(status, 200);
    assert!(
        body.contains("for ops") && body.contains("\"isError\":false"),
        "{body}\n{}",
        server.log()
    );
}

#[test]
#[cfg_attr(
    not(has_mcp_servers),
    ignore = "needs oidc-provider from npm: run `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers`"
)]
fn the_approval_queue_names_the_authenticated_caller() {
    let addr = format!("127.0.0.1:{}", free_port());
    let resource = format!("http://{addr}/mcp");
    let authority = Authority::start(&resource);
    let s = setup();
    let _server = served_asking(&s, &authority, &addr, "", "queue");
    let ops = authority.token("agent", Some("tools"), &resource);
    // A stateless call does not wait: its entry stays in the queue.
    let (status, head, body) = call(&addr, &ops, "echo", json!({"text": "ask me"}));
    assert_eq!(status, 200, "{head}\n{body}");
    let console = std::fs::read_to_string(s.work().join("state/toolgate/console-token")).unwrap();
    let (status, _, body) = http_exchange(
        &addr,
        &format!(
            "GET /console/api/pending HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
             Connection: close\r\n\r\n",
            console.trim()
        ),
    );
    assert_eq!(status, 200, "{body}");
    let pending: Value = serde_json::from_str(&body).unwrap();
    let entry = pending
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["tool"] == "echo")
        .unwrap_or_else(|| panic!("no entry: {pending}"));
    assert_eq!(entry["caller"], "agent", "{entry}");
}

#[test]
#[cfg_attr(
    not(has_mcp_servers),
    ignore = "needs oidc-provider from npm: run `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers`"
)]
fn the_rate_limit_example_counts_each_caller_apart() {
    let addr = format!("127.0.0.1:{}", free_port());
    let resource = format!("http://{addr}/mcp");
    let authority = Authority::start(&resource);
    let s = setup();
    s.add_plugin(
        "rate-limit",
        toolgate_tests::fixtures::EXAMPLE_RATE_LIMIT_RS,
    );
    s.configure(
        "[plugins.rate-limit]\nvars = { LIMIT = \"2\", WINDOW_SECONDS = \"3600\", TOOLS = \"echo\" }\n\
         [plugins.rate-limit.grants]\nkv = true\n",
    );
    let server = served(&s, &authority, &addr, "");
    let ops = authority.token("agent", Some("tools"), &resource);
    let guest = authority.token("guest", Some("tools"), &resource);
    let echo = |token: &str| {
        let (status, _, body) = call(&addr, token, "echo", json!({"text": "x"}));
        assert_eq!(status, 200, "{body}\n{}", server.log());
        sse_or_json(&body)["result"].clone()
    };
    // The guard's file may still be compiling: wait until it counts.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut calls = 0;
    let denied = loop {
        let r = echo(&ops);
        calls += 1;
        if r["isError"] == true || Instant::now() > deadline {
            break r;
        }
    };
    assert!(
        denied["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("may be called 2 times per 3600 s"),
        "{denied} after {calls} calls"
    );
    // Another caller's counter is its own.
    assert_eq!(echo(&guest)["isError"], false);
    assert_eq!(echo(&guest)["isError"], false);
    assert_eq!(echo(&guest)["isError"], true);
}

#[test]
#[cfg_attr(
    not(has_mcp_servers),
    ignore = "needs oidc-provider from npm: run `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers`"
)]
fn a_trace_context_in_meta_reaches_the_record_and_a_bad_one_does_not() {
    let addr = format!("127.0.0.1:{}", free_port());
    let resource = format!("http://{addr}/mcp");
    let authority = Authority::start(&resource);
    let s = setup();
    let _server = served(&s, &authority, &addr, "");
    let token = authority.token("agent", Some("tools"), &resource);
    let traced = |text: &str, traceparent: &str| {
        let (status, _, body) = request(
            &addr,
            &token,
            None,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": text},
                   "_meta": {"traceparent": traceparent, "tracestate": "vendor=1"}}),
        );
        assert_eq!(status, 200, "{body}");
    };
    traced(
        "good",
        "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
    );
    traced(
        "bad",
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01\u{0}",
    );
    let records = audited(&s, 2);
    let of = |text: &str| {
        records
            .iter()
            .find(|r| r["arguments"]["text"] == text)
            .unwrap_or_else(|| panic!("{records:?}"))["client"]
            .clone()
    };
    assert_eq!(
        of("good")["trace"],
        json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
               "tracestate": "vendor=1"})
    );
    assert!(of("bad").get("trace").is_none(), "{}", of("bad"));
}

/// Two callers, two replicas behind HAProxy (round-robin): whichever
/// replica answers, each caller lists only its tools, and a tool kept from
/// it is unknown on every replica — the rules are the configuration's,
/// the same on each, and decided per request from the caller's token.
#[test]
#[cfg_attr(
    not(all(has_mcp_servers, has_replica_parts)),
    ignore = "needs oidc-provider from npm, and redis-server and haproxy from Debian: run \
              `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers` and \
              `apt-get install -y redis-server haproxy`"
)]
fn each_caller_sees_only_its_tools_on_every_replica() {
    use crate::replicas::{Haproxy, Launch};
    crate::replicas::parts();
    // Any resource the tokens are for will do: the replicas are reached
    // through the balancer, and a token names the resource, not the hop.
    let resource = format!("http://127.0.0.1:{}/mcp", free_port());
    let authority = Authority::start(&resource);
    let work = toolgate_tests::TempDir::new("oauth-replicas");
    let plugins = toolgate_tests::PluginDir::new();
    plugins.add("tools", toolgate_tests::fixtures::TOOLS);
    let config = work.path().join("toolgate.toml");
    std::fs::write(
        &config,
        format!(
            "[auth]\nissuer = \"{}\"\nresource = \"{resource}\"\nrequired_scopes = [\"tools\"]\n\
             claims = [\"groups\"]\n\
             [[access]]\ntools = [\"echo\"]\nclaims = {{ groups = \"ops\" }}\n\
             [[access]]\ntools = [\"cra*\"]\nsubjects = [\"guest\"]\n",
            authority.issuer
        ),
    )
    .unwrap();
    let token_file = work.path().join("token");
    std::fs::write(&token_file, "oauth-replicas-metrics-token").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let replicas: Vec<_> = (0..2)
        .map(|i| {
            Launch {
                work: work.path(),
                plugins: plugins.path(),
                config: &config,
                token_file: &token_file,
                name: i.to_string(),
                id: false,
                approve: "allow",
                args: &[],
            }
            .start()
        })
        .collect();
    let haproxy = Haproxy::start(&replicas.iter().map(|r| r.port).collect::<Vec<_>>());
    haproxy.wait_up(2);
    let addr = haproxy.addr();
    let ops = authority.token("agent", Some("tools"), &resource);
    let guest = authority.token("guest", Some("tools"), &resource);
    let sessions_before: u64 = haproxy.stats().iter().map(|s| s.2).sum();
    for _ in 0..4 {
        let seen = listed(&addr, &ops);
        assert!(
            seen.contains(&"echo".to_string()) && !seen.contains(&"crash".to_string()),
            "{seen:?}"
        );
        let seen = listed(&addr, &guest);
        assert!(
            seen.contains(&"crash".to_string()) && !seen.contains(&"echo".to_string()),
            "{seen:?}"
        );
        let (_, _, hidden) = call(&addr, &guest, "echo", json!({"text": "x"}));
        let hidden = sse_or_json(&hidden)["result"].clone();
        assert_eq!(
            hidden["_meta"]["toolgate/error"]["code"], "UNKNOWN_TOOL",
            "{hidden}"
        );
    }
    // Both replicas answered some of them.
    let stats = haproxy.stats();
    assert!(
        stats.iter().all(|s| s.2 > 0),
        "each replica served requests: {stats:?} (before: {sessions_before})"
    );
}

/// A stateless (2026-07-28) client listening for tool list changes
/// (`subscriptions/listen`) is told when a change of `[[access]]` shows it
/// a tool, though no tool changed: what it listens to is what *it* sees.
#[test]
#[cfg_attr(
    not(has_mcp_servers),
    ignore = "needs oidc-provider from npm: run `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers`"
)]
fn a_listening_caller_is_told_when_the_rules_show_it_a_tool() {
    use std::io::{BufRead, BufReader, Write};
    let addr = format!("127.0.0.1:{}", free_port());
    let resource = format!("http://{addr}/mcp");
    let authority = Authority::start(&resource);
    let s = setup();
    let rule = "[[access]]\ntools = [\"echo\"]\nsubjects = [\"alice\"]\n";
    s.configure(rule);
    let server = served(&s, &authority, &addr, "");
    let guest = authority.token("guest", Some("tools"), &resource);
    assert!(!listed(&addr, &guest).contains(&"echo".to_string()));

    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": true},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nAuthorization: Bearer {guest}\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut lines = BufReader::new(stream);
    let mut wait_for = |what: &str| {
        let mut line = String::new();
        loop {
            line.clear();
            let n = lines
                .read_line(&mut line)
                .unwrap_or_else(|e| panic!("waiting for {what}: {e}\n{}", server.log()));
            assert!(n > 0, "the stream ended before {what}");
            if line.contains(what) {
                return;
            }
        }
    };
    // Listening (the server acknowledged the filter).
    wait_for("acknowledged");
    // The rule goes: `echo` is everyone's now, and the listener is told.
    let config = s.work().join("toolgate.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace(rule, "")).unwrap();
    wait_for("notifications/tools/list_changed");
    assert!(listed(&addr, &guest).contains(&"echo".to_string()));
}

/// The structured value of a `tools/call` answer (the test servers send
/// `structuredContent`).
fn value_of(body: &str) -> Value {
    let answer = sse_or_json(body);
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    answer["result"]["structuredContent"].clone()
}

/// Issue 41, the session's own history: one caller's `session_search`,
/// `session_list` and `session_read` never return another caller's calls,
/// whatever it asks for — by text, or by a session id it learned. Two
/// callers validated by a real authorization server, one `serve --http`.
#[test]
#[cfg_attr(
    not(has_mcp_servers),
    ignore = "needs oidc-provider from npm: run `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers`"
)]
fn one_callers_history_never_shows_another_callers_calls() {
    let addr = format!("127.0.0.1:{}", free_port());
    let resource = format!("http://{addr}/mcp");
    let authority = Authority::start(&resource);
    let s = setup();
    let server = served(&s, &authority, &addr, "[plugins.history]\nenabled = true\n");
    let agent = authority.token("agent", Some("tools"), &resource);
    let guest = authority.token("guest", Some("tools"), &resource);
    // Each leaves a mark in the record.
    for (token, mark) in [(&agent, "agent-mark-7"), (&guest, "guest-mark-9")] {
        let (status, head, body) = call(&addr, token, "echo", json!({"text": mark}));
        assert_eq!(status, 200, "{head}\n{body}\n{}", server.log());
        assert!(body.contains(mark), "{body}");
    }
    audited(&s, 2);
    let search = |token: &str, query: &str| -> Value {
        let (status, head, body) = call(&addr, token, "session_search", json!({"query": query}));
        assert_eq!(status, 200, "{head}\n{body}\n{}", server.log());
        value_of(&body)
    };
    let mine = search(&agent, "-mark-");
    let text = mine["calls"].to_string();
    assert!(text.contains("agent-mark-7"), "{mine}");
    assert!(!text.contains("guest-mark-9"), "{mine}");
    let theirs = search(&guest, "-mark-");
    let text = theirs["calls"].to_string();
    assert!(text.contains("guest-mark-9"), "{theirs}");
    assert!(!text.contains("agent-mark-7"), "{theirs}");
    // Asked for the other's mark by name: only its own earlier searches.
    let named = search(&guest, "agent-mark-7");
    assert!(
        named["calls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["tool"] == "session_search"),
        "{named}"
    );

    // The agent's sessions, and each read by the guest: never the agent's calls.
    let (_, _, body) = call(&addr, &agent, "session_list", json!({}));
    let sessions = value_of(&body)["sessions"].as_array().unwrap().clone();
    assert!(!sessions.is_empty(), "{body}");
    for session in &sessions {
        let id = session["id"].as_str().unwrap();
        let (_, _, body) = call(&addr, &agent, "session_read", json!({"session": id}));
        assert!(
            value_of(&body)["calls"]
                .to_string()
                .contains("agent-mark-7")
                || sessions.len() > 1
        );
        // Stateless calls of one process share its session id: the guest
        // reads its own calls under it, never the agent's echo.
        let (_, _, body) = call(&addr, &guest, "session_read", json!({"session": id}));
        let answer = sse_or_json(&body);
        let calls = answer["result"]["structuredContent"]["calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            !calls.iter().any(|c| c["arguments"]
                .as_str()
                .unwrap_or("")
                .contains("{\"text\":\"agent-mark-7\"}")),
            "{answer}"
        );
    }
    // What the record holds of each caller is what each was shown.
    let records = audited(&s, 8);
    assert!(
        records
            .iter()
            .any(|r| r["tool"] == "session_search" && r["client"]["caller"]["subject"] == "guest"),
        "{records:?}"
    );
}

/// Without a validated caller, over HTTP: a session reads its own calls
/// and no other session's (two clients sharing the static token are told
/// apart by nothing else); a stateless request without one has no history
/// and is told why.
#[test]
fn without_a_caller_a_session_reads_only_its_own_history() {
    let s = setup();
    s.configure("[plugins.history]\nenabled = true\n");
    let server = HttpServer::start(&s, &["--approve", "allow"]);
    let addr = server.addr();
    let token = server.token.clone().unwrap_or_default();
    let open = || -> String {
        let (status, head, body) = request(
            &addr,
            &token,
            None,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}),
        );
        assert_eq!(status, 200, "{head}\n{body}");
        let session = header(&head, "mcp-session-id").unwrap().to_string();
        let body = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
        let (status, _, _) = http_exchange(
            &addr,
            &format!(
                "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nAuthorization: Bearer {token}\r\n\
                 Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        );
        assert_eq!(status, 202);
        session
    };
    let in_session = |session: &str, tool: &str, arguments: Value| -> String {
        let (status, head, body) = request(
            &addr,
            &token,
            Some(session),
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        );
        assert_eq!(status, 200, "{head}\n{body}\n{}", server.log());
        body
    };
    let first = open();
    let second = open();
    assert!(in_session(&first, "echo", json!({"text": "first-mark"})).contains("first-mark"));
    assert!(in_session(&second, "echo", json!({"text": "second-mark"})).contains("second-mark"));
    let found = value_of(&in_session(
        &first,
        "session_search",
        json!({"query": "-mark"}),
    ));
    assert!(found["calls"].to_string().contains("first-mark"), "{found}");
    assert!(
        !found["calls"].to_string().contains("second-mark"),
        "{found}"
    );
    let listed = value_of(&in_session(&second, "session_list", json!({})));
    let sessions = listed["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "its own session only: {listed}");
    assert_eq!(sessions[0]["current"], true, "{listed}");
    // A stateless request, no caller: no identity, said at once.
    let (_, _, body) = call(&addr, &token, "session_list", json!({}));
    let answer = sse_or_json(&body);
    assert_eq!(
        answer["result"]["_meta"]["toolgate/error"]["code"], "NO_IDENTITY",
        "{answer}"
    );
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("[auth]"),
        "{answer}"
    );
}

/// A Code Mode program's calls read the history of the client that ran
/// the program: over HTTP without a caller, its own session — never the
/// local operator's calls (which a call with no client would read).
#[test]
fn a_programs_calls_read_the_history_of_the_client_that_ran_it() {
    let s = setup();
    s.configure("[plugins.history]\nenabled = true\n");
    // The local operator's call, through `run`.
    let mut run = s.other_command(&["--approve", "allow", "run", "-"]);
    run.stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = run.spawn().unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(br#"[{"id": "l", "name": "echo", "arguments": {"text": "local-mark"}}]"#)
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    audited(&s, 1);

    let server = HttpServer::start(&s, &["--code-mode", "--approve", "allow"]);
    let addr = server.addr();
    let token = server.token.clone().unwrap_or_default();
    let (status, head, body) = request(
        &addr,
        &token,
        None,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}),
    );
    assert_eq!(status, 200, "{head}\n{body}");
    let session = header(&head, "mcp-session-id").unwrap().to_string();
    let program = |code: &str| -> String {
        let (status, head, body) = request(
            &addr,
            &token,
            Some(&session),
            "tools/call",
            json!({"name": "run_code", "arguments": {"code": code}}),
        );
        assert_eq!(status, 200, "{head}\n{body}\n{}", server.log());
        let answer = sse_or_json(&body);
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        answer["result"]["content"].to_string()
    };
    let found = program(
        "const r = await tools.session_search({query: 'mark'}); return r.calls.map(c => c.tool + ' ' + c.arguments);",
    );
    assert!(
        !found.contains("echo"),
        "the local operator's call: {found}"
    );
    // Its own session's calls it does read: the program's search above.
    let found = program(
        "const r = await tools.session_search({query: 'mark'}); return r.calls.map(c => c.tool + ' ' + c.arguments);",
    );
    assert!(found.contains("session_search"), "{found}");
    assert!(!found.contains("echo"), "{found}");
}
