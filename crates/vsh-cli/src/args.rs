//! Command-line grammar, parsed by clap (derive): per-command `--help`,
//! `--opt=value`, suggestions for typos, and usage errors with exit code 2.
//!
//! Every path argument is a `PathBuf` built from the raw `OsString`, so a
//! name that is not UTF-8 reaches the runtime (which answers with a typed
//! error if it cannot be used) instead of panicking the parser.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use vsh::{PolicyProfile, RunMode};

/// The exit-code table, shown after `--help` (and in the README).
pub(crate) const EXIT_CODES: &str = "\
Exit codes:
  0   the command did what it was asked: a preview was made (whatever its
      decision: a denied or pending preview exits 0, its receipt says which;
      --detailed-exitcode exits with it), a commit landed (or had already),
      a review was shown
  1   error
  2   usage error
  4   not committed (a commit was asked for: vsh commit, --mode auto): the
      transaction awaits approval
  5   not committed: policy denied the transaction a commit (or an
      approval) was asked for, or refused the program an access it did not
      catch (even in a preview; a Bash program or command: one that then
      failed); either way the denied work is kept on record (vsh log)
  6   not committed or approved: the workspace changed under it (stale, for
      good; the conflicting paths are listed); a revert: the workspace no
      longer holds what it would undo (reverted already, or changed since);
      work run again (vsh rerun), or its first run: another run of the same
      work was committed after it was made
  75  gave up waiting for another vsh process (--lock-timeout)
  130, 143, 129
      interrupted by SIGINT (Ctrl-C), SIGTERM or SIGHUP: the run was stopped,
      its processes killed, nothing committed (another signal a second or more
      after the first ends vsh at once)
With --detailed-exitcode, run, exec, rerun, revert, show and commit exit with the
transaction's state instead: 0 committed, 3 auto-approved (nothing written),
4 pending approval (or approved, not yet committed), 5 denied, 6 stale,
7 rejected, expired, or its commit failed and was rolled back.";

/// Run agent programs against a virtual image of a workspace; preview,
/// approve and commit their changes exactly once.
#[derive(Debug, Parser)]
#[command(name = "vsh", version = version(), after_help = EXIT_CODES, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// Exit with the transaction's state (0 committed, 3 auto-approved, 4
    /// pending, 5 denied, 6 stale, 7 rejected, expired or rolled back) instead
    /// of whether the command did what it was asked: for run, exec, rerun,
    /// revert, show and commit, before or after the command's name.
    #[arg(long)]
    pub(crate) detailed_exitcode: bool,
    /// Colour the output: auto (on a terminal, unless NO_COLOR is set or
    /// CLICOLOR_FORCE asks for it anyway), always, or never.
    #[allow(clippy::doc_markdown, reason = "this text is --help, where backticks would show")]
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value = "auto")]
    pub(crate) color: ColorWhen,
    /// Print no receipt or confirmation, only errors and warnings (denied
    /// work, and work left waiting for a reviewer or a commit, is one line on stderr;
    /// JSON is still printed when --json asks for it; vsh exec --raw prints
    /// the command's own output).
    #[arg(short, long, global = true)]
    pub(crate) quiet: bool,
    /// The workspace directory, before the command's name: as the command's
    /// own --workspace (given in both places, they must name the same
    /// directory; a command that works on no workspace refuses it).
    #[arg(short, long, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
}

/// When to colour the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ColorWhen {
    Auto,
    Always,
    Never,
}

impl ColorWhen {
    pub(crate) fn choice(self) -> anstream::ColorChoice {
        match self {
            Self::Auto => anstream::ColorChoice::Auto,
            Self::Always => anstream::ColorChoice::Always,
            Self::Never => anstream::ColorChoice::Never,
        }
    }
}

fn version() -> &'static str {
    static TEXT: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("{} ({})", vsh::VERSION, vsh::engine_kind()));
    &TEXT
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Record the workspace's policy (a profile or a policy file) in its trusted
    /// data directory; every later command uses it unless told otherwise.
    Init(InitArgs),
    /// Run a program (a file, or - for stdin) against the workspace's virtual image.
    ///
    /// A program starts at the workspace's root wherever you run vsh from:
    /// its relative paths are the workspace's (`src/app.py`, not `app.py`
    /// from `src/`). A command (`vsh exec`) starts where you are.
    Run(RunArgs),
    /// Run a real command (after --) in a confined candidate of the workspace:
    /// what it changes is previewed, decided and committed like a program's.
    /// Each run starts from the workspace as it is on disk: a later run sees
    /// this one's changes once they are committed (to test an edit first, make
    /// it and run the tests in one command or program).
    Exec(ExecArgs),
    /// Run a stored transaction's program again, on the workspace as it is now
    /// and under the policy in force now, as a new transaction (for work that
    /// went stale, or was made under a policy since changed).
    Rerun(RerunArgs),
    /// Undo committed work: new work that puts back what the transaction
    /// replaced (each path's bytes, mode, or nothing), decided, reviewed and
    /// committed like any run. Refused where the workspace changed since the
    /// transaction's commit (it never overwrites what came after) or where
    /// the store no longer holds what it replaced (a commit keeps up to 1
    /// MiB a file, until vsh gc).
    Revert(RevertArgs),
    /// List transactions waiting for approval or commit, and interrupted
    /// commits waiting for an operator (vsh recover --restore TX).
    Pending(Common),
    /// List finished transactions, newest first: committed, rejected,
    /// expired, stale, failed, denied.
    Log(LogArgs),
    /// Apply the store's retention: expire lapsed approvals and previews,
    /// drop old finished records, delete content nothing needs any more,
    /// and clear real commands' scratch directories past 20 GiB.
    Gc(GcArgs),
    /// Show the workspace's effective policy, or check a policy file (the
    /// format, the profiles and every risk flag: docs/policy.md).
    Policy {
        #[command(subcommand)]
        action: PolicyAction,
    },
    /// Show a stored transaction's review.
    Show(ShowArgs),
    #[allow(clippy::doc_markdown, reason = "this text is --help, where backticks would show")]
    /// Serve the Model Context Protocol on stdin and stdout for an agent:
    /// tools vsh_run, vsh_rerun, vsh_show, vsh_pending, vsh_commit, vsh_discard,
    /// vsh_revert and vsh_wait (no approve tool: the operator approves with `vsh approve`;
    /// vsh_wait waits for it). Without
    /// --workspace, the workspace is the one root the client offers (or the
    /// root holding the current directory), else the one found from here.
    #[command(visible_alias = "mcp")]
    Serve(ServeArgs),
    /// Check what this machine and workspace give vsh: the kernel's Landlock
    /// and seccomp, the worker's sandbox, a confined worker running a program,
    /// the authority key, the data directory, policy and recovery; each finding
    /// says what to do when something is missing (exit 1 if anything failed).
    Doctor(Common),
    /// Approve a pending transaction.
    Approve(ApproveArgs),
    /// Reject a transaction that waits: pending, approved or an auto-approved
    /// preview (one already rejected, denied, expired, stale or failed is
    /// left as it is: exit 0), with every other run of the same work (`vsh
    /// rerun`) that could still commit, each named. `discard` is another name
    /// for it (MCP's `vsh_discard` rejects the one run it names).
    #[command(visible_alias = "discard")]
    Reject(RejectArgs),
    /// Commit an approved transaction or an auto-approved preview, exactly
    /// once (revalidated against the live workspace first: stale work
    /// writes nothing, exit 6).
    Commit(CommitArgs),
    /// Finish or roll back interrupted commits; with --restore, put a
    /// transaction that recovery left unresolved back into its before state,
    /// or with --keep, keep the workspace as it is.
    Recover(RecoverArgs),
    /// Copy the example workspace to a temporary directory, preview a program
    /// there, commit it, and print both receipts.
    Demo {
        /// Print the receipts as JSON (vsh.demo/1) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print the guide to writing a program: the Python subset, the vsh_*
    /// functions, what does not work and what to use instead, the limits.
    Guide,
    /// Print a completion script for a shell (for example
    /// `vsh completions bash > ~/.local/share/bash-completion/completions/vsh`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the JSON Schema of a --json document (vsh.receipt/1, vsh.error/1,
    /// ...), or list their names; the schemas are also in docs/json/.
    Schema {
        /// The document's schema name; without it, list the names.
        #[arg(value_name = "NAME")]
        name: Option<String>,
        /// Write every schema into this directory instead (`cargo xtask schemas`).
        #[arg(long, value_name = "DIR", conflicts_with = "name")]
        write: Option<PathBuf>,
    },
    /// Print the man page (roff) on stdout (`vsh man | man -l -`); `cargo
    /// xtask man` writes it to `docs/vsh.1`.
    Man,
}

