//! [`Receipt`]: what a run or commit did.

use vsh_monty::{ExecutionStats, MontyObject};
use vsh_types::{DiffDigest, DiffEntry, SnapshotId, TransactionId, TransactionState};
use vsh_vfs::FileReview;

use crate::RuntimeDecision;

/// Nanoseconds spent in each stage, from a monotonic clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageTimings {
    /// Opening the virtual image.
    pub snapshot: u64,
    /// Waiting for another run's commands to leave the scratch directories
    /// (a run of real commands only), before executing.
    pub wait: u64,
    /// Running the program, including every file operation it made.
    pub execute: u64,
    /// Computing the canonical diff.
    pub diff: u64,
    /// Evaluating the policy.
    pub policy: u64,
    /// Binding the transaction and storing its record and contents.
    pub bind_and_store: u64,
    /// Reserving, revalidating, applying and verifying the commit.
    pub commit: u64,
    /// Everything, end to end.
    pub total: u64,
}

/// The program's output.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ExecutionOutput {
    /// A Monty program's final value and captured stdout.
    Monty {
        /// The value of the last expression.
        value: MontyObject,
        /// Captured stdout (bounded by the budget).
        stdout: String,
    },
    /// A Bash program's profile, exit status and streams.
    Bash(BashResult),
    /// A Monty program that raised an exception it did not catch after the
    /// policy refused it an access: kept as denied work (a program that
    /// raises otherwise is an error, not a transaction).
    MontyRaised {
        /// The exception as Python prints it: the traceback, then `Type: message`.
        exception: String,
        /// Captured stdout before it (bounded by the budget).
        stdout: String,
    },
    /// A candidate workspace's steps, in order (its promotion's output).
    Session {
        /// Every step that ran to its end, kept or not.
        steps: Vec<SessionStep>,
    },
}

/// What a step of a candidate workspace's session was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StepKind {
    /// A Monty program.
    Monty,
    /// A Bash program (either profile).
    Bash,
    /// A real command.
    Command,
    /// Files written back from an export ([`crate::CandidateWorkspace::restore_exported`]).
    RestoreExported,
    /// Inherited files ([`crate::CandidateWorkspace::restore_seeded`]).
    RestoreSeeded,
    /// A file written through the seed `Host` over the candidate
    /// ([`crate::CandidateWorkspace::host`]).
    HostWrite,
    /// What a committed transaction replaced, written back
    /// ([`crate::Runtime::revert`]; its program is the transaction's id).
    Revert,
}

impl StepKind {
    /// The step kind of a program in `language` (`None` for a session).
    pub fn of(language: crate::Language) -> Option<Self> {
        match language {
            crate::Language::Monty => Some(Self::Monty),
            crate::Language::Bash => Some(Self::Bash),
            crate::Language::Command => Some(Self::Command),
            crate::Language::Session => None,
        }
    }

    /// `monty`, `bash`, `command`, `restore-exported`, `restore-seeded`, `host-write` or `revert`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Monty => "monty",
            Self::Bash => "bash",
            Self::Command => "command",
            Self::RestoreExported => "restore-exported",
            Self::RestoreSeeded => "restore-seeded",
            Self::HostWrite => "host-write",
            Self::Revert => "revert",
        }
    }
}

/// One step of a candidate workspace's session, as its promotion binds it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SessionStep {
    /// What ran.
    pub kind: StepKind,
    /// The program's text (a command's argv as a JSON array; the paths
    /// written for a restore, as a JSON array).
    pub program: String,
    /// The profile it ran under (empty for Monty and restores).
    pub profile: String,
    /// Its exit status (0 for Monty and restores).
    pub exit_code: i32,
    /// A Monty program's value.
    pub value: Option<MontyObject>,
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
    /// Whether its changes are in the candidate: a step that exited with a
    /// status other than 0 is undone unless its failure was accepted, and a
    /// restore to an earlier checkpoint undoes the steps after it.
    pub kept: bool,
    /// Whether the commands it could run were allowed below the sandbox's
    /// floors (a candidate made with `allow_unisolated_verifiers`): where
    /// the kernel cannot confine them, they ran unconfined.
    pub unisolated: bool,
}

