//! Fault injection: fail the Nth write, fsync or rename for every N over a
//! scripted sequence of operations. The failing operation errors, the store is
//! poisoned, and reopening yields exactly the state before or after that
//! operation, and a store that works.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use vsh_store::{
    ApprovalGrant, BlobStore, CommitOutcome, CommitReservation, CommitStep, FaultKind, FaultPlan, FaultyBackend,
    RetentionConfig, StoreBackend, StoreError, TransactionRecord, TransactionStore, TxStoreConfig,
};
use vsh_types::{BlobId, PrincipalId, TransactionState as S};

use crate::Result;
use crate::common::{backend, data_path, record, store};

/// What the script carries from one step to the next.
#[derive(Default)]
struct Context {
    reservation: Option<CommitReservation>,
}

type Step = fn(&TransactionStore, &BlobStore, &mut Context) -> std::result::Result<(), StoreError>;

fn a() -> TransactionRecord {
    record(b"a", S::PendingApproval)
}

fn b() -> TransactionRecord {
    record(b"b", S::AutoApproved)
}

fn c() -> TransactionRecord {
    record(b"c", S::PendingApproval).with_pending_expiry(500)
}

fn reserved(context: &mut Context) -> &mut CommitReservation {
    context.reservation.as_mut().expect("an earlier step reserved")
}

/// Every kind of change the store makes, in an order the table allows.
const SCRIPT: &[(&str, Step)] = &[
    ("create a", |store, _, _| store.create(&a())),
    ("create b", |store, _, _| store.create(&b())),
    ("set artifact", |store, _, _| store.set_artifact(a().id, BlobId::of(b"artifact")).map(drop)),
    ("approve", |store, _, _| {
        let grant = ApprovalGrant::new(a().id, PrincipalId::digest(b"alice"), 100, 10_000)?;
        store.approve(a().id, &grant).map(drop)
    }),
    ("reserve b", |store, _, context| {
        context.reservation = Some(store.reserve(b().id, 150)?);
        Ok(())
    }),
    ("revalidate b", |store, _, context| store.advance(reserved(context), CommitStep::Revalidating, 160).map(drop)),
    ("compact", |store, _, _| store.compact().map(drop)),
    ("commit b", |store, _, context| store.advance(reserved(context), CommitStep::Committing, 170).map(drop)),
    ("finish b", |store, _, context| {
        let reservation = context.reservation.take().expect("reserved");
        store.finish(reservation, CommitOutcome::Committed, 180).map(drop)
    }),
    ("reserve a", |store, _, context| {
        context.reservation = Some(store.reserve(a().id, 200)?);
        Ok(())
    }),
    ("fail a", |store, _, context| {
        let reservation = context.reservation.take().expect("reserved");
        store.finish(reservation, CommitOutcome::Failed, 210).map(drop)
    }),
    ("create c", |store, _, _| store.create(&c())),
    ("expire c", |store, _, _| store.expire_due(600).map(drop)),
    ("put blob", |_, blobs, _| blobs.put(b"some content").map(drop)),
    ("gc", |store, blobs, _| {
        let config = RetentionConfig {
            terminal_max_age_ms: None,
            max_terminal_records: Some(1),
            blob_grace_ms: 0,
            ..RetentionConfig::default()
        };
        store.gc(blobs, u64::MAX / 2, &config, &BTreeSet::new()).map(drop)
    }),
    ("create d", |store, _, _| store.create(&record(b"d", S::Created))),
];

/// Open both stores over `backend` (a step of its own: it writes the log's first generation).
fn open(backend: &Arc<dyn StoreBackend>) -> std::result::Result<(TransactionStore, BlobStore), StoreError> {
    let config = TxStoreConfig::default();
    Ok((
        TransactionStore::open_with(Arc::clone(backend), config, &crate::common::key())?,
        BlobStore::open_with(Arc::clone(backend))?,
    ))
}

/// The durable records, and whether the script's blob is stored.
type Durable = (Vec<TransactionRecord>, bool);

/// The durable records and blobs, seen through a fresh handle.
fn durable(root: &Path) -> Result<Durable> {
    let blobs = BlobStore::open_with(backend(root)?)?;
    Ok((store(root)?.list()?, blobs.contains(BlobId::of(b"some content"))?))
}

/// Run the script without faults, recording the durable state after each
/// step (index 0: after opening) and how many steps of each kind it took.
fn dry_run() -> Result<(Vec<Durable>, vsh_store::FaultCounts)> {
    let dir = tempfile::tempdir()?;
    let counting = Arc::new(FaultyBackend::new(backend(dir.path())?, None));
    let shared: Arc<dyn StoreBackend> = counting.clone();
    let (store, blobs) = open(&shared)?;
    let mut states = vec![durable(dir.path())?];
    let mut context = Context::default();
    for (name, step) in SCRIPT {
        step(&store, &blobs, &mut context).map_err(|error| format!("{name}: {error}"))?;
        states.push(durable(dir.path())?);
    }
    Ok((states, counting.counts()))
}

