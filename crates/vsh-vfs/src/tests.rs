//! Unit and property tests of the virtual image against real temporary directories.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use vsh_host::CapDir;
use vsh_types::{DiffKind, NodeKind, NodeState, VPath};

use crate::{SnapshotLimits, VfsError, VirtualFs};

fn p(path: &str) -> VPath {
    VPath::parse(path).unwrap()
}

fn vfs_over(root: &Path) -> VirtualFs {
    VirtualFs::new(Arc::new(CapDir::open(root).unwrap()), vec![p(".vsh")], SnapshotLimits::default())
}

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let full = root.join(rel);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(full, bytes).unwrap();
}

#[test]
fn overlay_reads_writes_and_lists_without_touching_the_host() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", b"alpha");
    write(dir.path(), "d/b.txt", b"beta");
    let mut vfs = vfs_over(dir.path());
    assert_eq!(&*vfs.read(&p("a.txt")).unwrap(), b"alpha");
    vfs.write(&p("a.txt"), Arc::from(&b"changed"[..])).unwrap();
    vfs.write(&p("d/c.txt"), Arc::from(&b"gamma"[..])).unwrap();
    vfs.unlink(&p("d/b.txt")).unwrap();
    assert_eq!(&*vfs.read(&p("a.txt")).unwrap(), b"changed");
    assert_eq!(vfs.read_dir(&p("d")).unwrap(), vec!["c.txt".to_owned()]);
    assert!(!vfs.exists(&p("d/b.txt")).unwrap());
    // The host is untouched.
    assert_eq!(std::fs::read(dir.path().join("a.txt")).unwrap(), b"alpha");
    assert!(dir.path().join("d/b.txt").exists());
    let diff = vfs.canonical_diff().unwrap();
    let kinds: Vec<_> = diff.entries().iter().map(|e| (e.path.as_str().to_owned(), e.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            ("a.txt".to_owned(), DiffKind::Modify),
            ("d/b.txt".to_owned(), DiffKind::Delete),
            ("d/c.txt".to_owned(), DiffKind::Create)
        ]
    );
}

#[test]
fn a_checkpoint_restores_the_image_exactly_and_keeps_what_was_observed() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", b"alpha");
    write(dir.path(), "d/b.txt", b"beta");
    let mut vfs = vfs_over(dir.path());
    vfs.write(&p("a.txt"), Arc::from(&b"first"[..])).unwrap();
    let diff_at = |vfs: &mut VirtualFs| vfs.canonical_diff().unwrap();
    let before = diff_at(&mut vfs);
    let checkpoint = vfs.checkpoint();
    // After the checkpoint: a change, a new file, a removal, a new directory, a rename.
    vfs.write(&p("a.txt"), Arc::from(&b"second"[..])).unwrap();
    vfs.write(&p("new.txt"), Arc::from(&b"new"[..])).unwrap();
    vfs.unlink(&p("d/b.txt")).unwrap();
    vfs.mkdir(&p("e"), 0o755).unwrap();
    vfs.rename(&p("new.txt"), &p("e/moved.txt")).unwrap();
    assert_ne!(diff_at(&mut vfs), before);
    let reads = vfs.read_set().clone();
    vfs.restore(&checkpoint);
    assert_eq!(diff_at(&mut vfs), before);
    assert_eq!(&*vfs.read(&p("a.txt")).unwrap(), b"first");
    assert!(!vfs.exists(&p("new.txt")).unwrap() && !vfs.exists(&p("e")).unwrap());
    assert_eq!(&*vfs.read(&p("d/b.txt")).unwrap(), b"beta");
    assert_eq!(vfs.effects().len(), 1, "the ledger is the checkpoint's: {:?}", vfs.effects());
    assert_eq!(vfs.renames(), 0);
    // What was observed since the checkpoint is still a dependency.
    assert!(!reads.is_empty());
    for (path, dependency) in &reads.entries {
        assert_eq!(vfs.read_set().entries.get(path), Some(dependency), "{path} forgotten");
    }
    // Restoring a checkpoint twice, and a later one after an earlier one, is exact too.
    let later = vfs.checkpoint();
    vfs.write(&p("x"), Arc::from(&b"x"[..])).unwrap();
    vfs.restore(&checkpoint);
    vfs.restore(&later);
    assert_eq!(diff_at(&mut vfs), before);
}

#[test]
fn a_listing_tells_each_entrys_kind_without_a_stat_and_a_later_disagreement_is_base_changed() {
    let dir = tempfile::tempdir().unwrap();
    for index in 0..50 {
        write(dir.path(), &format!("d/f{index}.txt"), b"x");
    }
    std::fs::create_dir(dir.path().join("d/sub")).unwrap();
    let cap = Arc::new(CapDir::open(dir.path()).unwrap());
    let mut vfs = VirtualFs::new(Arc::clone(&cap), vec![p(".vsh")], SnapshotLimits::default());
    let names = vfs.read_dir(&p("d")).unwrap();
    assert_eq!(names.len(), 51);
    let before = cap.counters().snapshot().stats;
    for name in &names {
        let child = p("d").join(name).unwrap();
        let expected = if name == "sub" { NodeKind::Directory } else { NodeKind::File };
        assert_eq!(vfs.kind(&child).unwrap(), Some(expected));
        // A nested store is looked for without a stat either.
        assert_eq!(vfs.vsh_data_within(&child).unwrap(), None);
    }
    // Only the subdirectory is probed for a nested store (a stat of its
    // `txlog`): the 50 files cost no system call.
    assert!(cap.counters().snapshot().stats - before <= 2, "the listing told every kind");
    // The kind is still a dependency of the run.
    assert!(vfs.read_set().entries.contains_key(&p("d/f7.txt")));
    // The host changes a listed file into a directory: the run's view stays
    // the listing's, and the first stat that disagrees is BaseChanged.
    std::fs::remove_file(dir.path().join("d/f7.txt")).unwrap();
    std::fs::create_dir(dir.path().join("d/f7.txt")).unwrap();
    assert_eq!(vfs.kind(&p("d/f7.txt")).unwrap(), Some(NodeKind::File));
    assert!(matches!(vfs.metadata(&p("d/f7.txt")), Err(VfsError::BaseChanged { .. })));
    // An entry whose stat agrees reads on as before.
    assert_eq!(vfs.metadata(&p("d/f8.txt")).unwrap().size, 1);
}

#[test]
fn rewriting_identical_bytes_is_not_a_change() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a", b"same");
    let mut vfs = vfs_over(dir.path());
    vfs.write(&p("a"), Arc::from(&b"same"[..])).unwrap();
    vfs.unlink(&p("a")).unwrap();
    vfs.write(&p("a"), Arc::from(&b"same"[..])).unwrap();
    assert!(vfs.canonical_diff().unwrap().is_empty());
}

