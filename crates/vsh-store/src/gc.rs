//! Retention and garbage collection: [`TransactionStore::gc`] with
//! [`RetentionConfig`], reporting a [`GcReport`].
//!
//! One call does bounded work, in this order:
//!
//! 1. **Expire.** Records due at `now_ms` move to `Expired` (pending requests
//!    past their pending expiry, approvals whose grant lapsed). A pending
//!    approval is never collected before it expires: only terminal records are
//!    ever dropped, and `PendingApproval` is not terminal.
//! 2. **Forget.** Terminal records (denied, rejected, expired, committed,
//!    stale, failed) older than the age bound, and the oldest beyond the count
//!    bound, are dropped with one forget frame per 4,096, then the log is
//!    compacted so their versions leave the disk.
//! 3. **Sweep blobs.** A blob is deleted only if no live record's artifact is
//!    it or names it as content, it is not in the caller's keep-set, and it
//!    was last written longer than the grace period ago. If any live
//!    artifact cannot be read and verified, nothing is deleted: its content is
//!    unknown. The sweep walks shards in id order and resumes where the
//!    previous call on this handle stopped.
//!
//! # Limitations
//!
//! The store knows only the blobs that artifacts name. **Blobs of a run in
//! flight, or of a transaction whose artifact is not stored yet (for example a
//! process-local auto-approved preview), must be passed in `keep`**; the grace
//! period (default a day, counted from the blob's last write, refreshed by a
//! repeated store after [`crate::blob::REFRESH_AFTER_MS`]) covers runs that
//! finish within it.

use std::collections::BTreeSet;

use vsh_types::{BlobId, TransactionId};

use crate::artifact::{ArtifactLimits, PendingArtifact};
use crate::blob::{BlobStore, REFRESH_AFTER_MS};
use crate::error::StoreError;
use crate::txlog::{LogEntry, MAX_FORGET_PER_FRAME};
use crate::txn::{Change, TransactionStore};

/// What [`TransactionStore::gc`] may collect, and how much work one call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionConfig {
    /// Drop terminal records last updated at least this long ago (default 30 days).
    pub terminal_max_age_ms: Option<u64>,
    /// Keep at most this many terminal records, dropping the oldest (default 10,000).
    pub max_terminal_records: Option<u64>,
    /// Never delete a blob written more recently than this (default 24 hours;
    /// never less than [`crate::blob::REFRESH_AFTER_MS`], whatever is configured,
    /// so a blob stored again by a run in progress is always protected).
    pub blob_grace_ms: u64,
    /// Most records expired, and most forgotten, per call (default 10,000).
    pub max_records_per_call: usize,
    /// Most blobs examined per call (default 10,000).
    pub max_blobs_per_call: usize,
    /// Bounds for reading live artifacts.
    pub artifact_limits: ArtifactLimits,
    /// Clear real commands' scratch directories (build outputs and caches)
    /// when together they hold more than this many bytes (default 20 GiB;
    /// `None`: never by size). Clearing skips them while a run uses them.
    pub max_scratch_bytes: Option<u64>,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            terminal_max_age_ms: Some(30 * 24 * 60 * 60 * 1000),
            max_terminal_records: Some(10_000),
            blob_grace_ms: 24 * 60 * 60 * 1000,
            max_records_per_call: 10_000,
            max_blobs_per_call: 10_000,
            artifact_limits: ArtifactLimits::default(),
            max_scratch_bytes: Some(vsh_types::space::MAX_SCRATCH_BYTES),
        }
    }
}

/// How the blob sweep of one [`TransactionStore::gc`] call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlobSweep {
    /// Every shard was examined.
    Complete,
    /// The per-call bound was reached; the next call resumes after `after`.
    Partial {
        /// The last blob examined.
        after: BlobId,
    },
    /// Nothing was deleted: a live artifact could not be read or verified.
    Skipped {
        /// Its transaction.
        transaction: TransactionId,
        /// The error, for the operator.
        reason: String,
    },
}

/// What one [`TransactionStore::gc`] call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcReport {
    /// Records moved to `Expired`.
    pub expired: Vec<TransactionId>,
    /// Terminal records dropped from the log.
    pub forgotten: Vec<TransactionId>,
    /// Whether the log was compacted.
    pub compacted: bool,
    /// Blobs examined by the sweep.
    pub blobs_examined: usize,
    /// Blobs deleted.
    pub blobs_removed: usize,
    /// Of the blobs examined, those kept because work on record needs them
    /// (a waiting transaction's artifact and contents, what a revert of
    /// committed work restores, what vsh saw of files).
    pub blobs_in_use: usize,
    /// Of the blobs examined, those no longer needed but kept for the grace
    /// period (they may belong to a run still being stored).
    pub blobs_in_grace: usize,
    /// When the first of those is past the grace (milliseconds since the
    /// Unix epoch, the caller's clock); `None` when there is none.
    pub next_due_ms: Option<u64>,
    /// Stale temporary blob files deleted.
    pub temporaries_removed: usize,
    /// How the sweep ended.
    pub blob_sweep: BlobSweep,
    /// What became of real commands' scratch directories (filled by the
    /// caller that holds the data directory, see [`crate::ScratchLock::collect`]).
    pub scratch: crate::ScratchReport,
}

