//! `VirtualFs` against an independent oracle: a plain in-memory filesystem
//! (a map from paths to nodes, written here from POSIX semantics, sharing no
//! code with vsh-vfs). Random operations run on both; every result (bytes,
//! listings, metadata, or the kind of error a guest would see) must agree, and
//! the canonical diff, committed by vsh-commit to the real base directory,
//! must leave on disk exactly the tree the model holds.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;

use proptest::prelude::*;
use vsh_store::{BlobStore, DataDir};
use vsh_types::NodeKind;
use vsh_vfs::{VfsError, VirtualFs};

mod support;

use support::{Node, Tree, Workspace, p, tree, tree_difference};

/// The names operations pick from: nested so that parents, replacements and
/// moves into subtrees all happen.
const NAMES: [&str; 9] = ["a", "b", "a/x", "a/y", "b/x", "a/x/z", "c", "A", "b/x/w"];

#[derive(Debug, Clone)]
enum Op {
    Write(usize, u8),
    Append(usize, u8),
    Mkdir(usize, bool),
    Symlink(usize, usize),
    Unlink(usize),
    Rmdir(usize),
    RemoveTree(usize),
    Rename(usize, usize),
    SetMode(usize, u8),
    Copy(usize, usize),
    Read(usize),
    ReadLink(usize),
    List(usize),
    Stat(usize),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let i = || 0..NAMES.len();
    prop_oneof![
        3 => (i(), any::<u8>()).prop_map(|(n, b)| Op::Write(n, b % 5)),
        1 => (i(), any::<u8>()).prop_map(|(n, b)| Op::Append(n, b % 5)),
        3 => (i(), any::<bool>()).prop_map(|(n, private)| Op::Mkdir(n, private)),
        1 => (i(), i()).prop_map(|(n, t)| Op::Symlink(n, t)),
        2 => i().prop_map(Op::Unlink),
        1 => i().prop_map(Op::Rmdir),
        1 => i().prop_map(Op::RemoveTree),
        2 => (i(), i()).prop_map(|(a, b)| Op::Rename(a, b)),
        2 => (i(), any::<u8>()).prop_map(|(n, m)| Op::SetMode(n, m)),
        1 => (i(), i()).prop_map(|(a, b)| Op::Copy(a, b)),
        1 => i().prop_map(Op::Read),
        1 => i().prop_map(Op::ReadLink),
        1 => i().prop_map(Op::List),
        1 => i().prop_map(Op::Stat),
    ]
}

/// The modes `SetMode` picks from (setuid/setgid/sticky included).
const MODES: [u32; 6] = [0o600, 0o640, 0o700, 0o755, 0o4755, 0o1777];

/// What a guest sees from one operation: the class of error (the guest's
/// exception type follows from it) or the value read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Done,
    Bytes(Vec<u8>),
    Names(Vec<String>),
    Stat(NodeKind, u64, u32),
    NotFound,
    AlreadyExists,
    NotADirectory,
    IsADirectory,
    NotEmpty,
    SymlinkInPath,
    Invalid,
}

fn outcome_of(error: &VfsError) -> Outcome {
    match error {
        VfsError::NotFound { .. } => Outcome::NotFound,
        VfsError::AlreadyExists { .. } => Outcome::AlreadyExists,
        VfsError::NotADirectory { .. } => Outcome::NotADirectory,
        VfsError::IsADirectory { .. } => Outcome::IsADirectory,
        VfsError::DirectoryNotEmpty { .. } => Outcome::NotEmpty,
        VfsError::SymlinkInPath { .. } => Outcome::SymlinkInPath,
        VfsError::InvalidOperation { .. } => Outcome::Invalid,
        other => panic!("an error no test operation should cause: {other:?}"),
    }
}

