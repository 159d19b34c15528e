//! Native Rust policies with the same behaviours as the fixture components
//! (`BEHAVIOR` strings), so a conformance scenario can run against either.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use toolgate::policy::{ExecNext, PostNext, PreNext};
use toolgate::policy::{
    ExecuteAroundHook, Finalizer, Guard, PostExecuteHook, PreExecuteHook, ResultObserver,
};
use toolgate::{CallInfo, CallRecord, Content, Outcome, PolicyError, PostDecision, PreDecision};

fn failed(what: &str) -> PolicyError {
    PolicyError::Failed(format!("native {what} failed on purpose"))
}

pub struct Pre {
    pub name: String,
    pub behavior: String,
}

#[async_trait]
impl PreExecuteHook for Pre {
    async fn pre_execute(
        &self,
        call: &Arc<CallInfo>,
        next: PreNext,
    ) -> Result<PreDecision, PolicyError> {
        let me = &self.name;
        Ok(match self.behavior.as_str() {
            "allow" | "skip" => PreDecision::Allow,
            "deny" => PreDecision::Deny(format!("{me} denies {}", call.tool_name)),
            "ask" => PreDecision::Ask(format!("{me} asks about {}", call.tool_name)),
            "pass" | "twice" => next.run().await,
            "override" => {
                let _ = next.run().await;
                PreDecision::Allow
            }
            "trap" => return Err(failed("pre-execute hook")),
            "loop" => std::future::pending().await,
            other => PreDecision::Deny(format!("unknown BEHAVIOR {other}")),
        })
    }
}

pub struct NativeGuard {
    pub name: String,
    pub behavior: String,
}

#[async_trait]
impl Guard for NativeGuard {
    async fn check(&self, call: &Arc<CallInfo>) -> Result<Option<String>, PolicyError> {
        let me = &self.name;
        Ok(match self.behavior.as_str() {
            "pass" => None,
            "deny" => Some(format!("{me} denies {}", call.tool_name)),
            "trap" => return Err(failed("guard")),
            "loop" => std::future::pending().await,
            b if b.starts_with("deny-tool:") => (call.tool_name == b["deny-tool:".len()..])
                .then(|| format!("{me} denies {}", call.tool_name)),
            other => Some(format!("unknown BEHAVIOR {other}")),
        })
    }
}

pub struct Around {
    pub behavior: String,
}

#[async_trait]
impl ExecuteAroundHook for Around {
    async fn around_execute(
        &self,
        _call: &Arc<CallInfo>,
        next: ExecNext,
    ) -> Result<Outcome, PolicyError> {
        Ok(match self.behavior.as_str() {
            "pass" | "twice" => next.run(None).await,
            b if b.starts_with("shorten:") => {
                let ms: u64 = b["shorten:".len()..].parse().unwrap();
                next.run(Some(Duration::from_millis(ms))).await
            }
            "replace" => Outcome::Success {
                value: json!("fabricated"),
                content: vec![Content::text("fabricated by the wrapper")],
                meta: None,
            },
            "report-deadline" => {
                let seen = next
                    .signal()
                    .remaining()
                    .map(|d| d.as_millis().to_string())
                    .unwrap_or("none".into());
                match next.run(None).await {
                    Outcome::Success {
                        value,
                        mut content,
                        meta,
                    } => {
                        content.push(Content::text(format!("deadline seen by wrapper: {seen}")));
                        Outcome::Success {
                            value,
                            content,
                            meta,
                        }
                    }
                    other => other,
                }
            }
            "trap" => return Err(failed("execute-around hook")),
            other => panic!("unknown BEHAVIOR {other}"),
        })
    }
}

/// The native twin of the first-party `timeout` plugin.
pub struct Timeout;

#[async_trait]
impl ExecuteAroundHook for Timeout {
    async fn around_execute(
        &self,
        call: &Arc<CallInfo>,
        next: ExecNext,
    ) -> Result<Outcome, PolicyError> {
        let deadline = call
            .tool
            .timeout_ms
            .map(|ms| Duration::from_millis(ms.into()));
        Ok(next.run(deadline).await)
    }
}

pub struct Post {
    pub behavior: String,
}

#[async_trait]
impl PostExecuteHook for Post {
    async fn post_execute(
        &self,
        _call: &Arc<CallInfo>,
        _result: &Arc<Outcome>,
        next: PostNext,
    ) -> Result<PostDecision, PolicyError> {
        let b = self.behavior.as_str();
        Ok(match b {
            "accept" => PostDecision::Accept,
            "pass" => next.run().await,
            _ if b.starts_with("value:") => {
                PostDecision::AcceptValue(serde_json::from_str(&b["value:".len()..]).unwrap())
            }
            _ if b.starts_with("content:") => {
                PostDecision::AcceptContent(vec![Content::text(&b["content:".len()..])])
            }
            _ if b.starts_with("block:") => PostDecision::Block(b["block:".len()..].to_string()),
            "trap" => return Err(failed("post-execute hook")),
            other => PostDecision::Block(format!("unknown BEHAVIOR {other}")),
        })
    }
}

pub struct Fin {
    pub behavior: String,
}

#[async_trait]
impl Finalizer for Fin {
    async fn finalize_content(
        &self,
        _call: &Arc<CallInfo>,
        result: &Arc<Outcome>,
    ) -> Result<Option<Vec<Content>>, PolicyError> {
        let b = self.behavior.as_str();
        match b {
            "keep" => Ok(None),
            _ if b.starts_with("append:") => {
                let mut c = result.content().to_vec();
                c.push(Content::text(&b["append:".len()..]));
                Ok(Some(c))
            }
            "trap" => Err(failed("finalizer")),
            other => panic!("unknown BEHAVIOR {other}"),
        }
    }
}

/// An observer that records what it saw (shared with the test).
pub struct Obs {
    pub behavior: String,
    pub seen: Arc<Mutex<Vec<CallRecord>>>,
}

#[async_trait]
impl ResultObserver for Obs {
    async fn on_result(
        &self,
        _call: &Arc<CallInfo>,
        record: &Arc<CallRecord>,
    ) -> Result<(), PolicyError> {
        self.seen.lock().unwrap().push((**record).clone());
        if self.behavior == "trap" {
            return Err(failed("observer"));
        }
        Ok(())
    }
}
