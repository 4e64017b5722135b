//! A private mount namespace for the child, with a FUSE filesystem mounted
//! in it: the filesystem exists only for the child and its descendants, and
//! the server (the parent) reads the kernel's requests from the device.
//!
//! The parent opens `/dev/fuse` ([`FuseMount::open`]) and, at the spawn,
//! makes the filesystem with the new mount API (`fsopen("fuse")`,
//! `fsconfig`, `fsmount`): a *detached* mount, in no namespace, reachable
//! only through its descriptor; a private `/tmp`
//! ([`FuseMount::with_private_tmp`]) is a detached tmpfs made the same way.
//! The child's Landlock ruleset grants writing beneath the roots of both,
//! by descriptor (a rule by path would name the directory they cover, which
//! Landlock's path walk steps over). The child, between `fork` and `exec`,
//! leaves the parent's mount namespace (`unshare(CLONE_NEWNS)`), stops
//! propagation back (`MS_REC|MS_PRIVATE` on `/`), attaches the tmpfs at
//! `/tmp` and the candidate at its target (`move_mount`; a target beneath
//! `/tmp` gets its directories made in the new tmpfs first), changes into
//! its working directory, and only then changes its uid and confines
//! itself. Everything is attached on a root of the child's own (a small
//! read-only tmpfs, [`shown_paths`] of the host shown in it read-only), into
//! which the child pivots: the rest of the host's tree does not exist for it. The kernel asks the server from the moment the filesystem is
//! made (the parent's ruleset checks the root), so the parent says so on a
//! pipe right then (one byte, which [`MountWaiter::wait`] reads) and the
//! server must start waiting before the spawn: the spawn returns only once
//! the child executed its program. The
//! mounts go away with the last process of the namespace (the parent's
//! descriptors close when the spawn returns).
//!
//! The candidate appears where the caller says, typically the workspace's
//! own path: the command sees the workspace where it is, its paths are the
//! same run after run (a build's incremental state stays valid), and the
//! real directory beneath is out of its reach.
//!
//! This needs `CAP_SYS_ADMIN` in the parent's user namespace (vsh runs it as
//! root); without it the spawn fails at the mount stage, closed.

use std::ffi::CString;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};
use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags, MoveMountFlags};

use crate::error::ToolError;

/// What a private FUSE mount (a candidate workspace) needs that this host
/// lacks: [`candidate_support`] says, before anything is made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CandidateMissing {
    /// `/dev/fuse` cannot be opened: no FUSE in this kernel, no device
    /// node (a container without it), or no permission.
    #[error("/dev/fuse cannot be opened ({reason})")]
    FuseDevice {
        /// The open's error.
        reason: String,
    },
    /// Mounting in a private namespace needs `CAP_SYS_ADMIN`, which this
    /// process (not root) lacks.
    #[error("mounting a candidate in a private namespace needs root; this process runs as uid {uid}")]
    Privilege {
        /// The process's effective uid.
        uid: u32,
    },
}

impl CandidateMissing {
    /// How to get what is missing.
    pub fn remedy(&self) -> &'static str {
        match self {
            Self::FuseDevice { .. } => {
                "load the fuse module (modprobe fuse) and give vsh the device (in a container: --device /dev/fuse)"
            }
            Self::Privilege { .. } => "run vsh as root (unprivileged mounts in a user namespace are not supported yet)",
        }
    }
}

/// Whether this host can make private FUSE candidates: `/dev/fuse` opens
/// and this process may mount in a namespace of its own (it is root).
/// Opens the device once and closes it; changes nothing.
///
/// # Errors
///
/// What is missing, first the device (the privilege, when the device is
/// there but this process, not root, may not open it), then the privilege.
pub fn candidate_support() -> Result<(), CandidateMissing> {
    let uid = crate::effective_uid();
    let device = rustix::fs::open("/dev/fuse", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).map_err(|errno| {
        // A device this process may not open, when it is not root, is the
        // privilege missing (root may open it, and mounting needs root anyway).
        if uid != 0 && matches!(errno, rustix::io::Errno::ACCESS | rustix::io::Errno::PERM) {
            CandidateMissing::Privilege { uid }
        } else {
            CandidateMissing::FuseDevice { reason: std::io::Error::from(errno).to_string() }
        }
    })?;
    drop(device);
    if uid != 0 {
        return Err(CandidateMissing::Privilege { uid });
    }
    Ok(())
}

/// A FUSE device opened for a mount in the child's own namespace: give it
/// to [`crate::ConfinedCommand::private_fuse_mount`].
#[derive(Debug)]
pub struct FuseMount {
    device: Arc<OwnedFd>,
    target: PathBuf,
    /// The write end of the pipe that says the filesystem exists.
    mounted: OwnedFd,
    /// The size of a private `/tmp`, if the child gets one.
    tmp_bytes: Option<u64>,
    /// Host directories shown read-only at their own paths.
    tools: Vec<PathBuf>,
    /// Host directories bound over paths inside the candidate: `(inside, dir)`.
    scratch: Vec<(PathBuf, PathBuf)>,
    /// Host directories bound at `/tmp/<name>/<beneath>`: `(name,
    /// beneath, dir)`, `beneath` relative (empty: at `/tmp/<name>`).
    tmp_scratch: Vec<(String, PathBuf, PathBuf)>,
    /// Files written into the private `/tmp` before the child starts.
    tmp_files: Vec<(String, Vec<u8>)>,
    /// The size of the child's private `/dev/shm`, if it gets one.
    shm_bytes: Option<u64>,
    /// Files shown at `/etc/<name>` instead of the host's: `(name, bytes)`.
    etc_files: Vec<(String, Vec<u8>)>,
    /// The user namespace every scratch directory is idmapped through, and
    /// the storage uid and gid it maps.
    idmap: Option<(Arc<OwnedFd>, (u32, u32))>,
}

/// The server's side of a [`FuseMount`]: waits until the filesystem exists
/// (made at the spawn).
#[derive(Debug)]
pub struct MountWaiter {
    device: Arc<OwnedFd>,
    mounted: OwnedFd,
}

