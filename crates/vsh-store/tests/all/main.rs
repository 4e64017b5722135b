//! Integration tests of vsh-store against real temporary directories, one
//! module per area: blobs, the transaction log, approvals and reservations,
//! artifacts, retention, fault injection and concurrency (threads and processes).
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

mod approval;
mod artifact;
mod authority;
mod blob;
mod common;
mod concurrency;
mod faults;
mod gc;
mod settings;
mod txlog;

/// Tests return errors instead of unwrapping.
type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;
