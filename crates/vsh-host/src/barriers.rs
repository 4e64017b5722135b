//! [`concurrently`]: issue many barriers (`fsync`s) at once. A journaling
//! filesystem commits the barriers that wait at the same time together (ext4
//! measured here: 1,000 file `fsync`s took 190-270 ms one after another, 40-58
//! ms from 8 to 32 threads), so a caller that must make many of its own files
//! and directories durable pays for a few journal commits instead of one each.

/// The most threads [`concurrently`] uses.
pub const MAX_BARRIER_THREADS: usize = 16;

/// Fewer barriers than this (up to four) are issued on the caller's thread.
/// From five on, the caller issues one and a thread each the others. Alone,
/// four directory `fsync`s on this machine's ext4 took 0.64 ms one after
/// another and 0.41 ms from four threads (C, medians of 4 runs of 200), but
/// with four committers at once the threads cost more than they save: four
/// threads of tiny auto-commits on separate workspaces ran 445 and 489 tx/s
/// with threads from two barriers on, 542 and 558 tx/s with small batches on
/// the caller's thread, and a single thread's tiny auto was unchanged (2.87
/// and 3.21 against 2.92 and 3.06 ms p50; `bench/compare`, alternated runs;
/// see docs/performance.md). A commit's small batches (three or four
/// barriers) therefore run in a row; large ones (a commit's staged files)
/// still run at once.
pub const MIN_CONCURRENT_BARRIERS: usize = 5;

/// Run `barrier` on every item of `items`, on up to [`MAX_BARRIER_THREADS`]
/// threads, this one among them (on this one alone for fewer than
/// [`MIN_CONCURRENT_BARRIERS`] items), and return the first error any of them
/// met, after all have ended (a failed barrier never leaves another one
/// running; on this thread, the first error ends the loop).
///
/// # Errors
///
/// The first error, in item order, among the barriers that failed.
pub fn concurrently<T: Sync, E: Send>(items: &[T], barrier: impl Fn(&T) -> Result<(), E> + Sync) -> Result<(), E> {
    if items.len() < MIN_CONCURRENT_BARRIERS {
        return items.iter().try_for_each(&barrier);
    }
    let threads = items.len().min(MAX_BARRIER_THREADS);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Vec<(usize, E)>> = std::thread::scope(|scope| {
        let work = || {
            let mut failed = Vec::new();
            loop {
                let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(item) = items.get(index) else { break };
                if let Err(error) = barrier(item) {
                    failed.push((index, error));
                }
            }
            failed
        };
        // The caller is one of the threads.
        let handles: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
        let mut results = vec![work()];
        results.extend(
            handles.into_iter().map(|handle| handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))),
        );
        results
    });
    match results.into_iter().flatten().min_by_key(|(index, _)| *index) {
        Some((_, error)) => Err(error),
        None => Ok(()),
    }
}

/// Start writing `file`'s dirty pages back now, without waiting for them
/// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`): a caller that makes several
/// new files durable one after another starts every file's writeback first,
/// so the device writes them all while the first `fsync` waits, and the
/// later ones find their data already written (three new files and their
/// directory on this machine's ext4: 0.40 ms against 0.60 ms for plain
/// `fsync`s in a row, medians of 6 runs of 200). It is a hint, not a
/// barrier: durability still takes each file's `fsync`.
///
/// # Errors
///
/// [`crate::HostError::Io`] naming `path` when the call fails (`EIO`, `ENOSPC`).
#[allow(unsafe_code)]
pub fn start_writeback(file: &std::fs::File, path: &vsh_types::VPath) -> Result<(), crate::HostError> {
    use std::os::fd::AsRawFd;
    // SAFETY: sync_file_range reads no memory of ours; the descriptor is
    // borrowed from a live `File` for the duration of the call, and offset 0
    // with length 0 names the whole file.
    let done = unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    if done == 0 {
        return Ok(());
    }
    Err(crate::HostError::Io { op: "sync_file_range", path: path.clone(), source: std::io::Error::last_os_error() })
}

/// Give the open `file` (named `path` in errors) the owner `uid` and group
/// `gid` (`fchown`; only a privileged process may give a file away).
///
/// # Errors
///
/// [`crate::HostError::Io`] naming `path` when the call fails (`EPERM`).
pub fn set_owner(file: &std::fs::File, uid: u32, gid: u32, path: &vsh_types::VPath) -> Result<(), crate::HostError> {
    let owner = (Some(rustix::fs::Uid::from_raw(uid)), Some(rustix::fs::Gid::from_raw(gid)));
    rustix::fs::fchown(file, owner.0, owner.1).map_err(|errno| crate::HostError::io("fchown", path, errno))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    use super::concurrently;

    #[test]
    fn writeback_starts_on_a_file_and_a_pipe_is_an_error_naming_the_path() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let mut file = std::fs::File::create(dir.path().join("f")).unwrap();
        file.write_all(&[7; 8192]).unwrap();
        let path = vsh_types::VPath::parse("f").unwrap();
        super::start_writeback(&file, &path).unwrap();
        // A pipe has no pages to write back: the kernel says ESPIPE.
        let (reader, _writer) = std::io::pipe().unwrap();
        let pipe = std::fs::File::from(std::os::fd::OwnedFd::from(reader));
        match super::start_writeback(&pipe, &path) {
            Err(crate::HostError::Io { op: "sync_file_range", path: named, source }) => {
                assert_eq!(named, path);
                assert_eq!(source.raw_os_error(), Some(libc::ESPIPE));
            }
            other => panic!("a pipe: {other:?}"),
        }
    }

    #[test]
    fn every_item_gets_its_barrier_once_and_the_first_error_in_item_order_wins() {
        let items: Vec<u32> = (0..100).collect();
        let seen = Mutex::new(Vec::new());
        concurrently(&items, |item| {
            seen.lock().unwrap().push(*item);
            Ok::<(), u32>(())
        })
        .unwrap();
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        assert_eq!(seen, items, "each item exactly once");
        // Several fail: the earliest item's error is the one returned, and
        // every item was still tried.
        let tried = Mutex::new(BTreeSet::new());
        let failed = concurrently(&items, |item| {
            tried.lock().unwrap().insert(*item);
            if item % 30 == 7 { Err(*item) } else { Ok(()) }
        });
        assert_eq!(failed, Err(7));
        assert_eq!(tried.into_inner().unwrap().len(), 100);
        // Up to four items run on the caller's thread, in order; none is nothing.
        let caller = std::thread::current().id();
        let order = Mutex::new(Vec::new());
        concurrently(&[1, 2, 3, 4], |item| {
            assert_eq!(std::thread::current().id(), caller);
            order.lock().unwrap().push(*item);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(order.into_inner().unwrap(), [1, 2, 3, 4]);
        concurrently(&[] as &[u32], |_| Err::<(), ()>(())).unwrap();
        // Five or more run on one thread each, the caller's among them: each
        // barrier waits (up to 10 s, so a sequential one fails rather than
        // hangs) until all have started.
        let threads = Mutex::new(std::collections::HashSet::new());
        let all = std::sync::Condvar::new();
        concurrently(&[1, 2, 3, 4, 5], |_| {
            let mut seen = threads.lock().unwrap();
            seen.insert(std::thread::current().id());
            all.notify_all();
            let _ = all.wait_timeout_while(seen, std::time::Duration::from_secs(10), |seen| seen.len() < 5).unwrap();
            Ok::<(), ()>(())
        })
        .unwrap();
        let threads = threads.into_inner().unwrap();
        assert_eq!(threads.len(), 5);
        assert!(threads.contains(&caller));
    }
}
