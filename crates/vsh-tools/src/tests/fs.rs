//! `Host::new`, `resolve_in_jail` and the file operations, jailed and unrestricted.

use std::fs as stdfs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rustix::io::Errno;

use super::HostFixture;
use vsh_host::{HostError, HostKind};

use crate::{EscapeReason, ExecLimits, FsError, Host, HostConfig, PathError, PathPolicy};

fn is_outside_root(result: Result<PathBuf, PathError>, expected: &Path) {
    match result {
        Err(PathError::Escape { path, reason: EscapeReason::OutsideRoot }) => assert_eq!(path, expected),
        other => panic!("expected an OutsideRoot escape of {}, got {other:?}", expected.display()),
    }
}

fn is_symlink_escape<T: std::fmt::Debug>(result: Result<T, FsError>, at: &Path) {
    match result {
        Err(FsError::Path(PathError::Escape { reason: EscapeReason::Symlink { at: found }, .. })) => {
            assert_eq!(found, at);
        }
        other => panic!("expected a symlink escape at {}, got {other:?}", at.display()),
    }
}

fn host_error<T: std::fmt::Debug>(result: Result<T, FsError>) -> HostError {
    match result {
        Err(FsError::Io { source, .. }) => source,
        other => panic!("expected FsError::Io, got {other:?}"),
    }
}

/// Names in `dir` that look like a write's temporary file.
fn temp_files(dir: &Path) -> Vec<String> {
    stdfs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".vsh-write-"))
        .collect()
}

#[test]
fn new_refuses_a_missing_root_and_a_file_root() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    match Host::new(HostConfig::new(&missing)) {
        Err(PathError::InvalidRoot { path, source }) => {
            assert_eq!(path, missing);
            assert_eq!(source.raw_os_error(), Some(Errno::NOENT.raw_os_error()));
        }
        other => panic!("expected InvalidRoot, got {other:?}"),
    }
    let file = tmp.path().join("file");
    stdfs::write(&file, b"x").unwrap();
    match Host::new(HostConfig::new(&file)) {
        Err(PathError::InvalidRoot { path, source }) => {
            assert_eq!(path, file);
            assert_eq!(source.raw_os_error(), Some(Errno::NOTDIR.raw_os_error()));
        }
        other => panic!("expected InvalidRoot, got {other:?}"),
    }
}

#[test]
fn new_canonicalizes_the_root_and_keeps_the_configuration() {
    let tmp = tempfile::tempdir().unwrap();
    stdfs::create_dir(tmp.path().join("real")).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("real"), tmp.path().join("link")).unwrap();
    let limits = ExecLimits::default().with_max_output_bytes(77);
    let host = Host::new(
        HostConfig::new(tmp.path().join("link/./")).with_limits(limits).with_path_policy(PathPolicy::Unrestricted),
    )
    .unwrap();
    assert_eq!(host.workspace_root(), stdfs::canonicalize(tmp.path().join("real")).unwrap());
    assert_eq!(host.path_policy(), PathPolicy::Unrestricted);
    assert_eq!(host.limits().max_output_bytes, 77);
    assert_eq!(host.workspace_dir().expect("a directory host").display_path(), host.workspace_root());

    let defaults = Host::new(HostConfig::new(tmp.path())).unwrap();
    assert_eq!(defaults.path_policy(), PathPolicy::Jailed);
    let limits = defaults.limits();
    assert_eq!(limits.default_timeout, std::time::Duration::from_secs(10));
    assert_eq!(limits.max_timeout, std::time::Duration::from_mins(10));
    assert_eq!(limits.max_output_bytes, 30_000);
    assert_eq!(limits.kill_grace, std::time::Duration::from_secs(2));
    // Clones share one host; Debug names the root.
    let clone = defaults.clone();
    assert_eq!(clone.workspace_root(), defaults.workspace_root());
    assert!(format!("{clone:?}").contains("workspace_root"));
}

