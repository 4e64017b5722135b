//! Staging, applying and verifying the operations of a [`Plan`].
//!
//! Staging writes every new file and symlink into the transaction directory (`stage.<i>`)
//! before the workspace is touched, with content read from the blob store
//! (which re-hashes it); a few threads stage at once, so the filesystem can
//! group their writes. Applying only renames, creates directories and changes
//! modes: a staged node reaches its final name by one `rename`, so a reader
//! never sees a partially written file, and an old node leaves by a rename
//! to `quarantine.<i>`, so it can be moved back.
//!
//! Each operation leaves a state recovery can recognize (see
//! `crate::recover`): the *witness* of an operation is the inode number of the
//! node it moves or changes, journaled with its intent.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use vsh_host::{CapDir, HostError, HostKind, HostStat, WritableDir};
use vsh_store::BlobStore;
use vsh_types::{BlobId, DiffEntry, NodeKind, NodeState, VPath};

use crate::error::{CommitError, ConflictReason};
use crate::format::{Action, Plan};
use crate::live::{Live, LiveView};
use crate::txndir::TxnDir;

/// At most this many threads stage files.
const MAX_STAGE_WORKERS: usize = 8;
/// A thread is started per this many staged nodes (so small commits stage inline).
const STAGED_PER_WORKER: usize = 16;

/// One staged node: its operation, what was installed, and whether it is a
/// file (to be synced).
type Staged = (usize, Installed, bool);

/// Durability barriers issued by one commit.
#[derive(Debug, Default)]
pub(crate) struct Syncs {
    pub(crate) file_fsyncs: AtomicU64,
    pub(crate) dir_fsyncs: AtomicU64,
    pub(crate) syncfs: AtomicU64,
}

impl Syncs {
    pub(crate) fn file(&self) {
        self.file_fsyncs.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn dir(&self) {
        self.dir_fsyncs.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn filesystem(&self) {
        self.syncfs.fetch_add(1, Ordering::Relaxed);
    }
}

/// Stage the node of every [`Action::Install`] at `stage.<operation>` in the
/// transaction directory.
/// Returns, per operation, the staged node's [`Installed`] identity (zeros
/// for other operations), and which staged nodes are files.
///
/// Each file is written by [`WritableDir::create_file_exclusive_open`] on up
/// to [`MAX_STAGE_WORKERS`] threads and not synced: the caller makes every
/// staged file durable ([`Stage::sync_file`]) in one batch of barriers with
/// the plan and the intents, then the directory entries. Only this commit's
/// own bytes are flushed: no `syncfs`, so other programs' dirty data on the
/// filesystem does not delay it.
pub(crate) fn stage(
    workspace: &WritableDir,
    txn: &TxnDir,
    plan: &Plan,
    sources: Sources<'_>,
) -> Result<Stage, CommitError> {
    let jobs: Vec<usize> =
        (0..plan.operations.len()).filter(|index| plan.operations[*index].action == Action::Install).collect();
    let mut staged = vec![Installed::default(); plan.operations.len()];
    let workers = jobs.len().div_ceil(STAGED_PER_WORKER).clamp(1, MAX_STAGE_WORKERS);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // Nodes are created by name through a handle on the transaction
    // directory itself (opened without following a symlink), one short
    // resolution each.
    let stage_dir = workspace.open_subdir(&txn.root).map_err(CommitError::host("stage", &txn.root))?;
    let stage_dir = WritableDir::new(std::sync::Arc::new(stage_dir));
    let stage_dir = &stage_dir;
    // Only a privileged committer can give a file to its owner.
    let owners = (vsh_host::effective_uid() == 0).then_some(workspace);
    let work = || -> Result<Vec<Staged>, CommitError> {
        let mut done = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let Some(&operation) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) else { break };
            let entry = &plan.entries[plan.operations[operation].entry as usize];
            match stage_one(stage_dir, txn, operation, entry, sources, owners) {
                // The file is closed here and synced with all the others below.
                Ok((installed, file)) => done.push((operation, installed, file.is_some())),
                Err(error) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(error);
                }
            }
        }
        Ok(done)
    };
    let results: Vec<Result<Vec<Staged>, CommitError>> = if workers == 1 {
        vec![work()]
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers).map(|_| scope.spawn(work)).collect();
            handles.into_iter().map(|handle| handle.join().expect("a staging thread panicked")).collect()
        })
    };
    let mut files = Vec::new();
    for result in results {
        for (operation, installed, file) in result? {
            staged[operation] = installed;
            if file {
                files.push(operation);
            }
        }
    }
    files.sort_unstable();
    Ok(Stage { installed: staged, files, dir: stage_dir.clone() })
}