impl Command {
    /// The command's `--detailed-exitcode`: `None` for the commands whose
    /// result is not a transaction's state, which do not take it.
    pub(crate) fn state_exit(&self) -> Option<&StateExit> {
        match self {
            Self::Run(run) => Some(&run.options.state_exit),
            Self::Exec(exec) => Some(&exec.options.state_exit),
            Self::Rerun(rerun) => Some(&rerun.state_exit),
            Self::Revert(revert) => Some(&revert.state_exit),
            Self::Show(show) => Some(&show.state_exit),
            Self::Commit(commit) => Some(&commit.state_exit),
            _ => None,
        }
    }

    /// Whether the command asked for JSON output (errors are JSON then too).
    pub(crate) fn json(&self) -> bool {
        match self {
            Self::Policy { action: PolicyAction::Check { json, .. } } | Self::Demo { json } => *json,
            Self::Guide | Self::Completions { .. } | Self::Man | Self::Schema { .. } => false,
            other => other.common().is_some_and(|common| common.json),
        }
    }

    /// The options of a command that works on a workspace.
    fn common(&self) -> Option<&Common> {
        Some(match self {
            Self::Init(init) => &init.common,
            Self::Run(run) => &run.common,
            Self::Exec(exec) => &exec.options.common,
            Self::Rerun(rerun) => &rerun.stored.common,
            Self::Revert(revert) => &revert.stored.common,
            Self::Gc(gc) => &gc.common,
            Self::Pending(common)
            | Self::Doctor(common)
            | Self::Serve(ServeArgs { common, .. })
            | Self::Policy { action: PolicyAction::Show(common) } => common,
            Self::Log(log) => &log.common,
            Self::Show(show) => &show.stored.common,
            Self::Reject(reject) => &reject.stored.common,
            Self::Approve(approve) => &approve.stored.common,
            Self::Commit(commit) => &commit.stored.common,
            Self::Recover(recover) => &recover.common,
            Self::Policy { action: PolicyAction::Check { .. } }
            | Self::Demo { .. }
            | Self::Guide
            | Self::Completions { .. }
            | Self::Man
            | Self::Schema { .. } => return None,
        })
    }

    /// [`Self::common`], to change.
    pub(crate) fn common_mut(&mut self) -> Option<&mut Common> {
        Some(match self {
            Self::Init(init) => &mut init.common,
            Self::Run(run) => &mut run.options.common,
            Self::Exec(exec) => &mut exec.options.common,
            Self::Rerun(rerun) => &mut rerun.stored.common,
            Self::Revert(revert) => &mut revert.stored.common,
            Self::Gc(gc) => &mut gc.common,
            Self::Pending(common)
            | Self::Doctor(common)
            | Self::Serve(ServeArgs { common, .. })
            | Self::Policy { action: PolicyAction::Show(common) } => common,
            Self::Log(log) => &mut log.common,
            Self::Show(show) => &mut show.stored.common,
            Self::Reject(reject) => &mut reject.stored.common,
            Self::Approve(approve) => &mut approve.stored.common,
            Self::Commit(commit) => &mut commit.stored.common,
            Self::Recover(recover) => &mut recover.common,
            Self::Policy { action: PolicyAction::Check { .. } }
            | Self::Demo { .. }
            | Self::Guide
            | Self::Completions { .. }
            | Self::Man
            | Self::Schema { .. } => return None,
        })
    }
}

/// `--detailed-exitcode`, on the commands whose result is a transaction's state.
#[derive(Debug, Args)]
pub(crate) struct StateExit {
    /// Exit with the transaction's state (0 committed, 3 auto-approved, 4
    /// pending, 5 denied, 6 stale, 7 rejected, expired or rolled back) instead
    /// of whether the command did what it was asked.
    #[arg(long)]
    pub(crate) detailed_exitcode: bool,
}

/// Options every workspace command takes.
#[derive(Debug, Args)]
pub(crate) struct Common {
    /// The workspace directory (default: the nearest directory at or above
    /// the current one that holds a .vsh directory, as git finds a repository,
    /// but not one above the git repository you are in that is itself in no
    /// repository and has no recorded policy; else the top of the git repository the current directory
    /// is in, if it is not your home directory and its .git is yours; else
    /// the current directory).
    #[arg(short, long, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The directory vsh keeps a workspace's own data in.
pub(crate) const VSH_DIR: &str = ".vsh";

/// Whether `dir` is a workspace (it holds a `.vsh` directory).
pub(crate) fn is_workspace(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join(VSH_DIR)).is_ok_and(|meta| meta.is_dir())
}

/// Whether `dir` is a workspace whose `.vsh` this user owns: the only kind
/// vsh finds by itself (as git's `safe.directory` asks of a `.git`), so
/// another user's `/tmp/.vsh` never takes over the runs under `/tmp`.
pub(crate) fn is_own_workspace(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::symlink_metadata(dir.join(VSH_DIR))
        .is_ok_and(|meta| meta.is_dir() && meta.uid() == vsh::lower::vsh_sandbox::effective_uid())
}

/// An error when `dir` holds a `.vsh` another user owns: its data is never
/// used (nor written), whoever planted it.
pub(crate) fn refuse_anothers_workspace(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    match std::fs::symlink_metadata(dir.join(VSH_DIR)) {
        Ok(meta) if meta.uid() != vsh::lower::vsh_sandbox::effective_uid() => Err(format!(
            "{} belongs to another user (uid {}): vsh uses only its own data; give --workspace a directory of yours",
            dir.join(VSH_DIR).display(),
            meta.uid()
        )),
        _ => Ok(()),
    }
}

