//! [`HostCounters`]: how many observations and mutations a handle has made.
//!
//! The counters exist so tests can prove cost claims, for example that a run
//! touching one file of a large workspace never reads the others.

use std::sync::atomic::{AtomicU64, Ordering};

/// Operation counters shared by a [`crate::CapDir`] and every subdirectory handle
/// opened from it.
#[derive(Debug, Default)]
pub struct HostCounters {
    stats: AtomicU64,
    reads: AtomicU64,
    lists: AtomicU64,
    writes: AtomicU64,
}

/// A point-in-time copy of [`HostCounters`].
///
/// A call counts once when it is made, whether or not it succeeds.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CounterSnapshot {
    /// `lstat` calls.
    pub stats: u64,
    /// `read_file`, `hash_file` and `read_link` calls.
    pub reads: u64,
    /// `list_dir` calls.
    pub lists: u64,
    /// Mutation, sync and lock calls.
    pub writes: u64,
}

impl HostCounters {
    /// Read all counters. Each is read atomically; the set is not a single atomic snapshot.
    pub fn snapshot(&self) -> CounterSnapshot {
        CounterSnapshot {
            stats: self.stats.load(Ordering::Relaxed),
            reads: self.reads.load(Ordering::Relaxed),
            lists: self.lists.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn stat(&self) {
        self.stats.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn read(&self) {
        self.reads.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn list(&self) {
        self.lists.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn write(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }
}