#[test]
fn observations_are_frozen_and_changes_under_the_run_fail_closed() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "read", b"one");
    write(dir.path(), "stat-only", b"one");
    let mut vfs = vfs_over(dir.path());
    assert_eq!(&*vfs.read(&p("read")).unwrap(), b"one");
    assert!(vfs.exists(&p("stat-only")).unwrap());
    write(dir.path(), "read", b"two!");
    write(dir.path(), "stat-only", b"two!");
    write(dir.path(), "late", b"x");
    // Repeatable read of content already observed.
    assert_eq!(&*vfs.read(&p("read")).unwrap(), b"one");
    // Content observed after its metadata changed is refused, never mixed.
    assert!(matches!(vfs.read(&p("stat-only")), Err(VfsError::BaseChanged { .. })));
    assert!(vfs.read(&p("stat-only")).unwrap_err().is_terminal());
}

#[test]
fn a_listing_view_answers_as_kind_does_and_sees_every_change_made_since() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "d/a", b"a");
    write(dir.path(), "d/b/inner", b"i");
    write(dir.path(), "d/c", b"c");
    let mut vfs = vfs_over(dir.path());
    vfs.unlink(&p("d/c")).unwrap();
    vfs.write(&p("d/n"), Arc::from(&b"n"[..])).unwrap();
    vfs.mkdir(&p("d/m"), 0o755).unwrap();
    let view = vfs.listing_view(&p("d")).unwrap();
    let mut names = vfs.read_dir(&p("d")).unwrap();
    names.extend(["c".to_owned(), "missing".to_owned()]);
    for name in &names {
        let child = p(&format!("d/{name}"));
        assert_eq!(vfs.listed_kind(&view, &child).unwrap(), vfs.kind(&child).unwrap(), "{child}");
    }
    // Not an entry of the directory: resolved whole.
    assert_eq!(vfs.listed_kind(&view, &p("d/b/inner")).unwrap(), Some(NodeKind::File));
    assert!(vfs.listed_kind(&view, &p("d/a/x")).is_err(), "below a file, as kind says");
    // The image changes after the view: every answer is the image's now.
    vfs.unlink(&p("d/a")).unwrap();
    assert_eq!(vfs.listed_kind(&view, &p("d/a")).unwrap(), None);
    vfs.write(&p("d/c"), Arc::from(&b"again"[..])).unwrap();
    assert_eq!(vfs.listed_kind(&view, &p("d/c")).unwrap(), Some(NodeKind::File));
    // The directory replaced by one of the run's own: the base no longer shows through.
    let before = vfs.listing_view(&p("d")).unwrap();
    assert_eq!(vfs.listed_kind(&before, &p("d/b")).unwrap(), Some(NodeKind::Directory));
    let checkpoint = vfs.checkpoint();
    vfs.remove_tree(&p("d")).unwrap();
    vfs.mkdir(&p("d"), 0o755).unwrap();
    assert_eq!(vfs.listed_kind(&before, &p("d/b")).unwrap(), None);
    let replaced = vfs.listing_view(&p("d")).unwrap();
    vfs.restore(&checkpoint);
    assert_eq!(vfs.listed_kind(&replaced, &p("d/b")).unwrap(), Some(NodeKind::Directory), "a restore is a change too");
    assert!(matches!(vfs.listing_view(&p("d/missing")), Err(VfsError::NotFound { .. })));
    assert!(matches!(vfs.listing_view(&p("d/n")), Err(VfsError::NotADirectory { .. })));
}

#[test]
fn a_file_past_the_materialized_bounds_is_read_a_slice_at_a_time_as_one_frozen_content() {
    let dir = tempfile::tempdir().unwrap();
    let big: Vec<u8> = (0..100_000_u32).map(|index| (index % 253) as u8).collect();
    write(dir.path(), "big", &big);
    write(dir.path(), "twin", &big);
    let limits = SnapshotLimits {
        max_materialized_bytes: 1_000,
        max_materialized_file_bytes: 1_000,
        ..SnapshotLimits::default()
    };
    // Changed moments before the image was opened, a file's stat does not
    // stand for its bytes from one piece to the next (a change within the
    // same clock tick keeps it): it is read whole, and this one is too large.
    let mut fresh = VirtualFs::new(Arc::new(CapDir::open(dir.path()).unwrap()), vec![], limits);
    assert_eq!(fresh.read_range_cost(&p("big")).unwrap(), 100_000, "the whole file is read first");
    assert!(matches!(fresh.read_range(&p("big"), 0, 10), Err(VfsError::SnapshotLimit { .. })));
    // Settled: changed more than 100 ms before the image was opened.
    std::thread::sleep(std::time::Duration::from_millis(150));
    let mut vfs = VirtualFs::new(Arc::new(CapDir::open(dir.path()).unwrap()), vec![], limits);
    assert!(matches!(vfs.read(&p("big")), Err(VfsError::SnapshotLimit { .. })), "too large to hold whole");
    let mut pieces = Vec::new();
    for offset in (0..110_000_u64).step_by(30_000) {
        pieces.extend(vfs.read_range(&p("big"), offset, 30_000).unwrap());
    }
    assert!(pieces == big, "the slices are the file");
    assert!(vfs.read_range(&p("big"), 100_000, 10).unwrap().is_empty());
    assert_eq!(vfs.read_range_cost(&p("big")).unwrap(), 0, "hashed once, not again");
    // Recorded as a whole read: the digest of the whole content.
    let read = vfs.read_set().entries.get(&p("big")).cloned().unwrap();
    assert_eq!(read.content, Some(vsh_types::BlobId::of(&big)));
    // A base file the run moved is read in pieces from where it came from.
    vfs.rename(&p("big"), &p("moved")).unwrap();
    assert_eq!(vfs.read_range(&p("moved"), 99_990, 100).unwrap(), &big[99_990..]);
    assert!(matches!(vfs.read_range(&p("big"), 0, 1), Err(VfsError::NotFound { .. })));
    // A file the run wrote is sliced from the run's bytes.
    vfs.write(&p("small"), Arc::from(&b"0123456789"[..])).unwrap();
    assert_eq!(vfs.read_range(&p("small"), 3, 4).unwrap(), b"3456");
    // A change on the host after the file was frozen fails the run: a
    // later slice is never from other content than the recorded digest.
    assert_eq!(vfs.read_range(&p("twin"), 0, 10).unwrap(), &big[..10]);
    let mut changed = big.clone();
    changed[50_000] ^= 1;
    write(dir.path(), "twin", &changed);
    let error = vfs.read_range(&p("twin"), 40_000, 20_000).unwrap_err();
    assert!(matches!(error, VfsError::BaseChanged { .. }), "{error:?}");
    assert!(error.is_terminal());
}
#[test]
fn symlinks_are_data_and_never_followed() {
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "secret", b"top secret");
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("link")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("dirlink")).unwrap();
    let mut vfs = vfs_over(dir.path());
    assert!(matches!(vfs.read(&p("link")), Err(VfsError::SymlinkInPath { .. })));
    assert_eq!(&*vfs.read_link(&p("link")).unwrap(), outside.path().join("secret").as_os_str().as_encoded_bytes());
    assert!(matches!(vfs.read(&p("dirlink/secret")), Err(VfsError::SymlinkInPath { .. })));
    assert!(!vfs.exists(&p("dirlink/secret")).unwrap());
    assert!(matches!(vfs.write(&p("dirlink/new"), Arc::from(&b"x"[..])), Err(VfsError::SymlinkInPath { .. })));
    assert!(matches!(vfs.write(&p("link"), Arc::from(&b"x"[..])), Err(VfsError::SymlinkInPath { .. })));
    assert_eq!(vfs.kind(&p("link")).unwrap(), Some(NodeKind::Symlink));
    // Renaming a link moves the link itself.
    vfs.rename(&p("link"), &p("moved")).unwrap();
    let diff = vfs.canonical_diff().unwrap();
    assert_eq!(diff.entries()[1].after.unwrap().kind, NodeKind::Symlink);
    assert_eq!(std::fs::read(outside.path().join("secret")).unwrap(), b"top secret");
}

