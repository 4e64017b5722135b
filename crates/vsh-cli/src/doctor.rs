//! `vsh doctor`: what this machine and workspace give vsh, each finding
//! with what to do when something is missing.
//!
//! Every check is real: the kernel is probed, the worker's sandbox is
//! reported axis by axis against its floors, a confined worker is started
//! and runs a program (in a scratch workspace, never the operator's), and
//! the workspace's data directory, policy, key and recovery state are opened
//! as any command would open them.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use vsh::lower::vsh_sandbox;

use crate::documents::{CheckDocument, CheckStatus as Status, DoctorDocument};
use crate::{EXIT_ERROR, EXIT_OK, render, runtime_config};

impl Status {
    fn name(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::Fail => "fail",
            Self::Info => "info",
        }
    }

    fn style(self) -> anstyle::Style {
        match self {
            Self::Ok => anstyle::AnsiColor::Green.on_default().bold(),
            Self::Warn | Self::Info => anstyle::AnsiColor::Yellow.on_default().bold(),
            Self::Fail => anstyle::AnsiColor::Red.on_default().bold(),
        }
    }
}

/// One finding.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    name: &'static str,
    status: Status,
    detail: String,
    /// What to do, when the status is not Ok.
    remedy: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Self {
        Self { name, status: Status::Ok, detail: detail.into(), remedy: None }
    }

    fn not_ok(name: &'static str, status: Status, detail: impl Into<String>, remedy: impl Into<String>) -> Self {
        Self { name, status, detail: detail.into(), remedy: Some(remedy.into()) }
    }
}

/// The kernel's Landlock and seccomp support.
fn kernel() -> Vec<Check> {
    let support = vsh_sandbox::probe();
    let reviewed = vsh_sandbox::NEWEST_REVIEWED_LANDLOCK_ABI;
    let landlock = match support.landlock_abi {
        Some(abi) if abi >= reviewed => Check::ok("landlock", format!("ABI {abi} (vsh uses up to {reviewed})")),
        Some(abi) => Check::not_ok(
            "landlock",
            Status::Warn,
            format!("ABI {abi}, older than the ABI {reviewed} vsh can use: some rights are not governed"),
            "run a newer kernel (6.12 or later has ABI 6; see the sandbox report below for what is missing)",
        ),
        None => Check::not_ok(
            "landlock",
            Status::Fail,
            "not available (not built in, or not enabled at boot)",
            "boot a kernel with CONFIG_SECURITY_LANDLOCK=y and landlock in the lsm= list \
             (for example lsm=landlock,lockdown,yama,integrity,apparmor)",
        ),
    };
    let seccomp = if support.seccomp {
        Check::ok("seccomp", "filters available")
    } else {
        Check::not_ok(
            "seccomp",
            Status::Fail,
            "seccomp filters are not available",
            "boot a kernel with CONFIG_SECCOMP_FILTER=y; in a container, let the container runtime allow \
             seccomp(2) and prctl(PR_SET_NO_NEW_PRIVS)",
        )
    };
    vec![landlock, seccomp]
}

/// The worker's sandbox, axis by axis against each axis's floor.
fn sandbox(worker: &vsh::WorkerConfig) -> Check {
    let report = worker.enforcement();
    let levels: Vec<String> =
        report.axes().iter().map(|axis| format!("{} {}", axis.axis().name(), axis.level().name())).collect();
    match report.first_below_floor() {
        None => Check::ok("sandbox", format!("{} (every axis meets its floor)", levels.join(", "))),
        Some(axis) => Check::not_ok(
            "sandbox",
            Status::Fail,
            format!(
                "{} is {}, below its floor {}: {}; the confined worker refuses to start (fails closed)",
                axis.axis().name(),
                axis.level().name(),
                axis.floor().name(),
                axis.reason()
            ),
            "fix the kernel findings above; vsh never runs a program with weaker confinement",
        ),
    }
}