#[test]
fn every_failed_write_fsync_or_rename_leaves_the_state_before_or_after() -> Result {
    let (states, totals) = dry_run()?;
    assert!(states.windows(2).any(|pair| pair[0] != pair[1]), "the script changes things");
    let mut injected = 0;
    for kind in [FaultKind::Write, FaultKind::Fsync, FaultKind::Rename] {
        assert!(totals.of(kind) > 0, "{kind:?}");
        for nth in 1..=totals.of(kind) {
            let dir = tempfile::tempdir()?;
            let faulty = Arc::new(FaultyBackend::new(backend(dir.path())?, Some(FaultPlan::fail_nth(kind, nth))));
            let shared: Arc<dyn StoreBackend> = faulty.clone();
            // The step that failed (0: opening) and its error.
            let (failed, error) = match open(&shared) {
                Err(error) => (0, error),
                Ok((store, blobs)) => {
                    let mut context = Context::default();
                    let mut outcome = None;
                    for (index, (_, step)) in SCRIPT.iter().enumerate() {
                        if let Err(error) = step(&store, &blobs, &mut context) {
                            // Fail-stop: the store that failed refuses everything after.
                            assert!(store.is_poisoned() || blobs.is_poisoned(), "{kind:?} {nth}: not poisoned");
                            if store.is_poisoned() {
                                assert!(matches!(store.list(), Err(StoreError::Poisoned)));
                                assert!(matches!(store.create(&record(b"x", S::Created)), Err(StoreError::Poisoned)));
                            } else {
                                assert!(matches!(blobs.put(b"x"), Err(StoreError::Poisoned)));
                            }
                            outcome = Some((index + 1, error));
                            break;
                        }
                    }
                    outcome.unwrap_or_else(|| panic!("{kind:?} {nth}: the fault never fired"))
                }
            };
            assert!(faulty.fired(), "{kind:?} {nth}");
            assert!(
                matches!(&error, StoreError::Io { source: vsh_store::BackendError::Injected { .. }, .. }),
                "{kind:?} {nth}: {error:?}"
            );
            let reopened = durable(dir.path())?;
            let before = if failed == 0 { &states[0] } else { &states[failed - 1] };
            let after = &states[failed];
            // Records and blobs are each exactly before or after (gc changes both, one after the other).
            assert!(
                [&before.0, &after.0].contains(&&reopened.0) && [before.1, after.1].contains(&reopened.1),
                "{kind:?} {nth}: step {failed} left {reopened:?}\nbefore {before:?}\nafter {after:?}"
            );
            // The reopened store works, and nothing half-written is left behind.
            let store = store(dir.path())?;
            store.create(&record(b"after recovery", S::Created))?;
            assert!(!data_path(dir.path()).join("txlog.next").exists());
            injected += 1;
        }
    }
    assert!(injected > 20, "{injected} faults injected");
    Ok(())
}

#[test]
fn a_compaction_interrupted_at_any_step_leaves_a_consistent_store() -> Result {
    let prepare = || -> Result<(tempfile::TempDir, Vec<TransactionRecord>)> {
        let dir = tempfile::tempdir()?;
        let store = store(dir.path())?;
        for index in 0..5_u8 {
            let rec = record(&[index], S::Created);
            store.create(&rec)?;
            store.compare_and_transition(rec.id, S::Created, S::Running, 5)?;
        }
        let records = store.list()?;
        Ok((dir, records))
    };
    // Count the steps of opening and of one compaction.
    let (dir, _) = prepare()?;
    let counting = Arc::new(FaultyBackend::new(backend(dir.path())?, None));
    let store = TransactionStore::open_with(counting.clone(), TxStoreConfig::default(), &crate::common::key())?;
    let opening = counting.counts();
    store.compact()?;
    let total = counting.counts();
    for kind in [FaultKind::Write, FaultKind::Fsync, FaultKind::Rename] {
        assert!(total.of(kind) > opening.of(kind), "{kind:?}: compaction takes a step of each kind");
        for nth in opening.of(kind) + 1..=total.of(kind) {
            let (dir, records) = prepare()?;
            let faulty = Arc::new(FaultyBackend::new(backend(dir.path())?, Some(FaultPlan::fail_nth(kind, nth))));
            let store = TransactionStore::open_with(faulty, TxStoreConfig::default(), &crate::common::key())?;
            assert!(matches!(store.compact(), Err(StoreError::Io { .. })), "{kind:?} {nth}");
            assert!(matches!(store.get(records[0].id), Err(StoreError::Poisoned)));
            let reopened = self::store(dir.path())?;
            assert_eq!(reopened.list()?, records, "{kind:?} {nth}");
            assert!(matches!(reopened.stats()?.generation, 1 | 2));
            assert!(!data_path(dir.path()).join("txlog.next").exists());
        }
    }
    Ok(())
}
