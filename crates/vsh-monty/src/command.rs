//! Real commands against the image: a confined child runs `argv` in a
//! candidate workspace (vsh-candidate's FUSE filesystem, mounted only in
//! the child's namespace), and every kernel request on it is served by the
//! same guarded image as Monty's OS calls and Bash's builtins
//! ([`crate::bash::serve_file`]): so what the process reads is in the read
//! set with Monty's facets, a protected path is `EACCES` and a denial, and
//! what it writes is in the image.
//!
//! While the command runs, the image (with the run's counters and
//! refusals) is lent to the candidate's server thread ([`Lent`]), which
//! answers each kernel request itself: a request costs the kernel's round
//! trip and nothing more (a hop to this thread and back cost two more
//! wake-ups, which on this machine kind is most of a request's time). This
//! thread supervises: the spawn (on a helper thread: it returns only once
//! the child has entered the mount, which waits for the server), the exit,
//! the deadline, cancellation and the call's timeout; when serving ends, the
//! image comes back.
//!
//! The end is concluded exactly as a Bash script's: status 0 is the
//! outcome, any other status (or a signal, as `128 + signal`) is
//! [`ExecutionError::Bash`] with what the command changed; a timeout, a
//! cancellation or a budget kills the whole process group.

use std::path::{Path, PathBuf};
use std::process::{ChildStderr, ChildStdout, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{RecvTimeoutError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use monty_types::{ExcType, MontyException, MontyObject};
use vsh_bash::{BashEnd, Ending};
use vsh_candidate::{CandidateFs, Owner};
use vsh_policy::CallPolicy;
use vsh_sandbox::{ConfinedCommand, ExecGrant, FuseMount, SandboxPolicy, ToolContext, ToolError};
use vsh_types::fsproto::FsReply;
use vsh_vfs::VirtualFs;

use crate::dispatch::{Dispatcher, Stop};
use crate::drive::Reply;
use crate::error::ExecutionError;
use crate::host::{Fault, OsHost};
use crate::interrupt::Interrupt;
use crate::limits::{ExecutionLimits, LimitExceeded, LimitKind, nanos};
use crate::run::{BashOutcome, conclude_bash};

/// The profile name of real commands in a candidate.
pub const COMMAND_PROFILE: &str = "vsh-command-confined-v1";

/// The profile name of real `/bin/bash` programs in a candidate (a real
/// command whose argv is `/bin/bash -c PROGRAM`).
pub const BASH_CONFINED_PROFILE: &str = "vsh-bash-confined-v1";

/// Git's configuration in a command's `HOME` (`/tmp/.gitconfig`). The
/// candidate shows its own inode numbers, owner and change times, so git
/// would find its index's cached stat data stale and refresh the index
/// under `.git/index.lock` on `git diff`: a write to `.git`, denied. With
/// only the modification time and size compared (what the candidate shows
/// as the workspace has them) and no automatic refresh, `git diff` and
/// `git status` read only. A command whose `HOME` is elsewhere does not get
/// it.
pub const GIT_CONFIG: &str =
    "[core]\n\tcheckStat = minimal\n\ttrustctime = false\n[diff]\n\tautoRefreshIndex = false\n";

/// The repository of a workspace that is a git worktree (`git worktree add`,
/// a common way to give each agent its own checkout): its `.git` is a file
/// naming a directory outside the workspace, with the repository's common
/// directory beside it. Commands read both (never write: they are tool
/// directories), and git is told the worktree is safe to use although
/// those directories are not the command user's.
struct WorktreeGit {
    /// The worktree's git directory and the repository's common one.
    dirs: Vec<std::path::PathBuf>,
}

impl WorktreeGit {
    /// The worktree's directories when `dot_git`, the bytes of the
    /// workspace `root`'s `.git` file, names one (`gitdir: DIR`, relative
    /// to `root` or absolute), with the common directory its `commondir`
    /// names; `None` when it names none.
    #[allow(
        clippy::disallowed_methods,
        reason = "the repository's directories lie outside the workspace, named by its .git file: host paths \
                  resolved as git resolves them, then only granted to commands for reading"
    )]
    fn of(root: &Path, dot_git: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(dot_git).ok()?;
        let named = text.lines().next()?.strip_prefix("gitdir:")?.trim();
        let gitdir = std::fs::canonicalize(root.join(named)).ok()?;
        // Only a worktree's own git directory, as `git worktree add` makes
        // it: its `gitdir` file names this workspace's `.git` back, and its
        // common directory is a repository. A `.git` file naming anything
        // else (`gitdir: /root/.ssh`, from a hostile archive) grants nothing.
        let back = std::fs::read_to_string(gitdir.join("gitdir")).ok()?;
        let back = std::fs::canonicalize(gitdir.join(back.trim())).ok()?;
        if back != std::fs::canonicalize(root.join(".git")).ok()? || !gitdir.join("HEAD").is_file() {
            return None;
        }
        let common = std::fs::read_to_string(gitdir.join("commondir")).ok()?;
        let common = std::fs::canonicalize(gitdir.join(common.trim())).ok()?;
        let repository =
            ["objects", "refs"].iter().all(|dir| common.join(dir).is_dir()) && common.join("HEAD").is_file();
        if !repository || !gitdir.starts_with(&common) || gitdir == common {
            return None;
        }
        // The common directory is granted whole: never one that holds the
        // workspace (a bare repository with its worktrees inside it, whose
        // siblings a command would read) or lies inside it.
        let root = std::fs::canonicalize(root).ok()?;
        if root.starts_with(&common) || common.starts_with(&root) {
            return None;
        }
        Some(Self { dirs: vec![gitdir, common] })
    }

    /// The commands' git configuration: [`GIT_CONFIG`], and, in a worktree,
    /// the worktree safe although its git directories are another user's.
    fn config(worktree: Option<&Self>) -> String {
        match worktree {
            Some(_) => format!("{GIT_CONFIG}[safe]\n\tdirectory = *\n"),
            None => GIT_CONFIG.to_owned(),
        }
    }
}

/// The most processes a command's user may have (`RLIMIT_NPROC`): a build
/// starts many, a fork bomb stops here. The kernel does not apply it to
/// root, and counts per user, machine-wide: a host running as root runs
/// each command as a uid of its own ([`vsh_sandbox::CommandUser`]), so one
/// command's fork bomb never stops another's `fork`.
pub const COMMAND_PROCESSES: u64 = 256;

/// The most descriptors each of a command's processes may open
/// (`RLIMIT_NOFILE`, hard): it starts with 1024 (soft,
/// [`vsh_sandbox::OPEN_FILES_SOFT`]) and may raise it to this, as on a usual
/// host (ux76: a hard 1024 stopped `ulimit -n 4096` and file watchers). The
/// kernel charges open files to the command's memory group.
pub const COMMAND_OPEN_FILES: u64 = 65_536;

/// The uid and gid what commands keep between runs (scratch directories)
/// is stored as under a root host, whatever uid of
/// [`vsh_sandbox::COMMAND_UIDS`] each run had (the scratch directories are
/// idmapped to it); also the uid a command runs as where a scratch
/// directory's filesystem cannot be idmapped. Not `nobody`, which the Monty
/// workers are, so the two never share a process count.
pub const COMMAND_USER: (u32, u32) = (65_533, 65_533);

/// The scratch name that stands for Python's bytecode: commands write it
/// to a scratch directory of their own at `/tmp/.vsh-pycache`
/// (`PYTHONPYCACHEPREFIX`), never beside the sources.
pub const PYCACHE_SCRATCH: &str = "__pycache__";

