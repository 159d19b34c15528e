//! Questions for the user (`ask_user_question`, the `questions` seam):
//! their shape, checked, and how they reach whoever can answer.
//!
//! A question goes where an approval would: to the call's approver (the
//! turn's, else the host's), through [`super::Approver::ask_questions`] — the
//! terminal (`run` on a TTY) numbers the options, an MCP client gets one
//! form elicitation whose schema is the options, the approval queue keeps
//! an entry answered from the console or `toolgate approvals answer`
//! ([`super::queue::ApprovalQueue::ask_user`]). An approver that cannot
//! ask a person (`--approve allow|deny`, none at all) answers
//! [`QuestionAnswer::Unavailable`] at once, with what would make it
//! possible: a question never waits on nobody.
//!
//! The shape is the one the agents people use give their models (Claude
//! Code's `AskUserQuestion`, Gemini CLI's `ask_user`): 1 to
//! [`MAX_QUESTIONS`] questions, each with a short header, the question,
//! 2 to [`MAX_OPTIONS`] options (label and description) and `multiSelect`;
//! an "Other" free-text answer is always offered. Every size is capped
//! (the constants); the answer is checked against the options asked (a
//! client answering a label it was not offered is refused).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::call::{CallInfo, Client};

/// Questions in one ask.
pub const MAX_QUESTIONS: usize = 4;
/// Options of one question (at least 2).
pub const MAX_OPTIONS: usize = 4;
/// A header's characters (a chip, a tab title).
pub const MAX_HEADER_CHARS: usize = 12;
/// A question's characters (a plan put to the user for approval is one).
pub const MAX_QUESTION_CHARS: usize = 10_000;
/// An option's label, in characters.
pub const MAX_LABEL_CHARS: usize = 100;
/// An option's description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1000;
/// A free-text ("Other") answer, in characters.
pub const MAX_OTHER_CHARS: usize = 4000;
/// The questions' JSON as the seam takes it, in bytes.
pub const MAX_QUESTIONS_BYTES: usize = 64 << 10;
/// Asks one call may make: a component asking in a loop would put
/// question after question before a person.
pub const MAX_ASKS_PER_CALL: usize = 8;
/// The label of the free-text answer every question offers.
pub const OTHER: &str = "Other";

/// One ask: the questions, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Questions {
    pub questions: Vec<Question>,
}

/// One question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Question {
    /// A short label (at most [`MAX_HEADER_CHARS`] characters).
    pub header: String,
    /// The question itself.
    pub question: String,
    /// The choices (2 to [`MAX_OPTIONS`]).
    pub options: Vec<QuestionOption>,
    /// Several options may be chosen.
    #[serde(default)]
    pub multi_select: bool,
}

/// One choice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuestionOption {
    pub label: String,
    pub description: String,
}

/// What the user answered to one question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    pub header: String,
    pub question: String,
    /// The labels chosen (one unless `multiSelect`; none when only a
    /// free-text answer was given).
    pub selected: Vec<String>,
    /// The free-text answer, if the user wrote one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other: Option<String>,
}

/// What a person gave as the answer to one question, named by its
/// header (the approval queue's `answer` verdict: the console's form,
/// `toolgate approvals answer`); checked by [`Questions::take`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Given {
    pub header: String,
    /// Labels chosen.
    #[serde(default)]
    pub selected: Vec<String>,
    /// Free text ("Other").
    #[serde(default)]
    pub other: Option<String>,
}

/// What an ask came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuestionAnswer {
    /// Answered, each question in order, by whom.
    Answered { answers: Vec<Answer>, by: String },
    /// The user declined or cancelled (who, and why).
    Declined { by: String, reason: String },
    /// Nobody answered in time (`[questions] timeout_ms`, the queue's
    /// `[approval] timeout_ms`): why.
    TimedOut(String),
    /// Nobody can be asked here: why, and what would make it possible.
    Unavailable(String),
}

/// One ask of a call.
pub struct QuestionRequest {
    pub call: Arc<CallInfo>,
    pub questions: Questions,
    /// Who sent the call, when the turn says (a served MCP client).
    pub client: Option<Arc<Client>>,
}

/// Counts one more ask of `call` ([`CallInfo::asks`]); `false` past
/// [`MAX_ASKS_PER_CALL`].
pub fn may_ask(call: &CallInfo) -> bool {
    call.asks.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < MAX_ASKS_PER_CALL
}

/// Why nobody can be asked where the approver answers approvals only.
pub fn nobody(approver: &str) -> String {
    format!(
        "no user can be asked here: the approver `{approver}` answers approvals only. Questions \
         reach a person on a terminal (`toolgate run` on a TTY, or `--approve prompt`), an MCP \
         client that answers elicitation (`toolgate serve --approve client`), or the approval \
         queue (`--approve queue`: the console, `toolgate approvals answer`)"
    )
}

