//! `cargo xtask test-sandbox`: run the sandbox-capability suite of vsh-sandbox on its own and show
//! its output: the enforcement table of this machine and one line per escape attempt (baseline
//! result, confined result).
//!
//! The suite is an ordinary integration test (`crates/vsh-sandbox/tests/capabilities.rs`), so
//! `cargo test --workspace` runs it too; this task runs it alone, one test at a time, with
//! `--nocapture`. `VSH_REQUIRE_SANDBOX` passes through from the caller: set to `1` (as
//! `cargo xtask ci` does), a kernel feature the suite needs but cannot find fails the run;
//! unset, the suite prints what it could not check and passes.

use crate::shell::Step;
use crate::{Result, no_arguments};

/// Run the suite with the caller's `VSH_REQUIRE_SANDBOX`.
pub(crate) fn run(args: &[String]) -> Result {
    no_arguments("test-sandbox", args)?;
    step().run()?;
    Ok(())
}

/// The step that runs the suite; `cargo xtask ci` adds `VSH_REQUIRE_SANDBOX=1`.
pub(crate) fn step() -> Step {
    Step::cargo(
        "test-sandbox",
        &[
            "test",
            "--package",
            "vsh-sandbox",
            "--test",
            "capabilities",
            "--locked",
            "--",
            "--nocapture",
            "--test-threads=1",
        ],
    )
}
