//! [`TransactionStore`]: durable transaction records in one append-only,
//! checksummed log, changed only along the state table.
//!
//! Layout, relative to the data directory:
//!
//! ```text
//! txlog            the log (format in crate::txlog)
//! txlog.lock       advisory lock file (flock)
//! txlog.next       the next generation while compaction writes it
//! txns.migrated/   legacy VSHTXR01 record files, after migration into the log
//! ```
//!
//! # Protocol
//!
//! Every call takes an in-process mutex, then the cross-process lock on
//! `txlog.lock` (exclusive for changes, shared for reads), then re-reads the
//! log and replays only the bytes this handle has not seen (from scratch if
//! the header's generation changed: another handle compacted). A change then
//! checks its precondition against that state, checks the new record version
//! against the state table, appends one frame per record version in a single
//! append and fsyncs (all but a commit's reservation,
//! [`TransactionStore::reserve_revalidating`], which the commit's next
//! append makes durable with it). So concurrent handles, in threads or processes,
//! serialize, and a compare-and-transition or a reservation has exactly one
//! winner.
//!
//! A torn tail (a frame cut short by a crash) is truncated, and the truncation
//! fsynced, under the exclusive lock before anything is appended; readers
//! under the shared lock just stop before it. A complete frame that fails its
//! checksum or rules is [`StoreError::CorruptLog`] and nothing is returned.
//!
//! Compaction writes the latest version of every live record into
//! `txlog.next` (a new generation, fsynced), renames it over `txlog` and
//! fsyncs the directory. A crash before the rename leaves the old log (and a
//! stray `txlog.next`, removed on the next open); after it, the new one. Both
//! are complete, so either replays to the same records.
//!
//! After any storage failure the store is fail-stop: the in-memory state may
//! be behind or ahead of the disk, so every later call is
//! [`StoreError::Poisoned`]. Reopening replays what is durable: the state
//! before the failed operation or after it.

use std::sync::{Arc, Mutex, MutexGuard};

use vsh_types::{AuthorityKey, BlobId, TransactionId, TransactionState};

use crate::artifact::{ArtifactError, ArtifactLimits, PendingArtifact};
use crate::backend::{BackendError, BackendLock, Ends, StoreBackend};
use crate::blob::BlobStore;
use crate::datadir::DataDir;
use crate::error::StoreError;
use crate::legacy;
use crate::record::{self, ApprovalGrant, CommitReservation, TransactionRecord};
use crate::txlog::{HEADER_LEN, LogEntry, LogError, LogKey, LogState, Tail};

/// The most records [`TransactionStore::expire_due`] expires in one call.
pub const EXPIRE_BATCH: usize = 4096;

/// Sizes and bounds of a [`TransactionStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxStoreConfig {
    /// Compact before a change once the log is this long and at least half of
    /// it is superseded versions (default 8 MiB).
    pub compact_at_bytes: u64,
    /// The log never grows past this; a change that would is
    /// [`StoreError::LogFull`] (default 256 MiB).
    pub max_log_bytes: u64,
    /// Most live records; creating one more is [`StoreError::RecordLimit`]
    /// (default 1,000,000). Retention ([`TransactionStore::gc`]) frees room.
    pub max_records: u64,
}

impl Default for TxStoreConfig {
    fn default() -> Self {
        Self { compact_at_bytes: 8 << 20, max_log_bytes: 256 << 20, max_records: 1_000_000 }
    }
}

/// A summary of the log, as of the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogStats {
    /// The generation (compactions so far, plus one).
    pub generation: u64,
    /// Length of the log up to its last complete frame.
    pub bytes: u64,
    /// Frames in the log.
    pub frames: u64,
    /// Live records.
    pub live_records: u64,
}

/// The step a [`CommitReservation`] takes with [`TransactionStore::advance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitStep {
    /// `Reserved -> Revalidating`.
    Revalidating,
    /// `Revalidating -> Committing`.
    Committing,
    /// `Committing -> RecoveryRequired`: the commit was interrupted after it began applying.
    RecoveryRequired,
}

impl CommitStep {
    const fn state(self) -> TransactionState {
        match self {
            Self::Revalidating => TransactionState::Revalidating,
            Self::Committing => TransactionState::Committing,
            Self::RecoveryRequired => TransactionState::RecoveryRequired,
        }
    }
}

/// How a reserved commit ended, for [`TransactionStore::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOutcome {
    /// The changes are on disk and verified.
    Committed,
    /// Revalidation found the workspace changed; nothing was written.
    Stale,
    /// The commit failed; the workspace holds its before state.
    Failed,
}

impl CommitOutcome {
    const fn state(self) -> TransactionState {
        match self {
            Self::Committed => TransactionState::Committed,
            Self::Stale => TransactionState::Stale,
            Self::Failed => TransactionState::Failed,
        }
    }
}

/// The transaction records of one data directory.
#[derive(Debug)]
pub struct TransactionStore {
    backend: Arc<dyn StoreBackend>,
    config: TxStoreConfig,
    key: LogKey,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    poisoned: bool,
    state: LogState,
    /// Where the next blob sweep resumes (see `crate::gc`).
    pub(crate) blob_cursor: Option<BlobId>,
}

/// One version of a transaction's record in the log (see [`TransactionStore::history`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordVersion {
    /// The record as this version left it: its state and when it changed.
    pub record: TransactionRecord,
    /// Whether compaction carried this version over, so earlier ones are gone.
    pub carried_over: bool,
}

/// What a change computed: frames to append, then what to return.
pub(crate) struct Change<T> {
    pub(crate) entries: Vec<LogEntry>,
    pub(crate) outcome: Result<T, StoreError>,
}

impl<T> Change<T> {
    fn done(entries: Vec<LogEntry>, value: T) -> Self {
        Self { entries, outcome: Ok(value) }
    }
}

fn log_path() -> vsh_types::VPath {
    vsh_types::VPath::from_component("txlog").expect("a valid constant name")
}

fn lock_path() -> vsh_types::VPath {
    vsh_types::VPath::from_component("txlog.lock").expect("a valid constant name")
}

fn next_path() -> vsh_types::VPath {
    vsh_types::VPath::from_component("txlog.next").expect("a valid constant name")
}

/// How many damaged logs of one generation a data directory keeps.
const MAX_DAMAGED_COPIES: u32 = 1_000;

