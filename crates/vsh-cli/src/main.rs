//! The `vsh` command line: run agent programs against a virtual image of a
//! workspace, preview or commit their changes, and print receipts.
//!
//! Exit codes tell a script what happened without parsing output (the table
//! is `args::EXIT_CODES`): 0 whenever the command did what it was asked,
//! distinct codes only where it did not (awaiting approval, denied, stale,
//! busy, error, usage); `--detailed-exitcode` exits with the state instead.
// The command line reads the files an operator names and scaffolds the demo's workspace by path.
#![allow(clippy::disallowed_methods)]
#![forbid(unsafe_code)]

/// `eprintln!` that never panics: a stderr that cannot be written (a full
/// device, a reader gone) loses the message, never the command or its
/// result.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` that never panics (see `say!`).
macro_rules! say_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

mod args;
mod demo;
mod doctor;
mod documents;
mod failure;
mod interrupt;
mod listing;
mod render;
mod serve;
mod serve_gate;
mod show;

use std::io::Read;

use clap::Parser as _;
use std::process::ExitCode;

use vsh::{RunRequest, Runtime, RuntimeConfig, RuntimeDecision, TransactionState};

use crate::args::{Command, InitArgs, RunArgs};

/// Exit code: the command did what it was asked (with `--detailed-exitcode`:
/// the transaction was committed).
const EXIT_OK: u8 = 0;
/// Exit code: an error.
const EXIT_ERROR: u8 = 1;
/// Exit code: a usage error (clap's own, and a name that cannot name a transaction).
const EXIT_USAGE: u8 = 2;
/// Exit code with `--detailed-exitcode`: an auto-approved preview (nothing written).
const EXIT_AUTO_APPROVED: u8 = 3;
/// Exit code: not committed, the transaction awaits approval.
const EXIT_PENDING: u8 = 4;
/// Exit code: not committed, policy denied the transaction.
const EXIT_DENIED: u8 = 5;
/// Exit code: not committed, the workspace changed under the transaction.
const EXIT_STALE: u8 = 6;
/// Exit code with `--detailed-exitcode`: not committed and never will be
/// (rejected, expired, or its commit failed and was rolled back).
const EXIT_CLOSED: u8 = 7;
/// Exit code: another vsh process held the commit lock for longer than
/// `--lock-timeout` (`EX_TEMPFAIL`: try again later).
const EXIT_BUSY: u8 = 75;

/// `docs/guest.md`, which `vsh guide` prints.
const GUIDE: &str = include_str!("../../../docs/guest.md");

/// `--quiet`, for the notices printed where the output options do not reach
/// (a workspace made by opening it).
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The workspace this invocation opened, for messages that must say which
/// (a transaction looked for in the wrong one).
pub(crate) static OPENED: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// The argument that makes this binary serve as its own confined Monty worker.
const WORKER_ARGUMENT: &str = "__vsh-monty-worker";

// The worker's memory budget is enforced by monty's limited allocator; with no
// limit set (the command line itself) it only counts.
#[global_allocator]
static ALLOCATOR: monty_alloc::LimitedAllocator = monty_alloc::LimitedAllocator;

/// Whether `one` and `other` name the same existing directory.
fn same_directory(one: &std::path::Path, other: &std::path::Path) -> bool {
    match (std::fs::canonicalize(one), std::fs::canonicalize(other)) {
        (Ok(one), Ok(other)) => one == other,
        _ => false,
    }
}

/// `vsh --workspace DIR CMD`: the directory is the command's own
/// `--workspace` (ux80 L7), which, given too, must name it as well.
fn workspace_before_command(cli: &mut args::Cli) -> Result<(), clap::Error> {
    let Some(dir) = cli.workspace.take() else { return Ok(()) };
    let refused = |message: &str| {
        Err(<args::Cli as clap::CommandFactory>::command().error(clap::error::ErrorKind::ArgumentConflict, message))
    };
    match cli.command.common_mut() {
        Some(common) => match &common.workspace {
            None => {
                common.workspace = Some(dir);
                Ok(())
            }
            // The same directory however spelt (sec89 L5).
            Some(own) if *own == dir || same_directory(own, &dir) => Ok(()),
            Some(own) => refused(&format!(
                "--workspace is given twice, {} before the command's name and {} after it: give one",
                dir.display(),
                own.display()
            )),
        },
        None => refused("--workspace is for commands that work on a workspace: this command takes none"),
    }
}

fn main() -> ExitCode {
    if std::env::args_os().nth(1).is_some_and(|argument| argument == WORKER_ARGUMENT) {
        return vsh::lower::vsh_monty::worker_process::worker_main();
    }
    quiet_on_closed_stdout();
    let cli = match args::Cli::try_parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        // Help and version print to stdout and exit 0; usage errors print to
        // stderr and exit 2, and as a `vsh.error/1` document on stdout too
        // when the command line asked for JSON.
        Err(mut error) => {
            suggest_separator(&mut error);
            exit_usage(&error)
        }
    };
    cli.color.choice().write_global();
    let mut cli = cli;
    if let Err(error) = workspace_before_command(&mut cli) {
        exit_usage(&error)
    }
    QUIET.store(cli.quiet, std::sync::atomic::Ordering::Relaxed);
    let json = cli.command.json();
    let detailed = match cli.command.state_exit() {
        Some(state_exit) => cli.detailed_exitcode || state_exit.detailed_exitcode,
        None if cli.detailed_exitcode => {
            let error = <args::Cli as clap::CommandFactory>::command().error(
                clap::error::ErrorKind::ArgumentConflict,
                "--detailed-exitcode is for run, exec, rerun, revert, show and commit: this command's result is not a \
                 transaction's state",
            );
            exit_usage(&error)
        }
        None => false,
    };
    let output = Output { detailed, quiet: cli.quiet };
    let result = match cli.command {
        Command::Init(init) => init_command(&init, output),
        Command::Run(run) => run_command(&run, output),
        Command::Exec(exec) => exec_command(&exec, output),
        Command::Rerun(rerun) => rerun_command(&rerun, output),
        Command::Revert(revert) => revert_command(&revert, output),
        Command::Demo { json } => demo::run(json, output.quiet),
        Command::Doctor(common) => doctor::doctor(&common.root(), common.json),
        Command::Serve(args) => serve_command(&args),
        Command::Policy { action: args::PolicyAction::Check { file, json } } => policy_check(&file, json),
        Command::Schema { name, write } => schema_command(name.as_deref(), write.as_deref()),
        Command::Guide => {
            print!("{GUIDE}");
            Ok(EXIT_OK)
        }
        Command::Completions { shell } => {
            // Generated whole first: clap_complete panics on a failed write.
            let mut command = <args::Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "vsh", &mut script);
            print_bytes(&script).map(|()| EXIT_OK)
        }
        Command::Man => man_page().and_then(|page| print_bytes(page.as_bytes()).map(|()| EXIT_OK)),
        other => tx_command(&other, output),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            let (vsh_error, remedies, hint) = failure::unwrap(error.as_ref());
            let code = vsh_error.map_or(EXIT_ERROR, |error| {
                closed_exit_code(error).filter(|_| output.detailed).unwrap_or_else(|| error_exit_code(error))
            });
            // An error may quote a path a program named (a file whose name
            // clears the screen, sec71 F2): each line shown escaped.
            let chain = render::error_chain(error.as_ref());
            let lines: Vec<_> = chain.lines().map(|line| render::shown(line, true)).collect();
            say!("vsh: {}", lines.join("\n"));
            let advice = failure::advice(vsh_error, remedies, hint);
            for line in advice.lines() {
                say!("{}", render::shown(line, true));
            }
            if json {
                // Errors are JSON too for a program that asked for JSON, on stdout.
                let document = failure::document(error.as_ref()).with_exit_code(code);
                println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
            }
            ExitCode::from(code)
        }
    }
}

/// Whether a command line asks for JSON (`--json` before any `--`, after
/// which the arguments are a command's own).
fn asks_for_json(args: impl Iterator<Item = std::ffi::OsString>) -> bool {
    args.skip(1).take_while(|arg| arg != "--").any(|arg| arg == "--json")
}

/// When whoever reads stdout stops reading (`vsh log | head`), end quietly
/// as Unix tools do (exit 141, as a `SIGPIPE` death reads to a shell) instead
/// of panicking with a backtrace; when stdout cannot be written otherwise
/// (`> /dev/full`), say so and exit 1. `SIGPIPE` itself stays ignored: the runtime
/// must survive a worker that closes its pipe.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") {
            if message.contains("Broken pipe") {
                std::process::exit(141);
            }
            // Any other failed write (a full disk, say): an error, said
            // plainly; whatever the command did before stands.
            say!("vsh: {message}");
            std::process::exit(i32::from(EXIT_ERROR));
        }
        default(info);
    }));
}

/// Write `bytes` to stdout: a reader that stopped reading ends vsh as
/// [`quiet_on_closed_stdout`] does, any other failure is an error.
fn print_bytes(bytes: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(141),
        Err(error) => Err(format!("failed printing to stdout: {error}").into()),
    }
}

/// The global output options.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Output {
    /// `--detailed-exitcode`.
    detailed: bool,
    /// `--quiet`.
    quiet: bool,
}

/// What a command was asked to do, which decides its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// Make a preview, or show a review: done whatever the decision.
    Review,
    /// Commit (`run --mode auto`, `commit`): done only if it landed.
    Commit,
}

/// The exit code for an error: the outcomes a script tells apart by code
/// (busy, stale, awaiting approval, denied), else 1.
fn error_exit_code(error: &vsh::VshError) -> u8 {
    use vsh::lower::vsh_commit::CommitError;
    match error {
        vsh::VshError::Commit(CommitError::LockTimeout { .. }) | vsh::VshError::ScratchBusy { .. } => EXIT_BUSY,
        vsh::VshError::Commit(CommitError::Stale { .. })
        | vsh::VshError::RevertChanged { .. }
        | vsh::VshError::DoneMeanwhile { .. }
        | vsh::VshError::ApprovalStale { .. }
        | vsh::VshError::NotApprovable { state: TransactionState::Stale, .. }
        | vsh::VshError::NotCommittable { state: TransactionState::Stale, .. } => EXIT_STALE,
        // Its approval lapsed: it awaits another (ux70 F3: exit 1).
        vsh::VshError::NotCommittable { state: TransactionState::PendingApproval, .. }
        | vsh::VshError::Store(vsh::lower::vsh_store::StoreError::ApprovalLapsed { .. }) => EXIT_PENDING,
        vsh::VshError::NotCommittable { state: TransactionState::Denied, .. }
        | vsh::VshError::NotApprovable { state: TransactionState::Denied, .. } => EXIT_DENIED,
        // A name that cannot name a transaction is a usage error.
        vsh::VshError::TransactionName(_) => EXIT_USAGE,
        // A run the policy refused and whose program let the refusal escape
        // (a Monty exception or budget; a Bash program that failed).
        refused if refused.refused_accesses().is_some() => EXIT_DENIED,
        _ => EXIT_ERROR,
    }
}

/// With `--detailed-exitcode`, a commit refused for work that can never be
/// committed (rejected, expired, or failed and rolled back) exits with
/// that state's code, 7, as `vsh show` would for it.
fn closed_exit_code(error: &vsh::VshError) -> Option<u8> {
    use vsh::lower::vsh_store::StoreError;
    match error {
        vsh::VshError::NotCommittable {
            state: TransactionState::Rejected | TransactionState::Expired | TransactionState::Failed,
            ..
        }
        | vsh::VshError::Store(StoreError::ApprovalExpired { .. } | StoreError::PreviewExpired { .. }) => {
            Some(EXIT_CLOSED)
        }
        _ => None,
    }
}

/// `vsh serve`: the MCP server, its commands' settings resolved first.
fn serve_command(args: &args::ServeArgs) -> Result<u8, Box<dyn std::error::Error>> {
    let commands = if args.commands { Some(CommandSettings::resolve(&args.command)?) } else { None };
    // A workspace that cannot be one is the operator's to hear about at
    // once (the MCP host shows a server that failed to start), not every
    // tool call's error for the model.
    if let Some(dir) = &args.common.workspace {
        if !dir.is_dir() {
            return Err(format!("--workspace {}: no such directory", dir.display()).into());
        }
        refuse_as_a_new_workspace(dir)?;
        refuse_inside_another(dir)?;
    }
    serve::serve(serve::ServeOptions {
        workspace: match &args.common.workspace {
            Some(dir) => serve::WorkspaceChoice::Given(dir.clone()),
            None => serve::WorkspaceChoice::FromClient { found: args.common.root() },
        },
        budget: args.budget.budget(),
        command_budget: args.budget.budget_over(vsh::ExecutionBudget::for_commands()),
        bounds: vsh::document::TextBounds { max_chars: args.max_text as usize, ..Default::default() },
        commands,
        lock_wait: lock_wait(args.lock.lock_timeout),
    })
}

/// A runtime configuration whose Monty worker is this very binary, confined
/// by the sandbox like any worker (so the command line needs no second binary),
/// with durable previews: a preview made by `vsh run` is committed by a later
/// `vsh commit` (until it expires, within the default bounds).
pub(crate) fn runtime_config(workspace: &std::path::Path) -> Result<RuntimeConfig, Box<dyn std::error::Error>> {
    let exe = std::env::current_exe()?;
    let worker = vsh::WorkerConfig::new(exe).with_args([WORKER_ARGUMENT]);
    // The command line is a host that offers Bash: a program asks for it by
    // its language (`--language bash`, a `.sh` file, the MCP `language`).
    // An agent that drives the command line names its session itself.
    Ok(RuntimeConfig::new(workspace)
        .with_worker(worker)
        .with_durable_previews(vsh::DurablePreviews::default())
        .with_bash(vsh::BashConfig::new())
        .with_session(std::env::var("VSH_SESSION").unwrap_or_default()))
}

/// Real commands' environment, tools and network, resolved from the command
/// line (`--env`, `--pass-env`, `--tool`, `--allow-network`, `--allow-port`).
#[derive(Debug, Clone)]
pub(crate) struct CommandSettings {
    env: Vec<(String, String)>,
    tools: Vec<std::path::PathBuf>,
    network: Option<vsh::lower::vsh_sandbox::NetworkAccess>,
    ports: Vec<u16>,
    unix_sockets: bool,
}

impl CommandSettings {
    /// Resolve `args`: each `--pass-env` variable read now (one vsh's
    /// environment lacks is an error), each tool directory made absolute.
    pub(crate) fn resolve(args: &args::CommandArgs) -> Result<Self, Box<dyn std::error::Error>> {
        let mut env = Vec::with_capacity(args.pass_env.len() + args.env.len());
        for name in &args.pass_env {
            // An unset variable is a mistake in the command line: a usage error.
            let Ok(value) = std::env::var(name) else {
                usage_conflict(&format!("--pass-env {name}: vsh's environment has no {name}"));
            };
            env.push((name.clone(), value));
        }
        env.extend(args.env.iter().cloned());
        let mut tools = Vec::with_capacity(args.tools.len());
        for tool in &args.tools {
            let absolute = std::path::absolute(tool).map_err(|error| format!("--tool {}: {error}", tool.display()))?;
            // A directory, or the command line is wrong.
            if !absolute.is_dir() {
                let what = if absolute.exists() { "not a directory" } else { "no such directory" };
                usage_conflict(&format!("--tool {}: {what} (give the directory holding the tool)", tool.display()));
            }
            // A directory holding a home is more than a tool: say what it gives.
            // Judged where it really is (`..` and symlinks resolved).
            let real = std::fs::canonicalize(&absolute).unwrap_or_else(|_| absolute.clone());
            // The command has its own of these: the host's would replace
            // them (sec81 5: `--tool /proc` gave the host's processes).
            if let Some(own) = ["/proc", "/sys", "/dev"]
                .iter()
                .find(|own| real.starts_with(own))
                .or_else(|| (real == std::path::Path::new("/tmp")).then_some(&"/tmp"))
            {
                usage_conflict(&format!(
                    "--tool {}: commands have a {own} of their own, which the host's is not shown over; give the \
                     directory holding the tool",
                    tool.display()
                ));
            }
            let home = std::env::var_os("HOME").map(|home| std::fs::canonicalize(&home).unwrap_or(home.into()));
            if real.parent().is_none() || home.is_some_and(|home| home.starts_with(&real)) {
                say!(
                    "vsh: warning: --tool {}: commands may read everything under it (other workspaces, credentials \
                     in a home directory), not only the tool; give the tool's own directory",
                    tool.display()
                );
            }
            tools.push(absolute);
        }
        if !args.ports.is_empty() && args.allow_network == Some(args::NetworkArg::All) {
            usage_conflict("--allow-port is for a network of none or loopback: --allow-network all reaches every port");
        }
        if args.allow_unix_sockets
            && let Some(abi) = vsh::lower::vsh_sandbox::probe().landlock_abi
            && abi < UNIX_SOCKETS_GOVERNED_FROM
        {
            say!(
                "vsh: warning: --allow-unix-sockets: this kernel's Landlock (ABI {abi}) does not govern connecting \
                 to socket files (ABI {UNIX_SOCKETS_GOVERNED_FROM} does), so commands may reach any unix socket \
                 they can name, a host daemon's included"
            );
        }
        Ok(Self {
            env,
            tools,
            network: args.allow_network.map(args::NetworkArg::access),
            ports: args.ports.clone(),
            unix_sockets: args.allow_unix_sockets,
        })
    }

