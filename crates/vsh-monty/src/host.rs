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
//! `OSError` errno 40. A symlink as the *last* component is followed, as
//! `CPython` does, by the calls that follow it there (`exists`, `is_file`,
//! `is_dir`, `stat`, reads, writes, `open`, `iterdir`), lexically and only
//! within the workspace: each hop is authorized, a target outside the workspace
//! gives `PermissionError`, and more than 40 hops give errno 40. `is_symlink`,
//! `unlink`, `rmdir`, `rename` and `mkdir` act on the link itself.

use std::sync::Arc;
use std::time::Instant;

use monty_types::{
    ExcType, FileMode, GetenvArgs, MkdirCallArgs, MontyException, MontyFileHandle, MontyObject, OpenCallArgs,
    OsFunctionCall, PathBytesDataArgs, PathStringDataArgs, RenameCallArgs, UnicodeErrorData, dir_stat, file_stat,
    symlink_stat, unicode_decode_error_msg, utf8_error_reason,
};
use vsh_policy::{AccessKind, CallPolicy, DeniedAccess};
use vsh_types::{NodeKind, VPath};
use vsh_vfs::{DEFAULT_DIR_MODE, VfsError, VirtualFs};

use crate::limits::{ExecutionLimits, LimitExceeded, Meter};
use crate::oserror::{self, EACCES, EEXIST, EISDIR, ELOOP, ENOENT};
use crate::path;

/// Symlink hops followed before giving up with `ELOOP` (Linux's `MAXSYMLINKS`).
const MAX_SYMLINK_HOPS: u32 = 40;

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

/// The host side of one run's OS calls and `vsh_*` functions.
pub(crate) struct OsHost<'a> {
    pub(crate) vfs: &'a mut VirtualFs,
    pub(crate) policy: &'a CallPolicy,
    pub(crate) meter: Meter<'a>,
    pub(crate) denied: Vec<DeniedAccess>,
}

