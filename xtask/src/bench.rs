//! `cargo xtask bench`: run the benchmarks of every workspace crate.
//!
//! `cargo bench --workspace --locked` (each crate's benches), then the
//! Python SDK's benchmark over the release wheel (see `python_sdk.rs`).

use crate::shell::Step;
use crate::{Result, no_arguments};

/// Run `cargo bench` over the whole workspace.
pub(crate) fn run(args: &[String]) -> Result {
    no_arguments("bench", args)?;
    Step::cargo("bench", &["bench", "--workspace", "--locked"]).run()?;
    std::fs::create_dir_all(crate::project_root().join("target/bench"))
        .map_err(|error| crate::Error::new(format!("cannot make target/bench: {error}")))?;
    for step in crate::python_sdk::bench_steps()? {
        step.run()?;
    }
    Ok(())
}
