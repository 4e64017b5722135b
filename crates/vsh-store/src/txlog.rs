//! The transaction log's byte format and replay, as pure functions over bytes.
//!
//! [`crate::TransactionStore`] keeps one append-only file, `txlog`, and uses
//! this module to parse it, check every record version against the state table
//! and encode new frames. Nothing here does I/O, so the fuzz target
//! `txlog_frame` and the tests drive exactly the code the store runs.
//!
//! # Layout
//!
//! ```text
//! header (88 bytes)
//!    0   8  magic "VSHTXL02"
//!    8   8  generation, u64 LE (>= 1; every compaction writes the next one)
//!   16   8  checkpoint count, u64 LE (frames at the start that are checkpoints)
//!   24  32  the authority key's id (AuthorityKey::id)
//!   56  32  MAC "vsh 2026 txlog header v2" over bytes 0..56
//! frame at file offset `o` (40 + L bytes)
//!    0   4  L, payload length, u32 LE, 1 ..= MAX_FRAME_PAYLOAD
//!    4   4  !L, the bitwise complement of L
//!    8   L  payload (a LogEntry)
//!  8+L  32  MAC "vsh 2026 txlog frame v2" over
//!           generation u64 LE | o u64 LE | L u32 LE | payload
//! ```
//!
//! Every MAC is keyed with the workspace's [`AuthorityKey`], which no guest
//! and no workspace file can reach: whoever can write the data directory but
//! does not hold the key cannot add a frame (an approval, say) that replays.
//! The MAC binds each frame to its generation and offset, so a frame copied to
//! another place or into another generation is refused too. The key id in the
//! header tells "written under another key" ([`LogError::WrongKey`]) from
//! corruption. The length complement tells a flipped length bit (always
//! corruption) from a frame cut short by a crash (a torn tail).
//!
//! The first format, `VSHTXL01` (56-byte header, public derive-key
//! checksums), is read only to migrate it ([`LogState::parse_legacy`]): its
//! frames carry no authority, so the store rewrites it with every approval
//! voided.
//!
//! # Replay
//!
//! Frames are read in order from the end of the header. At each frame start:
//!
//! 1. No bytes left: the log is clean.
//! 2. Only zero bytes left, or fewer than 8: a torn tail (a crash during an
//!    append; some filesystems zero-fill an extended tail).
//! 3. `!L` does not match `L`, or `L` is out of range: corruption.
//! 4. Fewer than `40 + L` bytes left: a torn tail.
//! 5. The checksum does not match, the payload does not decode, or the record
//!    version breaks a rule (state edge not in the table, sequence gap, changed
//!    snapshot, replaced artifact, grant outside approval): corruption.
//!
//! A torn tail ends the replay at its start (the writer truncates it before
//! appending); corruption stops everything with the frame's offset. A complete
//! frame is never skipped or truncated.

use std::collections::BTreeMap;

use vsh_types::canon::{self, Reader};
use vsh_types::{AuthorityKey, BlobId, DomainHasher, MacKey, PrincipalId, SnapshotId, TransactionId, TransactionState};

use crate::record::{self, ApprovalGrant, TransactionRecord};

/// The first eight bytes of the log.
pub const LOG_MAGIC: [u8; 8] = *b"VSHTXL02";
/// The first eight bytes of the first, unauthenticated format.
pub const LEGACY_LOG_MAGIC: [u8; 8] = *b"VSHTXL01";
/// The magic prefix every version of the log shares.
const LOG_MAGIC_FAMILY: &[u8; 6] = b"VSHTXL";
/// Length of the log header.
pub const HEADER_LEN: usize = 88;
/// Length of the first format's header.
const LEGACY_HEADER_LEN: usize = 56;
/// Bytes a frame adds around its payload: length, complement, checksum.
pub const FRAME_OVERHEAD: usize = 8 + 32;
/// The largest payload a frame may carry.
pub const MAX_FRAME_PAYLOAD: u32 = 1 << 20;
/// The most records one forget entry may name.
pub const MAX_FORGET_PER_FRAME: usize = 4096;
/// The largest encoded record version.
pub const MAX_VERSION_PAYLOAD: usize = 1 + 32 + 32 + 1 + 8 + 8 + 8 + 33 + 49 + 9;

const HEADER_DOMAIN: &str = "vsh 2026 txlog header v2";
const FRAME_DOMAIN: &str = "vsh 2026 txlog frame v2";
const LEGACY_HEADER_DOMAIN: &str = "vsh 2026 txlog header v1";
const LEGACY_FRAME_DOMAIN: &str = "vsh 2026 txlog frame v1";

/// The authority a log is written and checked with (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogKey {
    id: [u8; 32],
    header: MacKey,
    frame: MacKey,
}

impl LogKey {
    /// The log key of `key`.
    pub fn new(key: &AuthorityKey) -> Self {
        Self { id: key.id(), header: key.mac_key(HEADER_DOMAIN), frame: key.mac_key(FRAME_DOMAIN) }
    }

    /// The public key's log key (integrity without authenticity).
    pub fn unauthenticated() -> Self {
        Self::new(&AuthorityKey::unauthenticated())
    }
}

/// How the frames being replayed are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Auth {
    /// `VSHTXL02`: MACs under this key.
    Keyed(LogKey),
    /// `VSHTXL01`: public derive-key checksums (read only to migrate).
    Legacy,
}

const TAG_VERSION: u8 = 1;
const TAG_FORGET: u8 = 2;
const TAG_CHECKPOINT: u8 = 3;

/// Why a log could not be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// A complete frame or the header failed a check.
    #[error("transaction log is corrupt at byte {offset}: {reason}")]
    Corrupt {
        /// Where the bad header or frame starts.
        offset: u64,
        /// Which check failed.
        reason: &'static str,
    },
    /// The log was written by a newer version of the format.
    #[error("transaction log format {} is newer than this build", String::from_utf8_lossy(.found))]
    UpgradeRequired {
        /// The magic found.
        found: [u8; 8],
    },
    /// The log was written under another authority key (its header names
    /// another key id): nothing in it can be verified with this one.
    #[error("transaction log was written under another authority key")]
    WrongKey {
        /// The id of the key that wrote it.
        found: [u8; 32],
        /// The id of the key in use.
        expected: [u8; 32],
    },
    /// The log is in the first, unauthenticated format: it must be migrated
    /// ([`LogState::parse_legacy`]) before anything is appended.
    #[error("transaction log is in the unauthenticated first format")]
    Legacy,
}

