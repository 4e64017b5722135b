//! Staging, applying, syncing and verifying a [`Plan`].
//!
//! Staging writes every new file and symlink into
//! `<runtime dir>/stage/<transaction hex>/<slot>` before the workspace is
//! touched, with content read from the blob store (which re-hashes it).
//! Applying then only renames, creates, removes and changes modes; a staged
//! file reaches its final name by one `rename`, so a reader never sees a
//! partially written file.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use vsh_host::{CapDir, FileIdentity, HostError, HostKind, HostStat};
use vsh_store::BlobStore;
use vsh_types::{DiffEntry, NodeKind, NodeState, TransactionId, VPath};

use crate::error::{CommitError, ConflictReason};
use crate::live::{Live, LiveView};
use crate::plan::{Op, Plan};

/// Mode of vsh's own directories.
const PRIVATE_DIR_MODE: u32 = 0o700;

/// The staging area of one transaction.
pub(crate) struct Stage {
    /// `<runtime dir>/stage`.
    root: VPath,
    /// `<runtime dir>/stage/<transaction hex>`.
    dir: VPath,
    /// The inode of each staged file, by slot (`None` for symlinks).
    identities: Vec<Option<FileIdentity>>,
}

impl Stage {
    pub(crate) fn new(runtime_dir: &VPath, transaction: TransactionId) -> Stage {
        let root = runtime_dir.child("stage").expect("a valid constant name");
        let dir = root.child(&transaction.to_hex()).expect("hex digits form a valid name");
        Stage { root, dir, identities: Vec::new() }
    }

    fn slot_path(&self, slot: usize) -> VPath {
        self.dir.child(&slot.to_string()).expect("digits form a valid name")
    }

    /// Remove every staging directory (left by an attempt that stopped
    /// part-way). Called with the commit lock held, when no commit is staging.
    pub(crate) fn clear_all(&self, workspace: &CapDir) -> Result<(), CommitError> {
        match workspace.create_dir(&self.root, PRIVATE_DIR_MODE) {
            Ok(()) | Err(HostError::AlreadyExists { .. }) => {}
            Err(source) => return Err(CommitError::Host { op: "create stage", path: self.root.clone(), source }),
        }
        let entries = workspace.list_dir(&self.root).map_err(CommitError::host("list stage", &self.root))?;
        for entry in entries {
            let Some(dir) = std::str::from_utf8(&entry.name).ok().and_then(|name| self.root.child(name).ok()) else {
                continue;
            };
            remove_tree_shallow(workspace, &dir)?;
        }
        Ok(())
    }

    /// Write every staged file and symlink, then sync the staging directory.
    ///
    /// Each file is `fsync`ed as it is created (one `fsync` per file; batching
    /// them behind one `syncfs` is left for the journaled commit).
    pub(crate) fn write(&mut self, workspace: &CapDir, plan: &Plan, blobs: &BlobStore) -> Result<(), CommitError> {
        workspace.create_dir(&self.dir, PRIVATE_DIR_MODE).map_err(CommitError::host("create stage", &self.dir))?;
        for (slot, staged) in plan.staged.iter().enumerate() {
            let invalid = |reason| CommitError::InvalidDiff { path: staged.path.clone(), reason };
            let content = staged.state.content.ok_or_else(|| invalid("no content digest"))?;
            let bytes = blobs
                .get(content, staged.state.size)
                .map_err(|source| CommitError::Blob { path: staged.path.clone(), source: Box::new(source) })?;
            if bytes.len() as u64 != staged.state.size {
                return Err(invalid("size does not match the content"));
            }
            let target = self.slot_path(slot);
            let identity = match staged.state.kind {
                NodeKind::File => {
                    let stat = workspace
                        .create_file_exclusive(&target, &bytes, staged.state.mode)
                        .map_err(CommitError::host("stage file", &target))?;
                    Some(stat.identity)
                }
                NodeKind::Symlink => {
                    workspace.create_symlink(&target, &bytes).map_err(CommitError::host("stage symlink", &target))?;
                    None
                }
                NodeKind::Directory => return Err(invalid("a directory cannot be staged")),
            };
            self.identities.push(identity);
        }
        workspace.sync_dir(&self.dir).map_err(CommitError::host("sync stage", &self.dir))
    }

    /// Remove this transaction's staging directory and anything left in it.
    pub(crate) fn remove(&self, workspace: &CapDir) -> Result<(), CommitError> {
        remove_tree_shallow(workspace, &self.dir)
    }
}

