//! Fuzz `vsh_commit::format::Plan::decode`; the invariants are in `fuzz/src/commit.rs` (`check_plan`).

#![no_main]

#[allow(dead_code, reason = "each target uses one of the checks")]
#[path = "../src/commit.rs"]
mod commit;

libfuzzer_sys::fuzz_target!(|data: &[u8]| commit::check_plan(data));
