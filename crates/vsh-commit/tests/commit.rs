//! End-to-end tests of the committer: runs are made with a real `VirtualFs`
//! over a temporary workspace, their new content is stored in a real blob
//! store, and the commit is checked byte for byte and mode for mode on disk.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Barrier};
use std::time::{Duration, SystemTime};

use vsh_commit::{CommitError, CommitReceipt, CommitRequest, Committer, ConflictReason};
use vsh_host::CapDir;
use vsh_store::{BlobStore, DataDir};
use vsh_types::{CanonicalDiff, DiffEntry, DiffKind, NodeKind, NodeState, TransactionId, VPath};
use vsh_vfs::{ReadSet, VfsError, VirtualFs};

mod support;

use support::{Node, Result, Run, Tree, Workspace, canonical, chmod, file, mode_of, p, tree, write};

/// A workspace with a data directory and blob store inside its runtime dir.
struct Fixture {
    dir: tempfile::TempDir,
    ws: Workspace,
    blobs: BlobStore,
    committer: Committer,
}

impl Fixture {
    fn new() -> Result<Self> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("ws"))?;
        let ws = Workspace::open(&dir.path().join("ws"))?;
        let data = DataDir::open_in_workspace(&ws.dir, &vsh_types::VshLayout::default_data())?;
        let blobs = BlobStore::open(&data)?;
        let committer = Committer::new(Arc::clone(&ws.dir), p(".vsh"))?;
        Ok(Self { dir, ws, blobs, committer })
    }

    fn root(&self) -> std::path::PathBuf {
        self.dir.path().join("ws")
    }

    /// Run `ops` against a fresh virtual image, store the new content, and
    /// return the diff and read set like a real run would.
    fn run(&self, ops: impl FnOnce(&mut VirtualFs) -> std::result::Result<(), VfsError>) -> Result<Run> {
        self.ws.run(&self.blobs, ops)
    }

    fn commit(&self, run: &Run) -> std::result::Result<CommitReceipt, CommitError> {
        self.committer.commit(&run.request(&self.blobs))
    }

    /// Every node of the workspace except the runtime directory.
    fn tree(&self) -> Tree {
        tree(&self.root())
    }

    fn stage_is_empty(&self) -> bool {
        std::fs::read_dir(self.root().join(".vsh/txn")).map_or(true, |mut entries| entries.next().is_none())
    }
}

fn stale_paths(error: &CommitError) -> Vec<(String, ConflictReason)> {
    match error {
        CommitError::Stale { conflicts, .. } => {
            conflicts.iter().map(|conflict| (conflict.path.as_str().to_owned(), conflict.reason)).collect()
        }
        other => panic!("expected a stale commit, got {other:?}"),
    }
}

#[test]
fn create_modify_delete_rename_mkdir_tree_and_mode_changes_commit_exactly() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "a.txt", b"alpha");
    write(&root, "d/b.txt", b"beta");
    write(&root, "old/x", b"x");
    write(&root, "old/sub/y", b"y");
    write(&root, "script.sh", b"#!/bin/sh\n");
    chmod(&root, "script.sh", 0o644);
    write(&root, "k", b"a file that becomes a directory");
    std::fs::create_dir(root.join("z"))?;
    std::fs::create_dir(root.join("keep"))?;
    chmod(&root, "keep", 0o755);
    std::os::unix::fs::symlink("a.txt", root.join("link"))?;
    std::os::unix::fs::symlink("a.txt", root.join("relink"))?;

    let run = fx.run(|vfs| {
        vfs.write(&p("a.txt"), Arc::from(&b"changed"[..]))?;
        vfs.write(&p("d/new.txt"), Arc::from(&b"new"[..]))?;
        vfs.unlink(&p("d/b.txt"))?;
        vfs.rename(&p("old"), &p("moved"))?;
        vfs.mkdir_all(&p("t/u/v"), 0o750)?;
        vfs.write(&p("t/u/v/deep"), Arc::from(&b"deep"[..]))?;
        vfs.set_mode(&p("script.sh"), 0o755)?;
        vfs.set_mode(&p("keep"), 0o700)?;
        vfs.unlink(&p("link"))?;
        vfs.unlink(&p("relink"))?;
        vfs.symlink(&p("relink"), b"d/new.txt")?;
        vfs.symlink(&p("newlink"), b"../outside")?;
        vfs.unlink(&p("k"))?;
        vfs.mkdir(&p("k"), 0o755)?;
        vfs.write(&p("k/inside"), Arc::from(&b"inside"[..]))?;
        vfs.rmdir(&p("z"))?;
        vfs.write(&p("z"), Arc::from(&b"dir became file"[..]))?;
        Ok(())
    })?;
    let kinds: BTreeMap<&str, DiffKind> =
        run.diff.entries().iter().map(|entry| (entry.path.as_str(), entry.kind)).collect();
    assert_eq!(kinds["keep"], DiffKind::MetadataChange);
    assert_eq!(kinds["k"], DiffKind::Modify);

    let receipt = fx.commit(&run)?;
    assert_eq!(receipt.transaction, run.transaction);
    assert_eq!(receipt.verified_paths, run.diff.len() as u64);
    assert!(receipt.operations >= run.diff.len() as u64);
    assert_eq!(receipt.revalidated_dependencies, (run.reads.len() + run.diff.len()) as u64);

    let expected: BTreeMap<String, Node> = [
        ("a.txt", file(b"changed", 0o644)),
        ("d", Node::Dir { mode: mode_of(&root, "d") }),
        ("d/new.txt", file(b"new", 0o644)),
        ("k", Node::Dir { mode: 0o755 }),
        ("k/inside", file(b"inside", 0o644)),
        ("keep", Node::Dir { mode: 0o700 }),
        ("moved", Node::Dir { mode: mode_of(&root, "moved") }),
        ("moved/sub", Node::Dir { mode: mode_of(&root, "moved/sub") }),
        ("moved/sub/y", file(b"y", mode_of(&root, "moved/sub/y"))),
        ("moved/x", file(b"x", mode_of(&root, "moved/x"))),
        ("newlink", Node::Link { target: b"../outside".to_vec() }),
        ("relink", Node::Link { target: b"d/new.txt".to_vec() }),
        ("script.sh", file(b"#!/bin/sh\n", 0o755)),
        ("t", Node::Dir { mode: 0o750 }),
        ("t/u", Node::Dir { mode: 0o750 }),
        ("t/u/v", Node::Dir { mode: 0o750 }),
        ("t/u/v/deep", file(b"deep", 0o644)),
        ("z", file(b"dir became file", 0o644)),
    ]
    .into_iter()
    .map(|(path, node)| (path.to_owned(), node))
    .collect();
    assert_eq!(fx.tree(), expected);
    assert!(fx.stage_is_empty());

    // The workspace now equals the run's final image: a new run sees no change.
    let again = fx.run(|vfs| {
        assert_eq!(&*vfs.read(&p("a.txt"))?, b"changed");
        Ok(())
    })?;
    assert!(again.diff.is_empty());
    Ok(())
}

#[test]
fn restrictive_directory_modes_are_applied_after_their_children() -> Result {
    let fx = Fixture::new()?;
    let run = fx.run(|vfs| {
        vfs.mkdir(&p("ro"), 0o555)?;
        vfs.mkdir(&p("ro/inner"), 0o500)?;
        vfs.write(&p("ro/inner/f"), Arc::from(&b"locked in"[..]))?;
        vfs.set_mode(&p("ro/inner/f"), 0o400)?;
        Ok(())
    })?;
    fx.commit(&run)?;
    let root = fx.root();
    assert_eq!(mode_of(&root, "ro"), 0o555);
    assert_eq!(mode_of(&root, "ro/inner"), 0o500);
    assert_eq!(mode_of(&root, "ro/inner/f"), 0o400);
    assert_eq!(std::fs::read(root.join("ro/inner/f"))?, b"locked in");
    // Let the temporary directory be removed.
    chmod(&root, "ro/inner", 0o700);
    chmod(&root, "ro", 0o700);
    Ok(())
}

