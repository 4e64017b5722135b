//! [`OsHost`]: serves every [`OsFunctionCall`] of monty 0.0.23 from a
//! [`VirtualFs`], under a [`CallPolicy`] and the run's budgets.
//!
//! Each call follows the same order: check the guest path (size, NUL, inside
//! the workspace), authorize every path it touches, charge the budgets, and only
//! then touch the virtual image. A denial is recorded and raised in the guest
//! as `PermissionError`; budgets and terminal VFS errors end the run.
//!
//! # Symlinks
//!
//! A symlink *inside* a path (`link/file`) is never traversed: the guest gets
//! `OSError` errno 40, or, when the link leads out of the workspace,
//! `PermissionError` and a recorded refusal (the transaction is denied even if
//! the guest catches it). A symlink as the *last* component is followed, as
//! `CPython` does, by the calls that follow it there (`exists`, `is_file`,
//! `is_dir`, `stat`, reads, writes, `open`, `iterdir`), lexically and only
//! within the workspace: each hop is authorized, a target outside the workspace
//! gives `PermissionError`, and more than 40 hops give errno 40. `is_symlink`,
//! `unlink`, `rmdir`, `rename` and `mkdir` act on the link itself.

use std::sync::Arc;

use monty_types::{
    ExcType, FileMode, GetenvArgs, MkdirCallArgs, MontyException, MontyFileHandle, MontyObject, OpenCallArgs,
    OsFunctionCall, PathBytesDataArgs, PathStringDataArgs, RenameCallArgs, UnicodeErrorData, dir_stat, file_stat,
    symlink_stat, unicode_decode_error_msg, utf8_error_reason,
};
use vsh_policy::{AccessKind, DeniedAccess};
use vsh_types::{NodeKind, VPath};
use vsh_vfs::{DEFAULT_DIR_MODE, VfsError};

pub(crate) use crate::guard::OsHost;
use crate::guard::{ContentRead, Create, DirectoryRead, Grant, Intent, MetadataRead, Modify, Write};
use crate::limits::LimitExceeded;
use crate::oserror::{self, EACCES, EEXIST, EISDIR, ELOOP, ENOENT};
use crate::path;

/// The synthetic environment every guest sees; nothing comes from the host
/// process. Sorted by name.
const GUEST_ENVIRONMENT: [(&str, &str); 4] =
    [("HOME", "/home/vsh"), ("LANG", "C.UTF-8"), ("PATH", "/usr/bin:/bin"), ("PWD", path::VIRTUAL_ROOT)];

/// Why a call was not answered with a value.
#[derive(Debug)]
pub(crate) enum Fault {
    /// Raise this exception in the guest (it may catch it).
    Guest(MontyException),
    /// A budget ran out: the run ends.
    Limit(LimitExceeded),
    /// The virtual image failed terminally: the run ends.
    Vfs(VfsError),
    /// An access that leaves the workspace (or is otherwise refused where the
    /// refusal was found, deep in a call): raise the exception, and record
    /// the refusal so the transaction is denied even if the guest catches it.
    Refused(Box<(MontyException, DeniedAccess)>),
    /// The guest path `guest` continues below the symlink `at`, which is
    /// never traversed: [`OsHost::through_symlink`] makes it a refusal when
    /// the link leads out of the workspace, else `OSError` errno 40.
    ThroughSymlink {
        /// The symlink on the way.
        at: VPath,
        /// The guest's path.
        guest: String,
    },
}

impl From<LimitExceeded> for Fault {
    fn from(limit: LimitExceeded) -> Self {
        Self::Limit(limit)
    }
}

impl From<MontyException> for Fault {
    fn from(exception: MontyException) -> Self {
        Self::Guest(exception)
    }
}

