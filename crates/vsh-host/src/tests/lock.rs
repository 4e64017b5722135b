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
