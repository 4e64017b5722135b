//! Execution budgets ([`ExecutionLimits`]), what a run used ([`ExecutionStats`])
//! and the typed report of a budget that ran out ([`LimitExceeded`]).
//!
//! Every budget is charged *before* the work it pays for; a failed charge leaves
//! the counters unchanged and ends the run (see [`crate::ExecutionError::Limit`]).
//! Arithmetic saturates, so an overflow is always "over the limit", never
//! "unlimited".

use std::fmt;
use std::time::{Duration, Instant};

use vsh_types::canon;

/// Version tag written first by [`ExecutionLimits::encode_canonical`]. Changing
/// the encoding changes this tag.
const LIMITS_ENCODING_VERSION: u8 = 3;

/// Per-run budgets of a Monty execution. `Default` gives the documented
/// defaults.
///
/// Units: bytes for every `*_bytes` field, guest suspensions for
/// `max_os_calls`, interpreter frames for `max_recursion_depth`, entries for
/// `max_directory_entries`, records for `max_evidence_records`.
///
/// Build budgets with struct update syntax from `Default`
/// (`ExecutionLimits { max_os_calls: 100, ..ExecutionLimits::default() }`) so
/// later fields get their safe defaults.
///
/// | field | default | charged |
/// |---|---:|---|
/// | `max_program_bytes` | 1 MiB | before compiling (and before framing for the worker) |
/// | `max_duration` | 1 s | guest bytecode time (monty's clock); the worker's watchdog kills at this plus the grace |
/// | `max_recursion_depth` | 512 | guest frames; a catchable `RecursionError`, as in `CPython` |
/// | `max_memory_bytes` | 256 MiB | the worker's heap (limited allocator) and, with headroom, its address space; each process of a real command (`RLIMIT_DATA`) |
/// | `max_os_calls` | 10,000 | every suspension: OS calls, `vsh_*` calls, name lookups |
/// | `max_read_bytes` | 64 MiB | cumulative bytes read (and old content an append extends) |
/// | `max_write_bytes` | 64 MiB | cumulative bytes written |
/// | `max_io_call_bytes` | 4 MiB | one read or write, before the cumulative budget |
/// | `max_path_bytes` | 16 KiB | one guest path or glob pattern |
/// | `max_directory_entries` | 100,000 | cumulative entries listed, hidden ones included |
/// | `max_evidence_records` | 250,000 | records the parent keeps about the run: one per authorization, per path a walk visits, per refusal |
/// | `max_evidence_bytes` | 64 MiB | the path bytes of those records (and the rule text of refusals) |
/// | `max_output_bytes` | 1 MiB | captured standard output |
/// | `max_result_bytes` | 1 MiB | host footprint of the returned value |
/// | `max_exception_bytes` | 256 KiB | message plus traceback of an uncaught exception (longer text is truncated) |
/// | `max_request_duration` | 10 s | wall clock of the whole request: waiting for a worker, spawning it, the run, and the parent's servicing of every call |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionLimits {
    /// Size of the program text, checked before it is compiled (default 1 MiB).
    pub max_program_bytes: u64,
    /// Cumulative time spent running guest bytecode (default 1 s). Monty pauses
    /// this clock while the host services a call, so host work is bounded by
    /// the I/O budgets instead. A single long native operation can overshoot it.
    pub max_duration: Duration,
    /// Guest call depth (default 512). Exceeding it raises a catchable
    /// `RecursionError` in the guest, as in `CPython`.
    pub max_recursion_depth: usize,
    /// Guest heap size (default 256 MiB), and the private writable memory of
    /// each process of a real command the run starts (`RLIMIT_DATA`), and of
    /// all of them together where the host has a writable cgroup v1 memory
    /// controller (`vsh_sandbox::SandboxPolicy::limit_tree_memory`).
    ///
    /// **Not enforced for the guest by the in-process executor**: a memory
    /// ceiling needs the limited global allocator of the worker subprocess,
    /// which applies it (a command's processes get theirs in either case).
    pub max_memory_bytes: u64,
    /// Suspensions of the guest: OS calls, name lookups and external calls
    /// (default 10,000).
    pub max_os_calls: u64,
    /// Cumulative bytes read from files, including the old content an append
    /// extends (default 64 MiB).
    pub max_read_bytes: u64,
    /// Cumulative bytes written (default 64 MiB).
    pub max_write_bytes: u64,
    /// Bytes of one read or one write call, checked before the cumulative
    /// budget (default 4 MiB).
    pub max_io_call_bytes: u64,
    /// Bytes of one guest path (default 16 KiB).
    pub max_path_bytes: u64,
    /// Cumulative directory entries listed, hidden ones included (default 100,000).
    pub max_directory_entries: u64,
    /// Evidence records the parent keeps about the run (default 250,000): one
    /// per path authorization, one per path a tree walk (`vsh_glob`,
    /// `vsh_search`, recursive copy, remove or rename) visits, and one per
    /// refused access retained.
    pub max_evidence_records: u64,
    /// Path bytes of those evidence records, plus the rule text of each
    /// refusal (default 64 MiB). Accounted bytes, not the parent's RSS.
    pub max_evidence_bytes: u64,
    /// Bytes of captured standard output (default 1 MiB).
    pub max_output_bytes: u64,
    /// Host footprint of the returned value (default 1 MiB).
    pub max_result_bytes: u64,
    /// Bytes of an uncaught exception's message plus traceback; longer text is
    /// truncated with a marker (default 256 KiB).
    pub max_exception_bytes: u64,
    /// The end-to-end deadline of the request (default 10 s), measured from
    /// the executor's entry: waiting for a worker slot, spawning and
    /// handshaking, the guest's run, and the parent's servicing of every call
    /// (a large `vsh_glob` included). Checked in every parent-side loop; the
    /// worker is killed when it passes.
    pub max_request_duration: Duration,
    /// Each real command's time limit, measured from the run's start like
    /// `max_duration`, when it is not `max_duration` (default `None`: it
    /// is): a Monty program that may run commands (`vsh_exec`) keeps its own
    /// guest time to `max_duration` while its commands get a command's
    /// ([`ExecutionLimits::with_guest_duration`]).
    pub max_command_duration: Option<Duration>,
}

