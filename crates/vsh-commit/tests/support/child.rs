//! Child processes of the multi-process tests: the test binary re-executes
//! itself with `VSH_COMMIT_TEST_ROLE` naming a role, and the parent waits for
//! the files a child creates to signal its progress.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::Result;

/// The role a re-executed test binary plays.
pub const ROLE: &str = "VSH_COMMIT_TEST_ROLE";
/// The trial directory it works in.
pub const TRIAL: &str = "VSH_COMMIT_TEST_TRIAL";
/// The shared data directory (blob store).
pub const DATA: &str = "VSH_COMMIT_TEST_DATA";

/// The longest any wait in these tests may take.
pub const DEADLINE: Duration = Duration::from_mins(1);

pub fn wait_for(mut condition: impl FnMut() -> bool, what: &str) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_micros(200));
    }
}

pub fn spawn(test: &str, role: &str, trial: &Path, data: &Path) -> Result<Child> {
    spawn_with(test, role, trial, data, &[])
}

/// [`spawn`] with more environment variables for the child.
pub fn spawn_with(test: &str, role: &str, trial: &Path, data: &Path, env: &[(&str, &str)]) -> Result<Child> {
    Ok(Command::new(std::env::current_exe()?)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(TRIAL, trial)
        .env(DATA, data)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?)
}

/// Wait for `child`, or wait until it has signalled `ready` (failing if it
/// exits first).
pub fn wait_ready(child: &mut Child, ready: &Path) -> Result {
    let start = Instant::now();
    while !ready.exists() {
        if let Some(status) = child.try_wait()? {
            return Err(format!("child exited before it was ready: {status}").into());
        }
        if start.elapsed() > DEADLINE {
            child.kill()?;
            return Err("child never became ready".into());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(())
}

/// Wait until `signal` exists (`true`) or the child exits first (`false`).
pub fn wait_signal(child: &mut Child, signal: &Path) -> Result<bool> {
    let start = Instant::now();
    while !signal.exists() {
        if child.try_wait()?.is_some() {
            return Ok(false);
        }
        if start.elapsed() > DEADLINE {
            child.kill()?;
            return Err(format!("child never signalled {}", signal.display()).into());
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    Ok(true)
}

pub fn wait_exit(child: &mut Child) -> Result<ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if start.elapsed() > DEADLINE {
            child.kill()?;
            return Err("child did not exit in time".into());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}