#[test]
fn resolve_allows_paths_in_the_jail_including_a_missing_leaf() {
    let fx = HostFixture::new();
    fx.mkdir("d/e");
    fx.write("a.txt", b"a");
    let root = fx.root().to_path_buf();
    let inner = fx.ws("d/e");
    let cases: [(&Path, &str, PathBuf); 9] = [
        (&root, "a.txt", fx.ws("a.txt")),
        (&root, ".", root.clone()),
        (&root, "d/new.txt", fx.ws("d/new.txt")),
        (&root, "d/missing/deeper/new.txt", fx.ws("d/missing/deeper/new.txt")),
        (&root, "d/../a.txt", fx.ws("a.txt")),
        (&root, "./d/./e/", fx.ws("d/e")),
        (Path::new("d"), "../a.txt", fx.ws("a.txt")),
        (Path::new("/nowhere"), inner.to_str().unwrap(), fx.ws("d/e")),
        (&fx.ws("d/e"), "../../a.txt", fx.ws("a.txt")),
    ];
    for (cwd, candidate, expected) in cases {
        let resolved = fx.host.resolve_in_jail_sync(cwd, Path::new(candidate)).unwrap();
        assert_eq!(resolved, expected, "{} + {candidate}", cwd.display());
    }
    // A regular file used as a directory is inside the jail; the operation reports it.
    assert_eq!(fx.host.resolve_in_jail_sync(&root, Path::new("a.txt/x")).unwrap(), fx.ws("a.txt/x"));
    let err = host_error(fx.host.read_file_sync(&root, Path::new("a.txt/x")));
    assert!(matches!(err, HostError::NotADirectory { .. }), "{err:?}");
}

#[test]
fn resolve_refuses_parent_and_absolute_escapes() {
    let fx = HostFixture::new();
    fx.mkdir("d");
    let root = fx.root().to_path_buf();
    let parent = root.parent().unwrap().to_path_buf();
    is_outside_root(fx.host.resolve_in_jail_sync(&root, Path::new("../outside/secret.txt")), &fx.outside("secret.txt"));
    is_outside_root(fx.host.resolve_in_jail_sync(&root, Path::new("d/../../x")), &parent.join("x"));
    is_outside_root(fx.host.resolve_in_jail_sync(&root, Path::new("..")), &parent);
    is_outside_root(fx.host.resolve_in_jail_sync(&root, Path::new("/etc/passwd")), Path::new("/etc/passwd"));
    is_outside_root(fx.host.resolve_in_jail_sync(Path::new("/etc"), Path::new("passwd")), Path::new("/etc/passwd"));
    // A sibling whose name extends the root's is not under it.
    let sibling = PathBuf::from(format!("{}-other/f", root.display()));
    is_outside_root(fx.host.resolve_in_jail_sync(&root, &sibling), &sibling);
}

#[test]
fn resolve_refuses_symlink_escapes_found_by_the_kernel() {
    let fx = HostFixture::new();
    fx.mkdir("d");
    fx.write("d/inner.txt", b"inner");
    fx.symlink(fx.outside(""), "abs_dir");
    fx.symlink("../outside", "rel_dir");
    fx.symlink(fx.outside("secret.txt"), "abs_file");
    fx.symlink("d/inner.txt", "inside_file");
    fx.symlink(fx.outside("planted.txt"), "dangling");
    let root = fx.root().to_path_buf();
    let cases = [
        ("abs_dir/secret.txt", "abs_dir"),
        ("rel_dir/secret.txt", "rel_dir"),
        ("rel_dir/sub/new.txt", "rel_dir"),
        ("rel_dir/missing/new.txt", "rel_dir"),
        ("abs_file", "abs_file"),
        // Links are never followed, even ones that stay inside: the jail cannot prove where a link leads.
        ("inside_file", "inside_file"),
        ("dangling", "dangling"),
    ];
    for (candidate, link) in cases {
        match fx.host.resolve_in_jail_sync(&root, Path::new(candidate)) {
            Err(PathError::Escape { path, reason: EscapeReason::Symlink { at } }) => {
                assert_eq!(path, fx.ws(candidate), "{candidate}");
                assert_eq!(at, fx.ws(link), "{candidate}");
            }
            other => panic!("{candidate}: expected a symlink escape, got {other:?}"),
        }
    }
}