fn on_vfs(vfs: &mut VirtualFs, op: &Op) -> Outcome {
    let result = match op {
        Op::Write(n, b) => vfs.write(&p(NAMES[*n]), Arc::from(vec![b'0' + b; usize::from(*b)])).map(|()| Outcome::Done),
        Op::Append(n, b) => vfs.append(&p(NAMES[*n]), &[b'a' + b]).map(|_| Outcome::Done),
        Op::Mkdir(n, private) => vfs.mkdir(&p(NAMES[*n]), if *private { 0o700 } else { 0o755 }).map(|()| Outcome::Done),
        Op::Symlink(n, t) => vfs.symlink(&p(NAMES[*n]), NAMES[*t].as_bytes()).map(|()| Outcome::Done),
        Op::Unlink(n) => vfs.unlink(&p(NAMES[*n])).map(|()| Outcome::Done),
        Op::Rmdir(n) => vfs.rmdir(&p(NAMES[*n])).map(|()| Outcome::Done),
        Op::RemoveTree(n) => vfs.remove_tree(&p(NAMES[*n])).map(|()| Outcome::Done),
        Op::Rename(a, b) => vfs.rename(&p(NAMES[*a]), &p(NAMES[*b])).map(|()| Outcome::Done),
        Op::SetMode(n, m) => vfs.set_mode(&p(NAMES[*n]), MODES[usize::from(*m) % MODES.len()]).map(|()| Outcome::Done),
        Op::Copy(a, b) => vfs.copy_file(&p(NAMES[*a]), &p(NAMES[*b])).map(|()| Outcome::Done),
        Op::Read(n) => vfs.read(&p(NAMES[*n])).map(|bytes| Outcome::Bytes(bytes.to_vec())),
        Op::ReadLink(n) => vfs.read_link(&p(NAMES[*n])).map(|bytes| Outcome::Bytes(bytes.to_vec())),
        Op::List(n) => vfs.read_dir(&p(NAMES[*n])).map(Outcome::Names),
        Op::Stat(n) => vfs.metadata(&p(NAMES[*n])).map(|meta| Outcome::Stat(meta.kind, meta.size, meta.mode)),
    };
    result.unwrap_or_else(|error| outcome_of(&error))
}

// ----- the model -----

/// A filesystem as a map from relative paths to nodes; the root is an
/// implicit directory.
struct Model(Tree);

type Checked<T> = Result<T, Outcome>;

fn parent_of(path: &str) -> Option<&str> {
    path.rfind('/').map(|slash| &path[..slash])
}

/// The proper ancestors of `path`, outermost first (the root excluded).
fn ancestors(path: &str) -> Vec<&str> {
    path.match_indices('/').map(|(slash, _)| &path[..slash]).collect()
}

fn is_within(path: &str, dir: &str) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

impl Model {
    /// The node at `path`: ancestors must be directories (a missing one means
    /// the path does not exist; a file or symlink on the way is an error).
    fn lookup(&self, path: &str) -> Checked<Option<&Node>> {
        for ancestor in ancestors(path) {
            match self.0.get(ancestor) {
                None => return Ok(None),
                Some(Node::Dir { .. }) => {}
                Some(Node::File { .. }) => return Err(Outcome::NotADirectory),
                Some(Node::Link { .. }) => return Err(Outcome::SymlinkInPath),
            }
        }
        Ok(self.0.get(path))
    }

    fn require(&self, path: &str) -> Checked<&Node> {
        self.lookup(path)?.ok_or(Outcome::NotFound)
    }

    fn require_parent_dir(&self, path: &str) -> Checked<()> {
        let Some(parent) = parent_of(path) else { return Ok(()) };
        match self.require(parent)? {
            Node::Dir { .. } => Ok(()),
            Node::File { .. } => Err(Outcome::NotADirectory),
            Node::Link { .. } => Err(Outcome::SymlinkInPath),
        }
    }

    fn children(&self, dir: &str) -> Vec<String> {
        self.0.keys().filter(|path| parent_of(path) == Some(dir)).map(|path| path[dir.len() + 1..].to_owned()).collect()
    }

    /// Remove `path` and everything below it.
    fn remove_subtree(&mut self, path: &str) {
        self.0.retain(|other, _| other != path && !is_within(other, path));
    }

    fn write(&mut self, path: &str, bytes: Vec<u8>) -> Checked<()> {
        self.require_parent_dir(path)?;
        let mode = match self.lookup(path)? {
            None => 0o644,
            Some(Node::File { mode, .. }) => *mode,
            Some(Node::Dir { .. }) => return Err(Outcome::IsADirectory),
            Some(Node::Link { .. }) => return Err(Outcome::SymlinkInPath),
        };
        self.0.insert(path.to_owned(), Node::File { bytes, mode });
        Ok(())
    }

    fn read(&self, path: &str) -> Checked<Vec<u8>> {
        match self.require(path)? {
            Node::File { bytes, .. } => Ok(bytes.clone()),
            Node::Dir { .. } => Err(Outcome::IsADirectory),
            Node::Link { .. } => Err(Outcome::SymlinkInPath),
        }
    }