impl FuseMount {
    /// Open `/dev/fuse` (close-on-exec: the program never inherits it) for
    /// a filesystem the child sees at `target`, an existing directory other
    /// than `/` and `/tmp` (what is there is hidden from the child), and the
    /// waiter the server starts with.
    ///
    /// The first call fixes glibc's mmap threshold at 8 MiB for the process:
    /// a FUSE session's two 16 MiB request buffers are then mapped rather
    /// than cleared on the heap (about 10 ms per candidate otherwise, once
    /// glibc has raised its threshold).
    ///
    /// # Errors
    ///
    /// [`ToolError::Setup`] when the device cannot be opened (no FUSE in
    /// this kernel or no permission), naming it.
    pub fn open(target: impl Into<PathBuf>) -> Result<(Self, MountWaiter), ToolError> {
        // The server's request buffers are mapped, never cleared by hand.
        crate::sys::map_large_allocations();
        let device = rustix::fs::open("/dev/fuse", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
            .map_err(|errno| ToolError::Setup { stage: "open /dev/fuse", source: errno.into() })?;
        let (reader, writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .map_err(|errno| ToolError::Setup { stage: "mount pipe", source: errno.into() })?;
        let device = Arc::new(device);
        let waiter = MountWaiter { device: Arc::clone(&device), mounted: reader };
        let mount = Self {
            device,
            target: target.into(),
            mounted: writer,
            tmp_bytes: None,
            tools: Vec::new(),
            scratch: Vec::new(),
            tmp_scratch: Vec::new(),
            tmp_files: Vec::new(),
            shm_bytes: None,
            etc_files: Vec::new(),
            idmap: None,
        };
        Ok((mount, waiter))
    }

    /// Give the child a private `/tmp` as well: a new tmpfs of at most
    /// `max_bytes` (and 65,536 inodes), mode `1777`, `nosuid,nodev`, that no
    /// namespace but the child's ever sees, where it covers `/tmp`; writable
    /// under the child's Landlock ruleset, gone with the child's namespace.
    #[must_use]
    pub fn with_private_tmp(mut self, max_bytes: u64) -> Self {
        self.tmp_bytes = Some(max_bytes);
        self
    }

    /// Give the child a private `/dev/shm` too, made as the private `/tmp`
    /// is ([`FuseMount::with_private_tmp`]; at most `max_bytes`): POSIX
    /// shared memory and semaphores (`shm_open`, `sem_open`: Python's
    /// `multiprocessing` locks and queues) live there. Without it the
    /// child's ruleset leaves the host's `/dev/shm` unwritable. Nothing is
    /// attached where the host has no `/dev/shm` directory.
    #[must_use]
    pub fn with_private_shm(mut self, max_bytes: u64) -> Self {
        self.shm_bytes = Some(max_bytes);
        self
    }

    /// Show the host directory `dir` (an absolute path) to the child at its
    /// own path, readable and executable, never writable, even when one of
    /// its ancestors is not searchable by the child's uid (a toolchain under
    /// `/root`, say): such an ancestor is covered, in the child's namespace
    /// only, by an empty read-only tmpfs holding just the directories that
    /// lead to what is shown there.
    #[must_use]
    pub fn with_tool_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.tools.push(dir.into());
        self
    }

    /// Bind the host directory `dir` over `inside` (a relative path in the
    /// candidate, which the filesystem must show as a directory): the child
    /// reads, writes and executes there directly on the host, at native
    /// speed, and nothing it does there is the candidate's. For build
    /// outputs and caches kept between runs.
    #[must_use]
    pub fn with_scratch(mut self, inside: impl Into<PathBuf>, dir: impl Into<PathBuf>) -> Self {
        self.scratch.push((inside.into(), dir.into()));
        self
    }

    /// Bind the host directory `dir` at `/tmp/<name>` in the child's private
    /// `/tmp` ([`FuseMount::with_private_tmp`], which this needs): written
    /// directly, kept between runs like any scratch directory, outside the
    /// candidate (a cache a tool is told about, such as Python's
    /// `PYTHONPYCACHEPREFIX`).
    #[must_use]
    pub fn with_tmp_scratch(mut self, name: &str, dir: impl Into<PathBuf>) -> Self {
        self.tmp_scratch.push((name.to_owned(), PathBuf::new(), dir.into()));
        self
    }

    /// Bind the host directory `dir` at `/tmp/<name>/<beneath>` (`beneath`
    /// relative and plain) in the child's private `/tmp`, kept between runs;
    /// `/tmp/<name>` and the directories down to it are the run's own,
    /// writable by anyone (mode `1777`, as `/tmp`) and gone with it. For a
    /// cache of which only a part may be kept: Python's bytecode of the
    /// workspace's own modules (beneath the workspace's path in the
    /// `PYTHONPYCACHEPREFIX` tree), never of the system's, whose cache an
    /// earlier run could have planted code in that every later Python would
    /// run (sec80 F3).
    #[must_use]
    pub fn with_tmp_scratch_beneath(mut self, name: &str, beneath: &Path, dir: impl Into<PathBuf>) -> Self {
        self.tmp_scratch.push((name.to_owned(), beneath.to_owned(), dir.into()));
        self
    }

    /// Put a file `name` (one plain name) holding `bytes` in the child's
    /// private `/tmp` ([`FuseMount::with_private_tmp`], which this needs)
    /// before it starts: readable by the child, never writable (it belongs
    /// to the parent, mode `0444`, and `/tmp`'s sticky bit keeps the child
    /// from replacing it). For a configuration the child's tools read from
    /// their `HOME`.
    #[must_use]
    pub fn with_tmp_file(mut self, name: &str, bytes: impl Into<Vec<u8>>) -> Self {
        self.tmp_files.push((name.to_owned(), bytes.into()));
        self
    }

    /// Show the child `bytes` at `/etc/<name>` (one plain name) instead of
    /// the host's file there, readable, never writable: a file of a small
    /// tmpfs mounted over the host's, in the child's namespace only. Nothing
    /// is shown where the host has no regular file of that name. For a
    /// configuration that must differ in a sandbox (a command without a
    /// network resolves host names from files only, so a lookup fails at
    /// once instead of waiting on a resolver it cannot reach).
    #[must_use]
    pub fn with_etc_file(mut self, name: &str, bytes: impl Into<Vec<u8>>) -> Self {
        self.etc_files.push((name.to_owned(), bytes.into()));
        self
    }

    /// Show every scratch directory ([`FuseMount::with_scratch`],
    /// [`FuseMount::with_tmp_scratch`]) through an idmapped mount: what the
    /// host stores as `user`'s storage uid appears as `user`'s leased uid,
    /// and what the child makes there is stored as the storage uid (see
    /// [`CommandUser`]). The child must run as `user`'s uid and gid
    /// ([`crate::SandboxPolicy::run_as`]). Each scratch directory itself is
    /// given to the storage uid and gid at the spawn (the kernel refuses
    /// writing to a directory whose owner the mapping does not map).
    ///
    /// # Errors
    ///
    /// [`ToolError::Setup`] when the user namespace for the mapping cannot
    /// be made (this needs root). A scratch directory on a filesystem that
    /// cannot be idmapped ([`CommandUser::can_idmap`]) fails the spawn.
    ///
    /// [`CommandUser`]: crate::CommandUser
    /// [`CommandUser::can_idmap`]: crate::CommandUser::can_idmap
    pub fn with_idmapped_scratch(mut self, user: &crate::CommandUser) -> Result<Self, ToolError> {
        self.idmap = Some((user.idmap()?, user.storage()));
        Ok(self)
    }

    /// Where the child sees the filesystem.
    pub fn target(&self) -> &Path {
        &self.target
    }
}

impl MountWaiter {
    /// Block until the spawn made the filesystem, then return a descriptor
    /// of its device to serve.
    ///
    /// # Errors
    ///
    /// [`std::io::ErrorKind::NotConnected`] when the spawn failed (or never
    /// happened) before making it; the descriptor's error otherwise.
    pub fn wait(self) -> std::io::Result<OwnedFd> {
        let mut byte = [0_u8; 1];
        loop {
            match rustix::io::read(&self.mounted, &mut byte) {
                Ok(1) => return self.device.try_clone(),
                Ok(_) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::NotConnected,
                        "the child ended without mounting the candidate",
                    ));
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(errno) => return Err(errno.into()),
            }
        }
    }
}

