//! [`RpcFs`]: bashkit's filesystem, every call a request answered by the host
//! on the caller's thread.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime};

use bashkit::{DirEntry, FileSystem, FileSystemExt, FileType, Metadata, async_trait};

use crate::{FsHost, Stopped};
use vsh_types::fsproto::{FsReply, FsRequest, Meta, NodeType};

/// `EINVAL`.
const EINVAL: i32 = 22;

/// How the interpreter's requests reach the host.
pub(crate) trait Transport: Send + Sync + 'static {
    /// One request's answer; `None` when the host is gone.
    fn ask(&self, request: FsRequest) -> Option<Result<FsReply, Stopped>>;
}

/// The interpreter's end of a channel to a host on another thread.
pub(crate) struct Channel {
    pub(crate) requests: SyncSender<FsRequest>,
    pub(crate) replies: Mutex<Receiver<Result<FsReply, Stopped>>>,
}

impl Transport for Channel {
    fn ask(&self, request: FsRequest) -> Option<Result<FsReply, Stopped>> {
        // The lock keeps a request and its answer together.
        let replies = self.replies.lock().unwrap_or_else(PoisonError::into_inner);
        self.requests.send(request).ok()?;
        replies.recv().ok()
    }
}

/// A host the interpreter calls directly, on its own thread.
pub(crate) struct Direct<H>(pub(crate) Mutex<H>);

impl<H: FsHost + Send + 'static> Transport for Direct<H> {
    fn ask(&self, request: FsRequest) -> Option<Result<FsReply, Stopped>> {
        Some(self.0.lock().unwrap_or_else(PoisonError::into_inner).serve(request))
    }
}

/// What the interpreter's thread, its guard and the serving thread share.
#[derive(Default)]
pub(crate) struct Control {
    /// Whether the command now running asked for listings with metadata
    /// (set by the guard from the argv dispatched).
    pub(crate) eager_metadata: AtomicBool,
    /// Set once the host ended the run: every later call fails at once.
    pub(crate) stopped: AtomicBool,
    /// bashkit's cancellation flag, raised with `stopped`.
    pub(crate) cancel: OnceLock<Arc<AtomicBool>>,
    /// The first command outside the profile.
    pub(crate) unsupported: crate::guard::FirstUnsupported,
}

impl Control {
    /// Mark the run stopped and cancel the interpreter.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        if let Some(cancel) = self.cancel.get() {
            cancel.store(true, Ordering::Release);
        }
    }

    /// Whether the host ended the run.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }
}

/// What stats answered since the last change the script made (by path and
/// whether the stat followed a final symlink): the interpreter asks the same
/// again and again (`sed -i` stats its directory and its temporary file
/// three times each). Only the script changes the image while it runs, so an
/// answer holds until its next change of any path, which clears them all. A
/// cached answer adds no dependency: the first one recorded it.
type StatCache = Mutex<HashMap<(String, bool), Result<Meta, i32>>>;

/// The filesystem a script sees.
pub(crate) struct RpcFs<T> {
    transport: T,
    control: Arc<Control>,
    stats: StatCache,
}

impl<T: Transport> RpcFs<T> {
    pub(crate) fn new(transport: T, control: Arc<Control>) -> Self {
        Self { transport, control, stats: Mutex::new(HashMap::new()) }
    }

    /// A stat, from the cache when the script changed nothing since.
    fn stat_of(&self, path: &Path, follow: bool) -> bashkit::Result<Metadata> {
        let key = (text(path)?, follow);
        let cached = self.stats.lock().unwrap_or_else(PoisonError::into_inner).get(&key).copied();
        if let Some(answer) = cached {
            return answer.map(metadata).map_err(os_error);
        }
        let answer = match self.ask(FsRequest::Stat { path: key.0.clone(), follow }) {
            Ok(FsReply::Meta(meta)) => Ok(meta),
            Ok(other) => return Err(unexpected(&other)),
            Err(bashkit::Error::Io(error)) if error.raw_os_error().is_some() => {
                Err(error.raw_os_error().unwrap_or(EINVAL))
            }
            Err(other) => return Err(other),
        };
        self.stats.lock().unwrap_or_else(PoisonError::into_inner).insert(key, answer);
        answer.map(metadata).map_err(os_error)
    }

    /// A change is coming: every cached stat may be stale after it.
    fn changing(&self) {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// The transport back, once the interpreter is done with the filesystem.
    pub(crate) fn into_transport(self) -> T {
        self.transport
    }

    fn ask(&self, request: FsRequest) -> bashkit::Result<FsReply> {
        if self.control.is_stopped() {
            return Err(stopped());
        }
        match self.transport.ask(request) {
            Some(Ok(FsReply::Failed(errno))) => Err(os_error(errno)),
            Some(Ok(reply)) => Ok(reply),
            Some(Err(Stopped)) | None => {
                self.control.stop();
                Err(stopped())
            }
        }
    }
}

fn stopped() -> bashkit::Error {
    bashkit::Error::Cancelled
}

fn os_error(errno: i32) -> bashkit::Error {
    bashkit::Error::Io(std::io::Error::from_raw_os_error(errno))
}

fn unexpected(reply: &FsReply) -> bashkit::Error {
    bashkit::Error::Io(std::io::Error::other(format!("vsh: unexpected answer {reply:?}")))
}

fn unsupported(what: &str) -> bashkit::Error {
    bashkit::Error::Io(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        format!("{what} is not supported in {}", crate::PROFILE),
    ))
}

