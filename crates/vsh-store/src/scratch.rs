//! Real commands' scratch directories (`scratch/<name>` in the data
//! directory): how big they are, and clearing them when they pass their
//! bound or an operator asks.
//!
//! Commands write scratch directories directly (a build's `target/`), so
//! vsh never reads them as its state; they only cost disk. A run whose
//! commands may use them holds [`ScratchLock::exclusive`] while it executes;
//! clearing takes the lock exclusively and never waits for it: a busy
//! scratch area is left alone and reported, never cleared under a build.
//!
//! Clearing removes everything inside each `scratch/<name>` (the directory
//! stays, empty) with [`WritableDir::empty_dir`], through the data
//! directory's handle, never following a symlink: a link a build left there
//! is removed as a link, and what it points to is untouched.
//!
//! **Taints.** A build tool decides what to rebuild by comparing its
//! sources' modification times with its outputs'. A run whose image
//! differed from the workspace (it changed a file, then built) leaves
//! outputs newer than the workspace's own, unchanged sources: were the
//! change never committed, the next run would reuse outputs of code that
//! is not there (`cargo test` passing on the workspace's broken code). So
//! a run whose commands used the scratch directories holds them alone
//! ([`ScratchLock::exclusive`]: two runs never build from two images into
//! one directory at once), and one whose image changed records a taint
//! ([`ScratchLock::taint`], an empty file named for it in `scratch.taint/`)
//! before it lets go. Committing the transaction removes its taint (the
//! commit gives every file it writes a modification time newer than the
//! run's outputs, so the build tool sees them changed); the next run finds
//! any taint left and empties the scratch directories first
//! ([`ScratchLock::clear_if_tainted`]).
//!
//! **Grants.** Commands may be granted environment variables (a token), a
//! network, tools. What a run's commands leave in the scratch directories
//! is code the next run may execute (Python's bytecode, a build's outputs)
//! and data it may read, so the directories belong to one set of grants at
//! a time: a run granted otherwise than the last finds them empty
//! ([`ScratchLock::clear_unless_granted`]). The builds of the two sets
//! before it are kept aside (`scratch.aside/`, `scratch.aside2/`), never
//! given to another set, and trade places with the current ones when a run
//! of that set comes back: a plain `git status` between two granted builds
//! costs the second nothing, nor does a third set of grants.

use std::sync::Arc;

use vsh_host::{HostError, HostKind, LockGuard, WritableDir};
use vsh_types::VPath;

use crate::datadir::SCRATCH;
use crate::error::StoreError;

/// The lock file a run and clearing take exclusively, beside `scratch/`.
const SCRATCH_LOCK: &str = "scratch.lock";

/// The directory of taints, beside `scratch/`: one empty file per run or
/// transaction that built from an image the workspace does not hold.
const TAINTS: &str = "scratch.taint";

/// The file, beside `scratch/`, naming (as 64 hex digits) the grants of the
/// commands that last used the scratch directories.
const GRANTS: &str = "scratch.grants";
/// The scratch directories of the two sets of grants before the current
/// one, kept aside for them (`scratch.aside/<name>`, the later set, and
/// `scratch.aside2/<name>`), each with its record.
const ASIDE: &str = "scratch.aside";
const ASIDE_GRANTS: &str = "scratch.aside.grants";
const ASIDE2: &str = "scratch.aside2";
const ASIDE2_GRANTS: &str = "scratch.aside2.grants";
/// The places kept aside, the latest first.
const SLOTS: [(&str, &str); 2] = [(ASIDE, ASIDE_GRANTS), (ASIDE2, ASIDE2_GRANTS)];
/// Where `scratch/` passes while it and `scratch.aside/` trade places; one
/// left by a crash is removed by the next change of grants.
const SWAP: &str = "scratch.swap";
/// The most `scratch.grants` holds: two digests in hex and a space.
const GRANTS_RECORD_BYTES: u64 = 129;

/// Why [`ScratchLock::clear_unless_granted`] emptied the scratch directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regranted {
    /// Whether one worth a word held anything.
    pub held: bool,
    /// Whether only what the policy lets commands read changed (the
    /// workspace's policy was replaced), not the commands' own grants.
    pub access_changed: bool,
}
/// The file, beside `scratch/`, holding (in decimal) the bytes available on
/// the filesystem when the scratch directories were last measured against
/// their bound ([`ScratchLock::due_for_bound`]).
const CHECKED: &str = "scratch.checked";

/// The lock over the scratch directories, on a handle of its own.
#[derive(Debug)]
pub struct ScratchLock {
    dir: WritableDir,
}

/// What [`ScratchLock::collect`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScratchReport {
    /// Bytes every scratch directory took on disk before clearing: each
    /// node's size or what the filesystem allocated to it, whichever is
    /// more, and at least one 4 KiB block per node (so empty files and
    /// space allocated past a file's end count).
    pub bytes: u64,
    /// The scratch directories cleared that held anything, by the name a
    /// policy gives them (`node_modules/.cache`; stored as
    /// `node_modules%2F.cache`).
    pub cleared: Vec<String>,
    /// Bytes removed.
    pub bytes_removed: u64,
    /// A run held the scratch directories: nothing was cleared.
    pub busy: bool,
}

impl ScratchLock {
    pub(crate) fn new(dir: &WritableDir) -> Self {
        Self { dir: WritableDir::new(Arc::clone(dir.read_only())) }
    }

    fn lock_path() -> VPath {
        VPath::from_component(SCRATCH_LOCK).expect("a plain component")
    }

    /// Hold the scratch directories for a run's commands, waiting for
    /// another run's as `wait` allows: clearing waits for no one and leaves
    /// them alone while this guard lives, and no other run builds there.
    ///
    /// # Errors
    ///
    /// [`StoreError::DataDir`] when the lock file cannot be opened or locked,
    /// or another run held it past the wait (`HostError::LockTimeout`).
    pub fn exclusive(&self, wait: &vsh_host::LockWait) -> Result<LockGuard, StoreError> {
        let path = Self::lock_path();
        self.dir.lock_exclusive_within(&path, wait).map_err(|source| StoreError::DataDir { path, source })
    }

