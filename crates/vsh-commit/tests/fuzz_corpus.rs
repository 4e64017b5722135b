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

#[allow(unreachable_pub, reason = "shared by every crate's corpus replay")]
#[path = "../../../fuzz/src/replay.rs"]
mod replay;

use replay::{corpus, replay};

#[test]
fn plan_seed_corpus() {
    replay("plan", 4, fuzz_checks::check_plan);
}

#[test]
fn journal_seed_corpus() {
    replay("journal", 4, fuzz_checks::check_journal);
}

#[test]
fn sealed_plan_bodies_reach_the_field_decoders() {
    let corpus = corpus("plan");
    for name in ["sample-body", "rich-body"] {
        let body = std::fs::read(corpus.join(name)).expect("seed");
        let sealed = fuzz_checks::seal_plan(&body);
        let key = vsh_types::AuthorityKey::unauthenticated();
        assert!(vsh_commit::format::Plan::decode(&sealed, &key).is_ok(), "{name} does not seal into a valid plan");
    }
}
