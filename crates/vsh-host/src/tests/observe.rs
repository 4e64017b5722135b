//! Observation: `lstat`, `read_file`, `hash_file`, `read_link`, `list_dir`, counters.

use std::fs;
use std::os::unix::fs::MetadataExt;

use rustix::fs::{CWD, Mode};
use vsh_types::{BlobId, VPath};

use super::{Fixture, STRATEGIES, p};
use crate::{CounterSnapshot, HostDirEntry, HostError, HostKind, WritableDir};

#[test]
fn lstat_reports_kinds_without_following_the_leaf() {
    for strategy in STRATEGIES {
        let fx = Fixture::new(strategy);
        fx.write("f.txt", b"hello");
        fx.mkdir("d");
        fx.symlink("f.txt", "link");
        fx.symlink(fx.outside(""), "escape");

        let file = fx.dir.lstat(&p("f.txt")).unwrap().unwrap();
        let meta = fs::symlink_metadata(fx.ws("f.txt")).unwrap();
        assert_eq!(file.kind, HostKind::File);
        assert_eq!(file.size, 5);
        assert_eq!(file.mode, meta.mode() & 0o7777);
        assert_eq!((file.identity.dev, file.identity.ino), (meta.dev(), meta.ino()));
        assert_eq!(file.nlink, 1);
        assert_eq!(file.mtime_ns, i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()));
        assert_eq!(file.ctime_ns, i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()));

        assert_eq!(fx.dir.lstat(&p("d")).unwrap().unwrap().kind, HostKind::Directory);

        // The link itself: its size is the target's length, not the file's.
        let link = fx.dir.lstat(&p("link")).unwrap().unwrap();
        assert_eq!(link.kind, HostKind::Symlink);
        assert_eq!(link.size, "f.txt".len() as u64);
        let escape = fx.dir.lstat(&p("escape")).unwrap().unwrap();
        assert_eq!(escape.kind, HostKind::Symlink, "{strategy:?}");

        assert_eq!(fx.dir.lstat(&p("missing")).unwrap(), None);
        assert_eq!(fx.dir.lstat(&p("missing/deeper/still")).unwrap(), None);
        assert_eq!(fx.dir.lstat(&p("d/missing")).unwrap(), None);

        let root = fx.dir.lstat(&VPath::root()).unwrap().unwrap();
        assert_eq!(root.kind, HostKind::Directory);
        assert_eq!(root.identity, fx.dir.identity().unwrap());
    }
}

#[test]
fn lstat_refuses_symlink_and_file_ancestors() {
    for strategy in STRATEGIES {
        let fx = Fixture::new(strategy);
        fx.write("f.txt", b"x");
        fx.mkdir("d/e");
        fx.symlink("e", "d/inner_link");
        let (dir_links, _) = fx.escape_links();

        for link in dir_links {
            let err = fx.dir.lstat(&p(&format!("{link}/secret.txt"))).unwrap_err();
            assert!(
                matches!(&err, HostError::SymlinkInPath { path } if path.as_str() == link),
                "{strategy:?}: {err:?}"
            );
        }
        // Even a symlink that stays inside is not followed; the error names the link.
        let err = fx.dir.lstat(&p("d/inner_link/x/y")).unwrap_err();
        assert!(matches!(&err, HostError::SymlinkInPath { path } if path.as_str() == "d/inner_link"), "{err:?}");

        let err = fx.dir.lstat(&p("f.txt/x")).unwrap_err();
        assert!(matches!(&err, HostError::NotADirectory { path } if path.as_str() == "f.txt"), "{err:?}");
        let err = fx.dir.lstat(&p("f.txt/x/y")).unwrap_err();
        assert!(matches!(&err, HostError::NotADirectory { path } if path.as_str() == "f.txt"), "{err:?}");
    }
}