    /// [`ScratchLock::exclusive`] without waiting: `None` while another
    /// run holds the scratch directories.
    ///
    /// # Errors
    ///
    /// [`StoreError::DataDir`] when the lock file cannot be opened or locked.
    pub fn try_exclusive(&self) -> Result<Option<LockGuard>, StoreError> {
        let path = Self::lock_path();
        self.dir.try_lock_exclusive(&path).map_err(|source| StoreError::DataDir { path, source })
    }

    /// Record that `name` (a transaction id's hex, or a run's provisional
    /// name) built in the scratch directories from an image the workspace
    /// does not hold. Recording one twice is recording it once.
    ///
    /// # Errors
    ///
    /// [`StoreError::DataDir`] when `name` is not one plain file name or the
    /// file cannot be made.
    pub fn taint(&self, name: &str) -> Result<(), StoreError> {
        let path = Self::taint_path(name)?;
        let dir = VPath::from_component(TAINTS).expect("a plain component");
        self.dir.open_or_create_subdir(&dir).map_err(|source| failed(&dir, source))?;
        match self.dir.create_file_exclusive_unsynced(&path, b"", 0o600) {
            Ok(_) | Err(HostError::AlreadyExists { .. }) => Ok(()),
            Err(source) => Err(failed(&path, source)),
        }
    }

    /// Forget the taint `name`, if it is recorded.
    ///
    /// # Errors
    ///
    /// [`StoreError::DataDir`] when it is recorded and cannot be removed.
    pub fn untaint(&self, name: &str) -> Result<(), StoreError> {
        let path = Self::taint_path(name)?;
        match self.dir.remove_file(&path) {
            Ok(()) | Err(HostError::NotFound { .. }) => Ok(()),
            Err(source) => Err(failed(&path, source)),
        }
    }

    /// Whether the taint `name` is recorded.
    ///
    /// # Errors
    ///
    /// [`StoreError::DataDir`] when the data directory cannot be read.
    pub fn is_tainted_by(&self, name: &str) -> Result<bool, StoreError> {
        let path = Self::taint_path(name)?;
        Ok(self.dir.read_only().lstat(&path).map_err(|source| failed(&path, source))?.is_some())
    }

    /// The recorded taints' names.
    ///
    /// # Errors
    ///
    /// [`StoreError::DataDir`] when the taints cannot be listed.
    pub fn taints(&self) -> Result<Vec<String>, StoreError> {
        let dir = VPath::from_component(TAINTS).expect("a plain component");
        match self.dir.list_dir(&dir) {
            Ok(entries) => Ok(entries.into_iter().filter_map(|entry| String::from_utf8(entry.name).ok()).collect()),
            Err(HostError::NotFound { .. }) => Ok(Vec::new()),
            Err(source) => Err(failed(&dir, source)),
        }
    }

