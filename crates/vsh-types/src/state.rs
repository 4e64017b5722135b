//! [`TransactionState`] and its checked transition table.

use serde::{Deserialize, Serialize};

/// The lifecycle of a transaction.
///
/// ```text
/// Created -> Running -> VirtualComplete -> Denied | AutoApproved | PendingApproval | Failed
/// PendingApproval  -> Approved | Denied | Rejected | Expired | Stale | Failed
/// AutoApproved     -> PendingApproval | Rejected | Reserved | Expired | Stale | Failed
/// Approved         -> Reserved | Expired | Rejected | PendingApproval | Stale | Failed
/// Reserved         -> Revalidating | Failed | AutoApproved | Approved
/// Revalidating     -> Committing | Stale | Failed | AutoApproved | Approved
/// Committing       -> Committed | RecoveryRequired | Failed
/// RecoveryRequired -> Committed | Failed
/// ```
///
/// `Committing -> Failed` is the rollback of a commit that did not pass its
/// completion marker. `Reserved` or `Revalidating` back to `AutoApproved` or
/// `Approved` is a recovery's release of a commit killed before it applied
/// anything: the work, durable and unchanged, may commit again. Work
/// waiting for its decision or its commit (`PendingApproval`, `AutoApproved`,
/// `Approved`) becomes `Stale` when a listing, a review or an approval finds
/// the workspace moved under it (a commit finds it in `Revalidating`).
/// Approved work another run of the same work did already is `Failed`,
/// its commit refused before it began, as auto-approved work's is.
/// Terminal states: Denied, Rejected, Expired, Committed, Stale, Failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum TransactionState {
    /// Admitted, not yet running.
    Created,
    /// The program is running against the virtual image.
    Running,
    /// Execution finished; no decision yet.
    VirtualComplete,
    /// Policy refused the transaction.
    Denied,
    /// Policy approved the transaction without review.
    AutoApproved,
    /// The transaction waits for a reviewer.
    PendingApproval,
    /// A reviewer approved the transaction.
    Approved,
    /// A reviewer rejected the transaction.
    Rejected,
    /// The approval window passed.
    Expired,
    /// A commit holds the single-use reservation.
    Reserved,
    /// The commit is checking the transaction's dependencies.
    Revalidating,
    /// The commit is applying changes.
    Committing,
    /// The changes are on disk and verified.
    Committed,
    /// The workspace changed under the transaction; nothing was written.
    Stale,
    /// The transaction failed; the workspace holds its before state.
    Failed,
    /// A commit was interrupted after it began applying; recovery decides.
    RecoveryRequired,
}

/// A transition the table does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("transaction cannot move from {from:?} to {to:?}")]
pub struct TransitionError {
    /// The current state.
    pub from: TransactionState,
    /// The requested state.
    pub to: TransactionState,
}

impl TransactionState {
    /// Every state, in tag order.
    pub const ALL: [TransactionState; 16] = [
        Self::Created,
        Self::Running,
        Self::VirtualComplete,
        Self::Denied,
        Self::AutoApproved,
        Self::PendingApproval,
        Self::Approved,
        Self::Rejected,
        Self::Expired,
        Self::Reserved,
        Self::Revalidating,
        Self::Committing,
        Self::Committed,
        Self::Stale,
        Self::Failed,
        Self::RecoveryRequired,
    ];

    /// Whether the table allows `self -> next`.
    pub const fn can_transition(self, next: TransactionState) -> bool {
        use TransactionState as S;
        matches!(
            (self, next),
            (S::Created, S::Running | S::Failed)
                | (S::Running, S::VirtualComplete | S::Failed)
                | (S::VirtualComplete, S::Denied | S::AutoApproved | S::PendingApproval | S::Failed)
                | (S::PendingApproval, S::Approved | S::Denied | S::Rejected | S::Expired | S::Stale | S::Failed)
                | (
                    S::AutoApproved | S::Approved,
                    S::PendingApproval | S::Rejected | S::Reserved | S::Expired | S::Stale | S::Failed
                )
                | (S::Reserved, S::Revalidating | S::Failed | S::AutoApproved | S::Approved)
                | (S::Revalidating, S::Committing | S::Stale | S::Failed | S::AutoApproved | S::Approved)
                | (S::Committing, S::Committed | S::RecoveryRequired | S::Failed)
                | (S::RecoveryRequired, S::Committed | S::Failed)
        )
    }

