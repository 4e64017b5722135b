//! The invariants of the commit engine's on-disk decoders (`vsh_commit::format`), checked by
//! the `plan` and `journal` fuzz targets and replayed on stable by
//! `crates/vsh-commit/tests/fuzz_corpus.rs`, which includes this file as a module; so it may use
//! only `std`, `vsh_types` and `vsh_commit`.
//!
//! Arbitrary bytes rarely carry a valid checksum, so each check also *seals* the input (appends or
//! recomputes the checksums the format requires) to reach the field decoders behind them.

use vsh_commit::format::{
    JOURNAL_HEADER_BYTES, JOURNAL_RECORD_BYTES, JOURNAL_TRAILER_BYTES, Journal, JournalRecord, MAX_JOURNAL_BYTES,
    MAX_PLAN_BYTES, Marker, PLAN_DOMAIN, PLAN_MAGIC, Plan, PlanDigest, RecordKind, Settled,
};
use vsh_types::{AuthorityKey, TransactionId};

/// The key every check decodes with: the public one, so a sealed input can be built here.
fn key() -> AuthorityKey {
    AuthorityKey::unauthenticated()
}

/// `Plan::decode` never panics; whatever it accepts is canonical (re-encodes to the same bytes)
/// and internally consistent. Checked on the input as is, and on the input behind the magic with
/// a valid digest trailer appended.
pub fn check_plan(data: &[u8]) {
    check_plan_bytes(data);
    check_plan_bytes(&seal_plan(data));
}

/// A plan file with `body` between the magic and a valid digest trailer.
pub fn seal_plan(body: &[u8]) -> Vec<u8> {
    let mut sealed = PLAN_MAGIC.to_vec();
    sealed.extend_from_slice(body);
    let tag = key().mac(PLAN_DOMAIN).update(&sealed).finalize();
    sealed.extend_from_slice(&tag);
    sealed
}

fn check_plan_bytes(bytes: &[u8]) {
    let Ok((plan, digest)) = Plan::decode(bytes, &key()) else { return };
    assert!(bytes.len() as u64 <= MAX_PLAN_BYTES, "an oversized plan was accepted");
    assert_eq!(plan.encode(&key()), bytes, "a decoded plan re-encodes to other bytes");
    assert_eq!(digest.0, bytes[bytes.len() - 32..], "the digest is not the trailer");
    for pair in plan.entries.windows(2) {
        assert!(pair[0].path < pair[1].path, "entries out of order: {:?}", pair[0].path);
    }
    for entry in &plan.entries {
        assert!(!entry.path.is_root(), "the root is an entry");
    }
    for operation in &plan.operations {
        assert!((operation.entry as usize) < plan.entries.len(), "an operation names no entry");
    }
    assert!(plan.operations.len() <= plan.entries.len() * 3, "too many operations");
}

/// `Journal::decode`, `Marker::decode` and `Settled::decode` never panic; whatever they accept is
/// canonical. The input is also read as fields (transaction, plan digest, then 21-byte records),
/// encoded with valid checksums, and must decode back to the same journal; cut back to fewer
/// records, it must be refused.
pub fn check_journal(data: &[u8]) {
    if let Ok(journal) = Journal::decode(data, &key()) {
        assert!(data.len() as u64 <= MAX_JOURNAL_BYTES, "an oversized journal was accepted");
        assert_eq!(journal.encode(&key()), data, "a decoded journal re-encodes to other bytes");
        let records = (data.len() - JOURNAL_HEADER_BYTES - JOURNAL_TRAILER_BYTES) / JOURNAL_RECORD_BYTES;
        assert_eq!(journal.records.len(), records);
    }
    if let Ok(marker) = Marker::decode(data, &key()) {
        assert_eq!(marker.encode(&key()), data, "a decoded marker re-encodes to other bytes");
    }
    if let Ok(settled) = Settled::decode(data, &key()) {
        assert_eq!(settled.encode(&key()), data, "a decoded settled record re-encodes to other bytes");
    }
    let Some(journal) = journal_from_fields(data) else { return };
    let encoded = journal.encode(&key());
    assert_eq!(Journal::decode(&encoded, &key()).as_ref(), Ok(&journal), "a sealed journal does not round-trip");
    if !journal.records.is_empty() {
        let shorter = Journal { records: journal.records[..journal.records.len() - 1].to_vec(), ..journal.clone() };
        let mut cut = shorter.encode(&key());
        cut.truncate(cut.len() - JOURNAL_TRAILER_BYTES);
        cut.extend_from_slice(&encoded[encoded.len() - JOURNAL_TRAILER_BYTES..]);
        assert!(Journal::decode(&cut, &key()).is_err(), "a journal cut back by a record was accepted");
    }
    // Any single flipped bit is detected.
    if !encoded.is_empty() {
        let bit = data.iter().fold(0_usize, |acc, byte| acc.wrapping_mul(31).wrapping_add(usize::from(*byte)));
        let mut flipped = encoded.clone();
        let at = bit % (flipped.len() * 8);
        flipped[at / 8] ^= 1 << (at % 8);
        assert!(Journal::decode(&flipped, &key()).is_err(), "a flipped bit at {at} was not detected");
    }
}

/// A journal built from raw fields: 32 bytes of transaction, 32 of plan digest, then records of
/// kind (odd: intent, even: done), operation `u32`, witness `u64` and stamp `u64`.
fn journal_from_fields(data: &[u8]) -> Option<Journal> {
    let transaction: [u8; 32] = data.get(..32)?.try_into().ok()?;
    let plan: [u8; 32] = data.get(32..64)?.try_into().ok()?;
    let mut journal = Journal::new(TransactionId::from_bytes(transaction), PlanDigest(plan));
    for chunk in data[64..].chunks_exact(21) {
        let kind = if chunk[0] % 2 == 1 { RecordKind::Intent } else { RecordKind::Done };
        let operation = u32::from_le_bytes(chunk[1..5].try_into().ok()?);
        let witness = u64::from_le_bytes(chunk[5..13].try_into().ok()?);
        let stamp = u64::from_le_bytes(chunk[13..21].try_into().ok()?);
        journal.records.push(JournalRecord { kind, operation, witness, stamp });
    }
    Some(journal)
}
