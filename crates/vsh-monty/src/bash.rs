//! Bash programs (the `vsh-bash` interpreter) served by the same guarded
//! image as Monty's: each [`FsRequest`] is authorized, charged and recorded
//! by [`OsHost`] exactly as the Monty call that does the same thing, so a
//! `cat` is a content read, an `ls` a name-set read (with metadata only when
//! the command shows it), `test -e` an existence probe.
//!
//! A refusal is the script's `EACCES` and is recorded (the transaction is
//! denied even if the script goes on); a budget, a cancellation or a terminal
//! image error stops the run.

use monty_types::{ExcType, MontyException};
use vsh_bash::{FsReply, FsRequest, Meta, NodeType, Stopped};
use vsh_policy::AccessKind;
use vsh_types::NodeKind;

use crate::dispatch::{Dispatcher, Stop};
use crate::drive::Reply;
use crate::guard::{Create, DirectoryRead, Intent, MetadataRead};
use crate::host::{Fault, OsHost, Target, WriteKind, vfs_fault};
use crate::oserror::{EACCES, EIO};

/// `EINVAL`.
const EINVAL: i32 = 22;
/// `EEXIST`.
const EEXIST: i32 = 17;

/// The errno a guest exception stands for: the `[Errno N]` of an `OSError`,
/// else by its type.
fn errno_of(exception: &MontyException) -> i32 {
    let from_message = exception
        .message()
        .and_then(|message| message.strip_prefix("[Errno "))
        .and_then(|rest| rest.split(']').next())
        .and_then(|number| number.parse().ok());
    from_message.unwrap_or(match exception.exc_type() {
        ExcType::FileNotFoundError => 2,
        ExcType::PermissionError => EACCES,
        ExcType::FileExistsError => 17,
        ExcType::NotADirectoryError => 20,
        ExcType::IsADirectoryError => 21,
        ExcType::ValueError | ExcType::UnicodeDecodeError => EINVAL,
        _ => EIO,
    })
}

fn node_type(kind: NodeKind) -> NodeType {
    match kind {
        NodeKind::File => NodeType::File,
        NodeKind::Directory => NodeType::Directory,
        NodeKind::Symlink => NodeType::Symlink,
    }
}

/// What a listing says of an entry when the command asked only for names and
/// kinds: the kind, and the defaults a new node of that kind would get.
fn kind_only(kind: NodeKind) -> Meta {
    let mode = match kind {
        NodeKind::Directory => vsh_vfs::DEFAULT_DIR_MODE,
        NodeKind::File | NodeKind::Symlink => 0o644,
    };
    Meta { kind: node_type(kind), size: 0, mode, modified_ns: 0 }
}

fn meta_of(metadata: &vsh_vfs::Metadata) -> Meta {
    // Times before the epoch or beyond i64 nanoseconds are shown as 0.
    #[expect(clippy::cast_possible_truncation, reason = "bounded by the check before it")]
    let modified_ns = if metadata.mtime.is_finite() && metadata.mtime >= 0.0 && metadata.mtime < 9.2e9 {
        (metadata.mtime * 1e9) as i64
    } else {
        0
    };
    Meta { kind: node_type(metadata.kind), size: metadata.size, mode: metadata.mode, modified_ns }
}

