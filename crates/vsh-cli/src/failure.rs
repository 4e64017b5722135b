//! How a failed command tells the operator (stderr) or a program (`--json`,
//! on stdout, as `vsh.error/1`) what went wrong and what to do about it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use vsh::VshError;
use vsh::document::{ErrorDocument, ErrorKind};
use vsh::lower::vsh_commit::CommitError;
use vsh::lower::vsh_monty::{ExecutionError, LimitKind};
use vsh::lower::vsh_policy::AccessKind;
use vsh::lower::vsh_sandbox::ToolError;

use crate::render;

/// A vsh error with what only the command that met it knows: the remedy
/// of each access a run was refused (from the runtime's policy), and the
/// one next command to run, when there is one.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) source: VshError,
    pub(crate) remedies: Vec<String>,
    pub(crate) hint: Option<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.source)
    }
}

/// Attach the remedies of `runtime`'s policy to a run's error, when the run
/// was refused accesses.
pub(crate) fn with_remedies(runtime: &vsh::Runtime, error: VshError) -> Box<dyn std::error::Error> {
    let remedies = runtime.remedies(&error);
    if remedies.is_empty() { Box::new(error) } else { Box::new(Failure { source: error, remedies, hint: None }) }
}

/// Attach the next command to run when `error` is a commit or approval of
/// `transaction` that did not happen: run its program again when it can
/// never be committed now (stale, expired, made under a policy since
/// replaced), approve it first when it waits for that.
pub(crate) fn with_rerun_hint(
    runtime: &vsh::Runtime,
    transaction: vsh::TransactionId,
    error: VshError,
) -> Box<dyn std::error::Error> {
    use vsh::TransactionState as S;
    let short = transaction.short();
    let mut remedies = Vec::new();
    // Stale before this command: where the workspace differs now, again
    // (ux68 L1: "the command that found so named the paths then").
    if let VshError::NotCommittable { state: S::Stale, .. } | VshError::NotApprovable { state: S::Stale, .. } = &error
        && let Ok(Some(receipt)) = runtime.show(transaction)
    {
        remedies.extend(
            receipt
                .warnings
                .iter()
                .filter(|warning| matches!(warning, vsh::Warning::StaleAt { .. }))
                .map(ToString::to_string),
        );
    }
    let hint = match &error {
        // An operator said no: not the next step of whoever asked to commit
        // it (ux74 H1: an agent on the command line followed `vsh rerun`
        // and committed rejected work).
        VshError::NotCommittable { state: S::Rejected, .. } => {
            remedies.push(format!(
                "an operator rejected it: it is not to be committed; doing that work again is theirs to decide \
                 (an operator may run it again with vsh rerun {short})"
            ));
            None
        }
        // Made under a policy since replaced: approve would refuse it.
        VshError::NotCommittable { state: S::PendingApproval, .. }
            if runtime.decided_under_another_policy(transaction) =>
        {
            let line = rerun_line(runtime, transaction);
            // Not "run it again" where its work is done (ux82 L1).
            let again = if line.starts_with("vsh rerun ") { ": run its program again" } else { "" };
            remedies.push(format!("the workspace's policy changed since it was made, so approve refuses it{again}"));
            Some(line)
        }
        // Found stale by an approval: the operator's review can carry over
        // to a rerun that makes the same changes (ux75 H1).
        VshError::ApprovalStale { .. } | VshError::NotApprovable { state: S::Stale, .. }
            if live_rerun(runtime, transaction).is_none()
                // Work that waited for a review: auto-approved work had
                // none to carry over (ux85: it was offered).
                && runtime.history(transaction).is_ok_and(|history| {
                    history.iter().any(|version| version.record.state == S::PendingApproval)
                })
                && !runtime.show(transaction).ok().flatten().is_some_and(|receipt| {
                    // A revert is no program to run again (ux77 3).
                    crate::render::reverted_by(&receipt).is_some()
                }) =>
        {
            remedies.push(format!(
                "`vsh rerun {short} --approve-same` runs it again and approves that run at once if its changes are \
                 byte for byte these"
            ));
            Some(rerun_line(runtime, transaction))
        }
        // Work that can never be committed now: its program can run again
        // (unless its work is done already, ux81 M4).
        VshError::Commit(CommitError::Stale { .. })
        | VshError::PolicyChanged(_)
        | VshError::ApprovalStale { .. }
        | VshError::NotApprovable { state: S::Stale, .. }
        | VshError::Store(
            vsh::lower::vsh_store::StoreError::ApprovalExpired { .. }
            | vsh::lower::vsh_store::StoreError::PreviewExpired { .. },
        )
        | VshError::NotCommittable { state: S::Stale | S::Expired | S::Failed, .. } => {
            Some(rerun_line(runtime, transaction))
        }
        // Its approval lapsed before its commit: it waits for another (ux68 M6).
        VshError::Store(vsh::lower::vsh_store::StoreError::ApprovalLapsed { .. }) => {
            Some(format!("vsh show {short} && vsh approve --commit {short}"))
        }
        VshError::NotCommittable { state: S::PendingApproval, .. } => {
            // Approved once, its approval lapsed since: said, whoever found
            // it lapsed first (ux83: only the first command to find it did).
            let lapsed = runtime
                .history(transaction)
                .is_ok_and(|history| history.iter().any(|version| version.record.state == S::Approved));
            if lapsed {
                remedies.push("its approval lapsed before a commit: it waits for another".to_owned());
            }
            Some(format!("vsh show {short} && vsh approve {short} && vsh commit {short}"))
        }
        VshError::NotApprovable { state: S::AutoApproved, .. } => Some(format!("vsh commit {short}")),
        VshError::NotApprovable { state: S::Expired, .. } => Some(rerun_line(runtime, transaction)),
        // A full disk: the commit wrote nothing and its work failed for good.
        error if disk_full(error) => {
            remedies.push(
                "the disk holding the workspace's data is full: free space (`vsh gc --scratch` empties the build \
                 caches), then make the work again (this commit wrote nothing, and the work cannot be committed \
                 now)"
                    .to_owned(),
            );
            Some(rerun_line(runtime, transaction))
        }
        // Nothing of denied work is kept to approve or run again.
        VshError::NotApprovable { state: S::Denied, .. } | VshError::NotCommittable { state: S::Denied, .. } => {
            remedies.push(format!(
                "denied work is never approved nor committed (`vsh log` gives why {short} was denied): record a \
                 policy that allows such work (`vsh policy show > p.toml`, edit it, `vsh init --force --policy \
                 p.toml`), then run the program again"
            ));
            None
        }
        _ => None,
    };
    let hint = settled_hint(hint, &mut remedies);
    if hint.is_none() && remedies.is_empty() {
        return Box::new(error);
    }
    Box::new(Failure { source: error, remedies, hint })
}

/// [`with_rerun_hint`]'s hint as it is printed, and what it adds to the
/// remedies.
fn settled_hint(hint: Option<String>, remedies: &mut Vec<String>) -> Option<String> {
    // Nothing left to do is said, and no command is next; a `vsh show`
    // or `vsh reject` line says why in words: those go with the remedies,
    // the command alone is the hint.
    let hint = match hint {
        Some(line) if line.starts_with(NOTHING_LEFT) => {
            remedies.push(format!("{NOTHING_IS_LEFT}: {}", &line[NOTHING_LEFT.len()..]));
            None
        }
        Some(line) if line.starts_with("vsh show ") || line.starts_with("vsh reject ") => match line.split_once(" (") {
            Some((command, why)) => {
                remedies.push(why.trim_end_matches(')').to_owned());
                Some(command.to_owned())
            }
            None => Some(line),
        },
        hint => hint,
    };
    if hint.as_deref().is_some_and(|hint| hint.starts_with("vsh rerun") && hint.contains(" --env ")) {
        remedies.push(RERUN_VALUES.to_owned());
    }
    hint
}

/// `Err` when `transaction` is a revert: it has no program to run again,
/// reverting again makes it (sec73 F2: the rerun failed with "language
/// session is not available").
pub(crate) fn refuse_rerun_of_revert(
    runtime: &vsh::Runtime,
    transaction: vsh::TransactionId,
) -> Result<(), Box<dyn std::error::Error>> {
    let Some(receipt) = runtime.show(transaction)? else { return Ok(()) };
    let Some(original) = crate::render::reverted_by(&receipt) else { return Ok(()) };
    let short = original.get(..12).unwrap_or(original);
    if let Some(revert) = reverted_already(runtime, original) {
        return Err(format!(
            "transaction {} is a revert of {short}, which is reverted already, by {revert}: nothing is left to do",
            transaction.short()
        )
        .into());
    }
    // Not to a revert that would be refused (ux77 3).
    if let Some(paths) = revert_blocked(runtime, original) {
        return Err(format!(
            "transaction {} is a revert of {short}, not a program to run again, and no revert of {short} can be \
             made now: the workspace changed at {paths} since it was committed, and a revert never overwrites \
             that; change them back by new work instead",
            transaction.short()
        )
        .into());
    }
    Err(format!(
        "transaction {} is a revert of {short}, not a program to run again: `vsh revert {short}` makes it again",
        transaction.short()
    )
    .into())
}