/// The scratch name of pytest's cache at the workspace's root, where every
/// pytest a command runs keeps it (`PYTEST_ADDOPTS=-o cache_dir=...`).
const PYTEST_SCRATCH: &str = ".pytest_cache";

/// Tell pytest to keep its cache at `dir`: `-o cache_dir=DIR` added to
/// `PYTEST_ADDOPTS` (after what the command was given, which pytest splits
/// as a shell would, so the path is quoted).
fn pytest_cache_at(env: &mut Vec<(String, String)>, dir: &Path) {
    let quoted = format!("'{}'", dir.to_string_lossy().replace('\'', "'\\''"));
    let option = format!("-o cache_dir={quoted}");
    match env.iter_mut().find(|(key, _)| key == "PYTEST_ADDOPTS") {
        Some((_, value)) => *value = format!("{value} {option}"),
        None => env.push(("PYTEST_ADDOPTS".to_owned(), option)),
    }
}

/// What a command without a network gets in its environment besides what it
/// is given (which wins): package managers that would retry a fetch for a
/// minute and more fail it at once.
const OFFLINE_ENV: [(&str, &str); 2] = [("npm_config_fetch_retries", "0"), ("PIP_RETRIES", "0")];

/// What a command without a network finds in `/etc/hosts`: the loopback
/// names only (the host's may name machines of its network).
const OFFLINE_HOSTS: &str = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";

/// `mount` and `env` for a command without a network. No resolver can be
/// reached: a name is looked up in files only, and a lookup fails at once
/// ("not known") instead of waiting on a resolver as a temporary failure;
/// and package managers that retry a failed fetch for a minute and more
/// (npm 70 s) are told not to, unless `env` says otherwise.
fn offline(mount: FuseMount, env: &mut Vec<(String, String)>) -> FuseMount {
    for (key, value) in OFFLINE_ENV {
        if !env.iter().any(|(known, _)| known == key) {
            env.push(((*key).to_owned(), (*value).to_owned()));
        }
    }
    mount
        .with_etc_file("nsswitch.conf", offline_nsswitch(&read_etc("nsswitch.conf")))
        .with_etc_file("hosts", OFFLINE_HOSTS)
}

/// The command's user named in its `/etc/passwd` and its group in
/// `/etc/group` (the host's, with a line each for `ids` where they have
/// none): `whoami`, Python's `getpass.getuser()` and Node's
/// `os.userInfo()` failed for a uid no name is given to (ux76). Its home
/// is `/tmp`, as its `HOME` is.
fn with_own_user(mount: FuseMount, (uid, gid): (u32, u32)) -> FuseMount {
    use std::fmt::Write as _;
    let named = |table: &str, id: u32| {
        table.lines().any(|line| line.split(':').nth(2).and_then(|field| field.parse::<u32>().ok()) == Some(id))
    };
    let mut passwd = read_etc("passwd");
    let mut group = read_etc("group");
    let mut mount = mount;
    if !named(&passwd, uid) {
        if !passwd.is_empty() && !passwd.ends_with('\n') {
            passwd.push('\n');
        }
        let _ = writeln!(passwd, "vsh:x:{uid}:{gid}:vsh command:/tmp:/bin/sh");
        mount = mount.with_etc_file("passwd", passwd);
    }
    if !named(&group, gid) {
        if !group.is_empty() && !group.ends_with('\n') {
            group.push('\n');
        }
        let _ = writeln!(group, "vsh:x:{gid}:");
        mount = mount.with_etc_file("group", group);
    }
    mount
}

/// The host's `/etc/<name>`, or nothing (at most 64 KiB).
fn read_etc(name: &str) -> String {
    use std::io::Read as _;
    let mut text = String::new();
    // The host's configuration, read by the parent: no path of the workspace.
    #[expect(clippy::disallowed_methods, reason = "a system file of the host, not the workspace")]
    let file = std::fs::File::open(Path::new("/etc").join(name));
    if let Ok(file) = file {
        let _ = file.take(64 << 10).read_to_string(&mut text);
    }
    text
}

/// `nsswitch` (the host's `nsswitch.conf`) with host names looked up in
/// files only: its `hosts:` line replaced (or added).
fn offline_nsswitch(nsswitch: &str) -> String {
    let mut out = String::new();
    let mut hosts = false;
    for line in nsswitch.lines() {
        if line.trim_start().starts_with("hosts:") {
            hosts = true;
            out.push_str("hosts: files\n");
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !hosts {
        out.push_str("hosts: files\n");
    }
    out
}

/// The name of build tools' output directory (`target`): a scratch
/// directory of that name is bound only where the directory beside it holds
/// one of [`BUILD_MANIFESTS`], so a project of another kind keeps its own
/// `target` (files seen, writes in the diff).
pub const BUILD_SCRATCH_NAME: &str = "target";

/// The build manifests whose tools write `target` beside them: Cargo's and
/// Maven's.
pub const BUILD_MANIFESTS: [&str; 2] = ["Cargo.toml", "pom.xml"];

/// Where Python's bytecode scratch directory appears in a command's `/tmp`.
const PYCACHE_AT: &str = ".vsh-pycache";

/// The size of a command's private `/tmp` (a tmpfs of its own, gone when
/// the command is).
pub const COMMAND_TMP_BYTES: u64 = 512 << 20;

/// The size of a command's private `/dev/shm` (POSIX shared memory and
/// semaphores: Python's `multiprocessing`), gone when the command is.
pub const COMMAND_SHM_BYTES: u64 = 256 << 20;

/// How long serving may go on after the command's process group is gone
/// (the kernel delivering the last releases) before the run is failed.
const DRAIN: Duration = Duration::from_secs(5);

/// What a command run needs besides the image: where the candidate appears,
/// what reaches the command's environment, which host directories it may
/// use, and where its scratch directories are.
#[derive(Debug, Clone)]
pub struct CommandConfig {
    /// Where the command sees the candidate: an existing directory (other
    /// than `/` and `/tmp`), normally the workspace's own path, so the
    /// command finds the workspace where it is and its paths are the same
    /// run after run. In the command's own namespace the candidate covers
    /// it; nothing else ever sees the mount.
    pub root: PathBuf,
    /// The environment: exactly these variables (`PATH` included).
    pub env: Vec<(String, String)>,
    /// Host directories the command may read and execute from, at their
    /// own paths (a toolchain, say), even beneath a directory its user
    /// could not search (see `vsh_sandbox::FuseMount::with_tool_dir`).
    pub tools: Vec<PathBuf>,
    /// Scratch directories: `(inside, dir)` binds the host directory `dir`
    /// over the relative path `inside` of the candidate (build outputs and
    /// caches, `target` say): written directly, kept between runs, never
    /// part of the image or the diff. A nested path (`node_modules/.cache`)
    /// is bound only where its parent is a directory of the image, one
    /// named [`BUILD_SCRATCH_NAME`] only where a build manifest
    /// ([`BUILD_MANIFESTS`]) is beside it;
    /// [`PYCACHE_SCRATCH`] binds `dir` in the command's `/tmp` instead and
    /// tells Python to write its bytecode there.
    pub scratch: Vec<(String, PathBuf)>,
    /// What network the command reaches (default none).
    pub network: vsh_sandbox::NetworkAccess,
    /// TCP ports the command may connect to (on any host: Landlock matches
    /// ports, not addresses), besides what `network` allows; the network
    /// axis is then enforced in part, and its floor lowered to say so.
    pub connect_ports: Vec<u16>,
    /// Let the command make unix sockets of its own (a test that serves on
    /// one in its `/tmp`, Python's forkserver): and so, below Landlock ABI 9,
    /// connect to any socket file it can name, a host daemon's included
    /// (`vsh_sandbox::SandboxPolicy::allow_unix_sockets`). Off by default;
    /// the host's network implies it.
    pub unix_sockets: bool,
    /// Run the command even where the kernel cannot confine it (no
    /// Landlock, no seccomp): every axis's floor is lowered to none, so the
    /// spawn no longer fails closed below it. The candidate itself (the
    /// private FUSE mount) is still required. Only an explicit opt-in sets
    /// it (a candidate workspace's `allow_unisolated_verifiers`); whoever
    /// sets it must say so in what it reports.
    pub unisolated: bool,
}

impl CommandConfig {
    /// A candidate at `root`, with `PATH=/usr/local/bin:/usr/bin:/bin`,
    /// `HOME=/tmp`, `LANG=C.UTF-8`, `PYTHONDONTWRITEBYTECODE=1` (no
    /// `__pycache__` in the diff), `GIT_OPTIONAL_LOCKS=0` (`git status` and
    /// `git diff` read `.git` without refreshing its index: `.git` is
    /// read-only to a command, and the refresh would be a denied write; with
    /// [`GIT_CONFIG`] at `/tmp/.gitconfig`), `GIT_CONFIG_NOSYSTEM=1` (the
    /// host's `/etc/gitconfig` is none of a command's: unreadable to it,
    /// git would stop at once) and nothing else; no tools, no scratch, no
    /// network.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            env: vec![
                ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
                ("HOME".to_owned(), "/tmp".to_owned()),
                ("LANG".to_owned(), "C.UTF-8".to_owned()),
                ("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned()),
                ("GIT_OPTIONAL_LOCKS".to_owned(), "0".to_owned()),
                ("GIT_CONFIG_NOSYSTEM".to_owned(), "1".to_owned()),
            ],
            tools: Vec::new(),
            scratch: Vec::new(),
            network: vsh_sandbox::NetworkAccess::None,
            connect_ports: Vec::new(),
            unix_sockets: false,
            unisolated: false,
        }
    }
}

