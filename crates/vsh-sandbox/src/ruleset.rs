//! The Landlock ruleset of a confined spawn, built in the parent; the child only calls
//! `landlock_restrict_self` on its file descriptor.
//!
//! The ruleset handles every filesystem right of the pinned ABI, TCP bind and connect from
//! ABI 4, and the abstract-unix-socket and signal scopes from ABI 6, all with
//! `CompatLevel::HardRequirement`: a right the kernel cannot enforce is an error, never a
//! silent downgrade. Paths the policy or the tool context name must exist; the built-in system
//! paths are skipped when absent (`/lib64` on some systems, for example).

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;

use landlock::{
    ABI, Access as _, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible as _, NetPort, PathBeneath, Ruleset,
    RulesetAttr as _, RulesetCreatedAttr as _, RulesetError, Scope,
};
use rustix::fs::{FileType, Mode, OFlags};

use crate::context::ToolContext;
use crate::error::ToolError;
use crate::namespace::Grant;
use crate::policy::{
    DYNAMIC_LOADERS, NETWORK_ETC_FILES, SYSTEM_DEVICES, SYSTEM_DIRS, SYSTEM_ETC_FILES, SYSTEM_ETC_PYTHON, SandboxPolicy,
};

/// The named ABI for a reviewed version number (1 to [`crate::NEWEST_REVIEWED_LANDLOCK_ABI`]).
fn named_abi(version: u32) -> ABI {
    match version {
        0 | 1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        // Capped by `KernelSupport::landlock_rights_abi`; 7 is the newest reviewed ABI.
        _ => ABI::V7,
    }
}

/// One path rule: where, which rights, and whether a missing path is an error.
struct PathRule<'a> {
    path: &'a Path,
    access: BitFlags<AccessFs>,
    required: bool,
}

/// Build the ruleset for `policy` and `context` with the rights of ABI `version`, plus the
/// rights `granted` beneath each of the directories there (opened by the caller: the roots of
/// detached mounts), and return its file descriptor (close-on-exec).
pub(crate) fn build(
    version: u32,
    policy: &SandboxPolicy,
    context: &ToolContext,
    granted: &[(BorrowedFd<'_>, Grant)],
) -> Result<OwnedFd, ToolError> {
    let abi = named_abi(version);
    let handled = AccessFs::from_all(abi);
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let exec = read | AccessFs::Execute;
    let mut write = read | AccessFs::from_write(abi);
    // Device ioctls stay denied even beneath write roots.
    write.remove(AccessFs::IoctlDev);
    let device = (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate) & handled;

    if context.grants_any()
        && let Some(path) = policy.write_paths().iter().find(|path| SYSTEM_DIRS.iter().any(|dir| path.starts_with(dir)))
    {
        return Err(ToolError::InvalidPolicy {
            reason: format!(
                "write root {} lies beneath a system directory, which ExecGrant::Any makes executable",
                path.display()
            ),
        });
    }
    let system_access = if context.grants_any() { exec } else { read };
    let mut rules: Vec<PathRule<'_>> = Vec::new();
    let optional = |path: &'static str, access| PathRule { path: Path::new(path), access, required: false };
    rules.extend(SYSTEM_DIRS.iter().map(|path| optional(path, system_access)));
    rules.extend(SYSTEM_ETC_FILES.iter().chain(SYSTEM_ETC_PYTHON).map(|path| optional(path, read)));
    if policy.reaches_network() {
        rules.extend(NETWORK_ETC_FILES.iter().map(|path| optional(path, read)));
    }
    rules.extend(SYSTEM_DEVICES.iter().map(|path| optional(path, device)));
    if !context.grants_any() {
        rules.extend(DYNAMIC_LOADERS.iter().map(|path| optional(path, exec)));
        rules.extend(context.granted_programs().map(|path| PathRule { path, access: exec, required: true }));
    }
    for (paths, access) in [(policy.read_paths(), read), (policy.write_paths(), write), (policy.exec_paths(), exec)] {
        rules.extend(paths.iter().map(|path| PathRule { path: path.as_path(), access, required: true }));
    }

    let landlock_error =
        |error: RulesetError| ToolError::Setup { stage: "landlock ruleset", source: io::Error::other(error) };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)
        .map_err(landlock_error)?;
    // Landlock judges TCP unless the child has a network of its own or the host's.
    let judges_tcp = abi >= ABI::V4 && !policy.opens_inet();
    if judges_tcp {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi)).map_err(landlock_error)?;
    }
    if abi >= ABI::V6 {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(landlock_error)?;
    }
    let mut created = ruleset.create().map_err(landlock_error)?;
    for rule in rules {
        let Some((fd, is_dir)) = open_path(&rule)? else { continue };
        let access = if is_dir { rule.access } else { rule.access & AccessFs::from_file(abi) };
        created = created.add_rule(PathBeneath::new(fd, access & handled)).map_err(landlock_error)?;
    }
    for (dir, grant) in granted {
        let access = match grant {
            Grant::ReadExecute => exec,
            Grant::WriteExecute => write | AccessFs::Execute,
            Grant::ReadFile => BitFlags::from(AccessFs::ReadFile),
        };
        created = created.add_rule(PathBeneath::new(*dir, access & handled)).map_err(landlock_error)?;
    }
    if judges_tcp {
        for port in policy.tcp_connect_ports() {
            created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp)).map_err(landlock_error)?;
        }
    }
    Option::<OwnedFd>::from(created).ok_or_else(|| ToolError::Setup {
        stage: "landlock ruleset",
        source: io::Error::new(io::ErrorKind::Unsupported, "the kernel did not create a landlock ruleset"),
    })
}

/// Open `rule.path` as an `O_PATH` descriptor and say whether it is a directory; `None` for an
/// absent optional path.
fn open_path(rule: &PathRule<'_>) -> Result<Option<(OwnedFd, bool)>, ToolError> {
    let opened = rustix::fs::open(rule.path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .and_then(|fd| rustix::fs::fstat(&fd).map(|stat| (fd, FileType::from_raw_mode(stat.st_mode).is_dir())));
    match opened {
        Ok(opened) => Ok(Some(opened)),
        Err(_) if !rule.required => Ok(None),
        Err(errno) => Err(ToolError::AllowedPath { path: rule.path.to_owned(), source: errno.into() }),
    }
}
