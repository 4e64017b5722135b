//! [`Host`]: the seed side-effect seam for agent tools (`host.txt`), built on
//! vsh-host's capability handle [`CapDir`].
//!
//! This is a crate of its own, not a module of vsh-host, so that the async
//! runtime (tokio) and the command supervisor (vsh-sandbox) it needs are
//! never compiled into the crates that only need the handle: vsh-vfs,
//! vsh-store and vsh-commit depend on vsh-host alone.
//!
//! A `Host` owns the workspace root (an opened [`CapDir`]), the path policy,
//! the exec limits and the sandbox policy of commands. It offers:
//!
//! - path resolution ([`Host::resolve_in_jail`], in `jail`);
//! - jailed file operations ([`Host::read_file`], [`Host::write_file`],
//!   [`Host::stat`], [`Host::read_dir`], in `fs`), async on tokio over a
//!   synchronous core (`*_sync`) that the pipeline calls directly;
//! - commands ([`Host::exec`] through a shell, [`Host::run_capture`] without
//!   one, in `exec`), supervised until the whole process tree is gone.
//!
//! It does not decide policy: which paths an agent may touch beyond the jail,
//! or which commands it may run, is the caller's business.
// The seed Host's unrestricted mode reaches the host by path (host.txt's ambient authority).
#![allow(clippy::disallowed_methods)]

mod capture;
mod error;
mod exec;
mod fs;
mod image;
mod jail;
pub(crate) mod spawn;
pub(crate) mod supervise;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use self::error::{EscapeReason, ExecError, FsError, PathError};
pub use self::exec::{ExecLimits, ExecOutput, ExecRequest, FIXED_PATH, ShellSpec};
pub use self::fs::{DirEntry, FileRead, FileStat};
pub use self::image::{ImageCommand, ImageOutput, ImageRoot, ImageStat};

use vsh_host::HostError;
use vsh_host::{CapDir, WritableDir};

/// The default largest file [`Host::read_file`] reads: 64 MiB.
pub const DEFAULT_MAX_READ_BYTES: u64 = 64 * 1024 * 1024;

/// How [`Host`] treats paths outside the workspace root.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub enum PathPolicy {
    /// Every path must resolve under the workspace root without following a
    /// symbolic link; escapes are [`PathError::Escape`]. File operations go
    /// through the root's [`CapDir`], so the kernel enforces this at every use.
    #[default]
    Jailed,
    /// Paths are only made absolute. File operations reach the host by path,
    /// with ambient authority, following symlinks in the directory part; even
    /// so, [`Host::write_file`] never writes through a dangling symlink.
    Unrestricted,
}

/// Everything a [`Host`] is built from.
///
/// Construct with [`HostConfig::new`] and the `with_*` methods (or assign the
/// public fields).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HostConfig {
    /// The workspace root; canonicalized by [`Host::new`].
    pub workspace_root: PathBuf,
    /// Jailed (the default) or unrestricted paths.
    pub path_policy: PathPolicy,
    /// Timeouts, output caps and the kill grace of commands.
    pub limits: ExecLimits,
    /// The sandbox policy every command is spawned under. `None` (the default)
    /// means the minimal policy that only keeps the command's process tree
    /// killable (see [`Host::exec`]).
    pub confinement: Option<Arc<vsh_sandbox::SandboxPolicy>>,
    /// The home directory `~` and `~/…` expand to in paths. `None` (the
    /// default) leaves `~` as an ordinary name. The process environment is
    /// never consulted.
    pub home: Option<PathBuf>,
    /// The shell of [`Host::exec`] when a request names none: `/bin/sh -c` by default.
    pub shell: ShellSpec,
    /// The largest file [`Host::read_file`] reads; larger ones are an error
    /// before anything is allocated. [`DEFAULT_MAX_READ_BYTES`] by default.
    pub max_read_bytes: u64,
}

impl HostConfig {
    /// A jailed configuration for `workspace_root` with default limits.
    pub fn new(workspace_root: impl Into<PathBuf>) -> Self {
        Self {
            workspace_root: workspace_root.into(),
            path_policy: PathPolicy::default(),
            limits: ExecLimits::default(),
            confinement: None,
            home: None,
            shell: ShellSpec::default(),
            max_read_bytes: DEFAULT_MAX_READ_BYTES,
        }
    }

    /// Set the path policy.
    #[must_use]
    pub fn with_path_policy(mut self, path_policy: PathPolicy) -> Self {
        self.path_policy = path_policy;
        self
    }