impl OsHost<'_> {
    /// Serve one file request of a Bash program.
    pub(crate) fn serve_file_request(&mut self, request: FsRequest) -> Result<FsReply, Fault> {
        match request {
            FsRequest::Read { path } => {
                let target = self.target(&path, "")?;
                Ok(FsReply::Bytes(self.read_file(&target)?.to_vec()))
            }
            FsRequest::Load { path } => {
                let target = self.target(&path, "")?;
                Ok(FsReply::Bytes(self.read_file_to_change(&target)?.to_vec()))
            }
            FsRequest::ReadRange { path, offset, length } => {
                let target = self.target(&path, "")?;
                Ok(FsReply::Bytes(self.read_file_range(&target, offset, length)?))
            }
            FsRequest::Write { path, data } => {
                let target = self.target(&path, "")?;
                self.write_file(&target, data, WriteKind::Replace)?;
                Ok(FsReply::Done)
            }
            FsRequest::WriteBack { path, data, written } => {
                let target = self.target(&path, "")?;
                self.write_file_charged(&target, data, WriteKind::Replace, written)?;
                Ok(FsReply::Done)
            }
            FsRequest::Charge { path, written } => {
                let target = self.target(&path, "")?;
                self.charge_write(&target, written)?;
                Ok(FsReply::Done)
            }
            FsRequest::Append { path, data } => {
                let target = self.target(&path, "")?;
                self.write_file(&target, data, WriteKind::Append)?;
                Ok(FsReply::Done)
            }
            FsRequest::Mkdir { path, recursive } => {
                let target = self.target(&path, "")?;
                self.mkdir(&target, recursive, recursive)?;
                Ok(FsReply::Done)
            }
            FsRequest::Remove { path, recursive } => {
                let target = self.target(&path, "")?;
                self.remove(&target, recursive, false)?;
                Ok(FsReply::Done)
            }
            FsRequest::Stat { path, follow } => {
                let target = self.target(&path, "")?;
                let grant = self.look(&target.path, target.guest)?;
                let last = if follow { self.follow_look(grant, target.guest)? } else { grant };
                let metadata = self.metadata(&last).map_err(|error| vfs_fault(error, target.guest))?;
                Ok(FsReply::Meta(meta_of(&metadata)))
            }
            FsRequest::ReadDir { path, metadata } => {
                let target = self.target(&path, "")?;
                self.list(&target, metadata).map(FsReply::Entries)
            }
            FsRequest::Exists { path } => Ok(FsReply::Exists(self.exists(&path)?)),
            FsRequest::Rename { from, to } => {
                let (source, destination) = (self.target(&from, "")?, self.target(&to, "")?);
                self.rename(&source, &destination)?;
                Ok(FsReply::Done)
            }
            FsRequest::Copy { from, to } => {
                let (source, destination) = (self.target(&from, "")?, self.target(&to, "")?);
                self.copy_file(&source, &destination, true)?;
                Ok(FsReply::Done)
            }
            FsRequest::ReadLink { path } => {
                let target = self.target(&path, "")?;
                let bytes = self.link_target(&target.path, target.guest)?;
                Ok(FsReply::Target(String::from_utf8_lossy(&bytes).into_owned()))
            }
            FsRequest::Chmod { path, mode } => {
                let target = self.target(&path, "")?;
                let grant = self.authorize_look_before(&target.path, Intent::Write, target.guest)?;
                let last = self.follow(grant, target.guest)?;
                // A change of mode is what the diff will call it, as a
                // write is: part of a creation where the base held nothing
                // (ux78 H1: `install -m`, `cp -p`, `shutil.copy` and sed's
                // temporary file were refused a new file by a rule that
                // denies only `modify`).
                let changes = self.in_base(&last).map_err(|error| vfs_fault(error, target.guest))?;
                let write = self.authorize_write(last.path(), changes, target.guest)?;
                self.set_mode(&write, mode).map_err(|error| vfs_fault(error, target.guest))?;
                Ok(FsReply::Done)
            }
            FsRequest::Symlink { path, target: pointee } => {
                let target = self.target(&path, "")?;
                let grant =
                    self.authorize_look_before(&target.path, Intent::Access(AccessKind::Create), target.guest)?;
                if self.kind(&grant).map_err(|error| vfs_fault(error, target.guest))?.is_some() {
                    return Ok(FsReply::Failed(EEXIST));
                }
                let create = self.authorize::<Create>(&target.path, target.guest)?;
                self.create_symlink(&create, pointee.as_bytes()).map_err(|error| vfs_fault(error, target.guest))?;
                Ok(FsReply::Done)
            }
        }
    }

    /// A directory's visible entries: names and kinds (part of the listing's
    /// name-set read), and each entry's metadata only when asked (each then a
    /// metadata read of its own). A node no guest can be shown is left out
    /// and counted in `skipped_nodes`.
    fn list(&mut self, target: &Target<'_>, with_metadata: bool) -> Result<Vec<(String, Meta)>, Fault> {
        let grant = self.authorize::<DirectoryRead>(&target.path, target.guest)?;
        let last = self.follow(grant, target.guest)?;
        let names = self.read_dir_shared(&last).map_err(|error| vfs_fault(error, target.guest))?;
        let view = self.listing_view(&last).map_err(|error| vfs_fault(error, target.guest))?;
        self.meter.charge_directory_entries(names.len() as u64)?;
        let mut entries = Vec::with_capacity(names.len());
        for name in names.iter() {
            let Ok(child) = last.path().child(name) else { continue };
            if self.is_hidden(&last, &child, target.guest)? {
                continue;
            }
            // A node no guest can be shown (a FIFO, a socket, a device) is
            // left out and counted, as a walk skips it; the rest is listed.
            let meta = if with_metadata {
                let looked = self.authorize::<MetadataRead>(&child, target.guest)?;
                let metadata = self.metadata(&looked);
                match self.representable_value(metadata, target.guest)? {
                    Some(metadata) => meta_of(&metadata),
                    None => continue,
                }
            } else {
                let kind = self.listed_kind_in(&view, &child);
                match self.representable_value(kind, target.guest)? {
                    Some(Some(kind)) => kind_only(kind),
                    Some(None) | None => continue,
                }
            };
            entries.push((name.clone(), meta));
        }
        Ok(entries)
    }
}

