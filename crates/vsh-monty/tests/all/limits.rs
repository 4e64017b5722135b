//! Budgets: each is charged before the work, ends the run when it runs out, and
//! cannot be caught by the guest.

use std::time::{Duration, Instant};

use vsh_monty::{ExecutionError, ExecutionLimits, LimitExceeded, LimitKind, TRUNCATION_MARKER};
use vsh_vfs::{SnapshotLimits, VfsError};

use crate::common::{Workspace, exception, limit};

fn limits() -> ExecutionLimits {
    ExecutionLimits::default()
}

#[test]
fn stdout_cap_is_an_output_limit() {
    let mut ws = Workspace::empty();
    let (exceeded, stdout) =
        limit(ws.run_with("while True:\n    print('x' * 10)", &ExecutionLimits { max_output_bytes: 100, ..limits() }));
    assert_eq!(exceeded, LimitExceeded { limit: LimitKind::OutputBytes, attempted: 109, max: 100 });
    assert_eq!(stdout, "xxxxxxxxxx\n".repeat(9), "output is cut at a write, never past the cap");
}

#[test]
fn catching_the_output_overflow_does_not_help() {
    let mut ws = Workspace::empty();
    let small = ExecutionLimits { max_output_bytes: 8, ..limits() };
    let (exceeded, stdout) =
        limit(ws.run_with("try:\n    print('0123456789')\nexcept MemoryError:\n    pass\n'done'", &small));
    assert_eq!(exceeded.limit, LimitKind::OutputBytes);
    assert_eq!(stdout, "");
    let code = "from pathlib import Path\ntry:\n    print('0123456789')\nexcept MemoryError:\n    pass\nPath('x').write_text('after')";
    assert_eq!(limit(ws.run_with(code, &small)).0.limit, LimitKind::OutputBytes);
    assert_eq!(ws.diff(), vec![], "the write after the overflow never happened");
}

