//! Fuzz `vsh_types::VPath::parse` and `VPath::join`; the invariants are in `vsh_fuzz::check_vpath`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vsh_fuzz::check_vpath(data));
