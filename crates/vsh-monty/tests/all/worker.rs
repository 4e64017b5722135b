//! The worker subprocess: crash isolation, protocol violations, the watchdog
//! and the deadline, the memory ceiling, the binary pin, pool reuse, and the
//! kernel confinement of the worker itself.
//!
//! The misbehaviours are the worker's test hooks (`vsh_test_hook`, compiled
//! only with the `test-hooks` feature, which these tests' build enables): each
//! test checks that the request ends in a typed error, that the executor then
//! serves a normal program, and that nothing changed on the host.

use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vsh_monty::{
    ExecutionError, ExecutionLimits, LimitKind, MontyExecutor, ResultCompatibility, WORKER_BINARY_NAME, WorkerConfig,
    WorkerError, default_worker_path,
};
use vsh_sandbox::SandboxPolicy;

use crate::common::{Mode, WORKER, Workspace, limit, s, worker_executor};

/// A workspace with one file, and a snapshot of the host around it.
fn workspace() -> Workspace {
    Workspace::with(&[("keep.txt", b"original")])
}

/// What the host holds in and around the workspace: every path below the
/// temporary parent with its bytes (for files).
fn host_snapshot(ws: &Workspace) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut pending = vec![ws.parent.path().to_owned()];
    while let Some(dir) = pending.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|entry| entry.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            let meta = path.symlink_metadata().unwrap();
            if meta.is_dir() {
                pending.push(path.clone());
                out.push((path, None));
            } else {
                let bytes = std::fs::read(&path).ok();
                out.push((path, bytes));
            }
        }
    }
    out
}

/// The worker error of a failed run.
#[track_caller]
fn worker_error(result: Result<vsh_monty::MontyOutcome, ExecutionError>) -> WorkerError {
    match result {
        Err(ExecutionError::Worker { source }) => source,
        other => panic!("expected a worker error, got {other:?}"),
    }
}

/// Run `code` on `executor`, expect `check` of the error, then prove the
/// executor still serves a normal program and the host did not change.
#[track_caller]
fn isolated(executor: &MontyExecutor, code: &str, limits: &ExecutionLimits, check: impl FnOnce(ExecutionError)) {
    let mut ws = workspace();
    let before = host_snapshot(&ws);
    let prelude = "from pathlib import Path\nPath('keep.txt').write_text('changed')\nPath('new.txt').write_text('x')\n";
    let result = ws.run_on(executor, &format!("{prelude}{code}"), limits);
    match result {
        Err(error) => check(error),
        Ok(outcome) => panic!("expected a failure, got {outcome:?}"),
    }
    assert_eq!(host_snapshot(&ws), before, "the host changed");
    let mut next = workspace();
    let outcome = next.run_on(executor, "vsh_read('keep.txt')", &ExecutionLimits::default()).expect("still usable");
    assert_eq!(outcome.value.py_repr(), s("original"));
}

fn executor() -> MontyExecutor {
    worker_executor(WorkerConfig::new(WORKER).with_max_active(1).with_max_idle(1))
}

#[test]
fn smoke() {
    let mut ws = Workspace::with(&[("a.txt", b"hello")]).in_mode(Mode::Worker);
    let outcome = ws.outcome(
        "from pathlib import Path\nprint('hi')\nPath('b.txt').write_text(Path('a.txt').read_text().upper())\nvsh_read('b.txt')",
    );
    assert_eq!(outcome.value.py_repr(), "'HELLO'");
    assert_eq!(outcome.stdout, "hi\n");
    assert_eq!(outcome.stats.os_calls, 3);
}

#[test]
fn a_worker_that_aborts_mid_run_is_a_crash() {
    let executor = executor();
    isolated(&executor, "vsh_test_hook('abort')", &ExecutionLimits::default(), |error| match error {
        ExecutionError::Worker { source: WorkerError::Crashed { signal: Some(6), .. } } => {}
        other => panic!("expected a crash by SIGABRT, got {other:?}"),
    });
    assert!(executor.pool_status().unwrap().discarded >= 1);
}

