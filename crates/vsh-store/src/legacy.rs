//! The first on-disk format of transaction records (`VSHTXR01`, one file per
//! transaction under `txns/`), kept only to migrate a data directory written by
//! it into the transaction log.
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
//! A record is 122 or 154 bytes. Decoding checks the length bound, the checksum
//! (before interpreting any field), the magic, the state tag, the artifact
//! flag, that the id matches the file name and that no bytes trail; any failure
//! is [`StoreError::CorruptRecord`]. Nothing writes this format any more.

use vsh_types::canon::Reader;
use vsh_types::{BlobId, SnapshotId, TransactionId, TransactionState};

use crate::error::StoreError;
use crate::record::TransactionRecord;

/// The first eight bytes of every legacy record.
pub(crate) const LEGACY_RECORD_MAGIC: [u8; 8] = *b"VSHTXR01";

/// Length of the trailing checksum.
const CHECKSUM_LEN: usize = 32;

/// The largest encoded legacy record (with an artifact).
pub(crate) const MAX_LEGACY_RECORD_BYTES: usize = 8 + 32 + 32 + 1 + 1 + 32 + 8 + 8 + CHECKSUM_LEN;

/// Decode a legacy record stored under transaction `id`.
pub(crate) fn decode(id: TransactionId, bytes: &[u8]) -> Result<TransactionRecord, StoreError> {
    let corrupt = |reason: &'static str| StoreError::CorruptRecord { id, reason };
    if bytes.len() > MAX_LEGACY_RECORD_BYTES {
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
    if reader.array::<8>().map_err(truncated)? != LEGACY_RECORD_MAGIC {
        return Err(corrupt("bad magic"));
    }
    let stored_id = TransactionId::from_bytes(reader.array().map_err(truncated)?);
    if stored_id != id {
        return Err(corrupt("record belongs to another transaction"));
    }
    let base_snapshot = SnapshotId::from_bytes(reader.array().map_err(truncated)?);
    let state = TransactionState::from_tag(reader.u8().map_err(truncated)?).ok_or_else(|| corrupt("bad state tag"))?;
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
    let mut record = TransactionRecord::new(id, base_snapshot, state, created_ms);
    record.artifact = artifact;
    record.updated_ms = updated_ms;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use vsh_types::canon;

    use super::*;

    /// The legacy encoder, for tests only: the format is frozen.
    fn encode(record: &TransactionRecord) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&LEGACY_RECORD_MAGIC);
        out.extend_from_slice(record.id.as_bytes());
        out.extend_from_slice(record.base_snapshot.as_bytes());
        canon::put_u8(&mut out, record.state.tag());
        match &record.artifact {
            None => canon::put_u8(&mut out, 0),
            Some(artifact) => {
                canon::put_u8(&mut out, 1);
                out.extend_from_slice(artifact.as_bytes());
            }
        }
        canon::put_u64(&mut out, record.created_ms);
        canon::put_u64(&mut out, record.updated_ms);
        let checksum = blake3::hash(&out);
        out.extend_from_slice(checksum.as_bytes());
        out
    }

    fn sample(artifact: Option<BlobId>) -> TransactionRecord {
        let mut record = TransactionRecord::new(
            TransactionId::digest(b"tx"),
            SnapshotId::digest(b"snap"),
            TransactionState::PendingApproval,
            1_700_000_000_000,
        );
        record.artifact = artifact;
        record.updated_ms = 1_700_000_000_500;
        record
    }

    #[test]
    fn round_trips_with_and_without_artifact() {
        for record in [sample(None), sample(Some(BlobId::of(b"artifact")))] {
            let bytes = encode(&record);
            let expected =
                if record.artifact.is_some() { MAX_LEGACY_RECORD_BYTES } else { MAX_LEGACY_RECORD_BYTES - 32 };
            assert_eq!(bytes.len(), expected);
            assert_eq!(decode(record.id, &bytes).unwrap(), record);
        }
    }

    #[test]
    fn every_single_byte_flip_and_truncation_is_refused() {
        let record = sample(Some(BlobId::of(b"artifact")));
        let bytes = encode(&record);
        for index in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[index] ^= 0x01;
            assert!(matches!(
                decode(record.id, &flipped),
                Err(StoreError::CorruptRecord { id, .. }) if id == record.id
            ));
        }
        for len in 0..bytes.len() {
            assert!(decode(record.id, &bytes[..len]).is_err());
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode(record.id, &long).is_err());
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
        let body = encode(&record)[..MAX_LEGACY_RECORD_BYTES - 64].to_vec();
        let reason = |bytes: Vec<u8>, id: TransactionId| match decode(id, &bytes) {
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