/// A confined worker started and ran a program, in a scratch workspace.
fn worker() -> Check {
    let started = Instant::now();
    let outcome = (|| -> Result<(String, vsh::Receipt), Box<dyn std::error::Error>> {
        let scratch = tempfile::tempdir()?;
        let config = runtime_config(scratch.path())?;
        let what = format!("{}", std::env::current_exe()?.display());
        let runtime = vsh::Runtime::open(config)?;
        let receipt = runtime.run(&vsh::RunRequest::new("print('ok')\n6 * 7"))?;
        Ok((what, receipt))
    })();
    match outcome {
        Ok((exe, receipt)) if receipt.output.monty_value().is_some_and(|value| value.py_repr() == "42") => {
            let elapsed = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            Check::ok(
                "worker",
                format!("{exe}: started confined and ran a program in {}", render::human_duration(elapsed)),
            )
        }
        Ok((exe, receipt)) => Check::not_ok(
            "worker",
            Status::Fail,
            format!(
                "{exe} ran a program but answered {:?}",
                receipt.output.monty_value().map(vsh::MontyObject::py_repr)
            ),
            "reinstall vsh: the worker is this binary, and it must be the same build",
        ),
        Err(error) => Check::not_ok(
            "worker",
            Status::Fail,
            format!("the confined worker did not run a program: {}", render::error_chain(error.as_ref())),
            "see the kernel and sandbox findings; when run as root, the worker runs as nobody (65534), who must be \
             able to execute this binary (its directory must be searchable by others)",
        ),
    }
}

/// Who may write the workspace's data, and the space its disk has left:
/// another user who may write `.vsh` can replace its policy and records,
/// and a full disk stops every run and commit.
fn data_directory_state(path: &Path) -> Vec<Check> {
    use std::os::unix::fs::MetadataExt as _;
    let mut checks = Vec::new();
    let open_to_others: Vec<String> = [".vsh", ".vsh/data"]
        .iter()
        .filter(|dir| std::fs::symlink_metadata(path.join(dir)).is_ok_and(|meta| meta.mode() & 0o022 != 0))
        .map(|dir| (*dir).to_owned())
        .collect();
    if !open_to_others.is_empty() {
        checks.push(Check::not_ok(
            "permissions",
            Status::Fail,
            format!(
                "{} may be written by its group or by others, who can then replace the policy and the records",
                open_to_others.join(" and ")
            ),
            format!("chmod go-w {} (from {})", open_to_others.join(" "), path.display()),
        ));
    }
    if let Ok(space) = vsh::lower::vsh_sandbox::fs_space(&path.join(".vsh")) {
        let reserve =
            vsh::lower::vsh_types::space::reserve(space.size, vsh::lower::vsh_types::space::MAX_RESERVE_BYTES);
        let low = space.available <= reserve.saturating_mul(4);
        if low {
            let status = if space.available <= reserve { Status::Fail } else { Status::Warn };
            checks.push(Check::not_ok(
                "space",
                status,
                format!(
                    "the disk holding .vsh has {} MiB available ({} MiB is the reserve runs and commits keep)",
                    space.available >> 20,
                    reserve >> 20
                ),
                "free space on that disk (vsh gc --scratch empties the build caches kept between runs)",
            ));
        }
    }
    checks
}

