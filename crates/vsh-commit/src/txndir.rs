//! [`TxnDir`]: one transaction's directory in the runtime directory,
//! `<runtime dir>/txn/<transaction hex>/`, and the reads, writes and removal
//! of what it holds:
//!
//! ```text
//! plan          the Plan, written once (VSHPLN01)
//! journal       the Journal, replaced whole by rename (VSHJRN01)
//! journal.next  the next journal version while it is written
//! stage/<i>     the new file or symlink of Install operation i
//! quarantine/<i> the old node moved away by Quarantine operation i
//! complete      the completion Marker (VSHDON01)
//! ```
//!
//! Everything is reached through the workspace's [`CapDir`], so a symlink
//! planted anywhere in this state is never followed: reading it is
//! [`Read::Unexpected`], writing through it fails.

use vsh_host::{CapDir, HostError, HostKind};
use vsh_types::{TransactionId, VPath};

use crate::format::{FormatError, Journal, MARKER_BYTES, MAX_JOURNAL_BYTES, MAX_PLAN_BYTES, Marker, Plan, PlanDigest};

/// Mode of vsh's own directories.
pub(crate) const PRIVATE_DIR_MODE: u32 = 0o700;
/// Mode of vsh's own files.
const PRIVATE_FILE_MODE: u32 = 0o600;

/// At most this many threads unlink the files of one directory.
const MAX_UNLINK_WORKERS: usize = 4;
/// A thread is started per this many files (so small directories are emptied inline).
const UNLINKS_PER_WORKER: usize = 64;

