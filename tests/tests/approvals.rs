//! Durable approvals: pending work survives a reopen, is approved by a bound
//! principal within a window, and commits exactly once; a changed policy, a
//! lapsed approval or a rejection never commits.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use vsh::lower::vsh_store::StoreError;
use vsh::{
    PolicyProfile, PrincipalId, ReceiptDetail, RunMode, RunRequest, Runtime, RuntimeDecision, TransactionState,
    VshError,
};
use vsh_integration_tests::{config, tree, workspace};

const DELETE: &str = "from pathlib import Path\nPath('/workspace/old.txt').unlink()\nprint('deleted')\n'done'";

fn open(dir: &tempfile::TempDir) -> Runtime {
    Runtime::open(config(dir.path())).expect("open runtime")
}

#[test]
fn pending_work_survives_a_reopen_and_commits_once_approved() {
    let dir = workspace(&[("old.txt", "old\n"), ("keep.txt", "keep\n")]);
    let before = tree(dir.path());
    let pending = {
        let runtime = open(&dir);
        let receipt =
            runtime.run(&RunRequest::new(DELETE).with_mode(RunMode::Auto).with_detail(ReceiptDetail::Full)).unwrap();
        assert_eq!(receipt.state, TransactionState::PendingApproval);
        assert!(matches!(receipt.decision, RuntimeDecision::PendingApproval(_)));
        assert_eq!(runtime.pending().unwrap().len(), 1);
        receipt
    };
    assert_eq!(tree(dir.path()), before);

    let runtime = open(&dir);
    assert!(runtime.startup_recovery().is_empty());
    let listed = runtime.pending().unwrap();
    assert_eq!(listed.iter().map(|record| record.id).collect::<Vec<_>>(), vec![pending.transaction]);
    let shown = runtime.show(pending.transaction).unwrap().expect("a stored artifact");
    assert_eq!(shown.diff, pending.diff);
    assert_eq!(shown.changes, pending.changes);
    assert_eq!(shown.output, pending.output);
    assert_eq!(shown.decision, pending.decision);

    // Not approved yet: no commit.
    assert!(matches!(
        runtime.commit(pending.transaction, 1_000),
        Err(VshError::NotCommittable { state: TransactionState::PendingApproval, .. })
    ));
    let principal = PrincipalId::digest(b"reviewer@example");
    let approved = runtime.approve(pending.transaction, principal, 1_000, 61_000).unwrap();
    assert_eq!(approved.state, TransactionState::Approved);
    let committed = runtime.commit(pending.transaction, 2_000).unwrap();
    assert_eq!(committed.state, TransactionState::Committed);
    assert_eq!(committed.output, pending.output);
    assert!(!dir.path().join("old.txt").exists());
    assert!(dir.path().join("keep.txt").exists());
    assert!(matches!(
        runtime.commit(pending.transaction, 3_000),
        Err(VshError::NotCommittable { state: TransactionState::Committed, .. })
    ));
    assert!(runtime.pending().unwrap().is_empty());
}

#[test]
fn pending_work_carries_its_small_contents_in_its_artifact_and_commits_them_from_another_runtime() {
    let dir = workspace(&[("old.txt", "old\n")]);
    // Deleting makes the work wait for approval; the three small files travel
    // inside its artifact, the large one (over 64 KiB) in the blob store.
    let program = "from pathlib import Path\n\
                   Path('/workspace/old.txt').unlink()\n\
                   for name in ['a', 'b', 'c']:\n    \
                       Path('/workspace/' + name + '.txt').write_text('small ' + name + '\\n')\n\
                   Path('/workspace/big.txt').write_text('x' * 70000)";
    let pending = open(&dir).run(&RunRequest::new(program).with_mode(RunMode::Auto)).unwrap();
    assert_eq!(pending.state, TransactionState::PendingApproval);
    let blobs: Vec<String> = tree(&dir.path().join(".vsh/data/blobs"))
        .into_keys()
        .filter(|path| path.len() > 3 && !path.starts_with("tmp"))
        .collect();
    let big = vsh::BlobId::of(&b"x".repeat(70_000)).to_hex();
    assert_eq!(blobs.len(), 2, "the artifact and the large content only: {blobs:?}");
    assert!(blobs.contains(&format!("{}/{}", &big[..2], &big[2..])), "{blobs:?}");

    // Another runtime reviews the carried bytes, approves and commits them.
    let runtime = open(&dir);
    let review = runtime.review(pending.transaction).unwrap();
    assert!(
        review
            .iter()
            .any(|file| file.path.as_str() == "b.txt"
                && file.hunks.as_ref().is_ok_and(|hunks| hunks.contains("+small b"))),
        "{review:?}"
    );
    runtime.approve(pending.transaction, PrincipalId::digest(b"reviewer@example"), 1_000, 61_000).unwrap();
    let committed = runtime.commit(pending.transaction, 2_000).unwrap();
    assert_eq!(committed.state, TransactionState::Committed);
    for name in ["a", "b", "c"] {
        assert_eq!(std::fs::read_to_string(dir.path().join(format!("{name}.txt"))).unwrap(), format!("small {name}\n"));
    }
    assert_eq!(std::fs::read(dir.path().join("big.txt")).unwrap().len(), 70_000);
    assert!(!dir.path().join("old.txt").exists());
}

#[test]
fn a_lapsed_approval_never_commits_and_the_work_waits_for_another() {
    let dir = workspace(&[("old.txt", "old\n")]);
    let before = tree(dir.path());
    let runtime = open(&dir);
    let pending = runtime.preview(&RunRequest::new(DELETE)).unwrap();
    runtime.approve(pending.transaction, PrincipalId::digest(b"r"), 1_000, 2_000).unwrap();
    // The window is exclusive at its end.
    let lapsed = runtime.commit(pending.transaction, 2_000);
    assert!(matches!(lapsed, Err(VshError::Store(StoreError::ApprovalLapsed { now_ms: 2_000, .. }))), "{lapsed:?}");
    assert_eq!(tree(dir.path()), before);
    // The work is not lost with its approval (ux68 M6): it waits for one
    // again, and commits under a new one.
    assert_eq!(runtime.transaction(pending.transaction).unwrap().unwrap().state, TransactionState::PendingApproval);
    let again = runtime.commit(pending.transaction, 2_500);
    assert!(
        matches!(again, Err(VshError::NotCommittable { state: TransactionState::PendingApproval, .. })),
        "{again:?}"
    );
    runtime.approve(pending.transaction, PrincipalId::digest(b"r"), 3_000, 4_000).unwrap();
    assert_eq!(runtime.commit(pending.transaction, 3_500).unwrap().state, TransactionState::Committed);
    assert!(!dir.path().join("old.txt").exists());
}

#[test]
fn a_changed_policy_blocks_approval_of_earlier_work() {
    let dir = workspace(&[("old.txt", "old\n")]);
    let pending = open(&dir).preview(&RunRequest::new(DELETE)).unwrap();
    let strict = Runtime::open(config(dir.path()).with_policy_profile(PolicyProfile::Strict)).unwrap();
    assert!(matches!(
        strict.approve(pending.transaction, PrincipalId::digest(b"r"), 0, 10),
        Err(VshError::PolicyChanged(id)) if id == pending.transaction
    ));
    // Under the original policy the same work can still be approved.
    open(&dir).approve(pending.transaction, PrincipalId::digest(b"r"), 0, 10).unwrap();
    assert!(matches!(strict.commit(pending.transaction, 5), Err(VshError::PolicyChanged(_))));
    assert!(dir.path().join("old.txt").exists());
}

#[test]
fn rejected_work_never_commits() {
    let dir = workspace(&[("old.txt", "old\n")]);
    let runtime = open(&dir);
    let pending = runtime.preview(&RunRequest::new(DELETE)).unwrap();
    assert_eq!(runtime.reject(pending.transaction, 10).unwrap().state, TransactionState::Rejected);
    assert!(runtime.approve(pending.transaction, PrincipalId::digest(b"r"), 0, 100).is_err());
    assert!(matches!(
        runtime.commit(pending.transaction, 20),
        Err(VshError::NotCommittable { state: TransactionState::Rejected, .. })
    ));
    assert!(dir.path().join("old.txt").exists());

    let preview =
        runtime.preview(&RunRequest::new("from pathlib import Path\nPath('/workspace/n').write_text('n')")).unwrap();
    assert!(runtime.discard_preview(preview.transaction).unwrap());
    assert!(matches!(runtime.commit(preview.transaction, 30), Err(VshError::NotCommittable { .. })));
    assert!(!dir.path().join("n").exists());
}

#[test]
fn two_runtimes_with_overlapping_work_have_exactly_one_winner() {
    let dir = workspace(&[("counter.txt", "0\n")]);
    let bump = "from pathlib import Path\np = Path('/workspace/counter.txt')\np.write_text(str(int(p.read_text()) + 1) + '\\n')";
    let first = open(&dir);
    let second = open(&dir);
    let a = first.preview(&RunRequest::new(bump)).unwrap();
    let b = second.preview(&RunRequest::new(bump)).unwrap();
    let results = std::thread::scope(|scope| {
        let one = scope.spawn(|| first.commit(a.transaction, 1));
        let two = scope.spawn(|| second.commit(b.transaction, 1));
        [one.join().unwrap(), two.join().unwrap()]
    });
    let winners = results.iter().filter(|result| result.is_ok()).count();
    assert_eq!(winners, 1, "{results:?}");
    let loser = results.iter().find_map(|result| result.as_ref().err()).unwrap();
    assert!(matches!(loser, VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. })), "{loser:?}");
    assert_eq!(std::fs::read_to_string(dir.path().join("counter.txt")).unwrap(), "1\n");
}