/// `vsh rerun TX` as it must be typed for the work's commands to get their
/// grants again: with `--env NAME=VALUE` for each of the first run's
/// variables whose value vsh's own environment cannot give again (vsh keeps
/// only a keyed digest of it, and the value here is not the one it digests).
pub(crate) fn rerun_line(runtime: &vsh::Runtime, transaction: vsh::TransactionId) -> String {
    // Its work is done already: nothing to run again, and, while it
    // waits, dropping it is next (ux81 M1, M4); a run of it that landed is
    // named below.
    if let Some(done) = work_done(runtime, transaction) {
        if waits(runtime, transaction) {
            return format!("vsh reject --only {} ({done}; this drops it)", transaction.short());
        }
        if live_rerun(runtime, transaction).is_none() {
            return format!("{NOTHING_LEFT}{done}");
        }
    }
    // Run again already (or it is a rerun, and another run of the same
    // work is), and that work is committed or waiting: running it once
    // more would do the work twice (ux61 1, ux62 1).
    if let Some(rerun) = live_rerun(runtime, transaction) {
        return format!(
            "vsh show {} (another run of the same work, {}, is {}: running it once more would do that work twice)",
            rerun.id.short(),
            rerun.id.short(),
            rerun.state.name()
        );
    }
    let receipt = runtime.show(transaction).ok().flatten();
    // A revert has no program: it is made again by reverting again (sec73
    // F2), unless what made this one stale stands in that one's way too.
    if let Some(original) = receipt.as_ref().and_then(crate::render::reverted_by) {
        let short = original.get(..12).unwrap_or(original);
        if let Some(revert) = reverted_already(runtime, original) {
            return format!("{NOTHING_LEFT}{short} is reverted already, by {revert}");
        }
        return match revert_blocked(runtime, original) {
            Some(paths) => format!(
                "vsh show {short} (no revert of {short} can be made now: the workspace changed at {paths} since it \
                 was committed, and a revert never overwrites that; change them back by new work instead: vsh run)"
            ),
            None => format!("vsh revert {short}"),
        };
    }
    let names = receipt.and_then(|receipt| receipt.grants).map(|grants| grants.env);
    let again = |name: &String| {
        std::env::var(name)
            .is_ok_and(|value| matches!(runtime.granted_value_is(transaction, name, &value), Ok(Some(true))))
    };
    let missing: Vec<String> = names
        .unwrap_or_default()
        .iter()
        .filter(|name| !again(name))
        .map(|name| format!(" --env {name}=VALUE"))
        .collect();
    format!("vsh rerun {}{}", transaction.short(), missing.concat())
}

/// A run whose commit in the same call (`--mode auto`) found the workspace
/// changed under it: the error, naming the run's record (stale) and its
/// rerun as the next step, when the store holds exactly one stale record of
/// this program made since `since_ms` (concurrent runs of the same program
/// are told apart by nothing else: then `--retry-stale` is named instead).
pub(crate) fn stale_run(
    runtime: &vsh::Runtime,
    error: VshError,
    request: &vsh::RunRequest<'_>,
    since_ms: u64,
) -> Box<dyn std::error::Error> {
    let (mut remedies, hint) = match stale_record(runtime, request, since_ms) {
        Some(id) => (vec![format!("its record is {}, stale", id.short())], Some(rerun_line(runtime, id))),
        None => (Vec::new(), None),
    };
    remedies.push(
        "`--retry-stale N` runs the program again on the workspace as it is, up to N times, when its commit finds \
         the workspace changed"
            .to_owned(),
    );
    Box::new(Failure { source: error, remedies, hint })
}

/// The stale record a run of `request` begun at `since_ms` left when its
/// commit found the workspace changed: the one stale record of this program
/// and intent made since, if exactly one is.
pub(crate) fn stale_record(
    runtime: &vsh::Runtime,
    request: &vsh::RunRequest<'_>,
    since_ms: u64,
) -> Option<vsh::TransactionId> {
    let mut made: Vec<vsh::TransactionId> = runtime
        .transactions()
        .unwrap_or_default()
        .into_iter()
        .filter(|record| record.state == vsh::TransactionState::Stale && record.created_ms >= since_ms)
        .filter(|record| {
            runtime.stored_program(record.id).ok().flatten().is_some_and(|stored| {
                stored.code == request.code && stored.intent == request.intent.unwrap_or_default()
            })
        })
        .map(|record| record.id)
        .collect();
    let one = made.pop();
    one.filter(|_| made.is_empty())
}

/// Where the workspace stands in the way of a revert of committed work
/// `original` (64 hex digits) now, named for the reader (a few paths, then
/// how many more); `None` when one could be made, or vsh cannot say (the
/// revert itself then says why). A revert that went stale is made again by
/// reverting its original again, which is refused while a path it would
/// put back changed since (ux74 M3: the step named was refused every time).
/// The revert that reverted committed work `original` (a prefix of its
/// id) already, if one did: a revert of it gone stale has nothing left to
/// do (ux83 M2: it was told to change the paths back by new work).
pub(crate) fn reverted_already(runtime: &vsh::Runtime, original: &str) -> Option<String> {
    let id = runtime.resolve(original).ok()?;
    runtime.reverted_by(id).ok().flatten().map(|revert| revert.short())
}

pub(crate) fn revert_blocked(runtime: &vsh::Runtime, original: &str) -> Option<String> {
    const NAMED: usize = 3;
    let id = runtime.resolve(original).ok()?;
    let paths = runtime.revert_blocked_at(id).ok()?;
    if paths.is_empty() {
        return None;
    }
    let mut named: Vec<String> =
        paths.iter().take(NAMED).map(|path| crate::render::shown(path.as_str(), false).into_owned()).collect();
    if paths.len() > NAMED {
        named.push(format!("{} more", paths.len() - NAMED));
    }
    Some(named.join(", "))
}

/// The latest other run of the same work as `transaction` (its lineage:
/// the work it ran again, if it is a rerun, and every rerun of that; ux62
/// finding 1) that is committed or may still be: its work is done, or will
/// be, so running `transaction` again would do it twice. Best effort:
/// `None` when the store cannot say.
pub(crate) fn live_rerun(runtime: &vsh::Runtime, transaction: vsh::TransactionId) -> Option<vsh::TransactionRecord> {
    use vsh::TransactionState as S;
    let lineage = runtime.runs_of_same_work(transaction).ok()?;
    lineage.into_iter().rev().filter(|record| record.id != transaction).find(|record| {
        // A committed run reverted since did not do the work (sec89 L3).
        let reverted = || runtime.reverted_by(record.id).ok().flatten().is_some();
        (record.state == S::Committed && !reverted())
            || matches!(
                record.state,
                S::PendingApproval
                    | S::Approved
                    | S::AutoApproved
                    | S::Reserved
                    | S::Revalidating
                    | S::Committing
                    | S::RecoveryRequired
            )
    })
}

/// What to do about work that can never be committed as it is, in words:
/// [`rerun_line`]'s command (`vsh rerun TX` runs its program again, a
/// revert's `vsh revert`), or that nothing is left to do.
pub(crate) fn what_next(runtime: &vsh::Runtime, transaction: vsh::TransactionId) -> String {
    let line = rerun_line(runtime, transaction);
    if let Some(done) = line.strip_prefix(NOTHING_LEFT) {
        return format!("{NOTHING_IS_LEFT}: {done}");
    }
    let (command, why) = line.split_once(" (").map_or((line.as_str(), ""), |(command, why)| (command, why));
    let why = why.strip_suffix(')').unwrap_or(why);
    let what = if command.starts_with("vsh rerun ") { " runs its program again" } else { "" };
    if why.is_empty() { format!("`{command}`{what}") } else { format!("`{command}`{what} ({why})") }
}

/// How [`rerun_line`] begins when nothing is left to do.
pub(crate) const NOTHING_LEFT: &str = "nothing: ";

/// How the remedy of work done already begins.
const NOTHING_IS_LEFT: &str = "nothing is left to do";

/// Why `transaction`'s work is done already, if it is: another run of the
/// same work is committed (ux81 M4: the first run, made under a policy
/// since replaced, still said to run it again), or the workspace holds
/// every change it makes (ux81 M1: an agent's retry was committed, and the
/// first run's next step, `vsh rerun`, made its changes twice).
pub(crate) fn work_done(runtime: &vsh::Runtime, transaction: vsh::TransactionId) -> Option<String> {
    if let Some(rerun) =
        live_rerun(runtime, transaction).filter(|rerun| rerun.state == vsh::TransactionState::Committed)
    {
        return Some(format!(
            "another run of the same work, {}, is committed: running it once more would do that work twice",
            rerun.id.short()
        ));
    }
    runtime.holds_its_changes(transaction, false).ok().filter(|holds| *holds).map(|_| {
        "the workspace holds every change it makes already (other work made them since, or an edit by hand): \
         running it again would make them twice"
            .to_owned()
    })
}

