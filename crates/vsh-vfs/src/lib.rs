//! The virtual image of a workspace: an observed snapshot of the base and a
//! copy-on-write overlay, with a canonical diff.
//!
//! A [`VirtualFs`] never writes to the host. It observes base nodes on demand
//! through a [`vsh_host::CapDir`] and freezes each observation for the rest of
//! the run, so repeated reads agree (repeatable reads) and a run that touches
//! `k` paths costs `O(k)` host operations whatever the workspace's size. Every
//! observation the run *used* is recorded in the [`ReadSet`]; the commit engine
//! revalidates exactly those facts.
//!
//! Changes go to an overlay keyed by path. Symlinks are data: they are stored and
//! moved as their target bytes and never followed; a path that continues below a
//! symlink is an error ([`VfsError::SymlinkInPath`]).
//!
//! [`VirtualFs::canonical_diff`] compares the overlay with the base and returns
//! the changed paths sorted by path, with before and after [`NodeState`]s.
// Unit tests build and inspect their fixtures by path.
#![cfg_attr(test, allow(clippy::disallowed_methods))]
#![forbid(unsafe_code)]

mod base;
mod error;
mod review;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;

use vsh_host::CapDir;
use vsh_types::{BlobId, CanonicalDiff, DiffEntry, NodeKind, NodeState, SnapshotId, VPath};

pub use base::{PathRule, SnapshotLimits};
pub use error::VfsError;
pub use review::{
    FileReview, NoHunks, READ_PER_SHOWN, ReviewLimits, Side, hides_text, live_content_if_unchanged, review_entries,
    review_entries_of, unified_hunks,
};
pub use vsh_types::{Dependency, ReadSet, names_digest};

use base::Base;

/// Mode of files a guest creates.
pub const DEFAULT_FILE_MODE: u32 = 0o644;
/// Mode of directories a guest creates.
pub const DEFAULT_DIR_MODE: u32 = 0o755;

/// Where the bytes of a file (or symlink target) in the final state come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentSource {
    /// Bytes written during the run.
    Bytes(Arc<[u8]>),
    /// The unread content of a base file at this path (for example after a rename).
    Base(VPath),
}

#[derive(Debug, Clone)]
enum Overlay {
    File {
        content: ContentSource,
        mode: u32,
    },
    Symlink {
        target: Arc<[u8]>,
    },
    /// `opaque`: the base's children at this path do not show through.
    Dir {
        mode: u32,
        opaque: bool,
    },
    Tombstone,
}

/// Metadata of a node in the virtual image.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metadata {
    /// Kind.
    pub kind: NodeKind,
    /// Size in bytes (0 for directories).
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// Modification time in seconds: the base's for unchanged base nodes, 0.0 for
    /// nodes written during the run.
    pub mtime: f64,
}

/// One recorded effect, in the order the guest caused it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Effect {
    /// A file or symlink was written or created.
    Write(VPath),
    /// A directory was created.
    Mkdir(VPath),
    /// A node was removed (a directory with everything beneath it).
    Remove(VPath),
    /// A node was moved.
    Rename {
        /// The source.
        from: VPath,
        /// The destination.
        to: VPath,
    },
    /// Permission bits changed.
    SetMode(VPath),
}

/// What [`VirtualFs::store_at`] found at one directory on a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreAt {
    /// The directory is a nested vsh data directory.
    Store,
    /// It is not, and nothing below it can be (a guest-made directory, or no
    /// directory of the base).
    NoneBelow,
    /// It is not; a directory below it may be.
    NotHere,
}

/// The virtual image of one run.
#[derive(Debug)]
pub struct VirtualFs {
    base: Base,
    overlay: OverlayMap,
    effects: Vec<Effect>,
    renames: u64,
    /// The paths of nodes that are the base's under a name of this run's:
    /// moved there, whatever was written to them since
    /// ([`VirtualFs::holds_moved_base`]).
    moved_base: BTreeSet<String>,
    /// The base files whose content the guest read ([`VirtualFs::read`],
    /// [`VirtualFs::read_range`]), by their base path.
    shown: BTreeSet<VPath>,
    /// Those the program read itself, not a real command it ran
    /// ([`VirtualFs::serving_commands`]).
    seen: BTreeSet<VPath>,
    /// Whether the guest reading now is a real command.
    commands_reading: bool,
    /// The content each file an edit in place (a patch) left, by path.
    in_place: BTreeMap<VPath, BlobId>,
}

/// The overlay's entries, and how many times they were changed: every change
/// goes through this type's methods (it gives no mutable access otherwise),
/// so a [`ListingView`] taken at one count can tell it still holds.
#[derive(Debug, Default)]
struct OverlayMap {
    entries: BTreeMap<VPath, Overlay>,
    changes: u64,
}

impl std::ops::Deref for OverlayMap {
    type Target = BTreeMap<VPath, Overlay>;

    fn deref(&self) -> &Self::Target {
        &self.entries
    }
}

impl OverlayMap {
    fn insert(&mut self, path: VPath, entry: Overlay) -> Option<Overlay> {
        self.changes += 1;
        self.entries.insert(path, entry)
    }

    fn remove(&mut self, path: &VPath) -> Option<Overlay> {
        self.changes += 1;
        self.entries.remove(path)
    }

    fn get_mut(&mut self, path: &VPath) -> Option<&mut Overlay> {
        self.changes += 1;
        self.entries.get_mut(path)
    }

    /// Replace every entry by `entries`' (a checkpoint's).
    fn replace(&mut self, entries: &BTreeMap<VPath, Overlay>) {
        self.changes += 1;
        self.entries.clone_from(entries);
    }
}

/// Where the entries of a listed directory come from, taken once for the
/// directory ([`VirtualFs::listing_view`]) so that each entry's kind is asked
/// without resolving the directory's ancestors again
/// ([`VirtualFs::listed_kind`]): a walk asks it once per entry. It holds only
/// while the image is unchanged; after a change, each entry is resolved whole.
#[derive(Debug, Clone)]
pub struct ListingView {
    dir: VPath,
    base_visible: bool,
    changes: u64,
}

impl ListingView {
    /// The directory listed.
    pub fn dir(&self) -> &VPath {
        &self.dir
    }
}

/// The changes of a [`VirtualFs`] at one moment ([`VirtualFs::checkpoint`]),
/// to go back to exactly ([`VirtualFs::restore`]). Contents are shared, not
/// copied: a checkpoint costs one entry per changed path.
#[derive(Debug, Clone)]
pub struct ImageCheckpoint {
    overlay: BTreeMap<VPath, Overlay>,
    effects: Vec<Effect>,
    renames: u64,
    moved_base: BTreeSet<String>,
}

/// The resolved state of a path in the virtual image.
enum Node {
    Base(NodeKind),
    File,
    Symlink,
    Dir { opaque: bool },
}

impl Node {
    fn kind(&self) -> NodeKind {
        match self {
            Self::Base(kind) => *kind,
            Self::File => NodeKind::File,
            Self::Symlink => NodeKind::Symlink,
            Self::Dir { .. } => NodeKind::Directory,
        }
    }
}

/// The longest workspace path the host takes, in bytes: the commit engine
/// reaches every path relative to the workspace's directory, in one system
/// call, and Linux refuses a path of `PATH_MAX` (4,096) bytes or more.
pub const MAX_PATH_BYTES: usize = 4095;

