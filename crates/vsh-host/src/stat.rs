//! Plain values describing what a [`crate::CapDir`] observed: [`HostStat`],
//! [`HostKind`], [`FileIdentity`], [`HostDirEntry`] and [`FileContent`].

use rustix::fs::{FileType, Stat};

/// The kind of a filesystem object, as seen without following symlinks.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum HostKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (the link itself, never its target).
    Symlink,
    /// A FIFO, socket, or character or block device.
    Other,
}

impl HostKind {
    pub(crate) fn from_file_type(file_type: FileType) -> Self {
        match file_type {
            FileType::RegularFile => Self::File,
            FileType::Directory => Self::Directory,
            FileType::Symlink => Self::Symlink,
            _ => Self::Other,
        }
    }

    pub(crate) fn from_raw_mode(mode: u32) -> Self {
        Self::from_file_type(FileType::from_raw_mode(mode))
    }
}

/// The identity of a filesystem object: device and inode number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FileIdentity {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

/// Metadata of one filesystem object, taken without following a symlink at the leaf.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct HostStat {
    /// What the object is.
    pub kind: HostKind,
    /// `st_size`: bytes for a file, target length for a symlink, filesystem-specific for a directory.
    pub size: u64,
    /// Permission bits (`st_mode & 0o7777`), including setuid, setgid and sticky.
    pub mode: u32,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i128,
    /// Status-change time, nanoseconds since the Unix epoch.
    pub ctime_ns: i128,
    /// Device and inode.
    pub identity: FileIdentity,
    /// Hard link count.
    pub nlink: u64,
    /// The owner's user id.
    pub uid: u32,
    /// The owner's group id.
    pub gid: u32,
    /// Bytes the filesystem allocated to it (`st_blocks` × 512): more than
    /// `size` for a file given space it has not written (`fallocate
    /// --keep-size`), less for a sparse one.
    pub allocated: u64,
}

impl HostStat {
    // The raw field types differ between architectures (`st_nlink` is `u32` on
    // aarch64, `u64` on x86_64), so the lossless `From` conversions stay.
    #[allow(clippy::useless_conversion)]
    pub(crate) fn from_raw(stat: &Stat) -> Self {
        const NANOS: i128 = 1_000_000_000;
        Self {
            kind: HostKind::from_raw_mode(stat.st_mode),
            size: u64::try_from(stat.st_size).unwrap_or(0),
            mode: stat.st_mode & vsh_types::MODE_MASK,
            mtime_ns: i128::from(stat.st_mtime) * NANOS + i128::from(stat.st_mtime_nsec),
            ctime_ns: i128::from(stat.st_ctime) * NANOS + i128::from(stat.st_ctime_nsec),
            identity: FileIdentity { dev: u64::from(stat.st_dev), ino: u64::from(stat.st_ino) },
            nlink: u64::from(stat.st_nlink),
            uid: stat.st_uid,
            gid: stat.st_gid,
            allocated: u64::try_from(stat.st_blocks).unwrap_or(0).saturating_mul(512),
        }
    }

    /// This object's [`vsh_types::FileStamp`] (device, inode, mtime, ctime),
    /// or `None` when a time does not fit the stamp's 64-bit nanoseconds
    /// (before 1678 or after 2262).
    pub fn file_stamp(&self) -> Option<vsh_types::FileStamp> {
        Some(vsh_types::FileStamp {
            dev: self.identity.dev,
            ino: self.identity.ino,
            mtime_ns: i64::try_from(self.mtime_ns).ok()?,
            ctime_ns: i64::try_from(self.ctime_ns).ok()?,
        })
    }

    /// Whether the content may have changed between two stats of the same open
    /// file: size, mtime, ctime or inode differ.
    pub(crate) fn content_changed(&self, later: &HostStat) -> bool {
        self.size != later.size
            || self.mtime_ns != later.mtime_ns
            || self.ctime_ns != later.ctime_ns
            || self.identity != later.identity
    }
}

/// One entry of a directory listing.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct HostDirEntry {
    /// The raw entry name (never `.` or `..`); not necessarily UTF-8.
    pub name: Vec<u8>,
    /// The kind from `d_type`, or `None` when the filesystem does not report it.
    pub kind: Option<HostKind>,
}

/// The bytes of a regular file together with the metadata they were read under.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FileContent {
    /// The whole content.
    pub bytes: Vec<u8>,
    /// The file's metadata, unchanged from before to after the read.
    pub stat: HostStat,
}

/// The space of a filesystem ([`crate::CapDir::space`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostSpace {
    /// Bytes an unprivileged writer may still use (`f_bavail`).
    pub available: u64,
    /// The filesystem's size in bytes (`f_blocks`).
    pub size: u64,
}