#[test]
fn busy_loop_hits_the_duration_limit() {
    let mut ws = Workspace::empty();
    let started = Instant::now();
    let (exceeded, _) = limit(ws.run_with(
        "x = 0\ntry:\n    while True:\n        x += 1\nexcept Exception:\n    pass\n'escaped'",
        &ExecutionLimits { max_duration: Duration::from_millis(100), ..limits() },
    ));
    assert_eq!(exceeded.limit, LimitKind::Duration);
    assert_eq!(exceeded.max, 100_000_000);
    assert!(exceeded.attempted >= exceeded.max);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn deep_recursion_is_a_catchable_recursion_error() {
    let mut ws = Workspace::empty();
    let tight = ExecutionLimits { max_recursion_depth: 50, ..limits() };
    let outcome = ws
        .run_with(
            "def f(n):\n    return f(n + 1)\ntry:\n    f(0)\nexcept RecursionError as e:\n    r = str(e)\nr",
            &tight,
        )
        .unwrap();
    assert_eq!(outcome.value.py_repr(), "'maximum recursion depth exceeded'");
    let error = exception(ws.run_with("def f(n):\n    return f(n + 1)\nf(0)", &tight));
    assert_eq!(error.type_name, "RecursionError");
}

#[test]
fn os_call_cap_ends_the_run_even_when_caught() {
    let mut ws = Workspace::empty();
    let code = "from pathlib import Path\n\
                n = 0\n\
                try:\n    while True:\n        Path('x').exists()\n        n += 1\n\
                except BaseException:\n    pass\n\
                Path('after.txt').write_text(str(n))\n\
                n";
    let result = ws.run_with(code, &ExecutionLimits { max_os_calls: 5, ..limits() });
    let Err(ExecutionError::Limit { limit, stats, .. }) = result else { panic!("expected a limit: {result:?}") };
    assert_eq!(limit, LimitExceeded { limit: LimitKind::OsCalls, attempted: 6, max: 5 });
    assert_eq!(stats.os_calls, 5, "the refused charge left the counter unchanged");
    assert_eq!(ws.diff(), vec![]);
}

#[test]
fn program_size_is_checked_before_compiling() {
    let mut ws = Workspace::empty();
    let (exceeded, _) =
        limit(ws.run_with("this is not python at all", &ExecutionLimits { max_program_bytes: 10, ..limits() }));
    assert_eq!(exceeded, LimitExceeded { limit: LimitKind::ProgramBytes, attempted: 25, max: 10 });
}

#[test]
fn read_budgets_per_call_then_cumulative() {
    let mut ws = Workspace::with(&[("ten.txt", b"0123456789"), ("big.txt", &[b'b'; 40])]);
    let tight = ExecutionLimits { max_io_call_bytes: 32, max_read_bytes: 25, ..limits() };
    let code =
        "from pathlib import Path\ntry:\n    Path('big.txt').read_bytes()\nexcept BaseException:\n    pass\n'caught'";
    assert_eq!(
        limit(ws.run_with(code, &tight)).0,
        LimitExceeded { limit: LimitKind::ReadCallBytes, attempted: 40, max: 32 }
    );
    let code = "from pathlib import Path\nfor i in range(3):\n    Path('ten.txt').read_text()";
    let result = ws.run_with(code, &tight);
    let Err(ExecutionError::Limit { limit, stats, .. }) = result else { panic!("expected a limit: {result:?}") };
    assert_eq!(limit, LimitExceeded { limit: LimitKind::ReadBytes, attempted: 30, max: 25 });
    assert_eq!(stats.read_bytes, 20);
}

#[test]
fn write_budgets_per_call_then_cumulative() {
    let mut ws = Workspace::empty();
    let tight = ExecutionLimits { max_io_call_bytes: 8, max_write_bytes: 12, ..limits() };
    let code = "from pathlib import Path\nPath('a').write_text('123456789')";
    assert_eq!(
        limit(ws.run_with(code, &tight)).0,
        LimitExceeded { limit: LimitKind::WriteCallBytes, attempted: 9, max: 8 }
    );
    let code = "from pathlib import Path\nPath('a').write_bytes(b'12345678')\nPath('b').write_bytes(b'12345')";
    assert_eq!(
        limit(ws.run_with(code, &tight)).0,
        LimitExceeded { limit: LimitKind::WriteBytes, attempted: 13, max: 12 }
    );
}

#[test]
fn directory_entries_and_path_bytes_are_bounded() {
    let mut ws = Workspace::with(&[("d/a", b""), ("d/b", b""), ("d/c", b"")]);
    let code = "import os\nos.listdir('d')\nos.listdir('d')";
    let (exceeded, _) = limit(ws.run_with(code, &ExecutionLimits { max_directory_entries: 5, ..limits() }));
    assert_eq!(exceeded, LimitExceeded { limit: LimitKind::DirectoryEntries, attempted: 6, max: 5 });
    let code = format!("from pathlib import Path\nPath('{}').exists()", "p".repeat(40));
    let (exceeded, _) = limit(ws.run_with(&code, &ExecutionLimits { max_path_bytes: 32, ..limits() }));
    assert_eq!(exceeded, LimitExceeded { limit: LimitKind::PathBytes, attempted: 40, max: 32 });
}

#[test]
fn result_size_is_bounded() {
    let mut ws = Workspace::empty();
    let small = ExecutionLimits { max_result_bytes: 1000, ..limits() };
    let outcome = ws.run_with("'x' * 10", &small).unwrap();
    assert!(outcome.stats.result_bytes > 10 && outcome.stats.result_bytes <= 1000);
    let (exceeded, _) = limit(ws.run_with("['x' * 100 for i in range(20)]", &small));
    assert_eq!(exceeded.limit, LimitKind::ResultBytes);
    assert!(exceeded.attempted > 1000);
}

#[test]
fn exception_text_is_truncated_with_a_marker() {
    let mut ws = Workspace::empty();
    let error = exception(
        ws.run_with("raise ValueError('e' * 5000)", &ExecutionLimits { max_exception_bytes: 200, ..limits() }),
    );
    assert_eq!(error.type_name, "ValueError");
    assert!(error.message.ends_with(TRUNCATION_MARKER));
    assert!(error.message.len() + error.traceback.len() <= 200);
    assert!(error.traceback.starts_with("Traceback (most recent call last):"), "{}", error.traceback);
}

#[test]
fn stats_count_what_a_run_used() {
    let mut ws = Workspace::with(&[("a.txt", b"abc"), ("d/x", b""), ("d/.env", b"")]);
    let outcome = ws.outcome(
        "from pathlib import Path\nimport os\n\
         print('hi')\nPath('a.txt').read_text()\nPath('b.txt').write_text('hello')\nos.listdir('d')\nlen(os.listdir('d'))",
    );
    let stats = outcome.stats;
    assert_eq!((stats.os_calls, stats.read_bytes, stats.write_bytes), (4, 3, 5));
    assert_eq!((stats.directory_entries, stats.output_bytes, stats.denied_accesses), (4, 3, 0));
    assert_eq!(outcome.stdout, "hi\n");
    assert_eq!(outcome.value.py_repr(), "1");
    assert!(stats.result_bytes > 0 && stats.duration_ns > 0);
}

#[test]
fn terminal_vfs_errors_end_the_run_and_cannot_be_caught() {
    let snapshot = SnapshotLimits { max_materialized_file_bytes: 4, ..SnapshotLimits::default() };
    let mut ws = Workspace::with_snapshot_limits(&[("big.txt", b"0123456789")], snapshot);
    let result = ws.run(
        "from pathlib import Path\ntry:\n    Path('big.txt').read_text()\nexcept BaseException:\n    pass\n'caught'",
    );
    match result {
        Err(ExecutionError::Vfs { source: VfsError::SnapshotLimit { .. } }) => {}
        other => panic!("expected a terminal VFS error, got {other:?}"),
    }
}

#[test]
fn name_lookups_are_undefined_and_count_as_suspensions() {
    let mut ws = Workspace::empty();
    let outcome = ws.outcome("try:\n    undefined_name\n    r = 'found'\nexcept NameError as e:\n    r = str(e)\nr");
    assert_eq!(outcome.value.py_repr(), "\"name 'undefined_name' is not defined\"");
    assert_eq!(outcome.stats.os_calls, 1);
}

#[test]
fn evidence_records_are_bounded() {
    let mut ws = Workspace::empty();
    let code = "from pathlib import Path\ntry:\n    for i in range(5):\n        Path('x').exists()\nexcept BaseException:\n    pass\n'caught'";
    let result = ws.run_with(code, &ExecutionLimits { max_evidence_records: 3, ..limits() });
    let Err(ExecutionError::Limit { limit: exceeded, stats, .. }) = result else {
        panic!("expected a limit: {result:?}")
    };
    assert_eq!(exceeded, LimitExceeded { limit: LimitKind::EvidenceRecords, attempted: 4, max: 3 });
    assert_eq!(stats.evidence_records, 3);
    // A walk charges each path it visits.
    let mut ws = Workspace::with(&[("d/a", b""), ("d/b", b""), ("d/c", b""), ("d/e", b"")]);
    let (exceeded, _) =
        limit(ws.run_with("vsh_glob('**/*')", &ExecutionLimits { max_evidence_records: 4, ..limits() }));
    assert_eq!(exceeded.limit, LimitKind::EvidenceRecords);
    // Authorizing a rename's tree spends the budget too, and running out there
    // ends the run: it is not the rename's catchable PermissionError.
    let mut ws = Workspace::with(&[("d/a", b""), ("d/b", b""), ("d/c", b""), ("d/e", b"")]);
    let code = "import os\ntry:\n    os.rename('d', 'moved')\nexcept OSError:\n    pass\n'caught'";
    let (exceeded, _) = limit(ws.run_with(code, &ExecutionLimits { max_evidence_records: 9, ..limits() }));
    assert_eq!(exceeded.limit, LimitKind::EvidenceRecords);
}

#[test]
fn evidence_bytes_are_bounded() {
    let mut ws = Workspace::empty();
    let code = "from pathlib import Path\nPath('abcdefgh').exists()\nPath('abcdefgh').exists()";
    let (exceeded, _) = limit(ws.run_with(code, &ExecutionLimits { max_evidence_bytes: 10, ..limits() }));
    assert_eq!(exceeded, LimitExceeded { limit: LimitKind::EvidenceBytes, attempted: 16, max: 10 });
    // A refusal kept is charged with its rule text.
    let mut ws = Workspace::with(&[(".env", b"x")]);
    let code = "try:\n    vsh_read('.env')\nexcept PermissionError:\n    pass";
    let (exceeded, _) = limit(ws.run_with(code, &ExecutionLimits { max_evidence_bytes: 8, ..limits() }));
    assert_eq!(exceeded.limit, LimitKind::EvidenceBytes);
    assert_eq!(ws.run(code).unwrap().stats.evidence_records, 2, "the check and the refusal");
}

#[test]
fn the_request_deadline_is_checked_at_every_call_in_process() {
    let mut ws = Workspace::empty();
    let expired = ExecutionLimits { max_request_duration: Duration::ZERO, ..limits() };
    let code = "try:\n    vsh_list()\nexcept BaseException:\n    pass\n'caught'";
    let (exceeded, _) = limit(ws.run_with(code, &expired));
    assert_eq!(exceeded.limit, LimitKind::RequestDuration);
    assert_eq!(exceeded.max, 0);
}
