//! The commit's on-disk records: the [`Plan`] (`VSHPLN03`), the [`Journal`]
//! (`VSHJRN02`), the completion [`Marker`] (`VSHDON02`) and the rollback's
//! [`Settled`] record (`VSHSTL01`).
//!
//! Each is written once as a whole file (created exclusively and `fsync`ed,
//! the journal replaced by an atomic rename), so a reader sees either no file
//! or complete bytes; a decoder still trusts nothing: every length is checked
//! against the remaining input and a bound before anything is allocated, every
//! record carries a MAC keyed with the workspace's [`AuthorityKey`] (so a
//! record cannot be forged by whoever can write the workspace), and a value
//! decodes only from its one canonical encoding (re-encoding a decoded value
//! gives back the same bytes). The journal ends with a trailer that counts its
//! records, so a journal cut back to fewer records (or to its header) is
//! refused, never read as "nothing was applied".
//! `docs/store-format.md` (section *Commit protocol*) draws the byte layouts.
//!
//! These types describe files; they do no I/O and make no decisions.

use vsh_types::canon::{self, DecodeError, Reader};
use vsh_types::{AuthorityKey, CanonicalDiff, DiffEntry, DiffOrderError, NodeKind, TransactionId};

/// First bytes of a plan file. `VSHPLN03` marks a transaction directory of
/// the flat layout (`stage.<i>`, `quarantine.<i>`): a version that knows
/// only `stage/` and `quarantine/` reads it as an invalid plan (a conflict
/// wherever anything may have been applied) instead of misreading it.
pub const PLAN_MAGIC: [u8; 8] = *b"VSHPLN03";
/// First bytes of a plan written by the earlier layout, still read: its
/// directory is moved into the flat layout before it is interpreted.
pub const PLAN_MAGIC_EARLIER_LAYOUT: [u8; 8] = *b"VSHPLN02";
/// First bytes of a journal file.
pub const JOURNAL_MAGIC: [u8; 8] = *b"VSHJRN02";
/// First bytes of a completion marker.
pub const MARKER_MAGIC: [u8; 8] = *b"VSHDON02";
/// First bytes of a settled record.
pub const SETTLED_MAGIC: [u8; 8] = *b"VSHSTL01";

/// The most diff entries a plan holds.
pub const MAX_PLAN_ENTRIES: u64 = 1 << 20;
/// The longest path a plan holds, in bytes.
pub const MAX_PATH_BYTES: u64 = 4096;
/// The largest plan file read back.
pub const MAX_PLAN_BYTES: u64 = 256 << 20;
/// The largest journal file read back.
pub const MAX_JOURNAL_BYTES: u64 = 64 << 20;
/// The size of a completion marker.
pub const MARKER_BYTES: usize = 8 + 32 + 32 + 32;

/// Bytes of a journal header: magic, transaction, plan digest, checksum.
pub const JOURNAL_HEADER_BYTES: usize = 8 + 32 + 32 + 16;
/// Bytes of one journal record: kind, operation, witness, stamp, checksum.
pub const JOURNAL_RECORD_BYTES: usize = 1 + 4 + 8 + 8 + 16;
/// Bytes of the journal's trailer: record count, checksum.
pub const JOURNAL_TRAILER_BYTES: usize = 8 + 16;
/// The most operations a settled record lists.
pub const MAX_SETTLED_LEFT: u64 = MAX_PLAN_ENTRIES * MAX_OPERATIONS_PER_ENTRY;
/// The largest settled record read back.
pub const MAX_SETTLED_BYTES: u64 = 8 + 32 + 32 + 8 + MAX_SETTLED_LEFT * 5 + 32;

/// Operations per diff entry at most: quarantine, create or install, mode.
const MAX_OPERATIONS_PER_ENTRY: u64 = 3;
/// Smallest encoded diff entry: path length, tag, two absent flags.
const MIN_ENTRY_BYTES: usize = 8 + 1 + 1 + 1;
/// Smallest encoded operation: tag and entry index.
const MIN_OPERATION_BYTES: usize = 1 + 4;

/// MAC domain of the plan's digest trailer.
pub const PLAN_DOMAIN: &str = "vsh 2026 commit plan v2";
/// MAC domain of the journal header's checksum.
pub const JOURNAL_HEADER_DOMAIN: &str = "vsh 2026 commit journal header v2";
/// MAC domain of each journal record's checksum.
pub const JOURNAL_RECORD_DOMAIN: &str = "vsh 2026 commit journal record v2";
/// MAC domain of the journal trailer's checksum.
pub const JOURNAL_TRAILER_DOMAIN: &str = "vsh 2026 commit journal trailer v2";
/// MAC domain of the marker's checksum.
pub const MARKER_DOMAIN: &str = "vsh 2026 commit marker v2";
/// MAC domain of the settled record's checksum.
pub const SETTLED_DOMAIN: &str = "vsh 2026 commit settled v1";

/// Why bytes are not a valid plan, journal or marker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The file does not start with the expected magic.
    #[error("not a {file}: bad magic")]
    BadMagic {
        /// Which record: `"plan"`, `"journal"` or `"marker"`.
        file: &'static str,
    },
    /// The file is larger than its bound.
    #[error("{file} of {size} bytes exceeds the bound of {max}")]
    TooLarge {
        /// Which record.
        file: &'static str,
        /// Its size.
        size: u64,
        /// The bound.
        max: u64,
    },
    /// A checksum does not match the bytes it covers.
    #[error("{file} checksum mismatch at offset {offset}")]
    Checksum {
        /// Which record.
        file: &'static str,
        /// Offset of the checksummed unit.
        offset: usize,
    },
    /// The length is not a whole number of records.
    #[error("{file} length {size} is not a whole number of records")]
    Length {
        /// Which record.
        file: &'static str,
        /// Its size.
        size: u64,
    },
    /// A field could not be decoded.
    #[error("malformed {file}")]
    Decode {
        /// Which record.
        file: &'static str,
        /// What the canonical reader reported.
        #[source]
        source: DecodeError,
    },
    /// The fields decode but do not describe a valid value.
    #[error("invalid {file}: {reason}")]
    Invalid {
        /// Which record.
        file: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
}