#[test]
fn a_worker_killed_from_outside_mid_run_is_a_crash() {
    let executor = executor();
    let limits = ExecutionLimits {
        max_duration: Duration::from_mins(2),
        max_request_duration: Duration::from_mins(2),
        ..ExecutionLimits::default()
    };
    let mut ws = workspace();
    let before = host_snapshot(&ws);
    std::thread::scope(|scope| {
        let running =
            scope.spawn(|| ws.run_on(&executor, "vsh_write('new.txt', 'x')\nvsh_test_hook('sleep', 60000)", &limits));
        // Wait (bounded) for the worker to have greeted: from then on the
        // request is running, and a kill at any point is a crash mid-run.
        let started = Instant::now();
        let pid = loop {
            let status = executor.pool_status().unwrap();
            if status.spawned == 1
                && status.active == 1
                && let Some(pid) = executor.worker_pids().first().copied()
            {
                break pid;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "the worker never started");
            std::thread::sleep(Duration::from_millis(5));
        };
        let status = std::process::Command::new("/bin/kill").args(["-KILL", &pid.to_string()]).status().unwrap();
        assert!(status.success());
        match running.join().unwrap() {
            Err(ExecutionError::Worker { source: WorkerError::Crashed { signal: Some(9), .. } }) => {}
            other => panic!("expected a crash by SIGKILL, got {other:?}"),
        }
    });
    assert_eq!(host_snapshot(&ws), before);
    assert!(executor.worker_pids().is_empty(), "the killed worker was reaped");
    let outcome = workspace().run_on(&executor, "1 + 1", &ExecutionLimits::default()).unwrap();
    assert_eq!(outcome.value.py_repr(), "2");
}

#[test]
fn garbage_and_malformed_frames_are_protocol_errors() {
    let executor = executor();
    let limits = ExecutionLimits::default();
    for (hook, expected) in [
        ("garbage", "undecodable message"),
        ("bad-kind", "frame of unknown kind 99"),
        ("empty-output", "empty output frame"),
        ("unasked-abort", "an abort the parent did not ask for"),
        ("hello-again", "frame of kind 5 during a run"),
    ] {
        isolated(&executor, &format!("vsh_test_hook('{hook}')"), &limits, |error| match error {
            ExecutionError::Worker { source: WorkerError::Protocol { reason } } => {
                assert!(reason.contains(expected), "{hook}: {reason}");
            }
            other => panic!("{hook}: expected a protocol error, got {other:?}"),
        });
    }
}

#[test]
fn an_oversized_frame_is_refused_before_allocation() {
    let executor = executor();
    isolated(&executor, "vsh_test_hook('oversized')", &ExecutionLimits::default(), |error| match error {
        ExecutionError::Worker { source: WorkerError::FrameTooLarge { kind: 3, len, max } } => {
            assert_eq!(len, u64::from(u32::MAX));
            assert!(max < len);
        }
        other => panic!("expected an oversized frame, got {other:?}"),
    });
}

#[test]
fn a_frame_cut_short_is_a_crash() {
    let executor = executor();
    isolated(&executor, "vsh_test_hook('cut-frame')", &ExecutionLimits::default(), |error| match error {
        ExecutionError::Worker { source: WorkerError::Crashed { code: Some(0), .. } } => {}
        other => panic!("expected a crash, got {other:?}"),
    });
}

#[test]
fn a_value_nested_too_deep_is_refused_without_recursion() {
    let executor = executor();
    isolated(&executor, "vsh_test_hook('deep-value', 100000)", &ExecutionLimits::default(), |error| match error {
        ExecutionError::Worker { source: WorkerError::ValueTooDeep { max } } => assert_eq!(max, 512 + 64),
        other => panic!("expected a too-deep value, got {other:?}"),
    });
}

#[test]
fn a_worker_flooding_output_hits_the_output_limit() {
    let executor = executor();
    let limits = ExecutionLimits { max_output_bytes: 200_000, ..ExecutionLimits::default() };
    isolated(&executor, "vsh_test_hook('flood')", &limits, |error| match error {
        ExecutionError::Limit { limit, stdout, .. } => {
            assert_eq!(limit.limit, LimitKind::OutputBytes);
            assert_eq!(limit.max, 200_000);
            assert!(stdout.len() <= 200_000);
        }
        other => panic!("expected the output limit, got {other:?}"),
    });
    // A guest that prints forever is stopped by the worker's own cap.
    isolated(&executor, "while True:\n    print('y' * 1000)", &limits, |error| match error {
        ExecutionError::Limit { limit, stdout, .. } => {
            assert_eq!(limit.limit, LimitKind::OutputBytes);
            assert_eq!(stdout.len(), 199 * 1001);
        }
        other => panic!("expected the output limit, got {other:?}"),
    });
}