/// What a Bash program produced (`vsh-bash-bounded-v1`; a run that commits
/// or awaits approval exited with status 0: any other status is terminal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashResult {
    /// The profile it ran under.
    pub profile: String,
    /// Its exit status.
    pub exit_code: i32,
    /// Standard output, the bytes as written.
    pub stdout: Vec<u8>,
    /// Standard error, the bytes as written.
    pub stderr: Vec<u8>,
}

impl ExecutionOutput {
    /// The language that produced this output.
    pub fn language(&self) -> crate::Language {
        match self {
            Self::Monty { .. } | Self::MontyRaised { .. } => crate::Language::Monty,
            Self::Bash(result) if result.profile == vsh_monty::COMMAND_PROFILE => crate::Language::Command,
            Self::Bash(_) => crate::Language::Bash,
            Self::Session { .. } => crate::Language::Session,
        }
    }

    /// The captured stderr bytes (a Monty program has none of its own:
    /// exceptions are the run's error, not output; a session's are its
    /// steps').
    pub fn stderr_bytes(&self) -> &[u8] {
        match self {
            Self::Monty { .. } | Self::MontyRaised { .. } | Self::Session { .. } => &[],
            Self::Bash(result) => &result.stderr,
        }
    }

    /// The Monty value, if this is Monty output.
    pub fn monty_value(&self) -> Option<&MontyObject> {
        match self {
            Self::Monty { value, .. } => Some(value),
            Self::MontyRaised { .. } | Self::Bash(_) | Self::Session { .. } => None,
        }
    }

    /// The exception a Monty program raised, for [`ExecutionOutput::MontyRaised`].
    pub fn exception(&self) -> Option<&str> {
        match self {
            Self::MontyRaised { exception, .. } => Some(exception),
            _ => None,
        }
    }

    /// The captured stdout bytes (a session's are its steps').
    pub fn stdout_bytes(&self) -> &[u8] {
        match self {
            Self::Monty { stdout, .. } | Self::MontyRaised { stdout, .. } => stdout.as_bytes(),
            Self::Bash(result) => &result.stdout,
            Self::Session { .. } => &[],
        }
    }
}

/// What a commit applied: the commit engine's own receipt (the transaction,
/// operations applied, paths verified, dependencies revalidated, the barriers
/// issued, and any old node kept aside), one type from engine to facade.
pub use vsh_commit::CommitReceipt;