    /// Whether `program`, a bare name, is on none of the directories of the
    /// command's `PATH` (the granted one, else the default), each a system
    /// or tool directory: a spawn of it could only fail. A name the search
    /// leaves to the command (a `PATH` directory in the workspace) is not.
    fn finds_nowhere(&self, program: &str) -> bool {
        let every = vsh::lower::vsh_monty::CommandConfig::new("/").env;
        let path = every.iter().chain(&self.env).rev().find(|(name, _)| name == "PATH");
        !program.contains('/')
            && vsh::lower::vsh_sandbox::find_on_path(program, path.map_or("", |(_, value)| value), &self.tools)
                == Ok(None)
    }

    /// These settings with a first run's grants (`first`) added, for `vsh
    /// rerun`: its tools, network, ports and unix sockets, and each of its
    /// variables this command line does not set, from vsh's own environment
    /// when `first_value_is(name, value)` (the first run's keyed digest) says
    /// the value is the first run's. A variable that cannot be given again so
    /// is a usage error naming it: vsh keeps no variable's value.
    fn with_first_grants(
        mut self,
        first: &vsh::CommandGrants,
        first_value_is: impl Fn(&str, &str) -> Result<Option<bool>, vsh::VshError>,
    ) -> Result<Self, vsh::VshError> {
        for tool in first.tools.iter().map(std::path::PathBuf::from) {
            if !self.tools.contains(&tool) {
                self.tools.push(tool);
            }
        }
        self.network = self.network.or(match first.network.as_str() {
            "loopback" => Some(vsh::lower::vsh_sandbox::NetworkAccess::Loopback),
            "all" => Some(vsh::lower::vsh_sandbox::NetworkAccess::All),
            _ => None,
        });
        for port in &first.ports {
            if !self.ports.contains(port) {
                self.ports.push(*port);
            }
        }
        self.unix_sockets |= first.unix_sockets;
        let mut missing = Vec::new();
        for name in &first.env {
            if let Some((_, value)) = self.env.iter().find(|(given, _)| given == name) {
                if first_value_is(name, value)? == Some(false) {
                    say!("vsh: warning: {name} is given another value than the first run's");
                }
                continue;
            }
            match std::env::var(name) {
                Ok(value) if first_value_is(name, &value)? == Some(true) => self.env.push((name.clone(), value)),
                _ => missing.push(name.as_str()),
            }
        }
        if !missing.is_empty() {
            let flags: Vec<String> = missing.iter().map(|name| format!("--env {name}=VALUE")).collect();
            let (listed, them) = match missing.split_last() {
                Some((last, [])) => ((*last).to_owned(), "it"),
                Some((last, rest)) => (format!("{} and {last}", rest.join(", ")), "them"),
                None => unreachable!("missing is not empty"),
            };
            usage_conflict(&format!(
                "the first run's commands were given {listed}, whose values vsh does not keep (only a keyed \
                 digest, which vsh's own environment does not match): give {them} again ({}), or run without \
                 (--no-first-grants: this command line's grants only)",
                flags.join(" ")
            ));
        }
        Ok(self)
    }

    /// `config` with these settings. A tool directory that holds the
    /// workspace is said to show the command the workspace's real files and
    /// whatever else is beside it (sec81 5: `--tool` of a workspace's parent
    /// gave another workspace's `.env`, with no warning).
    pub(crate) fn apply(&self, config: RuntimeConfig) -> RuntimeConfig {
        let workspace =
            std::fs::canonicalize(config.workspace_root()).unwrap_or_else(|_| config.workspace_root().to_owned());
        let tools: Vec<_> =
            self.tools.iter().map(|tool| std::fs::canonicalize(tool).unwrap_or_else(|_| tool.clone())).collect();
        failure::note_shown(&workspace, &tools);
        for tool in &self.tools {
            let real = std::fs::canonicalize(tool).unwrap_or_else(|_| tool.clone());
            if let Some(what) = sensitive_tool(&real, &workspace) {
                say!(
                    "vsh: warning: --tool {}: it holds {what}: commands may read all of it, as it is on disk, \
                     whatever a policy protects there; give the tool's own directory",
                    tool.display()
                );
            }
            if workspace.starts_with(&real) && real.parent().is_some() {
                say!(
                    "vsh: warning: --tool {}: it holds the workspace, so commands may read everything under it \
                     (other workspaces, their secrets, this one's files as they are on disk), not only the tool; \
                     give the tool's own directory",
                    tool.display()
                );
            }
        }
        let config = config
            .with_command_env(self.env.clone())
            .with_command_tools(self.tools.clone())
            .with_command_ports(self.ports.clone());
        let config = if self.unix_sockets { config.with_command_unix_sockets() } else { config };
        match self.network {
            Some(network) => config.with_command_network(network),
            None => config,
        }
    }
}

/// What a `--tool` directory `dir` (its real path) holds that no tool
/// should show a command (sec83 F2: a failed command's output had vsh
/// name a sibling workspace, then `/root`, and the grant went through with
/// no word): another vsh workspace (a `.vsh` in it or in a directory of
/// it), or a home directory's keys (`.ssh` or `.gnupg` in it or a
/// directory of it: another user's home, `/root`). `None` for a directory
/// holding the workspace or `$HOME`, said otherwise.
fn sensitive_tool(dir: &std::path::Path, workspace: &std::path::Path) -> Option<String> {
    let holds = |name: &str| {
        dir.join(name).is_dir()
            || std::fs::read_dir(dir).is_ok_and(|entries| {
                entries.filter_map(Result::ok).take(4096).any(|entry| entry.path().join(name).is_dir())
            })
    };
    let home = std::env::var_os("HOME").map(|home| std::fs::canonicalize(&home).unwrap_or(home.into()));
    if workspace.starts_with(dir) || home.is_some_and(|home| home.starts_with(dir)) {
        return None;
    }
    if holds(".ssh") || holds(".gnupg") {
        return Some("a home directory's keys".to_owned());
    }
    holds(".vsh").then(|| "another vsh workspace".to_owned())
}

/// How a command that must take the commit lock waits for it: it says so on
/// stderr once it has waited a second, and gives up after `timeout`.
fn lock_wait(timeout: std::time::Duration) -> vsh::LockWait {
    vsh::LockWait::within(timeout).with_notice(std::time::Duration::from_secs(1), move |_| {
        say!(
            "vsh: waiting for another vsh process to finish committing, recovering or running commands in \
             this workspace (giving up after {:.1} s; see --lock-timeout)",
            timeout.as_secs_f64()
        );
    })
}

/// The exit code for a receipt of a command asked to do `asked`: 0 when it
/// did; with `detailed`, the transaction's state.
pub(crate) fn exit_code(receipt: &vsh::Receipt, asked: Asked, detailed: bool) -> u8 {
    let state = state_exit_code(receipt.state).unwrap_or(match &receipt.decision {
        RuntimeDecision::Denied(_) => EXIT_DENIED,
        RuntimeDecision::PendingApproval(_) => EXIT_PENDING,
        RuntimeDecision::AutoApproved => EXIT_AUTO_APPROVED,
    });
    match (detailed, asked) {
        (false, Asked::Review) => EXIT_OK,
        // Asked to commit and it did not land: why, by the same codes (an
        // auto-approved transaction that did not land awaits a decision too).
        (false, Asked::Commit) if state == EXIT_AUTO_APPROVED => EXIT_PENDING,
        (true, _) | (false, Asked::Commit) => state,
    }
}

/// A Bash program or command that failed without `--accept-failure`, or a
/// Monty program that raised, and still reached a receipt (it was refused
/// an access, so the refusal is decided and on record): exit 5, as the exit
/// codes say, never 0.
fn failed_exit_code(receipt: &vsh::Receipt, accept_failure: bool) -> Option<u8> {
    let failed = match &receipt.output {
        vsh::ExecutionOutput::Bash(result) => result.exit_code != 0 && !accept_failure,
        output => output.exception().is_some(),
    };
    failed.then_some(EXIT_DENIED)
}

/// The `--detailed-exitcode` of a transaction in `state`, where the state
/// alone says it; `None` for the states a commit passes through, where the
/// decision does.
pub(crate) fn state_exit_code(state: TransactionState) -> Option<u8> {
    match state {
        TransactionState::Committed => Some(EXIT_OK),
        TransactionState::AutoApproved => Some(EXIT_AUTO_APPROVED),
        TransactionState::PendingApproval | TransactionState::Approved => Some(EXIT_PENDING),
        TransactionState::Denied => Some(EXIT_DENIED),
        TransactionState::Stale => Some(EXIT_STALE),
        TransactionState::Rejected | TransactionState::Expired | TransactionState::Failed => Some(EXIT_CLOSED),
        // A commit under way, or one a crash interrupted: neither landed nor
        // known to have written nothing.
        TransactionState::Reserved
        | TransactionState::Revalidating
        | TransactionState::Committing
        | TransactionState::RecoveryRequired => Some(EXIT_ERROR),
        _ => None,
    }
}

/// Run from a directory inside the workspace at `root` (found by walking
/// up): the way to make a workspace of this directory, likely what was
/// meant (ux85 L5: only --force was offered, which replaces the enclosing
/// workspace's policy); empty anywhere else.
fn workspace_of_this_directory(root: &std::path::Path) -> String {
    match std::env::current_dir().ok().and_then(|cwd| std::fs::canonicalize(cwd).ok()) {
        Some(here) if here != root && here.starts_with(root) => format!(
            "; to make {} a workspace of its own, inside that one: vsh init --workspace .",
            render::shown(&here.display().to_string(), false)
        ),
        _ => String::new(),
    }
}

/// `vsh init`: record the workspace's policy in its data directory.
fn init_command(init: &InitArgs, output: Output) -> Result<u8, Box<dyn std::error::Error>> {
    let (text, what) = if let Some(path) = &init.policy {
        let max = vsh::lower::vsh_policy::MAX_POLICY_FILE_BYTES;
        // A FIFO, a device or a directory is refused before it is opened
        // (opening a FIFO waits for a writer), as `vsh policy check` and
        // `--policy` refuse them (sec88 L3); `-` reads standard input.
        if path != std::path::Path::new("-") {
            let metadata =
                std::fs::metadata(path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
            if !metadata.is_file() {
                return Err(Box::new(vsh::lower::vsh_policy::PolicyFileError::NotAFile { path: path.clone() }));
            }
        }
        let text = read_text_bounded(path, max, "", "a policy file")?;
        (text, format!("the policy file {}", path.display()))
    } else {
        let profile = init.profile.policy_profile();
        (format!("version = 1\nprofile = \"{}\"\n", profile.name()), format!("the {} profile", profile.name()))
    };
    // A policy this build refuses is refused before anything is made: a
    // workspace left behind would run under the default profile.
    let new = match &init.policy {
        // A refusal names the file, and where in it (ux77 4).
        Some(path) => vsh::lower::vsh_policy::PolicyFile::from_toml_at(&text, path)?,
        None => vsh::lower::vsh_policy::PolicyFile::from_toml(&text)?,
    }
    .policy(None)
    .digest();
    // Whatever the workspace recorded before (even a policy this build
    // refuses) does not stand in the way of recording a new one.
    let config = runtime_config(&init.common.root())?.with_policy_profile(vsh::PolicyProfile::Balanced);
    let root = config.workspace_root().to_owned();
    if !init.force {
        refuse_carving_out(&root)?;
    }
    let runtime = open_as(config, true)?;
    // The digest of what the workspace records, `None` for a recorded policy
    // that cannot be taken (it does not parse, or its MAC does not verify).
    let recorded = match runtime.workspace_policy_text() {
        Ok(recorded) => recorded.map(|recorded| {
            vsh::lower::vsh_policy::PolicyFile::from_toml(&recorded).ok().map(|file| file.policy(None).digest())
        }),
        // Forged, unreadable, not a file: replaced only when asked to (--force).
        Err(_) => Some(None),
    };
    if let Some(old) = recorded
        && old.as_ref() != Some(&new)
        && !init.force
    {
        let (old, show) = old.map_or_else(
            || ("one this build cannot read or verify".to_owned(), ""),
            |digest| (digest.short(), " (vsh policy show prints the recorded one)"),
        );
        let root = std::fs::canonicalize(&root).unwrap_or(root);
        let inside = if init.common.workspace.is_none() { workspace_of_this_directory(&root) } else { String::new() };
        return Err(format!(
            "the workspace at {} already records a policy ({old}); give --force to replace it with {what}{show}{inside}",
            root.display()
        )
        .into());
    }
    // The very policy recorded already, to the byte: nothing to record, and
    // said so (ux60: a second `vsh init` said it had recorded one).
    let same_text = |recorded: &str| recorded.trim_end() == text.trim_end();
    if recorded == Some(Some(new)) && runtime.workspace_policy_text().ok().flatten().is_some_and(|old| same_text(&old))
    {
        let workspace = std::fs::canonicalize(&root).unwrap_or(root);
        if init.common.json {
            let recorded = documents::InitDocument::new(what, new.to_hex(), workspace.display().to_string());
            println!("{}", serde_json::to_string_pretty(&recorded)?);
        } else if !output.quiet {
            println!(
                "the workspace at {} already records {what} ({}); nothing changed",
                render::shown(&workspace.to_string_lossy(), false),
                new.short()
            );
        }
        return Ok(EXIT_OK);
    }
    // Waiting work made under the policy being replaced: approve and commit
    // refuse it from now on.
    // Waiting work the workspace's policy decides, before and after: what
    // the new one voids, and what it makes committable again.
    let committable = || committable_waiting(&init.common.root());
    let before = committable();
    let digest = runtime.record_workspace_policy(&text)?;
    let after = committable();
    if !output.quiet {
        say_waiting_work_changed(&before, &after);
    }
    // Which directory it set up: the one found may lie above where it ran
    // (ux58 1: a parent made a workspace earlier took a project's init).
    let workspace = std::fs::canonicalize(init.common.root()).unwrap_or_else(|_| init.common.root());
    if init.common.json {
        let recorded = documents::InitDocument::new(what, digest.to_hex(), workspace.display().to_string());
        println!("{}", serde_json::to_string_pretty(&recorded)?);
    } else if !output.quiet {
        println!(
            "recorded {what} as the policy of the workspace at {} ({}); every command run in it uses it unless \
             told otherwise",
            render::shown(&workspace.to_string_lossy(), false),
            digest.short()
        );
    }
    if init.policy.is_some() && !output.quiet {
        note_unmatched_patterns(&text, &workspace);
    }
    Ok(EXIT_OK)
}

/// What a new policy did to the waiting work: `before` and `after` are
/// what could be approved and committed under the old and the new one.
fn say_waiting_work_changed(before: &[vsh::TransactionId], after: &[vsh::TransactionId]) {
    let voided = before.iter().filter(|id| !after.contains(id)).count();
    let revived = after.iter().filter(|id| !before.contains(id)).count();
    if voided > 0 {
        say!(
            "vsh: {} made under the policy replaced now: approve and commit refuse {} (vsh pending flags \
             policy-changed; vsh rerun TX makes the work again, vsh reject TX drops it)",
            render::counted(voided as u64, "waiting transaction"),
            if voided == 1 { "it" } else { "them" }
        );
    }
    if revived > 0 {
        say!(
            "vsh: {} made under this policy can be approved and committed again",
            render::counted(revived as u64, "waiting transaction")
        );
    }
}

/// Each pattern of the policy `text` that matches nothing in `workspace`,
/// said as `vsh policy check` says it (ux86 L3: `vsh init --policy`
/// recorded a misspelt rule without a word).
fn note_unmatched_patterns(text: &str, workspace: &std::path::Path) {
    if let Ok(policy) = vsh::lower::vsh_policy::PolicyFile::from_toml(text).map(|file| file.policy(None)) {
        for note in unmatched_patterns(&policy, workspace) {
            say!("vsh: note: {}", render::shown(&note, true));
        }
    }
}

/// The waiting work (made under the workspace's policy) that the
/// workspace at `root`'s recorded policy lets be approved and committed:
/// none when it cannot be opened under it.
fn committable_waiting(root: &std::path::Path) -> Vec<vsh::TransactionId> {
    let Ok(config) = runtime_config(root) else { return Vec::new() };
    let Ok(runtime) = Runtime::open(config) else { return Vec::new() };
    runtime.pending().map_or_else(
        |_| Vec::new(),
        |records| {
            records
                .iter()
                .filter(|record| {
                    matches!(runtime.run_policy(record.id), Ok(None))
                        && !runtime.decided_under_another_policy(record.id)
                })
                .map(|record| record.id)
                .collect()
        },
    )
}

fn run_command(run: &RunArgs, output: Output) -> Result<u8, Box<dyn std::error::Error>> {
    let code = read_text_bounded(&run.program, MAX_PROGRAM_INPUT, "", "a program")?;
    let language = run.language();
    if run.commands && language != vsh::Language::Monty {
        usage_conflict("--commands is for Monty programs (vsh_exec)");
    }
    if run.confined && language != vsh::Language::Bash {
        usage_conflict("--confined is for Bash programs (--language bash, or a .sh file)");
    }
    let real = if run.commands {
        RealCommands::Commands
    } else if run.confined {
        RealCommands::ConfinedBash
    } else {
        RealCommands::None
    };
    // Unlike a command, a program starts at the root (ux58 2: a relative
    // path from `src/` failed, or wrote elsewhere, with nothing said).
    let root = run.options.common.root();
    if !output.quiet
        && let Some(inside) = working_dir_in(&root)
    {
        let root = std::fs::canonicalize(&root).unwrap_or(root);
        say!(
            "vsh: note: a program starts at the workspace's root ({}), not in {inside}/ where you are: its relative \
             paths are the root's ({inside}/NAME for a file here); `vsh exec` starts a command here",
            render::shown(&root.to_string_lossy(), false),
            inside = render::shown(&inside, false),
        );
    }
    run_program(run, &code, language, output, real, None)
}

/// Exit with clap's usage error (exit 2) for options that conflict.
fn usage_conflict(message: &str) -> ! {
    let mut command = <args::Cli as clap::CommandFactory>::command();
    // The usage line of the subcommand given (`vsh run ...`), not vsh's own.
    command.build();
    let given = std::env::args().skip(1).find(|arg| command.find_subcommand(arg).is_some());
    match given.and_then(|name| command.find_subcommand_mut(&name)) {
        Some(subcommand) => exit_usage(&subcommand.error(clap::error::ErrorKind::ArgumentConflict, message)),
        None => exit_usage(&command.error(clap::error::ErrorKind::ArgumentConflict, message)),
    }
}

/// `vsh exec ls -la`, the command without `--` before it: clap's "unexpected
/// argument", with the command line that works as its tip.
fn suggest_separator(error: &mut clap::Error) {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let args: Vec<String> = std::env::args_os().map(|arg| arg.to_string_lossy().into_owned()).collect();
    // A command about stored work named none: where the ids are (ux52).
    let about_work = ["show", "approve", "commit", "reject", "rerun"];
    if error.kind() == ErrorKind::MissingRequiredArgument
        && args.get(1).is_some_and(|command| about_work.contains(&command.as_str()))
    {
        let tip = "`vsh pending` lists the work that waits, `vsh log` what finished; give its id (or a prefix)";
        error.insert(ContextKind::Suggested, ContextValue::StyledStrs(vec![tip.into()]));
        return;
    }
    if error.kind() != ErrorKind::UnknownArgument
        || args.get(1).is_none_or(|command| command != "exec")
        || args.iter().any(|arg| arg == "--")
    {
        return;
    }
    let Some(ContextValue::String(invalid)) = error.get(ContextKind::InvalidArg) else { return };
    let Some(at) = args.iter().position(|arg| arg == invalid) else { return };
    let tip = format!("put the command after `--`: vsh {} -- {}", args[1..at].join(" "), args[at..].join(" "));
    error.insert(ContextKind::Suggested, ContextValue::StyledStrs(vec![tip.into()]));
}

/// Leave with clap's `error`: help and version print to stdout and exit 0;
/// usage errors print to stderr and exit 2, and as a `vsh.error/1` document
/// on stdout too when the command line asked for JSON (its message the
/// error's first line, with the line after it when the first introduces a
/// list: the missing argument's name).
fn exit_usage(error: &clap::Error) -> ! {
    if error.use_stderr() && asks_for_json(std::env::args_os()) {
        let rendered = error.render().to_string();
        let mut lines = rendered.lines().map(str::trim).filter(|line| !line.is_empty());
        let first = lines.next().unwrap_or_default();
        let first = first.strip_prefix("error: ").unwrap_or(first);
        let message = match (first.strip_suffix(':'), lines.next()) {
            (Some(intro), Some(item)) => format!("{intro}: {item}"),
            _ => first.to_owned(),
        };
        let document =
            vsh::document::ErrorDocument::other(vsh::document::ErrorKind::Request, &std::io::Error::other(message))
                .with_exit_code(EXIT_USAGE);
        println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
    }
    error.exit()
}

/// The first Landlock ABI that governs connecting to a pathname unix socket.
const UNIX_SOCKETS_GOVERNED_FROM: u32 = 9;

/// Whether a run reaches real programs, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RealCommands {
    /// No: Monty, or Bash in the bounded interpreter.
    None,
    /// A real command (`vsh exec`), or a Monty program with `vsh_exec`.
    Commands,
    /// A Bash program in real `/bin/bash`.
    ConfinedBash,
}

