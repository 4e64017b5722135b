//! Opening a [`VPath`] beneath a directory descriptor without following any
//! symbolic link, in the kernel where possible.
//!
//! There is one entry point, [`open_beneath`], with two strategies behind it:
//!
//! - **openat2**: a single `openat2(2)` call with `RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV`. The kernel
//!   refuses any symlink in any component (`ELOOP`), any escape from the
//!   starting directory and any crossing of a mount point, bind mounts
//!   included (`EXDEV`), atomically with the open.
//! - **walk**: the portable fallback, used when `openat2` is missing (`ENOSYS`)
//!   or blocked by a seccomp filter (`EPERM`), and when `openat2` keeps returning
//!   `EAGAIN`. Each directory component is opened with
//!   `openat(O_PATH | O_DIRECTORY | O_NOFOLLOW)` relative to the previous one, and
//!   the leaf with `openat(flags | O_NOFOLLOW)`. A symlink component fails that
//!   open, so nothing is ever followed; a path swapped for a symlink between two
//!   calls is refused by the second.
//!
//! `openat2` reports `ELOOP`, `ENOTDIR` and `EXDEV` without saying which
//! component was at fault. On those errors the walk is rerun for the same
//! request to name the component; the walk is itself safe, so if the path
//! changed in between, its outcome (even a successful open) stands.
//!
//! **Mounts.** A mount point inside the workspace (a bind mount of a
//! directory outside it, say) would let reads leave the workspace without any
//! symlink. Both strategies refuse to cross one ([`Failure::Mount`] naming it):
//! openat2 with `RESOLVE_NO_XDEV`, the walk by comparing the mount id
//! (`statx` `STATX_MNT_ID`, or the device where that is unknown) of every
//! component it opens with the one it came from. A handle may be told which
//! mount points it may cross ([`Mounts`]); paths through one of them are
//! resolved without `RESOLVE_NO_XDEV`, and the walk lets exactly those pass.
//!
//! This module does not follow `..`: a [`VPath`] never contains it, so every
//! escape attempt comes from a symlink and is refused as one.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use vsh_types::VPath;

/// How [`open_beneath`] resolves paths.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Strategy {
    /// `openat2`, falling back to the walk when the kernel does not offer it.
    Auto,
    /// `openat2` only; its absence is an error. Tests use it to prove the fast path works.
    #[cfg(test)]
    Openat2Only,
    /// The component walk only. Tests use it to check the fallback against `openat2`.
    #[cfg(test)]
    WalkOnly,
}

/// The mount points (relative to a handle) its resolutions may cross.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Mounts {
    pub(crate) allowed: std::sync::Arc<[VPath]>,
}

impl Mounts {
    /// Whether `path` lies at or below an allowed mount point.
    fn through_allowed(&self, path: &VPath) -> bool {
        self.allowed.iter().any(|mount| path.is_within(mount))
    }

    /// The allowed mount points as seen from the subdirectory `dir`.
    pub(crate) fn below(&self, dir: &VPath) -> Mounts {
        let allowed: Vec<VPath> = self
            .allowed
            .iter()
            .filter_map(|mount| mount.relative_to(dir).and_then(|relative| VPath::parse(relative).ok()))
            .filter(|mount| !mount.is_root())
            .collect();
        Mounts { allowed: allowed.into() }
    }
}

/// Why a path could not be opened.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The component at this prefix (possibly the whole path) is a symbolic link,
    /// or resolution would have left the starting directory.
    Symlink(VPath),
    /// The component at this prefix had to be a directory and is not.
    NotDir(VPath),
    /// The component at this prefix is a mount point the handle may not cross.
    Mount(VPath),
    /// Any other error, including `ENOENT` for a missing leaf or ancestor.
    Errno(Errno),
}

/// Set once the kernel has shown that `openat2` is unavailable to this process.
static OPENAT2_UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// How many times an `EAGAIN` from `openat2` is retried before walking instead.
const OPENAT2_ATTEMPTS: usize = 3;

fn resolve_flags(cross_mounts: bool) -> ResolveFlags {
    let flags = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    if cross_mounts { flags } else { flags | ResolveFlags::NO_XDEV }
}

