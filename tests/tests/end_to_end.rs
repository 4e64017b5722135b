//! End to end: a Monty program previews and commits a real workspace.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::os::unix::fs::PermissionsExt;

use vsh::{DiffKind, ReceiptDetail, RunMode, RunRequest, Runtime, RuntimeDecision, TransactionState, VshError};
use vsh_integration_tests::{Entry, config, put, tree, workspace};

fn runtime(dir: &tempfile::TempDir) -> Runtime {
    Runtime::open(config(dir.path())).expect("open runtime")
}

const EDIT: &str = r"
from pathlib import Path
root = Path('/workspace')
text = (root / 'src' / 'main.txt').read_text()
(root / 'src' / 'main.txt').write_text(text.replace('old', 'new'))
(root / 'docs').mkdir()
(root / 'docs' / 'CHANGES.txt').write_text('changed main\n')
(root / 'obsolete.txt').unlink()
len(text)
";

#[test]
fn preview_changes_nothing_and_auto_commits_exactly_the_diff() {
    let dir = workspace(&[("src/main.txt", "old value\n"), ("obsolete.txt", "bye\n"), ("keep.txt", "keep\n")]);
    let before = tree(dir.path());
    let runtime = runtime(&dir);

    let preview = runtime.preview(&RunRequest::new(EDIT).with_detail(ReceiptDetail::Full)).unwrap();
    assert_eq!(tree(dir.path()), before, "a preview never changes the workspace");
    // A deletion is not small and non-destructive: Balanced escalates it.
    assert!(matches!(preview.decision, RuntimeDecision::PendingApproval(_)), "{:?}", preview.decision);
    let kinds: Vec<_> = preview.changes.iter().map(|e| (e.path.to_string(), e.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            ("docs".to_owned(), DiffKind::Create),
            ("docs/CHANGES.txt".to_owned(), DiffKind::Create),
            ("obsolete.txt".to_owned(), DiffKind::Delete),
            ("src/main.txt".to_owned(), DiffKind::Modify),
        ]
    );
    // Pending work is not committed in Auto mode either.
    let pending = runtime.run(&RunRequest::new(EDIT).with_mode(RunMode::Auto)).unwrap();
    assert_eq!(pending.state, TransactionState::PendingApproval);
    assert_eq!(tree(dir.path()), before);
    assert!(matches!(runtime.commit(pending.transaction, 0), Err(VshError::NotCommittable { .. })));

    // An auto-approvable edit commits, bytes and modes exactly as previewed.
    let program = r"
from pathlib import Path
root = Path('/workspace')
(root / 'src' / 'main.txt').write_text('new value\n')
(root / 'docs').mkdir()
(root / 'docs' / 'CHANGES.txt').write_text('changed main\n')
";
    let auto =
        runtime.run(&RunRequest::new(program).with_mode(RunMode::Auto).with_detail(ReceiptDetail::Full)).unwrap();
    assert_eq!(auto.state, TransactionState::Committed);
    assert!(auto.commit.is_some());
    let after = tree(dir.path());
    let mut expected = before.clone();
    expected.insert("src/main.txt".into(), Entry::File(b"new value\n".to_vec(), 0o644));
    expected.insert("docs".into(), Entry::Dir(0o755));
    expected.insert("docs/CHANGES.txt".into(), Entry::File(b"changed main\n".to_vec(), 0o644));
    assert_eq!(after, expected);
    for entry in &auto.changes {
        let after_state = entry.after.expect("creates and modifies have an after state");
        let meta = std::fs::symlink_metadata(dir.path().join(entry.path.as_str())).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, after_state.mode, "{}", entry.path);
    }
    assert_eq!(runtime.transaction(auto.transaction).unwrap().unwrap().state, TransactionState::Committed);
}