#[test]
fn the_workspace_policy_is_recorded_once_and_used_by_every_later_runtime() {
    let dir = vsh_integration_tests::workspace(&[("a.txt", "a")]);
    let create = "from pathlib import Path\nPath('/workspace/b.txt').write_text('b')";
    let state = |config: vsh::RuntimeConfig| {
        vsh::Runtime::open(config).unwrap().preview(&vsh::RunRequest::new(create)).unwrap().state
    };
    let config = || vsh_integration_tests::config(dir.path());
    assert_eq!(state(config()), vsh::TransactionState::AutoApproved, "balanced by default");
    let runtime = vsh::Runtime::open(config()).unwrap();
    // A bad policy is refused before anything is written.
    assert!(matches!(runtime.record_workspace_policy("version = 2\n"), Err(vsh::VshError::PolicyFile(_))));
    assert_eq!(state(config()), vsh::TransactionState::AutoApproved);
    let digest = runtime.record_workspace_policy("version = 1\nprofile = \"strict\"\n").unwrap();
    drop(runtime);
    let later = vsh::Runtime::open(config()).unwrap();
    assert_eq!(later.policy().digest(), digest);
    assert_eq!(state(config()), vsh::TransactionState::PendingApproval, "strict, recorded, without restating it");
    // An explicit profile for one runtime still wins.
    assert_eq!(state(config().with_policy_profile(vsh::PolicyProfile::Balanced)), vsh::TransactionState::AutoApproved);
    // The recorded policy lives in the trusted data directory, out of every guest's reach.
    let probe = "from pathlib import Path\nPath('/workspace/.vsh/data/policy.toml').exists()";
    let receipt = vsh::Runtime::open(config()).unwrap().preview(&vsh::RunRequest::new(probe)).unwrap();
    assert!(matches!(receipt.decision, vsh::RuntimeDecision::Denied(_)), "{:?}", receipt.decision);
}

#[test]
fn a_recorded_policy_changed_or_planted_without_the_authority_key_is_refused_never_taken() {
    let dir = vsh_integration_tests::workspace(&[("a.txt", "a"), (".env", "SECRET=1\n"), ("old.txt", "old\n")]);
    let config = || vsh_integration_tests::config(dir.path());
    let file = dir.path().join(".vsh/data/policy.toml");
    let forged = |runtime: Result<Runtime, VshError>| matches!(runtime, Err(VshError::WorkspacePolicyForged(_)));
    let runtime = Runtime::open(config()).unwrap();
    runtime.record_workspace_policy("version = 1\nprofile = \"strict\"\n").unwrap();
    drop(runtime);
    let recorded = std::fs::read_to_string(&file).unwrap();
    assert_eq!(Runtime::open(config()).unwrap().policy().profile(), PolicyProfile::Strict);
    assert_eq!(
        Runtime::open(config()).unwrap().workspace_policy_text().unwrap().as_deref(),
        Some("version = 1\nprofile = \"strict\"\n"),
        "read back without its MAC line"
    );

    // Changed under its MAC (a weaker profile), without one, planted with
    // the secrets rule off, with a MAC made up, cut short, empty: refused.
    let weaker = recorded.replace("strict", "permissive");
    let planted = "version = 1\n[defaults]\nsecrets = false\n";
    let made_up = format!("{planted}# vsh authority MAC: {}\n", "5a".repeat(32));
    let cut = recorded.lines().next().unwrap().to_owned();
    for text in [weaker.as_str(), planted, made_up.as_str(), cut.as_str(), ""] {
        std::fs::write(&file, text).unwrap();
        assert!(forged(Runtime::open(config())), "{text:?} was taken");
        // A runtime given its own policy is not stopped by it, and its work
        // records that policy, even the default one (the recorded policy
        // cannot be taken, so nothing else says what it ran under) ...
        let balanced = Runtime::open(config().with_policy_profile(PolicyProfile::Balanced)).unwrap();
        let pending = balanced.run(&RunRequest::new(DELETE).with_mode(RunMode::Auto)).unwrap();
        assert_eq!(pending.state, TransactionState::PendingApproval);
        assert!(balanced.run_policy(pending.transaction).unwrap().is_some(), "{text:?}: no run policy recorded");
        balanced.reject(pending.transaction, 3_000).unwrap();
        drop(balanced);
        let explicit = Runtime::open(config().with_policy_profile(PolicyProfile::Strict)).unwrap();
        // ... and recording a policy again replaces it.
        explicit.record_workspace_policy("version = 1\nprofile = \"strict\"\n").unwrap();
        assert_eq!(Runtime::open(config()).unwrap().policy().profile(), PolicyProfile::Strict, "{text:?}");
    }
}

#[test]
fn committing_one_transaction_from_many_runtimes_at_once_commits_it_once_and_tells_the_others_so() {
    for round in 0..20 {
        let dir = workspace(&[("old.txt", "old\n"), ("keep.txt", "keep\n")]);
        let runtimes: Vec<Runtime> = (0..4).map(|_| open(&dir)).collect();
        let pending = runtimes[0].run(&RunRequest::new(DELETE).with_mode(RunMode::Auto)).unwrap();
        assert_eq!(pending.state, TransactionState::PendingApproval);
        runtimes[0].approve(pending.transaction, PrincipalId::digest(b"reviewer@example"), 1_000, 61_000).unwrap();
        let barrier = std::sync::Barrier::new(runtimes.len());
        let results: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = runtimes
                .iter()
                .map(|runtime| {
                    scope.spawn(|| {
                        barrier.wait();
                        runtime.commit(pending.transaction, 2_000)
                    })
                })
                .collect();
            handles.into_iter().map(|handle| handle.join().unwrap()).collect()
        });
        let committed = results
            .iter()
            .filter(|result| result.as_ref().is_ok_and(|r| r.state == TransactionState::Committed))
            .count();
        assert_eq!(committed, 1, "round {round}: {results:?}");
        for result in &results {
            match result {
                Ok(receipt) => assert_eq!(receipt.state, TransactionState::Committed),
                // The others learn it is committed, never an in-between state.
                Err(VshError::NotCommittable { state, .. }) => {
                    assert_eq!(*state, TransactionState::Committed, "round {round}: {results:?}");
                }
                Err(error) => panic!("round {round}: {error:?}"),
            }
        }
        assert!(!dir.path().join("old.txt").exists());
    }
}

/// A runtime that decides under the workspace's recorded policy neither
/// runs, approves nor commits once the operator records another (found
/// through `vsh serve`, a runtime that lives for a whole session): it says
/// so, and a runtime opened again works under the new one. A runtime given
/// a policy of its own goes on under it.
#[test]
fn a_runtime_stops_deciding_under_a_workspace_policy_recorded_again_since_it_opened() {
    let dir = vsh_integration_tests::workspace(&[("a.txt", "a"), ("old.txt", "old\n")]);
    let config = || vsh_integration_tests::config(dir.path());
    let create = "from pathlib import Path\nPath('/workspace/b.txt').write_text('b')";
    let watching = Runtime::open(config()).unwrap();
    // Paranoid is not the workspace's (balanced): a policy of its own.
    let own = Runtime::open(config().with_policy_profile(PolicyProfile::Paranoid)).unwrap();
    let held = watching.preview(&RunRequest::new(create)).unwrap();
    let pending = watching.preview(&RunRequest::new(DELETE)).unwrap();
    assert_eq!(pending.state, TransactionState::PendingApproval);
    watching.check_policy_current().unwrap();
    // The operator records another policy, from another runtime.
    Runtime::open(config().with_policy_profile(PolicyProfile::Strict))
        .unwrap()
        .record_workspace_policy("version = 1\nprofile = \"strict\"\n")
        .unwrap();
    let replaced = |outcome: Result<(), VshError>| matches!(outcome, Err(VshError::WorkspacePolicyReplaced));
    assert!(replaced(watching.check_policy_current()));
    assert!(replaced(watching.commit(held.transaction, 1_000).map(drop)));
    assert!(replaced(watching.preview(&RunRequest::new(create)).map(drop)));
    assert!(replaced(watching.approve(pending.transaction, PrincipalId::digest(b"op"), 1_000, 9_000).map(drop)));
    assert!(!dir.path().join("b.txt").exists(), "nothing committed under the replaced policy");
    assert_eq!(VshError::WorkspacePolicyReplaced.category(), vsh::ErrorCategory::Policy);
    // A runtime opened now decides under the new policy.
    let now = Runtime::open(config()).unwrap();
    assert_eq!(now.preview(&RunRequest::new(create)).unwrap().state, TransactionState::PendingApproval);
    // One with a policy of its own is not stopped.
    own.check_policy_current().unwrap();
    assert_eq!(own.preview(&RunRequest::new(create)).unwrap().state, TransactionState::PendingApproval);
}

