//! Issue 41, the session's own history: the `history` seam against a
//! component written with plain wit-bindgen (`tests/fixtures/history-asker`)
//! that hands the host what a hostile one would — sizes past the caps, a
//! limit of `u32::MAX`, another caller's session id, a read from
//! `list-tools` (outside any call), a loop of reads that never ends. The
//! tools themselves, over `run`, stdio and HTTP with two callers, are in
//! `cli/tests`, `serve` and `oauth`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate::identity::Caller;
use toolgate::{ToolCall, Toolgate, TurnOptions};
use toolgate_tests::{PluginDir, TempDir, builder, fixtures};

/// The fixture's answer to `args`, called as `caller` (none: the local
/// operator, as `run`).
async fn ask(h: &Toolgate, caller: Option<&Arc<Caller>>, args: Value) -> Value {
    // A caller comes with its client, as `serve` sends it.
    let turn = TurnOptions {
        caller: caller.cloned(),
        client: caller.map(|c| {
            Arc::new(toolgate::turn::Client {
                transport: "http".into(),
                session: Some("alice-session".into()),
                caller: Some(c.clone()),
                ..Default::default()
            })
        }),
        ..Default::default()
    };
    let r = h.call(ToolCall::new("h", "ask", args), &turn).await;
    assert!(!r.is_error, "{r:?}");
    serde_json::from_str(&r.text()).unwrap()
}

