//! What one change of the transaction log costs as the log's history grows:
//! a record created and rejected (two fsynced appends, as a discarded
//! preview's record is) on a store holding 10 and 10,000 earlier records
//! (the default retention keeps 10,000 terminal records). A change should
//! cost the same whatever the history. `cargo xtask bench` runs it.

use std::time::{Duration, Instant};

use vsh_host::CapDir;
use vsh_store::{DataDir, TransactionRecord, TransactionStore};
use vsh_types::{SnapshotId, TransactionId, TransactionState};

/// A store in a fresh workspace, with `records` earlier denied records.
fn store(records: u64) -> (tempfile::TempDir, TransactionStore) {
    let root = tempfile::tempdir().expect("a temporary workspace");
    let workspace = CapDir::open(root.path()).expect("the workspace opens");
    let data = DataDir::open_in_workspace(&workspace, &vsh_types::VshLayout::default_data()).expect("a data dir");
    let store = TransactionStore::open(&data, &vsh_types::AuthorityKey::from_bytes([42; 32])).expect("the store");
    for index in 0..records {
        let id = TransactionId::digest(&index.to_le_bytes());
        let denied = TransactionRecord::new(id, SnapshotId::digest(b"base"), TransactionState::Denied, 1_000);
        store.create(&denied).expect("create");
    }
    (root, store)
}

fn pending(id: TransactionId) -> TransactionRecord {
    TransactionRecord::new(id, SnapshotId::digest(b"base"), TransactionState::PendingApproval, 1_000)
}

fn main() {
    let iterations: u64 = std::env::var("VSH_BENCH_ITERATIONS").ok().and_then(|text| text.parse().ok()).unwrap_or(200);
    let mut medians = Vec::new();
    for history in [10_u64, 10_000] {
        let (_root, store) = store(history);
        let mut samples: Vec<Duration> = (0..iterations)
            .map(|index| {
                let id = TransactionId::digest(format!("timed {index}").as_bytes());
                let started = Instant::now();
                store.create(&pending(id)).expect("create");
                store.reject(id, 2_000).expect("reject");
                started.elapsed()
            })
            .collect();
        samples.sort_unstable();
        let p50 = samples[samples.len() / 2];
        let p95 = samples[samples.len() * 95 / 100];
        println!(
            "txlog: create + reject, {history} earlier records: p50 {:.3} ms, p95 {:.3} ms",
            p50.as_secs_f64() * 1e3,
            p95.as_secs_f64() * 1e3
        );
        medians.push(p50);
    }
    println!("txlog: 10,000 / 10 earlier records: {:.2}x", medians[1].as_secs_f64() / medians[0].as_secs_f64());
}
