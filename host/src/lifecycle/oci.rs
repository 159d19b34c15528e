//! Plugins from OCI registries in a reload: a candidate from the local
//! store (its signatures checked against `[trust]` at every scan), and
//! the pulls of what the store lacks. The cargo feature `oci` (on by
//! default) builds it; without it, an `oci://` source is a plugin that
//! fails to load, saying so.

#[cfg(feature = "oci")]
pub(super) use with_oci::Pull;
#[cfg(not(feature = "oci"))]
pub(super) use without_oci::Pull;

#[cfg(feature = "oci")]
mod with_oci {
    use std::path::PathBuf;

    use super::super::{Candidate, Key, Lifecycle, Scan, State, plugin_config, push};
    use crate::HostConfig;
    use crate::lifecycle::scan::Stamp;
    use crate::plugin::{LoadError, Origin, PluginSource};

    /// A reference to pull.
    pub type Pull = crate::oci::OciRef;

    impl Lifecycle {
        /// The candidate of an OCI source: from the local store, verified as
        /// it is read; unchanged when its digest is the serving one; to be
        /// pulled when the store lacks it (then `pulls` names it).
        pub(in crate::lifecycle) fn oci_candidate(
            &self,
            key: &Key,
            source: &str,
            state: &State,
            pulls: &mut Vec<(Key, Pull)>,
            config: &HostConfig,
        ) -> Candidate {
            let origin = Origin::Oci {
                reference: source.to_string(),
                digest: String::new(),
                signer: None,
            };
            let failed = |e: crate::oci::OciError| {
                let message = e.to_string();
                Candidate::Failed(
                    LoadError::new(&key.qualified(), &origin, message)
                        .because(crate::cause::Cause::new(e)),
                )
            };
            let reference = match crate::oci::OciRef::parse(source) {
                Ok(r) => r,
                Err(e) => return failed(e),
            };
            let store = match self.oci_store() {
                Ok(s) => s,
                Err(e) => return failed(e),
            };
            match store.resolve(&reference) {
                Err(e) => failed(e),
                Ok(None) => {
                    pulls.push((key.clone(), reference.clone()));
                    failed(crate::oci::OciError::NotPulled {
                        reference: reference.to_string(),
                        store: store.path().to_path_buf(),
                    })
                }
                Ok(Some(digest)) => {
                    // The signatures are verified at every scan (the trust
                    // policy may have changed): the stamp covers the outcome.
                    let signatures = match store.signatures(&digest) {
                        Ok(s) => s,
                        Err(e) => return failed(e),
                    };
                    let check = trust_check(config, key, &reference, &digest, &signatures);
                    if let Some(old) = state.serving.get(key)
                        && oci_stamp(&digest, check.as_ref()) == old.stamp
                    {
                        return Candidate::Unchanged;
                    }
                    match store.load(&reference) {
                        Err(e) => failed(e),
                        Ok(None) => failed(crate::oci::OciError::NotPulled {
                            reference: reference.to_string(),
                            store: store.path().to_path_buf(),
                        }),
                        Ok(Some(stored)) => {
                            let check = trust_check(
                                config,
                                key,
                                &reference,
                                &stored.digest,
                                &stored.signatures,
                            );
                            oci_source(key, &reference, stored, check)
                        }
                    }
                }
            }
        }

        /// The local OCI store (in the state directory).
        fn oci_store(&self) -> Result<crate::oci::Store, crate::oci::OciError> {
            let state = self
                .runtime
                .state
                .as_ref()
                .ok_or_else(|| crate::oci::OciError::Store {
                    path: PathBuf::from(crate::state::STATE_DIR_ENV),
                    what:
                        "there is no state directory to keep pulled plugins in (set TOOLGATE_STATE_DIR)"
                            .into(),
                    source: None,
                })?;
            crate::oci::Store::open(state.path())
        }

