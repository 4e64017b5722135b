//! Helpers shared by the test modules: temporary data directories, stores over
//! them and sample records.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use vsh_host::CapDir;
use vsh_store::{BlobStore, DataDir, StoreBackend, TransactionRecord, TransactionStore, TxStoreConfig};
use vsh_types::{SnapshotId, TransactionId, TransactionState};

use crate::Result;

/// The data directory inside a temporary workspace (`.vsh/data`).
pub(crate) fn data_dir(root: &Path) -> Result<DataDir> {
    let workspace = CapDir::open(root)?;
    Ok(DataDir::open_in_workspace(&workspace, &vsh_types::VshLayout::default_data())?)
}

/// Where the data directory of [`data_dir`] lives on the host.
pub(crate) fn data_path(root: &Path) -> PathBuf {
    root.join(".vsh/data")
}

/// The real backend over the data directory of a temporary workspace.
pub(crate) fn backend(root: &Path) -> Result<Arc<dyn StoreBackend>> {
    Ok(data_dir(root)?.backend()?)
}

/// The authority key every test store is opened with.
pub(crate) fn key() -> vsh_types::AuthorityKey {
    vsh_types::AuthorityKey::from_bytes([42; 32])
}

/// A transaction store with the default configuration.
pub(crate) fn store(root: &Path) -> Result<TransactionStore> {
    Ok(TransactionStore::open(&data_dir(root)?, &key())?)
}

/// A transaction store with a configuration.
pub(crate) fn store_with(root: &Path, config: TxStoreConfig) -> Result<TransactionStore> {
    Ok(TransactionStore::open_with(backend(root)?, config, &crate::common::key())?)
}

/// A blob store.
pub(crate) fn blobs(root: &Path) -> Result<BlobStore> {
    Ok(BlobStore::open(&data_dir(root)?)?)
}

/// The log file on the host.
pub(crate) fn log_file(root: &Path) -> PathBuf {
    data_path(root).join("txlog")
}

/// A record named by `name` over a fixed base, created at 1,000 ms.
pub(crate) fn record(name: &[u8], state: TransactionState) -> TransactionRecord {
    TransactionRecord::new(TransactionId::digest(name), SnapshotId::digest(b"base"), state, 1_000)
}

/// The wall clock in milliseconds (for tests that compare against file times).
pub(crate) fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(0))
}