#[test]
fn read_file_returns_bytes_and_the_stat_they_were_read_under() {
    for strategy in STRATEGIES {
        let fx = Fixture::new(strategy);
        fx.mkdir("d");
        fx.write("d/f.txt", b"hello world");
        fx.write("empty", b"");

        let content = fx.dir.read_file(&p("d/f.txt"), 1024).unwrap();
        assert_eq!(content.bytes, b"hello world");
        assert_eq!(content.stat, fx.dir.lstat(&p("d/f.txt")).unwrap().unwrap());
        // A limit equal to the size is allowed.
        assert_eq!(fx.dir.read_file(&p("d/f.txt"), 11).unwrap().bytes.len(), 11);
        assert_eq!(fx.dir.read_file(&p("empty"), 0).unwrap().bytes, b"");
    }
}

#[test]
fn read_file_refuses_what_is_not_a_regular_file() {
    for strategy in STRATEGIES {
        let fx = Fixture::new(strategy);
        fx.write("f.txt", b"x");
        fx.mkdir("d");
        fx.symlink("f.txt", "link");
        rustix::fs::mkfifoat(CWD, fx.ws("fifo"), Mode::from_raw_mode(0o600)).unwrap();

        for path in ["d", "link", "fifo", ""] {
            let path = if path.is_empty() { VPath::root() } else { p(path) };
            let err = fx.dir.read_file(&path, 1024).unwrap_err();
            assert!(matches!(&err, HostError::NotAFile { path: at } if *at == path), "{strategy:?} {path}: {err:?}");
            let err = fx.dir.hash_file(&path).unwrap_err();
            assert!(matches!(&err, HostError::NotAFile { path: at } if *at == path), "{strategy:?} {path}: {err:?}");
        }
        let err = fx.dir.read_file(&p("missing"), 1024).unwrap_err();
        assert!(matches!(&err, HostError::NotFound { path } if path.as_str() == "missing"), "{err:?}");
        let err = fx.dir.read_file(&p("link/x"), 1024).unwrap_err();
        assert!(matches!(&err, HostError::SymlinkInPath { path } if path.as_str() == "link"), "{err:?}");
        let err = fx.dir.read_file(&p("f.txt/x"), 1024).unwrap_err();
        assert!(matches!(&err, HostError::NotADirectory { path } if path.as_str() == "f.txt"), "{err:?}");
    }
}

#[test]
fn read_file_ends_reads_the_head_and_the_tail_in_one_open() {
    for strategy in STRATEGIES {
        let fx = Fixture::new(strategy);
        fx.write("log", b"HEADER|frame one|frame two");
        let (head, tail, stat) = fx.dir.read_file_ends(&p("log"), 6, 17, 1024).unwrap();
        assert_eq!((head.as_slice(), tail.as_slice()), (&b"HEADER"[..], &b"frame two"[..]), "{strategy:?}");
        assert_eq!(stat, fx.dir.lstat(&p("log")).unwrap().unwrap());
        // A head longer than the file is the file; a tail from its end or past it is empty.
        let (head, tail, _) = fx.dir.read_file_ends(&p("log"), 100, 26, 1024).unwrap();
        assert_eq!((head.len(), tail.len()), (26, 0));
        assert!(fx.dir.read_file_ends(&p("log"), 6, 40, 1024).unwrap().1.is_empty());
        // The bound is the whole file's; what is not a regular file is refused.
        let err = fx.dir.read_file_ends(&p("log"), 6, 17, 25).unwrap_err();
        assert!(matches!(err, HostError::TooLarge { size: 26, max: 25, .. }), "{err:?}");
        fx.symlink("log", "link");
        let err = fx.dir.read_file_ends(&p("link"), 6, 17, 1024).unwrap_err();
        assert!(matches!(err, HostError::NotAFile { .. }), "{err:?}");
    }
}

