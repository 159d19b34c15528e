//! The integration tests, in one binary (linking wasmtime once).

mod arrivals;
mod budgets;
mod capabilities;
mod catalog;
mod code_mode;
mod containment;
mod contract;
mod foundation;
mod pipeline;
mod scheduler;
mod serve;
