//! Replay the committed fuzz seed corpora of the commit engine's decoders through the fuzz
//! targets' own checks.
//!
//! Fuzzing needs nightly and cargo-fuzz (`cargo xtask fuzz`); this test needs neither, so a
//! regression on an input that is already in `fuzz/corpus/plan` or `fuzz/corpus/journal` fails
//! plain `cargo test`.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

// The checks are compiled from the fuzz crate's source, so there is one copy of the invariants.
#[allow(unreachable_pub, reason = "the checks are public for the fuzz targets")]
#[path = "../../../fuzz/src/commit.rs"]
mod fuzz_checks;

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut seeds: Vec<_> = std::fs::read_dir(&corpus)
        .unwrap_or_else(|error| panic!("cannot list {}: {error}", corpus.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|path| path.is_file())
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 4, "too few seeds in {}", corpus.display());
    for seed in seeds {
        let data = std::fs::read(&seed).unwrap_or_else(|error| panic!("cannot read {}: {error}", seed.display()));
        eprintln!("replaying {}", seed.display());
        check(&data);
    }
}

#[test]
fn plan_seed_corpus() {
    replay("plan", fuzz_checks::check_plan);
}

#[test]
fn journal_seed_corpus() {
    replay("journal", fuzz_checks::check_journal);
}

#[test]
fn sealed_plan_bodies_reach_the_field_decoders() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/plan");
    for name in ["sample-body", "rich-body"] {
        let body = std::fs::read(corpus.join(name)).expect("seed");
        let sealed = fuzz_checks::seal_plan(&body);
        let key = vsh_types::AuthorityKey::unauthenticated();
        assert!(vsh_commit::format::Plan::decode(&sealed, &key).is_ok(), "{name} does not seal into a valid plan");
    }
}
