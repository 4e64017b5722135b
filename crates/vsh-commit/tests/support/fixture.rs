//! The transaction the crash, race and fault-campaign tests share: it creates,
//! modifies, deletes and renames files, changes modes, replaces kinds and
//! symlinks and creates a directory tree, so it lowers to every kind of operation.

use std::sync::Arc;

use vsh_store::BlobStore;
use vsh_vfs::{VfsError, VirtualFs};

use super::{Result, Run, Workspace, chmod, p, write};

/// Build the before tree under `root` (which exists and is empty).
pub fn build_before(root: &std::path::Path) {
    write(root, "a.txt", b"alpha");
    write(root, "d/b.txt", b"beta");
    write(root, "old/x", b"x");
    write(root, "old/sub/y", b"y");
    write(root, "script.sh", b"#!/bin/sh\n");
    chmod(root, "script.sh", 0o644);
    write(root, "k", b"a file that becomes a directory");
    std::fs::create_dir(root.join("z")).unwrap();
    std::fs::create_dir(root.join("keep")).unwrap();
    chmod(root, "keep", 0o755);
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("relink")).unwrap();
    write(root, "gone/1", b"one");
    write(root, "gone/deep/2", b"two");
    std::fs::create_dir(root.join("shared")).unwrap();
    chmod(root, "shared", 0o755);
    write(root, "locked.txt", b"readable");
    chmod(root, "locked.txt", 0o644);
}

/// The transaction, as a program would make it.
pub fn transaction(vfs: &mut VirtualFs) -> std::result::Result<(), VfsError> {
    vfs.write(&p("a.txt"), Arc::from(&b"changed"[..]))?;
    vfs.write(&p("d/new.txt"), Arc::from(&b"new"[..]))?;
    vfs.unlink(&p("d/b.txt"))?;
    vfs.rename(&p("old"), &p("moved"))?;
    vfs.mkdir_all(&p("t/u/v"), 0o750)?;
    vfs.write(&p("t/u/v/deep"), Arc::from(&b"deep"[..]))?;
    vfs.mkdir(&p("ro"), 0o555)?;
    vfs.mkdir(&p("ro/inner"), 0o500)?;
    vfs.write(&p("ro/inner/f"), Arc::from(&b"locked in"[..]))?;
    vfs.set_mode(&p("ro/inner/f"), 0o400)?;
    vfs.set_mode(&p("script.sh"), 0o755)?;
    vfs.set_mode(&p("keep"), 0o700)?;
    vfs.set_mode(&p("locked.txt"), 0o000)?;
    vfs.unlink(&p("link"))?;
    vfs.unlink(&p("relink"))?;
    vfs.symlink(&p("relink"), b"d/new.txt")?;
    vfs.symlink(&p("newlink"), b"../outside")?;
    vfs.unlink(&p("k"))?;
    vfs.mkdir(&p("k"), 0o755)?;
    vfs.write(&p("k/inside"), Arc::from(&b"inside"[..]))?;
    vfs.rmdir(&p("z"))?;
    vfs.write(&p("z"), Arc::from(&b"dir became file"[..]))?;
    vfs.remove_tree(&p("gone"))?;
    vfs.write(&p("shared/new"), Arc::from(&b"in a directory that becomes read-only"[..]))?;
    vfs.set_mode(&p("shared"), 0o555)?;
    Ok(())
}

/// A fresh workspace holding the before tree, and the run of the transaction on it.
pub struct Trial {
    pub _dir: tempfile::TempDir,
    pub ws: Workspace,
    pub run: Run,
}

/// A transaction as a program would make it.
pub type Transaction = fn(&mut VirtualFs) -> std::result::Result<(), VfsError>;

impl Trial {
    pub fn new(blobs: &BlobStore) -> Result<Trial> {
        Self::of(blobs, build_before, transaction, false)
    }

    /// A trial of `transaction` on the tree `build` makes; `settled` waits
    /// until the tree's last change lies past the point where a file the
    /// run deletes unread is known by its stamp (100 ms).
    pub fn of(
        blobs: &BlobStore,
        build: fn(&std::path::Path),
        transaction: Transaction,
        settled: bool,
    ) -> Result<Trial> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().join("ws");
        std::fs::create_dir(&root)?;
        build(&root);
        if settled {
            std::thread::sleep(std::time::Duration::from_millis(150));
        }
        let ws = Workspace::open(&root)?;
        let run = ws.run(blobs, transaction)?;
        Ok(Trial { _dir: dir, ws, run })
    }

    /// A committer on new handles, as after a restart.
    pub fn reopened(&self) -> Result<Workspace> {
        Workspace::open(&self.ws.root)
    }
}

/// A before tree for deletes made without reading: a file, a tree, and a
/// file that stays.
pub fn build_deletes(root: &std::path::Path) {
    write(root, "solo.txt", b"solo");
    write(root, "del/a", b"a");
    write(root, "del/b", b"b");
    write(root, "del/sub/c", b"c");
    write(root, "keep.txt", b"keep");
}

/// Delete `solo.txt` and the tree `del` without reading them, and rewrite
/// `keep.txt`.
pub fn deletes(vfs: &mut VirtualFs) -> std::result::Result<(), VfsError> {
    vfs.unlink(&p("solo.txt"))?;
    vfs.remove_tree(&p("del"))?;
    vfs.write(&p("keep.txt"), Arc::from(&b"kept, rewritten"[..]))?;
    Ok(())
}