/// Something the operator should know about a run that still succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// A stored blob's bytes did not hash to its id; this run produced the
    /// same content and replaced the copy (reported once: it is intact now).
    BlobRepaired {
        /// The blob.
        id: vsh_types::BlobId,
        /// Its file.
        path: std::path::PathBuf,
    },
    /// The work was decided under a policy of its own (a per-run profile or
    /// policy file), not the workspace's recorded policy; its transaction
    /// records that policy, and is reviewed, approved and committed under it.
    OwnPolicy {
        /// The policy's profile.
        profile: vsh_policy::PolicyProfile,
        /// The policy's digest.
        digest: vsh_types::PolicyDigest,
    },
    /// The program's `vsh_glob` or `vsh_search` stopped at `max_results`
    /// this many times: a program that acted on each match may have left
    /// some out.
    ResultsCut {
        /// How many result lists were cut.
        lists: u64,
    },
    /// The program looked at paths the policy hides (`exists()`, `stat`, a
    /// command's lookup of a name: a dotenv loader's `.env`, git's tracked
    /// files), or followed a symlink out of the workspace to look
    /// (`is_file()` of a `.venv/bin/python -> /usr/bin/python3`): each was
    /// answered as unreadable, whether it is there or not, and none is a
    /// denial (reading or changing one is).
    HiddenLooks {
        /// How many looks, each repeat counted.
        looks: u64,
        /// The first paths looked at, as the program named them.
        paths: Vec<vsh_types::VPath>,
    },
    /// New paths under directories that look like a build's output or a
    /// tool's cache (a `target/` beside a `Cargo.toml`, a `node_modules/`
    /// beside a `package.json`, `.mypy_cache/` and the like) that are not
    /// scratch directories, so they are in the diff: a nested crate's
    /// `crates/core/target` is scratch only when the policy names it.
    BuildOutput {
        /// Each such directory, with how many new paths the diff has under it.
        dirs: Vec<(vsh_types::VPath, u64)>,
    },
    /// The scratch directories (build outputs kept between runs: `target/`
    /// and the like) were emptied before this run's commands, so they built
    /// from nothing: what was there had been built from work never
    /// committed, which the workspace does not hold.
    ScratchEmptied {
        /// Each earlier run that left them so: its transaction's id, or
        /// `run-...` for one that was not kept (it failed or was stopped) or
        /// that undid a change of its own (what was built from the change
        /// may pass for fresh after a commit of its diff).
        uncommitted: Vec<String>,
        /// What that work changed, as far as it is stored (`create
        /// Cargo.lock`: a build that writes a file into the workspace makes
        /// work of every run until that work is committed), at most a few.
        changes: Vec<String>,
        /// This run's own transaction, when it made one of those changes
        /// again: committing it (not the earlier work, which it replaces)
        /// keeps the next build incremental.
        again: Option<String>,
    },
    /// Work made under another policy read or touched what this runtime's
    /// policy protects: its output, changed paths and their count, hunks,
    /// digests, snapshot, counters, the decision's sizes and risk flags are
    /// withheld from this review (review it under the policy it was made
    /// under).
    Withheld,
    /// Work made under another policy changed paths this runtime's policy
    /// hides: they are not listed, nor counted in the decision's sizes.
    HiddenChanges,
    /// The scratch directories held a build that was emptied before this
    /// run's commands: the commands that made it were granted otherwise
    /// (tools, variables, network), and the directories belong to one set of
    /// grants at a time, so this run built from nothing.
    ScratchRegranted,
    /// The scratch directories held a build that was emptied before this
    /// run's commands: the workspace's policy was replaced since, and lets
    /// commands read or write otherwise (a build may keep what it read), so
    /// this run built from nothing; runs after it are incremental again.
    ScratchRepolicied,
    /// Files this work, waiting for approval, modifies that auto-approved
    /// commits had already cut since a reviewer last saw them (the
    /// workspace's loss history): its diff shows only its own part, and
    /// approving it accepts what those commits took too (`path: N of its M
    /// reviewed bytes taken before this run` each, at most a few).
    EarlierLosses {
        /// One line per file.
        files: Vec<String>,
        /// How many files in all.
        total: usize,
    },
    /// Files this work, waiting for approval, was judged to rewrite
    /// (`content-rewrite`), with the numbers that decided it (`path: N of
    /// its M reviewed bytes lost in all with this run (more than H waits for
    /// a review)` each, at most a few).
    Rewritten {
        /// One line per file.
        files: Vec<String>,
        /// How many files in all.
        total: usize,
    },
    /// Changes this work, waiting for approval, makes that a review rule of
    /// the policy makes wait for a reviewer (`[[review]]` in a policy file;
    /// `path (change): rule` each, at most a few).
    ReviewRules {
        /// One line per path.
        paths: Vec<String>,
        /// How many paths in all.
        total: usize,
    },
    /// Files this work, waiting for approval, replaced or removed without
    /// reading them, whose content differs from what vsh last saw of them
    /// (`unseen-change`: changed since, outside vsh or by other work; `path:
    /// changed since TX read it; this run replaced it unread` each, at most
    /// a few).
    UnseenChanges {
        /// One line per file.
        files: Vec<String>,
        /// How many files in all.
        total: usize,
    },
    /// Why work waits with the `rename` flag: the renames of the
    /// workspace's paths its program made (`from -> to`, the first few; not
    /// a file it made itself and renamed over another, a tool's temporary
    /// file), which the diff shows only by what they left (ux71 M4: a
    /// `patch -b` backup waited with no word why).
    Renamed {
        /// One line per rename.
        renames: Vec<String>,
        /// How many renames in all.
        total: usize,
    },
    /// This look at pending work found the workspace changed under it since
    /// its run (its revalidation, applying nothing) and recorded it stale:
    /// it can never be committed; its program can run again.
    FoundStale {
        /// Each path that changed, with how (`path: reason`), the first few.
        paths: Vec<String>,
        /// How many paths changed in all.
        total: usize,
    },
    /// A review of work recorded stale earlier: where the workspace
    /// differs now from what it read or changed (ux64 F6: the paths were
    /// said once, to whoever looked first, and then lost).
    StaleAt {
        /// Each path that differs, with how (`path: reason`), the first few.
        paths: Vec<String>,
        /// How many paths differ in all.
        total: usize,
    },
    /// The commit landed, but the workspace's loss history could not be
    /// updated after it (the data directory refused the write): what it
    /// took from the files it changed is not counted in later judgments.
    LossHistoryUnrecorded {
        /// Why, as the error said it.
        reason: String,
    },
    /// The scratch directories held more than their bound after this run's
    /// commands (they wrote that much there) and were cleared: the next run
    /// builds from nothing.
    ScratchCleared {
        /// What they held (`u64::MAX`: a tree too deep to measure).
        bytes: u64,
        /// Their bound ([`vsh_types::space::MAX_SCRATCH_BYTES`]).
        max: u64,
    },
}

