//! [`Cause`]: why something failed, kept whole inside the errors that are
//! cloned and shown more than once ([`crate::PolicyError`],
//! [`crate::BodyError`], [`crate::plugin::LoadError`]).
//!
//! Those errors end as a sentence — a call result the model reads, a line
//! in `toolgate plugins` — so their `Display` stays that sentence. But the
//! error underneath (a guest trap with its wasmtime error, a schema
//! snapshot error, an I/O error) is kept, not flattened to text: `source()`
//! of the error holding a `Cause` is the original error, so the log and a
//! caller can walk the chain and downcast it (is this trap a memory limit?
//! which content block was refused?). It is shared (`Arc`) because those
//! errors are `Clone`. A cause that is only a sentence (a limit the host
//! states itself) is made with [`Cause::msg`].

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// An error, shared. Dereferences to the error itself, so
/// `#[source] Cause` makes it the holder's `source()`.
#[derive(Clone)]
pub struct Cause(Arc<dyn Error + Send + Sync + 'static>);

impl Cause {
    /// Keep `error` as the cause.
    pub fn new(error: impl Error + Send + Sync + 'static) -> Self {
        Cause(Arc::new(error))
    }

    /// Keep an error already boxed.
    pub fn boxed(error: Box<dyn Error + Send + Sync + 'static>) -> Self {
        Cause(Arc::from(error))
    }

    /// A cause that is only a sentence.
    pub fn msg(message: impl Into<String>) -> Self {
        Cause(Arc::from(Box::<dyn Error + Send + Sync>::from(
            message.into(),
        )))
    }

    /// The cause as an `E`, if it is one.
    pub fn downcast_ref<E: Error + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref::<E>()
    }

    /// Whether an `E` is anywhere in the chain (the cause or its sources).
    pub fn find<E: Error + 'static>(&self) -> Option<&E> {
        let mut next: Option<&(dyn Error + 'static)> = Some(&*self.0);
        while let Some(e) = next {
            if let Some(found) = e.downcast_ref::<E>() {
                return Some(found);
            }
            next = e.source();
        }
        None
    }
}

impl std::ops::Deref for Cause {
    type Target = dyn Error + Send + Sync + 'static;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// Two causes are equal when they are the same error or say the same
/// (reports holding them are compared across reloads).
impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.to_string() == other.to_string()
    }
}

impl Eq for Cause {}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// A wasmtime error, its chain kept (its top error first).
impl From<wasmtime::Error> for Cause {
    fn from(error: wasmtime::Error) -> Self {
        Cause::boxed(error.into_boxed_dyn_error())
    }
}

impl From<std::io::Error> for Cause {
    fn from(error: std::io::Error) -> Self {
        Cause::new(error)
    }
}

impl From<String> for Cause {
    fn from(message: String) -> Self {
        Cause::msg(message)
    }
}

impl From<&str> for Cause {
    fn from(message: &str) -> Self {
        Cause::msg(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("held: {0}")]
    struct Holder(#[source] Cause);

    /// The holder's `source()` is the original error, not a copy of its
    /// text, and the chain below it is kept.
    #[test]
    fn the_source_is_the_error_itself() {
        let held = Holder(Cause::new(Outer(std::io::Error::other("deep"))));
        assert_eq!(held.to_string(), "held: outer");
        let source = held.source().expect("a source");
        assert!(source.downcast_ref::<Outer>().is_some());
        assert_eq!(source.source().unwrap().to_string(), "deep");
        assert!(held.0.find::<std::io::Error>().is_some());
        assert!(Cause::msg("only words").find::<Outer>().is_none());
    }
}