/// The nearest workspace at or above `dir` whose `.vsh` this user owns,
/// never the filesystem root.
pub(crate) fn workspace_at_or_above(dir: &Path) -> Option<&Path> {
    dir.ancestors().filter(|dir| dir.parent().is_some()).find(|dir| is_own_workspace(dir))
}

/// The top of the git repository `dir` is in (the nearest directory at or
/// above it holding a repository, [`a_repository_at`]), when it is one vsh may
/// take for a workspace: never the filesystem root or the home directory
/// (a home kept in git is not a project), and only a `.git` this user owns
/// (as git's `safe.directory` asks: another user's `/tmp/.git` must not
/// choose the workspace).
pub(crate) fn repository_at_or_above(dir: &Path) -> Option<&Path> {
    use std::os::unix::fs::MetadataExt as _;
    let top = dir.ancestors().find(|dir| a_repository_at(dir))?;
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let owned = std::fs::symlink_metadata(top.join(".git"))
        .is_ok_and(|meta| meta.uid() == vsh::lower::vsh_sandbox::effective_uid());
    (top.parent().is_some() && home.as_deref() != Some(top) && owned).then_some(top)
}

/// Whether `dir` holds a git repository as git takes one: a `.git`
/// directory with a `HEAD` file, or a `.git` file naming one (`gitdir:`, a
/// submodule's or a worktree's). An empty `.git`, a stray file or a broken
/// link is none (sec63 D1: any entry named `.git` passed a workspace over).
fn a_repository_at(dir: &Path) -> bool {
    let git = dir.join(".git");
    if git.join("HEAD").is_file() {
        return true;
    }
    std::fs::symlink_metadata(&git).is_ok_and(|meta| meta.is_file() && meta.len() <= 4096)
        && std::fs::read(&git).is_ok_and(|bytes| bytes.starts_with(b"gitdir: "))
}

/// The workspace vsh finds from `cwd`: the nearest workspace at or above
/// it, else the top of the git repository it is in, else `cwd`. A git
/// repository is a project: a workspace above its top that is in no
/// repository itself and has no recorded policy (a directory of projects,
/// made a workspace by a run there, not by `vsh init`) does not take the
/// projects below it (ux58 1: one `vsh run` in the projects' directory took
/// every project's `init` and builds); one in a repository (the
/// superproject of a submodule), or whose policy was recorded, does (sec63
/// D1: a repository unpacked into an initialised workspace must not escape
/// its policy).
pub(crate) fn found_workspace(cwd: &Path) -> &Path {
    let workspace = workspace_at_or_above(cwd);
    let repository = repository_at_or_above(cwd);
    match (workspace, repository) {
        (Some(workspace), Some(top))
            if workspace != top
                && top.starts_with(workspace)
                && repository_at_or_above(workspace).is_none()
                && !records_a_policy(workspace) =>
        {
            top
        }
        (Some(workspace), _) => governing_workspace(workspace),
        (None, Some(top)) => top,
        (None, None) => cwd,
    }
}

/// Whether the workspace at `dir` records a policy of its own (`vsh init`
/// made it; a `.vsh` a command made implicitly records none).
fn records_a_policy(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join(".vsh/data/policy.toml")).is_ok()
}

/// The workspace whose policy governs `workspace`: itself, unless it records
/// no policy and lies inside a workspace that records one (sec66 S2: a
/// `.vsh` made through a bind mount of a workspace's directory, or by an
/// older vsh, took that directory out of the workspace's strict policy,
/// silently). Only `vsh init` makes a workspace inside another.
fn governing_workspace(workspace: &Path) -> &Path {
    if records_a_policy(workspace) {
        return workspace;
    }
    workspace
        .ancestors()
        .skip(1)
        .filter(|dir| dir.parent().is_some())
        .find(|dir| is_own_workspace(dir) && records_a_policy(dir))
        .unwrap_or(workspace)
}

/// The workspace `dir` lies inside, when vsh run there would find that one
/// rather than make `dir` a workspace of its own (a workspace above a git
/// repository that [`found_workspace`] passes over is no such one): a
/// `--workspace DIR` naming a directory of a workspace most likely meant
/// that workspace (ux61 3).
pub(crate) fn enclosing_workspace(dir: &Path) -> Option<PathBuf> {
    if is_workspace(dir) && records_a_policy(dir) {
        return None;
    }
    let real = std::fs::canonicalize(dir).ok()?;
    let found = found_workspace(&real);
    (found != real && is_own_workspace(found)).then(|| found.to_path_buf())
}

/// The workspace above the git repository `cwd` is in that
/// [`found_workspace`] passed over, if there is one.
pub(crate) fn passed_over_workspace(cwd: &Path) -> Option<&Path> {
    let found = found_workspace(cwd);
    workspace_at_or_above(cwd).filter(|workspace| *workspace != found)
}

impl Common {
    /// The workspace: `--workspace`, else the nearest directory at or above
    /// the current one holding `.vsh`, else the top of the git repository
    /// holding the current one (a workspace is the project, and `git` run in
    /// it must find its repository), else the current directory.
    pub(crate) fn root(&self) -> PathBuf {
        if let Some(dir) = &self.workspace {
            return dir.clone();
        }
        let Ok(cwd) = std::env::current_dir() else { return PathBuf::from(".") };
        found_workspace(&cwd).to_path_buf()
    }

    /// The workspace, which must be one already (vsh has run there): for the
    /// commands that read or act on stored work, which never make one.
    pub(crate) fn existing_root(&self) -> Result<PathBuf, String> {
        let root = self.root();
        if is_workspace(&root) {
            // A `.vsh` inside a workspace whose policy governs it is not one
            // of its own (sec66 S2): named, not used.
            if self.workspace.is_some()
                && let Some(enclosing) = enclosing_workspace(&root)
            {
                return Err(format!(
                    "{} holds a .vsh with no policy of its own inside the workspace at {}, whose policy governs \
                     it: give --workspace {}, or `vsh init --workspace {}` to make it a workspace of its own",
                    root.display(),
                    enclosing.display(),
                    enclosing.display(),
                    root.display()
                ));
            }
            return Ok(root);
        }
        Err(match &self.workspace {
            Some(dir) => match enclosing_workspace(dir) {
                Some(enclosing) => format!(
                    "{} is not a vsh workspace: it lies inside the workspace at {}; give --workspace {}",
                    dir.display(),
                    enclosing.display(),
                    enclosing.display()
                ),
                None => format!(
                    "{} is not a vsh workspace (it has no .vsh); `vsh init` or `vsh run` makes one",
                    dir.display()
                ),
            },
            // Where vsh would refuse to make one (`/`, a home, `/tmp`), it
            // does not suggest making one.
            None if crate::refuse_as_a_new_workspace(&root).is_err() => format!(
                "not in a vsh workspace: neither {} nor any directory above it has a .vsh; run vsh in a \
                 project's directory (cd there, or give --workspace DIR)",
                root.display()
            ),
            None => match std::env::current_dir().ok().as_deref().and_then(passed_over_workspace) {
                Some(above) => format!(
                    "not in a vsh workspace: {} is a git repository without a .vsh of its own; the workspace at \
                     {} above it is a directory of projects, not this one: `vsh init` makes this project one, or \
                     give --workspace {} for that one",
                    root.display(),
                    above.display(),
                    above.display()
                ),
                None => format!(
                    "not in a vsh workspace: neither {} nor any directory above it has a .vsh; \
                     `vsh init` or `vsh run` makes one, or give --workspace",
                    root.display()
                ),
            },
        })
    }
}