/// sec59 F1: each run was judged alone against the workspace as it stood,
/// so an agent allowed to commit auto-approved work cut every file to just
/// over half, run after run (99% of a tree gone in seven commits), and
/// could rewrite a file whole at its size in one. A file's loss is now
/// measured from its bytes and added to what unreviewed commits took since
/// a reviewer last saw it; a review, or a change made outside vsh, starts
/// afresh.
#[test]
fn cuts_made_in_auto_approved_steps_add_up_and_a_review_starts_afresh() {
    let text = numbered_lines(40, |line| format!("{:<59}\n", format!("line {line:04} of the module")));
    assert_eq!(text.len(), 40 * 60);
    let dir = workspace(&[("src/a.py", &text), ("src/b.py", &text)]);
    let runtime = open(&dir);
    let cut = "from pathlib import Path\nfor p in ['src/a.py', 'src/b.py']:\n    t = Path(p).read_text()\n    \
               Path(p).write_text(t[: len(t) // 2 + 60])";
    let run = |code: &str| runtime.run(&RunRequest::new(code).with_mode(RunMode::Auto)).unwrap();
    let rewrite = |receipt: &vsh::Receipt| match &receipt.decision {
        RuntimeDecision::PendingApproval(manifest) => manifest.flags.contains(&vsh::RiskFlag::ContentRewrite),
        _ => false,
    };
    // 40 lines to 21: 19 lost of 40, auto-approved and committed.
    let first = run(cut);
    assert_eq!(first.state, TransactionState::Committed, "{:?}", first.decision);
    assert_eq!(std::fs::read_to_string(dir.path().join("src/a.py")).unwrap().len(), 21 * 60);
    // 21 lines to 11 (and a part): alone a loss of under half, but 29 of the 40 lines reviewed.
    let second = run(cut);
    assert_eq!(second.state, TransactionState::PendingApproval, "{:?}", second.decision);
    assert!(rewrite(&second), "{:?}", second.decision);
    // Reviewed and committed: what it left is what a reviewer saw.
    runtime.approve(second.transaction, PrincipalId::digest(b"reviewer"), 1_000, 61_000).unwrap();
    assert_eq!(runtime.commit(second.transaction, 2_000).unwrap().state, TransactionState::Committed);
    let third = run(cut);
    assert_eq!(third.state, TransactionState::Committed, "{:?}", third.decision);
    // A change made outside vsh is someone's own: the cut after it starts afresh too.
    std::fs::write(dir.path().join("src/a.py"), &text).unwrap();
    std::fs::write(dir.path().join("src/b.py"), &text).unwrap();
    let fresh = run(cut);
    assert_eq!(fresh.state, TransactionState::Committed, "{:?}", fresh.decision);
    // A file rewritten whole at its size loses all of it in one run.
    let junk = "from pathlib import Path\nt = Path('src/a.py').read_text()\nPath('src/a.py').write_text('x' * len(t))";
    let rewritten = run(junk);
    assert_eq!(rewritten.state, TransactionState::PendingApproval, "{:?}", rewritten.decision);
    assert!(rewrite(&rewritten), "{:?}", rewritten.decision);
    // A line added loses nothing, whatever came before.
    runtime.reject(rewritten.transaction, 3_000).unwrap();
    let added = run("from pathlib import Path\nPath('src/b.py').write_text(Path('src/b.py').read_text() + 'more\\n')");
    assert_eq!(added.state, TransactionState::Committed, "{:?}", added.decision);
    // Padded first (nothing lost), then cut to the padding: judged against
    // the size a reviewer saw, not the padded one (sec61 F1).
    std::fs::write(dir.path().join("src/c.py"), &text).unwrap();
    let pad = "from pathlib import Path\nt = Path('src/c.py').read_text()\n\
               Path('src/c.py').write_text(t + ''.join(f'pad {i}\\n' for i in range(1000)))";
    assert_eq!(run(pad).state, TransactionState::Committed);
    let gut = "from pathlib import Path\nt = Path('src/c.py').read_text()\nPath('src/c.py').write_text(t[2400:])";
    let gutted = run(gut);
    assert_eq!(gutted.state, TransactionState::PendingApproval, "{:?}", gutted.decision);
    assert!(rewrite(&gutted), "{:?}", gutted.decision);
    runtime.reject(gutted.transaction, 3_500).unwrap();
    // A reviewer is told what earlier unreviewed commits took: the review
    // shows only this run's part (sec61 F2).
    let nibble = "from pathlib import Path\nt = Path('src/c.py').read_text()\nPath('src/c.py').write_text(t[60:])";
    let preview = |code: &str| runtime.run(&RunRequest::new(code)).unwrap();
    let nibbled = preview(nibble);
    let earlier = |receipt: &vsh::Receipt| {
        receipt.warnings.iter().any(|warning| {
            matches!(warning, vsh::Warning::EarlierLosses { files, .. } if files[0].starts_with("src/c.py: 0 of its 2400"))
        })
    };
    assert!(!earlier(&nibbled), "padding took nothing: {:?}", nibbled.warnings);
    let cut_c = "from pathlib import Path\nt = Path('src/c.py').read_text()\nPath('src/c.py').write_text(t[1200:])";
    assert_eq!(run(cut_c).state, TransactionState::Committed);
    let bite = "from pathlib import Path\nt = Path('src/c.py').read_text()\nPath('src/c.py').write_text(t[300:])";
    let again = preview(bite);
    assert_eq!(again.state, TransactionState::PendingApproval, "{:?}", again.decision);
    // Measured against the reviewed bytes: the 20 lines cut (1,200 bytes);
    // the padding's spaces keep nothing of them.
    // The run says what it adds (25 lines of 60 bytes cut, in all), and how
    // much may go before a change waits (half, balanced: ux62 4).
    let earlier = "src/c.py: 1200 of its 2400 reviewed bytes taken before this run";
    let waits = "(more than 1200 in all waits for a review)";
    assert!(listed(&again, &format!("{earlier}, 1500 in all with this run {waits}")), "{:?}", again.warnings);
    // A review later tells the same, the run's own numbers with it (ux64 F7).
    let review = runtime.show(again.transaction).unwrap().unwrap();
    assert!(listed(&review, &format!("{earlier}, 1500 in all with this run {waits}")), "{:?}", review.warnings);
    // Grown, then put back to exactly what a reviewer saw (a dependency
    // tried and dropped): no rewrite, though it shrinks below half (ux59 4).
    std::fs::write(dir.path().join("src/d.py"), &text).unwrap();
    let grow = "from pathlib import Path\nt = Path('src/d.py').read_text()\nPath('src/d.py').write_text(t + 'x = 1\\n' * 1000)";
    assert_eq!(run(grow).state, TransactionState::Committed);
    let back = format!("from pathlib import Path\nPath('src/d.py').write_text({text:?})");
    let restored = run(&back);
    assert_eq!(restored.state, TransactionState::Committed, "{:?}", restored.decision);
    // And it starts afresh there: a cut of under half is an edit again.
    let cut_d = "from pathlib import Path\nt = Path('src/d.py').read_text()\nPath('src/d.py').write_text(t[:1300])";
    assert_eq!(run(cut_d).state, TransactionState::Committed);
    // A line edited in place loses the word it changed, not its line: a
    // one-line file's version bumped is no rewrite.
    std::fs::write(dir.path().join("VERSION"), "1.0.0\n").unwrap();
    let bumped = run("from pathlib import Path\nPath('VERSION').write_text('1.0.1\\n')");
    assert_eq!(bumped.state, TransactionState::Committed, "{:?}", bumped.decision);
    // A file too large to measure, with no unreviewed history, is judged
    // on its sizes: a line a real command appends is no rewrite (sec61 U1).
    if vsh_integration_tests::candidates_available() {
        std::fs::write(dir.path().join("big.log"), "x".repeat(17 << 20)).unwrap();
        let commands = Runtime::open(config(dir.path()).with_commands()).unwrap();
        let append = RunRequest::new(r#"["/bin/sh", "-c", "echo more >> big.log"]"#)
            .with_language(vsh::Language::Command)
            .with_mode(RunMode::Auto);
        let appended = commands.run(&append).unwrap();
        assert_eq!(appended.state, TransactionState::Committed, "{:?}", appended.decision);
        // But overwritten with junk of its size, it loses all it held (sec62 G1).
        let junk = RunRequest::new(r#"["/bin/sh", "-c", "tr x y < big.log > t && mv t big.log"]"#)
            .with_language(vsh::Language::Command)
            .with_mode(RunMode::Auto);
        let overwritten = commands.run(&junk).unwrap();
        assert_eq!(overwritten.state, TransactionState::PendingApproval, "{:?}", overwritten.decision);
        assert!(rewrite(&overwritten), "{:?}", overwritten.decision);
    }
    // Auto-approved work is nobody's to approve: no word of earlier losses
    // on it (ux59 5), though the history holds some for this file.
    let added_c = run("from pathlib import Path\nPath('src/c.py').write_text(Path('src/c.py').read_text() + 'x\\n')");
    assert_eq!(added_c.state, TransactionState::Committed, "{:?}", added_c.decision);
    assert!(
        !added_c.warnings.iter().any(|w| matches!(w, vsh::Warning::EarlierLosses { .. })),
        "{:?}",
        added_c.warnings
    );
}

/// ux59 5e: each unreviewed commit's loss was added to the ones before, so
/// a helper an agent wrote and then rewrote, commit after commit, counted
/// every rewrite as lost: a refactoring session on a 3 KB module went to
/// review in five steps though nothing a reviewer saw was gone. The loss
/// is now measured against the reviewed content itself while the store
/// holds it (garbage collection keeps it), and still sums where it does
/// not.
#[test]
fn what_unreviewed_commits_added_and_took_again_is_no_loss() {
    let text = numbered_lines(50, |line| format!("{:<59}\n", format!("reviewed line {line:04}")));
    assert_eq!(text.len(), 3_000);
    let dir = workspace(&[("src/m.py", &text), ("src/n.py", &text)]);
    let runtime = open(&dir);
    let run = |code: &str| runtime.run(&RunRequest::new(code).with_mode(RunMode::Auto)).unwrap();
    // Step `i`: the file before its helper, then a 500-byte helper of its own (ten
    // lines of one word each, a word of its own on each line, so none of
    // its bytes is kept by the next, nor is the next a renaming of it).
    let helper = |path: &str, step: usize| {
        format!(
            "from pathlib import Path\nt = Path('{path}').read_text()\nk = t.find('helper_')\n\
             w = lambda i: chr(97 + {step}) * 5 + chr(97 + i) * 35\n\
             Path('{path}').write_text((t if k < 0 else t[:k]) + 'helper_\\n' + ''.join(w(i) + '\\n' for i in range(10)))"
        )
    };
    for step in 0..8 {
        let receipt = run(&helper("src/m.py", step));
        assert_eq!(receipt.state, TransactionState::Committed, "step {step}: {:?}", receipt.decision);
    }
    assert!(std::fs::read_to_string(dir.path().join("src/m.py")).unwrap().starts_with(&text));
    // A real cut of what the reviewer saw still adds up over steps: 20 of
    // the 50 lines, then 10 more (60% of the reviewed bytes).
    let cut = |from: usize| {
        format!("from pathlib import Path\nt = Path('src/m.py').read_text()\nPath('src/m.py').write_text(t[{from}:])")
    };
    assert_eq!(run(&cut(1_200)).state, TransactionState::Committed);
    // A helper rewritten after the cut takes nothing more of it (summed
    // with the cut, its own 490 bytes would have passed half).
    let rewritten = run(&helper("src/m.py", 8));
    assert_eq!(rewritten.state, TransactionState::Committed, "{:?}", rewritten.decision);
    let second = run(&cut(600));
    assert_eq!(second.state, TransactionState::PendingApproval, "{:?}", second.decision);
    runtime.reject(second.transaction, 1_000).unwrap();
    // Garbage collection past every grace keeps the reviewed content the
    // history names: the store holds what later runs measure against.
    let blob = |bytes: &str| {
        let hex = blake3::hash(bytes.as_bytes()).to_hex().to_string();
        dir.path().join(".vsh/data/blobs").join(&hex[..2]).join(&hex[2..])
    };
    assert!(blob(&text).exists(), "a commit keeps what it replaces");
    let later = 4_000_000_000_000;
    runtime.collect_garbage(later, &vsh::RetentionConfig::default()).unwrap();
    assert!(blob(&text).exists(), "garbage collection kept the reviewed content");
    // Where the store no longer holds it, the losses sum again (the
    // reviewed content of src/n.py is removed by hand here).
    assert_eq!(run(&helper("src/n.py", 0)).state, TransactionState::Committed);
    std::fs::remove_file(blob(&text)).unwrap();
    let states: Vec<_> = (1..6).map(|step| run(&helper("src/n.py", step)).state).collect();
    assert_eq!(states.last(), Some(&TransactionState::PendingApproval), "{states:?}");
}

/// sec68 F2: where the store does not hold the reviewed content, a file's
/// losses are summed step by step, and each step's renaming of up to eight
/// names counted only the names: two steps renamed every word. A step of
/// several is measured without that allowance.
#[test]
fn renames_in_steps_measured_alone_add_up() {
    let text = numbered_lines(40, |line| format!("alpha beta gamma delta {line:04}\n"));
    let dir = workspace(&[("m.txt", &text)]);
    let runtime = open(&dir);
    let run = |code: &str| runtime.run(&RunRequest::new(code).with_mode(RunMode::Auto)).unwrap();
    let rename = |pairs: &str| {
        format!(
            "from pathlib import Path\nt = Path('m.txt').read_text()\nfor a, b in [{pairs}]:\n    \
             t = ' '.join(b if w == a else w for w in t.split(' '))\nPath('m.txt').write_text(t)"
        )
    };
    // Two names renamed throughout, from the reviewed content: the names.
    let first = run(&rename("('alpha', 'one'), ('beta', 'two')"));
    assert_eq!(first.state, TransactionState::Committed, "{:?}", first.decision);
    // The store no longer holds the reviewed content (a file over 1 MiB never has it kept).
    let hex = blake3::hash(text.as_bytes()).to_hex().to_string();
    std::fs::remove_file(dir.path().join(".vsh/data/blobs").join(&hex[..2]).join(&hex[2..])).unwrap();
    // Every other word renamed next: measured alone, it loses them.
    let second = run(&rename("('gamma', 'three'), ('delta', 'four'), ('one', 'five'), ('two', 'six')"));
    assert_eq!(second.state, TransactionState::PendingApproval, "{:?}", second.decision);
}

/// ux63 4, ux64 F2: a first `content-rewrite` escalation said neither which
/// file nor by how much. Its receipt names each, with the numbers and the
/// limit.
#[test]
fn a_rewrite_escalation_names_the_file_and_the_numbers() {
    let text = numbered_lines(40, |line| format!("{:<59}\n", format!("line {line:04} of it")));
    let dir = workspace(&[("x.py", &text), ("y.py", "y\n")]);
    let runtime = open(&dir);
    let cut = "from pathlib import Path\nt = Path('x.py').read_text()\nPath('x.py').write_text(t[:960])";
    let receipt = runtime.run(&RunRequest::new(cut).with_mode(RunMode::Auto)).unwrap();
    assert_eq!(receipt.state, TransactionState::PendingApproval, "{:?}", receipt.decision);
    // 24 of its 40 lines of 60 bytes cut; half of 2400 is the limit.
    let line = "x.py: 1440 of its 2400 reviewed bytes lost in all with this run (more than 1200 waits for a review)";
    assert!(
        receipt.warnings.iter().any(|w| matches!(w, vsh::Warning::Rewritten { files, total: 1 } if files == &[line])),
        "{:?}",
        receipt.warnings
    );
    assert!(receipt.warnings.iter().any(|w| w.to_string().starts_with("content-rewrite: x.py: 1440")));
}

/// `count` lines, the `n`th made by `line(n)`.
fn numbered_lines(count: usize, line: impl Fn(usize) -> String) -> String {
    let mut text = String::new();
    for n in 0..count {
        text.push_str(&line(n));
    }
    text
}

/// Whether `receipt` warns of earlier losses in exactly one file, as `line`.
fn listed(receipt: &vsh::Receipt, line: &str) -> bool {
    let one = |files: &[String]| files == [line];
    receipt.warnings.iter().any(|warning| matches!(warning, vsh::Warning::EarlierLosses { files, .. } if one(files)))
}

/// A commit reads each version of a modified file once for each thing it
/// must know of it, never twice for one: the bytes it held once, to measure
/// what it takes (the loss history) and to keep them for a later review;
/// once to revalidate it, for the run's dependency on it and the commit's
/// precondition together; the bytes it left once as installed, and once
/// for the history. Four reads of the workspace, where there were six.
#[test]
fn a_commit_reads_what_it_replaces_once() {
    let dir = workspace(&[("a.txt", "one\ntwo\nthree\n"), ("b.txt", "b\n")]);
    let runtime = open(&dir);
    let edit = "from pathlib import Path\nPath('a.txt').write_text('one\\ntwo\\n')";
    let preview = runtime.run(&RunRequest::new(edit)).unwrap();
    assert_eq!(preview.state, TransactionState::AutoApproved, "{:?}", preview.decision);
    let before = runtime.host_counters();
    runtime.commit(preview.transaction, 1_000).unwrap();
    let reads = runtime.host_counters().reads - before.reads;
    assert_eq!(reads, 4, "measured and kept; revalidated; verified; recorded");
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "one\ntwo\n");
}

/// The loss history is the authority key's: bytes planted or changed in
/// the data directory are refused by every run that modifies a file,
/// with a typed error naming the file, and nothing is decided.
#[test]
fn a_loss_history_changed_without_the_authority_key_is_refused() {
    let dir = workspace(&[("a.txt", "one\ntwo\n")]);
    let runtime = open(&dir);
    std::fs::write(dir.path().join(".vsh/data/loss-history"), b"VSHLOS01\0\0\0\0forged").unwrap();
    let edit = "from pathlib import Path\nPath('a.txt').write_text('one\\n')";
    let refused = runtime.run(&RunRequest::new(edit).with_mode(RunMode::Auto));
    assert!(matches!(refused, Err(VshError::DataDirectory(StoreError::CorruptLossHistory { .. }))), "{refused:?}");
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "one\ntwo\n");
}