#[test]
fn preview_then_commit_applies_the_previewed_transaction_once() {
    let dir = workspace(&[("a.txt", "a\n")]);
    let runtime = runtime(&dir);
    let program =
        "from pathlib import Path\nPath('/workspace/b.txt').write_text(Path('/workspace/a.txt').read_text() * 2)";
    let preview = runtime.preview(&RunRequest::new(program)).unwrap();
    assert_eq!(preview.state, TransactionState::AutoApproved);
    assert!(!dir.path().join("b.txt").exists());
    let committed = runtime.commit(preview.transaction, 1).unwrap();
    assert_eq!(committed.state, TransactionState::Committed);
    assert_eq!(committed.transaction, preview.transaction);
    assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "a\na\n");
    // Exactly once: the same transaction cannot be committed again.
    assert!(matches!(
        runtime.commit(preview.transaction, 2),
        Err(VshError::NotCommittable { state: TransactionState::Committed, .. })
    ));
    // Previewing the same program twice is not an error: each run is its own transaction.
    let first = runtime.preview(&RunRequest::new("1 + 1")).unwrap();
    let second = runtime.preview(&RunRequest::new("1 + 1")).unwrap();
    assert_ne!(first.transaction, second.transaction);
}

#[test]
fn external_edit_of_a_read_file_makes_the_commit_stale_and_survives() {
    let dir = workspace(&[("config.txt", "v1\n"), ("other.txt", "x\n")]);
    let runtime = runtime(&dir);
    let program = "from pathlib import Path\nc = Path('/workspace/config.txt').read_text()\nPath('/workspace/out.txt').write_text(c)";
    let preview = runtime.preview(&RunRequest::new(program)).unwrap();
    assert_eq!(preview.state, TransactionState::AutoApproved);

    put(dir.path(), "config.txt", "v2 edited by someone else\n");
    let before_commit = tree(dir.path());
    match runtime.commit(preview.transaction, 0) {
        Err(VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { conflicts, .. })) => {
            let paths: Vec<_> = conflicts.iter().map(|conflict| conflict.path.to_string()).collect();
            assert_eq!(paths, vec!["config.txt".to_owned()]);
        }
        other => panic!("expected a stale commit, got {other:?}"),
    }
    assert_eq!(tree(dir.path()), before_commit, "a stale commit writes nothing");
    assert_eq!(std::fs::read_to_string(dir.path().join("config.txt")).unwrap(), "v2 edited by someone else\n");
    assert_eq!(runtime.transaction(preview.transaction).unwrap().unwrap().state, TransactionState::Stale);
}

/// Someone else edits `config.txt` while the first `races` commits are
/// between staging and their revalidation.
struct EditsDuringCommit {
    path: std::path::PathBuf,
    races: u32,
    done: std::sync::atomic::AtomicU32,
}

impl vsh::lower::vsh_commit::FaultInjector for EditsDuringCommit {
    fn crash_at(&self, point: vsh::lower::vsh_commit::FaultPoint) -> bool {
        use std::sync::atomic::Ordering;
        if point == vsh::lower::vsh_commit::FaultPoint::Staged && self.done.load(Ordering::SeqCst) < self.races {
            let round = self.done.fetch_add(1, Ordering::SeqCst) + 1;
            std::fs::write(&self.path, format!("v{}\n", round + 1)).unwrap();
        }
        false
    }
}

#[test]
fn a_stale_commit_is_run_again_on_the_new_workspace_as_a_new_transaction_up_to_the_bound() {
    let program =
        "from pathlib import Path\nc = Path('config.txt').read_text()\nPath('out.txt').write_text('from ' + c)";
    for (races, retries, committed) in [(1, 1, true), (2, 3, true), (3, 2, false), (1, 0, false)] {
        let dir = workspace(&[("config.txt", "v1\n")]);
        let injector = EditsDuringCommit { path: dir.path().join("config.txt"), races, done: 0.into() };
        let runtime =
            Runtime::open(config(dir.path()).with_commit_fault_injector(std::sync::Arc::new(injector))).unwrap();
        let mut heard = Vec::new();
        let outcome = runtime.run_retrying_stale(
            &RunRequest::new(program).with_mode(RunMode::Auto),
            retries,
            |attempt, error| {
                assert!(
                    matches!(error, VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. })),
                    "{error:?}"
                );
                heard.push(attempt);
            },
        );
        let attempts = races.min(retries + 1);
        assert_eq!(heard, (1..=races.min(retries)).collect::<Vec<_>>(), "races {races}, retries {retries}");
        let records = runtime.transactions().unwrap();
        let stale = records.iter().filter(|record| record.state == TransactionState::Stale).count();
        assert_eq!(stale, attempts as usize, "each stale attempt is its own transaction, recorded Stale");
        if committed {
            let receipt = outcome.unwrap();
            assert_eq!(receipt.state, TransactionState::Committed);
            let last = format!("v{}\n", races + 1);
            assert_eq!(std::fs::read_to_string(dir.path().join("out.txt")).unwrap(), format!("from {last}"));
            assert_eq!(std::fs::read_to_string(dir.path().join("config.txt")).unwrap(), last, "their edit survives");
        } else {
            assert!(matches!(outcome, Err(VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. }))));
            assert!(!dir.path().join("out.txt").exists(), "stale work never lands");
        }
    }
}

