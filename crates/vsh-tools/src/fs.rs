//! The file operations of [`Host`]: read, write, stat and list, each resolved
//! with [`Host::resolve_in_jail`]'s rules and carried out through a
//! [`crate::CapDir`], never by path string.
//!
//! The `*_sync` methods are the core; the async methods run them on tokio's
//! blocking pool.
//!
//! **Writes** go to a new temporary file in the destination's directory
//! (`O_CREAT | O_EXCL | O_NOFOLLOW`, written and `fsync`ed), which is then
//! renamed over the destination. Readers never see a half-written file, and a
//! symbolic link at the destination is never written through: it is refused
//! before the write, and one raced in afterwards is replaced by the rename,
//! not followed. The price: the file gets a new inode (hard links to the old
//! one keep the old content) and the writer's ownership; its permission bits
//! are carried over.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use vsh_types::VPath;

use super::jail::{Target, TargetDir};
use super::{FsError, Host, blocking};
use vsh_host::{HostError, HostKind, HostStat, WritableDir};

/// Permission bits of a file created by [`Host::write_file`] (`0o666` under the usual umask `022`).
const NEW_FILE_MODE: u32 = 0o644;

/// How many temporary names a write tries before giving up.
const TEMP_ATTEMPTS: u32 = 16;

/// Distinguishes the temporary files of concurrent writes in this process.
static TEMP_SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// Metadata of a file, directory or symlink (never followed in the jail).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct FileStat {
    /// Size in bytes (for a directory, whatever the filesystem reports).
    pub len: u64,
    /// Last modification time: a freshness token for edit tools.
    pub mtime: SystemTime,
    /// What the object is.
    pub kind: HostKind,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
}

impl FileStat {
    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == HostKind::Directory
    }

    /// Whether this is a regular file.
    pub fn is_file(&self) -> bool {
        self.kind == HostKind::File
    }
}

impl From<HostStat> for FileStat {
    fn from(stat: HostStat) -> Self {
        let magnitude = Duration::new(
            (stat.mtime_ns.unsigned_abs() / 1_000_000_000) as u64,
            (stat.mtime_ns.unsigned_abs() % 1_000_000_000) as u32,
        );
        let mtime = if stat.mtime_ns >= 0 {
            SystemTime::UNIX_EPOCH.checked_add(magnitude)
        } else {
            SystemTime::UNIX_EPOCH.checked_sub(magnitude)
        };
        Self { len: stat.size, mtime: mtime.unwrap_or(SystemTime::UNIX_EPOCH), kind: stat.kind, mode: stat.mode }
    }
}

/// A file's content and the metadata it was read under.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct FileRead {
    /// The content as UTF-8, invalid sequences replaced by U+FFFD.
    pub contents: String,
    /// The file's metadata, unchanged from before to after the read.
    pub stat: FileStat,
}

/// One entry of [`Host::read_dir`].
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct DirEntry {
    /// The entry's name (lossy UTF-8).
    pub name: String,
    /// Whether it is a directory (a symlink to a directory is not).
    pub is_dir: bool,
    /// Its kind, when the filesystem or an `lstat` could tell.
    pub kind: Option<HostKind>,
}

impl Host {
    /// Read a file (resolved as by [`Host::resolve_in_jail`]), returning its
    /// lossy-UTF-8 contents and its metadata.
    ///
    /// [`FsError::Path`] if the path escapes the jail; [`FsError::Io`] if the
    /// read fails: missing, not a regular file, larger than
    /// [`super::HostConfig::max_read_bytes`], or changed during the read.
    pub async fn read_file(&self, cwd: &Path, path: &Path) -> Result<FileRead, FsError> {
        let (host, cwd, path) = (self.clone(), cwd.to_owned(), path.to_owned());
        blocking(move || host.read_file_sync(&cwd, &path)).await
    }

    /// [`Host::read_file`], synchronously.
    pub fn read_file_sync(&self, cwd: &Path, path: &Path) -> Result<FileRead, FsError> {
        let target = self.locate(cwd, path)?;
        self.read_target(&target)
    }

    /// Create or overwrite a file (resolved as by [`Host::resolve_in_jail`])
    /// with `contents`, returning its metadata after the write.
    ///
    /// Parent directories are never created: a missing parent is
    /// [`FsError::Io`]. So is an existing directory or other non-file at the
    /// path. A symbolic link at the path (dangling or not) is never written
    /// through: jailed, it is [`FsError::Path`]; unrestricted, a link to an
    /// existing file is followed (the path was resolved first) and a dangling
    /// one is [`FsError::Io`]. See the module documentation for how the write
    /// is made atomic.
    pub async fn write_file(&self, cwd: &Path, path: &Path, contents: &str) -> Result<FileStat, FsError> {
        let (host, cwd, path, contents) = (self.clone(), cwd.to_owned(), path.to_owned(), contents.to_owned());
        blocking(move || host.write_file_sync(&cwd, &path, &contents)).await
    }

