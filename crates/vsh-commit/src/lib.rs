//! Revalidate a transaction's dependencies against the live workspace, then
//! apply its canonical diff exactly as previewed, or refuse with nothing written.
//!
//! [`Committer::commit`] runs, for one [`CommitRequest`]:
//!
//! 1. **Validate** the diff without touching the host: strictly sorted paths,
//!    no root, nothing within the runtime directory (and no removal of one of
//!    its ancestors), kinds that agree with the before and after states,
//!    content digests on every file and symlink state, modes within `0o7777`,
//!    and parents that are directories on both sides of the change.
//! 2. **Lock**: take `flock(LOCK_EX)` on `<runtime dir>/commit.lock`. Every
//!    `Committer` on the workspace, in any thread or process, takes the same
//!    lock, so revalidation and mutation are serialized; a committed
//!    transaction is serializable as of its commit.
//! 3. **Revalidate** under the lock: every facet of every read-set dependency
//!    (kind or absence, size and mode, content digest, listing), then every
//!    diff entry's before state as an exact precondition (see
//!    `revalidate.rs` for the table). Any conflict is [`CommitError::Stale`]
//!    naming up to `max_conflicts` paths; nothing is written. A mode change on
//!    a file with other hard links is refused ([`CommitError::HardLinked`]).
//! 4. **Stage** every new file and symlink under
//!    `<runtime dir>/stage/<transaction hex>/`, content read from the blob
//!    store and re-hashed, files created with their final mode and `fsync`ed.
//! 5. **Apply** in an order that is always valid: directory mode grants,
//!    removals deepest first, creations shallowest first (a staged file or
//!    symlink replaces a file or symlink by one atomic `rename`), then
//!    directory mode restrictions deepest first.
//! 6. **Sync** each directory whose entries changed, once (plus one `syncfs`
//!    when only modes changed somewhere).
//! 7. **Verify** that every diff path holds its after state (kind, size, mode,
//!    content digest).
//! 8. **Clean up** the staging directory.
//!
//! Every host access goes through the workspace's [`CapDir`], which resolves
//! paths beneath it without following any symlink, so a directory swapped for
//! a symlink is refused, never written through.
//!
//! # What this first part guarantees
//!
//! - A commit that returns [`CommitError::Stale`], [`CommitError::InvalidDiff`],
//!   [`CommitError::HardLinked`], [`CommitError::Blob`] or
//!   [`CommitError::Host`] changed nothing in the workspace (vsh's runtime
//!   directory aside: the lock file and the staging area).
//! - External changes to anything the transaction depended on, made before the
//!   lock is taken, are detected and never overwritten. Changes the
//!   transaction did not depend on (a touched mtime, an unrelated sibling) do
//!   not make it stale.
//! - A successful commit returns a [`CommitReceipt`] only after every changed
//!   path was verified and the changed directories were `fsync`ed.
//! - Each replaced file or symlink changes atomically (one `rename`); a file
//!   with other hard links keeps them pointing at the old content.
//!
//! # Limitations
//!
//! **There is no write-ahead journal or recovery yet.** A crash, power loss,
//! or host error ([`CommitError::Apply`]: out of space, permission denied on
//! a directory the program changed, I/O error) in the middle of step 5 leaves
//! the workspace in a partial state: some operations applied, some not.
//! Nothing rolls that back or forward until the journal lands; the caller must
//! treat [`CommitError::Apply`] and [`CommitError::Verification`] as "needs
//! recovery". Staged files of an interrupted attempt are removed by the next
//! commit on the workspace.
//!
//! Also not done yet: the commit does not move the transaction through the
//! transaction store's states (the caller does); a file is `fsync`ed as it is
//! staged rather than all of them behind one `syncfs`; the lock is advisory,
//! so it does not stop an uncooperative external writer between revalidation
//! and apply; and there are no fault points for crash injection.

#![forbid(unsafe_code)]

mod apply;
mod error;
mod live;
mod plan;
mod revalidate;
mod validate;

use std::sync::Arc;

use vsh_host::{CapDir, LockGuard};
use vsh_store::BlobStore;
use vsh_types::{DiffEntry, TransactionId, VPath};
use vsh_vfs::ReadSet;

pub use error::{CommitError, Conflict, ConflictReason};

use apply::Stage;
use live::LiveView;

/// How many conflicts a stale commit lists by default.
pub const DEFAULT_MAX_CONFLICTS: usize = 128;

/// The default runtime directory, relative to the workspace.
pub const DEFAULT_RUNTIME_DIR: &str = ".vsh";

/// One transaction to commit.
#[derive(Debug, Clone, Copy)]
pub struct CommitRequest<'a> {
    /// The transaction (names its staging directory and its receipt).
    pub transaction: TransactionId,
    /// The canonical diff, sorted by path.
    pub diff: &'a [DiffEntry],
    /// Everything the run depended on.
    pub reads: &'a ReadSet,
    /// Where the new content of every file and symlink is stored.
    pub blobs: &'a BlobStore,
    /// How many conflicts a stale result lists (the total is always counted).
    pub max_conflicts: usize,
}

