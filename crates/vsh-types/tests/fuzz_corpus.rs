//! Replay the committed fuzz seed corpus through the fuzz targets' own checks.
//!
//! Fuzzing needs nightly and cargo-fuzz (`cargo xtask fuzz`); this test needs neither, so a
//! regression on an input that is already in `fuzz/corpus/` fails plain `cargo test`.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

// The checks are compiled from the fuzz crate's source, so there is one copy of the invariants.
#[allow(unreachable_pub, reason = "`check_vpath` is public for the fuzz target")]
#[path = "../../../fuzz/src/lib.rs"]
mod fuzz_checks;

#[allow(unreachable_pub, reason = "shared by every crate's corpus replay")]
#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn vpath_seed_corpus() {
    replay::replay("vpath", 1, fuzz_checks::check_vpath);
}
