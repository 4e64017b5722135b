//! [`TransactionRecord`] and its canonical, checksummed encoding.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "VSHTXR01"
//!      8    32  transaction id
//!     40    32  base snapshot id
//!     72     1  state tag (TransactionState::tag, 1..=16)
//!     73     1  artifact flag: 0 = none, 1 = present
//!     74   0|32 artifact blob id (only when the flag is 1)
//!    +0      8  created_ms, u64 little endian
//!    +8      8  updated_ms, u64 little endian
//!   +16     32  BLAKE3 hash of every byte before it
//! ```
//!
//! A record is therefore 154 or 186 bytes. Decoding checks the length bound,
//! the checksum (before interpreting any field), the magic, the state tag, the
//! artifact flag, that the id matches the one the record is stored under and
//! that no bytes trail; any failure is [`StoreError::CorruptRecord`].

use vsh_types::canon::{self, Reader};
use vsh_types::{BlobId, SnapshotId, TransactionId, TransactionState};

use crate::error::StoreError;

/// The first eight bytes of every record.
pub const RECORD_MAGIC: [u8; 8] = *b"VSHTXR01";

/// Length of the trailing checksum.
const CHECKSUM_LEN: usize = 32;

/// The largest encoded record (with an artifact).
pub const MAX_RECORD_BYTES: usize = 8 + 32 + 32 + 1 + 1 + 32 + 8 + 8 + CHECKSUM_LEN;

/// The durable record of one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransactionRecord {
    /// The transaction.
    pub id: TransactionId,
    /// The observed base the transaction ran against.
    pub base_snapshot: SnapshotId,
    /// Where the transaction is in its lifecycle.
    pub state: TransactionState,
    /// The pending-approval artifact blob, once stored.
    pub artifact: Option<BlobId>,
    /// When the record was created (milliseconds since the Unix epoch, caller's clock).
    pub created_ms: u64,
    /// When the record last changed (milliseconds since the Unix epoch, caller's clock).
    pub updated_ms: u64,
}

impl TransactionRecord {
    /// A fresh record in `state`, with no artifact, created and updated at `now_ms`.
    pub fn new(id: TransactionId, base_snapshot: SnapshotId, state: TransactionState, now_ms: u64) -> Self {
        Self { id, base_snapshot, state, artifact: None, created_ms: now_ms, updated_ms: now_ms }
    }

