//! The `vsh_*` operations over more than one node: `vsh_remove` (a whole tree
//! authorized before anything changes) and `vsh_copy` (a file, or a tree).

use vsh_policy::AccessKind;
use vsh_types::NodeKind;
use vsh_vfs::VfsError;

use super::args::value_error;
use crate::guard::{ContentRead, Create, DirectoryRead, Grant, Intent, MetadataRead};
use crate::host::{Fault, OsHost, Target, vfs_fault};
use crate::oserror::{self, EACCES, EEXIST, EISDIR, ELOOP, ENOENT, ENOTDIR};
use crate::path;

impl OsHost<'_> {
    /// `vsh_remove`: a file or symlink is unlinked, an empty directory removed;
    /// a recursive remove authorizes `Delete` for the whole tree before
    /// anything changes.
    pub(crate) fn remove(&mut self, target: &Target<'_>, recursive: bool, missing_ok: bool) -> Result<(), Fault> {
        let guest = target.guest;
        let fault = |error: VfsError| vfs_fault(error, guest);
        let looked = self.authorize_look_before(&target.path, Intent::Access(AccessKind::Delete), guest)?;
        match self.kind(&looked).map_err(fault)? {
            None if missing_ok => Ok(()),
            None => Err(Fault::Guest(oserror::os_error(ENOENT, guest))),
            Some(NodeKind::File | NodeKind::Symlink) => {
                let grant = self.authorize_removal(&target.path, guest)?;
                self.unlink(&grant).map_err(fault)
            }
            Some(NodeKind::Directory) if !recursive => {
                let grant = self.authorize_removal(&target.path, guest)?;
                self.rmdir(&grant, guest)
            }
            Some(NodeKind::Directory) => {
                if target.path.is_root() {
                    return Err(Fault::Guest(oserror::os_error(EACCES, guest)));
                }
                let grant = self.authorize_removal(&target.path, guest)?;
                self.remove_tree(&grant, guest)
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
        let looked = self.authorize::<MetadataRead>(&source.path, source.guest)?;
        match self.kind(&looked).map_err(|error| vfs_fault(error, source.guest))? {
            None => Err(Fault::Guest(oserror::os_error(ENOENT, source.guest))),
            Some(NodeKind::Symlink) => {
                Err(value_error(format!("vsh_copy() cannot copy a symlink: {}", monty_types::StringRepr(source.guest))))
            }
            Some(NodeKind::File) => self.copy_file(source, destination, overwrite),
            Some(NodeKind::Directory) if !recursive => Err(Fault::Guest(oserror::os_error(EISDIR, source.guest))),
            Some(NodeKind::Directory) => self.copy_tree(source, destination),
        }
    }

    pub(crate) fn copy_file(
        &mut self,
        source: &Target<'_>,
        destination: &Target<'_>,
        overwrite: bool,
    ) -> Result<(), Fault> {
        if source.path == destination.path {
            return Err(value_error("vsh_copy() source and destination are the same file".to_owned()));
        }
        let to_fault = |error: VfsError| vfs_fault(error, destination.guest);
        let read = self.authorize::<ContentRead>(&source.path, source.guest)?;
        let looked = self.authorize_look_before(&destination.path, Intent::Write, destination.guest)?;
        let existing = self.kind(&looked).map_err(to_fault)?;
        match existing {
            Some(NodeKind::Directory) => return Err(Fault::Guest(oserror::os_error(EISDIR, destination.guest))),
            Some(_) if !overwrite => return Err(Fault::Guest(oserror::os_error(EEXIST, destination.guest))),
            _ => {}
        }
        let write = self.authorize_write(&destination.path, existing.is_some(), destination.guest)?;
        let size = self.file_size(&read).map_err(|error| vfs_fault(error, source.guest))?;
        self.meter.charge_read_call(size)?;
        self.meter.charge_write_call(size)?;
        self.copy_content(&read, &write).map_err(to_fault)
    }

    /// A recursive copy: everything is authorized and charged before the
    /// first directory is created.
    fn copy_tree(&mut self, source: &Target<'_>, destination: &Target<'_>) -> Result<(), Fault> {
        if destination.path.is_within(&source.path) {
            return Err(value_error("vsh_copy() cannot copy a directory into itself".to_owned()));
        }
        let from_fault = |error: VfsError| vfs_fault(error, source.guest);
        let to_fault = |error: VfsError| vfs_fault(error, destination.guest);
        let looked =
            self.authorize_look_before(&destination.path, Intent::Access(AccessKind::Create), destination.guest)?;
        if self.kind(&looked).map_err(to_fault)?.is_some() {
            return Err(Fault::Guest(oserror::os_error(EEXIST, destination.guest)));
        }
        if let Some(parent) = destination.path.parent() {
            let parent = self.authorize::<MetadataRead>(&parent, destination.guest)?;
            let errno = match self.kind(&parent).map_err(to_fault)? {
                Some(NodeKind::Directory) => None,
                None => Some(ENOENT),
                Some(NodeKind::File) => Some(ENOTDIR),
                Some(NodeKind::Symlink) => Some(ELOOP),
            };
            if let Some(errno) = errno {
                return Err(Fault::Guest(oserror::os_error(errno, destination.guest)));
            }
        }
        let tree = self.authorize::<DirectoryRead>(&source.path, source.guest)?;
        let root = self.authorize::<Create>(&destination.path, destination.guest)?;
        let mut entries = self.descendants(&tree, &from_fault)?;
        entries.sort();
        let mut plan = Vec::with_capacity(entries.len());
        for (entry, kind) in entries {
            let read = match kind {
                Some(NodeKind::Directory) => {
                    Copied::Directory(self.authorize_below::<DirectoryRead>(&entry, &source.path, source.guest)?)
                }
                _ => Copied::File(self.authorize_below::<ContentRead>(&entry, &source.path, source.guest)?),
            };
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
            let landing = self.authorize_below::<Create>(&landing, &destination.path, destination.guest)?;
            let mode = match &read {
                Copied::Directory(grant) => self.metadata(grant),
                Copied::File(grant) => self.metadata(grant),
            }
            .map_err(from_fault)?
            .mode;
            if let Copied::File(grant) = &read {
                let size = self.file_size(grant).map_err(from_fault)?;
                self.meter.charge_read_call(size)?;
                self.meter.charge_write_call(size)?;
            }
            plan.push((read, landing, mode));
        }
        let root_mode = self.metadata(&tree).map_err(from_fault)?.mode;
        self.create_dir(&root, root_mode).map_err(to_fault)?;
        for (read, landing, mode) in plan {
            match read {
                Copied::Directory(_) => self.create_dir(&landing, mode).map_err(to_fault)?,
                Copied::File(read) => self.copy_content(&read, &landing.into()).map_err(to_fault)?,
            }
        }
        Ok(())
    }
}

/// One node of a tree being copied, with the grant its copy reads through.
enum Copied {
    Directory(Grant<DirectoryRead>),
    File(Grant<ContentRead>),
}
