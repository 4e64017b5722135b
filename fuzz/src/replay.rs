//! Replaying a committed seed corpus through a target's check, for the `fuzz_corpus` tests of
//! the crates whose decoders are fuzzed (`crates/*/tests/fuzz_corpus.rs` include this file with
//! `#[path]`). It uses only `std`, and finds the corpora relative to the including crate.

use std::path::{Path, PathBuf};

/// The directory of `target`'s seed corpus.
pub fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target)
}

/// Feed every seed file of `target`'s corpus, in name order, to `check`; fails if the corpus
/// holds fewer than `at_least` seeds, so an emptied corpus cannot pass silently.
pub fn replay(target: &str, at_least: usize, check: fn(&[u8])) {
    let corpus = corpus(target);
    let mut seeds: Vec<_> = std::fs::read_dir(&corpus)
        .unwrap_or_else(|error| panic!("cannot list {}: {error}", corpus.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|path| path.is_file())
        .collect();
    seeds.sort();
    assert!(seeds.len() >= at_least, "{} seeds in {}, fewer than {at_least}", seeds.len(), corpus.display());
    for seed in seeds {
        let data = std::fs::read(&seed).unwrap_or_else(|error| panic!("cannot read {}: {error}", seed.display()));
        eprintln!("replaying {}", seed.display());
        check(&data);
    }
}