/// What the child does to mount, prepared in the parent: the detached
/// mounts and every string the raw calls take, already a C string.
#[derive(Debug)]
pub(crate) struct PreparedMount {
    /// Keeps the device open until the child has mounted it.
    _device: Arc<OwnedFd>,
    /// Empty tmpfs mounts attached first (the private `/tmp`, covers over
    /// ancestors the child could not search), shallowest first.
    covers: Vec<(OwnedFd, CString)>,
    /// Directories to make in the covers, outermost first, for what is
    /// attached beneath them.
    dirs: Vec<CString>,
    /// Tool directories (detached clones), attached after the covers.
    tools: Vec<(OwnedFd, CString)>,
    /// The candidate, detached.
    candidate: OwnedFd,
    target: CString,
    /// Scratch directories (detached clones), attached inside the candidate.
    scratch: Vec<(OwnedFd, CString)>,
    /// The child's root: a small read-only tmpfs holding the directories,
    /// empty files and symlinks every other mount is attached on (see
    /// [`PreparedMount::apply`]). Every attach path above is relative to it.
    root: OwnedFd,
    /// What the root shows of the host (detached clones, read-only unless
    /// granted writing), each at its own path, relative: the system
    /// directories, `/etc`, the devices, the paths the policy names.
    binds: Vec<(OwnedFd, CString)>,
    /// What covers each entry of the child's `/proc` it is not shown
    /// ([`PROC_SHOWN`]), by name: a read-only clone of `/dev/null` for a
    /// file, an empty read-only tmpfs for a directory ([`proc_covers`]).
    proc_covers: Vec<(OwnedFd, CString)>,
    /// The working directory (entered after mounting).
    pub(crate) cwd: Option<CString>,
    /// The uid and gid to change to after mounting.
    pub(crate) ids: Option<(u32, u32)>,
}

/// The entries of `/proc` besides its processes' that a command is shown:
/// the links to its own process (`self`, `mounts`, `net`), and what tools
/// read of the machine they run on (`free` and psutil `meminfo`, Node's
/// `os.cpus()` `cpuinfo` and `stat`, `uptime`, `top`'s `loadavg`, the
/// kernel's `version`; ux76, ux78). Every other entry (`/proc/sys`, the
/// kernel's tables and symbols, devices', drivers' and interrupts' state,
/// the host's locks and disks) is covered, whatever the kernel adds.
const PROC_SHOWN: [&[u8]; 10] =
    [b"self", b"thread-self", b"mounts", b"net", b"cpuinfo", b"meminfo", b"stat", b"uptime", b"loadavg", b"version"];

/// What the child may do beneath the root of one of the prepared mounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grant {
    /// Read and execute (a tool directory).
    ReadExecute,
    /// Read, write and execute (the candidate, a scratch directory, the
    /// private `/tmp` and `/dev/shm`).
    WriteExecute,
    /// Read one file (a file shown in `/etc`).
    ReadFile,
}

fn c_path(path: &Path) -> Result<CString, ToolError> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| ToolError::InvalidPolicy { reason: format!("{} contains a NUL byte", path.display()) })
}

/// A detached mount of the filesystem `fs_fd` was configured for.
fn detach(fs: &OwnedFd, stage: &'static str, read_only: bool) -> Result<OwnedFd, ToolError> {
    let setup = |errno: rustix::io::Errno| ToolError::Setup { stage, source: errno.into() };
    rustix::mount::fsconfig_create(fs).map_err(setup)?;
    let mut attributes = MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV;
    if read_only {
        attributes |= MountAttrFlags::MOUNT_ATTR_RDONLY;
    }
    rustix::mount::fsmount(fs, FsMountFlags::FSMOUNT_CLOEXEC, attributes).map_err(setup)
}

/// Where POSIX shared memory lives ([`FuseMount::with_private_shm`]).
const SHM: &str = "/dev/shm";
/// [`SHM`] relative to the child's root, as the prepared mounts name it.
const SHM_C: &std::ffi::CStr = c"dev/shm";

/// Where the private `/tmp` is attached a second time.
const VAR_TMP: &str = "/var/tmp";

/// The child's private `/tmp` and `/dev/shm`, those it gets, each with the
/// path it covers.
#[expect(clippy::type_complexity, reason = "a pair of lists built together")]
fn private_covers(mount: &FuseMount) -> Result<(Vec<(OwnedFd, CString)>, Vec<PathBuf>), ToolError> {
    let mut covers = Vec::new();
    let mut paths = Vec::new();
    let run_dirs: Vec<PathBuf> = mount
        .tmp_scratch
        .iter()
        .filter(|(_, beneath, _)| !beneath.as_os_str().is_empty())
        .map(|(name, beneath, _)| Path::new(name).join(beneath))
        .collect();
    if let Some(tmp) = private_tmp(mount.tmp_bytes, &mount.tmp_files, &run_dirs)? {
        // The same tmpfs at `/var/tmp` too, where tools that want room for
        // larger files look (ux76: `mktemp -p /var/tmp`, `sort`'s and
        // systemd's temporaries failed with no such directory).
        let flags = rustix::mount::OpenTreeFlags::OPEN_TREE_CLONE
            | rustix::mount::OpenTreeFlags::OPEN_TREE_CLOEXEC
            | rustix::mount::OpenTreeFlags::AT_EMPTY_PATH;
        let var_tmp = rustix::mount::open_tree(&tmp, c"", flags)
            .map_err(|errno| ToolError::Setup { stage: "private /var/tmp", source: errno.into() })?;
        covers.push((tmp, c_path(Path::new("/tmp"))?));
        paths.push(PathBuf::from("/tmp"));
        covers.push((var_tmp, c_path(Path::new(VAR_TMP))?));
        paths.push(PathBuf::from(VAR_TMP));
    }
    if let Some(bytes) = mount.shm_bytes
        && std::fs::symlink_metadata(SHM).is_ok_and(|meta| meta.is_dir())
    {
        covers.push((tmpfs(bytes, "1777", "private /dev/shm (tmpfs)", false)?, c_path(Path::new(SHM))?));
        paths.push(PathBuf::from(SHM));
    }
    covers.extend(etc_covers(&mount.etc_files)?);
    Ok((covers, paths))
}

