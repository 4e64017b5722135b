//! Bash programs in bashkit's bounded virtual interpreter, with no filesystem
//! of their own: every file access is an [`FsRequest`] that the caller's
//! [`FsHost`] answers (in vsh, the same guarded virtual image, authorization,
//! read facets and budgets that serve a Monty program).
//!
//! [`run`] interprets one script under [`BashLimits`] and the profile
//! [`PROFILE`]: a guest environment, the working directory `/workspace`, the
//! builtins of [`SUPPORTED_COMMANDS`], and nothing else. A command outside
//! the profile is not looked up anywhere: it fails with status 127 and a
//! message naming it, and the run's [`Ending`] is [`Ending::Unsupported`]
//! whatever the script does next (the guard checks what is dispatched, never
//! the source text). The interpreter runs on a thread of its own; its
//! requests are answered on the caller's thread, so the host may borrow.
//!
//! The crate knows nothing of policy, workspaces or processes: vsh-monty's
//! worker runs it in the confined worker process and serves its requests in
//! the parent over the worker protocol (or in process, for trusted use).

mod fs;
mod guard;
mod interpret;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use guard::SUPPORTED_COMMANDS;
pub use interpret::{run, run_direct};
pub use vsh_types::fsproto::{self as protocol, FsReply, FsRequest, Meta, NodeType};

/// The profile a receipt names: the guest's environment, working directory,
/// commands and limits. Any change to what a script can do changes it.
pub const PROFILE: &str = "vsh-bash-bounded-v1";

/// The bashkit release this crate is built on (pinned exactly in the workspace).
pub const BASHKIT_VERSION: &str = "0.20.2";

/// The guest's home and working directory.
pub const VIRTUAL_ROOT: &str = "/workspace";

/// The environment every script sees; nothing comes from the host.
pub const GUEST_ENVIRONMENT: [(&str, &str); 7] = [
    ("HOME", VIRTUAL_ROOT),
    ("LANG", "C"),
    ("LC_ALL", "C"),
    ("PATH", VIRTUAL_ROOT),
    ("PWD", VIRTUAL_ROOT),
    ("TZ", "UTC"),
    ("VSH_PROFILE", PROFILE),
];

/// The interpreter's own budgets, on top of the run's shared execution budget
/// (time, host calls, bytes read and written, output). Defaults as the peer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BashLimits {
    /// Commands executed (default 10,000).
    pub max_commands: u64,
    /// Iterations of one loop (default 10,000).
    pub max_loop_iterations: u64,
    /// Iterations of all loops together (default 1,000,000).
    pub max_total_loop_iterations: u64,
    /// Parser operations (default 100,000).
    pub max_parser_operations: u64,
    /// Work units shared by the parser, the interpreter and the builtins (default 10,000,000).
    pub max_work_units: u64,
    /// Bytes consumed by commands in all, repeated pipeline input counted
    /// each time (default 100,000,000).
    pub max_aggregate_input_bytes: u64,
    /// Bytes of intermediate buffers alive at once (default 16 MiB).
    pub max_live_intermediate_bytes: u64,
}

impl Default for BashLimits {
    fn default() -> Self {
        Self {
            max_commands: 10_000,
            max_loop_iterations: 10_000,
            max_total_loop_iterations: 1_000_000,
            max_parser_operations: 100_000,
            max_work_units: 10_000_000,
            max_aggregate_input_bytes: 100_000_000,
            max_live_intermediate_bytes: 16 << 20,
        }
    }
}

impl BashLimits {
    /// Append the canonical encoding (for a configuration digest): a version
    /// byte (`1`), then every field in declaration order as a little-endian `u64`.
    pub fn encode_canonical(&self, out: &mut Vec<u8>) {
        out.push(1);
        for value in [
            self.max_commands,
            self.max_loop_iterations,
            self.max_total_loop_iterations,
            self.max_parser_operations,
            self.max_work_units,
            self.max_aggregate_input_bytes,
            self.max_live_intermediate_bytes,
        ] {
            out.extend_from_slice(&value.to_le_bytes());
        }
    }
}

/// One script to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BashRun {
    /// The script.
    pub script: String,
    /// The interpreter's budgets.
    pub limits: BashLimits,
    /// How long the script may run.
    pub timeout: Duration,
    /// Bytes of stdout and of stderr each retains; more is the output limit.
    pub max_output_bytes: u64,
    /// Nested functions, `source`s and subshells (capped at 64 and 16 by the interpreter).
    pub max_depth: u64,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ending {
    /// The script ran to its end (its exit status says how it went).
    Completed,
    /// A budget of the interpreter or the output ran out; what it was.
    Limit(String),
    /// A command outside the profile was dispatched (its name).
    Unsupported(String),
    /// The script does not parse.
    Parse(String),
    /// The host ended the run (a budget of its own, a cancellation, a
    /// terminal error of the image): it knows why.
    Stopped,
    /// The interpreter failed.
    Failed(String),
    /// A real process (a confined command) was ended by this signal; its
    /// exit status is `128 +` it, as a shell reports.
    Signalled(i32),
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BashEnd {
    /// The exit status (127 for an unsupported command, 2 for a parse error).
    pub exit_code: i32,
    /// Standard output, bytes as written.
    pub stdout: Vec<u8>,
    /// Standard error, bytes as written.
    pub stderr: Vec<u8>,
    /// How it ended.
    pub ending: Ending,
}

/// Whatever answers a run's file requests. `Err(Stopped)` ends the run: the
/// script sees the request fail and nothing after it runs.
pub trait FsHost {
    /// Answer one request.
    fn serve(&mut self, request: FsRequest) -> Result<FsReply, Stopped>;

    /// Whether the run should stop now (a cancellation); asked every 20 ms
    /// while the script computes without asking anything.
    fn interrupted(&mut self) -> bool {
        false
    }
}

/// The host ended the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;