/// sec64 F1: a data directory that refused the loss history's write after
/// a commit landed (immutable, full, read-only) dropped the update without
/// a word, and the next cut counted the cut file as reviewed. The commit
/// stands, and its receipt says what was not recorded.
#[test]
fn a_loss_history_the_data_directory_refuses_is_said_on_the_commit() {
    if !vsh_integration_tests::is_root() {
        assert!(std::env::var_os("VSH_REQUIRE_SANDBOX").is_none(), "needs root for chattr +i");
        return;
    }
    let text = numbered_lines(40, |line| format!("line {line:04}\n"));
    let dir = workspace(&[("a.txt", &text)]);
    let runtime = open(&dir);
    let data = dir.path().join(".vsh/data");
    let chattr = |flag: &str| std::process::Command::new("chattr").args([flag, data.to_str().unwrap()]).status();
    if !chattr("+i").is_ok_and(|status| status.success()) {
        assert!(std::env::var_os("VSH_REQUIRE_SANDBOX").is_none(), "chattr +i failed on the test's filesystem");
        return;
    }
    let cut =
        "from pathlib import Path\nt = Path('a.txt').read_text()\nPath('a.txt').write_text(t[: len(t) // 2 + 20])";
    let committed = runtime.run(&RunRequest::new(cut).with_mode(RunMode::Auto));
    assert!(chattr("-i").is_ok_and(|status| status.success()));
    let committed = committed.unwrap();
    assert_eq!(committed.state, TransactionState::Committed, "{:?}", committed.decision);
    assert!(
        committed.warnings.iter().any(|warning| matches!(warning, vsh::Warning::LossHistoryUnrecorded { .. })),
        "{:?}",
        committed.warnings
    );
    assert!(!data.join("loss-history").exists());
    // Once there is a history file, a directory that refuses new entries
    // still takes the update, written over in place (sec65 L1: the update
    // was lost and the next cut started afresh).
    // (The failed write of what the commit replaced stopped this runtime's
    // blob store: a new one reads the disk afresh.)
    assert!(runtime.is_stopped());
    drop(runtime);
    let runtime = open(&dir);
    let added = "from pathlib import Path\nPath('a.txt').write_text(Path('a.txt').read_text() + 'one more\\n')";
    assert_eq!(
        runtime.run(&RunRequest::new(added).with_mode(RunMode::Auto)).unwrap().state,
        TransactionState::Committed
    );
    let before = std::fs::read(data.join("loss-history")).unwrap();
    assert!(chattr("+i").is_ok_and(|status| status.success()));
    let cut_more = runtime.run(&RunRequest::new(cut).with_mode(RunMode::Auto));
    assert!(chattr("-i").is_ok_and(|status| status.success()));
    let cut_more = cut_more.unwrap();
    assert!(
        !cut_more.warnings.iter().any(|warning| matches!(warning, vsh::Warning::LossHistoryUnrecorded { .. })),
        "{:?}",
        cut_more.warnings
    );
    assert_ne!(std::fs::read(data.join("loss-history")).unwrap(), before, "updated in place");
    // And it speaks: the next cut adds up with this one.
    let third = runtime.run(&RunRequest::new(cut).with_mode(RunMode::Auto)).unwrap();
    assert_eq!(third.state, TransactionState::PendingApproval, "{:?}", third.decision);
}

