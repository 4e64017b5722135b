//! Shared helpers for the end-to-end tests: temporary workspaces with known
//! contents, and a snapshot of a directory tree to compare before and after.
// Test fixtures build and inspect workspaces by path.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// One node of a directory tree as seen on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A file's bytes and permission bits.
    File(Vec<u8>, u32),
    /// A directory's permission bits.
    Dir(u32),
    /// A symlink's target.
    Link(String),
}

/// Every node under `root` (excluding vsh's own `.vsh` directory), by relative path.
pub fn tree(root: &Path) -> BTreeMap<String, Entry> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Entry>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).expect("readable test tree").map(|e| e.expect("entry")).collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let path = entry.path();
        let relative = path.strip_prefix(root).expect("below root").to_string_lossy().into_owned();
        if relative == ".vsh" {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path).expect("stat");
        let mode = meta.permissions().mode() & 0o7777;
        if meta.file_type().is_symlink() {
            out.insert(relative, Entry::Link(std::fs::read_link(&path).expect("link").to_string_lossy().into_owned()));
        } else if meta.is_dir() {
            out.insert(relative, Entry::Dir(mode));
            walk(root, &path, out);
        } else {
            out.insert(relative, Entry::File(std::fs::read(&path).expect("read"), mode));
        }
    }
}

/// Write `contents` at `root/relative`, creating parent directories.
pub fn put(root: &Path, relative: &str, contents: &str) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
    std::fs::write(path, contents).expect("write");
}

/// A fresh temporary workspace holding `files`.
pub fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, contents) in files {
        put(dir.path(), path, contents);
    }
    dir
}

/// The runtime configuration the end-to-end tests use: the real confined Monty
/// worker, `vsh-test-worker`, this package's own binary (which cargo builds with
/// the tests, so its build identity matches theirs however the tests are run).
pub fn config(root: &Path) -> vsh::RuntimeConfig {
    vsh::RuntimeConfig::new(root).with_worker_path(test_worker())
}

/// Where cargo put `vsh-test-worker`: beside the `deps/` directory holding the
/// running test binary.
pub fn test_worker() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe.parent().expect("the test binary's directory");
    let profile = if dir.ends_with("deps") { dir.parent().expect("the profile directory") } else { dir };
    let worker = profile.join("vsh-test-worker");
    assert!(
        worker.is_file(),
        "{} is missing: cargo builds it with this package's tests (run them through cargo)",
        worker.display()
    );
    worker
}

/// In a child made by this function: `true`, run the test's body. Otherwise
/// re-run `test` (its full name) in a private mount namespace (`unshare
/// --user --map-root-user --mount`, which needs no privilege where user
/// namespaces are enabled), require it to pass, and return `false`. Under
/// `VSH_REQUIRE_SANDBOX=1` a machine that cannot make one fails the test.
pub fn in_own_mount_namespace(test: &str) -> bool {
    const CHILD: &str = "VSH_TEST_MOUNT_NAMESPACE";
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let output = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "--propagation", "private"])
        .arg(&exe)
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .output();
    match output {
        Ok(output) if output.status.success() => {
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(stdout.contains("1 passed"), "the child ran nothing:\n{stdout}");
        }
        Ok(output) => panic!(
            "the child failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(error) => {
            assert!(
                std::env::var_os("VSH_REQUIRE_SANDBOX").is_none_or(|value| value != "1"),
                "VSH_REQUIRE_SANDBOX=1 but no mount namespace can be made: {error}"
            );
            eprintln!("skipped: cannot run unshare ({error})");
        }
    }
    false
}

/// In a child made by this function (or when not root): `true`, run the
/// test's body. As root: re-run `test` (its full name) in a child process as
/// the unprivileged user `nobody` (uid and gid 65534, its own temporary home),
/// require it to pass, and return `false`, so a test of what a permission
/// refusal does runs where permissions are enforced.
pub fn as_unprivileged_user(test: &str) -> bool {
    use std::os::unix::process::CommandExt;
    const CHILD: &str = "VSH_TEST_UNPRIVILEGED";
    const NOBODY: u32 = 65_534;
    if std::env::var_os(CHILD).is_some() || !is_root() {
        return true;
    }
    let home = tempfile::tempdir().expect("a home for the child");
    std::os::unix::fs::chown(home.path(), Some(NOBODY), Some(NOBODY)).expect("chown the child's home");
    let exe = std::env::current_exe().expect("the test binary");
    let output = std::process::Command::new(&exe)
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("VSH_AUTHORITY_KEY")
        .current_dir(home.path())
        .gid(NOBODY)
        .uid(NOBODY)
        .output()
        .expect("run the test as nobody");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the unprivileged child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    false
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // The owner of a file made now is this process's effective user.
    let probe = tempfile::NamedTempFile::new().expect("a probe file");
    std::os::unix::fs::MetadataExt::uid(&probe.as_file().metadata().expect("stat the probe")) == 0
}

/// Whether this machine can run real commands in a candidate (`/dev/fuse`
/// and root to mount in a private namespace); with `VSH_REQUIRE_SANDBOX=1`
/// (CI) one that cannot fails the test that asks.
pub fn candidates_available() -> bool {
    let available = Path::new("/dev/fuse").exists() && is_root();
    assert!(
        available || std::env::var_os("VSH_REQUIRE_SANDBOX").is_none(),
        "VSH_REQUIRE_SANDBOX is set, and this machine has no /dev/fuse or the tests do not run as root"
    );
    available
}

/// A tmpfs of `size` (`16m`) mounted for one test, unmounted when dropped:
/// a small disk to fill (mounting needs root, as real commands do).
pub struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    /// Mount one.
    ///
    /// # Panics
    ///
    /// When it cannot be made or mounted.
    #[must_use]
    pub fn mount(size: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "vsh-test-disk"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "mount a tmpfs (as root)");
        Self(dir)
    }

    /// Where it is mounted.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}
