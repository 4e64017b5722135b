//! Races on one record between handles in threads and in processes: exactly
//! one compare-and-transition or reservation wins.
//!
//! The process test re-runs this test binary with `VSH_STORE_TEST_CHILD` set
//! to the data directory; [`child_process_role`] is then the child's entry
//! point (and a no-op in an ordinary run).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use vsh_store::StoreError;
use vsh_types::{TransactionId, TransactionState as S};

use crate::Result;
use crate::common::{record, store};

/// How many records each multi-process round races on.
const RECORDS: u8 = 16;
/// The environment variable that makes this binary a child.
const CHILD_ENV: &str = "VSH_STORE_TEST_CHILD";
/// The child's name for itself (its output file).
const CHILD_NAME_ENV: &str = "VSH_STORE_TEST_CHILD_NAME";
/// How long anything in these tests may wait.
const DEADLINE: Duration = Duration::from_mins(1);

fn race_id(index: u8) -> TransactionId {
    record(&[b'p', index], S::AutoApproved).id
}

#[test]
fn two_handles_racing_one_cas_have_exactly_one_winner() -> Result {
    let dir = tempfile::tempdir()?;
    let setup = store(dir.path())?;
    for round in 0..20_u8 {
        let rec = record(&[b'r', round], S::AutoApproved);
        setup.create(&rec)?;
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let root = dir.path().to_owned();
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    let store = store(&root).expect("open");
                    barrier.wait();
                    store.compare_and_transition(rec.id, S::AutoApproved, S::Reserved, 9)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|handle| handle.join().expect("thread")).collect();
        assert_eq!(results.iter().filter(|result| result.is_ok()).count(), 1, "round {round}: {results:?}");
        assert!(results.iter().any(|result| matches!(
            result,
            Err(StoreError::StateConflict { expected: S::AutoApproved, actual: S::Reserved, .. })
        )));
        assert_eq!(setup.get(rec.id)?.map(|record| record.state), Some(S::Reserved));
    }
    Ok(())
}

#[test]
fn two_handles_racing_to_reserve_have_exactly_one_winner() -> Result {
    let dir = tempfile::tempdir()?;
    let setup = store(dir.path())?;
    for index in 0..RECORDS {
        setup.create(&record(&[b'p', index], S::AutoApproved))?;
    }
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let root = dir.path().to_owned();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || -> Vec<bool> {
                let store = store(&root).expect("open");
                barrier.wait();
                (0..RECORDS).map(|index| store.reserve(race_id(index), 5).is_ok()).collect()
            })
        })
        .collect();
    let wins: Vec<Vec<bool>> = handles.into_iter().map(|handle| handle.join().expect("thread")).collect();
    for (index, (left, right)) in wins[0].iter().zip(&wins[1]).enumerate() {
        assert!(left ^ right, "record {index}: {left} and {right}");
    }
    Ok(())
}

/// The child's side: open the store, wait for the start signal, try to
/// reserve every record, and write one line per record ("win" or the error)
/// to `<dir>/<name>.out`.
#[test]
fn child_process_role() -> Result {
    let Some(dir) = std::env::var_os(CHILD_ENV).map(PathBuf::from) else { return Ok(()) };
    let name = std::env::var(CHILD_NAME_ENV)?;
    let store = store(&dir)?;
    std::fs::write(dir.join(format!("{name}.ready")), b"")?;
    let started = Instant::now();
    while !dir.join("go").exists() {
        if started.elapsed() > DEADLINE {
            return Err("no start signal".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut lines = String::new();
    for index in 0..RECORDS {
        match store.reserve(race_id(index), 5) {
            Ok(reservation) => {
                lines.push_str("win\n");
                store.finish(reservation, vsh_store::CommitOutcome::Failed, 6)?;
            }
            Err(StoreError::NotReservable { .. }) => lines.push_str("lose\n"),
            Err(other) => writeln!(lines, "error {other}")?,
        }
    }
    std::fs::write(dir.join(format!("{name}.out")), lines)?;
    Ok(())
}

fn spawn_child(dir: &Path, name: &str) -> Result<Child> {
    Ok(Command::new(std::env::current_exe()?)
        .args(["concurrency::child_process_role", "--exact", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .env(CHILD_NAME_ENV, name)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?)
}

/// Wait for `child` until the deadline; kill it if it overstays.
fn wait(mut child: Child, until: Instant) -> Result {
    loop {
        if let Some(status) = child.try_wait()? {
            return if status.success() { Ok(()) } else { Err(format!("child failed: {status}").into()) };
        }
        if Instant::now() > until {
            child.kill()?;
            child.wait()?;
            return Err("child timed out".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn two_processes_racing_to_reserve_have_exactly_one_winner() -> Result {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("data");
    std::fs::create_dir(&root)?;
    let setup = store(&root)?;
    for index in 0..RECORDS {
        setup.create(&record(&[b'p', index], S::AutoApproved))?;
    }
    let names = ["left", "right"];
    let children = names.iter().map(|name| spawn_child(&root, name)).collect::<Result<Vec<_>>>()?;
    let until = Instant::now() + DEADLINE;
    while !names.iter().all(|name| root.join(format!("{name}.ready")).exists()) {
        assert!(Instant::now() < until, "children never became ready");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::fs::write(root.join("go"), b"")?;
    for child in children {
        wait(child, until)?;
    }
    let outputs: Vec<Vec<String>> = names
        .iter()
        .map(|name| -> Result<Vec<String>> {
            Ok(std::fs::read_to_string(root.join(format!("{name}.out")))?.lines().map(str::to_owned).collect())
        })
        .collect::<Result<_>>()?;
    assert_eq!((outputs[0].len(), outputs[1].len()), (usize::from(RECORDS), usize::from(RECORDS)));
    for (index, (left, right)) in (0..RECORDS).zip(outputs[0].iter().zip(&outputs[1])) {
        let lines = [left.as_str(), right.as_str()];
        assert!(lines == ["win", "lose"] || lines == ["lose", "win"], "record {index}: {lines:?}");
        // The winner finished its reservation; the loser changed nothing.
        let state = setup.get(race_id(index))?.map(|record| (record.state, record.sequence));
        assert_eq!(state, Some((S::Failed, 2)), "record {index}");
    }
    Ok(())
}