#[tokio::test]
async fn a_hostile_component_reads_only_its_callers_history_within_the_caps() {
    let dir = PluginDir::new();
    dir.add("asker", fixtures::HISTORY_ASKER);
    // Not granted: not loaded, and the problem names the grant.
    let problems = match builder(&dir, "").build().await {
        Ok(h) => format!("{:?}", h.problems()),
        Err(e) => e.to_string(),
    };
    assert!(problems.contains("history = true"), "{problems}");

    // Granted, but no audit record: said so.
    let h = builder(&dir, "[plugins.asker.grants]\nhistory = true\n")
        .build()
        .await
        .expect("host builds");
    let r = ask(&h, None, json!({"op": "list"})).await;
    assert_eq!(r["error"]["kind"], "no-record", "{r}");

    let state = TempDir::new("history-hostile");
    let config = format!(
        "[audit]\npath = {:?}\nsigning_key = {:?}\n[plugins.asker.grants]\nhistory = true\n",
        state.path().join("audit.jsonl").display().to_string(),
        state.path().join("audit.key").display().to_string(),
    );
    let h = builder(&dir, &config).build().await.expect("host builds");
    // From `list-tools` there is no call, so no history.
    let described = h.generation().tools["ask"].def.description.clone();
    assert!(
        described.contains("outside a call: no-identity"),
        "{described}"
    );

    // The local operator leaves a mark; its session is listed.
    let r = ask(&h, None, json!({"op": "search", "query": "local-mark"})).await;
    assert_eq!(r["ok"]["calls"], json!([]), "{r}");
    let r = ask(&h, None, json!({"op": "list"})).await;
    let local_id = r["ok"]["sessions"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(r["ok"]["sessions"][0]["current"], true, "{r}");

    // Past every cap: refused before anything is read, saying which.
    for args in [
        json!({"op": "search", "query": ""}),
        json!({"op": "search", "query": "q", "pad": 1 << 20}),
        json!({"op": "search", "query": "q", "limit": u32::MAX}),
        json!({"op": "list", "limit": 101}),
        json!({"op": "read", "id": "s-", "pad": 1 << 20}),
    ] {
        let r = ask(&h, None, args.clone()).await;
        assert_eq!(r["error"]["kind"], "invalid-request", "{args}: {r}");
    }
    // An offset past the end is an empty page, not an error.
    let r = ask(
        &h,
        None,
        json!({"op": "read", "id": local_id, "offset": u32::MAX}),
    )
    .await;
    assert_eq!(r["ok"]["calls"], json!([]), "{r}");

    // Another caller: none of the local calls, by text or by their id.
    let alice = Arc::new(Caller {
        subject: "alice".into(),
        issuer: "https://idp.example".into(),
        ..Default::default()
    });
    let r = ask(
        &h,
        Some(&alice),
        json!({"op": "search", "query": "local-mark"}),
    )
    .await;
    assert_eq!(r["ok"]["calls"], json!([]), "{r}");
    let r = ask(&h, Some(&alice), json!({"op": "read", "id": local_id})).await;
    assert_eq!(r["error"]["kind"], "not-found", "{r}");
    // And her own, once she has some.
    let r = ask(
        &h,
        Some(&alice),
        json!({"op": "search", "query": "local-mark"}),
    )
    .await;
    assert_eq!(r["ok"]["calls"].as_array().unwrap().len(), 1, "{r}");
    let r = ask(&h, None, json!({"op": "search", "query": "local-mark"})).await;
    let calls = r["ok"]["calls"].as_array().unwrap();
    assert!(
        calls.iter().all(|c| c["session"] == local_id.as_str()),
        "the local operator sees no call of alice's: {r}"
    );

    // A library call that names its caller and no client: recorded with
    // the caller all the same, so never the local operator's.
    let bob = TurnOptions {
        caller: Some(Arc::new(Caller {
            subject: "bob".into(),
            issuer: "https://idp.example".into(),
            ..Default::default()
        })),
        ..Default::default()
    };
    let args = json!({"op": "search", "query": "bob-mark"});
    let r = h.call(ToolCall::new("b", "ask", args.clone()), &bob).await;
    assert!(!r.is_error, "{r:?}");
    let r = ask(&h, None, json!({"op": "search", "query": "bob-mark"})).await;
    assert_eq!(r["ok"]["calls"], json!([]), "{r}");
    let r = h.call(ToolCall::new("b", "ask", args), &bob).await;
    let mine: Value = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(mine["ok"]["calls"].as_array().unwrap().len(), 1, "{mine}");

    // A loop of reads ends at the tool's timeout; the host answers meanwhile.
    let started = Instant::now();
    let flood = tokio::spawn({
        let h = h.clone();
        async move {
            h.call(
                ToolCall::new("f", "ask", json!({"op": "flood", "query": "x"})),
                &TurnOptions::default(),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        ask(&h, None, json!({"op": "list"}))
            .await
            .get("ok")
            .is_some()
    );
    let r = flood.await.unwrap();
    assert!(r.is_error, "{r:?}");
    assert_eq!(r.code(), Some("TIMEOUT"), "{r:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// Values the operator marked sensitive (`[audit] sensitive`) stay
/// digests in the history: a search for one finds nothing, and the call
/// shows the digest in its place.
#[tokio::test]
async fn sensitive_values_stay_digests_in_the_history() {
    let dir = PluginDir::new();
    dir.add("asker", fixtures::HISTORY_ASKER);
    let state = TempDir::new("history-sensitive");
    let config = format!(
        "[audit]\npath = {:?}\nsigning_key = {:?}\nsensitive = {{ ask = [\"/id\"] }}\n\
         [plugins.asker.grants]\nhistory = true\n",
        state.path().join("audit.jsonl").display().to_string(),
        state.path().join("audit.key").display().to_string(),
    );
    let h = builder(&dir, &config).build().await.expect("host builds");
    // A call whose `id` is a secret (`list` does not use it).
    ask(&h, None, json!({"op": "list", "id": "hunter2-secret"})).await;
    let r = ask(&h, None, json!({"op": "search", "query": "hunter2"})).await;
    assert_eq!(r["ok"]["calls"], json!([]), "{r}");
    let r = ask(&h, None, json!({"op": "search", "query": "$sha256"})).await;
    let calls = r["ok"]["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{r}");
    let arguments = calls[0]["arguments"].as_str().unwrap();
    assert!(
        arguments.contains("\"id\":{\"$sha256\":") && !arguments.contains("hunter2"),
        "{arguments}"
    );
}
