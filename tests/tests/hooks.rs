//! Commit hooks and cancellation: every decision in both scopes, bypass attempts,
//! handler failure, content evidence, and cancellation racing a commit.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::sync::Mutex;

use vsh::{
    CommitHook, CommitPreparation, ExecutionCancellation, HookConfig, HookDecision, HookScope, HookedRuntime,
    RequestEvent, RunMode, RunRequest, Runtime, TransactionState, VshError,
};
use vsh_integration_tests::{config, tree, workspace};

const CREATE: &str = "from pathlib import Path\nPath('/workspace/new.txt').write_text('new\\n')";
const DELETE: &str = "from pathlib import Path\nPath('/workspace/old.txt').unlink()";
const SECRET: &str = "from pathlib import Path\ntry:\n    Path('/workspace/.env').read_text()\nexcept PermissionError:\n    pass\nPath('/workspace/new.txt').write_text('x')";

fn hooked(dir: &tempfile::TempDir, scope: HookScope) -> Runtime {
    let hook = HookConfig::new("reviewer").with_scope(scope).with_max_content_bytes(1 << 20);
    Runtime::open(config(dir.path()).with_commit_hook(hook)).unwrap()
}

fn files() -> tempfile::TempDir {
    workspace(&[("old.txt", "old\n"), (".env", "S=1\n")])
}

/// A handler that answers one fixed decision and remembers what it saw.
struct Fixed {
    decision: Result<HookDecision, String>,
    seen: Mutex<Vec<RequestEvent>>,
}