/// [`Warning::UnseenChanges`]' head.
const UNSEEN_CHANGES: &str = "unseen-change: files changed since vsh last saw them, which this run replaced without its \
                              program reading them: approving it commits the diff as shown, and a change it does not \
                              keep is lost; check in the hunks that each such change is kept, else discard it and \
                              write each file from a fresh read of it: ";

const RENAMED: &str = "rename: the program moved paths (a move, or a backup as `patch -b` or an editor makes), which \
                       the diff shows as what they left, a path gone or written anew and one made with its bytes: ";

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BlobRepaired { id, path } => {
                write!(f, "blob {} at {} was corrupt; repaired from this run's content", id.short(), path.display())
            }
            Self::ScratchEmptied { uncommitted, changes, again } => {
                scratch_emptied(f, uncommitted, changes, again.as_deref())
            }
            Self::ScratchRegranted => f.write_str(
                "the scratch directories (the policy's build outputs and caches: vsh policy show lists them) were empty for this run, a build from nothing: \
                 the commands that built them were granted otherwise (--tool, --env, --allow-network, ...), and \
                 commands granted otherwise never share them (the builds of the last two other sets of grants are \
                 kept aside for them); give each run the same grants to keep builds incremental",
            ),
            Self::Withheld => f.write_str(
                "this work was made under another policy and read or touched what this policy protects: its \
                 output and exit status, changed paths (and how many), hunks, digests and risk flags are withheld here (review it \
                 under the policy it was made under)",
            ),
            Self::EarlierLosses { files, total } => earlier_losses(f, files, *total),
            Self::FoundStale { paths, total } => found_stale(f, paths, *total),
            Self::StaleAt { paths, total } => {
                listed(f, "stale: the workspace differs now from what this work read or changed, at ", paths, *total)
            }
            Self::ReviewRules { paths, total } => {
                listed(f, "review-rule: the policy has these changes wait for a reviewer: ", paths, *total)
            }
            Self::Rewritten { files, total } => listed(f, "content-rewrite: ", files, *total),
            Self::UnseenChanges { files, total } => listed(f, UNSEEN_CHANGES, files, *total),
            Self::Renamed { renames, total } => listed(f, RENAMED, renames, *total),
            Self::LossHistoryUnrecorded { reason } => loss_history_unrecorded(f, reason),
            Self::HiddenChanges => f.write_str(
                "this work was made under another policy and changed paths this policy hides: they are not \
                 listed here, nor counted in the decision's sizes",
            ),
            Self::ScratchRepolicied => f.write_str(
                "the scratch directories (the policy's build outputs and caches: vsh policy show lists them) were emptied first, a build from nothing: the \
                 workspace's policy changed what commands may read or write since they were built (a build may \
                 keep what it read); builds are incremental again from this run on",
            ),
            Self::ScratchCleared { bytes: u64::MAX, .. } => f.write_str(
                "the scratch directories (the policy's build outputs and caches: vsh policy show lists them) held a tree of directories too deep to measure \
                 after this run's commands, and were cleared: the next build starts from nothing",
            ),
            Self::ScratchCleared { bytes, max } => write!(
                f,
                "the scratch directories (the policy's build outputs and caches: vsh policy show lists them) held {} MiB after this run's commands, past \
                 their bound of {} MiB, and were cleared: the next build starts from nothing",
                bytes.div_ceil(1 << 20),
                max >> 20
            ),
            Self::BuildOutput { dirs } => {
                let named: Vec<String> = dirs
                    .iter()
                    .map(|(dir, paths)| format!("{dir} ({paths} new path{})", if *paths == 1 { "" } else { "s" }))
                    .collect();
                let scratch: Vec<String> = dirs.iter().map(|(dir, _)| format!("{:?}", dir.as_str())).collect();
                write!(
                    f,
                    "{} looks like build output or a cache, and is in the diff: to keep it between runs and out of \
                     every diff, name it among the scratch directories, `scratch = [{}, ...]` under [commands] in \
                     the policy (the list replaces the defaults: vsh policy show prints them), then vsh init --force \
                     --policy FILE",
                    named.join(", "),
                    scratch.join(", ")
                )
            }
            Self::ResultsCut { lists } => write!(
                f,
                "{lists} result list{} of vsh_glob or vsh_search stopped at max_results (1000 and 100 by \
                 default): what the program did with {} may not cover every match; give max_results=N (or \
                 report_truncation=True to see it in the program)",
                if *lists == 1 { "" } else { "s" },
                if *lists == 1 { "it" } else { "them" }
            ),
            Self::OwnPolicy { profile, digest } => write!(
                f,
                "decided under a policy of its own (profile {}, digest {}), not the workspace's recorded policy",
                profile.name(),
                digest.short()
            ),
            Self::HiddenLooks { looks, paths } => {
                let named: Vec<&str> = paths.iter().map(vsh_types::VPath::as_str).collect();
                write!(
                    f,
                    "the program looked {looks} time{} at paths hidden from it ({}{}; the policy hides them, or a \
                     symlink there leads out of the workspace): each was answered as unreadable, there or not, and \
                     is no denial; a program or test that needs one fails where it reads it (vsh policy show lists \
                     the rules)",
                    if *looks == 1 { "" } else { "s" },
                    named.join(", "),
                    if *looks > paths.len() as u64 && paths.len() >= vsh_monty::MAX_HIDDEN_PATHS {
                        ", ..."
                    } else {
                        ""
                    }
                )
            }
        }
    }
}

