//! The TLS crypto provider of every HTTP client the host builds.
//!
//! reqwest is built with rustls and *no* provider of its own (the
//! `rustls-no-provider` feature that `oci-client` is built with: ring,
//! not aws-lc, so no C/CMake build), and a `reqwest::Client` built before a
//! process-wide provider is installed panics. Every place that builds one
//! (the OCI client, the MCP bridge's HTTP transport) calls [`ensure`]
//! first.

/// Install ring as the process's rustls provider, unless one is installed.
pub fn ensure() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may have won the race: either provider is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
