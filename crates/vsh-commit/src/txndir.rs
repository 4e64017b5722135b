//! [`TxnDir`]: one transaction's directory in the runtime directory,
//! `<runtime dir>/txn/<transaction hex>/`, and the reads, writes and removal
//! of what it holds:
//!
//! ```text
//! plan          the Plan, written once (VSHPLN03)
//! journal       the Journal, replaced whole by rename (VSHJRN02)
//! journal.next  the next journal version while it is written
//! stage.<i>     the new file or symlink of Install operation i
//! quarantine.<i> the old node moved away by Quarantine operation i
//! complete      the completion Marker (VSHDON02)
//! settled       the rollback's Settled record (VSHSTL01)
//! ```
//!
//! Staged and quarantined nodes live in the transaction directory itself,
//! not in subdirectories of their own: the commit's barriers then cover one
//! directory fewer before the intents are durable and one fewer after the
//! operations are applied (a 1-file commit: 9 barriers instead of 11). A
//! directory of the earlier layout (`stage/`, `quarantine/`) is moved into
//! this one before it is read ([`TxnDir::migrate_earlier_layout`]).
//!
//! Cleanup removes these in an order that keeps every intermediate state
//! recognizable (see [`Cleanup`]), and never removes an old node
//! (`quarantine.<i>`) unless the transaction is committed: after a rollback
//! none may be left (everything was moved back) or they all stay.
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

    /// The name of the staged node of operation `operation`, in the
    /// transaction directory.
    pub(crate) fn stage_name(operation: usize) -> String {
        format!("{STAGE_PREFIX}{operation}")
    }

    pub(crate) fn stage_slot(&self, operation: usize) -> VPath {
        self.file(&Self::stage_name(operation))
    }

    pub(crate) fn quarantine_slot(&self, operation: usize) -> VPath {
        self.file(&format!("{QUARANTINE_PREFIX}{operation}"))
    }

    /// Where an earlier layout kept staged nodes and old nodes: a
    /// transaction directory that still holds either after
    /// [`TxnDir::migrate_earlier_layout`] is not read by this one.
    pub(crate) fn earlier_layout(&self) -> [VPath; 2] {
        [self.file("stage"), self.file("quarantine")]
    }

    /// Move the nodes an earlier layout kept in `stage/<i>` and
    /// `quarantine/<i>` to `stage.<i>` and `quarantine.<i>`
    /// (`RENAME_NOREPLACE`), make the moves durable (both directories
    /// `fsync`ed) before anything acts on them, then remove the emptied
    /// subdirectories. A crash in between leaves both layouts side by side,
    /// and the next call finishes the move.
    ///
    /// Only what is provably that layout's is moved, and then all of it:
    /// nodes only when the plan is an earlier-layout plan (`VSHPLN02`) of
    /// `transaction` under `key`, every name is a slot of one of its
    /// operations and no slot is taken in both places. Anything else (a
    /// planted directory, a name vsh never writes) is left exactly as it
    /// is, and recovery reports the directory as a conflict. Empty
    /// subdirectories (an earlier commit stopped before its plan, or a
    /// cleanup that had emptied them) are removed.
    pub(crate) fn migrate_earlier_layout(
        &self,
        workspace: &WritableDir,
        key: &AuthorityKey,
        transaction: TransactionId,
    ) -> Result<(), HostError> {
        let mut moves = Vec::new();
        let mut earlier_dirs = Vec::new();
        for (earlier, prefix) in [("stage", STAGE_PREFIX), ("quarantine", QUARANTINE_PREFIX)] {
            let dir = self.file(earlier);
            let entries = match workspace.list_dir(&dir) {
                Ok(entries) => entries,
                Err(HostError::NotFound { .. }) => continue,
                // Not a directory, or not one vsh can read: left as it is.
                Err(HostError::NotADirectory { .. }) => return Ok(()),
                Err(error) => return Err(error),
            };
            for entry in entries {
                let slot = std::str::from_utf8(&entry.name)
                    .ok()
                    .filter(|digits| !digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit()))
                    .filter(|digits| !digits.starts_with('0') || *digits == "0");
                let Some(slot) = slot else { return Ok(()) };
                let to = self.file(&format!("{prefix}{slot}"));
                if workspace.lstat(&to)?.is_some() {
                    return Ok(());
                }
                let index: usize = slot.parse().unwrap_or(usize::MAX);
                moves.push((dir.child(slot).expect("digits form a valid name"), to, index));
            }
            earlier_dirs.push(dir);
        }
        if !moves.is_empty() {
            let plan = match workspace.read_file(&self.plan(), MAX_PLAN_BYTES) {
                Ok(content) => content.bytes,
                Err(HostError::NotFound { .. } | HostError::NotAFile { .. } | HostError::TooLarge { .. }) => {
                    return Ok(());
                }
                Err(error) => return Err(error),
            };
            let ours = plan.starts_with(&crate::format::PLAN_MAGIC_EARLIER_LAYOUT)
                && Plan::decode(&plan, key).is_ok_and(|(plan, _)| {
                    plan.transaction == transaction && moves.iter().all(|(_, _, index)| *index < plan.operations.len())
                });
            if !ours {
                return Ok(());
            }
            for (from, to, _) in &moves {
                match workspace.rename_noreplace(from, to) {
                    Ok(()) => {}
                    // Taken meanwhile: the rest stays, for an operator.
                    Err(HostError::AlreadyExists { .. } | HostError::DirectoryNotEmpty { .. }) => return Ok(()),
                    Err(error) => return Err(error),
                }
            }
            for dir in &earlier_dirs {
                workspace.sync_dir(dir)?;
            }
            workspace.sync_dir(&self.root)?;
        }
        for dir in &earlier_dirs {
            remove_empty_dir(workspace, dir)?;
        }
        Ok(())
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

    /// Create the directory. An existing one is [`HostError::AlreadyExists`].
    pub(crate) fn create(&self, workspace: &WritableDir) -> Result<(), HostError> {
        workspace.create_dir(&self.root, PRIVATE_DIR_MODE)
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

    /// The old nodes kept in the directory (`quarantine.<i>`; a missing
    /// directory holds none): each entry's path (the directory's own for a
    /// name that is not UTF-8) and the operation it names, `None` for a name
    /// with the prefix that vsh never writes (`quarantine.x`, `quarantine.07`).
    pub(crate) fn quarantined(&self, workspace: &CapDir) -> Result<Vec<(VPath, Option<usize>)>, HostError> {
        Ok(self
            .slots(workspace, QUARANTINE_PREFIX)?
            .into_iter()
            .map(|(path, index)| (path.unwrap_or_else(|| self.root.clone()), index))
            .collect())
    }

    /// Whether anything is staged or kept in the directory (a missing
    /// directory holds nothing).
    pub(crate) fn holds_nodes(&self, workspace: &CapDir) -> Result<bool, HostError> {
        Ok(!self.slots(workspace, STAGE_PREFIX)?.is_empty() || !self.slots(workspace, QUARANTINE_PREFIX)?.is_empty())
    }

    /// The entries whose name starts with `prefix`, with the operation each
    /// names (`None`: a name vsh never writes).
    fn slots(&self, workspace: &CapDir, prefix: &str) -> Result<Vec<Slot>, HostError> {
        let entries = match workspace.list_dir(&self.root) {
            Ok(entries) => entries,
            Err(HostError::NotFound { .. }) => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let mut slots: Vec<Slot> = entries
            .iter()
            .filter_map(|entry| {
                let rest = entry.name.strip_prefix(prefix.as_bytes())?;
                let index = std::str::from_utf8(rest)
                    .ok()
                    .filter(|digits| !digits.starts_with('0') || *digits == "0")
                    .filter(|digits| digits.bytes().all(|byte| byte.is_ascii_digit()))
                    .and_then(|digits| digits.parse().ok());
                // A name that is not UTF-8 is reported, never removed.
                let path = std::str::from_utf8(&entry.name).ok().and_then(|name| self.root.child(name).ok());
                Some((path, index))
            })
            .collect();
        slots.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        Ok(slots)
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
        let steps: Vec<Removal> = match cleanup {
            Cleanup::Committed => vec![
                Removal::Every(QUARANTINE_PREFIX),
                Removal::Every(STAGE_PREFIX),
                Removal::Tree(self.journal_next()),
                Removal::Tree(self.journal()),
                Removal::Tree(self.plan()),
                Removal::Tree(self.settled()),
                Removal::Tree(self.marker()),
                Removal::EmptyDir(self.root.clone()),
            ],
            Cleanup::Restored => vec![
                Removal::NoneLeft(QUARANTINE_PREFIX),
                Removal::Every(STAGE_PREFIX),
                Removal::Tree(self.journal_next()),
                Removal::Tree(self.journal()),
                Removal::Tree(self.plan()),
                Removal::Tree(self.marker()),
                Removal::Tree(self.settled()),
                Removal::EmptyDir(self.root.clone()),
            ],
            Cleanup::KeepEvidence => vec![Removal::Every(STAGE_PREFIX), Removal::Tree(self.journal_next())],
        };
        for (step, removal) in steps.into_iter().enumerate() {
            match removal {
                Removal::Tree(path) => workspace.remove_tree(&path).map_err(CommitError::host("clean up", &path))?,
                Removal::EmptyDir(path) => {
                    remove_empty_dir(workspace, &path).map_err(CommitError::host("clean up", &path))?;
                }
                Removal::Every(prefix) | Removal::NoneLeft(prefix) => {
                    let slots = self.slots(workspace, prefix).map_err(CommitError::host("clean up", &self.root))?;
                    for (path, _) in slots {
                        // A name vsh never writes (not UTF-8) stays, and so
                        // does the directory: the cleanup fails below.
                        if matches!(removal, Removal::NoneLeft(_)) {
                            // An old node not restored (or a name vsh never
                            // writes): it and all the evidence stay.
                            let error = HostError::DirectoryNotEmpty { path: self.root.clone() };
                            return Err(CommitError::host("clean up", path.as_ref().unwrap_or(&self.root))(error));
                        }
                        let Some(path) = path else { continue };
                        workspace.remove_tree(&path).map_err(CommitError::host("clean up", &path))?;
                    }
                }
            }
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
    /// the old nodes (`quarantine.<i>`) first, the marker last.
    Committed,
    /// Nothing of the transaction is in the workspace (rolled back, or never
    /// applied): everything goes, but only once no old node is found
    /// (`quarantine.<i>`: one that is was not restored; it and all the evidence stay, and
    /// the cleanup fails), and the settled record last, so a crash in between
    /// is recognized as a finished rollback.
    Restored,
    /// A rollback left operations for an operator: only vsh's own new bytes
    /// (`stage.<i>`) go; the plan, journal, settled record and every old node
    /// (`quarantine.<i>`) stay as evidence.
    KeepEvidence,
}

/// One entry of a transaction directory with a slot's name prefix: its path
/// (`None` when the name is not UTF-8) and the operation it names (`None`
/// when it names none).
type Slot = (Option<VPath>, Option<usize>);

/// The name prefix of a staged node in the transaction directory.
const STAGE_PREFIX: &str = "stage.";
/// The name prefix of an old node kept in the transaction directory.
const QUARANTINE_PREFIX: &str = "quarantine.";

/// One cleanup step.
#[derive(Debug, Clone)]
enum Removal {
    /// The path and everything below it.
    Tree(VPath),
    /// A directory that must be empty; one that is not stays, and the
    /// cleanup fails.
    EmptyDir(VPath),
    /// Every entry of the transaction directory with this name prefix, and
    /// everything below each.
    Every(&'static str),
    /// No entry with this name prefix may be there: one that is stays, and
    /// the cleanup fails.
    NoneLeft(&'static str),
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
