//! The integration tests, in one binary (linking wasmtime once).

mod arrivals;
mod capabilities;
mod foundation;
mod pipeline;
mod scheduler;
mod serve;