        /// Pull what the scan found missing from the store (each under the
        /// `[oci]` deadline, in parallel); a pull that fails leaves the
        /// plugin failed, naming the reference and why.
        pub(in crate::lifecycle) async fn pull_missing(&self, scan: &mut Scan) {
            if scan.pulls.is_empty() {
                return;
            }
            let client = crate::oci::Client::new(&scan.config.oci);
            let store = match self.oci_store() {
                Ok(s) => s,
                Err(_) => return,
            };
            let pulls = std::mem::take(&mut scan.pulls);
            let results =
                futures::future::join_all(pulls.iter().map(|(_, r)| client.pull(r, &store))).await;
            for ((key, reference), result) in pulls.into_iter().zip(results) {
                let candidate = match result {
                    Ok(stored) => {
                        tracing::info!(plugin = %key.qualified(), reference = %reference, digest = %stored.digest, "pulled");
                        let check = trust_check(
                            &scan.config,
                            &key,
                            &reference,
                            &stored.digest,
                            &stored.signatures,
                        );
                        oci_source(&key, &reference, stored, check)
                    }
                    Err(e) => {
                        let origin = Origin::Oci {
                            reference: reference.to_string(),
                            digest: String::new(),
                            signer: None,
                        };
                        let message = e.to_string();
                        Candidate::Failed(
                            LoadError::new(&key.qualified(), &origin, message)
                                .because(crate::cause::Cause::new(e)),
                        )
                    }
                };
                if let Some((_, layer)) = scan.layers.iter_mut().find(|(s, _)| *s == key.scope) {
                    push(layer, key, candidate);
                }
            }
        }
    }

    /// The trust policy's verdict on a stored component's signatures (`None`:
    /// no trust policy is configured).
    fn trust_check(
        config: &HostConfig,
        key: &Key,
        reference: &crate::oci::OciRef,
        digest: &str,
        signatures: &[crate::oci::signature::Signature],
    ) -> Option<crate::oci::trust::SignatureCheck> {
        crate::oci::trust::check(
            config.trust.as_ref(),
            plugin_config(config, key).and_then(|p| p.trust.as_ref()),
            &config.trust_base(),
            reference,
            digest,
            signatures,
        )
    }

    /// The stamp of an OCI candidate: its digest, and the verdict on its
    /// signatures when there is one (a changed verdict is a changed plugin).
    fn oci_stamp(digest: &str, check: Option<&crate::oci::trust::SignatureCheck>) -> Stamp {
        let keyed = match check {
            None => digest.to_string(),
            Some(c) => crate::oci::sha256_digest(format!("{digest}\n{c:?}").as_bytes()),
        };
        Stamp::oci(&keyed).unwrap_or(Stamp::Oci([0; 32]))
    }

    /// The candidate of a component the OCI store holds.
    fn oci_source(
        key: &Key,
        reference: &crate::oci::OciRef,
        stored: crate::oci::Stored,
        check: Option<crate::oci::trust::SignatureCheck>,
    ) -> Candidate {
        let stamp = oci_stamp(&stored.digest, check.as_ref());
        let signer = check
            .as_ref()
            .and_then(|c| c.signer.as_ref().ok())
            .map(ToString::to_string);
        Candidate::Source(
            PluginSource {
                name: key.qualified(),
                origin: Origin::Oci {
                    reference: reference.to_string(),
                    digest: stored.digest,
                    signer,
                },
                signature: check,
                bytes: stored.bytes,
                manifest: Default::default(),
                manifest_error: None,
            },
            stamp,
        )
    }
}

#[cfg(not(feature = "oci"))]
mod without_oci {
    use super::super::{Candidate, Key, Lifecycle, Scan, State};
    use crate::HostConfig;
    use crate::plugin::{LoadError, Origin};

    /// Nothing is ever pulled.
    pub type Pull = std::convert::Infallible;

    impl Lifecycle {
        /// An `oci://` source in a build without OCI: a plugin that fails.
        pub(in crate::lifecycle) fn oci_candidate(
            &self,
            key: &Key,
            source: &str,
            _state: &State,
            _pulls: &mut Vec<(Key, Pull)>,
            _config: &HostConfig,
        ) -> Candidate {
            let origin = Origin::Oci {
                reference: source.to_string(),
                digest: String::new(),
                signer: None,
            };
            Candidate::Failed(LoadError::new(
                &key.qualified(),
                &origin,
                "this toolgate was built without the cargo feature `oci`: it cannot load plugins from OCI registries (rebuild with `--features oci`)",
            ))
        }

        /// Nothing to pull: `scan.pulls` is always empty here.
        pub(in crate::lifecycle) async fn pull_missing(&self, scan: &mut Scan) {
            debug_assert!(scan.pulls.is_empty());
        }
    }
}