#[test]
fn paths_below_files_are_not_directories() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", b"x");
    let mut vfs = vfs_over(dir.path());
    assert!(!vfs.exists(&p("a.txt/x")).unwrap());
    assert!(matches!(vfs.read(&p("a.txt/x")), Err(VfsError::NotADirectory { .. })));
    assert!(matches!(vfs.write(&p("a.txt/x"), Arc::from(&b"x"[..])), Err(VfsError::NotADirectory { .. })));
    assert!(vfs.canonical_diff().unwrap().is_empty());
}

#[test]
fn rename_semantics() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "tree/a", b"a");
    write(dir.path(), "tree/sub/b", b"b");
    write(dir.path(), "file", b"f");
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    write(dir.path(), "full/x", b"x");
    let mut vfs = vfs_over(dir.path());
    assert!(matches!(vfs.rename(&p("tree"), &p("tree/sub/inner")), Err(VfsError::InvalidOperation { .. })));
    assert!(matches!(vfs.rename(&p("tree"), &p("full")), Err(VfsError::DirectoryNotEmpty { .. })));
    assert!(matches!(vfs.rename(&p("tree"), &p("file")), Err(VfsError::NotADirectory { .. })));
    assert!(matches!(vfs.rename(&p("file"), &p("empty")), Err(VfsError::IsADirectory { .. })));
    vfs.rename(&p("tree"), &p("empty")).unwrap();
    assert_eq!(&*vfs.read(&p("empty/sub/b")).unwrap(), b"b");
    assert!(!vfs.exists(&p("tree")).unwrap());
    assert_eq!(vfs.renames(), 1);
    let diff = vfs.canonical_diff().unwrap();
    let paths: Vec<_> = diff.entries().iter().map(|e| format!("{} {}", e.kind.name(), e.path)).collect();
    assert_eq!(
        paths,
        vec![
            "create empty/a",
            "create empty/sub",
            "create empty/sub/b",
            "delete tree",
            "delete tree/a",
            "delete tree/sub",
            "delete tree/sub/b"
        ]
    );
}

#[test]
fn set_mode_is_a_metadata_change_and_excluded_paths_are_invisible() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "run.sh", b"#!/bin/sh\n");
    write(dir.path(), ".vsh/data", b"internal");
    std::fs::set_permissions(dir.path().join("run.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut vfs = vfs_over(dir.path());
    assert_eq!(vfs.read_dir(&VPath::root()).unwrap(), vec!["run.sh".to_owned()]);
    assert!(!vfs.exists(&p(".vsh/data")).unwrap());
    vfs.set_mode(&p("run.sh"), 0o755).unwrap();
    let diff = vfs.canonical_diff().unwrap();
    assert_eq!(diff.entries().len(), 1);
    assert_eq!(diff.entries()[0].kind, DiffKind::MetadataChange);
    assert_eq!(diff.entries()[0].after.unwrap().mode, 0o755);
}

#[test]
fn set_mode_on_a_node_written_in_the_run_reaches_the_diff() {
    let dir = tempfile::tempdir().unwrap();
    let mut vfs = vfs_over(dir.path());
    vfs.write(&p("new.sh"), Arc::from(&b"#!/bin/sh\n"[..])).unwrap();
    vfs.mkdir(&p("private"), 0o755).unwrap();
    vfs.set_mode(&p("new.sh"), 0o750).unwrap();
    vfs.set_mode(&p("private"), 0o700).unwrap();
    assert_eq!(vfs.metadata(&p("new.sh")).unwrap().mode, 0o750);
    let diff = vfs.canonical_diff().unwrap();
    let modes: Vec<(&str, DiffKind, u32)> =
        diff.entries().iter().map(|entry| (entry.path.as_str(), entry.kind, entry.after.unwrap().mode)).collect();
    assert_eq!(modes, vec![("new.sh", DiffKind::Create, 0o750), ("private", DiffKind::Create, 0o700)]);
}

#[test]
fn read_set_records_what_was_used() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "read.txt", b"r");
    write(dir.path(), "d/listed", b"l");
    let mut vfs = vfs_over(dir.path());
    vfs.read(&p("read.txt")).unwrap();
    // Asked for midway, then used more: the set asked for later has it all.
    assert_eq!(vfs.read_set().entries.keys().collect::<Vec<_>>(), [&p("read.txt")]);
    // A facet added later joins the facets recorded before.
    vfs.metadata(&p("read.txt")).unwrap();
    vfs.read_dir(&p("d")).unwrap();
    vfs.write(&p("new.txt"), Arc::from(&b"n"[..])).unwrap();
    let reads = vfs.read_set();
    assert!(reads.entries.keys().is_sorted());
    let read = &reads.entries[&p("read.txt")];
    assert_eq!(read.content, Some(vsh_types::BlobId::of(b"r")));
    assert_eq!(read.size_mode.map(|(size, _)| size), Some(1));
    let listed = &reads.entries[&p("d")];
    assert_eq!(listed.names, Some(crate::names_digest(["listed"])));
    assert_eq!(reads.entries[&p("new.txt")].kind, Some(None));
    // Creating a name depends on the parent being a directory, not on its listing.
    assert!(!reads.entries.contains_key(&VPath::root()) || reads.entries[&VPath::root()].names.is_none());
    assert!(!reads.entries.contains_key(&p("d/listed")));
}