    /// With [`ScratchLock::exclusive`] held (`_held`): when any taint is
    /// recorded, empty every scratch directory and forget every taint, so
    /// the run about to start builds from nothing. The taints it cleared
    /// for when a directory `worth_saying` (by its stored name: `target`,
    /// `node_modules%2F.cache`) held anything (none: there was nothing to
    /// lose worth a word, as a bytecode cache rebuilt in a moment), sorted:
    /// a transaction's id whose work was never committed, or a run's
    /// provisional name (`run-...`, one not kept or that undid a change).
    ///
    /// # Errors
    ///
    /// [`StoreError::DataDir`] when a scratch directory or a taint cannot be
    /// removed (what was removed stays removed; the taints stay until the
    /// directories are empty).
    pub fn clear_if_tainted(
        &self,
        _held: &LockGuard,
        worth_saying: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<String>, StoreError> {
        let mut taints = self.taints()?;
        if taints.is_empty() {
            return Ok(taints);
        }
        let dirs = self.scratch_dirs(false)?;
        let held = self.hold_anything(&dirs, worth_saying);
        self.clear(dirs.into_iter().map(|(dir, _)| dir))?;
        for name in &taints {
            self.untaint(name)?;
        }
        if !held {
            taints.clear();
        }
        taints.sort();
        Ok(taints)
    }

    /// With [`ScratchLock::exclusive`] held (`_held`): when the scratch
    /// directories were last used by commands granted otherwise than
    /// `grants`, or under other `access` (a digest of what the policy lets
    /// commands read), or by a vsh that did not record it, give this run
    /// empty ones, and record both as theirs: the ones it replaces are kept
    /// aside for their own grants (two sets are kept, the oldest goes; ones
    /// holding nothing displace none), and when a set kept aside is this
    /// run's own, it trades places with them instead. So
    /// no run executes what commands granted otherwise left there (bytecode
    /// or a build planted by a run without the secrets this one is given),
    /// nor reads what they built (a build given a token, or a file the policy
    /// protects now, may keep it in its outputs). Runs granted alike share
    /// the directories, and their builds stay incremental, across two other
    /// sets of grants in between too. `None` when it kept them or got its own
    /// back; otherwise why, and whether one of those it replaced
    /// `worth_saying` (by its stored name) held anything.
    ///
    /// # Errors
    ///
    /// [`StoreError::DataDir`] when the record cannot be read or written or a
    /// scratch directory cannot be emptied (the record is then left out, so
    /// the next run clears again).
    pub fn clear_unless_granted(
        &self,
        _held: &LockGuard,
        access: &[u8; 32],
        grants: &[u8; 32],
        worth_saying: &dyn Fn(&str) -> bool,
    ) -> Result<Option<Regranted>, StoreError> {
        let path = VPath::from_component(GRANTS).expect("a plain component");
        let (access_hex, grants_hex) =
            (blake3::Hash::from_bytes(*access).to_hex(), blake3::Hash::from_bytes(*grants).to_hex());
        let wanted = format!("{access_hex} {grants_hex}");
        let recorded = match self.dir.read_only().read_file(&path, GRANTS_RECORD_BYTES) {
            Ok(read) => Some(read.bytes),
            Err(HostError::NotFound { .. }) => None,
            Err(source) => return Err(failed(&path, source)),
        };
        if recorded.as_deref() == Some(wanted.as_bytes()) {
            return Ok(None);
        }
        let swap = component(SWAP);
        let mut slots = Vec::with_capacity(SLOTS.len());
        for (dir, record) in SLOTS {
            let (dir, record) = (component(dir), component(record));
            let held = match self.dir.read_only().read_file(&record, GRANTS_RECORD_BYTES) {
                Ok(read) => Some(read.bytes),
                Err(HostError::NotFound { .. }) => None,
                Err(source) => return Err(failed(&record, source)),
            };
            slots.push((dir, record, held));
        }
        // Records first: a crash from here on leaves none, and the next
        // change of grants empties or discards what it finds.
        for record in std::iter::once(&path).chain(slots.iter().map(|(_, record, _)| record)) {
            match self.dir.remove_file(record) {
                Ok(()) | Err(HostError::NotFound { .. }) => {}
                Err(source) => return Err(failed(record, source)),
            }
        }
        self.remove_whole(&swap)?;
        let is_dir = |dir: &VPath| {
            self.dir
                .read_only()
                .lstat(dir)
                .map(|stat| stat.is_some_and(|stat| stat.kind == HostKind::Directory))
                .map_err(|source| failed(dir, source))
        };
        let root = component(SCRATCH);
        // The directories the run's commands are given: there again after
        // whatever moves below.
        let dirs = self.scratch_dirs(false)?;
        let current = is_dir(&root)?;
        // This grant set's own builds, set aside at an earlier change: they
        // trade places with the current ones, which are kept aside in their
        // place (ux58 3: a `git status` between two `cargo test`s emptied
        // `target/`; ux59 1: so did a third set of grants).
        let mut own = None;
        for (index, (dir, _, held)) in slots.iter().enumerate() {
            if held.as_deref() == Some(wanted.as_bytes()) && is_dir(dir)? {
                own = Some(index);
                break;
            }
        }
        if let Some(index) = own {
            let dir = &slots[index].0;
            if current {
                self.dir.rename_noreplace(&root, &swap).map_err(|source| failed(&root, source))?;
            }
            self.dir.rename_noreplace(dir, &root).map_err(|source| failed(dir, source))?;
            if current {
                self.dir.rename_noreplace(&swap, dir).map_err(|source| failed(&swap, source))?;
            }
            for (at, (dir, record, held)) in slots.iter().enumerate() {
                // The current ones take the slot's place; without a record
                // of whose they are, they are discarded.
                let held = if at == index { recorded.as_deref().filter(|_| current) } else { held.as_deref() };
                self.keep_aside(dir, record, held)?;
            }
            self.make_again(&dirs)?;
            self.dir
                .create_file_exclusive_unsynced(&path, wanted.as_bytes(), 0o600)
                .map_err(|source| failed(&path, source))?;
            return Ok(None);
        }
        // Only a record of this layout tells which half changed.
        let access_changed = recorded.as_deref().is_some_and(|recorded| {
            recorded.len() == wanted.len()
                && recorded.get(..access_hex.len()) != Some(access_hex.as_bytes())
                && recorded.get(access_hex.len()..) == Some(&wanted.as_bytes()[access_hex.len()..])
        });
        let held = self.hold_anything(&dirs, worth_saying);
        // The builds of the grants before this run's are kept aside for
        // them, the latest first, the oldest discarded; builds of nothing
        // (a `git status`) displace none, and builds without a record of
        // whose they are are emptied.
        if recorded.is_some() && current && self.hold_anything(&dirs, &|_| true) {
            let (latest, oldest) = (&slots[0], &slots[1]);
            self.remove_whole(&oldest.0)?;
            if is_dir(&latest.0)? {
                self.dir.rename_noreplace(&latest.0, &oldest.0).map_err(|source| failed(&latest.0, source))?;
            }
            self.keep_aside(&oldest.0, &oldest.1, latest.2.as_deref())?;
            self.dir.rename_noreplace(&root, &latest.0).map_err(|source| failed(&root, source))?;
            self.keep_aside(&latest.0, &latest.1, recorded.as_deref())?;
            self.make_again(&dirs)?;
        } else {
            self.clear(dirs.into_iter().map(|(dir, _)| dir))?;
            for (dir, record, held) in &slots {
                self.keep_aside(dir, record, held.as_deref())?;
            }
        }
        self.dir
            .create_file_exclusive_unsynced(&path, wanted.as_bytes(), 0o600)
            .map_err(|source| failed(&path, source))?;
        Ok(Some(Regranted { held, access_changed }))
    }

    /// Keep `dir` aside for the grants `held` records (writing `record`),
    /// or, without a record, discard it.
    fn keep_aside(&self, dir: &VPath, record: &VPath, held: Option<&[u8]>) -> Result<(), StoreError> {
        match held {
            Some(held) => {
                self.dir
                    .create_file_exclusive_unsynced(record, held, 0o600)
                    .map_err(|source| failed(record, source))?;
                Ok(())
            }
            None => self.remove_whole(dir),
        }
    }

    /// Make `scratch/` and each of `dirs` in it where they are not: empty,
    /// with the modes `DataDir::scratch_dir` gives them.
    fn make_again(&self, dirs: &[(VPath, u64)]) -> Result<(), StoreError> {
        let root = component(SCRATCH);
        match self.dir.create_dir(&root, 0o700) {
            Ok(()) | Err(HostError::AlreadyExists { .. }) => {}
            Err(source) => return Err(failed(&root, source)),
        }
        for (dir, _) in dirs {
            match self.dir.create_dir(dir, 0o777) {
                Ok(()) | Err(HostError::AlreadyExists { .. }) => {}
                Err(source) => return Err(failed(dir, source)),
            }
        }
        Ok(())
    }

    /// Remove `dir` and everything below it, if it is there (emptied first,
    /// two directories open at a time, never following a link).
    fn remove_whole(&self, dir: &VPath) -> Result<(), StoreError> {
        match self.dir.read_only().lstat(dir).map_err(|source| failed(dir, source))? {
            None => Ok(()),
            Some(_) => self.dir.remove_tree(dir).map_err(|source| failed(dir, source)),
        }
    }

    /// Whether one of `dirs` `worth_saying` (by its stored name) holds
    /// anything (or cannot be listed).
    fn hold_anything(&self, dirs: &[(VPath, u64)], worth_saying: &dyn Fn(&str) -> bool) -> bool {
        dirs.iter().any(|(dir, _)| {
            dir.file_name().is_some_and(worth_saying)
                && self.dir.list_dir(dir).map_or(true, |entries| !entries.is_empty())
        })
    }

    /// Whether the scratch state is what a run can use: `scratch.lock` and
    /// `scratch.grants` regular files (the record at most 64 bytes),
    /// `scratch.taint` and `scratch` directories, each where it exists. What
    /// else stands there (a directory, a FIFO, a symlink, a file too big)
    /// stops every run whose commands use the scratch directories.
    ///
    /// # Errors
    ///
    /// [`StoreError::DataDir`] naming the first entry that is not, or that
    /// cannot be looked at.
    pub fn check(&self) -> Result<(), StoreError> {
        let expected = [
            (SCRATCH_LOCK, HostKind::File, None),
            (GRANTS, HostKind::File, Some(GRANTS_RECORD_BYTES)),
            (CHECKED, HostKind::File, Some(20)),
            (TAINTS, HostKind::Directory, None),
            (SCRATCH, HostKind::Directory, None),
            (ASIDE, HostKind::Directory, None),
            (ASIDE_GRANTS, HostKind::File, Some(GRANTS_RECORD_BYTES)),
            (ASIDE2, HostKind::Directory, None),
            (ASIDE2_GRANTS, HostKind::File, Some(GRANTS_RECORD_BYTES)),
        ];
        for (name, kind, max) in expected {
            let path = VPath::from_component(name).expect("a plain component");
            let Some(found) = self.dir.read_only().lstat(&path).map_err(|source| failed(&path, source))? else {
                continue;
            };
            if found.kind != kind || max.is_some_and(|max| found.size > max) {
                let source = if kind == HostKind::Directory {
                    HostError::NotADirectory { path: path.clone() }
                } else {
                    HostError::NotAFile { path: path.clone() }
                };
                return Err(failed(&path, source));
            }
        }
        Ok(())
    }

    /// With the lock held (`_held`): whether the scratch directories are
    /// due to be measured against their bound, the filesystem holding them
    /// having `available` bytes now: when it had `past` bytes more or still
    /// more when they were last measured ([`ScratchLock::measured`]), or
    /// they never were. So what runs leave there is measured once at least
    /// `past` bytes went, however many runs took them. When more is
    /// available than then (something was freed), that is recorded instead.
    ///
    /// # Errors
    ///
    /// [`StoreError::DataDir`] when the record cannot be read or written.
    pub fn due_for_bound(&self, _held: &LockGuard, available: u64, past: u64) -> Result<bool, StoreError> {
        let path = VPath::from_component(CHECKED).expect("a plain component");
        let recorded = match self.dir.read_only().read_file(&path, 20) {
            Ok(read) => std::str::from_utf8(&read.bytes).ok().and_then(|text| text.parse::<u64>().ok()),
            Err(HostError::NotFound { .. }) => None,
            Err(source) => return Err(failed(&path, source)),
        };
        match recorded {
            Some(then) if then.saturating_sub(available) < past => {
                if available > then {
                    self.write_checked(available)?;
                }
                Ok(false)
            }
            _ => Ok(true),
        }
    }

    /// With the lock held (`_held`): the scratch directories were measured
    /// (and cleared if past their bound) with `available` bytes on their
    /// filesystem.
    ///
    /// # Errors
    ///
    /// [`StoreError::DataDir`] when the record cannot be written.
    pub fn measured(&self, _held: &LockGuard, available: u64) -> Result<(), StoreError> {
        self.write_checked(available)
    }

    fn write_checked(&self, available: u64) -> Result<(), StoreError> {
        let path = VPath::from_component(CHECKED).expect("a plain component");
        match self.dir.remove_file(&path) {
            Ok(()) | Err(HostError::NotFound { .. }) => {}
            Err(source) => return Err(failed(&path, source)),
        }
        self.dir
            .create_file_exclusive_unsynced(&path, available.to_string().as_bytes(), 0o600)
            .map_err(|source| failed(&path, source))?;
        Ok(())
    }

    fn taint_path(name: &str) -> Result<VPath, StoreError> {
        let dir = VPath::from_component(TAINTS).expect("a plain component");
        dir.child(name).map_err(|_| failed(&dir, HostError::NotAFile { path: dir.clone() }))
    }

    /// Measure the scratch directories and clear all of them when together
    /// they hold more than `max_bytes` (`Some(0)`: whatever they hold; `None`:
    /// never), so the next build starts from nothing, as after `cargo
    /// clean`. A run holding them makes this a no-op reported as
    /// [`ScratchReport::busy`].
    ///
    /// # Errors
    ///
    /// [`StoreError::DataDir`] when the data directory cannot be read or an
    /// entry cannot be removed (what was removed before stays removed).
    pub fn collect(&self, max_bytes: Option<u64>) -> Result<ScratchReport, StoreError> {
        let Some(exclusive) =
            self.dir.try_lock_exclusive(&Self::lock_path()).map_err(|source| failed(&Self::lock_path(), source))?
        else {
            return Ok(ScratchReport { busy: true, ..ScratchReport::default() });
        };
        self.bound(&exclusive, max_bytes)
    }

    /// Bytes available to vsh on the filesystem holding the scratch
    /// directories, `None` when it cannot be read: a run compares it before
    /// and after its commands to learn whether they wrote much there.
    pub fn available(&self) -> Option<u64> {
        self.dir.space().ok().map(|space| space.available)
    }

    /// [`ScratchLock::collect`] for a holder of the lock (`held`): a run whose
    /// commands wrote much, bounding what the directories keep for the next.
    ///
    /// # Errors
    ///
    /// As [`ScratchLock::collect`].
    pub fn bound(&self, held: &LockGuard, max_bytes: Option<u64>) -> Result<ScratchReport, StoreError> {
        self.bound_by(held, |_| max_bytes)
    }

    /// [`ScratchLock::bound`] for a run, relative to their filesystem too:
    /// they keep at most `max_bytes`, and at most half of what the
    /// filesystem would have available without them (`available` now, plus
    /// what they hold), so a small disk is never left full by builds that
    /// each stayed under the absolute bound (sec53).
    ///
    /// # Errors
    ///
    /// As [`ScratchLock::collect`].
    pub fn bound_within(&self, held: &LockGuard, max_bytes: u64, available: u64) -> Result<ScratchReport, StoreError> {
        self.bound_by(held, |held_bytes| Some(max_bytes.min(available.saturating_add(held_bytes) / 2)))
    }

    fn bound_by(&self, _held: &LockGuard, limit: impl Fn(u64) -> Option<u64>) -> Result<ScratchReport, StoreError> {
        let mut report = ScratchReport::default();
        // Builds kept aside for other grants count, and go, with the rest.
        let mut dirs = self.scratch_dirs(true)?;
        for (slot, _) in SLOTS {
            dirs.extend(self.dirs_in(slot, true)?);
        }
        report.bytes = dirs.iter().map(|(_, bytes)| *bytes).fold(0, u64::saturating_add);
        // A tree too deep to measure (`u64::MAX`) is past any bound.
        if dirs.is_empty() || limit(report.bytes).is_none_or(|max| report.bytes <= max && report.bytes != u64::MAX) {
            return Ok(report);
        }
        for (dir, bytes) in dirs {
            self.clear([dir.clone()])?;
            report.bytes_removed = report.bytes_removed.saturating_add(bytes);
            // Named only when it held something: an empty one lost nothing.
            let name = dir.file_name().unwrap_or_default().replace("%2F", "/").replace("%25", "%");
            if bytes > 0 && !report.cleared.contains(&name) {
                report.cleared.push(name);
            }
        }
        // Nothing is left that a taint could warn about.
        for name in self.taints()? {
            self.untaint(&name)?;
        }
        Ok(report)
    }

    /// Every scratch directory, with the bytes it holds when `measure`d (else 0).
    fn scratch_dirs(&self, measure: bool) -> Result<Vec<(VPath, u64)>, StoreError> {
        self.dirs_in(SCRATCH, measure)
    }

    /// Every directory in `root` (`scratch` or `scratch.aside`), with the
    /// bytes it holds when `measure`d (else 0).
    fn dirs_in(&self, root: &str, measure: bool) -> Result<Vec<(VPath, u64)>, StoreError> {
        let root = component(root);
        let names = match self.dir.list_dir(&root) {
            Ok(entries) => entries,
            Err(HostError::NotFound { .. }) => return Ok(Vec::new()),
            Err(source) => return Err(failed(&root, source)),
        };
        let mut dirs = Vec::new();
        for entry in names {
            let Some(dir) = std::str::from_utf8(&entry.name).ok().and_then(|name| root.child(name).ok()) else {
                continue;
            };
            let bytes = if measure { self.size(&dir)? } else { 0 };
            dirs.push((dir, bytes));
        }
        Ok(dirs)
    }

    /// Empty each of `dirs` (a scratch directory replaced by a file or a
    /// link is removed).
    fn clear(&self, dirs: impl IntoIterator<Item = VPath>) -> Result<(), StoreError> {
        for dir in dirs {
            let emptied = match self.dir.empty_dir(&dir) {
                Err(HostError::NotADirectory { .. }) => self.dir.remove_tree(&dir),
                other => other,
            };
            emptied.map_err(|source| failed(&dir, source))?;
        }
        Ok(())
    }

    /// The bytes every node below `dir` takes on disk (see
    /// [`ScratchReport::bytes`]; symlinks not followed), or `u64::MAX` for
    /// a tree too deep to measure by path ([`MAX_MEASURED_PATH_BYTES`]) or
    /// holding a name no path can spell: a command built it so, and it is
    /// past any bound.
    fn size(&self, dir: &VPath) -> Result<u64, StoreError> {
        const BLOCK: u64 = 4096;
        let mut total = 0_u64;
        let mut stack = vec![dir.clone()];
        while let Some(current) = stack.pop() {
            if current.as_str().len() > MAX_MEASURED_PATH_BYTES {
                return Ok(u64::MAX);
            }
            let Some(stat) = self.dir.lstat(&current).map_err(|source| failed(&current, source))? else { continue };
            if stat.kind != HostKind::Directory {
                total = total.saturating_add(stat.size.max(stat.allocated).max(BLOCK));
                continue;
            }
            if current != *dir {
                total = total.saturating_add(stat.size.max(stat.allocated).max(BLOCK));
            }
            for entry in self.dir.list_dir(&current).map_err(|source| failed(&current, source))? {
                // A name no path can spell (not UTF-8) hides what is below
                // it from the walk: past any bound, as too deep a tree is
                // (sec56 F3: a command filled the disk beneath one).
                let Some(child) = child(&current, &entry.name) else { return Ok(u64::MAX) };
                stack.push(child);
            }
        }
        Ok(total)
    }
}

/// The longest path below the data directory a scratch measurement walks
/// (the kernel resolves at most 4,096 bytes): a deeper tree is too deep to
/// measure, and cleared.
const MAX_MEASURED_PATH_BYTES: usize = 3_072;

/// The child `name` of `dir`, if vsh can name it (a name that is not UTF-8
/// cannot be reached through a `VPath`: the tree holding it is past any
/// bound, and clearing renames it to one first).
fn child(dir: &VPath, name: &[u8]) -> Option<VPath> {
    std::str::from_utf8(name).ok().and_then(|name| dir.child(name).ok())
}

/// A name directly in the data directory.
fn component(name: &str) -> VPath {
    VPath::from_component(name).expect("a plain component")
}

fn failed(path: &VPath, source: HostError) -> StoreError {
    StoreError::DataDir { path: path.clone(), source }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use crate::DataDir;

    /// A data directory whose scratch area holds a build's output: `target`
    /// with 3 + 4 bytes in files (one in a read-only directory) and a
    /// symlink to a file outside, and `node_modules%2F.cache` with 5.
    fn built() -> (tempfile::TempDir, DataDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::open_external(&dir.path().join("data")).unwrap();
        let target = data.scratch_dir("target").unwrap();
        let cache = data.scratch_dir("node_modules/.cache").unwrap();
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, b"keep me").unwrap();
        std::fs::create_dir_all(target.join("debug/deps")).unwrap();
        std::fs::write(target.join("debug/a"), b"abc").unwrap();
        std::fs::write(target.join("debug/deps/b"), b"defg").unwrap();
        std::fs::set_permissions(target.join("debug/deps"), std::fs::Permissions::from_mode(0o555)).unwrap();
        std::os::unix::fs::symlink(&outside, target.join("link")).unwrap();
        std::fs::write(cache.join("c"), b"hijkl").unwrap();
        (dir, data, outside)
    }

