//! Fuzz the pending-approval artifact decoder; the invariants are in
//! `fuzz/src/store.rs` (`check_artifact`).

#![no_main]

#[allow(dead_code, reason = "the log check belongs to the other target")]
#[path = "../src/store.rs"]
mod store;

libfuzzer_sys::fuzz_target!(|data: &[u8]| store::check_artifact(data));
