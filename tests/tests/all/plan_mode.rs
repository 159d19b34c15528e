//! Issue 41, plan mode — a policy, not a special case: the built-in
//! `plan-mode` plugin's `enter_plan_mode` and `exit_plan_mode`, and its
//! guard, which refuses every tool that is not read-only while the scope
//! plans. The plan is approved by whoever answers the call's approvals
//! (here an approver of the test's own; the routes themselves are tested
//! in `questions`).

use serde_json::json;
use toolgate::approval::questions::{QuestionAnswer, QuestionRequest};

use crate::catalog::{Bench, failed, ok};
use crate::questions::host_with;

/// Says yes to planning; wants changes to a plan that says `v1`,
/// approves one that says `v2`.
fn person(request: &QuestionRequest) -> QuestionAnswer {
    let q = &request.questions.questions[0];
    let (selected, other) = match q.header.as_str() {
        "Plan mode" => (vec!["Plan first".to_string()], None),
        _ if q.question.contains("v1") => (vec![], Some("add a test first".to_string())),
        _ => (vec!["Approve".to_string()], None),
    };
    QuestionAnswer::Answered {
        answers: vec![q.answer(selected, other).unwrap()],
        by: "person".into(),
    }
}

/// The built-in is off unless the configuration turns it on.
const ON: &str = "[plugins.plan-mode]\nenabled = true\n";

fn scope(tag: &str) -> String {
    format!("plan-{tag}-{}", std::process::id())
}

async fn call(
    h: &toolgate::Toolgate,
    scope: &str,
    tool: &str,
    args: serde_json::Value,
) -> toolgate::CallRecord {
    let turn = toolgate::TurnOptions {
        agent_scope: scope.into(),
        ..Default::default()
    };
    h.call(toolgate::ToolCall::new("c", tool, args), &turn)
        .await
}

#[tokio::test]
async fn changes_are_refused_while_planning_until_the_user_approves_the_plan() {
    let (h, asked, dir) = host_with(person, ON).await;
    let s = scope("approve");
    std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
    ok(&call(
        &h,
        &s,
        "write",
        json!({"path": "b.txt", "content": "before"}),
    )
    .await);

    let t = ok(&call(&h, &s, "enter_plan_mode", json!({"reason": "a refactor"})).await);
    assert!(
        t.starts_with("Plan mode is on: read, search and ask"),
        "{t}"
    );
    let t = failed(
        &call(
            &h,
            &s,
            "write",
            json!({"path": "b.txt", "content": "during"}),
        )
        .await,
        "DENIED",
    );
    assert!(
        t.contains("plan mode is on: `write` can change things"),
        "{t}"
    );
    failed(
        &call(&h, &s, "bash", json!({"command": "echo hi"})).await,
        "DENIED",
    );
    ok(&call(&h, &s, "read", json!({"path": "a.txt"})).await);
    // Another agent scope is not planning.
    ok(&call(
        &h,
        &scope("other"),
        "write",
        json!({"path": "c.txt", "content": "x"}),
    )
    .await);

    let t = ok(&call(
        &h,
        &s,
        "exit_plan_mode",
        json!({"plan": "v1: change b.txt"}),
    )
    .await);
    assert!(
        t.contains("plan mode stays on. Their feedback: add a test first"),
        "{t}"
    );
    failed(
        &call(
            &h,
            &s,
            "write",
            json!({"path": "b.txt", "content": "during"}),
        )
        .await,
        "DENIED",
    );

    let r = call(
        &h,
        &s,
        "exit_plan_mode",
        json!({"plan": "v2: add a test, change b.txt"}),
    )
    .await;
    let t = ok(&r);
    assert!(
        t.starts_with("The user approved the plan; plan mode is off"),
        "{t}"
    );
    assert_eq!(r.structured_content.as_ref().unwrap()["planning"], false);
    ok(&call(
        &h,
        &s,
        "write",
        json!({"path": "b.txt", "content": "after"}),
    )
    .await);
    failed(
        &call(&h, &s, "exit_plan_mode", json!({"plan": "again"})).await,
        "NOT_PLANNING",
    );
    // The person saw the plan itself as the question.
    let seen = asked.asked.lock().unwrap().clone();
    assert!(
        seen.iter()
            .any(|q| q["questions"][0]["question"] == "v2: add a test, change b.txt"),
        "{seen:?}"
    );
}

/// With nobody to ask, entering (which only restricts) goes ahead and
/// leaving does not: the plan needs a person.
#[tokio::test]
async fn with_nobody_to_ask_plan_mode_is_entered_and_kept() {
    let b = Bench::with_config(ON).await;
    let s = scope("nobody");
    let t = ok(&b
        .call_in(&s, "enter_plan_mode", json!({"reason": "r"}))
        .await);
    assert!(t.contains("nobody could be asked"), "{t}");
    let t = failed(
        &b.call_in(&s, "exit_plan_mode", json!({"plan": "p"})).await,
        "NO_USER",
    );
    assert!(t.contains("plan mode stays on"), "{t}");
    failed(
        &b.call_in(&s, "write", json!({"path": "x.txt", "content": "x"}))
            .await,
        "DENIED",
    );
}