#[test]
fn the_watchdog_kills_a_slow_native_operation() {
    let executor =
        worker_executor(WorkerConfig::new(WORKER).with_max_active(1).with_wall_grace(Duration::from_millis(200)));
    let limits = ExecutionLimits { max_duration: Duration::from_millis(100), ..ExecutionLimits::default() };
    // The hook spins inside one native call, which monty's clock cannot
    // interrupt; only the parent's watchdog can.
    isolated(&executor, "vsh_test_hook('spin', 60000)", &limits, |error| match error {
        ExecutionError::Limit { limit, .. } => {
            assert_eq!(limit.limit, LimitKind::Duration);
            assert_eq!(limit.max, 100_000_000);
            assert!(limit.attempted >= 300_000_000, "{limit}");
        }
        other => panic!("expected the duration limit, got {other:?}"),
    });
    // Bytecode that runs too long is stopped by monty itself, uncatchably.
    isolated(&executor, "try:\n    while True:\n        pass\nexcept BaseException:\n    pass", &limits, |error| {
        match error {
            ExecutionError::Limit { limit, .. } => assert_eq!(limit.limit, LimitKind::Duration),
            other => panic!("expected the duration limit, got {other:?}"),
        }
    });
}

#[test]
fn a_kept_worker_is_stopped_by_its_next_runs_shorter_deadline() {
    let executor =
        worker_executor(WorkerConfig::new(WORKER).with_max_active(1).with_wall_grace(Duration::from_millis(200)));
    // A run with a long deadline leaves the watchdog sleeping toward it.
    let long = ExecutionLimits {
        max_duration: Duration::from_secs(30),
        max_request_duration: Duration::from_secs(40),
        ..ExecutionLimits::default()
    };
    let mut ws = workspace();
    let first = ws.run_on(&executor, "vsh_test_hook('pid', 0)", &long).expect("a quick run");
    // The same worker stops in the middle of a frame (which the parent
    // waits on without a timeout of its own) under a deadline far shorter:
    // the watchdog kills it at that deadline, not the one it was sleeping
    // toward.
    let short = ExecutionLimits {
        max_duration: Duration::from_millis(100),
        max_request_duration: Duration::from_millis(300),
        ..ExecutionLimits::default()
    };
    let same = ws.run_on(&executor, "vsh_test_hook('pid', 0)", &short).expect("a quick run");
    assert_eq!(first.value, same.value, "the worker was kept");
    let started = std::time::Instant::now();
    let stalled = ws.run_on(&executor, "vsh_test_hook('stall-frame', 60000)", &short);
    assert!(started.elapsed() < Duration::from_secs(5), "killed after {:?}: {stalled:?}", started.elapsed());
    assert!(stalled.is_err());
}

#[test]
fn the_request_deadline_covers_the_whole_request() {
    let executor = executor();
    // The worker sleeps (as in a slow operation) past the request's deadline;
    // its bytecode budget alone would allow it.
    let limits = ExecutionLimits {
        max_duration: Duration::from_mins(1),
        max_request_duration: Duration::from_millis(300),
        ..ExecutionLimits::default()
    };
    isolated(&executor, "while True:\n    vsh_test_hook('sleep', 20)", &limits, |error| match error {
        ExecutionError::Limit { limit, .. } => {
            assert_eq!(limit.limit, LimitKind::RequestDuration);
            assert_eq!(limit.max, 300_000_000);
        }
        other => panic!("expected the request deadline, got {other:?}"),
    });
    // A deadline that has passed before the run begins ends it at once, in
    // either mode.
    let expired = ExecutionLimits { max_request_duration: Duration::ZERO, ..ExecutionLimits::default() };
    for executor in [&executor, &MontyExecutor::in_process()] {
        let mut ws = workspace();
        let (exceeded, _) = limit(ws.run_on(executor, "vsh_list()", &expired));
        assert_eq!(exceeded.limit, LimitKind::RequestDuration);
        assert_eq!(ws.diff(), vec![]);
    }
}

