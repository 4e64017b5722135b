//! Approvals with exclusive expiry, rejection, expiry of pending requests, and
//! single-use commit reservations.

use vsh_store::{ApprovalGrant, CommitOutcome, CommitStep, StoreError, TransactionStore};
use vsh_types::{BlobId, PrincipalId, TransactionId, TransactionState as S};

use crate::Result;
use crate::common::{record, store};

fn alice() -> PrincipalId {
    PrincipalId::digest(b"alice")
}

fn pending(store: &TransactionStore, name: &[u8]) -> Result<TransactionId> {
    let rec = record(name, S::PendingApproval);
    store.create(&rec)?;
    Ok(rec.id)
}

#[test]
fn a_grant_must_expire_after_it_is_issued() {
    let id = TransactionId::digest(b"tx");
    assert!(matches!(
        ApprovalGrant::new(id, alice(), 100, 100),
        Err(StoreError::InvalidGrant { issued_ms: 100, expires_ms: 100 })
    ));
    assert!(matches!(ApprovalGrant::new(id, alice(), 100, 99), Err(StoreError::InvalidGrant { .. })));
    let grant = ApprovalGrant::new(id, alice(), 100, 101).expect("one millisecond is enough");
    assert!(!grant.is_expired_at(100));
    assert!(grant.is_expired_at(101), "expiry is exclusive");
    assert_eq!(
        (grant.transaction(), grant.principal(), grant.issued_ms(), grant.expires_ms()),
        (id, alice(), 100, 101)
    );
}

#[test]
fn approve_moves_only_pending_transactions_and_records_the_grant() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let id = pending(&store, b"review me")?;
    let grant = ApprovalGrant::new(id, alice(), 2_000, 3_000)?;
    let other = ApprovalGrant::new(TransactionId::digest(b"other"), alice(), 2_000, 3_000)?;
    assert!(matches!(store.approve(id, &other), Err(StoreError::GrantMismatch { .. })));
    let approved = store.approve(id, &grant)?;
    assert_eq!((approved.state, approved.approval, approved.updated_ms), (S::Approved, Some(grant), 2_000));
    assert!(matches!(store.approve(id, &grant), Err(StoreError::WrongState { op: "approve", state: S::Approved, .. })));
    let auto = record(b"auto", S::AutoApproved);
    store.create(&auto)?;
    let grant = ApprovalGrant::new(auto.id, alice(), 2_000, 3_000)?;
    assert!(matches!(store.approve(auto.id, &grant), Err(StoreError::WrongState { state: S::AutoApproved, .. })));
    // The grant survives a reopen.
    assert_eq!(self::store(dir.path())?.get(id)?.and_then(|record| record.approval), approved.approval);
    Ok(())
}

