//! [`DataDir`]: the trusted data directory, opened once as a capability handle.
//!
//! The data directory is either inside the workspace (default `.vsh/data`, see
//! [`vsh_types::VshLayout`]),
//! created beneath the workspace handle without following any symlink, or an
//! external directory opened by path. Either way every later access goes
//! through the handle, so a symlink planted in the workspace cannot redirect
//! vsh's own writes outside it.

use std::path::Path;
use std::sync::Arc;

use vsh_host::{CapDir, HostError, WritableDir};
use vsh_types::VPath;

use crate::backend::{CapDirBackend, StoreBackend};
use crate::error::StoreError;

/// The data directory's subdirectory of scratch directories ([`DataDir::scratch_dir`]).
pub const SCRATCH: &str = "scratch";

/// The trusted data directory holding blobs and transaction records.
#[derive(Debug)]
pub struct DataDir {
    dir: WritableDir,
}

impl DataDir {
    /// Open `rel` beneath the workspace handle, creating missing components with
    /// mode `0o700`. No component is followed if it is a symlink: a symlink
    /// planted at `.vsh` or `.vsh/data` is [`StoreError::DataDir`] and nothing is
    /// created through it.
    pub fn open_in_workspace(workspace: &CapDir, rel: &VPath) -> Result<DataDir, StoreError> {
        if rel.is_root() {
            return Err(StoreError::DataDirIsRoot);
        }
        let failed = |source| StoreError::DataDir { path: rel.clone(), source };
        let created = workspace.lstat(rel).map_err(failed)?.is_none();
        // The store changes what it holds: it takes the mutating capability.
        let workspace = WritableDir::new(Arc::new(workspace.open_subdir(&VPath::root()).map_err(failed)?));
        let dir = workspace.open_or_create_subdir(rel).map_err(failed)?;
        let dir = WritableDir::new(Arc::new(dir.open_subdir(&VPath::root()).map_err(failed)?.with_own_counters()));
        if created {
            // Make the new directory entries durable. Syncing opens each parent
            // beneath the handle without following symlinks, like every access.
            sync_ancestors(&workspace, rel).map_err(failed)?;
        }
        Ok(DataDir { dir })
    }

    /// Open (creating if needed, mode `0o700`) an external data directory at a
    /// host path.
    ///
    /// # Ambient authority
    ///
    /// This reaches the host filesystem by path (see
    /// [`CapDir::open_or_create_trusted`]).
    pub fn open_external(path: &Path) -> Result<DataDir, StoreError> {
        let dir = WritableDir::open_or_create_trusted(path)
            .map_err(|source| StoreError::DataDir { path: VPath::root(), source })?;
        Ok(DataDir { dir })
    }

    /// The directory handle.
    pub fn dir(&self) -> &CapDir {
        &self.dir
    }

    /// The lock over the scratch directories, and what measures and clears
    /// them (see [`crate::ScratchLock`]).
    pub fn scratch_lock(&self) -> crate::ScratchLock {
        crate::ScratchLock::new(&self.dir)
    }

    /// The host path of the scratch directory `name` (a relative path of
    /// plain names, such as `target` or `node_modules/.cache`):
    /// `scratch/<name>` with each `/` written `%2F` and each `%` `%25` (one
    /// directory per name, however deep), made (mode `0o777`, inside
    /// `scratch/`, mode `0o700`) if missing, never through a symlink. Real
    /// commands write there directly (as the workspace's `target/`, say),
    /// and what they wrote is there for the next run of the same workspace;
    /// it is the commands' own, never read as vsh's state.
    ///
    /// # Errors
    ///
    /// [`StoreError::DataDir`] when `name` is not one plain name, or the
    /// directories cannot be made (or something else is there).
    pub fn scratch_dir(&self, name: &str) -> Result<std::path::PathBuf, StoreError> {
        let scratch = VPath::parse(SCRATCH).expect("a plain component");
        let encoded = name.replace('%', "%25").replace('/', "%2F");
        let plain = name.split('/').all(|component| VPath::from_component(component).is_ok());
        let leaf = VPath::from_component(&encoded).ok().filter(|_| plain).ok_or_else(|| StoreError::DataDir {
            path: scratch.clone(),
            source: HostError::NotADirectory { path: scratch.clone() },
        })?;
        let at = scratch.join(leaf.as_str()).unwrap_or_else(|_| scratch.clone());
        let dir = self
            .dir
            .open_or_create_subdir(&scratch)
            .map_err(|source| StoreError::DataDir { path: scratch.clone(), source })?;
        match dir.create_dir(&leaf, 0o777) {
            Ok(()) | Err(HostError::AlreadyExists { .. }) => {}
            Err(source) => return Err(StoreError::DataDir { path: at.clone(), source }),
        }
        match dir.lstat(&leaf) {
            Ok(Some(stat)) if stat.kind == vsh_host::HostKind::Directory => {}
            Ok(_) => {
                let source = HostError::NotADirectory { path: leaf.clone() };
                return Err(StoreError::DataDir { path: at.clone(), source });
            }
            Err(source) => return Err(StoreError::DataDir { path: at.clone(), source }),
        }
        Ok(self.dir.display_path().join(SCRATCH).join(leaf.as_str()))
    }

