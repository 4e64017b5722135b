//! Advisory locks: exclusion between holders, release on drop.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use vsh_types::VPath;

use super::{Fixture, STRATEGIES, mode_of, p};
use crate::HostError;

/// How long a blocked lock is given to (wrongly) succeed. A too-short wait can
/// only miss a bug, never fail a correct implementation.
const MUST_STAY_BLOCKED: Duration = Duration::from_millis(300);

/// Upper bound for a lock that must be granted; only reached if it never is.
const MUST_BE_GRANTED: Duration = Duration::from_secs(30);

#[test]
fn lock_exclusive_blocks_a_second_exclusive_lock_until_dropped() {
    for strategy in STRATEGIES {
        let fx = Fixture::new(strategy);
        let dir = &fx.dir;
        let guard = dir.lock_exclusive(&p("writer.lock")).unwrap();
        assert_eq!(mode_of(&fx.ws("writer.lock")), 0o600);
        let (sender, receiver) = mpsc::channel();
        thread::scope(|scope| {
            scope.spawn(move || {
                let second = dir.lock_exclusive(&p("writer.lock")).unwrap();
                sender.send(()).unwrap();
                drop(second);
            });
            assert_eq!(receiver.recv_timeout(MUST_STAY_BLOCKED), Err(RecvTimeoutError::Timeout), "{strategy:?}");
            drop(guard);
            receiver.recv_timeout(MUST_BE_GRANTED).expect("the second lock is granted once the first is dropped");
        });
    }
}

#[test]
fn shared_locks_coexist_and_exclude_an_exclusive_one() {
    let fx = Fixture::new(STRATEGIES[0]);
    let dir = &fx.dir;
    fx.mkdir("locks");
    let first = dir.lock_shared(&p("locks/store.lock")).unwrap();
    let second = dir.lock_shared(&p("locks/store.lock")).unwrap();
    let (sender, receiver) = mpsc::channel();
    thread::scope(|scope| {
        scope.spawn(move || {
            let exclusive = dir.lock_exclusive(&p("locks/store.lock")).unwrap();
            sender.send(()).unwrap();
            drop(exclusive);
        });
        assert_eq!(receiver.recv_timeout(MUST_STAY_BLOCKED), Err(RecvTimeoutError::Timeout));
        drop(first);
        assert_eq!(receiver.recv_timeout(MUST_STAY_BLOCKED), Err(RecvTimeoutError::Timeout));
        drop(second);
        receiver.recv_timeout(MUST_BE_GRANTED).expect("the exclusive lock is granted once both shared ones drop");
    });
}

#[test]
fn lock_refuses_what_is_not_a_regular_file() {
    for strategy in STRATEGIES {
        let fx = Fixture::new(strategy);
        fx.mkdir("d");
        fx.write("target", b"");
        fx.symlink("target", "link");
        for path in [p("d"), p("link"), VPath::root()] {
            let err = fx.dir.lock_exclusive(&path).unwrap_err();
            assert!(matches!(&err, HostError::NotAFile { path: at } if *at == path), "{strategy:?} {path}: {err:?}");
        }
        let err = fx.dir.lock_shared(&p("missing/lock")).unwrap_err();
        assert!(matches!(&err, HostError::NotFound { .. }), "{err:?}");
    }
}

#[test]
fn try_lock_takes_a_free_lock_and_never_waits_for_a_held_one() {
    let fx = Fixture::new(STRATEGIES[0]);
    let dir = &fx.dir;
    let held = dir.try_lock_exclusive(&p("commit.lock")).unwrap().expect("a free lock is taken");
    thread::scope(|scope| {
        let other = scope.spawn(|| dir.try_lock_exclusive(&p("commit.lock")).unwrap().is_none());
        assert!(other.join().unwrap(), "a held lock is not taken, and the call returns at once");
    });
    drop(held);
    assert!(dir.try_lock_exclusive(&p("commit.lock")).unwrap().is_some(), "free again once dropped");
}

#[test]
fn a_bounded_wait_tells_once_and_gives_up_with_a_typed_error() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    let fx = Fixture::new(STRATEGIES[0]);
    let dir = &fx.dir;
    let held = dir.lock_exclusive(&p("commit.lock")).unwrap();
    let told = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&told);
    let wait = crate::LockWait::within(Duration::from_millis(400)).with_notice(Duration::from_millis(100), move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let started = Instant::now();
    let error = thread::scope(|scope| scope.spawn(|| dir.lock_exclusive_within(&p("commit.lock"), &wait)).join())
        .unwrap()
        .expect_err("the lock stays held");
    let waited = started.elapsed();
    assert!(matches!(error, HostError::LockTimeout { waited_ms, .. } if waited_ms >= 400), "{error:?}");
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
    assert_eq!(told.load(Ordering::SeqCst), 1, "told once, after a moment");
    // A wait shorter than the notice delay tells nobody.
    told.store(0, Ordering::SeqCst);
    let counter = Arc::clone(&told);
    let quiet = crate::LockWait::within(Duration::from_millis(50)).with_notice(Duration::from_secs(10), move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let error = thread::scope(|scope| scope.spawn(|| dir.lock_exclusive_within(&p("commit.lock"), &quiet)).join())
        .unwrap()
        .expect_err("still held");
    assert!(matches!(error, HostError::LockTimeout { .. }));
    assert_eq!(told.load(Ordering::SeqCst), 0);
    // Released meanwhile: granted well within the wait.
    let (sender, receiver) = mpsc::channel();
    thread::scope(|scope| {
        scope.spawn(move || {
            let granted = dir.lock_exclusive_within(&p("commit.lock"), &crate::LockWait::within(MUST_BE_GRANTED));
            sender.send(granted.is_ok()).unwrap();
        });
        thread::sleep(Duration::from_millis(50));
        drop(held);
        assert!(receiver.recv_timeout(MUST_BE_GRANTED).unwrap(), "granted once released");
    });
}

#[test]
fn a_wait_that_gave_up_never_keeps_the_lock_it_is_granted_later() {
    let fx = Fixture::new(STRATEGIES[0]);
    let dir = &fx.dir;
    let held = dir.lock_exclusive(&p("commit.lock")).unwrap();
    let gave_up = dir.lock_exclusive_within(&p("commit.lock"), &crate::LockWait::within(Duration::from_millis(50)));
    assert!(matches!(gave_up, Err(HostError::LockTimeout { .. })), "{gave_up:?}");
    // The waiter the call left behind is granted the lock once it is free,
    // and lets it go at once: the next taker gets it.
    drop(held);
    let deadline = std::time::Instant::now() + MUST_BE_GRANTED;
    let mut taken = None;
    while taken.is_none() && std::time::Instant::now() < deadline {
        taken = dir.try_lock_exclusive(&p("commit.lock")).unwrap();
        thread::sleep(Duration::from_millis(5));
    }
    assert!(taken.is_some(), "the abandoned waiter let the lock go");
}
