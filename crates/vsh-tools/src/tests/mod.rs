//! Tests of [`crate::Host`]: path resolution and file operations (`fs`), and
//! supervised commands with real processes (`exec`).

mod exec;
mod fs;
mod parts;

use std::fs as stdfs;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::{Host, HostConfig};

/// A temporary directory holding the workspace `ws/` (the host's root) and a
/// sibling `outside/` (with `secret.txt` and `sub/`) that must stay untouched.
struct HostFixture {
    tmp: TempDir,
    host: Host,
}

impl HostFixture {
    fn new() -> Self {
        Self::with(|config| config)
    }

    fn with(configure: impl FnOnce(HostConfig) -> HostConfig) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        stdfs::create_dir(tmp.path().join("ws")).unwrap();
        stdfs::create_dir_all(tmp.path().join("outside/sub")).unwrap();
        stdfs::write(tmp.path().join("outside/secret.txt"), b"secret").unwrap();
        let host = Host::new(configure(HostConfig::new(tmp.path().join("ws")))).unwrap();
        Self { tmp, host }
    }

    /// The canonical workspace root.
    fn root(&self) -> &Path {
        self.host.workspace_root()
    }

    fn ws(&self, relative: &str) -> PathBuf {
        self.root().join(relative)
    }

    fn outside(&self, relative: &str) -> PathBuf {
        stdfs::canonicalize(self.tmp.path()).unwrap().join("outside").join(relative)
    }

    fn write(&self, relative: &str, bytes: &[u8]) {
        stdfs::write(self.ws(relative), bytes).unwrap();
    }

    fn mkdir(&self, relative: &str) {
        stdfs::create_dir_all(self.ws(relative)).unwrap();
    }

    fn symlink(&self, target: impl AsRef<Path>, relative: &str) {
        std::os::unix::fs::symlink(target, self.ws(relative)).unwrap();
    }

    /// Every path under `outside/` with its content, to prove nothing changed there.
    fn outside_snapshot(&self) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        let mut stack = vec![self.outside("")];
        while let Some(path) = stack.pop() {
            let meta = stdfs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                out.push((path.clone(), None));
                for entry in stdfs::read_dir(&path).unwrap() {
                    stack.push(entry.unwrap().path());
                }
            } else {
                out.push((path.clone(), Some(stdfs::read(&path).unwrap())));
            }
        }
        out.sort();
        out
    }
}

#[test]
fn hosts_and_their_errors_can_be_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<crate::Host>();
    assert_send_sync::<crate::FsError>();
    assert_send_sync::<crate::ExecError>();
}