#[test]
fn a_root_committer_leaves_a_changed_file_its_owner_and_a_new_one_its_directorys() -> Result {
    use std::os::unix::fs::MetadataExt as _;
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "theirs.txt", b"v1");
    write(&root, "shared/keep.txt", b"k");
    write(&root, "mine.txt", b"m");
    let root_committer = vsh_host::effective_uid() == 0;
    if root_committer {
        std::os::unix::fs::chown(root.join("theirs.txt"), Some(1000), Some(1001))?;
        std::os::unix::fs::chown(root.join("shared"), Some(1002), Some(1003))?;
    }
    let run = fx.run(|vfs| {
        vfs.write(&p("theirs.txt"), Arc::from(&b"v2"[..]))?;
        vfs.write(&p("shared/new.txt"), Arc::from(&b"n"[..]))?;
        vfs.write(&p("mine.txt"), Arc::from(&b"m2"[..]))?;
        vfs.write(&p("top.txt"), Arc::from(&b"t"[..]))?;
        Ok(())
    })?;
    fx.commit(&run)?;
    let owner = |name: &str| std::fs::symlink_metadata(root.join(name)).map(|meta| (meta.uid(), meta.gid()));
    assert_eq!(std::fs::read(root.join("theirs.txt"))?, b"v2");
    let me = (vsh_host::effective_uid(), std::fs::metadata(&root)?.gid());
    if root_committer {
        assert_eq!(owner("theirs.txt")?, (1000, 1001), "the replaced file's owner");
        assert_eq!(owner("shared/new.txt")?, (1002, 1003), "a new file's directory's owner");
    } else {
        assert_eq!(owner("theirs.txt")?.0, me.0);
    }
    // The committer's own files, and new ones where it owns the directory, stay its.
    assert_eq!(owner("mine.txt")?.0, me.0);
    assert_eq!(owner("top.txt")?.0, me.0);
    Ok(())
}

#[test]
fn external_edit_of_a_read_file_is_stale_and_survives() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "input.txt", b"v1");
    write(&root, "other.txt", b"untouched");
    let run = fx.run(|vfs| {
        let input = vfs.read(&p("input.txt"))?;
        vfs.write(&p("output.txt"), Arc::from([&input[..], b" processed"].concat()))?;
        vfs.write(&p("other.txt"), Arc::from(&b"rewritten"[..]))?;
        Ok(())
    })?;
    write(&root, "input.txt", b"v2 edited externally");
    let before = fx.tree();
    let error = fx.commit(&run).unwrap_err();
    assert_eq!(stale_paths(&error), vec![("input.txt".to_owned(), ConflictReason::Content)]);
    assert!(matches!(error, CommitError::Stale { total: 1, .. }));
    assert!(!error.workspace_may_be_changed());
    assert_eq!(fx.tree(), before);
    assert_eq!(std::fs::read(root.join("input.txt"))?, b"v2 edited externally");
    assert!(!root.join("output.txt").exists());
    assert!(fx.stage_is_empty());
    Ok(())
}

#[test]
fn a_mode_change_to_a_file_the_program_only_statted_is_stale() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "tool.sh", b"#!/bin/sh\n");
    chmod(&root, "tool.sh", 0o644);
    let run = fx.run(|vfs| {
        let meta = vfs.metadata(&p("tool.sh"))?;
        let verdict: &[u8] = if meta.mode & 0o111 == 0 { b"not executable" } else { b"executable" };
        vfs.write(&p("verdict.txt"), Arc::from(verdict))?;
        Ok(())
    })?;
    // Same bytes, same size: only the mode differs from what the program saw.
    chmod(&root, "tool.sh", 0o755);
    let before = fx.tree();
    let error = fx.commit(&run).unwrap_err();
    assert_eq!(stale_paths(&error), vec![("tool.sh".to_owned(), ConflictReason::Metadata)]);
    assert_eq!(fx.tree(), before);
    assert!(!root.join("verdict.txt").exists());
    Ok(())
}

#[test]
fn touching_the_mtime_of_a_read_file_is_not_stale() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "input.txt", b"same bytes");
    let run = fx.run(|vfs| {
        let input = vfs.read(&p("input.txt"))?;
        vfs.write(&p("copy.txt"), input)?;
        Ok(())
    })?;
    let handle = std::fs::File::options().write(true).open(root.join("input.txt"))?;
    handle.set_modified(SystemTime::now() - Duration::from_hours(1))?;
    drop(handle);
    fx.commit(&run)?;
    assert_eq!(std::fs::read(root.join("copy.txt"))?, b"same bytes");
    Ok(())
}

#[test]
fn unrelated_sibling_beside_a_created_file_is_not_stale() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "d/existing", b"e");
    let run = fx.run(|vfs| vfs.write(&p("d/created.txt"), Arc::from(&b"mine"[..])))?;
    write(&root, "d/sibling.txt", b"someone else's");
    fx.commit(&run)?;
    assert_eq!(std::fs::read(root.join("d/created.txt"))?, b"mine");
    assert_eq!(std::fs::read(root.join("d/sibling.txt"))?, b"someone else's");
    Ok(())
}

#[test]
fn new_entry_in_a_listed_directory_is_stale() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "d/one", b"1");
    let run = fx.run(|vfs| {
        let names = vfs.read_dir(&p("d"))?;
        vfs.write(&p("index.txt"), Arc::from(names.join("\n").into_bytes()))?;
        Ok(())
    })?;
    write(&root, "d/two", b"2");
    let error = fx.commit(&run).unwrap_err();
    assert_eq!(stale_paths(&error), vec![("d".to_owned(), ConflictReason::Listing)]);
    assert!(!root.join("index.txt").exists());
    Ok(())
}

#[test]
fn parent_swapped_for_a_symlink_is_refused_and_nothing_is_written_through_it() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "d/f", b"original");
    let target = fx.dir.path().join("outside-target");
    std::fs::create_dir(&target)?;
    let run = fx.run(|vfs| {
        vfs.write(&p("d/new.txt"), Arc::from(&b"new"[..]))?;
        vfs.write(&p("d/f"), Arc::from(&b"modified"[..]))?;
        Ok(())
    })?;
    std::fs::rename(root.join("d"), root.join("d.moved"))?;
    std::os::unix::fs::symlink(&target, root.join("d"))?;
    let error = fx.commit(&run).unwrap_err();
    let conflicts = stale_paths(&error);
    assert!(
        conflicts.contains(&(
            "d".to_owned(),
            ConflictReason::Kind { expected: Some(NodeKind::Directory), actual: Some(NodeKind::Symlink) }
        )),
        "{conflicts:?}"
    );
    assert_eq!(std::fs::read_dir(&target)?.count(), 0);
    assert_eq!(std::fs::read(root.join("d.moved/f"))?, b"original");
    assert!(!root.join("d.moved/new.txt").exists());
    // Revalidation alone reports the same.
    assert!(matches!(fx.committer.revalidate(&run.request(&fx.blobs)), Err(CommitError::Stale { .. })));
    Ok(())
}

#[test]
fn overlapping_transactions_committed_from_two_threads_have_exactly_one_winner() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    for round in 0..8 {
        write(&root, "counter.txt", format!("{round}").as_bytes());
        let runs: Vec<Run> = ["left", "right"]
            .iter()
            .map(|who| {
                fx.run(|vfs| {
                    let current = vfs.read(&p("counter.txt"))?;
                    let next = format!("{} +1 by {who}", String::from_utf8_lossy(&current));
                    vfs.write(&p("counter.txt"), Arc::from(next.into_bytes()))?;
                    vfs.write(&p(&format!("{who}-{round}.log")), Arc::from(&b"ran"[..]))?;
                    Ok(())
                })
            })
            .collect::<Result<_>>()?;
        let barrier = Barrier::new(2);
        let results: Vec<std::result::Result<CommitReceipt, CommitError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = runs
                .iter()
                .map(|run| {
                    let barrier = &barrier;
                    let blobs = &fx.blobs;
                    let root = &root;
                    scope.spawn(move || {
                        // Each thread has its own handles, like separate processes.
                        let workspace = Arc::new(CapDir::open(root).unwrap());
                        let committer = Committer::new(workspace, p(".vsh")).unwrap();
                        barrier.wait();
                        committer.commit(&run.request(blobs))
                    })
                })
                .collect();
            handles.into_iter().map(|handle| handle.join().unwrap()).collect()
        });
        let winners: Vec<usize> = (0..2).filter(|index| results[*index].is_ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let winner = winners[0];
        let loser = 1 - winner;
        // The loser read the counter (content) and replaced it (size and
        // mode, then content): the first facet that fails is named.
        let conflicts = stale_paths(results[loser].as_ref().unwrap_err());
        assert_eq!(conflicts.len(), 1, "{conflicts:?}");
        assert_eq!(conflicts[0].0, "counter.txt");
        assert!(matches!(conflicts[0].1, ConflictReason::Metadata | ConflictReason::Content), "{conflicts:?}");
        let who = ["left", "right"][winner];
        assert_eq!(std::fs::read(root.join("counter.txt"))?, format!("{round} +1 by {who}").into_bytes());
        assert!(root.join(format!("{who}-{round}.log")).exists());
        assert!(!root.join(format!("{}-{round}.log", ["left", "right"][loser])).exists());
    }
    Ok(())
}