/// `vsh exec -- COMMAND...`: the command's argv is its program text.
fn exec_command(exec: &args::ExecArgs, output: Output) -> Result<u8, Box<dyn std::error::Error>> {
    let mut argv = Vec::with_capacity(exec.argv.len());
    for arg in &exec.argv {
        let Some(text) = arg.to_str() else {
            let mut command = <args::Cli as clap::CommandFactory>::command();
            exit_usage(&command.error(clap::error::ErrorKind::InvalidUtf8, format!("{} is not UTF-8", arg.display())));
        };
        argv.push(text.to_owned());
    }
    // The command starts where the user is, when that is inside the workspace
    // (as git does), and reads what --stdin gives: both bound into the
    // program text, so a commit or a re-run starts it there with that input.
    let cwd = working_dir_in(&exec.options.common.root());
    let stdin = exec.stdin.as_deref().map(read_command_input).transpose()?;
    // A warning, printed under -q too (ux81 M2: a script's `-q` run of
    // `patch < fix.diff` applied nothing without a word), and in the
    // receipt's JSON (ux82 L10).
    if stdin.is_none() && input_waiting() {
        warn(
            "the command reads nothing: what this shell gives vsh on its standard input is not passed on; give \
             it with `--stdin -` (or --stdin FILE)",
        );
    }
    if !output.quiet
        && let Some(note) = argv.first().and_then(|program| other_program_note(program, &exec.options))
    {
        say!("vsh: note: {note}");
    }
    let code = if cwd.is_none() && stdin.is_none() {
        serde_json::to_string(&argv)?
    } else {
        let mut command = serde_json::json!({ "argv": argv });
        if let Some(cwd) = cwd {
            command["cwd"] = cwd.into();
        }
        if let Some(stdin) = stdin {
            command["stdin"] = stdin.into();
        }
        serde_json::to_string(&command)?
    };
    run_program(&exec.options, &code, vsh::Language::Command, output, RealCommands::Commands, argv.first())
        .map_err(|error| with_tool_hint(error, &argv, &exec.options))
}

/// A command that could not be executed (status 126 or 127, or refused at
/// its exec) whose program leads outside what commands may read: the same
/// command with what it needs given as tools, as the error's next step. A
/// program named by a path, or found on the command's `PATH`, leads out
/// through a symlink or its `#!` interpreter (a virtualenv's `python`
/// linking to a pyenv or uv installation); one found only on the user's
/// own `PATH` (a virtualenv's `pytest`) needs its directory too, and the
/// command's `PATH` to lead there.
fn with_tool_hint(
    error: Box<dyn std::error::Error>,
    argv: &[String],
    options: &args::RunOptions,
) -> Box<dyn std::error::Error> {
    use vsh::lower::vsh_monty::ExecutionError;
    let could_not_start = match error.downcast_ref::<vsh::VshError>() {
        Some(vsh::VshError::Bash { source, .. }) => {
            matches!(source.as_ref(), ExecutionError::Bash { exit_code: 126 | 127, .. })
        }
        Some(vsh::VshError::Execution(source)) => matches!(
            source.as_ref(),
            ExecutionError::Command {
                source: vsh::lower::vsh_sandbox::ToolError::Setup { stage: "execveat", .. }
                    | vsh::lower::vsh_sandbox::ToolError::Spawn { .. }
            }
        ),
        _ => false,
    };
    let Some(program) = argv.first().filter(|_| could_not_start) else { return error };
    let root = options.common.root();
    let mut tools: Vec<std::path::PathBuf> =
        options.command.tools.iter().filter_map(|tool| std::fs::canonicalize(tool).ok()).collect();
    let given = tools.len();
    let command_path = options.command.env.iter().find(|(key, _)| key == "PATH").map(|(_, value)| value.clone());
    let mut path_env = None;
    // What the command's PATH holds besides a directory the hint puts first.
    let rest = command_path.as_deref().unwrap_or("/usr/local/bin:/usr/bin:/bin");
    // Whether the command found the program (by its path, or on its PATH)
    // and could not run it; else it is on no directory of the command's PATH.
    let mut found_by_the_command = true;
    let found = if program.contains('/') {
        Some(std::path::PathBuf::from(program))
    } else if let Some(found) = on_path(program, rest) {
        Some(found)
    } else {
        found_by_the_command = false;
        // Only the user's own PATH has it: its directory, and a PATH to it.
        let found = std::env::var("PATH").ok().and_then(|user| on_path(program, &user));
        if let Some(dir) =
            found.as_ref().and_then(|found| found.parent()).and_then(|dir| std::fs::canonicalize(dir).ok())
        {
            path_env = Some(format!("PATH={}:{rest}", dir.display()));
            // A `bin` is an installation's: the whole of it (a virtualenv's
            // `pyvenv.cfg` lies beside its `bin`).
            let installation = match dir.parent() {
                Some(parent) if dir.file_name().is_some_and(|name| name == "bin") && parent.parent().is_some() => {
                    parent.to_path_buf()
                }
                _ => dir,
            };
            tools.push(installation);
        }
        found
    };
    if let Some(sysroot) = found.as_deref().and_then(rustup_toolchain) {
        // A rustup proxy (`~/.cargo/bin/cargo`) needs rustup's own state
        // and `~/.cargo` holds the registry's token: the toolchain it would
        // run is what the command needs, first on its PATH.
        tools.truncate(given);
        path_env = Some(format!("PATH={}/bin:{rest}", sysroot.display()));
        tools.push(sysroot);
    } else if let Some(found) = found {
        let outside = failure::installations_outside(&found, &root, &tools);
        tools.extend(outside);
    }
    // Never a directory that would grant too much: the root, a top-level
    // directory (`/etc`, `/root`, `/tmp`), a home, or one holding
    // credentials (`~/.cargo` holds the registry's token).
    if tools.len() == given || !tools[given..].iter().all(|tool| safe_to_suggest(tool)) {
        return error;
    }
    match error.downcast::<vsh::VshError>() {
        Ok(source) => {
            // The command line again: every tool (those given first), the
            // variables given, and the PATH that leads to the program.
            let mut again = vec!["vsh".to_owned(), "exec".to_owned()];
            for tool in &tools {
                again.push("--tool".to_owned());
                again.push(tool.display().to_string());
            }
            for (key, value) in &options.command.env {
                if !(key == "PATH" && path_env.is_some()) {
                    again.push("--env".to_owned());
                    again.push(format!("{key}={value}"));
                }
            }
            if let Some(path) = path_env {
                again.push("--env".to_owned());
                again.push(path);
            }
            again.push("--".to_owned());
            again.extend(argv.iter().cloned());
            let hint = shlex::try_join(again.iter().map(String::as_str)).ok();
            let why = format!(
                "{} could not start: it, or what it runs (its #! interpreter, where its links lead), lies outside \
                 what commands can read (the workspace, the system directories, each --tool)",
                render::shown(program, true)
            );
            // A program on no directory of the command's PATH is said to be
            // so by the error's own advice (ux81 L11: also "lies outside
            // what commands can read", which contradicted it).
            let remedies = if found_by_the_command { vec![why] } else { Vec::new() };
            Box::new(failure::Failure { source: *source, remedies, hint })
        }
        Err(error) => error,
    }
}

/// The toolchain a rustup proxy runs by default (`found` is such a proxy:
/// the same file as the `rustup` beside it, as rustup installs them): read
/// from rustup's own state, never by running anything. `RUSTUP_TOOLCHAIN`,
/// else `default_toolchain` in `$RUSTUP_HOME/settings.toml` (`~/.rustup`),
/// names a directory of `$RUSTUP_HOME/toolchains` (a short name such as
/// `stable` the one whose name starts with it) that holds `bin/rustc`.
/// Nothing of the workspace is looked at: a repository could ship a fake
/// proxy beside a program, and its `rustc` must never run here, unconfined.
/// `None` for any other program, or when rustup's state says nothing.
fn rustup_toolchain(found: &std::path::Path) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    let dir = found.parent()?;
    let (proxy, rustup) = (std::fs::metadata(found).ok()?, std::fs::metadata(dir.join("rustup")).ok()?);
    if (proxy.dev(), proxy.ino()) != (rustup.dev(), rustup.ino()) {
        return None;
    }
    let home = match std::env::var_os("RUSTUP_HOME") {
        Some(home) => std::path::PathBuf::from(home),
        None => std::env::home_dir()?.join(".rustup"),
    };
    let name = if let Ok(name) = std::env::var("RUSTUP_TOOLCHAIN") {
        name
    } else {
        let settings: toml::Table = std::fs::read_to_string(home.join("settings.toml")).ok()?.parse().ok()?;
        settings.get("default_toolchain")?.as_str()?.to_owned()
    };
    if name.is_empty() || name.contains(['/', '\0']) || name.starts_with('.') {
        return None;
    }
    let toolchains = home.join("toolchains");
    let exact = toolchains.join(&name);
    let sysroot = if exact.is_dir() {
        exact
    } else {
        let prefix = format!("{name}-");
        let mut named: Vec<std::path::PathBuf> = std::fs::read_dir(&toolchains)
            .ok()?
            .filter_map(Result::ok)
            .filter(|entry| entry.file_name().to_str().is_some_and(|file| file.starts_with(&prefix)))
            .map(|entry| entry.path())
            .collect();
        named.sort();
        named.into_iter().next()?
    };
    sysroot.join("bin/rustc").is_file().then_some(sysroot)
}

/// Whether `dir` is a directory vsh may suggest as a `--tool`: at least two
/// levels deep, not a home directory nor in `/etc`, `/proc`, `/sys`, `/dev`
/// or `/run`, owned by this user or root, none of the secret rules hiding
/// it or an entry of it, and a tree that is wholly an installation's
/// ([`a_clean_tree`]).
fn safe_to_suggest(dir: &std::path::Path) -> bool {
    // What a home holds and an installation does not: whatever else it
    // holds (credentials a level down, `.config/gh/hosts.yml`) comes with it.
    const HOME_MARKS: [&str; 8] =
        [".config", ".local", ".ssh", ".gnupg", ".cache", ".bashrc", ".profile", ".bash_history"];
    let depth = dir.components().count();
    let a_home = std::env::home_dir().as_deref() == Some(dir)
        || (dir.starts_with("/home") && depth == 3)
        || HOME_MARKS.iter().any(|mark| std::fs::symlink_metadata(dir.join(mark)).is_ok());
    depth >= 3
        && !a_home
        && failure::whole_installation(dir)
        && !["/etc", "/proc", "/sys", "/dev", "/run"].iter().any(|top| dir.starts_with(top))
        && !holds_secrets(dir)
        && a_clean_tree(dir)
}