/// `EIO`: the answer to a request the run no longer serves.
const EIO: i32 = 5;

fn tool_error(source: ToolError) -> ExecutionError {
    ExecutionError::Command { source }
}

fn setup_error(stage: &'static str, source: std::io::Error) -> ExecutionError {
    tool_error(ToolError::Setup { stage, source })
}

/// How the line a cut capture holds in place of its middle begins and ends
/// (around the number of bytes left out).
const CUT_OPENS: &str = "\n[vsh: ";
const CUT_CLOSES: &str = " bytes left out]\n";

/// Whether the captured stream `bytes` was cut: it holds the line a
/// command's capture puts where it left bytes out (a program could print
/// that line itself; it can only make vsh say its output was cut).
pub fn capture_was_cut(bytes: &[u8]) -> bool {
    let (opens, closes) = (CUT_OPENS.as_bytes(), CUT_CLOSES.as_bytes());
    bytes.windows(opens.len()).enumerate().filter(|(_, window)| *window == opens).any(|(at, _)| {
        let rest = &bytes[at + opens.len()..];
        let digits = rest.iter().take_while(|byte| byte.is_ascii_digit()).count();
        digits > 0 && rest[digits..].starts_with(closes)
    })
}

/// Read all of `stream`, keeping at most `cap` bytes of it: everything when
/// it fits, else its head and its tail around one line saying how many
/// bytes of the middle were left out (a test run's first failure and its
/// summary both survive).
fn capture(mut stream: impl std::io::Read, cap: usize) -> Vec<u8> {
    let head_cap = cap / 2;
    let tail_room = cap - head_cap;
    let mut head = Vec::new();
    let mut tail = std::collections::VecDeque::new();
    let mut total = 0_u64;
    let mut chunk = [0_u8; 16 << 10];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => {
                total += read as u64;
                let mut rest = &chunk[..read];
                let into_head = rest.len().min(head_cap - head.len());
                head.extend_from_slice(&rest[..into_head]);
                rest = &rest[into_head..];
                tail.extend(rest);
                let excess = tail.len().saturating_sub(tail_room);
                tail.drain(..excess);
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if total <= cap as u64 {
        head.extend(tail);
        return head;
    }
    // The line saying what was left out takes its room first (measured with
    // the whole length, which has at least as many digits as what it will
    // say); what is left goes half to the head and the rest to the tail, so
    // even a small cap keeps both ends.
    let marker = |omitted: u64| format!("{CUT_OPENS}{omitted}{CUT_CLOSES}");
    if marker(total).len() > cap {
        // Too small a cap for the line: its first bytes, no more.
        head.truncate(cap);
        return head;
    }
    let room = cap - marker(total).len();
    let mut head_kept = head.len().min(room / 2);
    let mut tail_kept = tail.len().min(room - head_kept);
    // Whole lines where one ends in the half of each end nearer the cut
    // (ux82 L5: a cut in the middle of `998` left a lone `8`).
    if let Some(end) = head[..head_kept].iter().rposition(|byte| *byte == b'\n')
        && end + 1 >= head_kept / 2
    {
        head_kept = end + 1;
    }
    let start = tail.len() - tail_kept;
    if start > 0
        && tail[start - 1] != b'\n'
        && let Some(newline) = tail.range(start..).position(|byte| *byte == b'\n')
        && newline < tail_kept / 2
    {
        tail_kept -= newline + 1;
    }
    head.truncate(head_kept);
    let omitted = total - head_kept as u64 - tail_kept as u64;
    // After a whole line, the line that says so needs no line break of its own.
    let said = marker(omitted);
    let said = if head.ends_with(b"\n") { &said[1..] } else { &said[..] };
    head.extend_from_slice(said.as_bytes());
    head.extend(tail.range(tail.len() - tail_kept..));
    head
}

/// [`launch_argv`] for `call`: an error when it names no program, or a
/// program found on no directory of the command's `PATH`.
#[expect(clippy::result_large_err, reason = "see `crate::execute`")]
fn launched(call: &CommandCall<'_>, config: &CommandConfig) -> Result<Vec<String>, ExecutionError> {
    let argv = launch_argv(call.argv, call.env, &config.root, &config.tools);
    match argv.first() {
        None => Err(tool_error(ToolError::InvalidPolicy { reason: "a command needs a program".to_owned() })),
        Some(program) if !program.contains('/') => Err(tool_error(ToolError::Spawn {
            program: program.clone(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "not found on the command's PATH"),
        })),
        Some(_) => Ok(argv),
    }
}

/// The argv to spawn for `argv`: the program found on the command's `PATH`
/// (in its system and tool directories), as an absolute path; a program in
/// the workspace (a path beneath `root`, a relative path) or a name whose
/// search reaches another `PATH` directory first is started by `/bin/sh`
/// inside the command's namespace (`exec "$0" "$@"`), so it is the
/// candidate's file that runs and its read is recorded, never the host's
/// file beneath, and the name is looked up with the command's own rights.
fn launch_argv(argv: &[String], env: &[(String, String)], root: &Path, tools: &[PathBuf]) -> Vec<String> {
    let Some(program) = argv.first() else { return Vec::new() };
    let in_workspace = |path: &Path| !path.is_absolute() || path.starts_with(root);
    let through_shell = || {
        let mut wrapped = vec!["/bin/sh".to_owned(), "-c".to_owned(), "exec \"$0\" \"$@\"".to_owned()];
        wrapped.extend(argv.iter().cloned());
        wrapped
    };
    if program.contains('/') {
        return if in_workspace(Path::new(program)) { through_shell() } else { argv.to_vec() };
    }
    let path = env.iter().rev().find(|(key, _)| key == "PATH").map_or("", |(_, value)| value.as_str());
    match vsh_sandbox::find_on_path(program, path, tools) {
        Ok(Some(found)) => {
            let mut resolved = vec![found.to_string_lossy().into_owned()];
            resolved.extend(argv[1..].iter().cloned());
            resolved
        }
        // Not found: the spawn says so.
        Ok(None) => argv.to_vec(),
        // A PATH directory outside the system and tool directories (in the
        // workspace, say): the shell resolves the name in the command's own view.
        Err(_) => through_shell(),
    }
}

/// The exit code a shell reports for `status`.
fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// What the supervising thread waits for.
enum Event {
    /// The spawn returned: the process group and the output streams, or why not.
    Spawned(Result<(u32, ChildStdout, ChildStderr), ToolError>),
    /// The command exited.
    Exited(std::io::Result<ExitStatus>),
    /// Serving ended: the mount is gone.
    Served,
}

/// How often a running command's deadline, cancellation and disk use are checked.
const TICK: Duration = Duration::from_millis(20);

/// Keeps a real command from filling the disk that holds its scratch
/// directories (the one place it writes to the host's disk; its image is
/// memory, its `/tmp` a bounded tmpfs): while it runs, that filesystem may
/// lose at most half the space available when it started, and never more
/// than the scratch directories' bound
/// ([`vsh_types::space::MAX_SCRATCH_BYTES`]), nor go below a reserve of 2 %
/// of its size (at most 64 MiB) available; the same
/// for its inodes, where the filesystem counts them (a reserve of 2 %, at
/// most 100,000: empty files fill a disk too). The space is read
/// (`statvfs`) at every tick; a command past it is stopped as by any limit
/// ([`LimitKind::DiskSpace`], [`LimitKind::DiskNodes`]). Another program's
/// writes to the same disk count too: the guard keeps the disk from
/// filling, whoever fills it.
#[derive(Debug, Clone)]
pub(crate) struct DiskGuard {
    /// A path on the filesystem (a scratch directory).
    path: PathBuf,
    /// Bytes available when the command started.
    available: u64,
    /// Bytes the filesystem may lose while it runs.
    may_lose: u64,
    /// Inodes available when the command started.
    inodes_available: u64,
    /// Inodes the filesystem may lose while it runs.
    inodes_may_lose: u64,
}

impl DiskGuard {
    /// The guard for the filesystem holding `path`, as it is now; `None` when
    /// its space cannot be read.
    fn new(path: &Path) -> Option<Self> {
        let space = vsh_sandbox::fs_space(path).ok()?;
        Some(Self {
            path: path.to_owned(),
            available: space.available,
            may_lose: may_lose(space.available, space.size),
            inodes_available: space.inodes_available,
            inodes_may_lose: vsh_types::space::may_take(
                space.inodes_available,
                space.inodes,
                vsh_types::space::MAX_RESERVE_NODES,
            ),
        })
    }

    /// The limit the command passed, if it did, with the space now.
    fn exceeded(&self) -> Option<LimitExceeded> {
        let now = vsh_sandbox::fs_space(&self.path).ok()?;
        let lost = self.available.saturating_sub(now.available);
        let nodes_lost = self.inodes_available.saturating_sub(now.inodes_available);
        if lost > self.may_lose {
            Some(LimitExceeded { limit: LimitKind::DiskSpace, attempted: lost, max: self.may_lose })
        } else if now.inodes > 0 && nodes_lost > self.inodes_may_lose {
            Some(LimitExceeded { limit: LimitKind::DiskNodes, attempted: nodes_lost, max: self.inodes_may_lose })
        } else {
            None
        }
    }
}

/// The bytes a filesystem with `available` of `size` bytes may lose while a
/// command runs (see [`DiskGuard`]).
fn may_lose(available: u64, size: u64) -> u64 {
    vsh_types::space::may_take(available, size, vsh_types::space::MAX_RESERVE_BYTES)
        .min(vsh_types::space::MAX_SCRATCH_BYTES)
}

/// The run's image, counters and refusals while a command runs: lent by
/// the dispatcher to the candidate's server, which serves each request on
/// a host made of them ([`OsHost::new`] over the lent parts, its counters
/// moved in and out), and given back when serving ends.
struct Lent {
    vfs: VirtualFs,
    policy: CallPolicy,
    limits: ExecutionLimits,
    started: Instant,
    stats: crate::ExecutionStats,
    denied: crate::guard::Denials,
    /// Why the run ended, once it did.
    stop: Option<Stop>,
}

/// What the server and the supervisor share.
struct Shared {
    /// The lent image; `None` once given back (a request after that is `EIO`).
    lent: Mutex<Option<Lent>>,
    /// The supervisor ended the run (a cancellation, the run's duration):
    /// every later request is refused.
    interrupted: AtomicBool,
    /// The command's process group, once spawned (0 before).
    group: AtomicU32,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Lent>> {
        self.lent.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Kill the command's whole process group, if it was spawned.
    fn kill(&self) {
        let group = self.group.load(Ordering::Acquire);
        if group != 0 {
            let _ = vsh_sandbox::kill_process_group(group);
        }
    }
}

/// The candidate's backend: serves each request on the lent image, on the
/// server's own thread.
struct LentImage(Arc<Shared>);

impl vsh_candidate::Backend for LentImage {
    fn call(&self, request: vsh_types::fsproto::FsRequest) -> FsReply {
        let mut guard = self.0.lock();
        let Some(lent) = guard.as_mut() else { return FsReply::Failed(EIO) };
        let mut host = OsHost::new(&mut lent.vfs, &lent.policy, &lent.limits, lent.started);
        host.meter.stats = std::mem::take(&mut lent.stats);
        host.denied = std::mem::take(&mut lent.denied);
        let interrupted = self.0.interrupted.load(Ordering::Acquire);
        let served = crate::bash::serve_file(&mut host, &mut lent.stop, interrupted, request);
        lent.stats = host.meter.stats;
        lent.denied = host.denied;
        drop(guard);
        served.unwrap_or_else(|_stopped| {
            // The run is over (a budget, a terminal image error, a
            // cancellation): so is the command.
            self.0.kill();
            FsReply::Failed(EIO)
        })
    }
}

/// One command to run in a candidate.
pub(crate) struct CommandCall<'c> {
    /// The program and its arguments.
    pub(crate) argv: &'c [String],
    /// Exactly the environment it gets.
    pub(crate) env: &'c [(String, String)],
    /// Its own time limit, besides the run's ([`ExecutionLimits::command_duration`]).
    pub(crate) timeout: Option<Duration>,
    /// Where in the candidate it starts: a relative path of plain
    /// components (`""`: the root); see [`is_working_dir`].
    pub(crate) cwd: &'c str,
    /// What it reads on its standard input (nothing: `/dev/null`).
    pub(crate) stdin: &'c [u8],
}

/// A real command, besides its environment: what runs, where it starts
/// and what it reads on its standard input.
#[derive(Debug, Clone, Copy, Default)]
pub struct CommandLine<'a> {
    /// The program and its arguments.
    pub argv: &'a [String],
    /// Where in the candidate it starts: `""` (the root) or a relative
    /// path of plain components ([`is_working_dir`]); a directory the image
    /// does not hold fails the spawn.
    pub cwd: &'a str,
    /// Its standard input: these bytes exactly, in a sealed file
    /// ([`vsh_sandbox::input_file`]); empty is `/dev/null`.
    pub stdin: &'a [u8],
}