impl Fixed {
    fn new(decision: HookDecision) -> Self {
        Self { decision: Ok(decision), seen: Mutex::new(Vec::new()) }
    }
    fn failing() -> Self {
        Self { decision: Err("reviewer unavailable".into()), seen: Mutex::new(Vec::new()) }
    }
    fn calls(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

impl CommitHook for Fixed {
    fn decide(&self, event: &RequestEvent) -> Result<HookDecision, Box<dyn std::error::Error + Send + Sync>> {
        self.seen.lock().unwrap().push(event.clone());
        self.decision.clone().map_err(Into::into)
    }
}

fn state(runtime: &Runtime, receipt: &vsh::Receipt) -> TransactionState {
    runtime.transaction(receipt.transaction).unwrap().unwrap().state
}

#[test]
fn review_required_scope_leaves_auto_approved_work_to_policy() {
    let dir = files();
    let hooked = HookedRuntime::new(
        hooked(&dir, HookScope::ReviewRequired),
        Fixed::new(HookDecision::Reject { reason: "no".into() }),
    );
    let (receipt, resolution) = hooked.run(&RunRequest::new(CREATE).with_mode(RunMode::Auto), 1).unwrap();
    assert_eq!(receipt.state, TransactionState::Committed);
    assert!(resolution.is_none());
    assert_eq!(hooked.hook().calls(), 0);
    assert!(dir.path().join("new.txt").exists());
}

#[test]
fn every_decision_on_pending_work() {
    for (decision, expected, deleted) in [
        (HookDecision::FollowPolicy, TransactionState::PendingApproval, false),
        (HookDecision::Approve { reason: "fine".into() }, TransactionState::Committed, true),
        (HookDecision::Review { feedback: "ask a human".into() }, TransactionState::PendingApproval, false),
        (HookDecision::Reject { reason: "no".into() }, TransactionState::Rejected, false),
    ] {
        for scope in [HookScope::ReviewRequired, HookScope::AllRequests] {
            let dir = files();
            let handler = Fixed::new(decision.clone());
            let hooked = HookedRuntime::new(hooked(&dir, scope), handler);
            let (receipt, resolution) = hooked.run(&RunRequest::new(DELETE).with_mode(RunMode::Auto), 1_000).unwrap();
            let resolution = resolution.expect("pending work reaches the hook");
            assert_eq!(resolution.state, expected, "{decision:?} {scope:?}");
            assert_eq!(resolution.hook.decision, decision);
            assert_eq!(hooked.hook().calls(), 1);
            assert_eq!(hooked.hook().seen.lock().unwrap()[0].transaction(), receipt.transaction);
            assert_eq!(state(hooked.runtime(), &receipt), expected);
            assert_eq!(!dir.path().join("old.txt").exists(), deleted, "{decision:?} {scope:?}");
        }
    }
}

#[test]
fn every_decision_on_auto_approved_work_in_all_requests_scope() {
    for (decision, expected, created) in [
        (HookDecision::FollowPolicy, TransactionState::Committed, true),
        (HookDecision::Approve { reason: "fine".into() }, TransactionState::Committed, true),
        (HookDecision::Review { feedback: "look".into() }, TransactionState::PendingApproval, false),
        (HookDecision::Reject { reason: "no".into() }, TransactionState::Rejected, false),
    ] {
        let dir = files();
        let hooked = HookedRuntime::new(hooked(&dir, HookScope::AllRequests), Fixed::new(decision.clone()));
        let (receipt, resolution) = hooked.run(&RunRequest::new(CREATE).with_mode(RunMode::Auto), 1_000).unwrap();
        let resolution = resolution.expect("AllRequests reviews auto-approved work");
        assert_eq!(resolution.state, expected, "{decision:?}");
        assert_eq!(state(hooked.runtime(), &receipt), expected);
        assert_eq!(dir.path().join("new.txt").exists(), created, "{decision:?}");
        // Work sent to review survives as durable pending work.
        if expected == TransactionState::PendingApproval {
            assert_eq!(hooked.runtime().pending().unwrap().len(), 1);
        }
    }
}

#[test]
fn hard_denials_never_reach_a_hook() {
    let dir = files();
    let handler = Fixed::new(HookDecision::Approve { reason: "approve everything".into() });
    let hooked = HookedRuntime::new(hooked(&dir, HookScope::AllRequests), handler);
    let (receipt, resolution) = hooked.run(&RunRequest::new(SECRET).with_mode(RunMode::Auto), 1).unwrap();
    assert_eq!(receipt.state, TransactionState::Denied);
    assert!(resolution.is_none());
    assert_eq!(hooked.hook().calls(), 0);
    assert!(matches!(hooked.runtime().prepare_commit(receipt.transaction), Err(VshError::NotCommittable { .. })));
    assert!(!dir.path().join("new.txt").exists());
}

#[test]
fn direct_commit_cannot_bypass_an_applicable_hook() {
    let dir = files();
    let before = tree(dir.path());
    let runtime = hooked(&dir, HookScope::AllRequests);
    // Auto mode, a plain commit, and approve-then-commit all stop at the hook.
    assert!(matches!(runtime.run(&RunRequest::new(CREATE).with_mode(RunMode::Auto)), Err(VshError::HookRequired(_))));
    let preview = runtime.preview(&RunRequest::new(CREATE)).unwrap();
    let Err(VshError::HookRequired(event)) = runtime.commit(preview.transaction, 1) else {
        panic!("commit bypassed the hook")
    };
    assert_eq!(event.transaction(), preview.transaction);
    let pending = runtime.preview(&RunRequest::new(DELETE)).unwrap();
    assert!(matches!(runtime.commit(pending.transaction, 1), Err(VshError::HookRequired(_))));
    assert_eq!(tree(dir.path()), before);

    // A forged or stale event is refused.
    let CommitPreparation::Review(real) = runtime.prepare_commit(preview.transaction).unwrap() else { panic!() };
    let mut forged = (*real).clone();
    forged.diff = vsh::CanonicalDiff::default();
    assert!(matches!(
        runtime.resolve_commit(&forged, HookDecision::Approve { reason: String::new() }, 2),
        Err(VshError::HookEventMismatch(_))
    ));
    let long = "x".repeat(20 << 10);
    assert!(matches!(
        runtime.resolve_commit(&real, HookDecision::Approve { reason: long }, 2),
        Err(VshError::HookReasonLimit { .. })
    ));
    assert_eq!(tree(dir.path()), before);
    // The genuine event commits.
    let resolution = runtime.resolve_commit(&real, HookDecision::FollowPolicy, 3).unwrap();
    assert_eq!(resolution.state, TransactionState::Committed);
    assert!(dir.path().join("new.txt").exists());
}

#[test]
fn a_failed_handler_sends_auto_approved_work_to_review_and_commits_nothing() {
    let dir = files();
    let hooked = HookedRuntime::new(hooked(&dir, HookScope::AllRequests), Fixed::failing());
    let result = hooked.run(&RunRequest::new(CREATE).with_mode(RunMode::Auto), 1);
    assert!(matches!(result, Err(VshError::HookHandler(_))), "{result:?}");
    let pending = hooked.runtime().pending().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].state, TransactionState::PendingApproval);
    assert!(!dir.path().join("new.txt").exists());
}

