//! [`TxnDir`]: one transaction's directory in the runtime directory,
//! `<runtime dir>/txn/<transaction hex>/`, and the reads, writes and removal
//! of what it holds:
//!
//! ```text
//! plan          the Plan, written once (VSHPLN02)
//! journal       the Journal, replaced whole by rename (VSHJRN02)
//! journal.next  the next journal version while it is written
//! stage/<i>     the new file or symlink of Install operation i
//! quarantine/<i> the old node moved away by Quarantine operation i
//! complete      the completion Marker (VSHDON02)
//! settled       the rollback's Settled record (VSHSTL01)
//! ```
//!
//! Cleanup removes these in an order that keeps every intermediate state
//! recognizable (see [`Cleanup`]), and never removes an old node from
//! `quarantine/` unless the transaction is committed: after a rollback the
//! quarantine must be empty (everything was moved back) or it stays.
//!
//! Everything is reached through the workspace's [`CapDir`], so a symlink
//! planted anywhere in this state is never followed: reading it is
//! [`Read::Unexpected`], writing through it fails.

use vsh_host::{CapDir, HostError, WritableDir};
use vsh_types::{AuthorityKey, TransactionId, VPath};

use crate::CommitError;
use crate::fault::{FaultInjector, FaultPoint};
use crate::format::{
    FormatError, Journal, MARKER_BYTES, MAX_JOURNAL_BYTES, MAX_PLAN_BYTES, MAX_SETTLED_BYTES, Marker, Plan, PlanDigest,
    Settled,
};
use crate::recover::check;

/// Mode of vsh's own directories.
pub(crate) const PRIVATE_DIR_MODE: u32 = 0o700;
/// Mode of vsh's own files.
const PRIVATE_FILE_MODE: u32 = 0o600;

/// The name of the directory holding every transaction directory.
pub(crate) const TXN_DIR: &str = "txn";
/// The name of the directory committed transaction directories are moved
/// into, to be removed off the commit's path (see [`TxnDir::discard`]).
pub(crate) const TRASH_DIR: &str = "trash";

/// Create the private file `path` holding `bytes` and start its writeback
/// ([`vsh_host::start_writeback`]), without waiting for it: the caller's
/// batch of barriers makes it durable.
fn write_starting_writeback(workspace: &WritableDir, path: &VPath, bytes: &[u8]) -> Result<(), HostError> {
    let (_, _, file) = workspace.create_file_exclusive_open(path, bytes, PRIVATE_FILE_MODE)?;
    vsh_host::start_writeback(&file, path)
}

/// What reading one internal file found.
#[derive(Debug)]
pub(crate) enum Read<T> {
    /// No such file.
    Absent,
    /// Something other than a regular file is there (a planted symlink, a
    /// directory); it was not followed.
    Unexpected,
    /// A regular file that does not decode.
    Invalid(FormatError),
    /// The decoded value.
    Valid(T),
}

/// One transaction's directory.
#[derive(Debug, Clone)]
pub(crate) struct TxnDir {
    /// `<runtime dir>/txn/<hex>`.
    pub(crate) root: VPath,
}

impl TxnDir {
    pub(crate) fn new(txn_root: &VPath, transaction: TransactionId) -> TxnDir {
        TxnDir { root: txn_root.child(&transaction.to_hex()).expect("hex digits form a valid name") }
    }

    fn file(&self, name: &str) -> VPath {
        self.root.child(name).expect("a valid constant name")
    }

    pub(crate) fn plan(&self) -> VPath {
        self.file("plan")
    }

    pub(crate) fn journal(&self) -> VPath {
        self.file("journal")
    }

    pub(crate) fn journal_next(&self) -> VPath {
        self.file("journal.next")
    }

    pub(crate) fn marker(&self) -> VPath {
        self.file("complete")
    }

    pub(crate) fn settled(&self) -> VPath {
        self.file("settled")
    }

    pub(crate) fn stage(&self) -> VPath {
        self.file("stage")
    }

    pub(crate) fn quarantine(&self) -> VPath {
        self.file("quarantine")
    }

    pub(crate) fn stage_slot(&self, operation: usize) -> VPath {
        self.stage().child(&operation.to_string()).expect("digits form a valid name")
    }

    pub(crate) fn quarantine_slot(&self, operation: usize) -> VPath {
        self.quarantine().child(&operation.to_string()).expect("digits form a valid name")
    }

    /// Move the directory of a committed transaction into `trash` (the
    /// runtime directory's `trash/`, created if missing) in one rename, as
    /// `trash/<hex>`: from then on nothing of it is read again, and removing
    /// it is garbage collection. `None` when the rename cannot be made (the
    /// name is taken, `trash` is not a directory): the caller cleans up in
    /// place.
    pub(crate) fn discard(&self, workspace: &WritableDir, trash: &VPath) -> Option<VPath> {
        let name = self.root.file_name()?;
        let target = trash.child(name).ok()?;
        match workspace.create_dir(trash, PRIVATE_DIR_MODE) {
            Ok(()) | Err(HostError::AlreadyExists { .. }) => {}
            Err(_) => return None,
        }
        workspace.rename_noreplace(&self.root, &target).ok().map(|()| target)
    }