/// The most bytes of the files shown in `/etc` ([`FuseMount::with_etc_file`]).
const ETC_FILES_BYTES: u64 = 1 << 20;

/// Each of `files` as a detached mount of one file, with the path in `/etc`
/// it covers; those the host has no regular file for are left out.
fn etc_covers(files: &[(String, Vec<u8>)]) -> Result<Vec<(OwnedFd, CString)>, ToolError> {
    use rustix::mount::OpenTreeFlags;
    let shown: Vec<&(String, Vec<u8>)> = files
        .iter()
        .filter(|(name, _)| std::fs::symlink_metadata(Path::new("/etc").join(name)).is_ok_and(|meta| meta.is_file()))
        .collect();
    if shown.is_empty() {
        return Ok(Vec::new());
    }
    let total: u64 = shown.iter().map(|(_, bytes)| bytes.len() as u64).sum();
    if total > ETC_FILES_BYTES {
        return Err(ToolError::InvalidPolicy { reason: format!("the files shown in /etc hold {total} bytes") });
    }
    let holder = tmpfs(ETC_FILES_BYTES, "0755", "files shown in /etc (tmpfs)", false)?;
    let mut covers = Vec::new();
    for (name, bytes) in shown {
        tmp_file(&holder, name, bytes)?;
        let flags =
            OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC | OpenTreeFlags::AT_SYMLINK_NOFOLLOW;
        let file = rustix::mount::open_tree(&holder, name.as_str(), flags)
            .map_err(|errno| ToolError::Setup { stage: "a file shown in /etc", source: errno.into() })?;
        covers.push((file, c_path(&Path::new("/etc").join(name))?));
    }
    Ok(covers)
}

/// The private `/tmp` of `bytes`, if the child gets one, holding `files`.
fn private_tmp(
    bytes: Option<u64>,
    files: &[(String, Vec<u8>)],
    run_dirs: &[PathBuf],
) -> Result<Option<OwnedFd>, ToolError> {
    let Some(bytes) = bytes else {
        return match files.first() {
            Some((name, _)) => {
                Err(ToolError::InvalidPolicy { reason: format!("the file /tmp/{name} needs a private /tmp") })
            }
            None => Ok(None),
        };
    };
    let tmp = tmpfs(bytes, "1777", "private /tmp (tmpfs)", false)?;
    for (name, content) in files {
        tmp_file(&tmp, name, content)?;
    }
    // Each run directory down to (and with) a kept directory's mount point,
    // the run's own: anyone's to write in, as `/tmp` is.
    let setup = |errno: rustix::io::Errno| ToolError::Setup { stage: "private /tmp directory", source: errno.into() };
    for path in run_dirs {
        let mut at = PathBuf::new();
        for component in path.components() {
            let std::path::Component::Normal(part) = component else {
                return Err(ToolError::InvalidPolicy { reason: format!("{} is no plain path", path.display()) });
            };
            at.push(part);
            match rustix::fs::mkdirat(&tmp, &at, Mode::from_raw_mode(0o1777)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(errno) => return Err(setup(errno)),
            }
            rustix::fs::chmodat(&tmp, &at, Mode::from_raw_mode(0o1777), rustix::fs::AtFlags::empty()).map_err(setup)?;
        }
    }
    Ok(Some(tmp))
}

/// Write `content` as the new file `name` (one plain name) at the root of
/// the detached tmpfs `tmp`, mode `0444`.
fn tmp_file(tmp: &OwnedFd, name: &str, content: &[u8]) -> Result<(), ToolError> {
    let plain = !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0']);
    if !plain {
        return Err(ToolError::InvalidPolicy { reason: format!("a file in /tmp needs one plain name, not {name:?}") });
    }
    let setup = |errno: rustix::io::Errno| ToolError::Setup { stage: "private /tmp file", source: errno.into() };
    let file = rustix::fs::openat(
        tmp,
        name,
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::from_raw_mode(0o444),
    )
    .map_err(setup)?;
    let mut written = 0;
    while written < content.len() {
        written += rustix::io::write(&file, &content[written..]).map_err(setup)?;
    }
    Ok(())
}