/// What [`stage`] wrote, not yet durable.
pub(crate) struct Stage {
    /// The staged node of every operation (default for those that install nothing).
    pub(crate) installed: Vec<Installed>,
    /// The operations whose staged node is a regular file, to `fsync`.
    pub(crate) files: Vec<usize>,
    /// The transaction directory, opened without following a symlink.
    pub(crate) dir: WritableDir,
}

impl Stage {
    /// `fsync` the staged file of `operation`, through the handle on the
    /// transaction directory.
    pub(crate) fn sync_file(&self, txn: &TxnDir, operation: usize) -> Result<(), CommitError> {
        let name = VPath::from_component(&TxnDir::stage_name(operation)).expect("a valid name");
        self.dir.sync_file(&name).map_err(CommitError::host("sync staged file", &txn.stage_slot(operation)))
    }
}

/// Make every applied operation and the rewritten journal durable, by
/// `fsync`ing what they changed and nothing else: each directory an entry was
/// renamed out of or into or made in (the transaction directory, which holds
/// the staged and quarantined nodes and the journal, and the parents of
/// changed paths), each directory made, and each node whose mode changed. Only when a
/// node cannot be opened to sync it (its new mode denies reading it, to a
/// process that is not root) does one `syncfs` make everything durable instead.
pub(crate) fn sync_applied(
    workspace: &WritableDir,
    txn: &TxnDir,
    plan: &Plan,
    journal_rewritten: bool,
    syncs: &Syncs,
) -> Result<(), CommitError> {
    let mut dirs = std::collections::BTreeSet::new();
    if journal_rewritten {
        // The journal with the done records was renamed into place.
        dirs.insert(txn.root.clone());
    }
    // The staged and quarantined nodes are the transaction directory's.
    let mut files = std::collections::BTreeSet::new();
    for operation in &plan.operations {
        let path = &plan.entries[operation.entry as usize].path;
        let parent = path.parent().unwrap_or_default();
        match operation.action {
            Action::Quarantine | Action::Install => {
                dirs.insert(parent);
                dirs.insert(txn.root.clone());
            }
            Action::CreateDir { .. } => {
                dirs.insert(parent);
                dirs.insert(path.clone());
            }
            Action::SetDirMode { .. } => {
                dirs.insert(path.clone());
            }
            Action::SetFileMode { .. } => {
                files.insert(path.clone());
            }
        }
    }
    let denied = |error: &HostError| matches!(error, HostError::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied);
    let unsynced = AtomicBool::new(false);
    // All at once: the filesystem's journal commits concurrent barriers together.
    let barriers: Vec<(&VPath, bool)> =
        dirs.iter().map(|dir| (dir, true)).chain(files.iter().map(|file| (file, false))).collect();
    vsh_host::concurrently(&barriers, |(path, is_dir)| {
        let synced = if *is_dir { workspace.sync_dir(path) } else { workspace.sync_file(path) };
        match synced {
            Ok(()) if *is_dir => syncs.dir(),
            Ok(()) => syncs.file(),
            Err(error) if denied(&error) => unsynced.store(true, Ordering::Relaxed),
            Err(error) => return Err(CommitError::host("sync", path)(error)),
        }
        Ok(())
    })?;
    if unsynced.into_inner() {
        workspace.syncfs().map_err(CommitError::host("sync", &VPath::root()))?;
        syncs.filesystem();
    }
    Ok(())
}

/// The owner and group a file installed at `path` keeps: the node's there
/// now, else its parent directory's; `None` when that is root's already (or
/// neither can be read: revalidation will say why), so nothing is changed.
fn owner_for(workspace: &WritableDir, path: &VPath) -> Option<(u32, u32)> {
    let at = |path: &VPath| workspace.read_only().lstat(path).ok().flatten();
    let stat = at(path).or_else(|| at(&path.parent().unwrap_or_else(VPath::root)))?;
    (stat.uid != 0 || stat.gid != 0).then_some((stat.uid, stat.gid))
}

/// Where staging takes new contents: the blob store, and first the
/// contents held in memory, if any.
pub(crate) type Sources<'a> = (&'a BlobStore, Option<&'a crate::MemoryContents>);