#[test]
fn deleted_file_edited_externally_is_stale_and_kept() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "victim", b"v1");
    let run = fx.run(|vfs| vfs.unlink(&p("victim")))?;
    write(&root, "victim", b"v2, newer work");
    let error = fx.commit(&run).unwrap_err();
    assert_eq!(stale_paths(&error).len(), 1);
    assert_eq!(std::fs::read(root.join("victim"))?, b"v2, newer work");
    Ok(())
}

/// Let the fixture's last change lie past the point where a file deleted
/// unread is known by its stamp (100 ms).
fn settle() {
    std::thread::sleep(Duration::from_millis(150));
}

#[test]
fn a_file_deleted_unread_commits_by_its_stamp_without_being_read() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "victim", b"v1");
    write(&root, "tree/a", b"a");
    write(&root, "tree/b/c", b"c");
    settle();
    let run = fx.run(|vfs| {
        vfs.unlink(&p("victim"))?;
        vfs.remove_tree(&p("tree"))
    })?;
    let unread: Vec<_> = run.diff.entries().iter().filter(|e| e.before.is_some_and(|b| b.stamp.is_some())).collect();
    assert_eq!(unread.len(), 3, "{:?}", run.diff.entries());
    let reads = fx.ws.dir.counters().snapshot().reads;
    fx.commit(&run)?;
    assert_eq!(fx.ws.dir.counters().snapshot().reads, reads, "revalidation read no deleted file");
    assert!(!root.join("victim").exists() && !root.join("tree").exists());
    Ok(())
}

#[test]
fn a_file_deleted_unread_and_changed_since_is_stale_even_with_its_mtime_put_back() -> Result {
    // Rewritten with other bytes of the same size, its mtime set back: only
    // the ctime tells, and it does.
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "victim", b"v1");
    settle();
    let run = fx.run(|vfs| vfs.unlink(&p("victim")))?;
    assert!(run.diff.entries()[0].before.is_some_and(|before| before.stamp.is_some()));
    let mtime = std::fs::metadata(root.join("victim"))?.modified()?;
    settle();
    write(&root, "victim", b"v2");
    std::fs::File::options().write(true).open(root.join("victim"))?.set_modified(mtime)?;
    assert_eq!(std::fs::metadata(root.join("victim"))?.modified()?, mtime);
    let error = fx.commit(&run).unwrap_err();
    assert_eq!(stale_paths(&error), vec![("victim".to_owned(), ConflictReason::Precondition)]);
    assert_eq!(std::fs::read(root.join("victim"))?, b"v2");

    // The same bytes written again are another version too: unread, there
    // is nothing to tell them from other bytes, so the commit is stale
    // rather than deleting what it never saw.
    settle();
    let run = fx.run(|vfs| vfs.unlink(&p("victim")))?;
    assert!(run.diff.entries()[0].before.is_some_and(|before| before.stamp.is_some()));
    settle();
    write(&root, "victim", b"v2");
    assert_eq!(stale_paths(&fx.commit(&run).unwrap_err()).len(), 1);
    // Replaced by another file (another inode) with the same bytes: stale.
    settle();
    let run = fx.run(|vfs| vfs.unlink(&p("victim")))?;
    assert!(run.diff.entries()[0].before.is_some_and(|before| before.stamp.is_some()));
    std::fs::remove_file(root.join("victim"))?;
    write(&root, "victim", b"v2");
    assert_eq!(stale_paths(&fx.commit(&run).unwrap_err()).len(), 1);
    assert_eq!(std::fs::read(root.join("victim"))?, b"v2");
    Ok(())
}

#[test]
fn a_file_read_then_deleted_keeps_its_digest_and_a_touched_mtime_is_not_stale() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "victim", b"v1");
    settle();
    let run = fx.run(|vfs| {
        vfs.read(&p("victim"))?;
        vfs.unlink(&p("victim"))
    })?;
    assert_eq!(run.diff.entries()[0].before.and_then(|before| before.stamp), None);
    // A touch moves the stamp but not the bytes the run read: not stale.
    std::fs::File::options().write(true).open(root.join("victim"))?.set_modified(SystemTime::now())?;
    fx.commit(&run)?;
    assert!(!root.join("victim").exists());
    Ok(())
}

#[test]
fn conflicts_are_capped_but_counted() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    for index in 0..5 {
        write(&root, &format!("in{index}"), b"old");
    }
    let run = fx.run(|vfs| {
        for index in 0..5 {
            vfs.read(&p(&format!("in{index}")))?;
        }
        vfs.write(&p("out"), Arc::from(&b"x"[..]))
    })?;
    for index in 0..5 {
        write(&root, &format!("in{index}"), b"new!");
    }
    let mut request = run.request(&fx.blobs);
    request.max_conflicts = 2;
    match fx.committer.commit(&request) {
        Err(CommitError::Stale { conflicts, total }) => {
            assert_eq!(total, 5);
            let paths: Vec<&str> = conflicts.iter().map(|conflict| conflict.path.as_str()).collect();
            assert_eq!(paths, vec!["in0", "in1"]);
        }
        other => panic!("expected stale, got {other:?}"),
    }
    Ok(())
}

#[test]
fn hard_linked_files_content_change_keeps_the_alias_and_mode_change_is_refused() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "f", b"shared");
    chmod(&root, "f", 0o644);
    std::fs::hard_link(root.join("f"), root.join("alias"))?;
    let chmod_run = fx.run(|vfs| vfs.set_mode(&p("f"), 0o600))?;
    let error = fx.commit(&chmod_run).unwrap_err();
    assert!(matches!(&error, CommitError::HardLinked { path, links: 2 } if path.as_str() == "f"), "{error:?}");
    assert_eq!(mode_of(&root, "f"), 0o644);
    assert_eq!(mode_of(&root, "alias"), 0o644);

    let write_run = fx.run(|vfs| vfs.write(&p("f"), Arc::from(&b"replaced"[..])))?;
    fx.commit(&write_run)?;
    assert_eq!(std::fs::read(root.join("f"))?, b"replaced");
    assert_eq!(std::fs::read(root.join("alias"))?, b"shared");
    assert_eq!(std::fs::metadata(root.join("f"))?.nlink(), 1);
    Ok(())
}

/// A workspace whose `a` (`a`) a run changes to `b` and where it creates `c`
/// holding `created`, and a blob store (in its own directory, returned to
/// keep it) that holds none of it.
fn a_changed_and_c_created_with_an_empty_store(
    created: &'static [u8],
) -> Result<(Fixture, Run, tempfile::TempDir, BlobStore)> {
    let fx = Fixture::new()?;
    write(&fx.root(), "a", b"a");
    let run = fx.run(|vfs| {
        vfs.write(&p("a"), Arc::from(&b"b"[..]))?;
        vfs.write(&p("c"), Arc::from(created))
    })?;
    let other = tempfile::tempdir()?;
    let empty_blobs = BlobStore::open(&DataDir::open_external(other.path())?)?;
    Ok((fx, run, other, empty_blobs))
}

#[test]
fn missing_blob_refuses_with_nothing_written() -> Result {
    let (fx, run, _other, empty_blobs) = a_changed_and_c_created_with_an_empty_store(b"only in the other store")?;
    let before = fx.tree();
    let error = fx.committer.commit(&run.request(&empty_blobs)).unwrap_err();
    assert!(matches!(error, CommitError::Blob { .. }), "{error:?}");
    assert_eq!(fx.tree(), before);
    assert!(fx.stage_is_empty());
    Ok(())
}

#[test]
fn contents_held_in_memory_are_staged_without_the_blob_store_and_checked_first() -> Result {
    let (fx, run, _other, empty_blobs) = a_changed_and_c_created_with_an_empty_store(b"only in memory")?;
    // Bytes that are not their digest's (of the right sizes) are refused
    // before anything is written.
    let before = fx.tree();
    let forged: vsh_commit::MemoryContents = [(&b"b"[..], &b"x"[..]), (&b"only in memory"[..], &b"only in MEMORY"[..])]
        .into_iter()
        .map(|(real, forged)| (vsh_types::BlobId::of(real), Arc::from(forged)))
        .collect();
    let error = fx.committer.commit(&run.request(&empty_blobs).with_contents(&forged)).unwrap_err();
    assert!(matches!(error, CommitError::InvalidDiff { .. }), "{error:?}");
    assert_eq!(fx.tree(), before);
    assert!(fx.stage_is_empty());
    // The real bytes, in memory only, commit.
    let held: vsh_commit::MemoryContents = [&b"b"[..], &b"only in memory"[..]]
        .into_iter()
        .map(|bytes| (vsh_types::BlobId::of(bytes), Arc::from(bytes)))
        .collect();
    fx.committer.commit(&run.request(&empty_blobs).with_contents(&held))?;
    assert_eq!(std::fs::read(fx.root().join("a"))?, b"b");
    assert_eq!(std::fs::read(fx.root().join("c"))?, b"only in memory");
    Ok(())
}

