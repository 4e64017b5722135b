//! The `vsh_*` operations over more than one node: `vsh_remove` (a whole tree
//! authorized before anything changes) and `vsh_copy` (a file, or a tree).

use vsh_policy::AccessKind;
use vsh_types::NodeKind;
use vsh_vfs::VfsError;

use super::args::value_error;
use crate::host::{Fault, OsHost, Target, vfs_fault};
use crate::oserror::{self, EACCES, EEXIST, EISDIR, ELOOP, ENOENT, ENOTDIR};
use crate::path;

impl OsHost<'_> {
    /// `vsh_remove`: a file or symlink is unlinked, an empty directory removed;
    /// a recursive remove authorizes `Delete` for the whole tree before
    /// anything changes.
    pub(super) fn remove(&mut self, target: &Target<'_>, recursive: bool, missing_ok: bool) -> Result<(), Fault> {
        let guest = target.guest;
        let fault = |error: VfsError| vfs_fault(error, guest);
        self.authorize(&target.path, AccessKind::MetadataRead, guest)?;
        match self.vfs.kind(&target.path).map_err(fault)? {
            None if missing_ok => Ok(()),
            None => Err(Fault::Guest(oserror::os_error(ENOENT, guest))),
            Some(NodeKind::File | NodeKind::Symlink) => {
                self.authorize(&target.path, AccessKind::Delete, guest)?;
                self.vfs.unlink(&target.path).map_err(fault)
            }
            Some(NodeKind::Directory) if !recursive => {
                self.authorize(&target.path, AccessKind::Delete, guest)?;
                self.vfs.rmdir(&target.path).map_err(fault)
            }
            Some(NodeKind::Directory) => {
                if target.path.is_root() {
                    return Err(Fault::Guest(oserror::os_error(EACCES, guest)));
                }
                self.authorize(&target.path, AccessKind::Delete, guest)?;
                let descendants = self.descendants(&target.path, &fault)?;
                let mut refusal = self.policy.authorize_tree(&target.path, &descendants, AccessKind::Delete).err();
                if refusal.is_none() {
                    // A nested workspace's vsh data directory goes nowhere either.
                    for descendant in &descendants {
                        refusal = self.nested_store(descendant, AccessKind::Delete).map_err(fault)?;
                        if refusal.is_some() {
                            break;
                        }
                    }
                }
                if let Some(denied) = refusal {
                    // The refused path may be hidden from the guest: name only
                    // the path it gave.
                    self.record_denial(denied)?;
                    return Err(Fault::Guest(oserror::os_error(EACCES, guest)));
                }
                self.vfs.remove_tree(&target.path).map_err(fault)
            }
        }
    }

    /// `vsh_copy`.
    pub(super) fn copy(
        &mut self,
        source: &Target<'_>,
        destination: &Target<'_>,
        recursive: bool,
        overwrite: bool,
    ) -> Result<(), Fault> {
        self.authorize(&source.path, AccessKind::MetadataRead, source.guest)?;
        match self.vfs.kind(&source.path).map_err(|error| vfs_fault(error, source.guest))? {
            None => Err(Fault::Guest(oserror::os_error(ENOENT, source.guest))),
            Some(NodeKind::Symlink) => {
                Err(value_error(format!("vsh_copy() cannot copy a symlink: {}", monty_types::StringRepr(source.guest))))
            }
            Some(NodeKind::File) => self.copy_file(source, destination, overwrite),
            Some(NodeKind::Directory) if !recursive => Err(Fault::Guest(oserror::os_error(EISDIR, source.guest))),
            Some(NodeKind::Directory) => self.copy_tree(source, destination),
        }
    }

    fn copy_file(&mut self, source: &Target<'_>, destination: &Target<'_>, overwrite: bool) -> Result<(), Fault> {
        if source.path == destination.path {
            return Err(value_error("vsh_copy() source and destination are the same file".to_owned()));
        }
        let to_fault = |error: VfsError| vfs_fault(error, destination.guest);
        self.authorize(&source.path, AccessKind::ContentRead, source.guest)?;
        self.authorize(&destination.path, AccessKind::MetadataRead, destination.guest)?;
        let existing = self.vfs.kind(&destination.path).map_err(to_fault)?;
        match existing {
            Some(NodeKind::Directory) => return Err(Fault::Guest(oserror::os_error(EISDIR, destination.guest))),
            Some(_) if !overwrite => return Err(Fault::Guest(oserror::os_error(EEXIST, destination.guest))),
            _ => {}
        }
        let access = if existing.is_some() { AccessKind::Modify } else { AccessKind::Create };
        self.authorize(&destination.path, access, destination.guest)?;
        let size = self.vfs.file_size(&source.path).map_err(|error| vfs_fault(error, source.guest))?;
        self.meter.charge_read_call(size)?;
        self.meter.charge_write_call(size)?;
        self.vfs.copy_file(&source.path, &destination.path).map_err(to_fault)
    }

    /// A recursive copy: everything is authorized and charged before the
    /// first directory is created.
    fn copy_tree(&mut self, source: &Target<'_>, destination: &Target<'_>) -> Result<(), Fault> {
        if destination.path.is_within(&source.path) {
            return Err(value_error("vsh_copy() cannot copy a directory into itself".to_owned()));
        }
        let from_fault = |error: VfsError| vfs_fault(error, source.guest);
        let to_fault = |error: VfsError| vfs_fault(error, destination.guest);
        self.authorize(&destination.path, AccessKind::MetadataRead, destination.guest)?;
        if self.vfs.kind(&destination.path).map_err(to_fault)?.is_some() {
            return Err(Fault::Guest(oserror::os_error(EEXIST, destination.guest)));
        }
        if let Some(parent) = destination.path.parent() {
            let errno = match self.vfs.kind(&parent).map_err(to_fault)? {
                Some(NodeKind::Directory) => None,
                None => Some(ENOENT),
                Some(NodeKind::File) => Some(ENOTDIR),
                Some(NodeKind::Symlink) => Some(ELOOP),
            };
            if let Some(errno) = errno {
                return Err(Fault::Guest(oserror::os_error(errno, destination.guest)));
            }
        }
        self.authorize(&source.path, AccessKind::DirectoryRead, source.guest)?;
        self.authorize(&destination.path, AccessKind::Create, destination.guest)?;
        let mut entries = self.descendants(&source.path, &from_fault)?;
        entries.sort();
        let mut plan = Vec::with_capacity(entries.len());
        for entry in entries {
            let kind = self.vfs.kind(&entry).map_err(from_fault)?;
            let access =
                if kind == Some(NodeKind::Directory) { AccessKind::DirectoryRead } else { AccessKind::ContentRead };
            self.authorize(&entry, access, source.guest)?;
            let relative = entry.relative_to(&source.path).unwrap_or_default().to_owned();
            if kind != Some(NodeKind::File) && kind != Some(NodeKind::Directory) {
                return Err(value_error(format!(
                    "vsh_copy() cannot copy a symlink: {}",
                    monty_types::StringRepr(&path::guest_child(source.guest, &relative))
                )));
            }
            let landing = entry
                .rebase(&source.path, &destination.path)
                .ok_or_else(|| Fault::Guest(oserror::os_error(EACCES, destination.guest)))?;
            self.authorize(&landing, AccessKind::Create, destination.guest)?;
            let mode = self.vfs.metadata(&entry).map_err(from_fault)?.mode;
            if kind == Some(NodeKind::File) {
                let size = self.vfs.file_size(&entry).map_err(from_fault)?;
                self.meter.charge_read_call(size)?;
                self.meter.charge_write_call(size)?;
            }
            plan.push((entry, landing, kind == Some(NodeKind::Directory), mode));
        }
        let root_mode = self.vfs.metadata(&source.path).map_err(from_fault)?.mode;
        self.vfs.mkdir(&destination.path, root_mode).map_err(to_fault)?;
        for (entry, landing, is_dir, mode) in plan {
            if is_dir {
                self.vfs.mkdir(&landing, mode).map_err(to_fault)?;
            } else {
                self.vfs.copy_file(&entry, &landing).map_err(to_fault)?;
            }
        }
        Ok(())
    }
}