/// Whether `cwd` may be where a command starts: `""` (the candidate's root)
/// or a relative path of plain components (`src/app`; no `.`, `..`, empty
/// component, leading or trailing `/`, or NUL). Whether it exists is the
/// image's to say when the command starts.
pub fn is_working_dir(cwd: &str) -> bool {
    cwd.is_empty() || cwd.split('/').all(|part| !part.is_empty() && part != "." && part != ".." && !part.contains('\0'))
}

/// How a command that ran ended. When the run was ended meanwhile (a
/// budget, the run's duration, a cancellation, a fault), the dispatcher
/// holds the cause.
pub(crate) struct CommandEnd {
    /// Its exit status (after the kill, when it was killed).
    pub(crate) status: ExitStatus,
    /// Whether the call's own timeout killed it.
    pub(crate) timed_out: bool,
    /// Standard output, head and tail when longer than the cap.
    pub(crate) stdout: Vec<u8>,
    /// Standard error, head and tail when longer than the cap.
    pub(crate) stderr: Vec<u8>,
}

/// Run `argv` in a candidate of `vfs` (see the module documentation).
#[expect(clippy::result_large_err, reason = "see `crate::execute`")]
pub(crate) fn run_command(
    line: CommandLine<'_>,
    vfs: &mut VirtualFs,
    policy: &CallPolicy,
    limits: &ExecutionLimits,
    config: &CommandConfig,
    started: Instant,
    interrupt: &dyn Interrupt,
) -> Result<BashOutcome, ExecutionError> {
    let mut dispatcher = Dispatcher::new(OsHost::new(vfs, policy, limits, started), interrupt);
    let call = CommandCall { argv: line.argv, env: &config.env, timeout: None, cwd: line.cwd, stdin: line.stdin };
    let end = match dispatcher.run_in_candidate(&call, config) {
        Ok(end) => end,
        // A budget that ran out while the command was being set up (the
        // sandbox's own look at the mount is served as a request too) is
        // the run's error, not a failed setup's.
        Err(_) if dispatcher.stopped() => {
            let end = BashEnd { exit_code: -1, stdout: Vec::new(), stderr: Vec::new(), ending: Ending::Completed };
            return conclude_bash(Ok(end), &mut dispatcher, limits, started);
        }
        Err(error) => return Err(error),
    };
    let ending = {
        use std::os::unix::process::ExitStatusExt as _;
        end.status.signal().map_or(Ending::Completed, Ending::Signalled)
    };
    let end = BashEnd { exit_code: exit_code(end.status), stdout: end.stdout, stderr: end.stderr, ending };
    conclude_bash(Ok(end), &mut dispatcher, limits, started)
}

