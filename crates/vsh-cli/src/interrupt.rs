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
//! the run is over (printing its receipt); but one within [`SAME_PRESS`] of
//! the first is the same impatient press, kept (an approval and commit
//! stopped between the two said nothing, killed by the second before it
//! could say what stood). A commit that has already begun
//! is not cancelled, by the first signal nor any other (only `SIGKILL`
//! ends it, and recovery settles that): its own outcome stands.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use vsh::ExecutionCancellation;

/// The signals that cancel a run.
const CANCELLING: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// How soon after the first a second signal is the same press (Ctrl-C hit
/// twice), not a second request: kept, never ending the process at once.
const SAME_PRESS: std::time::Duration = std::time::Duration::from_secs(1);

/// What the one signal thread of the process and the phase in progress
/// share.
#[derive(Default)]
struct Shared {
    current: Mutex<Option<ExecutionCancellation>>,
    received: AtomicI32,
    over: AtomicBool,
    /// Whether a signal during a commit was told it cannot stop it (said
    /// once, however many come).
    told: AtomicBool,
    /// Whether a step that is never stopped halfway runs (an approval being
    /// recorded): a signal then is kept, never acted on at once.
    holding: AtomicBool,
    /// When the first signal of the phase came.
    first_at: Mutex<Option<std::time::Instant>>,
}

/// The process's signal thread, started by the first [`Interrupts::install`].
/// One for the process: a second `Signals` would be a second thread, and the
/// first, its phase over, would end the process at a signal the second's
/// phase catches (a rerun's commit after its run did that).
static SHARED: OnceLock<Arc<Shared>> = OnceLock::new();

/// One phase of the command line in which signals are caught (a run, a
/// commit, an approval and the commit after it). Dropped, it leaves the
/// signals acting as their defaults do (the process ends): the thread stays,
/// and does that. (Un-registering them would leave them ignored: the registry
/// never puts the default action back.)
pub(crate) struct Interrupts {
    shared: Arc<Shared>,
}

impl Interrupts {
    /// Catch the cancelling signals until the handle is dropped. A process
    /// has one phase at a time: the command line installs one per step and
    /// hands it down.
    pub(crate) fn install() -> std::io::Result<Self> {
        let shared = if let Some(shared) = SHARED.get() {
            Arc::clone(shared)
        } else {
            let shared = Arc::new(Shared::default());
            let signals = Signals::new(CANCELLING)?;
            let serving = Arc::clone(&shared);
            std::thread::Builder::new().name("vsh-signals".to_owned()).spawn(move || serve(signals, &serving))?;
            Arc::clone(SHARED.get_or_init(|| shared))
        };
        *shared.current.lock().unwrap_or_else(PoisonError::into_inner) = None;
        shared.received.store(0, Ordering::Release);
        shared.told.store(false, Ordering::Release);
        shared.holding.store(false, Ordering::Release);
        shared.over.store(false, Ordering::Release);
        *shared.first_at.lock().unwrap_or_else(PoisonError::into_inner) = None;
        Ok(Self { shared })
    }

    /// A fresh cancellation handle for the next attempt of the run, which
    /// the next signal cancels (at once, if one already came).
    pub(crate) fn arm(&self) -> ExecutionCancellation {
        let cancel = ExecutionCancellation::new();
        *self.shared.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(cancel.clone());
        if self.received().is_some() {
            cancel.cancel();
        }
        cancel
    }

    /// Keep every signal, acting on none, until the returned guard is
    /// dropped: for a step that must not end halfway (an approval being
    /// recorded; sec83 F3: a second Ctrl-C ended vsh there, the work left
    /// approved and nothing said). The first is [`Interrupts::received`].
    pub(crate) fn hold(&self) -> Holding<'_> {
        self.shared.holding.store(true, Ordering::Release);
        Holding(self)
    }

    /// The first signal received, if any.
    pub(crate) fn received(&self) -> Option<i32> {
        Some(self.shared.received.load(Ordering::Acquire)).filter(|signal| *signal != 0)
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

/// A step [`Interrupts::hold`] keeps signals from, until dropped.
pub(crate) struct Holding<'a>(&'a Interrupts);

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        self.0.shared.holding.store(false, Ordering::Release);
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        self.shared.over.store(true, Ordering::Release);
    }
}

/// The signal thread: each signal, by the phase it finds.
fn serve(mut signals: Signals, shared: &Shared) {
    for signal in signals.forever() {
        let over = shared.over.load(Ordering::Acquire);
        // A commit that has begun is never stopped halfway, by any number of
        // signals (sec81 1: a second Ctrl-C left the workspace half-written
        // until a later command rolled it back): it ends in a moment, as it
        // ends.
        let entered = shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(ExecutionCancellation::commit_entered);
        if shared.holding.load(Ordering::Acquire) && !over {
            let _ = shared.received.compare_exchange(0, signal, Ordering::AcqRel, Ordering::Acquire);
            continue;
        }
        if entered && !over {
            if shared.received.compare_exchange(0, signal, Ordering::AcqRel, Ordering::Acquire).is_err()
                && !shared.told.swap(true, Ordering::AcqRel)
            {
                let _ = std::io::Write::write_all(
                    &mut std::io::stderr(),
                    b"vsh: the commit has begun and is never stopped halfway: it ends in a moment\n",
                );
            }
            continue;
        }
        // The first signal of a phase is kept (its name is the one said).
        let first = shared.received.compare_exchange(0, signal, Ordering::AcqRel, Ordering::Acquire).is_ok();
        let mut first_at = shared.first_at.lock().unwrap_or_else(PoisonError::into_inner);
        if first {
            *first_at = Some(std::time::Instant::now());
        } else if !over && first_at.is_some_and(|at| at.elapsed() < SAME_PRESS) {
            // The same press: the first is being acted on.
            continue;
        }
        drop(first_at);
        if !first || over {
            // A second request, or no phase catches it: leave now, as the
            // default would have.
            let _ = signal_hook::low_level::emulate_default_handler(signal);
        }
        if let Some(cancel) = shared.current.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            cancel.cancel();
        }
    }
}
