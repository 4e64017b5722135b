//! Replay the committed fuzz seed corpora of the store's decoders through the fuzz targets'
//! own checks (`fuzz/src/store.rs`).
//!
//! Fuzzing needs nightly and cargo-fuzz (`cargo xtask fuzz`); this test needs neither, so a
//! regression on an input that is already in `fuzz/corpus/txlog_frame` or
//! `fuzz/corpus/artifact` fails plain `cargo test`.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

// The checks are compiled from the fuzz crate's source, so there is one copy of the invariants.
#[allow(unreachable_pub, reason = "the checks are public for the fuzz targets")]
#[path = "../../../fuzz/src/store.rs"]
mod fuzz_checks;

#[allow(unreachable_pub, reason = "shared by every crate's corpus replay")]
#[path = "../../../fuzz/src/replay.rs"]
mod replay;

use replay::replay;

#[test]
fn txlog_frame_seed_corpus() {
    replay("txlog_frame", 1, fuzz_checks::check_txlog_frame);
}

#[test]
fn artifact_seed_corpus() {
    replay("artifact", 1, fuzz_checks::check_artifact);
}