#[test]
fn the_memory_budget_is_enforced_in_the_worker() {
    let executor = executor();
    // Time is not what this test is about: a loaded machine must not end the
    // programs by their duration first.
    let limits = ExecutionLimits {
        max_memory_bytes: 32 << 20,
        max_duration: Duration::from_mins(1),
        max_request_duration: Duration::from_mins(2),
        ..ExecutionLimits::default()
    };
    for code in [
        "x = []\nwhile True:\n    x.append('a' * 100000)",
        "'a' * (10 ** 9)",
        "try:\n    x = [0] * (10 ** 8)\nexcept BaseException:\n    pass\n'escaped'",
    ] {
        isolated(&executor, code, &limits, |error| match error {
            ExecutionError::Limit { limit, .. } => {
                assert_eq!(limit.limit, LimitKind::Memory, "{code}");
                assert_eq!(limit.max, 32 << 20);
                assert!(limit.attempted > limit.max);
            }
            other => panic!("{code}: expected the memory limit, got {other:?}"),
        });
    }
    // A dict resize jumps past the allocator's hard ceiling between monty's
    // checkpoints: the worker exits with code 65, still the memory limit.
    isolated(
        &executor,
        "{i: i for i in range(10 ** 7)}",
        &ExecutionLimits { max_memory_bytes: 8 << 20, ..limits },
        |error| match error {
            ExecutionError::Limit { limit, .. } => assert_eq!(limit.limit, LimitKind::Memory),
            other => panic!("expected the memory limit, got {other:?}"),
        },
    );
}

#[test]
fn limits_and_errors_are_the_same_types_in_the_worker() {
    let executor = executor();
    let mut ws = Workspace::with(&[("ten.txt", b"0123456789")]);
    let cases: [(&str, ExecutionLimits, LimitKind); 6] = [
        ("x", ExecutionLimits { max_program_bytes: 0, ..ExecutionLimits::default() }, LimitKind::ProgramBytes),
        (
            "vsh_read('ten.txt')",
            ExecutionLimits { max_io_call_bytes: 5, ..ExecutionLimits::default() },
            LimitKind::ReadCallBytes,
        ),
        (
            "vsh_write('a', 'x' * 100)",
            ExecutionLimits { max_write_bytes: 50, ..ExecutionLimits::default() },
            LimitKind::WriteBytes,
        ),
        (
            "['x' * 1000 for i in range(100)]",
            ExecutionLimits { max_result_bytes: 1000, ..ExecutionLimits::default() },
            LimitKind::ResultBytes,
        ),
        (
            "for i in range(10):\n    vsh_list()",
            ExecutionLimits { max_os_calls: 3, ..ExecutionLimits::default() },
            LimitKind::OsCalls,
        ),
        (
            "vsh_write('a', 'x' * 10000)",
            ExecutionLimits { max_io_call_bytes: 100, max_path_bytes: 10, ..ExecutionLimits::default() },
            LimitKind::WriteCallBytes,
        ),
    ];
    for (code, limits, kind) in cases {
        let (in_process, _) = limit(ws.run_with(code, &limits));
        let (in_worker, _) = limit(ws.run_on(&executor, code, &limits));
        assert_eq!(in_process.limit, kind, "{code}");
        assert_eq!(in_worker, in_process, "{code}");
    }
}

#[test]
fn a_request_too_large_to_frame_is_a_write_limit() {
    let executor = executor();
    let mut ws = workspace();
    // 1 MiB of data against a 64 KiB per-call budget: the request frame would
    // exceed its bound, so the worker reports its size instead.
    let limits = ExecutionLimits { max_io_call_bytes: 64 << 10, ..ExecutionLimits::default() };
    let (exceeded, _) = limit(ws.run_on(&executor, "vsh_write('big', 'x' * (1 << 20))", &limits));
    assert_eq!(exceeded.limit, LimitKind::WriteCallBytes);
    assert!(exceeded.attempted > 1 << 20);
    assert_eq!(ws.diff(), vec![]);
}