/// Whether the whole tree at `dir` is what an installation is, walked to
/// its last entry (at most [`MAX_SUGGESTED_TREE_ENTRIES`]; a larger tree, or
/// one that cannot be listed, is not): no node another user owns (root
/// aside), no directory or file its group or others may write, no vsh
/// workspace, nothing named as tools keep credentials (sec57 F5, sec58 3,
/// sec59 F3, and sec60 N2: each check had stopped a level or three down,
/// and the shapes past it were suggested; following one let a command read
/// a nested workspace's protected file and a token).
fn a_clean_tree(dir: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    // (sec63 T1, sec64 F2: a name left out let a command read a token or a
    // key beside a tool.) Compared without case; keys by their prefix too
    // (`id_rsa.bak`).
    const KEY_PREFIXES: [&str; 4] = ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"];
    const CREDENTIALS: [&str; 41] = [
        ".oci",
        ".databrickscfg",
        "wallet.dat",
        ".lesshst",
        ".viminfo",
        "token.txt",
        "private.key",
        "credentials.toml",
        "credentials",
        "credentials.json",
        ".credentials.json",
        "service-account.json",
        ".netrc",
        ".git-credentials",
        ".git",
        ".pypirc",
        ".npmrc",
        ".yarnrc.yml",
        "auth.json",
        ".aws",
        ".ssh",
        ".gnupg",
        ".kube",
        "kubeconfig",
        ".docker",
        ".gradle",
        ".m2",
        ".terraformrc",
        ".terraform.d",
        ".boto",
        ".htpasswd",
        ".password-store",
        ".env",
        "secrets.yaml",
        "secrets.yml",
        "secrets.json",
        "token",
        ".bash_history",
        ".zsh_history",
        ".python_history",
        ".psql_history",
    ];
    let me = vsh::lower::vsh_sandbox::effective_uid();
    let clean = |meta: &std::fs::Metadata| (meta.uid() == 0 || meta.uid() == me) && meta.mode() & 0o022 == 0;
    if !std::fs::symlink_metadata(dir).is_ok_and(|meta| clean(&meta)) {
        return false;
    }
    let mut budget = MAX_SUGGESTED_TREE_ENTRIES;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(here) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&here) else { return false };
        for entry in entries {
            let Ok(entry) = entry else { return false };
            let Some(left) = budget.checked_sub(1) else { return false };
            budget = left;
            let name = entry.file_name();
            // A link's own mode is none; where it leads is judged where it is.
            let Ok(meta) = entry.metadata() else { return false };
            // A name tools keep credentials under: a dot-directory whatever
            // it is, any other only as a file (a package of code named
            // `credentials`, docker's in Python's site-packages, is code).
            let lower = name.to_string_lossy().to_ascii_lowercase();
            let named = (CREDENTIALS.iter().any(|credential| lower == *credential)
                || KEY_PREFIXES.iter().any(|prefix| lower.starts_with(prefix)))
                && (lower.starts_with('.') || !meta.is_dir());
            if name == ".vsh" || named {
                return false;
            }
            if meta.file_type().is_symlink() {
                continue;
            }
            if !clean(&meta) {
                return false;
            }
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    true
}

/// The most entries [`a_clean_tree`] walks: a Rust toolchain holds some
/// 54,000, a Python installation some 40,000.
const MAX_SUGGESTED_TREE_ENTRIES: usize = 250_000;

/// Whether the secret rules every policy starts from (`.ssh/`, `.kube/config`,
/// `.config/gcloud/`, `*.pem`, ...) hide `dir`, a directory above it, or
/// one of its first 1,000 entries, taking its absolute path as a path of a
/// workspace at `/`.
fn holds_secrets(dir: &std::path::Path) -> bool {
    let secrets = vsh::lower::vsh_policy::CallPolicy::balanced_default(None);
    let hidden = |path: &std::path::Path| {
        path.strip_prefix("/")
            .ok()
            .and_then(|relative| relative.to_str())
            .and_then(|relative| vsh::VPath::parse(relative).ok())
            .is_some_and(|path| secrets.is_hidden(&path))
    };
    hidden(dir)
        || std::fs::read_dir(dir)
            .map_or(true, |entries| entries.filter_map(Result::ok).take(1000).any(|entry| hidden(&entry.path())))
}

/// Where `program` is on the `PATH` `path`: the first executable file of
/// that name in its directories.
/// When the command's `PATH` finds `program` in the system directories but
/// the operator's own `PATH` finds another one first (pyenv's or a
/// virtualenv's `python3` over `/usr/bin/python3`), say which runs and how
/// to run the other: a command that runs the wrong interpreter fails later,
/// far from the cause (no module named ...).
fn other_program_note(program: &str, options: &args::RunOptions) -> Option<String> {
    if program.contains('/') {
        return None;
    }
    let command_path = options.command.env.iter().find(|(key, _)| key == "PATH").map(|(_, value)| value.as_str());
    let command_path = command_path.unwrap_or("/usr/local/bin:/usr/bin:/bin");
    let runs = on_path(program, command_path)?;
    let theirs = on_path(program, &std::env::var("PATH").ok()?)?;
    let same = |a: &std::path::Path, b: &std::path::Path| {
        a == b || std::fs::canonicalize(a).ok().zip(std::fs::canonicalize(b).ok()).is_some_and(|(a, b)| a == b)
    };
    if same(&runs, &theirs) || ["/usr/", "/bin/", "/sbin/"].iter().any(|system| theirs.starts_with(system)) {
        return None;
    }
    let dir = theirs.parent()?;
    // An installation's `bin` (a virtualenv, a toolchain) or a version
    // manager's `shims` (pyenv, rbenv, nodenv) needs the directory above it.
    let installation = dir.parent().filter(|_| dir.ends_with("bin") || dir.ends_with("shims")).unwrap_or(dir);
    let mut note = format!(
        "`{program}` runs {} here (the command's PATH is {command_path}), not {} that your own PATH finds first",
        render::shown(&runs.display().to_string(), true),
        render::shown(&theirs.display().to_string(), true),
    );
    // And where it leads: a virtualenv's python links to a pyenv or uv
    // installation, which the command needs too (ux57).
    let mut tools = vec![installation.to_path_buf()];
    for outside in failure::installations_outside(&theirs, &options.common.root(), &tools) {
        if !tools.iter().any(|tool| outside.starts_with(tool)) {
            tools.push(outside);
        }
    }
    if tools.iter().all(|tool| safe_to_suggest(tool)) {
        use std::fmt::Write as _;
        let _ = write!(note, "; to run that one:");
        for tool in &tools {
            let _ = write!(note, " --tool {}", render::shown(&tool.display().to_string(), true));
        }
        let _ = write!(note, " --env PATH={}:{command_path}", render::shown(&dir.display().to_string(), true));
    }
    Some(note)
}

fn on_path(program: &str, path: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    path.split(':').filter(|dir| dir.starts_with('/')).map(|dir| std::path::Path::new(dir).join(program)).find(
        |candidate| {
            std::fs::metadata(candidate).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        },
    )
}

/// Whether this process's standard input holds something a user meant for
/// the command: a file with bytes left to read (`< patch.diff`), or a pipe
/// with bytes already waiting (`printf ... | vsh exec`). An idle pipe (an
/// agent's harness), a socket, a terminal and `/dev/null` are not.
fn input_waiting() -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    use rustix::fs::FileType;
    let stdin = std::io::stdin();
    let Ok(stat) = rustix::fs::fstat(&stdin) else { return false };
    match FileType::from_raw_mode(stat.st_mode) {
        // Bytes left past where the file is read to (a file already read
        // to its end, or opened at its end, holds none for the command).
        FileType::RegularFile => rustix::fs::seek(&stdin, rustix::fs::SeekFrom::Current(0))
            .is_ok_and(|at| i64::try_from(at).is_ok_and(|at| at < stat.st_size)),
        // A pipe with bytes waiting; a socket (an agent's harness) is left alone.
        FileType::Fifo => {
            let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
            let zero = rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 };
            poll(&mut fds, Some(&zero)).is_ok_and(|ready| ready > 0) && fds[0].revents().contains(PollFlags::IN)
        }
        _ => false,
    }
}

/// The most bytes `vsh exec --stdin` takes: what fits a command's program text.
const MAX_COMMAND_INPUT: u64 = 1 << 20;

/// The most bytes of a program `vsh run` reads: a program's own limit
/// (`ExecutionLimits::max_program_bytes`, 1 MiB).
const MAX_PROGRAM_INPUT: u64 = 1 << 20;

/// The text of `vsh exec --stdin FILE` (`-`: this process's stdin), at most
/// [`MAX_COMMAND_INPUT`] bytes of UTF-8.
fn read_command_input(path: &std::path::Path) -> Result<String, Box<dyn std::error::Error>> {
    read_text_bounded(path, MAX_COMMAND_INPUT, "--stdin ", "a command's input")
}

/// The UTF-8 text of `path` (`-`: this process's stdin), of at most `max`
/// bytes: reading stops one byte past it, so an endless input (`/dev/zero`,
/// `yes`) is refused at once instead of filling memory. `flag` and `what`
/// name it in errors.
fn read_text_bounded(
    path: &std::path::Path,
    max: u64,
    flag: &str,
    what: &str,
) -> Result<String, Box<dyn std::error::Error>> {
    let mut bytes = Vec::new();
    let stdin = path == std::path::Path::new("-");
    let name = if stdin && flag.is_empty() { "standard input".to_owned() } else { path.display().to_string() };
    let read = if stdin {
        std::io::stdin().lock().take(max + 1).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(path).and_then(|file| file.take(max + 1).read_to_end(&mut bytes))
    };
    read.map_err(|error| format!("cannot read {flag}{name}: {error}"))?;
    if bytes.len() as u64 > max {
        return Err(format!("{flag}{name} is longer than {}, the most {what} may be", human_bytes(max)).into());
    }
    String::from_utf8(bytes).map_err(|_| format!("{flag}{name} is not UTF-8 text").into())
}

/// `bytes` for people: whole MiB or KiB when it is a multiple, else bytes.
pub(crate) fn human_bytes(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

/// The current directory relative to the workspace `root`, when it lies
/// strictly inside it and its path is one a command can start in.
fn working_dir_in(root: &std::path::Path) -> Option<String> {
    let cwd = std::env::current_dir().ok()?.canonicalize().ok()?;
    let root = root.canonicalize().ok()?;
    let relative = cwd.strip_prefix(&root).ok()?.to_str()?.to_owned();
    (!relative.is_empty() && vsh::lower::vsh_monty::is_working_dir(&relative)).then_some(relative)
}

/// Run `code` in `language` as `run` says, and print its receipt. A
/// command's `program` found nowhere on its `PATH` is an error before
/// anything (a new workspace) is made for it.
fn run_program(
    run: &args::RunOptions,
    code: &str,
    language: vsh::Language,
    output: Output,
    real: RealCommands,
    program: Option<&String>,
) -> Result<u8, Box<dyn std::error::Error>> {
    if run.retry_stale > 0 && run.mode() != vsh::RunMode::Auto {
        usage_conflict("--retry-stale needs --mode auto (a preview never commits)");
    }
    let mut config = runtime_config(&run.common.root())?.with_lock_wait(lock_wait(run.lock.lock_timeout));
    if real != RealCommands::None {
        let settings = CommandSettings::resolve(&run.command)?;
        if let Some(program) = program
            && settings.finds_nowhere(program)
        {
            // The error a spawn of it gives, and so the same advice.
            let source = vsh::lower::vsh_sandbox::ToolError::Spawn {
                program: program.clone(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "not found on the command's PATH"),
            };
            return Err(Box::new(vsh::VshError::Execution(Box::new(vsh::lower::vsh_monty::ExecutionError::Command {
                source,
            }))));
        }
        config = settings.apply(config);
    }
    match real {
        RealCommands::None => {}
        RealCommands::Commands => config = config.with_commands(),
        RealCommands::ConfinedBash => config = config.with_bash(vsh::BashConfig::confined()),
    }
    if let Some(profile) = run.profile() {
        config = config.with_policy_profile(profile);
    }
    if let Some(policy) = &run.policy {
        config = config.with_policy_file(policy);
    }
    let runtime = open(config)?;
    if (run.profile.is_some() || run.policy.is_some()) && !output.quiet {
        warn_if_overridden(&runtime)?;
    }
    // Every changed path always (the text lists them, the JSON holds them);
    // each one's hunks only with --full (reading and comparing contents
    // costs, so it is not done for a receipt that would drop them).
    let mut request =
        RunRequest::new(code).with_language(language).with_mode(run.mode()).with_detail(detail(run.full)).with_budget(
            run.budget.budget_over(if real == RealCommands::None {
                language.default_budget()
            } else {
                // A run that reaches real programs (a command, `vsh_exec`, real
                // Bash) gets a command's budget: a build takes minutes, not a second.
                reaching_commands(language)
            }),
        );
    if let Some(intent) = &run.intent {
        request = request.with_intent(intent);
    }
    request = with_command_flags(request, run.accept_failure, &run.scratch);
    let on_stale = |attempt: u32, error: &vsh::VshError| {
        if let vsh::VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { total, .. }) = error {
            say!(
                "vsh: the workspace changed under the commit ({total} conflicting path{}); running the program \
                 again on the current workspace (retry {attempt} of {})",
                if *total == 1 { "" } else { "s" },
                run.retry_stale
            );
        }
    };
    let receipt =
        match run_interruptible(&runtime, &request, &interrupt::Interrupts::install()?, run.retry_stale, on_stale) {
            Ok(Interruptible::Done(receipt)) => *receipt,
            Ok(Interruptible::Interrupted(code)) => return Ok(code),
            Err(error) if run.raw => return raw_failure(error, output),
            Err(error) => return Err(error),
        };
    let asked = if run.mode() == vsh::RunMode::Auto { Asked::Commit } else { Asked::Review };
    let code = failed_exit_code(&receipt, run.accept_failure).unwrap_or(exit_code(&receipt, asked, output.detailed));
    if run.raw {
        return Ok(print_raw(&receipt, output)?.unwrap_or_else(|| raw_exit_code(&receipt, code)));
    }
    if run.full && !output.quiet {
        show::say_left_out(&receipt, false);
    }
    print_receipt(&shown_receipt(receipt, run.full), run.common.json, output)?;
    Ok(code)
}

/// `--raw`: the program's own output as it printed it, and the run's
/// outcome in one line on stderr (unless quiet), then the warnings. Output
/// vsh had to cut (past `--max-output`) is an error: what was printed is
/// not all the program wrote.
fn print_raw(receipt: &vsh::Receipt, output: Output) -> Result<Option<u8>, Box<dyn std::error::Error>> {
    let raised;
    let (stdout, stderr): (&[u8], &[u8]) = match &receipt.output {
        vsh::ExecutionOutput::Monty { stdout, .. } => (stdout.as_bytes(), b""),
        // What it printed, and what it raised where Python prints it.
        vsh::ExecutionOutput::MontyRaised { stdout, exception } => {
            raised = format!("{exception}\n");
            (stdout.as_bytes(), raised.as_bytes())
        }
        vsh::ExecutionOutput::Bash(result) => (&result.stdout, &result.stderr),
        _ => (b"", b""),
    };
    write_streams(stdout, stderr)?;
    if !output.quiet {
        // Denied work says why, as -q's line does.
        let line = render::denial_line(receipt).unwrap_or_else(|| render::outcome_line(receipt));
        say!("vsh: {line}");
    }
    for warning in &receipt.warnings {
        // A warning may name paths (a build directory, uncommitted work's
        // changes): escaped, as every path a terminal shows is.
        say!("vsh: warning: {}", render::shown(&warning.to_string(), true));
    }
    Ok(cut_output(stdout, stderr))
}

/// `--raw`'s exit code for a run that reached a receipt: where vsh's own
/// would say only that the run was done (`code` 0), the program's own
/// non-zero exit status (`--accept-failure`), so `vsh exec --raw -- test
/// ...` branches as the command does; a denial, a wait for approval or a
/// stale commit keeps vsh's.
fn raw_exit_code(receipt: &vsh::Receipt, code: u8) -> u8 {
    match &receipt.output {
        vsh::ExecutionOutput::Bash(result) if code == EXIT_OK && result.exit_code != 0 => {
            u8::try_from(result.exit_code).ok().filter(|status| *status != 0).unwrap_or(EXIT_ERROR)
        }
        _ => code,
    }
}

/// The program's two streams, as they are, on vsh's own.
fn write_streams(stdout: &[u8], stderr: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    std::io::stdout().write_all(stdout)?;
    std::io::stdout().flush()?;
    std::io::stderr().write_all(stderr)
}

/// When vsh cut either stream (its `[vsh: N bytes left out]` line): say
/// so, and the exit code that says the output is not whole.
fn cut_output(stdout: &[u8], stderr: &[u8]) -> Option<u8> {
    let cut = vsh::lower::vsh_monty::capture_was_cut;
    (cut(stdout) || cut(stderr)).then(|| {
        say!(
            "vsh: error: the program printed more than --max-output allows, so the middle of its output was left \
             out (marked in it): what --raw printed is not all of it; raise --max-output (for example 64MiB)"
        );
        EXIT_ERROR
    })
}