/// Where a salvage keeps the damaged log of `generation`, the `n`th of that
/// generation (`txlog.damaged.<generation>`, then `.1`, `.2`, ...).
fn damaged_path(generation: u64, n: u32) -> vsh_types::VPath {
    let name = if n == 0 { format!("txlog.damaged.{generation}") } else { format!("txlog.damaged.{generation}.{n}") };
    vsh_types::VPath::from_component(&name).expect("a valid generated name")
}

/// What [`TransactionStore::salvage_with`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Salvaged {
    /// Where the damage starts (the log's bytes before it were kept), or
    /// `None` when the log was whole (or missing) and nothing changed.
    pub damaged_at: Option<u64>,
    /// Records the frames before the damage hold, now the log's.
    pub kept: u64,
    /// Of those, the ones whose state was changed, since a lost version may
    /// have moved them on: approved work `Expired`, auto-approved previews
    /// and work pending approval `Rejected`, a commit under way
    /// `RecoveryRequired` (its outcome unknown until recovery finds it).
    pub voided: Vec<TransactionId>,
    /// The damaged log's copy, relative to the data directory.
    pub kept_as: Option<String>,
    /// Bytes of the log from the damage on: the record versions in them are
    /// lost (the bytes stay in `txlog.damaged`).
    pub lost_bytes: u64,
}

fn legacy_dir() -> vsh_types::VPath {
    vsh_types::VPath::from_component("txns").expect("a valid constant name")
}

fn migrated_dir() -> vsh_types::VPath {
    vsh_types::VPath::from_component("txns.migrated").expect("a valid constant name")
}

impl TransactionStore {
    /// Open the transaction store of a data directory with the real backend
    /// and the default configuration (see [`TransactionStore::open_with`]).
    pub fn open(data: &DataDir, key: &AuthorityKey) -> Result<TransactionStore, StoreError> {
        Self::open_with(data.backend()?, TxStoreConfig::default(), key)
    }

    /// Open the transaction store over `backend`, whose root is the data directory.
    ///
    /// Under the exclusive lock: remove a `txlog.next` left by an interrupted
    /// compaction; create the log if there is none (migrating legacy
    /// `txns/` record files into it, then renaming that directory to
    /// `txns.migrated`); migrate a first-format log (`TransactionStore::migrate`);
    /// replay it, truncating a torn tail. Every frame is checked under `key`
    /// (see `crate::txlog`): a log written under another key is
    /// [`StoreError::WrongAuthorityKey`].
    pub fn open_with(
        backend: Arc<dyn StoreBackend>,
        config: TxStoreConfig,
        key: &AuthorityKey,
    ) -> Result<TransactionStore, StoreError> {
        let store = Self::unread(backend, config, key);
        {
            let mut inner = store.lock_inner()?;
            let _lock = store.flock(&mut inner, true)?;
            store.remove_next(&mut inner)?;
            let exists = io(&mut inner, "open transaction log", store.backend.stat(&log_path()))?.is_some();
            if !exists {
                store.create_log(&mut inner)?;
            }
            match store.refresh(&mut inner, true) {
                Err(StoreError::LegacyLog) => {
                    store.migrate(&mut inner)?;
                    store.refresh(&mut inner, true)?;
                }
                other => other?,
            }
        }
        Ok(store)
    }

    /// A handle over `backend` that has read nothing yet.
    fn unread(backend: Arc<dyn StoreBackend>, config: TxStoreConfig, key: &AuthorityKey) -> TransactionStore {
        let key = LogKey::new(key);
        TransactionStore {
            backend,
            config,
            // Generation 0 never matches a real header, so the first refresh replays from scratch.
            inner: Mutex::new(Inner { poisoned: false, state: LogState::empty(0, &key), blob_cursor: None }),
            key,
        }
    }

