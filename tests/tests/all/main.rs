//! The integration tests, in one binary (linking wasmtime once).

mod capabilities;
mod containment;
mod foundation;
mod pipeline;
mod scheduler;