/// Stage one node in `stage_dir` (the handle on `txn`'s directory); a file is
/// handed back open, not yet synced. With `owners` (the workspace, when the
/// committer is root), a file gets the owner and group of the node it
/// replaces, or of its parent directory when it is new, instead of the
/// committer's: a user's file edited by a vsh running as root stays theirs.
fn stage_one(
    stage_dir: &WritableDir,
    txn: &TxnDir,
    operation: usize,
    entry: &DiffEntry,
    (blobs, memory): Sources<'_>,
    owners: Option<&WritableDir>,
) -> Result<(Installed, Option<std::fs::File>), CommitError> {
    let invalid = |reason| CommitError::InvalidDiff { path: entry.path.clone(), reason };
    let after = entry.after.ok_or_else(|| invalid("an install has no after state"))?;
    let content = after.content.ok_or_else(|| invalid("no content digest"))?;
    let bytes: std::borrow::Cow<'_, [u8]> = match memory.and_then(|memory| memory.get(&content)) {
        // Re-hashed as a blob read is: the bytes staged are the digest's.
        Some(bytes) if BlobId::of(bytes) == content => std::borrow::Cow::Borrowed(bytes),
        Some(_) => return Err(invalid("the content held in memory does not match its digest")),
        None => std::borrow::Cow::Owned(
            blobs
                .get(content, after.size)
                .map_err(|source| CommitError::Blob { path: entry.path.clone(), source: Box::new(source) })?,
        ),
    };
    if bytes.len() as u64 != after.size {
        return Err(invalid("size does not match the content"));
    }
    let slot = txn.stage_slot(operation);
    let name = VPath::from_component(&TxnDir::stage_name(operation)).expect("a valid name");
    match after.kind {
        NodeKind::File => {
            // Synced by the caller, in batches, before anything depends on it.
            let (stat, generation, file) = stage_dir
                .create_file_exclusive_open(&name, &bytes, after.mode)
                .map_err(CommitError::host("stage file", &slot))?;
            if let Some((uid, gid)) = owners.and_then(|workspace| owner_for(workspace, &entry.path)) {
                // Durable with the file's own barrier (the caller's batch).
                vsh_host::set_owner(&file, uid, gid, &slot).map_err(CommitError::host("stage file", &slot))?;
            }
            // Its writeback starts now, so the batch's first barrier commits
            // every staged file's blocks together.
            vsh_host::start_writeback(&file, &slot).map_err(CommitError::host("stage file", &slot))?;
            Ok((Installed { ino: stat.identity.ino, generation: generation_stamp(generation) }, Some(file)))
        }
        NodeKind::Symlink => {
            stage_dir.create_symlink(&name, &bytes).map_err(CommitError::host("stage symlink", &slot))?;
            match stage_dir.lstat(&name).map_err(CommitError::host("stage symlink", &slot))? {
                // A symlink cannot be opened to ask its generation.
                Some(stat) if stat.kind == HostKind::Symlink => {
                    Ok((Installed { ino: stat.identity.ino, generation: 0 }, None))
                }
                _ => Err(CommitError::Host {
                    op: "stage symlink",
                    path: slot.clone(),
                    source: HostError::NotASymlink { path: slot },
                }),
            }
        }
        NodeKind::Directory => Err(invalid("a directory cannot be staged")),
    }
}

/// The witness of every operation's intent: the inode of the existing node it
/// moves or changes, the staged inode for an install, 0 for a directory still
/// to be created (and a mode change of one); and its stamp: for a quarantine,
/// the [`crate::format::stamp`] of the node revalidation checked, for an
/// install the staged node's [`generation_stamp`], 0 otherwise.
///
/// Called under the lock right after revalidation, which established that
/// every node exists as the diff says (`before` holds the node each before
/// state was checked on); a node that vanished or changed since is stale.
pub(crate) fn intent_witnesses(
    workspace: &WritableDir,
    plan: &Plan,
    staged: &[Installed],
    before: &BTreeMap<VPath, HostStat>,
) -> Result<Vec<(u64, u64)>, CommitError> {
    let mut witnesses = Vec::with_capacity(plan.operations.len());
    for (index, operation) in plan.operations.iter().enumerate() {
        let entry = &plan.entries[operation.entry as usize];
        let existing = match operation.action {
            Action::Quarantine | Action::SetFileMode { .. } => true,
            Action::SetDirMode { .. } => entry.before.is_some_and(|before| before.kind == NodeKind::Directory),
            Action::CreateDir { .. } | Action::Install => false,
        };
        if !existing {
            witnesses.push((staged[index].ino, staged[index].generation));
            continue;
        }
        let live = match workspace.lstat(&entry.path) {
            Ok(Some(stat)) => stat,
            Ok(None) | Err(HostError::SymlinkInPath { .. } | HostError::NotADirectory { .. }) => {
                return Err(stale(&entry.path, ConflictReason::Precondition));
            }
            Err(source) => return Err(CommitError::Host { op: "lstat", path: entry.path.clone(), source }),
        };
        let checked = before.get(&entry.path);
        if checked.is_some_and(|checked| {
            checked.identity != live.identity || checked.size != live.size || checked.mtime_ns != live.mtime_ns
        }) {
            return Err(stale(&entry.path, ConflictReason::Precondition));
        }
        let stamp = match (operation.action, checked) {
            (Action::Quarantine, Some(checked)) => crate::format::stamp(checked.mtime_ns, checked.size),
            _ => 0,
        };
        witnesses.push((live.identity.ino, stamp));
    }
    Ok(witnesses)
}