    fn apply(&mut self, op: &Op) -> Outcome {
        self.checked(op).unwrap_or_else(|error| error)
    }

    fn checked(&mut self, op: &Op) -> Checked<Outcome> {
        match op {
            Op::Write(n, b) => self.write(NAMES[*n], vec![b'0' + b; usize::from(*b)]),
            Op::Append(n, b) => {
                let mut bytes = match self.read(NAMES[*n]) {
                    Ok(bytes) => bytes,
                    Err(Outcome::NotFound) => Vec::new(),
                    Err(other) => return Err(other),
                };
                bytes.push(b'a' + b);
                self.write(NAMES[*n], bytes)
            }
            Op::Mkdir(n, private) => {
                let path = NAMES[*n];
                self.require_parent_dir(path)?;
                if self.lookup(path)?.is_some() {
                    return Err(Outcome::AlreadyExists);
                }
                self.0.insert(path.to_owned(), Node::Dir { mode: if *private { 0o700 } else { 0o755 } });
                Ok(())
            }
            Op::Symlink(n, t) => {
                let path = NAMES[*n];
                self.require_parent_dir(path)?;
                if self.lookup(path)?.is_some() {
                    return Err(Outcome::AlreadyExists);
                }
                self.0.insert(path.to_owned(), Node::Link { target: NAMES[*t].as_bytes().to_vec() });
                Ok(())
            }
            Op::Unlink(n) => {
                let path = NAMES[*n];
                if matches!(self.require(path)?, Node::Dir { .. }) {
                    return Err(Outcome::IsADirectory);
                }
                self.0.remove(path);
                Ok(())
            }
            Op::Rmdir(n) => {
                let path = NAMES[*n];
                if !matches!(self.require(path)?, Node::Dir { .. }) {
                    return Err(Outcome::NotADirectory);
                }
                if !self.children(path).is_empty() {
                    return Err(Outcome::NotEmpty);
                }
                self.0.remove(path);
                Ok(())
            }
            Op::RemoveTree(n) => {
                self.require(NAMES[*n])?;
                self.remove_subtree(NAMES[*n]);
                Ok(())
            }
            Op::Rename(a, b) => self.rename(NAMES[*a], NAMES[*b]),
            Op::SetMode(n, m) => {
                let path = NAMES[*n];
                self.require(path)?;
                match self.0.get_mut(path) {
                    Some(Node::File { mode, .. } | Node::Dir { mode }) => *mode = MODES[usize::from(*m) % MODES.len()],
                    Some(Node::Link { .. }) => return Err(Outcome::Invalid),
                    None => unreachable!("required above"),
                }
                Ok(())
            }
            Op::Copy(a, b) => {
                let (from, to) = (NAMES[*a], NAMES[*b]);
                let (bytes, source_mode) = match self.require(from)? {
                    Node::File { bytes, mode } => (bytes.clone(), *mode),
                    Node::Dir { .. } => return Err(Outcome::IsADirectory),
                    Node::Link { .. } => return Err(Outcome::SymlinkInPath),
                };
                self.require_parent_dir(to)?;
                let mode = match self.lookup(to)? {
                    None => source_mode,
                    Some(Node::File { mode, .. }) => *mode,
                    Some(Node::Dir { .. }) => return Err(Outcome::IsADirectory),
                    Some(Node::Link { .. }) => return Err(Outcome::SymlinkInPath),
                };
                self.0.insert(to.to_owned(), Node::File { bytes, mode });
                Ok(())
            }
            Op::Read(n) => return self.read(NAMES[*n]).map(Outcome::Bytes),
            Op::ReadLink(n) => match self.require(NAMES[*n])? {
                Node::Link { target } => return Ok(Outcome::Bytes(target.clone())),
                _ => return Err(Outcome::Invalid),
            },
            Op::List(n) => match self.require(NAMES[*n])? {
                Node::Dir { .. } => return Ok(Outcome::Names(self.children(NAMES[*n]))),
                Node::File { .. } => return Err(Outcome::NotADirectory),
                Node::Link { .. } => return Err(Outcome::SymlinkInPath),
            },
            Op::Stat(n) => {
                return Ok(match self.require(NAMES[*n])? {
                    Node::File { bytes, mode } => Outcome::Stat(NodeKind::File, bytes.len() as u64, *mode),
                    Node::Dir { mode } => Outcome::Stat(NodeKind::Directory, 0, *mode),
                    Node::Link { target } => Outcome::Stat(NodeKind::Symlink, target.len() as u64, 0o777),
                });
            }
        }
        .map(|()| Outcome::Done)
    }