impl Dispatcher<'_> {
    /// Lend this run's image to a candidate's server (see [`Lent`]).
    fn lend(&mut self) -> Lent {
        Lent {
            vfs: self.host.lend_image(),
            policy: self.host.policy().clone(),
            // A command moves a file between the candidate and the image
            // whole (a read loads it, a write-back replaces it), however
            // many calls the process made: one program call's bound does
            // not apply, the run's cumulative read and write budgets do.
            limits: ExecutionLimits { max_io_call_bytes: u64::MAX, ..self.host.meter.limits().clone() },
            started: self.host.meter.started(),
            stats: std::mem::take(&mut self.host.meter.stats),
            denied: std::mem::take(&mut self.host.denied),
            // A run already ended serves nothing (and comes back ended).
            stop: self.take_stop(),
        }
    }

    /// Whether the image holds a node of `kind` at `relative` (a path of
    /// the candidate), asked as the command would ask (a metadata read, so
    /// the run depends on the answer).
    fn image_holds(&mut self, relative: &str, kind: vsh_types::fsproto::NodeType) -> bool {
        let request =
            vsh_types::fsproto::FsRequest::Stat { path: format!("{}/{relative}", crate::VIRTUAL_ROOT), follow: false };
        let (host, stop) = self.parts();
        matches!(
            crate::bash::serve_file(host, stop, false, request),
            Ok(FsReply::Meta(meta)) if meta.kind == kind
        )
    }

    /// Whether the scratch directory `inside` is bound in this run's
    /// candidate: a nested one (`node_modules/.cache`) only where its parent
    /// is a directory of the image, a build's output directory
    /// ([`BUILD_SCRATCH_NAME`]) only beside its build's manifest.
    fn scratch_applies(&mut self, inside: &str) -> bool {
        use vsh_types::fsproto::NodeType;
        let (parent, name) = inside.rsplit_once('/').unwrap_or(("", inside));
        if !parent.is_empty() && !self.image_holds(parent, NodeType::Directory) {
            return false;
        }
        name != BUILD_SCRATCH_NAME
            || BUILD_MANIFESTS.iter().any(|manifest| {
                let beside = if parent.is_empty() { (*manifest).to_owned() } else { format!("{parent}/{manifest}") };
                self.image_holds(&beside, NodeType::File)
            })
    }

    /// Take the image back from the server, with what serving counted,
    /// refused and ended.
    fn take_back(&mut self, shared: &Shared) {
        let Some(lent) = shared.lock().take() else { return };
        self.host.return_image(lent.vfs);
        self.host.meter.stats = lent.stats;
        self.host.denied = lent.denied;
        if let Some(stop) = lent.stop {
            let _abort = self.end(stop, "the run was ended");
        }
    }

    /// `mount` with a private `/tmp` and `/dev/shm`, vsh's git configuration
    /// in it, and, when the workspace is a git worktree ([`WorktreeGit`]),
    /// its repository's directories to read. The `.git` file is read from
    /// the image, where no program may change it.
    fn with_worktree_git(&mut self, mount: FuseMount, root: &Path) -> FuseMount {
        let dot_git = vsh_types::VPath::parse(".git").expect("a plain name");
        let worktree = if self.host.policy().authorize(&dot_git, vsh_policy::AccessKind::ContentRead).is_ok()
            && let Ok(grant) = self.host.authorize::<crate::guard::ContentRead>(&dot_git, ".git")
            && matches!(self.host.kind(&grant), Ok(Some(vsh_types::NodeKind::File)))
            && matches!(self.host.file_size(&grant), Ok(size) if size <= 4096)
            && let Ok(bytes) = self.host.read(&grant)
        {
            WorktreeGit::of(root, &bytes)
        } else {
            None
        };
        let mut mount = mount
            .with_private_tmp(COMMAND_TMP_BYTES)
            .with_private_shm(COMMAND_SHM_BYTES)
            .with_tmp_file(".gitconfig", WorktreeGit::config(worktree.as_ref()));
        for dir in worktree.iter().flat_map(|worktree| &worktree.dirs) {
            mount = mount.with_tool_dir(dir);
        }
        mount
    }

    /// A directory the policy hides (a secrets directory, vsh's data) is no
    /// place for `program` to start: say so, rather than fail to mount. Nor
    /// is anything but a directory of the image: a symlink on the way (to
    /// `/etc`, to a secret) is never followed out of the workspace, and a
    /// file or nothing is no directory.
    #[expect(clippy::result_large_err, reason = "see `crate::execute`")]
    fn check_working_dir(&mut self, program: &str, cwd: &str) -> Result<(), ExecutionError> {
        let refused = |why: String| {
            tool_error(ToolError::Spawn {
                program: program.to_owned(),
                source: std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!("it cannot start in {cwd}: {why}"),
                ),
            })
        };
        let Ok(at) = vsh_types::VPath::parse(cwd) else { return Ok(()) };
        if at.is_root() {
            return Ok(());
        }
        if let Err(denied) = self.host.policy().authorize(&at, vsh_policy::AccessKind::MetadataRead) {
            return Err(refused(denied.to_string()));
        }
        let mut on_the_way = at.ancestors();
        on_the_way.push(at);
        for dir in on_the_way.into_iter().filter(|dir| !dir.is_root()) {
            let kind = match self.host.authorize::<crate::guard::MetadataRead>(&dir, cwd) {
                Ok(grant) => self.host.kind(&grant).map_err(|source| ExecutionError::Vfs { source })?,
                Err(_) => return Err(refused(format!("{dir} cannot be looked at"))),
            };
            match kind {
                Some(vsh_types::NodeKind::Directory) => {}
                Some(vsh_types::NodeKind::Symlink) => {
                    return Err(refused(format!("{dir} is a symbolic link, which is never followed")));
                }
                Some(vsh_types::NodeKind::File) => return Err(refused(format!("{dir} is not a directory"))),
                None => return Err(refused(format!("{dir} does not exist"))),
            }
        }
        Ok(())
    }

    /// Bind `config`'s scratch directories into `mount` (those that apply
    /// to this image), telling Python and pytest where theirs are through
    /// `env`: the mount, the paths bound in the candidate, and the host
    /// directories bound.
    fn bind_scratch<'c>(
        &mut self,
        mut mount: FuseMount,
        env: &mut Vec<(String, String)>,
        config: &'c CommandConfig,
    ) -> (FuseMount, Vec<String>, Vec<&'c PathBuf>) {
        let mut mount_points = Vec::new();
        let mut scratch_dirs = Vec::new();
        for (inside, dir) in &config.scratch {
            if inside == PYCACHE_SCRATCH {
                // Python writes its bytecode into a directory of its own,
                // never beside the sources; of it only the workspace's own
                // modules' is kept (beneath the workspace's path in the
                // tree Python mirrors there): the system's is compiled
                // again each run, so no run leaves code in it for another
                // (sec80 F3: a run planted the stdlib's `json`).
                let mirror = config.root.strip_prefix("/").unwrap_or(&config.root);
                mount = mount.with_tmp_scratch_beneath(PYCACHE_AT, mirror, dir);
                env.retain(|(key, _)| key != "PYTHONDONTWRITEBYTECODE" && key != "PYTHONPYCACHEPREFIX");
                env.push(("PYTHONPYCACHEPREFIX".to_owned(), format!("/tmp/{PYCACHE_AT}")));
                scratch_dirs.push(dir);
                continue;
            }
            if !self.scratch_applies(inside) {
                continue;
            }
            mount = mount.with_scratch(inside, dir);
            if inside == PYTEST_SCRATCH {
                // pytest keeps its cache in its rootdir, which is where it is
                // invoked when no config names one (`tests/`): there too it
                // goes to the workspace's scratch (ux65 F2).
                pytest_cache_at(env, &config.root.join(PYTEST_SCRATCH));
            }
            mount_points.push(inside.clone());
            scratch_dirs.push(dir);
        }
        (mount, mount_points, scratch_dirs)
    }

    /// Run one command in a candidate of this run's image, its requests
    /// served on the candidate's own thread until it and its mount are
    /// gone. Each stream keeps at most half the run's output budget.
    #[expect(clippy::result_large_err, reason = "see `crate::execute`")]
    pub(crate) fn run_in_candidate(
        &mut self,
        call: &CommandCall<'_>,
        config: &CommandConfig,
    ) -> Result<CommandEnd, ExecutionError> {
        let argv = launched(call, config)?;
        let Some((program, arguments)) = argv.split_first() else { unreachable!("launched has a program") };
        if !is_working_dir(call.cwd) {
            return Err(tool_error(ToolError::InvalidPolicy {
                reason: format!("{:?} is not a relative path of plain components", call.cwd),
            }));
        }
        self.check_working_dir(program, call.cwd)?;
        let stdin = if call.stdin.is_empty() {
            Stdio::null()
        } else {
            Stdio::from(vsh_sandbox::input_file(call.stdin).map_err(|error| setup_error("standard input", error))?)
        };
        let limits = self.host.meter.limits();
        let (mount, mounted) = FuseMount::open(&config.root).map_err(tool_error)?;
        let mut mount = self.with_worktree_git(mount, &config.root);
        for tool in &config.tools {
            mount = mount.with_tool_dir(tool);
        }
        let mut env = call.env.to_vec();
        if config.network == vsh_sandbox::NetworkAccess::None {
            mount = offline(mount, &mut env);
        }
        let (mut mount, mount_points, scratch_dirs) = self.bind_scratch(mount, &mut env, config);
        // Never root: the process-count limit would not hold, and a root process
        // needs no permission bits. A uid of the command's own, so the limit is
        // its own; held until the command's processes are gone (this returns).
        // The candidate's files are the command user's.
        let lease = if vsh_sandbox::effective_uid() == 0 {
            Some(vsh_sandbox::CommandUser::lease(COMMAND_USER).map_err(tool_error)?)
        } else {
            None
        };
        let (uid, gid) = match &lease {
            Some(user) if scratch_dirs.iter().all(|dir| user.can_idmap(dir)) => {
                mount = mount.with_idmapped_scratch(user).map_err(tool_error)?;
                (user.uid(), user.gid())
            }
            // What the command keeps must be stored as the storage uid.
            Some(_) => COMMAND_USER,
            None => (vsh_sandbox::effective_uid(), vsh_sandbox::effective_gid()),
        };
        let mount = with_own_user(mount, (uid, gid));
        // The candidate and the private /tmp are writable by descriptor (see
        // `FuseMount`): no path of the host is.
        // The run's memory budget bounds each of the command's processes
        // (below) and, where the host can, all of them together.
        let mut sandbox = SandboxPolicy::new().network(config.network).limit_tree_memory(limits.max_memory_bytes);
        if config.unix_sockets {
            sandbox = sandbox.allow_unix_sockets();
        }
        if vsh_sandbox::effective_uid() == 0 {
            sandbox = sandbox.run_as(uid, gid);
        }
        let mut child_limits = sandbox.limits().clone();
        child_limits.processes = Some(COMMAND_PROCESSES);
        child_limits.open_files = Some(COMMAND_OPEN_FILES);
        // The run's memory budget bounds each of the command's processes.
        child_limits.data_bytes = Some(limits.max_memory_bytes);
        let mut sandbox = sandbox.rlimits(child_limits);
        for port in &config.connect_ports {
            sandbox = sandbox.allow_loopback_tcp(*port);
        }
        if !config.connect_ports.is_empty() {
            sandbox = sandbox.floor(vsh_sandbox::Axis::Network, vsh_sandbox::Enforcement::Partial);
        }
        if config.unisolated {
            for axis in vsh_sandbox::Axis::ALL {
                sandbox = sandbox.floor(axis, vsh_sandbox::Enforcement::None);
            }
        }
        let mut command = ConfinedCommand::new(program.clone())
            .args(arguments)
            .current_dir(config.root.join(call.cwd))
            .private_fuse_mount(mount)
            .sandbox_policy(Arc::new(sandbox))
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .new_process_group()
            // Spawned and waited on by one thread (see `supervise`): if vsh
            // dies outright, its command does not run on unsupervised.
            .kill_when_parent_ends();
        for (key, value) in &env {
            command = command.env(key, value);
        }
        let cap = usize::try_from(limits.max_output_bytes / 2).unwrap_or(usize::MAX);
        let shared = Arc::new(Shared {
            lent: Mutex::new(Some(self.lend())),
            interrupted: AtomicBool::new(false),
            group: AtomicU32::new(0),
        });
        let disk = self.run_disk_guard(config);
        let supervised =
            self.supervise(command, &shared, mounted, call.timeout, cap, (uid, gid), mount_points, disk.as_ref());
        // Whatever happened, the image comes back (a server still running
        // answers `EIO` from now on).
        self.take_back(&shared);
        supervised
    }

    /// The disk guard of this run's commands: made at its first command, on
    /// the filesystem of `config`'s scratch directories, and shared by every
    /// later one (see [`DiskGuard`]).
    fn run_disk_guard(&mut self, config: &CommandConfig) -> Option<DiskGuard> {
        if self.disk_guard.is_none() {
            self.disk_guard = config.scratch.first().and_then(|(_, dir)| DiskGuard::new(dir));
        }
        self.disk_guard.clone()
    }

    /// Serve the candidate and supervise `command` in it until both are over.
    #[expect(clippy::result_large_err, reason = "see `crate::execute`")]
    #[expect(clippy::too_many_arguments, reason = "the parts of one command run, prepared by the caller")]
    fn supervise(
        &mut self,
        command: ConfinedCommand,
        shared: &Arc<Shared>,
        mounted: vsh_sandbox::MountWaiter,
        timeout: Option<Duration>,
        cap: usize,
        (uid, gid): (u32, u32),
        mount_points: Vec<String>,
        disk: Option<&DiskGuard>,
    ) -> Result<CommandEnd, ExecutionError> {
        let limits = self.host.meter.limits();
        let started = self.host.meter.started();
        let called = Instant::now();
        let (events_in, events) = sync_channel::<Event>(4);
        let served_in = events_in.clone();
        // A file larger than the run may write could never be written back:
        // the process gets EFBIG at once, and nothing is allocated for it.
        let fs = CandidateFs::new(LentImage(Arc::clone(shared)), Owner { uid, gid })
            .with_mount_points(mount_points)
            .with_max_file_bytes(limits.max_write_bytes);
        let serving = vsh_candidate::serve_then(fs, mounted, move || {
            let _ = served_in.send(Event::Served);
        })
        .map_err(|error| setup_error("the candidate's server", error))?;
        let outcome = std::thread::scope(|scope| {
            // The spawn returns only once the child is in the mount, which waits
            // for the server: it is made on a thread of its own.
            scope.spawn(move || match command.spawn(&ToolContext::new(ExecGrant::Any)) {
                Ok(mut child) => {
                    let streams = child.take_stdout().zip(child.take_stderr());
                    let spawned = streams.map(|(out, err)| (child.id(), out, err)).ok_or_else(|| ToolError::Setup {
                        stage: "pipes",
                        source: std::io::Error::other("no output pipes"),
                    });
                    let _ = events_in.send(Event::Spawned(spawned));
                    let _ = events_in.send(Event::Exited(child.child().wait()));
                }
                Err(error) => {
                    let _ = events_in.send(Event::Spawned(Err(error)));
                }
            });
            let mut captures = Vec::new();
            let mut status = None;
            let mut served = false;
            let mut killed = false;
            let mut timed_out = false;
            let mut exited_at: Option<Instant> = None;
            while !(served && status.is_some()) {
                match events.recv_timeout(TICK) {
                    Ok(Event::Spawned(Ok((pid, out, err)))) => {
                        shared.group.store(pid, Ordering::Release);
                        captures.push(scope.spawn(move || capture(out, cap)));
                        captures.push(scope.spawn(move || capture(err, cap)));
                        // The run may have ended before the group was known.
                        if killed || shared.lock().as_ref().is_some_and(|lent| lent.stop.is_some()) {
                            shared.kill();
                        }
                    }
                    Ok(Event::Spawned(Err(error))) => return Err(tool_error(error)),
                    Ok(Event::Exited(exited)) => {
                        status = Some(exited.map_err(|error| setup_error("wait", error))?);
                        // The command is over: whatever it left running goes with it.
                        shared.kill();
                        exited_at = Some(Instant::now());
                        // What it wrote before it exited counts as much as what it writes running.
                        if let Some(exceeded) = disk.and_then(DiskGuard::exceeded)
                            && let Some(lent) = shared.lock().as_mut()
                        {
                            lent.stop.get_or_insert(Stop::Limit(exceeded));
                        }
                    }
                    Ok(Event::Served) => served = true,
                    Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
                }
                if status.is_none() && !killed {
                    let ended = if started.elapsed() > limits.command_duration() {
                        Some(Stop::Limit(LimitExceeded {
                            limit: LimitKind::Duration,
                            attempted: nanos(started.elapsed()),
                            max: nanos(limits.command_duration()),
                        }))
                    } else if self.interrupted() {
                        Some(Stop::Cancelled)
                    } else {
                        disk.and_then(DiskGuard::exceeded).map(Stop::Limit)
                    };
                    if let Some(stop) = ended {
                        shared.interrupted.store(true, Ordering::Release);
                        if let Some(lent) = shared.lock().as_mut() {
                            lent.stop.get_or_insert(stop);
                        }
                        killed = true;
                    } else if timeout.is_some_and(|timeout| called.elapsed() > timeout) {
                        timed_out = true;
                        killed = true;
                    }
                    if killed {
                        shared.kill();
                    }
                }
                if exited_at.is_some_and(|at| at.elapsed() > DRAIN) {
                    return Err(setup_error(
                        "unmount",
                        std::io::Error::other("the candidate stayed mounted after the command's processes were gone"),
                    ));
                }
            }
            let mut streams = captures.into_iter().map(|thread| thread.join().unwrap_or_default());
            let stdout = streams.next().unwrap_or_default();
            let stderr = streams.next().unwrap_or_default();
            Ok((status, timed_out, stdout, stderr))
        });
        // A server that failed (a panic, a device error) may have failed the
        // command's accesses however it exited: its changes are not its
        // outcome (sec78 F1: a panic's half-written work was committed).
        let served = serving.join();
        let (status, timed_out, stdout, stderr) = outcome?;
        served.map_err(|error| setup_error("serve the candidate", error))?;
        let status = status.ok_or_else(|| setup_error("wait", std::io::Error::other("no exit status")))?;
        Ok(CommandEnd { status, timed_out, stdout, stderr })
    }
}

