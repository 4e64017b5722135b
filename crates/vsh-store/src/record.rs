//! [`TransactionRecord`], [`ApprovalGrant`] and [`CommitReservation`]: the
//! values the transaction log stores and hands out, and the rules every record
//! version must satisfy (checked on every append and again on every replay).
//!
//! The byte encoding of a record version is in [`crate::txlog`].

use vsh_types::{BlobId, PrincipalId, SnapshotId, TransactionId, TransactionState};

use crate::error::StoreError;

/// A reviewer's approval of one transaction, valid from `issued_ms` until
/// (excluding) `expires_ms`.
///
/// The principal is an opaque digest: vsh binds it to the approval and
/// records it, but authenticating the reviewer is the host's job, and so is
/// the clock (every time is milliseconds since the Unix epoch as the caller
/// supplies it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ApprovalGrant {
    transaction: TransactionId,
    principal: PrincipalId,
    issued_ms: u64,
    expires_ms: u64,
}

impl ApprovalGrant {
    /// A grant for `transaction` by `principal`. `expires_ms` must be after
    /// `issued_ms` ([`StoreError::InvalidGrant`] otherwise).
    pub fn new(
        transaction: TransactionId,
        principal: PrincipalId,
        issued_ms: u64,
        expires_ms: u64,
    ) -> Result<Self, StoreError> {
        if expires_ms <= issued_ms {
            return Err(StoreError::InvalidGrant { issued_ms, expires_ms });
        }
        Ok(Self { transaction, principal, issued_ms, expires_ms })
    }

    /// Build without checking, for the decoder (which checks the record as a whole).
    pub(crate) const fn from_parts(
        transaction: TransactionId,
        principal: PrincipalId,
        issued_ms: u64,
        expires_ms: u64,
    ) -> Self {
        Self { transaction, principal, issued_ms, expires_ms }
    }

    /// The approved transaction.
    pub const fn transaction(&self) -> TransactionId {
        self.transaction
    }

    /// Who approved it (an opaque digest; see the type's docs).
    pub const fn principal(&self) -> PrincipalId {
        self.principal
    }

    /// When the approval was given.
    pub const fn issued_ms(&self) -> u64 {
        self.issued_ms
    }

    /// The first instant at which the approval no longer holds.
    pub const fn expires_ms(&self) -> u64 {
        self.expires_ms
    }

    /// Whether the approval has lapsed at `now_ms`. Expiry is exclusive:
    /// `now_ms == expires_ms` is expired.
    pub const fn is_expired_at(&self, now_ms: u64) -> bool {
        now_ms >= self.expires_ms
    }
}

/// The durable record of one transaction: the latest version in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransactionRecord {
    /// The transaction.
    pub id: TransactionId,
    /// The observed base the transaction ran against.
    pub base_snapshot: SnapshotId,
    /// Where the transaction is in its lifecycle.
    pub state: TransactionState,
    /// The pending-approval artifact blob, once stored. Never changes once set.
    pub artifact: Option<BlobId>,
    /// The reviewer's grant, from the moment the transaction was approved.
    pub approval: Option<ApprovalGrant>,
    /// When a `PendingApproval` request lapses (exclusive), if ever. Set at creation.
    pub pending_expires_ms: Option<u64>,
    /// When the record was created (milliseconds since the Unix epoch, caller's clock).
    pub created_ms: u64,
    /// When the record last changed (milliseconds since the Unix epoch, caller's clock).
    pub updated_ms: u64,
    /// The version number: 0 when created, one more for each change. Set by the store.
    pub sequence: u64,
}

impl TransactionRecord {
    /// A fresh record in `state`, with no artifact, no approval and no
    /// pending-approval expiry, created and updated at `now_ms`.
    pub fn new(id: TransactionId, base_snapshot: SnapshotId, state: TransactionState, now_ms: u64) -> Self {
        Self {
            id,
            base_snapshot,
            state,
            artifact: None,
            approval: None,
            pending_expires_ms: None,
            created_ms: now_ms,
            updated_ms: now_ms,
            sequence: 0,
        }
    }