/// The name the public API of vsh uses for [`ExecutionLimits`].
pub type ExecutionBudget = ExecutionLimits;

impl Default for ExecutionLimits {
    fn default() -> Self {
        Self {
            max_program_bytes: 1 << 20,
            max_duration: Duration::from_secs(1),
            max_recursion_depth: 512,
            max_memory_bytes: 256 << 20,
            max_os_calls: 10_000,
            max_read_bytes: 64 << 20,
            max_write_bytes: 64 << 20,
            max_io_call_bytes: 4 << 20,
            max_path_bytes: 16 << 10,
            max_directory_entries: 100_000,
            max_evidence_records: 250_000,
            max_evidence_bytes: 64 << 20,
            max_output_bytes: 1 << 20,
            max_result_bytes: 1 << 20,
            max_exception_bytes: 256 << 10,
            max_request_duration: Duration::from_secs(10),
            max_command_duration: None,
        }
    }
}

impl ExecutionLimits {
    /// The default budget of a real command ([`crate::MontyExecutor::execute_command`]):
    /// the defaults sized for a program that moves a few files would stop a
    /// build or a test suite at once, so a command gets 10 minutes
    /// (`max_duration`; the request 30 s more to wind down), 8 GiB of private
    /// memory per process (`max_memory_bytes`, applied as `RLIMIT_DATA`), 10,000,000
    /// file-system requests, 4 GiB read, 1 GiB written (what it writes is held
    /// in the run's image until the commit; each file, directory or symlink
    /// it makes costs `vsh_candidate::NODE_WRITE_COST` of it), 10,000,000 directory entries
    /// listed, and 4,000,000 evidence records of up to 512 MiB of paths; the
    /// rest are the defaults. A Monty program's `vsh_exec` runs under the
    /// program's own budget.
    #[must_use]
    pub fn for_commands() -> Self {
        Self {
            max_duration: Duration::from_mins(10),
            max_request_duration: Duration::from_mins(10) + Duration::from_secs(30),
            max_memory_bytes: 8 << 30,
            max_os_calls: 10_000_000,
            max_read_bytes: 4 << 30,
            max_write_bytes: 1 << 30,
            max_directory_entries: 10_000_000,
            max_evidence_records: 4_000_000,
            max_evidence_bytes: 512 << 20,
            ..Self::default()
        }
    }