/// Open `path` beneath `root` with `flags` (to which `O_NOFOLLOW | O_CLOEXEC` are
/// added). `mode` must be empty unless `flags` contains `O_CREAT`. The root
/// itself is opened as `"."`.
///
/// A symlink leaf opened with `O_PATH` (which always carries `O_NOFOLLOW` here)
/// yields a descriptor for the link itself, by both strategies.
pub(crate) fn open_beneath(
    root: BorrowedFd<'_>,
    path: &VPath,
    flags: OFlags,
    mode: Mode,
    strategy: Strategy,
    mounts: &Mounts,
) -> Result<OwnedFd, Failure> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match strategy {
        Strategy::Auto => {
            if OPENAT2_UNAVAILABLE.load(Ordering::Relaxed) {
                return walk(root, path, flags, mode, mounts);
            }
            match via_openat2(root, path, flags, mode, mounts) {
                Openat2::Done(result) => result,
                Openat2::Unsupported | Openat2::Busy => walk(root, path, flags, mode, mounts),
            }
        }
        #[cfg(test)]
        Strategy::Openat2Only => match via_openat2(root, path, flags, mode, mounts) {
            Openat2::Done(result) => result,
            Openat2::Unsupported => Err(Failure::Errno(Errno::NOSYS)),
            Openat2::Busy => Err(Failure::Errno(Errno::AGAIN)),
        },
        #[cfg(test)]
        Strategy::WalkOnly => walk(root, path, flags, mode, mounts),
    }
}

enum Openat2 {
    /// `openat2` gave an answer (possibly refined by the walk).
    Done(Result<OwnedFd, Failure>),
    /// The kernel or a seccomp filter does not allow `openat2`.
    Unsupported,
    /// `openat2` returned `EAGAIN` on every attempt.
    Busy,
}

fn as_relative(path: &VPath) -> &str {
    if path.is_root() { "." } else { path.as_str() }
}

fn via_openat2(root: BorrowedFd<'_>, path: &VPath, flags: OFlags, mode: Mode, mounts: &Mounts) -> Openat2 {
    let cross = mounts.through_allowed(path);
    for _ in 0..OPENAT2_ATTEMPTS {
        match rfs::openat2(root, as_relative(path), flags, mode, resolve_flags(cross)) {
            Ok(fd) => return Openat2::Done(Ok(fd)),
            Err(Errno::AGAIN | Errno::INTR) => {}
            Err(Errno::NOSYS) => {
                OPENAT2_UNAVAILABLE.store(true, Ordering::Relaxed);
                return Openat2::Unsupported;
            }
            Err(Errno::PERM) => {
                // A seccomp filter may answer EPERM for the whole syscall. A
                // harmless probe tells that apart from a real EPERM on this path.
                if openat2_blocked(root) {
                    OPENAT2_UNAVAILABLE.store(true, Ordering::Relaxed);
                    return Openat2::Unsupported;
                }
                return Openat2::Done(Err(Failure::Errno(Errno::PERM)));
            }
            // Name the offending component (or find that the path changed).
            Err(Errno::LOOP | Errno::NOTDIR) => return Openat2::Done(walk(root, path, flags, mode, mounts)),
            // RESOLVE_NO_XDEV refused a mount point (RESOLVE_BENEATH's escapes
            // need `..` or a symlink, which are refused otherwise): the walk
            // names it. If the walk finds none, the crossing is still refused.
            Err(Errno::XDEV) => {
                return Openat2::Done(match walk(root, path, flags, mode, mounts) {
                    Ok(_) if !cross => Err(Failure::Mount(path.clone())),
                    other => other,
                });
            }
            Err(errno) => return Openat2::Done(Err(Failure::Errno(errno))),
        }
    }
    Openat2::Busy
}

fn openat2_blocked(root: BorrowedFd<'_>) -> bool {
    let probe = rfs::openat2(
        root,
        ".",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        resolve_flags(false),
    );
    matches!(probe, Err(Errno::NOSYS | Errno::PERM))
}

/// What tells one mount from another: the mount id where `statx` reports it,
/// else the device (which cannot tell a bind mount of the same filesystem).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MountKey {
    Id(u64),
    Device(u64),
}

fn mount_key(fd: BorrowedFd<'_>) -> Result<MountKey, Errno> {
    match rfs::statx(fd, "", AtFlags::EMPTY_PATH, rfs::StatxFlags::MNT_ID) {
        Ok(statx) if statx.stx_mask & rfs::StatxFlags::MNT_ID.bits() != 0 => Ok(MountKey::Id(statx.stx_mnt_id)),
        Ok(_) | Err(Errno::NOSYS) => {
            let stat = rfs::fstat(fd)?;
            // `st_dev` is `u64` on some targets and narrower on others.
            #[allow(clippy::useless_conversion)]
            Ok(MountKey::Device(u64::from(stat.st_dev)))
        }
        Err(errno) => Err(errno),
    }
}