/// Whether `transaction` waits for an approval or a commit.
fn waits(runtime: &vsh::Runtime, transaction: vsh::TransactionId) -> bool {
    use vsh::TransactionState as S;
    runtime
        .transaction(transaction)
        .ok()
        .flatten()
        .is_some_and(|record| matches!(record.state, S::PendingApproval | S::Approved | S::AutoApproved))
}

/// `vsh rerun TX` of work whose rerun is committed or waiting: refused,
/// naming it (ux61 1: the `next` of stale work, followed twice, applied
/// its work twice); `--again` runs it anyway.
pub(crate) fn refuse_work_done_again(
    runtime: &vsh::Runtime,
    transaction: vsh::TransactionId,
) -> Result<(), Box<dyn std::error::Error>> {
    // An operator said no to it: running it again takes saying so (ux74 H1).
    if runtime.transaction(transaction)?.is_some_and(|record| record.state == vsh::TransactionState::Rejected) {
        let short = transaction.short();
        return Err(format!(
            "transaction {short} was rejected by an operator; `vsh rerun {short} --again` runs its program again \
             anyway, as new work"
        )
        .into());
    }
    // Itself committed: a run of it again is its work twice (ux77: an
    // appending program's rerun of committed work appended twice; MCP
    // refused it already, sec78 F4). (Work still waiting is run again to
    // see it anew, as an operator does; its rerun's hint says how to drop
    // the first.)
    if let Some(record) = runtime.transaction(transaction)?
        && record.state == vsh::TransactionState::Committed
    {
        let short = transaction.short();
        return Err(format!(
            "transaction {short} is {} itself: running it again would do its work twice; `vsh rerun {short} \
             --again` runs it once more anyway",
            record.state.name()
        )
        .into());
    }
    // What it changes is there already (ux81 M1: an agent's retry was
    // committed, and the first run's rerun made its changes twice).
    // Waiting for a commit that holds the lock: its answer is known only
    // after it (sec89 M1), and a lock timeout is the refusal.
    let holds = || match runtime.holds_its_changes(transaction, true) {
        // Said as what it is (sec91: "commit failed" of a rerun).
        Err(error @ VshError::Commit(CommitError::LockTimeout { .. })) => Err(Box::new(Failure {
            source: error,
            remedies: vec![format!(
                "another vsh process holds the commit lock: whether the work of {} is done already is known \
                 only once its commit ends; run the rerun again then (or with a longer --lock-timeout)",
                transaction.short()
            )],
            hint: None,
        }) as Box<dyn std::error::Error>),
        other => Ok(other?),
    };
    if live_rerun(runtime, transaction).is_none() && holds()? {
        let short = transaction.short();
        return Err(format!(
            "the workspace holds every change {short} makes already (other work made them since, or an edit by \
             hand): running it again would make them twice; `vsh rerun {short} --again` runs it anyway"
        )
        .into());
    }
    let Some(done) = live_rerun(runtime, transaction) else { return Ok(()) };
    // Still waiting itself, it is dropped, not run (ux82 L1).
    let drop = if waits(runtime, transaction) {
        format!(", `vsh reject --only {}` drops this one", transaction.short())
    } else {
        String::new()
    };
    Err(format!(
        "another run of the work of transaction {}, {}, is {}: running it once more would do that work twice; \
         `vsh show {}` shows that run{drop}, and `vsh rerun {} --again` runs it once more anyway",
        transaction.short(),
        done.id.short(),
        done.state.name(),
        done.id.short(),
        transaction.short()
    )
    .into())
}

/// The command line's advice for a failing run whose changes
/// `--accept-failure` would have kept.
pub(crate) const ACCEPT_FAILURE_ADVICE: &str =
    "run it with --accept-failure to keep a failing run's changes as its outcome";

/// Whether `error` is a Bash program's or a real command's failure that
/// changed something, and whose failure could have been accepted as its
/// outcome (`--accept-failure`; MCP's `accept_failure`).
pub(crate) fn failure_keeps_changes(error: &VshError) -> bool {
    matches!(error, VshError::Bash { changes, source, .. } if !changes.is_empty() && failure_may_be_accepted(source))
}

/// Whether `error` came of a full disk (`ENOSPC`, or the store's own
/// reserve).
pub(crate) fn disk_full(error: &VshError) -> bool {
    const ENOSPC: i32 = 28;
    if matches!(error, VshError::StoreSpace { .. }) {
        return true;
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(now) = cause {
        if now.downcast_ref::<std::io::Error>().is_some_and(|io| io.raw_os_error() == Some(ENOSPC)) {
            return true;
        }
        cause = now.source();
    }
    false
}

/// What a [`rerun_line`] that names variables leaves to the operator: their
/// values, which vsh does not keep.
const RERUN_VALUES: &str =
    "give each --env the value the first run's commands had (vsh keeps no variable's value, only a keyed digest)";

/// The `VshError` inside a command's error, the remedies and hint attached to it.
pub(crate) fn unwrap<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> (Option<&'e VshError>, &'e [String], Option<&'e str>) {
    match error.downcast_ref::<Failure>() {
        Some(failure) => (Some(&failure.source), failure.remedies.as_slice(), failure.hint.as_deref()),
        None => (error.downcast_ref::<VshError>(), &[], None),
    }
}

/// The program's output carried by a failed run (an uncaught exception, a
/// budget that ran out), whatever ended it.
fn program_output(error: &VshError) -> Option<&str> {
    match error.execution()? {
        ExecutionError::Exception { stdout, .. } | ExecutionError::Limit { stdout, .. } => Some(stdout.as_str()),
        _ => None,
    }
}

/// The `vsh run` option that raises a budget that ran out, if it has one.
fn raising_option(error: &VshError) -> Option<&'static str> {
    Some(match error.exceeded_limit()? {
        LimitKind::Duration | LimitKind::RequestDuration => "--timeout",
        LimitKind::OsCalls => "--max-os-calls",
        LimitKind::OutputBytes => "--max-output",
        LimitKind::Memory => "--max-memory",
        _ => return None,
    })
}

/// Whether a real command could not start for want of its candidate's
/// mount (no `/dev/fuse` this process may open, no privilege to mount).
fn no_candidate(error: &VshError) -> bool {
    let VshError::Execution(execution) = error else { return false };
    matches!(execution.as_ref(), ExecutionError::Command { source: ToolError::Setup { stage, .. } }
        if *stage == "open /dev/fuse" || *stage == "candidate mount")
}

/// Whether `error`, or an error it was caused by, is a stored blob missing
/// or corrupt.
fn damaged_store(error: &VshError) -> bool {
    use vsh::lower::vsh_store::StoreError;
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = next {
        // Itself, boxed (as a commit's cause is), or inside vsh's error.
        let store = cause
            .downcast_ref::<StoreError>()
            .or_else(|| cause.downcast_ref::<Box<StoreError>>().map(AsRef::as_ref))
            .or_else(|| match cause.downcast_ref::<VshError>() {
                Some(VshError::Store(store)) => Some(store),
                _ => None,
            });
        if matches!(store, Some(StoreError::MissingBlob { .. } | StoreError::CorruptBlob { .. })) {
            return true;
        }
        next = cause.source();
    }
    false
}

/// Whether a real command was stopped for the disk space it took.
/// What to do about a run that gave up waiting for another vsh, or reached
/// one of its image's bounds.
fn advice_on_waits_and_bounds(error: &VshError) -> Vec<String> {
    let mut advice = Vec::new();
    if let Some(option) = raising_option(error) {
        // What became of its work (ux79 L5: a failure said so, a limit not).
        advice.push(format!(
            "to give the program more, raise it with `{option}`; nothing of a run a limit stopped is kept, \
             --accept-failure or not"
        ));
    }
    // Gave up waiting for another vsh (ux78 L5: no next step was said).
    if matches!(error, VshError::Commit(CommitError::LockTimeout { .. }) | VshError::ScratchBusy { .. }) {
        advice.push(
            "nothing was done: run it again once the other finishes, or wait longer with --lock-timeout SECS \
             (`vsh pending` lists work under way)"
                .to_owned(),
        );
    }
    if let Some(ExecutionError::Vfs {
        source: vsh::lower::vsh_vfs::VfsError::SnapshotLimit { limit, path, attempted, max },
    }) = error.execution()
    {
        advice.push(snapshot_limit_advice(limit, path.as_str(), *attempted, *max));
    }
    advice
}

