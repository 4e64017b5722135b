//! A private mount namespace for the child, with a FUSE filesystem mounted
//! in it: the filesystem exists only for the child and its descendants, and
//! the server (the parent) reads the kernel's requests from the device.
//!
//! The parent opens `/dev/fuse` ([`FuseMount::open`]); the child, between
//! `fork` and `exec`, leaves the parent's mount namespace
//! (`unshare(CLONE_NEWNS)`), stops propagation back (`MS_REC|MS_PRIVATE` on
//! `/`), mounts the device at the mount point (`nosuid,nodev`, the kernel
//! checking permission bits, `allow_other` so a child that changes its uid
//! can still use it), tells the parent it mounted (one byte on a pipe,
//! which [`MountWaiter::wait`] reads), changes into its working directory
//! inside the new mount (which waits for the server's answer to the
//! kernel's first request), and only then changes its uid and confines
//! itself. So the server must start waiting before the spawn: the spawn
//! returns only once the child executed its program. The mount goes away
//! with the last process of the namespace.
//!
//! This needs `CAP_SYS_ADMIN` in the parent's user namespace (vsh runs it as
//! root); without it the spawn fails at the mount stage, closed.
//!
//! Landlock ignores a rule on a mount point that another mount covers (its
//! path walk steps from the mount's root over the covered directory to that
//! directory's parent): grant the directory that holds the mount point, and
//! keep nothing else in it.

use std::ffi::CString;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};

use crate::error::ToolError;

/// A FUSE device opened for a mount in the child's own namespace: give it
/// to [`crate::ConfinedCommand::private_fuse_mount`].
#[derive(Debug)]
pub struct FuseMount {
    device: Arc<OwnedFd>,
    mountpoint: PathBuf,
    /// The write end of the pipe the child says "mounted" on.
    mounted: OwnedFd,
}

/// The server's side of a [`FuseMount`]: waits until the child mounted.
#[derive(Debug)]
pub struct MountWaiter {
    device: Arc<OwnedFd>,
    mounted: OwnedFd,
}

impl FuseMount {
    /// Open `/dev/fuse` (close-on-exec: the program never inherits it) for
    /// a filesystem the child mounts at `mountpoint`, an existing empty
    /// directory, and the waiter the server starts with.
    ///
    /// # Errors
    ///
    /// [`ToolError::Setup`] when the device cannot be opened (no FUSE in
    /// this kernel or no permission), naming it.
    pub fn open(mountpoint: impl Into<PathBuf>) -> Result<(Self, MountWaiter), ToolError> {
        let device = rustix::fs::open("/dev/fuse", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
            .map_err(|errno| ToolError::Setup { stage: "open /dev/fuse", source: errno.into() })?;
        let (reader, writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .map_err(|errno| ToolError::Setup { stage: "mount pipe", source: errno.into() })?;
        let device = Arc::new(device);
        let waiter = MountWaiter { device: Arc::clone(&device), mounted: reader };
        Ok((Self { device, mountpoint: mountpoint.into(), mounted: writer }, waiter))
    }

    /// Where the child mounts it.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }
}

impl MountWaiter {
    /// Block until the child mounted the device, then return a descriptor
    /// of it to serve.
    ///
    /// # Errors
    ///
    /// [`std::io::ErrorKind::NotConnected`] when the child ended (or was
    /// never spawned) without mounting; the descriptor's error otherwise.
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

/// What the child does to mount, prepared in the parent: every string the
/// raw calls take, already a C string.
#[derive(Debug)]
pub(crate) struct PreparedMount {
    /// Keeps the device open until the child has mounted it.
    _device: Arc<OwnedFd>,
    /// Where the child says it mounted.
    mounted: OwnedFd,
    pub(crate) mountpoint: CString,
    pub(crate) data: CString,
    /// The working directory, inside the mount (set after mounting).
    pub(crate) cwd: Option<CString>,
    /// The uid and gid to change to after mounting.
    pub(crate) ids: Option<(u32, u32)>,
}

fn c_path(path: &Path) -> Result<CString, ToolError> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| ToolError::InvalidPolicy { reason: format!("{} contains a NUL byte", path.display()) })
}

impl PreparedMount {
    /// Prepare `mount` for a child that runs as `ids` (else as the parent's
    /// uid and gid) in `cwd`.
    pub(crate) fn new(mount: FuseMount, cwd: Option<&Path>, ids: Option<(u32, u32)>) -> Result<Self, ToolError> {
        let (uid, gid) =
            ids.unwrap_or_else(|| (rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw()));
        let data = format!(
            "fd={},rootmode=40000,user_id={uid},group_id={gid},allow_other,default_permissions",
            mount.device.as_raw_fd()
        );
        Ok(Self {
            mountpoint: c_path(&mount.mountpoint)?,
            _device: mount.device,
            mounted: mount.mounted,
            data: CString::new(data).map_err(|_| ToolError::InvalidPolicy { reason: "mount options".to_owned() })?,
            cwd: cwd.map(c_path).transpose()?,
            ids,
        })
    }

    /// Leave the parent's mount namespace and mount. Runs in the child
    /// between `fork` and `exec`: raw calls on prepared data only.
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        use rustix::mount::{MountFlags, MountPropagationFlags};
        crate::sys::unshare_mount_namespace()?;
        rustix::mount::mount_change(c"/", MountPropagationFlags::REC | MountPropagationFlags::PRIVATE)?;
        rustix::mount::mount(
            c"vsh-candidate",
            self.mountpoint.as_c_str(),
            c"fuse",
            MountFlags::NOSUID | MountFlags::NODEV,
            self.data.as_c_str(),
        )?;
        rustix::io::write(&self.mounted, &[1])?;
        if let Some(cwd) = &self.cwd {
            rustix::process::chdir(cwd.as_c_str())?;
        }
        Ok(())
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
