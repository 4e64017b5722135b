//! [`FaultyBackend`]: a [`StoreBackend`] wrapper that fails the Nth write,
//! fsync or rename, for crash and fault-injection tests.
//!
//! Each backend operation is counted as the durable steps it performs:
//!
//! | operation | steps, in order |
//! |---|---|
//! | `create_new`, `append`, `truncate` | one write, then one fsync |
//! | `create_new_unsynced`, `append_unsynced` | one write |
//! | `rename` | one rename |
//! | `sync_dir` | one fsync |
//! | `remove`, `create_dir` | one write |
//!
//! Reads, listings and locks are never failed. When the planned step comes,
//! the operation fails with [`BackendError::Injected`] after doing what a crash
//! at that instant could leave behind: a failed write of a new or appended file
//! leaves the first half of its bytes (a torn write), a failed fsync leaves the
//! whole operation done but reports failure, and a failed rename, removal or
//! truncation changes nothing. From then on the backend behaves like a crashed
//! machine: every later write, fsync and rename fails without touching
//! anything, so nothing the store does after the fault reaches the disk.

use std::sync::{Arc, Mutex, PoisonError};

use vsh_types::{BlobId, VPath};

use crate::backend::{BackendError, BackendLock, FaultKind, FileMeta, StoreBackend};

/// Which step to fail: the `nth` (counting from 1) step of `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultPlan {
    /// The kind of step.
    pub kind: FaultKind,
    /// Its 1-based position among the steps of that kind.
    pub nth: u64,
}

impl FaultPlan {
    /// Fail the `nth` (1-based) step of `kind`.
    pub const fn fail_nth(kind: FaultKind, nth: u64) -> Self {
        Self { kind, nth }
    }
}

/// How many steps of each kind a [`FaultyBackend`] has seen, failed ones included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Write steps.
    pub writes: u64,
    /// Fsync steps.
    pub fsyncs: u64,
    /// Rename steps.
    pub renames: u64,
}

impl FaultCounts {
    /// The count for one kind.
    pub const fn of(&self, kind: FaultKind) -> u64 {
        match kind {
            FaultKind::Write => self.writes,
            FaultKind::Fsync => self.fsyncs,
            FaultKind::Rename => self.renames,
        }
    }
}

#[derive(Debug, Default)]
struct FaultState {
    counts: FaultCounts,
    crashed: bool,
}

/// A backend that delegates to another and fails one planned step (see the module docs).
#[derive(Debug)]
pub struct FaultyBackend {
    inner: Arc<dyn StoreBackend>,
    plan: Option<FaultPlan>,
    state: Mutex<FaultState>,
}

/// What a counted step should do.
enum Step {
    Proceed,
    /// This step is the planned fault.
    Fail,
    /// A fault already fired: do nothing.
    Dead,
}

impl FaultyBackend {
    /// Wrap `inner`, failing the step named by `plan` (or none: a counting backend).
    pub fn new(inner: Arc<dyn StoreBackend>, plan: Option<FaultPlan>) -> Self {
        Self { inner, plan, state: Mutex::new(FaultState::default()) }
    }

    /// The steps seen so far.
    pub fn counts(&self) -> FaultCounts {
        self.lock().counts
    }