/// ux60: both items a lead approved had gone stale under the agent's later
/// commits; approve succeeded and every commit then failed. Approving
/// revalidates first: stale work is refused, naming the paths, and is
/// recorded stale, as a commit that finds it so records it (ux61 2: left
/// pending, every hint sent its reviewer back to approve it).
#[test]
fn approving_work_the_workspace_moved_under_is_refused_as_stale() {
    let dir = workspace(&[("old.txt", "old\n"), ("keep.txt", "keep\n")]);
    let runtime = open(&dir);
    let pending = runtime.run(&RunRequest::new(DELETE)).unwrap();
    assert_eq!(pending.state, TransactionState::PendingApproval);
    std::fs::write(dir.path().join("old.txt"), "edited meanwhile\n").unwrap();
    let refused = runtime.approve(pending.transaction, PrincipalId::digest(b"lead"), 1_000, 61_000);
    let error = refused.expect_err("stale work is not approved");
    assert!(matches!(error, VshError::ApprovalStale { transaction, .. } if transaction == pending.transaction));
    let (conflicts, total) = error.stale_conflicts().expect("names what changed");
    assert!(conflicts.iter().any(|conflict| conflict.path.as_str() == "old.txt") && total == 1, "{conflicts:?}");
    assert_eq!(error.category(), vsh::ErrorCategory::Approval);
    let record = runtime.transaction(pending.transaction).unwrap().unwrap();
    assert_eq!(record.state, TransactionState::Stale);
    assert!(runtime.pending().unwrap().iter().all(|waiting| waiting.id != pending.transaction), "no longer waiting");
    assert_eq!(std::fs::read_to_string(dir.path().join("old.txt")).unwrap(), "edited meanwhile\n");
    // Stale for good, as a commit's stale: put back, it is still not approvable.
    std::fs::write(dir.path().join("old.txt"), "old\n").unwrap();
    let again = runtime.approve(pending.transaction, PrincipalId::digest(b"lead"), 1_000, 61_000);
    assert!(matches!(again, Err(VshError::NotApprovable { state: TransactionState::Stale, .. })), "{again:?}");
    // Work whose reads still hold is approved as before.
    let fresh = runtime.run(&RunRequest::new(DELETE)).unwrap();
    runtime.approve(fresh.transaction, PrincipalId::digest(b"lead"), 1_000, 61_000).unwrap();
}

/// ux61 1: a rerun was not linked to the work it ran again, so the `next`
/// of stale work, followed twice, applied its work twice. A rerun's
/// evidence names the transaction it ran again, and `reruns_of` follows
/// those links, chains included; a new run of the same program is no
/// rerun.
#[test]
fn reruns_are_linked_to_the_work_they_ran_again() {
    let dir = workspace(&[("old.txt", "old\n"), ("keep.txt", "keep\n")]);
    let runtime = open(&dir);
    let first = runtime.run(&RunRequest::new(DELETE)).unwrap().transaction;
    let rerun = runtime.run(&RunRequest::new(DELETE).with_rerun_of(first)).unwrap().transaction;
    let unrelated = runtime.run(&RunRequest::new(DELETE)).unwrap().transaction;
    let again = runtime.run(&RunRequest::new(DELETE).with_rerun_of(rerun)).unwrap().transaction;
    assert_eq!(runtime.transaction(rerun).unwrap().unwrap().state, TransactionState::PendingApproval);
    let ids = |of| runtime.reruns_of(of).unwrap().into_iter().map(|record| record.id).collect::<Vec<_>>();
    assert_eq!(ids(first), [rerun, again]);
    assert_eq!(ids(rerun), [again]);
    assert!(ids(unrelated).is_empty() && ids(again).is_empty());
    // The link is bound into the transaction: the same program run as a
    // rerun of another is another transaction.
    assert_ne!(rerun, unrelated);
    // Opened again, the links are read from the store.
    drop(runtime);
    assert_eq!(open(&dir).reruns_of(first).unwrap().len(), 2);
}

/// ux62 3: pending work the workspace had moved under looked approvable in
/// every listing, review and commit until someone tried to approve it. A
/// listing, a review and a commit revalidate it first (applying nothing)
/// and record it stale, as approving it does; work still current is left
/// waiting.
#[test]
fn stale_pending_work_is_recorded_stale_by_any_look_at_it() {
    let dir = workspace(&[("old.txt", "old\n"), ("keep.txt", "keep\n"), ("other.txt", "o\n")]);
    let runtime = open(&dir);
    let delete_other = "from pathlib import Path\nPath('/workspace/other.txt').unlink()";
    let listed = runtime.run(&RunRequest::new(DELETE)).unwrap().transaction;
    let shown = runtime.run(&RunRequest::new(delete_other)).unwrap().transaction;
    std::fs::write(dir.path().join("old.txt"), "edited meanwhile\n").unwrap();
    std::fs::write(dir.path().join("other.txt"), "edited too\n").unwrap();
    let current = runtime.run(&RunRequest::new("from pathlib import Path\nPath('/workspace/keep.txt').unlink()"));
    let current = current.unwrap().transaction;
    let state = |id| runtime.transaction(id).unwrap().unwrap().state;
    // The review of one says what it is, and what changed under it (ux63 1).
    let review = runtime.show(shown).unwrap().unwrap();
    assert_eq!(review.state, TransactionState::Stale);
    assert!(
        review
            .warnings
            .iter()
            .any(|w| matches!(w, vsh::Warning::FoundStale { paths, total: 1 } if paths[0].starts_with("other.txt: "))),
        "{:?}",
        review.warnings
    );
    assert_eq!(state(shown), TransactionState::Stale);
    // The listing leaves out the other, recorded stale, and names it and
    // what changed; the current one waits.
    let (waiting, found) = runtime.pending_and_stale().unwrap();
    assert_eq!(waiting.iter().map(|record| record.id).collect::<Vec<_>>(), [current]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].transaction, listed);
    let named = |error: &vsh::lower::vsh_commit::CommitError, path: &str| matches!(error, vsh::lower::vsh_commit::CommitError::Stale { conflicts, .. } if conflicts[0].path.as_str() == path);
    assert!(named(&found[0].stale, "old.txt"), "{:?}", found[0].stale);
    assert_eq!(state(listed), TransactionState::Stale);
    assert_eq!(state(current), TransactionState::PendingApproval);
    // A listing's rows take the receipt without revalidating again; a
    // review revalidates.
    let looks = || runtime.host_counters().stats;
    let before = looks();
    assert!(runtime.listed_receipt(current).unwrap().is_some());
    assert_eq!(looks(), before, "no second revalidation for a listed row");
    assert!(runtime.show(current).unwrap().is_some());
    assert!(looks() > before, "a review revalidates");
    // A commit of pending work the workspace moved under says it is stale.
    let late = runtime.run(&RunRequest::new(delete_other)).unwrap().transaction;
    std::fs::write(dir.path().join("other.txt"), "edited again, longer\n").unwrap();
    let refused = runtime.commit(late, 2_000);
    assert!(matches!(&refused, Err(VshError::Commit(error)) if named(error, "other.txt")), "{refused:?}");
    assert_eq!(state(late), TransactionState::Stale);
    assert_eq!(std::fs::read_to_string(dir.path().join("old.txt")).unwrap(), "edited meanwhile\n");
}

/// sec64 F5: a run touching more paths than an artifact may hold was
/// denied (past `deny_touched_paths`) but failed as "artifact ... is
/// invalid", and nothing was recorded. It is denied, and its record kept.
#[test]
fn denied_work_too_large_for_an_artifact_is_still_denied_and_recorded() {
    let dir = workspace(&[("keep.txt", "keep\n")]);
    let runtime = open(&dir);
    let many = "for d in range(101):\n    vsh_mkdir(f'd{d}')\nfor i in range(100001):\n    vsh_write(f'd{i // 1000}/f{i}', '')";
    let budget = vsh::ExecutionBudget {
        max_os_calls: 200_000,
        max_duration: std::time::Duration::from_mins(2),
        max_request_duration: std::time::Duration::from_mins(3),
        ..Default::default()
    };
    let denied = runtime.run(&RunRequest::new(many).with_budget(budget)).unwrap();
    assert_eq!(denied.state, TransactionState::Denied, "{:?}", denied.decision);
    let record = runtime.transaction(denied.transaction).unwrap().expect("kept on record");
    assert_eq!(record.state, TransactionState::Denied);
    assert!(!dir.path().join("d0").exists());
}