/// The guard is a policy like any other: off unless the operator turns it
/// on, and the operator can let a tool through while planning.
#[tokio::test]
async fn the_operator_lets_a_tool_through_or_turns_plan_mode_off() {
    let (h, _, _dir) = host_with(
        person,
        "[plugins.plan-mode]\nenabled = true\nvars = { ALLOW_TOOLS = \"todo_write\", ENTER = \"allow\" }\n",
    )
    .await;
    let s = scope("operator");
    ok(&call(&h, &s, "enter_plan_mode", json!({"reason": "r"})).await);
    ok(&call(&h, &s, "todo_write", json!({"todos": []})).await);
    failed(
        &call(&h, &s, "write", json!({"path": "x.txt", "content": "x"})).await,
        "DENIED",
    );

    // Off by default: its guard would read the store on every call.
    let (h, _, _dir) = host_with(person, "").await;
    assert!(!h.generation().tools.contains_key("enter_plan_mode"));
    ok(&call(
        &h,
        &scope("off"),
        "write",
        json!({"path": "x.txt", "content": "x"}),
    )
    .await);
}

/// Says no to every approval a hook asks for (and keeps which tool
/// asked); says "plan first", and approves a plan accepting edits (unless
/// the plan starts "ask me").
struct Careful {
    approvals: std::sync::Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl toolgate::pipeline::Approver for Careful {
    fn name(&self) -> &str {
        "careful"
    }
    async fn approve(
        &self,
        request: &toolgate::pipeline::ApprovalRequest,
    ) -> toolgate::pipeline::ApprovalAnswer {
        self.approvals
            .lock()
            .unwrap()
            .push(request.call.tool_name.clone());
        toolgate::pipeline::ApprovalAnswer::Deny("not without a plan".into())
    }
    async fn ask_questions(&self, request: &QuestionRequest) -> QuestionAnswer {
        let q = &request.questions.questions[0];
        let labels: Vec<&str> = q.options.iter().map(|o| o.label.as_str()).collect();
        let pick = match q.header.as_str() {
            "Plan mode" => "Plan first",
            _ => {
                assert_eq!(
                    labels,
                    ["Approve", "Approve, accept edits", "Keep planning"],
                    "ACCEPT_EDITS = \"offer\" offers it"
                );
                if q.question.starts_with("ask me") {
                    "Approve"
                } else {
                    "Approve, accept edits"
                }
            }
        };
        QuestionAnswer::Answered {
            answers: vec![q.answer(vec![pick.into()], None).unwrap()],
            by: "careful".into(),
        }
    }
}

/// The "accept edits" mode the operator configures: a plan approved with
/// it lets the scope's file edits run without the approval
/// `ask-destructive` would ask for, and nothing else (`bash` still asks;
/// another scope still asks); entering plan mode again ends it.
#[tokio::test]
async fn a_plan_approved_accepting_edits_lets_edits_run_without_asking() {
    let dir = toolgate_tests::TempDir::new("accept-edits");
    let careful = std::sync::Arc::new(Careful {
        approvals: Default::default(),
    });
    let h = toolgate::Toolgate::builder()
        .runtime_options(toolgate_tests::test_runtime())
        .workdir(dir.path())
        .config(
            toolgate::HostConfig::parse(
                "[plugins.plan-mode]\nenabled = true\nvars = { ACCEPT_EDITS = \"offer\" }\n",
                "test",
            )
            .unwrap(),
        )
        .approver(careful.clone())
        .build()
        .await
        .expect("host builds");
    let s = scope("accept");
    let write = |content: &str| json!({"path": "b.txt", "content": content});
    // Before any plan, an edit asks, and the careful person says no.
    failed(&call(&h, &s, "write", write("before")).await, "DENIED");
    assert_eq!(*careful.approvals.lock().unwrap(), ["write"]);

    ok(&call(&h, &s, "enter_plan_mode", json!({"reason": "r"})).await);
    let t = ok(&call(&h, &s, "exit_plan_mode", json!({"plan": "change b.txt"})).await);
    assert!(t.contains("File edits run without asking."), "{t}");

    ok(&call(&h, &s, "write", write("after")).await);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("b.txt")).unwrap(),
        "after"
    );
    ok(&call(
        &h,
        &s,
        "edit",
        json!({"path": "b.txt", "old_string": "after", "new_string": "edited"}),
    )
    .await);
    assert_eq!(
        *careful.approvals.lock().unwrap(),
        ["write"],
        "the edits were not asked about"
    );
    // Not a shell command, not another scope.
    failed(
        &call(&h, &s, "bash", json!({"command": "true"})).await,
        "DENIED",
    );
    failed(
        &call(&h, &scope("else"), "write", write("x")).await,
        "DENIED",
    );
    assert_eq!(
        *careful.approvals.lock().unwrap(),
        ["write", "bash", "write"]
    );

    // A new plan, approved without accepting edits: edits ask again.
    ok(&call(&h, &s, "enter_plan_mode", json!({"reason": "again"})).await);
    let t = ok(&call(
        &h,
        &s,
        "exit_plan_mode",
        json!({"plan": "ask me: one more"}),
    )
    .await);
    assert!(!t.contains("without asking"), "{t}");
    failed(&call(&h, &s, "write", write("asked")).await, "DENIED");
    assert_eq!(
        *careful.approvals.lock().unwrap(),
        ["write", "bash", "write", "write"]
    );
}

/// A setting that is none of the words is said, not taken as `never`.
#[tokio::test]
async fn a_misspelt_accept_edits_setting_is_said() {
    let (h, _, _dir) = host_with(
        person,
        "[plugins.plan-mode]\nenabled = true\nvars = { ACCEPT_EDITS = \"sometimes\" }\n",
    )
    .await;
    let s = scope("misspelt");
    ok(&call(&h, &s, "enter_plan_mode", json!({"reason": "r"})).await);
    let t = failed(
        &call(&h, &s, "exit_plan_mode", json!({"plan": "v2: the plan"})).await,
        "CONFIG",
    );
    assert!(
        t.contains("`sometimes`") && t.contains("`never`, `offer`, `always`"),
        "{t}"
    );
}
