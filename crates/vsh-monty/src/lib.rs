//! Run Monty programs (a sandboxed Python subset, the `monty` crate, pinned at
//! 0.0.23) against a [`vsh_vfs::VirtualFs`], under a [`vsh_policy::CallPolicy`]
//! and per-run [`ExecutionLimits`].
//!
//! [`MontyExecutor`] is what a runtime holds: [`MontyExecutor::in_process`]
//! runs programs in this process (trusted use and tests; [`execute`] is the
//! same path as a free function), [`MontyExecutor::worker`] in pooled
//! `vsh-monty-worker` subprocesses confined by `vsh-sandbox` (see
//! [`WorkerConfig`] and [`default_worker_path`]). Both serve the guest with
//! the same adapter code. The guest sees the workspace at
//! [`VIRTUAL_ROOT`] through `pathlib`, `os` and `open()`; every path is
//! confined lexically to the workspace, authorized before the virtual image is
//! touched, and charged to the budgets before the work is done. The result is
//! the program's value, its captured output, what it used ([`ExecutionStats`])
//! and the accesses the policy refused; its changes are left in the
//! `VirtualFs`, whose canonical diff the caller takes.
//!
//! # Guest surface
//!
//! | guest call | served as |
//! |---|---|
//! | `exists`, `is_file`, `is_dir`, `is_symlink` | `False` for missing, unreachable, refused or malformed paths |
//! | `read_text`, `open(.., 'r')` | strict UTF-8 with universal newlines; invalid bytes raise `UnicodeDecodeError` |
//! | `read_bytes`, `stat`, `iterdir`, `os.listdir` | `stat` carries type bits, size and mtime; listings hide protected children |
//! | `write_*`, `append_*`, `open` (`w`, `a`, `r`) | `w` truncates at open; writes return the characters or bytes written |
//! | `mkdir`, `os.makedirs`, `unlink`, `os.remove`, `rmdir`, `rename`, `os.replace` | `CPython` errno semantics; directory renames authorize every descendant |
//! | `resolve`, `absolute` | lexical, no lookup |
//! | `os.getenv`, `os.environ` | a synthetic environment: `HOME=/home/vsh`, `PWD=/workspace`, `PATH=/usr/bin:/bin`, `LANG=C.UTF-8` |
//! | `date.today()`, `datetime.now()` | refused with `RuntimeError`: guests have no clock |
//! | `vsh_read`, `vsh_write`, `vsh_list`, `vsh_mkdir`, `vsh_remove`, `vsh_move`, `vsh_copy`, `vsh_glob`, `vsh_search`, `vsh_patch` | below |
//! | any other undefined function | `NameError`, as in `CPython` |
//!
//! Errors reach the guest as `CPython`'s `OSError` subclasses with
//! `[Errno N] Description: 'path'` messages: 2, 13, 17, 20, 21, 22, 39 and 40
//! (a path that continues below a symlink).
//!
//! # The `vsh_*` functions
//!
//! Every program sees these ten functions ([`MONTY_VSH_TOOL_NAMES`]) as
//! globals. They share one overlay with pathlib (each sees the other's
//! writes), each call is one [`ExecutionLimits::max_os_calls`] slot, and each
//! is authorized and charged to the budgets before it touches the image.
//! Arguments bind positionally or by keyword with `CPython`'s `TypeError`s.
//!
//! | function | returns | notes |
//! |---|---|---|
//! | `vsh_read(path, binary=False)` | `str` or `bytes` | strict UTF-8, no newline translation |
//! | `vsh_write(path, data, append=False)` | `int` | `str` (characters) or `bytes` (bytes); the parent must exist |
//! | `vsh_list(path='/workspace')` | `list[Path]` | sorted; protected children hidden |
//! | `vsh_mkdir(path, parents=True, exist_ok=True)` | `None` | |
//! | `vsh_remove(path, recursive=False, missing_ok=False)` | `None` | a recursive remove authorizes the whole tree first |
//! | `vsh_move(source, destination)` | `Path` | `rename` semantics; every moved path authorized first |
//! | `vsh_copy(source, destination, recursive=False, overwrite=False)` | `Path` | see below |
//! | `vsh_glob(pattern, path='/workspace', max_results=1000, *, report_truncation=False)` | `list[Path]`, or `(list[Path], truncated)` | see below |
//! | `vsh_search(query, path='/workspace', case_sensitive=True, max_results=100, *, report_truncation=False)` | `list[dict]`, or `(list[dict], truncated)` | see below |
//! | `vsh_patch(path, old, new, count=1)` | `int` | the exact number of replacements made |
//!
//! - **Copy.** A file copy refuses an existing destination unless `overwrite`,
//!   and keeps an overwritten destination's mode; a directory needs
//!   `recursive=True`, keeps every directory's mode, and refuses an existing
//!   destination (no merge), a destination inside the source and any symlink
//!   in the tree (`ValueError`). Every path is authorized and the whole payload
//!   charged before anything is created.
//! - **Glob.** The pattern is written in the one glob dialect vsh has, the
//!   one protected-path rules use (`vsh_policy::Pattern`, documented there:
//!   `*`, `?`, classes `[a-z]` and `[!a]`, `**` for whole components),
//!   case-sensitive, relative to `path`; a pattern the dialect refuses is a
//!   `ValueError` saying why. Matches (files, directories and
//!   symlinks, which are never followed) come in depth-first order of sorted
//!   names. At most `max_results` are returned; `truncated` says whether at
//!   least one more match exists, so with `max_results=0` the walk stops at
//!   the first match.
//! - **Search.** A literal `query` in every UTF-8 file at or below `path`
//!   (non-UTF-8 and protected files are skipped; each file read is charged as
//!   a read call). The first hit per line, as
//!   `{'path': str, 'line': int, 'column': int, 'text': str}` with 1-based
//!   line and column (in characters). `case_sensitive=False` lowercases both
//!   sides with Unicode rules and reports the column in the original line.
//! - **Patch.** `old` must be non-empty and `count` positive; `old` missing is
//!   a `ValueError`. Up to `count` non-overlapping occurrences are replaced,
//!   left to right, and their number is returned.
//!
//! Two more globals run other programs on the same image and budget:
//! `vsh_bash(code)` (when the executor has Bash, see
//! [`MontyExecutor::with_nested_bash`]) and `vsh_exec(argv, timeout=None,
//! env=None, input=None)` (when the run has commands, see
//! [`MontyExecutor::execute_with_commands`]); both return `(exit_code,
//! stdout, stderr)` and raise `RuntimeError` when not enabled.
//!
//! # Budgets
//!
//! [`ExecutionLimits`] (alias [`ExecutionBudget`]) holds the fifteen budgets
//! and the end-to-end deadline; every failure is [`ExecutionError::Limit`]
//! with a [`LimitExceeded`] naming the limit, what was attempted and the
//! maximum. A limit ends the run with an exception the guest cannot catch,
//! so a guest that catches it still produces no result.
//!
//! # The worker
//!
//! The worker receives the program and the budgets it enforces itself
//! (bytecode time, heap, printed output, result size); the parent keeps the
//! `VirtualFs`, the policy and every other budget, and answers each of the
//! worker's suspensions over a framed postcard protocol whose every frame is
//! bounded before it is read, after a handshake that compares the exact build
//! identity. The parent kills the worker when its running time passes
//! `max_duration` plus [`WorkerConfig::wall_grace`], when the request's
//! deadline passes, or when it breaks the protocol, and reports each as a
//! typed error; the executor goes on with another worker.
//!
//! # Limitations
//!
//! - **In-process execution is not an isolation boundary**: see [`execute`].
//! - The worker's isolation is what `vsh-sandbox` enforces on this kernel:
//!   its confined minimum still lets the worker read the system's library
//!   directories and a few `/etc` files. An embedding process must ignore
//!   `SIGPIPE` (Rust programs do) so a dead worker's pipe is an error, not a
//!   signal.
//! - Monty 0.0.23 itself rejects `open()` modes `r+`, `w+`, `a+` and `x`, has no
//!   iteration over file objects and no `unlink(missing_ok=...)`, and turns `\`
//!   into `/` inside `pathlib.Path` values; the host cannot supply these.
//! - `os.rename` returns the destination path (like `Path.rename`) instead of
//!   `None`: monty sends both as the same call.
// Unit tests build and inspect their fixtures by path.
#![cfg_attr(test, allow(clippy::disallowed_methods))]
#![forbid(unsafe_code)]

