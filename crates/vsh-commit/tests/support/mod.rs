//! Shared fixtures for the committer's integration tests: temporary
//! workspaces, runs made with a real `VirtualFs`, full-tree snapshots for
//! comparison, and a file-backed ledger whose state survives a killed process.

#![allow(dead_code, unreachable_pub, reason = "shared test support: each test binary uses part of it")]

pub mod child;
pub mod fixture;
pub mod ledger;
pub mod random;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use vsh_commit::{CommitRequest, Committer};
use vsh_host::CapDir;
use vsh_store::{BlobStore, DataDir};
use vsh_types::CanonicalDiff;
use vsh_types::{NodeKind, TransactionId, VPath};
use vsh_vfs::{ReadSet, SnapshotLimits, VfsError, VirtualFs};

pub type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Entries known to be sorted, as a canonical diff.
pub fn canonical(entries: Vec<vsh_types::DiffEntry>) -> CanonicalDiff {
    CanonicalDiff::new(entries).expect("sorted entries")
}

pub fn p(path: &str) -> VPath {
    VPath::parse(path).unwrap()
}

pub fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let full = root.join(rel);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(full, bytes).unwrap();
}

pub fn chmod(root: &Path, rel: &str, mode: u32) {
    std::fs::set_permissions(root.join(rel), std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Someone deletes the file `rel` and saves it again with the same bytes
/// and mode: a new file. Made, where the filesystem allows, with the old
/// file's inode number (ext4 gives the lowest free number in the group to the
/// next new file, so new files are made and held until one gets it), so that
/// only the inode generation tells the two apart. Returns whether it has.
pub fn replace_with_same_bytes(root: &Path, rel: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    let path = root.join(rel);
    let old = std::fs::symlink_metadata(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let holder = |index: usize| root.join(format!("{rel}.holder{index}"));
    let mut reused = false;
    let mut held = 0;
    for index in 0..512 {
        std::fs::write(holder(index), &bytes).unwrap();
        held = index + 1;
        if std::fs::symlink_metadata(holder(index)).unwrap().ino() == old.ino() {
            std::fs::rename(holder(index), &path).unwrap();
            held = index;
            reused = true;
            break;
        }
    }
    if !reused {
        std::fs::write(&path, &bytes).unwrap();
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(old.mode() & 0o7777)).unwrap();
    for index in 0..held {
        std::fs::remove_file(holder(index)).unwrap();
    }
    reused
}

pub fn mode_of(root: &Path, rel: &str) -> u32 {
    std::fs::symlink_metadata(root.join(rel)).unwrap().permissions().mode() & 0o7777
}

/// A workspace directory and a committer on it; the blob store lives wherever
/// the caller opened it (shared between fixtures to save `fsync`s).
pub struct Workspace {
    pub root: PathBuf,
    pub dir: Arc<CapDir>,
    pub committer: Committer,
}

impl Workspace {
    /// Open `root` (which must exist) with runtime directory `.vsh`.
    pub fn open(root: &Path) -> Result<Workspace> {
        let dir = Arc::new(CapDir::open(root)?);
        let committer = Committer::new(Arc::clone(&dir), p(".vsh"))?;
        Ok(Workspace { root: root.to_owned(), dir, committer })
    }

    /// Run `ops` against a fresh virtual image, store the new content in
    /// `blobs`, and return the diff and read set like a real run would. The
    /// transaction id digests the diff, so equal runs get equal ids.
    pub fn run(
        &self,
        blobs: &BlobStore,
        ops: impl FnOnce(&mut VirtualFs) -> std::result::Result<(), VfsError>,
    ) -> Result<Run> {
        let mut vfs = VirtualFs::new(Arc::clone(&self.dir), vec![p(".vsh")], SnapshotLimits::default());
        ops(&mut vfs)?;
        let diff = vfs.canonical_diff()?;
        for entry in diff.entries() {
            let Some(after) = entry.after else { continue };
            if after.kind == NodeKind::Directory {
                continue;
            }
            let source = vfs.content_source(&entry.path)?.expect("a file or symlink has a content source");
            let bytes = vfs.materialize(&source)?;
            blobs.put_expected(&bytes, after.content.expect("content digest"))?;
        }
        let transaction = TransactionId::digest(diff.digest().as_bytes());
        Ok(Run { diff, reads: vfs.read_set().clone(), transaction })
    }

    /// Every node of the workspace except the runtime directory.
    pub fn tree(&self) -> Tree {
        tree(&self.root)
    }

    /// Whether no transaction directory is left.
    pub fn no_transaction_dirs(&self) -> bool {
        std::fs::read_dir(self.root.join(".vsh/txn")).map_or(true, |mut entries| entries.next().is_none())
    }

    /// Whether no discarded transaction directory is left in `.vsh/trash`.
    pub fn no_garbage(&self) -> bool {
        std::fs::read_dir(self.root.join(".vsh/trash")).map_or(true, |mut entries| entries.next().is_none())
    }
}

pub struct Run {
    pub diff: CanonicalDiff,
    pub reads: ReadSet,
    pub transaction: TransactionId,
}

impl Run {
    pub fn request<'a>(&'a self, blobs: &'a BlobStore) -> CommitRequest<'a> {
        CommitRequest::new(self.transaction, &self.diff, &self.reads, blobs)
    }
}

/// A blob store in its own temporary data directory.
pub fn external_blobs(dir: &Path) -> Result<BlobStore> {
    Ok(BlobStore::open(&DataDir::open_external(dir)?)?)
}

/// One node of a workspace tree: bytes, modes, kinds and symlink targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File { bytes: Vec<u8>, mode: u32 },
    Dir { mode: u32 },
    Link { target: Vec<u8> },
}

pub type Tree = BTreeMap<String, Node>;

pub fn file(bytes: &[u8], mode: u32) -> Node {
    Node::File { bytes: bytes.to_vec(), mode }
}

/// Every node below `root`, except `.vsh`.
pub fn tree(root: &Path) -> Tree {
    let mut out = BTreeMap::new();
    walk(root, "", &mut out);
    out
}

fn walk(root: &Path, rel: &str, out: &mut Tree) {
    let full = if rel.is_empty() { root.to_owned() } else { root.join(rel) };
    let mut names: Vec<String> =
        std::fs::read_dir(&full).unwrap().map(|entry| entry.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    for name in names {
        let child = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
        if child == ".vsh" {
            continue;
        }
        let path = root.join(&child);
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path).unwrap().into_os_string().into_encoded_bytes();
            out.insert(child, Node::Link { target });
        } else if meta.is_dir() {
            out.insert(child.clone(), Node::Dir { mode });
            walk(root, &child, out);
        } else {
            out.insert(child, Node::File { bytes: file_bytes(&path, &meta), mode });
        }
    }
}

/// The node at `path` (not followed if a symlink), if any.
pub fn node_at(path: &Path) -> Option<Node> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let mode = meta.permissions().mode() & 0o7777;
    Some(if meta.file_type().is_symlink() {
        Node::Link { target: std::fs::read_link(path).ok()?.into_os_string().into_encoded_bytes() }
    } else if meta.is_dir() {
        Node::Dir { mode }
    } else {
        Node::File { bytes: file_bytes(path, &meta), mode }
    })
}