/// ux64 F3: an agent writes a whole file from what an earlier run read;
/// the user's edit made since would be dropped unseen. A file replaced or
/// removed unread whose content differs from what vsh last saw of it (a
/// run's read, read-only runs too, or a commit's after state) waits for a
/// reviewer, `unseen-change`, whatever its size; a file unchanged since,
/// one the run read first, and one vsh never saw go as before.
#[test]
fn a_file_changed_since_vsh_saw_it_and_replaced_unread_waits_for_a_reviewer() {
    let text = numbered_lines(100, |line| format!("line {line}\n"));
    let dir = workspace(&[("a.txt", &text), ("b.txt", "b\n"), ("never.txt", "n\n")]);
    let runtime = open(&dir);
    let run = |code: &str| runtime.run(&RunRequest::new(code).with_mode(RunMode::Auto)).unwrap();
    let unseen = waits_unseen;
    let noted = |receipt: &vsh::Receipt| -> Vec<String> {
        receipt
            .warnings
            .iter()
            .filter_map(|warning| match warning {
                vsh::Warning::UnseenChanges { files, .. } => Some(files.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    };
    // Read only: no diff, nothing stored but what it saw.
    let read = run("from pathlib import Path\nprint(len(Path('a.txt').read_text()))");
    assert_eq!(read.state, TransactionState::Committed, "{:?}", read.decision);
    std::fs::write(dir.path().join("a.txt"), format!("{text}mine\n")).unwrap();
    // The whole file written from the earlier read: the user's line would go.
    let blind = format!("from pathlib import Path\nPath('a.txt').write_text({text:?} + 'agent\\n')");
    let first = run(&blind);
    assert_eq!(first.state, TransactionState::PendingApproval, "{:?}", first.decision);
    assert!(unseen(&first), "{:?}", first.decision);
    assert_eq!(noted(&first), ["a.txt (changed since a run read it; replaced unread)"]);
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), format!("{text}mine\n"));
    // Run again as it was, it waits again: what it left pending is no sighting.
    assert!(unseen(&run(&blind)));
    // A search through the file shows the program no more than what
    // matches: no read of it (sec74 F2).
    assert!(unseen(&run(&format!("vsh_search('NO_SUCH_TEXT')\n{blind}"))));
    // Read first: the change is the program's to keep, and it does.
    let edit = "from pathlib import Path\nPath('a.txt').write_text(Path('a.txt').read_text() + 'agent\\n')";
    let kept = run(edit);
    assert_eq!(kept.state, TransactionState::Committed, "{:?}", kept.decision);
    // Unchanged since that commit left it: written unread, as before.
    let again = format!("from pathlib import Path\nPath('a.txt').write_text({:?})", format!("{text}mine\nagent\n2\n"));
    let unchanged = run(&again);
    assert_eq!(unchanged.state, TransactionState::Committed, "{:?}", unchanged.decision);
    // Changed after a commit, then removed unread: named with that commit.
    std::fs::write(dir.path().join("a.txt"), "theirs\n").unwrap();
    let removed = run("import os\nos.remove('a.txt')");
    assert!(unseen(&removed), "{:?}", removed.decision);
    let by = unchanged.transaction.short();
    assert_eq!(noted(&removed), [format!("a.txt (changed since {by} committed it; removed unread)")]);
    assert!(dir.path().join("a.txt").exists());
    // A file vsh never saw is not judged.
    let never = run("from pathlib import Path\nPath('never.txt').write_text('x\\n')");
    assert_eq!(never.state, TransactionState::Committed, "{:?}", never.decision);
    // The pending review says it again, however much later.
    let shown = runtime.show(first.transaction).unwrap().unwrap();
    assert!(shown.warnings.iter().any(|w| w.to_string().contains("a.txt (changed since a run read it")), "{shown:?}");
    // What a runtime with durable previews (the CLI's, a server's) saw is
    // another process's to judge by; a process-local preview keeps it in its
    // process (it writes nothing to the store) until its next commit.
    let durable = || Runtime::open(config(dir.path()).with_durable_previews(vsh::DurablePreviews::default())).unwrap();
    let read = "from pathlib import Path\nprint(Path('b.txt').read_text())";
    durable().run(&RunRequest::new(read).with_mode(RunMode::Auto)).unwrap();
    std::fs::write(dir.path().join("b.txt"), "b\nmine\n").unwrap();
    let blind = "from pathlib import Path\nPath('b.txt').write_text('b\\nagent\\n')";
    assert!(unseen(&durable().run(&RunRequest::new(blind).with_mode(RunMode::Auto)).unwrap()));
    // A record that does not verify judges nothing as seen: every file
    // replaced unread waits (sec74 F3: a damaged one let them through).
    let record = dir.path().join(".vsh/data/seen-contents");
    let mut bytes = std::fs::read(&record).unwrap();
    bytes[20] ^= 1;
    std::fs::write(&record, bytes).unwrap();
    let blind = "from pathlib import Path\nPath('never.txt').write_text('y\\n')";
    let judged = durable().run(&RunRequest::new(blind).with_mode(RunMode::Auto)).unwrap();
    assert!(unseen(&judged), "{:?}", judged.decision);
    assert_eq!(noted(&judged), ["never.txt (vsh's record of what it saw does not verify; replaced unread)"]);
}

/// Runs at the same moment each note what they read; none overwrites
/// another's sightings (sec74 F4: 30 parallel runs kept 7).
#[test]
fn runs_at_the_same_moment_all_keep_what_they_saw() {
    const RUNS: usize = 32;
    let files: Vec<(String, String)> = (0..RUNS).map(|n| (format!("r{n}.txt"), format!("{n}\n"))).collect();
    let named: Vec<(&str, &str)> = files.iter().map(|(path, text)| (path.as_str(), text.as_str())).collect();
    let dir = workspace(&named);
    let durable = || Runtime::open(config(dir.path()).with_durable_previews(vsh::DurablePreviews::default())).unwrap();
    let runtimes: Vec<Runtime> = (0..RUNS).map(|_| durable()).collect();
    let start = std::sync::Barrier::new(RUNS);
    std::thread::scope(|scope| {
        for (n, runtime) in runtimes.iter().enumerate() {
            let start = &start;
            scope.spawn(move || {
                let read = format!("from pathlib import Path\nPath('r{n}.txt').read_text()");
                start.wait();
                runtime.run(&RunRequest::new(&read)).unwrap();
            });
        }
    });
    let runtime = durable();
    for n in 0..RUNS {
        std::fs::write(dir.path().join(format!("r{n}.txt")), format!("{n}\nmine\n")).unwrap();
        let blind = format!("from pathlib import Path\nPath('r{n}.txt').write_text('{n}\\nagent\\n')");
        let receipt = runtime.run(&RunRequest::new(&blind)).unwrap();
        assert!(waits_unseen(&receipt), "r{n}.txt: {:?}", receipt.decision);
    }
}

/// A session (an agent's connection) judges by what it saw itself: a
/// change another made since, through vsh or not, is one it never saw
/// (ux69 H1: the user's own `vsh exec` commit counted as seen), while the
/// content its own work wrote is known to it, whoever committed that work.
#[test]
fn a_session_judges_by_what_it_saw_itself() {
    let dir = workspace(&[("a.txt", "one\ntwo\n"), ("b.txt", "b\n")]);
    let open = |session: &str| {
        Runtime::open(config(dir.path()).with_durable_previews(vsh::DurablePreviews::default()).with_session(session))
            .unwrap()
    };
    let (agent, human) = (open("agent"), open(""));
    let unseen = waits_unseen;
    let auto = |runtime: &Runtime, code: &str| runtime.run(&RunRequest::new(code).with_mode(RunMode::Auto)).unwrap();
    auto(&agent, "from pathlib import Path\nPath('a.txt').read_text()");
    // The user edits through vsh: any run's newest sighting is theirs.
    let edit = "from pathlib import Path\np = Path('a.txt')\np.write_text(p.read_text() + 'mine\\n')";
    assert_eq!(auto(&human, edit).state, TransactionState::Committed);
    let blind = "from pathlib import Path\nPath('a.txt').write_text('one\\ntwo\\nagent\\n')";
    let judged = auto(&agent, blind);
    assert!(unseen(&judged), "the agent never saw the user's line: {:?}", judged.decision);
    assert!(!unseen(&auto(&human, blind)), "any run's view: the user's commit is the newest sighting");
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "one\ntwo\nagent\n");
    // Its own work, committed by someone else, is content it knows.
    let own = "from pathlib import Path\np = Path('b.txt')\np.write_text(p.read_text() + 'agent\\n')";
    let preview = agent.run(&RunRequest::new(own)).unwrap();
    assert_eq!(human.commit(preview.transaction, now()).unwrap().state, TransactionState::Committed);
    let again = auto(&agent, "from pathlib import Path\nPath('b.txt').write_text('b\\nmore\\n')");
    assert_eq!(again.state, TransactionState::Committed, "{:?}", again.decision);
    // What it wrote whole over a change it never saw, once a reviewer let
    // it through, it knows: it wrote every byte of it.
    let whole = auto(&agent, "from pathlib import Path\nPath('a.txt').write_text('all new\\n')");
    assert!(unseen(&whole), "{:?}", whole.decision);
    human.approve(whole.transaction, PrincipalId::digest(b"r"), now(), now() + 60_000).unwrap();
    assert_eq!(human.commit(whole.transaction, now()).unwrap().state, TransactionState::Committed);
    let next = auto(&agent, "from pathlib import Path\nPath('a.txt').write_text('newer\\n')");
    assert!(!unseen(&next), "{:?}", next.decision);
    // A revert of another's commit puts back what it replaced, where the
    // workspace holds what that commit left: its own judgment (ux70 F5).
    let theirs = auto(&human, "from pathlib import Path\np = Path('b.txt')\np.write_text(p.read_text() + 'theirs\\n')");
    assert_eq!(theirs.state, TransactionState::Committed);
    let reverted = agent.revert(theirs.transaction, RunMode::Auto).unwrap();
    assert!(!unseen(&reverted), "{:?}", reverted.decision);
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// What a change it never saw could slip through: an append's commit (it
/// kept the change, so it made it count as seen: sec75 F2), a line the user
/// deleted put back (no loss: sec75 F3); and what drops nothing: a move of
/// the file (ux70 F4), a revert of a commit (ux70 F5).
#[test]
fn a_change_never_seen_does_not_pass_through_an_append_nor_a_line_put_back() {
    let text = numbered_lines(20, |line| format!("line {line}\n"));
    let dir = workspace(&[("a.txt", &text), ("b.txt", &text), ("c.txt", &text), ("d.txt", "d\n")]);
    let runtime = open(&dir);
    let run = |code: &str| runtime.run(&RunRequest::new(code).with_mode(RunMode::Auto)).unwrap();
    let unseen = waits_unseen;
    run("from pathlib import Path\nfor p in ['a.txt', 'b.txt', 'c.txt']:\n    Path(p).read_text()");
    // The user edits a.txt; an append, blind, keeps it (and is let through) ...
    std::fs::write(dir.path().join("a.txt"), text.replace("line 5\n", "line 5, mine\n")).unwrap();
    let append = "with open('a.txt', 'a') as f:\n    f.write('appended\\n')";
    assert_eq!(run(append).state, TransactionState::Committed);
    // ... but does not make the user's line count as seen.
    let blind = |path: &str| format!("from pathlib import Path\nPath('{path}').write_text({text:?} + 'agent\\n')");
    assert!(unseen(&run(&blind("a.txt"))), "the user's line would go");
    // The user deletes a line; writing it back is no loss, still a change dropped.
    std::fs::write(dir.path().join("b.txt"), text.replace("line 7\n", "")).unwrap();
    assert!(unseen(&run(&blind("b.txt"))), "the user's deletion would be undone");
    // A move of a file the user changed keeps what it holds.
    std::fs::write(dir.path().join("c.txt"), format!("{text}mine\n")).unwrap();
    let moved = run("import os\nos.rename('c.txt', 'e.txt')");
    assert!(!unseen(&moved), "{:?}", moved.decision);
    // The user removes a file the program read; writing it whole again
    // undoes that removal unseen (ux71 M1).
    run("from pathlib import Path\nPath('d.txt').read_text()");
    std::fs::remove_file(dir.path().join("d.txt")).unwrap();
    let made = run("from pathlib import Path\nPath('d.txt').write_text('d, again\\n')");
    assert!(unseen(&made), "{:?}", made.decision);
    assert!(!dir.path().join("d.txt").exists());
    // A file never seen is made as before.
    assert_eq!(run("from pathlib import Path\nPath('new.txt').write_text('n')").state, TransactionState::Committed);
    // An approved move of a file changed since it was seen carries what
    // was last seen there: a reviewer of a move sees no content (ux72 H).
    run("from pathlib import Path\nPath('f.txt').write_text('f\\n')");
    run("from pathlib import Path\nPath('f.txt').read_text()");
    std::fs::write(dir.path().join("f.txt"), "f\nmine\n").unwrap();
    let rename = run("import os\nos.rename('f.txt', 'g.txt')");
    assert!(!unseen(&rename), "{:?}", rename.decision);
    runtime.approve(rename.transaction, PrincipalId::digest(b"r"), 1_000, u64::MAX).unwrap();
    assert_eq!(runtime.commit(rename.transaction, 2_000).unwrap().state, TransactionState::Committed);
    assert!(unseen(&run("from pathlib import Path\nPath('g.txt').write_text('f\\nagent\\n')")));
    assert_eq!(std::fs::read_to_string(dir.path().join("g.txt")).unwrap(), "f\nmine\n");
    // One a commit removed is made again as before: that removal was seen.
    let removal = run("import os\nos.remove('new.txt')");
    runtime.approve(removal.transaction, PrincipalId::digest(b"r"), 1_000, u64::MAX).unwrap();
    assert_eq!(runtime.commit(removal.transaction, 2_000).unwrap().state, TransactionState::Committed);
    assert_eq!(run("from pathlib import Path\nPath('new.txt').write_text('n2')").state, TransactionState::Committed);
}

/// A hold on the record of what vsh saw that is never let go (whoever can
/// write vsh's data directory) costs a run its sightings after a few
/// seconds, never the run (sec75 F6: it hung).
#[test]
fn a_run_never_waits_for_the_record_of_what_vsh_saw_for_long() {
    let dir = workspace(&[("a.txt", "a\n")]);
    let runtime = Runtime::open(config(dir.path()).with_durable_previews(vsh::DurablePreviews::default())).unwrap();
    runtime.run(&RunRequest::new("1")).unwrap();
    let lock = std::fs::File::create(dir.path().join(".vsh/data/seen-contents.lock")).unwrap();
    lock.lock().unwrap();
    let started = std::time::Instant::now();
    let read = runtime.run(&RunRequest::new("from pathlib import Path\nPath('a.txt').read_text()")).unwrap();
    assert_eq!(read.changed_paths, 0);
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "gave up waiting: {:?}", started.elapsed());
    assert!(!dir.path().join(".vsh/data/seen-contents").exists(), "nothing noted while another held it");
    lock.unlock().unwrap();
}

