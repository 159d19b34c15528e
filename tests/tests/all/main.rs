//! The integration tests, in one binary (linking wasmtime once).

mod budgets;
mod capabilities;
mod contract;
mod examples;
mod foundation;
mod pipeline;
mod scheduler;