#[test]
fn one_touched_file_costs_constant_host_operations() {
    let dir = tempfile::tempdir().unwrap();
    for index in 0..2_000 {
        write(dir.path(), &format!("d{}/f{index}", index % 20), b"x");
    }
    let host = Arc::new(CapDir::open(dir.path()).unwrap());
    let mut vfs = VirtualFs::new(Arc::clone(&host), vec![], SnapshotLimits::default());
    let before = host.counters().snapshot();
    vfs.read(&p("d7/f7")).unwrap();
    vfs.write(&p("d7/f7"), Arc::from(&b"y"[..])).unwrap();
    vfs.canonical_diff().unwrap();
    let after = host.counters().snapshot();
    assert_eq!(after.lists - before.lists, 0);
    assert!(after.stats - before.stats <= 3, "{before:?} -> {after:?}");
    assert!(after.reads - before.reads <= 2, "{before:?} -> {after:?}");
}

// ----- property test: random operations, then diff replay -----

const NAMES: [&str; 7] = ["a", "b", "a/x", "a/y", "b/x", "a/x/z", "c"];

#[derive(Debug, Clone)]
enum Op {
    Write(usize, u8),
    Append(usize, u8),
    Mkdir(usize),
    Unlink(usize),
    Rmdir(usize),
    RemoveTree(usize),
    Rename(usize, usize),
    SetMode(usize, bool),
    Copy(usize, usize),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let index = 0..NAMES.len();
    prop_oneof![
        (index.clone(), any::<u8>()).prop_map(|(i, b)| Op::Write(i, b % 4)),
        (index.clone(), any::<u8>()).prop_map(|(i, b)| Op::Append(i, b % 4)),
        index.clone().prop_map(Op::Mkdir),
        index.clone().prop_map(Op::Unlink),
        index.clone().prop_map(Op::Rmdir),
        index.clone().prop_map(Op::RemoveTree),
        (index.clone(), index.clone()).prop_map(|(a, b)| Op::Rename(a, b)),
        (index.clone(), any::<bool>()).prop_map(|(i, x)| Op::SetMode(i, x)),
        (index.clone(), index).prop_map(|(a, b)| Op::Copy(a, b)),
    ]
}

fn apply(vfs: &mut VirtualFs, op: &Op) -> Result<(), VfsError> {
    let r = match op {
        Op::Write(i, b) => vfs.write(&p(NAMES[*i]), Arc::from(vec![b'0' + b; usize::from(*b)])),
        Op::Append(i, b) => vfs.append(&p(NAMES[*i]), &[b'a' + b]).map(|_| ()),
        Op::Mkdir(i) => vfs.mkdir(&p(NAMES[*i]), 0o755),
        Op::Unlink(i) => vfs.unlink(&p(NAMES[*i])),
        Op::Rmdir(i) => vfs.rmdir(&p(NAMES[*i])),
        Op::RemoveTree(i) => vfs.remove_tree(&p(NAMES[*i])),
        Op::Rename(a, b) => vfs.rename(&p(NAMES[*a]), &p(NAMES[*b])),
        Op::SetMode(i, x) => vfs.set_mode(&p(NAMES[*i]), if *x { 0o700 } else { 0o640 }),
        Op::Copy(a, b) => vfs.copy_file(&p(NAMES[*a]), &p(NAMES[*b])),
    };
    match r {
        Err(error) if error.is_terminal() => Err(error),
        _ => Ok(()),
    }
}

/// The final state of every node reachable in the image, by walking it.
fn walk(vfs: &mut VirtualFs) -> BTreeMap<VPath, NodeState> {
    let mut out = BTreeMap::new();
    let mut stack = vec![VPath::root()];
    while let Some(dir) = stack.pop() {
        for name in vfs.read_dir(&dir).unwrap() {
            let path = dir.child(&name).unwrap();
            let meta = vfs.metadata(&path).unwrap();
            let state = match meta.kind {
                NodeKind::Directory => {
                    stack.push(path.clone());
                    NodeState::directory(meta.mode)
                }
                NodeKind::File => NodeState::file_with(&vfs.read(&path).unwrap(), meta.mode),
                NodeKind::Symlink => NodeState::symlink(&vfs.read_link(&path).unwrap()),
            };
            out.insert(path, state);
        }
    }
    out
}

fn base_strategy() -> impl Strategy<Value = Vec<(usize, bool)>> {
    proptest::collection::vec((0..NAMES.len(), any::<bool>()), 0..6)
}

