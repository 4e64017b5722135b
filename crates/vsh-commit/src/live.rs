//! Observing the live workspace through the capability handle, in the terms a
//! transaction recorded: kinds, sizes and modes, content digests and name sets.
//!
//! Paths within the runtime directory are invisible here, exactly as they are
//! to a run (the caller excludes the runtime directory from snapshots), so a
//! dependency recorded as "absent" there stays satisfied.
//!
//! Host errors that mean "this node changed or cannot be reached as it was"
//! become a [`ConflictReason`]; any other host error is a
//! [`CommitError::Host`], never silently a conflict.

use std::io;

use vsh_host::{CapDir, HostError, HostKind, HostStat};
use vsh_types::names_digest;
use vsh_types::{BlobId, NodeKind, NodeState, VPath};

use crate::error::{CommitError, ConflictReason};

/// The longest symlink target read back (Linux stores at most 4095 bytes).
const LINK_TARGET_MAX: u64 = 4096;

/// What the workspace holds at a path.
#[derive(Debug, Clone)]
pub(crate) enum Live {
    /// Nothing (or the path lies within the runtime directory).
    Absent,
    /// A proper ancestor, `at`, is a symlink or not a directory.
    Unreachable {
        /// The blocking ancestor.
        at: VPath,
    },
    /// Something, as `lstat` reports it.
    Present(HostStat),
}

/// A live directory's entries, as a run would list them.
pub(crate) struct Children {
    /// The names a run sees (the runtime directory left out).
    pub(crate) names: Vec<String>,
    /// Entries with names no guest can spell (not UTF-8), left out of `names`.
    pub(crate) unlisted: u64,
}

/// What identifies one version of a file: its identity, size and
/// modification time.
pub(crate) type Version = (vsh_host::FileIdentity, u64, i128);

/// Either a value or the conflict that prevented observing it.
pub(crate) type Observed<T> = Result<T, ConflictReason>;

/// A read-only view of the live workspace.
pub(crate) struct LiveView<'a> {
    pub(crate) dir: &'a CapDir,
    /// Each file hashed through this view, with what its read saw (identity,
    /// size, modification time): a later look at the same version of the
    /// same file (a revalidation checks a modified file it read twice: its
    /// content dependency and its precondition) takes the digest instead of
    /// reading it again. A view lives for one check.
    pub(crate) hashed: std::cell::RefCell<std::collections::HashMap<VPath, (Version, BlobId)>>,
    /// Paths hidden from runs: the runtime directory and any data directory inside the workspace.
    pub(crate) excluded: &'a [VPath],
    /// The protection rules runs were given: the names they hide from a
    /// program are left out of a listing's names digest, as the run left
    /// them out (`vsh_vfs::VirtualFs::with_hidden_names`).
    pub(crate) hidden: Option<&'a vsh_policy::CallPolicy>,
}

impl<'a> LiveView<'a> {
    /// A view of `dir` with nothing hashed yet (a view lives for one check).
    pub(crate) fn new(dir: &'a CapDir, excluded: &'a [VPath], hidden: Option<&'a vsh_policy::CallPolicy>) -> Self {
        Self { dir, excluded, hidden, hashed: std::cell::RefCell::default() }
    }
}

/// The vsh kind of a host kind; `None` for FIFOs, sockets and devices.
pub(crate) fn node_kind(kind: HostKind) -> Option<NodeKind> {
    match kind {
        HostKind::File => Some(NodeKind::File),
        HostKind::Directory => Some(NodeKind::Directory),
        HostKind::Symlink => Some(NodeKind::Symlink),
        HostKind::Other => None,
    }
}

