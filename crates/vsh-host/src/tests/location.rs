//! `CapDir::location_within`: where a directory lies inside another, found by
//! walking up by device and inode (never by comparing path strings), so a
//! symlinked or `..`-laden path to the same directory is still found.

use std::fs;

use crate::CapDir;

#[test]
fn a_directory_is_located_by_identity_at_any_depth_or_not_at_all() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("root");
    fs::create_dir_all(root.join("a/b/c")).unwrap();
    // Siblings at every level, before and after in any order: each step must
    // find its own entry, not the first one listed.
    for dir in ["", "a", "a/b"] {
        for sibling in ["0", "m", "zz"] {
            fs::create_dir_all(root.join(dir).join(sibling)).unwrap();
            fs::write(root.join(dir).join(format!("{sibling}.txt")), b"x").unwrap();
        }
    }
    fs::create_dir_all(scratch.path().join("outside/d")).unwrap();
    let root_dir = CapDir::open(&root).unwrap();
    let within = |path: &std::path::Path| CapDir::open(path).unwrap().location_within(&root_dir).unwrap();
    assert_eq!(within(&root.join("a/b/c")).map(|path| path.as_str().to_owned()), Some("a/b/c".to_owned()));
    assert_eq!(within(&root.join("a")).map(|path| path.as_str().to_owned()), Some("a".to_owned()));
    // The root itself is at the root.
    assert_eq!(within(&root).map(|path| path.as_str().to_owned()), Some(String::new()));
    // Outside it: nowhere, even with a name that looks alike.
    assert_eq!(within(&scratch.path().join("outside/d")), None);
    assert_eq!(within(scratch.path()), None);
    // Reached through a symlink from outside, or through `..`: found all the same.
    std::os::unix::fs::symlink(root.join("a/b"), scratch.path().join("outside/link")).unwrap();
    assert_eq!(within(&scratch.path().join("outside/link")).map(|p| p.as_str().to_owned()), Some("a/b".to_owned()));
    assert_eq!(within(&root.join("a/b/c/..")).map(|path| path.as_str().to_owned()), Some("a/b".to_owned()));
    // A sibling with the same name elsewhere is not confused with the real one.
    fs::create_dir_all(scratch.path().join("outside/a/b")).unwrap();
    assert_eq!(within(&scratch.path().join("outside/a/b")), None);
}

#[test]
fn allowed_mounts_are_kept_as_given() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = CapDir::open(scratch.path()).unwrap();
    assert!(dir.allowed_mounts().is_empty());
    let mounts = vec![vsh_types::VPath::parse("mnt/data").unwrap()];
    let dir = dir.with_allowed_mounts(mounts.clone());
    assert_eq!(dir.allowed_mounts(), &mounts[..]);
}

#[test]
fn a_subdirectory_handle_sees_the_allowed_mounts_below_it() {
    let scratch = tempfile::tempdir().unwrap();
    fs::create_dir_all(scratch.path().join("a/b")).unwrap();
    let parse = |text: &str| vsh_types::VPath::parse(text).unwrap();
    let dir =
        CapDir::open(scratch.path()).unwrap().with_allowed_mounts([parse("a/mnt"), parse("a/b/data"), parse("c/mnt")]);
    let a = dir.open_subdir(&parse("a")).unwrap();
    assert_eq!(a.allowed_mounts(), &[parse("mnt"), parse("b/data")][..]);
    let b = a.open_subdir(&parse("b")).unwrap();
    assert_eq!(b.allowed_mounts(), &[parse("data")][..]);
}