    /// A real command's time limit: [`ExecutionLimits::max_command_duration`]
    /// when set, else `max_duration`.
    #[must_use]
    pub fn command_duration(&self) -> Duration {
        self.max_command_duration.unwrap_or(self.max_duration)
    }

    /// This (command) budget for a Monty program that may run commands:
    /// its own guest time is `guest`, and each command it runs keeps this
    /// budget's time ([`ExecutionLimits::command_duration`]). A program that
    /// loops runs no longer for being allowed commands (ux85 M1: `vsh serve
    /// --commands` gave a Monty program 600 s of guest time).
    #[must_use]
    pub fn with_guest_duration(mut self, guest: Duration) -> Self {
        self.max_command_duration = Some(self.command_duration());
        self.max_duration = guest;
        self
    }

    /// Append the canonical encoding (for the runtime-config digest): a version
    /// byte (`2`), then every field in declaration order as a little-endian
    /// `u64`, except the two durations, each its whole seconds as `u64`
    /// followed by its sub-second nanoseconds as `u32`.
    pub fn encode_canonical(&self, out: &mut Vec<u8>) {
        canon::put_u8(out, LIMITS_ENCODING_VERSION);
        canon::put_u64(out, self.max_program_bytes);
        canon::put_u64(out, self.max_duration.as_secs());
        canon::put_u32(out, self.max_duration.subsec_nanos());
        canon::put_u64(out, self.max_recursion_depth as u64);
        canon::put_u64(out, self.max_memory_bytes);
        canon::put_u64(out, self.max_os_calls);
        canon::put_u64(out, self.max_read_bytes);
        canon::put_u64(out, self.max_write_bytes);
        canon::put_u64(out, self.max_io_call_bytes);
        canon::put_u64(out, self.max_path_bytes);
        canon::put_u64(out, self.max_directory_entries);
        canon::put_u64(out, self.max_evidence_records);
        canon::put_u64(out, self.max_evidence_bytes);
        canon::put_u64(out, self.max_output_bytes);
        canon::put_u64(out, self.max_result_bytes);
        canon::put_u64(out, self.max_exception_bytes);
        canon::put_u64(out, self.max_request_duration.as_secs());
        canon::put_u32(out, self.max_request_duration.subsec_nanos());
        match self.max_command_duration {
            None => canon::put_u8(out, 0),
            Some(duration) => {
                canon::put_u8(out, 1);
                canon::put_u64(out, duration.as_secs());
                canon::put_u32(out, duration.subsec_nanos());
            }
        }
    }
}

/// How many distinct paths of hidden looks a run names
/// ([`ExecutionStats::hidden_paths`]).
pub const MAX_HIDDEN_PATHS: usize = 8;

