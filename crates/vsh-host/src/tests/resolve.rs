//! The `openat2` fast path and the `O_NOFOLLOW` walk, checked against each other.

use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{CWD, Mode, OFlags};
use rustix::io::Errno;
use vsh_types::VPath;

use super::{Fixture, STRATEGIES, p};
use crate::HostKind;
use crate::resolve::{self, Failure, Mounts, Strategy};

/// What an open produced, comparable across strategies.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Opened { dev: u64, ino: u64, kind: HostKind },
    Failed(Failure),
}

fn outcome(result: Result<OwnedFd, Failure>) -> Outcome {
    match result {
        Ok(fd) => {
            let stat = rustix::fs::fstat(fd.as_fd()).unwrap();
            Outcome::Opened { dev: stat.st_dev, ino: stat.st_ino, kind: HostKind::from_raw_mode(stat.st_mode) }
        }
        Err(failure) => Outcome::Failed(failure),
    }
}

/// A workspace with every shape resolution has to handle.
fn tree() -> Fixture {
    let fx = Fixture::new(Strategy::Auto);
    fx.write("f", b"file");
    fx.mkdir("d/e");
    fx.write("d/f", b"inner");
    fx.write("d/e/g", b"deep");
    fx.symlink("d", "link_d");
    fx.symlink("f", "link_f");
    fx.symlink("../f", "d/up");
    fx.symlink(fx.outside(""), "abs");
    fx.symlink("../outside", "rel_out");
    fx.symlink("nowhere", "dangling");
    fx.symlink("loop", "d/e/loop");
    rustix::fs::mkfifoat(CWD, fx.ws("fifo"), Mode::from_raw_mode(0o600)).unwrap();
    fx
}

const PATHS: &[&str] = &[
    "",
    "f",
    "d",
    "d/f",
    "d/e",
    "d/e/g",
    "missing",
    "d/missing",
    "missing/x",
    "f/x",
    "d/f/x/y",
    "link_d",
    "link_d/f",
    "link_f",
    "d/up",
    "d/up/x",
    "abs",
    "abs/secret.txt",
    "rel_out/secret.txt",
    "rel_out/sub/x",
    "dangling",
    "dangling/x",
    "d/e/loop",
    "d/e/loop/x",
    "fifo",
];

fn vpath(input: &str) -> VPath {
    if input.is_empty() { VPath::root() } else { p(input) }
}

#[test]
fn openat2_and_the_walk_agree_on_a_table_of_cases() {
    let fx = tree();
    let root = fx.dir.fd.as_fd();
    let flag_sets = [
        OFlags::PATH,
        OFlags::PATH | OFlags::DIRECTORY,
        OFlags::RDONLY | OFlags::NONBLOCK,
        OFlags::RDONLY | OFlags::DIRECTORY,
    ];
    for flags in flag_sets {
        for input in PATHS {
            let path = vpath(input);
            let fast = outcome(resolve::open_beneath(
                root,
                &path,
                flags,
                Mode::empty(),
                Strategy::Openat2Only,
                &Mounts::default(),
            ));
            let walk = outcome(resolve::open_beneath(
                root,
                &path,
                flags,
                Mode::empty(),
                Strategy::WalkOnly,
                &Mounts::default(),
            ));
            let auto =
                outcome(resolve::open_beneath(root, &path, flags, Mode::empty(), Strategy::Auto, &Mounts::default()));
            assert_eq!(fast, walk, "{input:?} with {flags:?}");
            assert_eq!(fast, auto, "{input:?} with {flags:?}");
        }
    }
}

