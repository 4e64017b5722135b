//! The observed base: workspace nodes observed on demand through vsh-host and
//! frozen for the rest of the run, and the read set that records what the run
//! used of each.

use std::collections::HashMap;
use std::sync::Arc;

use vsh_host::{CapDir, HostError, HostKind, HostStat};
use vsh_types::canon::{self, Canonical};
use vsh_types::{BlobId, Dependency, NodeKind, NodeState, ReadSet, SnapshotId, VPath, names_digest};

use crate::error::VfsError;

/// Bounds on what a run may materialize from the base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotLimits {
    /// Total bytes of base content held in memory by one run (default 64 MiB).
    pub max_materialized_bytes: u64,
    /// Bytes of one base file or symlink target held in memory (default 4 MiB).
    pub max_materialized_file_bytes: u64,
    /// Distinct base paths one run may observe (default 250,000).
    pub max_observations: u64,
}

impl Default for SnapshotLimits {
    fn default() -> Self {
        Self { max_materialized_bytes: 64 << 20, max_materialized_file_bytes: 4 << 20, max_observations: 250_000 }
    }
}

impl SnapshotLimits {
    /// The bounds of a runtime that runs real commands
    /// (`vsh::RuntimeConfig::with_commands`): a build or a test suite reads
    /// far more of the workspace than a program that edits a few files, so
    /// 1 GiB in all, 256 MiB per file and 1,000,000 observed paths.
    #[must_use]
    pub fn for_commands() -> Self {
        Self { max_materialized_bytes: 1 << 30, max_materialized_file_bytes: 256 << 20, max_observations: 1_000_000 }
    }
}

/// The three bounds as `u64`s, in field order: part of a runtime's
/// configuration digest, so a run under other limits is another transaction.
impl Canonical for SnapshotLimits {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        canon::put_u64(out, self.max_materialized_bytes);
        canon::put_u64(out, self.max_materialized_file_bytes);
        canon::put_u64(out, self.max_observations);
    }
}

/// A frozen observation of one base node.
#[derive(Debug, Clone)]
pub(crate) struct BaseNode {
    pub(crate) kind: NodeKind,
    pub(crate) size: u64,
    pub(crate) mode: u32,
    pub(crate) stat: HostStat,
    pub(crate) bytes: Option<Arc<[u8]>>,
    pub(crate) digest: Option<BlobId>,
    pub(crate) names: Option<Arc<Vec<String>>>,
    /// Entries of a listed directory left out of `names` (not UTF-8).
    pub(crate) unlisted: u64,
}

/// A map keyed by path with a fast seeded hasher (foldhash): the base's maps
/// are looked up several times per entry of a walk. The seed is random per
/// process, so a workspace's names cannot be chosen to collide.
type PathMap<V> = HashMap<VPath, V, foldhash::fast::RandomState>;

/// The base view of one run: the host directory, the frozen observations and the
/// dependencies recorded so far.
#[derive(Debug)]
pub(crate) struct Base {
    dir: Arc<CapDir>,
    excluded: Vec<VPath>,
    limits: SnapshotLimits,
    /// Every observation so far. Hashed, not ordered: a walk looks a path up
    /// several times per entry, and comparing long shared path prefixes in
    /// an ordered map was most of a 10,000-entry glob's time. The one ordered
    /// use, the snapshot id, sorts.
    observed: PathMap<Option<BaseNode>>,
    materialized: u64,
    /// Dependencies recorded since the read set was last asked for, hashed
    /// for the same reason: a walk records every entry, and inserting 10,000
    /// paths with long shared prefixes into an ordered map one by one was a
    /// fifth of a glob.
    recorded: PathMap<Dependency>,
    /// The dependencies recorded before that, in order. A path is in one of
    /// the two, never both.
    reads: ReadSet,
    /// Base directories checked for vsh's store magic, and the answer.
    store_dirs: PathMap<bool>,
    /// The kind of each entry of a listed directory, as the listing told it
    /// (`d_type`), for entries not observed by a `stat` of their own: a walk
    /// asks every entry's kind, and this answers without a system call. A
    /// later `stat` of the path that finds another kind is `BaseChanged`,
    /// as any observation the run's view disagrees with.
    listed_kinds: PathMap<NodeKind>,
    /// Directory entries left out of listings so far (names no guest can spell).
    pub(crate) unlisted: u64,
    /// The names a listing's recorded names digest leaves out: those the
    /// policy hides from programs (see [`PathRule`]).
    pub(crate) hidden: Option<PathRule>,
    /// The files whose bytes a program may not read: a diff knows their
    /// before states by stamp, never by digest (see
    /// [`crate::VirtualFs::with_unreadable_contents`]).
    pub(crate) unreadable: Option<PathRule>,
    /// The wall clock when this base was opened, nanoseconds since the Unix
    /// epoch (0 if the clock reads earlier): no observation of the base is
    /// older, so it bounds from below the time every stamp was taken.
    pub(crate) opened_at_ns: i128,
}

