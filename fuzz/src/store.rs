//! The invariants of the `vsh-store` decoders, as plain functions that panic on a violation:
//! [`check_txlog_frame`] for the transaction log and [`check_artifact`] for pending-approval
//! artifacts.
//!
//! This file is not part of the `vsh-fuzz` library (whose `lib.rs` must compile with only
//! `vsh_types`, because `crates/vsh-types/tests/fuzz_corpus.rs` includes it). Instead the
//! targets `fuzz_targets/txlog_frame.rs` and `fuzz_targets/artifact.rs` include it with
//! `#[path]`, and so does `crates/vsh-store/tests/fuzz_corpus.rs`, which replays the seed
//! corpora on stable as part of `cargo test`. It may use only `std`, `vsh_types` and `vsh_store`.
//!
//! Each check reads its first byte as a mode. An even first byte feeds the rest to the decoder
//! as raw bytes: it must not panic, and whatever it accepts must be canonical. An odd first
//! byte makes the rest a script: a valid log or artifact is built from it through the real
//! encoder and then damaged (truncated, one bit flipped, a byte appended) as the last bytes
//! say, and the decoder must give exactly what a model predicts.

use std::collections::BTreeMap;

use vsh_store::txlog::{LogEntry, LogError, LogHeader, LogKey, LogState, Tail};
use vsh_store::{ApprovalGrant, ArtifactError, ArtifactLimits, PendingArtifact, TransactionRecord};
use vsh_types::{
    BindingDigests, BlobId, CanonicalDiff, Dependency, DiffEntry, ExecutionEvidenceDigest, IntentDigest, NodeKind,
    NodeState, PolicyDigest, PrincipalId, ProgramDigest, ReadSet, RuntimeConfigDigest, SnapshotId, TransactionBinding,
    TransactionId, TransactionState, VPath,
};

/// The key every log here is written and replayed with: the public one, so the fuzzer can
/// build valid frames (a keyed log is checked the same way, with another subkey).
fn key() -> LogKey {
    LogKey::unauthenticated()
}

/// A cursor over fuzz bytes that yields zeros once they run out.
struct Bytes<'a> {
    data: &'a [u8],
}

impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        match self.data.split_first() {
            Some((first, rest)) => {
                self.data = rest;
                *first
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.next(), self.next()])
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// Check the transaction log's replay on arbitrary bytes (see the module docs).
pub fn check_txlog_frame(data: &[u8]) {
    match data.split_first() {
        Some((mode, rest)) if mode % 2 == 1 => check_log_script(rest),
        Some((_, rest)) => check_log_bytes(rest),
        None => {}
    }
}

/// Raw bytes: no panic; an accepted log re-encodes to the same records; a torn tail cut
/// off leaves the same state, clean.
fn check_log_bytes(log: &[u8]) {
    if let Ok(entry) = LogEntry::decode(log) {
        assert_eq!(entry.encode(), log, "a decoded payload re-encodes to the same bytes");
    }
    let Ok((state, tail)) = LogState::parse(log, &key()) else { return };
    match tail {
        Tail::Clean => assert_eq!(state.end(), log.len() as u64),
        Tail::Torn { at } => {
            assert_eq!(at, state.end());
            let (cut, cut_tail) =
                LogState::parse(&log[..at as usize], &key()).expect("the part before a torn tail parses");
            assert_eq!((cut, cut_tail), (state.clone(), Tail::Clean));
        }
    }
    let compacted = state.compacted();
    assert_eq!(compacted.len() as u64, state.compacted_len());
    let (after, tail) = LogState::parse(&compacted, &key()).expect("a compacted log parses");
    assert_eq!(tail, Tail::Clean);
    assert_eq!(after.records(), state.records());
    assert_eq!(after.generation(), state.generation() + 1);
}

const STATES: [TransactionState; 16] = TransactionState::ALL;

fn id(index: u8) -> TransactionId {
    TransactionId::digest(&[index % 4])
}

/// The records after every frame boundary of a log; boundaries inside a checkpoint prefix are not listed.
type Boundaries = Vec<(usize, BTreeMap<TransactionId, TransactionRecord>)>;