#[test]
fn events_carry_hash_verified_content_evidence() {
    let dir = files();
    let runtime = hooked(&dir, HookScope::ReviewRequired);
    let program = "from pathlib import Path\nPath('/workspace/old.txt').write_text('')\nPath('/workspace/other.txt').write_text('o')";
    let preview = runtime.preview(&RunRequest::new(program)).unwrap();
    assert_eq!(preview.state, TransactionState::PendingApproval, "{:?}", preview.decision);
    let CommitPreparation::Review(event) = runtime.prepare_commit(preview.transaction).unwrap() else { panic!() };
    assert!(event.evidence_complete && event.content_complete);
    let before = event.contents.iter().find(|c| c.path.as_str() == "old.txt" && !c.after).unwrap();
    assert_eq!(before.bytes, b"old\n");
    assert_eq!(vsh::BlobId::of(&before.bytes), before.blob);
    assert!(event.contents.iter().any(|c| c.path.as_str() == "other.txt" && c.after && c.bytes == b"o"));
    // If the file changes on disk, its before-content is no longer evidence.
    std::fs::write(dir.path().join("old.txt"), "edited\n").unwrap();
    let Err(VshError::HookRequired(again)) = runtime.commit(preview.transaction, 1) else { panic!() };
    assert!(!again.content_complete);
    assert!(again.contents.iter().all(|c| c.after || c.path.as_str() != "old.txt"));
}

#[test]
fn a_file_deleted_unread_is_shown_to_reviewers_while_its_stamp_holds() {
    let dir = files();
    // Settled: the file's last change lies past the point where a delete
    // that never read it records its stamp instead of reading it.
    std::thread::sleep(std::time::Duration::from_millis(150));
    let runtime = hooked(&dir, HookScope::ReviewRequired);
    let preview = runtime.preview(&RunRequest::new(DELETE).with_detail(vsh::ReceiptDetail::Full)).unwrap();
    assert_eq!(preview.state, TransactionState::PendingApproval, "{:?}", preview.decision);
    let before = preview.changes[0].before.unwrap();
    assert!(before.content.is_none() && before.stamp.is_some(), "{before:?}");
    // The hook sees the bytes, named by their digest; the review shows them.
    let CommitPreparation::Review(event) = runtime.prepare_commit(preview.transaction).unwrap() else { panic!() };
    assert!(event.content_complete);
    let old = event.contents.iter().find(|c| c.path.as_str() == "old.txt" && !c.after).unwrap();
    assert_eq!((old.bytes.as_slice(), old.blob), (&b"old\n"[..], vsh::BlobId::of(b"old\n")));
    let review = runtime.review(preview.transaction).unwrap();
    assert!(review[0].hunks.as_ref().is_ok_and(|hunks| hunks.contains("-old")), "{review:?}");
    // The same bytes written again are another version: no longer shown, and
    // the commit is stale rather than deleting what nobody reviewed.
    std::thread::sleep(std::time::Duration::from_millis(150));
    std::fs::write(dir.path().join("old.txt"), "old\n").unwrap();
    let review = runtime.review(preview.transaction).unwrap();
    assert_eq!(review[0].hunks, Err(vsh::NoHunks::Unavailable));
    let Err(VshError::HookRequired(again)) = runtime.commit(preview.transaction, 1) else { panic!() };
    assert!(!again.content_complete);
    let result = runtime.resolve_commit(&again, HookDecision::Approve { reason: "looks fine".into() }, 2);
    assert!(matches!(result, Err(VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. }))), "{result:?}");
    assert_eq!(std::fs::read(dir.path().join("old.txt")).unwrap(), b"old\n");
}

#[test]
fn a_cancellation_during_execution_stores_nothing() {
    let dir = workspace(&[("old.txt", "old\n")]);
    let runtime = Runtime::open(config(dir.path())).unwrap();
    // A deletion waits for approval, so a run that got past the checks after
    // execution would store a pending record; the loop never ends by itself
    // within its minute, so the cancel must stop it while it computes.
    let program = "from pathlib import Path\nPath('/workspace/old.txt').unlink()\n\
                   while True:\n    pass\n";
    let probe =
        runtime.preview(&RunRequest::new("from pathlib import Path\nPath('/workspace/old.txt').unlink()")).unwrap();
    assert_eq!(probe.state, TransactionState::PendingApproval);
    runtime.reject(probe.transaction, 1).unwrap();
    let cancel = ExecutionCancellation::new();
    let result = std::thread::scope(|scope| {
        // Room for a slow machine: the cancel, not a limit, must end the run.
        let budget = vsh::ExecutionBudget {
            max_duration: std::time::Duration::from_mins(1),
            max_request_duration: std::time::Duration::from_mins(2),
            ..Default::default()
        };
        let run = scope.spawn(|| runtime.run_cancellable(&RunRequest::new(program).with_budget(budget), &cancel));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(cancel.cancel(), "the run is still executing, so cancel wins");
        let started = std::time::Instant::now();
        let result = run.join().unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "the cancel, not the budget, ended it");
        result
    });
    assert!(matches!(result, Err(VshError::Cancelled)), "{result:?}");
    assert!(runtime.pending().unwrap().is_empty(), "nothing was stored");
    assert!(dir.path().join("old.txt").exists());
}

