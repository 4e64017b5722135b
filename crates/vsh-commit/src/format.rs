//! The commit's on-disk records: the [`Plan`] (`VSHPLN01`), the [`Journal`]
//! (`VSHJRN01`) and the completion [`Marker`] (`VSHDON01`).
//!
//! Each is written once as a whole file (created exclusively and `fsync`ed,
//! the journal replaced by an atomic rename), so a reader sees either no file
//! or complete bytes; a decoder still trusts nothing: every length is checked
//! against the remaining input and a bound before anything is allocated, every
//! record carries a checksum, and a value decodes only from its one canonical
//! encoding (re-encoding a decoded value gives back the same bytes).
//! `docs/store-format.md` (section *Commit protocol*) draws the byte layouts.
//!
//! These types describe files; they do no I/O and make no decisions.

use vsh_types::canon::{self, DecodeError, Reader};
use vsh_types::{DiffEntry, DomainHasher, NodeKind, TransactionId};

/// First bytes of a plan file.
pub const PLAN_MAGIC: [u8; 8] = *b"VSHPLN01";
/// First bytes of a journal file.
pub const JOURNAL_MAGIC: [u8; 8] = *b"VSHJRN01";
/// First bytes of a completion marker.
pub const MARKER_MAGIC: [u8; 8] = *b"VSHDON01";

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
/// Bytes of one journal record: kind, operation, witness, checksum.
pub const JOURNAL_RECORD_BYTES: usize = 1 + 4 + 8 + 16;

/// Operations per diff entry at most: quarantine, create or install, mode.
const MAX_OPERATIONS_PER_ENTRY: u64 = 3;
/// Smallest encoded diff entry: path length, tag, two absent flags.
const MIN_ENTRY_BYTES: usize = 8 + 1 + 1 + 1;
/// Smallest encoded operation: tag and entry index.
const MIN_OPERATION_BYTES: usize = 1 + 4;