    /// POSIX rename: a file replaces a file, a directory replaces a missing
    /// path or an empty directory, never into itself; onto itself does nothing.
    fn rename(&mut self, from: &str, to: &str) -> Checked<()> {
        let source_is_dir = matches!(self.require(from)?, Node::Dir { .. });
        self.require_parent_dir(to)?;
        if from == to {
            return Ok(());
        }
        if is_within(to, from) {
            return Err(Outcome::Invalid);
        }
        match (source_is_dir, self.lookup(to)?) {
            (true, Some(Node::Dir { .. })) if !self.children(to).is_empty() => return Err(Outcome::NotEmpty),
            (true, Some(Node::File { .. } | Node::Link { .. })) => return Err(Outcome::NotADirectory),
            (false, Some(Node::Dir { .. })) => return Err(Outcome::IsADirectory),
            _ => {}
        }
        let moved: Vec<(String, Node)> = self
            .0
            .iter()
            .filter(|(path, _)| *path == from || is_within(path, from))
            .map(|(path, node)| (format!("{to}{}", &path[from.len()..]), node.clone()))
            .collect();
        self.remove_subtree(from);
        self.remove_subtree(to);
        self.0.extend(moved);
        Ok(())
    }
}

// ----- the base -----

/// How a base node is made: a file, a private directory, a directory, or a
/// symlink.
fn base_strategy() -> impl Strategy<Value = Vec<(usize, u8)>> {
    proptest::collection::vec((0..NAMES.len(), 0u8..4), 0..7)
}

fn build_base(root: &std::path::Path, spec: &[(usize, u8)]) {
    use std::os::unix::fs::PermissionsExt;
    for (index, kind) in spec {
        let path = root.join(NAMES[*index]);
        if std::fs::symlink_metadata(&path).is_ok()
            || path.ancestors().skip(1).any(|ancestor| std::fs::symlink_metadata(ancestor).is_ok_and(|m| !m.is_dir()))
        {
            continue;
        }
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        match kind {
            0 => std::fs::write(&path, NAMES[*index].as_bytes()).unwrap(),
            1 | 2 => {
                std::fs::create_dir(&path).unwrap();
                let mode = if *kind == 1 { 0o700 } else { 0o755 };
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            }
            _ => std::os::unix::fs::symlink("b", &path).unwrap(),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    #[test]
    fn the_virtual_image_and_its_committed_diff_match_an_independent_model(
        base in base_strategy(),
        ops in proptest::collection::vec(op_strategy(), 1..28),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        build_base(&root, &base);
        let mut model = Model(tree(&root));
        let blobs = BlobStore::open(&DataDir::open_external(&dir.path().join("data")).unwrap()).unwrap();
        let ws = Workspace::open(&root).unwrap();

        let mut seen = Vec::new();
        let run = ws
            .run(&blobs, |vfs| {
                for op in &ops {
                    seen.push((on_vfs(vfs, op), model.apply(op)));
                }
                Ok(())
            })
            .unwrap();
        for (index, (vfs, expected)) in seen.iter().enumerate() {
            prop_assert_eq!(vfs, expected, "operation {} ({:?}) of {:?}", index, ops[index], ops);
        }
        // vsh never writes a setuid or setgid file: such a diff is refused
        // whole, before anything is written (the base holds none).
        let setid = model.0.values().any(|node| matches!(node, Node::File { mode, .. } if mode & 0o6000 != 0));
        let before = tree(&root);
        let committed = ws.committer.commit(&run.request(&blobs));
        if setid {
            prop_assert!(
                matches!(committed, Err(vsh_commit::CommitError::InvalidDiff { .. })),
                "{:?}", committed
            );
            prop_assert!(tree(&root) == before, "a refused diff wrote something");
            return Ok(());
        }
        committed.unwrap();
        let on_disk = tree(&root);
        prop_assert!(on_disk == model.0, "differs at {:?}\non disk {:?}\nmodel   {:?}", tree_difference(&on_disk, &model.0), on_disk, model.0);
    }
}