/// The component-at-a-time fallback. `flags` already carry `O_NOFOLLOW`.
/// Every component it opens must be on the mount it came from, unless it is
/// one of `mounts`' allowed mount points.
fn walk(root: BorrowedFd<'_>, path: &VPath, flags: OFlags, mode: Mode, mounts: &Mounts) -> Result<OwnedFd, Failure> {
    let Some(leaf) = path.file_name() else {
        return retry_intr(|| rfs::openat(root, ".", flags, mode)).map_err(Failure::Errno);
    };
    let mut mount = mount_key(root).map_err(Failure::Errno)?;
    let mut check = |fd: &OwnedFd, prefix: &dyn Fn() -> VPath| -> Result<(), Failure> {
        let here = mount_key(fd.as_fd()).map_err(Failure::Errno)?;
        if here != mount {
            let prefix = prefix();
            if !mounts.allowed.contains(&prefix) {
                return Err(Failure::Mount(prefix));
            }
            mount = here;
        }
        Ok(())
    };
    let full = path.as_str();
    let parent_len = full.len() - leaf.len();
    let mut current: Option<OwnedFd> = None;
    let mut end = 0;
    for component in full[..parent_len].split('/').filter(|component| !component.is_empty()) {
        end += component.len();
        let dir = current.as_ref().map_or(root, AsFd::as_fd);
        let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match retry_intr(|| rfs::openat(dir, component, dir_flags, Mode::empty())) {
            Ok(fd) => {
                check(&fd, &|| prefix_of(full, end))?;
                current = Some(fd);
            }
            Err(errno) => return Err(classify(dir, component, errno, || prefix_of(full, end))),
        }
        // Skip the separator.
        end += 1;
    }
    let dir = current.as_ref().map_or(root, AsFd::as_fd);
    let fd = retry_intr(|| rfs::openat(dir, leaf, flags, mode))
        .map_err(|errno| classify(dir, leaf, errno, || path.clone()))?;
    check(&fd, &|| path.clone())?;
    Ok(fd)
}

fn prefix_of(full: &str, end: usize) -> VPath {
    // A prefix of a normalized path, cut at a component boundary, is normalized.
    VPath::parse(&full[..end]).unwrap_or_default()
}

/// Turn `ELOOP`/`ENOTDIR` from opening `name` in `dir` into the component-level
/// failure it stands for; any other errno passes through.
fn classify(dir: BorrowedFd<'_>, name: &str, errno: Errno, prefix: impl FnOnce() -> VPath) -> Failure {
    if errno != Errno::LOOP && errno != Errno::NOTDIR {
        return Failure::Errno(errno);
    }
    match rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => match FileType::from_raw_mode(stat.st_mode) {
            FileType::Symlink => Failure::Symlink(prefix()),
            FileType::Directory => Failure::Errno(errno),
            _ if errno == Errno::NOTDIR => Failure::NotDir(prefix()),
            _ => Failure::Errno(errno),
        },
        Err(_) => Failure::Errno(errno),
    }
}

/// Retry a call interrupted by a signal.
pub(crate) fn retry_intr<T>(mut call: impl FnMut() -> rustix::io::Result<T>) -> rustix::io::Result<T> {
    loop {
        match call() {
            Err(Errno::INTR) => {}
            other => return other,
        }
    }
}

/// Open each of `names` in turn beneath `start`, creating missing ones with
/// `mkdirat(0o700)`, never following a symlink, and return the last one opened
/// `O_RDONLY | O_DIRECTORY` (`start` itself reopened when `names` is empty).
///
/// Each component is opened `O_PATH | O_DIRECTORY | O_NOFOLLOW` relative to
/// its parent, so a symlink, including one raced in after `mkdirat`, is refused
/// as [`Failure::Symlink`] naming the components up to it.
pub(crate) fn open_or_create_dirs(start: BorrowedFd<'_>, names: &[&str]) -> Result<OwnedFd, Failure> {
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let prefix = |index: usize| VPath::parse(&names[..=index].join("/")).unwrap_or_default();
    let mut current: Option<OwnedFd> = None;
    for (index, name) in names.iter().enumerate() {
        let dir = current.as_ref().map_or(start, AsFd::as_fd);
        let open = || retry_intr(|| rfs::openat(dir, *name, dir_flags, Mode::empty()));
        let opened = match open() {
            Err(Errno::NOENT) => match retry_intr(|| rfs::mkdirat(dir, *name, Mode::from_raw_mode(0o700))) {
                Ok(()) | Err(Errno::EXIST) => open(),
                Err(errno) => return Err(Failure::Errno(errno)),
            },
            other => other,
        };
        match opened {
            Ok(fd) => current = Some(fd),
            Err(errno) => return Err(classify(dir, name, errno, || prefix(index))),
        }
    }
    let dir = current.as_ref().map_or(start, AsFd::as_fd);
    retry_intr(|| rfs::openat(dir, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()))
        .map_err(Failure::Errno)
}