/// The workspace: its data directory, policy, recovery and pending work.
fn workspace(path: &Path) -> Vec<Check> {
    if !path.join(".vsh").is_dir() {
        // The doctor never makes a workspace of a directory that is not one,
        // and never suggests one where vsh would refuse to make it.
        let remedy = match crate::refuse_as_a_new_workspace(path) {
            Ok(()) => {
                "vsh init there (or give --workspace) to check its data directory, policy and recovery".to_owned()
            }
            Err(refused) => refused,
        };
        return vec![Check::not_ok(
            "workspace",
            Status::Info,
            format!("{} is not a vsh workspace yet (no .vsh)", path.display()),
            remedy,
        )];
    }
    // Another user's data: every other command refuses it.
    if let Err(refused) = crate::args::refuse_anothers_workspace(path) {
        return vec![Check::not_ok(
            "workspace",
            Status::Fail,
            refused,
            "vsh refuses it in every command: remove that .vsh (or have its owner do it), then vsh init",
        )];
    }
    let config = match runtime_config(path) {
        Ok(config) => config,
        Err(error) => {
            return vec![Check::not_ok(
                "workspace",
                Status::Fail,
                error.to_string(),
                "run vsh from an installed binary",
            )];
        }
    };
    let runtime = match vsh::Runtime::open(config) {
        Ok(runtime) => runtime,
        Err(error) => return vec![unopened(path, &error)],
    };
    let policy = runtime.policy();
    let mut checks = vec![Check::ok(
        "workspace",
        format!(
            "{}: data directory open, policy profile {} ({})",
            path.display(),
            policy.profile().name(),
            policy.digest().short()
        ),
    )];
    checks.extend(data_directory_state(path));
    let recovery = runtime.startup_recovery();
    checks.push(if runtime.recovery_deferred() {
        Check::not_ok(
            "recovery",
            Status::Warn,
            "another vsh process holds the commit lock, so recovery was not checked",
            "run vsh doctor again when it is done",
        )
    } else if recovery.needs_attention() {
        // The workspace is not as any work left it until an operator
        // settles it: a failure, not a warning (ux68 M4).
        Check::not_ok(
            "recovery",
            Status::Fail,
            format!("interrupted commits need an operator: {}", recovery_summary(recovery)),
            "run vsh recover to see which paths, then vsh recover --restore TX to put one back, or vsh recover \
             --keep TX to keep the workspace as it is",
        )
    } else if recovery.is_empty() {
        Check::ok("recovery", "no interrupted commit")
    } else {
        Check::ok("recovery", format!("finished interrupted commits just now: {}", recovery_summary(recovery)))
    });
    checks.push(match runtime.check_scratch() {
        Ok(()) => Check::ok("scratch", "the scratch directories' state is usable"),
        Err(error) => Check::not_ok(
            "scratch",
            Status::Fail,
            render::error_chain(&error),
            "every vsh exec fails until it is fixed: remove what the error names from .vsh/data (vsh makes it \
             again, and the next build starts from nothing)",
        ),
    });
    match runtime.pending() {
        Ok(pending) => checks.push(Check::ok(
            "pending",
            match pending.len() {
                1 => "1 transaction awaits a decision or a commit".to_owned(),
                count => format!("{count} transactions await a decision or a commit"),
            },
        )),
        Err(error) => checks.push(Check::not_ok(
            "pending",
            Status::Fail,
            render::error_chain(&error),
            "the transaction store cannot be read; keep a copy of .vsh/data, then vsh recover --salvage-log",
        )),
    }
    checks.push(stored_work(&runtime));
    checks.push(loss_history(&runtime));
    checks.push(seen_contents(&runtime));
    checks
}

/// Whether the record of what vsh last saw of files verifies: one that does
/// not makes every run that replaces a file unread wait for a reviewer, and
/// the next run that reads a file starts it afresh, forgetting what it held
/// (sec75 F7: doctor said all was well).
fn seen_contents(runtime: &vsh::Runtime) -> Check {
    let (path, entries) = runtime.seen_contents_files();
    match entries {
        Ok(entries) => Check::ok("seen", format!("vsh's record of what it saw of files holds {entries} entries")),
        Err(error) => Check::not_ok(
            "seen",
            Status::Warn,
            render::error_chain(&error),
            format!(
                "every run that replaces a file unread waits for a reviewer until a run that reads a file starts \
                 it afresh, forgetting what it held: find out who changed the data directory, then remove {}",
                render::shown(&path.to_string_lossy(), false)
            ),
        ),
    }
}

/// Whether the workspace's loss history verifies: one that does not stops
/// every run that modifies a file (sec61 F6: doctor said all was well).
fn loss_history(runtime: &vsh::Runtime) -> Check {
    let (path, files) = runtime.loss_history_files();
    match files {
        Ok(0) => Check::ok("history", "no file has lost content to auto-approved commits since its review"),
        Ok(files) => Check::ok(
            "history",
            format!(
                "{} changed by auto-approved commits since a reviewer last saw {}: what those commits removed \
                 counts toward the removal a later run may make without review (nothing to do; a reviewed change \
                 of a file starts its count afresh)",
                render::counted(files as u64, "file"),
                if files == 1 { "it" } else { "them" }
            ),
        ),
        Err(error) => Check::not_ok(
            "history",
            Status::Fail,
            render::error_chain(&error),
            format!(
                "every run that modifies a file is refused until it is gone: find out who changed the data \
                 directory, then remove {} (each file's content then counts as reviewed as it stands, and the \
                 losses before are forgotten)",
                render::shown(&path.to_string_lossy(), false)
            ),
        ),
    }
}

