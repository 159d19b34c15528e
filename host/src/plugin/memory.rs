//! Memory of guest instances: a cap per instance and a budget for all of
//! them together.
//!
//! Each plugin's grant caps one instance's linear memory (`memory_mb`). That
//! alone does not bound the host: eight parallel calls of one plugin, or a
//! hundred warm instances of many, each within its cap, add up. So every
//! instance also draws from a host-wide [`MemoryBudget`]
//! ([`crate::budgets::Budgets::guest_memory_bytes`]): a `memory.grow` that
//! would exceed it fails, and the guest traps with an error that names the
//! budget and how to raise it. Memory is given back when the instance is
//! dropped (an idle warm instance keeps what it grew).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes all instances may hold, and how many they hold now.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: usize,
    used: AtomicUsize,
}

impl MemoryBudget {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(MemoryBudget {
            limit,
            used: AtomicUsize::new(0),
        })
    }

    /// Bytes held by live instances now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The budget.
    pub fn limit(&self) -> usize {
        self.limit
    }

    fn take(&self, bytes: usize) -> bool {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let Some(next) = used.checked_add(bytes).filter(|n| *n <= self.limit) else {
                return false;
            };
            match self
                .used
                .compare_exchange_weak(used, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => used = now,
            }
        }
    }

    fn give(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// The limiter of one instance's store.
pub struct MemoryLimiter {
    plugin: Arc<str>,
    /// This instance's cap (the plugin's grant).
    cap: usize,
    /// The setting that sets the cap, for the message.
    cap_setting: &'static str,
    budget: Arc<MemoryBudget>,
    /// What this instance has drawn from the budget.
    held: usize,
}

/// Most tables, memories and core instances one component instance may
/// create (the pool's slots are sized for the same numbers).
pub const MAX_TABLES: usize = 64;
pub const MAX_MEMORIES: usize = 16;
pub const MAX_INSTANCES: usize = 64;
/// Most elements of one table.
pub const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl MemoryLimiter {
    pub fn new(plugin: Arc<str>, cap: usize, budget: Arc<MemoryBudget>) -> Self {
        MemoryLimiter {
            plugin,
            cap,
            cap_setting: "`memory_mb` in its grant",
            budget,
            held: 0,
        }
    }

    /// The cap is set by `setting` (named in the error when it is hit).
    pub fn cap_set_by(mut self, setting: &'static str) -> Self {
        self.cap_setting = setting;
        self
    }
}

impl Drop for MemoryLimiter {
    fn drop(&mut self) {
        self.budget.give(self.held);
    }
}

/// Why a guest's memory could not grow (the trap's message).
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error(
        "plugin `{plugin}` asked for {desired} bytes of linear memory, more than its cap of {cap} bytes ({setting})"
    )]
    OverCap {
        plugin: Arc<str>,
        desired: usize,
        cap: usize,
        setting: &'static str,
    },
    #[error(
        "plugin `{plugin}` could not grow its memory by {bytes} bytes: the host's memory budget for all instances ({limit} bytes, `[limits] guest_memory_mb`) is exhausted ({used} bytes in use)"
    )]
    OverBudget {
        plugin: Arc<str>,
        bytes: usize,
        limit: usize,
        used: usize,
    },
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.cap {
            return Err(MemoryError::OverCap {
                plugin: self.plugin.clone(),
                desired,
                cap: self.cap,
                setting: self.cap_setting,
            }
            .into());
        }
        let bytes = desired.saturating_sub(current);
        if !self.budget.take(bytes) {
            return Err(MemoryError::OverBudget {
                plugin: self.plugin.clone(),
                bytes,
                limit: self.budget.limit(),
                used: self.budget.used(),
            }
            .into());
        }
        self.held += bytes;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    #[test]
    fn instances_draw_from_one_budget_and_give_back_on_drop() {
        let budget = MemoryBudget::new(100);
        let mut a = MemoryLimiter::new("a".into(), 80, budget.clone());
        let mut b = MemoryLimiter::new("b".into(), 80, budget.clone());
        assert!(a.memory_growing(0, 60, None).unwrap());
        let e = b.memory_growing(0, 60, None).unwrap_err().to_string();
        assert!(e.contains("memory budget"), "{e}");
        let e = a.memory_growing(60, 90, None).unwrap_err().to_string();
        assert!(e.contains("cap of 80"), "{e}");
        drop(a);
        assert_eq!(budget.used(), 0);
        assert!(b.memory_growing(0, 60, None).unwrap());
        assert_eq!(budget.used(), 60);
    }
}