    /// [`Host::write_file`], synchronously.
    pub fn write_file_sync(&self, cwd: &Path, path: &Path, contents: &str) -> Result<FileStat, FsError> {
        let target = self.locate(cwd, path)?;
        self.write_target(&target, contents.as_bytes())
    }

    /// Metadata of a path (resolved as by [`Host::resolve_in_jail`]). A missing
    /// path is [`FsError::Io`].
    pub async fn stat(&self, cwd: &Path, path: &Path) -> Result<FileStat, FsError> {
        let (host, cwd, path) = (self.clone(), cwd.to_owned(), path.to_owned());
        blocking(move || host.stat_sync(&cwd, &path)).await
    }

    /// [`Host::stat`], synchronously.
    pub fn stat_sync(&self, cwd: &Path, path: &Path) -> Result<FileStat, FsError> {
        let target = self.locate(cwd, path)?;
        self.stat_target(&target)
    }

    /// The immediate entries of a directory (resolved as by
    /// [`Host::resolve_in_jail`]), in the order the filesystem returns them.
    ///
    /// [`FsError::Io`] if it is missing or not a readable directory.
    pub async fn read_dir(&self, cwd: &Path, path: &Path) -> Result<Vec<DirEntry>, FsError> {
        let (host, cwd, path) = (self.clone(), cwd.to_owned(), path.to_owned());
        blocking(move || host.read_dir_sync(&cwd, &path)).await
    }

    /// [`Host::read_dir`], synchronously.
    pub fn read_dir_sync(&self, cwd: &Path, path: &Path) -> Result<Vec<DirEntry>, FsError> {
        let target = self.locate(cwd, path)?;
        self.read_dir_target(&target)
    }

    /// Where a target's path is resolved: beneath a directory handle, or in
    /// the image a host over one works on.
    fn dir_of<'a>(&'a self, target: &'a Target) -> Beneath<'a> {
        match (&target.dir, &self.inner.dir) {
            (TargetDir::Jail, super::Root::Dir(dir)) | (TargetDir::Ambient(dir), _) => Beneath::Dir(dir),
            (TargetDir::Jail, super::Root::Image(image)) => Beneath::Image(image.as_ref()),
        }
    }

    /// The error for `source` from operation `op` on `target`. In the jail, a
    /// symlink in the path (one swapped in since resolution) is an escape.
    fn fs_error(&self, op: &'static str, target: &Target, source: HostError) -> FsError {
        match (&target.dir, source) {
            (TargetDir::Jail, HostError::SymlinkInPath { path } | HostError::IsASymlink { path }) => {
                FsError::Path(self.symlink_escape(&target.abs, &path))
            }
            (TargetDir::Jail, HostError::NotAFile { path }) if self.is_symlink(&target.rel) => {
                FsError::Path(self.symlink_escape(&target.abs, &path))
            }
            (_, source) => FsError::Io { op, path: target.abs.clone(), source },
        }
    }

    fn is_symlink(&self, rel: &VPath) -> bool {
        match &self.inner.dir {
            super::Root::Dir(dir) => matches!(dir.lstat(rel), Ok(Some(stat)) if stat.kind == HostKind::Symlink),
            super::Root::Image(image) => matches!(image.lstat(rel), Ok(Some(stat)) if stat.kind == HostKind::Symlink),
        }
    }

    pub(crate) fn read_target(&self, target: &Target) -> Result<FileRead, FsError> {
        let read = match self.dir_of(target) {
            Beneath::Image(image) => crate::image::read(image, &target.rel, self.inner.max_read_bytes),
            Beneath::Dir(dir) => dir.read_file(&target.rel, self.inner.max_read_bytes).map(|content| FileRead {
                contents: String::from_utf8_lossy(&content.bytes).into_owned(),
                stat: content.stat.into(),
            }),
        };
        read.map_err(|source| self.fs_error("read_file", target, source))
    }

    pub(crate) fn write_target(&self, target: &Target, contents: &[u8]) -> Result<FileStat, FsError> {
        let written = match self.dir_of(target) {
            Beneath::Image(image) => image.write(&target.rel, contents).map(FileStat::from),
            Beneath::Dir(dir) => write_replacing(dir, &target.rel, contents).map(FileStat::from),
        };
        written.map_err(|source| self.fs_error("write_file", target, source))
    }

