//! Plan mode — a policy, not a special case: `enter_plan_mode(reason)`,
//! `exit_plan_mode(plan)`, and a guard that, while an agent scope plans,
//! refuses every tool that is not read-only (by its `readOnlyHint`, or
//! named by the operator in `ALLOW_TOOLS`), telling the model it is
//! planning. The operator replaces the guard like any other policy (a
//! plugin of this name in a plugin directory, or `enabled = false`).
//!
//! The mode is the host's state, not an instance's: the `kv` seam under
//! the call's agent scope (key `mode`), so it holds across instances,
//! reloads, restarts and replicas sharing `[state] url`. Leaving it is the
//! user's decision: `exit_plan_mode` puts the plan before whoever answers
//! the call's approvals (the `questions` seam — the terminal, the MCP
//! client); approved, the mode ends; otherwise the user's feedback goes
//! back to the model and the mode stays. With nobody to ask, it stays.
//! Entering asks too (`ENTER = "ask"`, the default) unless the operator
//! sets `ENTER = "allow"`; with nobody to ask, entering (which only
//! restricts) goes ahead.
//!
//! **Accept edits.** An approved plan may end in the "accept edits" mode
//! the operator configures (`ACCEPT_EDITS = "offer"`: the user picks it
//! when approving; `"always"`: every approval does): the scope's file
//! edits (`EDIT_TOOLS`, default `write,edit`) then run without the
//! approval a pre-execute hook would ask for, as the user agreed to the
//! plan that makes them. It is a pre-execute hook, outermost (priority
//! 20): it turns an inner `ask` into `allow` for an edit tool only, never
//! a deny, and nothing for any other tool (a `bash` still asks). The mode
//! lasts until the scope enters plan mode again.

use serde::{Deserialize, Serialize};
use toolgate_sdk::{
    Annotations, Call, Content, ContentBlock, Guard, PreChain, PreDecision, PreExecuteHook, Schema,
    Tool, ToolError, kv, questions, setting,
};

/// The key of the mode in the scope's store.
const KEY: &str = "mode";
/// The key that says the scope accepts edits (value [`ACCEPT`]).
const EDITS_KEY: &str = "edits";
const ACCEPT: &[u8] = b"accept";
/// The approval that also accepts edits (`ACCEPT_EDITS = "offer"`).
const APPROVE_ACCEPTING: &str = "Approve, accept edits";
/// Characters of a reason.
pub const MAX_REASON_CHARS: usize = 1000;
/// Characters of a plan (what a person can read before approving it).
pub const MAX_PLAN_CHARS: usize = 10_000;

/// The mode as it is kept while planning.
#[derive(Serialize, Deserialize, Schema)]
pub struct Planning {
    /// Why the agent plans first.
    reason: String,
    /// Seconds since the Unix epoch.
    since: u64,
}

/// Enter plan mode: until the user approves a plan, no tool that changes
/// anything runs (reading, searching and asking do). Use it before
/// non-trivial work whose approach the user should agree to.
#[derive(Deserialize, Schema)]
pub struct EnterPlanMode {
    /// Why you want to plan first.
    reason: String,
}

/// Present your plan (Markdown) for the user's approval and, if they
/// approve it, leave plan mode to carry it out. If they want changes,
/// their feedback comes back and plan mode stays.
#[derive(Deserialize, Schema)]
pub struct ExitPlanMode {
    /// The plan: the steps you will take, the files you will change.
    plan: String,
}