#[test]
fn reserve_at_the_expiry_instant_is_expired_and_that_is_durable() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let early = pending(&store, b"early")?;
    let late = pending(&store, b"late")?;
    for id in [early, late] {
        store.approve(id, &ApprovalGrant::new(id, alice(), 1_000, 5_000)?)?;
    }
    store.set_artifact(early, BlobId::of(b"early artifact"))?;
    let reservation = store.reserve(early, 4_999)?;
    assert_eq!((reservation.transaction(), reservation.state()), (early, S::Reserved));
    assert_eq!(reservation.artifact(), Some(BlobId::of(b"early artifact")));
    assert_eq!(Some(reservation.base_snapshot()), store.get(early)?.map(|record| record.base_snapshot));
    assert!(matches!(
        store.reserve(late, 5_000),
        Err(StoreError::ApprovalLapsed { id, expires_ms: 5_000, now_ms: 5_000 }) if id == late
    ));
    // The work waits for an approval again, durably (ux68 M6).
    let reopened = self::store(dir.path())?;
    assert_eq!(reopened.get(late)?.map(|record| (record.state, record.approval)), Some((S::PendingApproval, None)));
    assert!(matches!(reopened.reserve(late, 1), Err(StoreError::NotReservable { state: S::PendingApproval, .. })));
    // Past its own window too, it is over.
    let windowed = record(b"windowed", S::PendingApproval).with_pending_expiry(6_000);
    store.create(&windowed)?;
    store.approve(windowed.id, &ApprovalGrant::new(windowed.id, alice(), 1_000, 5_000)?)?;
    assert_eq!(store.reserve(windowed.id, 5_999).map(|reserved| reserved.state()).ok(), None);
    assert_eq!(store.get(windowed.id)?.map(|record| record.state), Some(S::PendingApproval), "lapsed, in its window");
    let over = record(b"over", S::PendingApproval).with_pending_expiry(6_000);
    store.create(&over)?;
    store.approve(over.id, &ApprovalGrant::new(over.id, alice(), 1_000, 5_000)?)?;
    assert!(matches!(store.reserve(over.id, 6_000), Err(StoreError::ApprovalExpired { .. })));
    assert_eq!(self::store(dir.path())?.get(over.id)?.map(|record| record.state), Some(S::Expired));
    // A reservation may give up straight away.
    assert_eq!(store.finish(reservation, CommitOutcome::Failed, 5_000)?.state, S::Failed);
    Ok(())
}

#[test]
fn a_durable_preview_expires_at_its_exclusive_edge_on_reserve_and_by_gc() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let kept = record(b"kept", S::AutoApproved).with_pending_expiry(5_000);
    let lapsed = record(b"lapsed", S::AutoApproved).with_pending_expiry(5_000);
    let swept = record(b"swept", S::AutoApproved).with_pending_expiry(5_000);
    let local = record(b"local", S::AutoApproved);
    for record in [kept, lapsed, swept, local] {
        store.create(&record)?;
    }
    assert_eq!(store.reserve(kept.id, 4_999)?.state(), S::Reserved);
    assert!(matches!(
        store.reserve(lapsed.id, 5_000),
        Err(StoreError::PreviewExpired { id, expires_ms: 5_000, now_ms: 5_000 }) if id == lapsed.id
    ));
    let expired = store.expire_due(5_000)?;
    assert_eq!(expired, vec![swept.id], "a preview without an expiry (process-local) never expires");
    let reopened = self::store(dir.path())?;
    for id in [lapsed.id, swept.id] {
        assert_eq!(reopened.get(id)?.map(|record| record.state), Some(S::Expired));
    }
    assert_eq!(reopened.get(local.id)?.map(|record| record.state), Some(S::AutoApproved));
    Ok(())
}

#[test]
fn a_reservation_is_single_use_and_walks_the_commit_edges() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let auto = record(b"auto", S::AutoApproved);
    store.create(&auto)?;
    let mut reservation = store.reserve(auto.id, 10)?;
    assert!(matches!(store.reserve(auto.id, 11), Err(StoreError::NotReservable { state: S::Reserved, .. })));
    assert!(matches!(
        self::store(dir.path())?.reserve(auto.id, 11),
        Err(StoreError::NotReservable { state: S::Reserved, .. })
    ));
    // The table is enforced: no commit straight from Reserved.
    assert!(matches!(store.advance(&mut reservation, CommitStep::Committing, 12), Err(StoreError::Transition { .. })));
    assert_eq!(store.advance(&mut reservation, CommitStep::Revalidating, 12)?.state, S::Revalidating);
    assert_eq!(store.advance(&mut reservation, CommitStep::Committing, 13)?.state, S::Committing);
    let committed = store.finish(reservation, CommitOutcome::Committed, 14)?;
    assert_eq!((committed.state, committed.sequence, committed.updated_ms), (S::Committed, 4, 14));
    assert!(matches!(store.reserve(auto.id, 15), Err(StoreError::NotReservable { state: S::Committed, .. })));
    Ok(())
}