    /// Set the exec limits.
    #[must_use]
    pub fn with_limits(mut self, limits: ExecLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Spawn every command under `policy` instead of the minimal default.
    #[must_use]
    pub fn with_confinement(mut self, policy: Arc<vsh_sandbox::SandboxPolicy>) -> Self {
        self.confinement = Some(policy);
        self
    }

    /// Set the directory `~` expands to.
    #[must_use]
    pub fn with_home(mut self, home: impl Into<PathBuf>) -> Self {
        self.home = Some(home.into());
        self
    }

    /// Set the default shell of [`Host::exec`].
    #[must_use]
    pub fn with_shell(mut self, shell: ShellSpec) -> Self {
        self.shell = shell;
        self
    }

    /// Set the largest file [`Host::read_file`] reads.
    #[must_use]
    pub fn with_max_read_bytes(mut self, max_read_bytes: u64) -> Self {
        self.max_read_bytes = max_read_bytes;
        self
    }
}

/// The injectable side-effect seam of agent tools: jailed file operations and
/// supervised commands on one workspace.
///
/// Construct once per session; clones are cheap and share everything (the
/// root handle included), so a `Host` can be handed to every tool.
///
/// The async methods need a tokio runtime with I/O and time enabled (for
/// example `#[tokio::main]`); the `*_sync` file methods need none.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

struct Inner {
    /// The canonical root.
    root: PathBuf,
    /// The root as configured, made absolute and lexically normalized (it may
    /// go through symlinks). Paths under it are accepted as paths under `root`.
    root_as_given: PathBuf,
    /// The root, opened: every jailed operation goes through it. The seed
    /// `Host` writes files directly (`host.txt`), so it holds the mutating
    /// capability: the one holder outside the commit engine and the store.
    /// Or an image ([`Host::over_image`]), which does all of that itself.
    dir: Root,
    path_policy: PathPolicy,
    limits: ExecLimits,
    /// Whether `policy` came from the configuration (rather than the default).
    confined: bool,
    /// The policy every command is spawned under.
    policy: Arc<vsh_sandbox::SandboxPolicy>,
    /// Admission of commands: any executable; what actually runs is the caller's choice, and
    /// under a confining policy Landlock limits which files can be executed.
    tool_context: vsh_sandbox::ToolContext,
    home: Option<PathBuf>,
    shell: ShellSpec,
    max_read_bytes: u64,
}

/// What a host's jail is.
enum Root {
    /// A directory of the host, opened.
    Dir(WritableDir),
    /// An image: a candidate workspace.
    Image(Arc<dyn ImageRoot>),
}

impl fmt::Debug for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Host")
            .field("workspace_root", &self.inner.root)
            .field("path_policy", &self.inner.path_policy)
            .field("limits", &self.inner.limits)
            .field("confined", &self.inner.confined)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// Build a host: canonicalize `workspace_root` (resolving symlinks in it
    /// once, here) and open it as the jail's [`CapDir`].
    ///
    /// A root that does not exist, is not a directory or cannot be opened is
    /// [`PathError::InvalidRoot`], never a quietly different jail.
    ///
    /// # Ambient authority
    ///
    /// This reaches the host filesystem by path; it is how the jail is made.
    pub fn new(config: HostConfig) -> Result<Self, PathError> {
        let given = config.workspace_root;
        let invalid = |source| PathError::InvalidRoot { path: given.clone(), source };
        let dir = CapDir::open(&given).map_err(|error| match error {
            HostError::InvalidRoot { source, .. } => invalid(source),
            other => invalid(std::io::Error::other(other)),
        })?;
        let root = dir.display_path().to_path_buf();
        let root_as_given = std::path::absolute(&given).map(|path| jail::normalize(&path)).map_err(invalid)?;
        Ok(Self {
            inner: Arc::new(Inner {
                root,
                root_as_given,
                dir: Root::Dir(WritableDir::new(Arc::new(dir))),
                path_policy: config.path_policy,
                limits: config.limits,
                confined: config.confinement.is_some(),
                policy: config.confinement.unwrap_or_else(|| Arc::new(vsh_sandbox::SandboxPolicy::group_only())),
                tool_context: vsh_sandbox::ToolContext::new(vsh_sandbox::ExecGrant::Any),
                home: config.home,
                shell: config.shell,
                max_read_bytes: config.max_read_bytes,
            }),
        })
    }

    /// The canonicalized jail root.
    pub fn workspace_root(&self) -> &Path {
        &self.inner.root
    }

    /// The active path policy.
    pub fn path_policy(&self) -> PathPolicy {
        self.inner.path_policy
    }

    /// The command limits.
    pub fn limits(&self) -> &ExecLimits {
        &self.inner.limits
    }

    /// The workspace root's capability handle, for callers that work with
    /// workspace paths ([`vsh_types::VPath`]) directly; `None` for a host
    /// over an image ([`Host::over_image`]).
    pub fn workspace_dir(&self) -> Option<&CapDir> {
        match &self.inner.dir {
            Root::Dir(dir) => Some(dir),
            Root::Image(_) => None,
        }
    }
}

/// Run `work` on tokio's blocking pool and wait for it; a panic in it is
/// resumed here.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        // Only a runtime shutting down cancels a blocking task, and then nothing polls this future.
        Err(error) => panic!("blocking host task did not run: {error}"),
    }
}