/// `--raw` for a run that failed: a Bash program's or command's own output
/// as it printed it and what happened in one line; other errors as usual.
fn raw_failure(error: Box<dyn std::error::Error>, output: Output) -> Result<u8, Box<dyn std::error::Error>> {
    let Some(failed @ vsh::VshError::Bash { source, .. }) = error.downcast_ref::<vsh::VshError>() else {
        return Err(error);
    };
    let vsh::lower::vsh_monty::ExecutionError::Bash { stdout, stderr, exit_code, failure, .. } = source.as_ref() else {
        return Err(error);
    };
    write_streams(stdout, stderr)?;
    if !output.quiet {
        say!("vsh: the program failed ({failure}): nothing of it is kept (--accept-failure keeps it)");
        // What to do about it, as without --raw (ux79 M1: the network's,
        // a path's out of the workspace, a repository's above it).
        for advice in failure::advice_for(failed).iter().filter(|advice| !advice.contains("--accept-failure")) {
            say!("vsh: {advice}");
        }
    }
    // Its own status, as the command's would be (a status vsh cannot pass
    // on, or output vsh cut, is 1).
    let own = u8::try_from(*exit_code).ok().filter(|status| *status != 0).unwrap_or(EXIT_ERROR);
    Ok(cut_output(stdout, stderr).unwrap_or(own))
}

/// How a run the operator could interrupt ended.
enum Interruptible {
    /// It ran to its end (committed, previewed, pending, denied).
    Done(Box<vsh::Receipt>),
    /// A signal cancelled it: the exit code to leave with (128 plus the signal).
    Interrupted(u8),
}

/// `request` with what `vsh run`, `exec` and `rerun` say of real commands:
/// a failing one's status accepted as the outcome (refused for a Monty
/// program, which raises), fresh scratch directories.
fn with_command_flags<'a>(
    mut request: RunRequest<'a>,
    accept_failure: bool,
    scratch: &args::ScratchArgs,
) -> RunRequest<'a> {
    if accept_failure {
        if request.language == vsh::Language::Monty {
            usage_conflict("--accept-failure is for Bash programs and real commands (a Monty program raises)");
        }
        request = request.with_failure_accepted();
    }
    if scratch.fresh_scratch {
        request = request.with_fresh_scratch();
    }
    request
}

/// Run `request` (again after a stale commit, up to `retries` times, as
/// [`Runtime::run_retrying_stale`] does) with Ctrl-C, `SIGTERM` and `SIGHUP`
/// cancelling it instead of ending the process under its commands (see
/// `interrupt.rs`).
fn run_interruptible(
    runtime: &Runtime,
    request: &RunRequest<'_>,
    interrupts: &interrupt::Interrupts,
    retries: u32,
    mut on_stale: impl FnMut(u32, &vsh::VshError),
) -> Result<Interruptible, Box<dyn std::error::Error>> {
    failure::note_policy(runtime.policy().calls());
    let since = now_ms();
    let mut attempt = 0;
    loop {
        let cancel = interrupts.arm();
        match runtime.run_cancellable(request, &cancel) {
            Err(error @ vsh::VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. }))
                if attempt < retries && interrupts.received().is_none() =>
            {
                attempt += 1;
                on_stale(attempt, &error);
            }
            Err(vsh::VshError::Cancelled) if let Some(signal) = interrupts.received() => {
                // After a hangup stderr may be gone: the exit code still says it.
                let _ = std::io::Write::write_fmt(
                    &mut std::io::stderr(),
                    format_args!(
                        "vsh: interrupted ({}): the run was stopped, its processes killed, and nothing was committed\n",
                        interrupt::Interrupts::name(signal)
                    ),
                );
                return Ok(Interruptible::Interrupted(interrupt::Interrupts::exit_code(signal)));
            }
            // Its commit found the workspace changed: the run's record is
            // stale, and the next step is its rerun (ux75 M1: none was said).
            Err(error @ vsh::VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. })) => {
                return Err(failure::stale_run(runtime, error, request, since));
            }
            outcome => {
                let receipt = outcome.map_err(|error| failure::with_remedies(runtime, error))?;
                return Ok(Interruptible::Done(Box::new(receipt)));
            }
        }
    }
}

/// Say on stderr when the workspace's recorded policy cannot be taken and
/// the run's own policy decides it. (A run decided under a policy of its
/// own when the workspace's could be taken says so in its receipt's
/// warnings: `Warning::OwnPolicy`.)
fn warn_if_overridden(runtime: &Runtime) -> Result<(), Box<dyn std::error::Error>> {
    match runtime.workspace_policy_text() {
        Err(vsh::VshError::WorkspacePolicyForged(why)) => {
            say!(
                "vsh: the workspace's recorded policy {why}; this run is decided under profile {} ({}) \
                 and its transaction records that policy",
                runtime.policy().profile().name(),
                runtime.policy().digest().short()
            );
            Ok(())
        }
        Err(error) => Err(error.into()),
        Ok(_) => Ok(()),
    }
}

/// `vsh policy show`: the workspace's effective policy as a policy file.
fn policy_show(runtime: &Runtime, json: bool) -> Result<u8, Box<dyn std::error::Error>> {
    let text = vsh::lower::vsh_policy::render_policy(runtime.policy());
    let recorded = runtime.workspace_policy_text().is_ok_and(|recorded| recorded.is_some());
    print_policy(runtime.policy(), text, recorded, json)
}

/// The runtime `command` works with: `recover` reports startup recovery
/// itself, as its result. A recorded policy that does not verify stops
/// every decision, not the operator's view: what waits and what happened
/// are listed, and the default policy is shown to start a file from (then
/// `None`: `policy show` is done).
fn open_for(
    command: &Command,
    config: &RuntimeConfig,
    json: bool,
) -> Result<Option<Runtime>, Box<dyn std::error::Error>> {
    if matches!(command, Command::Recover(_)) {
        return Ok(Some(Runtime::open(config.clone())?));
    }
    match open(config.clone()) {
        Ok(runtime) => Ok(Some(runtime)),
        Err(error) if forged_policy(error.as_ref()) && matches!(command, Command::Policy { .. }) => {
            say!("vsh: warning: {error}");
            default_policy_with(
                json,
                "# The workspace's recorded policy does not verify, and nothing runs under it: the\n\
                 # default policy, to start a file from (edit it, then `vsh init --force --policy FILE`).\n",
            )?;
            Ok(None)
        }
        Err(error) if forged_policy(error.as_ref()) && matches!(command, Command::Pending(_) | Command::Log(_)) => {
            say!(
                "vsh: warning: {error}; listed regardless (nothing runs, is approved or committed until it is \
                 recorded again)"
            );
            Ok(Some(open(config.clone().with_policy_profile(vsh::PolicyProfile::default()))?))
        }
        Err(error) => Err(error),
    }
}

/// Whether `error` is a recorded policy that does not verify.
fn forged_policy(error: &(dyn std::error::Error + 'static)) -> bool {
    matches!(error.downcast_ref::<vsh::VshError>(), Some(vsh::VshError::WorkspacePolicyForged(_)))
}

/// `vsh policy show` where no workspace is found: the policy a new
/// workspace runs under until `vsh init` records one.
fn default_policy_show(json: bool) -> Result<u8, Box<dyn std::error::Error>> {
    default_policy_with(
        json,
        "# No vsh workspace here: the policy a new workspace runs under until `vsh init`\n\
         # records one (save this as a file, edit it, then `vsh init --policy FILE`).\n",
    )
}

/// The default profile's policy, rendered after `header`, as text or `vsh.policy/1`.
fn default_policy_with(json: bool, header: &str) -> Result<u8, Box<dyn std::error::Error>> {
    use vsh::lower::vsh_policy::{PolicyProfile, TransactionPolicy};
    let policy = TransactionPolicy::from_profile(PolicyProfile::default(), None);
    let text = format!("{header}{}", vsh::lower::vsh_policy::render_policy(&policy));
    print_policy(&policy, text, false, json)
}

/// Print `policy`, rendered as `text`, as text or `vsh.policy/1`.
fn print_policy(
    policy: &vsh::lower::vsh_policy::TransactionPolicy,
    text: String,
    recorded: bool,
    json: bool,
) -> Result<u8, Box<dyn std::error::Error>> {
    if json {
        let document = documents::PolicyDocument {
            schema: documents::POLICY.to_owned(),
            profile: policy.profile().name().to_owned(),
            digest: policy.digest().to_hex(),
            recorded,
            text,
        };
        println!("{}", serde_json::to_string_pretty(&document)?);
    } else {
        print!("{text}");
    }
    Ok(EXIT_OK)
}

/// `vsh policy check FILE`.
fn policy_check(file: &std::path::Path, json: bool) -> Result<u8, Box<dyn std::error::Error>> {
    let policy = vsh::lower::vsh_policy::TransactionPolicy::from_file(file)?;
    let mut notes = policy.review_notes();
    // The workspace it is in, or, before `vsh init`, the directory init
    // would make one of, found as every command finds it (a repository's
    // top: ux86 L3, checked first, a misspelt pattern was said to be
    // valid; ux87 L1, from a subdirectory it judged the subdirectory).
    if let Ok(cwd) = std::env::current_dir() {
        notes.extend(unmatched_patterns(&policy, args::found_workspace(&cwd)));
    }
    if json {
        let document = documents::PolicyCheckDocument::new(
            file.display().to_string(),
            policy.profile().name().to_owned(),
            policy.digest().to_hex(),
            notes,
        );
        println!("{}", serde_json::to_string_pretty(&document)?);
    } else {
        println!("{}: valid; profile {}, digest {}", file.display(), policy.profile().name(), policy.digest().short());
        for note in notes {
            say!("vsh: note: {}", render::shown(&note, true));
        }
    }
    Ok(EXIT_OK)
}

/// The most entries [`unmatched_patterns`] looks at: a bigger workspace is
/// not judged.
const PATTERN_WALK_ENTRIES: usize = 200_000;

/// The most top-level names, unmatched patterns, and bytes of a pattern's
/// first name [`unmatched_patterns`] guesses a spelling from and for.
const SUGGESTED_FROM_NAMES: usize = 2_000;
const SUGGESTED_PATTERNS: usize = 20;
const SUGGESTED_NAME_BYTES: usize = 128;

/// A note for each of the operator's patterns (`[[protect]]`, `[[review]]`)
/// that no path in `workspace` matches now (ux80 L6: a misspelt rule
/// protected nothing, and the check said "valid"): what `.git` and vsh's
/// data hold is not looked at (nor judged, a pattern into them), no link
/// is followed, and nothing is said of a workspace of more than
/// [`PATTERN_WALK_ENTRIES`] entries.
fn unmatched_patterns(policy: &vsh::lower::vsh_policy::TransactionPolicy, workspace: &std::path::Path) -> Vec<String> {
    use vsh::lower::vsh_policy::RuleLabel;
    let protect = policy.calls().rules().iter().filter(|rule| rule.label == RuleLabel::Custom);
    let mut unmatched: Vec<(&str, &vsh::lower::vsh_policy::Pattern)> = protect
        .map(|rule| ("[[protect]]", &rule.pattern))
        .chain(policy.review_rules().iter().map(|rule| ("[[review]]", &rule.pattern)))
        .filter(|(_, pattern)| {
            let first = pattern.as_str().split('/').next().unwrap_or_default();
            first != ".git" && first != args::VSH_DIR
        })
        .collect();
    if unmatched.is_empty() {
        return Vec::new();
    }
    let mut pending = vec![std::path::PathBuf::new()];
    let mut seen = 0_usize;
    let mut top = Vec::new();
    while let Some(relative) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(workspace.join(&relative)) else { continue };
        for entry in entries.flatten() {
            seen += 1;
            if seen > PATTERN_WALK_ENTRIES {
                return Vec::new();
            }
            let path = relative.join(entry.file_name());
            let Some(vpath) = path.to_str().and_then(|path| vsh::VPath::parse(path).ok()) else { continue };
            unmatched.retain(|(_, pattern)| !pattern.matches(&vpath));
            if unmatched.is_empty() {
                return Vec::new();
            }
            if relative.as_os_str().is_empty() && top.len() < SUGGESTED_FROM_NAMES {
                top.push(vpath.as_str().to_owned());
            }
            let name = entry.file_name();
            let descend = entry.file_type().is_ok_and(|kind| kind.is_dir()) && name != ".git" && name != args::VSH_DIR;
            if descend {
                pending.push(path);
            }
        }
    }
    let names = top.join(", ");
    unmatched
        .into_iter()
        .enumerate()
        .map(|(index, (table, pattern))| {
            // A misspelt first name: the pattern with the name there is
            // (for the first patterns, of a usual length: sec89 L4, each
            // guess is an edit distance to every name).
            let text = pattern.as_str();
            let (first, rest) = text.split_once('/').map_or((text, ""), |(first, rest)| (first, rest));
            let guessed = (index < SUGGESTED_PATTERNS && first.len() <= SUGGESTED_NAME_BYTES)
                .then(|| vsh::lower::vsh_policy::closest(first, &names))
                .flatten();
            let meant = guessed.map_or_else(String::new, |name| {
                let slash = if rest.is_empty() { "" } else { "/" };
                format!(" (did you mean `{name}{slash}{rest}`?)")
            });
            format!("{table} pattern `{pattern}` matches no path in {} now{meant}", workspace.display())
        })
        .collect()
}

/// `vsh schema [NAME] [--write DIR]`.
fn schema_command(name: Option<&str>, write: Option<&std::path::Path>) -> Result<u8, Box<dyn std::error::Error>> {
    let schemas = documents::schemas();
    if let Some(dir) = write {
        for (name, schema) in &schemas {
            let path = dir.join(documents::file_name(name));
            std::fs::write(&path, format!("{}\n", serde_json::to_string_pretty(schema)?))
                .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
        }
        return Ok(EXIT_OK);
    }
    match name {
        None => {
            for (name, _) in &schemas {
                println!("{name}");
            }
        }
        Some(wanted) => {
            // `vsh.show/1`, or its short name: `show`, `vsh.show`.
            let is_wanted = |name: &str| {
                name == wanted
                    || name
                        .strip_prefix("vsh.")
                        .and_then(|rest| rest.split_once('/'))
                        .is_some_and(|(short, _)| short == wanted || wanted.strip_prefix("vsh.") == Some(short))
            };
            let (_, schema) = schemas.iter().find(|(name, _)| is_wanted(name)).ok_or_else(|| {
                let names: Vec<&str> = schemas.iter().map(|(name, _)| *name).collect();
                format!("no document is named {wanted:?}; the names are {}", names.join(", "))
            })?;
            println!("{}", serde_json::to_string_pretty(schema)?);
        }
    }
    Ok(EXIT_OK)
}

/// The budget of a run of `language` that reaches real programs: a
/// command's; a Monty program's own running time stays a program's, and
/// each command it runs with `vsh_exec` gets a command's, as on `vsh serve
/// --commands` (ux86 L2: a `while True` loop ran ten minutes). `--timeout`
/// sets both ([`args::BudgetArgs::budget_over`]).
fn reaching_commands(language: vsh::Language) -> vsh::ExecutionBudget {
    let commands = vsh::ExecutionBudget::for_commands();
    match language {
        vsh::Language::Monty => commands.with_guest_duration(language.default_budget().max_duration),
        _ => commands,
    }
}