#[test]
fn revalidate_applies_nothing() -> Result {
    let fx = Fixture::new()?;
    let run = fx.run(|vfs| vfs.write(&p("new"), Arc::from(&b"n"[..])))?;
    fx.committer.revalidate(&run.request(&fx.blobs))?;
    assert!(!fx.root().join("new").exists());
    fx.commit(&run)?;
    assert!(fx.root().join("new").exists());
    // The same diff again is stale: its precondition (absent) no longer holds.
    let error = fx.commit(&run).unwrap_err();
    assert_eq!(
        stale_paths(&error),
        vec![("new".to_owned(), ConflictReason::Kind { expected: None, actual: Some(NodeKind::File) })]
    );
    Ok(())
}

#[test]
fn malformed_diffs_are_refused_before_anything_is_observed() -> Result {
    let fx = Fixture::new()?;
    let reads = ReadSet::default();
    let file = NodeState::file_with(b"x", 0o644);
    let check = |entries: Vec<DiffEntry>, reason: &str| {
        let diff = CanonicalDiff::new(entries).expect("sorted");
        let request = CommitRequest::new(TransactionId::digest(b"bad"), &diff, &reads, &fx.blobs);
        match fx.committer.commit(&request) {
            Err(CommitError::InvalidDiff { reason: got, .. }) => assert_eq!(got, reason),
            other => panic!("expected an invalid diff ({reason}), got {other:?}"),
        }
    };
    let create = |path: &str| DiffEntry::between(p(path), None, Some(file)).unwrap();
    // Unsorted entries never make a diff: the order is the type's.
    assert_eq!(
        CanonicalDiff::new(vec![create("b"), create("a")]),
        Err(vsh_types::DiffOrderError::OutOfOrder { path: p("a") })
    );
    check(vec![create(".vsh/evil")], "path is within vsh's runtime or data directory");
    check(
        vec![DiffEntry::between(p(".vsh"), Some(NodeState::directory(0o700)), None).unwrap()],
        "path is within vsh's runtime or data directory",
    );
    let mut lying = create("a");
    lying.kind = DiffKind::Delete;
    check(vec![lying], "change kind does not match the before and after states");
    let mut no_content = create("a");
    no_content.after = Some(NodeState { content: None, ..file });
    check(vec![no_content], "a file state has no content digest");
    let mut wide_mode = create("a");
    wide_mode.after = Some(NodeState { mode: 0o17777, ..file });
    check(vec![wide_mode], "mode has bits outside 0o7777");
    let setid = "a file would be left with its setuid or setgid bit: vsh never writes one";
    for mode in [0o4755, 0o2755, 0o6711] {
        let mut forged = create("a");
        forged.after = Some(NodeState { mode, ..file });
        check(vec![forged], setid);
    }
    let kept = DiffEntry::between(p("a"), Some(NodeState::file_with(b"old", 0o4755)), Some(file)).unwrap();
    check(vec![DiffEntry { after: Some(NodeState { mode: 0o4755, ..file }), ..kept }], setid);
    check(vec![create("f"), create("f/child")], "parent is not a directory after the change");
    assert!(fx.tree().is_empty());
    Ok(())
}

#[test]
fn the_runtime_directory_keeps_itself_out_of_git_status_once_and_for_all() -> Result {
    let dir = tempfile::tempdir()?;
    let workspace = Arc::new(CapDir::open(dir.path())?);
    Committer::new(Arc::clone(&workspace), p(".vsh"))?;
    assert_eq!(std::fs::read(dir.path().join(".vsh/.gitignore"))?, b"*\n");
    // An operator's own file is never replaced.
    std::fs::write(dir.path().join(".vsh/.gitignore"), b"mine\n")?;
    Committer::new(workspace, p(".vsh"))?;
    assert_eq!(std::fs::read(dir.path().join(".vsh/.gitignore"))?, b"mine\n");
    // Nor does a runtime directory vsh may not write into stop the committer.
    let read_only = tempfile::tempdir()?;
    std::fs::create_dir(read_only.path().join(".vsh"))?;
    chmod(read_only.path(), ".vsh", 0o555);
    let opened = Committer::new(Arc::new(CapDir::open(read_only.path())?), p(".vsh"));
    chmod(read_only.path(), ".vsh", 0o755);
    opened?;
    Ok(())
}

#[test]
fn runtime_dir_symlink_is_refused() -> Result {
    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join("ws"))?;
    std::fs::create_dir(dir.path().join("elsewhere"))?;
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), dir.path().join("ws/.vsh"))?;
    let workspace = Arc::new(CapDir::open(&dir.path().join("ws"))?);
    assert!(matches!(Committer::new(workspace, p(".vsh")), Err(CommitError::Host { .. })));
    assert_eq!(std::fs::read_dir(dir.path().join("elsewhere"))?.count(), 0);
    Ok(())
}

#[test]
fn without_read_set_dependencies_preconditions_still_guard_the_apply() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    let reads = ReadSet::default();
    let new_file = NodeState::file_with(b"payload", 0o644);
    fx.blobs.put(b"payload")?;

    // The parent of a created file is a symlink now: refused, nothing written through it.
    let target = fx.dir.path().join("outside-target");
    std::fs::create_dir(&target)?;
    std::os::unix::fs::symlink(&target, root.join("d"))?;
    let create = canonical(vec![DiffEntry::between(p("d/new"), None, Some(new_file)).unwrap()]);
    let request = CommitRequest::new(TransactionId::digest(b"create"), &create, &reads, &fx.blobs);
    let error = fx.committer.commit(&request).unwrap_err();
    assert_eq!(stale_paths(&error), vec![("d/new".to_owned(), ConflictReason::Unreadable)]);
    assert_eq!(std::fs::read_dir(&target)?.count(), 0);

    // A directory to delete gained a child the diff does not delete.
    write(&root, "gone/known", b"k");
    chmod(&root, "gone", 0o755);
    chmod(&root, "gone/known", 0o644);
    let delete = canonical(vec![
        DiffEntry::between(p("gone"), Some(NodeState::directory(0o755)), None).unwrap(),
        DiffEntry::between(p("gone/known"), Some(NodeState::file_with(b"k", 0o644)), None).unwrap(),
    ]);
    write(&root, "gone/late", b"arrived after the preview");
    let request = CommitRequest::new(TransactionId::digest(b"delete"), &delete, &reads, &fx.blobs);
    let error = fx.committer.commit(&request).unwrap_err();
    assert_eq!(stale_paths(&error), vec![("gone".to_owned(), ConflictReason::Listing)]);
    assert_eq!(std::fs::read(root.join("gone/known"))?, b"k");

    // Without the late child the same diff applies.
    std::fs::remove_file(root.join("gone/late"))?;
    fx.committer.commit(&request)?;
    assert!(!root.join("gone").exists());
    Ok(())
}

#[test]
fn listing_the_workspace_root_ignores_the_runtime_dir() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "readme", b"r");
    let run = fx.run(|vfs| {
        let names = vfs.read_dir(&VPath::root())?;
        assert_eq!(names, vec!["readme".to_owned()]);
        vfs.write(&p("listing"), Arc::from(names.join(",").into_bytes()))
    })?;
    // vsh's own files change between preview and commit; the run never saw them.
    write(&root, ".vsh/unrelated-state", b"x");
    fx.commit(&run)?;
    assert_eq!(std::fs::read(root.join("listing"))?, b"readme");
    // A real new name at the root is a conflict for a run that listed it.
    let run = fx.run(|vfs| {
        let names = vfs.read_dir(&VPath::root())?;
        vfs.write(&p("listing"), Arc::from(names.join(",").into_bytes()))
    })?;
    write(&root, "newcomer", b"n");
    let error = fx.commit(&run).unwrap_err();
    assert_eq!(stale_paths(&error), vec![(String::new(), ConflictReason::Listing)]);
    Ok(())
}