/// The digest of an encoded plan (its trailer): journal and marker name the
/// exact plan they belong to by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PlanDigest(pub [u8; 32]);

/// What one plan operation does to the diff entry it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Set the mode of an existing or newly created directory from `before`
    /// to `after`.
    SetDirMode {
        /// The mode the directory has before the operation.
        before: u32,
        /// The mode it has after.
        after: u32,
    },
    /// Move the existing node (a directory with its whole subtree) into
    /// `quarantine.<operation index>`, so a rollback can move it back.
    Quarantine,
    /// Create a directory with `mode` (at least owner write and search; a
    /// later [`Action::SetDirMode`] restricts it).
    CreateDir {
        /// Its mode when created.
        mode: u32,
    },
    /// Move the staged file or symlink `stage.<operation index>` to the path.
    Install,
    /// Set the mode of an existing file from `before` to `after`.
    SetFileMode {
        /// The mode before.
        before: u32,
        /// The mode after.
        after: u32,
    },
}

impl Action {
    fn tag(self) -> u8 {
        match self {
            Self::SetDirMode { .. } => 1,
            Self::Quarantine => 2,
            Self::CreateDir { .. } => 3,
            Self::Install => 4,
            Self::SetFileMode { .. } => 5,
        }
    }

    /// A short lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::SetDirMode { .. } => "set-dir-mode",
            Self::Quarantine => "quarantine",
            Self::CreateDir { .. } => "create-dir",
            Self::Install => "install",
            Self::SetFileMode { .. } => "set-file-mode",
        }
    }
}

/// One host operation: an [`Action`] on the path of diff entry `entry`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Operation {
    /// Index into [`Plan::entries`].
    pub entry: u32,
    /// What to do there.
    pub action: Action,
}

/// Everything a commit will do, written before the workspace is touched, so
/// recovery knows exactly what each operation does and which states the diff
/// paths have before and after.
///
/// Encoding: magic, transaction id (32 bytes), the diff (a counted sequence
/// of canonical [`DiffEntry`] values, strictly sorted by path), the
/// operations (a counted sequence of `tag u8, entry u32, fields`), then a
/// 32-byte MAC ([`PLAN_DOMAIN`]) of everything before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The transaction.
    pub transaction: TransactionId,
    /// The canonical diff, sorted by path.
    pub entries: Vec<DiffEntry>,
    /// The operations in application order.
    pub operations: Vec<Operation>,
}

impl Plan {
    /// The canonical encoding, MAC trailer included.
    pub fn encode(&self, key: &AuthorityKey) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.entries.len() * 96 + self.operations.len() * 13);
        out.extend_from_slice(&PLAN_MAGIC);
        out.extend_from_slice(self.transaction.as_bytes());
        canon::put_seq(&mut out, self.entries.iter());
        canon::put_u64(&mut out, self.operations.len() as u64);
        for operation in &self.operations {
            canon::put_u8(&mut out, operation.action.tag());
            canon::put_u32(&mut out, operation.entry);
            match operation.action {
                Action::SetDirMode { before, after } | Action::SetFileMode { before, after } => {
                    canon::put_u32(&mut out, before);
                    canon::put_u32(&mut out, after);
                }
                Action::CreateDir { mode } => canon::put_u32(&mut out, mode),
                Action::Quarantine | Action::Install => {}
            }
        }
        let digest = plan_digest(key, &out);
        out.extend_from_slice(&digest.0);
        out
    }

    /// Decode and check a plan file; returns the plan and its digest.
    ///
    /// Checked: size bound, magic, digest trailer (before anything else is
    /// parsed), bounded counts, canonical entries strictly sorted by path and
    /// never the root, and every operation consistent with its entry.
    pub fn decode(bytes: &[u8], key: &AuthorityKey) -> Result<(Plan, PlanDigest), FormatError> {
        const FILE: &str = "plan";
        if bytes.len() as u64 > MAX_PLAN_BYTES {
            return Err(FormatError::TooLarge { file: FILE, size: bytes.len() as u64, max: MAX_PLAN_BYTES });
        }
        if bytes.len() < PLAN_MAGIC.len() + 32 + 32
            || (bytes[..8] != PLAN_MAGIC && bytes[..8] != PLAN_MAGIC_EARLIER_LAYOUT)
        {
            return Err(FormatError::BadMagic { file: FILE });
        }
        let (body, trailer) = bytes.split_at(bytes.len() - 32);
        let digest = plan_digest(key, body);
        if !key.mac(PLAN_DOMAIN).update(body).verify(trailer) {
            return Err(FormatError::Checksum { file: FILE, offset: body.len() });
        }
        let decode = |source| FormatError::Decode { file: FILE, source };
        let invalid = |reason| FormatError::Invalid { file: FILE, reason };
        let mut reader = Reader::new(&body[8..]);
        let transaction = TransactionId::from_bytes(reader.array().map_err(decode)?);
        let count = reader.length(MAX_PLAN_ENTRIES, MIN_ENTRY_BYTES).map_err(decode)?;
        let mut entries: Vec<DiffEntry> = Vec::with_capacity(count);
        for _ in 0..count {
            entries.push(DiffEntry::decode_canonical(&mut reader, MAX_PATH_BYTES).map_err(decode)?);
        }
        CanonicalDiff::check_order(&entries).map_err(|error| match error {
            DiffOrderError::Root => invalid("the root is a diff entry"),
            _ => invalid("entries are not strictly sorted by path"),
        })?;
        let bound = (entries.len() as u64).saturating_mul(MAX_OPERATIONS_PER_ENTRY);
        let count = reader.length(bound, MIN_OPERATION_BYTES).map_err(decode)?;
        let mut operations = Vec::with_capacity(count);
        for _ in 0..count {
            let tag_offset = reader.offset();
            let tag = reader.u8().map_err(decode)?;
            let entry = reader.u32().map_err(decode)?;
            let action = match tag {
                1 => Action::SetDirMode { before: mode(&mut reader)?, after: mode(&mut reader)? },
                2 => Action::Quarantine,
                3 => Action::CreateDir { mode: mode(&mut reader)? },
                4 => Action::Install,
                5 => Action::SetFileMode { before: mode(&mut reader)?, after: mode(&mut reader)? },
                _ => return Err(decode(DecodeError::Invalid { what: "operation tag", offset: tag_offset + 8 })),
            };
            let target = entries.get(entry as usize).ok_or_else(|| invalid("operation names no entry"))?;
            if !consistent(target, action) {
                return Err(invalid("operation does not fit its entry"));
            }
            operations.push(Operation { entry, action });
        }
        reader.finish().map_err(decode)?;
        Ok((Plan { transaction, entries, operations }, digest))
    }
}