    /// The bytes of the settings file `name` (one file name, for example
    /// `policy.toml`), at most `max_bytes`; `None` when there is none. A
    /// larger file, or anything but a regular file, is an error.
    pub fn read_setting(&self, name: &str, max_bytes: u64) -> Result<Option<Vec<u8>>, StoreError> {
        let path = setting_path(name)?;
        match self.dir.read_file(&path, max_bytes) {
            Ok(content) => Ok(Some(content.bytes)),
            Err(HostError::NotFound { .. }) => Ok(None),
            Err(source) => Err(StoreError::DataDir { path, source }),
        }
    }

    /// Replace the settings file `name` with `bytes`, atomically and durably:
    /// written whole under a private name and fsynced, renamed over the old
    /// one, and the directory fsynced. A reader sees the old file or the new
    /// one, never part of either.
    pub fn write_setting(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.replace_setting(name, bytes, true)
    }

    /// Hold the settings file `name` for a read, change and write of it
    /// that no other process (nor thread) interleaves: an exclusive lock
    /// on `<name>.lock` beside it (made if missing), released when the
    /// guard drops. Waits while another holds it, at most `wait`
    /// (`HostError::LockTimeout` past it: sec75 F6, a held lock hung vsh).
    pub fn lock_setting(&self, name: &str, wait: std::time::Duration) -> Result<vsh_host::LockGuard, StoreError> {
        let path = setting_path(&format!("{name}.lock"))?;
        self.dir
            .lock_exclusive_within(&path, &vsh_host::LockWait::within(wait))
            .map_err(|source| StoreError::DataDir { path, source })
    }

    /// [`DataDir::write_setting`] without the `fsync`s: a reader still sees
    /// the old file or the new one, but a machine crash (not a process's)
    /// may leave the old one, or one cut short or empty, which the file's
    /// own checks must refuse.
    pub fn write_setting_unsynced(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.replace_setting(name, bytes, false)
    }

    /// Write `bytes` over the existing settings file `name` in place, unsynced
    /// ([`vsh_host::WritableDir::overwrite_unsynced`]): where the directory
    /// refuses the new entry a replacement needs (made immutable, out of
    /// inodes). Not atomic: the file's own checks must refuse one cut short.
    pub fn overwrite_setting_unsynced(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let path = setting_path(name)?;
        self.dir.overwrite_unsynced(&path, bytes).map_err(|source| StoreError::DataDir { path, source })
    }

    fn replace_setting(&self, name: &str, bytes: &[u8], durable: bool) -> Result<(), StoreError> {
        let path = setting_path(name)?;
        let failed = |source| StoreError::DataDir { path: path.clone(), source };
        let mut written = None;
        for _ in 0..crate::tempname::ATTEMPTS {
            let temp = crate::tempname::next(&VPath::root());
            let created = if durable {
                self.dir.create_file_exclusive(&temp, bytes, 0o600)
            } else {
                self.dir.create_file_exclusive_unsynced(&temp, bytes, 0o600).map(|(stat, _)| stat)
            };
            match created {
                Ok(_) => {
                    written = Some(temp);
                    break;
                }
                Err(HostError::AlreadyExists { .. }) => {}
                Err(source) => {
                    let _ = self.dir.remove_file(&temp);
                    return Err(failed(source));
                }
            }
        }
        let temp = written.ok_or(StoreError::TempNames { path: VPath::root() })?;
        if let Err(source) = self.dir.rename(&temp, &path) {
            let _ = self.dir.remove_file(&temp);
            return Err(failed(source));
        }
        if !durable {
            return Ok(());
        }
        self.dir.sync_dir(&VPath::root()).map_err(failed)
    }

    /// Remove the settings file `name`, durably (the directory fsynced); one
    /// that is not there is no error.
    pub fn remove_setting(&self, name: &str) -> Result<(), StoreError> {
        let path = setting_path(name)?;
        let failed = |source| StoreError::DataDir { path: path.clone(), source };
        match self.dir.remove_file(&path) {
            Ok(()) => self.dir.sync_dir(&VPath::root()).map_err(failed),
            Err(HostError::NotFound { .. }) => Ok(()),
            Err(source) => Err(failed(source)),
        }
    }

    /// The real storage backend over this directory (a second handle to it),
    /// for [`crate::BlobStore::open_with`] and [`crate::TransactionStore::open_with`].
    pub fn backend(&self) -> Result<Arc<dyn StoreBackend>, StoreError> {
        let handle = self
            .dir
            .open_subdir(&VPath::root())
            .map_err(|source| StoreError::DataDir { path: VPath::root(), source })?;
        Ok(Arc::new(CapDirBackend::new(WritableDir::new(Arc::new(handle)))))
    }
}

/// The path of the settings file `name`: one component.
fn setting_path(name: &str) -> Result<VPath, StoreError> {
    VPath::from_component(name)
        .map_err(|_| StoreError::DataDir { path: VPath::root(), source: HostError::NotAFile { path: VPath::root() } })
}

/// `fsync` every proper ancestor of `path` (the root included).
fn sync_ancestors(dir: &WritableDir, path: &VPath) -> Result<(), HostError> {
    for ancestor in path.ancestors() {
        dir.sync_dir(&ancestor)?;
    }
    Ok(())
}