#[test]
fn a_forged_diff_touching_a_protected_path_is_refused_before_anything_is_written() -> Result {
    let fixture = Fixture::new()?;
    let root = fixture.root();
    write(&root, ".git/config", b"[core]\n");
    write(&root, "config/.ENV", b"TOKEN=1\n");
    write(&root, "pkg/state/txlog", b"VSHTXL02");
    write(&root, "pkg/state/txlog.lock", b"");
    write(&root, "pkg/state/blobs/x", b"blob");
    write(&root, "made/txlog.lock", b"");
    write(&root, "kinds/txlog.lock", b"");
    std::os::unix::fs::symlink("elsewhere", root.join("kinds/txlog"))?;
    let before = tree(&root);
    let evil = NodeState::file_with(b"[core]\nhooksPath = /tmp/evil\n", 0o644);
    fixture.blobs.put(b"[core]\nhooksPath = /tmp/evil\n")?;
    let protected = Committer::new(Arc::clone(&fixture.ws.dir), p(".vsh"))?
        .with_protection(vsh_policy::CallPolicy::balanced_default(None));
    // Each diff's before states match the live workspace, so only the
    // protection check stands between it and the disk.
    for (path, before_state, after_state) in [
        (".git/config", Some(NodeState::file_with(b"[core]\n", 0o644)), Some(evil)),
        ("config/.ENV", Some(NodeState::file_with(b"TOKEN=1\n", 0o644)), None),
        (".GIT/hooks", None, Some(NodeState::directory(0o755))),
        ("pkg/state/blobs/x", Some(NodeState::file_with(b"blob", 0o644)), None),
        ("sub/.vsh", None, Some(NodeState::directory(0o700))),
        // vsh's store magic made in a directory of the workspace (a log
        // beside a lock already there): every later run would refuse it.
        ("made/txlog", None, Some(NodeState::file_with(b"blob", 0o644))),
        // Or by turning a `txlog` that was no log (a symlink) into a file.
        ("kinds/txlog", Some(NodeState::symlink(b"elsewhere")), Some(NodeState::file_with(b"blob", 0o644))),
    ] {
        let diff = canonical(vec![DiffEntry::between(p(path), before_state, after_state).expect("a change")]);
        let reads = ReadSet::default();
        let request = CommitRequest::new(TransactionId::digest(path.as_bytes()), &diff, &reads, &fixture.blobs);
        let refused = protected.commit(&request);
        assert!(
            matches!(&refused, Err(CommitError::Protected { path: at, .. }) if at.as_str() == path),
            "{path}: {refused:?}"
        );
        assert_eq!(tree(&root), before, "{path}");
    }
    // Without the check, the same forged diff would have been written.
    let diff = canonical(vec![
        DiffEntry::between(p(".git/config"), Some(NodeState::file_with(b"[core]\n", 0o644)), Some(evil))
            .expect("a change"),
    ]);
    let reads = ReadSet::default();
    fixture.committer.commit(&CommitRequest::new(
        TransactionId::digest(b"unchecked"),
        &diff,
        &reads,
        &fixture.blobs,
    ))?;
    assert_ne!(tree(&root), before);
    Ok(())
}

#[test]
fn a_receipt_counts_the_barriers_the_protocol_issues_and_the_committer_keeps_its_exclusions() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "a.txt", b"alpha");
    let run = fx.run(|vfs| {
        vfs.write(&p("a.txt"), Arc::from(&b"changed"[..]))?;
        vfs.write(&p("new.txt"), Arc::from(&b"new"[..]))
    })?;
    let receipt = fx.commit(&run)?;
    // Barriers on this commit's own files and directories only, no syncfs:
    // files: the plan, the 2 staged files, the intents (one batch) and the
    // marker (5; no done records: the plan makes no directory); directories:
    // after the intents the transaction directory, txn/ and .vsh (3), after
    // applying the workspace root (parent of both paths) and the transaction
    // directory (2; it holds the staged and the quarantined nodes), after the
    // marker the transaction directory (1): 6.
    let expected = vsh_commit::SyncCounts { file_fsyncs: 5, dir_fsyncs: 6, syncfs: 0 };
    assert_eq!(receipt.syncs, expected);
    // A ledger that is the commit point (the runtime's store) takes the
    // marker's place (its file and its directory barrier are not issued),
    // and .vsh, synced once by this committer with txn/ in it, is not synced
    // again: files 4, directories 2 + 2.
    let run = fx.run(|vfs| {
        vfs.write(&p("a.txt"), Arc::from(&b"again"[..]))?;
        vfs.write(&p("other.txt"), Arc::from(&b"other"[..]))
    })?;
    let ledger = vsh_commit::MemoryLedger::as_commit_point();
    ledger.insert(run.transaction, vsh_types::TransactionState::Revalidating);
    let receipt = fx.committer.commit_with_ledger(&run.request(&fx.blobs), &ledger)?;
    assert_eq!(receipt.syncs, vsh_commit::SyncCounts { file_fsyncs: 4, dir_fsyncs: 4, syncfs: 0 });
    assert_eq!(ledger.get(run.transaction), Some(vsh_types::TransactionState::Committed));
    // A plan that makes a directory journals its done records (the new
    // directory's inode): the journal's barrier, and the transaction
    // directory's after applying, come back; the new directory and its
    // parent are synced too: files (the plan, 1 staged file, the intents)
    // 3 + the done records 1, directories 2 + (the root, d/, the transaction
    // directory) 3.
    let run = fx.run(|vfs| {
        vfs.mkdir(&p("d"), 0o755)?;
        vfs.write(&p("d/f.txt"), Arc::from(&b"in d"[..]))
    })?;
    ledger.insert(run.transaction, vsh_types::TransactionState::Revalidating);
    let receipt = fx.committer.commit_with_ledger(&run.request(&fx.blobs), &ledger)?;
    assert_eq!(receipt.syncs, vsh_commit::SyncCounts { file_fsyncs: 4, dir_fsyncs: 5, syncfs: 0 });
    // Exclusions: the runtime directory always, others once each, never the root.
    let committer = Committer::new(Arc::clone(&fx.ws.dir), p(".vsh"))?
        .with_excluded(p("data"))
        .with_excluded(p("data"))
        .with_excluded(VPath::root());
    assert_eq!(committer.excluded(), &[p(".vsh"), p("data")][..]);
    assert_eq!(committer.runtime_dir(), &p(".vsh"));
    Ok(())
}

#[test]
fn a_committed_directory_is_swept_from_trash_and_garbage_left_behind_goes_at_the_next_recovery() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "a.txt", b"alpha");
    let run = fx.run(|vfs| vfs.write(&p("a.txt"), Arc::from(&b"changed"[..])))?;
    let committer = Committer::new(Arc::clone(&fx.ws.dir), p(".vsh"))?;
    committer.commit(&run.request(&fx.blobs))?;
    assert!(fx.stage_is_empty());
    // Dropping the committer waits for its sweepers: nothing is left.
    drop(committer);
    let trash = root.join(".vsh/trash");
    assert_eq!(std::fs::read_dir(&trash)?.count(), 0, "the sweeper removed the discarded directory");
    assert_eq!(std::fs::read(root.join("a.txt"))?, b"changed");

    // A process that stopped before its sweeper finished leaves garbage of
    // any shape (a file, a nested tree without owner access, a symlink that
    // must not be followed): the next recovery removes all of it.
    let outside = fx.dir.path().join("outside");
    std::fs::create_dir(&outside)?;
    std::fs::write(outside.join("keep.txt"), b"keep")?;
    std::fs::create_dir_all(trash.join("0123/stage/deep"))?;
    std::fs::write(trash.join("0123/stage/deep/f"), b"x")?;
    std::fs::write(trash.join("stray"), b"x")?;
    std::os::unix::fs::symlink(&outside, trash.join("0123/link"))?;
    std::fs::set_permissions(trash.join("0123/stage"), std::os::unix::fs::PermissionsExt::from_mode(0o000))?;
    assert!(fx.committer.recover(&vsh_commit::NoLedger)?.is_empty());
    assert_eq!(std::fs::read_dir(&trash)?.count(), 0, "recovery swept the garbage");
    assert_eq!(std::fs::read(outside.join("keep.txt"))?, b"keep", "a symlink in the trash is never followed");
    Ok(())
}

#[test]
fn transaction_directories_are_spread_over_the_filesystem_by_the_topdir_flag_of_txn() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    if rustix::fs::statfs(&root)?.f_type != 0xEF53 {
        // Only ext2/3/4 keep the flag; elsewhere it is a refused hint.
        println!("not ext4: nothing to check");
        return Ok(());
    }
    let topdir = |path: &std::path::Path| -> Result<bool> {
        let dir = std::fs::File::open(path)?;
        Ok(rustix::fs::ioctl_getflags(&dir)?.contains(rustix::fs::IFlags::TOPDIR))
    };
    write(&root, "a.txt", b"alpha");
    let run = fx.run(|vfs| vfs.write(&p("a.txt"), Arc::from(&b"changed"[..])))?;
    fx.committer.commit(&run.request(&fx.blobs))?;
    let txn = root.join(".vsh/txn");
    assert!(topdir(&txn)?, "txn/ was made with the flag");
    // A runtime directory made before the flag was set gets it when a
    // committer opens it.
    let flags = rustix::fs::ioctl_getflags(&std::fs::File::open(&txn)?)?;
    rustix::fs::ioctl_setflags(&std::fs::File::open(&txn)?, flags - rustix::fs::IFlags::TOPDIR)?;
    assert!(!topdir(&txn)?);
    let _reopened = Committer::new(Arc::clone(&fx.ws.dir), p(".vsh"))?;
    assert!(topdir(&txn)?, "the next committer set it");
    Ok(())
}