/// A new empty tmpfs of `bytes` with root mode `mode`, detached.
fn tmpfs(bytes: u64, mode: &str, stage: &'static str, read_only: bool) -> Result<OwnedFd, ToolError> {
    // A new filesystem context each time: one `EBUSY` was seen here once,
    // with many commands setting up mounts at once on this machine kind
    // (never reproduced alone); it is tried again, a bounded few times.
    let mut attempt = 0;
    loop {
        match new_tmpfs(bytes, mode, stage, read_only) {
            Err(ToolError::Setup { source, .. })
                if attempt < TMPFS_ATTEMPTS
                    && source.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error()) =>
            {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// How many times more [`tmpfs`] tries a mount the kernel said was busy.
const TMPFS_ATTEMPTS: u32 = 3;

fn new_tmpfs(bytes: u64, mode: &str, stage: &'static str, read_only: bool) -> Result<OwnedFd, ToolError> {
    let setup = |errno: rustix::io::Errno| ToolError::Setup { stage, source: errno.into() };
    let fs = rustix::mount::fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC).map_err(setup)?;
    rustix::mount::fsconfig_set_string(&fs, "source", "vsh-tmp").map_err(setup)?;
    rustix::mount::fsconfig_set_string(&fs, "size", bytes.to_string()).map_err(setup)?;
    rustix::mount::fsconfig_set_string(&fs, "nr_inodes", "65536").map_err(setup)?;
    rustix::mount::fsconfig_set_string(&fs, "mode", mode).map_err(setup)?;
    detach(&fs, stage, read_only)
}

/// A detached clone of the host directory `dir` (a bind mount no namespace
/// has yet; a symlink at `dir` itself is not followed, and what is mounted
/// beneath `dir` is not part of it).
pub(crate) fn clone_tree(dir: &Path) -> Result<OwnedFd, ToolError> {
    use rustix::mount::OpenTreeFlags;
    if !dir.is_absolute() {
        return Err(ToolError::InvalidPolicy { reason: format!("{} is not an absolute path", dir.display()) });
    }
    let flags = OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC | OpenTreeFlags::AT_SYMLINK_NOFOLLOW;
    rustix::mount::open_tree(rustix::fs::CWD, dir, flags)
        .map_err(|errno| ToolError::AllowedPath { path: dir.to_owned(), source: errno.into() })
}

/// A detached clone of the scratch directory `dir` ([`clone_tree`]) where
/// set-user-id bits and device nodes mean nothing: what a command leaves
/// there is kept between runs, unreviewed (sec82 4).
fn scratch_clone(dir: &Path) -> Result<OwnedFd, ToolError> {
    let clone = clone_tree(dir)?;
    crate::sys::inert_mount(clone.as_fd())
        .map_err(|source| ToolError::Setup { stage: "scratch directory (nosuid, nodev)", source })?;
    Ok(clone)
}

/// The outermost ancestor of `dir` (below `/`) that a process of `ids`
/// cannot search, if any.
fn unsearchable_ancestor(dir: &Path, (uid, gid): (u32, u32)) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    dir.ancestors().collect::<Vec<_>>().into_iter().rev().skip(1).find_map(|ancestor| {
        if ancestor == dir {
            return None;
        }
        let meta = std::fs::metadata(ancestor).ok()?;
        let bits = if meta.uid() == uid {
            meta.mode() >> 6
        } else if meta.gid() == gid {
            meta.mode() >> 3
        } else {
            meta.mode()
        };
        (bits & 0o1 == 0).then(|| ancestor.to_owned())
    })
}

/// The directories from `cover` (exclusive) down to `path` (inclusive).
fn chain(cover: &Path, path: &Path) -> Result<Vec<CString>, ToolError> {
    let Ok(inside) = path.strip_prefix(cover) else { return Ok(Vec::new()) };
    let mut at = cover.to_owned();
    let mut dirs = Vec::new();
    for component in inside.components() {
        at.push(component);
        dirs.push(c_path(&at)?);
    }
    Ok(dirs)
}

/// Where a host's daemons put their unix sockets, shown (read-only) to a
/// command given the host's network ([`crate::NetworkAccess::All`]).
const HOST_SOCKET_DIRS: &[&str] = &["/run", "/var/run"];

/// A host path the child's root shows at its own path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shown {
    /// The absolute path.
    pub(crate) path: PathBuf,
    /// Shown writable (a write root of the policy); else read-only.
    pub(crate) writable: bool,
    /// An absent path is an error (the policy named it); else skipped.
    pub(crate) required: bool,
}

/// What a candidate's command sees of the host, besides its candidate, its
/// private `/tmp` and `/dev/shm`, its tool and scratch directories: the
/// system directories, the whole of `/etc` (its Landlock ruleset still lets
/// it read only what `SYSTEM_ETC_FILES` names there: the rest can be named,
/// as on any host, and not read), the devices, the dynamic loaders, with a
/// network the resolver's files outside `/etc`, and every path the policy
/// and the tool context grant. Nothing else of the host exists for it.
pub(crate) fn shown_paths(policy: &crate::SandboxPolicy, context: &crate::ToolContext) -> Vec<Shown> {
    use crate::policy::{DYNAMIC_LOADERS, NETWORK_ETC_FILES, SYSTEM_DEVICES, SYSTEM_DIRS};
    let system = |path: &&str| Shown { path: PathBuf::from(path), writable: false, required: false };
    let mut shown: Vec<Shown> = SYSTEM_DIRS.iter().chain(&["/etc"]).chain(SYSTEM_DEVICES).map(system).collect();
    shown.extend(DYNAMIC_LOADERS.iter().map(system));
    if policy.reaches_network() {
        shown.extend(NETWORK_ETC_FILES.iter().map(system));
    }
    // The host's network is its daemons' unix sockets too (`docker.sock`,
    // a database's): where they live.
    if policy.network_access() == crate::NetworkAccess::All {
        shown.extend(HOST_SOCKET_DIRS.iter().map(system));
    }
    let granted = |paths: &[PathBuf], writable: bool| -> Vec<Shown> {
        paths.iter().map(|path| Shown { path: path.clone(), writable, required: true }).collect()
    };
    shown.extend(granted(policy.read_paths(), false));
    shown.extend(granted(policy.exec_paths(), false));
    shown.extend(granted(policy.write_paths(), true));
    shown.extend(context.granted_programs().map(|path| Shown {
        path: path.to_owned(),
        writable: false,
        required: true,
    }));
    shown
}

/// `path` (absolute) without its leading `/`, as the prepared mounts name
/// what is attached beneath the child's root.
fn relative_c(path: &std::ffi::CStr) -> CString {
    let bytes = path.to_bytes();
    let inside = bytes.strip_prefix(b"/").unwrap_or(bytes);
    // A part of a C string holds no NUL byte.
    CString::new(inside).unwrap_or_default()
}

/// Make the directories of `path` (absolute) in the root `root`, `path`
/// itself too when `whole` (else only its parents), mode `0755`.
fn root_dirs(root: &OwnedFd, path: &Path, whole: bool) -> Result<(), ToolError> {
    let setup = |errno: rustix::io::Errno| ToolError::Setup { stage: "command root (tmpfs)", source: errno.into() };
    let inside = path.strip_prefix("/").unwrap_or(path);
    let mut at = PathBuf::new();
    let count = inside.components().count();
    for (index, component) in inside.components().enumerate() {
        if index + 1 == count && !whole {
            break;
        }
        at.push(component);
        match rustix::fs::mkdirat(root, &at, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(errno) => return Err(setup(errno)),
        }
    }
    Ok(())
}

/// The most bytes the child's root holds (directories, empty files and
/// symlinks only).
const ROOT_BYTES: u64 = 1 << 20;

