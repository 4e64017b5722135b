//! Integration tests of the in-process executor against real temporary
//! workspaces: one binary, one module per area.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]
#![allow(
    clippy::result_large_err,
    reason = "the helpers pass `ExecutionError` through unchanged, as `execute` returns it"
)]

mod bash;
mod command;
mod common;
mod confinement;
mod errors;
mod features;
mod limits;
mod os_module;
mod pathlib;
mod policy;
mod text;
mod tools;
mod worker;
