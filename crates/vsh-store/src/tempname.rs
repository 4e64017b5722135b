//! Unique names for temporary files written before an atomic rename.
//!
//! A name combines the process id, a per-process sequence number and the
//! current time, so two processes (or two handles in one process) writing
//! into the same temporary directory do not collide; a collision is still
//! handled by the caller, which creates files exclusively and retries.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use vsh_types::VPath;

/// How many names a writer tries before giving up.
pub(crate) const ATTEMPTS: usize = 64;

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// A fresh temporary name inside `dir`.
pub(crate) fn next(dir: &VPath) -> VPath {
    let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_nanos());
    let name = format!("{}-{sequence}-{nanos:x}.tmp", std::process::id());
    dir.child(&name).expect("a generated name is a single component")
}