mod bash;
mod command;
mod compat;
mod dispatch;
mod drive;
mod error;
mod executor;
mod guard;
mod host;
mod interrupt;
mod limits;
mod oserror;
mod output;
mod path;
mod run;
mod tools;
pub mod value;
mod worker;

pub use bash::{ServedRequest, serve_request};
pub use command::{
    BASH_CONFINED_PROFILE, BUILD_MANIFESTS, BUILD_SCRATCH_NAME, COMMAND_OPEN_FILES, COMMAND_PROCESSES, COMMAND_PROFILE,
    COMMAND_SHM_BYTES, COMMAND_TMP_BYTES, COMMAND_USER, CommandConfig, CommandLine, GIT_CONFIG, PYCACHE_SCRATCH,
    capture_was_cut, is_working_dir,
};
pub use compat::{PYTHON_MAX_DEPTH, ResultCompatibility};
pub use error::{BashFailure, CompatibilityError, ExecutionError, GuestException, TRUNCATION_MARKER, WorkerError};
pub use executor::MontyExecutor;
pub use interrupt::{Interrupt, Uninterrupted};
pub use limits::{ExecutionBudget, ExecutionLimits, ExecutionStats, LimitExceeded, LimitKind, MAX_HIDDEN_PATHS};
pub use monty_types::MontyObject;
pub use path::VIRTUAL_ROOT;
pub use run::{BashOutcome, MontyOutcome, execute};
pub use tools::{GUEST_FUNCTION_NAMES, MONTY_VSH_TOOL_NAMES};
pub use vsh_bash::{BashLimits, PROFILE as BASH_PROFILE};
pub use worker::pool::{BinaryDigest, BinaryStamp, PoolStatus};
pub use worker::{
    NOBODY, WORKER_BINARY_NAME, WORKER_PATH_VARIABLE, WORKER_PROCESSES, WorkerConfig, WorkerUser, default_worker_path,
};

/// The worker binary's entry point (it is the whole of `vsh-monty-worker`'s
/// `main`). Not for other use: it takes over the process's stdin and stdout.
#[doc(hidden)]
pub mod worker_process {
    pub use crate::worker::child::worker_main;
}
