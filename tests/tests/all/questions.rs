//! Issue 41, `ask_user_question`: the built-in `questions` plugin over the
//! host's `questions` seam, through the call's approver. Here with
//! approvers of the test's own (one that answers, one that declines, one
//! that lies, one that never answers) and with one that cannot ask
//! anybody (an error at once); the terminal route is in `cli/tests`, the
//! MCP client's (a form elicitation answered by the official Python SDK)
//! in `serve::questions_*`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};
use toolgate::approval::questions::{Answer, QuestionAnswer, QuestionRequest};
use toolgate::pipeline::{ApprovalAnswer, ApprovalRequest, Approver};
use toolgate::{ToolCall, Toolgate, TurnOptions};
use toolgate_tests::{TempDir, test_runtime};

use crate::catalog::{Bench, failed, ok};

/// Answers every question with what `answer` makes of it, and keeps what
/// it was asked.
pub(crate) struct Person {
    answer: fn(&QuestionRequest) -> QuestionAnswer,
    pub(crate) asked: Mutex<Vec<Value>>,
}

#[async_trait]
impl Approver for Person {
    fn name(&self) -> &str {
        "person"
    }
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalAnswer {
        ApprovalAnswer::Approve
    }
    async fn ask_questions(&self, request: &QuestionRequest) -> QuestionAnswer {
        self.asked
            .lock()
            .unwrap()
            .push(serde_json::to_value(&request.questions).unwrap());
        (self.answer)(request)
    }
}

/// A host with the built-ins whose approver is a person answering with
/// `answer`.
pub(crate) async fn host_with(
    answer: fn(&QuestionRequest) -> QuestionAnswer,
    config: &str,
) -> (Toolgate, Arc<Person>, TempDir) {
    let dir = TempDir::new("questions");
    let person = Arc::new(Person {
        answer,
        asked: Mutex::new(Vec::new()),
    });
    let host = Toolgate::builder()
        .runtime_options(test_runtime())
        .workdir(dir.path())
        .config(toolgate::HostConfig::parse(config, "test").unwrap())
        .approver(person.clone())
        .build()
        .await
        .expect("host builds");
    (host, person, dir)
}

async fn ask(host: &Toolgate, args: Value) -> toolgate::CallRecord {
    host.call(
        ToolCall::new("q", "ask_user_question", args),
        &TurnOptions::default(),
    )
    .await
}

fn stack_question() -> Value {
    json!({"questions": [
        {"header": "Stack", "question": "Which language?", "options": [
            {"label": "Rust", "description": "compiled, safe"},
            {"label": "Python", "description": "quick to write"}
        ]},
        {"header": "Extras", "question": "Which extras?", "multiSelect": true, "options": [
            {"label": "CI", "description": "a workflow"},
            {"label": "Docs", "description": "a README"},
            {"label": "Bench", "description": "a benchmark"}
        ]}
    ]})
}

fn chose(request: &QuestionRequest) -> QuestionAnswer {
    let q = &request.questions.questions;
    QuestionAnswer::Answered {
        answers: vec![
            q[0].answer(vec!["Rust".into()], None).unwrap(),
            q[1].answer(
                vec!["CI".into(), "Docs".into()],
                Some("and a license".into()),
            )
            .unwrap(),
        ],
        by: "person".into(),
    }
}

#[tokio::test]
async fn a_question_is_answered_by_the_calls_approver() {
    let (h, person, _dir) = host_with(chose, "").await;
    let r = ask(&h, stack_question()).await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(
        r.text(),
        "The user answered:\n- Stack: Rust\n- Extras: CI, Docs; in their words: and a license\n"
    );
    let v = r.structured_content.clone().unwrap();
    assert_eq!(v["answeredBy"], "person", "{v}");
    assert_eq!(v["answers"][1]["selected"], json!(["CI", "Docs"]), "{v}");
    // The person saw the questions as the model wrote them.
    let asked = person.asked.lock().unwrap().clone();
    assert_eq!(asked[0]["questions"][1]["multiSelect"], true, "{asked:?}");
}