#[test]
fn cancellation_and_commit_never_both_win() {
    let dir = workspace(&[("a.txt", "0")]);
    let runtime = Runtime::open(config(dir.path())).unwrap();
    // Both threads start together; the canceller waits a different while each
    // trial (0 to 400 µs, cycling), so both winners occur.
    let (mut cancel_won, mut commit_won) = (0, 0);
    for trial in 0..400_u32 {
        if cancel_won >= 3 && commit_won >= 3 {
            break;
        }
        let program = format!("from pathlib import Path\nPath('/workspace/t{trial}.txt').write_text('{trial}')");
        let preview = runtime.preview(&RunRequest::new(&program)).unwrap();
        let cancel = ExecutionCancellation::new();
        let delay = std::time::Duration::from_micros(u64::from(trial % 41) * 10);
        let start = std::sync::Barrier::new(2);
        let (cancelled, committed) = std::thread::scope(|scope| {
            let canceller = scope.spawn(|| {
                start.wait();
                let waiting = std::time::Instant::now();
                while waiting.elapsed() < delay {
                    std::hint::spin_loop();
                }
                cancel.cancel()
            });
            let committer = scope.spawn(|| {
                start.wait();
                runtime.commit_cancellable(preview.transaction, 1, &cancel)
            });
            (canceller.join().unwrap(), committer.join().unwrap())
        });
        let exists = dir.path().join(format!("t{trial}.txt")).exists();
        match committed {
            Ok(receipt) => {
                assert!(!cancelled, "trial {trial}: cancel reported success but the commit happened");
                assert_eq!(receipt.state, TransactionState::Committed);
                assert!(exists);
                commit_won += 1;
            }
            Err(VshError::Cancelled) => {
                assert!(cancelled);
                assert!(!exists, "trial {trial}: cancelled but written");
                assert!(runtime.discard_cancelled(preview.transaction).is_ok());
                // Never committable by any name: its record says rejected.
                let record = runtime.transaction(preview.transaction).unwrap();
                assert_eq!(record.map(|record| record.state), Some(TransactionState::Rejected), "trial {trial}");
                cancel_won += 1;
            }
            Err(other) => panic!("trial {trial}: {other:?}"),
        }
    }
    assert!(
        cancel_won >= 3 && commit_won >= 3,
        "cancel won {cancel_won}, commit won {commit_won}: the race was not run"
    );
    let cancel = ExecutionCancellation::new();
    assert!(cancel.cancel());
    assert!(matches!(runtime.run_cancellable(&RunRequest::new(CREATE), &cancel), Err(VshError::Cancelled)));
    assert!(!dir.path().join("new.txt").exists());
}

#[test]
fn events_carry_the_ordered_effects() {
    let dir = files();
    let runtime = hooked(&dir, HookScope::ReviewRequired);
    let program = "from pathlib import Path\nPath('/workspace/d').mkdir()\nPath('/workspace/old.txt').rename('/workspace/d/moved.txt')";
    let preview = runtime.preview(&RunRequest::new(program)).unwrap();
    let CommitPreparation::Review(event) = runtime.prepare_commit(preview.transaction).unwrap() else { panic!() };
    let p = |path: &str| vsh::VPath::parse(path).unwrap();
    assert_eq!(
        event.effects,
        vec![
            vsh::lower::vsh_vfs::Effect::Mkdir(p("d")),
            vsh::lower::vsh_vfs::Effect::Rename { from: p("old.txt"), to: p("d/moved.txt") }
        ]
    );
}

#[test]
fn the_environment_of_real_commands_is_part_of_the_binding() {
    // A Monty program may run commands (`vsh_exec`) once commands are
    // enabled: whether they are, and the environment they get, are bound.
    let digest = |config: vsh::RuntimeConfig| {
        let hook = HookConfig::new("reviewer").with_scope(HookScope::AllRequests);
        let hooked = HookedRuntime::new(
            Runtime::open(config.with_commit_hook(hook)).unwrap(),
            Fixed::new(HookDecision::FollowPolicy),
        );
        hooked.run(&RunRequest::new(CREATE).with_mode(RunMode::Auto), 1).unwrap();
        let seen = hooked.hook().seen.lock().unwrap();
        seen[0].binding.digests().runtime_config
    };
    let (a, b, c, d) = (files(), files(), files(), files());
    let plain = digest(config(a.path()));
    let commands = digest(config(b.path()).with_commands());
    let granted = digest(config(c.path()).with_commands().with_command_env([("COLOR", "blue")]));
    let same = digest(config(d.path()).with_commands().with_command_env([("COLOR", "blue")]));
    assert_ne!(plain, commands);
    assert_ne!(commands, granted);
    assert_eq!(granted, same, "the digest is of the configuration, not of the run");
}
