//! [`Interrupt`]: how a caller ends a run from outside it (cancellation).
//!
//! The executor asks [`Interrupt::interrupted`] at every guest suspension (both
//! modes), while it waits for a worker slot, and every [`POLL`] while a worker
//! computes; an interrupted worker is killed. In process, a guest that
//! computes without suspending is ended only by its own time budget.

use std::time::Duration;

/// How often a wait on a worker looks at the interrupt.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// Something that can ask a run to stop. Implemented by the caller's
/// cancellation handle; it must be cheap and never block.
pub trait Interrupt: Sync {
    /// Whether the run should stop now.
    fn interrupted(&self) -> bool;
}

/// The interrupt of a run nobody can cancel.
#[derive(Debug, Clone, Copy, Default)]
pub struct Uninterrupted;

impl Interrupt for Uninterrupted {
    fn interrupted(&self) -> bool {
        false
    }
}

impl Interrupt for std::sync::atomic::AtomicBool {
    fn interrupted(&self) -> bool {
        self.load(std::sync::atomic::Ordering::Acquire)
    }
}
