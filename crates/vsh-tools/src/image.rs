//! A [`Host`] whose jail root is an image rather than a directory of the
//! host: a candidate workspace ([`ImageRoot`], implemented by the `vsh`
//! facade). Paths resolve exactly as in a directory jail (lexically, then
//! beneath the root without following any symlink, which the image answers);
//! reads, writes, stats and listings are the image's, and commands
//! ([`Host::exec`], [`Host::run_capture`]) run in the image, with the same
//! limits, output caps and cancellation as on a directory.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use vsh_host::{HostError, HostKind};
use vsh_types::VPath;

use super::{ExecLimits, Host, PathPolicy, ShellSpec};
use crate::fs::{DirEntry, FileRead, FileStat};

/// A node's metadata as an image reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageStat {
    /// What it is.
    pub kind: HostKind,
    /// Bytes of a file, target length of a symlink.
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// Last modification.
    pub mtime: SystemTime,
}

impl From<ImageStat> for FileStat {
    fn from(stat: ImageStat) -> Self {
        Self { len: stat.size, mtime: stat.mtime, kind: stat.kind, mode: stat.mode }
    }
}

/// A command to run in an image: the program, its arguments, where, with
/// exactly which environment, for how long.
#[derive(Debug)]
pub struct ImageCommand<'a> {
    /// The program (an absolute path, or a name found on the command's `PATH`).
    pub program: &'a Path,
    /// Its arguments.
    pub args: &'a [OsString],
    /// Its working directory: absolute, beneath the image's root.
    pub cwd: &'a Path,
    /// Exactly its environment.
    pub env: &'a [(String, String)],
    /// How long it may run; past it, its whole process tree is killed.
    pub timeout: Duration,
    /// Set when the caller cancels: the image kills the command's tree soon after.
    pub cancelled: &'a AtomicBool,
}

/// How a command in an image ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageOutput {
    /// Its exit status, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// Its standard output.
    pub stdout: Vec<u8>,
    /// Its standard error.
    pub stderr: Vec<u8>,
    /// The timeout ended it.
    pub timed_out: bool,
    /// The cancellation ended it.
    pub cancelled: bool,
}

/// The image a [`Host`] made by [`Host::over_image`] works on. Every call
/// takes a workspace path the host has resolved beneath the root; a symlink
/// on the way is [`HostError::SymlinkInPath`], never followed.
pub trait ImageRoot: Send + Sync + 'static {
    /// Where the image appears to commands: the root's absolute path.
    fn root(&self) -> &Path;
    /// The node at `path`, a final symlink not followed; `None` when absent.
    ///
    /// # Errors
    ///
    /// The image's refusal of the path (a protected one, a symlink on the way).
    fn lstat(&self, path: &VPath) -> Result<Option<ImageStat>, HostError>;
    /// The bytes of the file at `path`, at most `max_bytes`.
    ///
    /// # Errors
    ///
    /// As [`ImageRoot::lstat`]; a node that is not a file; a file larger than `max_bytes`.
    fn read(&self, path: &VPath, max_bytes: u64) -> Result<(Vec<u8>, ImageStat), HostError>;
    /// Replace (or create) the file at `path` with `bytes`.
    ///
    /// # Errors
    ///
    /// As [`ImageRoot::lstat`]; a missing parent; a node in the way that is not a file.
    fn write(&self, path: &VPath, bytes: &[u8]) -> Result<ImageStat, HostError>;
    /// The entries of the directory at `path`: names and kinds.
    ///
    /// # Errors
    ///
    /// As [`ImageRoot::lstat`]; a node that is not a directory.
    fn list(&self, path: &VPath) -> Result<Vec<(String, HostKind)>, HostError>;
    /// Run `command` in the image, blocking until it and its process tree are gone.
    ///
    /// # Errors
    ///
    /// The command could not be started.
    fn run(&self, command: &ImageCommand<'_>) -> Result<ImageOutput, std::io::Error>;
}

impl Host {
    /// A jailed host over `image`: its root is the image's root, every file
    /// operation and command is the image's, under `limits`. `home` and the
    /// shell are the defaults of [`super::HostConfig::new`].
    pub fn over_image(image: Arc<dyn ImageRoot>, limits: ExecLimits) -> Self {
        let root = image.root().to_path_buf();
        Self {
            inner: Arc::new(super::Inner {
                root_as_given: root.clone(),
                root,
                dir: super::Root::Image(image),
                path_policy: PathPolicy::Jailed,
                limits,
                confined: true,
                policy: Arc::new(vsh_sandbox::SandboxPolicy::group_only()),
                tool_context: vsh_sandbox::ToolContext::new(vsh_sandbox::ExecGrant::Any),
                home: None,
                shell: ShellSpec::default(),
                max_read_bytes: super::DEFAULT_MAX_READ_BYTES,
            }),
        }
    }

    /// The image behind this host, if it is made over one.
    pub(crate) fn image(&self) -> Option<&Arc<dyn ImageRoot>> {
        match &self.inner.dir {
            super::Root::Image(image) => Some(image),
            super::Root::Dir(_) => None,
        }
    }
}

/// [`Host::read_file`] on an image.
pub(crate) fn read(image: &dyn ImageRoot, rel: &VPath, max_bytes: u64) -> Result<FileRead, HostError> {
    let (bytes, stat) = image.read(rel, max_bytes)?;
    Ok(FileRead { contents: String::from_utf8_lossy(&bytes).into_owned(), stat: stat.into() })
}

/// [`Host::read_dir`] on an image.
pub(crate) fn list(image: &dyn ImageRoot, rel: &VPath) -> Result<Vec<DirEntry>, HostError> {
    Ok(image
        .list(rel)?
        .into_iter()
        .map(|(name, kind)| DirEntry { name, is_dir: kind == HostKind::Directory, kind: Some(kind) })
        .collect())
}

/// A command on an image, as `Host::run` launches it.
pub(crate) struct ImageLaunch {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<OsString>,
    pub(crate) cwd: PathBuf,
    pub(crate) env: Vec<(String, String)>,
}