#[test]
fn tilde_expands_from_the_configured_home_never_the_environment() {
    let fx = HostFixture::new();
    fx.mkdir("home");
    let root = fx.root().to_path_buf();
    let jailed_with = |home: &Path| Host::new(HostConfig::new(fx.root()).with_home(home)).unwrap();

    let home = fx.ws("home");
    let host = jailed_with(&home);
    assert_eq!(host.resolve_in_jail_sync(&root, Path::new("~/notes.txt")).unwrap(), home.join("notes.txt"));
    assert_eq!(host.resolve_in_jail_sync(&root, Path::new("~")).unwrap(), home);
    // `~user` is an ordinary name.
    assert_eq!(host.resolve_in_jail_sync(&root, Path::new("~user/x")).unwrap(), fx.ws("~user/x"));

    // Expanding grants nothing: a home outside the jail is an escape.
    let host = jailed_with(&fx.outside(""));
    is_outside_root(host.resolve_in_jail_sync(&root, Path::new("~/secret.txt")), &fx.outside("secret.txt"));

    // Without a configured home, `~` is an ordinary name: $HOME is never read.
    assert_eq!(fx.host.resolve_in_jail_sync(&root, Path::new("~/x")).unwrap(), fx.ws("~/x"));
}

#[test]
fn the_root_as_configured_is_accepted_and_mapped_to_the_canonical_root() {
    let tmp = tempfile::tempdir().unwrap();
    stdfs::create_dir(tmp.path().join("real")).unwrap();
    stdfs::write(tmp.path().join("real/a.txt"), b"a").unwrap();
    std::os::unix::fs::symlink(tmp.path().join("real"), tmp.path().join("link")).unwrap();
    let host = Host::new(HostConfig::new(tmp.path().join("link"))).unwrap();
    let via_link = tmp.path().join("link/a.txt");
    let resolved = host.resolve_in_jail_sync(Path::new("/"), &via_link).unwrap();
    assert_eq!(resolved, host.workspace_root().join("a.txt"));
    assert_eq!(host.read_file_sync(Path::new("/"), &via_link).unwrap().contents, "a");
}

#[test]
fn unrestricted_only_makes_paths_absolute() {
    let fx = HostFixture::with(|config| config.with_path_policy(PathPolicy::Unrestricted));
    fx.symlink(fx.outside(""), "abs_dir");
    let root = fx.root().to_path_buf();
    let escaped = fx.host.resolve_in_jail_sync(&root, Path::new("../outside/secret.txt")).unwrap();
    assert_eq!(escaped, fx.outside("secret.txt"));
    assert_eq!(fx.host.resolve_in_jail_sync(&root, Path::new("/etc/../etc/passwd")).unwrap(), Path::new("/etc/passwd"));
    // Symlinks are not checked, and file operations follow them.
    assert_eq!(
        fx.host.resolve_in_jail_sync(&root, Path::new("abs_dir/secret.txt")).unwrap(),
        fx.ws("abs_dir/secret.txt")
    );
    assert_eq!(fx.host.read_file_sync(&root, Path::new("abs_dir/secret.txt")).unwrap().contents, "secret");
    assert_eq!(fx.host.read_file_sync(&root, Path::new("../outside/secret.txt")).unwrap().contents, "secret");
    fx.host.write_file_sync(&root, Path::new("../outside/sub/new.txt"), "made").unwrap();
    assert_eq!(stdfs::read(fx.outside("sub/new.txt")).unwrap(), b"made");
    let err = host_error(fx.host.write_file_sync(&root, Path::new("../outside/missing/new.txt"), "x"));
    assert!(matches!(err, HostError::InvalidRoot { .. }), "{err:?}");
    assert!(!fx.outside("missing").exists());
}