/// BLAKE3 derive-key context of the plan's digest trailer.
pub const PLAN_DOMAIN: &str = "vsh 2026 commit plan v1";
/// BLAKE3 derive-key context of the journal header's checksum.
pub const JOURNAL_HEADER_DOMAIN: &str = "vsh 2026 commit journal header v1";
/// BLAKE3 derive-key context of each journal record's checksum.
pub const JOURNAL_RECORD_DOMAIN: &str = "vsh 2026 commit journal record v1";
/// BLAKE3 derive-key context of the marker's checksum.
pub const MARKER_DOMAIN: &str = "vsh 2026 commit marker v1";

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
    /// `quarantine/<operation index>`, so a rollback can move it back.
    Quarantine,
    /// Create a directory with `mode` (at least owner write and search; a
    /// later [`Action::SetDirMode`] restricts it).
    CreateDir {
        /// Its mode when created.
        mode: u32,
    },
    /// Move the staged file or symlink `stage/<operation index>` to the path.
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
/// 32-byte BLAKE3 digest (derive-key mode) of everything before it.
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
    /// The canonical encoding, digest trailer included.
    pub fn encode(&self) -> Vec<u8> {
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
        let digest = plan_digest(&out);
        out.extend_from_slice(&digest.0);
        out
    }

    /// Decode and check a plan file; returns the plan and its digest.
    ///
    /// Checked: size bound, magic, digest trailer (before anything else is
    /// parsed), bounded counts, canonical entries strictly sorted by path and
    /// never the root, and every operation consistent with its entry.
    pub fn decode(bytes: &[u8]) -> Result<(Plan, PlanDigest), FormatError> {
        const FILE: &str = "plan";
        if bytes.len() as u64 > MAX_PLAN_BYTES {
            return Err(FormatError::TooLarge { file: FILE, size: bytes.len() as u64, max: MAX_PLAN_BYTES });
        }
        if bytes.len() < PLAN_MAGIC.len() + 32 + 32 || bytes[..8] != PLAN_MAGIC {
            return Err(FormatError::BadMagic { file: FILE });
        }
        let (body, trailer) = bytes.split_at(bytes.len() - 32);
        let digest = plan_digest(body);
        if digest.0 != trailer {
            return Err(FormatError::Checksum { file: FILE, offset: body.len() });
        }
        let decode = |source| FormatError::Decode { file: FILE, source };
        let invalid = |reason| FormatError::Invalid { file: FILE, reason };
        let mut reader = Reader::new(&body[8..]);
        let transaction = TransactionId::from_bytes(reader.array().map_err(decode)?);
        let count = reader.length(MAX_PLAN_ENTRIES, MIN_ENTRY_BYTES).map_err(decode)?;
        let mut entries: Vec<DiffEntry> = Vec::with_capacity(count);
        for _ in 0..count {
            let entry = DiffEntry::decode_canonical(&mut reader, MAX_PATH_BYTES).map_err(decode)?;
            if entry.path.is_root() {
                return Err(invalid("the root is a diff entry"));
            }
            if entries.last().is_some_and(|last| last.path >= entry.path) {
                return Err(invalid("entries are not strictly sorted by path"));
            }
            entries.push(entry);
        }
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

fn plan_digest(body: &[u8]) -> PlanDigest {
    let mut hasher = DomainHasher::new(PLAN_DOMAIN);
    hasher.update(body);
    PlanDigest(hasher.finalize())
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
}

/// The write-ahead journal of one transaction: intents before operations are
/// applied, done records after.
///
/// Encoding: a header (magic, transaction id, plan digest, 16-byte checksum of
/// those) followed by fixed-size records (kind `u8`, operation `u32`, witness
/// `u64`, 16-byte checksum over the header's transaction and plan digest, the
/// record's position and its fields). A record therefore cannot be moved,
/// duplicated or carried over to another transaction unnoticed.
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
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(JOURNAL_HEADER_BYTES + self.records.len() * JOURNAL_RECORD_BYTES);
        out.extend_from_slice(&JOURNAL_MAGIC);
        out.extend_from_slice(self.transaction.as_bytes());
        out.extend_from_slice(&self.plan.0);
        let check = self.header_check();
        out.extend_from_slice(&check);
        for (position, record) in self.records.iter().enumerate() {
            canon::put_u8(&mut out, record.kind.tag());
            canon::put_u32(&mut out, record.operation);
            canon::put_u64(&mut out, record.witness);
            out.extend_from_slice(&self.record_check(position as u64, record));
        }
        out
    }

    /// Decode and check a journal file (see the type's docs for the layout).
    pub fn decode(bytes: &[u8]) -> Result<Journal, FormatError> {
        const FILE: &str = "journal";
        let size = bytes.len() as u64;
        if size > MAX_JOURNAL_BYTES {
            return Err(FormatError::TooLarge { file: FILE, size, max: MAX_JOURNAL_BYTES });
        }
        if bytes.len() < JOURNAL_HEADER_BYTES || bytes[..8] != JOURNAL_MAGIC {
            return Err(FormatError::BadMagic { file: FILE });
        }
        if !(bytes.len() - JOURNAL_HEADER_BYTES).is_multiple_of(JOURNAL_RECORD_BYTES) {
            return Err(FormatError::Length { file: FILE, size });
        }
        let decode = |source| FormatError::Decode { file: FILE, source };
        let mut reader = Reader::new(&bytes[8..]);
        let transaction = TransactionId::from_bytes(reader.array().map_err(decode)?);
        let plan = PlanDigest(reader.array().map_err(decode)?);
        let mut journal = Journal::new(transaction, plan);
        if reader.array::<16>().map_err(decode)? != journal.header_check() {
            return Err(FormatError::Checksum { file: FILE, offset: 0 });
        }
        let count = reader.remaining() / JOURNAL_RECORD_BYTES;
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
            };
            if reader.array::<16>().map_err(decode)? != journal.record_check(position as u64, &record) {
                return Err(FormatError::Checksum { file: FILE, offset });
            }
            journal.records.push(record);
        }
        reader.finish().map_err(decode)?;
        Ok(journal)
    }

    fn header_check(&self) -> [u8; 16] {
        let mut hasher = DomainHasher::new(JOURNAL_HEADER_DOMAIN);
        hasher.update(&JOURNAL_MAGIC).update(self.transaction.as_bytes()).update(&self.plan.0);
        truncate16(hasher.finalize())
    }

    fn record_check(&self, position: u64, record: &JournalRecord) -> [u8; 16] {
        let mut hasher = DomainHasher::new(JOURNAL_RECORD_DOMAIN);
        hasher
            .update(self.transaction.as_bytes())
            .update(&self.plan.0)
            .update(&position.to_le_bytes())
            .update(&[record.kind.tag()])
            .update(&record.operation.to_le_bytes())
            .update(&record.witness.to_le_bytes());
        truncate16(hasher.finalize())
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
/// checksum of those.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    /// The committed transaction.
    pub transaction: TransactionId,
    /// Its plan.
    pub plan: PlanDigest,
}