/// `vsh rerun TX`: the stored program and intent, run again as a new transaction.
fn rerun_command(rerun: &args::RerunArgs, output: Output) -> Result<u8, Box<dyn std::error::Error>> {
    let config = || -> Result<RuntimeConfig, Box<dyn std::error::Error>> {
        Ok(runtime_config(&rerun.stored.common.existing_root()?)?.with_lock_wait(lock_wait(rerun.lock.lock_timeout)))
    };
    let mut runtime = open(config()?)?;
    let id = runtime.resolve(&rerun.stored.transaction)?;
    failure::refuse_rerun_of_revert(&runtime, id)?;
    let stored = runtime
        .program_to_run_again(id)?
        .ok_or_else(|| format!("transaction {id} has no stored program to run again"))?;
    // Real programs run again as they ran: a command, and Bash that ran in
    // real bash, in a candidate; a Monty program's vsh_exec when it had
    // them (its record holds what its commands were granted) or is asked.
    if rerun.again.commands && stored.language != vsh::Language::Monty {
        usage_conflict("--commands is for a Monty program's transaction (vsh_exec)");
    }
    // What of its work is committed now, before the check below: a run of
    // it committed from here on refuses this one's commit (sec92 M1).
    let done_so_far = runtime.work_done_so_far(id)?;
    if !rerun.once_more {
        failure::refuse_work_done_again(&runtime, id)?;
    }
    let first_grants = runtime.show(id)?.and_then(|receipt| receipt.grants);
    let real = match stored.language {
        vsh::Language::Command => RealCommands::Commands,
        vsh::Language::Bash if ran_in_real_bash(&runtime, id)? => RealCommands::ConfinedBash,
        vsh::Language::Monty if rerun.again.commands || first_grants.is_some() => RealCommands::Commands,
        _ => RealCommands::None,
    };
    if real != RealCommands::None {
        let mut settings = CommandSettings::resolve(&rerun.command)?;
        if let Some(first) = &first_grants
            && !rerun.again.no_first_grants
        {
            settings = settings.with_first_grants(first, |name, value| runtime.granted_value_is(id, name, value))?;
        }
        let mut config = settings.apply(config()?);
        config = match real {
            RealCommands::ConfinedBash => config.with_bash(vsh::BashConfig::confined()),
            _ => config.with_commands(),
        };
        drop(runtime);
        runtime = open(config)?;
    }
    // The first run's grants are the first run's: say when this one's differ
    // (in what they grant, not in the order they were given).
    let unordered = |mut grants: vsh::CommandGrants| {
        grants.env.sort();
        grants.env.dedup();
        grants.tools.sort();
        grants.ports.sort_unstable();
        grants
    };
    if let Some(first) = first_grants
        && let now = runtime.command_grants(stored.language).unwrap_or_default()
        && unordered(first.clone()) != unordered(now.clone())
        && !output.quiet
    {
        let said = |grants: &vsh::CommandGrants| {
            if grants.is_default() { "nothing beyond the defaults".to_owned() } else { render::grants_text(grants) }
        };
        let remedy =
            if rerun.again.no_first_grants { "; without --no-first-grants they get the first run's too" } else { "" };
        say!(
            "vsh: warning: this run's commands are granted other than the first run's (first: {}; now: {}){remedy}",
            said(&first),
            said(&now)
        );
    }
    let mode = vsh::RunMode::from(rerun.mode);
    // The budget a run of the same kind gets from `vsh run` or `vsh exec`.
    let budget = rerun.budget.budget_over(if real == RealCommands::None {
        stored.language.default_budget()
    } else {
        reaching_commands(stored.language)
    });
    let mut request = RunRequest::new(&stored.code)
        .with_language(stored.language)
        .with_mode(mode)
        .with_detail(detail(rerun.full))
        .with_budget(budget)
        .with_rerun_of(id)
        .with_done_so_far(done_so_far);
    if !stored.intent.is_empty() {
        request = request.with_intent(&stored.intent);
    }
    request = with_command_flags(request, rerun.accept_failure, &rerun.scratch);
    // One phase for the run and the commit auto mode may make after it: a
    // signal between them is the commit's (it has not begun) to stop.
    let interrupts = interrupt::Interrupts::install()?;
    let receipt = match run_interruptible(&runtime, &request, &interrupts, 0, |_, _| {})? {
        Interruptible::Done(receipt) => *receipt,
        Interruptible::Interrupted(code) => return Ok(code),
    };
    if !output.quiet && !rerun.stored.common.json {
        say_ran_again(&runtime, id, receipt.transaction)?;
    }
    let receipt = if rerun.approve_same {
        let _held = interrupts.hold();
        approve_same(&runtime, id, receipt, output)?
    } else {
        receipt
    };
    // Approved at once in auto mode: committed, as auto mode asks (ux77:
    // it was left approved, exit 4).
    if mode == vsh::RunMode::Auto && receipt.state == TransactionState::Approved {
        let (json, now) = (rerun.stored.common.json, now_ms());
        return commit_command(&runtime, receipt.transaction, json, output, now, &interrupts, true);
    }
    let asked = if mode == vsh::RunMode::Auto { Asked::Commit } else { Asked::Review };
    let code = failed_exit_code(&receipt, rerun.accept_failure).unwrap_or(exit_code(&receipt, asked, output.detailed));
    print_receipt(&shown_receipt(receipt, rerun.full), rerun.stored.common.json, output)?;
    Ok(code)
}

/// The first path where the changes of `first` and `second` differ (in
/// path order): one changes it and the other does not, or they leave it
/// otherwise (ux87 L4: "changes other than ... did" named none).
fn where_they_differ(runtime: &Runtime, first: vsh::TransactionId, second: vsh::TransactionId) -> Option<String> {
    let changes = |id| runtime.show(id).ok().flatten().map(|receipt| receipt.changes);
    let (one, other) = (changes(first)?, changes(second)?);
    let of = |changes: &[vsh::DiffEntry], path: &vsh::VPath| changes.iter().find(|entry| &entry.path == path).cloned();
    let mut paths: Vec<&vsh::VPath> = one.iter().chain(&other).map(|entry| &entry.path).collect();
    paths.sort();
    paths.dedup();
    paths.into_iter().find_map(|path| match (of(&one, path), of(&other, path)) {
        (Some(a), Some(b)) if a.kind == b.kind && a.after == b.after => None,
        (Some(_), Some(_)) => Some(format!("{} (left otherwise)", render::shown(path.as_str(), false))),
        (Some(_), None) => {
            Some(format!("{} (changed by {} alone)", render::shown(path.as_str(), false), first.short()))
        }
        (None, _) => Some(format!("{} (changed by {} alone)", render::shown(path.as_str(), false), second.short())),
    })
}

/// `vsh rerun TX --approve-same`: the rerun `receipt` approved, when it
/// waits for a review and makes TX's changes byte for byte (the operator's
/// review of TX holds for it), as `vsh approve` records an approval; else
/// as it is, saying why on stderr. Returns the receipt as it is now.
fn approve_same(
    runtime: &Runtime,
    id: vsh::TransactionId,
    mut receipt: vsh::Receipt,
    output: Output,
) -> Result<vsh::Receipt, Box<dyn std::error::Error>> {
    let again = receipt.transaction;
    if receipt.state != TransactionState::PendingApproval {
        return Ok(receipt);
    }
    // A review carries over only from work that went stale or lapsed
    // waiting for one: not from work an operator rejected, work made under
    // a policy since replaced, nor work that still waits (approve that
    // instead) (sec81 3).
    let first_record = runtime.transaction(id)?;
    let first = first_record.as_ref().map(|record| record.state);
    let rejected = runtime.runs_of_same_work(id)?.iter().any(|run| run.state == TransactionState::Rejected);
    let why_not = if rejected {
        Some("an operator rejected a run of this work".to_owned())
    } else if runtime.decided_under_another_policy(id) {
        Some(format!("{} was made under a policy since replaced", id.short()))
    } else if !matches!(first, Some(TransactionState::Stale | TransactionState::Expired)) {
        Some(format!("{} did not go stale or lapse waiting for a review", id.short()))
    } else {
        None
    };
    if let Some(why) = why_not {
        if !output.quiet {
            say!("vsh: {} waits for a review of its own: {why}, so no review of it carries over", again.short());
        }
        return Ok(receipt);
    }
    if !runtime.same_changes(id, again)? {
        if !output.quiet {
            say!(
                "vsh: {} changes other than {} did{} (vsh show {} reviews it): it waits for a review of its own",
                again.short(),
                id.short(),
                where_they_differ(runtime, id, again).map_or(String::new(), |at| format!(", at {at}")),
                again.short()
            );
        }
        return Ok(receipt);
    }
    let name = args::default_principal();
    let now = now_ms();
    let expires = now.saturating_add(15 * 60 * 1000);
    let record = runtime.approve(again, vsh::PrincipalId::digest(name.as_bytes()), now, expires)?;
    runtime.record_principal_name(&name);
    receipt.state = record.state;
    if !output.quiet {
        // Whether anyone had approved them (sec82 3: work that only went
        // stale waiting had its approval told as a review carried over).
        let seen = match first_record.as_ref().and_then(|record| record.approval.as_ref()) {
            Some(grant) => {
                let by = runtime.principal_name(&grant.principal()).unwrap_or_else(|| grant.principal().short());
                format!("which {by} approved")
            }
            None => format!(
                "which no one had approved: this approval is yours, unseen unless you reviewed {} (vsh show {} \
                 reviews them; vsh reject {} withdraws it)",
                id.short(),
                again.short(),
                again.short()
            ),
        };
        say!(
            "vsh: approved {} by {name}: its changes are byte for byte the ones {} made, {seen}; next: vsh commit {}",
            again.short(),
            id.short(),
            again.short()
        );
    }
    Ok(receipt)
}

/// `vsh revert TX`: new work that puts back what a committed transaction
/// replaced.
fn revert_command(revert: &args::RevertArgs, output: Output) -> Result<u8, Box<dyn std::error::Error>> {
    let config =
        runtime_config(&revert.stored.common.existing_root()?)?.with_lock_wait(lock_wait(revert.lock.lock_timeout));
    let runtime = open(config)?;
    let id = runtime.resolve(&revert.stored.transaction)?;
    let mode = vsh::RunMode::from(revert.mode);
    let receipt = runtime.revert(id, mode)?;
    if !output.quiet && !revert.stored.common.json {
        say!("vsh: made {} to revert {}", receipt.transaction.short(), id.short());
    }
    let asked = if mode == vsh::RunMode::Auto { Asked::Commit } else { Asked::Review };
    let code = exit_code(&receipt, asked, output.detailed);
    print_receipt(&shown_receipt(receipt, revert.full), revert.stored.common.json, output)?;
    Ok(code)
}

/// What `vsh rerun` of `id` made, as `again`, on stderr; and, when the
/// first work still waits for a decision or its commit, how to drop it (or
/// it stays in `vsh pending` beside the new).
fn say_ran_again(runtime: &Runtime, id: vsh::TransactionId, again: vsh::TransactionId) -> Result<(), vsh::VshError> {
    say!("vsh: ran the program of {} again as {}", id.short(), again.short());
    let waiting = runtime.transaction(id)?.is_some_and(|record| {
        matches!(
            record.state,
            TransactionState::PendingApproval | TransactionState::Approved | TransactionState::AutoApproved
        ) && record.artifact.is_some()
    });
    if waiting && again != id {
        say!(
            "vsh: {} still waits (vsh pending lists it); `vsh reject --only {}` drops it and keeps this run",
            id.short(),
            id.short()
        );
    }
    Ok(())
}

/// Whether transaction `id`'s Bash program ran in real bash (`run
/// --confined`), as its stored receipt's profile says.
pub(crate) fn ran_in_real_bash(runtime: &Runtime, id: vsh::TransactionId) -> Result<bool, vsh::VshError> {
    Ok(runtime.show(id)?.is_some_and(|receipt| {
        matches!(&receipt.output, vsh::ExecutionOutput::Bash(result) if result.profile == vsh::lower::vsh_monty::BASH_CONFINED_PROFILE)
    }))
}

/// The man page (roff): `clap_mangen`'s rendering of the grammar, whose
/// subcommand list names a page per subcommand (`vsh-init(1)`) that is
/// not shipped; each is named as it is typed instead (`vsh init`), and
/// its options are in `vsh SUBCOMMAND --help`.
fn man_page() -> Result<String, Box<dyn std::error::Error>> {
    let command = <args::Cli as clap::CommandFactory>::command();
    let mut roff = Vec::new();
    clap_mangen::Man::new(command).render(&mut roff)?;
    let mut page = String::new();
    // The exit-code table (clap's after-help, its EXTRA section) is laid
    // out by hand: set without filling, a man page's EXIT STATUS.
    let mut in_table = false;
    for line in String::from_utf8(roff)?.lines() {
        if line.starts_with(".SH ") && in_table {
            page.push_str(".fi\n");
            in_table = false;
        }
        if line == ".SH EXTRA" {
            page.push_str(".SH \"EXIT STATUS\"\n.nf\n");
            in_table = true;
            continue;
        }
        match line.strip_prefix("vsh\\-").and_then(|rest| rest.strip_suffix("(1)")) {
            Some(name) => {
                page.push_str("\\fBvsh ");
                page.push_str(name);
                page.push_str("\\fR");
            }
            None if line == ".SH SUBCOMMANDS" => {
                page.push_str(line);
                page.push_str("\nEach takes \\fB\\-\\-help\\fR for its options and arguments.");
            }
            None => page.push_str(line),
        }
        page.push('\n');
    }
    if in_table {
        page.push_str(".fi\n");
    }
    Ok(page)
}

/// Open the runtime, telling the operator on stderr what its startup
/// recovery found (it never waits: with the lock held elsewhere it defers).
fn open(config: RuntimeConfig) -> Result<Runtime, Box<dyn std::error::Error>> {
    open_as(config, false)
}

/// A directory that is never made a workspace (where there is none yet):
/// the filesystem's root, the home directory (whose `.vsh` every project
/// below without its own would then find, and which holds vsh's own key)
/// and the shared temporary directories (other users' files). Nothing is
/// made; the error says where to go instead.
pub(crate) fn refuse_as_a_new_workspace(dir: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    if args::is_workspace(dir) {
        return Ok(());
    }
    let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let same = |other: &std::path::Path| std::fs::canonicalize(other).is_ok_and(|other| other == real);
    // Every user may write it (/tmp, /var/tmp, /dev/shm, /run/lock, ...).
    let shared = std::fs::metadata(&real).is_ok_and(|meta| meta.mode() & 0o002 != 0);
    let what = if real.parent().is_none() {
        "the filesystem's root"
    } else if std::env::home_dir().is_some_and(|home| same(&home)) {
        "your home directory"
    } else if shared || same(&std::env::temp_dir()) {
        "a directory every user may write (as /tmp)"
    } else {
        return Ok(());
    };
    Err(format!(
        "{} is {what}, not a project: vsh makes no workspace there; run vsh in a project's directory (cd \
         there, or give --workspace DIR naming it)",
        dir.display()
    ))
}

/// An error when `dir`, not a workspace yet, lies inside one that vsh run
/// there would use (ux61 3: a mistyped `--workspace` made a nested
/// workspace under the default policy, which every later command there
/// used): only `vsh init` makes a workspace inside another.
pub(crate) fn refuse_inside_another(dir: &std::path::Path) -> Result<(), String> {
    let Some(enclosing) = args::enclosing_workspace(dir) else { return Ok(()) };
    let (dir, enclosing) = (dir.to_string_lossy(), enclosing.to_string_lossy());
    let (dir, enclosing) = (render::shown(&dir, false), render::shown(&enclosing, false));
    Err(format!(
        "{dir} lies inside the workspace at {enclosing}: vsh makes no workspace inside another unasked (its \
         policy would not apply there, nor its pending work show); give --workspace {enclosing}, or `vsh init \
         --workspace {dir}` to make {dir} a workspace of its own"
    ))
}

/// An error when `dir`, with no policy of its own yet, lies inside a
/// workspace whose policy has rules of the operator's that reach into it
/// (`[[protect]]`, `[[review]]`, the writable roots): a workspace made
/// there would run under its own policy, out of those rules (ux82 M2:
/// `vsh init --workspace packages/billing` took the package out from under
/// the rule protecting it, unasked, and a change to it was committed).
/// `--force` makes it anyway. A policy that cannot be read is taken to
/// reach it.
fn refuse_carving_out(dir: &std::path::Path) -> Result<(), String> {
    let Some(enclosing) = args::enclosing_workspace(dir) else { return Ok(()) };
    let (Ok(real), Ok(top)) = (std::fs::canonicalize(dir), std::fs::canonicalize(&enclosing)) else { return Ok(()) };
    let Some(relative) = real.strip_prefix(&top).ok().and_then(|relative| relative.to_str()) else { return Ok(()) };
    let file = top.join(args::VSH_DIR).join("data").join("policy.toml");
    let rules = match vsh::lower::vsh_policy::TransactionPolicy::from_file(&file) {
        Ok(policy) => rules_reaching(&policy, relative),
        Err(_) if !file.exists() => Vec::new(),
        Err(_) => vec!["its recorded policy, which cannot be read".to_owned()],
    };
    if rules.is_empty() {
        return Ok(());
    }
    let shown = |path: &std::path::Path| render::shown(&path.to_string_lossy(), false).into_owned();
    Err(format!(
        "{} lies inside the workspace at {}, whose policy reaches into it ({}): a workspace of its own there \
         would run under its own policy, out of those rules; give --force to make it anyway",
        shown(&real),
        shown(&top),
        rules.join("; ")
    ))
}

/// The operator's rules of `policy` that reach the directory `relative`
/// or what it holds: at most three, named, then how many more.
fn rules_reaching(policy: &vsh::lower::vsh_policy::TransactionPolicy, relative: &str) -> Vec<String> {
    use vsh::lower::vsh_policy::{Pattern, RuleLabel};
    let reaches = |pattern: &Pattern| {
        let mut state = pattern.start();
        for name in relative.split('/').filter(|name| !name.is_empty()) {
            if pattern.is_match(&state) {
                return true;
            }
            state = pattern.step(&state, name);
        }
        pattern.is_match(&state) || pattern.can_continue(&state)
    };
    let calls = policy.calls();
    let mut named: Vec<String> = calls
        .rules()
        .iter()
        .filter(|rule| rule.label == RuleLabel::Custom && reaches(&rule.pattern))
        .map(|rule| match &rule.reason {
            Some(reason) => format!("[[protect]] `{}`: {reason}", rule.pattern),
            None => format!("[[protect]] `{}`", rule.pattern),
        })
        .chain(
            policy
                .review_rules()
                .iter()
                .filter(|rule| reaches(&rule.pattern))
                .map(|rule| format!("[[review]] `{}`", rule.pattern)),
        )
        .collect();
    if let Some(roots) = calls.writable_roots() {
        named.push(format!(
            "defaults.writable_roots ({})",
            roots.iter().map(vsh::VPath::as_str).collect::<Vec<_>>().join(", ")
        ));
    }
    if named.len() > 3 {
        let more = named.len() - 3;
        named.truncate(3);
        named.push(format!("and {more} more"));
    }
    named.iter().map(|rule| render::shown(rule, false).into_owned()).collect()
}

