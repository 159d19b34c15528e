//! The integration tests, in one binary (linking wasmtime once).

mod foundation;
mod pipeline;