    /// The canonical encoding (see the module docs).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MAX_RECORD_BYTES);
        out.extend_from_slice(&RECORD_MAGIC);
        out.extend_from_slice(self.id.as_bytes());
        out.extend_from_slice(self.base_snapshot.as_bytes());
        canon::put_u8(&mut out, self.state.tag());
        match &self.artifact {
            None => canon::put_u8(&mut out, 0),
            Some(artifact) => {
                canon::put_u8(&mut out, 1);
                out.extend_from_slice(artifact.as_bytes());
            }
        }
        canon::put_u64(&mut out, self.created_ms);
        canon::put_u64(&mut out, self.updated_ms);
        let checksum = blake3::hash(&out);
        out.extend_from_slice(checksum.as_bytes());
        out
    }

    /// Decode a record stored under transaction `id`. Any defect is
    /// [`StoreError::CorruptRecord`] naming `id`.
    pub fn decode(id: TransactionId, bytes: &[u8]) -> Result<Self, StoreError> {
        let corrupt = |reason: &'static str| StoreError::CorruptRecord { id, reason };
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(corrupt("record is too long"));
        }
        let Some(body_len) = bytes.len().checked_sub(CHECKSUM_LEN) else {
            return Err(corrupt("record is too short"));
        };
        let (body, checksum) = bytes.split_at(body_len);
        if blake3::hash(body).as_bytes() != checksum {
            return Err(corrupt("checksum mismatch"));
        }
        let truncated = |_| corrupt("record is truncated");
        let mut reader = Reader::new(body);
        if reader.array::<8>().map_err(truncated)? != RECORD_MAGIC {
            return Err(corrupt("bad magic"));
        }
        let stored_id = TransactionId::from_bytes(reader.array().map_err(truncated)?);
        if stored_id != id {
            return Err(corrupt("record belongs to another transaction"));
        }
        let base_snapshot = SnapshotId::from_bytes(reader.array().map_err(truncated)?);
        let state =
            TransactionState::from_tag(reader.u8().map_err(truncated)?).ok_or_else(|| corrupt("bad state tag"))?;
        let artifact = match reader.u8().map_err(truncated)? {
            0 => None,
            1 => Some(BlobId::from_bytes(reader.array().map_err(truncated)?)),
            _ => return Err(corrupt("bad artifact flag")),
        };
        let created_ms = reader.u64().map_err(truncated)?;
        let updated_ms = reader.u64().map_err(truncated)?;
        if reader.finish().is_err() {
            return Err(corrupt("trailing bytes"));
        }
        Ok(Self { id, base_snapshot, state, artifact, created_ms, updated_ms })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(artifact: Option<BlobId>) -> TransactionRecord {
        TransactionRecord {
            id: TransactionId::digest(b"tx"),
            base_snapshot: SnapshotId::digest(b"snap"),
            state: TransactionState::PendingApproval,
            artifact,
            created_ms: 1_700_000_000_000,
            updated_ms: 1_700_000_000_500,
        }
    }

    #[test]
    fn encoding_round_trips_with_and_without_artifact() {
        for record in [sample(None), sample(Some(BlobId::of(b"artifact")))] {
            let bytes = record.encode();
            assert_eq!(bytes.len(), if record.artifact.is_some() { MAX_RECORD_BYTES } else { MAX_RECORD_BYTES - 32 });
            assert_eq!(TransactionRecord::decode(record.id, &bytes).unwrap(), record);
        }
    }

    #[test]
    fn every_single_byte_flip_and_truncation_is_refused() {
        let record = sample(Some(BlobId::of(b"artifact")));
        let bytes = record.encode();
        for index in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[index] ^= 0x01;
            assert!(matches!(
                TransactionRecord::decode(record.id, &flipped),
                Err(StoreError::CorruptRecord { id, .. }) if id == record.id
            ));
        }
        for len in 0..bytes.len() {
            assert!(TransactionRecord::decode(record.id, &bytes[..len]).is_err());
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(TransactionRecord::decode(record.id, &long).is_err());
    }

    /// Re-seal a body with a valid checksum, to reach the checks behind it.
    fn sealed(mut body: Vec<u8>) -> Vec<u8> {
        let checksum = blake3::hash(&body);
        body.extend_from_slice(checksum.as_bytes());
        body
    }

    #[test]
    fn field_checks_behind_a_valid_checksum() {
        let record = sample(None);
        let body = record.encode()[..MAX_RECORD_BYTES - 64].to_vec();
        let reason = |bytes: Vec<u8>, id: TransactionId| match TransactionRecord::decode(id, &bytes) {
            Err(StoreError::CorruptRecord { reason, .. }) => reason,
            other => panic!("expected a corrupt record, got {other:?}"),
        };
        let mut magic = body.clone();
        magic[7] = b'2';
        assert_eq!(reason(sealed(magic), record.id), "bad magic");
        let mut state = body.clone();
        state[72] = 0;
        assert_eq!(reason(sealed(state), record.id), "bad state tag");
        let mut state = body.clone();
        state[72] = 17;
        assert_eq!(reason(sealed(state), record.id), "bad state tag");
        let mut flag = body.clone();
        flag[73] = 2;
        assert_eq!(reason(sealed(flag), record.id), "bad artifact flag");
        let mut trailing = body.clone();
        trailing.push(0);
        assert_eq!(reason(sealed(trailing), record.id), "trailing bytes");
        assert_eq!(
            reason(sealed(body.clone()), TransactionId::digest(b"other")),
            "record belongs to another transaction"
        );
        assert_eq!(reason(sealed(body[..70].to_vec()), record.id), "record is truncated");
    }
}
