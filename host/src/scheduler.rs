//! The scheduler: one model turn's calls, run and committed in model order.

use crate::call::{ToolCall, TurnOptions};
use crate::host::Toolgate;
use crate::outcome::CallRecord;
use crate::pipeline;

impl Toolgate {
    /// Run the calls of one model turn; one record per call, in model order.
    pub async fn execute_tool_calls(
        &self,
        calls: Vec<ToolCall>,
        turn: &TurnOptions,
    ) -> Vec<CallRecord> {
        let generation = self.generation();
        let settings = self.settings();
        let mut records = Vec::with_capacity(calls.len());
        for call in calls {
            let finished =
                pipeline::run_call(&generation, settings, call, turn, self.next_token()).await;
            pipeline::result::notify(
                &generation.policies.observers,
                &finished,
                settings.policy_timeout,
            )
            .await;
            records.push(finished.record);
        }
        records
    }
}