#[test]
fn read_file_range_reads_a_slice_and_the_stat_it_was_read_under() {
    for strategy in STRATEGIES {
        let fx = Fixture::new(strategy);
        fx.write("log", b"HEADER|frame one|frame two");
        let slice = fx.dir.read_file_range(&p("log"), 7, 9).unwrap();
        assert_eq!(slice.bytes, b"frame one", "{strategy:?}");
        assert_eq!(slice.stat, fx.dir.lstat(&p("log")).unwrap().unwrap());
        // Short at the end, empty from it or past it.
        assert_eq!(fx.dir.read_file_range(&p("log"), 17, 100).unwrap().bytes, b"frame two");
        assert!(fx.dir.read_file_range(&p("log"), 26, 10).unwrap().bytes.is_empty());
        assert!(fx.dir.read_file_range(&p("log"), u64::MAX, u32::MAX).unwrap().bytes.is_empty());
        fx.symlink("log", "link");
        let err = fx.dir.read_file_range(&p("link"), 0, 4).unwrap_err();
        assert!(matches!(err, HostError::NotAFile { .. }), "{err:?}");
    }
    // What is allocated is what the file has there, not what was asked for:
    // a sparse file larger than memory is read a slice at a time.
    let fx = Fixture::new(STRATEGIES[0]);
    let huge = fs::File::create(fx.ws("huge")).unwrap();
    huge.set_len(1 << 36).unwrap();
    let slice = fx.dir.read_file_range(&p("huge"), (1 << 36) - 3, u32::MAX).unwrap();
    assert_eq!(slice.bytes, [0, 0, 0]);
}

#[test]
fn read_file_too_large_is_refused_before_reading() {
    let fx = Fixture::new(STRATEGIES[0]);
    fx.write("big", &[7_u8; 100]);
    let err = fx.dir.read_file(&p("big"), 99).unwrap_err();
    assert!(matches!(&err, HostError::TooLarge { path, size: 100, max: 99 } if path.as_str() == "big"), "{err:?}");
    assert_eq!(err.errno(), Some(rustix::io::Errno::FBIG.raw_os_error()));
    // Refused before anything is allocated: a sparse file larger than memory is fine.
    let huge = fs::File::create(fx.ws("huge")).unwrap();
    huge.set_len(1 << 36).unwrap();
    let err = fx.dir.read_file(&p("huge"), 1 << 20).unwrap_err();
    assert!(matches!(err, HostError::TooLarge { size, .. } if size == 1 << 36), "{err:?}");
}

#[test]
fn hash_file_streams_to_the_blob_id() {
    for strategy in STRATEGIES {
        let fx = Fixture::new(strategy);
        // Several 64 KiB chunks and a partial one.
        let bytes: Vec<u8> = (0..200_003_u32).map(|index| (index % 251) as u8).collect();
        fx.write("data.bin", &bytes);
        fx.write("empty", b"");
        let (id, stat) = fx.dir.hash_file(&p("data.bin")).unwrap();
        assert_eq!(id, BlobId::of(&bytes));
        assert_eq!(stat.size, bytes.len() as u64);
        assert_eq!(fx.dir.hash_file(&p("empty")).unwrap().0, BlobId::of(b""));
    }
}

#[test]
fn content_changed_compares_size_times_and_inode() {
    let fx = Fixture::new(STRATEGIES[0]);
    fx.write("f", b"abc");
    let before = fx.dir.lstat(&p("f")).unwrap().unwrap();
    assert!(!before.content_changed(&before));
    let mut later = before;
    later.mode = 0o600;
    later.nlink = 2;
    assert!(!before.content_changed(&later), "mode and link count are not content");
    for change in 0..4 {
        let mut later = before;
        match change {
            0 => later.size += 1,
            1 => later.mtime_ns += 1,
            2 => later.ctime_ns += 1,
            _ => later.identity.ino += 1,
        }
        assert!(before.content_changed(&later), "change {change}");
    }
}

