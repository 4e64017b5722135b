//! The build system of the vsh workspace, run as `cargo xtask <task>`.
//!
//! This follows the cargo-xtask convention (<https://github.com/matklad/cargo-xtask>):
//! the tasks are plain Rust, need nothing but cargo, and `cargo xtask ci` runs exactly
//! what CI runs, so a green local run means a green CI run.
//!
//! Each task is one module with a `run(args)` function; `main` only picks the module.
//! The repository checks ("tidy") are `#[test]`s in `tidy.rs`, compiled only for tests, so
//! plain `cargo test --workspace` enforces them; `cargo xtask tidy` runs just those.
//!
//! This crate deliberately has no dependencies: arguments are parsed by hand and
//! commands are spawned with `std::process::Command`.
// The build tool reads and writes the repository by path.
#![allow(clippy::disallowed_methods)]

mod bench;
mod ci;
mod fuzz;
mod man;
mod mcp_clients;
mod mutants;
mod python_sdk;
mod schemas;
mod shell;
mod test_sandbox;
#[cfg(test)]
mod tidy;

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const HELP: &str = "\
cargo xtask <task> [options]

Tasks:
  ci                  run exactly what CI runs: fmt check, clippy, tests (tidy included), docs
  tidy                run only the repository checks (the tidy tests of xtask)
  fuzz [--seconds N]  run every fuzz target for N seconds each (default 60); needs nightly and cargo-fuzz
  test-sandbox        run the sandbox-capability suite alone and print the enforcement table
  bench [workloads [FLAGS]]
                      run every benchmark: the crates' benches, the Python SDK's, and every
                      workload of bench/compare on our engine (p50/p95 per stage into
                      target/bench/workloads.json); `workloads` runs only those, FLAGS to the driver
  wheel               build the Python SDK's release wheel (vsh-runtime, worker bundled) into target/wheels
  man                 write the man page docs/vsh.1 from the command line's grammar
  schemas             write the JSON Schemas of every --json document into docs/json/
  mutants [--package P]... [--shard K/N] [--file PATH]... [--iterate] [--jobs N] [--nextest]
                      mutation testing (cargo-mutants, installed pinned) of vsh-commit, vsh-store,
                      vsh-policy and vsh-host; results in target/mutants/<package>/
  help                print this message
";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let task = args.next().unwrap_or_else(|| "help".to_owned());
    let rest: Vec<String> = args.collect();
    let result = match task.as_str() {
        "ci" => ci::run(&rest),
        "tidy" => ci::run_tidy(&rest),
        "fuzz" => fuzz::run(&rest),
        "test-sandbox" => test_sandbox::run(&rest),
        "bench" => bench::run(&rest),
        "wheel" => python_sdk::wheel(&rest),
        "man" => man::run(&rest),
        "schemas" => schemas::run(&rest),
        "mutants" => mutants::run(&rest),
        "help" | "-h" | "--help" => {
            print!("{HELP}");
            Ok(())
        }
        other => Err(Error::new(format!("unknown task `{other}`; run `cargo xtask help` for the list"))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The root of the repository: the parent of this crate's directory.
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives one level below the repository root").to_owned()
}

/// Fail with a message if a task was given arguments it does not take.
fn no_arguments(task: &str, args: &[String]) -> Result {
    match args.first() {
        None => Ok(()),
        Some(arg) => Err(Error::new(format!("`cargo xtask {task}` takes no arguments, got `{arg}`"))),
    }
}

/// A task failure, printed as `error: <message>`.
///
/// The message is lowercase with no final period, and names the step that failed.
struct Error {
    message: String,
}

impl Error {
    fn new(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

type Result<T = ()> = std::result::Result<T, Error>;