/// Why a stateless (2026-07-28) request's call cannot ask through the
/// approval queue: it cannot wait inside one request.
pub fn not_stateless() -> String {
    "no user can be asked here: this client's calls are stateless requests (protocol \
     2026-07-28), which cannot wait for an answer from the approval queue; ask from a \
     session that waits (a 2025 client, `toolgate run`), or answer through the client's \
     elicitation (`--approve client`)"
        .into()
}

impl Questions {
    /// Parses and checks the seam's JSON; `Err` says which question and
    /// what is wrong.
    pub fn parse(text: &str) -> Result<Questions, String> {
        if text.len() > MAX_QUESTIONS_BYTES {
            return Err(format!(
                "the questions are {} bytes; at most {MAX_QUESTIONS_BYTES}",
                text.len()
            ));
        }
        let q: Questions = serde_json::from_str(text).map_err(|e| e.to_string())?;
        q.check()?;
        Ok(q)
    }

    /// The limits of the module's docs.
    pub fn check(&self) -> Result<(), String> {
        let n = self.questions.len();
        if n == 0 || n > MAX_QUESTIONS {
            return Err(format!("ask 1 to {MAX_QUESTIONS} questions, not {n}"));
        }
        let chars = |s: &str| s.chars().count();
        let mut headers = std::collections::HashSet::new();
        for (i, q) in self.questions.iter().enumerate() {
            let at = format!("question {i} (`questions/{i}`)");
            let h = chars(q.header.trim());
            if h == 0 || chars(&q.header) > MAX_HEADER_CHARS {
                return Err(format!(
                    "{at}: its header is 1 to {MAX_HEADER_CHARS} characters, got {}",
                    chars(&q.header)
                ));
            }
            if !headers.insert(q.header.as_str()) {
                return Err(format!("{at}: the header `{}` is used twice", q.header));
            }
            if q.question.trim().is_empty() || chars(&q.question) > MAX_QUESTION_CHARS {
                return Err(format!(
                    "{at}: the question is 1 to {MAX_QUESTION_CHARS} characters"
                ));
            }
            let o = q.options.len();
            if !(2..=MAX_OPTIONS).contains(&o) {
                return Err(format!(
                    "{at}: give 2 to {MAX_OPTIONS} options, not {o} (an \"{OTHER}\" answer is added for you)"
                ));
            }
            let mut labels = std::collections::HashSet::new();
            for (j, opt) in q.options.iter().enumerate() {
                let l = chars(opt.label.trim());
                if l == 0 || chars(&opt.label) > MAX_LABEL_CHARS {
                    return Err(format!(
                        "{at}, option {j}: its label is 1 to {MAX_LABEL_CHARS} characters"
                    ));
                }
                if opt.label.eq_ignore_ascii_case(OTHER) {
                    return Err(format!(
                        "{at}, option {j}: \"{OTHER}\" is added for you; leave it out"
                    ));
                }
                if !labels.insert(opt.label.as_str()) {
                    return Err(format!("{at}: the label `{}` is used twice", opt.label));
                }
                if chars(&opt.description) > MAX_DESCRIPTION_CHARS {
                    return Err(format!(
                        "{at}, option {j}: its description is at most {MAX_DESCRIPTION_CHARS} characters"
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Questions {
    /// The answers a person gave, one per question by its header, checked
    /// against the options ([`Question::answer`]); in the questions' order.
    pub fn take(&self, given: &[Given]) -> Result<Vec<Answer>, String> {
        for g in given {
            if !self.questions.iter().any(|q| q.header == g.header) {
                return Err(format!("no question has the header `{}`", g.header));
            }
        }
        self.questions
            .iter()
            .map(|q| {
                let mut of = given.iter().filter(|g| g.header == q.header);
                match (of.next(), of.next()) {
                    (Some(g), None) => q.answer(g.selected.clone(), g.other.clone()),
                    (None, _) => Err(format!("`{}` was not answered", q.header)),
                    (Some(_), Some(_)) => Err(format!("`{}` is answered twice", q.header)),
                }
            })
            .collect()
    }
}

impl Question {
    /// An answer of labels and free text checked against this question:
    /// only its labels, one unless `multiSelect`, something chosen or
    /// written, the text capped.
    pub fn answer(&self, selected: Vec<String>, other: Option<String>) -> Result<Answer, String> {
        let other = other.filter(|t| !t.trim().is_empty());
        if let Some(t) = &other
            && t.chars().count() > MAX_OTHER_CHARS
        {
            return Err(format!(
                "the answer to `{}` is longer than {MAX_OTHER_CHARS} characters",
                self.header
            ));
        }
        for s in &selected {
            if !self.options.iter().any(|o| &o.label == s) {
                return Err(format!("`{s}` is not an option of `{}`", self.header));
            }
        }
        if !self.multi_select && selected.len() > 1 {
            return Err(format!(
                "`{}` takes one option, got {}",
                self.header,
                selected.len()
            ));
        }
        if selected.is_empty() && other.is_none() {
            return Err(format!("`{}` was not answered", self.header));
        }
        Ok(Answer {
            header: self.header.clone(),
            question: self.question.clone(),
            selected,
            other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(options: serde_json::Value) -> serde_json::Value {
        json!({"questions": [{"header": "Stack", "question": "Which?", "options": options}]})
    }

    #[test]
    fn shapes_are_checked_with_which_and_why() {
        let two = json!([{"label": "A", "description": "a"}, {"label": "B", "description": "b"}]);
        assert!(Questions::parse(&one(two.clone()).to_string()).is_ok());
        let cases = [
            (json!({"questions": []}), "1 to 4 questions"),
            (
                one(json!([{"label": "A", "description": "a"}])),
                "2 to 4 options",
            ),
            (
                one(
                    json!([{"label": "A", "description": ""}, {"label": "Other", "description": ""}]),
                ),
                "added for you",
            ),
            (
                one(json!([{"label": "A", "description": ""}, {"label": "A", "description": ""}])),
                "used twice",
            ),
            (
                json!({"questions": [{"header": "A very long header", "question": "?", "options": two}]}),
                "header is 1 to 12",
            ),
            (
                json!({"questions": [{"header": "H", "question": " ", "options": two}]}),
                "question is 1 to",
            ),
            (
                json!({"questions": [{"header": "H", "question": "?", "options": two, "extra": 1}]}),
                "unknown field",
            ),
        ];
        for (v, why) in cases {
            let e = Questions::parse(&v.to_string()).unwrap_err();
            assert!(e.contains(why), "{v}: {e}");
        }
        let five: Vec<_> = (0..5)
            .map(|i| json!({"header": format!("H{i}"), "question": "?", "options": two}))
            .collect();
        assert!(
            Questions::parse(&json!({"questions": five}).to_string())
                .unwrap_err()
                .contains("not 5")
        );
        assert!(
            Questions::parse(&"x".repeat(MAX_QUESTIONS_BYTES + 1))
                .unwrap_err()
                .contains("bytes")
        );
    }

    #[test]
    fn a_person_answers_every_question_by_its_header() {
        let two = json!([{"label": "A", "description": ""}, {"label": "B", "description": ""}]);
        let q: Questions = serde_json::from_value(json!({"questions": [
            {"header": "One", "question": "?", "options": two},
            {"header": "Two", "question": "?", "options": two, "multiSelect": true},
        ]}))
        .unwrap();
        let given = |v: serde_json::Value| serde_json::from_value::<Vec<Given>>(v).unwrap();
        let answers = q
            .take(&given(json!([
                {"header": "Two", "selected": ["A", "B"]},
                {"header": "One", "other": "neither"},
            ])))
            .unwrap();
        assert_eq!(answers[0].header, "One");
        assert_eq!(answers[0].other.as_deref(), Some("neither"));
        assert_eq!(answers[1].selected, ["A", "B"]);
        let cases = [
            (
                json!([{"header": "One", "selected": ["A"]}]),
                "`Two` was not answered",
            ),
            (
                json!([{"header": "One", "selected": ["A"]}, {"header": "One", "selected": ["B"]}, {"header": "Two", "selected": ["A"]}]),
                "answered twice",
            ),
            (
                json!([{"header": "Three", "selected": ["A"]}]),
                "no question has the header `Three`",
            ),
            (
                json!([{"header": "One", "selected": ["C"]}, {"header": "Two", "selected": ["A"]}]),
                "not an option",
            ),
        ];
        for (v, why) in cases {
            let e = q.take(&given(v.clone())).unwrap_err();
            assert!(e.contains(why), "{v}: {e}");
        }
    }

    #[test]
    fn answers_are_checked_against_the_options() {
        let q: Questions = serde_json::from_value(one(json!([
            {"label": "A", "description": ""}, {"label": "B", "description": ""}
        ])))
        .unwrap();
        let q = &q.questions[0];
        assert_eq!(q.answer(vec!["A".into()], None).unwrap().selected, ["A"]);
        assert!(
            q.answer(vec!["C".into()], None)
                .unwrap_err()
                .contains("not an option")
        );
        assert!(
            q.answer(vec!["A".into(), "B".into()], None)
                .unwrap_err()
                .contains("takes one")
        );
        assert!(
            q.answer(vec![], Some(" ".into()))
                .unwrap_err()
                .contains("not answered")
        );
        assert_eq!(
            q.answer(vec![], Some("mine".into()))
                .unwrap()
                .other
                .as_deref(),
            Some("mine")
        );
    }
}