/// What one script step asks for.
enum LogStep {
    Append(Box<LogEntry>),
    Compact,
    Skip,
}

/// Decode one script step against the current state.
fn log_step(ops: &mut Bytes<'_>, state: &LogState) -> LogStep {
    let op = ops.next();
    match op % 6 {
        0 => {
            let state_index = usize::from(ops.next()) % STATES.len();
            let mut record =
                TransactionRecord::new(id(ops.next()), SnapshotId::digest(b"base"), STATES[state_index], 7);
            if ops.next() % 2 == 1 {
                record = record.with_pending_expiry(u64::from(ops.u16()));
            }
            LogStep::Append(Box::new(LogEntry::Version(record)))
        }
        1 | 2 => {
            let Some(current) = state.get(&id(ops.next())).copied() else { return LogStep::Skip };
            let mut next = current;
            next.sequence += 1;
            next.updated_ms = u64::from(ops.u16());
            next.state = STATES[usize::from(ops.next()) % STATES.len()];
            if op % 6 == 2 {
                next.artifact = Some(BlobId::of(&[ops.next()]));
            }
            if next.state == TransactionState::Approved {
                let issued = u64::from(ops.u16());
                next.approval = ApprovalGrant::new(current.id, PrincipalId::digest(b"p"), issued, issued + 1).ok();
            }
            LogStep::Append(Box::new(LogEntry::Version(next)))
        }
        3 => {
            let mut chosen: Vec<(TransactionId, u64)> = state
                .records()
                .values()
                .filter(|record| record.state.is_terminal())
                .map(|record| (record.id, record.sequence))
                .collect();
            if chosen.is_empty() {
                return LogStep::Skip;
            }
            chosen.truncate(1 + usize::from(ops.next()) % chosen.len());
            LogStep::Append(Box::new(LogEntry::Forget(chosen)))
        }
        4 => LogStep::Compact,
        _ => {
            // An arbitrary record version, valid or not: the append must refuse an invalid one.
            let Some(current) = state.get(&id(ops.next())).copied() else { return LogStep::Skip };
            let mut next = current;
            next.sequence = u64::from(ops.next() % 4) + current.sequence.saturating_sub(1);
            next.state = STATES[usize::from(ops.next()) % STATES.len()];
            LogStep::Append(Box::new(LogEntry::Version(next)))
        }
    }
}

/// Build a valid log from a script, then damage it and check replay against the model:
/// the records after every frame boundary.
fn check_log_script(script: &[u8]) {
    let (ops, damage) = script.split_at(script.len().saturating_sub(5));
    let mut ops = Bytes { data: ops };
    let mut log = LogHeader { generation: 1, checkpoints: 0 }.encode(&key()).to_vec();
    let (mut state, _) = LogState::parse(&log, &key()).expect("a fresh header parses");
    let mut boundaries: Boundaries = vec![(log.len(), BTreeMap::new())];
    for _ in 0..64 {
        if ops.is_empty() {
            break;
        }
        match log_step(&mut ops, &state) {
            LogStep::Skip => {}
            LogStep::Compact => {
                log = state.compacted();
                state = LogState::parse(&log, &key()).expect("a compacted log parses").0;
                boundaries = vec![(log.len(), state.records().clone())];
            }
            LogStep::Append(entry) => {
                // Invalid steps are refused and change nothing.
                let Ok((next_state, bytes)) = state.prepare_append(std::slice::from_ref(&entry)) else { continue };
                log.extend_from_slice(&bytes);
                state = next_state;
                assert_eq!(state.end(), log.len() as u64);
                boundaries.push((log.len(), state.records().clone()));
            }
        }
    }
    let (parsed, tail) = LogState::parse(&log, &key()).expect("a log built by the encoder parses");
    assert_eq!((parsed.records(), tail), (state.records(), Tail::Clean));
    check_log_damage(&log, &state, &boundaries, &mut Bytes { data: damage });
}