/// How long a command that must take the commit lock waits for it.
#[derive(Debug, Args)]
pub(crate) struct LockArgs {
    /// Give up after this many seconds while another vsh process commits or
    /// recovers the workspace (exit 75).
    #[arg(long, value_name = "SECS", env = "VSH_LOCK_TIMEOUT", default_value = "60", value_parser = seconds)]
    pub(crate) lock_timeout: Duration,
}

/// A command about one stored transaction.
#[derive(Debug, Args)]
pub(crate) struct Stored {
    /// The transaction: its id, or a unique prefix of at least 6 of its hex digits.
    #[arg(value_name = "TX")]
    pub(crate) transaction: String,
    #[command(flatten)]
    pub(crate) common: Common,
}

/// `vsh reject`.
#[derive(Debug, Args)]
pub(crate) struct RejectArgs {
    #[command(flatten)]
    pub(crate) stored: Stored,
    /// More transactions to reject the same way, one after another (every
    /// name must name one before any is rejected; not with --json).
    #[arg(value_name = "TX", conflicts_with = "json")]
    pub(crate) more: Vec<String>,
    /// Reject this run alone, not the other runs of the same work (`vsh
    /// rerun`): to drop an old run and keep its rerun.
    #[arg(long)]
    pub(crate) only: bool,
}

/// `vsh show`.
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    #[command(flatten)]
    pub(crate) stored: Stored,
    #[command(flatten)]
    pub(crate) state_exit: StateExit,
    /// Every changed text file's hunks, up to 64 MiB a file and 1 GiB of
    /// hunks in all (without it: 128 KiB a file and 1 MiB of hunks in all;
    /// the files past either are listed without hunks, and a line on stderr,
    /// and a warning in --json, says so).
    #[arg(long, conflicts_with = "stat")]
    pub(crate) full: bool,
    /// Only each changed path, its kind and its states: no hunks, every
    /// path listed (to read a large change's shape first).
    #[arg(long)]
    pub(crate) stat: bool,
    /// Show, for your eyes at this terminal, the hunks the policy withholds
    /// from programs and agents (what a run wrote where reads are protected,
    /// what work made under a per-run policy touched). Never offered to an
    /// agent: MCP's `vsh_show` withholds them.
    #[arg(long, conflicts_with = "stat")]
    pub(crate) protected: bool,
    /// Only these changed paths (a directory: every changed path beneath
    /// it), as paths of the workspace.
    #[arg(value_name = "PATH")]
    pub(crate) paths: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ApproveArgs {
    #[command(flatten)]
    pub(crate) stored: Stored,
    /// Who approves, recorded as a digest of the name (default: $USER, else uid:N).
    #[arg(long, value_name = "NAME")]
    pub(crate) principal: Option<String>,
    /// How long the approval lasts (15m, 2h, 900 seconds); at most 30 days.
    /// Not committed by then, the work waits for an approval again.
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = approval_window)]
    pub(crate) ttl: Duration,
    /// Commit it at once, once approved (`vsh approve TX && vsh commit TX`
    /// in one): prints the commit's receipt, and exits as `vsh commit` does.
    #[arg(long)]
    pub(crate) commit: bool,
}

/// `vsh policy`.
#[derive(Debug, Subcommand)]
pub(crate) enum PolicyAction {
    /// Print the workspace's effective policy as a policy file (TOML, every
    /// threshold written out), to start a policy file from.
    Show(Common),
    /// Check a policy file: print its digest and profile, or the first error
    /// with the field it is in.
    Check {
        /// The policy file.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Print JSON (vsh.policy-check/1) instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `vsh serve`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    #[command(flatten)]
    pub(crate) lock: LockArgs,
    /// Each run's budget, and the most an agent's run may ask for (it can
    /// only lower these).
    #[command(flatten)]
    pub(crate) budget: BudgetArgs,
    /// The most characters of each text a tool result carries (stdout, the
    /// value, the program, all hunks together, each path list's JSON);
    /// longer texts keep their head and tail, lists their first paths, and
    /// the result says what was cut.
    #[arg(long, value_name = "N", default_value_t = 65_536, value_parser = clap::value_parser!(u32).range(256..=16_777_216))]
    pub(crate) max_text: u32,
    /// Let agents run real commands: `vsh_run`'s language "command" (the
    /// program is the argv as a JSON array) and a Monty program's `vsh_exec`,
    /// each confined in a candidate of the workspace (needs what vsh exec
    /// needs; see vsh doctor).
    #[arg(long)]
    pub(crate) commands: bool,
    #[command(flatten)]
    pub(crate) command: CommandArgs,
}

/// A run's budget, in an operator's units (unset: the default budget).
#[derive(Debug, Args)]
pub(crate) struct BudgetArgs {
    /// The longest the program may run (30s, 1m 30s, 500ms; default 1 s for a
    /// program, 10 min for a real command); the request around it gets a
    /// second more to wind down, and at least its default (10 s, 10 min 30 s).
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub(crate) timeout: Option<Duration>,
    /// The most file-system and vsh_* calls the program may make.
    #[arg(long, value_name = "N")]
    pub(crate) max_os_calls: Option<u64>,
    /// The most output the program may print (1MiB, 64KiB, 4096).
    #[arg(long, value_name = "SIZE", value_parser = size)]
    pub(crate) max_output: Option<u64>,
    /// The most memory the program may use (256MiB, 1GiB); for a real command,
    /// each of its processes' private memory (a data rlimit; 8GiB unless set).
    #[arg(long, value_name = "SIZE", value_parser = size)]
    pub(crate) max_memory: Option<u64>,
}

impl BudgetArgs {
    /// The default budget with what was given.
    pub(crate) fn budget(&self) -> vsh::ExecutionBudget {
        self.budget_over(vsh::ExecutionBudget::default())
    }