/// A terminal VFS error ends the run; a mount point crossed is a refused way
/// out of the workspace; any other becomes the guest's `OSError` about `guest`.
pub(crate) fn vfs_fault(error: VfsError, guest: &str) -> Fault {
    match error {
        VfsError::CrossesMount { path } => {
            let denied = DeniedAccess::outside(&format!("mount point at {path}"), path, AccessKind::MetadataRead);
            Fault::Refused(Box::new((oserror::os_error(EACCES, guest), denied)))
        }
        VfsError::SymlinkInPath { path } => Fault::ThroughSymlink { at: path, guest: guest.to_owned() },
        error if error.is_terminal() => Fault::Vfs(error),
        error => Fault::Guest(oserror::from_vfs(&error, guest)),
    }
}

/// The refusal of a guest path outside the workspace.
fn outside(guest: &str) -> Fault {
    let denied = DeniedAccess::outside(guest, VPath::root(), AccessKind::MetadataRead);
    Fault::Refused(Box::new((oserror::os_error(EACCES, guest), denied)))
}

/// A guest path and the workspace path it names.
pub(crate) struct Target<'g> {
    pub(crate) guest: &'g str,
    pub(crate) path: VPath,
}

impl OsHost<'_> {
    /// Serve one call. The match names every variant of monty 0.0.23, so a new
    /// upstream variant is a compile error here.
    pub(crate) fn handle(&mut self, call: OsFunctionCall) -> Result<MontyObject, Fault> {
        let null_message = call.embedded_null_message(false);
        match call {
            OsFunctionCall::Exists(guest) => self.predicate(&guest, Predicate::Exists),
            OsFunctionCall::IsFile(guest) => self.predicate(&guest, Predicate::IsFile),
            OsFunctionCall::IsDir(guest) => self.predicate(&guest, Predicate::IsDir),
            OsFunctionCall::IsSymlink(guest) => self.predicate(&guest, Predicate::IsSymlink),
            OsFunctionCall::ReadText(guest) => {
                let target = self.target(&guest, null_message)?;
                self.read_text_file(&target, decode_text).map(MontyObject::String)
            }
            OsFunctionCall::ReadBytes(guest) => {
                let target = self.target(&guest, null_message)?;
                Ok(MontyObject::Bytes(self.read_file(&target)?.to_vec()))
            }
            OsFunctionCall::Stat(guest) => {
                let target = self.target(&guest, null_message)?;
                self.stat(&target)
            }
            OsFunctionCall::Iterdir(guest) => {
                let target = self.target(&guest, null_message)?;
                self.iterdir(&target)
            }
            OsFunctionCall::Resolve(guest) => {
                self.lexical(&guest, null_message)?;
                Ok(MontyObject::Path(path::normalize_absolute(&guest)))
            }
            OsFunctionCall::Absolute(guest) => {
                self.lexical(&guest, null_message)?;
                Ok(MontyObject::Path(path::absolute(&guest)))
            }
            OsFunctionCall::WriteText(PathStringDataArgs { path, data }) => {
                let target = self.target(&path, null_message)?;
                let written = data.chars().count();
                self.write_file(&target, data.into_bytes(), WriteKind::Replace)?;
                Ok(int(written))
            }
            OsFunctionCall::AppendText(PathStringDataArgs { path, data }) => {
                let target = self.target(&path, null_message)?;
                let written = data.chars().count();
                self.write_file(&target, data.into_bytes(), WriteKind::Append)?;
                Ok(int(written))
            }
            OsFunctionCall::WriteBytes(PathBytesDataArgs { path, data }) => {
                let target = self.target(&path, null_message)?;
                let written = data.len();
                self.write_file(&target, data, WriteKind::Replace)?;
                Ok(int(written))
            }
            OsFunctionCall::AppendBytes(PathBytesDataArgs { path, data }) => {
                let target = self.target(&path, null_message)?;
                let written = data.len();
                self.write_file(&target, data, WriteKind::Append)?;
                Ok(int(written))
            }
            OsFunctionCall::Open(OpenCallArgs { path, mode }) => {
                let target = self.target(&path, null_message)?;
                self.open(&target, mode)
            }
            OsFunctionCall::Mkdir(MkdirCallArgs { path, parents, exist_ok }) => {
                let target = self.target(&path, null_message)?;
                self.mkdir(&target, parents, exist_ok)?;
                Ok(MontyObject::None)
            }
            // A removal looks first, as `vsh_remove` does: a path a rule
            // hides is refused (its look or its removal) whether it is
            // there or not, never removed or missing by what is hidden.
            OsFunctionCall::Unlink(guest) => {
                let target = self.target(&guest, null_message)?;
                self.authorize_look_before(&target.path, Intent::Access(AccessKind::Delete), target.guest)?;
                let grant = self.authorize_removal(&target.path, target.guest)?;
                self.unlink(&grant).map_err(|error| vfs_fault(error, target.guest))?;
                Ok(MontyObject::None)
            }
            OsFunctionCall::Rmdir(guest) => {
                let target = self.target(&guest, null_message)?;
                self.authorize_look_before(&target.path, Intent::Access(AccessKind::Delete), target.guest)?;
                let grant = self.authorize_removal(&target.path, target.guest)?;
                self.rmdir(&grant, target.guest)?;
                Ok(MontyObject::None)
            }
            OsFunctionCall::Rename(RenameCallArgs { src, dst }) => {
                let source = self.target(&src, null_message)?;
                let destination = self.target(&dst, "rename: embedded null character in dst")?;
                self.rename(&source, &destination)?;
                // `Path.rename` returns the target as given; `os.rename` shares
                // this call and so returns it too instead of `None`.
                Ok(MontyObject::Path(dst.into_string()))
            }
            OsFunctionCall::Getenv(GetenvArgs { key, default }) => Ok(GUEST_ENVIRONMENT
                .iter()
                .find(|(name, _)| *name == key)
                .map_or(default, |(_, value)| MontyObject::String((*value).to_owned()))),
            OsFunctionCall::GetEnviron => Ok(MontyObject::dict(
                GUEST_ENVIRONMENT
                    .iter()
                    .map(|(name, value)| {
                        (MontyObject::String((*name).to_owned()), MontyObject::String((*value).to_owned()))
                    })
                    .collect::<Vec<_>>(),
            )),
            OsFunctionCall::DateToday => Err(no_clock("date.today()")),
            OsFunctionCall::DateTimeNow(_) => Err(no_clock("datetime.now()")),
        }
    }

    // ----- paths and authorization -----

    /// Check a guest path's size (a budget), then NUL (`ValueError`), then that
    /// it lies in the workspace (`PermissionError`).
    pub(crate) fn target<'g>(&self, guest: &'g str, null_message: &str) -> Result<Target<'g>, Fault> {
        self.lexical(guest, null_message)?;
        match path::to_workspace(guest) {
            Some(path) => Ok(Target { guest, path }),
            // Refused, and counted: probing the way out denies the transaction.
            None => Err(outside(guest)),
        }
    }

    /// The checks every path argument gets, even one only handled as a string.
    fn lexical(&self, guest: &str, null_message: &str) -> Result<(), Fault> {
        self.meter.check_path(guest.len())?;
        if guest.contains('\0') {
            return Err(Fault::Guest(MontyException::new(ExcType::ValueError, Some(null_message.to_owned()))));
        }
        Ok(())
    }

    // ----- queries -----

    /// `exists()`, `is_file()`, `is_dir()`, `is_symlink()`: `False` for any path
    /// that is missing, unreachable, refused or malformed. Budgets and terminal
    /// VFS errors still end the run; a refusal is still recorded.
    fn predicate(&mut self, guest: &str, predicate: Predicate) -> Result<MontyObject, Fault> {
        let fault = match self.probe(guest, predicate) {
            Ok(answer) => return Ok(MontyObject::Bool(answer)),
            Err(Fault::ThroughSymlink { at, guest }) => self.through_symlink(at, &guest),
            Err(fault) => fault,
        };
        match self.settle_look(fault)? {
            Fault::Guest(_) => Ok(MontyObject::Bool(false)),
            fatal => Err(fatal),
        }
    }

    fn probe(&mut self, guest: &str, predicate: Predicate) -> Result<bool, Fault> {
        let target = self.target(guest, "")?;
        let grant = self.look(&target.path, guest)?;
        let last = match predicate {
            Predicate::IsSymlink => grant,
            Predicate::Exists | Predicate::IsFile | Predicate::IsDir => self.follow_look(grant, guest)?,
        };
        let kind = self.kind(&last).map_err(|error| vfs_fault(error, guest))?;
        Ok(match predicate {
            Predicate::Exists => kind.is_some(),
            Predicate::IsFile => kind == Some(NodeKind::File),
            Predicate::IsDir => kind == Some(NodeKind::Directory),
            Predicate::IsSymlink => kind == Some(NodeKind::Symlink),
        })
    }

    /// Whether anything is at `guest` (following a final symlink): the
    /// `exists()` predicate, for callers outside Python.
    pub(crate) fn exists(&mut self, guest: &str) -> Result<bool, Fault> {
        match self.predicate(guest, Predicate::Exists)? {
            MontyObject::Bool(there) => Ok(there),
            _ => Ok(false),
        }
    }

    fn stat(&mut self, target: &Target<'_>) -> Result<MontyObject, Fault> {
        let grant = self.look(&target.path, target.guest)?;
        let last = self.follow_look(grant, target.guest)?;
        let metadata = self.metadata(&last).map_err(|error| vfs_fault(error, target.guest))?;
        let permissions = i64::from(metadata.mode & vsh_types::MODE_MASK);
        Ok(match metadata.kind {
            NodeKind::File => {
                file_stat(0o100_000 | permissions, i64::try_from(metadata.size).unwrap_or(i64::MAX), metadata.mtime)
            }
            NodeKind::Directory => dir_stat(0o040_000 | permissions, metadata.mtime),
            NodeKind::Symlink => symlink_stat(0o120_000 | permissions, metadata.mtime),
        })
    }

    /// Authorize, size, charge, then read a file's bytes.
    pub(crate) fn read_file(&mut self, target: &Target<'_>) -> Result<Arc<[u8]>, Fault> {
        self.read_file_shown(target, true)
    }

    /// [`OsHost::read_file`] decoded by `decode`: bytes that do not decode
    /// raise, and gave the program nothing, so they are not counted shown
    /// (sec77: a failed read made a blind rewrite after it pass).
    pub(crate) fn read_text_file(
        &mut self,
        target: &Target<'_>,
        decode: fn(&[u8]) -> Result<String, MontyException>,
    ) -> Result<String, Fault> {
        let shown_before = self.vfs_shown(&target.path);
        let bytes = self.read_file(target)?;
        decode(&bytes).map_err(|error| {
            self.unshow(&target.path, shown_before);
            Fault::Guest(error)
        })
    }

    /// [`OsHost::read_file`], for a change: the bytes a candidate's server
    /// loads before a write into them, which the process did not read (the
    /// image does not count them shown: [`vsh_vfs::VirtualFs::shown_contents`]).
    pub(crate) fn read_file_to_change(&mut self, target: &Target<'_>) -> Result<Arc<[u8]>, Fault> {
        self.read_file_shown(target, false)
    }

    fn read_file_shown(&mut self, target: &Target<'_>, shown: bool) -> Result<Arc<[u8]>, Fault> {
        let grant = self.authorize::<ContentRead>(&target.path, target.guest)?;
        let last = self.follow(grant, target.guest)?;
        let size = self.file_size(&last).map_err(|error| vfs_fault(error, target.guest))?;
        self.meter.charge_read_call(size)?;
        let read = if shown { self.read(&last) } else { self.read_unshown(&last) };
        read.map_err(|error| vfs_fault(error, target.guest))
    }

    /// Authorize, charge, then read up to `length` bytes of a file from
    /// `offset` (charged what the file holds there, not what was asked for,
    /// and, the first time, the whole file, which the host reads to hash it).
    pub(crate) fn read_file_range(&mut self, target: &Target<'_>, offset: u64, length: u32) -> Result<Vec<u8>, Fault> {
        let grant = self.authorize::<ContentRead>(&target.path, target.guest)?;
        let last = self.follow(grant, target.guest)?;
        let hashed = self.read_range_cost(&last).map_err(|error| vfs_fault(error, target.guest))?;
        self.meter.charge_read_bytes(hashed)?;
        let size = self.file_size(&last).map_err(|error| vfs_fault(error, target.guest))?;
        self.meter.charge_read_call(size.saturating_sub(offset).min(u64::from(length)))?;
        self.read_range(&last, offset, length).map_err(|error| vfs_fault(error, target.guest))
    }

    pub(crate) fn iterdir(&mut self, target: &Target<'_>) -> Result<MontyObject, Fault> {
        let grant = self.authorize::<DirectoryRead>(&target.path, target.guest)?;
        let last = self.follow(grant, target.guest)?;
        let names = self.read_dir(&last).map_err(|error| vfs_fault(error, target.guest))?;
        self.meter.charge_directory_entries(names.len() as u64)?;
        let mut entries = Vec::with_capacity(names.len());
        for name in names {
            let hidden = match last.path().child(&name) {
                Ok(child) => self.is_hidden(&last, &child, target.guest)?,
                Err(_) => false,
            };
            if !hidden {
                entries.push(MontyObject::Path(path::guest_child(target.guest, &name)));
            }
        }
        Ok(MontyObject::List(entries))
    }

    // ----- mutations -----

    /// Authorize a write to `target` (`Modify` where the base held something,
    /// else `Create`, as the diff will call it: a file this run made is
    /// created however often it is written; decided after `MetadataRead` is
    /// authorized); returns the grant of the path written and its size if it
    /// existed as a file. Refuses directories with `EISDIR`.
    fn prepare_write(&mut self, target: &Target<'_>) -> Result<(Grant<Write>, Option<u64>), Fault> {
        let grant = self.authorize_look_before(&target.path, Intent::Write, target.guest)?;
        let last = self.follow(grant, target.guest)?;
        let kind = self.kind(&last).map_err(|error| vfs_fault(error, target.guest))?;
        if kind == Some(NodeKind::Directory) {
            return Err(Fault::Guest(oserror::os_error(EISDIR, target.guest)));
        }
        // Where the base held something, the diff calls what is left there a
        // modify, even after the run removed it first (`rm f; echo > f`,
        // `install` and `tar -x` over a file: ux79 H2).
        let changes = self.in_base(&last).map_err(|error| vfs_fault(error, target.guest))?;
        let write = self.authorize_write(last.path(), changes, target.guest)?;
        let existing_size = match kind {
            Some(NodeKind::File) => Some(self.file_size(&write).map_err(|error| vfs_fault(error, target.guest))?),
            _ => None,
        };
        Ok((write, existing_size))
    }

    pub(crate) fn write_file(&mut self, target: &Target<'_>, data: Vec<u8>, kind: WriteKind) -> Result<(), Fault> {
        let charge = data.len() as u64;
        self.write_file_charged(target, data, kind, charge)
    }

    /// [`OsHost::write_file`], charging `charge` bytes written instead of
    /// the data's length (a real process's write-back: what it wrote since
    /// the last one).
    pub(crate) fn write_file_charged(
        &mut self,
        target: &Target<'_>,
        data: Vec<u8>,
        kind: WriteKind,
        charge: u64,
    ) -> Result<(), Fault> {
        let (last, existing_size) = self.prepare_write(target)?;
        self.meter.charge_write_call(charge)?;
        match kind {
            WriteKind::Replace => self.write(&last, data.into()).map_err(|error| vfs_fault(error, target.guest)),
            WriteKind::Append => {
                // Appending materializes the old content, which is charged as a read.
                self.meter.charge_read_bytes(existing_size.unwrap_or(0))?;
                self.append(&last, &data).map_err(|error| vfs_fault(error, target.guest))
            }
        }
    }

    /// Authorize a write to `target` and charge `written` bytes to the write
    /// budget, writing nothing (see `FsRequest::Charge`).
    pub(crate) fn charge_write(&mut self, target: &Target<'_>, written: u64) -> Result<(), Fault> {
        self.prepare_write(target)?;
        self.meter.charge_write_call(written)?;
        Ok(())
    }

    /// `open(path, mode)`: the open-time effect of `mode` (existence check,
    /// truncation, creation), then a handle that holds no host resource.
    fn open(&mut self, target: &Target<'_>, mode: FileMode) -> Result<MontyObject, Fault> {
        let position = match mode {
            FileMode::Read(_) | FileMode::ReadUpdate(_) => {
                let grant = self.authorize::<ContentRead>(&target.path, target.guest)?;
                let last = self.follow(grant, target.guest)?;
                match self.kind(&last).map_err(|error| vfs_fault(error, target.guest))? {
                    None => return Err(Fault::Guest(oserror::os_error(ENOENT, target.guest))),
                    Some(NodeKind::Directory) => return Err(Fault::Guest(oserror::os_error(EISDIR, target.guest))),
                    Some(NodeKind::File | NodeKind::Symlink) => {}
                }
                if matches!(mode, FileMode::ReadUpdate(_)) {
                    self.authorize::<Modify>(last.path(), target.guest)?;
                }
                0
            }
            FileMode::Write(_) | FileMode::WriteUpdate(_) => {
                if matches!(mode, FileMode::WriteUpdate(_)) {
                    self.authorize::<ContentRead>(&target.path, target.guest)?;
                }
                let (last, _) = self.prepare_write(target)?;
                self.write(&last, Arc::from(&[][..])).map_err(|error| vfs_fault(error, target.guest))?;
                0
            }
            FileMode::Append(_) | FileMode::AppendUpdate(_) => {
                if matches!(mode, FileMode::AppendUpdate(_)) {
                    self.authorize::<ContentRead>(&target.path, target.guest)?;
                }
                let (last, existing_size) = self.prepare_write(target)?;
                if let Some(size) = existing_size {
                    size
                } else {
                    self.write(&last, Arc::from(&[][..])).map_err(|error| vfs_fault(error, target.guest))?;
                    0
                }
            }
        };
        Ok(MontyObject::FileHandle(MontyFileHandle { path: target.guest.to_owned(), mode, position }))
    }

    pub(crate) fn mkdir(&mut self, target: &Target<'_>, parents: bool, exist_ok: bool) -> Result<(), Fault> {
        let grant = self.authorize_look_before(&target.path, Intent::Access(AccessKind::Create), target.guest)?;
        let mut created_ancestors = Vec::new();
        if parents {
            // Every missing ancestor is created, so each is authorized first.
            let mut missing = Vec::new();
            for ancestor in target.path.ancestors().into_iter().filter(|ancestor| !ancestor.is_root()) {
                let looked = self.authorize::<MetadataRead>(&ancestor, target.guest)?;
                match self.kind(&looked).map_err(|error| vfs_fault(error, target.guest))? {
                    None => missing.push(ancestor),
                    Some(NodeKind::Directory) => {}
                    Some(NodeKind::File) => return Err(Fault::Guest(oserror::os_error(20, target.guest))),
                    Some(NodeKind::Symlink) => return Err(Fault::Guest(oserror::os_error(ELOOP, target.guest))),
                }
            }
            let existing = self.kind(&grant).map_err(|error| vfs_fault(error, target.guest))?;
            for ancestor in &missing {
                created_ancestors.push(self.authorize::<Create>(ancestor, target.guest)?);
            }
            match existing {
                Some(NodeKind::Directory) if exist_ok => return Ok(()),
                Some(_) => return Err(Fault::Guest(oserror::os_error(EEXIST, target.guest))),
                None => {}
            }
        } else {
            match self.kind(&grant).map_err(|error| vfs_fault(error, target.guest))? {
                Some(NodeKind::Directory) if exist_ok => return Ok(()),
                Some(_) => return Err(Fault::Guest(oserror::os_error(EEXIST, target.guest))),
                None => {}
            }
        }
        let create = self.authorize::<Create>(&target.path, target.guest)?;
        let created = if parents {
            self.mkdir_all(&created_ancestors, &create, DEFAULT_DIR_MODE)
        } else {
            self.create_dir(&create, DEFAULT_DIR_MODE)
        };
        created.map_err(|error| vfs_fault(error, target.guest))
    }
}