    /// Salvage a damaged log over `backend` (the data directory): keep the
    /// records its frames before the damage hold, and go on from them.
    ///
    /// Under the exclusive lock: read the log; if it replays whole (or is
    /// missing, which the next open answers by making one), change nothing.
    /// Otherwise its header must verify under `key` (a log under another
    /// key, or of another format, is that error, never salvaged), and the
    /// frames are replayed up to the first that fails a check. Every byte of
    /// the damaged log is first written to `txlog.damaged.<generation>`
    /// (fsynced), then a new generation holding those records replaces the
    /// log atomically (`txlog.next`, renamed over it), with whatever could
    /// still lead to a commit voided, since a lost frame may have committed
    /// or rejected it: an approval is `Expired`, an auto-approved preview and
    /// work pending approval `Rejected`, a commit under way
    /// `RecoveryRequired` (recovery settles it by its evidence). A crash
    /// leaves the damaged log or the new one, never neither.
    pub fn salvage_with(
        backend: Arc<dyn StoreBackend>,
        config: TxStoreConfig,
        key: &AuthorityKey,
    ) -> Result<Salvaged, StoreError> {
        let store = Self::unread(backend, config, key);
        let mut inner = store.lock_inner()?;
        let _lock = store.flock(&mut inner, true)?;
        let bytes = match store.backend.read(&log_path(), store.config.max_log_bytes) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Ok(Salvaged::default()),
            read => log_read(&mut inner, read)?,
        };
        let (state, failed) = LogState::parse_prefix(&bytes, &store.key)?;
        let damaged_at = match failed {
            None => return Ok(Salvaged::default()),
            Some(LogError::Corrupt { offset, .. }) => offset,
            Some(other) => return Err(other.into()),
        };
        let kept: Vec<TransactionRecord> = state.records().values().copied().map(void_salvaged).collect();
        let voided = state
            .records()
            .values()
            .zip(&kept)
            .filter(|(old, new)| old.state != new.state)
            .map(|(_, new)| new.id)
            .collect();
        // A name no earlier salvage took (generations restart at 1 after a
        // log is moved aside): an earlier copy is never overwritten.
        let mut copies = (0..MAX_DAMAGED_COPIES).map(|n| damaged_path(state.generation(), n));
        let damaged = loop {
            let Some(name) = copies.next() else {
                // Every name is taken: the operator clears old copies first.
                let path = damaged_path(state.generation(), MAX_DAMAGED_COPIES - 1);
                return Err(StoreError::DataDir {
                    path: path.clone(),
                    source: vsh_host::HostError::AlreadyExists { path },
                });
            };
            match store.backend.create_new(&name, &bytes) {
                Ok(()) => break name,
                Err(BackendError::AlreadyExists { .. }) => {}
                Err(source) => return io(&mut inner, "keep the damaged transaction log", Err(source)),
            }
        };
        let image = LogState::initial(state.generation() + 1, &kept, &store.key);
        store.install(&mut inner, "salvage transaction log", &image)?;
        Ok(Salvaged {
            damaged_at: Some(damaged_at),
            kept: kept.len() as u64,
            voided,
            kept_as: Some(damaged.to_string()),
            lost_bytes: bytes.len() as u64 - damaged_at,
        })
    }

    /// Rewrite a first-format (`VSHTXL01`) log in the current one. Its frames
    /// were never authenticated, so nothing in it may let work commit: every
    /// approval is voided (`Approved` becomes `Expired`, `AutoApproved`
    /// becomes `Rejected`); everything else is carried over as it was.
    fn migrate(&self, inner: &mut Inner) -> Result<(), StoreError> {
        let bytes = match self.backend.read(&log_path(), self.config.max_log_bytes) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Err(StoreError::CorruptLog { offset: 0, reason: "transaction log is missing" }),
            Err(BackendError::TooLarge { size, max, .. }) => return Err(StoreError::LogFull { size, max }),
            Err(source) => return io(inner, "read transaction log", Err(source)),
        };
        let (legacy, _) = LogState::parse_legacy(&bytes)?;
        let records: Vec<TransactionRecord> = legacy.records().values().copied().map(void_approval).collect();
        let image = LogState::initial(legacy.generation() + 1, &records, &self.key);
        self.install(inner, "migrate transaction log", &image)
    }

    pub(crate) fn lock_inner(&self) -> Result<MutexGuard<'_, Inner>, StoreError> {
        // A panic while the mutex was held may have left the state half-updated.
        let inner = self.inner.lock().map_err(|_| StoreError::Poisoned)?;
        if inner.poisoned {
            return Err(StoreError::Poisoned);
        }
        Ok(inner)
    }

    fn flock(&self, inner: &mut Inner, exclusive: bool) -> Result<BackendLock, StoreError> {
        let result = self.backend.lock(&lock_path(), exclusive);
        io(inner, "lock transaction log", result)
    }

    fn remove_next(&self, inner: &mut Inner) -> Result<(), StoreError> {
        match self.backend.remove(&next_path()) {
            Ok(()) | Err(BackendError::NotFound { .. }) => Ok(()),
            Err(source) => io(inner, "remove interrupted compaction", Err(source)),
        }
    }

    /// Write the first log: empty, or holding the migrated legacy records.
    fn create_log(&self, inner: &mut Inner) -> Result<(), StoreError> {
        let legacy = self.read_legacy(inner)?;
        let records: Vec<TransactionRecord> = legacy.iter().flatten().copied().map(void_approval).collect();
        let image = LogState::initial(1, &records, &self.key);
        self.install(inner, "create transaction log", &image)?;
        if legacy.is_some() {
            let renamed = self.backend.rename(&legacy_dir(), &migrated_dir());
            io(inner, "retire legacy records", renamed)?;
            let synced = self.backend.sync_dir(&vsh_types::VPath::root());
            io(inner, "retire legacy records", synced)?;
        }
        Ok(())
    }

    /// The records of a legacy `txns/` directory, or `None` if there is none.
    fn read_legacy(&self, inner: &mut Inner) -> Result<Option<Vec<TransactionRecord>>, StoreError> {
        let dir = legacy_dir();
        let names = match self.backend.list(&dir) {
            Ok(names) => names,
            Err(BackendError::NotFound { .. }) => return Ok(None),
            Err(source) => return io(inner, "list legacy records", Err(source)),
        };
        let mut records = Vec::new();
        for name in names {
            let Ok(id) = TransactionId::parse_hex(&name) else { continue };
            if id.to_hex() != name {
                continue;
            }
            let path = dir.child(&name).expect("hex digits form a valid name");
            let bytes = match self.backend.read(&path, legacy::MAX_LEGACY_RECORD_BYTES as u64) {
                Ok(Some(bytes)) => bytes,
                Ok(None) => continue,
                Err(BackendError::TooLarge { .. }) => {
                    return Err(StoreError::CorruptRecord { id, reason: "record is too long" });
                }
                Err(BackendError::NotAFile { .. }) => {
                    return Err(StoreError::CorruptRecord { id, reason: "not a regular file" });
                }
                Err(source) => return io(inner, "read legacy record", Err(source)),
            };
            // The first format kept no grants: an approval is voided before the
            // record is checked (an Approved record without its grant is not one).
            let record = void_approval(legacy::decode(id, &bytes)?);
            record::check_consistent(&record).map_err(|reason| StoreError::CorruptRecord { id, reason })?;
            records.push(record);
        }
        Ok(Some(records))
    }

    /// Replace the log with `image` atomically: write `txlog.next`, fsync it,
    /// rename it over `txlog`, fsync the directory.
    fn install(&self, inner: &mut Inner, op: &'static str, image: &[u8]) -> Result<(), StoreError> {
        self.remove_next(inner)?;
        let written = self.backend.create_new(&next_path(), image);
        io(inner, op, written)?;
        let renamed = self.backend.rename(&next_path(), &log_path());
        io(inner, op, renamed)?;
        let synced = self.backend.sync_dir(&vsh_types::VPath::root());
        io(inner, op, synced)
    }

    /// The whole log file, bounded by the configured size.
    fn read_log(&self, inner: &mut Inner) -> Result<Vec<u8>, StoreError> {
        let read = self.backend.read(&log_path(), self.config.max_log_bytes);
        log_read(inner, read)
    }

    /// The log's header and its bytes past what `inner` replayed: what a
    /// refresh reads while the generation stays the same.
    fn read_log_ends(&self, inner: &mut Inner) -> Result<Ends, StoreError> {
        let from = inner.state.end();
        let read = self.backend.read_ends(&log_path(), HEADER_LEN as u64, from, self.config.max_log_bytes);
        log_read(inner, read)
    }

    /// Bring `inner` up to date with the log: only the frames appended since
    /// it was are read, unless the log was compacted (then all of it). With
    /// the exclusive lock, a torn tail is truncated (and the truncation fsynced).
    fn refresh(&self, inner: &mut Inner, exclusive: bool) -> Result<(), StoreError> {
        // A handle that has replayed nothing yet (generation 0, which no log
        // has) needs the whole file: reading its ends first would read it twice.
        let replayed = inner.state.generation() != 0;
        let from_tail = if replayed {
            let ends = self.read_log_ends(inner)?;
            inner.state.refresh_tail(&ends.head, ends.len, &ends.tail)?
        } else {
            None
        };
        let tail = if let Some(tail) = from_tail {
            tail
        } else {
            let bytes = self.read_log(inner)?;
            inner.state.refresh(&bytes)?
        };
        if let (Tail::Torn { at }, true) = (tail, exclusive) {
            let truncated = self.backend.truncate(&log_path(), at);
            io(inner, "truncate torn log tail", truncated)?;
        }
        Ok(())
    }

    /// Run a read under the shared lock on an up-to-date state.
    pub(crate) fn read<T>(&self, view: impl FnOnce(&LogState) -> T) -> Result<T, StoreError> {
        let mut inner = self.lock_inner()?;
        let _lock = self.flock(&mut inner, false)?;
        self.refresh(&mut inner, false)?;
        Ok(view(&inner.state))
    }

    /// Run a change under the exclusive lock: refresh, compact if due, let
    /// `decide` compute the record versions, append them in one fsynced write.
    pub(crate) fn mutate<T>(
        &self,
        op: &'static str,
        decide: impl FnOnce(&LogState) -> Result<Change<T>, StoreError>,
    ) -> Result<T, StoreError> {
        self.mutate_as(op, false, decide)
    }

    /// [`TransactionStore::mutate`]; with `defer_success`, the append of a
    /// change whose outcome is a success is not fsynced (it becomes durable
    /// with the log's next fsynced append), while a refusal's still is.
    fn mutate_as<T>(
        &self,
        op: &'static str,
        defer_success: bool,
        decide: impl FnOnce(&LogState) -> Result<Change<T>, StoreError>,
    ) -> Result<T, StoreError> {
        let mut inner = self.lock_inner()?;
        let _lock = self.flock(&mut inner, true)?;
        self.refresh(&mut inner, true)?;
        if self.compaction_due(&inner.state) {
            self.compact_locked(&mut inner)?;
        }
        let change = decide(&inner.state)?;
        if !change.entries.is_empty() {
            let durable = !(defer_success && change.outcome.is_ok());
            self.append(&mut inner, op, &change.entries, durable)?;
        }
        change.outcome
    }

    fn append(
        &self,
        inner: &mut Inner,
        op: &'static str,
        entries: &[LogEntry],
        durable: bool,
    ) -> Result<(), StoreError> {
        // Applied in place (a copy of every record per change cost what the
        // history holds), and undone if the append does not happen.
        let (bytes, undo) = inner.state.apply_for_append(entries).map_err(|reason| StoreError::InvalidRecord {
            id: entries.first().map_or(TransactionId::from_bytes([0; 32]), entry_id),
            reason,
        })?;
        let end = inner.state.end();
        if end > self.config.max_log_bytes {
            inner.state.undo(undo);
            return Err(StoreError::LogFull { size: end, max: self.config.max_log_bytes });
        }
        let appended = if durable {
            self.backend.append(&log_path(), &bytes)
        } else {
            self.backend.append_unsynced(&log_path(), &bytes)
        };
        if appended.is_err() {
            inner.state.undo(undo);
        }
        io(inner, op, appended)?;
        Ok(())
    }

    /// Whether the log is long enough, and mostly superseded versions, to compact.
    fn compaction_due(&self, state: &LogState) -> bool {
        state.end() >= self.config.compact_at_bytes && state.end() >= state.compacted_len().saturating_mul(2)
    }

    fn compact_locked(&self, inner: &mut Inner) -> Result<(), StoreError> {
        let image = inner.state.compacted();
        if image.len() as u64 > self.config.max_log_bytes {
            return Err(StoreError::LogFull { size: image.len() as u64, max: self.config.max_log_bytes });
        }
        let (fresh, _) = LogState::parse(&image, &self.key)?;
        self.install(inner, "compact transaction log", &image)?;
        inner.state = fresh;
        Ok(())
    }

    /// Rewrite the log now as a new generation holding only the latest
    /// version of every live record (see the module docs for the crash
    /// analysis). Other handles notice the new generation on their next call.
    pub fn compact(&self) -> Result<LogStats, StoreError> {
        let mut inner = self.lock_inner()?;
        let _lock = self.flock(&mut inner, true)?;
        self.refresh(&mut inner, true)?;
        self.compact_locked(&mut inner)?;
        Ok(stats_of(&inner.state))
    }

    /// The log's generation, size, frame count and live records.
    pub fn stats(&self) -> Result<LogStats, StoreError> {
        self.read(stats_of)
    }

    /// Whether a storage failure has stopped this store.
    pub fn is_poisoned(&self) -> bool {
        self.inner.lock().map_or(true, |inner| inner.poisoned)
    }

    /// Store a new record. [`StoreError::Duplicate`] if a live record has its
    /// id; [`StoreError::InvalidRecord`] if it carries a grant or is in a state
    /// that needs an approval or a reservation; [`StoreError::RecordLimit`] at
    /// the configured bound. Its `sequence` is set to 0.
    pub fn create(&self, record: &TransactionRecord) -> Result<(), StoreError> {
        self.mutate("create transaction", |state| {
            let version = self.created(state, record)?;
            Ok(Change::done(vec![LogEntry::Version(version)], ()))
        })
    }

    /// The first version of `record` (sequence 0), if the log may take it:
    /// not a duplicate, within `max_records`, and valid as a creation.
    fn created(&self, state: &LogState, record: &TransactionRecord) -> Result<TransactionRecord, StoreError> {
        if state.get(&record.id).is_some() {
            return Err(StoreError::Duplicate { id: record.id });
        }
        if state.records().len() as u64 >= self.config.max_records {
            return Err(StoreError::RecordLimit { max: self.config.max_records });
        }
        let mut version = *record;
        version.sequence = 0;
        record::check_created(&version).map_err(|reason| StoreError::InvalidRecord { id: record.id, reason })?;
        Ok(version)
    }

    /// Create `record` and reject it at `now_ms`, both versions in one
    /// fsynced append: the record of a process-local preview that is
    /// rejected or discarded before anything wrote it. The same checks as
    /// [`TransactionStore::create`], and it must be `PendingApproval`,
    /// `AutoApproved` or `Approved`, as for [`TransactionStore::reject`].
    /// Returns the rejected version.
    pub fn create_rejected(&self, record: &TransactionRecord, now_ms: u64) -> Result<TransactionRecord, StoreError> {
        use TransactionState as S;
        self.mutate("create a rejected transaction", |state| {
            let created = self.created(state, record)?;
            if !matches!(created.state, S::PendingApproval | S::AutoApproved | S::Approved) {
                return Err(StoreError::WrongState { id: record.id, op: "reject", state: created.state });
            }
            let rejected = successor(&created, now_ms, |version| version.state = S::Rejected)?;
            Ok(Change::done(vec![LogEntry::Version(created), LogEntry::Version(rejected)], rejected))
        })
    }

    /// The record of transaction `id`, or `None` if there is none (or it was
    /// dropped by retention).
    pub fn get(&self, id: TransactionId) -> Result<Option<TransactionRecord>, StoreError> {
        self.read(|state| state.get(&id).copied())
    }

    /// Every version of `id`'s record the log holds, oldest first: its state
    /// history, from its creation, or (once the log was compacted) from the
    /// version compaction carried over. Empty when the store does not know `id`.
    pub fn history(&self, id: TransactionId) -> Result<Vec<RecordVersion>, StoreError> {
        let mut inner = self.lock_inner()?;
        let _lock = self.flock(&mut inner, false)?;
        let bytes = self.read_log(&mut inner)?;
        let versions = LogState::history(&bytes, &self.key, id)?;
        Ok(versions.into_iter().map(|(record, carried_over)| RecordVersion { record, carried_over }).collect())
    }

    /// Every live record, sorted by id.
    pub fn list(&self) -> Result<Vec<TransactionRecord>, StoreError> {
        self.read(|state| state.records().values().copied().collect())
    }

    /// Move transaction `id` from `expected` to `next` atomically.
    ///
    /// The current state must equal `expected` ([`StoreError::StateConflict`]
    /// otherwise) and the state table must allow the edge
    /// ([`StoreError::Transition`]); a missing record is
    /// [`StoreError::NotFound`]. `Approved` needs a grant: use
    /// [`TransactionStore::approve`]. Returns the updated record, whose
    /// `updated_ms` is `now_ms`.
    pub fn compare_and_transition(
        &self,
        id: TransactionId,
        expected: TransactionState,
        next: TransactionState,
        now_ms: u64,
    ) -> Result<TransactionRecord, StoreError> {
        self.mutate("transition transaction", |state| {
            let record = live(state, id)?;
            if record.state != expected {
                return Err(StoreError::StateConflict { id, expected, actual: record.state });
            }
            record.state.transition(next).map_err(|source| StoreError::Transition { id, source })?;
            if next == TransactionState::Approved {
                return Err(StoreError::WrongState { id, op: "approve without a grant", state: record.state });
            }
            let version = successor(record, now_ms, |version| version.state = next)?;
            Ok(Change::done(vec![LogEntry::Version(version)], version))
        })
    }

    /// Record the artifact blob of transaction `id`. Setting the same artifact
    /// again is a no-op; replacing a different one is
    /// [`StoreError::ArtifactConflict`] (an artifact is bound to its
    /// transaction). Returns the current record.
    pub fn set_artifact(&self, id: TransactionId, artifact: BlobId) -> Result<TransactionRecord, StoreError> {
        self.mutate("record artifact", |state| {
            let record = live(state, id)?;
            match record.artifact {
                Some(existing) if existing == artifact => Ok(Change::done(Vec::new(), *record)),
                Some(existing) => Err(StoreError::ArtifactConflict { id, existing, requested: artifact }),
                None => {
                    let version = successor(record, record.updated_ms, |version| version.artifact = Some(artifact))?;
                    Ok(Change::done(vec![LogEntry::Version(version)], version))
                }
            }
        })
    }

    /// Approve a pending transaction: `PendingApproval -> Approved`, recording
    /// `grant` (which must name `id`: [`StoreError::GrantMismatch`]); approved
    /// work whose grant lapsed goes back to `PendingApproval` first, in the
    /// same append. Any other state is [`StoreError::WrongState`]. A request whose pending expiry has
    /// passed at `grant.issued_ms()` is moved to `Expired` durably and
    /// [`StoreError::ApprovalExpired`] returned.
    pub fn approve(&self, id: TransactionId, grant: &ApprovalGrant) -> Result<TransactionRecord, StoreError> {
        if grant.transaction() != id {
            return Err(StoreError::GrantMismatch { id, grant_for: grant.transaction() });
        }
        let now_ms = grant.issued_ms();
        self.mutate("approve transaction", |state| {
            let mut record = *live(state, id)?;
            let mut entries = Vec::new();
            // Approved before, its approval lapsed since: it waits for one
            // again, and this is it (ux68 M6), in the same append.
            if record.has_lapsed_approval(now_ms) {
                record = successor(&record, now_ms, |version| {
                    version.state = TransactionState::PendingApproval;
                    version.approval = None;
                })?;
                entries.push(LogEntry::Version(record));
            }
            if record.state != TransactionState::PendingApproval {
                return Err(StoreError::WrongState { id, op: "approve", state: record.state });
            }
            if record.is_due_to_expire(now_ms) {
                let expired = successor(&record, now_ms, |version| version.state = TransactionState::Expired)?;
                let expires_ms = record.pending_expires_ms.unwrap_or(now_ms);
                entries.push(LogEntry::Version(expired));
                return Ok(Change { entries, outcome: Err(StoreError::ApprovalExpired { id, expires_ms, now_ms }) });
            }
            let version = successor(&record, now_ms, |version| {
                version.state = TransactionState::Approved;
                version.approval = Some(*grant);
            })?;
            entries.push(LogEntry::Version(version));
            Ok(Change::done(entries, version))
        })
    }

    /// Reject a transaction that is pending approval, auto-approved or
    /// approved (a reviewer's refusal, or a discarded preview). Any other state
    /// is [`StoreError::WrongState`].
    pub fn reject(&self, id: TransactionId, now_ms: u64) -> Result<TransactionRecord, StoreError> {
        use TransactionState as S;
        self.mutate("reject transaction", |state| {
            let record = live(state, id)?;
            if !matches!(record.state, S::PendingApproval | S::AutoApproved | S::Approved) {
                return Err(StoreError::WrongState { id, op: "reject", state: record.state });
            }
            let version = successor(record, now_ms, |version| version.state = S::Rejected)?;
            Ok(Change::done(vec![LogEntry::Version(version)], version))
        })
    }

    /// Release the reservation of a commit a recovery found killed before it
    /// applied anything (`Reserved` or `Revalidating`): durable work (it has
    /// its artifact) goes back to where the reservation took it, `Approved`
    /// with its grant or `AutoApproved`, to commit again; work whose
    /// contents were never durable (a process-local preview, made with its
    /// reservation) is `Failed`. Any other state is
    /// [`StoreError::WrongState`]. Returns the record as it is now.
    pub fn release_reservation(&self, id: TransactionId, now_ms: u64) -> Result<TransactionRecord, StoreError> {
        use TransactionState as S;
        self.mutate("release a killed commit's reservation", |state| {
            let record = live(state, id)?;
            if !matches!(record.state, S::Reserved | S::Revalidating) {
                return Err(StoreError::WrongState { id, op: "release", state: record.state });
            }
            let back = match (record.artifact, record.approval) {
                (None, _) => S::Failed,
                (Some(_), Some(_)) => S::Approved,
                (Some(_), None) => S::AutoApproved,
            };
            let version = successor(record, now_ms, |version| version.state = back)?;
            Ok(Change::done(vec![LogEntry::Version(version)], version))
        })
    }

    /// Record that work waiting for its decision or its commit went stale:
    /// an approval, a listing or a review found that the workspace changed
    /// under it since its run, so it can never commit (`PendingApproval`,
    /// `AutoApproved` or `Approved` to `Stale`; an approval's grant is kept
    /// as it was). Any other state is [`StoreError::WrongState`].
    pub fn mark_stale(&self, id: TransactionId, now_ms: u64) -> Result<TransactionRecord, StoreError> {
        use TransactionState as S;
        self.mutate("mark transaction stale", |state| {
            let record = live(state, id)?;
            if !matches!(record.state, S::PendingApproval | S::AutoApproved | S::Approved) {
                return Err(StoreError::WrongState { id, op: "mark stale", state: record.state });
            }
            let version = successor(record, now_ms, |version| version.state = S::Stale)?;
            Ok(Change::done(vec![LogEntry::Version(version)], version))
        })
    }

    /// Move every record due at `now_ms` to `Expired` (pending requests,
    /// approved work and durable previews past their pending expiry), and
    /// approved work whose grant has lapsed back to `PendingApproval`, its
    /// grant dropped (expiry is exclusive: `now_ms == expires` is due). At
    /// most [`EXPIRE_BATCH`] records per call, in id order, in one fsynced
    /// append. Returns the expired ids.
    pub fn expire_due(&self, now_ms: u64) -> Result<Vec<TransactionId>, StoreError> {
        self.expire_due_bounded(now_ms, EXPIRE_BATCH)
    }

    pub(crate) fn expire_due_bounded(&self, now_ms: u64, max: usize) -> Result<Vec<TransactionId>, StoreError> {
        self.mutate("expire transactions", |state| {
            let mut entries = Vec::new();
            let mut ids = Vec::new();
            let due =
                |record: &&TransactionRecord| record.is_due_to_expire(now_ms) || record.has_lapsed_approval(now_ms);
            for record in state.records().values().filter(due).take(max) {
                if record.is_due_to_expire(now_ms) {
                    entries.push(LogEntry::Version(successor(record, now_ms, |version| {
                        version.state = TransactionState::Expired;
                    })?));
                    ids.push(record.id);
                } else {
                    entries.push(LogEntry::Version(successor(record, now_ms, |version| {
                        version.state = TransactionState::PendingApproval;
                        version.approval = None;
                    })?));
                }
            }
            Ok(Change::done(entries, ids))
        })
    }

    /// Take the single-use right to commit transaction `id`.
    ///
    /// An `AutoApproved` transaction, or an `Approved` one whose grant has not
    /// expired at `now_ms`, moves to `Reserved`. An `Approved` one whose grant
    /// has expired (`now_ms >= expires`) moves back to `PendingApproval`
    /// durably, its grant dropped, and [`StoreError::ApprovalLapsed`] is
    /// returned (or, when the work's own pending expiry has passed too, to
    /// `Expired` with [`StoreError::ApprovalExpired`]); any other state (a
    /// second reservation included) is [`StoreError::NotReservable`].
    pub fn reserve(&self, id: TransactionId, now_ms: u64) -> Result<CommitReservation, StoreError> {
        self.mutate("reserve transaction", |state| {
            let record = live(state, id)?;
            let reserved = match reservable(record, now_ms)? {
                Ok(()) => successor(record, now_ms, |version| version.state = TransactionState::Reserved)?,
                Err(refusal) => return Ok(refusal),
            };
            Ok(Change::done(vec![LogEntry::Version(reserved)], reservation_of(&reserved)))
        })
    }

    /// [`TransactionStore::reserve`] and [`TransactionStore::advance`] to
    /// `Revalidating`, in one append that is not fsynced (a refusal's append,
    /// an expiry, still is): every handle sees
    /// the reservation at once (it is exclusive as ever), and it becomes
    /// durable with the log's next fsynced append, the commit's `Committing`
    /// or its outcome. Nothing in the workspace changes before `Committing`
    /// is durable, so a machine crash that loses the reservation loses a
    /// commit that had done nothing: the record is back where it was before
    /// (or, with `unwritten`, not there), and commit recovery reads a
    /// transaction directory it finds for it as never applied. A crash keeps
    /// a prefix of the versions, each a state recovery settles.
    /// With `unwritten` (a record this process held in memory, not in the
    /// log), the record is created first, in the same append, as by
    /// [`TransactionStore::create`].
    pub fn reserve_revalidating(
        &self,
        id: TransactionId,
        now_ms: u64,
        unwritten: Option<&TransactionRecord>,
    ) -> Result<CommitReservation, StoreError> {
        self.mutate_as("reserve transaction for its commit", true, |state| {
            let mut entries = Vec::new();
            let created;
            let record = match (state.get(&id), unwritten) {
                (Some(_), _) | (None, None) => live(state, id)?,
                (None, Some(record)) => {
                    if record.id != id {
                        return Err(StoreError::InvalidRecord { id, reason: "the record is another transaction's" });
                    }
                    if state.records().len() as u64 >= self.config.max_records {
                        return Err(StoreError::RecordLimit { max: self.config.max_records });
                    }
                    let mut version = *record;
                    version.sequence = 0;
                    record::check_created(&version).map_err(|reason| StoreError::InvalidRecord { id, reason })?;
                    entries.push(LogEntry::Version(version));
                    created = version;
                    &created
                }
            };
            let reserved = match reservable(record, now_ms)? {
                Ok(()) => successor(record, now_ms, |version| version.state = TransactionState::Reserved)?,
                Err(mut refusal) => {
                    entries.append(&mut refusal.entries);
                    return Ok(Change { entries, outcome: refusal.outcome });
                }
            };
            let revalidating =
                successor(&reserved, now_ms, |version| version.state = CommitStep::Revalidating.state())?;
            entries.push(LogEntry::Version(reserved));
            entries.push(LogEntry::Version(revalidating));
            Ok(Change::done(entries, reservation_of(&revalidating)))
        })
    }

    /// Move a reserved transaction one step through its commit.
    ///
    /// The record must still be exactly as the reservation last left it
    /// ([`StoreError::ReservationLost`] otherwise), and the table must allow
    /// the edge ([`StoreError::Transition`]).
    pub fn advance(
        &self,
        reservation: &mut CommitReservation,
        step: CommitStep,
        now_ms: u64,
    ) -> Result<TransactionRecord, StoreError> {
        let record = self.move_reserved(reservation, step.state(), now_ms)?;
        reservation.state = record.state;
        reservation.sequence = record.sequence;
        Ok(record)
    }

    /// End a reserved commit, consuming the reservation. The edge must be in
    /// the table from where the reservation stands (`Committed` only from
    /// `Committing` or `RecoveryRequired`). If this fails the reservation is
    /// gone; the record stays where it was for recovery to settle.
    #[allow(clippy::needless_pass_by_value, reason = "taking the reservation by value is what makes it single-use")]
    pub fn finish(
        &self,
        reservation: CommitReservation,
        outcome: CommitOutcome,
        now_ms: u64,
    ) -> Result<TransactionRecord, StoreError> {
        self.move_reserved(&reservation, outcome.state(), now_ms)
    }

    fn move_reserved(
        &self,
        reservation: &CommitReservation,
        next: TransactionState,
        now_ms: u64,
    ) -> Result<TransactionRecord, StoreError> {
        let id = reservation.transaction;
        self.mutate("advance reserved transaction", |state| {
            let record = state.get(&id).ok_or(StoreError::ReservationLost { id })?;
            if record.sequence != reservation.sequence || record.state != reservation.state {
                return Err(StoreError::ReservationLost { id });
            }
            record.state.transition(next).map_err(|source| StoreError::Transition { id, source })?;
            let version = successor(record, now_ms, |version| version.state = next)?;
            Ok(Change::done(vec![LogEntry::Version(version)], version))
        })
    }

    /// Verify `artifact` against `limits`, check that its transaction exists
    /// with the same base snapshot, store it as a blob and record the blob on
    /// the transaction (as [`TransactionStore::set_artifact`]).
    pub fn put_artifact(
        &self,
        blobs: &BlobStore,
        artifact: &PendingArtifact,
        limits: &ArtifactLimits,
    ) -> Result<TransactionRecord, StoreError> {
        let id = artifact.binding.transaction();
        let bytes = artifact.encode();
        let blob = BlobId::of(&bytes);
        artifact.verify(limits).map_err(|source| StoreError::Artifact { blob, source })?;
        let record = self.get(id)?.ok_or(StoreError::NotFound { id })?;
        if record.base_snapshot != artifact.binding.digests().snapshot {
            return Err(StoreError::Artifact { blob, source: ArtifactError::Binding { field: "snapshot" } });
        }
        // What the artifact refers to is durable before the artifact is.
        blobs.make_durable(artifact.stored_content_blobs())?;
        blobs.put_expected(&bytes, blob)?;
        self.set_artifact(id, blob)
    }

    /// Store a new record together with its artifact: verify `artifact`
    /// against `limits` and against `record` (transaction and base snapshot),
    /// store it as a blob, then create the record with the artifact already
    /// set, in one frame. If anything fails, no record exists: a record and
    /// its artifact appear together or not at all (a blob stored for a record
    /// that was then refused is unreferenced, and garbage collection removes it).
    pub fn create_with_artifact(
        &self,
        blobs: &BlobStore,
        record: &TransactionRecord,
        artifact: &PendingArtifact,
        limits: &ArtifactLimits,
    ) -> Result<BlobId, StoreError> {
        let bytes = artifact.encode();
        let blob = BlobId::of(&bytes);
        artifact.verify(limits).map_err(|source| StoreError::Artifact { blob, source })?;
        let field = if artifact.binding.transaction() != record.id {
            Some("transaction")
        } else if artifact.binding.digests().snapshot != record.base_snapshot {
            Some("snapshot")
        } else {
            None
        };
        if let Some(field) = field {
            return Err(StoreError::Artifact { blob, source: ArtifactError::Binding { field } });
        }
        // What the artifact refers to is durable before the artifact is.
        blobs.make_durable(artifact.stored_content_blobs())?;
        blobs.put_expected(&bytes, blob)?;
        let mut with_artifact = *record;
        with_artifact.artifact = Some(blob);
        self.create(&with_artifact)?;
        Ok(blob)
    }

    /// Load and verify the artifact of transaction `id`: bounded by
    /// `limits.max_total_bytes` before reading, re-hashed, decoded with every
    /// bound, every re-derivable digest checked, and its binding checked
    /// against the record (transaction id and base snapshot).
    pub fn load_artifact(
        &self,
        blobs: &BlobStore,
        id: TransactionId,
        limits: &ArtifactLimits,
    ) -> Result<PendingArtifact, StoreError> {
        let record = self.get(id)?.ok_or(StoreError::NotFound { id })?;
        let blob = record.artifact.ok_or(StoreError::NoArtifact { id })?;
        let bytes = blobs.get(blob, limits.max_total_bytes)?;
        let artifact =
            PendingArtifact::decode(&bytes, limits).map_err(|source| StoreError::Artifact { blob, source })?;
        let field = if artifact.binding.transaction() != id {
            Some("transaction")
        } else if artifact.binding.digests().snapshot != record.base_snapshot {
            Some("snapshot")
        } else {
            None
        };
        if let Some(field) = field {
            return Err(StoreError::Artifact { blob, source: ArtifactError::Binding { field } });
        }
        Ok(artifact)
    }
}