    /// Create the directory with `stage/` and `quarantine/`. An existing one
    /// is [`HostError::AlreadyExists`].
    pub(crate) fn create(&self, workspace: &WritableDir) -> Result<(), HostError> {
        workspace.create_dir(&self.root, PRIVATE_DIR_MODE)?;
        workspace.create_dir(&self.stage(), PRIVATE_DIR_MODE)?;
        workspace.create_dir(&self.quarantine(), PRIVATE_DIR_MODE)
    }

    /// Write the plan (created exclusively and `fsync`ed; the directory entry
    /// is made durable by a later sync).
    /// Write the plan, not synced: the commit makes it durable with the
    /// staged files and the intents, in one batch of barriers.
    pub(crate) fn write_plan(&self, workspace: &WritableDir, encoded: &[u8]) -> Result<(), HostError> {
        write_starting_writeback(workspace, &self.plan(), encoded)
    }

    /// Replace the journal with `journal`: write `journal.next` (`fsync`ed),
    /// then rename it over `journal`. The caller syncs the directory when the
    /// new version must be durable.
    pub(crate) fn write_journal(
        &self,
        workspace: &WritableDir,
        journal: &Journal,
        key: &AuthorityKey,
    ) -> Result<(), HostError> {
        self.write_journal_next(workspace, journal, key, true)?;
        self.publish_journal(workspace)
    }

    /// Write `journal` as `journal.next` (replacing a torn one), `fsync`ed
    /// only when `sync` says so: the commit makes the first version (the
    /// intents) durable in one batch of barriers with the plan and the
    /// staged files.
    pub(crate) fn write_journal_next(
        &self,
        workspace: &WritableDir,
        journal: &Journal,
        key: &AuthorityKey,
        sync: bool,
    ) -> Result<(), HostError> {
        let next = self.journal_next();
        remove_file_if_present(workspace, &next)?;
        if sync {
            workspace.create_file_exclusive(&next, &journal.encode(key), PRIVATE_FILE_MODE).map(|_| ())
        } else {
            write_starting_writeback(workspace, &next, &journal.encode(key))
        }
    }

    /// Rename `journal.next` over `journal` (its content must be durable
    /// first; the caller syncs the directory).
    pub(crate) fn publish_journal(&self, workspace: &WritableDir) -> Result<(), HostError> {
        workspace.rename(&self.journal_next(), &self.journal())
    }

    /// Write the completion marker and make it durable: the file and the
    /// directory are `fsync`ed together (a marker that is torn after a crash
    /// does not decode, and recovery reads it as never written).
    pub(crate) fn write_marker(
        &self,
        workspace: &WritableDir,
        marker: &Marker,
        key: &AuthorityKey,
    ) -> Result<(), HostError> {
        let path = self.marker();
        write_starting_writeback(workspace, &path, &marker.encode(key))?;
        let both = [Some(&path), None];
        vsh_host::concurrently(&both, |file| match file {
            Some(path) => workspace.sync_file(path),
            None => workspace.sync_dir(&self.root),
        })
    }

    /// Write the settled record (a torn one from an earlier crash is replaced)
    /// and make it durable: the file and the directory are `fsync`ed.
    pub(crate) fn write_settled(
        &self,
        workspace: &WritableDir,
        settled: &Settled,
        key: &AuthorityKey,
    ) -> Result<(), HostError> {
        let path = self.settled();
        remove_file_if_present(workspace, &path)?;
        workspace.create_file_exclusive(&path, &settled.encode(key), PRIVATE_FILE_MODE)?;
        workspace.sync_dir(&self.root)
    }

    pub(crate) fn read_plan(
        &self,
        workspace: &CapDir,
        key: &AuthorityKey,
    ) -> Result<Read<(Plan, PlanDigest)>, HostError> {
        read(workspace, &self.plan(), MAX_PLAN_BYTES, |bytes| Plan::decode(bytes, key))
    }

    pub(crate) fn read_journal(&self, workspace: &CapDir, key: &AuthorityKey) -> Result<Read<Journal>, HostError> {
        read(workspace, &self.journal(), MAX_JOURNAL_BYTES, |bytes| Journal::decode(bytes, key))
    }

    pub(crate) fn read_marker(&self, workspace: &CapDir, key: &AuthorityKey) -> Result<Read<Marker>, HostError> {
        read(workspace, &self.marker(), MARKER_BYTES as u64, |bytes| Marker::decode(bytes, key))
    }

    pub(crate) fn read_settled(&self, workspace: &CapDir, key: &AuthorityKey) -> Result<Read<Settled>, HostError> {
        read(workspace, &self.settled(), MAX_SETTLED_BYTES, |bytes| Settled::decode(bytes, key))
    }

