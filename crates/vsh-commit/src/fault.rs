//! Named fault points for crash injection: [`FaultPoint`], the
//! [`FaultInjector`] trait, and two injectors ([`NoFaults`], [`CrashAt`]).
//!
//! A commit (or a recovery) asks its injector at every durable step whether
//! to stop there. Stopping returns [`crate::CommitError::FaultInjected`] at
//! once, with no cleanup and no ledger call, so the disk is exactly what a
//! crash at that instant would leave (the commit lock is released, as a dying
//! process's lock is). An injector may also act at a point and continue, for
//! example to race the commit by swapping a directory for a symlink.

use std::fmt;
use std::sync::Mutex;

/// A durable step of the commit protocol (see the crate docs for the order).
///
/// Per-operation points carry the operation's index in the plan. Intents are
/// synced in one batch, so every `IntentSynced(i)` names the same disk state;
/// likewise every `DoneSynced(i)`. They are distinct points all the same, so a
/// harness that stops at each covers the batching too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum FaultPoint {
    /// The plan and every staged file and symlink are written, none of them
    /// durable yet; revalidation has not begun.
    Staged,
    /// Revalidation passed under the lock; the intents are not written yet.
    Revalidated,
    /// The plan is durable (with the staged nodes and the intents: one batch
    /// of barriers makes all three durable, the points follow one another).
    PlanSynced,
    /// Every file and symlink is staged and durable, with the directories
    /// that lead to them.
    StageSynced,
    /// The intent of operation `i` is durable (with the whole batch).
    IntentSynced(u32),
    /// The ledger holds Committing.
    CommitStatePersisted,
    /// Operation `i` was applied (not yet synced).
    OperationApplied(u32),
    /// The done record of operation `i` is durable, with every operation's
    /// effect (the directories and nodes they changed are synced).
    DoneSynced(u32),
    /// Every operation is applied and synced.
    Applied,
    /// Every diff path holds its after state.
    Verified,
    /// The completion marker is written and synced.
    CommitMarkerSynced,
    /// The ledger holds Committed.
    CommittedStatePersisted,
    /// The committed transaction's directory was moved into `trash/` in one
    /// rename; removing it from there is garbage collection.
    Discarded,
    /// Cleanup removed the quarantined nodes; the transaction directory remains.
    QuarantineRemoved,
    /// Recovery undid operation `i` while rolling back.
    Undone(u32),
    /// The rollback's settled record is durable; cleanup has not begun.
    Settled,
    /// Cleanup finished its step `i` (see `txndir::Cleanup` for the order).
    CleanedUp(u32),
    /// An operator's restore finished plan entry `e` (its index in the plan's
    /// entries, not an operation index).
    Restored(u32),
}

impl fmt::Display for FaultPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::IntentSynced(index) => write!(f, "intent-synced({index})"),
            Self::OperationApplied(index) => write!(f, "operation-applied({index})"),
            Self::DoneSynced(index) => write!(f, "done-synced({index})"),
            Self::Undone(index) => write!(f, "undone({index})"),
            Self::CleanedUp(step) => write!(f, "cleaned-up({step})"),
            Self::Restored(index) => write!(f, "restored({index})"),
            Self::Settled => f.write_str("settled"),
            Self::Staged => f.write_str("staged"),
            Self::PlanSynced => f.write_str("plan-synced"),
            Self::StageSynced => f.write_str("stage-synced"),
            Self::Revalidated => f.write_str("revalidated"),
            Self::CommitStatePersisted => f.write_str("commit-state-persisted"),
            Self::Applied => f.write_str("applied"),
            Self::Verified => f.write_str("verified"),
            Self::CommitMarkerSynced => f.write_str("commit-marker-synced"),
            Self::CommittedStatePersisted => f.write_str("committed-state-persisted"),
            Self::QuarantineRemoved => f.write_str("quarantine-removed"),
            Self::Discarded => f.write_str("discarded"),
        }
    }
}

/// Decides, at each [`FaultPoint`], whether the commit stops there as if the
/// process had crashed.
pub trait FaultInjector {
    /// `true` to stop at `point`. May act on the host before answering.
    fn crash_at(&self, point: FaultPoint) -> bool;
}

/// Never stops.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoFaults;

impl FaultInjector for NoFaults {
    fn crash_at(&self, _: FaultPoint) -> bool {
        false
    }
}

/// Stops at one point, and records every point it was asked about.
#[derive(Debug, Default)]
pub struct CrashAt {
    point: Option<FaultPoint>,
    seen: Mutex<Vec<FaultPoint>>,
}

impl CrashAt {
    /// Stop at `point`.
    pub fn new(point: FaultPoint) -> CrashAt {
        CrashAt { point: Some(point), seen: Mutex::default() }
    }

    /// Never stop; only record (to list the points a commit passes).
    pub fn recording() -> CrashAt {
        CrashAt::default()
    }

    /// The points asked about so far, in order.
    pub fn seen(&self) -> Vec<FaultPoint> {
        self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl FaultInjector for CrashAt {
    fn crash_at(&self, point: FaultPoint) -> bool {
        self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(point);
        self.point == Some(point)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_points_print_as_kebab_case_names_with_their_index() {
        let cases = [
            (FaultPoint::Staged, "staged"),
            (FaultPoint::PlanSynced, "plan-synced"),
            (FaultPoint::IntentSynced(3), "intent-synced(3)"),
            (FaultPoint::OperationApplied(0), "operation-applied(0)"),
            (FaultPoint::DoneSynced(12), "done-synced(12)"),
            (FaultPoint::CommitMarkerSynced, "commit-marker-synced"),
            (FaultPoint::Undone(4), "undone(4)"),
            (FaultPoint::CleanedUp(7), "cleaned-up(7)"),
            (FaultPoint::Restored(2), "restored(2)"),
            (FaultPoint::Settled, "settled"),
            (FaultPoint::QuarantineRemoved, "quarantine-removed"),
            (FaultPoint::Discarded, "discarded"),
        ];
        for (point, name) in cases {
            assert_eq!(point.to_string(), name);
        }
    }
}