/// A Bash script's reads show the program nothing it writes back from (a
/// `grep -q`, a redirection that reads nothing): a rewrite after them of a
/// file changed since the program read it waits (sec76 H2, M1).
#[test]
fn a_bash_scripts_reads_are_no_reading_of_the_file_it_rewrites() {
    let dir = workspace(&[("a.txt", "one\ntwo\n")]);
    let runtime = Runtime::open(config(dir.path()).with_bash(vsh::BashConfig::new())).unwrap();
    runtime.run(&RunRequest::new("from pathlib import Path\nPath('a.txt').read_text()")).unwrap();
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\nmine\n").unwrap();
    for script in ["grep -q nothing a.txt; printf 'one\\ntwo\\nagent\\n' > a.txt", ": < a.txt; printf 'one\\n' > a.txt"]
    {
        let request = RunRequest::new(script).with_language(vsh::Language::Bash).with_mode(RunMode::Auto);
        let receipt = runtime.run(&request).unwrap();
        assert!(waits_unseen(&receipt), "{script}: {:?}", receipt.decision);
        // The line says why the script's read did not count (ux72 L3), and
        // what to check (ux83 M3).
        let line = "a.txt (changed since a run read it; rewritten; by a command or a Bash script, which may have \
                    read it: vsh cannot tell whether it kept that change, reformatted or moved, so check its hunks \
                    before approving)";
        assert!(receipt.warnings.iter().any(|warning| warning.to_string().contains(line)), "{:?}", receipt.warnings);
        assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "one\ntwo\nmine\n");
    }
}

/// A patch reads none of the file for the program: one that failed, or one
/// that matched, does not make a whole rewrite after it count as written
/// from a read; a read that did not decode gave the program nothing either
/// (sec77). A patch alone is an edit in place, never judged, and after it
/// the agent's own view goes on (a patch of content it knew is known).
#[test]
fn a_patch_or_a_failed_read_is_no_reading_of_the_file() {
    let text = numbered_lines(30, |line| format!("return {line}\n"));
    let dir = workspace(&[("a.py", &text), ("b.py", &text)]);
    std::fs::write(dir.path().join("c.py"), b"caf\xe9\n").unwrap();
    let runtime = Runtime::open(config(dir.path()).with_session("agent")).unwrap();
    let run = |code: &str| runtime.run(&RunRequest::new(code).with_mode(RunMode::Auto)).unwrap();
    let unseen = waits_unseen;
    run("vsh_read('a.py')\nvsh_read('b.py')\nvsh_read('c.py', True)");
    std::fs::write(dir.path().join("a.py"), text.replace("return 5\n", "return 5000  # HUMAN\n")).unwrap();
    std::fs::write(dir.path().join("c.py"), b"caf\xe9\nmine\n").unwrap();
    let old = format!("{:?}", text.replace("return 9\n", "return 9  # AGENT\n"));
    for fallback in [
        format!(
            "try:\n    vsh_patch('a.py', 'return 5\\n', 'return 50\\n')\nexcept ValueError:\n    vsh_write('a.py', {old})"
        ),
        format!("vsh_patch('a.py', 'return 7\\n', 'return 7\\n')\nvsh_write('a.py', {old})"),
        "try:\n    vsh_read('c.py')\nexcept UnicodeDecodeError:\n    vsh_write('c.py', 'cafe\\n')".to_owned(),
    ] {
        let receipt = run(&fallback);
        assert!(unseen(&receipt), "{fallback}: {:?}", receipt.decision);
    }
    assert!(std::fs::read_to_string(dir.path().join("a.py")).unwrap().contains("HUMAN"));
    // A patch alone keeps the human's line; after a patch of content the
    // agent knew, its whole rewrite of the result is its own.
    let patched = run("vsh_patch('a.py', 'return 9\\n', 'return 9  # AGENT\\n')");
    assert_eq!(patched.state, TransactionState::Committed, "{:?}", patched.decision);
    assert!(std::fs::read_to_string(dir.path().join("a.py")).unwrap().contains("HUMAN"));
    assert_eq!(run("vsh_patch('b.py', 'return 9\\n', 'return 90\\n')").state, TransactionState::Committed);
    let own = format!("vsh_write('b.py', {:?})", text.replace("return 9\n", "return 90\n").replace("return 1\n", ""));
    assert_eq!(run(&own).state, TransactionState::Committed);
}

/// Whether `receipt`'s work waits for a reviewer with `unseen-change`.
fn waits_unseen(receipt: &vsh::Receipt) -> bool {
    match &receipt.decision {
        RuntimeDecision::PendingApproval(manifest) => manifest.flags.contains(&vsh::RiskFlag::UnseenChange),
        _ => false,
    }
}

/// ux67 F5, sec73 F4: a revert of auto-approved work that only removes what
/// that work made waited for a reviewer (the `deletion` flag), and one of a
/// large creation was denied by the delete ratio; it loses nothing the
/// workspace held before that work, and is auto-approved. Anything else a
/// revert removes (what reviewed work made, what the workspace held) is
/// still a deletion.
#[test]
fn a_revert_that_removes_only_what_auto_approved_work_made_is_no_deletion() {
    let dir = workspace(&[("keep.txt", "keep\n")]);
    let runtime = Runtime::open(config(dir.path()).with_durable_previews(vsh::DurablePreviews::default())).unwrap();
    let auto = |program: &str| runtime.run(&RunRequest::new(program).with_mode(RunMode::Auto)).unwrap();
    // Forty files in a new directory: more than the delete ratio allows of
    // the workspace once they are gone.
    let many = "from pathlib import Path\nPath('gen').mkdir()\nfor i in range(40):\n    \
                Path(f'gen/f{i}.txt').write_text(f'{i}\\n')\nPath('one.txt').write_text('1\\n')";
    let made = auto(many);
    assert_eq!(made.state, TransactionState::Committed, "{:?}", made.decision);
    let undone = runtime.revert(made.transaction, RunMode::Auto).unwrap();
    assert_eq!(undone.state, TransactionState::Committed, "{:?}", undone.decision);
    assert!(!dir.path().join("gen").exists() && !dir.path().join("one.txt").exists());
    assert!(dir.path().join("keep.txt").exists());
    // Reverting that revert makes them again (its commit kept what it removed).
    let again = runtime.revert(undone.transaction, RunMode::Auto).unwrap();
    assert_eq!(again.state, TransactionState::Committed, "{:?}", again.decision);
    assert_eq!(std::fs::read_to_string(dir.path().join("gen/f7.txt")).unwrap(), "7\n");
    // Work a reviewer approved: undoing what it made is reviewed too.
    let reviewed = runtime
        .run(&RunRequest::new("from pathlib import Path\nPath('keep.txt').unlink()\nPath('r.txt').write_text('r\\n')"))
        .unwrap();
    assert_eq!(reviewed.state, TransactionState::PendingApproval, "{:?}", reviewed.decision);
    runtime.approve(reviewed.transaction, PrincipalId::digest(b"r"), now(), now() + 60_000).unwrap();
    assert_eq!(runtime.commit(reviewed.transaction, now()).unwrap().state, TransactionState::Committed);
    let back = runtime.revert(reviewed.transaction, RunMode::Auto).unwrap();
    let RuntimeDecision::PendingApproval(manifest) = &back.decision else { panic!("{:?}", back.decision) };
    assert!(manifest.flags.contains(&vsh::RiskFlag::Deletion), "{:?}", manifest.flags);
    // Auto-approved work that removed a file and made one: its revert
    // removes only what it made, and puts the file back.
    let swap = auto("from pathlib import Path\nPath('gen/f1.txt').unlink()\nPath('s.txt').write_text('s\\n')");
    assert_eq!(swap.state, TransactionState::PendingApproval, "a removal waits: {:?}", swap.decision);
    let made_only = auto("from pathlib import Path\nPath('t.txt').write_text('t\\n')");
    assert_eq!(made_only.state, TransactionState::Committed);
    // Edited since: the revert is refused (the file is not what the work made).
    std::fs::write(dir.path().join("t.txt"), "t\nby hand\n").unwrap();
    assert!(matches!(runtime.revert(made_only.transaction, RunMode::Auto), Err(VshError::RevertChanged { .. })));
}

