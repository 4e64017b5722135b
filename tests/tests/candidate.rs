//! Candidate workspaces through the facade: steps (Monty, real commands)
//! on one image, checkpoints, exported and inherited files, verifier
//! timeouts, and promotion through the same policy, binding and journaled
//! commit as any run. The commands are real (root and `/dev/fuse`).
// Tests build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vsh::{
    CandidateLabel, CandidateWorkspace, DiffKind, ExecutionOutput, Language, PrincipalId, RunRequest, Runtime,
    StepKind, TransactionState, VerifierStage, VerifierTimeouts, VshError,
};
use vsh_integration_tests::{candidates_available, config, put, tree, workspace};

fn fixture() -> tempfile::TempDir {
    workspace(&[
        ("README.md", "# demo\nhello world\n"),
        ("src/app.py", "def greet():\n    return 'hello'\n"),
        ("docs/notes.txt", "notes\n"),
        (".env", "TOKEN=secret\n"),
    ])
}

fn runtime(dir: &tempfile::TempDir) -> Arc<Runtime> {
    Arc::new(Runtime::open(config(dir.path()).with_commands()).unwrap())
}

fn label() -> CandidateLabel {
    CandidateLabel { node_id: "n1".to_owned(), generation: 3, graph_revision: "r7".to_owned() }
}

fn candidate(runtime: &Arc<Runtime>) -> CandidateWorkspace {
    CandidateWorkspace::create(Arc::clone(runtime), label()).unwrap()
}

/// A real command's step request: `argv` as the JSON program text.
fn command(argv: &[&str]) -> String {
    serde_json_array(argv)
}

fn serde_json_array(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("{item:?}")).collect();
    format!("[{}]", quoted.join(","))
}

fn run_command(candidate: &CandidateWorkspace, argv: &[&str]) -> vsh::SessionStep {
    let code = command(argv);
    candidate.run(&RunRequest::new(&code).with_language(Language::Command)).unwrap()
}

fn paths(receipt: &vsh::Receipt) -> Vec<(&str, DiffKind)> {
    receipt.changes.iter().map(|change| (change.path.as_str(), change.kind)).collect()
}

#[test]
fn steps_see_each_others_changes_and_promotion_writes_only_what_they_touched_once() {
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    let runtime = runtime(&dir);
    let candidate = candidate(&runtime);
    let before = tree(dir.path());
    // A Monty edit, then a real command that reads the edit and writes a file.
    let edit = candidate
        .run(&RunRequest::new(
            "from pathlib import Path\nvsh_patch('src/app.py', \"'hello'\", \"'bye'\")\nPath('src/app.py').read_text()",
        ))
        .unwrap();
    assert!(edit.kept && edit.kind == StepKind::Monty, "{edit:?}");
    let read = run_command(&candidate, &["/bin/sh", "-c", "grep -c bye src/app.py > count.txt"]);
    assert_eq!((read.exit_code, read.kept), (0, true), "{read:?}");
    // A failing step is undone: what it wrote is gone, its status recorded.
    let failed = run_command(&candidate, &["/bin/sh", "-c", "echo junk > junk.txt; exit 3"]);
    assert_eq!((failed.exit_code, failed.kept), (3, false), "{failed:?}");
    assert!(candidate.has_mutated());
    assert_eq!(candidate.touched_paths(), ["count.txt", "src/app.py"]);
    let diff = candidate.realized_diff().unwrap();
    assert!(diff.contains("-    return 'hello'") && diff.contains("+    return 'bye'"), "{diff}");
    assert!(diff.contains("+++ b/count.txt") && !diff.contains("junk"), "{diff}");
    assert_eq!(tree(dir.path()), before, "nothing reaches the workspace before promotion");
    let receipt = candidate.promote().unwrap();
    assert_eq!(receipt.state, TransactionState::Committed, "{:?}", receipt.decision);
    assert_eq!(paths(&receipt), [("count.txt", DiffKind::Create), ("src/app.py", DiffKind::Modify)]);
    assert_eq!(std::fs::read_to_string(dir.path().join("count.txt")).unwrap(), "1\n");
    assert_eq!(std::fs::read_to_string(dir.path().join("src/app.py")).unwrap(), "def greet():\n    return 'bye'\n");
    assert!(!dir.path().join("junk.txt").exists());
    // The receipt is the session's: every step, kept or not, with its status.
    let ExecutionOutput::Session { steps } = &receipt.output else { panic!("{:?}", receipt.output) };
    let summary: Vec<(StepKind, i32, bool)> = steps.iter().map(|step| (step.kind, step.exit_code, step.kept)).collect();
    assert_eq!(summary, [(StepKind::Monty, 0, true), (StepKind::Command, 0, true), (StepKind::Command, 3, false)]);
    assert_eq!(receipt.output.language(), Language::Session);
    // Exactly once: the candidate takes no more steps, its transaction commits no more.
    assert!(matches!(candidate.promote(), Err(VshError::CandidatePromoted)));
    assert!(matches!(candidate.run(&RunRequest::new("1")), Err(VshError::CandidatePromoted)));
    assert!(runtime.commit(receipt.transaction, 1).is_err());
}

#[test]
fn inherited_files_are_seen_but_promoted_only_once_a_step_touches_them() {
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    let runtime = runtime(&dir);
    let predecessor = candidate(&runtime);
    run_command(&predecessor, &["/bin/sh", "-c", "mkdir -p gen && echo a > gen/a.txt && echo b > gen/b.txt"]);
    let inherited = predecessor.export_accepted().unwrap();
    assert_eq!(inherited.iter().map(|file| file.path.as_str()).collect::<Vec<_>>(), ["gen", "gen/a.txt", "gen/b.txt"]);
    let candidate = candidate(&runtime);
    candidate.restore_seeded(&inherited).unwrap();
    assert!(!candidate.has_mutated(), "inherited files are not this candidate's work");
    // A step sees them and changes one.
    let step = run_command(&candidate, &["/bin/sh", "-c", "cat gen/a.txt gen/b.txt > seen.txt; echo B > gen/b.txt"]);
    assert_eq!(step.exit_code, 0, "{step:?}");
    assert_eq!(candidate.touched_paths(), ["gen/b.txt", "seen.txt"]);
    let receipt = candidate.promote().unwrap();
    assert_eq!(receipt.state, TransactionState::Committed, "{:?}", receipt.decision);
    // The directory the touched file needs comes along; the untouched inherited file does not.
    assert_eq!(
        paths(&receipt),
        [("gen", DiffKind::Create), ("gen/b.txt", DiffKind::Create), ("seen.txt", DiffKind::Create)]
    );
    assert_eq!(std::fs::read_to_string(dir.path().join("seen.txt")).unwrap(), "a\nb\n");
    assert!(!dir.path().join("gen/a.txt").exists());
}