/// [`Warning::FoundStale`] for people.
fn found_stale(f: &mut std::fmt::Formatter<'_>, paths: &[String], total: usize) -> std::fmt::Result {
    let more = if total > paths.len() { format!("; and {} more", total - paths.len()) } else { String::new() };
    write!(
        f,
        "the workspace changed under this work since its run ({}{more}): it is stale now, recorded so, and can \
         never be committed; its program can run again on the workspace as it is",
        paths.join("; ")
    )
}

/// [`Warning::LossHistoryUnrecorded`] as text.
fn loss_history_unrecorded(f: &mut std::fmt::Formatter<'_>, reason: &str) -> std::fmt::Result {
    write!(
        f,
        "the commit landed, but the loss history could not be updated after it ({reason}): what it took from the \
         files it changed is not counted when later auto-approved work is judged; make the data directory writable \
         again (vsh doctor checks it)"
    )
}

/// [`Warning::ScratchEmptied`] as text.
/// [`Warning::EarlierLosses`] for people.
fn earlier_losses(f: &mut std::fmt::Formatter<'_>, files: &[String], total: usize) -> std::fmt::Result {
    let (these, them) = if total == 1 { ("this file", "it") } else { ("these files", "them") };
    write!(
        f,
        "the decision counts what auto-approved commits took from {these} since a reviewer last saw \
                     {them}, and this diff shows only its own part: {}; approving this work accepts all of it and \
                     starts {them} afresh",
        files.join("; ")
    )?;
    if total > files.len() {
        write!(f, "; and {} more", total - files.len())?;
    }
    Ok(())
}