/// ux75 M3: the revert of reviewed work that made many files was denied by
/// the delete ratio, and no reviewer could approve it: the only way to undo
/// it was to record a looser policy. Undoing reviewed creations waits for a
/// reviewer (`deletion`), under no ceiling (vsh-policy
/// `removals_that_undo_reviewed_creations_wait_for_a_reviewer`: a removal
/// of what the workspace held before still counts toward them).
#[test]
fn the_revert_of_reviewed_work_that_made_many_files_waits_for_a_reviewer() {
    let dir = workspace(&[("keep.txt", "keep\n")]);
    let runtime = Runtime::open(config(dir.path()).with_durable_previews(vsh::DurablePreviews::default())).unwrap();
    // 150 files and a removal: it waits for a reviewer, who approves it.
    let many = "from pathlib import Path\nPath('gen').mkdir()\nfor i in range(150):\n    \
                Path(f'gen/f{i}.txt').write_text(f'{i}\\n')\nPath('keep.txt').unlink()";
    let made = runtime.run(&RunRequest::new(many)).unwrap();
    assert_eq!(made.state, TransactionState::PendingApproval, "{:?}", made.decision);
    runtime.approve(made.transaction, PrincipalId::digest(b"r"), now(), now() + 60_000).unwrap();
    assert_eq!(runtime.commit(made.transaction, now()).unwrap().state, TransactionState::Committed);
    // Its revert removes 151 of 151 nodes: waits, with the deletion flag.
    let back = runtime.revert(made.transaction, RunMode::Auto).unwrap();
    let RuntimeDecision::PendingApproval(manifest) = &back.decision else { panic!("{:?}", back.decision) };
    assert!(manifest.flags.contains(&vsh::RiskFlag::Deletion), "{:?}", manifest.flags);
    runtime.approve(back.transaction, PrincipalId::digest(b"r"), now(), now() + 60_000).unwrap();
    assert_eq!(runtime.commit(back.transaction, now()).unwrap().state, TransactionState::Committed);
    assert!(!dir.path().join("gen").exists());
    assert_eq!(std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(), "keep\n");
}

/// ux71 M4: work held with the `rename` flag said nothing of the renames,
/// which the diff shows only by what they left (a `patch -b` backup: a
/// file made with the old bytes, the file written anew). Its review names
/// them, when it runs and whenever it is shown.
#[test]
fn work_held_for_its_renames_names_them() {
    let dir = workspace(&[("a.txt", "a\n"), ("f.txt", "one\n")]);
    let runtime = Runtime::open(config(dir.path()).with_durable_previews(vsh::DurablePreviews::default())).unwrap();
    // As `patch -b` does: the file renamed to its backup, a temporary file
    // written and renamed over it (ux74 L4; not a move of the workspace's).
    let program = "from pathlib import Path\nPath('f.txt').rename('f.txt.orig')\n\
                   Path('f.tmp').write_text('two\\n')\nPath('f.tmp').rename('f.txt')";
    let receipt = runtime.run(&RunRequest::new(program)).unwrap();
    let RuntimeDecision::PendingApproval(manifest) = &receipt.decision else { panic!("{:?}", receipt.decision) };
    assert!(manifest.flags.contains(&vsh::RiskFlag::Rename), "{:?}", manifest.flags);
    let renamed = |warnings: &[vsh::Warning]| {
        warnings.iter().find_map(|warning| match warning {
            vsh::Warning::Renamed { renames, total } => Some((renames.clone(), *total)),
            _ => None,
        })
    };
    // The temporary file renamed over f.txt moves nothing of the workspace:
    // not listed (ux85 L2: bashkit's sed's name was; ux86 L6: then as a move).
    let expected = (vec!["f.txt -> f.txt.orig".to_owned()], 1);
    assert_eq!(renamed(&receipt.warnings), Some(expected.clone()), "{:?}", receipt.warnings);
    let shown = runtime.show(receipt.transaction).unwrap().unwrap();
    assert_eq!(renamed(&shown.warnings), Some(expected), "{:?}", shown.warnings);
    // Work that renames nothing says nothing of renames.
    let plain = runtime.run(&RunRequest::new("from pathlib import Path\nPath('a.txt').unlink()")).unwrap();
    assert_eq!(plain.state, TransactionState::PendingApproval);
    assert_eq!(renamed(&plain.warnings), None, "{:?}", plain.warnings);
}

/// Appends `x` to log.txt (read first).
const APPEND: &str = "from pathlib import Path\np = Path('/workspace/log.txt')\np.write_text(p.read_text() + 'x\\n')";

/// A workspace whose log.txt was written by hand after a preview of
/// [`APPEND`] read it, with durable previews: the workspace, the runtime,
/// and that stale preview's id.
fn appending_work_made_stale() -> (tempfile::TempDir, Runtime, vsh::TransactionId) {
    let dir = workspace(&[("log.txt", "")]);
    let runtime = Runtime::open(config(dir.path()).with_durable_previews(vsh::DurablePreviews::default())).unwrap();
    let first = runtime.run(&RunRequest::new(APPEND)).unwrap().transaction;
    std::fs::write(dir.path().join("log.txt"), "by hand\n").unwrap();
    (dir, runtime, first)
}

/// sec92 M1: two reruns of one stale transaction, started together, both
/// checked that no run of the work was committed, then both committed, so
/// the work was done twice. A rerun commits only while no run of the same
/// work but those committed when it was decided is committed, checked under
/// the commit lock; the one refused writes nothing and is recorded failed.
#[test]
fn a_rerun_does_not_commit_once_another_run_of_the_work_committed_meanwhile() {
    let (dir, runtime, first) = appending_work_made_stale();
    // Both reruns are decided now, nothing of the work committed.
    let so_far = runtime.work_done_so_far(first).unwrap();
    let rerun = || RunRequest::new(APPEND).with_rerun_of(first).with_mode(RunMode::Auto);
    let landed = runtime.run(&rerun().with_done_so_far(so_far.clone())).unwrap();
    assert_eq!(landed.state, TransactionState::Committed);
    let refused = runtime.run(&rerun().with_done_so_far(so_far)).expect_err("the work is done already");
    let VshError::DoneMeanwhile { transaction, by } = refused else { panic!("{refused:?}") };
    assert_eq!(by, landed.transaction);
    assert_eq!(std::fs::read_to_string(dir.path().join("log.txt")).unwrap(), "by hand\nx\n");
    assert_eq!(runtime.transaction(transaction).unwrap().map(|record| record.state), Some(TransactionState::Failed));
    assert!(matches!(runtime.commit(transaction, 1), Err(VshError::NotCommittable { .. })));
    // Decided after that commit, knowing of it (`--again`): it commits.
    let again = runtime.run(&rerun().with_done_so_far(runtime.work_done_so_far(first).unwrap())).unwrap();
    assert_eq!(again.state, TransactionState::Committed);
    assert_eq!(std::fs::read_to_string(dir.path().join("log.txt")).unwrap(), "by hand\nx\nx\n");
}

/// sec93 M1: reruns made as previews, each committed afterwards (`vsh
/// rerun` then `vsh commit`, MCP's `vsh_commit`), did the work twice: one
/// decided before another's commit ran after it, on what it left, and was
/// kept to commit. A rerun decided before such a commit is not kept; one
/// made before it, committed after, finds what it read changed.
#[test]
fn a_rerun_previewed_then_committed_does_not_do_the_work_twice() {
    let (dir, runtime, first) = appending_work_made_stale();
    let so_far = runtime.work_done_so_far(first).unwrap();
    let rerun = || RunRequest::new(APPEND).with_rerun_of(first).with_done_so_far(so_far.clone());
    let now = || {
        u64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()).unwrap()
    };
    let (one, two) = (runtime.run(&rerun()).unwrap().transaction, runtime.run(&rerun()).unwrap().transaction);
    assert_eq!(runtime.commit(one, now()).unwrap().state, TransactionState::Committed);
    assert!(runtime.commit(two, now()).is_err(), "made before that commit: what it read changed");
    assert_eq!(std::fs::read_to_string(dir.path().join("log.txt")).unwrap(), "by hand\nx\n");
    // Decided before that commit, run after it: not kept to commit.
    let late = runtime.run(&rerun()).expect_err("decided before the commit");
    let VshError::DoneMeanwhile { transaction, by } = late else { panic!("{late:?}") };
    assert_eq!(by, one);
    assert_eq!(runtime.transaction(transaction).unwrap().map(|record| record.state), Some(TransactionState::Failed));
    assert!(matches!(runtime.commit(transaction, now()), Err(VshError::NotCommittable { .. })));
    assert_eq!(std::fs::read_to_string(dir.path().join("log.txt")).unwrap(), "by hand\nx\n");
}

/// sec95 M2: a run of the work committed, reverted, a rerun decided then,
/// and the revert itself reverted (the work back): the rerun did the work
/// twice. What a rerun knows of is the work's runs committed and not
/// reverted, so one that does its work again since is new to it.
#[test]
fn a_rerun_does_not_commit_once_a_revert_of_the_works_revert_brought_it_back() {
    let (dir, runtime, first) = appending_work_made_stale();
    let rerun = || RunRequest::new(APPEND).with_rerun_of(first).with_mode(RunMode::Auto);
    let landed = runtime.run(&rerun().with_done_so_far(runtime.work_done_so_far(first).unwrap())).unwrap();
    assert_eq!(landed.state, TransactionState::Committed);
    let undone = runtime.revert(landed.transaction, RunMode::Auto).unwrap();
    assert_eq!(undone.state, TransactionState::Committed, "{:?}", undone.decision);
    assert_eq!(std::fs::read_to_string(dir.path().join("log.txt")).unwrap(), "by hand\n");
    // Decided now: the work is not done.
    let so_far = runtime.work_done_so_far(first).unwrap();
    let redone = runtime.revert(undone.transaction, RunMode::Auto).unwrap();
    assert_eq!(redone.state, TransactionState::Committed, "{:?}", redone.decision);
    assert_eq!(std::fs::read_to_string(dir.path().join("log.txt")).unwrap(), "by hand\nx\n");
    let refused = runtime.run(&rerun().with_done_so_far(so_far)).expect_err("the work is back");
    assert!(matches!(refused, VshError::DoneMeanwhile { by, .. } if by == landed.transaction), "{refused:?}");
    assert_eq!(std::fs::read_to_string(dir.path().join("log.txt")).unwrap(), "by hand\nx\n");
}