/// The decoded log header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogHeader {
    /// Incremented by every compaction; stale handles notice the change.
    pub generation: u64,
    /// How many frames at the start of the log are checkpoints.
    pub checkpoints: u64,
}

impl LogHeader {
    /// The 88-byte encoding under `key`.
    pub fn encode(&self, key: &LogKey) -> [u8; HEADER_LEN] {
        let mut out = [0_u8; HEADER_LEN];
        out[..8].copy_from_slice(&LOG_MAGIC);
        out[8..16].copy_from_slice(&self.generation.to_le_bytes());
        out[16..24].copy_from_slice(&self.checkpoints.to_le_bytes());
        out[24..56].copy_from_slice(&key.id);
        let tag = key.header.mac().update(&out[..56]).finalize();
        out[56..].copy_from_slice(&tag);
        out
    }

    /// Decode the header at the start of `log`, checked under `key`. A log
    /// in the first format is [`LogError::Legacy`].
    pub fn decode(log: &[u8], key: &LogKey) -> Result<Self, LogError> {
        let corrupt = |reason| LogError::Corrupt { offset: 0, reason };
        if log.len() >= 8 && log[..8] != LOG_MAGIC {
            if log[..8] == LEGACY_LOG_MAGIC {
                return Err(LogError::Legacy);
            }
            if log[..6] == *LOG_MAGIC_FAMILY {
                let mut found = [0_u8; 8];
                found.copy_from_slice(&log[..8]);
                return Err(LogError::UpgradeRequired { found });
            }
            return Err(corrupt("bad log magic"));
        }
        if log.len() < HEADER_LEN {
            return Err(corrupt("log header is truncated"));
        }
        if !key.header.mac().update(&log[..56]).verify(&log[56..HEADER_LEN]) {
            let mut found = [0_u8; 32];
            found.copy_from_slice(&log[24..56]);
            if found != key.id {
                return Err(LogError::WrongKey { found, expected: key.id });
            }
            return Err(corrupt("log header checksum mismatch"));
        }
        Self::fields(log)
    }

    /// Decode a first-format header (public checksum).
    fn decode_legacy(log: &[u8]) -> Result<Self, LogError> {
        let corrupt = |reason| LogError::Corrupt { offset: 0, reason };
        if log.len() < LEGACY_HEADER_LEN || log[..8] != LEGACY_LOG_MAGIC {
            return Err(corrupt("not a first-format log header"));
        }
        let sum = DomainHasher::new(LEGACY_HEADER_DOMAIN).update(&log[..24]).finalize();
        if log[24..LEGACY_HEADER_LEN] != sum {
            return Err(corrupt("log header checksum mismatch"));
        }
        Self::fields(log)
    }

    fn fields(log: &[u8]) -> Result<Self, LogError> {
        let generation = u64::from_le_bytes(log[8..16].try_into().expect("eight bytes"));
        let checkpoints = u64::from_le_bytes(log[16..24].try_into().expect("eight bytes"));
        if generation == 0 {
            return Err(LogError::Corrupt { offset: 0, reason: "log generation is zero" });
        }
        Ok(Self { generation, checkpoints })
    }
}

/// One frame's payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEntry {
    /// A new version of a record: its creation (sequence 0) or a change.
    Version(TransactionRecord),
    /// A record as compaction carried it over (only in the checkpoint prefix).
    Checkpoint(TransactionRecord),
    /// Terminal records dropped by retention: `(id, sequence of its latest version)`,
    /// ids strictly increasing.
    Forget(Vec<(TransactionId, u64)>),
}

impl LogEntry {
    /// The payload encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Self::Version(record) => {
                canon::put_u8(&mut out, TAG_VERSION);
                encode_record(&mut out, record);
            }
            Self::Checkpoint(record) => {
                canon::put_u8(&mut out, TAG_CHECKPOINT);
                encode_record(&mut out, record);
            }
            Self::Forget(entries) => {
                canon::put_u8(&mut out, TAG_FORGET);
                canon::put_u32(&mut out, u32::try_from(entries.len()).unwrap_or(u32::MAX));
                for (id, sequence) in entries {
                    out.extend_from_slice(id.as_bytes());
                    canon::put_u64(&mut out, *sequence);
                }
            }
        }
        out
    }

    /// Decode a payload. Every field is checked; nothing may trail.
    pub fn decode(payload: &[u8]) -> Result<Self, &'static str> {
        let mut reader = Reader::new(payload);
        let truncated = |_| "frame payload is truncated";
        let entry = match reader.u8().map_err(truncated)? {
            TAG_VERSION => Self::Version(decode_record(&mut reader)?),
            TAG_CHECKPOINT => Self::Checkpoint(decode_record(&mut reader)?),
            TAG_FORGET => {
                let count = reader.u32().map_err(truncated)? as usize;
                if count == 0 || count > MAX_FORGET_PER_FRAME || count * 40 != reader.remaining() {
                    return Err("bad forget count");
                }
                let mut entries: Vec<(TransactionId, u64)> = Vec::with_capacity(count);
                for _ in 0..count {
                    let id = TransactionId::from_bytes(reader.array().map_err(truncated)?);
                    let sequence = reader.u64().map_err(truncated)?;
                    if entries.last().is_some_and(|(last, _)| *last >= id) {
                        return Err("forget ids out of order");
                    }
                    entries.push((id, sequence));
                }
                Self::Forget(entries)
            }
            _ => return Err("unknown frame tag"),
        };
        if reader.finish().is_err() {
            return Err("trailing bytes in frame payload");
        }
        Ok(entry)
    }
}