    fn entries(path: &std::path::Path) -> usize {
        std::fs::read_dir(path).unwrap().count()
    }

    #[test]
    fn scratch_under_its_bound_is_measured_and_kept() {
        let (_dir, data, outside) = built();
        let report = data.scratch_lock().collect(Some(1 << 20)).unwrap();
        // Six nodes below the scratch directories (debug, deps, a, b, the
        // link, c), none past one block: a block each.
        assert_eq!(report.bytes, 6 * 4096);
        assert!(report.cleared.is_empty() && !report.busy);
        assert_eq!(entries(&data.scratch_dir("target").unwrap()), 2);
        assert_eq!(std::fs::read(outside).unwrap(), b"keep me");
    }

    #[test]
    fn scratch_is_measured_by_what_it_takes_on_disk_empty_files_and_allocations_included() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::open_external(&dir.path().join("data")).unwrap();
        let target = data.scratch_dir("target").unwrap();
        // A thousand empty files take a thousand inodes and their blocks.
        for index in 0..1000 {
            std::fs::write(target.join(format!("f{index}")), b"").unwrap();
        }
        assert_eq!(data.scratch_lock().collect(None).unwrap().bytes, 1000 * 4096);
        // Space allocated past a file's end counts though its size is 0.
        let held = target.join("held");
        let file = std::fs::File::create(&held).unwrap();
        let allocated = std::process::Command::new("fallocate").args(["-n", "-l", "8M"]).arg(&held).status().unwrap();
        assert!(allocated.success());
        drop(file);
        assert_eq!(std::fs::metadata(&held).unwrap().len(), 0);
        let report = data.scratch_lock().collect(Some(4 << 20)).unwrap();
        assert!(report.bytes >= 1000 * 4096 + (8 << 20), "{report:?}");
        assert_eq!(report.cleared, ["target"], "past the bound: cleared");
        assert_eq!(entries(&target), 0);
    }

    #[test]
    fn scratch_past_its_bound_is_cleared_without_following_a_link() {
        let (dir, data, outside) = built();
        let report = data.scratch_lock().collect(Some(8)).unwrap();
        assert!(report.bytes > 8);
        assert_eq!(report.bytes_removed, report.bytes);
        let mut cleared = report.cleared.clone();
        cleared.sort();
        assert_eq!(cleared, ["node_modules/.cache", "target"]);
        // The directories stay, empty; what the link pointed to is untouched.
        for name in ["target", "node_modules%2F.cache"] {
            assert_eq!(entries(&dir.path().join("data/scratch").join(name)), 0, "{name}");
        }
        assert_eq!(std::fs::read(outside).unwrap(), b"keep me");
        // Measured again: nothing left; cleared again, only the one that
        // held anything is named (ux56: an empty directory lost nothing).
        assert_eq!(data.scratch_lock().collect(Some(8)).unwrap().bytes, 0);
        std::fs::write(dir.path().join("data/scratch/target/again"), b"x").unwrap();
        assert_eq!(data.scratch_lock().collect(Some(0)).unwrap().cleared, ["target"]);
    }

    /// sec56 F3: what lay beneath a name that is not UTF-8 was never
    /// measured, and a command filled the disk there past the bound.
    #[test]
    fn scratch_beneath_a_name_no_path_can_spell_is_past_any_bound() {
        use std::os::unix::ffi::OsStrExt as _;
        let (dir, data, _outside) = built();
        let hidden = dir.path().join("data/scratch/target").join(std::ffi::OsStr::from_bytes(b"bad\xffname"));
        std::fs::create_dir_all(&hidden).unwrap();
        std::fs::write(hidden.join("big"), vec![0_u8; 1 << 16]).unwrap();
        let report = data.scratch_lock().collect(Some(1 << 30)).unwrap();
        assert!(report.cleared.contains(&"target".to_owned()), "{report:?}");
        assert_eq!(entries(&dir.path().join("data/scratch/target")), 0);
    }

    #[test]
    fn scratch_a_run_holds_is_never_cleared_and_a_forced_clear_waits_for_no_one() {
        let (_dir, data, _outside) = built();
        let lock = data.scratch_lock();
        let held = lock.exclusive(&vsh_host::LockWait::within(std::time::Duration::ZERO)).unwrap();
        // A second run waits for it (here: gives up at once); clearing, even
        // of everything, leaves it alone.
        let waited = data.scratch_lock().exclusive(&vsh_host::LockWait::within(std::time::Duration::from_millis(50)));
        assert!(
            matches!(waited, Err(crate::StoreError::DataDir { source: vsh_host::HostError::LockTimeout { .. }, .. })),
            "{waited:?}"
        );
        let report = data.scratch_lock().collect(Some(0)).unwrap();
        assert!(report.busy && report.cleared.is_empty(), "{report:?}");
        assert_eq!(entries(&data.scratch_dir("target").unwrap()), 2);
        drop(held);
        // Released: a process another test of this binary forks at that
        // moment may hold a copy of the lock's descriptor until it execs
        // (it is close-on-exec), so the clear may find it busy a moment
        // longer (a CI run under load did, once).
        let started = std::time::Instant::now();
        let report = loop {
            let report = data.scratch_lock().collect(Some(0)).unwrap();
            if !report.busy || started.elapsed() > std::time::Duration::from_secs(10) {
                break report;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert_eq!(report.cleared.len(), 2, "{report:?}");
        assert_eq!(entries(&data.scratch_dir("target").unwrap()), 0);
        // Without a bound, nothing is cleared.
        std::fs::write(data.scratch_dir("target").unwrap().join("x"), b"x").unwrap();
        assert!(data.scratch_lock().collect(None).unwrap().cleared.is_empty());
    }

    #[test]
    fn a_taint_empties_the_scratch_directories_before_the_next_run_and_a_lifted_one_does_not() {
        let (_dir, data, outside) = built();
        let lock = data.scratch_lock();
        let wait = vsh_host::LockWait::within(std::time::Duration::from_secs(5));
        // No taint: the next run finds the build as it was.
        let held = lock.exclusive(&wait).unwrap();
        assert!(lock.clear_if_tainted(&held, &|_| true).unwrap().is_empty());
        assert_eq!(entries(&data.scratch_dir("target").unwrap()), 2);
        // A taint lifted (its transaction committed) is no taint.
        lock.taint("run-1").unwrap();
        lock.taint("run-1").unwrap();
        assert!(lock.is_tainted_by("run-1").unwrap());
        lock.untaint("run-1").unwrap();
        lock.untaint("run-1").unwrap();
        assert!(!lock.is_tainted_by("run-1").unwrap());
        assert!(lock.clear_if_tainted(&held, &|_| true).unwrap().is_empty());
        assert_eq!(entries(&data.scratch_dir("target").unwrap()), 2);
        // One left: everything is emptied and every taint forgotten.
        lock.taint("ab12").unwrap();
        lock.taint("run-2").unwrap();
        let mut taints = lock.taints().unwrap();
        taints.sort();
        assert_eq!(taints, ["ab12", "run-2"]);
        assert_eq!(lock.clear_if_tainted(&held, &|_| true).unwrap(), ["ab12", "run-2"], "what it cleared for");
        for name in ["target", "node_modules/.cache"] {
            assert_eq!(entries(&data.scratch_dir(name).unwrap()), 0, "{name}");
        }
        assert!(lock.taints().unwrap().is_empty());
        // A taint over what is not worth a word (here the build's outputs,
        // judged so): emptied all the same, and said of no taint.
        std::fs::write(data.scratch_dir("target").unwrap().join("x"), b"x").unwrap();
        lock.taint("ef56").unwrap();
        assert!(lock.clear_if_tainted(&held, &|name| name != "target").unwrap().is_empty());
        assert_eq!(entries(&data.scratch_dir("target").unwrap()), 0);
        assert!(lock.taints().unwrap().is_empty());
        // A taint over empty directories: forgotten, and nothing was lost to say.
        lock.taint("cd34").unwrap();
        assert!(lock.clear_if_tainted(&held, &|_| true).unwrap().is_empty());
        assert!(lock.taints().unwrap().is_empty());
        assert_eq!(std::fs::read(outside).unwrap(), b"keep me");
        // A taint's name is one plain file name.
        assert!(lock.taint("../x").is_err() && lock.taint("").is_err());
    }

    #[test]
    fn scratch_keeps_at_most_half_of_what_its_filesystem_would_have_without_it() {
        let (_dir, data, _outside) = built();
        let lock = data.scratch_lock();
        let wait = vsh_host::LockWait::within(std::time::Duration::from_secs(5));
        let held = lock.exclusive(&wait).unwrap();
        // Plenty available: kept, whatever the absolute bound allows.
        let kept = lock.bound_within(&held, u64::MAX, 1 << 40).unwrap();
        assert!(kept.bytes > 0 && kept.cleared.is_empty(), "{kept:?}");
        // Less available than it holds (sec53: a small disk left full by
        // runs each under the 20 GiB bound): cleared.
        let cleared = lock.bound_within(&held, u64::MAX, kept.bytes / 2).unwrap();
        assert_eq!(cleared.bytes_removed, kept.bytes, "{cleared:?}");
        assert_eq!(lock.bound_within(&held, u64::MAX, 0).unwrap().bytes_removed, 0, "nothing left to clear");
    }

    #[test]
    fn scratch_is_due_for_its_bound_once_its_filesystem_lost_enough_since_it_was_last_measured() {
        let (dir, data, _outside) = built();
        let lock = data.scratch_lock();
        let wait = vsh_host::LockWait::within(std::time::Duration::from_secs(5));
        let held = lock.exclusive(&wait).unwrap();
        // Never measured: due.
        assert!(lock.due_for_bound(&held, 1_000, 10).unwrap());
        lock.measured(&held, 1_000).unwrap();
        // Small losses, run after run, add up (sec52: each run under the
        // trigger left its bytes, and none was ever measured).
        assert!(!lock.due_for_bound(&held, 995, 10).unwrap());
        assert!(!lock.due_for_bound(&held, 991, 10).unwrap());
        assert!(lock.due_for_bound(&held, 990, 10).unwrap());
        // More available than when measured: that is the new mark.
        assert!(!lock.due_for_bound(&held, 2_000, 10).unwrap());
        assert!(!lock.due_for_bound(&held, 1_995, 10).unwrap());
        assert!(lock.due_for_bound(&held, 1_990, 10).unwrap());
        // A record that is not a number is as none.
        lock.measured(&held, 1_990).unwrap();
        assert!(!lock.due_for_bound(&held, 1_990, 10).unwrap());
        std::fs::write(dir.path().join("data").join(super::CHECKED), b"garbage").unwrap();
        assert!(lock.due_for_bound(&held, 1_990, 10).unwrap());
        lock.check().unwrap();
    }

    #[test]
    fn scratch_belongs_to_one_set_of_grants_and_the_one_before_is_kept_aside_for_its_own() {
        let (dir, data, outside) = built();
        let lock = data.scratch_lock();
        let wait = vsh_host::LockWait::within(std::time::Duration::from_secs(5));
        let held = lock.exclusive(&wait).unwrap();
        let (plain, token) = ([1_u8; 32], [2_u8; 32]);
        let (policy, other_policy) = ([7_u8; 32], [8_u8; 32]);
        let cleared = |held, access_changed| Some(super::Regranted { held, access_changed });
        let target = || entries(&data.scratch_dir("target").unwrap());
        let cache = || entries(&data.scratch_dir("node_modules/.cache").unwrap());
        // Nothing recorded (an older vsh built it): emptied, then recorded.
        let all = |_: &str| true;
        assert_eq!(lock.clear_unless_granted(&held, &policy, &plain, &all).unwrap(), cleared(true, false));
        assert_eq!(target(), 0);
        // The same grants again: what they built is kept.
        std::fs::write(data.scratch_dir("target").unwrap().join("built"), b"x").unwrap();
        assert_eq!(lock.clear_unless_granted(&held, &policy, &plain, &all).unwrap(), None);
        assert_eq!(target(), 1);
        // Other grants find nothing, saying whether what they replaced held
        // anything worth a word...
        let not_target = |name: &str| name != "target";
        assert_eq!(lock.clear_unless_granted(&held, &policy, &token, &not_target).unwrap(), cleared(false, false));
        assert_eq!(target(), 0);
        std::fs::write(data.scratch_dir("node_modules/.cache").unwrap().join("secret"), b"tok").unwrap();
        // ... and the grants before get theirs back, never the others' (ux58
        // 3: a `git status` between two builds emptied `target/`).
        assert_eq!(lock.clear_unless_granted(&held, &policy, &plain, &all).unwrap(), None);
        assert_eq!((target(), cache()), (1, 0));
        assert_eq!(lock.clear_unless_granted(&held, &policy, &token, &all).unwrap(), None);
        assert_eq!((target(), cache()), (0, 1));
        // What the policy lets commands read changed, and only that: nothing
        // kept for it, saying so.
        assert_eq!(lock.clear_unless_granted(&held, &policy, &plain, &all).unwrap(), None);
        assert_eq!(lock.clear_unless_granted(&held, &other_policy, &plain, &all).unwrap(), cleared(true, true));
        assert_eq!(target(), 0);
        // Two sets are kept aside, the latest first: the token's came back
        // across the other policy's run.
        assert_eq!(lock.clear_unless_granted(&held, &policy, &token, &all).unwrap(), None);
        assert_eq!((target(), cache()), (0, 1));
        let (third, fourth) = ([3_u8; 32], [4_u8; 32]);
        // A third set: the oldest set kept (the other policy's) goes, and
        // the plain one's build is still kept for it (ux59 1).
        assert!(lock.clear_unless_granted(&held, &other_policy, &token, &all).unwrap().is_some());
        assert_eq!(lock.clear_unless_granted(&held, &policy, &plain, &all).unwrap(), None);
        assert_eq!((target(), cache()), (1, 0));
        // A set that built nothing (a `git status`) displaces no kept build.
        assert!(lock.clear_unless_granted(&held, &policy, &third, &all).unwrap().is_some());
        assert!(lock.clear_unless_granted(&held, &policy, &fourth, &all).unwrap().is_some());
        assert_eq!(lock.clear_unless_granted(&held, &policy, &plain, &all).unwrap(), None);
        assert_eq!((target(), cache()), (1, 0));
        assert_eq!(lock.clear_unless_granted(&held, &policy, &token, &all).unwrap(), None);
        assert_eq!((target(), cache()), (0, 1));
        // Builds kept aside count toward the bound, and go with the rest.
        assert!(dir.path().join("data/scratch.aside2/target/built").exists());
        let report = lock.bound(&held, Some(0)).unwrap();
        assert!(report.bytes > 0 && report.cleared.contains(&"target".to_owned()), "{report:?}");
        assert!(!dir.path().join("data/scratch.aside2/target/built").exists());
        lock.check().unwrap();
        // A swap a crash left half done is cleaned up by the next change.
        std::fs::create_dir_all(dir.path().join("data/scratch.swap/target")).unwrap();
        assert!(lock.clear_unless_granted(&held, &other_policy, &plain, &all).unwrap().is_some());
        assert!(!dir.path().join("data/scratch.swap").exists());
        assert_eq!(std::fs::read(outside).unwrap(), b"keep me");
    }
}