    /// Move to `next` if the table allows it.
    pub fn transition(self, next: TransactionState) -> Result<TransactionState, TransitionError> {
        if self.can_transition(next) { Ok(next) } else { Err(TransitionError { from: self, to: next }) }
    }

    /// Whether the work was refused before any commit began (denied by the
    /// policy, rejected by a reviewer, or expired waiting): it never wrote
    /// the workspace and never will, so nothing needs its contents.
    pub fn was_refused(self) -> bool {
        matches!(self, Self::Denied | Self::Rejected | Self::Expired)
    }

    /// Whether no transition leaves this state.
    pub fn is_terminal(self) -> bool {
        Self::ALL.iter().all(|next| !self.can_transition(*next))
    }

    /// The canonical tag (1-based position in [`Self::ALL`]).
    pub fn tag(self) -> u8 {
        Self::ALL.iter().position(|state| *state == self).map_or(0, |index| index as u8 + 1)
    }

    /// Decode a canonical tag.
    pub fn from_tag(tag: u8) -> Option<Self> {
        Self::ALL.get(usize::from(tag).checked_sub(1)?).copied()
    }

    /// A lower-case name for display.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Running => "running",
            Self::VirtualComplete => "virtual-complete",
            Self::Denied => "denied",
            Self::AutoApproved => "auto-approved",
            Self::PendingApproval => "pending-approval",
            Self::Approved => "approved",
            Self::Rejected => "rejected",
            Self::Expired => "expired",
            Self::Reserved => "reserved",
            Self::Revalidating => "revalidating",
            Self::Committing => "committing",
            Self::Committed => "committed",
            Self::Stale => "stale",
            Self::Failed => "failed",
            Self::RecoveryRequired => "recovery-required",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TransactionState as S;

    #[test]
    fn terminal_states() {
        let terminal: Vec<_> = S::ALL.iter().copied().filter(|state| state.is_terminal()).collect();
        assert_eq!(terminal, vec![S::Denied, S::Rejected, S::Expired, S::Committed, S::Stale, S::Failed]);
    }

    /// Refused work is terminal and never reached a commit: no state it can
    /// come from passes through a commit's steps.
    #[test]
    fn refused_work_is_terminal_and_never_began_a_commit() {
        let refused: Vec<_> = S::ALL.iter().copied().filter(|state| state.was_refused()).collect();
        assert_eq!(refused, vec![S::Denied, S::Rejected, S::Expired]);
        for state in refused {
            assert!(state.is_terminal(), "{state:?}");
            for committing in [S::Reserved, S::Revalidating, S::Committing, S::RecoveryRequired] {
                assert!(!committing.can_transition(state), "{committing:?} -> {state:?}");
            }
        }
    }

    #[test]
    fn tags_round_trip_and_table_is_checked() {
        for state in S::ALL {
            assert_eq!(S::from_tag(state.tag()), Some(state));
        }
        assert_eq!(S::from_tag(0), None);
        assert_eq!(S::from_tag(17), None);
        assert!(S::Reserved.transition(S::Revalidating).is_ok());
        assert!(S::PendingApproval.transition(S::Reserved).is_err());
        assert!(S::Committed.transition(S::Failed).is_err());
        // A commit killed before it applied anything goes back to its approval.
        for released in [S::AutoApproved, S::Approved] {
            assert!(S::Reserved.can_transition(released) && S::Revalidating.can_transition(released));
            assert!(!S::Committing.can_transition(released) && !S::RecoveryRequired.can_transition(released));
        }
        // Every state except Created is reachable from Created.
        let mut reached = vec![S::Created];
        let mut frontier = vec![S::Created];
        while let Some(state) = frontier.pop() {
            for next in S::ALL {
                if state.can_transition(next) && !reached.contains(&next) {
                    reached.push(next);
                    frontier.push(next);
                }
            }
        }
        assert_eq!(reached.len(), S::ALL.len());
    }
}