fn scratch_emptied(
    f: &mut std::fmt::Formatter<'_>,
    uncommitted: &[String],
    changes: &[String],
    again: Option<&str>,
) -> std::fmt::Result {
    let named: Vec<&str> = uncommitted
        .iter()
        .map(|name| {
            if name.starts_with("run-") {
                "a run not kept (failed, stopped) or that undid a change of its own"
            } else {
                name.get(..12).unwrap_or(name)
            }
        })
        .collect();
    write!(
        f,
        "the scratch directories (the policy's build outputs and caches: vsh policy show lists them) were \
         emptied first, a build from nothing: commands of work never committed ({}) ran with them, so what \
         they held may have been built from changes the workspace does not hold (vsh does not tell whether \
         those commands wrote there); builds stay incremental from one committed change to the next",
        named.join(", ")
    )?;
    let commit = again.or(uncommitted.first().map(String::as_str));
    if let (false, Some(commit)) = (changes.is_empty(), commit) {
        // A lock file a build writes is the usual cause; an edit of one's
        // own, made again, is another (ux58 8: it was blamed on a lock file).
        const LOCK_FILES: [&str; 8] = [
            "Cargo.lock",
            "package-lock.json",
            "yarn.lock",
            "pnpm-lock.yaml",
            "poetry.lock",
            "uv.lock",
            "Gemfile.lock",
            "go.sum",
        ];
        let locks = changes.iter().any(|change| LOCK_FILES.iter().any(|lock| change.ends_with(lock)));
        let why = if locks {
            "a build that writes into the workspace (a lock file) makes such work every run until it is committed once"
        } else {
            "an edit built on and never committed makes each build after it start from nothing until it is \
             committed once"
        };
        write!(
            f,
            ". That work made these changes: {}{}; {why} (vsh commit {})",
            changes.join(", "),
            if again.is_some() { ", and this run did again" } else { "" },
            commit.get(..12).unwrap_or(commit)
        )?;
    }
    Ok(())
}

/// What a run's real commands were granted beyond what every command gets:
/// recorded with the transaction (in its evidence, bound into its id), so a
/// reviewer sees it and a re-run can be given it again. The values of
/// variables are never recorded, only their names.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct CommandGrants {
    /// The names of the variables set or passed to commands
    /// ([`crate::RuntimeConfig::with_command_env`]), in order.
    pub env: Vec<String>,
    /// The host directories commands may read and execute from
    /// ([`crate::RuntimeConfig::with_command_tools`]), as paths.
    pub tools: Vec<String>,
    /// The network commands reach: `none`, `loopback` or `all`.
    pub network: String,
    /// The TCP ports commands may connect to.
    pub ports: Vec<u16>,
    /// Whether commands may make unix sockets of their own.
    pub unix_sockets: bool,
}