    /// The same record with a pending-approval expiry: once `now_ms >=
    /// expires_ms`, [`crate::TransactionStore::expire_due`] moves a
    /// `PendingApproval` record to `Expired`.
    #[must_use]
    pub fn with_pending_expiry(mut self, expires_ms: u64) -> Self {
        self.pending_expires_ms = Some(expires_ms);
        self
    }

    /// Whether this record is due to expire at `now_ms`: a pending request or
    /// a durable auto-approved preview past its expiry, or approved work
    /// whose grant has lapsed past it too (while its grant holds, the grant
    /// governs).
    pub fn is_due_to_expire(&self, now_ms: u64) -> bool {
        let past_window = self.pending_expires_ms.is_some_and(|expires| now_ms >= expires);
        match self.state {
            TransactionState::PendingApproval | TransactionState::AutoApproved => past_window,
            TransactionState::Approved => past_window && self.approval.is_some_and(|grant| grant.is_expired_at(now_ms)),
            _ => false,
        }
    }

    /// Whether this record is approved work whose grant has lapsed at
    /// `now_ms` within its own window (or with none): it waits for an
    /// approval again ([`crate::TransactionStore::expire_due`],
    /// [`crate::TransactionStore::reserve`]).
    pub fn has_lapsed_approval(&self, now_ms: u64) -> bool {
        self.state == TransactionState::Approved
            && self.approval.is_some_and(|grant| grant.is_expired_at(now_ms))
            && !self.is_due_to_expire(now_ms)
    }

    /// The next version of this record: same identity, `sequence + 1`.
    pub(crate) fn next_version(&self, updated_ms: u64) -> Option<Self> {
        Some(Self { updated_ms, sequence: self.sequence.checked_add(1)?, ..*self })
    }
}

/// The states a record may be created in: none of them needs an approval or a reservation.
pub(crate) const INITIAL_STATES: [TransactionState; 7] = [
    TransactionState::Created,
    TransactionState::Running,
    TransactionState::VirtualComplete,
    TransactionState::Denied,
    TransactionState::AutoApproved,
    TransactionState::PendingApproval,
    TransactionState::Failed,
];

/// Whether a record in `state` may carry a grant: only states reachable from `Approved`.
const fn may_carry_grant(state: TransactionState) -> bool {
    use TransactionState as S;
    matches!(
        state,
        S::Approved
            | S::Expired
            | S::Rejected
            | S::Reserved
            | S::Revalidating
            | S::Committing
            | S::Committed
            | S::Stale
            | S::Failed
            | S::RecoveryRequired
    )
}

/// The rules every record satisfies on its own.
pub(crate) fn check_consistent(record: &TransactionRecord) -> Result<(), &'static str> {
    if let Some(grant) = &record.approval {
        if grant.transaction != record.id {
            return Err("grant for another transaction");
        }
        if grant.expires_ms <= grant.issued_ms {
            return Err("grant expires before it is issued");
        }
        if !may_carry_grant(record.state) {
            return Err("grant on a record that was never approved");
        }
    } else if record.state == TransactionState::Approved {
        return Err("approved without a grant");
    }
    Ok(())
}

/// The rules for a new record (version 0).
pub(crate) fn check_created(record: &TransactionRecord) -> Result<(), &'static str> {
    if record.sequence != 0 {
        return Err("first version of a record is not sequence 0");
    }
    if !INITIAL_STATES.contains(&record.state) {
        return Err("record created in a state that needs an approval or reservation");
    }
    if record.approval.is_some() {
        return Err("record created with a grant");
    }
    check_consistent(record)
}

/// The rules for a version following `previous`.
pub(crate) fn check_successor(previous: &TransactionRecord, next: &TransactionRecord) -> Result<(), &'static str> {
    if Some(next.sequence) != previous.sequence.checked_add(1) {
        return Err("version out of sequence");
    }
    if next.base_snapshot != previous.base_snapshot
        || next.created_ms != previous.created_ms
        || next.pending_expires_ms != previous.pending_expires_ms
    {
        return Err("version changes a fixed field");
    }
    let artifact_set = match (previous.artifact, next.artifact) {
        (None, None) => false,
        (None, Some(_)) => true,
        (Some(before), Some(after)) if before == after => false,
        _ => return Err("version replaces or removes the artifact"),
    };
    match (previous.approval, next.approval) {
        // A lapsed approval is dropped as the work waits for one again.
        (Some(_), None)
            if previous.state == TransactionState::Approved && next.state == TransactionState::PendingApproval => {}
        (Some(before), after) if after != Some(before) => return Err("version changes the grant"),
        (None, Some(_))
            if !(previous.state == TransactionState::PendingApproval && next.state == TransactionState::Approved) =>
        {
            return Err("grant added outside approval");
        }
        _ => {}
    }
    if next.state == previous.state {
        if !artifact_set {
            return Err("version changes nothing");
        }
    } else if !previous.state.can_transition(next.state) {
        return Err("illegal state edge");
    }
    check_consistent(next)
}