impl Marker {
    /// The canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MARKER_BYTES);
        out.extend_from_slice(&MARKER_MAGIC);
        out.extend_from_slice(self.transaction.as_bytes());
        out.extend_from_slice(&self.plan.0);
        let mut hasher = DomainHasher::new(MARKER_DOMAIN);
        hasher.update(&out);
        out.extend_from_slice(&hasher.finalize());
        out
    }

    /// Decode and check a marker.
    pub fn decode(bytes: &[u8]) -> Result<Marker, FormatError> {
        const FILE: &str = "marker";
        if bytes.len() != MARKER_BYTES {
            return Err(FormatError::Length { file: FILE, size: bytes.len() as u64 });
        }
        if bytes[..8] != MARKER_MAGIC {
            return Err(FormatError::BadMagic { file: FILE });
        }
        let (body, check) = bytes.split_at(MARKER_BYTES - 32);
        let mut hasher = DomainHasher::new(MARKER_DOMAIN);
        hasher.update(body);
        if hasher.finalize() != check {
            return Err(FormatError::Checksum { file: FILE, offset: body.len() });
        }
        let mut transaction = [0_u8; 32];
        transaction.copy_from_slice(&body[8..40]);
        let mut plan = [0_u8; 32];
        plan.copy_from_slice(&body[40..72]);
        Ok(Marker { transaction: TransactionId::from_bytes(transaction), plan: PlanDigest(plan) })
    }
}

#[cfg(test)]
mod tests {
    use vsh_types::{NodeState, VPath};

    use super::*;

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
        let bytes = plan.encode();
        let (decoded, digest) = Plan::decode(&bytes).unwrap();
        assert_eq!(decoded, plan);
        assert_eq!(digest.0, bytes[bytes.len() - 32..]);
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(Plan::decode(&flipped).is_err(), "bit {bit}");
        }
        for length in 0..bytes.len() {
            assert!(Plan::decode(&bytes[..length]).is_err(), "length {length}");
        }
    }

    #[test]
    fn plan_operations_must_fit_their_entries() {
        let mut plan = sample_plan();
        plan.operations.push(Operation { entry: 1, action: Action::Install });
        assert_eq!(
            Plan::decode(&plan.encode()),
            Err(FormatError::Invalid { file: "plan", reason: "operation does not fit its entry" })
        );
        let mut plan = sample_plan();
        plan.operations.push(Operation { entry: 9, action: Action::Quarantine });
        assert!(matches!(Plan::decode(&plan.encode()), Err(FormatError::Invalid { .. })));
    }

    #[test]
    fn journal_round_trips_and_records_are_bound_to_their_position() {
        let mut journal = Journal::new(TransactionId::digest(b"t"), PlanDigest([7; 32]));
        journal.records = vec![
            JournalRecord { kind: RecordKind::Intent, operation: 0, witness: 11 },
            JournalRecord { kind: RecordKind::Intent, operation: 1, witness: 0 },
            JournalRecord { kind: RecordKind::Done, operation: 0, witness: 12 },
        ];
        let bytes = journal.encode();
        assert_eq!(bytes.len(), JOURNAL_HEADER_BYTES + 3 * JOURNAL_RECORD_BYTES);
        assert_eq!(Journal::decode(&bytes).unwrap(), journal);
        // Swapping two records breaks both checksums.
        let mut swapped = bytes.clone();
        let first = JOURNAL_HEADER_BYTES;
        let second = first + JOURNAL_RECORD_BYTES;
        let record: Vec<u8> = swapped[first..second].to_vec();
        swapped.copy_within(second..second + JOURNAL_RECORD_BYTES, first);
        swapped[second..second + JOURNAL_RECORD_BYTES].copy_from_slice(&record);
        assert!(matches!(Journal::decode(&swapped), Err(FormatError::Checksum { .. })));
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(Journal::decode(&flipped).is_err(), "bit {bit}");
        }
        assert!(matches!(Journal::decode(&bytes[..bytes.len() - 1]), Err(FormatError::Length { .. })));
    }

    #[test]
    fn marker_round_trips_and_rejects_damage() {
        let marker = Marker { transaction: TransactionId::digest(b"t"), plan: PlanDigest([3; 32]) };
        let bytes = marker.encode();
        assert_eq!(bytes.len(), MARKER_BYTES);
        assert_eq!(Marker::decode(&bytes), Ok(marker));
        let mut damaged = bytes.clone();
        damaged[50] ^= 0x10;
        assert!(matches!(Marker::decode(&damaged), Err(FormatError::Checksum { .. })));
        assert!(Marker::decode(&bytes[..MARKER_BYTES - 1]).is_err());
    }
}