/// A single-path stale error.
pub(crate) fn stale(path: &VPath, reason: ConflictReason) -> CommitError {
    CommitError::Stale { conflicts: vec![crate::Conflict { path: path.clone(), reason }], total: 1 }
}

/// Why one operation could not be applied.
#[derive(Debug)]
pub(crate) enum ApplyFailure {
    /// The host refused.
    Host(HostError),
    /// Making a directory was refused, so nothing was made: the name was
    /// taken, or its parent was not there to make it in (the host's
    /// `create_dir` says so by these kinds only before it made anything).
    NotMade(HostError),
    /// A file whose mode was to change has other hard links now.
    HardLinked(u64),
    /// The node is no longer the one revalidated (its witness changed).
    Changed,
}

/// Apply operation `index`; returns its done witness (the new directory's
/// inode for [`Action::CreateDir`], else the intent witness).
pub(crate) fn apply_one(
    workspace: &WritableDir,
    txn: &TxnDir,
    plan: &Plan,
    index: usize,
    witness: u64,
) -> Result<u64, ApplyFailure> {
    let operation = plan.operations[index];
    let path = &plan.entries[operation.entry as usize].path;
    match operation.action {
        Action::SetDirMode { before, after } => {
            // A mode someone set since revalidation is theirs: not overwritten
            // (a rollback would put back ours, and theirs would be lost).
            match workspace.lstat(path).map_err(ApplyFailure::Host)? {
                Some(stat) if stat.kind == HostKind::Directory && stat.mode & 0o7777 == before => {}
                _ => return Err(ApplyFailure::Changed),
            }
            workspace.set_mode(path, after).map_err(ApplyFailure::Host)?;
        }
        Action::Quarantine => {
            workspace.rename_noreplace(path, &txn.quarantine_slot(index)).map_err(ApplyFailure::Host)?;
        }
        Action::CreateDir { mode } => {
            workspace.create_dir(path, mode).map_err(|error| match error {
                HostError::AlreadyExists { .. }
                | HostError::NotFound { .. }
                | HostError::NotADirectory { .. }
                | HostError::SymlinkInPath { .. } => ApplyFailure::NotMade(error),
                other => ApplyFailure::Host(other),
            })?;
            return match workspace.lstat(path).map_err(ApplyFailure::Host)? {
                Some(stat) if stat.kind == HostKind::Directory => Ok(stat.identity.ino),
                _ => Err(ApplyFailure::Changed),
            };
        }
        Action::Install => {
            workspace.rename_noreplace(&txn.stage_slot(index), path).map_err(ApplyFailure::Host)?;
        }
        Action::SetFileMode { before, after } => {
            match workspace.lstat(path).map_err(ApplyFailure::Host)? {
                Some(stat)
                    if stat.kind == HostKind::File && stat.identity.ino == witness && stat.mode & 0o7777 == before =>
                {
                    if stat.nlink > 1 {
                        return Err(ApplyFailure::HardLinked(stat.nlink));
                    }
                }
                _ => return Err(ApplyFailure::Changed),
            }
            workspace.set_mode(path, after).map_err(ApplyFailure::Host)?;
        }
    }
    Ok(witness)
}

/// Set in an install's [`generation_stamp`] when the generation is known, so
/// a known generation of 0 differs from "unknown".
const GENERATION_KNOWN: u64 = 1 << 32;

/// What an install's intent journals as its stamp: the staged node's inode
/// generation (see [`CapDir::generation`]) with [`GENERATION_KNOWN`] set, or
/// 0 when the filesystem keeps none (or the node is a symlink).
pub(crate) fn generation_stamp(generation: Option<u32>) -> u64 {
    generation.map_or(0, |generation| GENERATION_KNOWN | u64::from(generation))
}

/// The identity of a node this transaction installed: its inode number and
/// its [`generation_stamp`]. The inode number alone does not tell our node
/// from one someone made after deleting it, because ext4 hands the freed
/// number to the next new file; the generation does.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Installed {
    pub(crate) ino: u64,
    pub(crate) generation: u64,
}

