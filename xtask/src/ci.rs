//! `cargo xtask ci`: exactly what CI runs, in order, stopping at the first failure.
//!
//! `.ci/run` calls this and nothing else, so a green local run means a green CI run.
//! The steps:
//!
//! 1. `fmt`: `cargo fmt --all -- --check`;
//! 2. `clippy`: `cargo clippy --workspace --all-targets --locked -- -D warnings`;
//! 3. `test`: `cargo test --workspace --locked` with `VSH_REQUIRE_SANDBOX=1`, so tests that need
//!    kernel sandbox features fail instead of skipping; xtask is a workspace member, so this
//!    also runs the tidy checks (see `tidy.rs`); the MCP clients the tests drive `vsh serve`
//!    with are installed first, pinned (see `mcp_clients.rs`), and `VSH_REQUIRE_MCP_CLIENTS=1`
//!    makes their tests fail, not skip, without them;
//! 4. `test-sandbox`: the sandbox-capability suite of vsh-sandbox again, alone, with
//!    `VSH_REQUIRE_SANDBOX=1` and `--nocapture`, so the log shows the enforcement table and every
//!    blocked attempt (see `test_sandbox.rs`);
//! 5. `doc`: `cargo doc --workspace --no-deps --locked` with `RUSTDOCFLAGS=-D warnings`.
//!
//! `--workspace` matters: the root manifest's `default-members` leaves xtask out.
//! Every step runs with `CARGO_INCREMENTAL=0` unless the caller set it (see
//! `without_incremental`).

use std::time::Duration;

use crate::shell::{Step, format_duration};
use crate::test_sandbox;
use crate::{Result, no_arguments};

/// Run every CI step and print the wall time of each.
pub(crate) fn run(args: &[String]) -> Result {
    no_arguments("ci", args)?;
    let python = crate::mcp_clients::python()?;
    let typescript = crate::mcp_clients::typescript()?;
    let mut steps = vec![
        Step::cargo("fmt", &["fmt", "--all", "--", "--check"]),
        Step::cargo("clippy", &["clippy", "--workspace", "--all-targets", "--locked", "--", "-D", "warnings"]),
        Step::cargo("test", &["test", "--workspace", "--locked"])
            .env("VSH_REQUIRE_SANDBOX", "1")
            .env("VSH_REQUIRE_MCP_CLIENTS", "1")
            .env("VSH_MCP_PYTHON", &python)
            .env("VSH_MCP_TYPESCRIPT", &typescript),
        test_sandbox::step().env("VSH_REQUIRE_SANDBOX", "1"),
        Step::cargo("doc", &["doc", "--workspace", "--no-deps", "--locked"]).env("RUSTDOCFLAGS", rustdoc_flags()),
    ];
    steps.extend(crate::python_sdk::ci_steps()?);
    let mut timings: Vec<(String, Duration)> = Vec::new();
    for step in steps.into_iter().map(without_incremental) {
        let name = step.name().to_owned();
        let elapsed = step.run()?;
        timings.push((name, elapsed));
    }
    print_summary(&timings);
    Ok(())
}

/// Run only the tidy checks: the `tidy::` tests of xtask.
pub(crate) fn run_tidy(args: &[String]) -> Result {
    no_arguments("tidy", args)?;
    Step::cargo("tidy", &["test", "--package", "xtask", "--locked", "--", "tidy::"]).run()?;
    Ok(())
}

/// `step` with `CARGO_INCREMENTAL=0` unless the caller set it: CI builds
/// from a clean checkout once, where incremental state is gigabytes written
/// for nothing (a fresh clone's run held 1.6 GB of it in `target/debug`
/// alone, and a CI run failed with its disk full). A developer who runs
/// `cargo xtask ci` between incremental builds keeps them with
/// `CARGO_INCREMENTAL=1`.
fn without_incremental(step: Step) -> Step {
    if std::env::var_os("CARGO_INCREMENTAL").is_some() { step } else { step.env("CARGO_INCREMENTAL", "0") }
}

/// `-D warnings` added to whatever `RUSTDOCFLAGS` the caller already set.
fn rustdoc_flags() -> String {
    match std::env::var("RUSTDOCFLAGS") {
        Ok(existing) if !existing.trim().is_empty() => format!("{existing} -D warnings"),
        _ => "-D warnings".to_owned(),
    }
}

fn print_summary(timings: &[(String, Duration)]) {
    let total: Duration = timings.iter().map(|(_, elapsed)| *elapsed).sum();
    eprintln!("\ncargo xtask ci: all {} steps passed", timings.len());
    for (name, elapsed) in timings {
        eprintln!("  {name:<24} {:>8}", format_duration(*elapsed));
    }
    eprintln!("  {:<24} {:>8}", "total", format_duration(total));
}