/// Damage a valid log as `damage` says and check what replay makes of it.
fn check_log_damage(log: &[u8], state: &LogState, boundaries: &Boundaries, damage: &mut Bytes<'_>) {
    let kind = damage.next() % 3;
    let position = usize::from(damage.u16()) | (usize::from(damage.u16()) << 16);
    match kind {
        0 => {
            // Truncation anywhere: the state at the last boundary before the cut, torn unless the
            // cut is a boundary; inside the header or the checkpoint prefix, refused.
            let cut = position % (log.len() + 1);
            let result = LogState::parse(&log[..cut], &key());
            match boundaries.iter().rev().find(|(end, _)| *end <= cut) {
                None => assert!(result.is_err(), "cut at {cut} inside the header or checkpoints was accepted"),
                Some((end, records)) => {
                    let (cut_state, cut_tail) = result.unwrap_or_else(|error| panic!("cut at {cut}: {error}"));
                    assert_eq!(cut_state.records(), records, "cut at {cut}");
                    let expected = if *end == cut { Tail::Clean } else { Tail::Torn { at: *end as u64 } };
                    assert_eq!(cut_tail, expected, "cut at {cut}");
                }
            }
        }
        1 => {
            // One flipped bit anywhere in a complete log is always refused.
            let bit = position % (log.len() * 8);
            let mut flipped = log.to_vec();
            flipped[bit / 8] ^= 1 << (bit % 8);
            match LogState::parse(&flipped, &key()) {
                Err(LogError::Corrupt { offset, .. }) => assert!(offset as usize <= bit / 8, "bit {bit}"),
                Err(LogError::UpgradeRequired { .. }) => assert!(bit / 8 < 8, "bit {bit}"),
                Err(other) => panic!("bit {bit}: {other:?}"),
                Ok(_) => panic!("bit {bit}: a flipped bit was accepted"),
            }
        }
        _ => {
            // A stray non-zero byte after the last frame is a torn tail, never a record.
            let mut longer = log.to_vec();
            longer.push(damage.next() | 1);
            let (longer_state, longer_tail) =
                LogState::parse(&longer, &key()).expect("a short tail is torn, not corrupt");
            assert_eq!(longer_state.records(), state.records());
            assert_eq!(longer_tail, Tail::Torn { at: log.len() as u64 });
        }
    }
}

/// Small limits keep the fuzzer fast and reach every bound.
const LIMITS: ArtifactLimits = ArtifactLimits {
    max_total_bytes: 1 << 20,
    max_entries: 64,
    max_dependencies: 64,
    max_path_bytes: 64,
    max_intent_bytes: 256,
    max_evidence_bytes: 4096,
    max_program_bytes: 512,
    max_policy_bytes: 512,
    max_inline_bytes: 256,
};

/// Check the artifact decoder on arbitrary bytes (see the module docs).
pub fn check_artifact(data: &[u8]) {
    match data.split_first() {
        Some((mode, rest)) if mode % 2 == 1 => check_artifact_script(rest),
        Some((_, rest)) => check_artifact_bytes(rest),
        None => {}
    }
}

/// Raw bytes: no panic; an accepted artifact verifies and re-encodes to the same bytes (one
/// of an earlier format, which holds no program or no inline contents, to the current
/// format, which decodes to it again).
fn check_artifact_bytes(bytes: &[u8]) {
    if let Ok(artifact) = PendingArtifact::decode(bytes, &LIMITS) {
        let encoded = artifact.encode();
        if bytes.starts_with(&vsh_store::ARTIFACT_MAGIC_V1) || bytes.starts_with(&vsh_store::ARTIFACT_MAGIC_V2) {
            if bytes.starts_with(&vsh_store::ARTIFACT_MAGIC_V1) {
                assert_eq!(artifact.program, None, "the first format holds no program");
            }
            assert!(artifact.contents.is_empty(), "earlier formats carry no contents");
            assert_eq!(PendingArtifact::decode(&encoded, &LIMITS).as_ref(), Ok(&artifact));
        } else {
            assert_eq!(encoded, bytes, "a decoded artifact re-encodes to the same bytes");
        }
        assert_eq!(artifact.verify(&LIMITS), Ok(()));
    }
}

const PATHS: [&str; 6] = ["a", "a/b", "a/b/c", "b", "c", "dir/x"];