impl<'a> OsHost<'a> {
    /// The host of a request that began at `started`.
    pub(crate) fn new(
        vfs: &'a mut VirtualFs,
        policy: &'a CallPolicy,
        limits: &'a ExecutionLimits,
        started: Instant,
    ) -> Self {
        Self { vfs, policy, meter: Meter::new(limits, started), denied: Vec::new() }
    }

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
                let bytes = self.read_file(&target)?;
                decode_text(&bytes).map(MontyObject::String).map_err(Fault::Guest)
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
            OsFunctionCall::Unlink(guest) => {
                let target = self.target(&guest, null_message)?;
                self.authorize(&target.path, AccessKind::Delete, target.guest)?;
                self.vfs.unlink(&target.path).map_err(|error| vfs_fault(error, target.guest))?;
                Ok(MontyObject::None)
            }
            OsFunctionCall::Rmdir(guest) => {
                let target = self.target(&guest, null_message)?;
                self.authorize(&target.path, AccessKind::Delete, target.guest)?;
                self.vfs.rmdir(&target.path).map_err(|error| vfs_fault(error, target.guest))?;
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

    /// Ask the policy; a refusal is recorded and becomes the guest's
    /// `PermissionError` about `guest`. The check is one evidence record, and
    /// a refusal kept is another (see
    /// [`ExecutionLimits::max_evidence_records`]), both charged first.
    ///
    /// Beside the policy's rules, a path in (or at) another workspace's vsh
    /// data directory nested in this one, found by its store magic
    /// ([`VirtualFs::vsh_data_within`]), is refused for every access as
    /// runtime data.
    pub(crate) fn authorize(&mut self, path: &VPath, access: AccessKind, guest: &str) -> Result<(), Fault> {
        self.meter.charge_evidence(1, path.as_str().len() as u64)?;
        let denied = match self.policy.authorize(path, access) {
            Ok(()) => self.nested_store(path, access).map_err(|error| vfs_fault(error, guest))?,
            Err(denied) => Some(denied),
        };
        match denied {
            None => Ok(()),
            Some(denied) => {
                self.record_denial(denied)?;
                Err(Fault::Guest(oserror::os_error(EACCES, guest)))
            }
        }
    }

    /// The refusal of `access` to `path` if it lies in a nested vsh data directory.
    pub(crate) fn nested_store(&mut self, path: &VPath, access: AccessKind) -> Result<Option<DeniedAccess>, VfsError> {
        Ok(self.vfs.vsh_data_within(path)?.map(|store| DeniedAccess {
            path: path.clone(),
            access,
            rule: format!("vsh data directory at {store} (store magic)"),
            label: vsh_policy::RuleLabel::RuntimeData,
            rule_access: vsh_policy::AccessSet::ALL,
        }))
    }

    /// Whether a listing hides `child`: a read of it is refused by a rule, or
    /// it is (in) a nested vsh data directory.
    pub(crate) fn is_hidden(&mut self, child: &VPath, guest: &str) -> Result<bool, Fault> {
        if self.policy.is_hidden(child) {
            return Ok(true);
        }
        Ok(self.vfs.vsh_data_within(child).map_err(|error| vfs_fault(error, guest))?.is_some())
    }

    /// Keep a refusal (charged to the evidence budget first).
    pub(crate) fn record_denial(&mut self, denied: DeniedAccess) -> Result<(), Fault> {
        let bytes = (denied.path.as_str().len() + denied.rule.len()) as u64;
        self.meter.charge_evidence(1, bytes)?;
        self.denied.push(denied);
        self.meter.stats.denied_accesses = self.denied.len() as u64;
        Ok(())
    }

    /// One path a tree walk visits: an evidence record, and a check of the
    /// end-to-end deadline.
    pub(crate) fn visit(&mut self, path: &VPath) -> Result<(), Fault> {
        self.meter.check_deadline()?;
        self.meter.charge_evidence(1, path.as_str().len() as u64)?;
        Ok(())
    }

    /// The path `target` ends at after following a symlink in its last
    /// component (see the module documentation). `access` has been authorized
    /// for `target` and is authorized for every hop.
    pub(crate) fn follow(&mut self, target: &Target<'_>, access: AccessKind) -> Result<VPath, Fault> {
        let mut current = target.path.clone();
        let mut hops = 0;
        loop {
            let kind = self.vfs.kind(&current).map_err(|error| vfs_fault(error, target.guest))?;
            if kind != Some(NodeKind::Symlink) {
                return Ok(current);
            }
            hops += 1;
            if hops > MAX_SYMLINK_HOPS {
                return Err(Fault::Guest(oserror::os_error(ELOOP, target.guest)));
            }
            let link_target = self.vfs.read_link(&current).map_err(|error| vfs_fault(error, target.guest))?;
            let Some(next) = path::link_destination(&current, &link_target) else {
                let attempt = format!("{} -> {}", target.guest, String::from_utf8_lossy(&link_target));
                let denied = DeniedAccess::outside(&attempt, current, access);
                return Err(Fault::Refused(Box::new((oserror::os_error(EACCES, target.guest), denied))));
            };
            self.authorize(&next, access, target.guest)?;
            current = next;
        }
    }

    // ----- queries -----

    /// `exists()`, `is_file()`, `is_dir()`, `is_symlink()`: `False` for any path
    /// that is missing, unreachable, refused or malformed. Budgets and terminal
    /// VFS errors still end the run; a refusal is still recorded.
    fn predicate(&mut self, guest: &str, predicate: Predicate) -> Result<MontyObject, Fault> {
        match self.probe(guest, predicate) {
            Ok(answer) => Ok(MontyObject::Bool(answer)),
            Err(Fault::Guest(_)) => Ok(MontyObject::Bool(false)),
            Err(Fault::Refused(refused)) => {
                self.record_denial(refused.1)?;
                Ok(MontyObject::Bool(false))
            }
            Err(fatal) => Err(fatal),
        }
    }

    fn probe(&mut self, guest: &str, predicate: Predicate) -> Result<bool, Fault> {
        let target = self.target(guest, "")?;
        self.authorize(&target.path, AccessKind::MetadataRead, guest)?;
        let last = match predicate {
            Predicate::IsSymlink => target.path.clone(),
            Predicate::Exists | Predicate::IsFile | Predicate::IsDir => {
                self.follow(&target, AccessKind::MetadataRead)?
            }
        };
        let kind = self.vfs.kind(&last).map_err(|error| vfs_fault(error, guest))?;
        Ok(match predicate {
            Predicate::Exists => kind.is_some(),
            Predicate::IsFile => kind == Some(NodeKind::File),
            Predicate::IsDir => kind == Some(NodeKind::Directory),
            Predicate::IsSymlink => kind == Some(NodeKind::Symlink),
        })
    }

    fn stat(&mut self, target: &Target<'_>) -> Result<MontyObject, Fault> {
        self.authorize(&target.path, AccessKind::MetadataRead, target.guest)?;
        let last = self.follow(target, AccessKind::MetadataRead)?;
        let metadata = self.vfs.metadata(&last).map_err(|error| vfs_fault(error, target.guest))?;
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
        self.authorize(&target.path, AccessKind::ContentRead, target.guest)?;
        let last = self.follow(target, AccessKind::ContentRead)?;
        let size = self.vfs.file_size(&last).map_err(|error| vfs_fault(error, target.guest))?;
        self.meter.charge_read_call(size)?;
        self.vfs.read(&last).map_err(|error| vfs_fault(error, target.guest))
    }

    pub(crate) fn iterdir(&mut self, target: &Target<'_>) -> Result<MontyObject, Fault> {
        self.authorize(&target.path, AccessKind::DirectoryRead, target.guest)?;
        let last = self.follow(target, AccessKind::DirectoryRead)?;
        let names = self.vfs.read_dir(&last).map_err(|error| vfs_fault(error, target.guest))?;
        self.meter.charge_directory_entries(names.len() as u64)?;
        let mut entries = Vec::with_capacity(names.len());
        for name in names {
            let hidden = match last.child(&name) {
                Ok(child) => self.is_hidden(&child, target.guest)?,
                Err(_) => false,
            };
            if !hidden {
                entries.push(MontyObject::Path(path::guest_child(target.guest, &name)));
            }
        }
        Ok(MontyObject::List(entries))
    }

    // ----- mutations -----

    /// Authorize a write to `target` (`Create` or `Modify` by existence, decided
    /// after `MetadataRead` is authorized); returns the path written and whether
    /// it existed as a file. Refuses directories with `EISDIR`.
    fn prepare_write(&mut self, target: &Target<'_>) -> Result<(VPath, Option<u64>), Fault> {
        self.authorize(&target.path, AccessKind::MetadataRead, target.guest)?;
        let last = self.follow(target, AccessKind::MetadataRead)?;
        let kind = self.vfs.kind(&last).map_err(|error| vfs_fault(error, target.guest))?;
        if kind == Some(NodeKind::Directory) {
            return Err(Fault::Guest(oserror::os_error(EISDIR, target.guest)));
        }
        let access = if kind.is_some() { AccessKind::Modify } else { AccessKind::Create };
        self.authorize(&last, access, target.guest)?;
        let existing_size = match kind {
            Some(NodeKind::File) => Some(self.vfs.file_size(&last).map_err(|error| vfs_fault(error, target.guest))?),
            _ => None,
        };
        Ok((last, existing_size))
    }

    pub(crate) fn write_file(&mut self, target: &Target<'_>, data: Vec<u8>, kind: WriteKind) -> Result<(), Fault> {
        let (last, existing_size) = self.prepare_write(target)?;
        self.meter.charge_write_call(data.len() as u64)?;
        match kind {
            WriteKind::Replace => self.vfs.write(&last, data.into()).map_err(|error| vfs_fault(error, target.guest)),
            WriteKind::Append => {
                // Appending materializes the old content, which is charged as a read.
                self.meter.charge_read_bytes(existing_size.unwrap_or(0))?;
                self.vfs.append(&last, &data).map(drop).map_err(|error| vfs_fault(error, target.guest))
            }
        }
    }

    /// `open(path, mode)`: the open-time effect of `mode` (existence check,
    /// truncation, creation), then a handle that holds no host resource.
    fn open(&mut self, target: &Target<'_>, mode: FileMode) -> Result<MontyObject, Fault> {
        let position = match mode {
            FileMode::Read(_) | FileMode::ReadUpdate(_) => {
                self.authorize(&target.path, AccessKind::ContentRead, target.guest)?;
                let last = self.follow(target, AccessKind::ContentRead)?;
                match self.vfs.kind(&last).map_err(|error| vfs_fault(error, target.guest))? {
                    None => return Err(Fault::Guest(oserror::os_error(ENOENT, target.guest))),
                    Some(NodeKind::Directory) => return Err(Fault::Guest(oserror::os_error(EISDIR, target.guest))),
                    Some(NodeKind::File | NodeKind::Symlink) => {}
                }
                if matches!(mode, FileMode::ReadUpdate(_)) {
                    self.authorize(&last, AccessKind::Modify, target.guest)?;
                }
                0
            }
            FileMode::Write(_) | FileMode::WriteUpdate(_) => {
                if matches!(mode, FileMode::WriteUpdate(_)) {
                    self.authorize(&target.path, AccessKind::ContentRead, target.guest)?;
                }
                let (last, _) = self.prepare_write(target)?;
                self.vfs.write(&last, Arc::from(&[][..])).map_err(|error| vfs_fault(error, target.guest))?;
                0
            }
            FileMode::Append(_) | FileMode::AppendUpdate(_) => {
                if matches!(mode, FileMode::AppendUpdate(_)) {
                    self.authorize(&target.path, AccessKind::ContentRead, target.guest)?;
                }
                let (last, existing_size) = self.prepare_write(target)?;
                if let Some(size) = existing_size {
                    size
                } else {
                    self.vfs.write(&last, Arc::from(&[][..])).map_err(|error| vfs_fault(error, target.guest))?;
                    0
                }
            }
        };
        Ok(MontyObject::FileHandle(MontyFileHandle { path: target.guest.to_owned(), mode, position }))
    }

    pub(crate) fn mkdir(&mut self, target: &Target<'_>, parents: bool, exist_ok: bool) -> Result<(), Fault> {
        self.authorize(&target.path, AccessKind::MetadataRead, target.guest)?;
        let existing = if parents {
            // Every missing ancestor is created, so each is authorized first.
            let mut missing = Vec::new();
            for ancestor in target.path.ancestors().into_iter().filter(|ancestor| !ancestor.is_root()) {
                self.authorize(&ancestor, AccessKind::MetadataRead, target.guest)?;
                match self.vfs.kind(&ancestor).map_err(|error| vfs_fault(error, target.guest))? {
                    None => missing.push(ancestor),
                    Some(NodeKind::Directory) => {}
                    Some(NodeKind::File) => return Err(Fault::Guest(oserror::os_error(20, target.guest))),
                    Some(NodeKind::Symlink) => return Err(Fault::Guest(oserror::os_error(ELOOP, target.guest))),
                }
            }
            let existing = self.vfs.kind(&target.path).map_err(|error| vfs_fault(error, target.guest))?;
            for ancestor in &missing {
                self.authorize(ancestor, AccessKind::Create, target.guest)?;
            }
            existing
        } else {
            self.vfs.kind(&target.path).map_err(|error| vfs_fault(error, target.guest))?
        };
        match existing {
            Some(NodeKind::Directory) if exist_ok => return Ok(()),
            Some(_) => return Err(Fault::Guest(oserror::os_error(EEXIST, target.guest))),
            None => {}
        }
        self.authorize(&target.path, AccessKind::Create, target.guest)?;
        let created = if parents {
            self.vfs.mkdir_all(&target.path, DEFAULT_DIR_MODE)
        } else {
            self.vfs.mkdir(&target.path, DEFAULT_DIR_MODE)
        };
        created.map_err(|error| vfs_fault(error, target.guest))
    }

    /// Rename with every path authorized first: the source (`RenameSource`,
    /// `Delete`) and each of its descendants (`RenameSource`), the destination
    /// (`RenameDestination`, then `Create` or `Modify`) and each path the
    /// descendants land on (`RenameDestination`). One refusal leaves everything
    /// unchanged.
    pub(crate) fn rename(&mut self, source: &Target<'_>, destination: &Target<'_>) -> Result<(), Fault> {
        let fault = |error: VfsError| {
            if error.is_terminal() {
                Fault::Vfs(error)
            } else {
                Fault::Guest(oserror::os_error2(error.errno().unwrap_or(oserror::EIO), source.guest, destination.guest))
            }
        };
        let refused = |host: &mut Self, path: &VPath, access: AccessKind| -> Result<(), Fault> {
            host.authorize(path, access, source.guest)
                .map_err(|_| Fault::Guest(oserror::os_error2(EACCES, source.guest, destination.guest)))
        };
        refused(self, &source.path, AccessKind::RenameSource)?;
        refused(self, &source.path, AccessKind::Delete)?;
        refused(self, &destination.path, AccessKind::RenameDestination)?;
        let source_kind = self.vfs.kind(&source.path).map_err(fault)?;
        if source_kind.is_none() {
            return Err(fault(VfsError::NotFound { path: source.path.clone() }));
        }
        let destination_exists = self.vfs.exists(&destination.path).map_err(fault)?;
        let access = if destination_exists { AccessKind::Modify } else { AccessKind::Create };
        refused(self, &destination.path, access)?;
        if source_kind == Some(NodeKind::Directory) && !destination.path.is_strictly_within(&source.path) {
            for descendant in self.descendants(&source.path, &fault)? {
                refused(self, &descendant, AccessKind::RenameSource)?;
                if let Some(landing) = descendant.rebase(&source.path, &destination.path) {
                    refused(self, &landing, AccessKind::RenameDestination)?;
                }
            }
        }
        self.vfs.rename(&source.path, &destination.path).map_err(fault)
    }

    /// Every path strictly below the directory `root`, listed through the VFS
    /// (hidden ones included: the caller authorizes them). Each visited path
    /// is charged to the evidence budget, and the deadline is checked at each;
    /// `fault` maps VFS errors.
    pub(crate) fn descendants(&mut self, root: &VPath, fault: &dyn Fn(VfsError) -> Fault) -> Result<Vec<VPath>, Fault> {
        let mut out = Vec::new();
        let mut pending = vec![root.clone()];
        while let Some(dir) = pending.pop() {
            for name in self.vfs.read_dir(&dir).map_err(fault)? {
                let child = dir.child(&name).map_err(|_| fault(VfsError::NonUtf8Name { path: dir.clone() }))?;
                self.visit(&child)?;
                if self.vfs.kind(&child).map_err(fault)? == Some(NodeKind::Directory) {
                    pending.push(child.clone());
                }
                out.push(child);
            }
        }
        Ok(out)
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