#[test]
fn a_reservation_is_lost_when_someone_else_moves_the_record() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let auto = record(b"auto", S::AutoApproved);
    store.create(&auto)?;
    let mut reservation = store.reserve(auto.id, 10)?;
    // Recovery, in another handle, fails the stuck reservation.
    self::store(dir.path())?.compare_and_transition(auto.id, S::Reserved, S::Failed, 11)?;
    assert!(matches!(
        store.advance(&mut reservation, CommitStep::Revalidating, 12),
        Err(StoreError::ReservationLost { id }) if id == auto.id
    ));
    assert!(matches!(store.finish(reservation, CommitOutcome::Failed, 12), Err(StoreError::ReservationLost { .. })));
    assert_eq!(store.get(auto.id)?.map(|record| record.state), Some(S::Failed));
    Ok(())
}

#[test]
fn stale_and_recovery_outcomes_follow_the_table() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let stale = record(b"stale", S::AutoApproved);
    let crashed = record(b"crashed", S::AutoApproved);
    store.create(&stale)?;
    store.create(&crashed)?;
    let mut reservation = store.reserve(stale.id, 1)?;
    store.advance(&mut reservation, CommitStep::Revalidating, 2)?;
    assert_eq!(store.finish(reservation, CommitOutcome::Stale, 3)?.state, S::Stale);
    let mut reservation = store.reserve(crashed.id, 1)?;
    store.advance(&mut reservation, CommitStep::Revalidating, 2)?;
    store.advance(&mut reservation, CommitStep::Committing, 3)?;
    store.advance(&mut reservation, CommitStep::RecoveryRequired, 4)?;
    assert_eq!(store.finish(reservation, CommitOutcome::Committed, 5)?.state, S::Committed);
    Ok(())
}

#[test]
fn reject_applies_to_pending_auto_approved_and_approved_only() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let id = pending(&store, b"no")?;
    assert_eq!(store.reject(id, 5)?.state, S::Rejected);
    assert!(matches!(store.reject(id, 6), Err(StoreError::WrongState { op: "reject", state: S::Rejected, .. })));
    let auto = record(b"discarded preview", S::AutoApproved);
    store.create(&auto)?;
    assert_eq!(store.reject(auto.id, 5)?.state, S::Rejected);
    let approved = pending(&store, b"changed my mind")?;
    let grant = ApprovalGrant::new(approved, alice(), 1, 100)?;
    store.approve(approved, &grant)?;
    let rejected = store.reject(approved, 50)?;
    assert_eq!((rejected.state, rejected.approval), (S::Rejected, Some(grant)), "the grant stays on record");
    Ok(())
}

/// An approval that finds the workspace changed under pending work records
/// it stale (ux61 2: it stayed pending, and every hint sent its reviewer
/// back to approve it), and so does a listing of approved or auto-approved
/// work the workspace moved under (ux84 L1: shown as "to commit"); work
/// decided or in a commit is not. The state survives a reopen.
#[test]
fn mark_stale_applies_to_work_waiting_for_its_decision_or_commit() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let id = pending(&store, b"moved under")?;
    assert_eq!(store.mark_stale(id, 5)?.state, S::Stale);
    assert_eq!(self::store(dir.path())?.get(id)?.map(|record| record.state), Some(S::Stale));
    assert!(matches!(store.mark_stale(id, 6), Err(StoreError::WrongState { op: "mark stale", state: S::Stale, .. })));
    let approved = pending(&store, b"approved already")?;
    let grant = ApprovalGrant::new(approved, alice(), 1, 100)?;
    store.approve(approved, &grant)?;
    let stale = store.mark_stale(approved, 7)?;
    assert_eq!((stale.state, stale.approval.as_ref()), (S::Stale, Some(&grant)));
    let auto = record(b"auto", S::AutoApproved);
    store.create(&auto)?;
    assert_eq!(store.mark_stale(auto.id, 7)?.state, S::Stale);
    assert_eq!(self::store(dir.path())?.get(auto.id)?.map(|record| record.state), Some(S::Stale));
    let rejected = pending(&store, b"rejected")?;
    store.reject(rejected, 8)?;
    assert!(matches!(store.mark_stale(rejected, 9), Err(StoreError::WrongState { state: S::Rejected, .. })));
    Ok(())
}