#[test]
fn bash_without_host_configuration_is_a_typed_refusal_and_runs_nothing() {
    let dir = workspace(&[("a.txt", "a\n")]);
    let runtime = runtime(&dir);
    let before = tree(dir.path());
    let request = RunRequest::new("rm a.txt").with_language(vsh::Language::Bash).with_mode(RunMode::Auto);
    match runtime.run(&request) {
        Err(VshError::LanguageUnavailable { language: vsh::Language::Bash }) => {}
        other => panic!("expected LanguageUnavailable, got {other:?}"),
    }
    assert_eq!(tree(dir.path()), before);
    assert!(runtime.transactions().unwrap().is_empty(), "nothing was recorded");
    assert_eq!(vsh::Language::default(), vsh::Language::Monty);
    // Monty output names its language and has no stderr of its own.
    let receipt = runtime.preview(&RunRequest::new("print('hi')")).unwrap();
    assert_eq!(receipt.output.language(), vsh::Language::Monty);
    assert_eq!((receipt.output.stdout_bytes(), receipt.output.stderr_bytes()), (&b"hi\n"[..], &b""[..]));
}

#[test]
fn unrelated_changes_do_not_make_a_commit_stale() {
    let dir = workspace(&[("config.txt", "v1\n"), ("src/lib.txt", "lib\n")]);
    let runtime = runtime(&dir);
    let program = "from pathlib import Path\nc = Path('/workspace/config.txt').read_text()\nPath('/workspace/src/new.txt').write_text(c)";
    let preview = runtime.preview(&RunRequest::new(program)).unwrap();
    // Same bytes, new mtime; and a new sibling next to the created file.
    put(dir.path(), "config.txt", "v1\n");
    put(dir.path(), "src/sibling.txt", "unrelated\n");
    let committed = runtime.commit(preview.transaction, 0).unwrap();
    assert_eq!(committed.state, TransactionState::Committed);
    assert_eq!(std::fs::read_to_string(dir.path().join("src/new.txt")).unwrap(), "v1\n");
    assert_eq!(std::fs::read_to_string(dir.path().join("src/sibling.txt")).unwrap(), "unrelated\n");
}

#[test]
fn writing_a_secret_is_denied_and_changes_nothing() {
    let dir = workspace(&[(".env", "TOKEN=1\n"), ("a.txt", "a\n")]);
    let before = tree(dir.path());
    let runtime = runtime(&dir);
    let program = r"
from pathlib import Path
try:
    Path('/workspace/.env').write_text('TOKEN=stolen\n')
except PermissionError:
    pass
Path('/workspace/a.txt').write_text('changed\n')
";
    let receipt = runtime.run(&RunRequest::new(program).with_mode(RunMode::Auto)).unwrap();
    assert_eq!(receipt.state, TransactionState::Denied);
    let RuntimeDecision::Denied(manifest) = &receipt.decision else { panic!("expected a denial") };
    assert_eq!(manifest.denied[0].path.as_str(), ".env");
    assert_eq!(tree(dir.path()), before);
}