/// What one run used. Counters only grow by successful charges.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExecutionStats {
    /// Guest suspensions serviced (OS calls, name lookups, external calls).
    pub os_calls: u64,
    /// Bytes read from files (and old content extended by appends).
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Directory entries listed, hidden ones included.
    pub directory_entries: u64,
    /// Evidence records charged (see [`ExecutionLimits::max_evidence_records`]).
    pub evidence_records: u64,
    /// Evidence bytes charged (see [`ExecutionLimits::max_evidence_bytes`]).
    pub evidence_bytes: u64,
    /// Bytes of captured standard output.
    pub output_bytes: u64,
    /// Accesses refused by the call policy, each retry counted (the `denied`
    /// list names each distinct refusal once).
    pub denied_accesses: u64,
    /// Looks (`exists()`, `stat`, a command's lookup of a name) at paths a
    /// rule hides, answered as unreadable and not denials: a warning of
    /// the run's own receipt, not kept in its evidence (whose layout is
    /// the other counters').
    #[serde(skip)]
    pub hidden_looks: u64,
    /// The first [`MAX_HIDDEN_PATHS`] distinct paths of those looks, as the
    /// program named them (for the warning; not kept in the evidence).
    #[serde(skip)]
    pub hidden_paths: Vec<vsh_types::VPath>,
    /// Host footprint of the returned value (0 unless the run completed).
    pub result_bytes: u64,
    /// `vsh_glob` and `vsh_search` calls whose results were cut at
    /// `max_results` (counted whether or not the guest asked to be told, so
    /// the host always knows a listing was incomplete).
    pub truncated_results: u64,
    /// Nodes a listing or a walk (`iterdir`, `vsh_glob`, `vsh_search`, ...)
    /// left out because the guest cannot be shown them: a FIFO, socket or
    /// device, a name that is not UTF-8, a node the host refuses, a mount
    /// point. Counted whether or not the guest asked.
    pub skipped_nodes: u64,
    /// Wall-clock nanoseconds of the whole execution: waiting for a worker,
    /// compile, guest bytecode and the host's servicing of its calls.
    pub duration_ns: u64,
}

/// Which budget ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitKind {
    /// [`ExecutionLimits::max_program_bytes`].
    ProgramBytes,
    /// [`ExecutionLimits::max_duration`]; `attempted` and `max` are nanoseconds.
    Duration,
    /// [`ExecutionLimits::max_recursion_depth`]. The in-process executor never
    /// reports it: recursion errors stay catchable guest exceptions.
    Recursion,
    /// [`ExecutionLimits::max_os_calls`].
    OsCalls,
    /// [`ExecutionLimits::max_read_bytes`].
    ReadBytes,
    /// [`ExecutionLimits::max_write_bytes`].
    WriteBytes,
    /// [`ExecutionLimits::max_io_call_bytes`] for one read.
    ReadCallBytes,
    /// [`ExecutionLimits::max_io_call_bytes`] for one write.
    WriteCallBytes,
    /// [`ExecutionLimits::max_path_bytes`].
    PathBytes,
    /// [`ExecutionLimits::max_directory_entries`].
    DirectoryEntries,
    /// [`ExecutionLimits::max_output_bytes`].
    OutputBytes,
    /// [`ExecutionLimits::max_result_bytes`]; `attempted` is the size measured
    /// when the walk over the value passed the limit (a lower bound).
    ResultBytes,
    /// [`ExecutionLimits::max_exception_bytes`]. The in-process executor
    /// truncates exception text instead of reporting it.
    ExceptionBytes,
    /// [`ExecutionLimits::max_memory_bytes`]; only the worker enforces it.
    /// `attempted` is what monty measured, or `max + 1` when the worker's
    /// allocator ended the process (the size is then unknown).
    Memory,
    /// [`ExecutionLimits::max_evidence_records`].
    EvidenceRecords,
    /// [`ExecutionLimits::max_evidence_bytes`].
    EvidenceBytes,
    /// [`ExecutionLimits::max_request_duration`]; `attempted` and `max` are
    /// nanoseconds.
    RequestDuration,
    /// The disk that holds a real command's scratch directories: while it
    /// runs, its filesystem may lose at most half the space available when
    /// it started, and never go below a reserve of 2 % of its size (at most
    /// 1 GiB) available. `attempted` is the bytes it lost, `max` what it
    /// could lose.
    DiskSpace,
    /// The same disk's files (inodes), where its filesystem counts them:
    /// while a command runs, it may lose at most half the inodes available
    /// when it started, never past a reserve of 2 % of them (at most
    /// 1,000,000). `attempted` is the inodes it lost, `max` what it could
    /// lose.
    DiskNodes,
}

