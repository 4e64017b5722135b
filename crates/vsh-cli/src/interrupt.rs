//! Ctrl-C, `SIGTERM` and `SIGHUP` while a program or command runs.
//!
//! By default any of them ends the process at once, and a real command's
//! processes (their own process group, their own uid) would run on without
//! anyone to stop them. While a run is in progress the command line instead
//! receives them on a thread of its own ([`Interrupts`]): the first cancels
//! the run, whose machinery kills the command's whole tree, unmounts its
//! candidate and records nothing as committed; the command then exits with
//! 128 plus the signal's number, as a shell reports a death by it. A second
//! signal ends the process at once, as before, and so does any signal once
//! the run is over (printing its receipt). A commit that has already begun
//! is not cancelled, by the first signal nor any other (only `SIGKILL`
//! ends it, and recovery settles that): its own outcome stands.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use vsh::ExecutionCancellation;

/// The signals that cancel a run.
const CANCELLING: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// The signal handlers of one run. Dropped, it leaves the signals acting as
/// their defaults do (the process ends): the thread stays, and does that. (Un-
/// registering them would leave them ignored: the registry never puts the
/// default action back.)
pub(crate) struct Interrupts {
    current: Arc<Mutex<Option<ExecutionCancellation>>>,
    received: Arc<AtomicI32>,
    over: Arc<AtomicBool>,
}

impl Interrupts {
    /// Receive the cancelling signals on a thread until dropped.
    pub(crate) fn install() -> std::io::Result<Self> {
        let mut signals = Signals::new(CANCELLING)?;
        let current: Arc<Mutex<Option<ExecutionCancellation>>> = Arc::default();
        let received = Arc::new(AtomicI32::new(0));
        let over = Arc::new(AtomicBool::new(false));
        {
            let (current, received, over) = (Arc::clone(&current), Arc::clone(&received), Arc::clone(&over));
            std::thread::Builder::new().name("vsh-signals".to_owned()).spawn(move || {
                for signal in signals.forever() {
                    // A commit that has begun is never stopped halfway, by
                    // any number of signals (sec81 1: a second Ctrl-C left
                    // the workspace half-written until a later command
                    // rolled it back): it ends in a moment, as it ends.
                    let entered = current
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .as_ref()
                        .is_some_and(ExecutionCancellation::commit_entered);
                    if entered && !over.load(Ordering::Acquire) {
                        if received.swap(signal, Ordering::AcqRel) != 0 {
                            let _ = std::io::Write::write_all(
                                &mut std::io::stderr(),
                                b"vsh: the commit has begun and is never stopped halfway: it ends in a moment\n",
                            );
                        }
                        continue;
                    }
                    if received.swap(signal, Ordering::AcqRel) != 0 || over.load(Ordering::Acquire) {
                        // The second one, or the run is over: leave now, as
                        // the default would have.
                        let _ = signal_hook::low_level::emulate_default_handler(signal);
                    }
                    if let Some(cancel) = current.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
                        cancel.cancel();
                    }
                }
            })?;
        }
        Ok(Self { current, received, over })
    }

    /// A fresh cancellation handle for the next attempt of the run, which
    /// the next signal cancels (at once, if one already came).
    pub(crate) fn arm(&self) -> ExecutionCancellation {
        let cancel = ExecutionCancellation::new();
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(cancel.clone());
        if self.received().is_some() {
            cancel.cancel();
        }
        cancel
    }

    /// The first signal received, if any.
    pub(crate) fn received(&self) -> Option<i32> {
        Some(self.received.load(Ordering::Acquire)).filter(|signal| *signal != 0)
    }

    /// The exit code for a run `signal` cancelled: 128 plus its number.
    pub(crate) fn exit_code(signal: i32) -> u8 {
        u8::try_from(128 + signal).unwrap_or(u8::MAX)
    }

    /// The signal's name for a message.
    pub(crate) fn name(signal: i32) -> &'static str {
        match signal {
            SIGINT => "SIGINT",
            SIGTERM => "SIGTERM",
            SIGHUP => "SIGHUP",
            _ => "a signal",
        }
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        self.over.store(true, Ordering::Release);
    }
}