/// Whether the work waiting for a decision or a commit can still be
/// committed as the store holds it: every artifact loads and binds, every
/// content a commit reads is there intact.
fn stored_work(runtime: &vsh::Runtime) -> Check {
    let faults = match runtime.stored_work_faults() {
        Ok(faults) => faults,
        // The pending check above reports an unreadable store.
        Err(error) => {
            return Check::not_ok("stored", Status::Fail, render::error_chain(&error), "see the pending check");
        }
    };
    let Some((first, error)) = faults.first() else {
        return Check::ok("stored", "every waiting transaction's stored work is there, intact");
    };
    let detail = if faults.len() == 1 {
        format!("{} cannot be committed: {}", first.short(), render::error_chain(error))
    } else {
        let others: Vec<String> = faults[1..].iter().take(8).map(|(id, _)| id.short()).collect();
        format!(
            "{} waiting transactions cannot be committed; {} (the first): {}; also {}{}",
            faults.len(),
            first.short(),
            render::error_chain(error),
            others.join(", "),
            if faults.len() > 9 { ", ..." } else { "" }
        )
    };
    Check::not_ok(
        "stored",
        Status::Fail,
        detail,
        if runtime.stored_program(*first).is_ok_and(|program| program.is_some()) {
            format!(
                "vsh cannot repair what it stored: reject the work (vsh reject {0}) and make it again (vsh rerun {0} \
                 runs its program again on the workspace as it is now)",
                first.short()
            )
        } else {
            format!(
                "vsh cannot repair what it stored, its program included: reject the work (vsh reject {0}) and make \
                 it again from its source",
                first.short()
            )
        },
    )
}

/// Why the workspace at `path` did not open, and what to do about it:
/// what the error itself advises (a damaged log: salvage it), else for a
/// directory holding vsh's own key, removing the `.vsh` made by mistake,
/// else the data directory's ownership.
fn unopened(path: &Path, error: &vsh::VshError) -> Check {
    let advised = crate::failure::advice_for(error);
    let remedy = if let Some(advice) = advised.first() {
        advice.clone()
    } else if error.category() == vsh::ErrorCategory::Policy {
        // The error names what happened to the recorded policy; the way out
        // is to record one again (a data directory's ownership is not it).
        "record the workspace's policy again: vsh init --force --policy FILE with the policy you mean (or \
         --profile P; vsh policy show prints the default one to start from)"
            .to_owned()
    } else if matches!(error, vsh::VshError::AuthorityKeyInWorkspace(_)) {
        // A home directory (or another above vsh's key) made a workspace by
        // mistake: every project below finds it.
        format!(
            "a directory holding vsh's own key is no project: remove {} if vsh made it by mistake, and run vsh in \
             a project's directory",
            path.join(".vsh").display()
        )
    } else {
        "give --workspace a directory you own; the data directory (.vsh/data) must be writable by you".to_owned()
    };
    Check::not_ok("workspace", Status::Fail, format!("{}: {}", path.display(), render::error_chain(error)), remedy)
}

fn recovery_summary(report: &vsh::RecoveryReport) -> String {
    let mut summary = render::recovery_text(report).lines().next().unwrap_or_default().to_owned();
    // Which work, so the operator need not run `vsh recover` to learn it
    // (ux66 F4: it then said all zeros, the doctor having done it).
    let named = |label: &str, ids: &[vsh::TransactionId]| {
        (!ids.is_empty()).then(|| {
            let shown: Vec<String> = ids.iter().take(8).map(vsh::TransactionId::short).collect();
            let more = if ids.len() > 8 { format!(" and {} more", ids.len() - 8) } else { String::new() };
            format!("{label} {}{more}", shown.join(", "))
        })
    };
    let parts: Vec<String> = [
        named("rolled forward (committed):", &report.rolled_forward),
        named("rolled back (failed, its changes undone; vsh rerun TX makes the work again):", &report.rolled_back),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !parts.is_empty() {
        summary = format!("{summary}; {}", parts.join("; "));
    }
    summary
}

/// The key that signs approvals and commit records.
fn authority_key() -> Check {
    let location = match vsh::lower::vsh_store::AuthorityKeyFile::default_location() {
        Ok(location) => location,
        Err(error) => {
            return Check::not_ok(
                "key",
                Status::Fail,
                render::error_chain(&error),
                "set VSH_AUTHORITY_KEY to a file outside the workspace, or HOME or XDG_CONFIG_HOME",
            );
        }
    };
    let path = location.path();
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = meta.permissions().mode() & 0o777;
            // Neither its group nor others may read or write it: the low six mode bits are clear.
            let private = mode.trailing_zeros() >= 6;
            if private {
                Check::ok("key", format!("{} (mode {mode:o})", path.display()))
            } else {
                Check::not_ok(
                    "key",
                    Status::Warn,
                    format!("{} is readable by others (mode {mode:o})", path.display()),
                    format!("chmod 600 {}", path.display()),
                )
            }
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            Check::ok("key", format!("{} (created on first use)", path.display()))
        }
        Err(error) => Check::not_ok(
            "key",
            Status::Fail,
            format!("{}: {error}", path.display()),
            "make the key's directory readable by you, or set VSH_AUTHORITY_KEY",
        ),
    }
}