/// What a run that reached one of its image's bounds (`SnapshotLimits`)
/// can do (ux78 M1: "snapshot limit `max_materialized_file_bytes` exceeded"
/// was all it was told).
fn snapshot_limit_advice(limit: &str, path: &str, attempted: u64, max: u64) -> String {
    // Whole MiB as the limits are, a tenth for what went past one.
    #[expect(clippy::cast_precision_loss, reason = "a size shown to a tenth of a MiB")]
    let size = |bytes: u64| {
        let mib = bytes as f64 / f64::from(1 << 20);
        if bytes.is_multiple_of(1 << 20) { format!("{mib:.0} MiB") } else { format!("{mib:.1} MiB") }
    };
    let path = render::shown(path, false);
    match limit {
        "max_materialized_file_bytes" => format!(
            "{path} ({}) is larger than the {} a run may hold of one file to change or read whole: nothing was \
             changed; change a file that large outside vsh, or keep it out of what the run rewrites (a command may \
             still read it in parts)",
            size(attempted),
            size(max)
        ),
        "max_materialized_bytes" => format!(
            "the run held {} of the workspace's files to change or read whole, past its {}: nothing was changed; \
             make the run touch fewer or smaller files (split the work into several runs)",
            size(attempted),
            size(max)
        ),
        _ => format!(
            "the run looked at more than {max} paths of the workspace (at {path}): nothing was changed; give it a \
             narrower directory to walk"
        ),
    }
}

fn filled_the_disk(error: &VshError) -> bool {
    matches!(error.exceeded_limit(), Some(LimitKind::DiskSpace | LimitKind::DiskNodes))
}

/// For a Monty program that used what this Monty does not have (the
/// guide's "Does not work" table, `vsh guide`): what it lacks, and what to
/// use instead (`os.walk: vsh_glob('**/*') lists a tree`).
pub(crate) fn monty_instead(error: &VshError) -> Option<&'static str> {
    const INSTEAD: [(&str, &str); 6] = [
        ("module 'os' has no attribute 'walk'", "os.walk: vsh_glob('**/*') lists a tree (or iterdir() in a loop)"),
        ("'module' object has no attribute 'path'", "os.path: pathlib.Path and / (Path('a') / 'b', .name, .suffix)"),
        ("module 'os' has no attribute 'getcwd'", "os.getcwd: the working directory is /workspace"),
        ("has no attribute 'glob'", "Path.glob: vsh_glob(pattern, path)"),
        ("has no attribute 'rglob'", "Path.rglob: vsh_glob('**/' + pattern, path)"),
        ("unsupported operand type(s) for %", "% formatting: f-strings or str.format"),
    ];
    let Some(ExecutionError::Exception { exception, .. }) = error.execution() else { return None };
    INSTEAD.iter().find(|(message, _)| exception.message.contains(message)).map(|(_, instead)| *instead)
}

/// For a command whose program was not found: how to let it find one
/// outside the system directories.
fn missing_program(error: &VshError) -> Option<String> {
    match error.execution()? {
        ExecutionError::Command { source: ToolError::Spawn { program, source } }
            if source.kind() == std::io::ErrorKind::NotFound && !program.contains('/') =>
        {
            Some(missing_program_advice(program))
        }
        // The same from a Monty program's `vsh_exec`, which raised it.
        ExecutionError::Exception { exception, .. }
            if exception.type_name == "FileNotFoundError" && exception.traceback.contains("vsh_exec(") =>
        {
            let program =
                exception.message.strip_prefix("[Errno 2] No such file or directory: '")?.strip_suffix('\'')?;
            (!program.is_empty() && !program.contains(['/', '\''])).then(|| missing_program_advice(program))
        }
        _ => None,
    }
}

/// How cargo builds with the crates it has already downloaded.
const CARGO_OFFLINE: &str = "for the crates cargo has already downloaded, without the network: --tool \
     ~/.cargo/registry --env CARGO_HOME=\"$HOME/.cargo\" -- cargo ... --offline (the registry only: ~/.cargo also \
     holds the registry's token)";

/// How to let a command find `program`, a bare name found on no directory
/// of its `PATH`, outside the system directories.
fn missing_program_advice(program: &str) -> String {
    const BUILTINS: [&str; 22] = [
        "cd", "export", "source", ".", "alias", "unalias", "set", "unset", "exit", "eval", "exec", "ulimit", "umask",
        "read", "shift", "trap", "wait", "pushd", "popd", "history", "declare", "local",
    ];
    if program.contains(char::is_whitespace) {
        let words: Vec<&str> = program.split_whitespace().collect();
        return format!(
            "`{program}` is one argument holding spaces, taken as a program's name: give each word as an \
             argument of its own (vsh exec -- {}), or a shell line to a shell (vsh exec -- sh -c '{program}')",
            words.join(" ")
        );
    }
    if program == "source" {
        // sh (dash) has no `source`: its `.` is the same.
        return "`source` is a shell builtin, not a program, and sh's is `.`: vsh exec -- sh -c '. ./FILE && ...'"
            .to_owned();
    }
    if BUILTINS.contains(&program) {
        return format!(
            "`{program}` is a shell builtin, not a program: run it in a shell with what it is for \
             (vsh exec -- sh -c '{program} ... && ...')"
        );
    }
    let mut advice = format!(
        "`{program}` is not on the command's PATH (/usr/local/bin:/usr/bin:/bin unless --env PATH=... \
         says otherwise); give its directory: --tool DIR --env PATH=DIR:/usr/local/bin:/usr/bin:/bin"
    );
    if program == "cargo" || program == "rustc" || program.starts_with("cargo-") || program.starts_with("rust") {
        advice.push_str(
            "\nvsh:   for rustup's toolchain: --tool \"$(rustc --print sysroot)\" \
             --env PATH=\"$(rustc --print sysroot)/bin:/usr/local/bin:/usr/bin:/bin\"\
             \nvsh:   and ",
        );
        advice.push_str(CARGO_OFFLINE);
    }
    // A name on none of the operator's own directories either is most
    // likely mistyped (`pyhton3`).
    if let Some(path) = std::env::var_os("PATH")
        && !std::env::split_paths(&path).any(|dir| dir.is_absolute() && dir.join(program).is_file())
    {
        let _ = write!(advice, "\nvsh:   `{program}` is on no directory of your own PATH either: check its name");
    }
    advice
}

/// The installations a command's `program` leads to that lie outside what
/// commands may read (the system directories, the workspace `root`, the
/// `tools`): its own, where it or a symlink to it lies (a virtualenv's
/// `pytest`, a virtualenv's `python` linking to a pyenv installation), and
/// for a script the one of the interpreter its `#!` line names; each taken
/// up to the directory holding its `bin/` (a virtualenv with its
/// `pyvenv.cfg`, a pyenv or uv installation with its `lib/`). Empty when
/// all stays inside, or cannot be looked at.
pub(crate) fn installations_outside(
    program: &std::path::Path,
    root: &std::path::Path,
    tools: &[std::path::PathBuf],
) -> Vec<std::path::PathBuf> {
    use std::io::Read as _;
    const SYSTEM: [&str; 5] = ["/usr", "/bin", "/sbin", "/lib", "/lib64"];
    let Ok(root) = std::fs::canonicalize(root) else { return Vec::new() };
    let path = if program.is_absolute() {
        program.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(cwd) => cwd.join(program),
            Err(_) => return Vec::new(),
        }
    };
    let Ok(own) = std::fs::canonicalize(&path) else { return Vec::new() };
    let mut targets = vec![path.clone(), own.clone()];
    // A script: the interpreter on its `#!` line too.
    let mut head = [0_u8; 256];
    let read = std::fs::File::open(&own).and_then(|mut file| file.read(&mut head)).unwrap_or(0);
    if let Some(line) = head[..read].strip_prefix(b"#!") {
        let line = String::from_utf8_lossy(line.split(|byte| *byte == b'\n').next().unwrap_or_default()).into_owned();
        // Only a program can be one: a directory or a data file named there
        // (`#!/root/.config`) is no installation to give.
        if let Some(interpreter) = line
            .split_whitespace()
            .next()
            .and_then(|first| std::fs::canonicalize(first).ok())
            .filter(|interpreter| executable_file(interpreter))
        {
            targets.push(interpreter);
        }
    }
    let mut found: Vec<std::path::PathBuf> = Vec::new();
    for target in targets {
        let inside = |dir: &std::path::Path| target.starts_with(dir);
        if inside(&root)
            || SYSTEM.iter().any(|dir| inside(std::path::Path::new(dir)))
            || tools.iter().chain(&found).any(|tool| inside(tool))
        {
            continue;
        }
        let installation = target
            .ancestors()
            .skip(1)
            .find(|dir| dir.file_name().is_some_and(|name| name == "bin"))
            .and_then(std::path::Path::parent)
            .or_else(|| target.parent());
        let Some(installation) = installation.filter(|dir| dir.parent().is_some()) else { continue };
        if whole_installation(installation) {
            found.push(installation.to_path_buf());
        } else {
            // A dot-directory of a home (`~/.local`, `~/.cargo`) holds more
            // than programs (`~/.local/share` keeps tools' credentials):
            // only its programs and their libraries.
            found.extend(["bin", "lib"].map(|part| installation.join(part)).into_iter().filter(|dir| dir.is_dir()));
        }
    }
    found
}