/// [`open`], for `vsh init` (`init`) or any other command: a workspace made
/// by this command (`vsh run` where none was) is said so on stderr, and one
/// inside another workspace is made only by `vsh init`, with a warning.
fn open_as(config: RuntimeConfig, init: bool) -> Result<Runtime, Box<dyn std::error::Error>> {
    let root = config.workspace_root().to_owned();
    if config.data_directory().is_none() {
        args::refuse_anothers_workspace(&root)?;
    }
    let new = config.data_directory().is_none() && !args::is_workspace(&root);
    if new {
        refuse_as_a_new_workspace(&root)?;
    }
    // A workspace inside another is made, or used without a policy of its
    // own, only by `vsh init` (ux61 3, sec66 S2).
    if config.data_directory().is_none() && !init {
        refuse_inside_another(&root)?;
    }
    // Whatever `.vsh` was there before (a symlink a repository shipped, a
    // file) is the workspace's, not this command's to remove.
    let made_here = new && std::fs::symlink_metadata(root.join(".vsh")).is_err();
    let runtime = match Runtime::open(config) {
        Ok(runtime) => runtime,
        // A workspace this command was making is not left half made.
        Err(error) if made_here => {
            let _ = std::fs::remove_dir_all(root.join(".vsh"));
            return Err(error.into());
        }
        Err(error) => return Err(error.into()),
    };
    // Where it is, whatever the command line called it (`.`, `..`).
    let shown = std::fs::canonicalize(&root).unwrap_or_else(|_| root.clone());
    let _ = OPENED.set(shown.clone());
    if new {
        let here = shown.to_string_lossy();
        let here = render::shown(&here, false);
        // `vsh init` says what it made itself, with the policy (ux62 5).
        if !init && !QUIET.load(std::sync::atomic::Ordering::Relaxed) {
            say!("vsh: made a new workspace at {here} (its data in .vsh/ there; `vsh init` records a policy for it)");
        }
        // A warning, under -q too (ux82 M2: it went unsaid).
        if let Some(enclosing) = shown.parent().and_then(args::workspace_at_or_above) {
            let enclosing = enclosing.to_string_lossy();
            let enclosing = render::shown(&enclosing, false);
            say!(
                "vsh: warning: {here} lies inside the workspace at {enclosing}: vsh commands run in {here} use its \
                 own policy and data from now on; runs in {enclosing} still change its files under that \
                 workspace's policy, but can never remove it or its .vsh (removing {here}/.vsh makes it part of \
                 {enclosing} again)"
            );
        }
    }
    let startup = runtime.startup_recovery();
    if !startup.is_empty() {
        say_part!("vsh: recovered interrupted commits first: {}", render::recovery_text_within(startup, 5));
    }
    Ok(runtime)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

/// A run's receipt as printed: with every changed path, and each one's
/// hunks only when asked (`--full`).
/// What a receipt carries for the command line: every changed path, and
/// the review's hunks when they will be shown (`--full`).
fn detail(full: bool) -> vsh::ReceiptDetail {
    if full { vsh::ReceiptDetail::Full } else { vsh::ReceiptDetail::Changes }
}

pub(crate) fn shown_receipt(mut receipt: vsh::Receipt, hunks: bool) -> vsh::Receipt {
    if !hunks {
        receipt.review.clear();
    }
    receipt
}

/// Warnings of the command line's own about this command, for the
/// receipt's JSON `warnings` too ([`warn`]).
static WARNINGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Say a warning of the command line's own on stderr (under -q too), and
/// keep it for the receipt's JSON.
fn warn(text: &str) {
    say!("vsh: warning: {text}");
    WARNINGS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(text.to_owned());
}

fn print_receipt(receipt: &vsh::Receipt, json: bool, output: Output) -> Result<(), Box<dyn std::error::Error>> {
    print_receipt_next(receipt, json, output, None)
}

/// [`print_receipt`], its text saying `next` is what to do next when given.
fn print_receipt_next(
    receipt: &vsh::Receipt,
    json: bool,
    output: Output,
    next: Option<String>,
) -> Result<(), Box<dyn std::error::Error>> {
    if json {
        let mut document = vsh::document::ReceiptDocument::from(receipt);
        // A run's review is made within the default limits.
        document.warnings.extend(show::left_out(receipt, false));
        document.warnings.extend(WARNINGS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).drain(..));
        document.next = render::json_next(receipt, next);
        println!("{}", serde_json::to_string_pretty(&document)?);
    } else if !output.quiet {
        let text = match next {
            Some(next) => render::receipt_text_next(receipt, Some(next)),
            None => render::receipt_text(receipt),
        };
        anstream::print!("{text}");
    } else if let Some(denial) = render::denial_line(receipt) {
        // Quiet prints errors: a denial is the one outcome that is one.
        say!("vsh: {denial}");
    }
    // Work waiting for a reviewer, or for its commit, must not be lost for
    // want of its id: said under -q after the warnings its line points to
    // ("any change named above": ux84, it came before them).
    let quiet_outcome = (output.quiet
        && !json
        && render::denial_line(receipt).is_none()
        && (receipt.state == TransactionState::PendingApproval
            || (receipt.state == TransactionState::AutoApproved && receipt.changed_paths > 0)))
        .then(|| render::outcome_line(receipt));
    // Cut at --max-output: said whatever the mode (ux58 4: only --raw did).
    let cut = vsh::lower::vsh_monty::capture_was_cut;
    if cut(receipt.output.stdout_bytes()) || cut(receipt.output.stderr_bytes()) {
        say!(
            "vsh: warning: the program printed more than --max-output allows, so the middle of its output was left \
             out (marked in it); raise --max-output (for example 64MiB) to keep it all"
        );
    }
    // Things the operator must know even when stdout goes to a program
    // (why work waits is in the text receipt's decision already).
    let in_text = !json && !output.quiet;
    for warning in receipt.warnings.iter().filter(|warning| !(in_text && render::is_decision_note(warning))) {
        // A warning may name paths (a build directory, uncommitted work's
        // changes): escaped, as every path a terminal shows is.
        say!("vsh: warning: {}", render::shown(&warning.to_string(), true));
    }
    if let Some(line) = quiet_outcome {
        say!("vsh: {line}");
    }
    if let Some(commit) = &receipt.commit {
        for kept in &commit.kept {
            say!(
                "vsh: {} was written by someone else during the commit; its old node is kept at {}",
                render::shown(kept.path.as_str(), false),
                kept.kept
            );
        }
    }
    Ok(())
}

/// `vsh commit TX`. Exactly once: a transaction already committed is
/// reported as such (exit 0, nothing written again).
fn commit_command(
    runtime: &Runtime,
    id: vsh::TransactionId,
    json: bool,
    output: Output,
    now: u64,
    interrupts: &interrupt::Interrupts,
    approved_here: bool,
) -> Result<u8, Box<dyn std::error::Error>> {
    // Ctrl-C, SIGTERM or SIGHUP stop a commit that has not begun, and let
    // one that has run to its end (ux75 M2: the signal ended the process
    // mid-commit, and the next command rolled its files back).
    let committed = runtime.commit_cancellable(id, now, &interrupts.arm());
    if let Some(signal) = interrupts.received() {
        let name = interrupt::Interrupts::name(signal);
        // After a hangup stderr may be gone: the exit code still says it.
        let said = if matches!(committed, Err(vsh::VshError::Cancelled)) && approved_here {
            // It waited for an approval before this command (sec83 F3: "waits
            // as it did" said of work this command had approved).
            format!(
                "vsh: interrupted ({name}) before the commit changed anything: nothing was committed; {0} is \
                 approved and waits for its commit (vsh commit {0} commits it, vsh reject {0} rejects it)\n",
                id.short()
            )
        } else if matches!(committed, Err(vsh::VshError::Cancelled)) {
            format!(
                "vsh: interrupted ({name}) before the commit changed anything: nothing was committed, and {0} \
                 waits as it did (vsh commit {0} commits it)\n",
                id.short()
            )
        } else {
            format!("vsh: interrupted ({name}) once the commit had begun: it ran to its end, as below\n")
        };
        let _ = std::io::Write::write_all(&mut std::io::stderr(), said.as_bytes());
        if matches!(committed, Err(vsh::VshError::Cancelled)) {
            return Ok(interrupt::Interrupts::exit_code(signal));
        }
    }
    match committed {
        Ok(receipt) => {
            print_receipt(&receipt, json, output)?;
            Ok(exit_code(&receipt, Asked::Commit, output.detailed))
        }
        Err(vsh::VshError::NotCommittable { state: TransactionState::Committed, .. }) => {
            // A commit asked again answers as the first did, in JSON: the
            // receipt of the committed work (a retry reads the same document).
            if json && let Some(receipt) = runtime.show(id)? {
                print_receipt(&receipt, json, output)?;
                return Ok(exit_code(&receipt, Asked::Commit, output.detailed));
            }
            let record = runtime.transaction(id)?.ok_or(vsh::VshError::UnknownTransaction(id))?;
            print_settled_again(runtime, &record, json, output, now, "committed", "nothing was written again")
        }
        Err(error) => Err(failure::with_rerun_hint(runtime, id, error)),
    }
}

/// `vsh approve --commit TX`: the approval, then its commit, in one phase of
/// caught signals (installed before the runtime opened): a signal before the
/// approval approves nothing, one after it commits nothing, and each says
/// what stands.
fn approve_and_commit(
    runtime: &Runtime,
    id: vsh::TransactionId,
    approve: &args::ApproveArgs,
    json: bool,
    output: Output,
    now: u64,
    interrupts: &interrupt::Interrupts,
) -> Result<u8, Box<dyn std::error::Error>> {
    let interrupted = |signal: i32, what: String| {
        // After a hangup stderr may be gone: the exit code still says it.
        let name = interrupt::Interrupts::name(signal);
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!("vsh: interrupted ({name}) before the {what}\n").as_bytes(),
        );
        interrupt::Interrupts::exit_code(signal)
    };
    if let Some(signal) = interrupts.received() {
        return Ok(interrupted(signal, "approval: nothing was approved or committed".to_owned()));
    }
    // Said by the commit's receipt; an approval that did not happen is the error.
    {
        let _held = interrupts.hold();
        approve_command(runtime, id, approve, false, Output { quiet: true, ..output }, now)?;
    }
    if let Some(signal) = interrupts.received() {
        let what = format!(
            "commit: nothing was committed; {0} is approved and waits for its commit (vsh commit {0} commits it, \
             vsh reject {0} rejects it)",
            id.short()
        );
        return Ok(interrupted(signal, what));
    }
    commit_command(runtime, id, json, output, now, interrupts, true)
}

/// `vsh approve TX`. Approving twice changes nothing and says so (exit 0),
/// as a second reject or commit does; work that needs no approval, or can
/// never have it, says what to do instead.
fn approve_command(
    runtime: &Runtime,
    id: vsh::TransactionId,
    approve: &args::ApproveArgs,
    json: bool,
    output: Output,
    now: u64,
) -> Result<u8, Box<dyn std::error::Error>> {
    let name = approve.principal();
    let principal = vsh::PrincipalId::digest(name.as_bytes());
    let expires = now.saturating_add(u64::try_from(approve.ttl.as_millis()).unwrap_or(u64::MAX));
    let record = match runtime.approve(id, principal, now, expires) {
        Ok(record) => {
            // Who it was, for every later review (ux68 M2).
            runtime.record_principal_name(&name);
            record
        }
        // Approving twice changes nothing and says so, as a second
        // reject or commit does.
        Err(vsh::VshError::NotApprovable { state: TransactionState::Approved, .. }) => {
            let record = runtime.transaction(id)?.ok_or(vsh::VshError::UnknownTransaction(id))?;
            if json {
                print_record(runtime, &record)?;
            } else if !output.quiet {
                let by = record
                    .approval
                    .as_ref()
                    .map_or_else(String::new, |grant| format!(" (principal {})", grant.principal().short()));
                println!("{}  already approved{by}; nothing changed", record.id);
            }
            return Ok(EXIT_OK);
        }
        // Work already committed needs no approval: nothing changes, said so.
        Err(vsh::VshError::NotApprovable { state: TransactionState::Committed, .. }) => {
            let record = runtime.transaction(id)?.ok_or(vsh::VshError::UnknownTransaction(id))?;
            return print_settled_again(runtime, &record, json, output, now, "committed", "nothing to approve");
        }
        // Auto-approved work needs no approval either: nothing changes, and
        // the line says what does commit it (a loop of `vsh approve TX &&
        // vsh commit TX` over the queue goes on).
        Err(error @ vsh::VshError::NotApprovable { state: TransactionState::AutoApproved, .. })
            if !runtime.decided_under_another_policy(id) =>
        {
            let Some(record) = runtime.transaction(id)? else {
                return Err(failure::with_rerun_hint(runtime, id, error));
            };
            if json {
                print_record(runtime, &record)?;
            } else if !output.quiet {
                println!("{}  auto-approved: nothing to approve; next: vsh commit {}", record.id, record.id.short());
            }
            return Ok(EXIT_OK);
        }
        Err(error) => return Err(failure::with_rerun_hint(runtime, id, error)),
    };
    // Approving unseen-change work drops a change someone made: said once
    // more, where the approval is given (ux71 M2).
    if let Ok(Some(receipt)) = runtime.show(id)
        && let Some(note) =
            receipt.warnings.iter().find(|warning| matches!(warning, vsh::Warning::UnseenChanges { .. }))
        && !output.quiet
    {
        say!(
            "vsh: warning: its commit loses any change made since the files were last seen that its diff does not keep ({note})"
        );
    }
    if json {
        print_record(runtime, &record)?;
    } else if !output.quiet {
        println!(
            "{}  {} by {name} (principal {}) for {}; next: vsh commit {}",
            record.id,
            record.state.name(),
            principal.short(),
            render::spaced_duration(approve.ttl),
            record.id.short()
        );
    }
    Ok(EXIT_OK)
}

/// `vsh reject TX`. Rejecting twice changes nothing and says so (exit 0),
/// like a second commit; a transaction past its decision is refused in a line.
fn reject_command(
    runtime: &Runtime,
    id: vsh::TransactionId,
    only: bool,
    json: bool,
    output: Output,
    now: u64,
) -> Result<u8, Box<dyn std::error::Error>> {
    use vsh::lower::vsh_store::StoreError;
    // Its other runs are rejected with it (unless --only), also when it
    // was settled before they were made, or can never commit itself (ux77
    // 2: a stale first run's rejection left its waiting rerun).
    let others = || if only { Ok(Vec::new()) } else { runtime.reject_other_runs(id, now) };
    // What the operator said no to, for an agent's server to tell from its
    // own discard (ux77: `--only` was taken for a refusal of the work, and a
    // restarted server took its agent's discards for an operator's).
    let scope =
        if only { vsh::lower::vsh_store::RejectionScope::ThisRun } else { vsh::lower::vsh_store::RejectionScope::Work };
    let record = match runtime.reject(id, now) {
        Ok(record) => record,
        Err(vsh::VshError::Store(StoreError::WrongState {
            state:
                state @ (TransactionState::Rejected
                | TransactionState::Denied
                | TransactionState::Expired
                | TransactionState::Stale
                | TransactionState::Failed),
            ..
        })) => {
            let record = runtime.transaction(id)?.ok_or(vsh::VshError::UnknownTransaction(id))?;
            if state == TransactionState::Rejected {
                runtime.record_rejection_scope(id, scope);
            }
            let also = others()?;
            let nothing = if state == TransactionState::Rejected {
                "nothing changed"
            } else {
                "it can never be committed; nothing changed"
            };
            if also.is_empty() {
                return print_settled_again(runtime, &record, json, output, now, state.name(), nothing);
            }
            if json {
                print_record_with(runtime, &record, Some(&also))?;
            } else if !output.quiet {
                println!("{}  already {} {}", record.id, state.name(), render::relative(record.updated_ms, now));
                print_also_rejected(&also);
            }
            return Ok(EXIT_OK);
        }
        Err(vsh::VshError::Store(StoreError::WrongState { state: TransactionState::Committed, .. })) => {
            return Err(format!(
                "{id} cannot be rejected: it is committed, its changes on disk; to undo them: vsh revert {} \
                 (new work that puts back what it replaced, decided and reviewed like any change)",
                id.short()
            )
            .into());
        }
        Err(vsh::VshError::Store(StoreError::WrongState { state, .. })) => {
            return Err(format!("{id} cannot be rejected: it is {}", state.name()).into());
        }
        Err(error) => return Err(error.into()),
    };
    runtime.record_rejection_scope(id, scope);
    // The operator said no to the work: every run of it that could still
    // commit goes with it (sec79 F2).
    let also = others()?;
    if json {
        print_record_with(runtime, &record, Some(&also))?;
    } else if !output.quiet {
        println!("{}  {}", record.id, record.state.name());
        print_also_rejected(&also);
    }
    Ok(EXIT_OK)
}