/// What reading the log found, as the store's error: a missing log or
/// another kind of file is corrupt, one past the bound is full, any other
/// failure poisons the handle.
fn log_read<T>(inner: &mut Inner, read: Result<Option<T>, BackendError>) -> Result<T, StoreError> {
    match read {
        Ok(Some(found)) => Ok(found),
        Ok(None) => Err(StoreError::CorruptLog { offset: 0, reason: "transaction log is missing" }),
        Err(BackendError::TooLarge { size, max, .. }) => Err(StoreError::LogFull { size, max }),
        Err(BackendError::NotAFile { .. }) => {
            Err(StoreError::CorruptLog { offset: 0, reason: "transaction log is not a regular file" })
        }
        Err(source) => io(inner, "read transaction log", Err(source)),
    }
}

/// Pass `result` through, poisoning the store on any backend error.
fn io<T>(inner: &mut Inner, op: &'static str, result: Result<T, BackendError>) -> Result<T, StoreError> {
    result.map_err(|source| {
        inner.poisoned = true;
        StoreError::Io { op, source }
    })
}

/// A record carried over from an unauthenticated format: whatever approval
/// it holds is not trusted.
/// A salvaged record as it may stand after a loss of later versions: what
/// could still lead to a commit ([`void_approval`]'s, and work pending
/// approval, which a lost frame may have rejected) can no longer; a commit
/// under way may have finished (and cleaned up) in a lost version, so its
/// outcome is unknown: `RecoveryRequired`, which recovery settles by what the
/// workspace holds against its stored diff or leaves to an operator, never
/// taken for one that wrote nothing. So is work that could still have been
/// committed in a lost version and whose artifact is stored (its diff is
/// what recovery compares): it landed, or it is voided as failed.
fn void_salvaged(mut record: TransactionRecord) -> TransactionRecord {
    let committable = matches!(
        record.state,
        TransactionState::PendingApproval | TransactionState::Approved | TransactionState::AutoApproved
    );
    if committable && record.artifact.is_some() {
        record.state = TransactionState::RecoveryRequired;
        return record;
    }
    record = void_approval(record);
    record.state = match record.state {
        TransactionState::PendingApproval => TransactionState::Rejected,
        TransactionState::Reserved | TransactionState::Revalidating | TransactionState::Committing => {
            TransactionState::RecoveryRequired
        }
        state => state,
    };
    record
}