#[test]
fn idle_workers_are_reused_only_after_a_clean_reset() {
    let executor = executor();
    let limits = ExecutionLimits::default();
    for _ in 0..3 {
        workspace().run_on(&executor, "vsh_read('keep.txt')", &limits).unwrap();
    }
    let status = executor.pool_status().unwrap();
    assert_eq!((status.spawned, status.idle, status.active), (1, 1, 0), "{status:?}");
    // So does a Bash run, failing or not: it resets itself as a program does.
    for code in ["cat keep.txt", "exit 3"] {
        let mut ws = workspace();
        let policy = vsh_policy::CallPolicy::balanced_default(None);
        let bash = vsh_monty::BashLimits::default();
        let ran = executor.execute_bash(code, &mut ws.vfs, &policy, &limits, &bash, &vsh_monty::Uninterrupted);
        assert_eq!(ran.is_ok(), code.starts_with("cat"), "{ran:?}");
    }
    let status = executor.pool_status().unwrap();
    assert_eq!((status.spawned, status.idle, status.discarded), (1, 1, 0), "{status:?}");
    // A guest exception leaves the worker reusable.
    assert!(workspace().run_on(&executor, "raise ValueError('x')", &limits).is_err());
    assert_eq!(executor.pool_status().unwrap().spawned, 1);
    // A limit discards it.
    let tight = ExecutionLimits { max_os_calls: 1, ..limits.clone() };
    assert!(workspace().run_on(&executor, "vsh_list()\nvsh_list()", &tight).is_err());
    workspace().run_on(&executor, "1", &limits).unwrap();
    assert_eq!(executor.pool_status().unwrap().spawned, 2);
    // A worker that leaks memory past the reset's slack is not kept.
    workspace().run_on(&executor, "vsh_test_hook('leak', 64 * 1024 * 1024)", &limits).unwrap();
    let status = executor.pool_status().unwrap();
    assert_eq!(status.idle, 0, "{status:?}");
    workspace().run_on(&executor, "1", &limits).unwrap();
    assert_eq!(executor.pool_status().unwrap().spawned, 3);
    // A different memory budget needs a worker sized for it.
    let small = ExecutionLimits { max_memory_bytes: 64 << 20, ..limits };
    workspace().run_on(&executor, "1", &small).unwrap();
    assert_eq!(executor.pool_status().unwrap().spawned, 4);
    assert_eq!(executor.worker_pids().len(), 1, "never more processes than max_active");
}

#[test]
fn the_worker_binary_is_pinned_by_its_hash() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join(WORKER_BINARY_NAME);
    std::fs::copy(WORKER, &copy).unwrap();
    let executor = worker_executor(WorkerConfig::new(&copy).with_max_idle(0));
    let digest = executor.worker_digest().unwrap();
    assert_eq!(digest, *blake3::hash(&std::fs::read(WORKER).unwrap()).as_bytes());
    workspace().run_on(&executor, "1", &ExecutionLimits::default()).unwrap();
    // Touching the file (same bytes) is fine.
    let file = std::fs::OpenOptions::new().append(true).open(&copy).unwrap();
    file.set_modified(std::time::SystemTime::now() + Duration::from_secs(5)).unwrap();
    drop(file);
    workspace().run_on(&executor, "1", &ExecutionLimits::default()).unwrap();
    // Another binary at the same path is refused before it runs.
    let mut bytes = std::fs::read(&copy).unwrap();
    bytes.push(0);
    std::fs::write(&copy, bytes).unwrap();
    match worker_error(workspace().run_on(&executor, "1", &ExecutionLimits::default())) {
        WorkerError::BinaryChanged { expected, found, .. } => {
            assert_eq!(expected, blake3::Hash::from_bytes(digest).to_hex().to_string());
            assert_ne!(found, expected);
        }
        other => panic!("expected a changed binary, got {other:?}"),
    }
    // A new executor pins what the file holds now: the digest this process
    // remembered for the path is reused only while the file's identity is
    // the one it was computed under.
    let again = worker_executor(WorkerConfig::new(&copy).with_max_idle(0));
    assert_eq!(again.worker_digest().unwrap(), *blake3::hash(&std::fs::read(&copy).unwrap()).as_bytes());
    assert_ne!(again.worker_digest().unwrap(), digest);
    let twice = worker_executor(WorkerConfig::new(&copy).with_max_idle(0));
    assert_eq!(twice.worker_digest(), again.worker_digest());
    assert!(matches!(
        MontyExecutor::worker(WorkerConfig::new(dir.path().join("missing"))),
        Err(WorkerError::Binary { .. })
    ));
    assert!(matches!(
        MontyExecutor::worker(WorkerConfig::new(WORKER).with_max_active(0)),
        Err(WorkerError::Config { .. })
    ));
}