/// The longest name of one path component, in bytes (`NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;

/// Refuse a path the host could never hold (longer than [`MAX_PATH_BYTES`],
/// or with a component longer than [`MAX_NAME_BYTES`]) when it is made in
/// the image, as the host would (`ENAMETOOLONG`): otherwise a preview
/// approves what its commit can never write.
fn check_name_length(path: &VPath) -> Result<(), VfsError> {
    const ENAMETOOLONG: i32 = 36;
    let text = path.as_str();
    if text.len() > MAX_PATH_BYTES || text.split('/').any(|name| name.len() > MAX_NAME_BYTES) {
        return Err(VfsError::Inaccessible { path: path.clone(), errno: ENAMETOOLONG });
    }
    Ok(())
}

impl VirtualFs {
    /// A fresh image over the directory `dir`. Paths within `excluded` (the data
    /// directory, when it lies inside the workspace) are invisible: absent to
    /// lookups and missing from listings.
    pub fn new(dir: Arc<CapDir>, excluded: Vec<VPath>, limits: SnapshotLimits) -> Self {
        Self {
            base: Base::new(dir, excluded, limits),
            overlay: OverlayMap::default(),
            effects: Vec::new(),
            renames: 0,
            moved_base: BTreeSet::new(),
            shown: BTreeSet::new(),
            seen: BTreeSet::new(),
            commands_reading: false,
            in_place: BTreeMap::new(),
        }
    }

    /// Leave the names `hidden` holds for out of every listing's recorded
    /// names digest (the names a program never sees: the policy's hidden
    /// paths), so a hidden name made or removed under a listed directory is
    /// no conflict. The commit's revalidation must leave out the same names.
    #[must_use]
    pub fn with_hidden_names(mut self, hidden: PathRule) -> Self {
        self.base.hidden = Some(hidden);
        self
    }

    /// Know the before state of each base file `unreadable` holds for (a
    /// file whose bytes the policy never lets a program read) by its stamp
    /// in a diff, as a file deleted unread is, never by its digest: a
    /// program that overwrote such a file with a guess at its bytes then
    /// changes it whether or not the guess was right (an identical file was
    /// no change, so the diff answered "is the secret X?"), and no digest
    /// of the bytes reaches the diff, its digest or the transaction id, even
    /// when the run's own append or copy read them. A file changed moments
    /// before the run (its stamp not yet settled) that the run changes is
    /// refused ([`VfsError::UnsettledUnreadable`]), never hashed.
    #[must_use]
    pub fn with_unreadable_contents(mut self, unreadable: PathRule) -> Self {
        self.base.unreadable = Some(unreadable);
        self
    }

    /// Bytes the image holds in memory of its own: the content of every file
    /// written (or copied from outside the base) and every symlink target
    /// in the overlay. Content that still comes from the base is not counted.
    pub fn overlay_bytes(&self) -> u64 {
        self.overlay
            .values()
            .map(|entry| match entry {
                Overlay::File { content: ContentSource::Bytes(bytes), .. } => bytes.len() as u64,
                Overlay::Symlink { target } => target.len() as u64,
                Overlay::File { content: ContentSource::Base(_), .. } | Overlay::Dir { .. } | Overlay::Tombstone => 0,
            })
            .sum()
    }

    /// The host directory behind the base.
    pub fn host(&self) -> &Arc<CapDir> {
        self.base.dir()
    }

    /// The dependencies recorded so far, in path order.
    pub fn read_set(&mut self) -> &ReadSet {
        self.base.read_set()
    }

    /// The id of the observed snapshot so far.
    pub fn snapshot_id(&self) -> SnapshotId {
        self.base.snapshot_id()
    }

    /// Number of base nodes observed to exist.
    pub fn observed_base_nodes(&self) -> u64 {
        self.base.observed_nodes()
    }

    /// Count the nodes of the live workspace (every file, directory, symlink
    /// and other node, the excluded paths left out), stopping as soon as the
    /// count exceeds `at_most`: a caller that only needs to know whether there
    /// are more than `at_most` pays for `at_most + 1` nodes, not for the
    /// workspace. Records no dependency and freezes no observation.
    ///
    /// A directory that vanished, is no longer a directory, may not be listed
    /// or is a mount point counts as a node with nothing below it. A name no
    /// guest can spell (not UTF-8) counts as a node that is not descended.
    pub fn count_base_nodes(&self, at_most: u64) -> Result<u64, VfsError> {
        self.base.count_nodes(at_most)
    }

    /// The recorded effects, in order.
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// Number of renames that moved base content (a rename of only what
    /// the run made itself is not counted: its diff is the whole story).
    pub fn renames(&self) -> u64 {
        self.renames
    }

    /// Directory entries left out of listings so far, because no guest can
    /// spell their names (not UTF-8). A directory holding one is never empty.
    pub fn unlisted_names(&self) -> u64 {
        self.base.unlisted
    }

    /// The image's changes as they are now (see [`ImageCheckpoint`]).
    pub fn checkpoint(&self) -> ImageCheckpoint {
        ImageCheckpoint {
            overlay: self.overlay.entries.clone(),
            effects: self.effects.clone(),
            renames: self.renames,
            moved_base: self.moved_base.clone(),
        }
    }

    /// Put the image's changes back exactly as they were at `checkpoint`:
    /// what was made since is gone, what was changed or removed since is as
    /// it was. What was observed of the base since stays observed (and
    /// recorded): the image never forgets what it relied on.
    pub fn restore(&mut self, checkpoint: &ImageCheckpoint) {
        self.overlay.replace(&checkpoint.overlay);
        self.effects.clone_from(&checkpoint.effects);
        self.renames = checkpoint.renames;
        self.moved_base.clone_from(&checkpoint.moved_base);
    }

    /// Whether the node at `path`, or one beneath it, is the base's under a
    /// name of this run's: moved there from where the base held it (in one
    /// move or several), whatever was written to it since. A rename of it
    /// moves the base's (sec85 F1, sec86 F1-F2: a file moved to a temporary
    /// name, rewritten with its own bytes, then moved on; a symlink or an
    /// empty directory likewise). A copy is no such node. A lookup of a
    /// sorted set: no walk of the tree.
    pub fn holds_moved_base(&self, path: &VPath) -> bool {
        if self.moved_base.contains(path.as_str()) {
            return true;
        }
        let beneath = if path.is_root() { String::new() } else { format!("{}/", path.as_str()) };
        self.moved_base.range(beneath.clone()..).next().is_some_and(|moved| moved.starts_with(&beneath))
    }

    /// Forget that `path` and what is beneath it are moved base nodes: they
    /// are gone from there.
    fn forget_moved(&mut self, path: &VPath) {
        self.moved_base.remove(path.as_str());
        let beneath = format!("{}/", path.as_str());
        let gone: Vec<String> =
            self.moved_base.range(beneath.clone()..).take_while(|moved| moved.starts_with(&beneath)).cloned().collect();
        for moved in gone {
            self.moved_base.remove(&moved);
        }
    }

    /// Whether the base holds something at `path`: what a write there
    /// changes rather than makes. Recorded as a dependency on its kind only
    /// (nothing read), whatever the overlay holds there now.
    pub fn in_base(&mut self, path: &VPath) -> Result<bool, VfsError> {
        Ok(self.base_reachable(path)? && self.base.kind(path)?.is_some())
    }