#[test]
fn write_then_read_roundtrip_in_the_jail() {
    let fx = HostFixture::new();
    fx.mkdir("d");
    let root = fx.root().to_path_buf();
    let stat = fx.host.write_file_sync(&root, Path::new("d/new.txt"), "hello\n").unwrap();
    assert_eq!(stat.len, 6);
    assert!(stat.is_file() && !stat.is_dir());
    assert_eq!(stat.mode, 0o644);
    let read = fx.host.read_file_sync(&fx.ws("d"), Path::new("new.txt")).unwrap();
    assert_eq!(read.contents, "hello\n");
    assert_eq!(read.stat, stat);
    assert_eq!(read.stat.mtime, stdfs::metadata(fx.ws("d/new.txt")).unwrap().modified().unwrap());
    assert_eq!(fx.host.stat_sync(&root, Path::new("d/new.txt")).unwrap(), stat);

    // Overwriting replaces the content and keeps the permission bits.
    stdfs::set_permissions(fx.ws("d/new.txt"), stdfs::Permissions::from_mode(0o600)).unwrap();
    let stat = fx.host.write_file_sync(&root, Path::new("d/new.txt"), "shorter").unwrap();
    assert_eq!(stat.len, 7);
    assert_eq!(stat.mode, 0o600);
    assert_eq!(stdfs::read(fx.ws("d/new.txt")).unwrap(), b"shorter");
    assert!(temp_files(&fx.ws("d")).is_empty(), "no temporary file is left behind");

    // Reads are lossy UTF-8.
    fx.write("bin", &[0xff, b'a']);
    assert_eq!(fx.host.read_file_sync(&root, Path::new("bin")).unwrap().contents, "\u{fffd}a");
}

#[test]
fn write_never_creates_parents_and_refuses_non_files() {
    let fx = HostFixture::new();
    fx.mkdir("d");
    let root = fx.root().to_path_buf();
    let result = fx.host.write_file_sync(&root, Path::new("missing/f.txt"), "x");
    assert_eq!(result.as_ref().err().and_then(FsError::errno), Some(Errno::NOENT.raw_os_error()));
    match result {
        Err(FsError::Io { op, path, source: HostError::NotFound { .. } }) => {
            assert_eq!(op, "write_file");
            assert_eq!(path, fx.ws("missing/f.txt"));
        }
        other => panic!("expected a NotFound Io error, got {other:?}"),
    }
    assert!(!fx.ws("missing").exists(), "the parent was not created");
    let err = host_error(fx.host.write_file_sync(&root, Path::new("d"), "x"));
    assert!(matches!(err, HostError::NotAFile { .. }), "{err:?}");
    let err = host_error(fx.host.write_file_sync(&root, Path::new("."), "x"));
    assert!(matches!(err, HostError::NotAFile { .. }), "{err:?}");
    assert!(stdfs::metadata(fx.ws("d")).unwrap().is_dir());
}

#[test]
fn read_stat_and_read_dir_errors_are_io_errors() {
    let fx = HostFixture::new();
    fx.mkdir("d/sub");
    fx.write("d/a.txt", b"a");
    fx.symlink("a.txt", "d/link");
    let root = fx.root().to_path_buf();

    let err = host_error(fx.host.read_dir_sync(&root, Path::new("d/a.txt")));
    assert!(matches!(err, HostError::NotADirectory { .. }), "{err:?}");
    let err = host_error(fx.host.read_dir_sync(&root, Path::new("missing")));
    assert!(matches!(err, HostError::NotFound { .. }), "{err:?}");
    let err = host_error(fx.host.read_file_sync(&root, Path::new("missing.txt")));
    assert!(matches!(err, HostError::NotFound { .. }), "{err:?}");
    let err = host_error(fx.host.read_file_sync(&root, Path::new("d")));
    assert!(matches!(err, HostError::NotAFile { .. }), "{err:?}");
    let err = host_error(fx.host.stat_sync(&root, Path::new("missing")));
    assert!(matches!(err, HostError::NotFound { .. }), "{err:?}");

    let mut entries = fx.host.read_dir_sync(&root, Path::new("d")).unwrap();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let summary: Vec<(&str, bool, Option<HostKind>)> =
        entries.iter().map(|entry| (entry.name.as_str(), entry.is_dir, entry.kind)).collect();
    assert_eq!(
        summary,
        [
            ("a.txt", false, Some(HostKind::File)),
            ("link", false, Some(HostKind::Symlink)),
            ("sub", true, Some(HostKind::Directory)),
        ]
    );
    let stat = fx.host.stat_sync(&root, Path::new("d")).unwrap();
    assert!(stat.is_dir());
}

