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

use std::path::{Path, PathBuf};

/// The seed files of one target's corpus, sorted.
fn seeds(target: &str) -> Vec<PathBuf> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut seeds: Vec<_> = std::fs::read_dir(&corpus)
        .unwrap_or_else(|error| panic!("cannot list {}: {error}", corpus.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|path| path.is_file())
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "no seeds in {}", corpus.display());
    seeds
}

fn replay(target: &str, check: fn(&[u8])) {
    for seed in seeds(target) {
        let data = std::fs::read(&seed).unwrap_or_else(|error| panic!("cannot read {}: {error}", seed.display()));
        eprintln!("replaying {}", seed.display());
        check(&data);
    }
}

#[test]
fn txlog_frame_seed_corpus() {
    replay("txlog_frame", fuzz_checks::check_txlog_frame);
}

#[test]
fn artifact_seed_corpus() {
    replay("artifact", fuzz_checks::check_artifact);
}
