//! A policy stack described once and built either from fixture components
//! or from native Rust policies: the conformance tests run the same
//! scenario against both.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use toolgate::pipeline::Approver;
use toolgate::policy::Role;
use toolgate::{CallRecord, Toolgate};

use crate::{PluginDir, fixtures, native};

/// Where the policies come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Components built with the SDK against the current contract (0.2).
    Wasm,
    /// Components built with plain wit-bindgen against the frozen 0.1
    /// contract, as third parties built them.
    V0_1,
    /// Native Rust policies.
    Native,
}

/// `(name, BEHAVIOR)` per role, outermost / first listed first.
#[derive(Default, Clone)]
pub struct Stack {
    pub pre: Vec<(&'static str, &'static str)>,
    pub guards: Vec<(&'static str, &'static str)>,
    pub around: Vec<(&'static str, &'static str)>,
    pub post: Vec<(&'static str, &'static str)>,
    pub finalizers: Vec<(&'static str, &'static str)>,
    pub observers: Vec<(&'static str, &'static str)>,
    /// The first-party timeout policy (outermost wrapper).
    pub timeout: bool,
    pub approver: Option<Arc<dyn Approver>>,
    pub policy_timeout: Option<Duration>,
}

/// A built stack: the host, what native observers saw, and the plugin
/// directory (kept alive for the host's lifetime).
pub struct Built {
    pub host: Toolgate,
    pub source: Source,
    pub seen: Arc<Mutex<Vec<CallRecord>>>,
    pub dir: PluginDir,
}

impl Built {
    /// How many times the listener `name` of `role` was invoked.
    pub fn calls(&self, role: Role, name: &str) -> u64 {
        self.host
            .generation()
            .listener_calls(role, name)
            .unwrap_or_else(|| panic!("no {role} listener named {name}"))
    }
}

impl Stack {
    pub fn new() -> Self {
        Self::default()
    }

    pub async fn build(&self, source: Source) -> Built {
        let dir = PluginDir::new();
        dir.add("tools", fixtures::TOOLS);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut config = String::new();
        let mut builder;
        match source {
            Source::Wasm | Source::V0_1 => {
                let f = |current: &'static str, v0_1: &'static str| {
                    if source == Source::Wasm {
                        current
                    } else {
                        v0_1
                    }
                };
                let mut place = |role_fixture: &str, list: &[(&str, &str)]| {
                    for (i, (name, behavior)) in list.iter().enumerate() {
                        dir.add(name, role_fixture);
                        config.push_str(&format!(
                            "[plugins.{name}]\npriority = {}\nvars = {{ BEHAVIOR = {behavior:?}, NAME = {name:?} }}\n",
                            (i + 1) * 10
                        ));
                    }
                };
                place(f(fixtures::PRE_HOOK, fixtures::V0_1_PRE_HOOK), &self.pre);
                place(f(fixtures::GUARD, fixtures::V0_1_GUARD), &self.guards);
                place(f(fixtures::AROUND, fixtures::V0_1_AROUND), &self.around);
                place(f(fixtures::POST_HOOK, fixtures::V0_1_POST_HOOK), &self.post);
                place(
                    f(fixtures::FINALIZER, fixtures::V0_1_FINALIZER),
                    &self.finalizers,
                );
                place(
                    f(fixtures::OBSERVER, fixtures::V0_1_OBSERVER),
                    &self.observers,
                );
                if self.timeout {
                    dir.add("timeout", fixtures::PLUGIN_TIMEOUT);
                    config.push_str("[plugins.timeout]\npriority = 0\n");
                }
                builder = crate::builder(&dir, &config);
            }
            Source::Native => {
                builder = crate::builder(&dir, "");
                let p = |i: usize| ((i + 1) * 10) as i32;
                for (i, (name, b)) in self.pre.iter().enumerate() {
                    builder = builder.pre_execute(
                        name,
                        p(i),
                        native::Pre {
                            name: name.to_string(),
                            behavior: b.to_string(),
                        },
                    );
                }
                for (i, (name, b)) in self.guards.iter().enumerate() {
                    builder = builder.guard(
                        name,
                        p(i),
                        native::NativeGuard {
                            name: name.to_string(),
                            behavior: b.to_string(),
                        },
                    );
                }
                for (i, (name, b)) in self.around.iter().enumerate() {
                    builder = builder.execute_around(
                        name,
                        p(i),
                        native::Around {
                            behavior: b.to_string(),
                        },
                    );
                }
                for (i, (name, b)) in self.post.iter().enumerate() {
                    builder = builder.post_execute(
                        name,
                        p(i),
                        native::Post {
                            behavior: b.to_string(),
                        },
                    );
                }
                for (i, (name, b)) in self.finalizers.iter().enumerate() {
                    builder = builder.finalizer(
                        name,
                        p(i),
                        native::Fin {
                            behavior: b.to_string(),
                        },
                    );
                }
                if self.timeout {
                    builder = builder.execute_around("timeout", 0, native::Timeout);
                }
            }
        }
        // Observers are native in both modes when they record (the Wasm
        // fixture cannot hand back what it saw); Wasm observers are added
        // as components for the isolation tests.
        for (i, (name, b)) in self.observers.iter().enumerate() {
            if source == Source::Native {
                builder = builder.observer(
                    name,
                    ((i + 1) * 10) as i32,
                    native::Obs {
                        behavior: b.to_string(),
                        seen: seen.clone(),
                    },
                );
            }
        }
        builder = builder.observer(
            "recorder",
            1000,
            native::Obs {
                behavior: "ok".into(),
                seen: seen.clone(),
            },
        );
        if let Some(a) = &self.approver {
            builder = builder.approver(a.clone());
        }
        if let Some(t) = self.policy_timeout {
            builder = builder.policy_timeout(t);
        }
        let host = builder.build().await.expect("host builds");
        let problems = host.problems();
        assert!(
            problems.is_empty(),
            "stack did not load cleanly: {problems:?}"
        );
        Built {
            host,
            source,
            seen,
            dir,
        }
    }
}

/// Run a scenario against Wasm policies (the current contract, and the
/// frozen 0.1 one) and native policies.
#[macro_export]
macro_rules! both {
    ($(#[$m:meta])* $name:ident, |$src:ident| $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            async fn scenario($src: $crate::stack::Source) $body
            #[tokio::test]
            async fn wasm() {
                scenario($crate::stack::Source::Wasm).await
            }
            #[tokio::test]
            async fn v0_1() {
                scenario($crate::stack::Source::V0_1).await
            }
            #[tokio::test]
            async fn native() {
                scenario($crate::stack::Source::Native).await
            }
        }
    };
}