#[test]
fn exported_work_comes_back_promotable_and_a_workspace_changed_meanwhile_is_refused() {
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    let runtime = runtime(&dir);
    let first = candidate(&runtime);
    run_command(&first, &["/bin/sh", "-c", "echo more >> docs/notes.txt; rm README.md"]);
    let exported = first.export_accepted().unwrap();
    assert_eq!(exported.len(), 2);
    // A resumed candidate: the work is its own again.
    let resumed = candidate(&runtime);
    resumed.restore_exported(&exported).unwrap();
    assert_eq!(resumed.touched_paths(), ["README.md", "docs/notes.txt"]);
    assert_eq!(resumed.state_witness().unwrap(), first.state_witness().unwrap());
    // The workspace changed while the task was stopped: restoring refuses, naming the path.
    put(dir.path(), "docs/notes.txt", "edited meanwhile\n");
    let again = candidate(&runtime);
    match again.restore_exported(&exported) {
        Err(VshError::SeedChanged { paths }) => {
            assert_eq!(paths.iter().map(vsh::VPath::as_str).collect::<Vec<_>>(), ["docs/notes.txt"]);
        }
        other => panic!("{other:?}"),
    }
    assert!(!again.has_mutated(), "nothing of a refused restore is kept");
    // And the earlier resumed candidate, promoted now, is stale: the edit survives.
    match resumed.promote() {
        Err(VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. })) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read_to_string(dir.path().join("docs/notes.txt")).unwrap(), "edited meanwhile\n");
    assert!(dir.path().join("README.md").exists());
}

#[test]
fn a_checkpoint_is_restored_exactly() {
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    let runtime = runtime(&dir);
    let candidate = candidate(&runtime);
    run_command(&candidate, &["/bin/sh", "-c", "echo one > one.txt"]);
    let checkpoint = candidate.checkpoint();
    let witness = candidate.state_witness().unwrap();
    run_command(&candidate, &["/bin/sh", "-c", "echo two > two.txt; echo changed > one.txt; rm docs/notes.txt"]);
    assert_ne!(candidate.state_witness().unwrap().diff, witness.diff);
    candidate.restore(&checkpoint).unwrap();
    let restored = candidate.state_witness().unwrap();
    assert_eq!((restored.diff, &restored.changed), (witness.diff, &witness.changed));
    assert_eq!(candidate.touched_paths(), ["one.txt"]);
    // A checkpoint of another candidate is refused.
    let other = self::candidate(&runtime);
    assert!(matches!(other.restore(&checkpoint), Err(VshError::ForeignCheckpoint)));
    let receipt = candidate.promote().unwrap();
    assert_eq!(paths(&receipt), [("one.txt", DiffKind::Create)]);
    let ExecutionOutput::Session { steps } = &receipt.output else { panic!() };
    assert_eq!(
        steps.iter().map(|step| step.kept).collect::<Vec<_>>(),
        [true, false],
        "undone steps stay in the record"
    );
    assert_eq!(std::fs::read_to_string(dir.path().join("one.txt")).unwrap(), "one\n");
    assert!(dir.path().join("docs/notes.txt").exists() && !dir.path().join("two.txt").exists());
}

#[test]
fn an_edit_of_a_file_a_step_read_makes_promotion_stale_and_an_unrelated_edit_does_not() {
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    let runtime = runtime(&dir);
    let read_readme = || {
        let candidate = candidate(&runtime);
        run_command(&candidate, &["/bin/sh", "-c", "tr a-z A-Z < README.md > upper.txt"]);
        candidate
    };
    let stale = read_readme();
    put(dir.path(), "README.md", "# demo\nedited\n");
    match stale.promote() {
        Err(VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. })) => {}
        other => panic!("{other:?}"),
    }
    assert!(!dir.path().join("upper.txt").exists());
    let fresh = read_readme();
    put(dir.path(), "docs/notes.txt", "unrelated edit\n");
    let receipt = fresh.promote().unwrap();
    assert_eq!(receipt.state, TransactionState::Committed);
    assert_eq!(std::fs::read_to_string(dir.path().join("upper.txt")).unwrap(), "# DEMO\nEDITED\n");
}