fn mode(reader: &mut Reader<'_>) -> Result<u32, FormatError> {
    let offset = reader.offset() + 8;
    let mode = reader.u32().map_err(|source| FormatError::Decode { file: "plan", source })?;
    if mode & !vsh_types::MODE_MASK != 0 {
        return Err(FormatError::Decode { file: "plan", source: DecodeError::Invalid { what: "mode", offset } });
    }
    Ok(mode)
}

/// Whether `action` can apply to `entry` (what recovery relies on).
fn consistent(entry: &DiffEntry, action: Action) -> bool {
    let before = entry.before.map(|state| state.kind);
    let after = entry.after.map(|state| state.kind);
    match action {
        Action::SetDirMode { after: mode, .. } => {
            after == Some(NodeKind::Directory) && entry.after.is_some_and(|state| state.mode == mode)
        }
        Action::Quarantine => before.is_some(),
        Action::CreateDir { .. } => after == Some(NodeKind::Directory) && before != Some(NodeKind::Directory),
        Action::Install => matches!(after, Some(NodeKind::File | NodeKind::Symlink)),
        Action::SetFileMode { before: old, after: new } => {
            before == Some(NodeKind::File)
                && after == Some(NodeKind::File)
                && entry.before.is_some_and(|state| state.mode == old)
                && entry.after.is_some_and(|state| state.mode == new)
        }
    }
}

fn plan_digest(key: &AuthorityKey, body: &[u8]) -> PlanDigest {
    PlanDigest(key.mac(PLAN_DOMAIN).update(body).finalize())
}

/// What a journal record says about one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordKind {
    /// The operation may be applied from now on (written and synced before it is).
    Intent,
    /// The operation was applied.
    Done,
}

impl RecordKind {
    fn tag(self) -> u8 {
        match self {
            Self::Intent => 1,
            Self::Done => 2,
        }
    }
}

/// One journal record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JournalRecord {
    /// Intent or done.
    pub kind: RecordKind,
    /// The operation's index in the plan.
    pub operation: u32,
    /// The inode number of the node the operation acts on (for an intent: the
    /// node to move or change; for a done record of a created directory: the
    /// new directory), or 0 when none is known.
    pub witness: u64,
    /// For the intent of a quarantine: [`stamp`] of the node as revalidation
    /// saw it (its modification time and size), so that cleanup can tell an
    /// old node someone wrote to after revalidation (their bytes) from one
    /// that is exactly what the transaction replaced. For the intent of an
    /// install: the staged file's inode generation with bit 32 set, so that
    /// recovery can tell the installed node from a new one that reused its
    /// inode number (0 when the filesystem keeps no generation, and for a
    /// symlink). 0 otherwise.
    pub stamp: u64,
}

/// A node's modification time and size, folded into 64 bits (never 0).
pub fn stamp(mtime_ns: i128, size: u64) -> u64 {
    let digest = vsh_types::DomainHasher::new("vsh 2026 commit node stamp v1")
        .update(&mtime_ns.to_le_bytes())
        .update(&size.to_le_bytes())
        .finalize();
    let mut out = [0_u8; 8];
    out.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(out).max(1)
}

/// The write-ahead journal of one transaction: intents before operations are
/// applied, done records after.
///
/// Encoding: a header (magic, transaction id, plan digest, 16-byte MAC of
/// those), fixed-size records (kind `u8`, operation `u32`, witness `u64`, stamp `u64`,
/// 16-byte MAC over the header's transaction and plan digest, the record's
/// position and its fields), then a trailer (the record count `u64` and a
/// 16-byte MAC over the transaction, the plan digest and the count). A record
/// therefore cannot be moved, duplicated or carried over to another
/// transaction unnoticed, and a journal cut back to fewer records (its header
/// alone included) fails its trailer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Journal {
    /// The transaction.
    pub transaction: TransactionId,
    /// The plan the records refer to.
    pub plan: PlanDigest,
    /// The records, in the order written.
    pub records: Vec<JournalRecord>,
}