#[test]
fn a_program_that_is_not_the_worker_fails_the_handshake() {
    let executor = worker_executor(WorkerConfig::new("/bin/true"));
    match worker_error(workspace().run_on(&executor, "1", &ExecutionLimits::default())) {
        WorkerError::Handshake { reason } => assert!(reason.contains("exited before greeting"), "{reason}"),
        other => panic!("expected a failed handshake, got {other:?}"),
    }
    assert!(executor.worker_pids().is_empty());
}

#[test]
fn the_default_worker_path_is_beside_the_executable() {
    // Test binaries live in `target/<profile>/deps`; the worker one level up.
    if std::env::var_os("VSH_MONTY_WORKER").is_none() {
        let found = default_worker_path().expect("the worker is found");
        assert_eq!(std::fs::canonicalize(found).unwrap(), std::fs::canonicalize(WORKER).unwrap());
    }
}

#[test]
fn result_compatibility_is_checked_after_the_run() {
    for executor in [executor(), MontyExecutor::in_process()] {
        let python = executor.with_result_compatibility(ResultCompatibility::Python);
        let mut ws = workspace();
        let deep = "x = 1\nfor i in range(201):\n    x = [x]\nx";
        let shallow = "x = 1\nfor i in range(200):\n    x = [x]\nlen(x)";
        assert!(ws.run_on(&python, shallow, &ExecutionLimits::default()).is_ok());
        match ws.run_on(&python, deep, &ExecutionLimits::default()) {
            Err(ExecutionError::Incompatible { source: vsh_monty::CompatibilityError::Depth { max: 200 }, .. }) => {}
            other => panic!("expected a depth incompatibility, got {other:?}"),
        }
        match ws.run_on(&python, "import json\njson.JSONDecodeError", &ExecutionLimits::default()) {
            Err(ExecutionError::Incompatible {
                source: vsh_monty::CompatibilityError::TypeObject { type_name },
                ..
            }) => {
                assert_eq!(type_name, "json.JSONDecodeError");
            }
            other => panic!("expected a type-object incompatibility, got {other:?}"),
        }
        assert_eq!(ws.run_on(&python, "int", &ExecutionLimits::default()).unwrap().value.py_repr(), "<class 'int'>");
    }
}

#[test]
fn the_config_digest_names_mode_binary_pool_and_compatibility() {
    let in_process = MontyExecutor::in_process().config_digest();
    assert_eq!(in_process, MontyExecutor::in_process().config_digest());
    let worker = executor().config_digest();
    assert_ne!(in_process, worker);
    assert_eq!(worker, executor().config_digest(), "stable for one configuration");
    let wider = worker_executor(WorkerConfig::new(WORKER).with_max_active(2).with_max_idle(1)).config_digest();
    assert_ne!(worker, wider);
    let graced = worker_executor(
        WorkerConfig::new(WORKER).with_max_active(1).with_max_idle(1).with_wall_grace(Duration::from_secs(2)),
    );
    assert_ne!(worker, graced.config_digest());
    let python = executor().with_result_compatibility(ResultCompatibility::Python).config_digest();
    assert_ne!(worker, python);
    let unconfined = worker_executor(
        WorkerConfig::new(WORKER)
            .with_max_active(1)
            .with_max_idle(1)
            .with_sandbox(Arc::new(SandboxPolicy::group_only())),
    );
    assert_ne!(worker, unconfined.config_digest());
}