impl<'a> CommitRequest<'a> {
    /// A request listing up to [`DEFAULT_MAX_CONFLICTS`] conflicts.
    pub fn new(transaction: TransactionId, diff: &'a [DiffEntry], reads: &'a ReadSet, blobs: &'a BlobStore) -> Self {
        Self { transaction, diff, reads, blobs, max_conflicts: DEFAULT_MAX_CONFLICTS }
    }
}

/// What a successful commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitReceipt {
    /// The committed transaction.
    pub transaction: TransactionId,
    /// Host operations applied to the workspace (creations, renames, removals,
    /// mode changes).
    pub operations: u64,
    /// Diff paths verified after applying.
    pub verified_paths: u64,
    /// Read-set dependencies plus diff preconditions revalidated under the lock.
    pub revalidated_dependencies: u64,
}

/// Applies transactions to one workspace.
#[derive(Debug)]
pub struct Committer {
    workspace: Arc<CapDir>,
    runtime_dir: VPath,
    /// The runtime directory first, then any other hidden directory.
    excluded: Vec<VPath>,
}

impl Committer {
    /// A committer for `workspace`.
    ///
    /// `runtime_dir` is vsh's own directory inside the workspace (default
    /// [`DEFAULT_RUNTIME_DIR`]), used for `commit.lock` and `stage/`; it is
    /// created (mode `0o700`, never through a symlink) if missing. The caller
    /// must exclude it from snapshots; diffs may not touch it.
    pub fn new(workspace: Arc<CapDir>, runtime_dir: VPath) -> Result<Committer, CommitError> {
        if runtime_dir.is_root() {
            return Err(CommitError::RuntimeDirIsRoot);
        }
        workspace.open_subdir(&runtime_dir, true).map_err(CommitError::host("open runtime directory", &runtime_dir))?;
        let excluded = vec![runtime_dir.clone()];
        Ok(Committer { workspace, runtime_dir, excluded })
    }

    /// Also hide `path` (a data directory placed inside the workspace) from
    /// revalidation and refuse diffs that touch it, exactly as runs do.
    #[must_use]
    pub fn with_excluded(mut self, path: VPath) -> Committer {
        if !path.is_root() && !self.excluded.contains(&path) {
            self.excluded.push(path);
        }
        self
    }

    /// Every path hidden from runs and commits.
    pub fn excluded(&self) -> &[VPath] {
        &self.excluded
    }

    /// The runtime directory, relative to the workspace.
    pub fn runtime_dir(&self) -> &VPath {
        &self.runtime_dir
    }

    /// Take the workspace's commit lock (blocking until it is free).
    fn lock(&self) -> Result<LockGuard, CommitError> {
        let runtime = self
            .workspace
            .open_subdir(&self.runtime_dir, true)
            .map_err(CommitError::host("open runtime directory", &self.runtime_dir))?;
        let lock = VPath::from_component("commit.lock").expect("a valid constant name");
        runtime.lock_exclusive(&lock).map_err(CommitError::host("lock", &self.runtime_dir))
    }

    fn view(&self) -> LiveView<'_> {
        LiveView { dir: &self.workspace, excluded: &self.excluded }
    }

    /// Revalidate only: validate the diff, take the lock, check every
    /// dependency and precondition, and apply nothing.
    pub fn revalidate(&self, request: &CommitRequest<'_>) -> Result<(), CommitError> {
        validate::validate(request.diff, &self.excluded)?;
        let _lock = self.lock()?;
        revalidate::revalidate(&self.view(), request.diff, request.reads, request.max_conflicts).map(|_| ())
    }

    /// Apply the transaction's diff to the workspace, exactly as previewed, or
    /// refuse with nothing written (see the crate docs for the sequence and for
    /// what a failure part-way leaves behind).
    pub fn commit(&self, request: &CommitRequest<'_>) -> Result<CommitReceipt, CommitError> {
        validate::validate(request.diff, &self.excluded)?;
        let _lock = self.lock()?;
        let view = self.view();
        let revalidated = revalidate::revalidate(&view, request.diff, request.reads, request.max_conflicts)?;
        let plan = plan::lower(request.diff);
        let mut stage = Stage::new(&self.runtime_dir, request.transaction);
        stage.clear_all(&self.workspace)?;
        if let Err(error) = stage.write(&self.workspace, &plan, request.blobs) {
            let _ = stage.remove(&self.workspace);
            return Err(error);
        }
        let operations = match apply::apply(&self.workspace, &plan, &stage) {
            Ok(operations) => operations,
            Err(error) => {
                let _ = stage.remove(&self.workspace);
                return Err(error);
            }
        };
        apply::sync(&self.workspace, &plan, operations)?;
        let verified_paths = apply::verify(&view, request.diff, &plan, &stage)?;
        // The commit is complete and verified; a staging directory that cannot
        // be removed now is cleared by the next commit.
        let _ = stage.remove(&self.workspace);
        Ok(CommitReceipt {
            transaction: request.transaction,
            operations,
            verified_paths,
            revalidated_dependencies: revalidated,
        })
    }
}