impl Installed {
    /// Whether the node at `path`, whose inode number is `ino`, is this one:
    /// the same inode number and, when both generations can be known, the
    /// same generation. One that cannot be asked now (its mode denies this
    /// process opening it) is judged by its inode number.
    pub(crate) fn is(&self, dir: &CapDir, path: &VPath, ino: u64) -> Result<bool, CommitError> {
        if ino != self.ino {
            return Ok(false);
        }
        if self.generation == 0 {
            return Ok(true);
        }
        match dir.generation(path) {
            Ok(Some(generation)) => Ok(generation_stamp(Some(generation)) == self.generation),
            Ok(None) => Ok(true),
            Err(source) => Err(CommitError::Host { op: "generation", path: path.clone(), source }),
        }
    }
}

/// The node each installed diff entry must be: entry index to identity, from
/// each operation's intent witness and stamp.
pub(crate) fn installed_identities(plan: &Plan, witnesses: &[(u64, u64)]) -> BTreeMap<u32, Installed> {
    plan.operations
        .iter()
        .zip(witnesses)
        .filter(|(operation, (ino, _))| operation.action == Action::Install && *ino != 0)
        .map(|(operation, (ino, generation))| (operation.entry, Installed { ino: *ino, generation: *generation }))
        .collect()
}

/// Whether `path` holds `expected` (`None`: absent or unreachable), and, when
/// `identity` is given, is that node.
///
/// Files are re-hashed; a file whose mode denies its owner reading is checked
/// by kind, size and mode (and identity, when known); an unread file (a
/// before state with a stamp) by kind, size, mode, identity and mtime.
pub(crate) fn holds(
    view: &LiveView<'_>,
    path: &VPath,
    expected: Option<&NodeState>,
    identity: Option<Installed>,
) -> Result<bool, CommitError> {
    let live = view.observe(path)?;
    let Some(expected) = expected else { return Ok(!matches!(live, Live::Present(_))) };
    let Live::Present(stat) = live else { return Ok(false) };
    if let Some(identity) = identity
        && !identity.is(view.dir, path, stat.identity.ino)?
    {
        return Ok(false);
    }
    if let Some(stamp) = expected.stamp {
        // An unread file the rollback put back: moving it out and back
        // changed its ctime, so it is the same file by kind, size, mode,
        // identity and mtime (its bytes were never read, so there is no
        // digest to compare).
        return Ok(stat.kind == vsh_host::HostKind::File
            && stat.size == expected.size
            && stat.mode == expected.mode
            && stat.identity.dev == stamp.dev
            && stat.identity.ino == stamp.ino
            && i64::try_from(stat.mtime_ns).ok() == Some(stamp.mtime_ns));
    }
    Ok(match view.matches_state(path, &stat, expected)? {
        Ok(matches) => matches,
        // Only a node whose kind, size and mode match is read, so an unreadable
        // one is judged by those when its mode denies its owner reading.
        Err(ConflictReason::Unreadable) => unreadable_by_owner(expected),
        Err(_) => false,
    })
}

/// The first diff path that does not hold its after state, if any.
pub(crate) fn verify_after(
    view: &LiveView<'_>,
    plan: &Plan,
    installed: &BTreeMap<u32, Installed>,
) -> Result<Option<VPath>, CommitError> {
    for (index, entry) in plan.entries.iter().enumerate() {
        let identity = u32::try_from(index).ok().and_then(|index| installed.get(&index).copied());
        if !holds(view, &entry.path, entry.after.as_ref(), identity)? {
            return Ok(Some(entry.path.clone()));
        }
    }
    Ok(None)
}

/// Every diff path that does not hold its after state (for a recovery that
/// rolls forward: those were changed after the commit point).
pub(crate) fn paths_not_after(
    view: &LiveView<'_>,
    plan: &Plan,
    installed: &BTreeMap<u32, Installed>,
) -> Result<Vec<VPath>, CommitError> {
    let mut changed = Vec::new();
    for (index, entry) in plan.entries.iter().enumerate() {
        let identity = u32::try_from(index).ok().and_then(|index| installed.get(&index).copied());
        if !holds(view, &entry.path, entry.after.as_ref(), identity)? {
            changed.push(entry.path.clone());
        }
    }
    Ok(changed)
}

/// Whether `state`'s mode denies its owner reading (`0o400` clear): then nobody
/// but a privileged process can read the node back, and its metadata is all
/// there is to check.
fn unreadable_by_owner(state: &NodeState) -> bool {
    state.mode & 0o400 == 0
}