fn encode_record(out: &mut Vec<u8>, record: &TransactionRecord) {
    out.extend_from_slice(record.id.as_bytes());
    out.extend_from_slice(record.base_snapshot.as_bytes());
    canon::put_u8(out, record.state.tag());
    canon::put_u64(out, record.sequence);
    canon::put_u64(out, record.created_ms);
    canon::put_u64(out, record.updated_ms);
    match &record.artifact {
        None => canon::put_u8(out, 0),
        Some(artifact) => {
            canon::put_u8(out, 1);
            out.extend_from_slice(artifact.as_bytes());
        }
    }
    match &record.approval {
        None => canon::put_u8(out, 0),
        Some(grant) => {
            canon::put_u8(out, 1);
            out.extend_from_slice(grant.principal().as_bytes());
            canon::put_u64(out, grant.issued_ms());
            canon::put_u64(out, grant.expires_ms());
        }
    }
    match record.pending_expires_ms {
        None => canon::put_u8(out, 0),
        Some(expires) => {
            canon::put_u8(out, 1);
            canon::put_u64(out, expires);
        }
    }
}

fn decode_record(reader: &mut Reader<'_>) -> Result<TransactionRecord, &'static str> {
    let truncated = |_| "frame payload is truncated";
    let id = TransactionId::from_bytes(reader.array().map_err(truncated)?);
    let base_snapshot = SnapshotId::from_bytes(reader.array().map_err(truncated)?);
    let state = TransactionState::from_tag(reader.u8().map_err(truncated)?).ok_or("bad state tag")?;
    let sequence = reader.u64().map_err(truncated)?;
    let created_ms = reader.u64().map_err(truncated)?;
    let updated_ms = reader.u64().map_err(truncated)?;
    let artifact = if reader.flag("artifact flag").map_err(|_| "bad artifact flag")? {
        Some(BlobId::from_bytes(reader.array().map_err(truncated)?))
    } else {
        None
    };
    let approval = if reader.flag("approval flag").map_err(|_| "bad approval flag")? {
        let principal = PrincipalId::from_bytes(reader.array().map_err(truncated)?);
        let issued = reader.u64().map_err(truncated)?;
        let expires = reader.u64().map_err(truncated)?;
        Some(ApprovalGrant::from_parts(id, principal, issued, expires))
    } else {
        None
    };
    let pending_expires_ms = if reader.flag("expiry flag").map_err(|_| "bad expiry flag")? {
        Some(reader.u64().map_err(truncated)?)
    } else {
        None
    };
    let mut record = TransactionRecord::new(id, base_snapshot, state, created_ms);
    record.updated_ms = updated_ms;
    record.sequence = sequence;
    record.artifact = artifact;
    record.approval = approval;
    record.pending_expires_ms = pending_expires_ms;
    Ok(record)
}

/// The checksum bytes a frame's MAC covers: generation, offset, length.
fn frame_prefix(generation: u64, offset: u64, payload: &[u8]) -> [u8; 20] {
    let length = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let mut prefix = [0_u8; 20];
    prefix[..8].copy_from_slice(&generation.to_le_bytes());
    prefix[8..16].copy_from_slice(&offset.to_le_bytes());
    prefix[16..].copy_from_slice(&length.to_le_bytes());
    prefix
}

/// The MAC of `payload` at `offset` in a log of `generation`.
fn frame_mac(key: &LogKey, generation: u64, offset: u64, payload: &[u8]) -> vsh_types::Mac {
    let mut mac = key.frame.mac();
    mac.update(&frame_prefix(generation, offset, payload)).update(payload);
    mac
}

/// Whether `tag` is the right checksum of `payload` at `offset`.
fn frame_verifies(auth: &Auth, generation: u64, offset: u64, payload: &[u8], tag: &[u8]) -> bool {
    match auth {
        Auth::Keyed(key) => frame_mac(key, generation, offset, payload).verify(tag),
        Auth::Legacy => {
            DomainHasher::new(LEGACY_FRAME_DOMAIN)
                .update(&frame_prefix(generation, offset, payload))
                .update(payload)
                .finalize()
                == tag
        }
    }
}

/// Encode one frame holding `payload` at `offset` in a log of `generation`.
pub fn encode_frame(key: &LogKey, generation: u64, offset: u64, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(payload.len() + FRAME_OVERHEAD);
    canon::put_u32(&mut out, length);
    canon::put_u32(&mut out, !length);
    out.extend_from_slice(payload);
    out.extend_from_slice(&frame_mac(key, generation, offset, payload).finalize());
    out
}

/// How a replay ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// Every byte belongs to a complete, valid frame.
    Clean,
    /// The bytes from `at` on are an incomplete frame left by a crash.
    Torn {
        /// Where the incomplete frame starts (the length to truncate to).
        at: u64,
    },
}

/// What [`LogState::apply_for_append`] changed: how to put it back.
#[derive(Debug)]
#[must_use = "an append that fails must be undone"]
pub struct Undo {
    end: u64,
    frames: u64,
    /// Each touched record's earlier version (`None`: it was not there),
    /// in the order touched.
    records: Vec<(TransactionId, Option<TransactionRecord>)>,
}

/// The state a log replays to: every live record's latest version, and where
/// the next frame goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogState {
    header: LogHeader,
    records: BTreeMap<TransactionId, TransactionRecord>,
    /// Offset just past the last complete frame applied.
    end: u64,
    /// Frames applied.
    frames: u64,
    /// How frames are checked.
    auth: Auth,
}

impl LogState {
    /// The state of an empty log of `generation` under `key` (no frames yet).
    pub fn empty(generation: u64, key: &LogKey) -> Self {
        Self {
            header: LogHeader { generation, checkpoints: 0 },
            records: BTreeMap::new(),
            end: HEADER_LEN as u64,
            frames: 0,
            auth: Auth::Keyed(key.clone()),
        }
    }

    /// Replay a whole log file, every frame checked under `key`.
    pub fn parse(log: &[u8], key: &LogKey) -> Result<(Self, Tail), LogError> {
        let header = LogHeader::decode(log, key)?;
        let mut state = Self::empty(header.generation, key);
        state.header = header;
        let tail = state.replay_from_end(log)?;
        Ok((state, tail))
    }

