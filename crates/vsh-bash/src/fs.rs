//! [`RpcFs`]: bashkit's filesystem, every call a request answered by the host
//! on the caller's thread.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime};

use bashkit::{DirEntry, FileSystem, FileSystemExt, FileType, Metadata, async_trait};

use crate::Stopped;
use crate::protocol::{FsReply, FsRequest, Meta, NodeType};

/// `EINVAL`.
const EINVAL: i32 = 22;

/// The interpreter's end of the request channel.
pub(crate) struct Channel {
    pub(crate) requests: SyncSender<FsRequest>,
    pub(crate) replies: Receiver<Result<FsReply, Stopped>>,
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

/// The filesystem a script sees.
pub(crate) struct RpcFs {
    channel: Mutex<Channel>,
    control: Arc<Control>,
}

impl RpcFs {
    pub(crate) fn new(channel: Channel, control: Arc<Control>) -> Self {
        Self { channel: Mutex::new(channel), control }
    }

    fn ask(&self, request: FsRequest) -> bashkit::Result<FsReply> {
        if self.control.is_stopped() {
            return Err(stopped());
        }
        let channel = self.channel.lock().unwrap_or_else(PoisonError::into_inner);
        let answer = channel.requests.send(request).ok().and_then(|()| channel.replies.recv().ok());
        drop(channel);
        match answer {
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
impl FileSystemExt for RpcFs {}

#[async_trait]
impl FileSystem for RpcFs {
    async fn read_file(&self, path: &Path) -> bashkit::Result<Vec<u8>> {
        match self.ask(FsRequest::Read { path: text(path)? })? {
            FsReply::Bytes(bytes) => Ok(bytes),
            other => Err(unexpected(&other)),
        }
    }

    async fn write_file(&self, path: &Path, content: &[u8]) -> bashkit::Result<()> {
        self.ask(FsRequest::Write { path: text(path)?, data: content.to_vec() }).map(drop)
    }

    async fn append_file(&self, path: &Path, content: &[u8]) -> bashkit::Result<()> {
        self.ask(FsRequest::Append { path: text(path)?, data: content.to_vec() }).map(drop)
    }

    async fn mkdir(&self, path: &Path, recursive: bool) -> bashkit::Result<()> {
        self.ask(FsRequest::Mkdir { path: text(path)?, recursive }).map(drop)
    }

    async fn remove(&self, path: &Path, recursive: bool) -> bashkit::Result<()> {
        self.ask(FsRequest::Remove { path: text(path)?, recursive }).map(drop)
    }

    async fn stat(&self, path: &Path) -> bashkit::Result<Metadata> {
        match self.ask(FsRequest::Stat { path: text(path)?, follow: true })? {
            FsReply::Meta(meta) => Ok(metadata(meta)),
            other => Err(unexpected(&other)),
        }
    }

    async fn lstat(&self, path: &Path) -> bashkit::Result<Metadata> {
        match self.ask(FsRequest::Stat { path: text(path)?, follow: false })? {
            FsReply::Meta(meta) => Ok(metadata(meta)),
            other => Err(unexpected(&other)),
        }
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
        self.ask(FsRequest::Rename { from: text(from)?, to: text(to)? }).map(drop)
    }

    async fn copy(&self, from: &Path, to: &Path) -> bashkit::Result<()> {
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
