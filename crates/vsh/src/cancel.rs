//! [`ExecutionCancellation`]: one request's cancellation handle.
//!
//! A request can be cancelled until its commit *enters*; from then on the real
//! commit (or recovery) outcome wins and `cancel` returns `false`. The two are
//! decided by one atomic compare-and-swap, so a cancel and a commit racing from
//! two threads never both succeed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

const LIVE: u8 = 0;
const CANCELLED: u8 = 1;
const COMMIT_ENTERED: u8 = 2;

/// A shared, one-request cancellation handle. Clones share the same state.
#[derive(Debug, Clone, Default)]
pub struct ExecutionCancellation {
    state: Arc<AtomicU8>,
}

impl ExecutionCancellation {
    /// A live handle.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancel the request. Returns `true` if the request is now cancelled (or
    /// already was), `false` once its commit has entered: the commit's real
    /// outcome then stands.
    pub fn cancel(&self) -> bool {
        match self.state.compare_exchange(LIVE, CANCELLED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => true,
            Err(current) => current == CANCELLED,
        }
    }

    /// Whether the request was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.state.load(Ordering::Acquire) == CANCELLED
    }

    /// Whether the request's commit has entered (cancellation no longer possible).
    pub fn commit_entered(&self) -> bool {
        self.state.load(Ordering::Acquire) == COMMIT_ENTERED
    }

    /// Enter the commit: `false` if the request was cancelled first.
    pub(crate) fn enter_commit(&self) -> bool {
        match self.state.compare_exchange(LIVE, COMMIT_ENTERED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => true,
            Err(current) => current == COMMIT_ENTERED,
        }
    }
}

/// A program's execution asks the handle between the guest's steps (see
/// [`vsh_monty::MontyExecutor::execute_interruptible`]).
impl vsh_monty::Interrupt for ExecutionCancellation {
    fn interrupted(&self) -> bool {
        self.is_cancelled()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_and_commit_entry_exclude_each_other() {
        let cancelled = ExecutionCancellation::new();
        assert!(cancelled.cancel());
        assert!(cancelled.cancel(), "cancelling twice still reports cancelled");
        assert!(!cancelled.enter_commit());
        assert!(cancelled.is_cancelled());

        let entered = ExecutionCancellation::new();
        assert!(entered.enter_commit());
        assert!(!entered.cancel());
        assert!(entered.commit_entered() && !entered.is_cancelled());

        for _ in 0..2_000 {
            let handle = ExecutionCancellation::new();
            let other = handle.clone();
            let (cancelled, entered) = std::thread::scope(|scope| {
                let cancel = scope.spawn(|| other.cancel());
                let enter = scope.spawn(|| handle.enter_commit());
                (cancel.join().unwrap(), enter.join().unwrap())
            });
            assert!(cancelled != entered, "exactly one of cancel and commit entry wins");
        }
    }
}