/// The child's root, made in the parent: a tmpfs holding what `shown`
/// needs to be attached on (a directory, an empty file, or the host's
/// symlink again, whose target is shown in turn), the detached clones to
/// attach there, relative, and the host directories shown (what is
/// beneath them is the host's). Also `/dev` (`fd`, `stdin`, `stdout`,
/// `stderr` as links into `/proc/self/fd`), `/proc` and `/tmp`.
#[expect(clippy::type_complexity, reason = "the three parts of one root, built together")]
fn command_root(mut shown: Vec<Shown>) -> Result<(OwnedFd, Vec<(OwnedFd, CString)>, Vec<PathBuf>), ToolError> {
    let root = tmpfs(ROOT_BYTES, "0755", "command root (tmpfs)", false)?;
    let setup = |errno: rustix::io::Errno| ToolError::Setup { stage: "command root (tmpfs)", source: errno.into() };
    for dir in ["/dev", "/proc", "/tmp"] {
        root_dirs(&root, Path::new(dir), true)?;
    }
    for (name, target) in [
        ("dev/fd", "/proc/self/fd"),
        ("dev/stdin", "/proc/self/fd/0"),
        ("dev/stdout", "/proc/self/fd/1"),
        ("dev/stderr", "/proc/self/fd/2"),
    ] {
        rustix::fs::symlinkat(target, &root, name).map_err(setup)?;
    }
    // Ancestors first, so a directory is attached before what is in it.
    shown.sort_by(|a, b| a.path.cmp(&b.path));
    let mut queue: std::collections::VecDeque<Shown> = shown.into();
    let mut binds = Vec::new();
    let mut bound: Vec<PathBuf> = Vec::new();
    let mut linked: Vec<PathBuf> = Vec::new();
    while let Some(mut item) = queue.pop_front() {
        if !item.path.is_absolute() {
            return Err(ToolError::InvalidPolicy {
                reason: format!("{} is not an absolute path", item.path.display()),
            });
        }
        // Where it is, its directories' symlinks followed (a loader under
        // `/lib64 -> usr/lib64` is shown with `/usr`).
        if let (Some(parent), Some(name)) = (item.path.parent(), item.path.file_name())
            && let Ok(real) = std::fs::canonicalize(parent)
        {
            item.path = real.join(name);
        }
        if bound.iter().chain(&linked).any(|done| item.path.starts_with(done)) {
            continue;
        }
        let meta = match std::fs::symlink_metadata(&item.path) {
            Ok(meta) => meta,
            Err(_) if !item.required => continue,
            Err(source) => return Err(ToolError::AllowedPath { path: item.path, source }),
        };
        let inside = item.path.strip_prefix("/").unwrap_or(&item.path).to_owned();
        if inside.as_os_str().is_empty() {
            return Err(ToolError::InvalidPolicy { reason: "the root directory cannot be shown whole".to_owned() });
        }
        root_dirs(&root, &item.path, false)?;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&item.path)
                .map_err(|source| ToolError::AllowedPath { path: item.path.clone(), source })?;
            match rustix::fs::symlinkat(&target, &root, &inside) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(errno) => return Err(setup(errno)),
            }
            if let Ok(real) = std::fs::canonicalize(&item.path) {
                queue.push_back(Shown { path: real, ..item.clone() });
            }
            linked.push(item.path);
            continue;
        }
        if meta.is_dir() {
            match rustix::fs::mkdirat(&root, &inside, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(errno) => return Err(setup(errno)),
            }
        } else {
            let flags = OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
            drop(rustix::fs::openat(&root, &inside, flags, Mode::from_raw_mode(0o644)).map_err(setup)?);
        }
        let clone = clone_whole_tree(&item.path)?;
        if !item.writable {
            crate::sys::read_only_mount(clone.as_fd(), true)
                .map_err(|source| ToolError::Setup { stage: "command root (read-only host path)", source })?;
        }
        binds.push((clone, relative_c(&c_path(&item.path)?)));
        if meta.is_dir() {
            bound.push(item.path);
        }
    }
    Ok((root, binds, bound))
}

/// The candidate's FUSE filesystem on `device`, its files `ids`', detached.
fn candidate_fs(device: &OwnedFd, (uid, gid): (u32, u32)) -> Result<OwnedFd, ToolError> {
    let setup = |errno: rustix::io::Errno| ToolError::Setup { stage: "candidate mount", source: errno.into() };
    let fs = rustix::mount::fsopen("fuse", FsOpenFlags::FSOPEN_CLOEXEC).map_err(setup)?;
    for (key, value) in [
        ("source", "vsh-candidate".to_owned()),
        ("fd", device.as_raw_fd().to_string()),
        ("rootmode", "40000".to_owned()),
        ("user_id", uid.to_string()),
        ("group_id", gid.to_string()),
    ] {
        rustix::mount::fsconfig_set_string(&fs, key, value).map_err(setup)?;
    }
    for flag in ["allow_other", "default_permissions"] {
        rustix::mount::fsconfig_set_flag(&fs, flag).map_err(setup)?;
    }
    detach(&fs, "candidate mount", false)
}

/// `tools`, the host's root among them shown as each directory in it (a
/// tool directory is attached on the child's root, which holds its own
/// `/dev`, `/proc`, `/tmp`, and has no `/sys`): what `--tool /` asked,
/// everything the host has, read-only.
fn tools_beneath_the_root(tools: Vec<PathBuf>) -> Vec<PathBuf> {
    if !tools.iter().any(|tool| tool == Path::new("/")) {
        return tools;
    }
    let mut expanded: Vec<PathBuf> = tools.into_iter().filter(|tool| tool != Path::new("/")).collect();
    let entries = std::fs::read_dir("/").into_iter().flatten().flatten();
    for entry in entries {
        let own = ["dev", "proc", "sys", "tmp"].iter().any(|name| entry.file_name() == *name);
        if !own && entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            expanded.push(entry.path());
        }
    }
    expanded
}

/// A detached clone of the host path `path` with every mount beneath it
/// (a container's `/etc/hosts`, say); a symlink at `path` is not followed.
fn clone_whole_tree(path: &Path) -> Result<OwnedFd, ToolError> {
    use rustix::mount::OpenTreeFlags;
    let flags = OpenTreeFlags::OPEN_TREE_CLONE
        | OpenTreeFlags::OPEN_TREE_CLOEXEC
        | OpenTreeFlags::AT_SYMLINK_NOFOLLOW
        | OpenTreeFlags::AT_RECURSIVE;
    rustix::mount::open_tree(rustix::fs::CWD, path, flags)
        .map_err(|errno| ToolError::AllowedPath { path: path.to_owned(), source: errno.into() })
}

/// A new `/proc` for the calling process's pid namespace (the child's own:
/// it runs in it by now): its processes, and the entries [`PROC_SHOWN`]
/// names once [`cover_proc`] has covered the rest. Raw calls on static
/// strings: runs between `fork` and `exec`.
fn own_proc() -> std::io::Result<OwnedFd> {
    let fs = rustix::mount::fsopen(c"proc", FsOpenFlags::FSOPEN_CLOEXEC)?;
    // Processes of another uid are not there at all: vsh's init (root),
    // made before the namespaces, would show the host's mounts, network and
    // vsh's command line (sec82 1).
    rustix::mount::fsconfig_set_string(&fs, c"hidepid", c"invisible")?;
    rustix::mount::fsconfig_create(&fs)?;
    let attributes =
        MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV | MountAttrFlags::MOUNT_ATTR_NOEXEC;
    Ok(rustix::mount::fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, attributes)?)
}