/// A path as the host takes it: UTF-8, absolute, without `.` or `..` (the
/// interpreter normalizes before calling).
fn text(path: &Path) -> bashkit::Result<String> {
    path.to_str().map(str::to_owned).ok_or_else(|| os_error(EINVAL))
}

pub(crate) fn metadata(meta: Meta) -> Metadata {
    let file_type = match meta.kind {
        NodeType::File => FileType::File,
        NodeType::Directory => FileType::Directory,
        NodeType::Symlink => FileType::Symlink,
    };
    let modified = u64::try_from(meta.modified_ns)
        .ok()
        .and_then(|ns| SystemTime::UNIX_EPOCH.checked_add(Duration::from_nanos(ns)))
        .unwrap_or(SystemTime::UNIX_EPOCH);
    Metadata { file_type, size: meta.size, mode: meta.mode, modified, created: modified }
}

#[async_trait]
impl<T: Transport> FileSystemExt for RpcFs<T> {}

#[async_trait]
impl<T: Transport> FileSystem for RpcFs<T> {
    async fn read_file(&self, path: &Path) -> bashkit::Result<Vec<u8>> {
        match self.ask(FsRequest::Read { path: text(path)? })? {
            FsReply::Bytes(bytes) => Ok(bytes),
            other => Err(unexpected(&other)),
        }
    }

    async fn write_file(&self, path: &Path, content: &[u8]) -> bashkit::Result<()> {
        self.changing();
        self.ask(FsRequest::Write { path: text(path)?, data: content.to_vec() }).map(drop)
    }

    async fn append_file(&self, path: &Path, content: &[u8]) -> bashkit::Result<()> {
        self.changing();
        self.ask(FsRequest::Append { path: text(path)?, data: content.to_vec() }).map(drop)
    }

    async fn mkdir(&self, path: &Path, recursive: bool) -> bashkit::Result<()> {
        self.changing();
        self.ask(FsRequest::Mkdir { path: text(path)?, recursive }).map(drop)
    }

    async fn remove(&self, path: &Path, recursive: bool) -> bashkit::Result<()> {
        self.changing();
        self.ask(FsRequest::Remove { path: text(path)?, recursive }).map(drop)
    }

    async fn stat(&self, path: &Path) -> bashkit::Result<Metadata> {
        self.stat_of(path, true)
    }

    async fn lstat(&self, path: &Path) -> bashkit::Result<Metadata> {
        self.stat_of(path, false)
    }

    async fn read_dir(&self, path: &Path) -> bashkit::Result<Vec<DirEntry>> {
        let metadata_wanted = self.control.eager_metadata.load(Ordering::Acquire);
        match self.ask(FsRequest::ReadDir { path: text(path)?, metadata: metadata_wanted })? {
            FsReply::Entries(entries) => {
                Ok(entries.into_iter().map(|(name, meta)| DirEntry { name, metadata: metadata(meta) }).collect())
            }
            other => Err(unexpected(&other)),
        }
    }

    async fn exists(&self, path: &Path) -> bashkit::Result<bool> {
        match self.ask(FsRequest::Exists { path: text(path)? })? {
            FsReply::Exists(there) => Ok(there),
            other => Err(unexpected(&other)),
        }
    }

    async fn rename(&self, from: &Path, to: &Path) -> bashkit::Result<()> {
        self.changing();
        self.ask(FsRequest::Rename { from: text(from)?, to: text(to)? }).map(drop)
    }

    async fn copy(&self, from: &Path, to: &Path) -> bashkit::Result<()> {
        self.changing();
        self.ask(FsRequest::Copy { from: text(from)?, to: text(to)? }).map(drop)
    }

    async fn symlink(&self, _target: &Path, _link: &Path) -> bashkit::Result<()> {
        Err(unsupported("making a symlink"))
    }

    async fn read_link(&self, path: &Path) -> bashkit::Result<PathBuf> {
        match self.ask(FsRequest::ReadLink { path: text(path)? })? {
            FsReply::Target(target) => Ok(PathBuf::from(target)),
            other => Err(unexpected(&other)),
        }
    }

    async fn chmod(&self, path: &Path, mode: u32) -> bashkit::Result<()> {
        self.changing();
        self.ask(FsRequest::Chmod { path: text(path)?, mode }).map(drop)
    }

    /// `touch` of an existing file: the image carries no times into a
    /// commit, so this only checks that the node is there.
    async fn set_modified_time(&self, path: &Path, _time: SystemTime) -> bashkit::Result<()> {
        match self.ask(FsRequest::Exists { path: text(path)? })? {
            FsReply::Exists(true) => Ok(()),
            FsReply::Exists(false) => Err(os_error(2)),
            other => Err(unexpected(&other)),
        }
    }
}