/// The single-use right to commit one transaction, from [`crate::TransactionStore::reserve`].
///
/// It is not `Clone`: exactly one holder can move the transaction through
/// revalidation and commit, and [`crate::TransactionStore::finish`] consumes
/// it. It remembers the record version it last wrote, so a change made by
/// anyone else in the meantime (for example recovery failing the transaction)
/// makes it [`StoreError::ReservationLost`].
///
/// A reservation cannot be copied:
///
/// ```compile_fail
/// fn clonable<T: Clone>() {}
/// clonable::<vsh_store::CommitReservation>();
/// ```
///
/// and cannot be used again once it finished a commit:
///
/// ```compile_fail
/// use vsh_store::{CommitOutcome, CommitReservation, TransactionStore};
///
/// fn twice(store: &TransactionStore, reservation: CommitReservation) {
///     let _ = store.finish(reservation, CommitOutcome::Committed, 1);
///     let _ = store.finish(reservation, CommitOutcome::Committed, 2);
/// }
/// ```
#[derive(Debug)]
#[must_use = "an unused reservation leaves the transaction Reserved until recovery fails it"]
pub struct CommitReservation {
    pub(crate) transaction: TransactionId,
    pub(crate) base_snapshot: SnapshotId,
    pub(crate) artifact: Option<BlobId>,
    pub(crate) state: TransactionState,
    pub(crate) sequence: u64,
}

impl CommitReservation {
    /// The reserved transaction.
    pub const fn transaction(&self) -> TransactionId {
        self.transaction
    }

    /// The observed base the transaction ran against.
    pub const fn base_snapshot(&self) -> SnapshotId {
        self.base_snapshot
    }

    /// The pending-approval artifact, if one was stored.
    pub const fn artifact(&self) -> Option<BlobId> {
        self.artifact
    }