    fn stat_target(&self, target: &Target) -> Result<FileStat, FsError> {
        let stat = match self.dir_of(target) {
            Beneath::Image(image) => image.lstat(&target.rel).map(|stat| stat.map(FileStat::from)),
            Beneath::Dir(dir) => dir.lstat(&target.rel).map(|stat| stat.map(FileStat::from)),
        };
        match stat {
            Ok(Some(stat)) => Ok(stat),
            Ok(None) => Err(self.fs_error("stat", target, HostError::NotFound { path: target.rel.clone() })),
            Err(source) => Err(self.fs_error("stat", target, source)),
        }
    }

    fn read_dir_target(&self, target: &Target) -> Result<Vec<DirEntry>, FsError> {
        let dir = match self.dir_of(target) {
            Beneath::Image(image) => {
                return crate::image::list(image, &target.rel)
                    .map_err(|source| self.fs_error("read_dir", target, source));
            }
            Beneath::Dir(dir) => dir,
        };
        let entries = dir.list_dir(&target.rel).map_err(|source| self.fs_error("read_dir", target, source))?;
        Ok(entries
            .into_iter()
            .map(|entry| {
                // Without d_type, one lstat tells the kind (never following a link).
                let kind = entry.kind.or_else(|| {
                    let name = std::str::from_utf8(&entry.name).ok()?;
                    let path = target.rel.child(name).ok()?;
                    dir.lstat(&path).ok().flatten().map(|stat| stat.kind)
                });
                DirEntry {
                    name: String::from_utf8_lossy(&entry.name).into_owned(),
                    is_dir: kind == Some(HostKind::Directory),
                    kind,
                }
            })
            .collect())
    }
}

/// Where a file operation's path is resolved.
enum Beneath<'a> {
    /// Beneath a directory handle.
    Dir(&'a WritableDir),
    /// In an image.
    Image(&'a dyn crate::image::ImageRoot),
}

/// Replace (or create) the regular file at `path` beneath `dir` with
/// `contents`: temporary file, `fsync`, rename. Returns the new file's metadata.
fn write_replacing(dir: &WritableDir, path: &VPath, contents: &[u8]) -> Result<HostStat, HostError> {
    let (Some(parent), Some(_)) = (path.parent(), path.file_name()) else {
        return Err(HostError::NotAFile { path: path.clone() });
    };
    let mode = match dir.lstat(path)? {
        None => NEW_FILE_MODE,
        Some(stat) => match stat.kind {
            HostKind::File => stat.mode & 0o777,
            HostKind::Symlink => return Err(HostError::IsASymlink { path: path.clone() }),
            HostKind::Directory | HostKind::Other => return Err(HostError::NotAFile { path: path.clone() }),
        },
    };
    let temp = create_temp(dir, &parent, path, contents, mode)?;
    if let Err(error) = dir.rename(&temp, path) {
        let _ = dir.remove_file(&temp);
        return Err(match error {
            HostError::NotFound { .. } => HostError::NotFound { path: path.clone() },
            other => other,
        });
    }
    dir.lstat(path)?.ok_or_else(|| HostError::NotFound { path: path.clone() })
}

/// Create a uniquely named temporary file in `parent` holding `contents`.
/// Errors name `path`, the file being written, not the temporary name.
fn create_temp(
    dir: &WritableDir,
    parent: &VPath,
    path: &VPath,
    contents: &[u8],
    mode: u32,
) -> Result<VPath, HostError> {
    let pid = std::process::id();
    for _ in 0..TEMP_ATTEMPTS {
        let sequence = TEMP_SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let temp = parent
            .child(&format!(".vsh-write-{pid}-{sequence}.tmp"))
            .map_err(|_| HostError::NotAFile { path: path.clone() })?;
        match dir.create_file_exclusive(&temp, contents, mode) {
            Ok(_) => return Ok(temp),
            // Someone else's file: try another name, and leave it alone.
            Err(HostError::AlreadyExists { .. }) => {}
            Err(HostError::NotFound { .. }) => return Err(HostError::NotFound { path: path.clone() }),
            Err(HostError::Io { op, source, .. }) => {
                // Writing failed part-way: the partial file is ours to remove.
                let _ = dir.remove_file(&temp);
                return Err(HostError::Io { op, path: path.clone(), source });
            }
            Err(error) => return Err(error),
        }
    }
    Err(HostError::AlreadyExists { path: path.clone() })
}
