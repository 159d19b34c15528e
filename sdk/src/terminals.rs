//! The `terminals` seam (since contract 0.2.4): interactive programs on a
//! pseudo-terminal of their own, kept by the host after the call that
//! opened them — a shell, a REPL, an editor — that later calls type into
//! and read from, and whose screen the host renders as a person would see
//! it. Each runs in the sandbox like every spawn, and ends when its program
//! exits, at its timeout, after 30 minutes untouched, by [`close`], or when
//! the host exits. A component that uses the seam imports it and loads only
//! where the operator granted the shell (`shell = true`).

use crate::bindings::toolgate::plugin::terminals as raw;
pub use crate::bindings::toolgate::plugin::terminals::{
    TerminalInfo, TerminalOptions, TerminalOutput, TerminalScreen,
};
use crate::process::SpawnError;

/// Open a terminal running `command` (`/bin/sh -c`), or the user's shell
/// when `None`.
pub fn open(command: Option<&str>, options: &TerminalOptions) -> Result<TerminalInfo, SpawnError> {
    raw::open(command, options)
}

/// Type `input` (control characters included: `"\u{3}"` is Ctrl-C) into
/// terminal `id`.
pub fn write(id: &str, input: &[u8]) -> Result<TerminalInfo, String> {
    raw::write(id, input)
}

/// Output of terminal `id` from byte `since` on (`None`: from where the
/// last read ended), waiting up to `wait_ms` for it; once some came, until
/// `quiet_ms` pass without more (`None`: all of `wait_ms`).
pub fn read(
    id: &str,
    since: Option<u64>,
    wait_ms: u32,
    quiet_ms: Option<u32>,
) -> Result<TerminalOutput, String> {
    raw::read(id, since, wait_ms, quiet_ms)
}

/// The screen of terminal `id` as a person would see it now.
pub fn screen(id: &str) -> Result<TerminalScreen, String> {
    raw::screen(id)
}

/// Resize terminal `id`.
pub fn resize(id: &str, rows: u16, cols: u16) -> Result<TerminalInfo, String> {
    raw::resize(id, rows, cols)
}

/// Close terminal `id`: its process group is killed.
pub fn close(id: &str) -> Result<TerminalInfo, String> {
    raw::close(id)
}

/// The terminals of the current agent scope, oldest first.
pub fn list() -> Vec<TerminalInfo> {
    raw::list()
}