fn build_base(root: &Path, spec: &[(usize, bool)]) {
    for (index, is_dir) in spec {
        let path = root.join(NAMES[*index]);
        if path.ancestors().skip(1).any(Path::is_file) || path.exists() {
            continue;
        }
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        if *is_dir {
            std::fs::create_dir(&path).unwrap();
        } else {
            std::fs::write(&path, NAMES[*index].as_bytes()).unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
    #[test]
    fn diff_replayed_on_the_base_reproduces_the_overlay(base in base_strategy(), ops in proptest::collection::vec(op_strategy(), 1..24), aged in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        build_base(dir.path(), &base);
        let mut initial = vfs_over(dir.path());
        let mut model = walk(&mut initial);

        // Aged: every base file's last change lies long before the image
        // was opened, so a file deleted unread is known by its stamp.
        let mut vfs = vfs_over(dir.path());
        if aged { age(&mut vfs) } else { fresh(&mut vfs) }
        for op in &ops {
            apply(&mut vfs, op).unwrap();
        }
        let diff = vfs.canonical_diff().unwrap();
        prop_assert_eq!(vfs.canonical_diff().unwrap().digest(), diff.digest());
        for entry in diff.entries() {
            let before = match entry.before {
                Some(before) if before.stamp.is_some() => {
                    prop_assert!(aged && entry.after.is_none(), "a stamp only for a delete of a settled file");
                    prop_assert_eq!(before.stamp, disk_stamp(dir.path(), &entry.path), "stamp of {}", entry.path);
                    model.get(&entry.path).map(|model| NodeState { content: model.content, stamp: None, ..before })
                }
                other => other,
            };
            prop_assert_eq!(model.get(&entry.path).copied(), before, "before state of {}", entry.path);
            match entry.after {
                Some(state) => { model.insert(entry.path.clone(), state); }
                None => { model.remove(&entry.path); }
            }
        }
        let final_state = walk(&mut vfs);
        prop_assert_eq!(&model, &final_state);

        // Deterministic: a fresh image replaying the same operations gives the same diff.
        let mut again = vfs_over(dir.path());
        if aged { age(&mut again) } else { fresh(&mut again) }
        for op in &ops {
            apply(&mut again, op).unwrap();
        }
        prop_assert_eq!(again.canonical_diff().unwrap(), diff);
    }
}

/// Move the image's opening time 10 s on, as if every base file had been
/// written long before it was opened.
fn age(vfs: &mut VirtualFs) {
    vfs.base.opened_at_ns += 10_000_000_000;
}

/// Move the image's opening time before every base file's last change, as if
/// it had been opened within the clock's tick of their writing, however long
/// a busy machine took between writing and opening.
fn fresh(vfs: &mut VirtualFs) {
    vfs.base.opened_at_ns = 0;
}

/// The stamp `lstat` gives the file at `path` below `root`.
fn disk_stamp(root: &Path, path: &VPath) -> Option<vsh_types::FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(root.join(path.as_str())).ok()?;
    Some(vsh_types::FileStamp {
        dev: meta.dev(),
        ino: meta.ino(),
        mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
        ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
    })
}

#[test]
fn a_file_deleted_unread_is_known_by_its_stamp_and_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for file in ["gone.txt", "read.txt", "t/a", "t/b", "t/u/c"] {
        write(root, file, b"bytes");
    }
    let mut vfs = vfs_over(root);
    age(&mut vfs);
    vfs.read(&p("read.txt")).unwrap();
    vfs.unlink(&p("gone.txt")).unwrap();
    vfs.unlink(&p("read.txt")).unwrap();
    vfs.remove_tree(&p("t")).unwrap();
    let reads_before = vfs.host().counters().snapshot().reads;
    let diff = vfs.canonical_diff().unwrap();
    assert_eq!(vfs.host().counters().snapshot().reads, reads_before, "computing the diff read no file");
    let mut stamped = Vec::new();
    for entry in diff.entries() {
        let before = entry.before.unwrap();
        assert_eq!(before.check(), Ok(()));
        if before.kind == NodeKind::File && entry.path.as_str() != "read.txt" {
            assert_eq!(before.content, None, "{}", entry.path);
            assert_eq!(before.stamp, disk_stamp(root, &entry.path), "{}", entry.path);
            assert_eq!((before.size, before.mode), (5, 0o644 & !umask()));
            stamped.push(entry.path.as_str().to_owned());
        }
    }
    assert_eq!(stamped, ["gone.txt", "t/a", "t/b", "t/u/c"]);
    // A file the run read keeps its digest: the bytes were read anyway.
    let read = diff.entries().iter().find(|entry| entry.path.as_str() == "read.txt").unwrap();
    assert_eq!(read.before, Some(NodeState::file_with(b"bytes", 0o644 & !umask())));
    // The read set depends on what was stat'ed, not on unread bytes.
    assert_eq!(vfs.read_set().entries[&p("gone.txt")].content, None);
    // The base still holds the stamped state; a changed file no longer does.
    let gone = diff.entries()[0].before;
    assert!(vfs.base_holds(&p("gone.txt"), gone.as_ref()).unwrap());
    // Past a coarse clock's tick (kernels before 6.13 stamp within one), so
    // the rewrite gets a new ctime.
    std::thread::sleep(std::time::Duration::from_millis(50));
    write(root, "gone.txt", b"BYTES");
    let mut reopened = vfs_over(root);
    assert!(!reopened.base_holds(&p("gone.txt"), gone.as_ref()).unwrap());
}

/// An outside probe's oracle: a file whose bytes a program may not read
/// could still be overwritten, and an overwrite with its very bytes made an
/// empty diff, so each run answered "is the secret X?".
#[test]
fn a_file_a_program_may_not_read_is_changed_by_any_overwrite_and_known_by_its_stamp() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "config/prod.ini", b"db_password=tiger\n");
    write(root, "plain.txt", b"same\n");
    let unreadable = crate::PathRule::new(|path: &VPath| path.as_str() == "config/prod.ini");
    let image = |aged: bool| {
        let mut vfs = vfs_over(root).with_unreadable_contents(unreadable.clone());
        if aged {
            age(&mut vfs);
        } else {
            fresh(&mut vfs);
        }
        vfs
    };
    let diff_after = |guess: &[u8], aged: bool| {
        let mut vfs = image(aged);
        vfs.write(&p("config/prod.ini"), Arc::from(guess)).unwrap();
        vfs.write(&p("plain.txt"), Arc::from(&b"same\n"[..])).unwrap();
        let diff = vfs.canonical_diff().unwrap();
        let hashed = vfs.read_set().entries.get(&p("config/prod.ini")).and_then(|dependency| dependency.content);
        (diff, hashed)
    };
    let stamp = disk_stamp(root, &p("config/prod.ini"));
    let mut befores = Vec::new();
    for guess in [&b"db_password=tiger\n"[..], b"db_password=lion\n"] {
        let (diff, hashed) = diff_after(guess, true);
        assert_eq!(hashed, None, "the protected file was not read to make the diff");
        // An ordinary file written back unchanged is no change; the protected
        // one is changed whether or not the guess was right.
        assert_eq!(diff.len(), 1, "{diff:?}");
        let entry = &diff.entries()[0];
        assert_eq!((entry.path.as_str(), entry.kind), ("config/prod.ini", DiffKind::Modify));
        let before = entry.before.unwrap();
        assert_eq!((before.content, before.stamp), (None, stamp), "no digest of the secret");
        assert_eq!(before.check(), Ok(()));
        assert_eq!(entry.after, Some(NodeState::file_with(guess, 0o644)));
        befores.push(before);
    }
    assert_eq!(befores[0], befores[1], "the before state is the same whatever the guess");
    // An append reads the bytes to make the file's new content: the before
    // state is still its stamp, and writing the secret back is a change.
    let mut vfs = image(true);
    vfs.append(&p("config/prod.ini"), b"#").unwrap();
    vfs.write(&p("config/prod.ini"), Arc::from(&b"db_password=tiger\n"[..])).unwrap();
    let diff = vfs.canonical_diff().unwrap();
    assert_eq!(diff.len(), 1, "{diff:?}");
    assert_eq!(diff.entries()[0].before.unwrap(), befores[0], "by its stamp, not the digest the append made");
    // Changed moments before the image was opened, its stamp does not stand
    // for its bytes, and a digest would answer the guess: refused, right
    // guess or wrong.
    for guess in [&b"db_password=tiger\n"[..], b"db_password=lion\n"] {
        let mut vfs = image(false);
        vfs.write(&p("config/prod.ini"), Arc::from(guess)).unwrap();
        let refused = vfs.canonical_diff().unwrap_err();
        assert!(matches!(&refused, VfsError::UnsettledUnreadable { path } if path.as_str() == "config/prod.ini"));
        assert!(refused.is_terminal());
    }
}