impl LimitKind {
    /// A lower-case, hyphenated name for display (`read-call-bytes`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::ProgramBytes => "program-bytes",
            Self::Duration => "duration",
            Self::Recursion => "recursion",
            Self::OsCalls => "os-calls",
            Self::ReadBytes => "read-bytes",
            Self::WriteBytes => "write-bytes",
            Self::ReadCallBytes => "read-call-bytes",
            Self::WriteCallBytes => "write-call-bytes",
            Self::PathBytes => "path-bytes",
            Self::DirectoryEntries => "directory-entries",
            Self::OutputBytes => "output-bytes",
            Self::ResultBytes => "result-bytes",
            Self::ExceptionBytes => "exception-bytes",
            Self::Memory => "memory",
            Self::EvidenceRecords => "evidence-records",
            Self::EvidenceBytes => "evidence-bytes",
            Self::RequestDuration => "request-duration",
            Self::DiskSpace => "disk-space",
            Self::DiskNodes => "disk-nodes",
        }
    }

    /// Every kind, in declaration order.
    pub const ALL: [LimitKind; 19] = [
        Self::ProgramBytes,
        Self::Duration,
        Self::Recursion,
        Self::OsCalls,
        Self::ReadBytes,
        Self::WriteBytes,
        Self::ReadCallBytes,
        Self::WriteCallBytes,
        Self::PathBytes,
        Self::DirectoryEntries,
        Self::OutputBytes,
        Self::ResultBytes,
        Self::ExceptionBytes,
        Self::Memory,
        Self::EvidenceRecords,
        Self::EvidenceBytes,
        Self::RequestDuration,
        Self::DiskSpace,
        Self::DiskNodes,
    ];

    /// A stable tag (1-based position in [`LimitKind::ALL`]), used on the
    /// worker protocol.
    pub(crate) fn tag(self) -> u8 {
        let position = Self::ALL.iter().position(|kind| *kind == self).expect("every kind is listed");
        position as u8 + 1
    }

    /// The kind of a tag from [`LimitKind::tag`].
    pub(crate) fn from_tag(tag: u8) -> Option<Self> {
        Self::ALL.get(usize::from(tag).checked_sub(1)?).copied()
    }
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A budget that ran out: which one, what the run needed, and the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LimitExceeded {
    /// Which budget.
    pub limit: LimitKind,
    /// The total the refused charge would have reached (or the size refused).
    pub attempted: u64,
    /// The configured limit.
    pub max: u64,
}

impl fmt::Display for LimitExceeded {
    /// In the limit's own unit: `duration limit 1 s exceeded after 1.004 s`,
    /// `read-bytes limit 64 MiB exceeded: 70 MiB`, `os-calls limit 2 exceeded: 3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limit = self.limit;
        match limit {
            LimitKind::Duration | LimitKind::RequestDuration => {
                #[allow(clippy::cast_precision_loss)]
                let seconds = |nanos: u64| nanos as f64 / 1e9;
                write!(f, "{limit} limit {} s exceeded after {:.3} s", seconds(self.max), seconds(self.attempted))
            }
            LimitKind::Recursion
            | LimitKind::OsCalls
            | LimitKind::DirectoryEntries
            | LimitKind::EvidenceRecords
            | LimitKind::DiskNodes => {
                write!(f, "{limit} limit {} exceeded: {}", self.max, self.attempted)
            }
            _ => write!(f, "{limit} limit {} exceeded: {}", human_bytes(self.max), human_bytes(self.attempted)),
        }
    }
}