/// A file's bytes; for a file this user may not read (a `0o000` file when the
/// tests run as someone other than root), a placeholder naming its size, so
/// trees still compare.
fn file_bytes(path: &Path, meta: &std::fs::Metadata) -> Vec<u8> {
    use std::os::unix::fs::MetadataExt as _;
    match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::PermissionDenied => {
            format!("<unreadable: {} bytes>", meta.size()).into_bytes()
        }
        Err(error) => panic!("cannot read {}: {error}", path.display()),
    }
}

/// In a child made by this function (or when not root): `true`, run the
/// test's body. As root: run `test` again as uid and gid 65534 in a child,
/// where a `0o000` file is really unreadable, require it to pass, and return
/// `true` so the body also runs as root.
pub fn also_as_nobody(test: &str) -> bool {
    use std::os::unix::process::CommandExt as _;
    const CHILD: &str = "VSH_COMMIT_TEST_AS_NOBODY";
    if std::env::var_os(CHILD).is_some() || !rustix::process::geteuid().is_root() {
        return true;
    }
    let home = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(home.path(), Some(65_534), Some(65_534)).unwrap();
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--test-threads", "1"])
        .env(CHILD, "1")
        .env("TMPDIR", home.path())
        .current_dir(home.path())
        .gid(65_534)
        .uid(65_534)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{test} as nobody:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    true
}

/// The paths where two trees differ, for assertion messages.
pub fn tree_difference(left: &Tree, right: &Tree) -> Vec<String> {
    let mut paths: Vec<String> = left
        .iter()
        .filter(|(path, node)| right.get(*path) != Some(node))
        .map(|(path, _)| path.clone())
        .chain(right.keys().filter(|path| !left.contains_key(*path)).cloned())
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// `tree` without `path`, its descendants and its ancestors.
pub fn without(tree: &Tree, path: &str) -> Tree {
    tree.iter()
        .filter(|(other, _)| {
            let other = other.as_str();
            other != path && !other.starts_with(&format!("{path}/")) && !path.starts_with(&format!("{other}/"))
        })
        .map(|(other, node)| (other.clone(), node.clone()))
        .collect()
}
