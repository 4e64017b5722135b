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

use std::path::Path;

#[test]
fn vpath_seed_corpus() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/vpath");
    let mut seeds: Vec<_> = std::fs::read_dir(&corpus)
        .unwrap_or_else(|error| panic!("cannot list {}: {error}", corpus.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|path| path.is_file())
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "no seeds in {}", corpus.display());
    for seed in seeds {
        let data = std::fs::read(&seed).unwrap_or_else(|error| panic!("cannot read {}: {error}", seed.display()));
        eprintln!("replaying {}", seed.display());
        fuzz_checks::check_vpath(&data);
    }
}
