//! `Host::exec` and `Host::run_capture` with real processes: output, caps,
//! environment, timeouts, cancellation and the kill of the whole tree.
//!
//! Processes whose death is checked run `sleep` with a duration unique to the
//! test (`marker()`), and "alive" means: the pid exists, is not a zombie, and
//! its command line holds that marker, so a recycled pid never counts.

use std::fs as stdfs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use vsh_sandbox::{SandboxPolicy, ToolError};

use super::HostFixture;
use crate::{ExecError, ExecLimits, ExecRequest, HostConfig, PathError, PathPolicy, ShellSpec};

/// An upper bound that proves "no hang"; never a performance assertion.
const PROMPT: Duration = Duration::from_secs(10);

/// A `sleep` duration unique to this call: about 40 s, with this test
/// process's pid as the fraction.
fn marker() -> String {
    static SEQUENCE: AtomicU32 = AtomicU32::new(0);
    format!("{}.{}", 40 + SEQUENCE.fetch_add(1, Ordering::Relaxed), std::process::id())
}

/// Whether `pid` is a live (non-zombie) process whose command line holds `marker`.
fn alive(pid: i32, marker: &str) -> bool {
    // kill(pid, 0) first; a zombie still answers it, and so would a recycled pid.
    let Some(raw) = rustix::process::Pid::from_raw(pid) else { return false };
    if rustix::process::test_kill_process(raw).is_err() {
        return false;
    }
    let Ok(cmdline) = stdfs::read(format!("/proc/{pid}/cmdline")) else { return false };
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    if !cmdline.contains(marker) {
        return false;
    }
    let Ok(stat) = stdfs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

/// Wait (bounded) until `pid` is dead; fail otherwise, after killing it.
fn assert_dies(pid: i32, marker: &str) {
    let start = std::time::Instant::now();
    while alive(pid, marker) {
        if start.elapsed() > PROMPT {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            panic!("process {pid} ({marker}) survived");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pid written (with a newline) to `path`, if it is there yet.
fn try_read_pid(path: &Path) -> Option<i32> {
    let text = stdfs::read_to_string(path).ok()?;
    text.strip_suffix('\n')?.trim().parse().ok()
}

fn read_pid(path: &Path) -> i32 {
    try_read_pid(path).unwrap_or_else(|| panic!("{} holds no pid", path.display()))
}

/// Wait (bounded) for a pid file while the command runs.
async fn pid_file(path: PathBuf) -> i32 {
    tokio::time::timeout(PROMPT, async {
        loop {
            if let Some(pid) = try_read_pid(&path) {
                return pid;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{} never appeared", path.display()))
}

fn fixture(limits: ExecLimits) -> HostFixture {
    HostFixture::with(|config: HostConfig| config.with_limits(limits))
}

fn quick_limits() -> ExecLimits {
    ExecLimits::default().with_kill_grace(Duration::from_millis(300))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_captures_streams_and_the_exit_code() {
    let fx = fixture(quick_limits());
    let cancel = CancellationToken::new();
    let out = fx.host.exec(ExecRequest::new("echo out; echo err >&2; exit 3", fx.root()), &cancel).await.unwrap();
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.signal, None);
    assert_eq!(out.stdout, "out\n");
    assert_eq!(out.stderr, "err\n");
    assert_eq!((out.stdout_bytes, out.stderr_bytes), (4, 4));
    assert!(!out.truncated && !out.stdout_truncated && !out.stderr_truncated);
    assert!(!out.timed_out && !out.cancelled && !out.success());

    let ok = fx.host.exec(ExecRequest::new("true", fx.root()), &cancel).await.unwrap();
    assert!(ok.success());
    assert_eq!(ok.exit_code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_reports_the_signal_that_ended_the_command() {
    let fx = fixture(quick_limits());
    let out = fx.host.exec(ExecRequest::new("kill -KILL $$", fx.root()), &CancellationToken::new()).await.unwrap();
    assert_eq!(out.exit_code, None);
    assert_eq!(out.signal, Some(9));
    assert!(!out.timed_out && !out.cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_is_dev_null() {
    let fx = fixture(quick_limits().with_default_timeout(PROMPT));
    let out = fx.host.exec(ExecRequest::new("cat; wc -c", fx.root()), &CancellationToken::new()).await.unwrap();
    assert_eq!(out.stdout.trim(), "0");
    assert!(!out.timed_out);
    assert!(out.duration < PROMPT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_is_empty_except_path_and_granted_variables() {
    assert!(std::env::var_os("CARGO").is_some(), "cargo sets CARGO for tests: the leak check needs a parent variable");
    let fx = fixture(quick_limits());
    let cancel = CancellationToken::new();
    let out = fx.host.run_capture(Path::new("/usr/bin/env"), &[], fx.root(), None, &cancel).await.unwrap();
    assert_eq!(out.stdout, "PATH=/usr/bin:/bin\n");

    let request = ExecRequest::new("/usr/bin/env", fx.root()).with_env("FOO", "bar baz");
    let out = fx.host.exec(request, &cancel).await.unwrap();
    let vars: Vec<(&str, &str)> = out.stdout.lines().filter_map(|line| line.split_once('=')).collect();
    assert!(vars.contains(&("FOO", "bar baz")), "{vars:?}");
    assert!(vars.contains(&("PATH", "/usr/bin:/bin")), "{vars:?}");
    // The shell itself may add PWD (dash) and SHLVL/_ (bash); nothing else appears.
    for (name, _) in &vars {
        assert!(["FOO", "PATH", "PWD", "SHLVL", "_"].contains(name), "unexpected variable {name}: {vars:?}");
    }

    let request = ExecRequest::new("echo $PATH", fx.root()).with_env("PATH", "/bin");
    assert_eq!(fx.host.exec(request, &cancel).await.unwrap().stdout, "/bin\n", "a request may override PATH");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_over_the_cap_keeps_head_and_tail_with_a_marker() {
    let fx = fixture(quick_limits().with_max_output_bytes(1000));
    let command = "printf BEGIN; head -c 200000 /dev/zero | tr '\\0' x; printf END; \
                   head -c 5000 /dev/zero | tr '\\0' y >&2";
    let out = fx.host.exec(ExecRequest::new(command, fx.root()), &CancellationToken::new()).await.unwrap();
    let expected_stdout = format!("BEGIN{}\n[… 199008 bytes truncated …]\n{}END", "x".repeat(495), "x".repeat(497));
    assert_eq!(out.stdout, expected_stdout);
    let expected_stderr = format!("{}\n[… 4000 bytes truncated …]\n{}", "y".repeat(500), "y".repeat(500));
    assert_eq!(out.stderr, expected_stderr);
    assert_eq!((out.stdout_bytes, out.stderr_bytes), (200_008, 5000));
    assert!(out.truncated && out.stdout_truncated && out.stderr_truncated);
    assert_eq!(out.exit_code, Some(0));
    // One stream over the cap is enough for the whole output to say so.
    for (command, stdout_over) in [("head -c 5000 /dev/zero", true), ("head -c 5000 /dev/zero >&2", false)] {
        let out = fx.host.exec(ExecRequest::new(command, fx.root()), &CancellationToken::new()).await.unwrap();
        assert_eq!((out.stdout_truncated, out.stderr_truncated), (stdout_over, !stdout_over), "{command}");
        assert!(out.truncated, "{command}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_kills_the_shell_and_its_background_child() {
    let fx = fixture(quick_limits());
    let m = marker();
    let command = format!("sleep {m} & echo $! > bg.pid; echo $$ > sh.pid; sleep {m}");
    // Long enough for a busy machine to start the shell and write both pids.
    let request = ExecRequest::new(command, fx.root()).with_timeout(Duration::from_secs(2));
    let out = tokio::time::timeout(PROMPT, fx.host.exec(request, &CancellationToken::new())).await.unwrap().unwrap();
    assert!(out.timed_out && !out.cancelled);
    assert_eq!(out.exit_code, None);
    assert!(matches!(out.signal, Some(15 | 9)), "{:?}", out.signal);
    assert_dies(read_pid(&fx.ws("sh.pid")), &m);
    assert_dies(read_pid(&fx.ws("bg.pid")), &m);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_that_ignore_sigterm_are_killed_after_the_grace() {
    let fx = fixture(quick_limits());
    // The shell dies of SIGTERM at once; its background child ignores it and
    // outlives the leader: SIGKILL must still reach the group.
    let m = marker();
    let command = format!("sh -c \"trap '' TERM; echo \\$\\$ > bg.pid; exec sleep {m}\" & sleep {m}");
    let request = ExecRequest::new(command, fx.root()).with_timeout(Duration::from_secs(2));
    let cancel = CancellationToken::new();
    let out = tokio::time::timeout(PROMPT, fx.host.exec(request, &cancel)).await.unwrap().unwrap();
    assert!(out.timed_out);
    assert_dies(read_pid(&fx.ws("bg.pid")), &m);

    // The leader itself ignores SIGTERM: it dies of SIGKILL after the grace.
    let m = marker();
    let command = format!("trap '' TERM; sleep {m}");
    // Long enough for a busy machine to run the trap before the SIGTERM.
    let request = ExecRequest::new(command, fx.root()).with_timeout(Duration::from_secs(2));
    let out = tokio::time::timeout(PROMPT, fx.host.exec(request, &cancel)).await.unwrap().unwrap();
    assert!(out.timed_out);
    assert_eq!(out.signal, Some(9));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_child_holding_the_pipe_does_not_hang_exec() {
    let fx = fixture(quick_limits());
    let m = marker();
    let command = format!("sleep {m} & echo $! > bg.pid; echo hi");
    let request = ExecRequest::new(command, fx.root()).with_timeout(Duration::from_mins(1));
    let out = tokio::time::timeout(PROMPT, fx.host.exec(request, &CancellationToken::new())).await.unwrap().unwrap();
    assert_eq!(out.stdout, "hi\n");
    assert_eq!(out.exit_code, Some(0));
    assert!(!out.timed_out && !out.cancelled);
    assert!(out.duration < PROMPT);
    assert_dies(read_pid(&fx.ws("bg.pid")), &m);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_mid_run_returns_promptly_and_kills_the_tree() {
    let fx = fixture(quick_limits());
    let m = marker();
    let command = format!("sleep {m} & echo $! > bg.pid; echo $$ > sh.pid; sleep {m}");
    let request = ExecRequest::new(command, fx.root()).with_timeout(Duration::from_mins(1));
    let cancel = CancellationToken::new();
    let host = fx.host.clone();
    let token = cancel.clone();
    let run = tokio::spawn(async move { host.exec(request, &token).await });
    let shell = pid_file(fx.ws("sh.pid")).await;
    let background = pid_file(fx.ws("bg.pid")).await;
    assert!(alive(shell, &m) && alive(background, &m));
    cancel.cancel();
    let out = tokio::time::timeout(PROMPT, run).await.unwrap().unwrap().unwrap();
    assert!(out.cancelled && !out.timed_out);
    assert_eq!(out.exit_code, None);
    assert_dies(shell, &m);
    assert_dies(background, &m);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_cancelled_before_the_call_starts_nothing() {
    let fx = fixture(quick_limits());
    let cancel = CancellationToken::new();
    cancel.cancel();
    let out = fx.host.exec(ExecRequest::new("touch ran", fx.root()), &cancel).await.unwrap();
    assert!(out.cancelled);
    assert_eq!((out.exit_code, out.signal), (None, None));
    assert!(!fx.ws("ran").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_exec_future_kills_the_tree() {
    let fx = fixture(quick_limits());
    let m = marker();
    let command = format!("sleep {m} & echo $! > bg.pid; echo $$ > sh.pid; sleep {m}");
    let request = ExecRequest::new(command, fx.root()).with_timeout(Duration::from_mins(1));
    let cancel = CancellationToken::new();
    let mut exec = Box::pin(fx.host.exec(request, &cancel));
    let (shell, background) = tokio::select! {
        result = &mut exec => panic!("the command finished early: {result:?}"),
        pids = async { (pid_file(fx.ws("sh.pid")).await, pid_file(fx.ws("bg.pid")).await) } => pids,
    };
    drop(exec);
    assert_dies(shell, &m);
    assert_dies(background, &m);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_cannot_escape_the_group_with_setsid() {
    let fx = fixture(quick_limits());
    let m = marker();
    // The grandchild tries to start a new session and record its pid. The
    // leader waits (bounded) until it either did or failed, then exits
    // normally; the group is then killed.
    let command = format!(
        "(setsid sh -c 'echo $$ > gc.pid; exec sleep {m}' || echo failed > gc.failed) & \
         i=0; while [ ! -s gc.pid ] && [ ! -s gc.failed ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; \
         echo done"
    );
    let request = ExecRequest::new(command, fx.root()).with_timeout(Duration::from_secs(30));
    let out =
        tokio::time::timeout(PROMPT * 2, fx.host.exec(request, &CancellationToken::new())).await.unwrap().unwrap();
    assert_eq!(out.stdout, "done\n", "stderr: {}", out.stderr);
    if let Some(pid) = try_read_pid(&fx.ws("gc.pid")) {
        // Whatever happened, the grandchild must be dead now; then fail: the escape was possible.
        assert_dies(pid, &m);
        panic!("setsid succeeded in the command's sandbox");
    }
    assert!(fx.ws("gc.failed").exists(), "the grandchild neither ran nor failed: {}", out.stderr);
    assert!(out.stderr.contains("setsid failed: Operation not permitted"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escaped_process_holding_the_pipe_cannot_hang_supervision() {
    // Without the sandbox (a plain spawn), a grandchild can leave the group
    // with setsid and keep stdout open. Supervision still returns once the
    // leader has exited and the short drain period has passed.
    use std::os::unix::process::CommandExt as _;

    use crate::spawn::GroupChild;
    use crate::supervise::{Plan, deadline_after, supervise};

    let fx = fixture(quick_limits());
    let m = marker();
    let mut command = std::process::Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(format!(
            "setsid sh -c 'echo $$ > escaped.pid; exec sleep {m}' & echo hi; \
             i=0; while [ ! -s escaped.pid ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done"
        ))
        .current_dir(fx.root())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0);
    let child = GroupChild::new(command.spawn().unwrap()).unwrap();
    let plan = Plan {
        program: PathBuf::from("/bin/sh"),
        deadline: deadline_after(Duration::from_secs(30)),
        limits: quick_limits(),
        started: std::time::Instant::now(),
    };
    let out = tokio::time::timeout(PROMPT, supervise(child, plan, &CancellationToken::new())).await;
    // Clean up the escaped process whatever happened (it is not in our group).
    let escaped = read_pid(&fx.ws("escaped.pid"));
    assert!(alive(escaped, &m), "the escape worked, so the pipe really was held");
    let _ =
        rustix::process::kill_process(rustix::process::Pid::from_raw(escaped).unwrap(), rustix::process::Signal::KILL);
    assert_dies(escaped, &m);
    let out = out.expect("supervision returned while the pipe was still held").unwrap();
    assert_eq!(out.stdout, "hi\n");
    assert_eq!(out.exit_code, Some(0));
    assert!(!out.timed_out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_clamped_to_max_timeout() {
    let limits =
        quick_limits().with_max_timeout(Duration::from_millis(300)).with_default_timeout(Duration::from_mins(1));
    assert_eq!(limits.effective_timeout(Some(Duration::from_mins(1))), Duration::from_millis(300));
    assert_eq!(limits.effective_timeout(None), Duration::from_millis(300));
    assert_eq!(limits.effective_timeout(Some(Duration::from_millis(100))), Duration::from_millis(100));
    let fx = fixture(limits);
    let cancel = CancellationToken::new();
    let m = marker();
    for timeout in [Some(Duration::from_mins(1)), None] {
        let mut request = ExecRequest::new(format!("sleep {m}"), fx.root());
        request.timeout = timeout;
        let out = tokio::time::timeout(PROMPT, fx.host.exec(request, &cancel)).await.unwrap().unwrap();
        assert!(out.timed_out, "{timeout:?}");
    }
    let program = PathBuf::from("/bin/sleep");
    let out = tokio::time::timeout(
        PROMPT,
        fx.host.run_capture(&program, std::slice::from_ref(&m), fx.root(), Some(Duration::from_mins(1)), &cancel),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(out.timed_out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_capture_passes_arguments_literally() {
    let fx = fixture(quick_limits());
    fx.write("a.txt", b"a");
    let args: Vec<String> = ["%s\\n", "$HOME", "*", "a b", "`id`", "$(id)", "'quoted'"].map(String::from).to_vec();
    let out = fx
        .host
        .run_capture(Path::new("/usr/bin/printf"), &args, fx.root(), None, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.stdout, "$HOME\n*\na b\n`id`\n$(id)\n'quoted'\n");
    assert_eq!(out.exit_code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_that_cannot_start_are_spawn_errors() {
    let fx = fixture(quick_limits());
    let cancel = CancellationToken::new();
    match fx.host.run_capture(Path::new("/nonexistent/program"), &[], fx.root(), None, &cancel).await {
        Err(ExecError::Spawn { program, .. }) => assert_eq!(program, Path::new("/nonexistent/program")),
        other => panic!("expected a spawn error, got {other:?}"),
    }
    let request = ExecRequest::new("true", fx.root()).with_shell(ShellSpec::new("/nonexistent/sh"));
    assert!(matches!(fx.host.exec(request, &cancel).await, Err(ExecError::Spawn { .. })));
    // Admission resolves a bare name in /usr/bin and /bin, and refuses a relative path.
    let out = fx.host.run_capture(Path::new("printf"), &["x".to_owned()], fx.root(), None, &cancel).await.unwrap();
    assert_eq!(out.stdout, "x");
    let result = fx.host.run_capture(Path::new("./printf"), &[], fx.root(), None, &cancel).await;
    assert!(matches!(result, Err(ExecError::Confinement { source: ToolError::ExecDenied { .. }, .. })), "{result:?}");
    // A failing command is not an error.
    let out = fx.host.exec(ExecRequest::new("exit 127", fx.root()), &cancel).await.unwrap();
    assert_eq!(out.exit_code, Some(127));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_working_directory_is_resolved_and_jailed() {
    let fx = fixture(quick_limits());
    fx.mkdir("d");
    let cancel = CancellationToken::new();
    let out = fx.host.exec(ExecRequest::new("pwd", "d"), &cancel).await.unwrap();
    assert_eq!(out.stdout, format!("{}\n", fx.ws("d").display()));
    match fx.host.exec(ExecRequest::new("touch pwned", "../outside"), &cancel).await {
        Err(ExecError::Cwd(PathError::Escape { .. })) => {}
        other => panic!("expected the cwd to be refused, got {other:?}"),
    }
    assert!(!fx.outside("pwned").exists());
    let result = fx.host.run_capture(Path::new("/bin/true"), &[], Path::new("/"), None, &cancel).await;
    assert!(matches!(result, Err(ExecError::Cwd(_))), "{result:?}");

    // Unrestricted hosts only make the directory absolute.
    let fx = HostFixture::with(|config| config.with_path_policy(PathPolicy::Unrestricted));
    let out = fx.host.exec(ExecRequest::new("pwd", "../outside"), &cancel).await.unwrap();
    assert_eq!(out.stdout, format!("{}\n", fx.outside("sub").parent().unwrap().display()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shell_is_sh_without_login_unless_configured() {
    assert_eq!(ShellSpec::default(), ShellSpec::sh());
    assert!(!ShellSpec::default().login);
    let fx = fixture(quick_limits());
    let cancel = CancellationToken::new();
    let out = fx.host.exec(ExecRequest::new("echo \"${BASH_VERSION:-none}\"", fx.root()), &cancel).await.unwrap();
    assert_eq!(out.stdout, "none\n");
    let request =
        ExecRequest::new("echo \"${BASH_VERSION:-none}\"; shopt -q login_shell && echo login || echo plain", fx.root())
            .with_shell(ShellSpec::bash());
    let out = fx.host.exec(request, &cancel).await.unwrap();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stdout);
    assert_ne!(lines[0], "none");
    assert_eq!(lines[1], "plain");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_policy_confines_commands() {
    let fx = HostFixture::with(|config| {
        let root = stdfs::canonicalize(&config.workspace_root).unwrap();
        config.with_limits(quick_limits()).with_confinement(Arc::new(SandboxPolicy::new().allow_write(root)))
    });
    let policy = SandboxPolicy::new().allow_write(fx.root());
    let before = fx.outside_snapshot();
    let command = "echo made > inside.txt; cat ../outside/secret.txt; echo pwned > ../outside/pwned.txt; echo end";
    let result = fx.host.exec(ExecRequest::new(command, fx.root()), &CancellationToken::new()).await;
    if vsh_sandbox::probe().report_for(&policy).first_below_floor().is_some() {
        // This kernel cannot confine as the policy requires: nothing runs.
        assert!(
            matches!(result, Err(ExecError::Confinement { source: ToolError::BelowFloor { .. }, .. })),
            "{result:?}"
        );
        assert!(!fx.ws("inside.txt").exists());
        return;
    }
    let out = result.unwrap();
    assert_eq!(out.stdout, "end\n", "stderr: {}", out.stderr);
    assert_eq!(stdfs::read(fx.ws("inside.txt")).unwrap(), b"made\n");
    assert_eq!(out.stderr.matches("Permission denied").count(), 2, "{}", out.stderr);
    assert_eq!(fx.outside_snapshot(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_refuses_loader_hijacking_variables_before_anything_runs() {
    let fx = fixture(quick_limits());
    let request = ExecRequest::new("touch ran", fx.root()).with_env("LD_PRELOAD", "/tmp/evil.so");
    let result = fx.host.exec(request, &CancellationToken::new()).await;
    assert!(matches!(result, Err(ExecError::Confinement { source: ToolError::EnvDenied { .. }, .. })), "{result:?}");
    assert!(!fx.ws("ran").exists());
}
