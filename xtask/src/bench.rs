//! `cargo xtask bench`: run every benchmark.
//!
//! `cargo bench --workspace --locked` (each crate's benches), then the
//! Python SDK's benchmark over the release wheel (see `python_sdk.rs`), then
//! issue 15's workloads on our engine alone through the comparison bench's
//! driver (`bench/compare`, a package outside the workspace built into
//! `target/compare`): tiny preview (in process and in the worker), tiny auto,
//! read-transform, glob over 10,000 files, patch 1,000 files, remove 5,050
//! entries, 4 threads of tiny autos (separate and shared directories), cold
//! open, a 1-file transaction on 10 and on 100,000 files, and a commit on a
//! quiet disk and right after a 2 GiB unsynced burst. It prints p50 and p95
//! of every stage and writes `target/bench/workloads.json`.
//!
//! `cargo xtask bench workloads [FLAGS]` runs only the workloads, passing
//! `FLAGS` to the driver (`--workloads a,b`, `--samples N`, `--burst-mib N`,
//! ...; see `bench/compare/README.md`).

use crate::shell::Step;
use crate::{Result, project_root};

/// Run every benchmark, or (`workloads [FLAGS]`) only the workloads.
pub(crate) fn run(args: &[String]) -> Result {
    std::fs::create_dir_all(project_root().join("target/bench"))
        .map_err(|error| crate::Error::new(format!("cannot make target/bench: {error}")))?;
    match args.first().map(String::as_str) {
        None => {
            Step::cargo("bench", &["bench", "--workspace", "--locked"]).run()?;
            for step in crate::python_sdk::bench_steps()? {
                step.run()?;
            }
            workloads(&[]).run()?;
            Ok(())
        }
        Some("workloads") => {
            workloads(&args[1..]).run()?;
            Ok(())
        }
        Some(other) => {
            Err(crate::Error::new(format!("`cargo xtask bench` takes nothing or `workloads [FLAGS]`, got `{other}`")))
        }
    }
}

/// The comparison bench's driver, on our engine alone.
fn workloads(flags: &[String]) -> Step {
    let root = project_root();
    let manifest = root.join("bench/compare/workloads/Cargo.toml").to_string_lossy().into_owned();
    let out = root.join("target/bench/workloads.json").to_string_lossy().into_owned();
    let mut args: Vec<&str> =
        vec!["run", "--release", "--locked", "--manifest-path", &manifest, "--", "--engines", "ours", "--out", &out];
    args.extend(flags.iter().map(String::as_str));
    Step::cargo("bench: workloads", &args).env("CARGO_TARGET_DIR", root.join("target/compare"))
}