#[test]
fn create_rejected_writes_a_record_and_its_rejection_in_one_append() -> Result {
    let dir = tempfile::tempdir()?;
    let counting = std::sync::Arc::new(vsh_store::FaultyBackend::new(crate::common::backend(dir.path())?, None));
    let store =
        TransactionStore::open_with(counting.clone(), vsh_store::TxStoreConfig::default(), &crate::common::key())?;
    let auto = record(b"unwritten preview", S::AutoApproved);
    let before = counting.counts();
    let rejected = store.create_rejected(&auto, 7)?;
    let after = counting.counts();
    assert_eq!((rejected.state, rejected.sequence), (S::Rejected, 1));
    assert_eq!((after.writes - before.writes, after.fsyncs - before.fsyncs), (1, 1), "one append, one barrier");
    let states: Vec<_> = store.history(auto.id)?.iter().map(|version| version.record.state).collect();
    assert_eq!(states, [S::AutoApproved, S::Rejected]);
    assert_eq!(self::store(dir.path())?.get(auto.id)?.map(|record| record.state), Some(S::Rejected));
    // The checks of a create and of a reject, and nothing written for a refused one.
    assert!(matches!(store.create_rejected(&auto, 9), Err(StoreError::Duplicate { .. })));
    let ended = record(b"committed already", S::Committed);
    assert!(store.create_rejected(&ended, 9).is_err());
    assert_eq!(store.get(ended.id)?, None);
    Ok(())
}

#[test]
fn pending_requests_and_grants_expire_at_the_exclusive_edge() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let request = record(b"request", S::PendingApproval).with_pending_expiry(10_000);
    store.create(&request)?;
    let forever = pending(&store, b"no expiry")?;
    let approved = pending(&store, b"approved")?;
    store.approve(approved, &ApprovalGrant::new(approved, alice(), 1_000, 8_000)?)?;
    assert_eq!(store.expire_due(7_999)?, Vec::<TransactionId>::new());
    assert_eq!(store.get(approved)?.map(|record| record.state), Some(S::Approved));
    // A lapsed approval is dropped: the work waits for one again (ux68 M6).
    assert_eq!(store.expire_due(8_000)?, Vec::<TransactionId>::new());
    let waiting = store.get(approved)?.unwrap();
    assert_eq!((waiting.state, waiting.approval), (S::PendingApproval, None));
    assert_eq!(store.expire_due(9_999)?, Vec::<TransactionId>::new());
    assert_eq!(store.expire_due(10_000)?, vec![request.id]);
    assert_eq!(store.expire_due(u64::MAX)?, Vec::<TransactionId>::new());
    let reopened = self::store(dir.path())?;
    assert_eq!(reopened.get(request.id)?.map(|record| record.state), Some(S::Expired));
    assert_eq!(reopened.get(approved)?.map(|record| record.state), Some(S::PendingApproval));
    assert_eq!(reopened.get(forever)?.map(|record| record.state), Some(S::PendingApproval));
    // Approved again, it commits under the new grant.
    store.approve(approved, &ApprovalGrant::new(approved, alice(), 11_000, 20_000)?)?;
    assert_eq!(store.reserve(approved, 12_000)?.state(), S::Reserved);
    let states: Vec<_> = store.history(approved)?.iter().map(|version| version.record.state).collect();
    assert_eq!(states, [S::PendingApproval, S::Approved, S::PendingApproval, S::Approved, S::Reserved]);
    Ok(())
}