#[test]
fn a_file_moved_away_is_known_by_its_digest_and_the_diff_is_the_same_every_time() {
    // Found by the replay proptest: `a/x` renamed to `a/y` (its mode changed
    // first) on an aged base. The new path's state reads the moved bytes; the
    // old path's before state was decided earlier in path order, as an
    // unread file's stamp, and a second diff (the bytes read by now) said
    // digest: two diffs of one image differed.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a/x", b"moved");
    write(dir.path(), "b/x", b"other");
    let mut vfs = vfs_over(dir.path());
    age(&mut vfs);
    vfs.set_mode(&p("a/x"), 0o640).unwrap();
    vfs.rename(&p("a/x"), &p("a/y")).unwrap();
    let first = vfs.canonical_diff().unwrap();
    let second = vfs.canonical_diff().unwrap();
    assert_eq!(first.digest(), second.digest());
    let old = first.entries().iter().find(|entry| entry.path.as_str() == "a/x").unwrap();
    assert_eq!(old.after, None);
    assert_eq!(old.before, Some(NodeState::file_with(b"moved", 0o644 & !umask())), "read, so known by its digest");
    let new = first.entries().iter().find(|entry| entry.path.as_str() == "a/y").unwrap();
    assert_eq!(new.after, Some(NodeState::file_with(b"moved", 0o640)));
}

#[test]
fn a_recently_changed_file_is_hashed_before_it_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "new.txt", b"fresh");
    // Not aged: the file changed just now, within the clock's tick of the
    // image's opening, so a later write might keep its ctime.
    let mut vfs = vfs_over(dir.path());
    fresh(&mut vfs);
    vfs.unlink(&p("new.txt")).unwrap();
    let diff = vfs.canonical_diff().unwrap();
    assert_eq!(diff.entries()[0].before, Some(NodeState::file_with(b"fresh", 0o644 & !umask())));
}

#[test]
fn a_stamp_is_trusted_only_once_the_clock_has_moved_past_the_last_change() {
    const MS: i128 = 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "f", b"x");
    let stat = CapDir::open(dir.path()).unwrap().lstat(&p("f")).unwrap().unwrap();
    let at = |ctime_ns: i128, mtime_ns: i128| vsh_host::HostStat { ctime_ns, mtime_ns, ..stat };
    let opened = 1_800_000_000_500 * MS;
    // Sub-second times: 100 ms must have passed.
    assert!(crate::base::settled_stamp(&at(opened - 100 * MS, opened - 200 * MS), opened).is_some());
    assert!(crate::base::settled_stamp(&at(opened - 99 * MS, opened - 200 * MS), opened).is_none());
    // A change after the opening (a clock that stepped back) is never settled.
    assert!(crate::base::settled_stamp(&at(opened + MS, opened), opened).is_none());
    // Whole-second times may come from a filesystem that keeps seconds: 3 s.
    let whole = 1_800_000_000_000 * MS;
    assert!(crate::base::settled_stamp(&at(whole, whole), whole + 2_999 * MS).is_none());
    assert!(crate::base::settled_stamp(&at(whole, whole), whole + 3_000 * MS).is_some());
    let stamp = crate::base::settled_stamp(&at(opened - 200 * MS, opened - 300 * MS), opened).unwrap();
    assert_eq!((stamp.ctime_ns, stamp.mtime_ns), ((opened - 200 * MS) as i64, (opened - 300 * MS) as i64));
    assert_eq!((stamp.dev, stamp.ino), (stat.identity.dev, stat.identity.ino));
}

fn umask() -> u32 {
    let probe = tempfile::tempdir().unwrap();
    write(probe.path(), "probe", b"");
    0o777 & !std::fs::metadata(probe.path().join("probe")).unwrap().permissions().mode() & 0o666
}

#[test]
fn the_overlay_counts_the_bytes_it_holds_and_not_what_still_comes_from_the_base() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.txt", &[b'b'; 100]);
    let mut vfs = vfs_over(dir.path());
    assert_eq!(vfs.overlay_bytes(), 0);
    vfs.write(&p("new.txt"), Arc::from(&b"12345"[..])).unwrap();
    vfs.symlink(&p("link"), b"base.txt").unwrap();
    assert_eq!(vfs.overlay_bytes(), 5 + 8);
    // A copy or rename of base content, or a mode change, holds no bytes.
    vfs.copy_file(&p("base.txt"), &p("copy.txt")).unwrap();
    vfs.set_mode(&p("base.txt"), 0o600).unwrap();
    vfs.rename(&p("base.txt"), &p("moved.txt")).unwrap();
    assert_eq!(vfs.overlay_bytes(), 5 + 8);
    // Rewriting replaces; removing frees.
    vfs.write(&p("new.txt"), Arc::from(&b"123"[..])).unwrap();
    vfs.unlink(&p("link")).unwrap();
    assert_eq!(vfs.overlay_bytes(), 3);
}

#[test]
fn counting_base_nodes_leaves_out_the_excluded_and_stops_past_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for file in ["a", "d/b", "d/e/c", ".vsh/x", ".vsh/y/z"] {
        write(root, file, b"x");
    }
    std::os::unix::fs::symlink("a", root.join("link")).unwrap();
    let mut vfs = vfs_over(root);
    // a, d, d/b, d/e, d/e/c, link: six nodes outside `.vsh`.
    assert_eq!(vfs.count_base_nodes(u64::MAX).unwrap(), 6);
    assert_eq!(vfs.count_base_nodes(6).unwrap(), 6);
    let before = vfs.host().counters().snapshot();
    assert_eq!(vfs.count_base_nodes(2).unwrap(), 3, "stops at the first node past the bound");
    let spent = vfs.host().counters().snapshot().lists - before.lists;
    assert_eq!(spent, 1, "the root listing alone already holds three nodes");
    assert_eq!(vfs.count_base_nodes(0).unwrap(), 1);
    // Counting records nothing: the run depends on none of it.
    assert!(vfs.read_set().entries.is_empty());
    // Nor does it count what the policy hides from listings (sec51 F4: a
    // denial's remedy named the count, which then told how many were hidden).
    for file in [".env", "secrets/k1", "secrets/k2", "d/.env.local"] {
        write(root, file, b"s");
    }
    let hidden = crate::PathRule::new(|path: &VPath| matches!(path.as_str(), "secrets" | ".env" | "d/.env.local"));
    let vfs = vfs_over(root).with_hidden_names(hidden);
    assert_eq!(vfs.count_base_nodes(u64::MAX).unwrap(), 6, "the six visible nodes alone");
}