#[test]
fn try_session_takes_a_free_commit_lock_and_never_waits_for_a_held_one() -> Result {
    let fx = Fixture::new()?;
    let other = Committer::new(Arc::clone(&fx.ws.dir), p(".vsh"))?;
    let session = fx.committer.try_session()?.expect("nobody holds the lock");
    // Another committer (another open of the lock file, as another process
    // would have) finds it held and gets no session, at once.
    assert!(other.try_session()?.is_none());
    drop(session);
    let again = other.try_session()?.expect("the lock is free again");
    // A held session is a working one.
    assert!(again.recover(&vsh_commit::NoLedger)?.is_clean());
    Ok(())
}

/// Runs `act` the first time the commit reaches `at`, then lets it go on.
struct Act<F: Fn()> {
    at: vsh_commit::FaultPoint,
    then: F,
    done: std::sync::atomic::AtomicBool,
}

impl<F: Fn()> Act<F> {
    fn new(at: vsh_commit::FaultPoint, then: F) -> Self {
        Self { at, then, done: std::sync::atomic::AtomicBool::new(false) }
    }
}

impl<F: Fn()> vsh_commit::FaultInjector for Act<F> {
    fn crash_at(&self, point: vsh_commit::FaultPoint) -> bool {
        if point == self.at && !self.done.swap(true, std::sync::atomic::Ordering::SeqCst) {
            (self.then)();
        }
        false
    }
}

/// Commit `run` with a ledger that holds it in Revalidating, as a runtime's does.
fn commit_recorded(
    fx: &Fixture,
    run: &Run,
    faults: &dyn vsh_commit::FaultInjector,
) -> (std::result::Result<CommitReceipt, CommitError>, vsh_commit::MemoryLedger) {
    let ledger = vsh_commit::MemoryLedger::new();
    ledger.insert(run.transaction, vsh_types::TransactionState::Revalidating);
    let result = fx.committer.commit_with_faults(&run.request(&fx.blobs), &ledger, faults);
    (result, ledger)
}

#[test]
fn a_diff_with_more_entries_than_a_plan_holds_is_refused_before_anything_is_looked_at() -> Result {
    let fx = Fixture::new()?;
    let directory = Some(NodeState { kind: NodeKind::Directory, size: 0, mode: 0o755, content: None, stamp: None });
    // Not even a valid diff (no parent directory for any of them): the bound is checked first.
    let entries = usize::try_from(vsh_commit::format::MAX_PLAN_ENTRIES).unwrap() + 1;
    let diff = canonical(
        (0..entries).map(|index| DiffEntry::between(p(&format!("x/{index:08}")), None, directory).unwrap()).collect(),
    );
    let reads = ReadSet::default();
    let request = CommitRequest {
        transaction: TransactionId::from_bytes([3; 32]),
        diff: &diff,
        reads: &reads,
        blobs: &fx.blobs,
        contents: None,
        max_conflicts: 8,
    };
    let error = fx.committer.commit(&request).unwrap_err();
    assert!(
        matches!(&error, CommitError::InvalidDiff { reason, .. } if reason.contains("more entries than a plan holds")),
        "{error:?}"
    );
    assert!(fx.stage_is_empty());
    Ok(())
}

#[test]
fn a_directory_whose_parent_vanishes_before_it_is_made_rolls_back_every_earlier_operation() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "a.txt", b"alpha");
    std::fs::create_dir(root.join("z"))?;
    let run = fx.run(|vfs| {
        vfs.write(&p("a.txt"), Arc::from(&b"changed"[..]))?;
        vfs.mkdir(&p("z/q"), 0o755)
    })?;
    let before = fx.tree();
    // Operations: quarantine a.txt, install a.txt, make z/q. Once the
    // install is done, someone removes z: making z/q fails, and both
    // operations before it must be undone.
    let remove = Act::new(vsh_commit::FaultPoint::OperationApplied(1), || std::fs::remove_dir(root.join("z")).unwrap());
    let (result, ledger) = commit_recorded(&fx, &run, &remove);
    let error = result.unwrap_err();
    assert!(matches!(&error, CommitError::Apply { path, .. } if path.as_str() == "z/q"), "{error:?}");
    let mut expected = before;
    expected.remove("z");
    assert_eq!(fx.tree(), expected, "a.txt is back, and nothing of the commit is left");
    assert_eq!(ledger.get(run.transaction), Some(vsh_types::TransactionState::Failed));
    assert!(fx.stage_is_empty());
    Ok(())
}

#[test]
fn an_in_place_rollback_that_cannot_finish_leaves_the_ledger_saying_recovery_required() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "a.txt", b"alpha");
    let run = fx.run(|vfs| vfs.write(&p("a.txt"), Arc::from(&b"changed"[..])))?;
    let outside = fx.dir.path().join("outside");
    std::fs::create_dir(&outside)?;
    // After the quarantine, the transaction's staged a.txt becomes a symlink
    // (the install fails) and its journal garbage: the rollback cannot even
    // read what it would undo (a conflict before it records anything).
    let plant = Act::new(vsh_commit::FaultPoint::OperationApplied(0), || {
        let txn = std::fs::read_dir(root.join(".vsh/txn")).unwrap().next().unwrap().unwrap().path();
        std::fs::rename(txn.join("stage.1"), fx.dir.path().join("stage.moved")).unwrap();
        std::os::unix::fs::symlink(&outside, txn.join("stage.1")).unwrap();
        std::fs::write(txn.join("journal"), b"not a journal").unwrap();
    });
    let (result, ledger) = commit_recorded(&fx, &run, &plant);
    let error = result.unwrap_err();
    assert!(matches!(error, CommitError::RecoveryRequired { .. }), "{error:?}");
    assert_eq!(ledger.get(run.transaction), Some(vsh_types::TransactionState::RecoveryRequired));
    assert_eq!(std::fs::read_dir(&outside)?.count(), 0, "nothing went through the symlink");
    Ok(())
}

#[test]
fn a_hard_link_made_after_revalidation_stops_a_mode_change_before_it_is_applied() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "f", b"shared");
    chmod(&root, "f", 0o644);
    let run = fx.run(|vfs| vfs.set_mode(&p("f"), 0o600))?;
    let link = Act::new(vsh_commit::FaultPoint::CommitStatePersisted, || {
        std::fs::hard_link(root.join("f"), root.join("alias")).unwrap();
    });
    let (result, ledger) = commit_recorded(&fx, &run, &link);
    let error = result.unwrap_err();
    assert!(matches!(&error, CommitError::HardLinked { path, links: 2 } if path.as_str() == "f"), "{error:?}");
    assert_eq!((mode_of(&root, "f"), mode_of(&root, "alias")), (0o644, 0o644), "the alias's mode is untouched");
    assert_eq!(ledger.get(run.transaction), Some(vsh_types::TransactionState::Failed));
    Ok(())
}

#[test]
fn a_directory_someone_replaced_after_its_mode_change_is_left_as_they_made_it() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    std::fs::create_dir(root.join("d"))?;
    chmod(&root, "d", 0o755);
    let run = fx.run(|vfs| vfs.set_mode(&p("d"), 0o700))?;
    let crashed = fx.committer.commit_with_faults(
        &run.request(&fx.blobs),
        &vsh_commit::NoLedger,
        &vsh_commit::CrashAt::new(vsh_commit::FaultPoint::OperationApplied(0)),
    );
    assert!(matches!(crashed, Err(CommitError::FaultInjected(_))), "{crashed:?}");
    // Someone moves the directory away and makes their own, with the mode
    // the commit set: the same name and mode, another directory.
    std::fs::rename(root.join("d"), root.join("d.moved"))?;
    std::fs::create_dir(root.join("d"))?;
    chmod(&root, "d", 0o700);
    let report = fx.committer.recover(&vsh_commit::NoLedger)?;
    assert_eq!(mode_of(&root, "d"), 0o700, "their directory keeps its mode: {report:?}");
    assert_eq!(report.unresolved.len(), 1, "{report:?}");
    assert_eq!(report.unresolved[0].paths.iter().map(|left| left.path.as_str()).collect::<Vec<_>>(), vec!["d"]);
    Ok(())
}