#[test]
fn read_link_returns_the_target_verbatim() {
    for strategy in STRATEGIES {
        let fx = Fixture::new(strategy);
        fx.write("f.txt", b"x");
        fx.mkdir("d");
        fx.symlink("../f.txt", "d/up");
        fx.symlink("/etc/passwd", "abs");
        fx.symlink("nowhere/at/all", "dangling");

        assert_eq!(fx.dir.read_link(&p("d/up"), 100).unwrap(), b"../f.txt");
        assert_eq!(fx.dir.read_link(&p("abs"), 100).unwrap(), b"/etc/passwd");
        assert_eq!(fx.dir.read_link(&p("dangling"), 14).unwrap(), b"nowhere/at/all");

        let err = fx.dir.read_link(&p("dangling"), 13).unwrap_err();
        assert!(matches!(&err, HostError::TooLarge { size: 14, max: 13, .. }), "{err:?}");
        for not_link in ["f.txt", "d"] {
            let err = fx.dir.read_link(&p(not_link), 100).unwrap_err();
            assert!(matches!(&err, HostError::NotASymlink { path } if path.as_str() == not_link), "{err:?}");
        }
        assert!(matches!(fx.dir.read_link(&VPath::root(), 100), Err(HostError::NotASymlink { .. })));
        assert!(matches!(fx.dir.read_link(&p("missing"), 100), Err(HostError::NotFound { .. })));
        let err = fx.dir.read_link(&p("abs/x"), 100).unwrap_err();
        assert!(matches!(&err, HostError::SymlinkInPath { path } if path.as_str() == "abs"), "{err:?}");
    }
}

#[test]
fn list_dir_lists_names_and_kinds() {
    for strategy in STRATEGIES {
        let fx = Fixture::new(strategy);
        fx.mkdir("d/sub");
        fx.write("d/f.txt", b"x");
        fx.symlink("f.txt", "d/link");
        rustix::fs::mkfifoat(CWD, fx.ws("d/fifo"), Mode::from_raw_mode(0o600)).unwrap();
        fs::write(fx.ws("d/bytes\u{e9}"), b"").unwrap();

        let mut entries = fx.dir.list_dir(&p("d")).unwrap();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        // tmpfs and ext4 report d_type; a filesystem that does not would give None.
        let expected = [
            ("bytes\u{e9}", HostKind::File),
            ("f.txt", HostKind::File),
            ("fifo", HostKind::Other),
            ("link", HostKind::Symlink),
            ("sub", HostKind::Directory),
        ];
        assert_eq!(entries.len(), expected.len(), "{entries:?}");
        for (entry, (name, kind)) in entries.iter().zip(expected) {
            assert_eq!(entry.name, name.as_bytes());
            assert!(entry.kind.is_none() || entry.kind == Some(kind), "{entry:?}");
        }

        assert_eq!(fx.dir.list_dir(&p("d/sub")).unwrap(), Vec::<HostDirEntry>::new());
        let root: Vec<Vec<u8>> = fx.dir.list_dir(&VPath::root()).unwrap().into_iter().map(|entry| entry.name).collect();
        assert_eq!(root, vec![b"d".to_vec()]);

        let err = fx.dir.list_dir(&p("d/f.txt")).unwrap_err();
        assert!(matches!(&err, HostError::NotADirectory { path } if path.as_str() == "d/f.txt"), "{err:?}");
        let err = fx.dir.list_dir(&p("d/missing")).unwrap_err();
        assert!(matches!(&err, HostError::NotFound { path } if path.as_str() == "d/missing"), "{err:?}");
        fx.symlink("sub", "d/sub_link");
        let err = fx.dir.list_dir(&p("d/sub_link")).unwrap_err();
        assert!(matches!(&err, HostError::SymlinkInPath { path } if path.as_str() == "d/sub_link"), "{err:?}");
    }
}

#[test]
fn counters_count_each_observation() {
    let fx = Fixture::new(STRATEGIES[0]);
    fx.mkdir("d");
    fx.write("d/f", b"abc");
    fx.symlink("f", "d/l");
    let start = fx.dir.counters().snapshot();
    assert_eq!(start, CounterSnapshot::default());

    fx.dir.lstat(&p("d/f")).unwrap();
    fx.dir.lstat(&p("missing")).unwrap();
    fx.dir.read_file(&p("d/f"), 10).unwrap();
    fx.dir.hash_file(&p("d/f")).unwrap();
    fx.dir.read_link(&p("d/l"), 10).unwrap();
    fx.dir.list_dir(&p("d")).unwrap();
    // Failures count too: the call reached the host.
    fx.dir.read_file(&p("missing"), 10).unwrap_err();
    assert_eq!(fx.dir.counters().snapshot(), CounterSnapshot { stats: 2, reads: 4, lists: 1, writes: 0 });

    // A subdirectory handle shares the counters.
    let sub = fx.dir.open_subdir(&p("d")).unwrap();
    sub.lstat(&p("f")).unwrap();
    WritableDir::new(std::sync::Arc::new(sub.open_subdir(&VPath::root()).unwrap()))
        .create_dir(&p("new"), 0o755)
        .unwrap();
    assert_eq!(fx.dir.counters().snapshot(), CounterSnapshot { stats: 3, reads: 4, lists: 1, writes: 1 });
    assert_eq!(sub.counters().snapshot(), fx.dir.counters().snapshot());
}