#[tokio::test]
async fn a_declined_question_is_a_clear_answer_and_a_lie_is_refused() {
    let (h, _, _dir) = host_with(
        |_| QuestionAnswer::Declined {
            by: "person".into(),
            reason: "not now".into(),
        },
        "",
    )
    .await;
    let t = ok(&ask(&h, stack_question()).await);
    assert!(
        t.starts_with("The user declined to answer (person: not now)"),
        "{t}"
    );

    // An approver answering a label that was not offered: nothing taken.
    let (h, _, _dir) = host_with(
        |request| QuestionAnswer::Answered {
            answers: request
                .questions
                .questions
                .iter()
                .map(|q| Answer {
                    header: q.header.clone(),
                    question: q.question.clone(),
                    selected: vec!["rm -rf /".into()],
                    other: None,
                })
                .collect(),
            by: "liar".into(),
        },
        "",
    )
    .await;
    let t = failed(&ask(&h, stack_question()).await, "NO_USER");
    assert!(t.contains("answered something that was not asked"), "{t}");
}

/// Nobody to ask (the approver answers approvals only): an error at once,
/// saying what would make it possible; bad shapes are refused before
/// anybody is asked.
#[tokio::test]
async fn nobody_to_ask_is_said_at_once_and_bad_shapes_never_reach_a_person() {
    let b = Bench::new().await;
    let started = Instant::now();
    let t = failed(
        &b.call("ask_user_question", stack_question()).await,
        "NO_USER",
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(t.contains("no user can be asked here"), "{t}");
    assert!(
        t.contains("--approve prompt") && t.contains("--approve client"),
        "{t}"
    );

    let (h, person, _dir) = host_with(chose, "").await;
    let two = json!([{"label": "A", "description": "a"}, {"label": "B", "description": "b"}]);
    for (args, why) in [
        (json!({"questions": []}), "1 to 4 questions"),
        (
            json!({"questions": [{"header": "H", "question": "?", "options": [{"label": "A", "description": ""}]}]}),
            "2 to 4 options",
        ),
        (
            json!({"questions": [{"header": "Much too long", "question": "?", "options": two}]}),
            "header is 1 to 12",
        ),
        (
            json!({"questions": [{"header": "H", "question": "?", "options": [{"label": "A", "description": ""}, {"label": "Other", "description": ""}]}]}),
            "added for you",
        ),
        (
            json!({"questions": (0..5).map(|i| json!({"header": format!("H{i}"), "question": "?", "options": two})).collect::<Vec<_>>()}),
            "not 5",
        ),
    ] {
        let t = failed(&ask(&h, args.clone()).await, "INVALID_ARGS");
        assert!(t.contains(why), "{args}: {t}");
    }
    // Not the shape at all: refused by the schema, before the tool runs.
    failed(
        &ask(&h, json!({"questions": [{"header": "H"}]})).await,
        "INVALID_ARGS",
    );
    failed(&ask(&h, json!({"question": "?"})).await, "INVALID_ARGS");
    assert!(person.asked.lock().unwrap().is_empty(), "nobody was asked");
}

/// A person who never answers: the call's deadline ends the wait.
#[tokio::test]
async fn a_question_nobody_answers_ends_with_the_calls_deadline() {
    struct Never;
    #[async_trait]
    impl Approver for Never {
        fn name(&self) -> &str {
            "never"
        }
        async fn approve(&self, _request: &ApprovalRequest) -> ApprovalAnswer {
            ApprovalAnswer::Approve
        }
        async fn ask_questions(&self, _request: &QuestionRequest) -> QuestionAnswer {
            std::future::pending().await
        }
    }
    let dir = TempDir::new("questions-never");
    let h = Toolgate::builder()
        .runtime_options(test_runtime())
        .workdir(dir.path())
        .config(
            toolgate::HostConfig::parse("[tools.ask_user_question]\ntimeout_ms = 300\n", "test")
                .unwrap(),
        )
        .approver(Arc::new(Never))
        .build()
        .await
        .unwrap();
    let started = Instant::now();
    let r = ask(&h, stack_question()).await;
    assert!(r.is_error, "{r:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    // `[questions] timeout_ms` ends it first, saying so.
    let h = Toolgate::builder()
        .runtime_options(test_runtime())
        .workdir(dir.path())
        .config(toolgate::HostConfig::parse("[questions]\ntimeout_ms = 200\n", "test").unwrap())
        .approver(Arc::new(Never))
        .build()
        .await
        .unwrap();
    let started = Instant::now();
    let text = failed(&ask(&h, stack_question()).await, "NO_ANSWER");
    assert!(
        text.contains("nobody answered within 200 ms (`[questions] timeout_ms`)"),
        "{text}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    let e = toolgate::HostConfig::parse("[questions]\ntimeout_ms = 0\n", "test").unwrap_err();
    assert!(e.to_string().contains("/questions/timeout_ms"), "{e}");
}

/// Under `--approve queue` a question is an entry of the approval queue:
/// `toolgate approvals list` shows it with its options (`--json`: its
/// questions), a plain approval is refused, `toolgate approvals answer`
/// answers it (a label not offered refused first); the client (which
/// answers elicitation) is never asked, and its call returns the answers.
#[test]
fn a_question_is_answered_from_the_approval_queue() {
    let python = crate::serve::python();
    let server =
        crate::approvals::Served::start("questions-queue", "[approval]\ntimeout_ms = 60000\n");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/questions_client.py");
    let client = std::process::Command::new(python)
        .arg(script)
        .args(["--answer", r#"{"never": "asked"}"#])
        .args(["--http", &format!("http://{}/mcp", server.addr)])
        .args(["--token", &server.mcp_token])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let list = server.pending(1);
    let id = list[0]["id"].as_str().unwrap().to_string();
    assert_eq!(list[0]["tool"], "ask_user_question");
    assert_eq!(list[0]["questions"][1]["header"], "Extras", "{list:?}");
    assert_eq!(list[0]["questions"][1]["multiSelect"], true, "{list:?}");
    let out = server.approvals(&["list"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("[Stack] Which language?"), "{shown}");
    assert!(
        shown.contains("--answer 'Extras=Docs'  a README"),
        "{shown}"
    );
    let stderr = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let out = server.approvals(&["approve", &id]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("holds questions for the user: answer them"),
        "{}",
        stderr(&out)
    );
    let out = server.approvals(&[
        "answer",
        &id,
        "--answer",
        "Stack=Go",
        "--answer",
        "Extras=CI",
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("`Go` is not an option of `Stack`"),
        "{}",
        stderr(&out)
    );
    let out = server.approvals(&[
        "answer",
        &id,
        "--answer",
        "Stack=Rust",
        "--answer",
        "Extras=CI",
        "--answer",
        "Extras=Docs",
        "--other",
        "Extras=and a license",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = client.wait_with_output().unwrap();
    assert!(out.status.success(), "the client failed: {}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["elicitations"],
        json!([]),
        "the client is never asked"
    );
    let result = &report["result"];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        result["content"][0]["text"],
        "The user answered:\n- Stack: Rust\n- Extras: CI, Docs; in their words: and a license\n"
    );
    assert_eq!(
        result["structuredContent"]["answeredBy"], "api:tester",
        "{result}"
    );
}

/// A component written against the WIT with plain wit-bindgen (not the
/// SDK): questions past the size cap are refused before anyone is asked,
/// and a call asking in a loop reaches the person at most 8 times. Without
/// `questions = true` it does not load, naming the line.
#[tokio::test]
async fn a_hostile_component_asks_within_the_caps() {
    use toolgate_tests::{PluginDir, fixtures, run};
    let dir = PluginDir::new();
    dir.add("asker", fixtures::QUESTIONS_ASKER);
    let refused = toolgate_tests::builder(&dir, "").build().await;
    let problems = match refused {
        Ok(h) => format!("{:?}", h.problems()),
        Err(e) => e.to_string(),
    };
    assert!(problems.contains("questions = true"), "{problems}");

    let person = Arc::new(Person {
        answer: chose_first,
        asked: Mutex::new(Vec::new()),
    });
    let h = toolgate_tests::builder(&dir, "[plugins.asker.grants]\nquestions = true\n")
        .approver(person.clone())
        .build()
        .await
        .expect("host builds");
    let one = json!({"questions": [{"header": "H", "question": "?", "options": [
        {"label": "A", "description": ""}, {"label": "B", "description": ""}]}]})
    .to_string();
    let r = run(&h, "ask", json!({"questions": one, "times": 20})).await;
    assert!(!r.is_error, "{r:?}");
    let answers: Vec<Value> = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(answers.len(), 20);
    assert!(
        answers[..8].iter().all(|a| a.get("ok").is_some()),
        "{answers:?}"
    );
    assert!(
        answers[8..].iter().all(|a| a["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("at most 8 times"))),
        "{answers:?}"
    );
    assert_eq!(person.asked.lock().unwrap().len(), 8);
    let r = run(&h, "ask", json!({"questions": one, "pad": 70_000})).await;
    let answers: Vec<Value> = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(
        answers[0]["error"]["kind"], "invalid-request",
        "{answers:?}"
    );
    assert_eq!(person.asked.lock().unwrap().len(), 8, "nobody was asked");
}

fn chose_first(request: &QuestionRequest) -> QuestionAnswer {
    QuestionAnswer::Answered {
        answers: request
            .questions
            .questions
            .iter()
            .map(|q| q.answer(vec![q.options[0].label.clone()], None).unwrap())
            .collect(),
        by: "person".into(),
    }
}

/// A Code Mode program asks a question (a nested call, asked through the
/// same approver) and uses the answer.
#[tokio::test]
async fn a_program_asks_a_question_in_code_mode() {
    let (h, person, _dir) = host_with(chose, "code_mode = true\n").await;
    let r = h
        .call(
            ToolCall::new(
                "p",
                "run_code",
                json!({"code": format!(
                    "const a = await tools.ask_user_question({});\nreturn a.answers.map(x => x.selected.join('+'));",
                    stack_question()
                )}),
            ),
            &TurnOptions::default(),
        )
        .await;
    let result = crate::code_mode::result_of(&r);
    assert_eq!(result, json!(["Rust", "CI+Docs"]), "{}", r.text());
    assert_eq!(person.asked.lock().unwrap().len(), 1);
}

/// The audit record keeps what the person answered, and the digest of
/// each skill a call loaded (its `notes`), beside the call's arguments.
#[tokio::test]
async fn the_record_keeps_the_answers_and_the_skills_given() {
    let record = TempDir::new("questions-record");
    let skills = TempDir::new("questions-skills");
    std::fs::create_dir_all(skills.path().join("style")).unwrap();
    std::fs::write(
        skills.path().join("style/SKILL.md"),
        "---\nname: style\ndescription: House style.\n---\nTabs.\n",
    )
    .unwrap();
    let config = format!(
        "[audit]\npath = {:?}\n[skills]\ndirs = [{:?}]\n",
        record.path().join("audit.jsonl").display().to_string(),
        skills.path().display().to_string()
    );
    let (h, _, _dir) = host_with(chose, &config).await;
    ok(&ask(&h, stack_question()).await);
    let loaded = h
        .call(
            ToolCall::new("s", "skill", json!({"name": "style"})),
            &TurnOptions::default(),
        )
        .await;
    ok(&loaded);
    let digest = h.skills().get("style").unwrap().digest.clone();
    h.shutdown().await;
    let text = std::fs::read_to_string(record.path().join("audit.jsonl")).unwrap();
    let calls: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "call")
        .collect();
    let asked = calls
        .iter()
        .find(|r| r["tool"] == "ask_user_question")
        .expect("the question's record");
    assert_eq!(
        asked["arguments"]["questions"][0]["header"], "Stack",
        "{asked}"
    );
    assert_eq!(asked["notes"][0]["kind"], "answer", "{asked}");
    assert_eq!(asked["notes"][0]["answeredBy"], "person", "{asked}");
    assert_eq!(
        asked["notes"][0]["answers"][1]["selected"],
        json!(["CI", "Docs"]),
        "{asked}"
    );
    let skill = calls
        .iter()
        .find(|r| r["tool"] == "skill")
        .expect("the skill's record");
    assert_eq!(
        skill["notes"],
        json!([{"kind": "skill", "name": "style", "digest": digest}]),
        "{skill}"
    );
}