/// A rule over paths that the policy makes and the image applies: the
/// names a program never sees in a listing (the ones its policy hides; a
/// listing's names digest leaves them out, see
/// [`crate::VirtualFs::with_hidden_names`], and the commit's revalidation
/// must leave out the same ones), or the files whose bytes a program may not
/// read (see [`crate::VirtualFs::with_unreadable_contents`]).
#[derive(Clone)]
pub struct PathRule(std::sync::Arc<dyn Fn(&VPath) -> bool + Send + Sync>);

impl PathRule {
    /// The paths `holds` says the rule holds for.
    pub fn new(holds: impl Fn(&VPath) -> bool + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(holds))
    }

    /// Whether the rule holds for `path`.
    pub fn holds(&self, path: &VPath) -> bool {
        (self.0)(path)
    }
}

impl std::fmt::Debug for PathRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PathRule")
    }
}

/// How long a file's last status change must lie before the base was opened
/// for its stamp to stand for its content: the kernel stamps a change with a
/// clock that lags the wall clock by up to one tick (4 ms at 250 Hz, 10 ms at
/// 100 Hz) and rounds it to the filesystem's granularity (1 ns on ext4, xfs,
/// btrfs and tmpfs; 10 ms on exFAT), so a later change of a file whose
/// ctime lies this far back gets another ctime.
const STAMP_SETTLE_NS: i128 = 100_000_000;
/// The same for a file whose times are whole seconds (a filesystem that may
/// keep seconds only, or 2 s as FAT does).
const STAMP_SETTLE_WHOLE_SECONDS_NS: i128 = 3_000_000_000;

/// The stamp of the file `stat` describes, if it may stand for the file's
/// content: its last status change lies far enough before `opened_at_ns`
/// (see [`STAMP_SETTLE_NS`]) that any later write, truncate, chmod or rename
/// moves the ctime. `None` (hash the file instead) when the change is recent,
/// in the future, or the times do not fit a stamp.
pub(crate) fn settled_stamp(stat: &HostStat, opened_at_ns: i128) -> Option<vsh_types::FileStamp> {
    const SECOND: i128 = 1_000_000_000;
    let whole_seconds = stat.ctime_ns % SECOND == 0 && stat.mtime_ns % SECOND == 0;
    let settle = if whole_seconds { STAMP_SETTLE_WHOLE_SECONDS_NS } else { STAMP_SETTLE_NS };
    if opened_at_ns.saturating_sub(stat.ctime_ns) < settle {
        return None;
    }
    stat.file_stamp()
}

/// The file every vsh data directory holds: the transaction log.
pub(crate) const STORE_LOG: &str = "txlog";
/// Its lock file, which every store creates beside it.
pub(crate) const STORE_LOCK: &str = "txlog.lock";

/// Up to `length` bytes of `bytes` from `offset` (none from its end on).
pub(crate) fn slice_of(bytes: &[u8], offset: u64, length: u32) -> &[u8] {
    let start = usize::try_from(offset).unwrap_or(usize::MAX).min(bytes.len());
    let end = start.saturating_add(length as usize).min(bytes.len());
    &bytes[start..end]
}