    /// Whether the planned fault has fired.
    pub fn fired(&self) -> bool {
        self.lock().crashed
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FaultState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn step(&self, kind: FaultKind) -> Step {
        let mut state = self.lock();
        if state.crashed {
            return Step::Dead;
        }
        let counts = &mut state.counts;
        let count = match kind {
            FaultKind::Write => &mut counts.writes,
            FaultKind::Fsync => &mut counts.fsyncs,
            FaultKind::Rename => &mut counts.renames,
        };
        *count += 1;
        let now = *count;
        if self.plan.is_some_and(|plan| plan.kind == kind && plan.nth == now) {
            state.crashed = true;
            return Step::Fail;
        }
        Step::Proceed
    }

    /// A write-then-fsync operation: `torn` does the first half of the work,
    /// `full` all of it.
    fn write_then_sync(
        &self,
        op: &'static str,
        path: &VPath,
        torn: impl FnOnce() -> Result<(), BackendError>,
        full: impl FnOnce() -> Result<(), BackendError>,
    ) -> Result<(), BackendError> {
        match self.step(FaultKind::Write) {
            Step::Proceed => {}
            Step::Fail => {
                // What a crash part-way through the write leaves; its own result does not matter.
                let _ = torn();
                return Err(injected(FaultKind::Write, op, path));
            }
            Step::Dead => return Err(injected(FaultKind::Write, op, path)),
        }
        match self.step(FaultKind::Fsync) {
            Step::Proceed => full(),
            Step::Fail => {
                full()?;
                Err(injected(FaultKind::Fsync, op, path))
            }
            Step::Dead => Err(injected(FaultKind::Fsync, op, path)),
        }
    }

    /// A single-step operation that does nothing when failed.
    fn single(
        &self,
        kind: FaultKind,
        op: &'static str,
        path: &VPath,
        run: impl FnOnce() -> Result<(), BackendError>,
    ) -> Result<(), BackendError> {
        match self.step(kind) {
            Step::Proceed => run(),
            Step::Fail | Step::Dead => Err(injected(kind, op, path)),
        }
    }
}

fn injected(fault: FaultKind, op: &'static str, path: &VPath) -> BackendError {
    BackendError::Injected { fault, op, path: path.clone() }
}

impl StoreBackend for FaultyBackend {
    fn read(&self, path: &VPath, max_bytes: u64) -> Result<Option<Vec<u8>>, BackendError> {
        self.inner.read(path, max_bytes)
    }

    fn hash(&self, path: &VPath) -> Result<Option<BlobId>, BackendError> {
        self.inner.hash(path)
    }

    fn stat(&self, path: &VPath) -> Result<Option<FileMeta>, BackendError> {
        self.inner.stat(path)
    }

    fn create_new(&self, path: &VPath, bytes: &[u8]) -> Result<(), BackendError> {
        self.write_then_sync(
            "create",
            path,
            || self.inner.create_new(path, &bytes[..bytes.len() / 2]),
            || self.inner.create_new(path, bytes),
        )
    }

    fn create_new_unsynced(&self, path: &VPath, bytes: &[u8]) -> Result<(), BackendError> {
        self.single(FaultKind::Write, "create", path, || self.inner.create_new_unsynced(path, bytes))
    }

    fn sync_file(&self, path: &VPath) -> Result<(), BackendError> {
        self.single(FaultKind::Fsync, "sync file", path, || self.inner.sync_file(path))
    }

    fn append(&self, path: &VPath, bytes: &[u8]) -> Result<(), BackendError> {
        self.write_then_sync(
            "append",
            path,
            || self.inner.append(path, &bytes[..bytes.len() / 2]),
            || self.inner.append(path, bytes),
        )
    }

    fn append_unsynced(&self, path: &VPath, bytes: &[u8]) -> Result<(), BackendError> {
        // One write step; failed, it leaves the first half (a torn tail).
        match self.step(FaultKind::Write) {
            Step::Proceed => self.inner.append_unsynced(path, bytes),
            Step::Fail => {
                let _ = self.inner.append_unsynced(path, &bytes[..bytes.len() / 2]);
                Err(injected(FaultKind::Write, "append", path))
            }
            Step::Dead => Err(injected(FaultKind::Write, "append", path)),
        }
    }

    fn truncate(&self, path: &VPath, len: u64) -> Result<(), BackendError> {
        self.write_then_sync("truncate", path, || Ok(()), || self.inner.truncate(path, len))
    }

    fn rename(&self, from: &VPath, to: &VPath) -> Result<(), BackendError> {
        self.single(FaultKind::Rename, "rename", from, || self.inner.rename(from, to))
    }

    fn sync_dir(&self, dir: &VPath) -> Result<(), BackendError> {
        self.single(FaultKind::Fsync, "sync directory", dir, || self.inner.sync_dir(dir))
    }

    fn remove(&self, path: &VPath) -> Result<(), BackendError> {
        self.single(FaultKind::Write, "remove", path, || self.inner.remove(path))
    }

    fn create_dir(&self, dir: &VPath) -> Result<(), BackendError> {
        self.single(FaultKind::Write, "create directory", dir, || self.inner.create_dir(dir))
    }

    fn list(&self, dir: &VPath) -> Result<Vec<String>, BackendError> {
        self.inner.list(dir)
    }

    fn lock(&self, path: &VPath, exclusive: bool) -> Result<BackendLock, BackendError> {
        self.inner.lock(path, exclusive)
    }
}