/// The entries of the host's `/proc` that are not shown ([`PROC_SHOWN`]),
/// each with whether it is a directory: a fresh `/proc` of this kernel has
/// the same (read once).
fn unshown_proc_entries() -> &'static [(CString, bool)] {
    static ENTRIES: std::sync::OnceLock<Vec<(CString, bool)>> = std::sync::OnceLock::new();
    ENTRIES.get_or_init(|| {
        let Ok(listing) = std::fs::read_dir("/proc") else { return Vec::new() };
        let mut entries: Vec<(CString, bool)> = listing
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let name = entry.file_name().into_encoded_bytes();
                let kind = entry.file_type().ok()?;
                let unshown = !name.first().is_none_or(u8::is_ascii_digit) && !PROC_SHOWN.contains(&name.as_slice());
                (unshown && (kind.is_file() || kind.is_dir()))
                    .then(|| Some((CString::new(name).ok()?, kind.is_dir())))?
            })
            .collect();
        entries.sort();
        entries
    })
}

/// A cover for each entry of a fresh `/proc` that is not shown
/// ([`unshown_proc_entries`]), with its name: a read-only clone of
/// `/dev/null` for a file, of an empty read-only tmpfs for a directory.
/// Made here, in the parent: the child, once in a mount namespace of its
/// own, can no longer clone a detached mount made in this one.
fn proc_covers() -> Result<Vec<(OwnedFd, CString)>, ToolError> {
    use rustix::mount::OpenTreeFlags;
    let stage = "covers of /proc";
    let setup = |errno: rustix::io::Errno| ToolError::Setup { stage, source: errno.into() };
    let null = rustix::mount::open_tree(
        rustix::fs::CWD,
        "/dev/null",
        OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
    )
    .map_err(setup)?;
    crate::sys::read_only_mount(null.as_fd(), false).map_err(|source| ToolError::Setup { stage, source })?;
    let empty = tmpfs(4096, "0555", stage, true)?;
    let clone = OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC | OpenTreeFlags::AT_EMPTY_PATH;
    unshown_proc_entries()
        .iter()
        .map(|(name, dir)| {
            let cover = rustix::mount::open_tree(if *dir { &empty } else { &null }, c"", clone).map_err(setup)?;
            Ok((cover, name.clone()))
        })
        .collect()
}