impl Journal {
    /// An empty journal.
    pub fn new(transaction: TransactionId, plan: PlanDigest) -> Journal {
        Journal { transaction, plan, records: Vec::new() }
    }

    /// The canonical encoding.
    pub fn encode(&self, key: &AuthorityKey) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            JOURNAL_HEADER_BYTES + self.records.len() * JOURNAL_RECORD_BYTES + JOURNAL_TRAILER_BYTES,
        );
        out.extend_from_slice(&JOURNAL_MAGIC);
        out.extend_from_slice(self.transaction.as_bytes());
        out.extend_from_slice(&self.plan.0);
        out.extend_from_slice(&self.header_check(key));
        for (position, record) in self.records.iter().enumerate() {
            canon::put_u8(&mut out, record.kind.tag());
            canon::put_u32(&mut out, record.operation);
            canon::put_u64(&mut out, record.witness);
            canon::put_u64(&mut out, record.stamp);
            out.extend_from_slice(&self.record_check(key, position as u64, record));
        }
        let count = self.records.len() as u64;
        canon::put_u64(&mut out, count);
        out.extend_from_slice(&self.trailer_check(key, count));
        out
    }

    /// Decode and check a journal file (see the type's docs for the layout).
    pub fn decode(bytes: &[u8], key: &AuthorityKey) -> Result<Journal, FormatError> {
        const FILE: &str = "journal";
        let size = bytes.len() as u64;
        if size > MAX_JOURNAL_BYTES {
            return Err(FormatError::TooLarge { file: FILE, size, max: MAX_JOURNAL_BYTES });
        }
        if bytes.len() < JOURNAL_HEADER_BYTES || bytes[..8] != JOURNAL_MAGIC {
            return Err(FormatError::BadMagic { file: FILE });
        }
        let framed = bytes.len() - JOURNAL_HEADER_BYTES;
        if framed < JOURNAL_TRAILER_BYTES || !(framed - JOURNAL_TRAILER_BYTES).is_multiple_of(JOURNAL_RECORD_BYTES) {
            return Err(FormatError::Length { file: FILE, size });
        }
        let decode = |source| FormatError::Decode { file: FILE, source };
        let mut reader = Reader::new(&bytes[8..]);
        let transaction = TransactionId::from_bytes(reader.array().map_err(decode)?);
        let plan = PlanDigest(reader.array().map_err(decode)?);
        let mut journal = Journal::new(transaction, plan);
        if !journal.header_mac(key).verify_prefix(&reader.array::<16>().map_err(decode)?) {
            return Err(FormatError::Checksum { file: FILE, offset: 0 });
        }
        let count = (framed - JOURNAL_TRAILER_BYTES) / JOURNAL_RECORD_BYTES;
        journal.records.reserve_exact(count);
        for position in 0..count {
            let offset = JOURNAL_HEADER_BYTES + position * JOURNAL_RECORD_BYTES;
            let kind = match reader.u8().map_err(decode)? {
                1 => RecordKind::Intent,
                2 => RecordKind::Done,
                _ => return Err(decode(DecodeError::Invalid { what: "record kind", offset })),
            };
            let record = JournalRecord {
                kind,
                operation: reader.u32().map_err(decode)?,
                witness: reader.u64().map_err(decode)?,
                stamp: reader.u64().map_err(decode)?,
            };
            if !journal.record_mac(key, position as u64, &record).verify_prefix(&reader.array::<16>().map_err(decode)?)
            {
                return Err(FormatError::Checksum { file: FILE, offset });
            }
            journal.records.push(record);
        }
        let trailer = JOURNAL_HEADER_BYTES + count * JOURNAL_RECORD_BYTES;
        let written = reader.u64().map_err(decode)?;
        if written != count as u64
            || !journal.trailer_mac(key, written).verify_prefix(&reader.array::<16>().map_err(decode)?)
        {
            return Err(FormatError::Checksum { file: FILE, offset: trailer });
        }
        reader.finish().map_err(decode)?;
        Ok(journal)
    }

    fn header_mac(&self, key: &AuthorityKey) -> vsh_types::Mac {
        let mut mac = key.mac(JOURNAL_HEADER_DOMAIN);
        mac.update(&JOURNAL_MAGIC).update(self.transaction.as_bytes()).update(&self.plan.0);
        mac
    }

    fn header_check(&self, key: &AuthorityKey) -> [u8; 16] {
        truncate16(self.header_mac(key).finalize())
    }

    fn record_mac(&self, key: &AuthorityKey, position: u64, record: &JournalRecord) -> vsh_types::Mac {
        let mut mac = key.mac(JOURNAL_RECORD_DOMAIN);
        mac.update(self.transaction.as_bytes())
            .update(&self.plan.0)
            .update(&position.to_le_bytes())
            .update(&[record.kind.tag()])
            .update(&record.operation.to_le_bytes())
            .update(&record.witness.to_le_bytes())
            .update(&record.stamp.to_le_bytes());
        mac
    }

    fn record_check(&self, key: &AuthorityKey, position: u64, record: &JournalRecord) -> [u8; 16] {
        truncate16(self.record_mac(key, position, record).finalize())
    }

    fn trailer_mac(&self, key: &AuthorityKey, count: u64) -> vsh_types::Mac {
        let mut mac = key.mac(JOURNAL_TRAILER_DOMAIN);
        mac.update(self.transaction.as_bytes()).update(&self.plan.0).update(&count.to_le_bytes());
        mac
    }

    fn trailer_check(&self, key: &AuthorityKey, count: u64) -> [u8; 16] {
        truncate16(self.trailer_mac(key, count).finalize())
    }
}

