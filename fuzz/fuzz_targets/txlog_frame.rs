//! Fuzz the transaction log's frame decoder and replay; the invariants are in
//! `fuzz/src/store.rs` (`check_txlog_frame`).

#![no_main]

#[allow(dead_code, reason = "the artifact check belongs to the other target")]
#[path = "../src/store.rs"]
mod store;

libfuzzer_sys::fuzz_target!(|data: &[u8]| store::check_txlog_frame(data));
