//! `CapDir::open` and `CapDir::open_or_create_trusted`.

use std::fs;
use std::path::Path;

use super::{Fixture, STRATEGIES, mode_of, p};
use crate::{CapDir, HostError, WritableDir};

#[test]
fn open_canonicalizes_and_refuses_what_is_not_a_directory() {
    let fx = Fixture::new(STRATEGIES[0]);
    fx.write("f", b"x");
    let dotted = fx.tmp.path().join("ws/../ws/.");
    let dir = CapDir::open(&dotted).unwrap();
    assert_eq!(dir.display_path(), fs::canonicalize(fx.ws("")).unwrap());
    assert_eq!(dir.identity().unwrap(), fx.dir.identity().unwrap());

    let err = CapDir::open(&fx.ws("missing")).unwrap_err();
    assert!(matches!(&err, HostError::InvalidRoot { path, .. } if path == &fx.ws("missing")), "{err:?}");
    assert_eq!(err.errno(), Some(rustix::io::Errno::NOENT.raw_os_error()));
    let err = CapDir::open(&fx.ws("f")).unwrap_err();
    assert!(matches!(&err, HostError::InvalidRoot { .. }), "{err:?}");
    assert_eq!(err.errno(), Some(rustix::io::Errno::NOTDIR.raw_os_error()));
}

#[test]
fn open_or_create_trusted_creates_missing_directories_0700() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("data/vsh/store");
    let dir = WritableDir::open_or_create_trusted(&target).unwrap();
    for created in ["data", "data/vsh", "data/vsh/store"] {
        assert_eq!(mode_of(&tmp.path().join(created)), 0o700, "{created}");
    }
    assert_eq!(dir.display_path(), fs::canonicalize(&target).unwrap());
    dir.create_file_exclusive(&p("x"), b"y", 0o600).unwrap();
    assert_eq!(fs::read(target.join("x")).unwrap(), b"y");

    // Opening again reuses the directory and changes nothing.
    fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(0o750)).unwrap();
    let again = WritableDir::open_or_create_trusted(&target).unwrap();
    assert_eq!(again.identity().unwrap(), dir.identity().unwrap());
    assert_eq!(mode_of(&target), 0o750);
}

#[test]
fn open_or_create_trusted_refuses_symlink_components() {
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    let relative_to_root = |path: &Path| p(path.strip_prefix("/").unwrap().to_str().unwrap());

    // A symlink planted where the data directory would be created, pointing at a
    // place that does not exist yet: refused, and nothing is created there.
    std::os::unix::fs::symlink(base.join("attacker"), base.join("planted")).unwrap();
    let err = WritableDir::open_or_create_trusted(&base.join("planted/store")).unwrap_err();
    assert!(
        matches!(&err, HostError::SymlinkInPath { path } if *path == relative_to_root(&base.join("planted"))),
        "{err:?}"
    );
    let err = WritableDir::open_or_create_trusted(&base.join("planted")).unwrap_err();
    assert!(matches!(&err, HostError::SymlinkInPath { .. }), "{err:?}");
    assert!(!base.join("attacker").exists());

    // A regular file in the way.
    fs::write(base.join("file"), b"x").unwrap();
    let err = WritableDir::open_or_create_trusted(&base.join("file/store")).unwrap_err();
    assert!(
        matches!(&err, HostError::NotADirectory { path } if *path == relative_to_root(&base.join("file"))),
        "{err:?}"
    );

    // `..` below the existing prefix is not resolved by guesswork.
    let err = WritableDir::open_or_create_trusted(&base.join("new/../other")).unwrap_err();
    assert!(matches!(&err, HostError::InvalidRoot { .. }), "{err:?}");
    assert!(!base.join("new").exists());
}

#[test]
fn open_or_create_trusted_resolves_symlinks_only_in_the_existing_prefix() {
    // Documented behaviour: an existing prefix is canonicalized once, so a
    // symlink there (like `/var/run -> /run`) is resolved; the rest is walked
    // without following anything.
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir(base.join("real")).unwrap();
    std::os::unix::fs::symlink(base.join("real"), base.join("alias")).unwrap();
    let dir = WritableDir::open_or_create_trusted(&base.join("alias/store")).unwrap();
    assert_eq!(dir.display_path(), base.join("real/store"));
    assert!(base.join("real/store").is_dir());
}