#[test]
fn paths_outside_the_workspace_raise_permission_error_and_touch_nothing() {
    let outside = tempfile::tempdir().unwrap();
    put(outside.path(), "x", "outside\n");
    let parent_name = outside.path().file_name().unwrap().to_string_lossy().into_owned();
    let dir = workspace(&[("a.txt", "a\n")]);
    let runtime = runtime(&dir);
    let program = format!(
        r"
from pathlib import Path
caught = []
for target in ['/etc/passwd', '../x', '/workspace/../etc/passwd', '../{parent_name}/x']:
    try:
        Path(target).read_text()
    except PermissionError:
        caught.append(target)
try:
    Path('../escape.txt').write_text('no')
except PermissionError:
    caught.append('write')
caught
"
    );
    let receipt = runtime.run(&RunRequest::new(&program).with_mode(RunMode::Auto)).unwrap();
    let value = receipt.output.monty_value().unwrap().py_repr();
    assert_eq!(value, format!("['/etc/passwd', '../x', '/workspace/../etc/passwd', '../{parent_name}/x', 'write']"));
    assert_eq!(receipt.changed_paths, 0);
    assert!(!dir.path().parent().unwrap().join("escape.txt").exists());
    assert_eq!(std::fs::read_to_string(outside.path().join("x")).unwrap(), "outside\n");
    // Caught or not, every attempt counts: the transaction is denied, and the
    // manifest names each attempt.
    assert_eq!(receipt.state, TransactionState::Denied);
    let RuntimeDecision::Denied(manifest) = &receipt.decision else { panic!("{:?}", receipt.decision) };
    assert_eq!(manifest.reason, vsh::DenyReason::ProtectedAccessAttempt);
    let rules: Vec<&str> = manifest.denied.iter().map(|denial| denial.rule.as_str()).collect();
    for attempt in ["/etc/passwd", "../x", "/workspace/../etc/passwd", "../escape.txt"] {
        assert!(rules.iter().any(|rule| rule.contains(&format!("{attempt:?}"))), "{attempt}: {rules:?}");
    }
    assert!(manifest.denied.iter().all(|denial| denial.label == vsh::RuleLabel::OutsideWorkspace));

    // A program that only probes the way out, and catches nothing, is denied too.
    let probe = "from pathlib import Path\n[Path(p).exists() for p in ['/etc/passwd', '/workspace/../..']]";
    let receipt = runtime.run(&RunRequest::new(probe).with_mode(RunMode::Auto)).unwrap();
    assert_eq!(receipt.output.monty_value().unwrap().py_repr(), "[False, False]");
    assert_eq!(receipt.state, TransactionState::Denied);
    assert_eq!(receipt.execution.denied_accesses, 2);
}

#[test]
fn symlinks_pointing_outside_are_never_followed() {
    let outside = tempfile::tempdir().unwrap();
    put(outside.path(), "secret.txt", "outside secret\n");
    let dir = workspace(&[("a.txt", "a\n")]);
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("link.txt")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("linkdir")).unwrap();
    let runtime = runtime(&dir);
    let program = r"
from pathlib import Path
results = []
for action in ['read', 'read-through-dir', 'write', 'write-through-dir']:
    try:
        if action == 'read':
            results.append(Path('/workspace/link.txt').read_text())
        elif action == 'read-through-dir':
            results.append(Path('/workspace/linkdir/secret.txt').read_text())
        elif action == 'write':
            Path('/workspace/link.txt').write_text('overwritten')
            results.append('wrote')
        else:
            Path('/workspace/linkdir/new.txt').write_text('planted')
            results.append('wrote')
    except OSError as error:
        results.append(type(error).__name__)
results
";
    let receipt = runtime.run(&RunRequest::new(program).with_mode(RunMode::Auto)).unwrap();
    let value = receipt.output.monty_value().unwrap().py_repr();
    assert!(!value.contains("outside secret"), "{value}");
    assert!(!value.contains("wrote"), "{value}");
    assert_eq!(receipt.changed_paths, 0);
    assert_eq!(std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(), "outside secret\n");
    assert!(!outside.path().join("new.txt").exists());
    assert!(std::fs::symlink_metadata(dir.path().join("link.txt")).unwrap().file_type().is_symlink());
}