    /// The state the holder last moved the transaction to (`Reserved` at first).
    pub const fn state(&self) -> TransactionState {
        self.state
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TransactionState as S;

    fn id(seed: &[u8]) -> TransactionId {
        TransactionId::digest(seed)
    }

    fn record(state: S) -> TransactionRecord {
        TransactionRecord::new(id(b"t"), SnapshotId::digest(b"base"), state, 1_000)
    }

    fn grant(transaction: TransactionId, issued: u64, expires: u64) -> ApprovalGrant {
        ApprovalGrant::from_parts(transaction, PrincipalId::digest(b"ann"), issued, expires)
    }

    /// `previous` moved to `state`, with `change` applied to the new version.
    fn next(previous: &TransactionRecord, state: S, change: impl FnOnce(&mut TransactionRecord)) -> TransactionRecord {
        let mut next = previous.next_version(2_000).expect("a next version");
        next.state = state;
        change(&mut next);
        next
    }

    #[test]
    fn a_record_stands_on_its_own_only_with_a_grant_that_fits_it() {
        assert_eq!(check_consistent(&record(S::PendingApproval)), Ok(()));
        assert_eq!(check_consistent(&record(S::Approved)), Err("approved without a grant"));
        let mut approved = record(S::Approved);
        approved.approval = Some(grant(approved.id, 10, 20));
        assert_eq!(check_consistent(&approved), Ok(()));
        approved.approval = Some(grant(id(b"other"), 10, 20));
        assert_eq!(check_consistent(&approved), Err("grant for another transaction"));
        approved.approval = Some(grant(approved.id, 20, 20));
        assert_eq!(check_consistent(&approved), Err("grant expires before it is issued"));
        // Every state reachable from Approved may keep its grant; none before it may have one.
        let carrying = [
            S::Approved,
            S::Expired,
            S::Rejected,
            S::Reserved,
            S::Revalidating,
            S::Committing,
            S::Committed,
            S::Stale,
            S::Failed,
            S::RecoveryRequired,
        ];
        for tag in 1..=16 {
            let state = S::from_tag(tag).expect("a state tag");
            let mut with_grant = record(state);
            with_grant.approval = Some(grant(with_grant.id, 10, 20));
            let expected =
                if carrying.contains(&state) { Ok(()) } else { Err("grant on a record that was never approved") };
            assert_eq!(check_consistent(&with_grant), expected, "{state:?}");
        }
    }

    #[test]
    fn a_first_version_is_sequence_zero_in_an_initial_state_without_a_grant() {
        assert_eq!(check_created(&record(S::PendingApproval)), Ok(()));
        let mut later = record(S::PendingApproval);
        later.sequence = 1;
        assert_eq!(check_created(&later), Err("first version of a record is not sequence 0"));
        assert!(check_created(&record(S::Approved)).is_err());
        assert!(check_created(&record(S::Committed)).is_err());
        let mut granted = record(S::Failed);
        granted.approval = Some(grant(granted.id, 10, 20));
        assert_eq!(check_created(&granted), Err("record created with a grant"));
    }

    #[test]
    fn a_successor_follows_every_rule_of_the_log() {
        let pending = record(S::PendingApproval);
        let approve = |record: &mut TransactionRecord| record.approval = Some(grant(record.id, 1_500, 9_000));
        let approved = next(&pending, S::Approved, approve);
        assert_eq!(check_successor(&pending, &approved), Ok(()));
        // The sequence moves by exactly one.
        let mut skipped = approved;
        skipped.sequence = 2;
        assert_eq!(check_successor(&pending, &skipped), Err("version out of sequence"));
        // Fixed fields stay fixed.
        for change in [
            (|r: &mut TransactionRecord| r.base_snapshot = SnapshotId::digest(b"other")) as fn(&mut TransactionRecord),
            |r| r.created_ms = 7,
            |r| r.pending_expires_ms = Some(5),
        ] {
            let changed = next(&pending, S::Rejected, change);
            assert_eq!(check_successor(&pending, &changed), Err("version changes a fixed field"));
        }
        // An artifact may be set once, never replaced or removed.
        let with_artifact = next(&pending, S::PendingApproval, |r| r.artifact = Some(BlobId::of(b"a")));
        assert_eq!(check_successor(&pending, &with_artifact), Ok(()));
        let replaced = next(&with_artifact, S::PendingApproval, |r| r.artifact = Some(BlobId::of(b"b")));
        assert_eq!(check_successor(&with_artifact, &replaced), Err("version replaces or removes the artifact"));
        let removed = next(&with_artifact, S::Rejected, |r| r.artifact = None);
        assert_eq!(check_successor(&with_artifact, &removed), Err("version replaces or removes the artifact"));
        let kept = next(&with_artifact, S::Rejected, |_| {});
        assert_eq!(check_successor(&with_artifact, &kept), Ok(()));
        // A grant appears only by approving, and never changes afterwards.
        let granted_elsewhere = next(&pending, S::Rejected, approve);
        assert_eq!(check_successor(&pending, &granted_elsewhere), Err("grant added outside approval"));
        let reserved = next(&approved, S::Reserved, |_| {});
        assert_eq!(check_successor(&approved, &reserved), Ok(()));
        let regranted = next(&approved, S::Reserved, |r| r.approval = Some(grant(r.id, 1_500, 9_999)));
        assert_eq!(check_successor(&approved, &regranted), Err("version changes the grant"));
        let dropped = next(&approved, S::Reserved, |r| r.approval = None);
        assert_eq!(check_successor(&approved, &dropped), Err("version changes the grant"));
        // A version that changes nothing is refused; so is an illegal edge.
        let same = next(&pending, S::PendingApproval, |_| {});
        assert_eq!(check_successor(&pending, &same), Err("version changes nothing"));
        let illegal = next(&pending, S::Committed, |_| {});
        assert_eq!(check_successor(&pending, &illegal), Err("illegal state edge"));
        // And the new version must stand on its own.
        let approved_without = next(&pending, S::Approved, |_| {});
        assert!(check_successor(&pending, &approved_without).is_err());
    }
}
