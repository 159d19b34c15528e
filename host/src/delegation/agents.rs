//! The sub-agents the host is running or has run: who started each, its
//! scope and depth, its state and usage, its inbox — and what a client may
//! see of them (its own, nothing else).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::config::{KEEP_FINISHED, MAX_INBOX};
use crate::history::Viewer;
use crate::models::Usage;

/// Where an agent is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Running,
    /// It answered.
    Answered,
    /// A budget ended it (which one, in words).
    Stopped(String),
    /// `interrupt_agent`, or its caller's cancellation.
    Interrupted,
    /// Its model failed (why).
    Failed(String),
}

impl State {
    pub fn name(&self) -> &'static str {
        match self {
            State::Running => "running",
            State::Answered => "answered",
            State::Stopped(_) => "stopped",
            State::Interrupted => "interrupted",
            State::Failed(_) => "failed",
        }
    }
}

/// What an agent has done so far.
#[derive(Clone, Debug)]
pub struct Progress {
    pub state: State,
    pub turns: u32,
    pub tool_calls: u32,
    pub usage: Usage,
    /// Its answer (or the last text it wrote), once it ends.
    pub answer: Option<String>,
}

/// One sub-agent.
pub struct Agent {
    pub id: String,
    pub owner: Viewer,
    pub description: String,
    /// Its agent scope: its parent's with its id appended (`agents/<id>`
    /// under the global scope). Restrictions of the parent's scope hold
    /// for it; policies read it.
    pub scope: String,
    /// 1 for a sub-agent of a top-level agent.
    pub depth: u32,
    pub model: String,
    pub background: bool,
    pub started: SystemTime,
    started_at: Instant,
    pub cancel: CancellationToken,
    progress: Mutex<Progress>,
    inbox: Mutex<Vec<String>>,
    done: tokio::sync::watch::Sender<bool>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Agent {
    pub fn progress(&self) -> Progress {
        lock(&self.progress).clone()
    }

    pub fn update(&self, f: impl FnOnce(&mut Progress)) {
        f(&mut lock(&self.progress));
    }

    /// Ends it (once): its state and answer.
    pub fn finish(&self, state: State, answer: Option<String>) {
        self.update(|p| {
            if p.state == State::Running {
                p.state = state;
                p.answer = answer;
            }
        });
        self.done.send_replace(true);
    }

    pub fn is_running(&self) -> bool {
        lock(&self.progress).state == State::Running
    }

    /// Waits for it to end.
    pub async fn ended(&self) {
        let mut rx = self.done.subscribe();
        let _ = rx.wait_for(|d| *d).await;
    }

    /// Queues a user message for its next turn; `Err` when the inbox is full.
    pub fn send(&self, text: String) -> Result<usize, String> {
        let mut inbox = lock(&self.inbox);
        if inbox.len() >= MAX_INBOX {
            return Err(format!(
                "agent {} has {MAX_INBOX} messages waiting for its next turn already",
                self.id
            ));
        }
        inbox.push(text);
        Ok(inbox.len())
    }

    /// The messages sent since the last turn.
    pub fn take_inbox(&self) -> Vec<String> {
        std::mem::take(&mut lock(&self.inbox))
    }

    /// What `list_agents` shows of it.
    pub fn summary(&self) -> Value {
        let p = self.progress();
        let mut v = json!({
            "id": self.id,
            "description": self.description,
            "state": p.state.name(),
            "background": self.background,
            "model": self.model,
            "scope": self.scope,
            "depth": self.depth,
            "turns": p.turns,
            "toolCalls": p.tool_calls,
            "usage": p.usage,
            "elapsedMs": self.started_at.elapsed().as_millis() as u64,
        });
        match &p.state {
            State::Stopped(why) | State::Failed(why) => v["reason"] = json!(why),
            _ => {}
        }
        if let Some(a) = &p.answer {
            v["answer"] = json!(crate::models::cut(a, 2000));
        }
        v
    }
}

/// What a new agent is.
pub struct NewAgent {
    pub owner: Viewer,
    pub description: String,
    pub parent_scope: String,
    pub depth: u32,
    pub model: String,
    pub background: bool,
    pub cancel: CancellationToken,
}

/// Every agent of this host.
#[derive(Default)]
pub struct Agents {
    next: AtomicU64,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    by_id: BTreeMap<String, Arc<Agent>>,
    /// Finished agents, oldest first (forgotten past [`KEEP_FINISHED`]).
    finished: VecDeque<String>,
}

impl Agents {
    /// Registers a new agent (running), its id and scope made here.
    pub fn start(&self, new: NewAgent) -> Arc<Agent> {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("a-{n}");
        let scope = if new.parent_scope.trim_matches('/').is_empty() {
            format!("agents/{id}")
        } else {
            format!("{}/{id}", new.parent_scope.trim_end_matches('/'))
        };
        let agent = Arc::new(Agent {
            id: id.clone(),
            owner: new.owner,
            description: new.description,
            scope,
            depth: new.depth,
            model: new.model,
            background: new.background,
            started: SystemTime::now(),
            started_at: Instant::now(),
            cancel: new.cancel,
            progress: Mutex::new(Progress {
                state: State::Running,
                turns: 0,
                tool_calls: 0,
                usage: Usage::default(),
                answer: None,
            }),
            inbox: Mutex::new(Vec::new()),
            done: tokio::sync::watch::channel(false).0,
        });
        lock(&self.table).by_id.insert(id, agent.clone());
        agent
    }