#[test]
fn live_content_is_shown_only_while_the_disk_still_holds_the_state() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", b"before");
    std::os::unix::fs::symlink("a.txt", dir.path().join("link")).unwrap();
    let workspace = CapDir::open(dir.path()).unwrap();
    let state = NodeState::file_with(b"before", 0o644);
    assert_eq!(crate::live_content_if_unchanged(&workspace, &p("a.txt"), &state), Some(b"before".to_vec()));
    // A symlink to the same bytes is not followed; a directory state has no content.
    assert_eq!(crate::live_content_if_unchanged(&workspace, &p("link"), &state), None);
    assert_eq!(crate::live_content_if_unchanged(&workspace, &p("a.txt"), &NodeState::directory(0o755)), None);
    // Changed on disk (same size): not the reviewed state any more.
    write(dir.path(), "a.txt", b"BEFORE");
    assert_eq!(crate::live_content_if_unchanged(&workspace, &p("a.txt"), &state), None);
    // Grown past the recorded size: refused by the read bound, never read whole.
    write(dir.path(), "a.txt", b"before and more");
    assert_eq!(crate::live_content_if_unchanged(&workspace, &p("a.txt"), &state), None);
    std::fs::remove_file(dir.path().join("a.txt")).unwrap();
    assert_eq!(crate::live_content_if_unchanged(&workspace, &p("a.txt"), &state), None);

    // A file deleted unread is shown while its stamp, size and mode hold.
    write(dir.path(), "b.txt", b"unread");
    let stamp = disk_stamp(dir.path(), &p("b.txt")).unwrap();
    let mode = std::fs::metadata(dir.path().join("b.txt")).unwrap().permissions().mode() & 0o7777;
    let unread = NodeState::unread_file(6, mode, stamp);
    assert_eq!(crate::live_content_if_unchanged(&workspace, &p("b.txt"), &unread), Some(b"unread".to_vec()));
    let other_mode = NodeState { mode: mode ^ 0o100, ..unread };
    assert_eq!(crate::live_content_if_unchanged(&workspace, &p("b.txt"), &other_mode), None);
    // Rewritten with the same bytes once the clock has moved on (the
    // premise of a settled stamp): another version, not shown.
    std::thread::sleep(std::time::Duration::from_millis(150));
    write(dir.path(), "b.txt", b"unread");
    assert_eq!(crate::live_content_if_unchanged(&workspace, &p("b.txt"), &unread), None);
}

#[test]
fn snapshot_limits_encode_every_bound_in_field_order() {
    use vsh_types::canon::Canonical;
    let limits = SnapshotLimits { max_materialized_bytes: 1, max_materialized_file_bytes: 2, max_observations: 3 };
    let mut expected = Vec::new();
    for value in [1u64, 2, 3] {
        expected.extend_from_slice(&value.to_le_bytes());
    }
    assert_eq!(limits.to_canonical_bytes(), expected);
    let swapped = SnapshotLimits { max_materialized_bytes: 2, max_materialized_file_bytes: 1, ..limits };
    assert_ne!(swapped.to_canonical_bytes(), limits.to_canonical_bytes());
}

#[test]
fn only_renames_that_move_base_content_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "config.ini", b"old");
    write(dir.path(), "keep/a", b"a");
    let mut vfs = vfs_over(dir.path());
    // A temporary file made by the run and renamed over its target (`sed -i`).
    vfs.write(&p(".tmp-1"), Arc::from(&b"new"[..])).unwrap();
    vfs.rename(&p(".tmp-1"), &p("config.ini")).unwrap();
    vfs.mkdir(&p("made"), 0o755).unwrap();
    vfs.write(&p("made/x"), Arc::from(&b"x"[..])).unwrap();
    vfs.rename(&p("made"), &p("moved")).unwrap();
    assert_eq!(vfs.renames(), 0, "nothing of the base moved");
    // A base file, and a run-made directory holding a base file.
    vfs.rename(&p("keep/a"), &p("made-a")).unwrap();
    assert_eq!(vfs.renames(), 1);
    vfs.mkdir(&p("box"), 0o755).unwrap();
    vfs.rename(&p("made-a"), &p("box/a")).unwrap();
    vfs.rename(&p("box"), &p("box2")).unwrap();
    assert_eq!(vfs.renames(), 3, "base content moved twice more");
    let diff = vfs.canonical_diff().unwrap();
    let config = diff.entries().iter().find(|entry| entry.path.as_str() == "config.ini").unwrap();
    assert_eq!(config.kind, vsh_types::DiffKind::Modify);
}

#[test]
fn a_path_the_host_could_never_hold_is_refused_when_made_as_the_host_would() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "short/a.txt", b"a");
    let mut vfs = vfs_over(dir.path());
    let too_long = |result: Result<(), VfsError>| matches!(result, Err(VfsError::Inaccessible { errno: 36, .. }));
    // 20 components of 200 bytes: 4,019 bytes, under the limit; one more is over.
    let deep: Vec<String> = (0..20).map(|index| format!("{index:0200}")).collect();
    let fits = deep.join("/");
    assert!(fits.len() <= crate::MAX_PATH_BYTES);
    vfs.mkdir_all(&p(&fits), 0o755).unwrap();
    let over = format!("{fits}/{}", "x".repeat(crate::MAX_PATH_BYTES - fits.len()));
    assert!(too_long(vfs.mkdir(&p(&over), 0o755)));
    assert!(too_long(vfs.write(&p(&over), Arc::from(&b"x"[..]))));
    assert!(too_long(vfs.symlink(&p(&over), b"target")));
    // One byte less fits.
    vfs.write(&p(&over[..over.len() - 1]), Arc::from(&b"x"[..])).unwrap();
    // A name of 256 bytes never fits; 255 does.
    assert!(too_long(vfs.write(&p(&"n".repeat(256)), Arc::from(&b"x"[..]))));
    vfs.write(&p(&"n".repeat(255)), Arc::from(&b"x"[..])).unwrap();
    // A rename whose moved tree would no longer fit is refused whole.
    let long_name = "r".repeat(255);
    vfs.mkdir(&p(&long_name), 0o755).unwrap();
    assert!(too_long(vfs.rename(&p(&deep[0]), &p(&format!("{long_name}/{}", deep[0])))));
    assert!(vfs.exists(&p(&fits)).unwrap(), "nothing moved");
    assert!(too_long(vfs.copy_file(&p("short/a.txt"), &p(&"c".repeat(256)))));
}

#[test]
fn a_listings_names_digest_leaves_out_the_hidden_names() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", b"a");
    write(dir.path(), ".env", b"S=1");
    let hidden = crate::PathRule::new(|path: &VPath| path.file_name() == Some(".env"));
    let mut vfs = vfs_over(dir.path()).with_hidden_names(hidden);
    assert_eq!(vfs.read_dir(&VPath::root()).unwrap(), vec![".env".to_owned(), "a.txt".to_owned()]);
    let names = vfs.read_set().entries.get(&VPath::root()).and_then(|dependency| dependency.names);
    assert_eq!(names, Some(crate::names_digest(["a.txt"])), "only what a program may see");
    // Without the rule, every name.
    let mut plain = vfs_over(dir.path());
    plain.read_dir(&VPath::root()).unwrap();
    let names = plain.read_set().entries.get(&VPath::root()).and_then(|dependency| dependency.names);
    assert_eq!(names, Some(crate::names_digest([".env", "a.txt"])));
}