/// `vsh reject TX TX...` (ux82 L9: four policy-changed runs took four
/// commands): every name resolved first (a name that names none rejects
/// nothing), then each rejected as `vsh reject TX` would, in the order
/// given; one that cannot be is said and the rest go on, and the exit code
/// is the first failure's.
fn reject_named(
    runtime: &Runtime,
    first: vsh::TransactionId,
    reject: &args::RejectArgs,
    json: bool,
    output: Output,
    now: u64,
) -> Result<u8, Box<dyn std::error::Error>> {
    if reject.more.is_empty() {
        return reject_command(runtime, first, reject.only, json, output, now);
    }
    let mut ids = vec![first];
    for name in &reject.more {
        // Said: none of them is rejected (ux84: it was not).
        ids.push(runtime.resolve(name).map_err(|error| format!("{error}; nothing was rejected"))?);
    }
    let mut code = EXIT_OK;
    for id in ids {
        // (The error names the transaction itself.)
        if let Err(error) = reject_command(runtime, id, reject.only, false, output, now) {
            say!("vsh: {}", render::shown(&error.to_string(), true));
            if code == EXIT_OK {
                code = EXIT_ERROR;
            }
        }
    }
    Ok(code)
}

/// `vsh reject`'s lines for the other runs of the same work it rejected.
fn print_also_rejected(also: &[vsh::TransactionRecord]) {
    for record in also {
        println!("{}  rejected with it: a run of the same program (vsh rerun)", record.id);
    }
}

/// A decision asked for again (a second commit, a second reject): the
/// record as it is, or `<id>  already <done> <when>; <nothing>`, exit 0.
fn print_settled_again(
    runtime: &Runtime,
    record: &vsh::TransactionRecord,
    json: bool,
    output: Output,
    now: u64,
    done: &str,
    nothing: &str,
) -> Result<u8, Box<dyn std::error::Error>> {
    if json {
        print_record(runtime, record)?;
    } else if !output.quiet {
        println!("{}  already {done} {}; {nothing}", record.id, render::relative(record.updated_ms, now));
    }
    Ok(EXIT_OK)
}

/// A record as `vsh.record/1`, with its stored receipt and intent.
pub(crate) fn print_record(
    runtime: &Runtime,
    record: &vsh::TransactionRecord,
) -> Result<(), Box<dyn std::error::Error>> {
    print_record_with(runtime, record, None)
}

/// [`print_record`], naming the other runs of the same work rejected with it.
fn print_record_with(
    runtime: &Runtime,
    record: &vsh::TransactionRecord,
    also_rejected: Option<&[vsh::TransactionRecord]>,
) -> Result<(), Box<dyn std::error::Error>> {
    let receipt = runtime.show(record.id)?;
    let stored = runtime.stored_program(record.id)?;
    let document = render::record_document(record, receipt.as_ref(), stored.as_ref())
        .with_approver_name(show::approver_name(runtime, record));
    let mut document = vsh::document::RecordDocument::new(document);
    if let Some(also) = also_rejected {
        document = document.with_also_rejected(also);
    }
    println!("{}", serde_json::to_string_pretty(&document)?);
    Ok(())
}

/// `vsh recover --salvage-log`: salvage a damaged log before the runtime
/// opens, and say what was kept, changed and lost (on stderr: the recovery
/// report that follows is the command's output; `--json` carries it there).
fn salvage_log(config: &RuntimeConfig, output: Output) -> Result<vsh::lower::vsh_store::Salvaged, vsh::VshError> {
    let salvaged = Runtime::salvage_log(config)?;
    if output.quiet {
        return Ok(salvaged);
    }
    match salvaged.damaged_at {
        None => say!("vsh: the transaction log is whole: nothing to salvage"),
        Some(at) => {
            say!(
                "vsh: the transaction log was damaged at byte {at}: kept the {} before it; the {} from the damage \
                 on are lost, and what they recorded with them (every byte of the damaged log is kept in \
                 .vsh/data/{})",
                render::counted(salvaged.kept, "record"),
                render::counted(salvaged.lost_bytes, "byte"),
                salvaged.kept_as.as_deref().unwrap_or("txlog.damaged")
            );
            for id in &salvaged.voided {
                say!(
                    "vsh:   {}  a lost change may have committed, rejected or finished it: it can never be \
                     committed as it is (recovery settles it by what the workspace holds: committed if every \
                     change it makes is there, failed if none is; vsh rerun makes the work again)",
                    id.short()
                );
            }
        }
    }
    Ok(salvaged)
}

/// The signals a commit, or an approval and its commit, catches from its
/// start ([`interrupt::Interrupts`]); `None` for any other command.
fn commit_interrupts(command: &Command) -> std::io::Result<Option<interrupt::Interrupts>> {
    matches!(command, Command::Commit(_) | Command::Approve(args::ApproveArgs { commit: true, .. }))
        .then(interrupt::Interrupts::install)
        .transpose()
}

fn tx_command(command: &Command, output: Output) -> Result<u8, Box<dyn std::error::Error>> {
    let (common, transaction, timeout) = match command {
        Command::Pending(common) | Command::Policy { action: args::PolicyAction::Show(common) } => (common, None, None),
        Command::Gc(gc) => (&gc.common, None, None),
        Command::Log(log) => (&log.common, None, None),
        Command::Show(show) => (&show.stored.common, Some(&show.stored.transaction), None),
        Command::Reject(reject) => (&reject.stored.common, Some(&reject.stored.transaction), None),
        Command::Approve(approve) => (&approve.stored.common, Some(&approve.stored.transaction), None),
        Command::Commit(commit) => {
            (&commit.stored.common, Some(&commit.stored.transaction), Some(commit.lock.lock_timeout))
        }
        Command::Recover(recover) => {
            (&recover.common, recover.restore.as_ref().or(recover.keep.as_ref()), Some(recover.lock.lock_timeout))
        }
        other => unreachable!("{other:?} is handled by main"),
    };
    let root = match common.existing_root() {
        Ok(root) => root,
        // No workspace here: the policy a new one runs under, to start a
        // policy file from.
        Err(_) if matches!(command, Command::Policy { .. }) && common.workspace.is_none() => {
            return default_policy_show(common.json);
        }
        Err(error) => return Err(error.into()),
    };
    let mut config = runtime_config(&root)?;
    if let Some(timeout) = timeout {
        config = config.with_lock_wait(lock_wait(timeout));
    }
    // A commit, or an approval and its commit, catches Ctrl-C from the
    // start: a signal before the commit begins stops it with a line saying
    // what stands (ux77 F5: the default ended vsh silently, mid-approval).
    let interrupts = commit_interrupts(command)?;
    let salvaged = match command {
        Command::Recover(recover) if recover.salvage_log => Some(salvage_log(&config, output)?),
        _ => None,
    };
    let Some(runtime) = open_for(command, &config, common.json)? else { return Ok(EXIT_OK) };
    let id = transaction.map(|name| runtime.resolve(name)).transpose()?;
    // A transaction made under a per-run policy is reviewed, approved and
    // committed under that policy.
    let runtime = match id {
        Some(id) if matches!(command, Command::Show(_) | Command::Approve(_) | Command::Commit(_)) => {
            match runtime.run_policy(id)? {
                Some(policy) if policy.digest != runtime.policy().digest() => {
                    drop(runtime);
                    open(config.with_policy_text(policy.text))?
                }
                _ => runtime,
            }
        }
        _ => runtime,
    };
    let now = now_ms();
    match (command, id) {
        (Command::Pending(_), _) => listing::pending(&runtime, common.json, now),
        (Command::Log(log), _) => listing::log(&runtime, log, now),
        (Command::Policy { .. }, _) => policy_show(&runtime, common.json),
        (Command::Gc(gc), _) => listing::gc(&runtime, gc, output.quiet, now),
        (Command::Show(show), Some(id)) => show::show(&runtime, id, show, common.json, output, now),
        (Command::Approve(approve), Some(id)) if let Some(interrupts) = &interrupts => {
            approve_and_commit(&runtime, id, approve, common.json, output, now, interrupts)
        }
        (Command::Approve(approve), Some(id)) => approve_command(&runtime, id, approve, common.json, output, now),
        (Command::Reject(reject), Some(id)) => reject_named(&runtime, id, reject, common.json, output, now),
        (Command::Commit(_), Some(id)) => {
            let interrupts = interrupts.as_ref().expect("installed for a commit");
            commit_command(&runtime, id, common.json, output, now, interrupts, false)
        }
        (Command::Recover(recover), Some(id)) => {
            // Nothing to restore is no failed commit: said as what it is.
            let keep = recover.keep.is_some();
            let resolved = if keep { runtime.keep_as_found(id) } else { runtime.restore(id) };
            let restored = resolved.map_err(|error| -> Box<dyn std::error::Error> {
                match error {
                    vsh::VshError::Commit(vsh::lower::vsh_commit::CommitError::Restore { reason, .. }) => {
                        let what = if keep { "keep" } else { "restore" };
                        format!("nothing to {what} for {}: {reason}", id.short()).into()
                    }
                    error => error.into(),
                }
            })?;
            if common.json {
                println!("{}", serde_json::to_string_pretty(&vsh::document::RestoreDocument::from(&restored))?);
            } else {
                print!("{}", render::restore_text(&restored));
            }
            Ok(EXIT_OK)
        }
        (Command::Recover(_), None) => {
            // Recovery ran when the runtime opened, unless another process
            // held the commit lock: then wait for it (bounded) and run it now.
            let deferred;
            let report = if runtime.recovery_deferred() {
                deferred = runtime.recover()?;
                &deferred
            } else {
                runtime.startup_recovery()
            };
            if common.json {
                let mut document = vsh::document::RecoveryDocument::from(report);
                document.salvage = salvaged.as_ref().map(Into::into);
                println!("{}", serde_json::to_string_pretty(&document)?);
            } else {
                print!("{}", render::recovery_text(report));
            }
            Ok(if report.needs_attention() { EXIT_ERROR } else { EXIT_OK })
        }
        (_, None) => Err("missing transaction id".into()),
        (other, _) => unreachable!("{other:?} is handled by main"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A suggested --tool never grants the root, a top-level directory, a
    /// home, or a directory holding credentials.
    #[test]
    fn a_tool_is_suggested_only_where_it_grants_no_more_than_an_installation() {
        let dir = tempfile::tempdir().unwrap();
        let install = dir.path().join("versions/3.11.7");
        std::fs::create_dir_all(&install).unwrap();
        assert!(safe_to_suggest(&install));
        for wide in ["/", "/etc", "/root", "/tmp", "/home/someone", "/etc/ssl", "/proc/self"] {
            assert!(!safe_to_suggest(std::path::Path::new(wide)), "{wide}");
        }
        std::fs::write(install.join("credentials.toml"), "token").unwrap();
        assert!(!safe_to_suggest(&install), "a directory holding a registry token");
        // A home's dot-directory is more than an installation (sec51 F6:
        // `~/.local/share` keeps a keyring's passwords): its bin and lib
        // are suggested, not it; a virtualenv named `.venv` is one whole.
        let home = dir.path().join("home");
        let script = dir.path().join("fmt.sh");
        for part in [".local/bin", ".local/lib/python3.12", ".local/share/python_keyring", ".venv/bin"] {
            std::fs::create_dir_all(home.join(part)).unwrap();
        }
        std::fs::write(home.join(".venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        for program in [".local/bin/black", ".venv/bin/python"] {
            std::fs::copy("/bin/true", home.join(program)).unwrap();
        }
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        std::fs::write(&script, format!("#!{}\n", home.join(".local/bin/black").display())).unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let found = failure::installations_outside(&script, &workspace, &[]);
        let home = home.canonicalize().unwrap();
        assert!(found.contains(&home.join(".local/bin")) && found.contains(&home.join(".local/lib")), "{found:?}");
        assert!(!found.iter().any(|dir| dir.ends_with(".local") || dir.ends_with("share")), "{found:?}");
        assert!(!safe_to_suggest(&home.join(".local")));
        let venv = failure::installations_outside(&home.join(".venv/bin/python"), &workspace, &[]);
        assert_eq!(venv, vec![home.join(".venv")]);
        assert!(safe_to_suggest(&home.join(".venv")));
        // A directory that looks like a home is none to give (sec52 N4:
        // `#!DIR/bin/prog` with `DIR/.config/gh/hosts.yml`).
        let homelike = dir.path().join("users/bob");
        std::fs::create_dir_all(homelike.join("bin")).unwrap();
        assert!(safe_to_suggest(&homelike));
        std::fs::create_dir_all(homelike.join(".config/gh")).unwrap();
        assert!(!safe_to_suggest(&homelike));
    }

    /// sec60 N2: each check stopped a level or three down, and the shapes
    /// just past it were suggested. The whole tree is walked.
    #[test]
    fn a_tool_is_suggested_only_when_its_whole_tree_is_an_installations() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let shape = |name: &str, make: &dyn Fn(&std::path::Path)| {
            let root = dir.path().join(name);
            std::fs::create_dir_all(root.join("bin")).unwrap();
            std::fs::create_dir_all(root.join("lib/python3/site")).unwrap();
            std::fs::write(root.join("lib/python3/site/mod.py"), "x = 1\n").unwrap();
            make(&root);
            safe_to_suggest(&root)
        };
        assert!(shape("clean", &|_| {}));
        let open_dir = |root: &std::path::Path, at: &str| {
            std::fs::create_dir_all(root.join(at)).unwrap();
            std::fs::set_permissions(root.join(at), std::fs::Permissions::from_mode(0o777)).unwrap();
        };
        assert!(!shape("lib-777", &|root| open_dir(root, "lib")));
        assert!(!shape("deep-777", &|root| open_dir(root, "a/b/c/d/e")));
        assert!(!shape("group-file", &|root| {
            let file = root.join("lib/python3/site/mod.py");
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o664)).unwrap();
        }));
        assert!(!shape("workspace-4-down", &|root| std::fs::create_dir_all(root.join("x/y/z/w/.vsh")).unwrap()));
        assert!(!shape("credentials-2-down", &|root| {
            std::fs::create_dir_all(root.join("a/b")).unwrap();
            std::fs::write(root.join("a/b/credentials.json"), "{}").unwrap();
        }));
        assert!(!shape("aws", &|root| std::fs::create_dir_all(root.join("a/.aws")).unwrap()));
        for name in [".git", ".gradle", "token", ".zsh_history", "service-account.json", "id_rsa.bak", "TOKEN"] {
            assert!(!shape(&format!("named-{name}"), &|root| std::fs::write(root.join("lib").join(name), "t").unwrap()));
        }
        // A package of code named so is code (docker's, in site-packages).
        assert!(shape("package", &|root| std::fs::create_dir_all(root.join("lib/docker/credentials")).unwrap()));
        assert!(!shape("dot-dir", &|root| std::fs::create_dir_all(root.join("lib/.gradle")).unwrap()));
        if vsh::lower::vsh_sandbox::effective_uid() == 0 {
            assert!(!shape("another-owner", &|root| {
                std::os::unix::fs::chown(root.join("lib/python3/site/mod.py"), Some(65534), None).unwrap();
            }));
        }
        // A link to what lies outside is judged where it leads, not here.
        assert!(shape("link", &|root| std::os::unix::fs::symlink("/usr/bin/env", root.join("bin/env")).unwrap()));
    }

    /// Every state has the code the help text gives it; a commit under way
    /// or interrupted is an error, never "auto-approved (nothing written)".
    #[test]
    fn each_state_has_its_detailed_exit_code() {
        use TransactionState as S;
        let expected = [
            (S::Committed, Some(0)),
            (S::AutoApproved, Some(3)),
            (S::PendingApproval, Some(4)),
            (S::Approved, Some(4)),
            (S::Denied, Some(5)),
            (S::Stale, Some(6)),
            (S::Rejected, Some(7)),
            (S::Expired, Some(7)),
            (S::Failed, Some(7)),
            (S::Reserved, Some(1)),
            (S::Revalidating, Some(1)),
            (S::Committing, Some(1)),
            (S::RecoveryRequired, Some(1)),
            (S::Created, None),
            (S::Running, None),
            (S::VirtualComplete, None),
        ];
        for (state, code) in expected {
            assert_eq!(state_exit_code(state), code, "{}", state.name());
        }
    }
}