impl TransactionStore {
    /// Apply retention at `now_ms` (the caller's clock, milliseconds since the
    /// Unix epoch): expire due records, drop old terminal records and compact,
    /// then delete unreferenced blobs past the grace period that are not in
    /// `keep` (see the module docs of `gc` for the exact rules and bounds).
    pub fn gc(
        &self,
        blobs: &BlobStore,
        now_ms: u64,
        config: &RetentionConfig,
        keep: &BTreeSet<BlobId>,
    ) -> Result<GcReport, StoreError> {
        let expired = self.expire_due_bounded(now_ms, config.max_records_per_call)?;
        let forgotten = self.forget_terminal(now_ms, config)?;
        let compacted = !forgotten.is_empty();
        if compacted {
            self.compact()?;
        }
        let mut report = GcReport {
            expired,
            forgotten,
            compacted,
            blobs_examined: 0,
            blobs_removed: 0,
            blobs_in_use: 0,
            blobs_in_grace: 0,
            next_due_ms: None,
            temporaries_removed: 0,
            blob_sweep: BlobSweep::Complete,
            scratch: crate::ScratchReport::default(),
        };
        let mut referenced = keep.clone();
        // Work that can never commit (rejected, expired, denied) keeps its
        // artifact (its review, its program for a re-run) but not its
        // contents: nothing will ever write them, and they may be large.
        let artifacts: Vec<(TransactionId, BlobId, bool)> = self.read(|state| {
            state
                .records()
                .values()
                .filter_map(|record| record.artifact.map(|blob| (record.id, blob, record.state.was_refused())))
                .collect()
        })?;
        for (transaction, blob, contents_collectable) in artifacts {
            referenced.insert(blob);
            if contents_collectable {
                continue;
            }
            match Self::artifact_content(blobs, blob, &config.artifact_limits) {
                Ok(content) => referenced.extend(content),
                Err(error) if error.is_fatal() => return Err(error),
                Err(error) => {
                    report.blob_sweep = BlobSweep::Skipped { transaction, reason: error.to_string() };
                    return Ok(report);
                }
            }
        }
        let grace_ms = config.blob_grace_ms.max(REFRESH_AFTER_MS);
        self.sweep(blobs, now_ms, grace_ms, config.max_blobs_per_call, &referenced, &mut report)?;
        report.temporaries_removed = blobs.remove_stale_temporaries(now_ms, grace_ms, config.max_blobs_per_call)?;
        Ok(report)
    }

    /// The content blobs a stored artifact names.
    fn artifact_content(blobs: &BlobStore, blob: BlobId, limits: &ArtifactLimits) -> Result<Vec<BlobId>, StoreError> {
        let bytes = blobs.get(blob, limits.max_total_bytes)?;
        let artifact =
            PendingArtifact::decode(&bytes, limits).map_err(|source| StoreError::Artifact { blob, source })?;
        Ok(artifact.content_blobs().collect())
    }

    /// Append forget frames for the terminal records retention drops.
    fn forget_terminal(&self, now_ms: u64, config: &RetentionConfig) -> Result<Vec<TransactionId>, StoreError> {
        self.mutate("forget transactions", |state| {
            let mut terminal: Vec<_> = state.records().values().filter(|record| record.state.is_terminal()).collect();
            terminal.sort_by_key(|record| (record.updated_ms, record.id));
            let excess = config
                .max_terminal_records
                .map_or(0, |max| terminal.len().saturating_sub(usize::try_from(max).unwrap_or(usize::MAX)));
            let mut chosen: Vec<(TransactionId, u64)> = terminal
                .iter()
                .enumerate()
                .filter(|(index, record)| {
                    *index < excess
                        || config.terminal_max_age_ms.is_some_and(|age| now_ms.saturating_sub(record.updated_ms) >= age)
                })
                .map(|(_, record)| (record.id, record.sequence))
                .take(config.max_records_per_call)
                .collect();
            chosen.sort_unstable();
            let ids = chosen.iter().map(|(id, _)| *id).collect();
            let entries = chosen.chunks(MAX_FORGET_PER_FRAME).map(|chunk| LogEntry::Forget(chunk.to_vec())).collect();
            Ok(Change { entries, outcome: Ok(ids) })
        })
    }

    /// Examine up to `max_blobs` blobs after this handle's cursor,
    /// deleting the unreferenced ones past the grace period.
    fn sweep(
        &self,
        blobs: &BlobStore,
        now_ms: u64,
        grace_ms: u64,
        max_blobs: usize,
        referenced: &BTreeSet<BlobId>,
        report: &mut GcReport,
    ) -> Result<(), StoreError> {
        let cursor = self.lock_inner()?.blob_cursor;
        let start_shard = cursor.map(|id| id.to_hex()[..2].to_owned());
        let mut last_examined = None;
        let mut stopped = false;
        for shard in blobs.shards()? {
            if start_shard.as_ref().is_some_and(|start| shard < *start) {
                continue;
            }
            let mut removed_here = None;
            for id in blobs.ids_in_shard(&shard)? {
                if cursor.is_some_and(|after| id <= after) {
                    continue;
                }
                if report.blobs_examined >= max_blobs {
                    stopped = true;
                    break;
                }
                report.blobs_examined += 1;
                last_examined = Some(id);
                if referenced.contains(&id) {
                    report.blobs_in_use += 1;
                    continue;
                }
                let Some(modified) = blobs.modified_ms(id)? else { continue };
                if now_ms.saturating_sub(modified) < grace_ms {
                    report.blobs_in_grace += 1;
                    let due = modified.saturating_add(grace_ms);
                    report.next_due_ms = Some(report.next_due_ms.map_or(due, |next| next.min(due)));
                    continue;
                }
                blobs.remove(id)?;
                report.blobs_removed += 1;
                removed_here = Some(id);
            }
            if let Some(removed) = removed_here {
                blobs.sync_shard_of(removed)?;
            }
            if stopped {
                break;
            }
        }
        let next_cursor = if stopped { last_examined.or(cursor) } else { None };
        report.blob_sweep = match next_cursor {
            Some(after) => BlobSweep::Partial { after },
            None => BlobSweep::Complete,
        };
        self.lock_inner()?.blob_cursor = next_cursor;
        Ok(())
    }
}