/// Whether `dir`, the directory holding a program's `bin/`, may be given to
/// commands whole: not a dot-directory (`.local`, `.cargo`: a home's, which
/// keeps more than programs), unless it is a virtualenv (its `pyvenv.cfg`),
/// which holds nothing else and needs its top to work.
pub(crate) fn whole_installation(dir: &std::path::Path) -> bool {
    let dotted = dir.file_name().is_some_and(|name| name.as_encoded_bytes().starts_with(b"."));
    !dotted || dir.join("pyvenv.cfg").is_file()
}

/// Whether `path` is a regular file someone may execute.
fn executable_file(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// What to print on stderr beyond the error chain: conflicting paths, the
/// candidates of an ambiguous prefix, the command that re-evaluates stale
/// work or work made under an old policy, a failed run's output, and a refused
/// run's refusals with their remedies.
/// A failed run's refusals, each with its remedy: the first
/// [`vsh::MAX_LISTED_DENIALS`], then how many more there were.
fn write_denials(text: &mut String, denied: &[vsh::DeniedAccess], remedies: &[String]) {
    for (index, denied) in denied.iter().take(vsh::MAX_LISTED_DENIALS).enumerate() {
        let _ = writeln!(text, "vsh: denied: {denied}");
        if let Some(remedy) = remedies.get(index) {
            let _ = writeln!(text, "vsh:   to allow it: {remedy}");
        }
    }
    if let Some(more) = denied.len().checked_sub(vsh::MAX_LISTED_DENIALS).filter(|more| *more > 0) {
        let _ = writeln!(text, "vsh: ... and {more} more refused accesses, not listed");
    }
}

pub(crate) fn advice(error: Option<&VshError>, remedies: &[String], hint: Option<&str>) -> String {
    let mut text = String::new();
    match error {
        Some(stale) if let Some((conflicts, total)) = stale.stale_conflicts() => {
            let done = remedies.iter().any(|remedy| remedy.starts_with(NOTHING_IS_LEFT));
            text.push_str(&render::stale_text(conflicts, total, !done));
            for remedy in remedies {
                let _ = writeln!(text, "vsh: {remedy}");
            }
        }
        Some(VshError::AmbiguousTransaction { candidates, total, .. }) => {
            text.push_str(&render::candidates_text(candidates, *total));
        }
        Some(VshError::PolicyChanged(id)) => {
            let _ = match hint {
                Some(_) => writeln!(text, "vsh: the workspace's policy changed since it was made"),
                None => writeln!(
                    text,
                    "vsh: the workspace's policy changed since it was made; `vsh rerun {}` runs its program again \
                     under the policy in force now, as a new transaction",
                    id.short()
                ),
            };
            for remedy in remedies {
                let _ = writeln!(text, "vsh: {remedy}");
            }
        }
        Some(VshError::Bash { source, changes, .. }) => {
            if let ExecutionError::Bash { stdout, stderr, denied, stats, .. } = source.as_ref() {
                for line in String::from_utf8_lossy(stdout).lines() {
                    let _ = writeln!(text, "vsh: program output | {}", render::shown(line, true));
                }
                for line in String::from_utf8_lossy(stderr).lines() {
                    let _ = writeln!(text, "vsh: program stderr | {}", render::shown(line, true));
                }
                write_denials(&mut text, denied, remedies);
                // Its looks at hidden paths may be why it failed.
                if stats.hidden_looks > 0 {
                    let looked =
                        vsh::Warning::HiddenLooks { looks: stats.hidden_looks, paths: stats.hidden_paths.clone() };
                    let _ = writeln!(text, "vsh: warning: {}", render::shown(&looked.to_string(), true));
                }
            }
            let unless = if failure_may_be_accepted(source) {
                "a failed script or command is not committable unless run with --accept-failure"
            } else {
                "a script that failed so is never committable, --accept-failure or not"
            };
            write_changes(&mut text, changes, unless);
            if let Some(error) = error {
                for advice in advice_for(error).iter().filter(|advice| !advice.contains("--accept-failure")) {
                    let _ = writeln!(text, "vsh: {advice}");
                }
            }
        }
        Some(other) => {
            for line in program_output(other).unwrap_or_default().lines() {
                let _ = writeln!(text, "vsh: program output | {}", render::shown(line, true));
            }
            if let Some((denied, _)) = other.refused_run() {
                write_denials(&mut text, denied, remedies);
            } else {
                for remedy in remedies {
                    let _ = writeln!(text, "vsh: {remedy}");
                }
            }
            if let VshError::Raised { changes, .. } = other {
                write_changes(
                    &mut text,
                    changes,
                    "a Monty program that raises, or runs out of a budget, keeps nothing",
                );
            }
            for advice in advice_for(other) {
                let _ = writeln!(text, "vsh: {advice}");
            }
        }
        None => {}
    }
    if let Some(hint) = hint {
        let _ = writeln!(text, "vsh: next: `{hint}`");
    }
    text
}

/// What a failed program had changed, none of it stored (`why`), as
/// `vsh:   create  notes.txt` lines, the first 20.
fn write_changes(text: &mut String, changes: &[vsh::DiffEntry], why: &str) {
    if changes.is_empty() {
        return;
    }
    let _ = writeln!(
        text,
        "vsh: before it failed, the program had changed {} path{} in its image (nothing is stored: {why}):",
        changes.len(),
        if changes.len() == 1 { "" } else { "s" }
    );
    for change in changes.iter().take(20) {
        let _ = writeln!(text, "vsh:   {:<7} {}", change.kind.name(), change.path);
    }
    if changes.len() > 20 {
        let _ = writeln!(text, "vsh:   ... and {} more", changes.len() - 20);
    }
}

/// What a program prints when it found no network (DNS or routes).
const OFFLINE: [&str; 8] = [
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "nodename nor servname",
    "getaddrinfo",
    // pip, whose index it could not reach (ux78: "from versions: none").
    "No matching distribution found for",
    "Could not find a version that satisfies the requirement",
];

/// The workspace and tool directories real commands are shown, once a run's
/// settings are known ([`note_shown`]): for advice on paths a command named
/// and could not reach.
static SHOWN: std::sync::OnceLock<(PathBuf, Vec<PathBuf>)> = std::sync::OnceLock::new();

/// The policy this process's run decided under, for the same advice: what
/// of the workspace its commands may see ([`note_policy`]).
static POLICY: std::sync::OnceLock<vsh::lower::vsh_policy::CallPolicy> = std::sync::OnceLock::new();

/// Remember the policy this process's run decides under (the command line
/// runs one).
pub(crate) fn note_policy(policy: &vsh::lower::vsh_policy::CallPolicy) {
    let _ = POLICY.set(policy.clone());
}

/// Remember what real commands of this process's run are shown: the
/// workspace and the `--tool` directories.
pub(crate) fn note_shown(workspace: &Path, tools: &[PathBuf]) {
    let _ = SHOWN.set((workspace.to_owned(), tools.to_owned()));
}

/// The host's directories a command is shown besides the workspace and its
/// tools, and its own that share their names with the host's (`/proc`,
/// devices). (Its `/tmp` is its own too, but a path there that the host
/// also holds is most likely the host's.)
const SHOWN_SYSTEM: [&str; 12] =
    ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/dev", "/proc", "/sys", "/run"];

/// `path` with `.` and `..` taken lexically.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The most distinct names of paths a failure's hint walks.
const LINK_WALK_NAMES: usize = 256;

/// The most directories a failure's hint steps through, in all.
const LINK_WALK_STEPS: usize = 4096;

/// What a failed command's output (`printed`) names that leads out of the
/// workspace `root`, where it cannot follow (ux78 M2: `npm install
/// ../lib`, a monorepo's `shared -> ../libs/shared` failed with "No such
/// file", "Permission denied" or "Read-only file system", and nothing said
/// why), a phrase each. Nothing of the host outside the workspace is looked
/// at (sec83 F1: a walk of what a command printed, as root, told it which
/// host paths existed, and followed its links into `/proc`): a path out of
/// it is judged by its name alone, and one in it is walked from the
/// workspace's root without following a link, through paths `readable`
/// (the policy lets the command see them), to the first link, which is
/// named when its target leads out. What the command is shown (its tools,
/// the system's directories, its own `/tmp`) is no such path.
fn outside_the_workspace(
    printed: &str,
    root: &Path,
    tools: &[PathBuf],
    readable: &dyn Fn(&vsh::VPath, AccessKind) -> bool,
) -> Vec<String> {
    let shown = |path: &Path| {
        tools.iter().any(|tool| path.starts_with(tool)) || SHOWN_SYSTEM.iter().any(|system| path.starts_with(system))
    };
    let mut found: Vec<String> = Vec::new();
    let separators = |c: char| c.is_whitespace() || "'\"`()[]<>,;=".contains(c);
    // A module Python could not import names no path: its package, as a
    // directory of the workspace (ux79 M2: a monorepo's `shared` link).
    let modules = printed.lines().filter_map(|line| {
        let named = line.split_once("No module named ")?.1.trim_matches(['\'', '"', ' ']);
        let package = named.split(['.', '\'', '"']).next()?;
        (!package.is_empty()).then(|| format!("{package}/__init__.py"))
    });
    let tokens = printed.split(separators).map(|token| token.trim_end_matches([':', '.']).to_owned());
    // Each name once, and a bound on the names walked and on the steps
    // (sec84 F3: a path 500 directories deep, printed 600 times, cost ten
    // seconds of walking).
    let mut looked = std::collections::HashSet::new();
    let mut steps = LINK_WALK_STEPS;
    for token in modules.chain(tokens) {
        let token = token.as_str();
        // A name without a `/` too: a link at the workspace's top (ux85 L3:
        // `cat out.lnk` was not explained, `cat outdir/x` was).
        if matches!(token, "" | "." | "..") || !looked.insert(token.to_owned()) || looked.len() > LINK_WALK_NAMES {
            continue;
        }
        if found.len() == 3 {
            break;
        }
        if token.contains("://") || token.len() > 1024 {
            continue;
        }
        // An absolute name under /tmp is the command's own /tmp's; one
        // reached from the workspace (`../x`, a link) is the host's.
        if ["/tmp/", "/var/tmp/"].iter().any(|tmp| token.starts_with(tmp)) {
            continue;
        }
        let path = lexical(&root.join(token));
        let finding = if root.starts_with(&path) {
            // A directory on the way to the workspace, which it is shown.
            None
        } else if let Ok(inside) = path.strip_prefix(root) {
            link_out_of(root, inside, readable, &mut steps)
                .filter(|(_, landing)| !shown(landing))
                .map(|(link, target)| format!("{link}, a symlink to {}", target.display()))
        } else {
            (!shown(&path)).then(|| format!("{token}, outside the workspace"))
        };
        if let Some(finding) = finding
            && !found.contains(&finding)
        {
            found.push(finding);
        }
    }
    found
}

/// The first symlink on the way to `inside` (relative to the workspace
/// `root`) when its target leads out of the workspace: its name, and where
/// it leads (taken by name, never looked at). Walked by descriptor from the
/// root, no link followed, only through paths `readable`, never into vsh's
/// data directory; `None` for anything else.
fn link_out_of(
    root: &Path,
    inside: &Path,
    readable: &dyn Fn(&vsh::VPath, AccessKind) -> bool,
    steps: &mut usize,
) -> Option<(String, PathBuf)> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut dir = rustix::fs::open(root, flags, Mode::empty()).ok()?;
    let mut walked = PathBuf::new();
    for component in inside.components() {
        let std::path::Component::Normal(name) = component else { return None };
        *steps = steps.checked_sub(1)?;
        walked.push(name);
        let named = vsh::VPath::parse(walked.to_str()?).ok()?;
        if walked.starts_with(".vsh") || !readable(&named, AccessKind::MetadataRead) {
            return None;
        }
        let stat = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => dir = rustix::fs::openat(&dir, name, flags, Mode::empty()).ok()?,
            // A link's target is its content: told only where the policy
            // lets commands read it (sec84 F2: a `content-read` rule's).
            FileType::Symlink if readable(&named, AccessKind::ContentRead) => {
                let target = rustix::fs::readlinkat(&dir, name, Vec::new()).ok()?;
                let target = PathBuf::from(std::ffi::OsString::from(target.to_str().ok()?));
                let landing = lexical(&root.join(walked.parent()?).join(&target));
                return (!landing.starts_with(root)).then(|| (walked.display().to_string(), target));
            }
            _ => return None,
        }
    }
    None
}