    /// The entries of `quarantine/` (missing: none). A name vsh never writes
    /// is returned as `None`.
    pub(crate) fn quarantined(&self, workspace: &CapDir) -> Result<Vec<Option<usize>>, HostError> {
        let entries = match workspace.list_dir(&self.quarantine()) {
            Ok(entries) => entries,
            Err(HostError::NotFound { .. }) => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        Ok(entries
            .iter()
            .map(|entry| {
                std::str::from_utf8(&entry.name)
                    .ok()
                    .filter(|name| !name.starts_with('0') || *name == "0")
                    .and_then(|name| name.parse().ok())
            })
            .collect())
    }

    /// Remove what `cleanup` names, in its order, asking `faults` after each
    /// step ([`FaultPoint::QuarantineRemoved`] after the quarantine of a
    /// committed transaction, [`FaultPoint::CleanedUp`] after every other step).
    pub(crate) fn clean(
        &self,
        workspace: &WritableDir,
        cleanup: Cleanup,
        faults: &dyn FaultInjector,
    ) -> Result<(), CommitError> {
        let quarantine = self.quarantine();
        let steps: Vec<(VPath, Removal)> = match cleanup {
            Cleanup::Committed => vec![
                (quarantine, Removal::Tree),
                (self.stage(), Removal::Tree),
                (self.journal_next(), Removal::Tree),
                (self.journal(), Removal::Tree),
                (self.plan(), Removal::Tree),
                (self.settled(), Removal::Tree),
                (self.marker(), Removal::Tree),
                (self.root.clone(), Removal::EmptyDir),
            ],
            Cleanup::Restored => vec![
                (quarantine, Removal::EmptyDir),
                (self.stage(), Removal::Tree),
                (self.journal_next(), Removal::Tree),
                (self.journal(), Removal::Tree),
                (self.plan(), Removal::Tree),
                (self.marker(), Removal::Tree),
                (self.settled(), Removal::Tree),
                (self.root.clone(), Removal::EmptyDir),
            ],
            Cleanup::KeepEvidence => {
                vec![(self.stage(), Removal::Tree), (self.journal_next(), Removal::Tree)]
            }
        };
        for (step, (path, removal)) in steps.into_iter().enumerate() {
            let removed = match removal {
                Removal::Tree => workspace.remove_tree(&path),
                Removal::EmptyDir => remove_empty_dir(workspace, &path),
            };
            removed.map_err(CommitError::host("clean up", &path))?;
            let point = if cleanup == Cleanup::Committed && step == 0 {
                FaultPoint::QuarantineRemoved
            } else {
                FaultPoint::CleanedUp(step as u32)
            };
            check(faults, point)?;
        }
        Ok(())
    }
}

/// What a cleanup removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cleanup {
    /// The transaction is committed (its marker is durable): everything goes,
    /// the old nodes in `quarantine/` first, the marker last.
    Committed,
    /// Nothing of the transaction is in the workspace (rolled back, or never
    /// applied): everything goes, but only once `quarantine/` is found empty
    /// (an old node there was not restored: it and all the evidence stay, and
    /// the cleanup fails), and the settled record last, so a crash in between
    /// is recognized as a finished rollback.
    Restored,
    /// A rollback left operations for an operator: only vsh's own new bytes
    /// (`stage/`) go; the plan, journal, settled record and every old node in
    /// `quarantine/` stay as evidence.
    KeepEvidence,
}

/// How one cleanup step removes its path.
#[derive(Debug, Clone, Copy)]
enum Removal {
    /// The path and everything below it.
    Tree,
    /// A directory that must be empty; one that is not stays, and the
    /// cleanup fails.
    EmptyDir,
}

fn remove_file_if_present(workspace: &WritableDir, path: &VPath) -> Result<(), HostError> {
    match workspace.remove_file(path) {
        Ok(()) | Err(HostError::NotFound { .. }) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Remove the directory at `path` if it is empty; a missing one is success,
/// a non-empty one [`HostError::DirectoryNotEmpty`].
fn remove_empty_dir(workspace: &WritableDir, path: &VPath) -> Result<(), HostError> {
    match workspace.remove_dir(path) {
        Ok(()) | Err(HostError::NotFound { .. }) => Ok(()),
        Err(error) => Err(error),
    }
}

fn read<T>(
    workspace: &CapDir,
    path: &VPath,
    max_bytes: u64,
    decode: impl FnOnce(&[u8]) -> Result<T, FormatError>,
) -> Result<Read<T>, HostError> {
    match workspace.read_file(path, max_bytes) {
        Ok(content) => Ok(match decode(&content.bytes) {
            Ok(value) => Read::Valid(value),
            Err(error) => Read::Invalid(error),
        }),
        Err(HostError::NotFound { .. }) => Ok(Read::Absent),
        Err(HostError::NotAFile { .. }) => Ok(Read::Unexpected),
        Err(HostError::TooLarge { size, max, .. }) => {
            Ok(Read::Invalid(FormatError::TooLarge { file: "internal file", size, max }))
        }
        Err(error) => Err(error),
    }
}
