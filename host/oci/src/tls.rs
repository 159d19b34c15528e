//! The TLS crypto provider of the registry client: reqwest is built with
//! rustls and no provider of its own (ring, not aws-lc: no C build), and a
//! client built before a process-wide provider is installed panics. The
//! host's other HTTP clients do the same (`toolgate::tls`); either
//! installing first is fine.

/// Install ring as the process's rustls provider, unless one is installed.
pub fn ensure() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