#[test]
fn touching_one_file_in_twenty_thousand_reads_only_that_file() {
    let dir = tempfile::tempdir().unwrap();
    for index in 0..20_000 {
        let path = dir.path().join(format!("d{:03}", index % 100)).join(format!("f{index:05}.txt"));
        if index < 100 {
            std::fs::create_dir(path.parent().unwrap()).unwrap();
        }
        std::fs::write(path, b"payload\n").unwrap();
    }
    let runtime = runtime(&dir);
    let counters_before = runtime.host_counters();
    let program =
        "from pathlib import Path\np = Path('/workspace/d042/f00042.txt')\np.write_text(p.read_text().upper())";
    let receipt = runtime.preview(&RunRequest::new(program)).unwrap();
    let counters = runtime.host_counters();
    assert_eq!(receipt.changed_paths, 1);
    let reads = runtime.dependencies(receipt.transaction).expect("a kept preview");
    let paths: Vec<_> = reads.entries.keys().map(ToString::to_string).collect();
    // The file and its directory, and what the policy's git-repository
    // judgment asked of each directory on the way (no HEAD, no objects)
    // and of the workspace's own repository (no .git: no hooks).
    let expected = [".git", "HEAD", "d042", "d042/HEAD", "d042/f00042.txt", "d042/objects", "objects"];
    assert_eq!(paths, expected);
    assert_eq!(counters.lists - counters_before.lists, 0, "no directory was listed");
    assert!(counters.reads - counters_before.reads <= 2, "{counters_before:?} -> {counters:?}");
    // Three for the file and its directory; four more are the policy's look
    // at a HEAD and an objects directory in each directory on the way (a git
    // repository outside .git): a few per directory, whatever the workspace.
    assert!(counters.stats - counters_before.stats <= 8, "{counters_before:?} -> {counters:?}");
    let committed = runtime.commit(receipt.transaction, 0).unwrap();
    assert_eq!(committed.state, TransactionState::Committed);
    assert_eq!(std::fs::read_to_string(dir.path().join("d042/f00042.txt")).unwrap(), "PAYLOAD\n");
}

/// A program that raises after writing keeps nothing and stores no
/// transaction; the error says what it had changed (ux65 F6: it said
/// nothing of it, as a failed Bash program's did).
#[test]
fn a_program_that_raises_is_an_execution_error_that_names_its_changes_and_changes_nothing() {
    let dir = workspace(&[("a.txt", "a\n"), ("gone.txt", "g\n")]);
    let before = tree(dir.path());
    let runtime = runtime(&dir);
    let program = "from pathlib import Path\nPath('/workspace/a.txt').write_text('x')\n\
                   Path('/workspace/new.txt').write_text('n')\nPath('/workspace/gone.txt').unlink()\n\
                   Path('/workspace/undone.txt').write_text('u')\nPath('/workspace/undone.txt').unlink()\n\
                   raise ValueError('boom')";
    let error = runtime.run(&RunRequest::new(program).with_mode(RunMode::Auto)).unwrap_err();
    let VshError::Raised { source, changes, changes_complete } = &error else { panic!("{error:?}") };
    let vsh::lower::vsh_monty::ExecutionError::Exception { exception, .. } = source.as_ref() else {
        panic!("expected an exception, got {source:?}")
    };
    assert_eq!(exception.type_name, "ValueError");
    assert!(changes_complete);
    let named: Vec<(String, &str)> =
        changes.iter().map(|change| (change.path.to_string(), change.kind.name())).collect();
    let expected = [("a.txt", "modify"), ("gone.txt", "delete"), ("new.txt", "create")];
    assert_eq!(named, expected.map(|(path, kind)| (path.to_owned(), kind)));
    assert_eq!(error.execution().map(ToString::to_string), Some(source.to_string()));
    assert!(runtime.transactions().unwrap().is_empty(), "nothing is stored");
    // One that changed nothing (or undid what it changed) is the plain error.
    let undone = "from pathlib import Path\nPath('/workspace/u.txt').write_text('u')\n\
                  Path('/workspace/u.txt').unlink()\nraise ValueError('boom')";
    let error = runtime.run(&RunRequest::new(undone)).unwrap_err();
    assert!(matches!(error, VshError::Execution(_)), "{error:?}");
    // A budget that ran out after a write names the write too.
    let endless = "from pathlib import Path\nPath('/workspace/a.txt').write_text('y')\nwhile True:\n    pass";
    let budget =
        vsh::ExecutionBudget { max_duration: std::time::Duration::from_millis(300), ..vsh::ExecutionBudget::default() };
    let error = runtime.run(&RunRequest::new(endless).with_budget(budget)).unwrap_err();
    let VshError::Raised { changes, .. } = &error else { panic!("{error:?}") };
    assert_eq!(changes.len(), 1);
    assert_eq!(error.exceeded_limit(), Some(vsh::lower::vsh_monty::LimitKind::Duration));
    assert_eq!(tree(dir.path()), before);
}

