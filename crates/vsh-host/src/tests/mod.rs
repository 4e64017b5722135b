//! Tests of [`crate::CapDir`] on temporary directories.
//!
//! Most tests run once per resolution strategy (automatic, `openat2` only, and
//! the `O_NOFOLLOW` walk only), so the fast path and the fallback are held to
//! the same expectations.

mod location;
mod lock;
mod mounts;
mod mutate;
mod observe;
mod parts_uid;
mod resolve;
mod trusted;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tempfile::TempDir;
use vsh_types::VPath;

use crate::resolve::Strategy;
use crate::{CapDir, WritableDir};

/// Every strategy a test should pass under.
const STRATEGIES: [Strategy; 3] = [Strategy::Auto, Strategy::Openat2Only, Strategy::WalkOnly];

/// A temporary directory holding the workspace `ws/` (opened as the handle) and
/// a sibling `outside/` (with `secret.txt` and `sub/`) that must stay unreachable.
struct Fixture {
    tmp: TempDir,
    dir: WritableDir,
}

impl Fixture {
    fn new(strategy: Strategy) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir(tmp.path().join("ws")).unwrap();
        fs::create_dir_all(tmp.path().join("outside/sub")).unwrap();
        fs::write(tmp.path().join("outside/secret.txt"), b"secret").unwrap();
        let dir = CapDir::open(&tmp.path().join("ws")).unwrap().with_strategy(strategy);
        Self { tmp, dir: WritableDir::new(std::sync::Arc::new(dir)) }
    }

    fn ws(&self, relative: &str) -> PathBuf {
        self.tmp.path().join("ws").join(relative)
    }

    fn outside(&self, relative: &str) -> PathBuf {
        self.tmp.path().join("outside").join(relative)
    }

    fn write(&self, relative: &str, bytes: &[u8]) {
        fs::write(self.ws(relative), bytes).unwrap();
    }

    fn mkdir(&self, relative: &str) {
        fs::create_dir_all(self.ws(relative)).unwrap();
    }

    fn symlink(&self, target: impl AsRef<Path>, relative: &str) {
        std::os::unix::fs::symlink(target, self.ws(relative)).unwrap();
    }

    /// Symlinks that leave the workspace, by every route: absolute and `../`,
    /// to a directory and to a file. Returns (directory links, file links).
    fn escape_links(&self) -> (Vec<&'static str>, Vec<&'static str>) {
        self.symlink(self.outside(""), "abs_dir");
        self.symlink("../outside", "rel_dir");
        self.symlink(self.outside("secret.txt"), "abs_file");
        self.symlink("../outside/secret.txt", "rel_file");
        (vec!["abs_dir", "rel_dir"], vec!["abs_file", "rel_file"])
    }

    /// The names and contents of everything under `outside/`, to prove nothing changed there.
    fn outside_snapshot(&self) -> Vec<(PathBuf, Option<Vec<u8>>, u32)> {
        let mut out = Vec::new();
        let mut stack = vec![self.outside("")];
        while let Some(path) = stack.pop() {
            let meta = fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode();
            if meta.is_dir() {
                out.push((path.clone(), None, mode));
                for entry in fs::read_dir(&path).unwrap() {
                    stack.push(entry.unwrap().path());
                }
            } else {
                out.push((path.clone(), Some(fs::read(&path).unwrap()), mode));
            }
        }
        out.sort();
        out
    }
}

fn p(input: &str) -> VPath {
    VPath::parse(input).unwrap()
}

fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn handles_can_be_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CapDir>();
    assert_send_sync::<crate::HostCounters>();
    assert_send_sync::<crate::LockGuard>();
    assert_send_sync::<crate::HostError>();
}