fn truncate16(digest: [u8; 32]) -> [u8; 16] {
    let mut out = [0_u8; 16];
    out.copy_from_slice(&digest[..16]);
    out
}

/// The completion marker: written and synced only after every operation was
/// applied, synced and verified. Its presence decides recovery: roll forward.
///
/// Encoding (104 bytes): magic, transaction id, plan digest, then a 32-byte
/// MAC of those.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    /// The committed transaction.
    pub transaction: TransactionId,
    /// Its plan.
    pub plan: PlanDigest,
}

impl Marker {
    /// The canonical encoding.
    pub fn encode(&self, key: &AuthorityKey) -> Vec<u8> {
        let mut out = Vec::with_capacity(MARKER_BYTES);
        out.extend_from_slice(&MARKER_MAGIC);
        out.extend_from_slice(self.transaction.as_bytes());
        out.extend_from_slice(&self.plan.0);
        let tag = key.mac(MARKER_DOMAIN).update(&out).finalize();
        out.extend_from_slice(&tag);
        out
    }

    /// Decode and check a marker.
    pub fn decode(bytes: &[u8], key: &AuthorityKey) -> Result<Marker, FormatError> {
        const FILE: &str = "marker";
        if bytes.len() != MARKER_BYTES {
            return Err(FormatError::Length { file: FILE, size: bytes.len() as u64 });
        }
        if bytes[..8] != MARKER_MAGIC {
            return Err(FormatError::BadMagic { file: FILE });
        }
        let (body, check) = bytes.split_at(MARKER_BYTES - 32);
        if !key.mac(MARKER_DOMAIN).update(body).verify(check) {
            return Err(FormatError::Checksum { file: FILE, offset: body.len() });
        }
        let mut transaction = [0_u8; 32];
        transaction.copy_from_slice(&body[8..40]);
        let mut plan = [0_u8; 32];
        plan.copy_from_slice(&body[40..72]);
        Ok(Marker { transaction: TransactionId::from_bytes(transaction), plan: PlanDigest(plan) })
    }
}

/// Why a rollback left an operation as it found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeftReason {
    /// Someone else changed the operation's node since it was applied (or
    /// took its path while the old node was quarantined): undoing it would
    /// overwrite or remove their work.
    Ambiguous,
    /// The operation was undone, but its path does not hold the before state.
    StateMismatch,
    /// A directory above the operation's path is not the one the commit
    /// wrote into (moved away or replaced while the commit ran): what the
    /// path shows says nothing of the operation's node, which is wherever
    /// that directory is now, so nothing was undone through it.
    Moved,
}

impl LeftReason {
    fn tag(self) -> u8 {
        match self {
            Self::Ambiguous => 1,
            Self::StateMismatch => 2,
            Self::Moved => 3,
        }
    }

    fn from_tag(tag: u8) -> Option<Self> {
        match tag {
            1 => Some(Self::Ambiguous),
            2 => Some(Self::StateMismatch),
            3 => Some(Self::Moved),
            _ => None,
        }
    }

    /// A short lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ambiguous => "changed by someone else during the commit",
            Self::StateMismatch => "does not hold its before state after the rollback",
            Self::Moved => "its directory was moved or replaced during the commit",
        }
    }
}

/// What a rollback left for an operator: one operation and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Left {
    /// The operation's index in the plan.
    pub operation: u32,
    /// Why it was left.
    pub reason: LeftReason,
}

/// The rollback's durable conclusion, written (and synced) after the rollback
/// pass and before any cleanup: every operation it does not list was undone
/// (or never applied) and every path of an undone operation holds its before
/// state; the listed operations were left exactly as found, their old nodes
/// kept aside (`quarantine.<i>`). With it, a crash at any instant of the cleanup that
/// follows is recognized, and nothing is ever undone twice.
///
/// Encoding: magic, transaction id, plan digest, count `u64`, count times
/// (operation `u32`, reason `u8`) with operations strictly increasing, then a
/// 32-byte MAC of everything before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// The transaction.
    pub transaction: TransactionId,
    /// Its plan.
    pub plan: PlanDigest,
    /// The operations left for an operator, by index.
    pub left: Vec<Left>,
}

impl Settled {
    /// The canonical encoding.
    pub fn encode(&self, key: &AuthorityKey) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 32 + 32 + 8 + self.left.len() * 5 + 32);
        out.extend_from_slice(&SETTLED_MAGIC);
        out.extend_from_slice(self.transaction.as_bytes());
        out.extend_from_slice(&self.plan.0);
        canon::put_u64(&mut out, self.left.len() as u64);
        for left in &self.left {
            canon::put_u32(&mut out, left.operation);
            canon::put_u8(&mut out, left.reason.tag());
        }
        let tag = key.mac(SETTLED_DOMAIN).update(&out).finalize();
        out.extend_from_slice(&tag);
        out
    }

    /// Decode and check a settled record.
    pub fn decode(bytes: &[u8], key: &AuthorityKey) -> Result<Settled, FormatError> {
        const FILE: &str = "settled";
        let size = bytes.len() as u64;
        if size > MAX_SETTLED_BYTES {
            return Err(FormatError::TooLarge { file: FILE, size, max: MAX_SETTLED_BYTES });
        }
        if bytes.len() < 8 + 32 + 32 + 8 + 32 || bytes[..8] != SETTLED_MAGIC {
            return Err(FormatError::BadMagic { file: FILE });
        }
        let (body, check) = bytes.split_at(bytes.len() - 32);
        if !key.mac(SETTLED_DOMAIN).update(body).verify(check) {
            return Err(FormatError::Checksum { file: FILE, offset: body.len() });
        }
        let decode = |source| FormatError::Decode { file: FILE, source };
        let mut reader = Reader::new(&body[8..]);
        let transaction = TransactionId::from_bytes(reader.array().map_err(decode)?);
        let plan = PlanDigest(reader.array().map_err(decode)?);
        let count = reader.length(MAX_SETTLED_LEFT, 5).map_err(decode)?;
        let mut left: Vec<Left> = Vec::with_capacity(count);
        for _ in 0..count {
            let operation = reader.u32().map_err(decode)?;
            let offset = reader.offset() + 8;
            let reason = LeftReason::from_tag(reader.u8().map_err(decode)?)
                .ok_or_else(|| decode(DecodeError::Invalid { what: "left reason", offset }))?;
            if left.last().is_some_and(|last| last.operation >= operation) {
                return Err(FormatError::Invalid { file: FILE, reason: "operations are not strictly increasing" });
            }
            left.push(Left { operation, reason });
        }
        reader.finish().map_err(decode)?;
        Ok(Settled { transaction, plan, left })
    }
}