fn node(choice: u8) -> Option<NodeState> {
    match choice % 6 {
        0 => None,
        1 => Some(NodeState::file_with(b"one", 0o644)),
        2 => Some(NodeState::file_with(b"two", 0o644)),
        3 => Some(NodeState::file_with(b"one", 0o755)),
        4 => Some(NodeState::directory(0o755)),
        _ => Some(NodeState::symlink(b"a/b")),
    }
}

/// Build a valid artifact from a script, round-trip it, then damage it.
fn check_artifact_script(script: &[u8]) {
    let mut bytes = Bytes { data: script };
    let mut diff: BTreeMap<VPath, DiffEntry> = BTreeMap::new();
    let mut read_set = ReadSet::default();
    for _ in 0..bytes.next() % 8 {
        let path = VPath::parse(PATHS[usize::from(bytes.next()) % PATHS.len()]).expect("a valid constant path");
        if let Some(entry) = DiffEntry::between(path.clone(), node(bytes.next()), node(bytes.next())) {
            diff.insert(path.clone(), entry);
        }
        let kind = [None, Some(None), Some(Some(NodeKind::File)), Some(Some(NodeKind::Directory))]
            [usize::from(bytes.next() % 4)];
        read_set.entries.insert(path, Dependency { kind, ..Dependency::default() });
    }
    let diff = CanonicalDiff::new(diff.into_values().collect()).expect("a map's entries are sorted");
    let intent: String = (0..bytes.next() % 16).map(|_| char::from(b'a' + bytes.next() % 26)).collect();
    let evidence: Vec<u8> = (0..bytes.next() % 32).map(|_| bytes.next()).collect();
    let binding = TransactionBinding::new(BindingDigests {
        snapshot: SnapshotId::digest(b"base"),
        program: ProgramDigest::digest(&[bytes.next()]),
        intent: IntentDigest::digest(intent.as_bytes()),
        read_set: read_set.digest(),
        write_set: diff.write_set_digest(),
        diff: diff.digest(),
        policy: PolicyDigest::digest(b"policy"),
        runtime_config: RuntimeConfigDigest::digest(b"config"),
        evidence: ExecutionEvidenceDigest::digest(&evidence),
    });
    // A program text or none (as a first-format artifact has), from what the
    // script already chose, so the seed corpus keeps its meaning.
    let program = intent.len().is_multiple_of(2).then(|| format!("print({intent:?})"));
    let policy = (intent.len() % 3 == 1).then(|| format!("version = 1\n# {intent}\n"));
    let artifact = PendingArtifact {
        binding,
        intent,
        program,
        policy,
        diff,
        read_set,
        evidence,
        contents: vsh_store::InlineContents::new(),
    };
    // The diff's new contents carried inline, or not, as the script chose.
    let mut artifact = artifact;
    if artifact.evidence.len() % 2 == 1 {
        let ids: Vec<BlobId> = artifact.content_blobs().collect();
        for bytes in [&b"one"[..], &b"two"[..], &b"a/b"[..]] {
            if ids.contains(&BlobId::of(bytes)) {
                artifact.contents.insert(BlobId::of(bytes), std::sync::Arc::from(bytes));
            }
        }
    }
    assert_eq!(artifact.verify(&LIMITS), Ok(()));
    let encoded = artifact.encode();
    assert_eq!(PendingArtifact::decode(&encoded, &LIMITS).as_ref(), Ok(&artifact));

    let position = usize::from(bytes.u16());
    match bytes.next() % 3 {
        0 => {
            let cut = position % encoded.len();
            assert!(PendingArtifact::decode(&encoded[..cut], &LIMITS).is_err(), "cut at {cut} was accepted");
        }
        1 => {
            let bit = position % (encoded.len() * 8);
            let mut flipped = encoded.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(PendingArtifact::decode(&flipped, &LIMITS).is_err(), "bit {bit} was accepted");
        }
        _ => {
            let mut longer = encoded.clone();
            longer.push(bytes.next());
            assert_eq!(PendingArtifact::decode(&longer, &LIMITS), Err(ArtifactError::Trailing { remaining: 1 }));
        }
    }
}
