//! `todo_write`: the agent's task list.
//!
//! The list is kept in the host's `kv` seam under the agent scope of the
//! call, not in the instance's memory: instances are recycled, dropped
//! after a trap and replaced on reload, and a sibling agent must never see
//! (or overwrite) another's list. The component imports the seam, so it
//! loads only where the operator granted `kv = true` (the built-in
//! default).

use serde::{Deserialize, Serialize};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError, kv};

/// Items one list may hold.
pub const MAX_ITEMS: usize = 100;
/// Characters of one item's text.
pub const MAX_ITEM_CHARS: usize = 1000;
/// The key of the list in the scope's store.
const KEY: &str = "todos";

/// Where an item stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Schema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not started.
    Pending,
    /// Being worked on now (at most one item at a time).
    InProgress,
    /// Done.
    Completed,
}

/// One task.
#[derive(Clone, Debug, Serialize, Deserialize, Schema)]
pub struct Todo {
    /// What is to be done, as an imperative sentence.
    content: String,
    /// `pending`, `in_progress` or `completed`.
    status: Status,
}

/// Replace your task list with `todos` and get it back. Use it for work
/// of three or more steps: write the plan as items, mark one
/// `in_progress` before you start it (never more than one at a time) and
/// `completed` as soon as it is done; send the whole list each time. The
/// list is kept across calls for this agent.
#[derive(Deserialize, Schema)]
pub struct TodoWrite {
    /// The complete, updated list.
    todos: Vec<Todo>,
}

/// The list as it is now kept.
#[derive(Serialize, Deserialize, Schema)]
pub struct TodoList {
    /// The items, in order.
    todos: Vec<Todo>,
    /// The list that was replaced (how many items it had).
    previous: u64,
}

fn validate(todos: &[Todo]) -> Result<(), ToolError> {
    if todos.len() > MAX_ITEMS {
        return Err(ToolError::invalid_input(format!(
            "the list has {} items; keep it to {MAX_ITEMS} or fewer (merge or drop finished ones)",
            todos.len()
        )));
    }
    for (i, t) in todos.iter().enumerate() {
        if t.content.trim().is_empty() {
            return Err(ToolError::invalid_input(format!(
                "item {i} (`todos/{i}/content`) is empty; each item needs a sentence"
            )));
        }
        if t.content.chars().count() > MAX_ITEM_CHARS {
            return Err(ToolError::invalid_input(format!(
                "item {i} is longer than {MAX_ITEM_CHARS} characters; split it or shorten it"
            )));
        }
    }
    let running: Vec<usize> = todos
        .iter()
        .enumerate()
        .filter(|(_, t)| t.status == Status::InProgress)
        .map(|(i, _)| i)
        .collect();
    if running.len() > 1 {
        return Err(ToolError::invalid_input(format!(
            "{} items are `in_progress` (items {}); only one may be in progress at a time — mark the others `pending` or `completed`",
            running.len(),
            running
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(())
}

impl Tool for TodoWrite {
    const NAME: &'static str = "todo_write";
    type Output = TodoList;

    fn execute(self, _call: &Call) -> Result<TodoList, ToolError> {
        validate(&self.todos)?;
        let previous = kv::get_json::<Vec<Todo>>(KEY).map_or(0, |l| l.len() as u64);
        kv::set_json(KEY, &self.todos).map_err(|e| {
            ToolError::new("STORE_FULL", format!("the list could not be kept: {e}"))
        })?;
        Ok(TodoList {
            todos: self.todos,
            previous,
        })
    }

    fn render(v: TodoList) -> Vec<ContentBlock> {
        if v.todos.is_empty() {
            return vec![Content::text("The task list is now empty.")];
        }
        let done = v
            .todos
            .iter()
            .filter(|t| t.status == Status::Completed)
            .count();
        let mut s = format!("Task list ({done} of {} done):\n", v.todos.len());
        for t in &v.todos {
            let mark = match t.status {
                Status::Completed => "[x]",
                Status::InProgress => "[>]",
                Status::Pending => "[ ]",
            };
            s.push_str(&format!("{mark} {}\n", t.content));
        }
        vec![Content::text(s)]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(TodoList::schema())
    }

    fn annotations() -> Annotations {
        Annotations::IDEMPOTENT
    }
}

toolgate_sdk::export! { tools: [TodoWrite] }
