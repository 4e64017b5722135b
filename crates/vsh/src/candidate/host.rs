//! The seed's `Host` over a candidate workspace ([`CandidateWorkspace::host`]):
//! its jail root is the candidate, so `read_file`, `write_file`, `stat` and
//! `read_dir` act on the candidate's image (each access served exactly as a
//! program's own: authorized, recorded with its facet, a refusal denying the
//! promotion) and `exec`/`run_capture` run real commands in it, as steps.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use vsh_host::{HostError, HostKind};
use vsh_tools::{ExecLimits, Host, ImageCommand, ImageOutput, ImageRoot, ImageStat};
use vsh_types::VPath;
use vsh_types::fsproto::{FsReply, FsRequest, Meta, NodeType};

use super::CandidateWorkspace;
use crate::cancel::ExecutionCancellation;
use crate::request::{Language, RunRequest};
use crate::{ExecutionBudget, VshError};

/// `ENOENT`.
const ENOENT: i32 = 2;

/// How often a command's cancellation flag is looked at.
const CANCEL_POLL: Duration = Duration::from_millis(20);

impl CandidateWorkspace {
    /// A seed `Host` whose jail root is this candidate (see the module
    /// documentation), its commands under `limits`.
    pub fn host(self: &Arc<Self>, limits: ExecLimits) -> Host {
        Host::over_image(Arc::new(Image(Arc::clone(self))), limits)
    }
}

/// A candidate as the image of a seed `Host`.
struct Image(Arc<CandidateWorkspace>);

/// The path of `path` in the file-access protocol.
fn protocol_path(path: &VPath) -> String {
    if path.is_root() { vsh_monty::VIRTUAL_ROOT.to_owned() } else { format!("{}/{path}", vsh_monty::VIRTUAL_ROOT) }
}

/// A refusal or failure of the image as the host error for `path`.
fn host_error(op: &'static str, path: &VPath, errno: i32) -> HostError {
    match errno {
        ENOENT => HostError::NotFound { path: path.clone() },
        errno => HostError::Io { op, path: path.clone(), source: std::io::Error::from_raw_os_error(errno) },
    }
}

/// A facade error as the host error for `path` (a budget, the candidate promoted).
fn facade_error(op: &'static str, path: &VPath, error: &VshError) -> HostError {
    HostError::Io { op, path: path.clone(), source: std::io::Error::other(error.to_string()) }
}

fn kind(node: NodeType) -> HostKind {
    match node {
        NodeType::File => HostKind::File,
        NodeType::Directory => HostKind::Directory,
        NodeType::Symlink => HostKind::Symlink,
    }
}

fn stat(meta: &Meta) -> ImageStat {
    let mtime = u64::try_from(meta.modified_ns)
        .map_or(SystemTime::UNIX_EPOCH, |nanos| SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos));
    ImageStat { kind: kind(meta.kind), size: meta.size, mode: meta.mode, mtime }
}

impl Image {
    fn serve(&self, op: &'static str, path: &VPath, request: FsRequest) -> Result<FsReply, HostError> {
        match self.0.serve(request) {
            Ok(FsReply::Failed(errno)) => Err(host_error(op, path, errno)),
            Ok(reply) => Ok(reply),
            Err(error) => Err(facade_error(op, path, &error)),
        }
    }