/// Which predicate [`OsHost::predicate`] answers.
#[derive(Debug, Clone, Copy)]
enum Predicate {
    Exists,
    IsFile,
    IsDir,
    IsSymlink,
}

/// Whether a write replaces the file or extends it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WriteKind {
    Replace,
    Append,
}

pub(crate) fn int(value: usize) -> MontyObject {
    MontyObject::Int(i64::try_from(value).unwrap_or(i64::MAX))
}

/// The refusal of a clock call: vsh runs are reproducible, so they have no clock.
fn no_clock(what: &str) -> Fault {
    Fault::Guest(MontyException::new(
        ExcType::RuntimeError,
        Some(format!("{what} is not available in vsh: guest programs have no clock")),
    ))
}

/// Strict UTF-8 decoding; invalid bytes raise `UnicodeDecodeError` as
/// `CPython` words it.
pub(crate) fn decode_strict(bytes: &[u8]) -> Result<&str, MontyException> {
    std::str::from_utf8(bytes).map_err(|error| {
        let start = error.valid_up_to();
        let end = error.error_len().map_or(bytes.len(), |len| start + len);
        let first = bytes[start];
        let reason = utf8_error_reason(first, error.error_len());
        let message = unicode_decode_error_msg("utf-8", first, start, end, reason);
        MontyException::new(ExcType::UnicodeDecodeError, Some(message))
            .with_data(UnicodeErrorData::decode("utf-8", bytes, start, end, reason))
    })
}

