//! Running the commands of a task as named, timed steps.
//!
//! Every command a task runs goes through [`Step::run`], which echoes the command line
//! (with the environment it sets), times it, and turns a non-zero exit into an [`Error`]
//! naming the step. Output is not captured: it streams to the terminal as usual.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{Error, Result, project_root};

/// A command to run, under a short name used in progress and error messages.
pub(crate) struct Step {
    name: String,
    command: Command,
}

impl Step {
    /// A step that runs `cargo args...` from the repository root with the toolchain that runs xtask.
    pub(crate) fn cargo(name: impl Into<String>, args: &[&str]) -> Self {
        let mut command = Command::new(cargo_program());
        command.args(args).current_dir(project_root());
        if std::env::var_os("CARGO_TERM_COLOR").is_none() {
            // Nested cargo, rustc and test binaries each guess colour on their own; decide once,
            // from xtask's own stderr, so a run in a terminal is coloured and a CI log is plain text.
            let color = if std::io::stderr().is_terminal() { "always" } else { "never" };
            command.env("CARGO_TERM_COLOR", color);
        }
        Self { name: name.into(), command }
    }

    /// A step that runs `program args...` from the repository root.
    pub(crate) fn program(name: impl Into<String>, program: &str, args: &[&str]) -> Self {
        let mut command = Command::new(program);
        command.args(args).current_dir(project_root());
        Self { name: name.into(), command }
    }

    /// The step's short name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Set an environment variable for the command.
    pub(crate) fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    /// Run the command from `dir` instead of the repository root.
    pub(crate) fn current_dir(mut self, dir: impl AsRef<std::path::Path>) -> Self {
        self.command.current_dir(dir);
        self
    }

    /// Run to completion and return the wall time, or an error naming the step.
    pub(crate) fn run(mut self) -> Result<Duration> {
        let line = self.command_line();
        eprintln!("\n==> {}: {line}", self.name);
        let start = Instant::now();
        let status = self
            .command
            .status()
            .map_err(|error| Error::new(format!("step `{}` could not start `{line}`: {error}", self.name)))?;
        let elapsed = start.elapsed();
        if status.success() {
            eprintln!("==> {}: ok in {}", self.name, format_duration(elapsed));
            Ok(elapsed)
        } else {
            Err(Error::new(format!(
                "step `{}` failed ({status}) after {}: {line}",
                self.name,
                format_duration(elapsed)
            )))
        }
    }

    /// Run and report only whether the command succeeded, with its output discarded.
    ///
    /// For probes such as "is this tool installed"; a command that cannot start counts as failure.
    pub(crate) fn succeeds_quietly(mut self) -> bool {
        self.command
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    /// The command as a shell-like line: the environment it sets, the program, the arguments.
    fn command_line(&self) -> String {
        let mut line = String::new();
        for (key, value) in self.command.get_envs() {
            if let Some(value) = value {
                let _ = write!(line, "{}={} ", key.to_string_lossy(), quote(&value.to_string_lossy()));
            }
        }
        line.push_str(&self.command.get_program().to_string_lossy());
        for arg in self.command.get_args() {
            line.push(' ');
            line.push_str(&quote(&arg.to_string_lossy()));
        }
        line
    }
}

/// The cargo to run nested commands with: the one that runs xtask, so the pinned toolchain is used.
pub(crate) fn cargo_program() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// Quote an argument for display if it contains characters a shell would split on.
fn quote(arg: &str) -> String {
    if !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_=+./:,@%".contains(c)) {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// Seconds with one decimal, e.g. `12.3s`.
pub(crate) fn format_duration(duration: Duration) -> String {
    format!("{:.1}s", duration.as_secs_f64())
}