/// What real commands' failure (`error`) says of what they were not shown,
/// under `policy` (what they may see of the workspace): paths out of the
/// workspace, a log left in their own `/tmp`, a repository above the
/// workspace. Nothing where this process ran no command with settings.
pub(crate) fn shown_advice(error: &VshError, policy: &vsh::lower::vsh_policy::CallPolicy) -> Vec<String> {
    shown_advice_on(&failed_output(error), policy)
}

/// [`shown_advice`] for what a failure printed.
fn shown_advice_on(printed: &str, policy: &vsh::lower::vsh_policy::CallPolicy) -> Vec<String> {
    let Some((root, tools)) = SHOWN.get() else { return Vec::new() };
    let readable = |path: &vsh::VPath, access: AccessKind| policy.authorize(path, access).is_ok();
    advice_on_what_is_shown(printed, root, tools, &readable)
}

/// What the operator can do about `error`, a sentence each (the text's
/// `vsh: ...` lines, the JSON document's `hint` when it has no command).
pub(crate) fn advice_for(error: &VshError) -> Vec<String> {
    let mut advice = Vec::new();
    if let Some(program) = missing_program(error) {
        advice.push(program);
    }
    if let Some(instead) = monty_instead(error) {
        advice.push(format!("this Monty has no {instead}; `vsh guide` lists what else to use instead"));
    }
    if let VshError::NotCommittable { state: vsh::TransactionState::Stale, .. }
    | VshError::NotApprovable { state: vsh::TransactionState::Stale, .. } = error
    {
        // Asked again after a stale commit (ux57 #7): what stale means here.
        advice.push(
            "it went stale: the workspace changed under what it read or changed since it was made, so it can \
             never be committed as it is"
                .to_owned(),
        );
    }
    if let VshError::Execution(execution) = error
        && let ExecutionError::Command { source: ToolError::EnvDenied { name } } = execution.as_ref()
    {
        advice.push(format!(
            "vsh grants no variable that steers a loader or an interpreter (LD_*, PYTHONPATH, NODE_OPTIONS, ...: \
             `vsh exec --help` lists them); the command may set it for itself, in its candidate: vsh exec -- sh -c \
             '{name}=... COMMAND' (or the tool's own setting: pytest's `pythonpath`, a package.json script)"
        ));
    }
    if no_candidate(error) {
        advice.push(
            "real commands need /dev/fuse and vsh running as root; `vsh doctor` says what is missing here".to_owned(),
        );
    }
    if filled_the_disk(error) {
        advice.push(
            "the command was stopped before it filled the disk that holds its scratch directories (target/ and the \
             like), and what it wrote there was freed"
                .to_owned(),
        );
    }
    if damaged_store(error) {
        advice.push(
            "what vsh stored is damaged and cannot be repaired: `vsh doctor` names the waiting work it belongs to; \
             reject that work (vsh reject TX) and make it again"
                .to_owned(),
        );
    }
    advice.extend(advice_on_waits_and_bounds(error));
    if let VshError::RevertRefused { denied, .. } = error {
        advice.push(format!(
            "a revert is work like any other, and the policy protects {} from it as from any run: to undo the \
             change anyway, make it outside vsh",
            render::shown(denied.path.as_str(), false)
        ));
    }
    match error.exceeded_limit() {
        Some(LimitKind::ReadCallBytes) => advice.push(
            "a program reads a file whole, even for read(n), readline() or a loop over its lines, and one read \
             takes at most 4 MiB: look into a large file with a real command instead (vsh exec -- head FILE, or \
             vsh run --commands and vsh_exec(['head', '-c', '4096', 'FILE']))"
                .to_owned(),
        ),
        Some(LimitKind::ReadBytes) => advice.push(
            "a run reads at most 64 MiB in all (4 GiB with --commands): read less, for a search give it a \
             directory (vsh_search('text', path='src')), since vsh_search and vsh_glob walk every directory below \
             theirs, node_modules/ and .venv/ too"
                .to_owned(),
        ),
        _ => {}
    }
    if failure_keeps_changes(error) {
        advice.push(ACCEPT_FAILURE_ADVICE.to_owned());
    }
    match error {
        // A frame's damage: the frames before it are salvaged.
        VshError::Store(vsh::lower::vsh_store::StoreError::CorruptLog { offset, .. }) if *offset > 0 => advice.push(
            "`vsh recover --salvage-log` keeps the records before the damage (what could still be committed \
             voided) and the damaged log's bytes beside it, so vsh works again"
                .to_owned(),
        ),
        // The header's (or no log file at all): nothing can be salvaged.
        VshError::Store(vsh::lower::vsh_store::StoreError::CorruptLog { .. }) => advice.push(
            "the log's header is damaged, so nothing in it can be verified: move .vsh/data/txlog aside and vsh \
             starts a new, empty log (its records are lost; work on disk is not)"
                .to_owned(),
        ),
        _ => {}
    }
    if matches!(error, VshError::UnknownTransaction(_) | VshError::NoSuchTransaction(_)) {
        let searched = crate::OPENED
            .get()
            .map(|root| {
                format!("it was looked for in the workspace at {} (--workspace DIR names another); ", root.display())
            })
            .unwrap_or_default();
        advice.push(format!(
            "{searched}a preview that changes nothing is not kept, so its id is never found; `vsh log` and `vsh \
             pending` list the kept ones"
        ));
    }
    advice.extend(advice_from_output(&failed_output(error)));
    advice
}