/// The Monty function that runs a nested Bash script.
pub(crate) const NESTED_NAME: &str = "vsh_bash";

impl Dispatcher<'_> {
    /// `vsh_bash(code)` in this process: the script runs on this run's image
    /// and budget (each of its file accesses charged and recorded as the
    /// program's own), and returns `(exit_code, stdout, stderr)`.
    pub(crate) fn nested_bash_call(
        &mut self,
        args: Vec<monty_types::MontyObject>,
        kwargs: Vec<(monty_types::MontyObject, monty_types::MontyObject)>,
    ) -> Reply {
        let code = match crate::tools::nested_bash_code(args, kwargs) {
            Ok(code) => code,
            Err(Fault::Guest(exception)) => return Reply::Raise(exception),
            Err(_) => return Reply::Raise(MontyException::new(ExcType::TypeError, None)),
        };
        let Some(limits) = self.nested_bash else { return Reply::Raise(nested_unavailable()) };
        let run = crate::run::bash_run(&code, self.host.meter.limits(), &limits);
        let end = vsh_bash::run(&run, self);
        self.nested_bash_reply(end)
    }

    /// The Monty value of a nested script's end: `(exit_code, stdout,
    /// stderr)` for a script that ran to its end, whatever its status; a
    /// budget, an unknown command or a parse error ends the whole run.
    pub(crate) fn nested_bash_reply(&mut self, end: vsh_bash::BashEnd) -> Reply {
        use monty_types::MontyObject;
        if self.stopped() {
            return Reply::Abort("the run was ended".to_owned());
        }
        let failure = match end.ending {
            vsh_bash::Ending::Completed | vsh_bash::Ending::Signalled(_) => {
                let text = |bytes: &[u8]| MontyObject::String(String::from_utf8_lossy(bytes).into_owned());
                return Reply::Return(MontyObject::Tuple(vec![
                    MontyObject::Int(i64::from(end.exit_code)),
                    text(&end.stdout),
                    text(&end.stderr),
                ]));
            }
            vsh_bash::Ending::Limit(what) => crate::BashFailure::Limit(what),
            vsh_bash::Ending::Unsupported(name) => crate::BashFailure::Unsupported(name),
            vsh_bash::Ending::Parse(message) => crate::BashFailure::Parse(message),
            vsh_bash::Ending::Failed(message) => crate::BashFailure::Interpreter(message),
            vsh_bash::Ending::Stopped => {
                let what = "a nested bash run ended as stopped, but the parent stopped nothing".to_owned();
                return self.end(Stop::Unsupported(what), "protocol error");
            }
        };
        self.end(Stop::Bash(failure), "the nested bash script failed")
    }
}

/// `vsh_bash` when the host did not enable Bash.
pub(crate) fn nested_unavailable() -> MontyException {
    MontyException::new(
        ExcType::RuntimeError,
        Some("vsh_bash() is not available: this runtime was not configured for Bash".to_owned()),
    )
}