    /// Replay a whole log file as far as its frames pass their checks: the
    /// state of every frame before the first that fails one, and that
    /// failure (`None` when the whole log replays). The header must verify.
    pub fn parse_prefix(log: &[u8], key: &LogKey) -> Result<(Self, Option<LogError>), LogError> {
        let header = LogHeader::decode(log, key)?;
        let mut state = Self::empty(header.generation, key);
        state.header = header;
        let failed = state.replay_from_end(log).err();
        Ok((state, failed))
    }

    /// Every version of `id`'s record a whole log file holds, oldest first,
    /// each checked as a replay checks it: its creation and every change since,
    /// or, in a compacted log, the version compaction carried over (marked
    /// `true`) and the changes after it. Empty when the log does not know `id`.
    pub fn history(log: &[u8], key: &LogKey, id: TransactionId) -> Result<Vec<(TransactionRecord, bool)>, LogError> {
        let header = LogHeader::decode(log, key)?;
        let mut state = Self::empty(header.generation, key);
        state.header = header;
        let mut versions = Vec::new();
        state.replay_from_end_with(log, &mut |entry| match entry {
            LogEntry::Version(record) if record.id == id => versions.push((*record, false)),
            LogEntry::Checkpoint(record) if record.id == id => versions.push((*record, true)),
            _ => {}
        })?;
        Ok(versions)
    }

    /// Replay a log in the first, unauthenticated format, to migrate it. The
    /// result can only be read ([`LogState::records`]); appending to it is refused.
    pub fn parse_legacy(log: &[u8]) -> Result<(Self, Tail), LogError> {
        let header = LogHeader::decode_legacy(log)?;
        let mut state =
            Self { header, records: BTreeMap::new(), end: LEGACY_HEADER_LEN as u64, frames: 0, auth: Auth::Legacy };
        let tail = state.replay_from_end(log)?;
        Ok((state, tail))
    }

    fn key(&self) -> Option<&LogKey> {
        match &self.auth {
            Auth::Keyed(key) => Some(key),
            Auth::Legacy => None,
        }
    }

    /// Bring this state up to date with `log`, the current whole file: replay
    /// only the frames after [`LogState::end`] if the generation is unchanged,
    /// otherwise (a compaction happened) replay from scratch. On error, this
    /// state may have applied some valid frames; it never applies an invalid one.
    pub fn refresh(&mut self, log: &[u8]) -> Result<Tail, LogError> {
        let key = self.key().ok_or(LogError::Legacy)?.clone();
        let header = LogHeader::decode(log, &key)?;
        if header != self.header {
            let (fresh, tail) = Self::parse(log, &key)?;
            *self = fresh;
            return Ok(tail);
        }
        if (log.len() as u64) < self.end {
            return Err(LogError::Corrupt { offset: log.len() as u64, reason: "log shrank below replayed frames" });
        }
        self.replay_from_end(log)
    }

    /// [`LogState::refresh`] from the file's two ends: `head`, its first
    /// bytes (at least the header's), `len`, its length, and `tail`, its
    /// bytes from [`LogState::end`] on. A change costs what the frames
    /// appended since cost, whatever the log's length. `None` when the
    /// generation changed (a compaction): then the whole file is needed
    /// ([`LogState::refresh`]).
    pub fn refresh_tail(&mut self, head: &[u8], len: u64, tail: &[u8]) -> Result<Option<Tail>, LogError> {
        let key = self.key().ok_or(LogError::Legacy)?.clone();
        let header = LogHeader::decode(head, &key)?;
        if header != self.header {
            return Ok(None);
        }
        if len < self.end {
            return Err(LogError::Corrupt { offset: len, reason: "log shrank below replayed frames" });
        }
        if tail.len() as u64 != len - self.end {
            return Err(LogError::Corrupt { offset: self.end, reason: "log tail does not reach the log's end" });
        }
        self.replay_with(tail, self.end, &mut |_| {}).map(Some)
    }

    fn replay_from_end(&mut self, log: &[u8]) -> Result<Tail, LogError> {
        self.replay_from_end_with(log, &mut |_| {})
    }

    /// [`LogState::replay_from_end`], showing `seen` every entry it applies.
    fn replay_from_end_with(&mut self, log: &[u8], seen: &mut dyn FnMut(&LogEntry)) -> Result<Tail, LogError> {
        let from = usize::try_from(self.end).expect("offset within the log");
        self.replay_with(&log[from..], self.end, seen)
    }

    /// Replay the frames of `bytes`, the log from offset `base` (this
    /// state's end) on, showing `seen` every entry it applies.
    fn replay_with(&mut self, bytes: &[u8], base: u64, seen: &mut dyn FnMut(&LogEntry)) -> Result<Tail, LogError> {
        let generation = self.header.generation;
        let tail = loop {
            let offset = self.end;
            let rest = &bytes[usize::try_from(offset - base).expect("offset within the log")..];
            if rest.is_empty() {
                break Tail::Clean;
            }
            if rest.len() < 8 || rest.iter().all(|byte| *byte == 0) {
                break Tail::Torn { at: offset };
            }
            let corrupt = |reason| LogError::Corrupt { offset, reason };
            let length = u32::from_le_bytes(rest[..4].try_into().expect("four bytes"));
            let check = u32::from_le_bytes(rest[4..8].try_into().expect("four bytes"));
            if check != !length {
                return Err(corrupt("frame length check mismatch"));
            }
            if length == 0 || length > MAX_FRAME_PAYLOAD {
                return Err(corrupt("frame length out of range"));
            }
            let length = length as usize;
            if rest.len() < length + FRAME_OVERHEAD {
                break Tail::Torn { at: offset };
            }
            let payload = &rest[8..8 + length];
            if !frame_verifies(&self.auth, generation, offset, payload, &rest[8 + length..length + FRAME_OVERHEAD]) {
                // Damage, or a frame written without the authority key: both are refused.
                return Err(corrupt("frame checksum mismatch"));
            }
            let entry = LogEntry::decode(payload).map_err(corrupt)?;
            self.apply(&entry).map_err(corrupt)?;
            seen(&entry);
            self.end = offset + (length + FRAME_OVERHEAD) as u64;
        };
        if self.frames < self.header.checkpoints {
            return Err(LogError::Corrupt { offset: self.end, reason: "compacted log is incomplete" });
        }
        Ok(tail)
    }