#[test]
fn max_read_bytes_is_enforced_before_reading() {
    let fx = HostFixture::with(|config| config.with_max_read_bytes(4));
    fx.write("small", b"1234");
    fx.write("large", b"12345");
    let root = fx.root().to_path_buf();
    assert_eq!(fx.host.read_file_sync(&root, Path::new("small")).unwrap().contents, "1234");
    let err = host_error(fx.host.read_file_sync(&root, Path::new("large")));
    assert!(matches!(err, HostError::TooLarge { size: 5, max: 4, .. }), "{err:?}");
}

#[test]
fn every_operation_refuses_escapes() {
    let fx = HostFixture::new();
    fx.symlink(fx.outside(""), "abs_dir");
    let root = fx.root().to_path_buf();
    let before = fx.outside_snapshot();
    for candidate in ["../outside/secret.txt", "../outside/sub", "/etc/hostname"] {
        let path = Path::new(candidate);
        let outside = |result: Result<(), FsError>| {
            assert!(
                matches!(result, Err(FsError::Path(PathError::Escape { reason: EscapeReason::OutsideRoot, .. }))),
                "{candidate}: {result:?}"
            );
        };
        outside(fx.host.read_file_sync(&root, path).map(drop));
        outside(fx.host.write_file_sync(&root, path, "pwned").map(drop));
        outside(fx.host.stat_sync(&root, path).map(drop));
        outside(fx.host.read_dir_sync(&root, path).map(drop));
    }
    for candidate in ["abs_dir/secret.txt", "abs_dir/sub", "abs_dir/new.txt"] {
        let path = Path::new(candidate);
        let at = fx.ws("abs_dir");
        is_symlink_escape(fx.host.read_file_sync(&root, path), &at);
        is_symlink_escape(fx.host.write_file_sync(&root, path, "pwned"), &at);
        is_symlink_escape(fx.host.stat_sync(&root, path), &at);
        is_symlink_escape(fx.host.read_dir_sync(&root, path), &at);
    }
    is_symlink_escape(fx.host.read_dir_sync(&root, Path::new("abs_dir")), &fx.ws("abs_dir"));
    assert_eq!(fx.outside_snapshot(), before, "nothing outside changed");
}

#[test]
fn a_dangling_symlink_leaf_is_never_written_through() {
    for policy in [PathPolicy::Jailed, PathPolicy::Unrestricted] {
        let fx = HostFixture::with(|config| config.with_path_policy(policy));
        fx.symlink(fx.outside("planted_abs.txt"), "dangling_abs");
        fx.symlink("../outside/planted_rel.txt", "dangling_rel");
        let root = fx.root().to_path_buf();
        for (link, planted) in [("dangling_abs", "planted_abs.txt"), ("dangling_rel", "planted_rel.txt")] {
            let result = fx.host.write_file_sync(&root, Path::new(link), "pwned");
            if policy == PathPolicy::Jailed {
                is_symlink_escape(result, &fx.ws(link));
            } else {
                let err = host_error(result);
                assert!(matches!(err, HostError::IsASymlink { .. }), "{link}: {err:?}");
            }
            assert!(!fx.outside(planted).exists(), "{policy:?}: the link's target was created");
            assert!(stdfs::symlink_metadata(fx.ws(link)).unwrap().file_type().is_symlink(), "the link is intact");
        }
        assert!(temp_files(fx.root()).is_empty());
    }
}

