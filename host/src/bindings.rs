//! The host side of the WIT contract: every `bindgen!` output lives here, so
//! the rest of the host refers to one set of generated types.
//!
//! The world `host` imports every seam and exports every role. No component
//! exports all roles; the host never instantiates this world as a whole.
//! Instead it loads each role's interface separately through the generated
//! `GuestIndices` (see [`crate::plugin::roles`]), so a component that exports
//! only `guard` is a guard and nothing else.

wasmtime::component::bindgen!({
    world: "host",
    path: "../wit",
    imports: { default: async | trappable },
    exports: { default: async },
    additional_derives: [PartialEq],
    anyhow: true,
});

pub use self::toolgate::plugin::types as wit;
