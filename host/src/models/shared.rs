//! The configured models as the host shares them: by name, how they are
//! reached, and the tokens each client has spent on them.
//!
//! Two users ask the same models: the delegation family (a sub-agent's
//! turns) and the `model` seam (a component's requests, `crate::seams::model`).
//! Both hold one [`Models`], so a client's budget
//! (`[delegation] max_session_tokens`) counts every token spent for it,
//! whichever asked, and neither can spend past the other's count.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use super::{Model, Transport};
use crate::history::Viewer;

/// Opens a model's connection for the requests of one call.
pub trait Connect: Send + Sync {
    /// A transport whose connections are attributed to `call_id` in
    /// `scope`.
    fn transport(&self, call_id: &str, scope: &str) -> Box<dyn Transport>;
}

/// The models of `[models]`, their keys read.
pub struct Models {
    by_name: BTreeMap<String, Arc<Model>>,
    connect: OnceLock<Arc<dyn Connect>>,
    /// Tokens each client spent.
    spent: Mutex<HashMap<Viewer, u64>>,
    /// `[delegation] max_session_tokens`.
    max_session_tokens: u64,
}

impl Models {
    pub fn new(by_name: BTreeMap<String, Arc<Model>>, max_session_tokens: u64) -> Models {
        Models {
            by_name,
            connect: OnceLock::new(),
            spent: Mutex::new(HashMap::new()),
            max_session_tokens,
        }
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Model>> {
        self.by_name.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.by_name.keys()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// How the models are reached (set once the host's egress exists).
    pub fn set_connect(&self, connect: Arc<dyn Connect>) {
        let _ = self.connect.set(connect);
    }

    /// How the models are reached; `None` before the host is ready.
    pub fn connect(&self) -> Option<&Arc<dyn Connect>> {
        self.connect.get()
    }

    /// The budget of each client (`[delegation] max_session_tokens`).
    pub fn max_session_tokens(&self) -> u64 {
        self.max_session_tokens
    }

    /// Adds `tokens` to `owner`'s count; the count after.
    pub fn spend(&self, owner: &Viewer, tokens: u64) -> u64 {
        let mut spent = self.spent.lock().unwrap_or_else(|e| e.into_inner());
        match spent.get_mut(owner) {
            Some(n) => {
                *n = n.saturating_add(tokens);
                *n
            }
            None => *spent.entry(owner.clone()).or_insert(tokens),
        }
    }

    /// `owner`'s count.
    pub fn spent(&self, owner: &Viewer) -> u64 {
        self.spent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(owner)
            .copied()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_has_its_own_count() {
        let models = Models::new(BTreeMap::new(), 100);
        let other = Viewer::Session("s-1".into());
        assert_eq!(models.spend(&Viewer::Local, 7), 7);
        assert_eq!(models.spend(&other, 5), 5);
        assert_eq!(models.spend(&other, 5), 10);
        assert_eq!(models.spent(&Viewer::Local), 7);
        assert_eq!(models.spend(&other, u64::MAX), u64::MAX);
    }
}