#[test]
fn both_strategies_classify_failures_precisely() {
    let fx = tree();
    let root = fx.dir.fd.as_fd();
    let symlink = |at: &str| Outcome::Failed(Failure::Symlink(p(at)));
    let not_dir = |at: &str| Outcome::Failed(Failure::NotDir(p(at)));
    let missing = Outcome::Failed(Failure::Errno(Errno::NOENT));
    let path_only = OFlags::PATH;
    let read = OFlags::RDONLY | OFlags::NONBLOCK;
    let directory = OFlags::RDONLY | OFlags::DIRECTORY;
    let cases = [
        ("link_d/f", path_only, symlink("link_d")),
        ("abs/secret.txt", read, symlink("abs")),
        ("rel_out/sub/x", path_only, symlink("rel_out")),
        ("d/up/x", path_only, symlink("d/up")),
        ("d/e/loop/x", read, symlink("d/e/loop")),
        ("link_f", read, symlink("link_f")),
        ("link_d", directory, symlink("link_d")),
        ("dangling", read, symlink("dangling")),
        ("f/x", path_only, not_dir("f")),
        ("d/f/x/y", read, not_dir("d/f")),
        ("f", directory, not_dir("f")),
        ("missing", read, missing),
        ("missing/x", path_only, Outcome::Failed(Failure::Errno(Errno::NOENT))),
        ("d/missing", directory, Outcome::Failed(Failure::Errno(Errno::NOENT))),
    ];
    for strategy in STRATEGIES {
        for (input, flags, expected) in &cases {
            let got = outcome(resolve::open_beneath(
                root,
                &vpath(input),
                *flags,
                Mode::empty(),
                strategy,
                &Mounts::default(),
            ));
            assert_eq!(&got, expected, "{strategy:?} {input:?}");
        }
        // O_PATH on a symlink leaf opens the link itself.
        for link in ["link_f", "abs", "dangling"] {
            let got =
                outcome(resolve::open_beneath(root, &p(link), path_only, Mode::empty(), strategy, &Mounts::default()));
            assert!(matches!(got, Outcome::Opened { kind: HostKind::Symlink, .. }), "{strategy:?} {link}: {got:?}");
        }
    }
}

#[test]
fn openat2_and_the_walk_agree_on_exclusive_creation() {
    let inputs = ["new", "d/new", "f", "d", "dangling", "abs", "link_d/new", "abs/new", "missing/new", "f/new"];
    let mut results = Vec::new();
    for strategy in [Strategy::Openat2Only, Strategy::WalkOnly] {
        let fx = tree();
        let root = fx.dir.fd.as_fd();
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL;
        let outcomes: Vec<_> = inputs
            .iter()
            .map(|input| {
                match resolve::open_beneath(
                    root,
                    &p(input),
                    flags,
                    Mode::from_raw_mode(0o600),
                    strategy,
                    &Mounts::default(),
                ) {
                    Ok(_) => Ok(()),
                    Err(failure) => Err(failure),
                }
            })
            .collect();
        let created: Vec<bool> =
            ["new", "d/new", "nowhere", "d/nowhere"].iter().map(|name| fx.ws(name).exists()).collect();
        let outside_new = fx.outside("new").exists();
        results.push((outcomes, created, outside_new));
    }
    assert_eq!(results[0], results[1]);
    let (outcomes, created, outside_new) = &results[0];
    assert_eq!(outcomes[0], Ok(()));
    assert_eq!(outcomes[1], Ok(()));
    assert_eq!(outcomes[2], Err(Failure::Errno(Errno::EXIST)));
    assert_eq!(outcomes[3], Err(Failure::Errno(Errno::EXIST)));
    assert_eq!(outcomes[4], Err(Failure::Errno(Errno::EXIST)), "a dangling symlink exists");
    assert_eq!(outcomes[5], Err(Failure::Errno(Errno::EXIST)));
    assert_eq!(outcomes[6], Err(Failure::Symlink(p("link_d"))));
    assert_eq!(outcomes[7], Err(Failure::Symlink(p("abs"))));
    assert_eq!(outcomes[8], Err(Failure::Errno(Errno::NOENT)));
    assert_eq!(outcomes[9], Err(Failure::NotDir(p("f"))));
    assert_eq!(created, &vec![true, true, false, false]);
    assert!(!outside_new);
}