/// What the plan-mode tools return.
#[derive(Serialize, Deserialize, Schema)]
pub struct ModeView {
    /// Whether the scope is planning now.
    planning: bool,
    /// What happened, for the model.
    message: String,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn planning() -> bool {
    kv::get(KEY).is_some()
}

fn check_text(what: &str, text: &str, max: usize) -> Result<(), ToolError> {
    let n = text.chars().count();
    if text.trim().is_empty() || n > max {
        return Err(ToolError::invalid_input(format!(
            "`{what}` is 1 to {max} characters, got {n}"
        )));
    }
    Ok(())
}

/// One question with two options; the answer's label and own words.
fn ask(
    header: &str,
    question: &str,
    yes: (&str, &str),
    no: (&str, &str),
) -> Result<(String, Option<String>), questions::QuestionError> {
    ask_options(header, question, &[yes, no])
}

/// One question with these options (label, description).
fn ask_options(
    header: &str,
    question: &str,
    options: &[(&str, &str)],
) -> Result<(String, Option<String>), questions::QuestionError> {
    let options: Vec<_> = options
        .iter()
        .map(|(label, description)| serde_json::json!({"label": label, "description": description}))
        .collect();
    let asked = serde_json::json!({"questions": [{
        "header": header,
        "question": question,
        "options": options
    }]});
    let answer = questions::ask(&asked)?;
    let a = &answer["answers"][0];
    Ok((
        a["selected"][0].as_str().unwrap_or("").to_string(),
        a["other"].as_str().map(str::to_string),
    ))
}

fn store_failure(e: String) -> ToolError {
    ToolError::new("STORE", format!("the mode could not be kept: {e}"))
}

impl Tool for EnterPlanMode {
    const NAME: &'static str = "enter_plan_mode";
    type Output = ModeView;

    fn execute(self, _call: &Call) -> Result<ModeView, ToolError> {
        check_text("reason", &self.reason, MAX_REASON_CHARS)?;
        if planning() {
            return Ok(ModeView {
                planning: true,
                message: "Plan mode is already on.".into(),
            });
        }
        let mut note = String::new();
        if setting("ENTER", "ask") != "allow" {
            match ask(
                "Plan mode",
                &format!(
                    "The agent asks to plan before changing anything: {}",
                    self.reason
                ),
                (
                    "Plan first",
                    "only read and research until you approve a plan",
                ),
                ("No", "go on without a plan"),
            ) {
                Ok((label, _)) if label == "Plan first" => {}
                Ok((_, other)) => {
                    return Ok(ModeView {
                        planning: false,
                        message: match other {
                            Some(o) => format!("The user did not want plan mode: {o}"),
                            None => "The user did not want plan mode; go on without it.".into(),
                        },
                    });
                }
                Err(questions::QuestionError::Declined(why)) => {
                    return Ok(ModeView {
                        planning: false,
                        message: format!("The user declined plan mode ({why})."),
                    });
                }
                // Nobody to ask: entering only restricts, so it goes ahead.
                Err(e) => note = format!(" (nobody could be asked: {})", questions::message(&e)),
            }
        }
        let mode = Planning {
            reason: self.reason,
            since: now(),
        };
        kv::set_json(KEY, &mode).map_err(store_failure)?;
        // A new plan: edits are asked about again until it is approved.
        kv::delete(EDITS_KEY);
        Ok(ModeView {
            planning: true,
            message: format!(
                "Plan mode is on{note}: read, search and ask, but change nothing. When the plan is ready, present it with exit_plan_mode."
            ),
        })
    }

    fn render(v: ModeView) -> Vec<ContentBlock> {
        vec![Content::text(v.message)]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(ModeView::schema())
    }
}

impl Tool for ExitPlanMode {
    const NAME: &'static str = "exit_plan_mode";
    type Output = ModeView;