#[cfg(test)]
mod tests {
    use vsh_types::{NodeState, VPath};

    use super::*;

    fn key() -> AuthorityKey {
        AuthorityKey::from_bytes([5; 32])
    }

    #[test]
    fn the_largest_settled_record_a_rollback_can_write_is_read_back_and_one_more_is_refused() {
        // A plan of 2^20 entries lowers to at most three operations each
        // (quarantine, create or install, mode), and a rollback could leave all.
        let most = (1_u32 << 20) * 3;
        let settled = |count: u32| Settled {
            transaction: TransactionId::from_bytes([1; 32]),
            plan: PlanDigest([2; 32]),
            left: (0..count).map(|operation| Left { operation, reason: LeftReason::Ambiguous }).collect(),
        };
        let largest = settled(most).encode(&key());
        // magic, transaction, plan, count, 5 bytes per operation, MAC
        assert_eq!(largest.len(), 8 + 32 + 32 + 8 + 5 * most as usize + 32);
        assert_eq!(largest.len() as u64, MAX_SETTLED_BYTES);
        assert_eq!(Settled::decode(&largest, &key()).unwrap().left.len(), most as usize);
        let over = settled(most + 1).encode(&key());
        assert!(matches!(Settled::decode(&over, &key()), Err(FormatError::TooLarge { .. })));
        // The smallest: nothing left; one byte less is not a settled record.
        let smallest = settled(0).encode(&key());
        assert_eq!(smallest.len(), 8 + 32 + 32 + 8 + 32);
        assert!(Settled::decode(&smallest, &key()).unwrap().left.is_empty());
        assert_eq!(
            Settled::decode(&smallest[..smallest.len() - 1], &key()),
            Err(FormatError::BadMagic { file: "settled" })
        );
        // A reason that is not one is refused at its file offset.
        let mut bad = settled(2).encode(&key());
        let body = bad.len() - 32;
        let reason_at = body - 1;
        bad[reason_at] = 9;
        let tag = key().mac(SETTLED_DOMAIN).update(&bad[..body]).finalize();
        bad[body..].copy_from_slice(&tag);
        assert_eq!(
            Settled::decode(&bad, &key()),
            Err(FormatError::Decode {
                file: "settled",
                source: DecodeError::Invalid { what: "left reason", offset: reason_at }
            })
        );
    }

    fn sample_plan() -> Plan {
        let p = |path: &str| VPath::parse(path).unwrap();
        let entries = vec![
            DiffEntry::between(
                p("a"),
                Some(NodeState::file_with(b"old", 0o644)),
                Some(NodeState::file_with(b"new", 0o600)),
            )
            .unwrap(),
            DiffEntry::between(p("d"), None, Some(NodeState::directory(0o500))).unwrap(),
            DiffEntry::between(
                p("m"),
                Some(NodeState::file_with(b"m", 0o644)),
                Some(NodeState::file_with(b"m", 0o755)),
            )
            .unwrap(),
        ];
        let operations = vec![
            Operation { entry: 0, action: Action::Quarantine },
            Operation { entry: 1, action: Action::CreateDir { mode: 0o700 } },
            Operation { entry: 0, action: Action::Install },
            Operation { entry: 2, action: Action::SetFileMode { before: 0o644, after: 0o755 } },
            Operation { entry: 1, action: Action::SetDirMode { before: 0o700, after: 0o500 } },
        ];
        Plan { transaction: TransactionId::digest(b"t"), entries, operations }
    }

