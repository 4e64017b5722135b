//! Run Monty programs (a sandboxed Python subset, the `monty` crate, pinned at
//! 0.0.23) against a [`vsh_vfs::VirtualFs`], under a [`vsh_policy::CallPolicy`]
//! and per-run [`ExecutionLimits`].
//!
//! [`execute`] is the in-process executor. The guest sees the workspace at
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
//!
//! Errors reach the guest as `CPython`'s `OSError` subclasses with
//! `[Errno N] Description: 'path'` messages: 2, 13, 17, 20, 21, 22, 39 and 40
//! (a path that continues below a symlink).
//!
//! # Limitations
//!
//! - **In-process execution is not an isolation boundary**: see [`execute`].
//! - Monty 0.0.23 itself rejects `open()` modes `r+`, `w+`, `a+` and `x`, has no
//!   iteration over file objects and no `unlink(missing_ok=...)`, and turns `\`
//!   into `/` inside `pathlib.Path` values; the host cannot supply these.
//! - `os.rename` returns the destination path (like `Path.rename`) instead of
//!   `None`: monty sends both as the same call.

#![forbid(unsafe_code)]

mod error;
mod host;
mod limits;
mod oserror;
mod output;
mod path;
mod run;
mod value;

pub use error::{ExecutionError, GuestException, TRUNCATION_MARKER};
pub use limits::{ExecutionBudget, ExecutionLimits, ExecutionStats, LimitExceeded, LimitKind};
pub use monty_types::MontyObject;
pub use path::VIRTUAL_ROOT;
pub use run::{MontyOutcome, execute};