#[test]
fn approving_a_lapsed_request_expires_it() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let request = record(b"lapsed", S::PendingApproval).with_pending_expiry(5_000);
    store.create(&request)?;
    let grant = ApprovalGrant::new(request.id, alice(), 5_000, 9_000)?;
    assert!(matches!(
        store.approve(request.id, &grant),
        Err(StoreError::ApprovalExpired { expires_ms: 5_000, now_ms: 5_000, .. })
    ));
    assert_eq!(store.get(request.id)?.map(|record| record.state), Some(S::Expired));
    let timely = record(b"timely", S::PendingApproval).with_pending_expiry(5_000);
    store.create(&timely)?;
    let grant = ApprovalGrant::new(timely.id, alice(), 4_999, 9_000)?;
    assert_eq!(store.approve(timely.id, &grant)?.state, S::Approved);
    // The grant, not the request's expiry, governs the reservation.
    assert_eq!(store.reserve(timely.id, 8_999)?.state(), S::Reserved);
    Ok(())
}

/// A commit's reservation is appended without an fsync of its own: nothing
/// changes in a workspace before the commit's next append (Committing, or
/// its outcome), whose fsync makes the reservation durable with it. Every
/// handle sees it at once; a refusal (an expiry) is still fsynced.
#[test]
fn a_commit_reservation_is_seen_at_once_and_made_durable_by_the_next_append() -> Result {
    use std::sync::Arc;
    use vsh_store::{FaultyBackend, TxStoreConfig};
    let dir = tempfile::tempdir()?;
    let counting = Arc::new(FaultyBackend::new(crate::common::backend(dir.path())?, None));
    let txs = TransactionStore::open_with(counting.clone(), TxStoreConfig::default(), &crate::common::key())?;
    let auto = record(b"auto", S::AutoApproved);
    txs.create(&auto)?;
    let steps = |earlier: vsh_store::FaultCounts| {
        let now = counting.counts();
        (now.writes - earlier.writes, now.fsyncs - earlier.fsyncs)
    };
    let start = counting.counts();
    let mut reservation = txs.reserve_revalidating(auto.id, 10, None)?;
    assert_eq!(steps(start), (1, 0), "one append, no fsync");
    // Another handle sees it: the reservation is as exclusive as ever.
    let other = store(dir.path())?;
    assert_eq!(other.get(auto.id)?.map(|record| record.state), Some(S::Revalidating));
    assert!(matches!(other.reserve_revalidating(auto.id, 11, None), Err(StoreError::NotReservable { .. })));
    let reserved = counting.counts();
    txs.advance(&mut reservation, CommitStep::Committing, 12)?;
    assert_eq!(steps(reserved), (1, 1), "Committing is appended and fsynced");
    // A reservation refused because the approval expired records the expiry durably.
    let late = pending(&txs, b"late")?;
    txs.approve(late, &ApprovalGrant::new(late, alice(), 1_000, 5_000)?)?;
    let approved = counting.counts();
    assert!(matches!(txs.reserve_revalidating(late, 5_000, None), Err(StoreError::ApprovalLapsed { .. })));
    assert_eq!(steps(approved), (1, 1), "the lapse is appended and fsynced");
    Ok(())
}