    #[test]
    fn plan_round_trips_and_every_flipped_bit_is_detected() {
        let plan = sample_plan();
        let bytes = plan.encode(&key());
        let (decoded, digest) = Plan::decode(&bytes, &key()).unwrap();
        assert_eq!(decoded, plan);
        assert_eq!(digest.0, bytes[bytes.len() - 32..]);
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(Plan::decode(&flipped, &key()).is_err(), "bit {bit}");
        }
        for length in 0..bytes.len() {
            assert!(Plan::decode(&bytes[..length], &key()).is_err(), "length {length}");
        }
    }

    #[test]
    fn plan_operations_must_fit_their_entries() {
        let mut plan = sample_plan();
        plan.operations.push(Operation { entry: 1, action: Action::Install });
        assert_eq!(
            Plan::decode(&plan.encode(&key()), &key()),
            Err(FormatError::Invalid { file: "plan", reason: "operation does not fit its entry" })
        );
        let mut plan = sample_plan();
        plan.operations.push(Operation { entry: 9, action: Action::Quarantine });
        assert!(matches!(Plan::decode(&plan.encode(&key()), &key()), Err(FormatError::Invalid { .. })));
    }

    #[test]
    fn every_operation_that_cannot_apply_to_its_entry_is_refused() {
        let p = |path: &str| VPath::parse(path).unwrap();
        let mut plan = sample_plan();
        // A directory whose mode changes, and a file that becomes a directory.
        plan.entries.push(
            DiffEntry::between(p("n"), Some(NodeState::directory(0o755)), Some(NodeState::directory(0o700))).unwrap(),
        );
        plan.entries.push(
            DiffEntry::between(p("o"), Some(NodeState::file_with(b"o", 0o644)), Some(NodeState::directory(0o755)))
                .unwrap(),
        );
        let misfits = [
            // the directory's mode is 0o500, not 0o700
            Operation { entry: 1, action: Action::SetDirMode { before: 0o700, after: 0o700 } },
            // n exists as a directory before: nothing to create
            Operation { entry: 3, action: Action::CreateDir { mode: 0o700 } },
            // o is a directory after: not a file's mode
            Operation { entry: 4, action: Action::SetFileMode { before: 0o644, after: 0o755 } },
            // m's modes are 0o644 and 0o755
            Operation { entry: 2, action: Action::SetFileMode { before: 0o600, after: 0o755 } },
            Operation { entry: 2, action: Action::SetFileMode { before: 0o644, after: 0o700 } },
        ];
        assert!(Plan::decode(&plan.encode(&key()), &key()).is_ok(), "the entries alone are a valid plan");
        for misfit in misfits {
            let mut bad = plan.clone();
            bad.operations.push(misfit);
            assert_eq!(
                Plan::decode(&bad.encode(&key()), &key()),
                Err(FormatError::Invalid { file: "plan", reason: "operation does not fit its entry" }),
                "{misfit:?}"
            );
        }
    }

    /// `bytes` with `patch` applied and the plan's MAC made again over the result.
    fn repatched_plan(bytes: &[u8], patch: impl FnOnce(&mut [u8])) -> Vec<u8> {
        let mut body = bytes[..bytes.len() - 32].to_vec();
        patch(&mut body);
        let trailer = key().mac(PLAN_DOMAIN).update(&body).finalize();
        body.extend_from_slice(&trailer);
        body
    }

    #[test]
    fn a_bad_operation_tag_or_mode_in_a_plan_is_refused_at_its_file_offset() {
        let bytes = sample_plan().encode(&key());
        let body = bytes.len() - 32;
        // The last operation is a directory mode change: tag, entry, before, after.
        let tag_at = body - (1 + 4 + 4 + 4);
        assert_eq!(bytes[tag_at], 1);
        let bad_tag = repatched_plan(&bytes, |body| body[tag_at] = 9);
        assert_eq!(
            Plan::decode(&bad_tag, &key()),
            Err(FormatError::Decode {
                file: "plan",
                source: DecodeError::Invalid { what: "operation tag", offset: tag_at }
            })
        );
        let mode_at = body - 4;
        let bad_mode = repatched_plan(&bytes, |body| body[mode_at + 1] = 0o20);
        assert_eq!(
            Plan::decode(&bad_mode, &key()),
            Err(FormatError::Decode { file: "plan", source: DecodeError::Invalid { what: "mode", offset: mode_at } })
        );
    }

    #[test]
    fn plans_and_journals_are_bounded_in_size_before_anything_is_parsed() {
        let mut big = vec![0_u8; usize::try_from(MAX_PLAN_BYTES).unwrap() + 1];
        assert!(matches!(Plan::decode(&big, &key()), Err(FormatError::TooLarge { file: "plan", .. })));
        big.pop();
        assert_eq!(Plan::decode(&big, &key()), Err(FormatError::BadMagic { file: "plan" }), "at the bound: read");
        big.truncate(usize::try_from(MAX_JOURNAL_BYTES).unwrap() + 1);
        assert!(matches!(Journal::decode(&big, &key()), Err(FormatError::TooLarge { file: "journal", .. })));
        big.pop();
        assert_eq!(Journal::decode(&big, &key()), Err(FormatError::BadMagic { file: "journal" }));
        // The shortest plan that can be one: magic, transaction and the MAC.
        let mut shortest = PLAN_MAGIC.to_vec();
        shortest.resize(8 + 32 + 32, 0);
        assert!(matches!(Plan::decode(&shortest, &key()), Err(FormatError::Checksum { .. })));
        assert_eq!(Plan::decode(&shortest[..71], &key()), Err(FormatError::BadMagic { file: "plan" }));
        // A journal of its header alone has no trailer; shorter is not one at all.
        let mut header = JOURNAL_MAGIC.to_vec();
        header.resize(JOURNAL_HEADER_BYTES, 0);
        assert!(matches!(Journal::decode(&header, &key()), Err(FormatError::Length { .. })));
        assert_eq!(Journal::decode(&header[..20], &key()), Err(FormatError::BadMagic { file: "journal" }));
    }

    #[test]
    fn an_empty_journal_round_trips_and_a_broken_record_is_named_by_its_offset() {
        let mut journal = Journal::new(TransactionId::digest(b"t"), PlanDigest([7; 32]));
        let empty = journal.encode(&key());
        assert_eq!(empty.len(), JOURNAL_HEADER_BYTES + JOURNAL_TRAILER_BYTES);
        assert_eq!(Journal::decode(&empty, &key()).unwrap(), journal);
        journal.records = vec![
            JournalRecord { kind: RecordKind::Intent, operation: 0, witness: 11, stamp: 0 },
            JournalRecord { kind: RecordKind::Intent, operation: 1, witness: 12, stamp: 3 },
        ];
        let bytes = journal.encode(&key());
        for position in 0..2 {
            let offset = JOURNAL_HEADER_BYTES + position * JOURNAL_RECORD_BYTES;
            let mut broken = bytes.clone();
            broken[offset + JOURNAL_RECORD_BYTES - 1] ^= 1;
            assert_eq!(Journal::decode(&broken, &key()), Err(FormatError::Checksum { file: "journal", offset }));
        }
        let trailer = JOURNAL_HEADER_BYTES + 2 * JOURNAL_RECORD_BYTES;
        let mut broken = bytes.clone();
        broken[bytes.len() - 1] ^= 1;
        assert_eq!(Journal::decode(&broken, &key()), Err(FormatError::Checksum { file: "journal", offset: trailer }));
    }

    #[test]
    fn journal_round_trips_and_records_are_bound_to_their_position() {
        let mut journal = Journal::new(TransactionId::digest(b"t"), PlanDigest([7; 32]));
        journal.records = vec![
            JournalRecord { kind: RecordKind::Intent, operation: 0, witness: 11, stamp: 0 },
            JournalRecord { kind: RecordKind::Intent, operation: 1, witness: 0, stamp: 0 },
            JournalRecord { kind: RecordKind::Done, operation: 0, witness: 12, stamp: 0 },
        ];
        let bytes = journal.encode(&key());
        assert_eq!(bytes.len(), JOURNAL_HEADER_BYTES + 3 * JOURNAL_RECORD_BYTES + JOURNAL_TRAILER_BYTES);
        assert_eq!(Journal::decode(&bytes, &key()).unwrap(), journal);
        // Swapping two records breaks both checksums.
        let mut swapped = bytes.clone();
        let first = JOURNAL_HEADER_BYTES;
        let second = first + JOURNAL_RECORD_BYTES;
        let record: Vec<u8> = swapped[first..second].to_vec();
        swapped.copy_within(second..second + JOURNAL_RECORD_BYTES, first);
        swapped[second..second + JOURNAL_RECORD_BYTES].copy_from_slice(&record);
        assert!(matches!(Journal::decode(&swapped, &key()), Err(FormatError::Checksum { .. })));
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(Journal::decode(&flipped, &key()).is_err(), "bit {bit}");
        }
        assert!(matches!(Journal::decode(&bytes[..bytes.len() - 1], &key()), Err(FormatError::Length { .. })));
        // Cut back to fewer records (the header alone included), with the
        // trailer kept or dropped: always refused.
        let trailer = &bytes[bytes.len() - JOURNAL_TRAILER_BYTES..];
        for records in 0..journal.records.len() {
            let cut = &bytes[..JOURNAL_HEADER_BYTES + records * JOURNAL_RECORD_BYTES];
            assert!(Journal::decode(cut, &key()).is_err(), "{records} records, no trailer");
            let mut with_trailer = cut.to_vec();
            with_trailer.extend_from_slice(trailer);
            assert!(Journal::decode(&with_trailer, &key()).is_err(), "{records} records, old trailer");
        }
        // Another key (or the public one) cannot make or read it.
        assert!(Journal::decode(&bytes, &AuthorityKey::unauthenticated()).is_err());
        let forged = journal.encode(&AuthorityKey::unauthenticated());
        assert!(Journal::decode(&forged, &key()).is_err());
    }

    #[test]
    fn marker_round_trips_and_rejects_damage() {
        let marker = Marker { transaction: TransactionId::digest(b"t"), plan: PlanDigest([3; 32]) };
        let bytes = marker.encode(&key());
        assert_eq!(bytes.len(), MARKER_BYTES);
        assert_eq!(Marker::decode(&bytes, &key()), Ok(marker));
        let mut damaged = bytes.clone();
        damaged[50] ^= 0x10;
        assert!(matches!(Marker::decode(&damaged, &key()), Err(FormatError::Checksum { .. })));
        assert!(Marker::decode(&bytes[..MARKER_BYTES - 1], &key()).is_err());
    }

    #[test]
    fn settled_round_trips_and_rejects_damage_and_other_keys() {
        let settled = Settled {
            transaction: TransactionId::digest(b"t"),
            plan: PlanDigest([9; 32]),
            left: vec![
                Left { operation: 2, reason: LeftReason::Ambiguous },
                Left { operation: 7, reason: LeftReason::StateMismatch },
            ],
        };
        let bytes = settled.encode(&key());
        assert_eq!(Settled::decode(&bytes, &key()), Ok(settled.clone()));
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(Settled::decode(&flipped, &key()).is_err(), "bit {bit}");
        }
        for length in 0..bytes.len() {
            assert!(Settled::decode(&bytes[..length], &key()).is_err(), "length {length}");
        }
        assert!(Settled::decode(&bytes, &AuthorityKey::unauthenticated()).is_err());
        let empty = Settled { left: Vec::new(), ..settled.clone() };
        assert_eq!(Settled::decode(&empty.encode(&key()), &key()), Ok(empty));
        let unsorted = Settled { left: vec![settled.left[1], settled.left[0]], ..settled };
        assert!(matches!(
            Settled::decode(&unsorted.encode(&key()), &key()),
            Err(FormatError::Invalid { file: "settled", .. })
        ));
    }

    #[test]
    fn a_record_made_with_another_key_is_refused() {
        let plan = sample_plan();
        assert!(Plan::decode(&plan.encode(&AuthorityKey::unauthenticated()), &key()).is_err());
        let marker = Marker { transaction: plan.transaction, plan: PlanDigest([1; 32]) };
        assert!(Marker::decode(&marker.encode(&AuthorityKey::unauthenticated()), &key()).is_err());
    }
}