    /// `base` with what was given.
    pub(crate) fn budget_over(&self, base: vsh::ExecutionBudget) -> vsh::ExecutionBudget {
        let mut budget = base;
        if let Some(timeout) = self.timeout {
            budget.max_duration = timeout;
            // The program's own time and its commands' alike, when apart.
            if budget.max_command_duration.is_some() {
                budget.max_command_duration = Some(timeout);
            }
            // The program's own clock ends it first, with its output; the
            // request's deadline is the backstop for waiting and winding down.
            budget.max_request_duration =
                budget.max_request_duration.max(timeout.saturating_add(Duration::from_secs(1)));
        }
        if let Some(calls) = self.max_os_calls {
            budget.max_os_calls = calls;
        }
        if let Some(bytes) = self.max_output {
            budget.max_output_bytes = bytes;
        }
        if let Some(bytes) = self.max_memory {
            budget.max_memory_bytes = bytes;
        }
        budget
    }
}

/// The longest an approval may last.
const MAX_APPROVAL_WINDOW: Duration = Duration::from_hours(30 * 24);

/// An approval's window: a duration (`15m`, `2h`) or bare seconds, more than
/// zero and at most [`MAX_APPROVAL_WINDOW`].
fn approval_window(text: &str) -> Result<Duration, String> {
    let window = match text.trim().parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => positive_duration(text)?,
    };
    if window.is_zero() || window > MAX_APPROVAL_WINDOW {
        return Err(format!("{text:?}: an approval lasts more than no time and at most 30 days"));
    }
    Ok(window)
}

impl ApproveArgs {
    /// The approving principal's name: `--principal`, else the user's.
    pub(crate) fn principal(&self) -> String {
        self.principal.clone().unwrap_or_else(default_principal)
    }
}

/// The approving principal's name when none is given: `$USER`, else `uid:N`.
pub(crate) fn default_principal() -> String {
    std::env::var("USER")
        .ok()
        .filter(|user| !user.is_empty())
        .unwrap_or_else(|| format!("uid:{}", vsh::lower::vsh_sandbox::effective_uid()))
}

/// A duration an operator writes (`30s`, `1m 30s`, `500ms`), more than zero.
fn positive_duration(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(duration) if duration.is_zero() => Err(format!("{text:?} is no time at all")),
        Ok(duration) => Ok(duration),
        Err(error) => Err(error.to_string()),
    }
}

/// A size in bytes, in policy files' syntax (`512`, `64KiB`, `1MiB`).
fn size(text: &str) -> Result<u64, String> {
    vsh::lower::vsh_policy::parse_size(text).map_err(|problem| format!("{text:?}: {problem}"))
}

#[derive(Debug, Args)]
pub(crate) struct GcArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Also clear real commands' scratch directories (build outputs and
    /// caches such as `target/`) whatever their size; the next build starts
    /// from nothing. Left alone while a run uses them.
    #[arg(long)]
    pub(crate) scratch: bool,
    /// Delete content nothing needs once it is this old (default 24h): what
    /// rejected, expired or discarded work stored is freed after it. Never
    /// less than 20m, twice the age at which a run stores content again
    /// rather than rely on a copy gc might take meanwhile.
    #[arg(long, value_name = "DURATION", value_parser = grace_duration)]
    pub(crate) grace: Option<Duration>,
}

/// `vsh gc --grace`: a duration of at least twenty minutes.
fn grace_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|error| error.to_string())?;
    let least = Duration::from_millis(2 * vsh::lower::vsh_store::REFRESH_AFTER_MS);
    if duration < least {
        return Err(format!("{text:?} is less than 20m: a run in progress may need what it stored"));
    }
    Ok(duration)
}

#[derive(Debug, Args)]
pub(crate) struct LogArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Only transactions in this state: committed, rejected, expired,
    /// stale, failed or denied (work that waits is vsh pending's).
    #[arg(long, value_name = "STATE", value_parser = finished_state)]
    pub(crate) state: Option<String>,
    /// At most this many, newest first.
    #[arg(long, value_name = "N", default_value = "20", value_parser = at_least_one)]
    pub(crate) limit: u64,
}

#[expect(clippy::struct_excessive_bools, reason = "independent command-line switches, one flag each")]
#[derive(Debug, Args)]
pub(crate) struct RerunArgs {
    #[command(flatten)]
    pub(crate) stored: Stored,
    #[command(flatten)]
    pub(crate) state_exit: StateExit,
    /// Preview only, or commit when auto-approved.
    #[arg(long, value_enum, default_value = "preview")]
    pub(crate) mode: Mode,
    /// Print each changed path's hunks (the review) too; without it the
    /// changed paths are listed (at most 50; vsh show lists them all, with
    /// their hunks).
    #[arg(long)]
    pub(crate) full: bool,
    #[command(flatten)]
    pub(crate) again: RerunCommands,
    /// A Bash program's or a real command's non-zero exit status is its
    /// outcome, as `run --accept-failure` makes it (asked again: the first
    /// run's choice is not kept).
    #[arg(long)]
    pub(crate) accept_failure: bool,
    /// Run it even though it was run again already and that run is
    /// committed or waiting (without it, vsh refuses: its work would be
    /// done twice; runs of it are looked for among the newest 1,000
    /// records made since it).
    #[arg(long = "again")]
    pub(crate) once_more: bool,
    /// Approve the new run at once when it waits for a review, TX went
    /// stale or lapsed waiting for one (no run of its work rejected, its
    /// policy still the workspace's), and its changes are byte for byte TX's
    /// (the same paths, each found and left holding the same bytes and
    /// mode): the review TX was waiting for holds for it (an edit of a file
    /// the work only looked at made TX stale). Otherwise it waits, as any
    /// run. The approval is recorded as `vsh approve` records one ($USER,
    /// else uid:N; 15 minutes).
    #[arg(long)]
    pub(crate) approve_same: bool,
    #[command(flatten)]
    pub(crate) scratch: ScratchArgs,
    /// The run's budget: a real command, real Bash or a Monty program with
    /// --commands gets a command's (10 min), anything else a program's.
    #[command(flatten)]
    pub(crate) budget: BudgetArgs,
    #[command(flatten)]
    pub(crate) command: CommandArgs,
    #[command(flatten)]
    pub(crate) lock: LockArgs,
}

/// `vsh revert`.
#[derive(Debug, Args)]
pub(crate) struct RevertArgs {
    #[command(flatten)]
    pub(crate) stored: Stored,
    #[command(flatten)]
    pub(crate) state_exit: StateExit,
    /// Preview only (review it, then vsh commit), or commit when auto-approved.
    #[arg(long, value_enum, default_value = "preview")]
    pub(crate) mode: Mode,
    /// Print each changed path's hunks (the review) too.
    #[arg(long)]
    pub(crate) full: bool,
    #[command(flatten)]
    pub(crate) lock: LockArgs,
}

/// How a rerun's real commands run: whether a Monty program gets them, and
/// with whose grants.
#[derive(Debug, Args)]
pub(crate) struct RerunCommands {
    /// Let a Monty program run real commands, as `vsh run --commands` lets it
    /// (one that ran with them gets them again without it). A real
    /// command (vsh exec) and a Bash program that ran in real bash (run
    /// --confined) run as they did without it. Their commands get the first
    /// run's grants again (its tools, network, ports and unix sockets, and
    /// each of its variables from vsh's own environment when the value is
    /// the first run's, which vsh checks by a keyed digest: it keeps no
    /// value), and this command line's (--env, --tool, ...) besides.
    #[arg(long)]
    pub(crate) commands: bool,
    /// Grant the commands only what this command line gives (--env, --tool,
    /// ...), not the first run's grants too.
    #[arg(long)]
    pub(crate) no_first_grants: bool,
}

