//! `cargo xtask bench`: run the benchmarks of every workspace crate.
//!
//! For now this is `cargo bench --workspace --locked`; crates add benches as they need them.

use crate::shell::Step;
use crate::{Result, no_arguments};

/// Run `cargo bench` over the whole workspace.
pub(crate) fn run(args: &[String]) -> Result {
    no_arguments("bench", args)?;
    Step::cargo("bench", &["bench", "--workspace", "--locked"]).run()?;
    Ok(())
}