#[test]
fn a_directory_swapped_for_a_symlink_after_resolution_is_refused_by_the_kernel() {
    let fx = HostFixture::new();
    fx.mkdir("d");
    fx.write("d/f.txt", b"inside");
    stdfs::create_dir(fx.outside("d")).unwrap();
    stdfs::write(fx.outside("d/f.txt"), b"outside").unwrap();
    let root = fx.root().to_path_buf();
    let swap = || {
        stdfs::rename(fx.ws("d"), fx.ws("d_orig")).unwrap();
        std::os::unix::fs::symlink(fx.outside("d"), fx.ws("d")).unwrap();
    };
    let before = fx.outside_snapshot();

    // Resolution happens inside each operation; the swap lands between the
    // resolution and the use, where only the kernel's checks remain.
    let read = fx.host.locate(&root, Path::new("d/f.txt")).unwrap();
    let write = fx.host.locate(&root, Path::new("d/f.txt")).unwrap();
    let create = fx.host.locate(&root, Path::new("d/new.txt")).unwrap();
    swap();
    is_symlink_escape(fx.host.read_target(&read), &fx.ws("d"));
    is_symlink_escape(fx.host.write_target(&write, b"pwned"), &fx.ws("d"));
    is_symlink_escape(fx.host.write_target(&create, b"pwned"), &fx.ws("d"));
    assert_eq!(fx.outside_snapshot(), before, "nothing outside was touched");

    // Through the public API: a path resolved before the swap is refused after it.
    stdfs::remove_file(fx.ws("d")).unwrap();
    stdfs::rename(fx.ws("d_orig"), fx.ws("d")).unwrap();
    let resolved = fx.host.resolve_in_jail_sync(&root, Path::new("d/f.txt")).unwrap();
    assert_eq!(fx.host.read_file_sync(&root, &resolved).unwrap().contents, "inside");
    swap();
    is_symlink_escape(fx.host.read_file_sync(&root, &resolved), &fx.ws("d"));
    is_symlink_escape(fx.host.write_file_sync(&root, &resolved, "pwned"), &fx.ws("d"));
    assert_eq!(fx.outside_snapshot(), before, "nothing outside was touched");
}

#[test]
fn a_leaf_swapped_for_a_symlink_after_resolution_is_not_followed() {
    let fx = HostFixture::new();
    fx.write("f.txt", b"inside");
    let root = fx.root().to_path_buf();
    let before = fx.outside_snapshot();
    let target = fx.host.locate(&root, Path::new("f.txt")).unwrap();
    stdfs::remove_file(fx.ws("f.txt")).unwrap();
    std::os::unix::fs::symlink(fx.outside("secret.txt"), fx.ws("f.txt")).unwrap();
    is_symlink_escape(fx.host.read_target(&target), &fx.ws("f.txt"));
    is_symlink_escape(fx.host.write_target(&target, b"pwned"), &fx.ws("f.txt"));
    assert_eq!(fx.outside_snapshot(), before);
}

#[tokio::test]
async fn the_async_methods_wrap_the_sync_core() {
    let fx = HostFixture::new();
    fx.mkdir("d");
    let root = fx.root().to_path_buf();
    let stat = fx.host.write_file(&root, Path::new("d/a.txt"), "async").await.unwrap();
    assert_eq!(fx.host.read_file(&root, Path::new("d/a.txt")).await.unwrap().contents, "async");
    assert_eq!(fx.host.stat(&root, Path::new("d/a.txt")).await.unwrap(), stat);
    let names: Vec<String> =
        fx.host.read_dir(&root, Path::new("d")).await.unwrap().into_iter().map(|entry| entry.name).collect();
    assert_eq!(names, ["a.txt"]);
    assert_eq!(fx.host.resolve_in_jail(&root, Path::new("d/a.txt")).await.unwrap(), fx.ws("d/a.txt"));
    assert!(matches!(
        fx.host.resolve_in_jail(&root, Path::new("..")).await,
        Err(PathError::Escape { reason: EscapeReason::OutsideRoot, .. })
    ));
    assert!(matches!(fx.host.read_file(&root, Path::new("/etc/hostname")).await, Err(FsError::Path(_))));
}