    fn meta(&self, path: &VPath) -> Result<Option<ImageStat>, HostError> {
        match self.serve("lstat", path, FsRequest::Stat { path: protocol_path(path), follow: false }) {
            Ok(FsReply::Meta(meta)) => Ok(Some(stat(&meta))),
            Ok(_) => Err(host_error("lstat", path, libc_eio())),
            Err(HostError::NotFound { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// [`Image::meta`] before `request` (a read or a write of `path`): a
    /// path the policy hides answers the look as unreadable, which is no
    /// denial, so the request itself is made, refused and recorded as the
    /// denial it is, and the look's error is returned.
    fn meta_before(
        &self,
        path: &VPath,
        op: &'static str,
        request: impl FnOnce() -> FsRequest,
    ) -> Result<Option<ImageStat>, HostError> {
        match self.meta(path) {
            Err(refused) if refused.errno() == Some(EACCES) => {
                let _refused_too = self.serve(op, path, request());
                Err(refused)
            }
            other => other,
        }
    }
}

/// `EACCES`: refused by the policy.
const EACCES: i32 = 13;

/// `EIO`: an answer of the wrong kind.
const fn libc_eio() -> i32 {
    5
}

impl ImageRoot for Image {
    fn root(&self) -> &Path {
        self.0.overlay_root()
    }

    fn lstat(&self, path: &VPath) -> Result<Option<ImageStat>, HostError> {
        self.meta(path)
    }

    fn read(&self, path: &VPath, max_bytes: u64) -> Result<(Vec<u8>, ImageStat), HostError> {
        let read = || FsRequest::Read { path: protocol_path(path) };
        let stat = self.meta_before(path, "read", read)?.ok_or_else(|| HostError::NotFound { path: path.clone() })?;
        if stat.kind != HostKind::File {
            return Err(HostError::NotAFile { path: path.clone() });
        }
        if stat.size > max_bytes {
            return Err(HostError::TooLarge { path: path.clone(), size: stat.size, max: max_bytes });
        }
        match self.serve("read", path, FsRequest::Read { path: protocol_path(path) })? {
            FsReply::Bytes(bytes) => Ok((bytes, stat)),
            _ => Err(host_error("read", path, libc_eio())),
        }
    }

    fn write(&self, path: &VPath, bytes: &[u8]) -> Result<ImageStat, HostError> {
        let write = || FsRequest::Write { path: protocol_path(path), data: bytes.to_vec() };
        if let Some(existing) = self.meta_before(path, "write", write)?
            && existing.kind != HostKind::File
        {
            return Err(HostError::NotAFile { path: path.clone() });
        }
        self.serve("write", path, FsRequest::Write { path: protocol_path(path), data: bytes.to_vec() })?;
        self.meta(path)?.ok_or_else(|| HostError::NotFound { path: path.clone() })
    }

    fn list(&self, path: &VPath) -> Result<Vec<(String, HostKind)>, HostError> {
        match self.serve("read_dir", path, FsRequest::ReadDir { path: protocol_path(path), metadata: false })? {
            FsReply::Entries(entries) => Ok(entries.into_iter().map(|(name, meta)| (name, kind(meta.kind))).collect()),
            _ => Err(host_error("read_dir", path, libc_eio())),
        }
    }

    fn run(&self, command: &ImageCommand<'_>) -> Result<ImageOutput, std::io::Error> {
        // `env` starts the program in the working directory with exactly the
        // environment given (the candidate's commands always start at its root).
        let mut argv: Vec<String> = vec!["/usr/bin/env".to_owned(), "-i".to_owned(), "-C".to_owned()];
        argv.push(command.cwd.to_string_lossy().into_owned());
        argv.extend(command.env.iter().map(|(key, value)| format!("{key}={value}")));
        argv.push(command.program.to_string_lossy().into_owned());
        argv.extend(command.args.iter().map(|arg: &OsString| arg.to_string_lossy().into_owned()));
        let code = serde_json::to_string(&argv).map_err(std::io::Error::other)?;
        let mut budget = ExecutionBudget::default();
        budget.max_duration = command.timeout;
        budget.max_request_duration = budget.max_request_duration.max(command.timeout + Duration::from_secs(5));
        // A command that fails keeps what it changed, as on a directory.
        let request =
            RunRequest::new(&code).with_language(Language::Command).with_budget(budget).with_failure_accepted();
        let cancel = ExecutionCancellation::new();
        let done = std::sync::atomic::AtomicBool::new(false);
        let ran = std::thread::scope(|scope| {
            let watcher = scope.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    if command.cancelled.load(Ordering::Acquire) {
                        cancel.cancel();
                        return;
                    }
                    std::thread::sleep(CANCEL_POLL);
                }
            });
            let ran = self.0.run_cancellable(&request, &cancel);
            done.store(true, Ordering::Release);
            let _ = watcher.join();
            ran
        });
        match ran {
            Ok(step) => Ok(ImageOutput {
                exit_code: (step.exit_code < 128).then_some(step.exit_code),
                signal: (step.exit_code >= 128).then_some(step.exit_code - 128),
                stdout: step.stdout,
                stderr: step.stderr,
                timed_out: false,
                cancelled: false,
            }),
            Err(VshError::Cancelled) => Ok(ImageOutput { cancelled: true, ..ImageOutput::default() }),
            Err(VshError::Execution(error))
                if matches!(error.as_ref(), vsh_monty::ExecutionError::Limit { limit, .. }
                    if limit.limit == vsh_monty::LimitKind::Duration) =>
            {
                Ok(ImageOutput { timed_out: true, ..ImageOutput::default() })
            }
            Err(error) => Err(std::io::Error::other(error.to_string())),
        }
    }
}
