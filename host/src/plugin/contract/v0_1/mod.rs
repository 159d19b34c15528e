//! `toolgate:plugin@0.1.x`: the first contract, frozen in `wit/v0.1.0/`
//! for the components built against it. Its imports do what their 0.2
//! counterparts do, and its conversions go through the 0.2 ones.

pub mod convert;
pub mod imports;
pub mod roles;