impl Default for CommandGrants {
    /// What every command gets: no variable, no tool, no network, no port,
    /// no unix socket of its own.
    fn default() -> Self {
        Self { env: Vec::new(), tools: Vec::new(), network: "none".to_owned(), ports: Vec::new(), unix_sockets: false }
    }
}

impl CommandGrants {
    /// Whether these are what every command gets: nothing more.
    pub fn is_default(&self) -> bool {
        self.env.is_empty()
            && self.tools.is_empty()
            && self.network == "none"
            && self.ports.is_empty()
            && !self.unix_sockets
    }
}

/// The result of a run or a commit.
#[derive(Debug, Clone, PartialEq)]
pub struct Receipt {
    /// The transaction's id.
    pub transaction: TransactionId,
    /// The observed snapshot the run depended on.
    pub base_snapshot: SnapshotId,
    /// The transaction's state when the receipt was made.
    pub state: TransactionState,
    /// The policy decision.
    pub decision: RuntimeDecision,
    /// The canonical diff's digest.
    pub diff: DiffDigest,
    /// Whether the diff names the before content of a path the policy
    /// protects from reading: its digest is then left out of what the
    /// receipt shows (its documents and text), since it is an unkeyed hash
    /// over those bytes' digest and would confirm a guess at them. `diff`
    /// still holds it for the host.
    pub diff_withheld: bool,
    /// Whether the run read what the policy of whoever reads this receipt
    /// protects (a file's bytes, or the size or mode of what it hides, or a
    /// directory's names under another policy: work made under a per-run
    /// policy that allowed it): `base_snapshot` is then left out of what the
    /// receipt shows, for the same reason as `diff_withheld`, and the
    /// execution counters, which measured the same reads, are zero.
    pub snapshot_withheld: bool,
    /// Number of changed paths.
    pub changed_paths: usize,
    /// The changed paths (only with [`crate::ReceiptDetail::Full`] or
    /// [`crate::ReceiptDetail::Changes`]).
    pub changes: Vec<DiffEntry>,
    /// Unified text hunks of changed text files, for human review (only with
    /// [`crate::ReceiptDetail::Full`]; bounded by [`vsh_vfs::ReviewLimits`]).
    pub review: Vec<FileReview>,
    /// The program's output.
    pub output: ExecutionOutput,
    /// Execution statistics.
    pub execution: ExecutionStats,
    /// Stage timings.
    pub timings: StageTimings,
    /// The commit, when the transaction was committed.
    pub commit: Option<CommitReceipt>,
    /// What the run's real commands were granted, for a run that could run
    /// any (a command, real Bash, a Monty program with commands enabled);
    /// `None` for one that could not, and for work stored before vsh
    /// recorded it.
    pub grants: Option<CommandGrants>,
    /// What the operator should know (a repaired blob, ...); usually empty.
    pub warnings: Vec<Warning>,
}

impl Receipt {
    /// Whether this reader's policy withholds the run's output, its exit
    /// status among it ([`Warning::Withheld`]): what it printed, returned or
    /// exited with may be what it read.
    pub fn output_withheld(&self) -> bool {
        self.warnings.contains(&Warning::Withheld)
    }
}

/// The policy a transaction was made under when its run overrode the
/// workspace's policy (see [`crate::Runtime::run_policy`]): checked against
/// the transaction's binding, so it is the very policy that decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPolicy {
    /// The policy file's text (every threshold written out), which
    /// [`crate::RuntimeConfig::with_policy_text`] opens a runtime with.
    pub text: String,
    /// The profile it starts from.
    pub profile: vsh_policy::PolicyProfile,
    /// Its digest, the one the transaction's binding holds.
    pub digest: vsh_types::PolicyDigest,
}

/// A stored transaction's program and intent (see [`crate::Runtime::stored_program`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredProgram {
    /// The program's language.
    pub language: crate::Language,
    /// The program's text.
    pub code: String,
    /// The intent it was run with (empty if none).
    pub intent: String,
}