#[test]
fn a_data_directory_inside_the_workspace_is_hidden_protected_and_never_stale() {
    let dir = workspace(&[("a.txt", "a\n")]);
    let data = dir.path().join("state");
    let runtime = Runtime::open(config(dir.path()).with_data_directory(&data)).unwrap();
    // The program lists the root (a dependency on its names) and tries the data directory.
    let program = r"
from pathlib import Path
names = sorted(p.name for p in Path('/workspace').iterdir())
try:
    Path('/workspace/state/planted').write_text('x')
except PermissionError:
    names.append('refused')
names
";
    let receipt = runtime.preview(&RunRequest::new(program)).unwrap();
    assert_eq!(receipt.output.monty_value().unwrap().py_repr(), "['a.txt', 'refused']");
    assert_eq!(receipt.state, TransactionState::Denied);
    // A run that lists the root and writes commits even though the data
    // directory changes between preview and commit.
    let lister = "from pathlib import Path\nPath('/workspace/list.txt').write_text(','.join(sorted(p.name for p in Path('/workspace').iterdir())))";
    let preview = runtime.preview(&RunRequest::new(lister)).unwrap();
    runtime.preview(&RunRequest::new("1")).unwrap();
    let committed = runtime.commit(preview.transaction, 0).unwrap();
    assert_eq!(committed.state, TransactionState::Committed);
    assert_eq!(std::fs::read_to_string(dir.path().join("list.txt")).unwrap(), "a.txt");
    assert!(!data.join("planted").exists());
}

#[test]
fn the_delete_ratio_ceiling_counts_the_workspace_only_as_far_as_it_must() {
    let program = "from pathlib import Path\nimport os\nfor name in os.listdir('/workspace/build'):\n    Path('/workspace/build/' + name).unlink()";
    // 150 build files among 1,000 sources: a large deletion, but not most of the workspace.
    let dir = tempfile::tempdir().unwrap();
    for index in 0..150 {
        put(dir.path(), &format!("build/out{index}.o"), "o");
    }
    for index in 0..1_000 {
        put(dir.path(), &format!("src/m{:02}/f{index}.rs", index % 50), "fn f() {}");
    }
    let runtime = runtime(&dir);
    let before = runtime.host_counters();
    let receipt = runtime.preview(&RunRequest::new(program)).unwrap();
    assert!(matches!(receipt.decision, RuntimeDecision::PendingApproval(_)), "{:?}", receipt.decision);
    let listed = runtime.host_counters().lists - before.lists;
    assert!(listed < 40, "the count stopped early: {listed} listings of 52 directories");

    // Deleting 150 of 160 files is most of the workspace: denied.
    let small = tempfile::tempdir().unwrap();
    for index in 0..150 {
        put(small.path(), &format!("build/out{index}.o"), "o");
    }
    for index in 0..10 {
        put(small.path(), &format!("keep{index}.txt"), "k");
    }
    let runtime = Runtime::open(config(small.path())).unwrap();
    let receipt = runtime.preview(&RunRequest::new(program)).unwrap();
    let RuntimeDecision::Denied(manifest) = &receipt.decision else {
        panic!("expected a denial: {:?}", receipt.decision)
    };
    assert_eq!(manifest.reason, vsh::DenyReason::DeleteRatio);
}

#[test]
fn the_request_deadline_covers_the_whole_request() {
    let dir = workspace(&[("a.txt", "a\n")]);
    let runtime = runtime(&dir);
    let budget =
        vsh::ExecutionBudget { max_request_duration: std::time::Duration::from_nanos(1), ..Default::default() };
    let program = "from pathlib import Path\nPath('/workspace/b.txt').write_text('b')";
    match runtime.run(&RunRequest::new(program).with_mode(RunMode::Auto).with_budget(budget)) {
        Err(VshError::RequestDeadline(limit)) => {
            assert_eq!(limit.limit, vsh::lower::vsh_monty::LimitKind::RequestDuration);
            assert!(limit.attempted > limit.max);
        }
        other => panic!("expected the deadline, got {other:?}"),
    }
    assert!(!dir.path().join("b.txt").exists());
    assert!(runtime.pending().unwrap().is_empty());
}