#[derive(Debug, Args)]
pub(crate) struct CommitArgs {
    #[command(flatten)]
    pub(crate) stored: Stored,
    #[command(flatten)]
    pub(crate) state_exit: StateExit,
    #[command(flatten)]
    pub(crate) lock: LockArgs,
}

#[derive(Debug, Args)]
pub(crate) struct RecoverArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Put this unresolved transaction's paths back into their before state;
    /// whatever is in the way is moved aside under .vsh/recovered/, never deleted.
    #[arg(long, value_name = "TX", conflicts_with = "keep")]
    pub(crate) restore: Option<String>,
    /// Resolve this unresolved transaction by keeping the workspace as it is
    /// (after checking it, or setting it right by hand): nothing is put
    /// back; what the commit had moved aside is kept under .vsh/recovered/.
    #[arg(long, value_name = "TX")]
    pub(crate) keep: Option<String>,
    /// First salvage a damaged transaction log (every command fails with
    /// "transaction log is corrupt"): keep the records before the damage,
    /// void whatever of them could still be committed (vsh rerun makes it
    /// again), and keep the damaged log's bytes in .vsh/data/txlog.damaged.N.
    /// A whole log is left as it is.
    #[arg(long, conflicts_with_all = ["restore", "keep"])]
    pub(crate) salvage_log: bool,
    #[command(flatten)]
    pub(crate) lock: LockArgs,
}

/// A program's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LanguageArg {
    /// Monty, a Python subset (the default, except for a .sh file).
    Monty,
    /// Bash, in the bounded virtual interpreter (vsh-bash-bounded-v1).
    Bash,
}

/// What network real commands reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum NetworkArg {
    /// A private network of their own with only a loopback interface.
    Loopback,
    /// The host's network, unrestricted.
    All,
}

impl NetworkArg {
    pub(crate) fn access(self) -> vsh::lower::vsh_sandbox::NetworkAccess {
        match self {
            Self::Loopback => vsh::lower::vsh_sandbox::NetworkAccess::Loopback,
            Self::All => vsh::lower::vsh_sandbox::NetworkAccess::All,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Mode {
    /// Compute the diff and decision; write nothing.
    Preview,
    /// Commit at once when policy auto-approves.
    Auto,
}

impl From<Mode> for vsh::RunMode {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Preview => Self::Preview,
            Mode::Auto => Self::Auto,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Profile {
    Balanced,
    Strict,
    Paranoid,
}

impl Profile {
    pub(crate) fn policy_profile(self) -> PolicyProfile {
        match self {
            Self::Balanced => PolicyProfile::Balanced,
            Self::Strict => PolicyProfile::Strict,
            Self::Paranoid => PolicyProfile::Paranoid,
        }
    }
}

/// `vsh init`.
#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// The built-in profile the workspace uses.
    #[arg(long, value_enum, ignore_case = true, conflicts_with = "policy", default_value = "balanced")]
    pub(crate) profile: Profile,
    /// A policy file (TOML) the workspace uses; its text is recorded.
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// Replace a policy the workspace already records with another.
    #[arg(long)]
    pub(crate) force: bool,
}

/// `vsh log --state`: a finished state; one that waits is `vsh pending`'s
/// (ux82 L6: the refusal listed the finished states alone).
fn finished_state(text: &str) -> Result<String, String> {
    const FINISHED: [&str; 6] = ["committed", "rejected", "expired", "stale", "failed", "denied"];
    if FINISHED.contains(&text) {
        return Ok(text.to_owned());
    }
    let waits = matches!(text, "pending" | "pending-approval" | "approved" | "auto-approved");
    Err(format!(
        "vsh log lists finished work: give one of {}{}",
        FINISHED.join(", "),
        if waits { " (vsh pending lists work that waits)" } else { "" }
    ))
}

/// `vsh log --limit`: a count of at least 1.
fn at_least_one(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(0) => Err("give at least 1".to_owned()),
        Ok(count) => Ok(count),
        Err(_) => Err("give a whole number of at least 1".to_owned()),
    }
}

/// The most re-runs `--retry-stale` asks for.
pub(crate) const MAX_STALE_RETRIES: i64 = 100;

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The program file, or - to read it from stdin.
    #[arg(value_name = "FILE")]
    pub(crate) program: PathBuf,
    /// The program's language (default: bash for a .sh file, else monty).
    #[arg(long, value_enum)]
    pub(crate) language: Option<LanguageArg>,
    /// Let a Monty program run real commands (its `vsh_exec` function):
    /// each runs confined in a candidate of the workspace as the
    /// program has changed it so far, and what it changes is the program's
    /// change (needs what vsh exec needs; see vsh doctor).
    #[arg(long)]
    pub(crate) commands: bool,
    /// Run a Bash program with real /bin/bash (profile vsh-bash-confined-v1)
    /// in a confined candidate of the workspace, as vsh exec runs a command,
    /// instead of vsh's bounded interpreter.
    #[arg(long)]
    pub(crate) confined: bool,
    #[command(flatten)]
    pub(crate) options: RunOptions,
}

/// `vsh exec`: a real command, previewed (or committed) like a program.
#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    #[command(flatten)]
    pub(crate) options: RunOptions,
    /// Give the command this file's text on its standard input (- for vsh's
    /// own), instead of nothing (/dev/null): UTF-8, up to 1 MiB with the
    /// command line, recorded with the transaction as part of its program,
    /// so a commit or a re-run gets the same input (vsh exec --stdin fix.diff
    /// -- patch -p1).
    #[arg(long, value_name = "FILE")]
    pub(crate) stdin: Option<PathBuf>,
    /// The command and its arguments, after `--` (`vsh exec -- cargo fmt`).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(crate) argv: Vec<std::ffi::OsString>,
}