    /// The base's state at `path` (`None` when the base has nothing there),
    /// observed and recorded as a dependency like a diff's before state,
    /// whatever the overlay holds there now.
    pub fn base_state_of(&mut self, path: &VPath) -> Result<Option<NodeState>, VfsError> {
        self.base_state(path)
    }

    /// Whether the base still holds `expected` at `path` (`None`: nothing
    /// there), observed and recorded as [`Self::base_state_of`] does. A file
    /// known by its stamp (deleted unread) is compared by kind, size, mode
    /// and stamp, and not read.
    pub fn base_holds(&mut self, path: &VPath, expected: Option<&NodeState>) -> Result<bool, VfsError> {
        if let Some(expected) = expected
            && let Some(stamp) = expected.stamp
        {
            if !self.base_reachable(path)? {
                return Ok(false);
            }
            let Some((kind, size, mode)) = self.base.metadata(path)? else { return Ok(false) };
            return Ok(kind == NodeKind::File
                && size == expected.size
                && mode == expected.mode
                && self.base.observed_stamp(path) == Some(stamp));
        }
        Ok(self.base_state(path)?.as_ref() == expected)
    }

    /// Whether the image surely holds nothing at `path`, judged by the run's
    /// own changes alone (no base node is looked at, nothing is observed):
    /// the run removed it or an ancestor, or replaced an ancestor by a file,
    /// a symlink or a directory of its own that holds no such entry. `false`
    /// when only the base could tell.
    pub fn absent_by_own_changes(&self, path: &VPath) -> bool {
        let mut base_visible = true;
        for ancestor in path.ancestors() {
            if ancestor.is_root() {
                continue;
            }
            match self.overlay.get(&ancestor) {
                Some(Overlay::Tombstone | Overlay::File { .. } | Overlay::Symlink { .. }) => return true,
                Some(Overlay::Dir { opaque, .. }) => base_visible &= !opaque,
                None if !base_visible => return true,
                None => {}
            }
        }
        match self.overlay.get(path) {
            Some(Overlay::Tombstone) => true,
            Some(_) => false,
            None => !base_visible,
        }
    }

    // ----- resolution -----

    /// Resolve every proper ancestor of `path`; returns whether base nodes still
    /// show through at `path` (no opaque or replaced ancestor), or `None` when an
    /// ancestor is absent.
    fn resolve_parents(&mut self, path: &VPath) -> Result<Option<bool>, VfsError> {
        let mut base_visible = true;
        for ancestor in path.ancestors() {
            if ancestor.is_root() {
                continue;
            }
            match self.overlay.get(&ancestor) {
                Some(Overlay::Tombstone) => return Ok(None),
                Some(Overlay::File { .. }) => return Err(VfsError::NotADirectory { path: ancestor }),
                Some(Overlay::Symlink { .. }) => return Err(VfsError::SymlinkInPath { path: ancestor }),
                Some(Overlay::Dir { opaque, .. }) => base_visible &= !opaque,
                None if !base_visible => return Ok(None),
                None => match self.base.kind(&ancestor)? {
                    None => return Ok(None),
                    Some(NodeKind::Directory) => {}
                    Some(NodeKind::File) => return Err(VfsError::NotADirectory { path: ancestor }),
                    Some(NodeKind::Symlink) => return Err(VfsError::SymlinkInPath { path: ancestor }),
                },
            }
        }
        Ok(Some(base_visible))
    }

    fn resolve(&mut self, path: &VPath) -> Result<Option<Node>, VfsError> {
        if path.is_root() {
            return Ok(Some(Node::Dir { opaque: false }));
        }
        let Some(base_visible) = self.resolve_parents(path)? else { return Ok(None) };
        Ok(match self.overlay.get(path) {
            Some(Overlay::File { .. }) => Some(Node::File),
            Some(Overlay::Symlink { .. }) => Some(Node::Symlink),
            Some(Overlay::Dir { opaque, .. }) => Some(Node::Dir { opaque: *opaque }),
            None if base_visible => self.base.kind(path)?.map(Node::Base),
            Some(Overlay::Tombstone) | None => None,
        })
    }

    fn require(&mut self, path: &VPath) -> Result<Node, VfsError> {
        self.resolve(path)?.ok_or_else(|| VfsError::NotFound { path: path.clone() })
    }

    /// Resolve the parent of `path` and require it to be a directory, and
    /// `path` to be a name the host can hold ([`check_name_length`]).
    fn require_parent_dir(&mut self, path: &VPath) -> Result<(), VfsError> {
        check_name_length(path)?;
        let parent = path.parent().ok_or(VfsError::RootMutation)?;
        match self.require(&parent)?.kind() {
            NodeKind::Directory => Ok(()),
            NodeKind::File => Err(VfsError::NotADirectory { path: parent }),
            NodeKind::Symlink => Err(VfsError::SymlinkInPath { path: parent }),
        }
    }

    /// The vsh data directory `path` lies in or is, if any: a base directory
    /// on the way (`path` included) that carries vsh's store magic (see
    /// [`VirtualFs::new`] for the data directory this runtime knows, which is
    /// hidden instead). Such a directory is another workspace's trusted state,
    /// nested in this one: callers refuse every access to it and hide it from
    /// listings. Only directories of the base are checked, each once.
    pub fn vsh_data_within(&mut self, path: &VPath) -> Result<Option<VPath>, VfsError> {
        let mut candidates = path.ancestors();
        candidates.push(path.clone());
        for dir in candidates.into_iter().filter(|dir| !dir.is_root()) {
            match self.store_at(&dir)? {
                StoreAt::Store => return Ok(Some(dir)),
                StoreAt::NoneBelow => return Ok(None),
                StoreAt::NotHere => {}
            }
        }
        Ok(None)
    }