#[test]
fn a_value_nested_deeper_than_evidence_keeps_is_refused_inside_class_instances_too() {
    let dir = workspace(&[("a.txt", "a\n")]);
    let before = tree(dir.path());
    let runtime = runtime(&dir);
    let lists = "v = 1\nfor i in range(300):\n    v = [v]\nv";
    let instances = "from dataclasses import dataclass\n\n@dataclass\nclass Box:\n    inner: object\n\nv = 1\nfor i in range(300):\n    v = Box(v)\nv";
    for program in [lists, instances] {
        let refused = runtime.preview(&RunRequest::new(program));
        assert!(matches!(refused, Err(VshError::ResultNesting { depth: 257, max: 256 })), "{program}: {refused:?}");
    }
    // Just within the bound, both kinds of nesting are kept.
    let shallow = "from dataclasses import dataclass\n\n@dataclass\nclass Box:\n    inner: object\n\nv = 1\nfor i in range(254):\n    v = Box(v)\n[v]";
    runtime.preview(&RunRequest::new(shallow)).unwrap();
    assert_eq!(tree(dir.path()), before);
}

#[test]
fn a_path_through_a_symlink_that_leads_out_denies_the_transaction_even_when_caught() {
    let outside = tempfile::tempdir().unwrap();
    put(outside.path(), "etc/passwd", "outside secret\n");
    let dir = workspace(&[("a.txt", "a\n"), ("in/b.txt", "b\n")]);
    std::os::unix::fs::symlink("../..", dir.path().join("updir")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("abs")).unwrap();
    std::os::unix::fs::symlink("in", dir.path().join("inside")).unwrap();
    // Chains: a link to the link that leaves, and one below it.
    std::os::unix::fs::symlink("updir", dir.path().join("inner")).unwrap();
    std::os::unix::fs::symlink("updir/etc", dir.path().join("below")).unwrap();
    let runtime = runtime(&dir);
    let attempt = |path: &str| {
        let program = format!(
            "from pathlib import Path\nout = []\ntry:\n    out.append(Path('/workspace/{path}').read_text())\n\
             except OSError as error:\n    out.append(type(error).__name__ + ' ' + str(error)[:10])\n\
             out.append(Path('/workspace/{path}').exists())\nout"
        );
        runtime.run(&RunRequest::new(&program).with_mode(RunMode::Preview)).unwrap()
    };
    let outside_path = outside.path().strip_prefix("/").unwrap().to_str().unwrap().to_owned();
    let paths = [
        "updir/etc/passwd".to_owned(),
        "abs/etc/passwd".to_owned(),
        format!("updir/{outside_path}/etc/passwd"),
        "inner/etc/passwd".to_owned(),
        "below/passwd".to_owned(),
    ];
    for path in paths {
        let receipt = attempt(&path);
        let value = receipt.output.monty_value().unwrap().py_repr();
        assert_eq!(value, "['PermissionError [Errno 13]', False]", "{path}");
        let RuntimeDecision::Denied(manifest) = &receipt.decision else { panic!("{path}: {:?}", receipt.decision) };
        // The denial names the link that leaves, however it was reached.
        let leaving = if path.starts_with("abs") { "abs" } else { "updir" };
        assert!(manifest.denied.iter().all(|denied| denied.path.as_str() == leaving), "{path}: {manifest:?}");
    }
    // A rename from or into such a path is refused the same way.
    for (from, to) in [("updir/etc/passwd", "stolen.txt"), ("a.txt", "updir/tmp/planted"), ("a.txt", "inner/x")] {
        let program = format!(
            "from pathlib import Path\ntry:\n    Path('/workspace/{from}').rename('/workspace/{to}')\n    out = 'moved'\n\
             except OSError as error:\n    out = type(error).__name__\nout"
        );
        let receipt = runtime.run(&RunRequest::new(&program).with_mode(RunMode::Preview)).unwrap();
        assert_eq!(receipt.output.monty_value().unwrap().py_repr(), "'PermissionError'", "{from} -> {to}");
        assert!(matches!(receipt.decision, RuntimeDecision::Denied(_)), "{from} -> {to}: {:?}", receipt.decision);
    }
    // A link that stays inside is still never traversed, and denies nothing.
    let receipt = attempt("inside/b.txt");
    assert_eq!(receipt.output.monty_value().unwrap().py_repr(), "['OSError [Errno 40]', False]");
    assert!(matches!(receipt.decision, RuntimeDecision::AutoApproved), "{:?}", receipt.decision);
}