/// A byte count in binary units: exact when it is a whole number of the unit
/// (`64 MiB`), else with one decimal (`70.5 MiB`); below 1 KiB in bytes.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1)];
    let (unit, size) = UNITS.iter().copied().find(|(_, size)| bytes >= *size).unwrap_or(("B", 1));
    if bytes.is_multiple_of(size) {
        format!("{} {unit}", bytes / size)
    } else {
        #[allow(clippy::cast_precision_loss)]
        let value = bytes as f64 / size as f64;
        format!("{value:.1} {unit}")
    }
}

/// The counters of one run and the limits they are charged against.
#[derive(Debug)]
pub(crate) struct Meter<'a> {
    limits: &'a ExecutionLimits,
    started: Instant,
    pub(crate) stats: ExecutionStats,
}

/// Nanoseconds of `duration`, saturating.
pub(crate) fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The instant `duration` after `started`; one a century on when that
/// cannot be represented (a limit of `u64::MAX` seconds means no limit in
/// practice, never a panic).
pub(crate) fn deadline_after(started: Instant, duration: Duration) -> Instant {
    started
        .checked_add(duration)
        .or_else(|| started.checked_add(Duration::from_hours(100 * 365 * 24)))
        .unwrap_or(started)
}

/// The request-duration limit, if `started` is longer ago than the limit allows.
pub(crate) fn request_deadline_passed(started: Instant, limits: &ExecutionLimits) -> Result<(), LimitExceeded> {
    let elapsed = started.elapsed();
    if elapsed > limits.max_request_duration {
        Err(LimitExceeded {
            limit: LimitKind::RequestDuration,
            attempted: nanos(elapsed),
            max: nanos(limits.max_request_duration),
        })
    } else {
        Ok(())
    }
}

/// Refuse `used + amount` if it passes `max`; otherwise return the new total.
fn checked_total(limit: LimitKind, used: u64, amount: u64, max: u64) -> Result<u64, LimitExceeded> {
    let attempted = used.saturating_add(amount);
    if attempted > max { Err(LimitExceeded { limit, attempted, max }) } else { Ok(attempted) }
}

impl<'a> Meter<'a> {
    /// Counters for a request that began at `started` (the end-to-end
    /// deadline counts from there).
    pub(crate) fn new(limits: &'a ExecutionLimits, started: Instant) -> Self {
        Self { limits, started, stats: ExecutionStats::default() }
    }