/// What `vsh run` and `vsh exec` share: where, how and under which policy.
#[derive(Debug, Args)]
pub(crate) struct RunOptions {
    #[command(flatten)]
    pub(crate) common: Common,
    #[command(flatten)]
    pub(crate) state_exit: StateExit,
    /// Preview only, or commit when auto-approved.
    #[arg(long, value_enum, default_value = "preview")]
    pub(crate) mode: Mode,
    /// A built-in policy profile for this run, instead of the workspace's policy.
    #[arg(long, value_enum, ignore_case = true, conflicts_with = "policy")]
    pub(crate) profile: Option<Profile>,
    /// A policy file (TOML) for this run, instead of the workspace's policy.
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// Print each changed path's hunks (the review) too; without it the
    /// changed paths are listed (at most 50; vsh show lists them all, with
    /// their hunks).
    #[arg(long)]
    pub(crate) full: bool,
    /// What the program is for, recorded with the transaction.
    #[arg(long, value_name = "TEXT")]
    pub(crate) intent: Option<String>,
    /// With --mode auto: when the workspace changed under the commit, run the
    /// program again on the current workspace, up to N more times (each a new
    /// transaction in the log).
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=MAX_STALE_RETRIES))]
    pub(crate) retry_stale: u32,
    /// A Bash program's or a real command's non-zero exit status is its
    /// outcome: recorded in the receipt, and the work is decided and
    /// committable like any other (without it, a failing run commits
    /// nothing and exits 1; one that was refused an access exits 5 and is
    /// kept as denied work, for `vsh log` and `vsh show`).
    #[arg(long)]
    pub(crate) accept_failure: bool,
    /// Print the program's own output as it printed it (its stdout on
    /// stdout, its stderr on stderr, bytes as they are) instead of the
    /// receipt, and one line on stderr with the transaction, its state and
    /// what to do next: for `vsh exec --raw -- git diff > fix.patch`. A
    /// program that exits non-zero makes vsh exit with its status, whatever
    /// it is (a program's own 4 or 5 too: the line on stderr says which),
    /// unless its work is denied (5) or waits for approval (4); output vsh
    /// had to cut (past --max-output, marked where it was cut) exits 1.
    #[arg(long, conflicts_with = "json")]
    pub(crate) raw: bool,
    #[command(flatten)]
    pub(crate) scratch: ScratchArgs,
    #[command(flatten)]
    pub(crate) command: CommandArgs,
    #[command(flatten)]
    pub(crate) budget: BudgetArgs,
    #[command(flatten)]
    pub(crate) lock: LockArgs,
}

/// How real commands run: their environment, tools and network (`vsh run`,
/// `vsh exec`, `vsh serve`).
#[derive(Debug, Args)]
pub(crate) struct CommandArgs {
    /// Set a variable in real commands' environment (repeatable); they get
    /// PATH, HOME=/tmp, LANG, `GIT_OPTIONAL_LOCKS=0`, `GIT_CONFIG_NOSYSTEM=1`, Python's bytecode
    /// settings (`PYTHONPYCACHEPREFIX` or `PYTHONDONTWRITEBYTECODE`), without
    /// a network `npm_config_fetch_retries=0` and `PIP_RETRIES=0` (a fetch
    /// fails at once), and nothing else of vsh's environment.
    /// NAME is letters, digits and _, not starting with a digit. A variable
    /// that steers a loader or an interpreter is refused: `LD_*`, `DYLD_*`,
    /// `GLIBC_TUNABLES`, `BASH_ENV`, `ENV`, `SHELLOPTS`, `BASHOPTS`,
    /// `PROMPT_COMMAND`, `PS4`, `BASH_FUNC_*`, `PYTHONPATH`, `PYTHONSTARTUP`,
    /// `PYTHONHOME`, `PYTHONUSERBASE`, `PYTHONBREAKPOINT`, `PYTHONWARNINGS`,
    /// `PYTHONINSPECT`, `NODE_OPTIONS`, `NODE_PATH`, `PERL5OPT`, `PERL5LIB`,
    /// `PERLLIB`, `PERL5DB`, `RUBYOPT`, `RUBYLIB`, `CLASSPATH`,
    /// `JAVA_TOOL_OPTIONS`, `_JAVA_OPTIONS`, `JDK_JAVA_OPTIONS`, `LUA_INIT`,
    /// and git's that run commands or inject configuration: `GIT_SSH`,
    /// `GIT_SSH_COMMAND`, `GIT_EXEC_PATH`, `GIT_TEMPLATE_DIR`, `GIT_ASKPASS`,
    /// `GIT_PROXY_COMMAND`, `GIT_EXTERNAL_DIFF`, `GIT_CONFIG_PARAMETERS`,
    /// `GIT_CONFIG_COUNT`, `GIT_CONFIG_GLOBAL`, `GIT_CONFIG_SYSTEM`,
    /// `GIT_CONFIG_KEY_*`, `GIT_CONFIG_VALUE_*`. A command may set one for
    /// itself (`sh -c 'PYTHONPATH=src pytest'`).
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = variable)]
    pub(crate) env: Vec<(String, String)>,
    /// Pass this variable of vsh's own environment to real commands
    /// (repeatable; one that is not set is an error).
    #[arg(long = "pass-env", value_name = "NAME", value_parser = variable_name)]
    pub(crate) pass_env: Vec<String>,
    /// What network real commands reach (default none: no sockets but
    /// socketpair, so no host service either, a unix socket's included):
    /// `loopback`, a private loopback of their own (a test's server and
    /// client reach each other, nothing outside does), or `all`, the host's
    /// network and its unix sockets.
    #[arg(long, value_enum, value_name = "NETWORK")]
    pub(crate) allow_network: Option<NetworkArg>,
    /// Let real commands read and execute from this host directory, at its
    /// own path (repeatable): a toolchain, say `--tool "$(rustc --print
    /// sysroot)"` with `--env PATH=<that>/bin:/usr/bin:/bin`.
    #[arg(long = "tool", value_name = "DIR")]
    pub(crate) tools: Vec<PathBuf>,
    /// Let real commands connect to this TCP port (repeatable; on any host:
    /// the kernel's rule matches ports, not addresses), besides what
    /// --allow-network allows: a database a test needs, say.
    #[arg(long = "allow-port", value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) ports: Vec<u16>,
    /// Let real commands make unix sockets of their own (a test that serves
    /// on one in its /tmp, Python's forkserver). Below Landlock ABI 9 that
    /// also lets them connect to any socket file they can name, a host
    /// daemon's included: vsh warns when the kernel's ABI is older.
    #[arg(long)]
    pub(crate) allow_unix_sockets: bool,
}

/// What a run's real commands find in the scratch directories (`vsh run`,
/// `vsh exec`, `vsh rerun`).
#[derive(Debug, Args)]
pub(crate) struct ScratchArgs {
    /// Start real commands with empty scratch directories (target/ and the
    /// like): a build from nothing earlier runs left there. Runs granted
    /// alike share them, and a run's commands may leave there what a later
    /// one executes (bytecode, a test binary newer than its sources), so a
    /// result that must rest on the workspace alone is built fresh.
    #[arg(long)]
    pub(crate) fresh_scratch: bool,
}

/// `NAME=VALUE`.
fn variable(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) => Ok((variable_name(name)?, value.to_owned())),
        _ => Err(format!("{text:?} is not NAME=VALUE")),
    }
}

/// A variable's name as a shell writes one: a letter or `_`, then letters,
/// digits and `_` (a name a shell cannot write, `BAD NAME` or `1X`, is a
/// mistake, and some programs treat it as garbage).
fn variable_name(name: &str) -> Result<String, String> {
    let mut chars = name.chars();
    let valid = chars.next().is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|rest| rest.is_ascii_alphanumeric() || rest == '_');
    if !valid {
        return Err(format!("{name:?} is not a variable name (letters, digits and _)"));
    }
    // A usage error, refused before anything runs (ux79 L7: it failed the
    // command's start, exit 1).
    if vsh::lower::vsh_sandbox::env_denylisted(std::ffi::OsStr::new(name)) {
        return Err(format!(
            "{name} steers a loader or an interpreter, and vsh grants none; the command may set it for itself, \
             in its candidate: sh -c '{name}=... COMMAND' (or the tool's own setting: pytest's `pythonpath`, a \
             package.json script)"
        ));
    }
    Ok(name.to_owned())
}