    /// Whether making a node at `path` would give its directory (not the
    /// root) vsh's store magic: a `txlog` beside a `txlog.lock`. No program
    /// may make that: once committed, every later run would take the
    /// directory for another workspace's trusted state and refuse it whole
    /// (hidden, untouchable, approved work there refused at its commit).
    /// The sibling's kind is recorded as a metadata read.
    pub fn completes_store_magic(&mut self, path: &VPath) -> Result<bool, VfsError> {
        let other = match path.file_name() {
            Some(base::STORE_LOG) => base::STORE_LOCK,
            Some(base::STORE_LOCK) => base::STORE_LOG,
            _ => return Ok(false),
        };
        let Some(parent) = path.parent().filter(|parent| !parent.is_root()) else { return Ok(false) };
        let Ok(sibling) = parent.child(other) else { return Ok(false) };
        match self.kind(&sibling) {
            Ok(found) => Ok(found.is_some()),
            Err(VfsError::NotADirectory { .. } | VfsError::SymlinkInPath { .. }) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// [`VirtualFs::vsh_data_within`] for `child` of a directory that holds no
    /// store and lies in none (what `vsh_data_within` of `child`'s parent
    /// answered `None` for): only `child` itself is left to check, so a walk
    /// pays one lookup per entry instead of one per ancestor. The caller
    /// vouches for the parent; `child` must be a direct child of it.
    pub fn vsh_data_at_child(&mut self, child: &VPath) -> Result<bool, VfsError> {
        Ok(!child.is_root() && self.store_at(child)? == StoreAt::Store)
    }

    /// Whether the directory `dir` (not the root) carries vsh's store magic,
    /// given that none of its ancestors does.
    fn store_at(&mut self, dir: &VPath) -> Result<StoreAt, VfsError> {
        // A guest-made directory is not anyone's store, and nothing below it is.
        if self.overlay.contains_key(dir) {
            return Ok(StoreAt::NoneBelow);
        }
        match self.base.known_kind(dir) {
            Ok(Some(NodeKind::Directory)) => {}
            Err(error) if error.is_terminal() => return Err(error),
            Ok(_) | Err(_) => return Ok(StoreAt::NoneBelow),
        }
        Ok(if self.base.is_store_dir(dir)? { StoreAt::Store } else { StoreAt::NotHere })
    }

    // ----- queries -----

    /// The kind of the node at `path`, or `None` if absent. A path below a file
    /// or symlink is an error, as on the host.
    pub fn kind(&mut self, path: &VPath) -> Result<Option<NodeKind>, VfsError> {
        Ok(self.resolve(path)?.map(|node| node.kind()))
    }

    /// What [`VirtualFs::listed_kind`] needs to know of the directory `dir`
    /// to tell its entries' kinds: where they come from.
    pub fn listing_view(&mut self, dir: &VPath) -> Result<ListingView, VfsError> {
        let base_visible = match self.require(dir)? {
            Node::Base(NodeKind::Directory) => true,
            Node::Dir { opaque } => !opaque && self.base_shows_through(dir)?,
            Node::Base(NodeKind::File) | Node::File => return Err(VfsError::NotADirectory { path: dir.clone() }),
            Node::Base(NodeKind::Symlink) | Node::Symlink => return Err(VfsError::SymlinkInPath { path: dir.clone() }),
        };
        Ok(ListingView { dir: dir.clone(), base_visible, changes: self.overlay.changes })
    }

    /// [`VirtualFs::kind`] of `child`, an entry of the directory `view` was
    /// taken of: the overlay's entry there, else (where the base shows
    /// through) the base's, without resolving the directory again. A view
    /// the image changed since, or a path that is not an entry of its
    /// directory, is resolved whole.
    pub fn listed_kind(&mut self, view: &ListingView, child: &VPath) -> Result<Option<NodeKind>, VfsError> {
        let entry_of_dir = child.is_strictly_within(&view.dir) && child.depth() == view.dir.depth() + 1;
        if view.changes != self.overlay.changes || !entry_of_dir {
            return self.kind(child);
        }
        Ok(match self.overlay.get(child) {
            Some(Overlay::File { .. }) => Some(NodeKind::File),
            Some(Overlay::Symlink { .. }) => Some(NodeKind::Symlink),
            Some(Overlay::Dir { .. }) => Some(NodeKind::Directory),
            None if view.base_visible => self.base.kind(child)?,
            Some(Overlay::Tombstone) | None => None,
        })
    }

    /// Whether `path` exists. Paths below a file or symlink do not exist.
    pub fn exists(&mut self, path: &VPath) -> Result<bool, VfsError> {
        match self.kind(path) {
            Ok(kind) => Ok(kind.is_some()),
            Err(VfsError::NotADirectory { .. } | VfsError::SymlinkInPath { .. }) => Ok(false),
            Err(other) => Err(other),
        }
    }

    /// Metadata of the node at `path` (never following a symlink). A
    /// directory has no time (`mtime` 0, as for what the transaction made):
    /// the host's changes whenever a name in it comes or goes, hidden names
    /// included, so showing it would tell a guest when a secret was made or
    /// removed there.
    pub fn metadata(&mut self, path: &VPath) -> Result<Metadata, VfsError> {
        if path.is_root() {
            let mode = self.base.metadata(path)?.map_or(DEFAULT_DIR_MODE, |(_, _, mode)| mode);
            return Ok(Metadata { kind: NodeKind::Directory, size: 0, mode, mtime: 0.0 });
        }
        match self.require(path)? {
            Node::Base(_) => {
                let (kind, size, mode) =
                    self.base.metadata(path)?.ok_or_else(|| VfsError::NotFound { path: path.clone() })?;
                let mtime =
                    if kind == NodeKind::Directory { 0.0 } else { self.base.mtime_seconds(path)?.unwrap_or(0.0) };
                Ok(Metadata { kind, size, mode, mtime })
            }
            node => {
                let kind = node.kind();
                let (size, mode) = match self.overlay.get(path).cloned() {
                    Some(Overlay::File { content, mode }) => (self.content_len(&content)?, mode),
                    Some(Overlay::Symlink { target }) => (target.len() as u64, 0o777),
                    Some(Overlay::Dir { mode, .. }) => (0, mode),
                    _ => unreachable!("resolved overlay node"),
                };
                Ok(Metadata { kind, size, mode, mtime: 0.0 })
            }
        }
    }

    fn content_len(&mut self, content: &ContentSource) -> Result<u64, VfsError> {
        match content {
            ContentSource::Bytes(bytes) => Ok(bytes.len() as u64),
            ContentSource::Base(origin) => {
                Ok(self.base.metadata(origin)?.ok_or_else(|| VfsError::BaseChanged { path: origin.clone() })?.1)
            }
        }
    }

    /// The size of a file without reading it.
    pub fn file_size(&mut self, path: &VPath) -> Result<u64, VfsError> {
        let meta = self.metadata(path)?;
        match meta.kind {
            NodeKind::File => Ok(meta.size),
            NodeKind::Directory => Err(VfsError::IsADirectory { path: path.clone() }),
            NodeKind::Symlink => Err(VfsError::SymlinkInPath { path: path.clone() }),
        }
    }

    /// The base files whose content the guest read, whole or a piece
    /// ([`VirtualFs::read`], [`VirtualFs::read_range`]), by their base path
    /// (a copy's reader read its origin's): what the program saw, as
    /// against the content dependencies the read set also records for what
    /// it only replaced or moved.
    pub fn shown_contents(&self) -> &BTreeSet<VPath> {
        &self.shown
    }

    /// Those of [`VirtualFs::shown_contents`] the program read itself, not
    /// a real command it ran (a test run reads sources it never shows the
    /// program: ux69 H2): what the program saw of the base.
    pub fn seen_contents(&self) -> &BTreeSet<VPath> {
        &self.seen
    }

    /// Take back that the guest read `path` (its read gave it nothing: the
    /// bytes did not decode), when no read before this one showed it:
    /// `shown_before` is whether [`VirtualFs::shown_contents`] held it then.
    pub fn unshow(&mut self, path: &VPath, shown_before: bool) {
        if !shown_before {
            self.shown.remove(path);
            self.seen.remove(path);
        }
    }

    /// Note that the content `path` holds now is an edit in place of what
    /// it held (a patch: the guest read none of it, and kept all it did not
    /// replace): see [`VirtualFs::edited_in_place`].
    pub fn note_edited_in_place(&mut self, path: &VPath) -> Result<(), VfsError> {
        if let Some(ContentSource::Bytes(bytes)) = self.content_source(path)? {
            let digest = BlobId::of(&bytes);
            self.in_place.insert(path.clone(), digest);
        }
        Ok(())
    }

    /// The content each file an edit in place left, by path: a diff entry
    /// whose new content is this is that edit's, not a rewrite's.
    pub fn edited_in_place(&self) -> &BTreeMap<VPath, BlobId> {
        &self.in_place
    }

    /// Whether the reads from now on are a real command's (`true`, while
    /// the image serves a candidate's processes) or the program's own.
    pub fn serving_commands(&mut self, commands: bool) {
        self.commands_reading = commands;
    }

    /// Whether the image serves a real command's processes now
    /// ([`VirtualFs::serving_commands`]).
    pub fn is_serving_commands(&self) -> bool {
        self.commands_reading
    }

    /// Note that the guest read the content of base file `path`.
    fn show(&mut self, path: &VPath) {
        if !self.shown.contains(path) {
            self.shown.insert(path.clone());
        }
        if !self.commands_reading && !self.seen.contains(path) {
            self.seen.insert(path.clone());
        }
    }

    /// Read a file's bytes. Symlinks are not followed.
    pub fn read(&mut self, path: &VPath) -> Result<Arc<[u8]>, VfsError> {
        self.read_shown(path, true)
    }

    /// [`VirtualFs::read`], for bytes the guest does not get to see whole: a
    /// change it makes without reading (a write into the middle of a file
    /// it never read), a search that shows it only the lines that match.
    /// Recorded as a read is, but not counted among
    /// [`VirtualFs::shown_contents`].
    pub fn read_unshown(&mut self, path: &VPath) -> Result<Arc<[u8]>, VfsError> {
        self.read_shown(path, false)
    }

    fn read_shown(&mut self, path: &VPath, shown: bool) -> Result<Arc<[u8]>, VfsError> {
        match self.require(path)? {
            Node::Base(NodeKind::File) => {
                let bytes = self.base.content(path)?;
                if shown {
                    self.show(path);
                }
                Ok(bytes)
            }
            Node::File => match self.overlay.get(path) {
                Some(Overlay::File { content: ContentSource::Bytes(bytes), .. }) => Ok(Arc::clone(bytes)),
                Some(Overlay::File { content: ContentSource::Base(origin), .. }) => {
                    let origin = origin.clone();
                    let bytes = self.base.content(&origin)?;
                    if shown {
                        self.show(&origin);
                    }
                    Ok(bytes)
                }
                _ => unreachable!("resolved overlay file"),
            },
            Node::Base(NodeKind::Directory) | Node::Dir { .. } => Err(VfsError::IsADirectory { path: path.clone() }),
            Node::Base(NodeKind::Symlink) | Node::Symlink => Err(VfsError::SymlinkInPath { path: path.clone() }),
        }
    }

    /// Up to `length` bytes of a file from `offset` (fewer at its end, none
    /// from it on). Symlinks are not followed. Recorded as [`VirtualFs::read`]
    /// records a whole read (the file's content digest), but a base file is
    /// never held in memory for it: it is hashed once, streamed, and each
    /// slice is read from the host under its frozen observation, so a file
    /// larger than [`SnapshotLimits::max_materialized_file_bytes`] can be read
    /// a slice at a time.
    pub fn read_range(&mut self, path: &VPath, offset: u64, length: u32) -> Result<Vec<u8>, VfsError> {
        match self.require(path)? {
            Node::Base(NodeKind::File) => {
                let piece = self.base.content_range(path, offset, length)?;
                self.show(path);
                Ok(piece)
            }
            Node::File => match self.overlay.get(path) {
                Some(Overlay::File { content: ContentSource::Bytes(bytes), .. }) => {
                    Ok(base::slice_of(bytes, offset, length).to_vec())
                }
                Some(Overlay::File { content: ContentSource::Base(origin), .. }) => {
                    let origin = origin.clone();
                    let piece = self.base.content_range(&origin, offset, length)?;
                    self.show(&origin);
                    Ok(piece)
                }
                _ => unreachable!("resolved overlay file"),
            },
            Node::Base(NodeKind::Directory) | Node::Dir { .. } => Err(VfsError::IsADirectory { path: path.clone() }),
            Node::Base(NodeKind::Symlink) | Node::Symlink => Err(VfsError::SymlinkInPath { path: path.clone() }),
        }
    }

    /// What reading a first piece of the file at `path` costs the host
    /// beyond the piece ([`VirtualFs::read_range`]): the file's size when it
    /// is a base file neither held nor hashed yet (it is hashed whole), else
    /// 0. A caller that charges reads charges this before the read.
    pub fn read_range_cost(&mut self, path: &VPath) -> Result<u64, VfsError> {
        match self.require(path)? {
            Node::Base(NodeKind::File) => self.base.range_cost(path),
            Node::File => match self.overlay.get(path) {
                Some(Overlay::File { content: ContentSource::Base(origin), .. }) => {
                    let origin = origin.clone();
                    self.base.range_cost(&origin)
                }
                _ => Ok(0),
            },
            _ => Ok(0),
        }
    }

    /// Read a symlink's target bytes.
    pub fn read_link(&mut self, path: &VPath) -> Result<Arc<[u8]>, VfsError> {
        match self.require(path)? {
            Node::Base(NodeKind::Symlink) => self.base.content(path),
            Node::Symlink => match self.overlay.get(path) {
                Some(Overlay::Symlink { target }) => Ok(Arc::clone(target)),
                _ => unreachable!("resolved overlay symlink"),
            },
            _ => Err(VfsError::InvalidOperation { path: path.clone(), reason: "not a symlink" }),
        }
    }

    /// The names of a directory's children, sorted.
    pub fn read_dir(&mut self, path: &VPath) -> Result<Vec<String>, VfsError> {
        self.read_dir_shared(path).map(Arc::unwrap_or_clone)
    }

    /// [`VirtualFs::read_dir`], shared: a directory of the base that the run
    /// has not changed below is the base's own listing, not a copy of it (a
    /// walk lists every directory it enters once).
    pub fn read_dir_shared(&mut self, path: &VPath) -> Result<Arc<Vec<String>>, VfsError> {
        let node = self.require(path)?;
        let base_children = match node {
            Node::Base(NodeKind::Directory) => true,
            Node::Dir { opaque } => !opaque && self.base_shows_through(path)?,
            Node::Base(NodeKind::File) | Node::File => return Err(VfsError::NotADirectory { path: path.clone() }),
            Node::Base(NodeKind::Symlink) | Node::Symlink => {
                return Err(VfsError::SymlinkInPath { path: path.clone() });
            }
        };
        if base_children && self.overlay_range(path).next().is_none() {
            // Nothing of the run's below `path`: the base's names, sorted
            // already, are the listing (a walk lists every directory once, and
            // this skips a lookup per name).
            return self.base.names(path);
        }
        let mut names: BTreeSet<String> = BTreeSet::new();
        if base_children {
            for name in self.base.names(path)?.iter() {
                let child = path.child(name).map_err(|_| VfsError::NonUtf8Name { path: path.clone() })?;
                if !matches!(self.overlay.get(&child), Some(Overlay::Tombstone)) {
                    names.insert(name.clone());
                }
            }
        }
        for (child, entry) in self.overlay_children(path) {
            if matches!(entry, Overlay::Tombstone) {
                names.remove(child.file_name().unwrap_or_default());
            } else {
                names.insert(child.file_name().unwrap_or_default().to_owned());
            }
        }
        Ok(Arc::new(names.into_iter().collect()))
    }

    /// Whether base children show through at `path` (no opaque or replaced ancestor).
    fn base_shows_through(&mut self, path: &VPath) -> Result<bool, VfsError> {
        Ok(self.resolve_parents(path)?.unwrap_or(false))
    }

    /// Direct overlay children of `path`.
    fn overlay_children(&self, path: &VPath) -> Vec<(VPath, Overlay)> {
        let depth = path.depth() + 1;
        self.overlay_range(path)
            .filter(|(child, _)| child.depth() == depth)
            .map(|(p, o)| (p.clone(), o.clone()))
            .collect()
    }

    /// Overlay entries strictly below `path`.
    fn overlay_range(&self, path: &VPath) -> impl Iterator<Item = (&VPath, &Overlay)> {
        let lower = Bound::Included(path.descendants_lower_bound());
        let upper = path.descendants_upper_bound().map_or(Bound::Unbounded, Bound::Excluded);
        self.overlay.range((lower, upper)).filter(move |(child, _)| !child.is_root() && child.is_strictly_within(path))
    }

    // ----- mutations -----

    /// Create or replace a file's content. The parent must be a directory; an
    /// existing file keeps its mode, a new one gets [`DEFAULT_FILE_MODE`].
    pub fn write(&mut self, path: &VPath, bytes: Arc<[u8]>) -> Result<(), VfsError> {
        if path.is_root() {
            return Err(VfsError::RootMutation);
        }
        self.require_parent_dir(path)?;
        let mode = match self.resolve(path)? {
            None => DEFAULT_FILE_MODE,
            Some(Node::Base(NodeKind::File)) => {
                self.base.metadata(path)?.map_or(DEFAULT_FILE_MODE, |(_, _, mode)| mode)
            }
            Some(Node::File) => match self.overlay.get(path) {
                Some(Overlay::File { mode, .. }) => *mode,
                _ => DEFAULT_FILE_MODE,
            },
            Some(Node::Base(NodeKind::Directory) | Node::Dir { .. }) => {
                return Err(VfsError::IsADirectory { path: path.clone() });
            }
            Some(Node::Base(NodeKind::Symlink) | Node::Symlink) => {
                return Err(VfsError::SymlinkInPath { path: path.clone() });
            }
        };
        self.overlay.insert(path.clone(), Overlay::File { content: ContentSource::Bytes(bytes), mode });
        self.effects.push(Effect::Write(path.clone()));
        Ok(())
    }

    /// Append to a file, creating it if missing. Returns the new length.
    pub fn append(&mut self, path: &VPath, bytes: &[u8]) -> Result<u64, VfsError> {
        // Appending shows the guest nothing of what the file held.
        let existing = match self.read_unshown(path) {
            Ok(existing) => Some(existing),
            Err(VfsError::NotFound { .. }) => None,
            Err(other) => return Err(other),
        };
        let mut joined = Vec::with_capacity(existing.as_ref().map_or(0, |e| e.len()) + bytes.len());
        if let Some(existing) = existing {
            joined.extend_from_slice(&existing);
        }
        joined.extend_from_slice(bytes);
        let length = joined.len() as u64;
        self.write(path, joined.into())?;
        Ok(length)
    }

    /// Create a symlink (stored as its target bytes, never followed).
    pub fn symlink(&mut self, path: &VPath, target: &[u8]) -> Result<(), VfsError> {
        if path.is_root() {
            return Err(VfsError::RootMutation);
        }
        self.require_parent_dir(path)?;
        if self.resolve(path)?.is_some() {
            return Err(VfsError::AlreadyExists { path: path.clone() });
        }
        self.overlay.insert(path.clone(), Overlay::Symlink { target: target.into() });
        self.effects.push(Effect::Write(path.clone()));
        Ok(())
    }

    /// Create a directory with `mode`. The parent must exist.
    pub fn mkdir(&mut self, path: &VPath, mode: u32) -> Result<(), VfsError> {
        if path.is_root() {
            return Err(VfsError::AlreadyExists { path: path.clone() });
        }
        self.require_parent_dir(path)?;
        if self.resolve(path)?.is_some() {
            return Err(VfsError::AlreadyExists { path: path.clone() });
        }
        self.overlay.insert(path.clone(), Overlay::Dir { mode: mode & vsh_types::MODE_MASK, opaque: true });
        self.effects.push(Effect::Mkdir(path.clone()));
        Ok(())
    }

    /// Create a directory and any missing ancestors (each with `mode`).
    pub fn mkdir_all(&mut self, path: &VPath, mode: u32) -> Result<(), VfsError> {
        let mut chain = path.ancestors();
        chain.push(path.clone());
        for dir in chain.into_iter().filter(|dir| !dir.is_root()) {
            match self.kind(&dir)? {
                Some(NodeKind::Directory) => {}
                Some(NodeKind::File) => return Err(VfsError::NotADirectory { path: dir }),
                Some(NodeKind::Symlink) => return Err(VfsError::SymlinkInPath { path: dir }),
                None => self.mkdir(&dir, mode)?,
            }
        }
        Ok(())
    }

    /// Remove a file or symlink.
    pub fn unlink(&mut self, path: &VPath) -> Result<(), VfsError> {
        if path.is_root() {
            return Err(VfsError::RootMutation);
        }
        match self.require(path)?.kind() {
            NodeKind::Directory => Err(VfsError::IsADirectory { path: path.clone() }),
            NodeKind::File | NodeKind::Symlink => {
                self.overlay.insert(path.clone(), Overlay::Tombstone);
                self.forget_moved(path);
                self.effects.push(Effect::Remove(path.clone()));
                Ok(())
            }
        }
    }

    /// Remove an empty directory.
    pub fn rmdir(&mut self, path: &VPath) -> Result<(), VfsError> {
        if path.is_root() {
            return Err(VfsError::RootMutation);
        }
        if self.require(path)?.kind() != NodeKind::Directory {
            return Err(VfsError::NotADirectory { path: path.clone() });
        }
        if !self.read_dir(path)?.is_empty() || self.base.unlisted_in(path) > 0 {
            return Err(VfsError::DirectoryNotEmpty { path: path.clone() });
        }
        self.tombstone_tree(path);
        self.effects.push(Effect::Remove(path.clone()));
        Ok(())
    }

    /// Remove a node and, for a directory, everything beneath it.
    pub fn remove_tree(&mut self, path: &VPath) -> Result<(), VfsError> {
        if path.is_root() {
            return Err(VfsError::RootMutation);
        }
        if matches!(self.require(path)?, Node::Base(NodeKind::Directory)) {
            // Everything below must be something the diff can name: a special
            // file or a name no guest can spell is refused here, naming it.
            self.collect_base_subtree(path, &mut BTreeSet::new())?;
        }
        self.tombstone_tree(path);
        self.effects.push(Effect::Remove(path.clone()));
        Ok(())
    }

    fn tombstone_tree(&mut self, path: &VPath) {
        let below: Vec<VPath> = self.overlay_range(path).map(|(child, _)| child.clone()).collect();
        for child in below {
            self.overlay.remove(&child);
        }
        self.overlay.insert(path.clone(), Overlay::Tombstone);
        self.forget_moved(path);
    }

    /// Set the permission bits of a file or directory (not a symlink).
    pub fn set_mode(&mut self, path: &VPath, mode: u32) -> Result<(), VfsError> {
        if path.is_root() {
            return Err(VfsError::RootMutation);
        }
        let mode = mode & vsh_types::MODE_MASK;
        match self.require(path)? {
            Node::Base(NodeKind::File) => {
                self.overlay.insert(path.clone(), Overlay::File { content: ContentSource::Base(path.clone()), mode });
            }
            Node::Base(NodeKind::Directory) => {
                self.overlay.insert(path.clone(), Overlay::Dir { mode, opaque: false });
            }
            Node::File | Node::Dir { .. } => match self.overlay.get_mut(path) {
                Some(Overlay::File { mode: current, .. } | Overlay::Dir { mode: current, .. }) => *current = mode,
                _ => unreachable!("resolved overlay node"),
            },
            Node::Base(NodeKind::Symlink) | Node::Symlink => {
                return Err(VfsError::InvalidOperation {
                    path: path.clone(),
                    reason: "cannot change a symlink's mode",
                });
            }
        }
        self.effects.push(Effect::SetMode(path.clone()));
        Ok(())
    }

    /// Rename `from` to `to` with POSIX semantics: a file replaces a file; a
    /// directory replaces a missing path or an empty directory; a directory
    /// cannot move into itself. Moving a path onto itself does nothing.
    pub fn rename(&mut self, from: &VPath, to: &VPath) -> Result<(), VfsError> {
        if from.is_root() || to.is_root() {
            return Err(VfsError::RootMutation);
        }
        let source_kind = self.require(from)?.kind();
        self.require_parent_dir(to)?;
        if from == to {
            return Ok(());
        }
        if to.is_strictly_within(from) {
            return Err(VfsError::InvalidOperation { path: to.clone(), reason: "cannot move a directory into itself" });
        }
        match (source_kind, self.kind(to)?) {
            (NodeKind::Directory, Some(NodeKind::Directory)) => {
                if !self.read_dir(to)?.is_empty() {
                    return Err(VfsError::DirectoryNotEmpty { path: to.clone() });
                }
            }
            (NodeKind::Directory, Some(_)) => return Err(VfsError::NotADirectory { path: to.clone() }),
            (_, Some(NodeKind::Directory)) => return Err(VfsError::IsADirectory { path: to.clone() }),
            (_, None | Some(_)) => {}
        }
        let (moved, carries_base) = self.capture_tree(from)?;
        for (path, _, _) in &moved {
            check_name_length(&path.rebase(from, to).expect("captured below the source"))?;
        }
        self.tombstone_tree(from);
        if self.overlay.contains_key(to) || self.kind(to)?.is_some() {
            self.tombstone_tree(to);
        }
        for (path, entry, the_bases) in moved {
            let target = path.rebase(from, to).expect("captured below the source");
            if the_bases {
                self.moved_base.insert(target.as_str().to_owned());
            }
            self.overlay.insert(target, entry);
        }
        // Moving only what this run made (a temporary file renamed over its
        // target, as `sed -i` does) moves nothing of the base: the diff says
        // all there is to say. Moving base content is what the policy weighs.
        if carries_base {
            self.renames += 1;
        }
        self.effects.push(Effect::Rename { from: from.clone(), to: to.clone() });
        Ok(())
    }

    /// Copy a file's content to `to`. An existing destination file keeps its
    /// mode; a new one gets the source's mode. The copy depends on the source's
    /// content, which is not read into memory.
    pub fn copy_file(&mut self, from: &VPath, to: &VPath) -> Result<(), VfsError> {
        if to.is_root() {
            return Err(VfsError::RootMutation);
        }
        let (content, source_mode) = match self.require(from)? {
            Node::Base(NodeKind::File) => {
                self.base.digest(from)?;
                let mode = self.base.metadata(from)?.map_or(DEFAULT_FILE_MODE, |(_, _, mode)| mode);
                (ContentSource::Base(from.clone()), mode)
            }
            Node::File => match self.overlay.get(from) {
                Some(Overlay::File { content, mode }) => (content.clone(), *mode),
                _ => unreachable!("resolved overlay file"),
            },
            Node::Base(NodeKind::Directory) | Node::Dir { .. } => {
                return Err(VfsError::IsADirectory { path: from.clone() });
            }
            Node::Base(NodeKind::Symlink) | Node::Symlink => {
                return Err(VfsError::SymlinkInPath { path: from.clone() });
            }
        };
        self.require_parent_dir(to)?;
        let mode = match self.resolve(to)? {
            None => source_mode,
            Some(Node::Base(NodeKind::File)) => self.base.metadata(to)?.map_or(source_mode, |(_, _, mode)| mode),
            Some(Node::File) => match self.overlay.get(to) {
                Some(Overlay::File { mode, .. }) => *mode,
                _ => source_mode,
            },
            Some(Node::Base(NodeKind::Directory) | Node::Dir { .. }) => {
                return Err(VfsError::IsADirectory { path: to.clone() });
            }
            Some(Node::Base(NodeKind::Symlink) | Node::Symlink) => {
                return Err(VfsError::SymlinkInPath { path: to.clone() });
            }
        };
        if from != to {
            self.overlay.insert(to.clone(), Overlay::File { content, mode });
            self.effects.push(Effect::Write(to.clone()));
        }
        Ok(())
    }

    /// Snapshot the subtree at `path` as overlay entries (path relative order),
    /// observing base nodes that have no overlay entry. Directories become opaque.
    /// The tree at `path` as overlay entries, and whether any of it is the
    /// base's (a base node, or a file whose content is still the base's).
    #[expect(clippy::type_complexity, reason = "each entry with whether it is the base's, built together")]
    fn capture_tree(&mut self, path: &VPath) -> Result<(Vec<(VPath, Overlay, bool)>, bool), VfsError> {
        let mut out = Vec::new();
        let mut carries_base = false;
        let mut stack = vec![path.clone()];
        while let Some(current) = stack.pop() {
            let node = self.require(&current)?;
            carries_base |= matches!(node, Node::Base(_));
            // The base's node: where the base holds one (as it is or
            // changed in place since: a chmod, a rewrite; sec87 F1), or one
            // moved here before.
            let the_bases = matches!(node, Node::Base(_))
                || self.moved_base.contains(current.as_str())
                || self.in_base(&current)?;
            let entry = match node {
                Node::Base(NodeKind::File) => {
                    let mode = self.base.metadata(&current)?.map_or(DEFAULT_FILE_MODE, |(_, _, mode)| mode);
                    // The move depends on the content it moves.
                    self.base.digest(&current)?;
                    Overlay::File { content: ContentSource::Base(current.clone()), mode }
                }
                Node::Base(NodeKind::Symlink) => Overlay::Symlink { target: self.base.content(&current)? },
                Node::Base(NodeKind::Directory) => {
                    let mode = self.base.metadata(&current)?.map_or(DEFAULT_DIR_MODE, |(_, _, mode)| mode);
                    Overlay::Dir { mode, opaque: true }
                }
                Node::File | Node::Symlink => self.overlay.get(&current).cloned().expect("resolved overlay node"),
                Node::Dir { .. } => match self.overlay.get(&current) {
                    Some(Overlay::Dir { mode, .. }) => Overlay::Dir { mode: *mode, opaque: true },
                    _ => unreachable!("resolved overlay dir"),
                },
            };
            if matches!(entry, Overlay::Dir { .. }) {
                for name in self.read_dir(&current)? {
                    stack.push(current.child(&name).map_err(|_| VfsError::NonUtf8Name { path: current.clone() })?);
                }
                if self.base.unlisted_in(&current) > 0 {
                    return Err(VfsError::NonUtf8Name { path: current });
                }
            }
            carries_base |= matches!(&entry, Overlay::File { content: ContentSource::Base(_), .. });
            out.push((current, entry, the_bases));
        }
        Ok((out, carries_base))
    }

    // ----- diff -----

    /// The canonical diff: every path whose final state differs from the base,
    /// sorted by path. Computing it observes (and records as dependencies) the
    /// before state of every changed path, including every descendant of a
    /// removed or replaced base directory. A deleted file the run never read
    /// is not read: its before state carries its stamp instead of a digest
    /// when the stamp is settled.
    pub fn canonical_diff(&mut self) -> Result<CanonicalDiff, VfsError> {
        let mut candidates: BTreeSet<VPath> = BTreeSet::new();
        let roots: Vec<(VPath, bool)> = self
            .overlay
            .iter()
            .map(|(path, entry)| (path.clone(), !matches!(entry, Overlay::Dir { opaque: false, .. })))
            .collect();
        for (path, replaces_base) in roots {
            candidates.insert(path.clone());
            if replaces_base {
                self.collect_base_subtree(&path, &mut candidates)?;
            }
        }
        // Every after state first: one may read another path's base content
        // (a file moved away), and a file read is known by its digest, not
        // its stamp, so the before states are decided once no more reads
        // can come (the same diff, whenever and however often it is taken).
        let mut afters = Vec::with_capacity(candidates.len());
        for path in candidates {
            let after = self.final_state(&path)?;
            afters.push((path, after));
        }
        let mut entries = Vec::new();
        for (path, after) in afters {
            // A file that ends absent is not read to be deleted: unread, it
            // is known by its stamp (BRIEF §3). Nor is a file a program may
            // not read read to be changed.
            // A deletion tells nothing of the bytes, whatever its before state.
            let before = if after.is_none() {
                self.base_state_unread(&path)?
            } else if self.base.unreadable.as_ref().is_some_and(|rule| rule.holds(&path)) {
                self.base_state_unreadable(&path)?
            } else {
                self.base_state(&path)?
            };
            if let Some(entry) = DiffEntry::between(path, before, after) {
                entries.push(entry);
            }
        }
        // The candidates come from a sorted set and the root never enters the
        // overlay, so the order rule cannot fail; if it did, say which rule.
        CanonicalDiff::new(entries).map_err(|error| match error {
            vsh_types::DiffOrderError::OutOfOrder { path } => {
                VfsError::InvalidOperation { path, reason: "diff entries out of order" }
            }
            _ => VfsError::RootMutation,
        })
    }

    /// Every base descendant of `path` (if `path` is a base directory reachable
    /// through base directories).
    fn collect_base_subtree(&mut self, path: &VPath, out: &mut BTreeSet<VPath>) -> Result<(), VfsError> {
        if !self.base_reachable(path)? {
            return Ok(());
        }
        let mut stack = vec![path.clone()];
        while let Some(dir) = stack.pop() {
            if self.base.kind(&dir)? != Some(NodeKind::Directory) {
                continue;
            }
            for name in self.base.names(&dir)?.iter() {
                let child = dir.child(name).map_err(|_| VfsError::NonUtf8Name { path: dir.clone() })?;
                out.insert(child.clone());
                stack.push(child);
            }
            if self.base.unlisted_in(&dir) > 0 {
                return Err(VfsError::NonUtf8Name { path: dir });
            }
        }
        Ok(())
    }

    /// Whether every proper ancestor of `path` is a base directory.
    fn base_reachable(&mut self, path: &VPath) -> Result<bool, VfsError> {
        for ancestor in path.ancestors() {
            if !ancestor.is_root() && self.base.kind(&ancestor)? != Some(NodeKind::Directory) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The base state of `path`, or `None` when it is absent from the base.
    fn base_state(&mut self, path: &VPath) -> Result<Option<NodeState>, VfsError> {
        if !self.base_reachable(path)? {
            return Ok(None);
        }
        self.base.state(path)
    }

    /// [`Self::base_state`] of a path the diff deletes, or changes while a
    /// program may not read it (see `Base::state_for_delete`).
    fn base_state_unread(&mut self, path: &VPath) -> Result<Option<NodeState>, VfsError> {
        if !self.base_reachable(path)? {
            return Ok(None);
        }
        self.base.state_for_delete(path)
    }

    /// The base state of a path whose bytes a program may not read, by its
    /// stamp whatever the run did (see [`VirtualFs::with_unreadable_contents`]).
    fn base_state_unreadable(&mut self, path: &VPath) -> Result<Option<NodeState>, VfsError> {
        if !self.base_reachable(path)? {
            return Ok(None);
        }
        self.base.state_unreadable(path)
    }

    /// The final (virtual) state of `path`, or `None` when absent.
    fn final_state(&mut self, path: &VPath) -> Result<Option<NodeState>, VfsError> {
        let node = match self.resolve(path) {
            Ok(node) => node,
            Err(VfsError::NotADirectory { .. } | VfsError::SymlinkInPath { .. }) => None,
            Err(other) => return Err(other),
        };
        Ok(match node {
            None => None,
            Some(Node::Base(_)) => self.base.state(path)?,
            Some(_) => match self.overlay.get(path).cloned() {
                Some(Overlay::File { content: ContentSource::Bytes(bytes), mode }) => {
                    Some(NodeState::file_with(&bytes, mode))
                }
                Some(Overlay::File { content: ContentSource::Base(origin), mode }) => {
                    let size = self.content_len(&ContentSource::Base(origin.clone()))?;
                    Some(NodeState::file(size, mode, self.base.digest(&origin)?))
                }
                Some(Overlay::Symlink { target }) => Some(NodeState::symlink(&target)),
                Some(Overlay::Dir { mode, .. }) => Some(NodeState::directory(mode)),
                Some(Overlay::Tombstone) | None => None,
            },
        })
    }

    /// Where the final content of a file or symlink at `path` comes from.
    pub fn content_source(&mut self, path: &VPath) -> Result<Option<ContentSource>, VfsError> {
        Ok(match self.overlay.get(path) {
            Some(Overlay::File { content, .. }) => Some(content.clone()),
            Some(Overlay::Symlink { target }) => Some(ContentSource::Bytes(Arc::clone(target))),
            Some(Overlay::Dir { .. } | Overlay::Tombstone) => None,
            None => match self.kind(path)? {
                Some(NodeKind::File) => Some(ContentSource::Base(path.clone())),
                Some(NodeKind::Symlink) => Some(ContentSource::Bytes(self.base.content(path)?)),
                _ => None,
            },
        })
    }

    /// Materialize a [`ContentSource`] into bytes (a base source is read through
    /// the host and checked against the frozen observation).
    pub fn materialize(&mut self, source: &ContentSource) -> Result<Arc<[u8]>, VfsError> {
        match source {
            ContentSource::Bytes(bytes) => Ok(Arc::clone(bytes)),
            ContentSource::Base(origin) => self.base.content(origin),
        }
    }

    /// The content digest a [`ContentSource`] must have (without materializing it).
    pub fn source_digest(&mut self, source: &ContentSource) -> Result<BlobId, VfsError> {
        match source {
            ContentSource::Bytes(bytes) => Ok(BlobId::of(bytes)),
            ContentSource::Base(origin) => self.base.digest(origin),
        }
    }
}

#[cfg(test)]
mod tests;