/// What a failed command's output (`printed`) says of what it was not
/// shown, for a workspace `root` and `tools` directories: paths out of the
/// workspace, and a repository above it.
fn advice_on_what_is_shown(
    printed: &str,
    root: &Path,
    tools: &[PathBuf],
    readable: &dyn Fn(&vsh::VPath, AccessKind) -> bool,
) -> Vec<String> {
    let mut advice = Vec::new();
    let outside = outside_the_workspace(printed, root, tools, readable);
    if !outside.is_empty() {
        // No directory is named to grant (sec83 F2: a command's output
        // had vsh advise a sibling workspace, or /root).
        advice.push(format!(
            "it named {}: a real command sees only the workspace, the system's directories and what `--tool \
             DIR` shows it, read-only (all of DIR: never one that holds secrets or another workspace)",
            render::shown(&outside.join("; "), false)
        ));
    }
    // A log the command pointed at in its own /tmp (npm's "A complete log
    // of this run can be found in: /tmp/.npm/_logs/..."), gone with it
    // (ux78 L7).
    let in_tmp = printed.split(char::is_whitespace).find(|token| {
        (token.starts_with("/tmp/") || token.starts_with("/var/tmp/")) && token.to_ascii_lowercase().contains("log")
    });
    if let Some(log) = in_tmp {
        advice.push(format!(
            "{} was in the command's own /tmp, gone when it ended: to keep a log, have the command write it in the \
             workspace (npm: --logs-dir=DIR; or sh -c '... ; cp LOG .')",
            render::shown(log.trim_end_matches(['.', ',', ':', ';']), false)
        ));
    }
    // git looked for its repository above a workspace that is a
    // directory of one (ux78 M3).
    let repository = root.ancestors().skip(1).find(|dir| dir.join(".git").exists());
    if printed.contains("not a git repository")
        && let Some(repository) = repository
    {
        advice.push(format!(
            "the workspace is a directory of the git repository {0}: a command is shown the workspace only, \
             not the rest of the repository or its .git, so git finds none; to run git in commands make the \
             repository's root the workspace (vsh init --workspace {0})",
            render::shown(&repository.display().to_string(), false)
        ));
    }
    advice
}

/// The advice's words for a Bash program that needed real bash.
pub(crate) const BOUNDED_BASH: &str =
    "a Bash program runs in vsh's bounded interpreter, which has no installed programs";

/// What a failure's chain and output (`printed`) say to do: signs of a
/// program that is no program, of a missing network, of a Bash program
/// that needed real bash or a Monty program that needed commands.
fn advice_from_output(printed: &str) -> Vec<String> {
    let mut advice = Vec::new();
    if printed.contains("command not available in the vsh-bash-bounded-v1 profile") {
        advice.push(format!(
            "{BOUNDED_BASH}; `vsh run --confined FILE` runs it in real bash in a candidate, where they are"
        ));
    }
    if printed.contains("No module named 'subprocess'")
        || printed.contains("module 'os' has no attribute 'system'")
        || printed.contains("module 'os' has no attribute 'popen'")
    {
        advice.push(
            "a Monty program runs no processes of its own: it calls vsh_exec(argv) instead (a run given \
             --commands, or a server started with it, has it), which runs a real command confined in a candidate \
             of the workspace and returns (exit_code, stdout, stderr)"
                .to_owned(),
        );
    }
    // cargo that could not fetch its dependencies (no network, or offline
    // without its registry).
    let cargo_fetch = ["index.crates.io", "no matching package named", "as a dependency of package"];
    if cargo_fetch.iter().any(|sign| printed.contains(sign)) {
        advice.push(format!("if cargo needed crates: {CARGO_OFFLINE}"));
    }
    // A program named with a `/` and spaces, one argument: the shell that
    // starts it says `exec: NAME: not found`.
    let spaced = printed.lines().find_map(|line| {
        let name = line.split_once("exec: ")?.1.strip_suffix(": not found")?;
        name.contains(char::is_whitespace).then_some(name)
    });
    if let Some(name) = spaced {
        advice.push(missing_program_advice(name));
    }
    // What the command was not shown, under the policy the command line's
    // run decided under (an agent's server adds it with its own).
    if let Some(policy) = POLICY.get() {
        advice.extend(shown_advice_on(printed, policy));
    }
    // Its own /tmp, in memory and bounded, was full (ux79 M5: a bare
    // ENOSPC, the host's /tmp having room).
    if printed.contains("No space left on device") || printed.contains("ENOSPC") {
        advice.push(format!(
            "if it filled /tmp or /dev/shm: a command's are its own, in memory, {} MiB and {} MiB; have it keep large \
             temporary files in a scratch directory of the workspace instead, which is never in the diff (--env \
             TMPDIR=target/tmp beside a Cargo.toml, or a directory the policy's `[commands] scratch` names)",
            vsh::lower::vsh_monty::COMMAND_TMP_BYTES >> 20,
            vsh::lower::vsh_monty::COMMAND_SHM_BYTES >> 20
        ));
    }
    // The sandbox refuses `socket()` (EPERM) without a network: a test's own
    // server, `cargo fix`'s lock listener.
    let refused_socket = ["Operation not permitted", "[Errno 1]", "EPERM"].iter().any(|sign| printed.contains(sign))
        && ["socket", "bind", "listen", "connect", "TCP"].iter().any(|sign| printed.contains(sign));
    // A unix socket is another flag (ux76: Python's multiprocessing Manager
    // and forkserver were sent to the loopback, which gives none).
    let unix = ["AF_UNIX", "multiprocessing", "forkserver", "unix socket"].iter().any(|sign| printed.contains(sign));
    if refused_socket && unix {
        advice.push(
            "if it was refused a unix socket: a real command makes none unless it is given `--allow-unix-sockets` \
             (Python's multiprocessing Manager and forkserver, a test's local daemon need one); \
             `--allow-network loopback` gives TCP on a private loopback, not unix sockets"
                .to_owned(),
        );
    } else if refused_socket {
        advice.push(
            "if it was refused a socket: a real command has no network, not even a socket of its own, unless it \
             is given `--allow-network loopback` (a private loopback: a test's server and client reach each \
             other, nothing outside does), or `--allow-unix-sockets` for a unix socket"
                .to_owned(),
        );
    } else if OFFLINE.iter().any(|sign| printed.contains(sign)) {
        advice.push(
            "if it needed the network: a real command has none unless it is given `--allow-network loopback|all` \
             or `--allow-port PORT`"
                .to_owned(),
        );
    }
    advice
}

/// Whether `--accept-failure` makes a run that failed so its outcome: a
/// non-zero exit status or a signal, not a budget, a command outside the
/// profile or a script that does not parse.
fn failure_may_be_accepted(source: &ExecutionError) -> bool {
    matches!(
        source,
        ExecutionError::Bash {
            failure: vsh::lower::vsh_monty::BashFailure::Exit(_) | vsh::lower::vsh_monty::BashFailure::Signal(_),
            ..
        }
    )
}

/// The error's chain, and what a failed Bash program or command printed on
/// either stream, or a failed program's output.
fn failed_output(error: &VshError) -> String {
    let mut chain = String::new();
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(now) = cause {
        let _ = writeln!(chain, "{now}");
        cause = now.source();
    }
    chain
        + &match error {
            VshError::Bash { source, .. } => match source.as_ref() {
                ExecutionError::Bash { stdout, stderr, .. } => {
                    format!("{}\n{}", String::from_utf8_lossy(stdout), String::from_utf8_lossy(stderr))
                }
                _ => String::new(),
            },
            other => program_output(other).unwrap_or_default().to_owned(),
        }
}