#[test]
fn protection_lets_ordinary_work_through_even_beside_a_file_named_like_the_store() -> Result {
    let fixture = Fixture::new()?;
    let root = fixture.root();
    // A user's file that happens to be called txlog, without the lock file
    // beside it: not a vsh data directory.
    write(&root, "notes/txlog", b"my own log");
    write(&root, "notes/todo", b"old");
    let protected = Committer::new(Arc::clone(&fixture.ws.dir), p(".vsh"))?
        .with_protection(vsh_policy::CallPolicy::balanced_default(None));
    let run = fixture.run(|vfs| {
        vfs.write(&p("notes/todo"), Arc::from(&b"new"[..]))?;
        vfs.mkdir(&p("src"), 0o755)?;
        vfs.write(&p("src/main.rs"), Arc::from(&b"fn main() {}\n"[..]))
    })?;
    protected.commit(&run.request(&fixture.blobs))?;
    assert_eq!(std::fs::read(root.join("notes/todo"))?, b"new");
    assert_eq!(std::fs::read(root.join("src/main.rs"))?, b"fn main() {}\n");
    Ok(())
}

#[test]
fn a_name_no_program_can_see_appearing_in_a_directory_to_remove_makes_it_stale_and_survives() -> Result {
    use std::os::unix::ffi::OsStrExt;
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "gone/x", b"x");
    let run = fx.run(|vfs| vfs.remove_tree(&p("gone")))?;
    // Someone adds a file whose name is not UTF-8: no run could list it.
    let hidden = root.join("gone").join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    std::fs::write(&hidden, b"theirs")?;
    let error = fx.commit(&run).unwrap_err();
    assert_eq!(stale_paths(&error), vec![("gone".to_owned(), ConflictReason::Listing)], "{error:?}");
    assert_eq!(std::fs::read(&hidden)?, b"theirs");
    Ok(())
}

/// The one transaction directory a crashed commit left.
fn only_txn_dir(fx: &Fixture) -> std::path::PathBuf {
    let mut dirs: Vec<_> = std::fs::read_dir(fx.root().join(".vsh/txn")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.pop().unwrap()
}

/// Commit `run` without a ledger and crash at `point`.
fn crash_at(fx: &Fixture, run: &Run, point: vsh_commit::FaultPoint) {
    let crashed = fx.committer.commit_with_faults(
        &run.request(&fx.blobs),
        &vsh_commit::NoLedger,
        &vsh_commit::CrashAt::new(point),
    );
    assert!(matches!(crashed, Err(CommitError::FaultInjected(_))), "{crashed:?}");
}

/// A workspace whose a.txt (`alpha`) a commit changes to `changed`, crashed at `point` without a ledger.
fn a_txt_change_crashed_at(point: vsh_commit::FaultPoint) -> Result<Fixture> {
    let fx = Fixture::new()?;
    write(&fx.root(), "a.txt", b"alpha");
    let run = fx.run(|vfs| vfs.write(&p("a.txt"), Arc::from(&b"changed"[..])))?;
    crash_at(&fx, &run, point);
    Ok(fx)
}

#[test]
fn a_commit_directory_without_a_plan_holding_a_node_in_quarantine_is_a_conflict_and_keeps_it() -> Result {
    let fx = Fixture::new()?;
    write(&fx.root(), "a.txt", b"alpha");
    let run = fx.run(|vfs| vfs.write(&p("a.txt"), Arc::from(&b"changed"[..])))?;
    crash_at(&fx, &run, vsh_commit::FaultPoint::StageSynced);
    let dir = only_txn_dir(&fx);
    std::fs::remove_file(dir.join("plan"))?;
    for staged in std::fs::read_dir(&dir)? {
        let staged = staged?;
        if staged.file_name().to_string_lossy().starts_with("stage.") {
            std::fs::remove_file(staged.path())?;
        }
    }
    std::fs::write(dir.join("quarantine.0"), b"an old node")?;
    let report = fx.committer.recover(&vsh_commit::NoLedger)?;
    assert_eq!(report.conflicts.len(), 1, "{report:?}");
    assert_eq!(std::fs::read(dir.join("quarantine.0"))?, b"an old node");
    Ok(())
}

#[test]
fn with_its_journal_gone_an_applied_mode_change_or_directory_is_evidence_of_a_commit() -> Result {
    type Change = fn(&mut VirtualFs) -> std::result::Result<(), VfsError>;
    let cases: [(&str, Change); 2] =
        [("mode", |vfs| vfs.set_mode(&p("f"), 0o600)), ("directory", |vfs| vfs.mkdir(&p("made"), 0o755))];
    for (case, change) in cases {
        let fx = Fixture::new()?;
        write(&fx.root(), "f", b"f");
        chmod(&fx.root(), "f", 0o644);
        let run = fx.run(change)?;
        crash_at(&fx, &run, vsh_commit::FaultPoint::Applied);
        // Without the journal nothing says what was applied, but the
        // workspace shows it was: recovery refuses to guess.
        std::fs::remove_file(only_txn_dir(&fx).join("journal"))?;
        let changed = fx.tree();
        let report = fx.committer.recover(&vsh_commit::NoLedger)?;
        assert_eq!(report.conflicts.len(), 1, "{case}: {report:?}");
        assert_eq!(fx.tree(), changed, "{case}: nothing is touched");
    }
    Ok(())
}

#[test]
fn a_directory_someone_swapped_for_the_one_the_commit_made_is_not_removed_by_the_rollback() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    let run = fx.run(|vfs| vfs.mkdir(&p("made"), 0o755))?;
    // The commit's own directory (its inode journaled as done) is removed.
    crash_at(&fx, &run, vsh_commit::FaultPoint::Applied);
    let report = fx.committer.recover(&vsh_commit::NoLedger)?;
    assert_eq!(report.rolled_back, vec![run.transaction], "{report:?}");
    assert!(!root.join("made").exists());
    crash_at(&fx, &run, vsh_commit::FaultPoint::Applied);
    // Someone moves the commit's directory away and makes their own there.
    std::fs::rename(root.join("made"), root.join("made.moved"))?;
    std::fs::create_dir(root.join("made"))?;
    let report = fx.committer.recover(&vsh_commit::NoLedger)?;
    assert!(root.join("made").is_dir(), "their directory stays: {report:?}");
    assert_eq!(report.unresolved.len(), 1, "{report:?}");
    Ok(())
}

#[test]
fn an_old_node_changed_in_quarantine_is_restored_but_named_as_not_holding_its_before_state() -> Result {
    let fx = a_txt_change_crashed_at(vsh_commit::FaultPoint::Applied)?;
    let root = fx.root();
    let slot = only_txn_dir(&fx).join("quarantine.0");
    assert_eq!(std::fs::read(&slot)?, b"alpha");
    std::fs::write(&slot, b"alpha, changed while it waited")?;
    let report = fx.committer.recover(&vsh_commit::NoLedger)?;
    assert_eq!(report.unresolved.len(), 1, "{report:?}");
    let left = &report.unresolved[0].paths;
    assert!(
        left.iter().any(|left| left.path == p("a.txt") && left.reason == vsh_commit::LeftReason::StateMismatch),
        "{report:?}"
    );
    assert_eq!(std::fs::read(root.join("a.txt"))?, b"alpha, changed while it waited", "nothing is lost");
    Ok(())
}

#[test]
fn a_child_changed_inside_a_quarantined_directory_makes_the_rollback_name_the_directory() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "old/x", b"x");
    write(&root, "old/y", b"y");
    let run = fx.run(|vfs| vfs.remove_tree(&p("old")))?;
    crash_at(&fx, &run, vsh_commit::FaultPoint::Applied);
    // The whole directory waits in quarantine; someone edits a file inside it.
    let slot = only_txn_dir(&fx).join("quarantine.0");
    std::fs::write(slot.join("x"), b"x, edited in quarantine")?;
    let report = fx.committer.recover(&vsh_commit::NoLedger)?;
    assert_eq!(report.unresolved.len(), 1, "{report:?}");
    // The operation that moved the directory is named: its path does not
    // hold its before state, and nothing of the edit is lost.
    let left = &report.unresolved[0].paths;
    assert!(
        left.iter().any(|left| left.path == p("old") && left.reason == vsh_commit::LeftReason::StateMismatch),
        "{report:?}"
    );
    assert_eq!(std::fs::read(root.join("old/x"))?, b"x, edited in quarantine");
    Ok(())
}