/// What real commands (`vsh exec`) need: FUSE, and the privilege to mount
/// in a private namespace (root, today). Reported, not required: without
/// them `vsh exec` fails closed, naming what is missing.
fn commands() -> Vec<Check> {
    use vsh::lower::vsh_sandbox::candidate_support;
    let fuse = match candidate_support() {
        Ok(()) => Check {
            name: "fuse",
            status: Status::Info,
            detail: "/dev/fuse opens and vsh runs as root: vsh exec runs commands in a private FUSE mount".into(),
            remedy: None,
        },
        Err(missing) => {
            Check::not_ok("fuse", Status::Info, format!("{missing}: vsh exec fails closed"), missing.remedy())
        }
    };
    let userns = match std::fs::read_to_string("/proc/sys/user/max_user_namespaces") {
        Ok(text) if text.trim().parse::<u64>().is_ok_and(|count| count > 0) => Check {
            name: "userns",
            status: Status::Info,
            detail: format!(
                "user namespaces allowed ({}): each command's scratch directories are idmapped to its own uid",
                text.trim()
            ),
            remedy: None,
        },
        _ => Check::not_ok(
            "userns",
            Status::Info,
            "user namespaces are not allowed: commands that keep scratch directories all run as uid 65533 \
             and share its process limit",
            "sysctl user.max_user_namespaces=15000",
        ),
    };
    let mut checks = vec![fuse, userns];
    if vsh::lower::vsh_sandbox::effective_uid() == 0 {
        checks.push(command_uids());
    }
    checks
}

/// Whether a command can lease a uid of its own (root hosts only).
fn command_uids() -> Check {
    use vsh::lower::vsh_sandbox::{COMMAND_UIDS, CommandUser};
    match CommandUser::lease(vsh::lower::vsh_monty::COMMAND_USER) {
        Ok(_) => Check {
            name: "uids",
            status: Status::Info,
            detail: format!(
                "each command runs as a uid of its own, leased from {}..{} in /run/vsh/command-uids",
                COMMAND_UIDS.start, COMMAND_UIDS.end
            ),
            remedy: None,
        },
        Err(error) => Check::not_ok(
            "uids",
            Status::Info,
            format!(
                "no command uid can be leased ({error}: {}): vsh exec fails closed",
                std::error::Error::source(&error).map(ToString::to_string).unwrap_or_default()
            ),
            "make /run/vsh root's own directory, mode 0700 (or remove it: vsh makes it)",
        ),
    }
}

/// Every check, in order.
pub(crate) fn checks(workspace_path: &Path) -> Result<Vec<Check>, Box<dyn std::error::Error>> {
    let worker_config = vsh::WorkerConfig::new(std::env::current_exe()?);
    let mut checks = kernel();
    checks.push(sandbox(&worker_config));
    checks.push(worker());
    checks.push(authority_key());
    checks.extend(workspace(workspace_path));
    checks.extend(commands());
    Ok(checks)
}

/// `vsh doctor`: exit 0 when nothing failed, 1 otherwise.
pub(crate) fn doctor(workspace_path: &Path, json: bool) -> Result<u8, Box<dyn std::error::Error>> {
    let checks = checks(workspace_path)?;
    let failed = checks.iter().any(|check| check.status == Status::Fail);
    if json {
        println!("{}", serde_json::to_string_pretty(&doctor_json(&checks, failed))?);
    } else {
        anstream::print!("{}", doctor_text(&checks));
    }
    Ok(if failed { EXIT_ERROR } else { EXIT_OK })
}

fn doctor_text(checks: &[Check]) -> String {
    let mut out = String::new();
    for check in checks {
        let status = check.status.style();
        let _ = writeln!(out, "{status}{:<5}{status:#} {:<10} {}", check.status.name(), check.name, check.detail);
        if let Some(remedy) = &check.remedy {
            let _ = writeln!(out, "      {:<10} to do: {remedy}", "");
        }
    }
    out
}

fn doctor_json(checks: &[Check], failed: bool) -> DoctorDocument {
    let checks = checks
        .iter()
        .map(|check| CheckDocument {
            name: check.name.to_owned(),
            status: check.status,
            detail: check.detail.clone(),
            remedy: check.remedy.clone(),
        })
        .collect();
    DoctorDocument::new(!failed, checks)
}