    /// The limits charged against.
    pub(crate) fn limits(&self) -> &'a ExecutionLimits {
        self.limits
    }

    /// When the request began.
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// The end-to-end deadline ([`ExecutionLimits::max_request_duration`]).
    pub(crate) fn check_deadline(&self) -> Result<(), LimitExceeded> {
        request_deadline_passed(self.started, self.limits)
    }

    /// `records` evidence records holding `bytes` bytes, both or neither.
    pub(crate) fn charge_evidence(&mut self, records: u64, bytes: u64) -> Result<(), LimitExceeded> {
        let records_total = checked_total(
            LimitKind::EvidenceRecords,
            self.stats.evidence_records,
            records,
            self.limits.max_evidence_records,
        )?;
        let bytes_total =
            checked_total(LimitKind::EvidenceBytes, self.stats.evidence_bytes, bytes, self.limits.max_evidence_bytes)?;
        self.stats.evidence_records = records_total;
        self.stats.evidence_bytes = bytes_total;
        Ok(())
    }

    /// One more guest suspension.
    pub(crate) fn charge_os_call(&mut self) -> Result<(), LimitExceeded> {
        self.stats.os_calls = checked_total(LimitKind::OsCalls, self.stats.os_calls, 1, self.limits.max_os_calls)?;
        Ok(())
    }

    /// One guest path of `len` bytes (not cumulative).
    pub(crate) fn check_path(&self, len: usize) -> Result<(), LimitExceeded> {
        checked_total(LimitKind::PathBytes, 0, len as u64, self.limits.max_path_bytes).map(drop)
    }

    /// One read call of `bytes`: the per-call limit first, then the cumulative one.
    pub(crate) fn charge_read_call(&mut self, bytes: u64) -> Result<(), LimitExceeded> {
        checked_total(LimitKind::ReadCallBytes, 0, bytes, self.limits.max_io_call_bytes)?;
        self.charge_read_bytes(bytes)
    }

    /// Cumulative read bytes only (the old content an append extends).
    pub(crate) fn charge_read_bytes(&mut self, bytes: u64) -> Result<(), LimitExceeded> {
        self.stats.read_bytes =
            checked_total(LimitKind::ReadBytes, self.stats.read_bytes, bytes, self.limits.max_read_bytes)?;
        Ok(())
    }

    /// One write call of `bytes`: the per-call limit first, then the cumulative one.
    pub(crate) fn charge_write_call(&mut self, bytes: u64) -> Result<(), LimitExceeded> {
        checked_total(LimitKind::WriteCallBytes, 0, bytes, self.limits.max_io_call_bytes)?;
        self.stats.write_bytes =
            checked_total(LimitKind::WriteBytes, self.stats.write_bytes, bytes, self.limits.max_write_bytes)?;
        Ok(())
    }

    /// A listing of `entries` names (hidden ones included).
    pub(crate) fn charge_directory_entries(&mut self, entries: u64) -> Result<(), LimitExceeded> {
        self.stats.directory_entries = checked_total(
            LimitKind::DirectoryEntries,
            self.stats.directory_entries,
            entries,
            self.limits.max_directory_entries,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_charges_leave_counters_unchanged() {
        let limits = ExecutionLimits { max_read_bytes: 10, max_io_call_bytes: 8, ..ExecutionLimits::default() };
        let mut meter = Meter::new(&limits, Instant::now());
        meter.charge_read_call(6).unwrap();
        assert_eq!(
            meter.charge_read_call(9),
            Err(LimitExceeded { limit: LimitKind::ReadCallBytes, attempted: 9, max: 8 })
        );
        assert_eq!(
            meter.charge_read_call(5),
            Err(LimitExceeded { limit: LimitKind::ReadBytes, attempted: 11, max: 10 })
        );
        assert_eq!(meter.stats.read_bytes, 6);
        meter.charge_read_call(4).unwrap();
        assert_eq!(meter.stats.read_bytes, 10);
        assert_eq!(
            meter.charge_read_bytes(u64::MAX).unwrap_err(),
            LimitExceeded { limit: LimitKind::ReadBytes, attempted: u64::MAX, max: 10 }
        );
    }

    #[test]
    fn evidence_is_charged_as_a_pair_and_tags_round_trip() {
        let limits = ExecutionLimits { max_evidence_records: 3, max_evidence_bytes: 10, ..ExecutionLimits::default() };
        let mut meter = Meter::new(&limits, Instant::now());
        meter.charge_evidence(2, 4).unwrap();
        assert_eq!(
            meter.charge_evidence(1, 7),
            Err(LimitExceeded { limit: LimitKind::EvidenceBytes, attempted: 11, max: 10 })
        );
        assert_eq!((meter.stats.evidence_records, meter.stats.evidence_bytes), (2, 4), "nothing charged");
        assert_eq!(
            meter.charge_evidence(2, 1),
            Err(LimitExceeded { limit: LimitKind::EvidenceRecords, attempted: 4, max: 3 })
        );
        for kind in LimitKind::ALL {
            assert_eq!(LimitKind::from_tag(kind.tag()), Some(kind));
        }
        assert_eq!(LimitKind::from_tag(0), None);
        assert_eq!(LimitKind::from_tag(200), None);
    }

    #[test]
    fn canonical_encoding_is_fixed_width_and_distinguishes_fields() {
        let limits = ExecutionLimits::default();
        let mut out = Vec::new();
        limits.encode_canonical(&mut out);
        assert_eq!(out.len(), 1 + 15 * 8 + 4 + 8 + 4 + 1);
        assert_eq!(out[0], LIMITS_ENCODING_VERSION);
        // A command's own time is told apart from none, and from another.
        let mut commands = Vec::new();
        limits.clone().with_guest_duration(Duration::from_secs(1)).encode_canonical(&mut commands);
        assert_eq!(commands.len(), out.len() + 12);
        assert_ne!(out, commands[..out.len()]);
        let mut longer = Vec::new();
        let budget = ExecutionLimits { max_duration: Duration::from_secs(2), ..limits.clone() };
        budget.with_guest_duration(Duration::from_secs(1)).encode_canonical(&mut longer);
        assert_ne!(commands, longer);
        let mut other = Vec::new();
        ExecutionLimits { max_duration: Duration::from_millis(1500), ..limits.clone() }.encode_canonical(&mut other);
        assert_ne!(out, other);
        let mut swapped = Vec::new();
        ExecutionLimits { max_read_bytes: limits.max_write_bytes + 1, ..limits }.encode_canonical(&mut swapped);
        assert_ne!(out, swapped);
    }

    /// ux85 M1: a Monty program allowed commands keeps its own guest time;
    /// its commands keep the command budget's.
    #[test]
    fn a_guest_duration_keeps_the_commands_time() {
        let commands = ExecutionLimits::for_commands();
        assert_eq!(commands.command_duration(), Duration::from_mins(10));
        let monty = commands.clone().with_guest_duration(Duration::from_millis(1500));
        assert_eq!(
            (monty.max_duration, monty.command_duration()),
            (Duration::from_millis(1500), Duration::from_mins(10))
        );
        assert_eq!(monty.max_request_duration, commands.max_request_duration);
        // Twice: the commands' time stays the first budget's.
        let again = monty.with_guest_duration(Duration::from_secs(3));
        assert_eq!((again.max_duration, again.command_duration()), (Duration::from_secs(3), Duration::from_mins(10)));
    }

    #[test]
    fn defaults_match_the_documented_budgets() {
        let limits = ExecutionLimits::default();
        assert_eq!(limits.max_program_bytes, 1_048_576);
        assert_eq!(limits.max_duration, Duration::from_secs(1));
        assert_eq!(limits.max_recursion_depth, 512);
        assert_eq!(limits.max_memory_bytes, 268_435_456);
        assert_eq!(limits.max_os_calls, 10_000);
        assert_eq!(limits.max_io_call_bytes, 4_194_304);
        assert_eq!(limits.max_path_bytes, 16_384);
        assert_eq!(limits.max_directory_entries, 100_000);
        assert_eq!(limits.max_exception_bytes, 262_144);
        assert_eq!(limits.max_read_bytes, 67_108_864);
        assert_eq!(limits.max_write_bytes, 67_108_864);
        assert_eq!(limits.max_evidence_records, 250_000);
        assert_eq!(limits.max_evidence_bytes, 67_108_864);
        assert_eq!(limits.max_output_bytes, 1_048_576);
        assert_eq!(limits.max_result_bytes, 1_048_576);
        assert_eq!(limits.max_request_duration, Duration::from_secs(10));
        assert_eq!(
            LimitExceeded { limit: LimitKind::OsCalls, attempted: 3, max: 2 }.to_string(),
            "os-calls limit 2 exceeded: 3"
        );
        assert_eq!(
            LimitExceeded { limit: LimitKind::Duration, attempted: 1_004_000_000, max: 1_000_000_000 }.to_string(),
            "duration limit 1 s exceeded after 1.004 s"
        );
        assert_eq!(
            LimitExceeded { limit: LimitKind::ReadBytes, attempted: 70 << 20, max: 64 << 20 }.to_string(),
            "read-bytes limit 64 MiB exceeded: 70 MiB"
        );
        assert_eq!(
            LimitExceeded { limit: LimitKind::OutputBytes, attempted: 1_572_864 + 1, max: 512 }.to_string(),
            "output-bytes limit 512 B exceeded: 1.5 MiB"
        );
    }
}