impl LiveView<'_> {
    /// Whether `path` is hidden from runs (within the runtime or data directory).
    pub(crate) fn is_excluded(&self, path: &VPath) -> bool {
        self.excluded.iter().any(|excluded| path.is_within(excluded))
    }

    /// Whether the live directory `dir` is a vsh data directory: it holds a
    /// regular file `txlog` and an entry `txlog.lock`. Anything else at `dir`
    /// (absent, a file, unreachable) is not one.
    pub(crate) fn is_store_dir(&self, dir: &VPath) -> Result<bool, CommitError> {
        let Live::Present(stat) = self.observe(dir)? else { return Ok(false) };
        if stat.kind != HostKind::Directory {
            return Ok(false);
        }
        let child = |name: &str| dir.child(name).expect("a valid constant name");
        let log = matches!(self.observe(&child("txlog"))?, Live::Present(stat) if stat.kind == HostKind::File);
        Ok(log && matches!(self.observe(&child("txlog.lock"))?, Live::Present(_)))
    }

    /// `lstat` `path` without following anything.
    pub(crate) fn observe(&self, path: &VPath) -> Result<Live, CommitError> {
        if self.is_excluded(path) {
            return Ok(Live::Absent);
        }
        match self.dir.lstat(path) {
            Ok(None) => Ok(Live::Absent),
            Ok(Some(stat)) => Ok(Live::Present(stat)),
            Err(HostError::SymlinkInPath { path: at } | HostError::NotADirectory { path: at }) => {
                Ok(Live::Unreachable { at })
            }
            Err(source) => Err(CommitError::Host { op: "lstat", path: path.clone(), source }),
        }
    }

    /// The content digest of the file or symlink at `path`, expected to be of
    /// `kind`. A node that changed while being read is `Err(changed)`.
    pub(crate) fn content(
        &self,
        path: &VPath,
        kind: NodeKind,
        changed: ConflictReason,
    ) -> Result<Observed<BlobId>, CommitError> {
        let read = match kind {
            NodeKind::File => self.hash_file(path).map(|(digest, _)| digest),
            NodeKind::Symlink => self.dir.read_link(path, LINK_TARGET_MAX).map(|target| BlobId::of(&target)),
            NodeKind::Directory => return Ok(Err(changed)),
        };
        match read {
            Ok(digest) => Ok(Ok(digest)),
            Err(error) => classify(error, "read", path, changed).map(Err),
        }
    }

    /// [`CapDir::hash_file`], noted in [`LiveView::hashed`].
    fn hash_file(&self, path: &VPath) -> Result<(BlobId, vsh_host::HostStat), vsh_host::HostError> {
        let (digest, read) = self.dir.hash_file(path)?;
        self.hashed.borrow_mut().insert(path.clone(), ((read.identity, read.size, read.mtime_ns), digest));
        Ok((digest, read))
    }

    /// The names digest of the directory at `path`, as a run records it: child
    /// names sorted, the runtime directory, names no guest can spell (not
    /// UTF-8, which a run leaves out of its listing) and names the policy
    /// hides from programs left out.
    pub(crate) fn names(&self, path: &VPath, changed: ConflictReason) -> Result<Observed<[u8; 32]>, CommitError> {
        let children = match self.children(path, changed)? {
            Ok(children) => children,
            Err(reason) => return Ok(Err(reason)),
        };
        let visible = |name: &&String| {
            self.hidden.is_none_or(|policy| path.child(name).is_ok_and(|child| !policy.is_hidden(&child)))
        };
        Ok(Ok(names_digest(children.names.iter().filter(visible).map(String::as_str))))
    }

    /// The visible child names of the directory at `path`, and how many
    /// entries had names no guest can spell.
    pub(crate) fn children(&self, path: &VPath, changed: ConflictReason) -> Result<Observed<Children>, CommitError> {
        let entries = match self.dir.list_dir(path) {
            Ok(entries) => entries,
            Err(error) => return classify(error, "list", path, changed).map(Err),
        };
        let mut children = Children { names: Vec::with_capacity(entries.len()), unlisted: 0 };
        for entry in entries {
            let Some((name, child)) =
                String::from_utf8(entry.name).ok().and_then(|name| path.child(&name).ok().map(|child| (name, child)))
            else {
                children.unlisted += 1;
                continue;
            };
            if !self.is_excluded(&child) {
                children.names.push(name);
            }
        }
        Ok(Ok(children))
    }

    /// The full state of the node `stat` describes, compared with `expected`
    /// cheaply first: the content is hashed only when kind, size and mode agree,
    /// and never for an unread file (`expected` carries a stamp), whose
    /// identity and times are compared instead.
    /// `Ok(Ok(true))` when the live state equals `expected`.
    pub(crate) fn matches_state(
        &self,
        path: &VPath,
        stat: &HostStat,
        expected: &NodeState,
    ) -> Result<Observed<bool>, CommitError> {
        let Some(kind) = node_kind(stat.kind) else { return Ok(Ok(false)) };
        if kind != expected.kind {
            return Ok(Ok(false));
        }
        let (size, mode) = match kind {
            NodeKind::File => (stat.size, stat.mode),
            NodeKind::Directory => (0, stat.mode),
            NodeKind::Symlink => (stat.size, 0o777),
        };
        if size != expected.size || mode != expected.mode {
            return Ok(Ok(false));
        }
        if kind == NodeKind::Directory {
            return Ok(Ok(true));
        }
        if let Some(stamp) = expected.stamp {
            // A file the run deleted without reading: the same version of the
            // same file, by identity and times. There are no bytes to compare.
            return Ok(Ok(kind == NodeKind::File && stat.file_stamp() == Some(stamp)));
        }
        if kind == NodeKind::File {
            // The bytes must be those of the node `stat` describes: a file
            // written between the lstat and the read is not the one checked.
            if let Some((version, digest)) = self.hashed.borrow().get(path)
                && *version == (stat.identity, stat.size, stat.mtime_ns)
            {
                return Ok(Ok(Some(*digest) == expected.content));
            }
            return match self.hash_file(path) {
                Ok((digest, read)) => {
                    Ok(if read.identity != stat.identity || read.size != stat.size || read.mtime_ns != stat.mtime_ns {
                        Err(ConflictReason::Precondition)
                    } else {
                        Ok(Some(digest) == expected.content)
                    })
                }
                Err(error) => classify(error, "read", path, ConflictReason::Precondition).map(Err),
            };
        }
        match self.content(path, kind, ConflictReason::Precondition)? {
            Ok(digest) => Ok(Ok(Some(digest) == expected.content)),
            Err(reason) => Ok(Err(reason)),
        }
    }
}

/// Turn a host error met while observing `path` into the conflict it stands
/// for, or pass it on as a [`CommitError::Host`].
fn classify(
    error: HostError,
    op: &'static str,
    path: &VPath,
    changed: ConflictReason,
) -> Result<ConflictReason, CommitError> {
    match error {
        HostError::NotFound { .. }
        | HostError::NotAFile { .. }
        | HostError::NotASymlink { .. }
        | HostError::Unstable { .. }
        | HostError::TooLarge { .. } => Ok(changed),
        // The node itself is no longer what was observed (listing a path that
        // became a symlink or a file); a blocking ancestor makes it unreachable.
        HostError::SymlinkInPath { path: at } | HostError::NotADirectory { path: at } => {
            Ok(if at == *path { changed } else { ConflictReason::Unreadable })
        }
        HostError::Io { ref source, .. } if source.kind() == io::ErrorKind::PermissionDenied => {
            Ok(ConflictReason::Unreadable)
        }
        source => Err(CommitError::Host { op, path: path.clone(), source }),
    }
}