#[test]
fn a_verifier_past_its_stage_timeout_is_killed_and_the_error_names_the_stage() {
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    let runtime = runtime(&dir);
    let mut candidate = candidate(&runtime);
    candidate
        .set_verifier_timeouts(VerifierTimeouts { test: Some(Duration::from_secs(1)), ..VerifierTimeouts::default() });
    assert_eq!(candidate.verifier_timeouts().of(VerifierStage::Build), Duration::from_mins(3));
    let started = Instant::now();
    let argv = ["/bin/sh".to_owned(), "-c".to_owned(), "echo started > started.txt; sleep 30".to_owned()];
    match candidate.verify(VerifierStage::Test, &argv, false) {
        Err(VshError::VerifierTimeout { stage: VerifierStage::Test, timeout }) => {
            assert_eq!(timeout, Duration::from_secs(1));
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(20), "killed at its timeout: {:?}", started.elapsed());
    assert!(!candidate.has_mutated(), "a timed-out verifier keeps nothing");
    // A verifier within its time is a step like any.
    let ok = ["/bin/sh".to_owned(), "-c".to_owned(), "test -f src/app.py".to_owned()];
    assert_eq!(candidate.verify(VerifierStage::Test, &ok, false).unwrap().exit_code, 0);
}

#[test]
fn a_secret_a_step_tried_to_read_denies_the_promotion() {
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    let runtime = runtime(&dir);
    let candidate = candidate(&runtime);
    let before = tree(dir.path());
    let step = run_command(&candidate, &["/bin/sh", "-c", "cat .env > leaked.txt; echo ok > ok.txt"]);
    assert_eq!(step.exit_code, 0, "the shell goes on after cat fails: {step:?}");
    // A Monty step that raises after a refusal is undone and is the step's
    // error (a run of its own would be denied work on record instead).
    let raising = "from pathlib import Path\nPath('half.txt').write_text('half')\nPath('.env').read_text()";
    let raised = candidate.run(&RunRequest::new(raising));
    assert!(matches!(raised, Err(VshError::Execution(_))), "{raised:?}");
    let looked = candidate.run(&RunRequest::new("from pathlib import Path\nPath('half.txt').exists()")).unwrap();
    assert_eq!(looked.value, Some(vsh::MontyObject::Bool(false)), "the raising step's write was undone");
    let receipt = candidate.promote().unwrap();
    assert_eq!(receipt.state, TransactionState::Denied, "{:?}", receipt.decision);
    assert_eq!(tree(dir.path()), before, "denied work writes nothing");
}

#[test]
fn work_that_needs_approval_waits_and_commits_through_the_one_commit_path() {
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    let runtime = runtime(&dir);
    let candidate = candidate(&runtime);
    // Deleting is not auto-approved under the balanced profile.
    run_command(&candidate, &["/bin/rm", "docs/notes.txt"]);
    let receipt = candidate.promote().unwrap();
    assert_eq!(receipt.state, TransactionState::PendingApproval, "{:?}", receipt.decision);
    assert!(dir.path().join("docs/notes.txt").exists());
    runtime.approve(receipt.transaction, PrincipalId::digest(b"reviewer"), 1_000, u64::MAX).unwrap();
    let committed = runtime.commit(receipt.transaction, 2_000).unwrap();
    assert_eq!(committed.state, TransactionState::Committed);
    assert!(!dir.path().join("docs/notes.txt").exists());
    // The stored program is the session's transcript, bound like any program.
    let stored = runtime.stored_program(receipt.transaction).unwrap().expect("a stored program");
    assert_eq!(stored.language, Language::Session);
    assert!(
        stored.code.contains("\"kind\":\"command\"") && stored.intent.contains("candidate n1 generation 3"),
        "{stored:?}"
    );
}

#[test]
fn without_the_privilege_to_mount_creation_fails_closed_naming_what_is_missing() {
    if !vsh_integration_tests::as_unprivileged_user(
        "without_the_privilege_to_mount_creation_fails_closed_naming_what_is_missing",
    ) {
        return;
    }
    // As nobody: /dev/fuse may open, mounting in a namespace of one's own may not.
    let dir = fixture();
    let runtime = Arc::new(Runtime::open(vsh::RuntimeConfig::new(dir.path()).with_in_process_execution()).unwrap());
    for allow_unisolated in [false, true] {
        match CandidateWorkspace::create_with_policy(Arc::clone(&runtime), label(), allow_unisolated) {
            Err(VshError::CandidateUnavailable(missing)) => {
                assert!(!missing.remedy().is_empty());
                assert!(missing.to_string().contains("/dev/fuse") || missing.to_string().contains("root"), "{missing}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn steps_of_a_candidate_allowing_unisolated_verifiers_say_so_in_the_receipt() {
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    let runtime = runtime(&dir);
    let confined = candidate(&runtime);
    assert!(!confined.allows_unisolated_verifiers());
    assert!(!run_command(&confined, &["/bin/true"]).unisolated);
    let candidate = CandidateWorkspace::create_with_policy(Arc::clone(&runtime), label(), true).unwrap();
    let step = run_command(&candidate, &["/bin/sh", "-c", "echo x > x.txt"]);
    assert!(step.unisolated && step.kept, "{step:?}");
    let receipt = candidate.promote().unwrap();
    let document = vsh::document::ReceiptDocument::from(&receipt);
    let steps = document.steps.expect("a session's steps");
    assert!(steps[0].unisolated, "{steps:?}");
}

#[test]
fn the_seed_host_over_a_candidate_reads_writes_and_runs_commands_in_it() {
    use vsh::lower::vsh_tools::{ExecLimits, ExecRequest, FsError, PathError};
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    let runtime = runtime(&dir);
    let candidate = Arc::new(candidate(&runtime));
    let host = candidate.host(ExecLimits::default());
    let root = host.workspace_root().to_path_buf();
    assert_eq!(root, dir.path().canonicalize().unwrap(), "the jail root is where the workspace is");
    let before = tree(dir.path());
    // Files: the candidate's, never the disk's.
    assert_eq!(host.read_file_sync(&root, Path::new("README.md")).unwrap().contents, "# demo\nhello world\n");
    let written = host.write_file_sync(&root, Path::new("src/new.py"), "x = 1\n").unwrap();
    assert_eq!(written.len, 6);
    assert!(host.stat_sync(&root, Path::new("src/new.py")).unwrap().is_file());
    let mut names: Vec<String> =
        host.read_dir_sync(&root, Path::new(".")).unwrap().into_iter().map(|entry| entry.name).collect();
    names.sort();
    assert_eq!(names, ["README.md", "docs", "src"], "the secret is not listed");
    assert!(matches!(host.resolve_in_jail_sync(&root, Path::new("../elsewhere")), Err(PathError::Escape { .. })));
    // Commands: in the candidate, seeing what the host wrote; their changes are the candidate's.
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let out =
        tokio.block_on(host.exec(ExecRequest::new("cat src/new.py; echo made > made.txt", &root), &cancel)).unwrap();
    assert_eq!((out.exit_code, out.stdout.as_str()), (Some(0), "x = 1\n"), "{out:?}");
    let pwd = tokio.block_on(host.run_capture(Path::new("/bin/pwd"), &[], &root.join("src"), None, &cancel)).unwrap();
    assert_eq!(pwd.stdout.trim_end(), root.join("src").to_str().unwrap(), "the working directory is honoured");
    let slow = ExecRequest::new("sleep 30", &root).with_timeout(Duration::from_secs(1));
    let started = Instant::now();
    let timed = tokio.block_on(host.exec(slow, &cancel)).unwrap();
    assert!(timed.timed_out && started.elapsed() < Duration::from_secs(20), "{timed:?}");
    assert_eq!(tree(dir.path()), before, "nothing reached the workspace");
    let receipt = candidate.promote().unwrap();
    assert_eq!(receipt.state, TransactionState::Committed, "{:?}", receipt.decision);
    assert_eq!(paths(&receipt), [("made.txt", DiffKind::Create), ("src/new.py", DiffKind::Create)]);
    let ExecutionOutput::Session { steps } = &receipt.output else { panic!() };
    assert!(steps.iter().any(|step| step.kind == StepKind::HostWrite && step.program.contains("src/new.py")));
    // A secret read through the host is refused, and denies.
    let probe = Arc::new(self::candidate(&runtime));
    let host = probe.host(ExecLimits::default());
    match host.read_file_sync(&root, Path::new(".env")) {
        Err(FsError::Path(PathError::Io { source, .. }) | FsError::Io { source, .. }) => {
            assert_eq!(source.errno(), Some(13), "refused as EACCES: {source:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(probe.promote().unwrap().state, TransactionState::Denied);
}

#[test]
fn scratch_directories_are_never_cleared_under_a_running_command_and_are_cleared_after() {
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    put(dir.path(), "Cargo.toml", "");
    let runtime = runtime(&dir);
    let scratch = dir.path().join(".vsh/data/scratch/target");
    let built = scratch.join("built.txt");
    let code =
        command(&["/bin/sh", "-c", "echo artefact > target/built.txt; while [ ! -e target/go ]; do sleep 0.05; done"]);
    let running = {
        let runtime = Arc::clone(&runtime);
        std::thread::spawn(move || runtime.preview(&RunRequest::new(&code).with_language(Language::Command)))
    };
    let started = Instant::now();
    // Made, then written: wait for what it writes, not the name.
    while std::fs::read(&built).ok().as_deref() != Some(b"artefact\n") {
        assert!(started.elapsed() < Duration::from_mins(1), "the command never wrote its scratch file");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The build is running: its scratch directory is left alone, by a
    // forced clear and by the retention bound alike.
    let busy = runtime.clear_scratch().unwrap();
    assert!(busy.busy && busy.cleared.is_empty(), "{busy:?}");
    let retention = vsh::RetentionConfig { max_scratch_bytes: Some(0), ..vsh::RetentionConfig::default() };
    assert!(runtime.collect_garbage(0, &retention).unwrap().scratch.busy);
    assert_eq!(std::fs::read(&built).unwrap(), b"artefact\n");
    std::fs::write(scratch.join("go"), b"").unwrap();
    let receipt = running.join().unwrap().unwrap();
    assert_eq!(receipt.changed_paths, 0, "scratch output is never in the diff");
    // Over the bound once the run is over: cleared, the directory kept.
    let report = runtime.collect_garbage(0, &retention).unwrap().scratch;
    assert!(!report.busy && report.cleared.contains(&"target".to_owned()), "{report:?}");
    assert!(report.bytes_removed >= "artefact\n".len() as u64);
    assert!(scratch.is_dir(), "the directory stays");
    assert!(
        !built.exists(),
        "{:?}",
        std::fs::read_dir(&scratch).unwrap().map(|e| e.unwrap().file_name()).collect::<Vec<_>>()
    );
}

#[test]
fn a_candidates_image_is_bounded_and_a_step_past_the_bound_is_undone() {
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    let runtime = runtime(&dir);
    let candidate = candidate(&runtime).with_max_image_bytes(1_000);
    // 640 bytes fit; README.md, still the workspace's, costs nothing.
    let small = run_command(
        &candidate,
        &["/bin/sh", "-c", "i=0; while [ $i -lt 20 ]; do printf '%032d' $i >> small.txt; i=$((i+1)); done"],
    );
    assert!(small.kept, "{small:?}");
    let witness = candidate.state_witness().unwrap();
    // 640 more would be 1,280: refused, and the step's file is gone.
    let code =
        command(&["/bin/sh", "-c", "i=0; while [ $i -lt 20 ]; do printf '%032d' $i >> more.txt; i=$((i+1)); done"]);
    let refused = candidate.run(&RunRequest::new(&code).with_language(Language::Command));
    assert!(matches!(refused, Err(VshError::CandidateImageFull { bytes: 1_280, max: 1_000 })), "{refused:?}");
    assert_eq!(candidate.state_witness().unwrap(), witness, "the refused step left nothing");
    // Restored work is held to the same bound, all or nothing.
    let big = vsh::SeedFile {
        path: vsh::VPath::parse("restored.bin").unwrap(),
        node: Some(vsh::SeedNode::File { bytes: vec![b'x'; 500], mode: 0o644 }),
        before: None,
    };
    let restored = candidate.restore_exported(&[big]);
    assert!(matches!(restored, Err(VshError::CandidateImageFull { bytes: 1_140, .. })), "{restored:?}");
    assert_eq!(candidate.state_witness().unwrap(), witness);
    // Within the bound, work goes on.
    assert!(run_command(&candidate, &["/bin/sh", "-c", "echo ok > ok.txt"]).kept);
}

#[test]
fn a_command_that_leaves_a_setuid_or_setgid_file_is_denied_and_nothing_is_written() {
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    put(dir.path(), "bin/tool", "#!/bin/sh\n");
    let before = tree(dir.path());
    let runtime = runtime(&dir);
    for script in
        ["cp /bin/true made; chmod 4755 made", "chmod 2755 bin/tool", "echo x >> bin/tool; chmod g+s bin/tool"]
    {
        let code = command(&["/bin/sh", "-c", script]);
        let receipt =
            runtime.run(&RunRequest::new(&code).with_language(Language::Command).with_mode(vsh::RunMode::Auto));
        let receipt = receipt.unwrap();
        let vsh::RuntimeDecision::Denied(manifest) = &receipt.decision else {
            panic!("{script}: expected a denial, got {:?}", receipt.decision);
        };
        assert_eq!(manifest.reason, vsh::DenyReason::SetuidFile, "{script}");
        assert_eq!(tree(dir.path()), before, "{script}: nothing is written");
    }
}

#[test]
fn permissions_a_command_changes_with_the_content_or_opens_to_everyone_wait_for_a_reviewer() {
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    put(dir.path(), "db.yml", "password: a\n");
    std::fs::set_permissions(dir.path().join("db.yml"), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let before = tree(dir.path());
    let runtime = runtime(&dir);
    let flags = |script: &str| {
        let code = command(&["/bin/sh", "-c", script]);
        let request = RunRequest::new(&code).with_language(Language::Command).with_mode(vsh::RunMode::Auto);
        match runtime.run(&request).unwrap().decision {
            vsh::RuntimeDecision::PendingApproval(manifest) => manifest.flags,
            decision => panic!("{script}: expected to wait for a reviewer, got {decision:?}"),
        }
    };
    for script in [
        "echo 'password: b' > db.yml; chmod 644 db.yml",
        "mkdir -m 777 open; echo x > open/w.txt",
        "umask 0; echo x > w.txt",
        // A private file's content copied into one others may read.
        "cp db.yml copy.yml; chmod 644 copy.yml",
        "cat db.yml > leak.txt",
        // In any other form as well (sec69 F3: only an exact copy waited).
        "cat db.yml >> README.md",
        "(echo x; cat db.yml) > copy2.yml",
        "base64 db.yml > b64.txt",
        "sed s/password/PASSWORD/ db.yml > c3.yml",
    ] {
        assert_eq!(flags(script), [vsh::RiskFlag::PermissionChange], "{script}");
        assert_eq!(tree(dir.path()), before, "{script}: nothing is written");
    }
    // An edit that keeps the bits is the edit alone, and so is a copy of
    // what others could read already.
    for script in
        ["echo 'password: b' > db.yml", "cp README.md copy.md", "cp db.yml private.yml; chmod 600 private.yml"]
    {
        let code = command(&["/bin/sh", "-c", script]);
        let edited = runtime.run(&RunRequest::new(&code).with_language(Language::Command)).unwrap();
        assert_eq!(edited.decision, vsh::RuntimeDecision::AutoApproved, "{script}");
    }
    // A Monty program's copy alike.
    let monty = "from pathlib import Path\nPath('copy.yml').write_text(Path('db.yml').read_text())";
    match runtime.run(&RunRequest::new(monty)).unwrap().decision {
        vsh::RuntimeDecision::PendingApproval(manifest) => {
            assert_eq!(manifest.flags, [vsh::RiskFlag::PermissionChange]);
        }
        decision => panic!("a Monty copy of a private file: {decision:?}"),
    }
}

#[test]
fn a_file_a_command_makes_is_created_however_it_is_written_so_a_modify_rule_leaves_it_alone() {
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    put(dir.path(), "migrations/001.sql", "create table a;\n");
    let policy = "version = 1\n[[protect]]\npattern = \"migrations/**\"\naccess = \"modify\"\nreason = \"applied\"\n";
    let runtime = Arc::new(Runtime::open(config(dir.path()).with_commands().with_policy_text(policy)).unwrap());
    let decide = |script: &str| {
        let code = command(&["/bin/sh", "-c", script]);
        let request = RunRequest::new(&code).with_language(Language::Command).with_detail(vsh::ReceiptDetail::Changes);
        runtime.run(&request).unwrap()
    };
    // A new migration: made, then written (and appended to), a create in
    // the diff and to the policy alike.
    let made = decide("printf 'create table b;\\n' > migrations/002.sql; echo '-- b' >> migrations/002.sql");
    assert_eq!(made.decision, vsh::RuntimeDecision::AutoApproved, "{:?}", made.decision);
    assert_eq!(paths(&made), [("migrations/002.sql", DiffKind::Create)]);
    // One that exists is protected from change, written or appended to.
    for script in ["echo '-- x' >> migrations/001.sql", "printf 'drop;\\n' > migrations/001.sql"] {
        let changed = decide(script);
        assert!(matches!(changed.decision, vsh::RuntimeDecision::Denied(_)), "{script}: {:?}", changed.decision);
    }
    // A Monty program alike: its second write to a file it made is no modify.
    let monty = "from pathlib import Path\np = Path('migrations/003.sql')\np.write_text('a')\np.write_text('b')";
    let written = runtime.run(&RunRequest::new(monty)).unwrap();
    assert_eq!(written.decision, vsh::RuntimeDecision::AutoApproved, "{:?}", written.decision);
}

/// A command stopped before it filled the disk of the scratch directories
/// leaves nothing there: what it wrote is freed before the run returns.
#[test]
fn a_command_stopped_for_the_disk_space_it_took_has_what_it_wrote_freed_at_once() {
    if !candidates_available() {
        return;
    }
    let disk = vsh_integration_tests::SmallDisk::mount("64m");
    let dir = workspace(&[("src.txt", "v1\n"), ("Cargo.toml", "")]);
    let data = disk.path().join("data");
    let runtime = Runtime::open(config(dir.path()).with_commands().with_data_directory(&data)).unwrap();
    let code = command(&[
        "/bin/sh",
        "-c",
        "head -c 8000000 /dev/zero > target/kept; head -c 40000000 /dev/zero > target/big; sleep 5",
    ]);
    let error = runtime.run(&RunRequest::new(&code).with_language(Language::Command)).unwrap_err();
    assert!(
        matches!(&error, VshError::Execution(execution)
            if matches!(execution.as_ref(), vsh::lower::vsh_monty::ExecutionError::Limit { limit, .. }
                if limit.limit == vsh::lower::vsh_monty::LimitKind::DiskSpace)),
        "{error:?}"
    );
    let target = data.join("scratch/target");
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0, "what it wrote was freed");
}

/// An outside probe planted Python bytecode in the scratch directories from
/// a run that changed nothing, and a later run given a token executed it.
/// The scratch directories belong to one set of grants at a time: a run
/// granted otherwise finds them empty, and the next plain run finds its own
/// again, never what the token's run built (which may hold the token).
#[test]
fn a_run_granted_otherwise_never_finds_what_other_runs_left_in_the_scratch_directories() {
    if !candidates_available() {
        return;
    }
    let dir = workspace(&[("src.txt", "v1\n"), ("Cargo.toml", "")]);
    let plain = runtime(&dir);
    let granted =
        Arc::new(Runtime::open(config(dir.path()).with_commands().with_command_env([("TOKEN", "tok-1")])).unwrap());
    let run = |runtime: &Arc<Runtime>, script: &str| {
        let code = command(&["/bin/sh", "-c", script]);
        let receipt = runtime.run(&RunRequest::new(&code).with_language(Language::Command)).unwrap();
        match &receipt.output {
            ExecutionOutput::Bash(result) => String::from_utf8_lossy(&result.stdout).into_owned(),
            other => panic!("{other:?}"),
        }
    };
    // A plain run plants something and changes nothing; the next plain run finds it.
    assert_eq!(run(&plain, "echo planted > target/code; ls target"), "code\n");
    assert_eq!(run(&plain, "ls target"), "code\n", "runs granted alike share the directories");
    // A run given a token finds them empty, leaves what it built, and its
    // receipt says why it built from nothing (ux52); a run granted alike
    // after it says nothing.
    let code = command(&["/bin/sh", "-c", "ls target; echo \"$TOKEN\" > target/built; ls target"]);
    let regranted = granted.run(&RunRequest::new(&code).with_language(Language::Command)).unwrap();
    assert!(regranted.warnings.contains(&vsh::Warning::ScratchRegranted), "{:?}", regranted.warnings);
    match &regranted.output {
        ExecutionOutput::Bash(result) => assert_eq!(String::from_utf8_lossy(&result.stdout), "built\n"),
        other => panic!("{other:?}"),
    }
    let alike = granted.run(&RunRequest::new(&command(&["true"])).with_language(Language::Command)).unwrap();
    assert!(!alike.warnings.contains(&vsh::Warning::ScratchRegranted), "{:?}", alike.warnings);
    assert_eq!(run(&granted, "cat target/built"), "tok-1\n", "and its next run builds on it");
    // The next plain run finds nothing of the token's run, but its own
    // builds again, kept aside for it (ux58 3: a `git status` between two
    // `cargo test`s made the second build from nothing); and so does the
    // token's next run.
    assert_eq!(run(&plain, "ls target; cat target/built 2>/dev/null; echo end"), "code\nend\n");
    assert_eq!(run(&granted, "ls target; cat target/built"), "built\ntok-1\n");
    // Two sets are kept aside: a third set of grants finds nothing, and
    // both others find their own again after it (ux59 1).
    let third =
        Arc::new(Runtime::open(config(dir.path()).with_commands().with_command_env([("TOKEN", "tok-2")])).unwrap());
    assert_eq!(run(&third, "ls target; echo end > target/third; echo end"), "end\n");
    assert_eq!(run(&plain, "ls target; echo end"), "code\nend\n");
    assert_eq!(run(&granted, "cat target/built"), "tok-1\n");
    // A fourth set discards the oldest kept (the third's was kept last but
    // one), never handing any set another's build.
    let fourth =
        Arc::new(Runtime::open(config(dir.path()).with_commands().with_command_env([("TOKEN", "tok-3")])).unwrap());
    assert_eq!(run(&fourth, "ls target; echo done > target/fourth; echo end"), "end\n");
    assert_eq!(run(&third, "ls target; echo end"), "end\n");
}

/// ux54 #4: a policy replaced by one that only moves a threshold emptied
/// the scratch directories and blamed the commands' grants. What a build
/// may keep is what the policy's rules let it read: a threshold keeps the
/// build, a rule changed empties it, and the receipt names the policy.
#[test]
fn scratch_is_kept_across_a_threshold_change_and_emptied_for_changed_rules_saying_so() {
    if !candidates_available() {
        return;
    }
    let dir = workspace(&[("src.txt", "v1\n"), ("Cargo.toml", "")]);
    let policy = |threshold: u32, rule: &str| {
        let text = format!(
            "version = 1\n[thresholds]\nescalate_touched_paths = {threshold}\n[[protect]]\npattern = \"{rule}\"\n\
             access = \"mutations\"\n"
        );
        Arc::new(Runtime::open(config(dir.path()).with_commands().with_policy_text(text)).unwrap())
    };
    let run = |runtime: &Arc<Runtime>, script: &str| {
        let code = command(&["/bin/sh", "-c", script]);
        let receipt = runtime.run(&RunRequest::new(&code).with_language(Language::Command)).unwrap();
        let ExecutionOutput::Bash(result) = &receipt.output else { panic!("{:?}", receipt.output) };
        (String::from_utf8_lossy(&result.stdout).into_owned(), receipt.warnings.clone())
    };
    let (_, first) = run(&policy(500, "config/**"), "echo built > target/out");
    assert!(!first.contains(&vsh::Warning::ScratchRepolicied), "{first:?}");
    // A threshold moved: the build is kept, and nothing is said.
    let (listed, warnings) = run(&policy(400, "config/**"), "ls target");
    assert_eq!(listed, "out\n", "{warnings:?}");
    assert!(
        !warnings.iter().any(|w| matches!(w, vsh::Warning::ScratchRegranted | vsh::Warning::ScratchRepolicied)),
        "{warnings:?}"
    );
    // A rule changed: emptied first, and the policy is named, not the grants.
    let (listed, warnings) = run(&policy(400, "secrets/**"), "ls target; echo end");
    assert_eq!(listed, "end\n");
    assert!(warnings.contains(&vsh::Warning::ScratchRepolicied), "{warnings:?}");
    assert!(!warnings.contains(&vsh::Warning::ScratchRegranted), "{warnings:?}");
}

/// sec51 F5: what commands leave in the scratch directories is bounded for
/// the next run: past the bound they are cleared after the run that filled
/// them, and its receipt says so; within it they are kept.
#[test]
fn scratch_directories_past_their_bound_are_cleared_after_the_run_that_filled_them() {
    if !candidates_available() {
        return;
    }
    let dir = workspace(&[("Cargo.toml", ""), ("src.txt", "v1\n")]);
    let run = |runtime: &Runtime, script: &str| {
        let code = command(&["/bin/sh", "-c", script]);
        runtime.run(&RunRequest::new(&code).with_language(Language::Command)).unwrap()
    };
    let printed = |receipt: &vsh::Receipt| match &receipt.output {
        ExecutionOutput::Bash(result) => String::from_utf8_lossy(&result.stdout).into_owned(),
        other => panic!("{other:?}"),
    };
    let within = Runtime::open(config(dir.path()).with_commands()).unwrap();
    let built = run(&within, "head -c 65536 /dev/zero > target/out");
    assert!(!built.warnings.iter().any(|warning| matches!(warning, vsh::Warning::ScratchCleared { .. })));
    assert_eq!(printed(&run(&within, "ls target")), "out\n", "within the bound: kept");
    drop(within);
    let bounded = Runtime::open(config(dir.path()).with_commands().with_scratch_bound(0)).unwrap();
    let filled = run(&bounded, "head -c 65536 /dev/zero > target/more");
    let cleared = filled.warnings.iter().find_map(|warning| match warning {
        vsh::Warning::ScratchCleared { bytes, max } => Some((*bytes, *max)),
        _ => None,
    });
    let (bytes, max) = cleared.unwrap_or_else(|| panic!("{:?}", filled.warnings));
    assert!(bytes >= 2 * 65536 && max == 0, "{bytes} {max}");
    assert_eq!(printed(&run(&bounded, "ls target; echo end")), "end\n", "past the bound: cleared");
    // sec55 F1: a tree of directories too deep to measure by path (or to
    // empty one level a stack frame) is past any bound, and is cleared
    // without harm to vsh; the next run finds it gone.
    let code = command(&[
        "/usr/bin/python3",
        "-c",
        "import os\nos.chdir('target')\nfor _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')",
    ]);
    let deep = bounded.run(&RunRequest::new(&code).with_language(Language::Command)).unwrap();
    assert!(deep.warnings.contains(&vsh::Warning::ScratchCleared { bytes: u64::MAX, max: 0 }), "{:?}", deep.warnings);
    assert_eq!(printed(&run(&bounded, "ls target; echo end")), "end\n");
}

/// ux55 #3: a build that writes a file into the workspace (cargo's
/// `Cargo.lock`, ignored by git) made uncommitted work every run, and every
/// next run built from nothing with no word of why. The warning names what
/// that stored work changed and the commit that ends it.
#[test]
fn emptied_scratch_names_what_the_uncommitted_work_changed_and_how_to_end_it() {
    if !candidates_available() {
        return;
    }
    let dir = workspace(&[("Cargo.toml", "[package]\n"), ("src.txt", "v1\n")]);
    let runtime =
        Runtime::open(config(dir.path()).with_commands().with_durable_previews(vsh::DurablePreviews::default()))
            .unwrap();
    let run = |script: &str| {
        let code = command(&["/bin/sh", "-c", script]);
        runtime.run(&RunRequest::new(&code).with_language(Language::Command)).unwrap()
    };
    let locked = run("touch target/mark; echo lock > Cargo.lock");
    assert_eq!(locked.changed_paths, 1);
    let emptied = |receipt: &vsh::Receipt| {
        receipt.warnings.iter().find_map(|warning| match warning {
            vsh::Warning::ScratchEmptied { uncommitted, changes, again } => {
                Some((uncommitted.clone(), changes.clone(), again.clone()))
            }
            _ => None,
        })
    };
    // The next run makes the change again (cargo writes its lock each
    // time): the warning names the earlier work and what it changed, and
    // this run as the one to commit (ux56 #1).
    let next = run("ls target; touch target/mark; echo lock > Cargo.lock");
    let (uncommitted, changes, again) = emptied(&next).unwrap_or_else(|| panic!("{:?}", next.warnings));
    assert_eq!((uncommitted, changes), (vec![locked.transaction.to_hex()], vec!["create Cargo.lock".to_owned()]));
    assert_eq!(again, Some(next.transaction.to_hex()));
    let text = next.warnings.iter().map(ToString::to_string).collect::<String>();
    assert!(
        text.contains("and this run did again")
            && text.contains(&format!("(vsh commit {})", &next.transaction.to_hex()[..12])),
        "{text}"
    );
    // Made again and committed at once (mode auto), it asks for no commit
    // any more (ux62 7: it named the very transaction just committed); the
    // next build is incremental.
    let code = command(&["/bin/sh", "-c", "ls target; touch target/mark; echo lock > Cargo.lock"]);
    let auto = RunRequest::new(&code).with_language(Language::Command).with_mode(vsh::RunMode::Auto);
    let committed = runtime.run(&auto).unwrap();
    assert_eq!(committed.state, vsh::TransactionState::Committed, "{:?}", committed.decision);
    let (_, changes, again) = emptied(&committed).unwrap_or_else(|| panic!("{:?}", committed.warnings));
    assert!(changes.is_empty() && again.is_none(), "{changes:?} {again:?}");
    let text = committed.warnings.iter().map(ToString::to_string).collect::<String>();
    assert!(!text.contains("vsh commit"), "{text}");
    let after = run("ls target; echo lock > Cargo.lock");
    assert!(emptied(&after).is_none(), "{:?}", after.warnings);
    let ExecutionOutput::Bash(result) = &after.output else { panic!("{:?}", after.output) };
    assert_eq!(String::from_utf8_lossy(&result.stdout), "mark\n");
}

#[test]
fn a_build_from_a_change_never_committed_is_not_reused_and_a_committed_one_keeps_the_build_incremental() {
    if !candidates_available() {
        return;
    }
    let dir = workspace(&[
        ("Makefile", "target/out: src.txt\n\tcp src.txt target/out\n"),
        ("src.txt", "v1\n"),
        ("pom.xml", ""),
    ]);
    let runtime = runtime(&dir);
    let build = |script: &str| {
        let code = command(&["/bin/sh", "-c", &format!("{script}make -s target/out && cat target/out")]);
        runtime.run(&RunRequest::new(&code).with_language(Language::Command)).unwrap()
    };
    let printed = |receipt: &vsh::Receipt| match &receipt.output {
        ExecutionOutput::Bash(result) => String::from_utf8_lossy(&result.stdout).into_owned(),
        other => panic!("{other:?}"),
    };
    let scratch = dir.path().join(".vsh/data/scratch/target");
    // A build of the workspace as it is, and a mark it leaves.
    assert_eq!(printed(&build("touch target/mark; ")), "v1\n");
    assert!(scratch.join("mark").exists());
    // A run that changes the source and builds: its output is v2, newer
    // than the workspace's own src.txt. It is never committed.
    let changed = build("sleep 0.02; echo v2 > src.txt; ");
    assert_eq!(printed(&changed), "v2\n");
    assert_eq!(changed.changed_paths, 1);
    assert!(runtime.discard_preview(changed.transaction).unwrap());
    // The next build is of the workspace, not of the change: the scratch
    // directory was emptied first (the mark is gone), and its receipt says
    // so, naming the work never committed.
    let rebuilt = build("test -e target/mark && echo kept; touch target/mark; ");
    assert_eq!(printed(&rebuilt), "v1\n");
    // (Discarded: nothing of what it changed is stored to name.)
    let emptied =
        vsh::Warning::ScratchEmptied { uncommitted: vec![changed.transaction.to_hex()], changes: vec![], again: None };
    assert!(rebuilt.warnings.contains(&emptied), "{:?}", rebuilt.warnings);
    assert!(emptied.to_string().contains(&changed.transaction.to_hex()[..12]), "{emptied}");
    // A change that is committed: the commit's new file is newer than the
    // run's output, so the next build sees it, and the directory is kept.
    let committed = build("sleep 0.02; echo v3 > src.txt; ");
    assert_eq!(printed(&committed), "v3\n");
    runtime.commit(committed.transaction, 1).unwrap();
    assert_eq!(std::fs::read_to_string(dir.path().join("src.txt")).unwrap(), "v3\n");
    let incremental = build("");
    assert_eq!(printed(&incremental), "v3\n");
    assert!(scratch.join("mark").exists(), "a committed change keeps the build incremental");
    assert!(incremental.warnings.is_empty(), "{:?}", incremental.warnings);
    // A change undone before the run ends is in no diff, and the commit of
    // what the diff holds leaves src.txt as old as it was: the build from
    // the undone change is not reused.
    let script = "cp src.txt /tmp/kept; sleep 0.02; echo v9 > src.txt; make -s target/out; cat target/out; \
                  cp /tmp/kept src.txt; echo n > NOTES";
    let code = command(&["/bin/sh", "-c", script]);
    let undone = runtime.run(&RunRequest::new(&code).with_language(Language::Command)).unwrap();
    assert_eq!(printed(&undone), "v9\n", "target/out holds v9; src.txt is v3 again");
    assert_eq!(undone.changed_paths, 1, "NOTES alone");
    runtime.commit(undone.transaction, 2).unwrap();
    assert_eq!(printed(&build("")), "v3\n", "the output built from v9 was not reused");
    // A change written to a temporary file renamed over its target (as `sed
    // -i` writes) is on disk whole once committed, and the temporary file on
    // no disk: the build stays incremental, and no warning names the work.
    assert_eq!(printed(&build("touch target/mark; ")), "v3\n");
    let renamed = build("sleep 0.02; echo v4 > src.tmp; mv src.tmp src.txt; ");
    assert_eq!(printed(&renamed), "v4\n");
    assert_eq!(renamed.changed_paths, 1, "src.txt alone");
    runtime.commit(renamed.transaction, 3).unwrap();
    let incremental = build("");
    assert_eq!(printed(&incremental), "v4\n");
    assert!(scratch.join("mark").exists(), "a change renamed into place keeps the build incremental");
    assert!(incremental.warnings.is_empty(), "{:?}", incremental.warnings);
}

/// A real command that replaces a file unread (`>`, `cp` over it, a write
/// into its middle: sec74 F1), or removes it (ux69 H3), after the user
/// changed it since the program read it waits for a reviewer
/// (`unseen-change`); what a real command read in between is no sighting
/// (a test run reads sources it never shows: ux69 H2); one that reads it
/// first (`sed -i`, `>>` appends to it) goes as before.
#[test]
fn a_command_that_replaces_unread_a_file_changed_since_vsh_saw_it_waits_for_a_reviewer() {
    if !candidates_available() {
        return;
    }
    let dir = fixture();
    let runtime = runtime(&dir);
    let run = |script: &str| {
        let code = command(&["/bin/sh", "-c", script]);
        runtime.run(&RunRequest::new(&code).with_language(Language::Command).with_mode(vsh::RunMode::Auto)).unwrap()
    };
    let unseen = |receipt: &vsh::Receipt| match &receipt.decision {
        vsh::RuntimeDecision::PendingApproval(manifest) => manifest.flags.contains(&vsh::RiskFlag::UnseenChange),
        _ => false,
    };
    let read =
        "from pathlib import Path\nfor p in ['docs/notes.txt', 'README.md', 'src/app.py']:\n    Path(p).read_text()";
    assert_eq!(runtime.run(&RunRequest::new(read)).unwrap().changed_paths, 0);
    put(dir.path(), "docs/notes.txt", "notes\nmine\n");
    put(dir.path(), "README.md", "# demo\nhello world\nmine\n");
    assert_eq!(run("cat docs/notes.txt README.md > /dev/null").state, TransactionState::Committed);
    // Settled: a removal knows the file by its stamp alone, not its digest.
    std::thread::sleep(Duration::from_millis(300));
    let before = tree(dir.path());
    for script in [
        "echo new > docs/notes.txt",
        "cp src/app.py README.md",
        "printf XY | dd of=README.md conv=notrunc 2>/dev/null",
        "rm docs/notes.txt",
        // A command's read is no reading of the program's: it read the
        // file and replaced it (sec75 F1), or searched it (sec76 H1) ...
        "cat README.md > /dev/null; cp src/app.py README.md",
        "grep -q nothing docs/notes.txt; echo new > docs/notes.txt",
        // ... and so even an edit in place waits, for a file changed since
        // the program read it (a reviewer sees only the edit's own change).
        "sed -i s/notes/NOTES/ docs/notes.txt",
    ] {
        let replaced = run(script);
        assert!(unseen(&replaced), "{script}: {:?}", replaced.decision);
        assert_eq!(tree(dir.path()), before, "{script}: nothing is written");
    }
    // A Monty program's write after a command read the file alike (sec76 H1).
    let after_grep = "vsh_exec(['grep', '-rn', 'TODO', '.'])\nvsh_write('docs/notes.txt', 'notes\\nagent\\n')";
    let judged = runtime.run(&RunRequest::new(after_grep).with_mode(vsh::RunMode::Auto)).unwrap();
    assert!(unseen(&judged), "{:?}", judged.decision);
    assert_eq!(tree(dir.path()), before);
    // An edit in place of a file unchanged since the program read it, and
    // an append, go as before.
    for script in ["sed -i s/greet/hello/ src/app.py", "echo more >> README.md"] {
        let edited = run(script);
        assert_eq!(edited.state, TransactionState::Committed, "{script}: {:?}", edited.decision);
    }
    assert_eq!(std::fs::read_to_string(dir.path().join("src/app.py")).unwrap(), "def hello():\n    return 'hello'\n");
}

/// sec94 M1: work that writes a file it never read (a job file `mktemp`
/// names) is not stale for another run's commit, so two reruns made as
/// previews before either was committed, each committed later, did it
/// twice. A rerun's commit is refused once a run of its work was committed
/// after it was made; nothing is written, and it is recorded failed.
#[test]
fn reruns_made_before_either_committed_commit_once() {
    if !candidates_available() {
        return;
    }
    let dir = workspace(&[("README.md", "# jobs\n")]);
    let runtime =
        Runtime::open(config(dir.path()).with_commands().with_durable_previews(vsh::DurablePreviews::default()))
            .unwrap();
    let code = command(&["/bin/sh", "-c", "echo job > \"$(mktemp -p . job.XXXXXX)\""]);
    let first = runtime.run(&RunRequest::new(&code).with_language(Language::Command)).unwrap().transaction;
    let rerun = || {
        let so_far = runtime.work_done_so_far(first).unwrap();
        runtime
            .run(&RunRequest::new(&code).with_language(Language::Command).with_rerun_of(first).with_done_so_far(so_far))
    };
    let (one, two) = (rerun().unwrap().transaction, rerun().unwrap().transaction);
    let now = || {
        u64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()).unwrap()
    };
    assert_eq!(runtime.commit(one, now()).unwrap().state, vsh::TransactionState::Committed);
    let refused = runtime.commit(two, now()).expect_err("its work is done");
    assert!(
        matches!(refused, vsh::VshError::DoneMeanwhile { transaction, by } if transaction == two && by == one),
        "{refused:?}"
    );
    let jobs = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().file_name().to_string_lossy().starts_with("job."));
    assert_eq!(runtime.transaction(two).unwrap().map(|record| record.state), Some(vsh::TransactionState::Failed));
    // The first run, still waiting, is that work too (sec95 M1: committed
    // after its rerun, it did it twice).
    let first_again = runtime.commit(first, now()).expect_err("its work is done");
    assert!(matches!(first_again, vsh::VshError::DoneMeanwhile { by, .. } if by == one), "{first_again:?}");
    assert_eq!(jobs.count(), 1, "one job file");
}

/// sec96 L2: approved work another run of the same work did already stayed
/// listed approved, its commit refused every time. It is recorded failed.
#[test]
fn approved_work_done_by_another_run_is_recorded_failed() {
    if !candidates_available() {
        return;
    }
    let dir = workspace(&[("README.md", "# jobs\n")]);
    let config = config(dir.path()).with_commands().with_durable_previews(vsh::DurablePreviews::default());
    let runtime = Runtime::open(config.with_policy_profile(vsh::PolicyProfile::Strict)).unwrap();
    let code = command(&["/bin/sh", "-c", "echo job > \"$(mktemp -p . job.XXXXXX)\""]);
    let now = || {
        u64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()).unwrap()
    };
    let approve = |id| runtime.approve(id, PrincipalId::digest(b"lead"), now(), now() + 60_000).unwrap();
    let first = runtime.run(&RunRequest::new(&code).with_language(Language::Command)).unwrap();
    assert_eq!(first.state, TransactionState::PendingApproval, "{:?}", first.decision);
    approve(first.transaction);
    let so_far = runtime.work_done_so_far(first.transaction).unwrap();
    let rerun = RunRequest::new(&code).with_language(Language::Command).with_rerun_of(first.transaction);
    let again = runtime.run(&rerun.with_done_so_far(so_far)).unwrap().transaction;
    approve(again);
    assert_eq!(runtime.commit(again, now()).unwrap().state, TransactionState::Committed);
    let refused = runtime.commit(first.transaction, now()).expect_err("its work is done");
    assert!(matches!(refused, VshError::DoneMeanwhile { by, .. } if by == again), "{refused:?}");
    assert_eq!(
        runtime.transaction(first.transaction).unwrap().map(|record| record.state),
        Some(TransactionState::Failed)
    );
    assert!(runtime.pending().unwrap().iter().all(|record| record.id != first.transaction));
}