#[test]
fn a_directory_shows_no_time_so_hidden_names_coming_and_going_tell_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "d/f.txt", b"x");
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_hours(438_288);
    std::fs::File::open(dir.path().join("d/f.txt")).unwrap().set_modified(old).unwrap();
    let mtimes = |vfs: &mut VirtualFs| {
        ["", "d", "d/f.txt"]
            .map(|path| vfs.metadata(&if path.is_empty() { VPath::root() } else { p(path) }).unwrap().mtime.to_bits())
    };
    let before = mtimes(&mut vfs_over(dir.path()));
    // A secret made beside the file moves the host's directory times, never what is shown.
    write(dir.path(), "d/.env", b"S=1");
    write(dir.path(), ".env", b"S=1");
    let after = mtimes(&mut vfs_over(dir.path()));
    assert_eq!(before, after);
    assert_eq!(after, [0.0, 0.0, 1_577_836_800.0].map(f64::to_bits), "a file keeps its own time");
}

#[test]
fn a_path_is_absent_by_the_runs_own_changes_only_when_they_removed_it_or_what_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "kept.txt", b"k\n");
    write(root, "old/inner.txt", b"i\n");
    let mut vfs = vfs_over(root);
    // Made and renamed away, as `sed -i` writes its temporary file.
    vfs.write(&p("tmp.sed"), Arc::from(&b"new\n"[..])).unwrap();
    vfs.rename(&p("tmp.sed"), &p("kept.txt")).unwrap();
    // A directory removed, and one made where the base had nothing.
    vfs.remove_tree(&p("old")).unwrap();
    vfs.mkdir(&p("fresh"), 0o755).unwrap();
    let observed = vfs.read_set().clone();
    let absent = |vfs: &VirtualFs, path: &str| vfs.absent_by_own_changes(&p(path));
    assert!(absent(&vfs, "tmp.sed"), "renamed away");
    assert!(absent(&vfs, "old") && absent(&vfs, "old/inner.txt"), "removed, with what it held");
    assert!(absent(&vfs, "fresh/x"), "a directory of its own holds nothing it did not make");
    assert!(absent(&vfs, "kept.txt/x"), "under a file it wrote, nothing can be");
    assert!(!absent(&vfs, "kept.txt") && !absent(&vfs, "fresh"), "written or made there");
    assert!(!absent(&vfs, "untouched.txt") && !absent(&vfs, "sub/x"), "only the base could tell");
    assert_eq!(vfs.read_set(), &observed, "asking observes nothing");
}

/// sec52 N1: the snapshot id, shown in every receipt, hashed the content
/// digest of a file protected from reading once the run's append (or a
/// delete) had hashed it: guesses were checked against it offline.
#[test]
fn the_snapshot_id_holds_no_digest_of_a_file_a_program_may_not_read() {
    let snapshot_after_append = |secret: &[u8]| {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "creds.cfg", secret);
        write(dir.path(), "plain.txt", b"same\n");
        let unreadable = crate::PathRule::new(|path: &VPath| path.as_str() == "creds.cfg");
        let mut vfs = vfs_over(dir.path()).with_unreadable_contents(unreadable);
        age(&mut vfs);
        vfs.append(&p("creds.cfg"), b"#").unwrap();
        vfs.read(&p("plain.txt")).unwrap();
        vfs.snapshot_id()
    };
    assert_eq!(snapshot_after_append(b"pin=1111\n"), snapshot_after_append(b"pin=2222\n"));
    // Other files' bytes are still in it.
    let plain = |bytes: &[u8]| {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "plain.txt", bytes);
        let mut vfs = vfs_over(dir.path());
        vfs.read(&p("plain.txt")).unwrap();
        vfs.snapshot_id()
    };
    assert_ne!(plain(b"aaaa\n"), plain(b"bbbb\n"));
}

/// sec52 N2: a symlink whose target is protected from reading, replaced
/// by one to the same target, was no change: a guess checked in one run.
/// Replacing it is refused, right guess or wrong; deleting it is allowed.
#[test]
fn a_symlink_a_program_may_not_read_is_deleted_but_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("vault-4821", dir.path().join("key")).unwrap();
    let unreadable = crate::PathRule::new(|path: &VPath| path.as_str() == "key");
    for guess in [&b"vault-4821"[..], b"vault-0000"] {
        let mut vfs = vfs_over(dir.path()).with_unreadable_contents(unreadable.clone());
        age(&mut vfs);
        vfs.unlink(&p("key")).unwrap();
        vfs.symlink(&p("key"), guess).unwrap();
        let refused = vfs.canonical_diff().unwrap_err();
        assert!(matches!(&refused, VfsError::UnreadableSymlinkReplaced { path } if path.as_str() == "key"));
    }
    let mut vfs = vfs_over(dir.path()).with_unreadable_contents(unreadable);
    age(&mut vfs);
    vfs.unlink(&p("key")).unwrap();
    assert_eq!(vfs.canonical_diff().unwrap().len(), 1);
}

/// What the guest read is told apart from what it only replaced, copied or
/// moved: all of those record the content in the read set (a commit's
/// precondition), only a read (whole, a piece, or a copy's, of its origin)
/// shows it.
#[test]
fn only_what_the_guest_read_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["whole.txt", "piece.txt", "origin.txt", "replaced.txt", "copied.txt", "moved.txt"] {
        write(dir.path(), name, name.as_bytes());
    }
    let mut vfs = vfs_over(dir.path());
    vfs.read(&p("whole.txt")).unwrap();
    assert_eq!(vfs.read_range(&p("piece.txt"), 1, 2).unwrap(), b"ie");
    vfs.copy_file(&p("origin.txt"), &p("copy.txt")).unwrap();
    assert_eq!(&*vfs.read(&p("copy.txt")).unwrap(), b"origin.txt");
    vfs.write(&p("replaced.txt"), Arc::from(&b"new"[..])).unwrap();
    vfs.copy_file(&p("copied.txt"), &p("elsewhere.txt")).unwrap();
    vfs.rename(&p("moved.txt"), &p("there.txt")).unwrap();
    let diff = vfs.canonical_diff().unwrap();
    assert!(diff.entries().iter().any(|entry| entry.path == p("replaced.txt")));
    let shown: Vec<&str> = vfs.shown_contents().iter().map(VPath::as_str).collect();
    assert_eq!(shown, ["origin.txt", "piece.txt", "whole.txt"]);
    for name in ["replaced.txt", "copied.txt", "moved.txt"] {
        assert!(vfs.read_set().entries[&p(name)].content.is_some(), "{name}: recorded, not shown");
    }
}