/// The error as a `vsh.error/1` document: its kind, message and causes,
/// and what it is about (conflicting paths, candidates, refusals with their
/// remedies, the program's output, the next command). An error that is not
/// vsh's is about the request (a file that cannot be read, a bad value).
pub(crate) fn document(error: &(dyn std::error::Error + 'static)) -> ErrorDocument {
    match unwrap(error) {
        (Some(vsh_error), remedies, hint) => {
            let mut document = ErrorDocument::new(vsh_error, remedies);
            if document.stdout.is_none() {
                document.stdout = program_output(vsh_error).map(str::to_owned);
            }
            // The next command, or else what the text advises: the remedies
            // no refusal carries (a denial's are in `denied`), then advice.
            // What the document itself knows to do next (a revert's later
            // work to revert first) stands unless the caller knows better.
            document.hint = hint.map(str::to_owned).or(document.hint.take()).or_else(|| {
                let mut advice: Vec<String> = if document.denied.is_empty() { remedies.to_vec() } else { Vec::new() };
                advice.extend(advice_for(vsh_error));
                (!advice.is_empty()).then(|| advice.join("; ").replace("\nvsh:   ", "; "))
            });
            document
        }
        (None, _, _) => ErrorDocument::other(ErrorKind::Request, error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ux78 M2, M3: a command that reached for a path out of the workspace
    /// (a monorepo's symlink, `npm install ../lib`) or for the repository
    /// above it failed with the tool's own words only. Each is named, with
    /// the `--tool` that shows it; what the command is shown, or the host
    /// does not hold, is not.
    #[test]
    fn paths_a_failed_command_could_not_reach_are_named_with_what_shows_them() {
        let dir = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(dir.path()).unwrap();
        let root = top.join("repo/ws");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(top.join("repo/libs/shared")).unwrap();
        std::fs::write(top.join("repo/libs/shared/util.py"), "x = 1\n").unwrap();
        std::fs::create_dir_all(top.join("repo/leftpad")).unwrap();
        std::fs::write(top.join("repo/leftpad/package.json"), "{}").unwrap();
        std::os::unix::fs::symlink("../libs/shared", root.join("shared")).unwrap();
        // The policy hides `secret/` from commands: nothing in it is walked.
        std::fs::create_dir(root.join("secret")).unwrap();
        std::os::unix::fs::symlink("/root/.ssh", root.join("secret/keys")).unwrap();
        // ... and `sealed/` from reading (a link's target is its content).
        std::fs::create_dir(root.join("sealed")).unwrap();
        std::os::unix::fs::symlink("/srv/prod/db-password", root.join("sealed/lnk")).unwrap();
        let readable = |path: &vsh::VPath, access: AccessKind| {
            !path.as_str().starts_with("secret")
                && (access != AccessKind::ContentRead || !path.as_str().starts_with("sealed"))
        };
        let advice =
            |printed: &str, tools: &[PathBuf]| advice_on_what_is_shown(printed, &root, tools, &readable).join("\n");
        let said = advice("cat: shared/util.py: No such file or directory", &[]);
        assert!(said.contains("it named shared, a symlink to ../libs/shared"), "{said}");
        // A link at the top, named alone (ux85 L3: a name with no `/` was never looked at).
        std::os::unix::fs::symlink("../outside.txt", root.join("out.lnk")).unwrap();
        let said = advice("cat: out.lnk: No such file or directory", &[]);
        assert!(said.contains("it named out.lnk, a symlink to ../outside.txt"), "{said}");
        assert!(!said.contains("shared"), "{said}");
        // No directory is named to grant (sec83 F2).
        assert!(!said.contains("--tool /") && said.contains("never one that holds secrets"), "{said}");
        let said = advice("npm error enoent Could not read package.json: ../leftpad/package.json", &[]);
        assert!(said.contains("../leftpad/package.json, outside the workspace"), "{said}");
        let absolute = "open '/opt/leftpad/package.json'";
        assert!(advice(absolute, &[]).contains("/opt/leftpad/package.json, outside the workspace"));
        // A path out of the workspace is judged by its name: nothing of the
        // host is looked at, so whether it exists is never told (sec83 F1).
        assert!(advice("cat: ../nothing/here.txt: No such file", &[]).contains("../nothing/here.txt, outside"));
        assert!(advice("ls: /root/.ssh/id_rsa: Permission denied", &[]).contains("/root/.ssh/id_rsa, outside"));
        // Nor is a link walked where the policy hides it, or in vsh's data.
        std::fs::create_dir_all(root.join(".vsh/data/scratch")).unwrap();
        std::os::unix::fs::symlink("/root", root.join(".vsh/data/scratch/p")).unwrap();
        for hidden in
            ["secret/keys/id_rsa: No such file", ".vsh/data/scratch/p/.ssh/x: denied", "sealed/lnk/x: No such file"]
        {
            assert_eq!(advice(hidden, &[]), "", "{hidden}");
        }
        // Shown to it: its tools, the system, its own /tmp, the workspace and its way there.
        assert_eq!(advice(absolute, &[PathBuf::from("/opt/leftpad")]), "");
        for shown in [
            "cat: /etc/shadow: Permission denied",
            "src/main.rs:1: error",
            "wrote /tmp/output.txt",
            &format!("any parent up to mount point {}", top.join("repo").display()),
        ] {
            assert_eq!(advice(shown, &[]), "", "{shown}");
        }
        // A module Python could not import, through such a link.
        let said = advice("ModuleNotFoundError: No module named 'shared'", &[]);
        assert!(said.contains("it named shared, a symlink to ../libs/shared"), "{said}");
        assert_eq!(advice("ModuleNotFoundError: No module named 'src.other'", &[]), "", "a directory of its own");
        // A repository above the workspace.
        let git = "fatal: not a git repository (or any of the parent directories): .git";
        assert_eq!(advice(git, &[]), "", "no repository above it yet");
        std::fs::create_dir(top.join("repo/.git")).unwrap();
        let said = advice(git, &[]);
        assert!(
            said.contains(&format!(
                "the workspace is a directory of the git repository {}",
                top.join("repo").display()
            )),
            "{said}"
        );
        // A log in the command's own /tmp.
        let npm = "npm error A complete log of this run can be found in: /tmp/.npm/_logs/2026-12-07T00_00_00_000Z-debug-0.log";
        let said = advice(npm, &[]);
        assert!(
            said.contains("/tmp/.npm/_logs/2026-12-07T00_00_00_000Z-debug-0.log was in the command's own /tmp"),
            "{said}"
        );
        // Its own /tmp, full.
        let full = "head: error writing 'standard output': No space left on device";
        assert!(
            advice_from_output(full).iter().any(|said| said.contains("a command's are its own, in memory, 512 MiB"))
        );
        // pip, offline.
        let pip = "ERROR: Could not find a version that satisfies the requirement six (from versions: none)\n\
                   ERROR: No matching distribution found for six";
        assert!(advice_from_output(pip).iter().any(|said| said.starts_with("if it needed the network")));
    }

    /// sec84 F3: a path 500 directories deep, printed 600 times, cost ten
    /// seconds of walking. Each name is walked once, and the walk stops
    /// after its steps.
    #[test]
    fn the_walk_of_a_failures_paths_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let deep: PathBuf = std::iter::repeat_n("d", 10).collect();
        std::fs::create_dir_all(root.join(&deep)).unwrap();
        std::os::unix::fs::symlink("/srv/elsewhere", root.join(&deep).join("lnk")).unwrap();
        let inside = deep.join("lnk/x");
        let everything = |_: &vsh::VPath, _: AccessKind| true;
        let mut few = 5;
        assert!(link_out_of(&root, &inside, &everything, &mut few).is_none());
        let mut enough = 20;
        assert!(link_out_of(&root, &inside, &everything, &mut enough).is_some());
        assert_eq!(enough, 20 - 11, "one step a directory and one for the link");
    }

    /// ux54: a commit that found the disk full wrote nothing, failed its
    /// work for good and said nothing of what to do.
    #[test]
    fn a_full_disk_is_known_in_any_error_that_carries_it() {
        let full = |errno: i32| {
            VshError::Workspace(vsh::lower::vsh_host::HostError::Io {
                op: "write",
                path: vsh::VPath::root(),
                source: std::io::Error::from_raw_os_error(errno),
            })
        };
        assert!(disk_full(&full(28)));
        assert!(!disk_full(&full(13)));
        assert!(disk_full(&VshError::StoreSpace { needed: 2, available: 1, reserve: 1 }));
    }

    #[test]
    fn a_failed_runs_refusals_are_printed_up_to_the_bound_then_counted() {
        let denial = |index: usize| vsh::DeniedAccess {
            path: vsh::VPath::parse(&format!(".git/x{index}")).expect("a valid path"),
            access: vsh::AccessKind::Create,
            rule: ".git/**".to_owned(),
            label: vsh::RuleLabel::Git,
            rule_access: vsh::lower::vsh_policy::AccessSet::MUTATIONS,
        };
        let many: Vec<_> = (0..300).map(denial).collect();
        let mut text = String::new();
        write_denials(&mut text, &many, &[]);
        assert_eq!(text.lines().filter(|line| line.starts_with("vsh: denied: ")).count(), vsh::MAX_LISTED_DENIALS);
        assert!(
            text.ends_with(&format!("... and {} more refused accesses, not listed\n", 300 - vsh::MAX_LISTED_DENIALS))
        );
        let mut few = String::new();
        write_denials(&mut few, &many[..3], &[]);
        assert_eq!(few.lines().count(), 3, "{few}");
    }
}