    fn execute(self, _call: &Call) -> Result<ModeView, ToolError> {
        check_text("plan", &self.plan, MAX_PLAN_CHARS)?;
        if !planning() {
            return Err(ToolError::new(
                "NOT_PLANNING",
                "plan mode is not on; there is nothing to exit",
            ));
        }
        let accept_edits = setting("ACCEPT_EDITS", "never");
        if !matches!(accept_edits, "never" | "offer" | "always") {
            return Err(ToolError::new(
                "CONFIG",
                format!(
                    "the operator's ACCEPT_EDITS under [plugins.plan-mode.vars] is `{accept_edits}`; it is one of `never`, `offer`, `always` (plan mode stays on)"
                ),
            ));
        }
        let answer = if setting("EXIT", "ask") == "allow" {
            Ok(("Approve".to_string(), None))
        } else if accept_edits == "offer" {
            ask_options(
                "Plan",
                &self.plan,
                &[
                    ("Approve", "leave plan mode; edits are asked about as usual"),
                    (
                        APPROVE_ACCEPTING,
                        "leave plan mode; file edits run without asking",
                    ),
                    ("Keep planning", "stay in plan mode"),
                ],
            )
        } else {
            ask(
                "Plan",
                &self.plan,
                ("Approve", "leave plan mode and carry out this plan"),
                ("Keep planning", "stay in plan mode"),
            )
        };
        let stay = |message: String| ModeView {
            planning: true,
            message,
        };
        match answer {
            Ok((label, other)) if label == "Approve" || label == APPROVE_ACCEPTING => {
                let accepting = label == APPROVE_ACCEPTING || accept_edits == "always";
                if accepting {
                    kv::set(EDITS_KEY, ACCEPT).map_err(store_failure)?;
                }
                kv::delete(KEY);
                let mut message =
                    String::from("The user approved the plan; plan mode is off: carry it out.");
                if accepting {
                    message.push_str(" File edits run without asking.");
                }
                if let Some(o) = other {
                    message.push_str(&format!(" They added: {o}"));
                }
                Ok(ModeView {
                    planning: false,
                    message,
                })
            }
            Ok((_, Some(feedback))) => Ok(stay(format!(
                "The user wants changes to the plan; plan mode stays on. Their feedback: {feedback}"
            ))),
            Ok(_) => Ok(stay(
                "The user wants to keep planning; plan mode stays on.".into(),
            )),
            Err(questions::QuestionError::Declined(why)) => Ok(stay(format!(
                "The user did not approve the plan ({why}); plan mode stays on."
            ))),
            Err(e) => Err(ToolError::new(
                "NO_USER",
                format!(
                    "the plan needs the user's approval, and {}; plan mode stays on (the operator may set EXIT = \"allow\" under [plugins.plan-mode.vars])",
                    questions::message(&e)
                ),
            )),
        }
    }

    fn render(v: ModeView) -> Vec<ContentBlock> {
        vec![Content::text(v.message)]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(ModeView::schema())
    }
}

/// While the call's scope plans: refuses every tool that is not read-only.
pub struct PlanGuard;

impl Guard for PlanGuard {
    fn check(call: &Call) -> Option<String> {
        let tool = call.tool();
        if tool == EnterPlanMode::NAME || tool == ExitPlanMode::NAME {
            return None;
        }
        if call.annotations().contains(Annotations::READ_ONLY) {
            return None;
        }
        if setting("ALLOW_TOOLS", "")
            .split(',')
            .any(|t| t.trim() == tool)
        {
            return None;
        }
        if !planning() {
            return None;
        }
        Some(format!(
            "plan mode is on: `{tool}` can change things, so it does not run while you plan. Read, search and ask; then present your plan with exit_plan_mode for the user's approval"
        ))
    }
}

/// After a plan approved with "accept edits": an inner `ask` for an edit
/// tool becomes `allow`; every other answer, and every other tool, is the
/// inner one's.
pub struct AcceptEdits;

impl PreExecuteHook for AcceptEdits {
    fn pre_execute(call: &Call, chain: PreChain) -> PreDecision {
        let inner = chain.next();
        if !matches!(inner, PreDecision::Ask(_)) {
            return inner;
        }
        let tool = call.tool();
        let edit = setting("EDIT_TOOLS", "write,edit")
            .split(',')
            .any(|t| t.trim() == tool);
        if edit && kv::get(EDITS_KEY).as_deref() == Some(ACCEPT) {
            return PreDecision::Allow;
        }
        inner
    }
}

toolgate_sdk::export! {
    tools: [EnterPlanMode, ExitPlanMode],
    guard: PlanGuard,
    pre_execute: AcceptEdits,
}