/// What a confined worker gets when it tries to reach the host: every errno
/// must be the kernel's refusal. The same attempts from an unconfined worker
/// succeed, so the refusals are the sandbox's doing.
#[test]
fn the_worker_cannot_open_host_files_or_sockets() {
    let ws = workspace();
    let secret = ws.root().join("keep.txt");
    let outside = ws.parent.path().join("planted.txt");
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp_address = tcp.local_addr().unwrap().to_string();
    let abstract_name = format!("vsh-monty-test-{}", std::process::id());
    let _abstract =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap()).unwrap();
    let attempts = [
        ("open", secret.display().to_string()),
        ("list", ws.root().display().to_string()),
        ("list", "/root".to_owned()),
        ("open", "/etc/shadow".to_owned()),
        ("create", outside.display().to_string()),
        ("create", ws.root().join("planted.txt").display().to_string()),
        ("tcp", tcp_address.clone()),
        ("udp", tcp_address),
        ("unix-abstract", abstract_name),
        ("exec", "/bin/true".to_owned()),
    ];
    let program = format!(
        "[vsh_test_hook(name, arg) for name, arg in [{}]] + [vsh_test_hook('env')]",
        attempts.iter().map(|(name, arg)| format!("({}, {})", s(name), s(arg))).collect::<Vec<_>>().join(", ")
    );
    let confined = executor();
    let mut ws_run = workspace();
    let errnos = ws_run.run_on(&confined, &program, &ExecutionLimits::default()).unwrap().value.py_repr();
    // EACCES from Landlock for files, directories and exec; EPERM from seccomp
    // for non-unix sockets and from Landlock's scope for abstract sockets; an
    // empty environment.
    assert_eq!(errnos, "[13, 13, 13, 13, 13, 13, 1, 1, 1, 13, 0]", "{attempts:?}");
    assert!(!outside.exists() && !ws.root().join("planted.txt").exists());

    let unconfined = worker_executor(
        WorkerConfig::new(WORKER)
            .with_max_active(1)
            .with_sandbox(Arc::new(SandboxPolicy::group_only()))
            .with_user(vsh_monty::WorkerUser::Host),
    );
    let baseline = ws_run.run_on(&unconfined, &program, &ExecutionLimits::default()).unwrap().value.py_repr();
    assert!(baseline.starts_with("[0, 0, 0, 0, 0, 0, 0, 0, 0"), "unconfined, the attempts succeed: {baseline}");
    assert!(outside.exists(), "and the unconfined worker could plant a file");
}

/// As root, a worker runs as `nobody` with a process-count limit, and the
/// enforcement report says both; the same holds in a child that is not root
/// (it runs as its own user then).
#[test]
fn a_worker_never_runs_as_root_and_has_a_process_limit() {
    let confined = executor();
    let mut ws_run = workspace();
    ws_run.run_on(&confined, "1", &ExecutionLimits::default()).unwrap();
    let pid = *confined.worker_pids().first().expect("an idle worker is kept");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid_line = status.lines().find(|line| line.starts_with("Uid:")).unwrap().to_owned();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let nproc = limits.lines().find(|line| line.starts_with("Max processes")).unwrap().to_owned();
    assert!(nproc.split_whitespace().any(|field| field == vsh_monty::WORKER_PROCESSES.to_string()), "{nproc}");
    let report = confined.worker_enforcement().expect("a worker executor reports");
    let resources = report.axes().iter().find(|axis| axis.axis() == vsh_sandbox::Axis::Resources).unwrap();
    assert!(resources.reason().contains(&format!("NPROC {}", vsh_monty::WORKER_PROCESSES)), "{}", resources.reason());
    if vsh_sandbox::effective_uid() == 0 {
        assert!(uid_line.split_whitespace().skip(1).all(|uid| uid == "65534"), "{uid_line}");
        assert_eq!(confined.worker_user(), Some(vsh_monty::NOBODY));
        assert!(resources.reason().contains("runs as uid 65534 gid 65534"), "{}", resources.reason());
        assert_eq!(resources.level(), vsh_sandbox::Enforcement::Kernel, "NPROC is enforced for nobody");
        // The non-root variant: the same executor built by a process that is not root.
        let exe = std::env::current_exe().unwrap();
        let output = std::os::unix::process::CommandExt::gid(
            std::os::unix::process::CommandExt::uid(&mut std::process::Command::new(exe), vsh_monty::NOBODY.0),
            vsh_monty::NOBODY.1,
        )
        .args(["--exact", "worker::a_worker_never_runs_as_root_and_has_a_process_limit", "--test-threads", "1"])
        .env("HOME", "/tmp")
        .output()
        .unwrap();
        assert!(
            output.status.success() && String::from_utf8_lossy(&output.stdout).contains("1 passed"),
            "as nobody: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    } else {
        let own = vsh_sandbox::effective_uid().to_string();
        assert!(uid_line.split_whitespace().skip(1).all(|uid| uid == own), "{uid_line}");
        assert_eq!(confined.worker_user(), None);
        assert!(resources.reason().contains(&format!("caller's uid {own}")), "{}", resources.reason());
    }
}

/// Run `code` with `limits`, setting the interrupt `after` the start; the
/// outcome and how long the run took.
fn interrupted_after(
    executor: &MontyExecutor,
    code: &str,
    limits: &ExecutionLimits,
    after: Duration,
) -> (Result<vsh_monty::MontyOutcome, ExecutionError>, Duration) {
    let mut ws = workspace();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let started = Instant::now();
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(after);
            stop.store(true, std::sync::atomic::Ordering::Release);
        });
        executor.execute_interruptible(
            code,
            &mut ws.vfs,
            &vsh_policy::CallPolicy::balanced_default(None),
            limits,
            &stop,
        )
    });
    (result, started.elapsed())
}