fn same_stat(a: &HostStat, b: &HostStat) -> bool {
    a.kind == b.kind
        && a.size == b.size
        && a.mtime_ns == b.mtime_ns
        && a.ctime_ns == b.ctime_ns
        && a.identity == b.identity
}

impl Base {
    pub(crate) fn new(dir: Arc<CapDir>, excluded: Vec<VPath>, limits: SnapshotLimits) -> Self {
        Self {
            dir,
            excluded,
            limits,
            observed: PathMap::default(),
            materialized: 0,
            recorded: PathMap::default(),
            reads: ReadSet::default(),
            store_dirs: PathMap::default(),
            listed_kinds: PathMap::default(),
            unlisted: 0,
            hidden: None,
            unreadable: None,
            opened_at_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| i128::try_from(since.as_nanos()).unwrap_or(0)),
        }
    }

    pub(crate) fn is_excluded(&self, path: &VPath) -> bool {
        self.excluded.iter().any(|excluded| path.is_within(excluded))
    }

    /// See [`crate::VirtualFs::count_base_nodes`].
    pub(crate) fn count_nodes(&self, at_most: u64) -> Result<u64, VfsError> {
        const EPERM: i32 = 1;
        const EACCES: i32 = 13;
        let mut count = 0_u64;
        let mut stack = vec![VPath::root()];
        while let Some(dir) = stack.pop() {
            let entries = match self.dir.list_dir(&dir) {
                Ok(entries) => entries,
                Err(
                    HostError::NotFound { .. }
                    | HostError::NotADirectory { .. }
                    | HostError::SymlinkInPath { .. }
                    | HostError::CrossesMount { .. },
                ) => continue,
                Err(HostError::Io { source, .. }) if matches!(source.raw_os_error(), Some(EPERM | EACCES)) => continue,
                Err(error) => return Err(VfsError::Host(error)),
            };
            for entry in entries {
                let child = std::str::from_utf8(&entry.name).ok().and_then(|name| dir.child(name).ok());
                // Neither vsh's data nor a name the policy hides: the count
                // reaches the program (a denial's remedy, a decision that
                // turns on it), so it must count only what a listing shows.
                if child.as_ref().is_some_and(|child| {
                    self.is_excluded(child) || self.hidden.as_ref().is_some_and(|hidden| hidden.holds(child))
                }) {
                    continue;
                }
                count += 1;
                if count > at_most {
                    return Ok(count);
                }
                let Some(child) = child else { continue };
                let kind = match entry.kind {
                    Some(kind) => Some(kind),
                    None => self.dir.lstat(&child).map_err(VfsError::Host)?.map(|stat| stat.kind),
                };
                if kind == Some(HostKind::Directory) {
                    stack.push(child);
                }
            }
        }
        Ok(count)
    }

    /// Observe a node without recording a dependency. The caller resolved every
    /// ancestor first, so the host sees a path whose parents are base directories.
    pub(crate) fn peek(&mut self, path: &VPath) -> Result<Option<&BaseNode>, VfsError> {
        if !self.observed.contains_key(path) {
            let node = if self.is_excluded(path) { None } else { self.stat_host(path)? };
            // The run's view already holds this path's kind from its listing.
            if let Some(listed) = self.listed_kinds.remove(path)
                && node.as_ref().map(|node| node.kind) != Some(listed)
            {
                return Err(VfsError::BaseChanged { path: path.clone() });
            }
            if self.observed.len() as u64 >= self.limits.max_observations {
                return Err(VfsError::SnapshotLimit {
                    limit: "max_observations",
                    path: path.clone(),
                    attempted: self.observed.len() as u64 + 1,
                    max: self.limits.max_observations,
                });
            }
            self.observed.insert(path.clone(), node);
        }
        Ok(self.observed.get(path).and_then(Option::as_ref))
    }

    fn stat_host(&mut self, path: &VPath) -> Result<Option<BaseNode>, VfsError> {
        let stat = match self.dir.lstat(path) {
            Ok(stat) => stat,
            Err(error) => {
                let error = VfsError::from(error);
                if matches!(error, VfsError::Inaccessible { .. })
                    && let Some(parent) = path.parent()
                    && !parent.is_root()
                    && self.observed.get(&parent).is_some_and(Option::is_some)
                {
                    // Refused because of the parent directory's mode: a dependency.
                    self.metadata(&parent)?;
                }
                return Err(error);
            }
        };
        let Some(stat) = stat else { return Ok(None) };
        let kind = match stat.kind {
            HostKind::File => NodeKind::File,
            HostKind::Directory => NodeKind::Directory,
            HostKind::Symlink => NodeKind::Symlink,
            HostKind::Other => return Err(VfsError::SpecialFile { path: path.clone() }),
        };
        let (size, mode) = match kind {
            NodeKind::File => (stat.size, stat.mode),
            NodeKind::Directory => (0, stat.mode),
            NodeKind::Symlink => (stat.size, 0o777),
        };
        Ok(Some(BaseNode { kind, size, mode, stat, bytes: None, digest: None, names: None, unlisted: 0 }))
    }

    /// Observe a node's existence and kind and record that as a dependency.
    pub(crate) fn kind(&mut self, path: &VPath) -> Result<Option<NodeKind>, VfsError> {
        // A walk asks this for every entry and each of its ancestors, so each
        // answer costs one lookup where one suffices: a listed kind is never
        // also an observation (`peek` takes it out of `listed_kinds`).
        let kind = if let Some(listed) = self.listed_kinds.get(path) {
            debug_assert!(!self.observed.contains_key(path), "a listed kind is not observed yet");
            Some(*listed)
        } else if let Some(observed) = self.observed.get(path) {
            observed.as_ref().map(|node| node.kind)
        } else {
            self.peek(path)?.map(|node| node.kind)
        };
        self.record(path, |dependency| dependency.kind = Some(kind));
        Ok(kind)
    }

    /// Update the dependency at `path`, cloning the path only when the
    /// dependency is new.
    fn record(&mut self, path: &VPath, update: impl FnOnce(&mut Dependency)) {
        let known = match self.reads.entries.get_mut(path) {
            Some(dependency) => Some(dependency),
            None => self.recorded.get_mut(path),
        };
        if let Some(dependency) = known {
            update(dependency);
        } else {
            let mut dependency = Dependency::default();
            update(&mut dependency);
            self.recorded.insert(path.clone(), dependency);
        }
    }

    /// The dependencies recorded so far, in path order: those recorded since
    /// the last call move into the ordered set (sorted all at once when it is
    /// empty, as at the end of a run).
    pub(crate) fn read_set(&mut self) -> &ReadSet {
        if !self.recorded.is_empty() {
            let recorded = std::mem::take(&mut self.recorded);
            if self.reads.is_empty() {
                // Sorted in place first (unstable: paths are unique), so the
                // map's own sort meets one ordered run.
                let mut entries: Vec<(VPath, Dependency)> = recorded.into_iter().collect();
                entries.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
                self.reads.entries = entries.into_iter().collect();
            } else {
                self.reads.entries.extend(recorded);
            }
        }
        &self.reads
    }

    /// The kind of the node at `path` (its listing's word for it, else a
    /// `stat`), recording no dependency: for vsh's own checks (nested
    /// stores), never for what a guest is shown.
    pub(crate) fn known_kind(&mut self, path: &VPath) -> Result<Option<NodeKind>, VfsError> {
        if let Some(listed) = self.listed_kinds.get(path)
            && !self.observed.contains_key(path)
        {
            return Ok(Some(*listed));
        }
        Ok(self.peek(path)?.map(|node| node.kind))
    }

    /// Observe kind, size and mode, recorded as a dependency.
    pub(crate) fn metadata(&mut self, path: &VPath) -> Result<Option<(NodeKind, u64, u32)>, VfsError> {
        let meta = self.peek(path)?.map(|node| (node.kind, node.size, node.mode));
        self.record(path, |dependency| {
            dependency.kind = Some(meta.map(|(kind, _, _)| kind));
            if let Some((_, size, mode)) = meta {
                dependency.size_mode = Some((size, mode));
            }
        });
        Ok(meta)
    }

    /// The frozen mtime of a base node, in seconds (for `stat()` results only;
    /// times are never a dependency).
    pub(crate) fn mtime_seconds(&mut self, path: &VPath) -> Result<Option<f64>, VfsError> {
        #[allow(clippy::cast_precision_loss)]
        Ok(self.peek(path)?.map(|node| node.stat.mtime_ns as f64 / 1e9))
    }

    /// Read a base file's bytes (or a symlink's target), frozen and recorded as a
    /// content dependency.
    pub(crate) fn content(&mut self, path: &VPath) -> Result<Arc<[u8]>, VfsError> {
        let limits = self.limits;
        let materialized = self.materialized;
        let node = self.peek(path)?.ok_or_else(|| VfsError::NotFound { path: path.clone() })?;
        if let Some(bytes) = &node.bytes {
            let bytes = Arc::clone(bytes);
            let digest = node.digest;
            self.record(path, |dependency| dependency.content = digest);
            return Ok(bytes);
        }
        let (kind, size) = (node.kind, node.size);
        if size > limits.max_materialized_file_bytes {
            return Err(VfsError::SnapshotLimit {
                limit: "max_materialized_file_bytes",
                path: path.clone(),
                attempted: size,
                max: limits.max_materialized_file_bytes,
            });
        }
        if materialized.saturating_add(size) > limits.max_materialized_bytes {
            return Err(VfsError::SnapshotLimit {
                limit: "max_materialized_bytes",
                path: path.clone(),
                attempted: materialized.saturating_add(size),
                max: limits.max_materialized_bytes,
            });
        }
        let bytes: Arc<[u8]> = match kind {
            NodeKind::File => {
                let read = match self.dir.read_file(path, limits.max_materialized_file_bytes) {
                    Ok(read) => read,
                    Err(error) => return Err(self.refused(path, error)),
                };
                let frozen = self.observed_node(path);
                if !same_stat(&read.stat, &frozen.stat) || read.bytes.len() as u64 != frozen.size {
                    return Err(VfsError::BaseChanged { path: path.clone() });
                }
                read.bytes.into()
            }
            NodeKind::Symlink => {
                let target = self.dir.read_link(path, limits.max_materialized_file_bytes)?;
                if target.len() as u64 != size {
                    return Err(VfsError::BaseChanged { path: path.clone() });
                }
                target.into()
            }
            NodeKind::Directory => return Err(VfsError::IsADirectory { path: path.clone() }),
        };
        let digest = BlobId::of(&bytes);
        self.materialized += bytes.len() as u64;
        let node = self.observed_node_mut(path);
        node.bytes = Some(Arc::clone(&bytes));
        node.digest = Some(digest);
        self.record(path, |dependency| dependency.content = Some(digest));
        Ok(bytes)
    }

    /// Up to `length` bytes of a base file from `offset`, without holding the
    /// file: the whole file is hashed (streamed) the first time and recorded
    /// as a content dependency, as a whole read would be, and every slice is
    /// read under the frozen observation's stat, so what the caller gets is
    /// always the content that digest names ([`VfsError::BaseChanged`] if
    /// the file changed since). Nothing counts toward the materialized
    /// bytes: a file of any size can be read this way.
    pub(crate) fn content_range(&mut self, path: &VPath, offset: u64, length: u32) -> Result<Vec<u8>, VfsError> {
        let opened_at_ns = self.opened_at_ns;
        let node = self.peek(path)?.ok_or_else(|| VfsError::NotFound { path: path.clone() })?;
        // A file changed moments before the run began may change again
        // without its stat moving (a change within the same clock tick):
        // then equal stats do not prove the same bytes from one piece to the
        // next, and the file is read whole, once (within the limits).
        if node.kind != NodeKind::File || (node.bytes.is_none() && settled_stamp(&node.stat, opened_at_ns).is_none()) {
            let whole = self.content(path)?;
            return Ok(slice_of(&whole, offset, length).to_vec());
        }
        if let Some(bytes) = &node.bytes {
            let bytes = Arc::clone(bytes);
            let digest = node.digest;
            self.record(path, |dependency| dependency.content = digest);
            return Ok(slice_of(&bytes, offset, length).to_vec());
        }
        self.digest(path)?;
        let read = match self.dir.read_file_range(path, offset, length) {
            Ok(read) => read,
            Err(error) => return Err(self.refused(path, error)),
        };
        if !same_stat(&read.stat, &self.observed_node(path).stat) {
            return Err(VfsError::BaseChanged { path: path.clone() });
        }
        Ok(read.bytes)
    }

    /// The bytes the host would read for a first piece of the base file at
    /// `path` beyond the piece itself: its size while neither its bytes nor
    /// its digest are known (the whole file is read to hash it), else 0.
    pub(crate) fn range_cost(&mut self, path: &VPath) -> Result<u64, VfsError> {
        Ok(match self.peek(path)? {
            Some(node) if node.kind == NodeKind::File && node.bytes.is_none() && node.digest.is_none() => node.size,
            _ => 0,
        })
    }

    /// The content digest of a base file or symlink, hashing without keeping the
    /// bytes. Recorded as a content dependency.
    pub(crate) fn digest(&mut self, path: &VPath) -> Result<BlobId, VfsError> {
        let node = self.peek(path)?.ok_or_else(|| VfsError::NotFound { path: path.clone() })?;
        let digest = match (node.digest, node.kind) {
            (Some(digest), _) => digest,
            (None, NodeKind::File) => {
                let (digest, stat) = match self.dir.hash_file(path) {
                    Ok(hashed) => hashed,
                    Err(error) => return Err(self.refused(path, error)),
                };
                let frozen = self.observed_node(path);
                if !same_stat(&stat, &frozen.stat) {
                    return Err(VfsError::BaseChanged { path: path.clone() });
                }
                self.observed_node_mut(path).digest = Some(digest);
                digest
            }
            (None, NodeKind::Symlink) => {
                self.content(path)?;
                self.observed_node(path).digest.expect("content() sets the digest")
            }
            (None, NodeKind::Directory) => return Err(VfsError::IsADirectory { path: path.clone() }),
        };
        self.record(path, |dependency| dependency.content = Some(digest));
        Ok(digest)
    }

    /// The full state of a base node (hashing its content if needed), or `None`
    /// if absent. Records kind, size, mode and content dependencies: this is the
    /// precondition a commit checks before changing the path.
    pub(crate) fn state(&mut self, path: &VPath) -> Result<Option<NodeState>, VfsError> {
        let Some((kind, size, mode)) = self.metadata(path)? else { return Ok(None) };
        Ok(Some(match kind {
            NodeKind::Directory => NodeState::directory(mode),
            NodeKind::File => NodeState::file(size, mode, self.digest(path)?),
            NodeKind::Symlink => {
                let digest = self.digest(path)?;
                NodeState { kind, size, mode: 0o777, content: Some(digest), stamp: None }
            }
        }))
    }

    /// The state of a base node the run deletes: as [`Base::state`], except
    /// that a file whose bytes the run never read is not read now. It is known
    /// by its [`vsh_types::FileStamp`] when the stamp is settled (see
    /// [`settled_stamp`]), and hashed otherwise. Records kind, size and mode
    /// as dependencies, and content only when it hashed.
    pub(crate) fn state_for_delete(&mut self, path: &VPath) -> Result<Option<NodeState>, VfsError> {
        let opened_at_ns = self.opened_at_ns;
        let Some((kind, size, mode)) = self.metadata(path)? else { return Ok(None) };
        if kind == NodeKind::File {
            let node = self.observed_node(path);
            if node.digest.is_none()
                && let Some(stamp) = settled_stamp(&node.stat, opened_at_ns)
            {
                return Ok(Some(NodeState::unread_file(size, mode, stamp)));
            }
        }
        self.state(path)
    }

    /// The before state of a base file whose bytes a program may not read
    /// ([`crate::VirtualFs::with_unreadable_contents`]): by its settled stamp,
    /// never by its digest, even when the run's own append or copy hashed
    /// it. One whose stamp is not settled is refused
    /// ([`VfsError::UnsettledUnreadable`]) rather than hashed. Other kinds
    /// are known as any other node.
    pub(crate) fn state_unreadable(&mut self, path: &VPath) -> Result<Option<NodeState>, VfsError> {
        let opened_at_ns = self.opened_at_ns;
        let Some((kind, size, mode)) = self.metadata(path)? else { return Ok(None) };
        match kind {
            NodeKind::File => {}
            NodeKind::Symlink => return Err(VfsError::UnreadableSymlinkReplaced { path: path.clone() }),
            NodeKind::Directory => return self.state(path),
        }
        match settled_stamp(&self.observed_node(path).stat, opened_at_ns) {
            Some(stamp) => Ok(Some(NodeState::unread_file(size, mode, stamp))),
            None => Err(VfsError::UnsettledUnreadable { path: path.clone() }),
        }
    }

    /// The sorted child names of a base directory, recorded as a listing dependency.
    pub(crate) fn names(&mut self, path: &VPath) -> Result<Arc<Vec<String>>, VfsError> {
        let node = self.peek(path)?.ok_or_else(|| VfsError::NotFound { path: path.clone() })?;
        if node.kind != NodeKind::Directory {
            return Err(VfsError::NotADirectory { path: path.clone() });
        }
        let names = if let Some(names) = &node.names {
            Arc::clone(names)
        } else {
            let listed = match self.dir.list_dir(path) {
                Ok(listed) => listed,
                Err(error) => return Err(self.refused(path, error)),
            };
            let mut names = Vec::new();
            let mut unlisted = 0;
            for entry in listed {
                // A name no guest can spell (not UTF-8, or not a valid
                // component) is left out of the listing and counted; the
                // directory is then never empty to the guest.
                let Some((name, child)) = String::from_utf8(entry.name)
                    .ok()
                    .and_then(|name| path.child(&name).ok().map(|child| (name, child)))
                else {
                    unlisted += 1;
                    continue;
                };
                if !self.is_excluded(&child) {
                    let kind = match entry.kind {
                        Some(HostKind::File) => Some(NodeKind::File),
                        Some(HostKind::Directory) => Some(NodeKind::Directory),
                        Some(HostKind::Symlink) => Some(NodeKind::Symlink),
                        // A special file, or no `d_type`: a stat tells, when asked.
                        Some(HostKind::Other) | None => None,
                    };
                    if let Some(kind) = kind
                        && !self.observed.contains_key(&child)
                    {
                        self.listed_kinds.insert(child, kind);
                    }
                    names.push(name);
                }
            }
            names.sort_unstable();
            let names = Arc::new(names);
            self.unlisted += unlisted;
            let node = self.observed_node_mut(path);
            node.names = Some(Arc::clone(&names));
            node.unlisted = unlisted;
            names
        };
        // What the program could see of the listing: the names the policy
        // hides from it are left out of the dependency too, so one made or
        // removed between the run and its commit is no conflict (and tells
        // the program nothing).
        let digest = match &self.hidden {
            Some(hidden) => names_digest(
                names
                    .iter()
                    .filter(|name| path.child(name).is_ok_and(|child| !hidden.holds(&child)))
                    .map(String::as_str),
            ),
            None => names_digest(names.iter().map(String::as_str)),
        };
        self.record(path, |dependency| {
            dependency.kind = Some(Some(NodeKind::Directory));
            dependency.names = Some(digest);
        });
        Ok(names)
    }

    /// Entries of the listed base directory `dir` left out of its names (0 if
    /// it was not listed).
    pub(crate) fn unlisted_in(&self, dir: &VPath) -> u64 {
        self.observed.get(dir).and_then(Option::as_ref).map_or(0, |node| node.unlisted)
    }

    /// `error`, met reading the node at `path`, as a [`VfsError`]; a refusal
    /// by the host (its mode) records the node's metadata as a dependency, so
    /// a commit that relied on the refusal is stale if the mode changes.
    fn refused(&mut self, path: &VPath, error: vsh_host::HostError) -> VfsError {
        let error = VfsError::from(error);
        if matches!(error, VfsError::Inaccessible { .. })
            && let Err(terminal) = self.metadata(path)
        {
            return terminal;
        }
        error
    }

    /// Whether the base directory `dir` is a vsh data directory: it holds a
    /// regular file `txlog` and an entry `txlog.lock`, as every transaction
    /// store does (another workspace's store, nested in this one). Checked once
    /// per directory by two host stats at most, which are not dependencies.
    pub(crate) fn is_store_dir(&mut self, dir: &VPath) -> Result<bool, VfsError> {
        if let Some(known) = self.store_dirs.get(dir) {
            return Ok(*known);
        }
        // A listed directory without both names holds no store (its listing
        // is the run's view of it); one with both is checked below.
        if let Some(Some(node)) = self.observed.get(dir)
            && let Some(names) = &node.names
            && !(names.iter().any(|name| name == STORE_LOG) && names.iter().any(|name| name == STORE_LOCK))
        {
            self.store_dirs.insert(dir.clone(), false);
            return Ok(false);
        }
        let child = |name: &str| dir.child(name).expect("a valid constant name");
        let present = |base: &Self, path: &VPath| -> Result<Option<HostKind>, VfsError> {
            match base.dir.lstat(path) {
                Ok(stat) => Ok(stat.map(|stat| stat.kind)),
                Err(vsh_host::HostError::NotADirectory { .. } | vsh_host::HostError::SymlinkInPath { .. }) => Ok(None),
                // A directory this process may not search holds nothing it can reach.
                Err(error) => match VfsError::from(error) {
                    VfsError::Inaccessible { .. } | VfsError::CrossesMount { .. } => Ok(None),
                    other => Err(other),
                },
            }
        };
        let store =
            present(self, &child(STORE_LOG))? == Some(HostKind::File) && present(self, &child(STORE_LOCK))?.is_some();
        self.store_dirs.insert(dir.clone(), store);
        Ok(store)
    }

    /// The stamp of an observed base node (see [`vsh_host::HostStat::file_stamp`]).
    pub(crate) fn observed_stamp(&self, path: &VPath) -> Option<vsh_types::FileStamp> {
        self.observed.get(path).and_then(Option::as_ref).and_then(|node| node.stat.file_stamp())
    }

    fn observed_node(&self, path: &VPath) -> &BaseNode {
        self.observed.get(path).and_then(Option::as_ref).expect("observed before use")
    }

    fn observed_node_mut(&mut self, path: &VPath) -> &mut BaseNode {
        self.observed.get_mut(path).and_then(Option::as_mut).expect("observed before use")
    }

    /// Number of base nodes observed to exist.
    pub(crate) fn observed_nodes(&self) -> u64 {
        self.observed.values().filter(|node| node.is_some()).count() as u64
    }

    /// The snapshot id: a digest of every observation (path, then absent or
    /// kind, size and mode, and the content digest where known).
    pub(crate) fn snapshot_id(&self) -> SnapshotId {
        let mut out = Vec::new();
        canon::put_u64(&mut out, self.observed.len() as u64);
        let mut sorted: Vec<(&VPath, &Option<BaseNode>)> = self.observed.iter().collect();
        sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (path, node) in sorted {
            path.encode_canonical(&mut out);
            match node {
                None => canon::put_u8(&mut out, 0),
                Some(node) => {
                    canon::put_u8(&mut out, node.kind.tag());
                    canon::put_u64(&mut out, node.size);
                    canon::put_u32(&mut out, node.mode);
                    // Never the digest of bytes a program may not read, even
                    // when the run's own append or delete hashed them: the
                    // snapshot id is shown to the program, and an unkeyed
                    // hash over that digest checks its guesses offline.
                    let hidden = self.unreadable.as_ref().is_some_and(|rule| rule.holds(path));
                    canon::put_option(&mut out, node.digest.as_ref().filter(|_| !hidden));
                }
            }
        }
        SnapshotId::digest(&out)
    }

    pub(crate) fn dir(&self) -> &Arc<CapDir> {
        &self.dir
    }
}