fn void_approval(mut record: TransactionRecord) -> TransactionRecord {
    record.state = match record.state {
        TransactionState::Approved => TransactionState::Expired,
        TransactionState::AutoApproved => TransactionState::Rejected,
        state => state,
    };
    record
}

fn stats_of(state: &LogState) -> LogStats {
    LogStats {
        generation: state.generation(),
        bytes: state.end(),
        frames: state.frames(),
        live_records: state.records().len() as u64,
    }
}

fn live(state: &LogState, id: TransactionId) -> Result<&TransactionRecord, StoreError> {
    state.get(&id).ok_or(StoreError::NotFound { id })
}

/// The next version of `record` at `now_ms`, changed by `edit`.
/// Whether `record` may be reserved at `now_ms`: `Ok(Ok(()))`, or the
/// change a refusal makes (an expired approval or preview moves to
/// `Expired`, durably, and is the error), or the error alone.
fn reservable(record: &TransactionRecord, now_ms: u64) -> Result<Result<(), Change<CommitReservation>>, StoreError> {
    use TransactionState as S;
    let id = record.id;
    match (record.state, record.approval) {
        // The work itself past its window: over.
        (S::Approved, Some(grant)) if record.is_due_to_expire(now_ms) => {
            let expired = successor(record, now_ms, |version| version.state = S::Expired)?;
            Ok(Err(Change {
                entries: vec![LogEntry::Version(expired)],
                outcome: Err(StoreError::ApprovalExpired { id, expires_ms: grant.expires_ms(), now_ms }),
            }))
        }
        // Only the approval lapsed: the work waits for one again (ux68 M6:
        // it was expired, to be run and reviewed again).
        (S::Approved, Some(grant)) if grant.is_expired_at(now_ms) => {
            let waiting = successor(record, now_ms, |version| {
                version.state = S::PendingApproval;
                version.approval = None;
            })?;
            Ok(Err(Change {
                entries: vec![LogEntry::Version(waiting)],
                outcome: Err(StoreError::ApprovalLapsed { id, expires_ms: grant.expires_ms(), now_ms }),
            }))
        }
        (S::AutoApproved, _) if record.is_due_to_expire(now_ms) => {
            let expires_ms = record.pending_expires_ms.unwrap_or(now_ms);
            let expired = successor(record, now_ms, |version| version.state = S::Expired)?;
            Ok(Err(Change {
                entries: vec![LogEntry::Version(expired)],
                outcome: Err(StoreError::PreviewExpired { id, expires_ms, now_ms }),
            }))
        }
        (S::AutoApproved, _) | (S::Approved, Some(_)) => Ok(Ok(())),
        (state, _) => Err(StoreError::NotReservable { id, state }),
    }
}

/// The reservation a version held by a commit stands for.
fn reservation_of(version: &TransactionRecord) -> CommitReservation {
    CommitReservation {
        transaction: version.id,
        base_snapshot: version.base_snapshot,
        artifact: version.artifact,
        state: version.state,
        sequence: version.sequence,
    }
}

pub(crate) fn successor(
    record: &TransactionRecord,
    now_ms: u64,
    edit: impl FnOnce(&mut TransactionRecord),
) -> Result<TransactionRecord, StoreError> {
    let mut version =
        record.next_version(now_ms).ok_or(StoreError::InvalidRecord { id: record.id, reason: "sequence overflow" })?;
    edit(&mut version);
    Ok(version)
}

fn entry_id(entry: &LogEntry) -> TransactionId {
    match entry {
        LogEntry::Version(record) | LogEntry::Checkpoint(record) => record.id,
        LogEntry::Forget(entries) => entries.first().map_or(TransactionId::from_bytes([0; 32]), |(id, _)| *id),
    }
}