impl StoredProgram {
    /// A real command's argv, when the program is one.
    pub fn command_argv(&self) -> Option<Vec<String>> {
        (self.language == crate::Language::Command).then(|| crate::run::command_argv(&self.code)).flatten()
    }
}

/// `head`, then `lines` joined with `; `, and how many of `total` are left out.
fn listed(f: &mut std::fmt::Formatter<'_>, head: &str, lines: &[String], total: usize) -> std::fmt::Result {
    write!(f, "{head}{}", lines.join("; "))?;
    if total > lines.len() {
        write!(f, "; and {} more", total - lines.len())?;
    }
    Ok(())
}

/// What a reviewer of work `decision` holds with the `rename` flag is told
/// of it ([`Warning::Renamed`]): the renames among `effects` (`from -> to`,
/// at most a few); `None` for work not held so.
pub(crate) fn renamed(decision: &vsh_policy::Decision, effects: &[vsh_vfs::Effect]) -> Option<Warning> {
    const LISTED: usize = 5;
    let vsh_policy::Decision::PendingApproval(manifest) = decision else { return None };
    if !manifest.flags.contains(&vsh_policy::RiskFlag::Rename) {
        return None;
    }
    // A path the run made (written, or renamed into) and then renamed is
    // a tool's temporary file saved over another (ux74 L4): said so.
    let mut made = std::collections::HashSet::new();
    let mut all: Vec<String> = Vec::new();
    for effect in effects {
        match effect {
            vsh_vfs::Effect::Write(path) | vsh_vfs::Effect::Mkdir(path) => {
                made.insert(path);
            }
            vsh_vfs::Effect::Rename { from, to } => {
                // A file this run made, renamed over another (a tool's
                // temporary file: `sed -i`, `patch`), moves nothing of the
                // workspace: the diff shows the edit, and the flag does not
                // count it (ux85 L2, ux86 L6: listed as a move).
                if !made.contains(from) {
                    all.push(format!("{from} -> {to}"));
                }
                made.insert(to);
            }
            vsh_vfs::Effect::Remove(_) | vsh_vfs::Effect::SetMode(_) => {}
        }
    }
    let renames = all.iter().take(LISTED).cloned().collect();
    (!all.is_empty()).then_some(Warning::Renamed { renames, total: all.len() })
}

/// The changes of `entries` a review rule of `policy` makes wait for a
/// reviewer, as [`Warning::ReviewRules`] (`path (change): rule`, at most a
/// few), or `None` when there is none.
pub(crate) fn by_review_rules(
    policy: &vsh_policy::TransactionPolicy,
    entries: &[vsh_types::DiffEntry],
) -> Option<Warning> {
    const LISTED: usize = 5;
    let waiting = policy.waiting_by_rule(entries);
    let total = waiting.len();
    let paths = waiting
        .into_iter()
        .take(LISTED)
        .map(|(entry, rule)| format!("{} ({}): {rule}", entry.path, entry.kind.name()))
        .collect();
    (total > 0).then_some(Warning::ReviewRules { paths, total })
}

#[cfg(test)]
mod tests {
    use super::Warning;

    /// ux58 8: the rebuild was blamed on a lock file when the change made
    /// again was the user's own edit.
    #[test]
    fn an_emptied_build_blames_a_lock_file_only_when_one_was_changed() {
        let text = |change: &str| {
            Warning::ScratchEmptied {
                uncommitted: vec!["a".repeat(64)],
                changes: vec![change.to_owned()],
                again: Some("b".repeat(64)),
            }
            .to_string()
        };
        let lock = text("modify Cargo.lock");
        assert!(lock.contains("(a lock file)") && lock.contains("vsh commit bbbbbbbbbbbb"), "{lock}");
        let edit = text("modify src/consts.rs");
        assert!(!edit.contains("lock file") && edit.contains("an edit built on and never committed"), "{edit}");
    }
}
