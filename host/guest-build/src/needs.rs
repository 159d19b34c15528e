//! Tests that need something cargo does not provide (a kernel feature, a
//! package from npm or PyPI, a program on `PATH`) and must never pass
//! without running.
//!
//! A test that cannot run is reported as *ignored*, with what it needs and
//! the command that provides it; under CI (`CI` set to anything but empty,
//! `0` or `false`, as `.ci/run` and CI services do) the run fails instead.
//! libtest decides "ignored" when the test is compiled (a running test
//! cannot turn itself into an ignored one), so:
//!
//! * **What can be known at build time is probed by the build script**
//!   ([`Probes`]). A need that is met sets the cfg `has_<need>`; each test
//!   that needs it carries
//!   `#[cfg_attr(not(has_<need>), ignore = "needs …: run `…`")]`.
//!   What was missing (and why) is handed to the tests in
//!   `TOOLGATE_TESTS_LACKING`, and every test binary with such tests holds
//!   [`ci_test!`]: a test that fails under CI while anything is missing,
//!   naming it. (The probes do not depend on `CI`, so setting it rebuilds
//!   nothing.)
//! * **At run time every such test checks again** ([`expect`]): a need the
//!   build saw that is gone now is a failure with the reason, never a pass
//!   (the same when an ignored test is run with `--ignored`).
//! * **What only a run can tell** (whether this very process may create a
//!   pids cgroup) uses [`present_or_skip`]: a failure under CI, otherwise
//!   one line `SKIPPED (known only at run time): …` on stdout and the test
//!   returns. These are the only tests that can pass without running, and
//!   only outside CI.
//!
//! A build probe runs again when its build script does (see each script's
//! `rerun-if-changed`): after installing what a reason names, the next
//! `cargo test` probes again where the script watches the install
//! directory, and `cargo clean -p <package>` forces it elsewhere.

/// The variable, set for the test crates by their build scripts, listing
/// the needs the build found missing.
pub const LACKING_ENV: &str = "TOOLGATE_TESTS_LACKING";

/// Separates the entries of [`LACKING_ENV`].
const SEP: char = '\u{1f}';

/// Whether this is a CI run: `CI` is set, and not to ``, `0` or `false`.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// The build-script side: record each probe, then [`Probes::finish`].
#[derive(Debug, Default)]
#[must_use = "call finish() to hand the missing needs to the tests"]
pub struct Probes {
    lacking: Vec<String>,
}

impl Probes {
    pub fn new() -> Probes {
        Probes::default()
    }

    /// The outcome of probing `need` (`Err` says why it is missing):
    /// declares the cfg `has_<need>` and sets it when met; when not, a
    /// cargo warning says which tests will be ignored and why. Returns
    /// whether it is met.
    pub fn need(&mut self, need: &str, outcome: Result<(), String>) -> bool {
        println!("cargo::rustc-check-cfg=cfg(has_{need})");
        match outcome {
            Ok(()) => {
                println!("cargo:rustc-cfg=has_{need}");
                true
            }
            Err(why) => {
                let why = one_line(&why);
                println!("cargo:warning=the tests that need `{need}` are ignored: {why}");
                self.lacking.push(format!("{need}: {why}"));
                false
            }
        }
    }

    /// Hands the missing needs to the tests ([`LACKING_ENV`]).
    pub fn finish(self) {
        let list: Vec<String> = self.lacking.iter().map(|l| l.replace(SEP, " ")).collect();
        println!(
            "cargo:rustc-env={LACKING_ENV}={}",
            list.join(&SEP.to_string())
        );
    }
}

/// A reason on one line, short enough for a cargo warning.
fn one_line(why: &str) -> String {
    let mut s: String = why.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > 400 {
        s = s.chars().take(400).collect::<String>() + "…";
    }
    s
}

/// At run time, in a test that needs `need`: the need checked again. A
/// missing one fails the test with the reason (the build saw it, or the
/// test was run with `--ignored`): a test that did not run never passes.
#[track_caller]
pub fn expect<T>(need: &str, found: Result<T, String>) -> T {
    match found {
        Ok(v) => v,
        Err(why) => panic!(
            "`{need}` is missing, so this test cannot run: {why}\n\
             (the build found it, or the test was run with --ignored; a test that \
             did not run does not pass — provide it, or run `cargo test` again to re-probe)"
        ),
    }
}

/// A need only a run can tell (not known to the build): `true` when met.
/// When missing, under CI the test fails; otherwise this prints one line
/// `SKIPPED (known only at run time): …` with `how` to provide it, and the
/// caller returns.
#[track_caller]
pub fn present_or_skip(need: &str, found: Result<(), String>, how: &str) -> bool {
    match found {
        Ok(()) => true,
        Err(why) if under_ci() => {
            panic!("`{need}` is missing under CI, so this test cannot run: {why}; {how}")
        }
        Err(why) => {
            println!(
                "SKIPPED (known only at run time, so not reported as ignored): `{need}` is missing: {}; {how}",
                one_line(&why)
            );
            false
        }
    }
}

/// The body of [`ci_test!`]: `lacking` is [`LACKING_ENV`] as built.
#[track_caller]
pub fn assert_nothing_lacking_under_ci(lacking: &str) {
    if lacking.is_empty() || !under_ci() {
        return;
    }
    let list: Vec<&str> = lacking.split(SEP).collect();
    panic!(
        "under CI no test may be ignored for something missing, and the build found missing:\n  {}\n\
         (the tests that need it are ignored: `cargo test -- --ignored` runs them; \
         .ci/run installs everything they need)",
        list.join("\n  ")
    );
}

/// A test (`under_ci_nothing_a_test_needs_is_missing`) that fails under CI
/// when the build of this package found a need missing. Put it in every test
/// binary whose tests carry `cfg_attr(not(has_…), ignore = …)`.
#[macro_export]
macro_rules! ci_test {
    () => {
        /// Under CI (`CI` set) a test ignored for a missing need is a failure.
        #[test]
        fn under_ci_nothing_a_test_needs_is_missing() {
            $crate::needs::assert_nothing_lacking_under_ci(env!("TOOLGATE_TESTS_LACKING"));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_fit_on_one_line() {
        assert_eq!(one_line("a\n  b\tc"), "a b c");
        assert!(one_line(&"x ".repeat(1000)).chars().count() <= 401);
    }
}