impl std::ops::Deref for RunArgs {
    type Target = RunOptions;

    fn deref(&self) -> &RunOptions {
        &self.options
    }
}

impl RunOptions {
    pub(crate) fn mode(&self) -> RunMode {
        match self.mode {
            Mode::Preview => RunMode::Preview,
            Mode::Auto => RunMode::Auto,
        }
    }

    /// The profile this run asks for, if any.
    pub(crate) fn profile(&self) -> Option<PolicyProfile> {
        self.profile.map(Profile::policy_profile)
    }
}

impl RunArgs {
    /// The program's language: `--language`, else bash for a `.sh` file.
    pub(crate) fn language(&self) -> vsh::Language {
        let bash = match self.language {
            Some(language) => language == LanguageArg::Bash,
            None => self.program.extension().is_some_and(|ext| ext == "sh"),
        };
        if bash { vsh::Language::Bash } else { vsh::Language::Monty }
    }
}

/// A non-negative number of seconds (fractions allowed), at most a day.
fn seconds(text: &str) -> Result<Duration, String> {
    let value: f64 = text.trim().parse().map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !value.is_finite() || !(0.0..=86_400.0).contains(&value) {
        return Err(format!("{text:?} must be between 0 and 86400 seconds"));
    }
    Ok(Duration::from_secs_f64(value))
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

    use clap::CommandFactory;

    use super::*;

    fn parse(items: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("vsh").chain(items.iter().copied()))
    }

    #[test]
    fn the_grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    /// `--env`'s help names every variable the sandbox refuses to grant
    /// (ux51: the refusal was documented nowhere a user looks).
    #[test]
    fn the_env_help_names_every_refused_variable() {
        let mut command = Cli::command();
        let exec = command.find_subcommand_mut("exec").unwrap();
        let help = exec.render_long_help().to_string().split_whitespace().collect::<Vec<_>>().join(" ");
        for name in vsh::lower::vsh_sandbox::ENV_DENIED_NAMES {
            assert!(help.contains(&format!("`{name}`")), "{name}");
        }
        for prefix in vsh::lower::vsh_sandbox::ENV_DENIED_PREFIXES {
            assert!(help.contains(&format!("`{prefix}*`")), "{prefix}");
        }
    }

    #[test]
    fn the_readme_shows_the_exit_code_table_of_the_help() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
        assert!(readme.contains(EXIT_CODES), "README.md must hold the table of args::EXIT_CODES verbatim");
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("6   not committed or approved: the workspace changed under it"), "{help}");
    }

    #[test]
    fn parses_run() {
        let Command::Run(run) =
            parse(&["run", "--workspace", "/tmp/w", "--mode", "auto", "--json", "--full", "p.py"]).unwrap().command
        else {
            panic!("not a run");
        };
        assert_eq!(run.common.workspace, Some(PathBuf::from("/tmp/w")));
        assert_eq!(run.mode(), RunMode::Auto);
        assert!(run.full);
        assert!(run.common.json);
        assert_eq!(run.intent, None);
        assert_eq!(run.profile(), None, "the workspace's policy unless a run names one");
        assert_eq!(run.program, PathBuf::from("p.py"));
        assert_eq!(run.lock.lock_timeout, Duration::from_mins(1));
    }

    #[test]
    fn rejects_bad_usage() {
        for bad in [
            &[][..],
            &["run"],
            &["run", "--mode", "yolo", "p.py"],
            &["run", "a.py", "b.py"],
            &["run", "--bogus", "a.py"],
            &["frobnicate"],
            &["run", "--profile", "lax", "a.py"],
            &["approve"],
            &["pending", "abc"],
            &["approve", "abc", "--ttl", "0"],
            &["reject", "abc", "--principal", "x"],
            &["commit", "abc", "--lock-timeout", "-1"],
            &["commit", "abc", "--lock-timeout", "soon"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        // `discard`, MCP's word, is `reject` (ux57).
        assert!(matches!(parse(&["discard", "abc"]).unwrap().command, Command::Reject(_)));
        // What MCP users type (ux75 L6).
        assert!(matches!(parse(&["mcp"]).unwrap().command, Command::Serve(_)));
        // A grace of no time says the least there is (ux55).
        for short in ["0s", "5m"] {
            let error = parse(&["gc", "--grace", short]).unwrap_err().to_string();
            assert!(error.contains("is less than 20m"), "{error}");
        }
        let Command::Approve(approve) =
            parse(&["approve", "abc", "--principal", "ann", "--ttl=60", "-w", "/w"]).unwrap().command
        else {
            panic!("not an approval");
        };
        assert_eq!(approve.stored.transaction, "abc");
        assert_eq!((approve.principal(), approve.ttl), ("ann".to_owned(), Duration::from_mins(1)));
        assert_eq!(approve.stored.common.workspace, Some(PathBuf::from("/w")));
        let Command::Run(run) = parse(&["run", "--profile", "Strict", "a.py"]).unwrap().command else {
            panic!("not a run");
        };
        assert_eq!(run.profile(), Some(PolicyProfile::Strict));
        let Command::Run(run) = parse(&["run", "--policy", "p.toml", "a.py"]).unwrap().command else {
            panic!("not a run");
        };
        assert_eq!(run.policy, Some(PathBuf::from("p.toml")));
        assert!(parse(&["run", "--profile", "strict", "--policy", "p.toml", "a.py"]).is_err(), "one or the other");
        assert!(parse(&["init", "--profile", "strict", "--policy", "p.toml"]).is_err(), "one or the other");
        let Command::Init(init) = parse(&["init", "--profile", "paranoid", "-w", "/w"]).unwrap().command else {
            panic!("not an init");
        };
        assert_eq!(init.profile.policy_profile(), PolicyProfile::Paranoid);
        let Command::Recover(recover) =
            parse(&["recover", "--restore", "abc", "--lock-timeout", "0.5"]).unwrap().command
        else {
            panic!("not a recovery");
        };
        assert_eq!(recover.restore.as_deref(), Some("abc"));
        assert_eq!(recover.lock.lock_timeout, Duration::from_millis(500));
    }

    #[test]
    fn paths_that_are_not_utf8_parse_as_paths() {
        let workspace = OsString::from_vec(b"ws\xff".to_vec());
        let arguments = [OsString::from("vsh"), "run".into(), "--workspace".into(), workspace.clone(), "-".into()];
        let Command::Run(run) = Cli::try_parse_from(arguments).unwrap().command else { panic!("not a run") };
        assert_eq!(run.common.workspace.as_deref().map(std::path::Path::as_os_str), Some(workspace.as_os_str()));
        assert_eq!(run.program.as_os_str(), "-");
        // A transaction id is text: bytes that are not UTF-8 are a usage error.
        let arguments = [OsString::from("vsh"), "show".into(), OsString::from_vec(b"\xff".to_vec())];
        assert_eq!(Cli::try_parse_from(arguments).unwrap_err().exit_code(), 2);
    }
}
