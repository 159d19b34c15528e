//! `toolgate:plugin@0.1.x`: the first contract, frozen in `wit/v0.1.0/`
//! for the components built against it — an adapter of 0.2 (as Zed's
//! `since_v0_x` modules are of its latest API), so that a change to the
//! contract's behaviour is made once:
//!
//! * the bindings ([`crate::bindings::v0_1`]) reuse 0.2's types wherever
//!   the WIT is the same;
//! * [`imports`] — each host method calls its 0.2 counterpart;
//! * [`convert`] — 0.1 ↔ 0.2 by `From` where the types differ, then the 0.2
//!   checks;
//! * [`roles`] — the exports (records in, records out, every call on a
//!   fiber), their answers checked by the 0.2 code.

pub mod convert;
pub mod imports;
pub mod roles;