/// The Monty function that runs a real command in a candidate.
pub(crate) const EXEC_NAME: &str = "vsh_exec";

/// How much of each stream of a failing command `vsh_exec(..., check=True)`
/// puts in its exception: its end, where a test or compiler says why.
const CHECK_STDERR_CHARS: usize = 2_000;

/// A guest exception of `kind` saying `message`.
fn guest(kind: ExcType, message: String) -> Reply {
    Reply::Raise(MontyException::new(kind, Some(message)))
}

impl Dispatcher<'_> {
    /// `vsh_exec(argv, timeout=None, env=None, input=None, check=False)`: run
    /// `argv` (its standard input `input`, a `str` or `bytes`, else
    /// `/dev/null`) in a candidate of this run's image as it is now (the
    /// program's changes so far included), every file access it makes
    /// charged and recorded as the program's own, and return `(exit_code,
    /// stdout, stderr)` whatever the status (the program decides what a
    /// failure means), or with `check` raise `RuntimeError` for a non-zero
    /// one, its message ending with the end of each stream it wrote (a failing
    /// test fails the run, as `subprocess.run(check=True)` would). A program that
    /// cannot be started is `FileNotFoundError` or `PermissionError`, the
    /// call's own timeout `TimeoutError` (what the command changed before
    /// the kill stays); the run's budgets, a cancellation, or a host that
    /// cannot make candidates end the run.
    pub(crate) fn nested_exec_call(
        &mut self,
        args: Vec<MontyObject>,
        kwargs: Vec<(MontyObject, MontyObject)>,
    ) -> Reply {
        let call = match crate::tools::exec_args(args, kwargs) {
            Ok(call) => call,
            Err(Fault::Guest(exception)) => return Reply::Raise(exception),
            Err(_) => return Reply::Raise(MontyException::new(ExcType::TypeError, None)),
        };
        let Some(config) = self.nested_command else {
            let message = format!(
                "{EXEC_NAME}() is not available: this runtime was not configured for commands \
                 (vsh run --commands, vsh serve --commands)"
            );
            return guest(ExcType::RuntimeError, message);
        };
        let most = self.host.meter.limits().max_io_call_bytes;
        if call.input.len() as u64 > most {
            let message =
                format!("{EXEC_NAME}() argument 'input' is longer than {most} bytes, the most one call may move");
            return guest(ExcType::ValueError, message);
        }
        let mut env = config.env.clone();
        for (key, value) in call.env {
            env.retain(|(known, _)| *known != key);
            env.push((key, value));
        }
        let ran = self.run_in_candidate(
            &CommandCall { argv: &call.argv, env: &env, timeout: call.timeout, cwd: "", stdin: &call.input },
            config,
        );
        if self.stopped() {
            return Reply::Abort("the run was ended".to_owned());
        }
        let program = monty_types::StringRepr(&call.argv[0]).to_string();
        match ran {
            Ok(end) if end.timed_out => {
                let seconds = call.timeout.unwrap_or_default().as_secs_f64();
                guest(ExcType::TimeoutError, format!("command {program} timed out after {seconds} seconds"))
            }
            Ok(end) if call.check && exit_code(end.status) != 0 => {
                // Where the command said why: the end of each stream it
                // wrote (pytest and jest report failures on stdout, cargo
                // test its panics on stdout and its summary on stderr).
                let tail = |bytes: &[u8]| -> Option<String> {
                    let said = String::from_utf8_lossy(bytes);
                    let chars: Vec<char> = said.trim_end().chars().collect();
                    (!said.trim().is_empty())
                        .then(|| chars[chars.len().saturating_sub(CHECK_STDERR_CHARS)..].iter().collect())
                };
                let said = match (tail(&end.stdout), tail(&end.stderr)) {
                    (Some(out), Some(err)) => format!("\n[stdout, its end]\n{out}\n[stderr, its end]\n{err}"),
                    (Some(only), None) | (None, Some(only)) => only,
                    (None, None) => "(it wrote nothing)".to_owned(),
                };
                let status = exit_code(end.status);
                guest(ExcType::RuntimeError, format!("command {program} exited {status}: {said}"))
            }
            Ok(end) => {
                let text = |bytes: &[u8]| MontyObject::String(String::from_utf8_lossy(bytes).into_owned());
                Reply::Return(MontyObject::Tuple(vec![
                    MontyObject::Int(i64::from(exit_code(end.status))),
                    text(&end.stdout),
                    text(&end.stderr),
                ]))
            }
            Err(ExecutionError::Command { source }) => match source {
                ToolError::Spawn { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                    guest(ExcType::FileNotFoundError, format!("[Errno 2] No such file or directory: {program}"))
                }
                ToolError::Spawn { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => {
                    guest(ExcType::PermissionError, format!("[Errno 13] Permission denied: {program}"))
                }
                ToolError::ExecDenied { .. } | ToolError::EnvDenied { .. } => {
                    guest(ExcType::PermissionError, format!("{EXEC_NAME}() refused: {source}"))
                }
                source => {
                    let error = ExecutionError::Command { source };
                    self.end(Stop::Candidate(Box::new(error)), "the candidate could not be made")
                }
            },
            Err(error) => self.end(Stop::Candidate(Box::new(error)), "the candidate could not be made"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::capture;

    /// sec51 F5: a command filled 19 GB of a 63 GB-free disk in scratch,
    /// half of what was free: one run's commands may take half, and never
    /// more than the scratch directories' bound.
    #[test]
    fn a_command_may_take_half_the_free_disk_and_never_past_the_scratch_bound() {
        const GB: u64 = 1 << 30;
        assert_eq!(super::may_lose(10 * GB, 200 * GB), 5 * GB);
        assert_eq!(super::may_lose(100 * GB, 200 * GB), vsh_types::space::MAX_SCRATCH_BYTES);
        assert_eq!(super::may_lose(0, 200 * GB), 0);
    }

    /// `total` bytes: lines `line 0`, `line 1`, ... each padded to 10 bytes.
    fn lines(count: usize) -> Vec<u8> {
        (0..count).flat_map(|index| format!("{index:>9}\n").into_bytes()).collect()
    }

    #[test]
    fn a_capture_within_its_cap_is_whole_and_past_it_keeps_both_ends_within_the_cap() {
        let text = lines(100);
        assert_eq!(capture(&text[..], 1000), text, "1,000 bytes fit 1,000");
        assert!(!super::capture_was_cut(&text), "a whole capture says so");
        // A cap smaller than the line that would stand for the middle: a prefix within it.
        let tiny = capture(&text[..], 10);
        assert!(tiny.len() <= 10 && text.starts_with(&tiny), "{tiny:?}");
        for cap in [60, 100, 200, 999] {
            let kept = capture(&text[..], cap);
            assert!(kept.len() <= cap, "cap {cap}: {} bytes", kept.len());
            assert!(super::capture_was_cut(&kept), "cap {cap}: a cut capture says so");
            let shown = String::from_utf8(kept).unwrap();
            let (head, rest) = shown.split_once("[vsh: ").unwrap_or_else(|| panic!("cap {cap}: {shown:?}"));
            let (omitted, tail) = rest.split_once(" bytes left out]\n").unwrap();
            assert!(!head.is_empty() && !tail.is_empty(), "cap {cap}: both ends: {shown:?}");
            assert!(text.starts_with(head.as_bytes()) && text.ends_with(tail.as_bytes()), "cap {cap}");
            let omitted: usize = omitted.parse().unwrap();
            assert_eq!(head.len() + omitted + tail.len(), text.len(), "cap {cap}: every byte accounted for");
            // Whole lines at both ends (ux82 L5), and no empty line before the cut's.
            assert!(head.ends_with('\n') && tail.len() % 10 == 0, "cap {cap}: {shown:?}");
        }
        // A line longer than half an end is cut within it, the cut on a line of its own.
        let long: Vec<u8> = [vec![b'a'; 500], b"\n".to_vec(), vec![b'b'; 500]].concat();
        let kept = String::from_utf8(capture(&long[..], 100)).unwrap();
        assert!(kept.starts_with("aaa") && kept.contains("a\n[vsh: ") && kept.ends_with("bbb"), "{kept:?}");
    }
}