    /// Check `entry` against this state without changing it.
    pub fn check(&self, entry: &LogEntry) -> Result<(), &'static str> {
        let in_checkpoints = self.frames < self.header.checkpoints;
        match entry {
            LogEntry::Checkpoint(record) => {
                if !in_checkpoints {
                    return Err("checkpoint outside the checkpoint prefix");
                }
                if self.records.contains_key(&record.id) {
                    return Err("checkpoint of a record already present");
                }
                record::check_consistent(record)
            }
            _ if in_checkpoints => Err("missing checkpoint"),
            LogEntry::Version(record) => match self.records.get(&record.id) {
                None => record::check_created(record),
                Some(previous) => record::check_successor(previous, record),
            },
            LogEntry::Forget(entries) => {
                if entries.is_empty() || entries.len() > MAX_FORGET_PER_FRAME {
                    return Err("bad forget count");
                }
                for pair in entries.windows(2) {
                    if pair[0].0 >= pair[1].0 {
                        return Err("forget ids out of order");
                    }
                }
                for (id, sequence) in entries {
                    let record = self.records.get(id).ok_or("forget of an unknown record")?;
                    if record.sequence != *sequence {
                        return Err("forget of a superseded version");
                    }
                    if !record.state.is_terminal() {
                        return Err("forget of a live transaction");
                    }
                }
                Ok(())
            }
        }
    }

    /// Check and apply one entry (as if its frame had just been read).
    pub fn apply(&mut self, entry: &LogEntry) -> Result<(), &'static str> {
        self.check(entry)?;
        match entry {
            LogEntry::Version(record) | LogEntry::Checkpoint(record) => {
                self.records.insert(record.id, *record);
            }
            LogEntry::Forget(entries) => {
                for (id, _) in entries {
                    self.records.remove(id);
                }
            }
        }
        self.frames += 1;
        Ok(())
    }

    /// Check `entries` in order (each against the state the earlier ones leave)
    /// and encode their frames for appending at [`LogState::end`]. Returns the
    /// state after them and the bytes to append; `self` is unchanged.
    /// (Copies the whole state: for tests and tools. A store appends with
    /// [`LogState::apply_for_append`], which changes only what the entries touch.)
    pub fn prepare_append(&self, entries: &[LogEntry]) -> Result<(Self, Vec<u8>), &'static str> {
        let mut next = self.clone();
        let (bytes, _undo) = next.apply_for_append(entries)?;
        Ok((next, bytes))
    }

    /// Check `entries` in order (each against the state the earlier ones
    /// leave), apply them to this state and encode their frames for
    /// appending at the old [`LogState::end`]: the bytes to append, and what
    /// puts this state back ([`LogState::undo`]) should the append fail. On
    /// an error this state is unchanged. Costs what the entries touch,
    /// whatever the number of records.
    pub fn apply_for_append(&mut self, entries: &[LogEntry]) -> Result<(Vec<u8>, Undo), &'static str> {
        let key = self.key().ok_or("the log must be migrated before it is appended to")?.clone();
        let mut undo = Undo { end: self.end, frames: self.frames, records: Vec::new() };
        let mut bytes = Vec::new();
        for entry in entries {
            let applied = (|| {
                let payload = entry.encode();
                if payload.is_empty() || payload.len() > MAX_FRAME_PAYLOAD as usize {
                    return Err("frame payload out of range");
                }
                // What it touches, before `apply` checks and changes it (an
                // entry that does not check changes nothing, and putting back
                // what it did not change is harmless).
                match entry {
                    LogEntry::Version(record) | LogEntry::Checkpoint(record) => {
                        undo.records.push((record.id, self.records.get(&record.id).copied()));
                    }
                    LogEntry::Forget(forgotten) => {
                        undo.records.extend(forgotten.iter().map(|(id, _)| (*id, self.records.get(id).copied())));
                    }
                }
                self.apply(entry)?;
                Ok(payload)
            })();
            let payload = match applied {
                Ok(payload) => payload,
                Err(reason) => {
                    self.undo(undo);
                    return Err(reason);
                }
            };
            let frame = encode_frame(&key, self.header.generation, self.end, &payload);
            self.end += frame.len() as u64;
            bytes.extend_from_slice(&frame);
        }
        Ok((bytes, undo))
    }

    /// Put back what [`LogState::apply_for_append`] changed.
    pub fn undo(&mut self, undo: Undo) {
        for (id, previous) in undo.records.into_iter().rev() {
            match previous {
                Some(record) => {
                    self.records.insert(id, record);
                }
                None => {
                    self.records.remove(&id);
                }
            }
        }
        self.end = undo.end;
        self.frames = undo.frames;
    }

    /// The whole file of the next generation, under this log's key (or
    /// `key` for a first-format log being migrated): a header and one
    /// checkpoint frame per live record, in id order. Forgotten records are gone.
    pub fn compacted(&self) -> Vec<u8> {
        let key = self.key().cloned().unwrap_or_else(LogKey::unauthenticated);
        self.compacted_under(&key)
    }

    /// [`LogState::compacted`] under `key`.
    pub fn compacted_under(&self, key: &LogKey) -> Vec<u8> {
        let generation = self.header.generation + 1;
        let header = LogHeader { generation, checkpoints: self.records.len() as u64 };
        let mut out = header.encode(key).to_vec();
        for record in self.records.values() {
            let payload = LogEntry::Checkpoint(*record).encode();
            let frame = encode_frame(key, generation, out.len() as u64, &payload);
            out.extend_from_slice(&frame);
        }
        out
    }

    /// The length [`LogState::compacted`] would have, computed without encoding.
    pub fn compacted_len(&self) -> u64 {
        let frames: usize = self
            .records
            .values()
            .map(|record| {
                FRAME_OVERHEAD + MAX_VERSION_PAYLOAD
                    - if record.artifact.is_some() { 0 } else { 32 }
                    - if record.approval.is_some() { 0 } else { 48 }
                    - if record.pending_expires_ms.is_some() { 0 } else { 8 }
            })
            .sum();
        (HEADER_LEN + frames) as u64
    }

    /// The first file of a new log under `key`: a header of `generation` and
    /// one checkpoint frame per record (migrated from an older format), in id order.
    pub fn initial(generation: u64, records: &[TransactionRecord], key: &LogKey) -> Vec<u8> {
        let mut state = Self::empty(generation.saturating_sub(1), key);
        state.records = records.iter().map(|record| (record.id, *record)).collect();
        state.compacted_under(key)
    }

    /// The generation being replayed.
    pub fn generation(&self) -> u64 {
        self.header.generation
    }

    /// Offset just past the last complete frame: the length of a clean log.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Frames replayed or appended so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The latest version of `id`, if it is live.
    pub fn get(&self, id: &TransactionId) -> Option<&TransactionRecord> {
        self.records.get(id)
    }

    /// Every live record, by id.
    pub fn records(&self) -> &BTreeMap<TransactionId, TransactionRecord> {
        &self.records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> LogKey {
        LogKey::new(&AuthorityKey::from_bytes([9; 32]))
    }

    fn created(name: &[u8], state: TransactionState) -> TransactionRecord {
        TransactionRecord::new(TransactionId::digest(name), SnapshotId::digest(b"base"), state, 10)
    }

    /// A log of generation 1 holding `records` created records, its bytes.
    fn log_of(records: &[TransactionRecord]) -> (LogState, Vec<u8>) {
        let mut state = LogState::empty(1, &key());
        let mut bytes = LogHeader { generation: 1, checkpoints: 0 }.encode(&key()).to_vec();
        for record in records {
            let (frame, _undo) = state.apply_for_append(&[LogEntry::Version(*record)]).unwrap();
            bytes.extend_from_slice(&frame);
        }
        (state, bytes)
    }

    #[test]
    fn an_append_changes_only_what_it_touches_and_is_undone_exactly() {
        let a = created(b"a", TransactionState::Denied);
        let b = created(b"b", TransactionState::PendingApproval);
        let (mut state, bytes) = log_of(&[a, b]);
        let before = state.clone();
        let mut rejected = b.next_version(20).unwrap();
        rejected.state = TransactionState::Rejected;
        let c = created(b"c", TransactionState::Denied);
        let entries = [LogEntry::Version(rejected), LogEntry::Version(c), LogEntry::Forget(vec![(a.id, a.sequence)])];
        let (frames, undo) = state.apply_for_append(&entries).unwrap();
        // The same as the copying form, frames and state alike.
        assert_eq!(before.prepare_append(&entries).unwrap(), (state.clone(), frames.clone()));
        // And what a replay of the log with the frames gives.
        let mut whole = bytes.clone();
        whole.extend_from_slice(&frames);
        assert_eq!(LogState::parse(&whole, &key()).unwrap().0, state);
        state.undo(undo);
        assert_eq!(state, before, "undone exactly: the changed, the created and the forgotten record");
        // An entry that does not check leaves the state as it was, even after
        // earlier entries of the same append applied.
        let invalid = [LogEntry::Version(c), LogEntry::Forget(vec![(b.id, 7)])];
        assert_eq!(state.apply_for_append(&invalid).unwrap_err(), "forget of a superseded version");
        assert_eq!(state, before);
    }

    #[test]
    fn a_refresh_from_the_tail_replays_what_a_whole_read_does() {
        let records: Vec<_> = (0..4_u8).map(|n| created(&[n], TransactionState::Denied)).collect();
        let (_, bytes) = log_of(&records);
        let (whole, _) = LogState::parse(&bytes, &key()).unwrap();
        // A reader that replayed the first two frames reads only the rest.
        let (mut reader, prefix) = log_of(&records[..2]);
        let from = reader.end();
        assert_eq!(&bytes[..prefix.len()], prefix.as_slice());
        let tail = &bytes[usize::try_from(from).unwrap()..];
        assert_eq!(reader.refresh_tail(&bytes[..HEADER_LEN], bytes.len() as u64, tail), Ok(Some(Tail::Clean)));
        assert_eq!(reader, whole);
        // A torn last frame is reported where it starts, as a whole read does.
        let (mut torn_reader, _) = log_of(&records[..2]);
        let cut = &bytes[..bytes.len() - 3];
        let frame = (whole.end() - from) / 2;
        let last = whole.end() - frame;
        assert_eq!(
            torn_reader.refresh_tail(&cut[..HEADER_LEN], cut.len() as u64, &cut[usize::try_from(from).unwrap()..]),
            Ok(Some(Tail::Torn { at: last }))
        );
        // A tail that does not reach the end, a log that shrank, a new generation.
        let (mut short, _) = log_of(&records[..2]);
        let wrong = short.refresh_tail(&bytes[..HEADER_LEN], bytes.len() as u64 + 1, tail);
        assert!(matches!(wrong, Err(LogError::Corrupt { .. })), "{wrong:?}");
        let (mut ahead, _) = log_of(&records);
        let shrank = ahead.refresh_tail(&bytes[..HEADER_LEN], from, &[]);
        assert!(matches!(shrank, Err(LogError::Corrupt { reason: "log shrank below replayed frames", .. })));
        let compacted = LogHeader { generation: 2, checkpoints: 4 }.encode(&key());
        let (mut stale, _) = log_of(&records[..2]);
        assert_eq!(stale.refresh_tail(&compacted, bytes.len() as u64, tail), Ok(None), "the whole file is needed");
    }

    #[test]
    fn header_round_trip_and_checks() {
        let header = LogHeader { generation: 3, checkpoints: 2 };
        let bytes = header.encode(&key());
        assert_eq!(LogHeader::decode(&bytes, &key()), Ok(header));
        let mut future = bytes;
        future[7] = b'3';
        assert_eq!(LogHeader::decode(&future, &key()), Err(LogError::UpgradeRequired { found: *b"VSHTXL03" }));
        let mut flipped = bytes;
        flipped[9] ^= 1;
        assert!(matches!(LogHeader::decode(&flipped, &key()), Err(LogError::Corrupt { offset: 0, .. })));
        assert!(matches!(LogHeader::decode(&bytes[..20], &key()), Err(LogError::Corrupt { offset: 0, .. })));
        assert!(matches!(LogHeader::decode(b"garbage!garbage!", &key()), Err(LogError::Corrupt { .. })));
        // Under another key: told apart from corruption by the key id.
        let other = LogKey::unauthenticated();
        assert!(matches!(LogHeader::decode(&bytes, &other), Err(LogError::WrongKey { .. })));
        let mut legacy = bytes;
        legacy[..8].copy_from_slice(b"VSHTXL01");
        assert_eq!(LogHeader::decode(&legacy, &key()), Err(LogError::Legacy));
    }

    #[test]
    fn payload_round_trips() {
        let mut record = created(b"a", TransactionState::PendingApproval).with_pending_expiry(99);
        record.artifact = Some(BlobId::of(b"artifact"));
        let mut approved = record.next_version(20).unwrap();
        approved.state = TransactionState::Approved;
        approved.approval = Some(ApprovalGrant::new(record.id, PrincipalId::digest(b"alice"), 20, 30).unwrap());
        for entry in [
            LogEntry::Version(record),
            LogEntry::Checkpoint(approved),
            LogEntry::Forget(vec![(TransactionId::digest(b"x"), 4), (TransactionId::digest(b"y"), 0)]),
        ] {
            let mut entry = entry;
            if let LogEntry::Forget(entries) = &mut entry {
                entries.sort();
            }
            let bytes = entry.encode();
            assert!(bytes.len() <= MAX_VERSION_PAYLOAD || matches!(entry, LogEntry::Forget(_)));
            assert_eq!(LogEntry::decode(&bytes), Ok(entry));
        }
        assert_eq!(LogEntry::Version(approved).encode().len(), MAX_VERSION_PAYLOAD);
    }

    #[test]
    fn state_rules_are_enforced() {
        let mut state = LogState::empty(1, &key());
        let record = created(b"a", TransactionState::AutoApproved);
        assert_eq!(state.apply(&LogEntry::Version(record)), Ok(()));
        assert_eq!(state.check(&LogEntry::Version(record)), Err("version out of sequence"));
        let mut skip = record.next_version(11).unwrap();
        skip.state = TransactionState::Committed;
        assert_eq!(state.check(&LogEntry::Version(skip)), Err("illegal state edge"));
        let mut same = record.next_version(11).unwrap();
        assert_eq!(state.check(&LogEntry::Version(same)), Err("version changes nothing"));
        same.base_snapshot = SnapshotId::digest(b"other");
        assert_eq!(state.check(&LogEntry::Version(same)), Err("version changes a fixed field"));
        let mut reserved = created(b"b", TransactionState::Reserved);
        assert!(state.check(&LogEntry::Version(reserved)).is_err());
        reserved.state = TransactionState::Approved;
        assert!(state.check(&LogEntry::Version(reserved)).is_err());
        assert_eq!(state.check(&LogEntry::Forget(vec![(record.id, 0)])), Err("forget of a live transaction"));
        assert_eq!(state.check(&LogEntry::Checkpoint(record)), Err("checkpoint outside the checkpoint prefix"));
    }

    #[test]
    fn frames_replay_and_compaction_preserves_records() {
        let state = LogState::empty(1, &key());
        let first = created(b"one", TransactionState::PendingApproval);
        let second = created(b"two", TransactionState::Denied);
        let (state, bytes) = state.prepare_append(&[LogEntry::Version(first), LogEntry::Version(second)]).unwrap();
        let mut log = LogHeader { generation: 1, checkpoints: 0 }.encode(&key()).to_vec();
        log.extend_from_slice(&bytes);
        let (parsed, tail) = LogState::parse(&log, &key()).unwrap();
        assert_eq!((parsed.clone(), tail), (state.clone(), Tail::Clean));
        let (state, more) = state.prepare_append(&[LogEntry::Forget(vec![(second.id, 0)])]).unwrap();
        log.extend_from_slice(&more);
        let compacted = state.compacted();
        assert_eq!(compacted.len() as u64, state.compacted_len());
        let (after, tail) = LogState::parse(&compacted, &key()).unwrap();
        assert_eq!(tail, Tail::Clean);
        assert_eq!(after.generation(), 2);
        assert_eq!(after.records(), state.records());
        assert_eq!(after.get(&second.id), None);
        // A stale state notices the new generation and replays from scratch.
        let mut outdated = parsed;
        assert_eq!(outdated.refresh(&compacted), Ok(Tail::Clean));
        assert_eq!(outdated, after);
        // A frame moved to another offset fails its checksum.
        let mut moved = log.clone();
        moved.extend_from_slice(&bytes);
        assert!(matches!(LogState::parse(&moved, &key()), Err(LogError::Corrupt { .. })));
    }

    #[test]
    fn a_frame_written_without_the_key_is_refused() {
        let state = LogState::empty(1, &key());
        let record = created(b"forged", TransactionState::AutoApproved);
        let mut log = LogHeader { generation: 1, checkpoints: 0 }.encode(&key()).to_vec();
        // The same frame, sealed with the public key instead of the authority's.
        let without_key = LogState::empty(1, &LogKey::unauthenticated());
        let (_, forged_frame) = without_key.prepare_append(&[LogEntry::Version(record)]).unwrap();
        log.extend_from_slice(&forged_frame);
        assert!(
            matches!(LogState::parse(&log, &key()), Err(LogError::Corrupt { offset, .. }) if offset == HEADER_LEN as u64)
        );
        // Sealed with the right key, it replays.
        let (_, genuine) = state.prepare_append(&[LogEntry::Version(record)]).unwrap();
        log.truncate(HEADER_LEN);
        log.extend_from_slice(&genuine);
        assert_eq!(LogState::parse(&log, &key()).unwrap().0.get(&record.id), Some(&record));
    }

    /// A first-format header (public checksum) of `generation`, no checkpoints.
    fn legacy_header(generation: u64) -> Vec<u8> {
        let mut bytes = LEGACY_LOG_MAGIC.to_vec();
        bytes.extend_from_slice(&generation.to_le_bytes());
        bytes.extend_from_slice(&0_u64.to_le_bytes());
        let sum = DomainHasher::new(LEGACY_HEADER_DOMAIN).update(&bytes).finalize();
        bytes.extend_from_slice(&sum);
        bytes
    }

    #[test]
    fn a_first_format_header_alone_parses_and_anything_shorter_is_corrupt() {
        let header = legacy_header(4);
        assert_eq!(header.len(), LEGACY_HEADER_LEN);
        let (state, tail) = LogState::parse_legacy(&header).unwrap();
        assert_eq!((state.generation(), tail), (4, Tail::Clean));
        for len in [0, 8, 30, LEGACY_HEADER_LEN - 1] {
            assert!(matches!(LogState::parse_legacy(&header[..len]), Err(LogError::Corrupt { .. })), "{len} bytes");
        }
    }

    /// An empty log under `key()` followed by `tail`.
    fn log_with(tail: &[u8]) -> Vec<u8> {
        let mut log = LogHeader { generation: 1, checkpoints: 0 }.encode(&key()).to_vec();
        log.extend_from_slice(tail);
        log
    }

    fn frame_header(length: u32, check: u32) -> Vec<u8> {
        let mut bytes = length.to_le_bytes().to_vec();
        bytes.extend_from_slice(&check.to_le_bytes());
        bytes
    }

    #[test]
    fn a_frame_header_is_checked_before_the_tail_counts_as_torn() {
        // Fewer than 8 bytes, or only zeros: an append cut short.
        for tail in [&[7_u8; 7][..], &[0; 8], &[0; 100]] {
            assert_eq!(LogState::parse(&log_with(tail), &key()).unwrap().1, Tail::Torn { at: HEADER_LEN as u64 });
        }
        // A whole frame header must be consistent and in range, whatever follows.
        let corrupt =
            |tail: Vec<u8>| matches!(LogState::parse(&log_with(&tail), &key()), Err(LogError::Corrupt { .. }));
        assert!(corrupt(frame_header(10, 11)), "length check mismatch");
        assert!(corrupt(frame_header(0, !0)), "empty payload");
        assert!(corrupt(frame_header(MAX_FRAME_PAYLOAD + 1, !(MAX_FRAME_PAYLOAD + 1))), "payload too long");
        // The largest payload is in range: with its bytes missing, the frame is torn.
        let (_, tail) =
            LogState::parse(&log_with(&frame_header(MAX_FRAME_PAYLOAD, !MAX_FRAME_PAYLOAD)), &key()).unwrap();
        assert_eq!(tail, Tail::Torn { at: HEADER_LEN as u64 });
    }

    #[test]
    fn forget_frames_hold_one_to_the_limit_of_ids_and_nothing_more() {
        let ids = |count: usize| -> Vec<(TransactionId, u64)> {
            let mut ids: Vec<TransactionId> =
                (0..count).map(|index| TransactionId::digest(&index.to_le_bytes())).collect();
            ids.sort();
            ids.into_iter().map(|id| (id, 0)).collect()
        };
        for count in [1, MAX_FORGET_PER_FRAME] {
            let entry = LogEntry::Forget(ids(count));
            assert_eq!(LogEntry::decode(&entry.encode()), Ok(entry), "{count}");
        }
        assert_eq!(LogEntry::decode(&[TAG_FORGET, 0, 0, 0, 0]), Err("bad forget count"));
        let too_many = LogEntry::Forget(ids(MAX_FORGET_PER_FRAME + 1)).encode();
        assert_eq!(LogEntry::decode(&too_many), Err("bad forget count"));
        let mut trailing = LogEntry::Forget(ids(1)).encode();
        trailing.push(0);
        assert_eq!(LogEntry::decode(&trailing), Err("bad forget count"));
        // The same bounds hold for what is about to be appended: the limit is
        // allowed, one more is not.
        let mut full = LogState::empty(1, &key());
        let mut terminal: Vec<(TransactionId, u64)> = (0..MAX_FORGET_PER_FRAME)
            .map(|index| {
                let record = created(&index.to_le_bytes(), TransactionState::Failed);
                full.apply(&LogEntry::Version(record)).expect("a new terminal record");
                (record.id, 0)
            })
            .collect();
        terminal.sort();
        assert!(full.prepare_append(&[LogEntry::Forget(terminal)]).is_ok());
        let state = LogState::empty(1, &key());
        assert!(state.prepare_append(&[LogEntry::Forget(Vec::new())]).is_err());
        assert!(state.prepare_append(&[LogEntry::Forget(ids(MAX_FORGET_PER_FRAME + 1))]).is_err());
    }

    #[test]
    fn a_version_inside_the_checkpoint_prefix_is_refused() {
        let record = created(b"c", TransactionState::PendingApproval);
        let header = LogHeader { generation: 1, checkpoints: 1 };
        let mut log = header.encode(&key()).to_vec();
        let payload = LogEntry::Version(record).encode();
        log.extend_from_slice(&encode_frame(&key(), 1, HEADER_LEN as u64, &payload));
        assert!(matches!(LogState::parse(&log, &key()), Err(LogError::Corrupt { .. })));
        // As a checkpoint it is what the prefix holds.
        let mut log = header.encode(&key()).to_vec();
        let payload = LogEntry::Checkpoint(record).encode();
        log.extend_from_slice(&encode_frame(&key(), 1, HEADER_LEN as u64, &payload));
        let (state, tail) = LogState::parse(&log, &key()).unwrap();
        assert_eq!((state.records().len(), tail), (1, Tail::Clean));
    }
}