/// Serve one file request on `host`, in a run whose end (once decided) is
/// `stop`: refused once the run is ended, interrupted or past its
/// deadline; charged as one host call; a guest error is the request's
/// errno, a refusal `EACCES` (recorded); a budget or a terminal image
/// error ends the run. The Bash interpreter's requests and a candidate's
/// kernel requests are both served here.
pub(crate) fn serve_file(
    host: &mut OsHost<'_>,
    stop: &mut Option<Stop>,
    interrupted: bool,
    request: FsRequest,
) -> Result<FsReply, Stopped> {
    if stop.is_some() {
        return Err(Stopped);
    }
    if interrupted {
        stop.get_or_insert(Stop::Cancelled);
        return Err(Stopped);
    }
    if let Err(limit) = host.meter.check_deadline() {
        stop.get_or_insert(Stop::Limit(limit));
        return Err(Stopped);
    }
    if let Err(limit) = host.meter.charge_os_call() {
        stop.get_or_insert(Stop::Limit(limit));
        return Err(Stopped);
    }
    let served = match host.serve_file_request(request) {
        Err(Fault::ThroughSymlink { at, guest }) => Err(host.through_symlink(at, &guest)),
        served => served,
    };
    let ended = match served {
        Ok(reply) => return Ok(reply),
        Err(Fault::Guest(exception)) => return Ok(FsReply::Failed(errno_of(&exception))),
        Err(Fault::Refused(refused)) => match host.record_denial(refused.1) {
            Err(Fault::Limit(limit)) => Stop::Limit(limit),
            _ => return Ok(FsReply::Failed(EACCES)),
        },
        Err(Fault::Limit(limit)) => Stop::Limit(limit),
        Err(Fault::Vfs(error)) => Stop::Vfs(error),
        Err(Fault::ThroughSymlink { .. }) => return Ok(FsReply::Failed(crate::oserror::ELOOP)),
    };
    stop.get_or_insert(ended);
    Err(Stopped)
}

/// What one file request served outside a program did
/// ([`serve_request`]): its answer, the accesses the policy refused (each
/// denies the transaction the image belongs to) and what it used.
#[derive(Debug)]
pub struct ServedRequest {
    /// The answer: a value, or the errno a process would get.
    pub reply: FsReply,
    /// Accesses the policy refused.
    pub denied: Vec<vsh_policy::DeniedAccess>,
    /// What it used (one host call, the bytes read and written, ...).
    pub stats: crate::ExecutionStats,
}

/// Serve one file request on `vfs` exactly as a program's own access is
/// served (the same authorization, facets, refusals and budgets): for a
/// caller that acts on an image directly, such as a seed `Host` over a
/// candidate workspace.
///
/// # Errors
///
/// A budget of `limits` ([`crate::ExecutionError::Limit`]) or a terminal
/// image error ([`crate::ExecutionError::Vfs`]): the request did nothing.
#[expect(clippy::result_large_err, reason = "see `crate::execute`")]
pub fn serve_request(
    vfs: &mut vsh_vfs::VirtualFs,
    policy: &vsh_policy::CallPolicy,
    limits: &crate::ExecutionLimits,
    request: FsRequest,
) -> Result<ServedRequest, crate::ExecutionError> {
    let mut host = OsHost::new(vfs, policy, limits, std::time::Instant::now());
    let mut stop = None;
    let served = serve_file(&mut host, &mut stop, false, request);
    let mut stats = std::mem::take(&mut host.meter.stats);
    stats.denied_accesses = host.denied.attempts();
    let denied = std::mem::take(&mut host.denied).into_list();
    match (served, stop) {
        (Ok(reply), _) => Ok(ServedRequest { reply, denied, stats }),
        (Err(_), Some(Stop::Vfs(source))) => Err(crate::ExecutionError::Vfs { source }),
        (Err(_), Some(Stop::Limit(limit))) => {
            Err(crate::ExecutionError::Limit { limit, stdout: String::new(), stats, denied })
        }
        (Err(_), _) => Err(crate::ExecutionError::Cancelled { stdout: String::new(), stats, denied }),
    }
}

impl vsh_bash::FsHost for Dispatcher<'_> {
    fn serve(&mut self, request: FsRequest) -> Result<FsReply, Stopped> {
        let interrupted = Dispatcher::interrupted(self);
        let (host, stop) = self.parts();
        serve_file(host, stop, interrupted, request)
    }

    fn interrupted(&mut self) -> bool {
        if self.stopped() {
            return true;
        }
        if Dispatcher::interrupted(self) {
            let _abort = self.end(Stop::Cancelled, "cancelled");
            return true;
        }
        if let Err(limit) = self.host.meter.check_deadline() {
            let _abort = self.end(Stop::Limit(limit), "request deadline passed");
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_come_from_the_message_or_the_type() {
        assert_eq!(errno_of(&crate::oserror::os_error(39, "x")), 39);
        assert_eq!(errno_of(&MontyException::new(ExcType::ValueError, Some("bad".to_owned()))), EINVAL);
        assert_eq!(errno_of(&MontyException::new(ExcType::FileNotFoundError, None)), 2);
    }
}