#[test]
fn an_interrupt_kills_a_computing_worker_and_the_executor_goes_on() {
    let executor = executor();
    // A minute of budget: only the interrupt can end these in time.
    let limits = ExecutionLimits {
        max_duration: Duration::from_mins(1),
        max_request_duration: Duration::from_mins(2),
        ..ExecutionLimits::default()
    };
    for code in [
        // Bytecode that never suspends, catching whatever it can.
        "try:\n    while True:\n        pass\nexcept BaseException:\n    pass",
        // One native call that spins (the worker's test hook).
        "vsh_test_hook('spin', 600000)",
        // A loop of host calls.
        "while True:\n    vsh_read('keep.txt')",
    ] {
        let (result, took) = interrupted_after(&executor, code, &limits, Duration::from_millis(150));
        match result {
            Err(ExecutionError::Cancelled { .. }) => {}
            other => panic!("{code}: expected a cancellation, got {other:?}"),
        }
        assert!(took < Duration::from_secs(30), "{code}: the interrupt, not a limit, ended the run ({took:?})");
    }
    let mut next = workspace();
    let outcome = next.run_on(&executor, "vsh_read('keep.txt')", &ExecutionLimits::default()).expect("still usable");
    assert_eq!(outcome.value.py_repr(), s("original"));
    // An interrupt already set ends the run before it starts.
    let stop = std::sync::atomic::AtomicBool::new(true);
    let mut ws = workspace();
    let result = executor.execute_interruptible(
        "vsh_write('new.txt', 'x')",
        &mut ws.vfs,
        &vsh_policy::CallPolicy::balanced_default(None),
        &limits,
        &stop,
    );
    assert!(matches!(result, Err(ExecutionError::Cancelled { .. })), "{result:?}");
    assert!(ws.diff().is_empty(), "nothing ran");
}

#[test]
fn in_process_an_interrupt_ends_the_run_at_its_next_host_call() {
    let executor = MontyExecutor::in_process();
    let limits = ExecutionLimits {
        max_duration: Duration::from_mins(1),
        max_request_duration: Duration::from_mins(2),
        max_os_calls: u64::MAX,
        ..ExecutionLimits::default()
    };
    let code = "while True:\n    try:\n        vsh_read('keep.txt')\n    except BaseException:\n        pass";
    let (result, took) = interrupted_after(&executor, code, &limits, Duration::from_millis(100));
    assert!(matches!(result, Err(ExecutionError::Cancelled { .. })), "{result:?}");
    assert!(took < Duration::from_secs(30), "{took:?}");
}