/// Strict UTF-8 decoding with `CPython`'s universal newlines (`\r\n` and `\r`
/// become `\n`); invalid bytes raise `UnicodeDecodeError` as `CPython` words it.
fn decode_text(bytes: &[u8]) -> Result<String, MontyException> {
    let text = decode_strict(bytes)?;
    if !text.contains('\r') {
        return Ok(text.to_owned());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(index) = rest.find('\r') {
        out.push_str(&rest[..index]);
        out.push('\n');
        rest = &rest[index + 1..];
        if let Some(after) = rest.strip_prefix('\n') {
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn universal_newlines() {
        assert_eq!(decode_text(b"a\r\nb\rc\n\r\r\nd\r").unwrap(), "a\nb\nc\n\n\nd\n");
        assert_eq!(decode_text(b"plain\n").unwrap(), "plain\n");
    }

    #[test]
    fn invalid_utf8_is_a_unicode_decode_error() {
        let error = decode_text(b"ok\xffno").unwrap_err();
        assert_eq!(error.exc_type(), ExcType::UnicodeDecodeError);
        assert_eq!(error.message(), Some("'utf-8' codec can't decode byte 0xff in position 2: invalid start byte"));
        let data = error.unicode_data().unwrap();
        assert_eq!((data.start, data.end), (2, 3));
        let truncated = decode_text(b"ab\xe2\x82").unwrap_err();
        assert_eq!(
            truncated.message(),
            Some("'utf-8' codec can't decode bytes in position 2-3: unexpected end of data")
        );
    }
}