/// Cover the entries of the attached `/proc` (`proc`, its mount) that it
/// is not shown with `covers`, and check that nothing else is there but
/// its processes and [`PROC_SHOWN`]: an entry this kernel's `/proc` had
/// not when the covers were made fails the setup (`EACCES`), never shown
/// uncovered. Raw calls and a buffer on the stack: runs between `fork` and
/// `exec`.
fn cover_proc(proc: &OwnedFd, covers: &[(OwnedFd, CString)]) -> std::io::Result<()> {
    use rustix::fs::{OFlags, RawDir};
    for (cover, name) in covers {
        match rustix::mount::move_mount(cover, c"", proc, name, MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(errno) => return Err(errno.into()),
        }
    }
    let listing = rustix::fs::openat(proc, c".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    let mut buffer = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    let mut entries = RawDir::new(&listing, &mut buffer);
    while let Some(entry) = entries.next() {
        let entry = entry?;
        let name = entry.file_name();
        let bytes = name.to_bytes();
        let known = bytes.first().is_none_or(|first| first.is_ascii_digit() || *first == b'.')
            || PROC_SHOWN.contains(&bytes)
            || covers.iter().any(|(_, covered)| covered.as_c_str() == name);
        if !known {
            return Err(std::io::Error::from_raw_os_error(libc::EACCES));
        }
    }
    Ok(())
}

/// Whether a candidate may be mounted at `target`: an absolute path, not
/// `/` or where the child's own `/tmp` goes.
fn check_target(target: &Path) -> Result<(), ToolError> {
    if !target.is_absolute() || [Path::new("/"), Path::new("/tmp"), Path::new(VAR_TMP)].contains(&target) {
        return Err(ToolError::InvalidPolicy {
            reason: format!(
                "{} cannot hold a candidate: it must be absolute, not /, /tmp or /var/tmp",
                target.display()
            ),
        });
    }
    Ok(())
}

impl PreparedMount {
    /// Make `mount`'s detached filesystems for a child that runs as `ids`
    /// (else as the parent's uid and gid) in `cwd`.
    pub(crate) fn new(
        mount: FuseMount,
        cwd: Option<&Path>,
        ids: Option<(u32, u32)>,
        shown: Vec<Shown>,
    ) -> Result<Self, ToolError> {
        let mut mount = mount;
        mount.tools = tools_beneath_the_root(std::mem::take(&mut mount.tools));
        let target = &mount.target;
        check_target(target)?;
        let (uid, gid) =
            ids.unwrap_or_else(|| (rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw()));
        let candidate = candidate_fs(&mount.device, (uid, gid))?;
        // The filesystem exists from here on, and the kernel asks its server
        // (the ruleset's checks of the root already do): serving starts now.
        rustix::io::write(&mount.mounted, &[1])
            .map_err(|errno| ToolError::Setup { stage: "mount pipe", source: errno.into() })?;
        // Covers: the private /tmp, and each outermost ancestor of a tool
        // directory the child could not search (unless already covered).
        let (mut covers, mut cover_paths) = private_covers(&mount)?;
        for tool in &mount.tools {
            if let Some(ancestor) = unsearchable_ancestor(tool, (uid, gid))
                && !cover_paths.iter().any(|cover| ancestor.starts_with(cover))
            {
                covers.push((tmpfs(1 << 20, "755", "tool directory cover (tmpfs)", false)?, c_path(&ancestor)?));
                cover_paths.push(ancestor);
            }
        }
        // What is attached beneath a cover needs its directories made there.
        let mut dirs = Vec::new();
        let beneath = |path: &Path| {
            cover_paths.iter().filter(|cover| path.starts_with(cover)).max_by_key(|cover| cover.as_os_str().len())
        };
        for path in mount.tools.iter().chain(std::iter::once(target)) {
            if let Some(cover) = beneath(path) {
                dirs.extend(chain(cover, path)?);
            }
        }
        let mut tools = Vec::new();
        for tool in &mount.tools {
            tools.push((clone_tree(tool)?, c_path(tool)?));
        }
        let (root, binds, bound) = command_root(shown)?;
        // Every path something is attached on exists in the root (what is
        // beneath a cover is made there by the child, `dirs`; what is
        // beneath a host directory shown is the host's).
        let attached = cover_paths.iter().chain(&mount.tools).chain(std::iter::once(target));
        for path in attached {
            let made_elsewhere = cover_paths.iter().any(|cover| path.starts_with(cover) && path != cover)
                || bound.iter().any(|dir| path.starts_with(dir));
            if !made_elsewhere {
                root_dirs(&root, path, true)?;
            }
        }
        let mut scratch = Vec::new();
        for (inside, dir) in &mount.scratch {
            if inside.is_absolute() || inside.components().any(|part| !matches!(part, std::path::Component::Normal(_)))
            {
                return Err(ToolError::InvalidPolicy {
                    reason: format!("scratch path {} must be relative and plain", inside.display()),
                });
            }
            scratch.push((scratch_clone(dir)?, c_path(&target.join(inside))?));
        }
        for (name, beneath, dir) in &mount.tmp_scratch {
            let plain = !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0']);
            if mount.tmp_bytes.is_none() || !plain {
                return Err(ToolError::InvalidPolicy {
                    reason: format!(
                        "a scratch directory in /tmp needs a private /tmp and one plain name, not {name:?}"
                    ),
                });
            }
            // (The directories beneath `name` were made with the private /tmp.)
            let at = Path::new("/tmp").join(name).join(beneath);
            if beneath.as_os_str().is_empty() {
                dirs.push(c_path(&at)?);
            }
            scratch.push((scratch_clone(dir)?, c_path(&at)?));
        }
        if let Some((userns, (uid, gid))) = &mount.idmap {
            let owner = (rustix::process::Uid::from_raw(*uid), rustix::process::Gid::from_raw(*gid));
            for (dir, _) in &scratch {
                // The very directory mounted (the clone's root), never a path.
                rustix::fs::chownat(dir, c"", Some(owner.0), Some(owner.1), rustix::fs::AtFlags::EMPTY_PATH)
                    .map_err(|errno| ToolError::Setup { stage: "idmapped scratch directory", source: errno.into() })?;
                crate::sys::idmap_mount(dir.as_fd(), userns.as_fd())
                    .map_err(|source| ToolError::Setup { stage: "idmapped scratch directory", source })?;
            }
        }
        crate::sys::read_only_mount(root.as_fd(), false)
            .map_err(|source| ToolError::Setup { stage: "command root (tmpfs)", source })?;
        let relative = |list: Vec<(OwnedFd, CString)>| -> Vec<(OwnedFd, CString)> {
            list.into_iter().map(|(fd, at)| (fd, relative_c(&at))).collect()
        };
        Ok(Self {
            target: relative_c(&c_path(target)?),
            _device: mount.device,
            covers: relative(covers),
            dirs: dirs.iter().map(|dir| relative_c(dir)).collect(),
            tools: relative(tools),
            candidate,
            scratch: relative(scratch),
            root,
            binds,
            proc_covers: proc_covers()?,
            cwd: cwd.map(c_path).transpose()?,
            ids,
        })
    }

    /// The roots of the prepared mounts the child's Landlock ruleset grants
    /// by descriptor, and what it may do beneath each.
    pub(crate) fn grants(&self) -> Vec<(BorrowedFd<'_>, Grant)> {
        let mut grants = vec![(self.candidate.as_fd(), Grant::WriteExecute)];
        // Executable too, as the candidate is: a build runs what it made
        // there (`cargo test`'s doctests, a test's script in `tmp_path`;
        // ux76 H1: they failed with EACCES), and nothing there is the host's.
        for (private, _) in self.covers.iter().filter(|(_, path)| [c"tmp", SHM_C].contains(&path.as_c_str())) {
            grants.push((private.as_fd(), Grant::WriteExecute));
        }
        for (file, _) in self.covers.iter().filter(|(_, path)| path.to_bytes().starts_with(b"etc/")) {
            grants.push((file.as_fd(), Grant::ReadFile));
        }
        grants.extend(self.tools.iter().map(|(tool, _)| (tool.as_fd(), Grant::ReadExecute)));
        grants.extend(self.scratch.iter().map(|(dir, _)| (dir.as_fd(), Grant::WriteExecute)));
        grants
    }

    /// Leave the parent's mount namespace, attach the mounts on the
    /// prepared root, and make it the child's root (`pivot_root`): the host's
    /// tree is gone from the child's namespace, so no path outside what is
    /// shown can even be looked up (sec80 F2: Landlock refuses reading a
    /// file, not `stat`ing it, and a command learned the size and time of
    /// another workspace's secrets). Its `/proc` is a new one, of its own
    /// pid namespace, returned for the child's ruleset to let it be read.
    /// Runs in the child between `fork` and `exec`: raw calls on prepared
    /// data only.
    pub(crate) fn apply(&self) -> std::io::Result<OwnedFd> {
        use rustix::mount::{MountPropagationFlags, UnmountFlags};
        let root = self.root.as_fd();
        let attach = |mount: &OwnedFd, at: &std::ffi::CStr| {
            rustix::mount::move_mount(mount, c"", root, at, MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH)
        };
        crate::sys::unshare_mount_namespace()?;
        rustix::mount::mount_change(c"/", MountPropagationFlags::REC | MountPropagationFlags::PRIVATE)?;
        // The root needs a place in the namespace to be pivoted to.
        rustix::mount::move_mount(root, c"", rustix::fs::CWD, c"/tmp", MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH)?;
        for (bind, at) in &self.binds {
            attach(bind, at)?;
        }
        let proc = own_proc()?;
        attach(&proc, c"proc")?;
        cover_proc(&proc, &self.proc_covers)?;
        for (cover, at) in &self.covers {
            attach(cover, at)?;
        }
        for dir in &self.dirs {
            match rustix::fs::mkdirat(root, dir.as_c_str(), Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(errno) => return Err(errno.into()),
            }
        }
        for (tool, at) in &self.tools {
            attach(tool, at)?;
        }
        attach(&self.candidate, self.target.as_c_str())?;
        for (dir, at) in &self.scratch {
            attach(dir, at)?;
        }
        rustix::process::fchdir(root)?;
        rustix::process::pivot_root(c".", c".")?;
        rustix::mount::unmount(c".", UnmountFlags::DETACH)?;
        rustix::process::chdir(c"/")?;
        if let Some(cwd) = &self.cwd {
            rustix::process::chdir(cwd.as_c_str())?;
        }
        Ok(proc)
    }

    /// Change to the prepared uid and gid (after [`PreparedMount::apply`]:
    /// the mount needs the parent's privilege). Supplementary groups go.
    /// The raw calls change the calling thread's ids, which in the forked
    /// child (one thread) are the process's.
    pub(crate) fn change_ids(&self) -> std::io::Result<()> {
        if let Some((uid, gid)) = self.ids {
            rustix::thread::set_thread_groups(&[])?;
            let gid = rustix::process::Gid::from_raw(gid);
            rustix::thread::set_thread_res_gid(gid, gid, gid)?;
            let uid = rustix::process::Uid::from_raw(uid);
            rustix::thread::set_thread_res_uid(uid, uid, uid)?;
        }
        Ok(())
    }
}