#[test]
fn touching_one_file_of_many_reads_only_that_file() {
    let fx = Fixture::new(STRATEGIES[0]);
    fx.mkdir("many");
    for index in 0..2000 {
        fx.write(&format!("many/file{index:04}"), format!("content {index}").as_bytes());
    }
    let target = p("many/file1234");
    assert!(fx.dir.lstat(&target).unwrap().is_some());
    assert_eq!(fx.dir.read_file(&target, 100).unwrap().bytes, b"content 1234");
    assert_eq!(fx.dir.counters().snapshot(), CounterSnapshot { stats: 1, reads: 1, lists: 0, writes: 0 });
}

/// Whether `path` lies on a filesystem known to keep inode generations
/// (ext4, XFS, Btrfs), by its `statfs` magic.
fn keeps_generations(path: &std::path::Path) -> bool {
    const EXT4: i64 = 0xEF53;
    const XFS: i64 = 0x5846_5342;
    const BTRFS: i64 = 0x9123_683E;
    // `f_type` is `i64` on x86_64 and narrower elsewhere.
    #[allow(clippy::useless_conversion)]
    let magic = i64::from(rustix::fs::statfs(path).unwrap().f_type);
    [EXT4, XFS, BTRFS].contains(&magic)
}

#[test]
fn generation_tells_a_new_inode_from_an_old_one_with_the_same_number() {
    for strategy in STRATEGIES {
        let fx = Fixture::new(strategy);
        fx.mkdir("d");
        fx.write("f.txt", b"x");
        fx.symlink("f.txt", "link");
        rustix::fs::mkfifoat(CWD, fx.ws("fifo"), Mode::from_raw_mode(0o600)).unwrap();
        for path in ["link", "fifo", "missing", "d/missing"] {
            assert_eq!(fx.dir.generation(&p(path)).unwrap(), None, "{strategy:?} {path}");
        }
        let err = fx.dir.generation(&p("link/x")).unwrap_err();
        assert!(matches!(&err, HostError::SymlinkInPath { path } if path.as_str() == "link"), "{err:?}");
        if !keeps_generations(fx.tmp.path()) {
            continue;
        }
        let file = fx.dir.generation(&p("f.txt")).unwrap();
        assert!(file.is_some(), "{strategy:?}");
        assert_eq!(fx.dir.generation(&p("f.txt")).unwrap(), file, "the same inode, the same generation");
        assert!(fx.dir.generation(&p("d")).unwrap().is_some(), "{strategy:?}");
        assert!(fx.dir.generation(&VPath::root()).unwrap().is_some(), "{strategy:?}");

        // The file written for staging reports the generation a later look finds,
        // even when its mode lets nobody read it.
        let (stat, staged) = fx.dir.create_file_exclusive_unsynced(&p("staged"), b"new", 0o000).unwrap();
        assert!(staged.is_some());
        assert_eq!(fx.dir.generation(&p("staged")).unwrap(), staged, "root may open it");

        // Delete and recreate until the inode number comes back: the generation differs.
        let mut reused = 0;
        let mut previous = (stat.identity.ino, staged);
        for _ in 0..64 {
            fs::remove_file(fx.ws("staged")).unwrap();
            let (stat, generation) = fx.dir.create_file_exclusive_unsynced(&p("staged"), b"new", 0o644).unwrap();
            if stat.identity.ino == previous.0 {
                reused += 1;
                assert_ne!(generation, previous.1, "{strategy:?}: inode {} came back", stat.identity.ino);
            }
            previous = (stat.identity.ino, generation);
        }
        eprintln!("{strategy:?}: {reused} of 64 recreations reused the inode number");
    }
}