/// Remove a staging directory: its non-directory entries, then itself.
fn remove_tree_shallow(workspace: &CapDir, dir: &VPath) -> Result<(), CommitError> {
    let entries = match workspace.list_dir(dir) {
        Ok(entries) => entries,
        Err(HostError::NotFound { .. }) => return Ok(()),
        Err(HostError::NotADirectory { path }) if path == *dir => {
            return workspace.remove_file(dir).map_err(CommitError::host("clear stage", dir));
        }
        Err(source) => return Err(CommitError::Host { op: "clear stage", path: dir.clone(), source }),
    };
    for entry in entries {
        // A name vsh cannot have written is left; removing the directory then fails.
        let Some(path) = std::str::from_utf8(&entry.name).ok().and_then(|name| dir.child(name).ok()) else {
            continue;
        };
        match workspace.remove_file(&path) {
            Ok(()) | Err(HostError::NotFound { .. }) => {}
            Err(source) => return Err(CommitError::Host { op: "clear stage", path, source }),
        }
    }
    match workspace.remove_dir(dir) {
        Ok(()) | Err(HostError::NotFound { .. }) => Ok(()),
        Err(source) => Err(CommitError::Host { op: "clear stage", path: dir.clone(), source }),
    }
}

/// Apply every operation in order. Returns how many were applied; a failure is
/// [`CommitError::Apply`].
pub(crate) fn apply(workspace: &CapDir, plan: &Plan, stage: &Stage) -> Result<u64, CommitError> {
    let mut applied: u64 = 0;
    for op in &plan.ops {
        let result = match op {
            Op::SetDirMode { path, mode } | Op::SetFileMode { path, mode } => workspace.set_mode(path, *mode),
            Op::Remove { path, directory: true } => workspace.remove_dir(path),
            Op::Remove { path, directory: false } => workspace.remove_file(path),
            Op::CreateDir { path, mode } => workspace.create_dir(path, *mode),
            Op::Install { path, slot } => workspace.rename(&stage.slot_path(*slot), path),
        };
        result.map_err(|source| CommitError::Apply { path: op.path().clone(), applied, source })?;
        applied += 1;
    }
    Ok(applied)
}

/// Make the applied changes durable: `fsync` each directory whose entries
/// changed, once, deepest first; then, if modes changed (or a directory could
/// not be opened for syncing), one `syncfs` for the inode metadata.
pub(crate) fn sync(workspace: &CapDir, plan: &Plan, applied: u64) -> Result<(), CommitError> {
    let mut parents: BTreeSet<VPath> = BTreeSet::new();
    let mut gone: BTreeSet<&VPath> = BTreeSet::new();
    let mut needs_syncfs = false;
    for op in &plan.ops {
        if op.changes_parent() {
            parents.insert(op.path().parent().expect("diff paths are not the root"));
        } else {
            needs_syncfs = true;
        }
        match op {
            Op::Remove { path, directory: true } => {
                gone.insert(path);
            }
            Op::CreateDir { path, .. } => {
                gone.remove(path);
            }
            _ => {}
        }
    }
    // A removed directory's own entries need no sync: its removal from its
    // parent, which is synced, makes them unreachable.
    parents.retain(|parent| !gone.contains(parent));
    for parent in parents.iter().rev() {
        match workspace.sync_dir(parent) {
            Ok(()) => {}
            Err(HostError::Io { ref source, .. }) if source.kind() == io::ErrorKind::PermissionDenied => {
                needs_syncfs = true;
            }
            Err(source) => return Err(CommitError::Apply { path: parent.clone(), applied, source }),
        }
    }
    if needs_syncfs {
        workspace.syncfs().map_err(|source| CommitError::Apply { path: VPath::root(), applied, source })?;
    }
    Ok(())
}

/// Check that every diff path now holds its after state.
///
/// Files are re-hashed; a file whose final mode denies its owner reading is
/// checked by kind, size, mode and, for installed files, the inode that was
/// staged from verified bytes.
pub(crate) fn verify(view: &LiveView<'_>, diff: &[DiffEntry], plan: &Plan, stage: &Stage) -> Result<u64, CommitError> {
    let mismatch = |path: &VPath| CommitError::Verification { path: path.clone() };
    let slots: BTreeMap<&VPath, usize> =
        plan.staged.iter().enumerate().map(|(slot, staged)| (&staged.path, slot)).collect();
    for entry in diff {
        let path = &entry.path;
        let live = view.observe(path)?;
        let Some(after) = &entry.after else {
            match live {
                Live::Absent | Live::Unreachable { .. } => continue,
                Live::Present(_) => return Err(mismatch(path)),
            }
        };
        let Live::Present(stat) = live else { return Err(mismatch(path)) };
        if let Some(slot) = slots.get(path)
            && let Some(Some(identity)) = stage.identities.get(*slot)
            && (stat.kind != HostKind::File || stat.identity != *identity)
        {
            return Err(mismatch(path));
        }
        match view.matches_state(path, &stat, after)? {
            Ok(true) => {}
            Err(ConflictReason::Unreadable) if unreadable_by_owner(after) && metadata_matches(&stat, after) => {}
            Ok(false) | Err(_) => return Err(mismatch(path)),
        }
    }
    Ok(diff.len() as u64)
}

fn unreadable_by_owner(state: &NodeState) -> bool {
    state.kind == NodeKind::File && state.mode & 0o400 == 0
}

fn metadata_matches(stat: &HostStat, state: &NodeState) -> bool {
    stat.kind == HostKind::File && stat.size == state.size && stat.mode == state.mode
}