    /// Marks `agent` finished: it is forgotten once [`KEEP_FINISHED`]
    /// newer ones have finished.
    pub fn retire(&self, agent: &Agent) {
        let mut t = lock(&self.table);
        t.finished.push_back(agent.id.clone());
        while t.finished.len() > KEEP_FINISHED {
            if let Some(old) = t.finished.pop_front() {
                t.by_id.remove(&old);
            }
        }
    }

    /// `owner`'s agent `id`; another's is not found.
    pub fn get(&self, owner: &Viewer, id: &str) -> Option<Arc<Agent>> {
        lock(&self.table)
            .by_id
            .get(id)
            .filter(|a| &a.owner == owner)
            .cloned()
    }

    /// The agent whose scope `scope` is (a call made by a sub-agent).
    pub fn by_scope(&self, scope: &str) -> Option<Arc<Agent>> {
        let id = scope.rsplit('/').next()?;
        lock(&self.table)
            .by_id
            .get(id)
            .filter(|a| a.scope == scope)
            .cloned()
    }

    /// `owner`'s agents, oldest first.
    pub fn of(&self, owner: &Viewer) -> Vec<Arc<Agent>> {
        let mut v: Vec<_> = lock(&self.table)
            .by_id
            .values()
            .filter(|a| &a.owner == owner)
            .cloned()
            .collect();
        v.sort_by_key(|a| a.id[2..].parse::<u64>().unwrap_or(0));
        v
    }

    /// Every agent still running.
    pub fn running(&self) -> Vec<Arc<Agent>> {
        lock(&self.table)
            .by_id
            .values()
            .filter(|a| a.is_running())
            .cloned()
            .collect()
    }

    /// `owner`'s background agents still running.
    pub fn running_in_background(&self, owner: &Viewer) -> usize {
        lock(&self.table)
            .by_id
            .values()
            .filter(|a| &a.owner == owner && a.background && a.is_running())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(owner: Viewer, parent: &str) -> NewAgent {
        NewAgent {
            owner,
            description: "d".into(),
            parent_scope: parent.into(),
            depth: 1,
            model: "m".into(),
            background: true,
            cancel: CancellationToken::new(),
        }
    }

    #[test]
    fn scopes_nest_and_an_agent_is_its_owners_only() {
        let agents = Agents::default();
        let mine = agents.start(new(Viewer::Local, ""));
        assert_eq!(mine.scope, "agents/a-1");
        let child = agents.start(new(Viewer::Local, &mine.scope));
        assert_eq!(child.scope, "agents/a-1/a-2");
        let team = agents.start(new(Viewer::Local, "team/x/"));
        assert_eq!(team.scope, "team/x/a-3");
        assert_eq!(agents.by_scope("agents/a-1/a-2").unwrap().id, "a-2");
        assert!(agents.by_scope("elsewhere/a-2").is_none());
        let other = Viewer::Session("s".into());
        assert!(agents.get(&other, "a-1").is_none());
        assert!(agents.get(&Viewer::Local, "a-1").is_some());
        assert!(agents.of(&other).is_empty());
        assert_eq!(agents.running_in_background(&Viewer::Local), 3);
        mine.finish(State::Answered, Some("x".into()));
        assert_eq!(agents.running_in_background(&Viewer::Local), 2);
    }

    #[test]
    fn the_inbox_is_bounded_and_finished_agents_are_forgotten_in_time() {
        let agents = Agents::default();
        let a = agents.start(new(Viewer::Local, ""));
        for _ in 0..MAX_INBOX {
            a.send("m".into()).unwrap();
        }
        assert!(a.send("one more".into()).is_err());
        assert_eq!(a.take_inbox().len(), MAX_INBOX);
        for _ in 0..=KEEP_FINISHED {
            let b = agents.start(new(Viewer::Local, ""));
            b.finish(State::Answered, None);
            agents.retire(&b);
        }
        // The first finished one is gone; the running one stays.
        assert!(agents.get(&Viewer::Local, "a-2").is_none());
        assert!(agents.get(&Viewer::Local, "a-1").is_some());
    }
}