#[test]
fn a_receipt_carries_the_changes_and_the_hunks_only_when_asked() {
    let dir = workspace(&[("a.txt", "one\n")]);
    let runtime = runtime(&dir);
    let program = "from pathlib import Path\nPath('/workspace/a.txt').write_text('two\\n')";
    let receipt = |detail| runtime.preview(&RunRequest::new(program).with_detail(detail)).unwrap();
    let compact = receipt(ReceiptDetail::Compact);
    assert!(compact.changes.is_empty() && compact.review.is_empty());
    let changes = receipt(ReceiptDetail::Changes);
    let paths: Vec<String> = changes.changes.iter().map(|entry| entry.path.to_string()).collect();
    assert_eq!(paths, ["a.txt"]);
    assert!(changes.review.is_empty(), "no hunks were read or computed");
    let full = receipt(ReceiptDetail::Full);
    assert_eq!(full.changes, changes.changes);
    assert_eq!(full.review.len(), 1, "{:?}", full.review);
}

/// A new user built a nested crate (`crates/core`) and found its whole
/// `target/` in the diff, with no word of why (ux49 M10): a build's output
/// or a tool's cache that is not a scratch directory is named in a warning,
/// with how to make it one; a directory of that name that is no build's
/// output (no `Cargo.toml` beside it) is not.
#[test]
fn a_build_output_directory_in_the_diff_is_named_with_how_to_make_it_scratch() {
    let dir =
        workspace(&[("crates/core/Cargo.toml", "[package]\n"), ("web/package.json", "{}\n"), ("c/Makefile", "all:\n")]);
    let runtime = runtime(&dir);
    // ux54 #6: and `build/` beside a Makefile.
    let program = "from pathlib import Path\n\
                   for p in ['crates/core/target/debug/a', 'crates/core/target/debug/b', 'web/node_modules/x/i.js',\n\
                             'src/target/plain.txt', 'lib/.mypy_cache/m.json', 'notes.txt', 'c/build/calc.o',\n\
                             'src/build/plain.txt']:\n\
                   \x20   Path(p).parent.mkdir(parents=True, exist_ok=True)\n\
                   \x20   Path(p).write_text('x')";
    let receipt = runtime.preview(&RunRequest::new(program)).unwrap();
    let named: Vec<(String, u64)> = receipt
        .warnings
        .iter()
        .find_map(|warning| match warning {
            vsh::Warning::BuildOutput { dirs } => {
                Some(dirs.iter().map(|(dir, paths)| (dir.as_str().to_owned(), *paths)).collect())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("{:?}", receipt.warnings));
    // Each directory with the new paths under it, itself and `debug/` included.
    assert_eq!(
        named,
        [
            ("c/build".to_owned(), 2),
            ("crates/core/target".to_owned(), 4),
            ("lib/.mypy_cache".to_owned(), 2),
            ("web/node_modules".to_owned(), 3)
        ]
    );
    let text = receipt.warnings.iter().map(ToString::to_string).collect::<String>();
    assert!(
        text.contains(r#"scratch = ["c/build", "crates/core/target", "lib/.mypy_cache", "web/node_modules", ...]"#),
        "{text}"
    );
    // Nothing of the kind: no warning.
    let other =
        "from pathlib import Path\nPath('src/target').mkdir(parents=True)\nPath('src/target/o.txt').write_text('x')";
    let plain = runtime.preview(&RunRequest::new(other)).unwrap();
    assert_eq!(plain.changed_paths, 3);
    assert!(!plain.warnings.iter().any(|warning| matches!(warning, vsh::Warning::BuildOutput { .. })));
}