#[test]
fn without_read_set_dependencies_a_created_files_missing_parent_is_stale() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    let reads = ReadSet::default();
    fx.blobs.put(b"payload")?;
    // The parent is gone: the created path itself is still absent, so only
    // the parent check tells the commit that it cannot be made.
    let create =
        canonical(vec![DiffEntry::between(p("d/new"), None, Some(NodeState::file_with(b"payload", 0o644))).unwrap()]);
    let request = CommitRequest::new(TransactionId::digest(b"create"), &create, &reads, &fx.blobs);
    let error = fx.committer.commit(&request).unwrap_err();
    let expected = ConflictReason::Kind { expected: Some(NodeKind::Directory), actual: None };
    assert_eq!(stale_paths(&error), vec![("d".to_owned(), expected)], "{error:?}");
    assert!(!root.join("d").exists());
    Ok(())
}

#[test]
fn a_read_only_directory_the_commit_deletes_is_cleaned_up_without_privileges() -> Result {
    // Emptying a quarantined directory whose mode denies its owner writing
    // needs that bit back first: root would not notice, so run as nobody too.
    if !support::also_as_nobody("a_read_only_directory_the_commit_deletes_is_cleaned_up_without_privileges") {
        return Ok(());
    }
    let fx = Fixture::new()?;
    let root = fx.root();
    // The directory itself must be writable to be renamed into quarantine
    // (its `..` changes); the one inside it need not be.
    write(&root, "ro/inner/f", b"f");
    chmod(&root, "ro/inner", 0o555);
    let run = fx.run(|vfs| vfs.remove_tree(&p("ro")))?;
    fx.commit(&run)?;
    assert!(!root.join("ro").exists());
    assert!(fx.stage_is_empty(), "the commit directory is gone, quarantined nodes and all");
    Ok(())
}

#[test]
fn an_old_node_left_in_the_first_quarantine_slot_is_reported_not_a_conflict() -> Result {
    let fx = a_txt_change_crashed_at(vsh_commit::FaultPoint::Applied)?;
    let root = fx.root();
    // Someone replaces the installed a.txt with their own file.
    std::fs::remove_file(root.join("a.txt"))?;
    write(&root, "a.txt", b"theirs");
    let report = fx.committer.recover(&vsh_commit::NoLedger)?;
    assert!(report.conflicts.is_empty(), "{report:?}");
    assert_eq!(report.unresolved.len(), 1, "{report:?}");
    let kept = report.unresolved[0].paths.iter().find_map(|left| left.kept.clone()).expect("the old a.txt is kept");
    assert!(kept.as_str().ends_with("quarantine.0"), "{kept}");
    assert_eq!(std::fs::read(root.join(kept.as_str()))?, b"alpha");
    assert_eq!(std::fs::read(root.join("a.txt"))?, b"theirs");
    Ok(())
}

#[test]
fn a_node_swapped_into_a_quarantine_slot_is_never_put_into_the_workspace() -> Result {
    let fx = a_txt_change_crashed_at(vsh_commit::FaultPoint::Applied)?;
    let root = fx.root();
    // Another file (another inode) takes the old a.txt's place in quarantine.
    let slot = only_txn_dir(&fx).join("quarantine.0");
    std::fs::write(fx.dir.path().join("planted"), b"not what was quarantined")?;
    std::fs::rename(fx.dir.path().join("planted"), &slot)?;
    let report = fx.committer.recover(&vsh_commit::NoLedger)?;
    assert!(!root.join("a.txt").exists(), "the planted node is not moved to a.txt: {report:?}");
    assert_eq!(std::fs::read(&slot)?, b"not what was quarantined");
    assert_eq!(report.unresolved.len(), 1, "{report:?}");
    Ok(())
}

#[test]
fn a_committed_transactions_quarantine_slot_past_its_operations_is_ignored_by_the_keep_step() -> Result {
    let fx = a_txt_change_crashed_at(vsh_commit::FaultPoint::CommitMarkerSynced)?;
    let root = fx.root();
    let dir = only_txn_dir(&fx);
    let plan = vsh_commit::format::Plan::decode(
        &std::fs::read(dir.join("plan"))?,
        &vsh_types::AuthorityKey::unauthenticated(),
    )?
    .0;
    // A slot named by the number of operations: one past the last index.
    std::fs::write(dir.join(format!("quarantine.{}", plan.operations.len())), b"planted")?;
    let report = fx.committer.recover(&vsh_commit::NoLedger)?;
    assert!(report.kept.is_empty(), "{report:?}");
    assert_eq!(std::fs::read(root.join("a.txt"))?, b"changed", "rolled forward");
    Ok(())
}

#[test]
fn a_diff_removing_an_ancestor_of_an_excluded_data_directory_is_refused() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "state/data/txlog", b"records");
    let committer = Committer::new(Arc::clone(&fx.ws.dir), p(".vsh"))?.with_excluded(p("state/data"));
    let reads = ReadSet::default();
    fx.blobs.put(b"f")?;
    // Removing it, or turning it into a file, would take the data directory with it.
    for after in [None, Some(NodeState::file_with(b"f", 0o644))] {
        let diff = canonical(vec![DiffEntry::between(p("state"), Some(NodeState::directory(0o755)), after).unwrap()]);
        let request = CommitRequest::new(TransactionId::digest(b"remove state"), &diff, &reads, &fx.blobs);
        let error = committer.commit(&request).unwrap_err();
        assert!(
            matches!(&error, CommitError::InvalidDiff { reason, .. } if reason.contains("ancestor")),
            "{after:?}: {error:?}"
        );
    }
    assert_eq!(std::fs::read(root.join("state/data/txlog"))?, b"records");
    Ok(())
}

#[test]
fn a_protection_rule_for_one_kind_of_change_is_held_to_that_kind_at_commit() -> Result {
    let fx = Fixture::new()?;
    let root = fx.root();
    write(&root, "keep/old", b"old");
    write(&root, "fresh/x", b"x");
    // Files under keep/ may change but not go; nothing may be created under fresh/.
    let policy = vsh_policy::PolicyFile::parse(
        "version = 1\n[[protect]]\npattern = \"keep/**\"\naccess = \"delete\"\n\n[[protect]]\npattern = \"fresh/**\"\naccess = \"create\"\n",
    )?;
    let protected = Committer::new(Arc::clone(&fx.ws.dir), p(".vsh"))?.with_protection(policy.calls().clone());
    let reads = ReadSet::default();
    fx.blobs.put(b"new")?;
    let new = NodeState::file_with(b"new", 0o644);
    for (path, before, after, refused) in [
        ("keep/old", Some(NodeState::file_with(b"old", 0o644)), None, true),
        ("fresh/y", None, Some(new), true),
        ("keep/old", Some(NodeState::file_with(b"old", 0o644)), Some(new), false),
        ("fresh/x", Some(NodeState::file_with(b"x", 0o644)), Some(new), false),
    ] {
        let diff = canonical(vec![DiffEntry::between(p(path), before, after).unwrap()]);
        let request = CommitRequest::new(TransactionId::digest(path.as_bytes()), &diff, &reads, &fx.blobs);
        let result = protected.commit(&request);
        assert_eq!(matches!(result, Err(CommitError::Protected { .. })), refused, "{path} {after:?}: {result:?}");
    }
    Ok(())
}

#[test]
fn someones_node_an_interrupted_undo_carried_into_the_stage_goes_back_to_its_path() -> Result {
    // Everything applied, no marker: recovery rolls back, undoing the install.
    let last = vsh_commit::FaultPoint::OperationApplied(1);
    let fx = a_txt_change_crashed_at(last)?;
    let root = fx.root();
    let dir = only_txn_dir(&fx);
    let plan = vsh_commit::format::Plan::decode(
        &std::fs::read(dir.join("plan"))?,
        &vsh_types::AuthorityKey::unauthenticated(),
    )?
    .0;
    let install = plan
        .operations
        .iter()
        .position(|operation| matches!(operation.action, vsh_commit::format::Action::Install))
        .expect("the change installs a.txt");
    assert_eq!(std::fs::read(root.join("a.txt"))?, b"changed", "applied");
    // Someone saved a.txt over ours just as an undo had judged the node there
    // ours, so the undo's move carried theirs into the stage; then it crashed.
    std::fs::remove_file(root.join("a.txt"))?;
    std::fs::write(dir.join(format!("stage.{install}")), b"their saved version")?;
    let report = fx.committer.recover(&vsh_commit::NoLedger)?;
    assert_eq!(std::fs::read(root.join("a.txt"))?, b"their saved version", "theirs is back at its path: {report:?}");
    // The path is left for an operator, the old node kept where recovery says.
    let left: Vec<_> = report.unresolved.iter().flat_map(|u| u.paths.iter()).collect();
    assert!(!left.is_empty() && left.iter().all(|left| left.path.as_str() == "a.txt"), "{report:?}");
    let kept = left.iter().find_map(|left| left.kept.as_ref()).expect("the old node is kept");
    assert_eq!(std::fs::read(root.join(kept.as_str()))?, b"alpha");
    Ok(())
}
