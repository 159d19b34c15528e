//! The integration tests, in one binary (linking wasmtime once).

mod arrivals;
mod authority;
mod bridge;
mod budgets;
mod capabilities;
mod catalog;
mod code_mode;
mod containment;
mod contract;
mod examples;
mod foundation;
mod lifecycle;
mod pipeline;
mod scheduler;
mod serve;
