//! The `questions` seam: a component asks the user (`ask_user_question`)
//! through the call's approver (see [`crate::approval::questions`]).
//!
//! The questions' JSON is capped and checked before anyone is asked; the
//! approver's answer is checked against the options asked. The wait is
//! bounded by `[questions] timeout_ms` and by the call: its cancellation
//! or deadline ends it (the elicitation, the terminal prompt or the
//! queue's entry is dropped with it), and nobody to ask is an error at
//! once.
//!
//! The seam as a unit (see [`crate::seams`]): granted by `questions =
//! true` ([`seam`]); no state of its own; its one function waits (for a
//! person), so a component importing it takes the asynchronous path.

use wasmtime::component::HasData;

use super::{Seam, SeamCtx, SeamHost};
use std::sync::Arc;

use crate::approval::questions::{
    MAX_ASKS_PER_CALL, QuestionAnswer, QuestionRequest, Questions, may_ask,
};
use crate::bindings::v0_2::toolgate::plugin::questions as wit;
use crate::call::{CallSignal, Misuse, Notes};
use crate::egress::ask::CallAsk;
use crate::grants::Capability;

/// The `questions` seam: granted by `questions = true`.
pub fn seam<T: SeamHost>() -> Seam<T> {
    Seam {
        interface: "questions",
        capability: Capability::Questions,
        sync: false,
        granted: |g| {
            if g.questions {
                Ok(())
            } else {
                Err("questions = true")
            }
        },
        link: |linker| {
            wit::add_to_linker::<T, QuestionsView<'static>>(linker, |t| {
                QuestionsView::new(t.seams())
            })
        },
    }
}

/// What the `questions` interface sees of a store: whether it is granted,
/// the call's asking (its approver: [`CallAsk`]) and signal.
pub struct QuestionsView<'a> {
    plugin: &'a str,
    granted: bool,
    asking: Option<&'a Arc<CallAsk>>,
    signal: Option<&'a CallSignal>,
    notes: Option<&'a Notes>,
    /// `[questions] timeout_ms`.
    timeout_ms: u64,
}

impl<'a> QuestionsView<'a> {
    pub fn new(ctx: SeamCtx<'a>) -> Self {
        QuestionsView {
            plugin: ctx.plugin,
            granted: ctx.grants.questions,
            asking: ctx.extensions.get::<Arc<CallAsk>>(),
            signal: ctx.signal,
            notes: ctx.call.map(|c| &c.notes),
            timeout_ms: ctx
                .shared
                .questions_timeout_ms
                .load(std::sync::atomic::Ordering::Relaxed),
        }
    }
}

impl HasData for QuestionsView<'static> {
    type Data<'a> = QuestionsView<'a>;
}

impl wit::Host for QuestionsView<'_> {
    async fn ask(
        &mut self,
        questions: String,
    ) -> wasmtime::Result<Result<String, wit::QuestionError>> {
        if !self.granted {
            return Err(Misuse(format!(
                "plugin `{}` is not granted the questions seam (`questions = true` in its grants)",
                self.plugin
            ))
            .into());
        }
        let questions = match Questions::parse(&questions) {
            Ok(q) => q,
            Err(why) => return Ok(Err(wit::QuestionError::InvalidRequest(why))),
        };
        let Some(asking) = self.asking else {
            return Ok(Err(wit::QuestionError::Unavailable(
                "no user can be asked here: this call has no approver (nobody is on a terminal and no client answers elicitation)".into(),
            )));
        };
        if !may_ask(asking.call()) {
            return Ok(Err(wit::QuestionError::Unavailable(format!(
                "a call asks at most {MAX_ASKS_PER_CALL} times; ask everything in one call (up to 4 questions)"
            ))));
        }
        let request = QuestionRequest {
            call: asking.call_shared().clone(),
            questions,
            client: asking.client().cloned(),
        };
        let timeout_ms = self.timeout_ms;
        let asked = async {
            let asked = asking.approver().ask_questions(&request);
            match tokio::time::timeout(std::time::Duration::from_millis(timeout_ms), asked).await {
                Ok(answer) => answer,
                Err(_) => QuestionAnswer::TimedOut(format!(
                    "nobody answered within {timeout_ms} ms (`[questions] timeout_ms`)"
                )),
            }
        };
        let answer = match self.signal {
            Some(signal) => tokio::select! {
                a = asked => a,
                why = signal.wait() => {
                    return Ok(Err(wit::QuestionError::Timeout(format!(
                        "nobody answered before the call ended ({why:?})"
                    ))));
                }
            },
            None => asked.await,
        };
        Ok(match answer {
            QuestionAnswer::Answered { answers, by } => {
                // The approver's answer, checked against what was asked.
                if answers.len() != request.questions.questions.len()
                    || answers
                        .iter()
                        .zip(&request.questions.questions)
                        .any(|(a, q)| {
                            q.answer(a.selected.clone(), a.other.clone()).as_ref() != Ok(a)
                        })
                {
                    Err(wit::QuestionError::Unavailable(format!(
                        "{by} answered something that was not asked; nothing was taken from it"
                    )))
                } else {
                    let answer = serde_json::json!({ "answers": answers, "answeredBy": by });
                    if let Some(n) = self.notes {
                        n.push(serde_json::json!({"kind": "answer", "answers": answer["answers"], "answeredBy": by}));
                    }
                    Ok(answer.to_string())
                }
            }
            QuestionAnswer::Declined { by, reason } => {
                if let Some(n) = self.notes {
                    n.push(serde_json::json!({"kind": "declined", "by": by, "reason": reason}));
                }
                Err(wit::QuestionError::Declined(format!("{by}: {reason}")))
            }
            QuestionAnswer::TimedOut(why) => Err(wit::QuestionError::Timeout(why)),
            QuestionAnswer::Unavailable(why) => Err(wit::QuestionError::Unavailable(why)),
        })
    }
}