#[test]
fn reserving_for_a_commit_is_one_append_and_may_create_the_record_in_it() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let auto = record(b"auto", S::AutoApproved);
    store.create(&auto)?;
    let frames = store.stats()?.frames;
    let mut reservation = store.reserve_revalidating(auto.id, 10, None)?;
    assert_eq!((reservation.state(), store.get(auto.id)?.map(|r| r.state)), (S::Revalidating, Some(S::Revalidating)));
    assert_eq!(store.stats()?.frames, frames + 2, "Reserved and Revalidating, appended together");
    assert_eq!(store.advance(&mut reservation, CommitStep::Committing, 11)?.state, S::Committing);
    assert!(matches!(
        store.reserve_revalidating(auto.id, 12, None),
        Err(StoreError::NotReservable { state: S::Committing, .. })
    ));
    // A record held in memory until now is created in the same append.
    let local = record(b"local", S::AutoApproved);
    assert!(store.get(local.id)?.is_none());
    let frames = store.stats()?.frames;
    let reservation = store.reserve_revalidating(local.id, 20, Some(&local))?;
    assert_eq!(store.stats()?.frames, frames + 3);
    let reopened = self::store(dir.path())?;
    let history: Vec<S> = reopened.history(local.id)?.iter().map(|version| version.record.state).collect();
    assert_eq!(history, [S::AutoApproved, S::Reserved, S::Revalidating]);
    assert_eq!(store.finish(reservation, CommitOutcome::Failed, 21)?.state, S::Failed);
    // A record already in the log is the log's, whatever the caller holds.
    assert!(matches!(
        store.reserve_revalidating(local.id, 22, Some(&local)),
        Err(StoreError::NotReservable { state: S::Failed, .. })
    ));
    // Another transaction's record is refused, and nothing is appended.
    let frames = store.stats()?.frames;
    let stranger = record(b"stranger", S::AutoApproved);
    assert!(matches!(
        store.reserve_revalidating(TransactionId::digest(b"someone"), 23, Some(&stranger)),
        Err(StoreError::InvalidRecord { .. })
    ));
    assert_eq!(store.stats()?.frames, frames);
    // A lapsed approval is dropped, durably, as by reserve.
    let late = pending(&store, b"late")?;
    store.approve(late, &ApprovalGrant::new(late, alice(), 1_000, 5_000)?)?;
    assert!(matches!(store.reserve_revalidating(late, 5_000, None), Err(StoreError::ApprovalLapsed { .. })));
    assert_eq!(self::store(dir.path())?.get(late)?.map(|record| record.state), Some(S::PendingApproval));
    Ok(())
}

/// ux66 F4: a commit killed before it applied anything (`Reserved` or
/// `Revalidating`) is released: durable work back where its reservation took
/// it, an approval with its grant, to commit again; work with no artifact (a
/// process-local preview, its contents gone with its process) fails; any
/// other state is refused, and the release is durable.
#[test]
fn a_released_reservation_gives_durable_work_back_to_its_approval() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let reviewed = pending(&store, b"reviewed")?;
    store.set_artifact(reviewed, BlobId::of(b"reviewed artifact"))?;
    let grant = ApprovalGrant::new(reviewed, alice(), 1_000, 9_000)?;
    store.approve(reviewed, &grant)?;
    let reservation = store.reserve(reviewed, 2_000)?;
    drop(reservation);
    let released = store.release_reservation(reviewed, 2_100)?;
    assert_eq!((released.state, released.approval), (S::Approved, Some(grant)));
    // It reserves again, and a second release from Revalidating holds too.
    let auto = record(b"auto", S::AutoApproved);
    store.create(&auto)?;
    store.set_artifact(auto.id, BlobId::of(b"auto artifact"))?;
    drop(store.reserve_revalidating(auto.id, 3_000, None)?);
    assert_eq!(store.release_reservation(auto.id, 3_100)?.state, S::AutoApproved);
    drop(store.reserve_revalidating(auto.id, 3_200, None)?);
    // Nothing to commit from: failed.
    let local = record(b"local", S::AutoApproved);
    drop(store.reserve_revalidating(local.id, 4_000, Some(&local))?);
    assert_eq!(store.release_reservation(local.id, 4_100)?.state, S::Failed);
    // Only a reservation is released.
    assert!(matches!(
        store.release_reservation(reviewed, 5_000),
        Err(StoreError::WrongState { op: "release", state: S::Approved, .. })
    ));
    let reopened = self::store(dir.path())?;
    assert_eq!(reopened.get(reviewed)?.map(|record| record.state), Some(S::Approved));
    assert_eq!(reopened.get(auto.id)?.map(|record| record.state), Some(S::Revalidating));
    assert_eq!(reopened.get(local.id)?.map(|record| record.state), Some(S::Failed));
    Ok(())
}