/// The name of the directory holding every transaction directory.
pub(crate) const TXN_DIR: &str = "txn";

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

    fn journal_next(&self) -> VPath {
        self.file("journal.next")
    }

    pub(crate) fn marker(&self) -> VPath {
        self.file("complete")
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

    /// Create the directory with `stage/` and `quarantine/`. An existing one
    /// is [`HostError::AlreadyExists`].
    pub(crate) fn create(&self, workspace: &CapDir) -> Result<(), HostError> {
        workspace.create_dir(&self.root, PRIVATE_DIR_MODE)?;
        workspace.create_dir(&self.stage(), PRIVATE_DIR_MODE)?;
        workspace.create_dir(&self.quarantine(), PRIVATE_DIR_MODE)
    }

    /// Write the plan (created exclusively and `fsync`ed; the directory entry
    /// is made durable by a later sync).
    pub(crate) fn write_plan(&self, workspace: &CapDir, encoded: &[u8]) -> Result<(), HostError> {
        workspace.create_file_exclusive(&self.plan(), encoded, PRIVATE_FILE_MODE).map(|_| ())
    }

    /// Replace the journal with `journal`: write `journal.next` (`fsync`ed),
    /// then rename it over `journal`. The caller syncs the directory when the
    /// new version must be durable.
    pub(crate) fn write_journal(&self, workspace: &CapDir, journal: &Journal) -> Result<(), HostError> {
        let next = self.journal_next();
        match workspace.remove_file(&next) {
            Ok(()) | Err(HostError::NotFound { .. }) => {}
            Err(error) => return Err(error),
        }
        workspace.create_file_exclusive(&next, &journal.encode(), PRIVATE_FILE_MODE)?;
        workspace.rename(&next, &self.journal())
    }

    /// Write the completion marker (`fsync`ed; the caller syncs the directory).
    pub(crate) fn write_marker(&self, workspace: &CapDir, marker: &Marker) -> Result<(), HostError> {
        workspace.create_file_exclusive(&self.marker(), &marker.encode(), PRIVATE_FILE_MODE).map(|_| ())
    }

    pub(crate) fn read_plan(&self, workspace: &CapDir) -> Result<Read<(Plan, PlanDigest)>, HostError> {
        read(workspace, &self.plan(), MAX_PLAN_BYTES, Plan::decode)
    }

    pub(crate) fn read_journal(&self, workspace: &CapDir) -> Result<Read<Journal>, HostError> {
        read(workspace, &self.journal(), MAX_JOURNAL_BYTES, Journal::decode)
    }

    pub(crate) fn read_marker(&self, workspace: &CapDir) -> Result<Read<Marker>, HostError> {
        read(workspace, &self.marker(), MARKER_BYTES as u64, Marker::decode)
    }

    /// Remove the directory and everything in it, in an order that keeps
    /// every intermediate state recoverable: quarantined nodes, staged nodes,
    /// then the journal (no intents left: nothing to roll back), the plan, the
    /// marker, and the directory itself. `between` runs after the quarantine
    /// is gone (a fault point).
    pub(crate) fn remove(
        &self,
        workspace: &CapDir,
        between: impl FnOnce() -> Result<(), crate::CommitError>,
    ) -> Result<(), crate::CommitError> {
        let quarantine = self.quarantine();
        remove_tree(workspace, &quarantine).map_err(crate::CommitError::host("clean up", &quarantine))?;
        between()?;
        for path in [self.stage(), self.journal_next(), self.journal(), self.plan(), self.marker(), self.root.clone()] {
            remove_tree(workspace, &path).map_err(crate::CommitError::host("clean up", &path))?;
        }
        Ok(())
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

/// Remove `path` and, if it is a directory, everything below it. Symlinks are
/// removed, never followed; a directory without owner access is opened up
/// first. A missing `path` is success.
pub(crate) fn remove_tree(workspace: &CapDir, path: &VPath) -> Result<(), HostError> {
    let Some(stat) = workspace.lstat(path)? else { return Ok(()) };
    if stat.kind != HostKind::Directory {
        return match workspace.remove_file(path) {
            Ok(()) | Err(HostError::NotFound { .. }) => Ok(()),
            Err(error) => Err(error),
        };
    }
    if stat.mode & PRIVATE_DIR_MODE != PRIVATE_DIR_MODE {
        workspace.set_mode(path, stat.mode | PRIVATE_DIR_MODE)?;
    }
    // Entries are removed by name through a handle on the directory itself
    // (opened without following a symlink), one short resolution each.
    empty(&workspace.open_subdir(path, false)?)?;
    match workspace.remove_dir(path) {
        Ok(()) | Err(HostError::NotFound { .. }) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Remove everything inside the directory `dir`.
///
/// Files go first, on a few threads when there are many: most of an unlink's
/// cost is freeing the inode's blocks, which happens outside the directory's
/// lock, so unlinks in one directory overlap. Directories (and anything the
/// listing could not classify) are then removed one at a time.
fn empty(dir: &CapDir) -> Result<(), HostError> {
    let mut files: Vec<VPath> = Vec::new();
    let mut others: Vec<VPath> = Vec::new();
    for entry in dir.list_dir(&VPath::root())? {
        let name = VPath::from_component_bytes(&entry.name).map_err(|_| HostError::Io {
            op: "list",
            path: VPath::root(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "an entry name is not a valid path component"),
        })?;
        match entry.kind {
            Some(HostKind::File | HostKind::Symlink | HostKind::Other) => files.push(name),
            Some(HostKind::Directory) | None => others.push(name),
        }
    }
    // `unlinkat` without `AT_REMOVEDIR` never removes (or enters) a
    // directory, so a stale kind fails safe: that name takes the full walk.
    let unlink = |names: &[VPath]| -> Vec<VPath> {
        names
            .iter()
            .filter(|name| !matches!(dir.remove_file(name), Ok(()) | Err(HostError::NotFound { .. })))
            .cloned()
            .collect()
    };
    let workers = files.len().div_ceil(UNLINKS_PER_WORKER).clamp(1, MAX_UNLINK_WORKERS);
    let failed: Vec<VPath> = if workers == 1 {
        unlink(&files)
    } else {
        let chunk = files.len().div_ceil(workers);
        std::thread::scope(|scope| {
            let handles: Vec<_> = files.chunks(chunk).map(|names| scope.spawn(move || unlink(names))).collect();
            handles.into_iter().flat_map(|handle| handle.join().expect("an unlinking thread panicked")).collect()
        })
    };
    for name in failed.iter().chain(&others) {
        remove_tree(dir, name)?;
    }
    Ok(())
}
