//! [`Previews`]: the auto-approved previews a live runtime holds for a later
//! commit, bounded in count and bytes, and the one way a preview leaves the
//! auto-approved path without being committed ([`Previews::demote`]).
//!
//! A preview exists only in this process's memory, and so, at first, do its
//! record and its contents: nothing is written to the store for a preview
//! (no log frame, no blob) until something must act on it through the store
//! (a commit's reservation, a rejection, a hook, a cancellation), when its
//! record is written, `AutoApproved`. Its contents reach the blob store
//! only when something outside this process may need them (a hook, which
//! may send it to pending review: [`Previews::materialize`], without
//! barriers: whatever makes them durable later does); a commit of this
//! process stages them from memory ([`Previews::commit_parts`]), and a
//! rejection or a discard needs them nowhere. Whatever ends it (a commit, a discard, a
//! rejection, a hook's Review, a failed handler, a cancelled request) removes
//! it here first, so it can never be committed twice.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use vsh_commit::MemoryContents;
use vsh_store::{BlobStore, PendingArtifact, TransactionRecord, TransactionStore};
use vsh_types::{BlobId, ReadSet, TransactionId, TransactionState};

use crate::VshError;
use crate::receipt::Receipt;

/// Process-local previews kept for a later commit (fail closed beyond this).
const MAX_PREVIEWS: usize = 64;
/// Bytes of process-local previews (approximate: diff entries, dependencies and stdout).
const MAX_PREVIEW_BYTES: u64 = 128 << 20;

/// An auto-approved preview held by this live runtime until it is committed or discarded.
#[derive(Debug, Clone)]
pub(crate) struct Preview {
    pub(crate) artifact: PendingArtifact,
    pub(crate) receipt: Receipt,
    bytes: u64,
    /// Its record while only this process knows it; `None` once written.
    unwritten: Option<TransactionRecord>,
    /// The new contents its diff names, until written to the blob store.
    contents: MemoryContents,
}

/// The receipts of previews this runtime committed, kept for a commit
/// asked again (a retry after a lost answer) and a review (`show`): a
/// process-local preview's artifact is never stored, so nothing else
/// could answer.
const MAX_COMMITTED: usize = 64;

/// The previews of one runtime.
#[derive(Debug, Default)]
pub(crate) struct Previews {
    held: Mutex<HashMap<TransactionId, Preview>>,
    committed: Mutex<std::collections::VecDeque<Receipt>>,
}

impl Previews {
    fn lock(&self) -> MutexGuard<'_, HashMap<TransactionId, Preview>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hold `artifact` with its receipt, its new `contents` and its
    /// `AutoApproved` record made at `now_ms`, unwritten. Beyond the count or
    /// byte bound nothing is held (nobody could commit it, and no record of
    /// it exists) and [`VshError::EphemeralCapacity`] is returned.
    pub(crate) fn keep(
        &self,
        artifact: PendingArtifact,
        receipt: Receipt,
        contents: MemoryContents,
        now_ms: u64,
    ) -> Result<(), VshError> {
        let transaction = artifact.binding.transaction();
        let record = TransactionRecord::new(
            transaction,
            artifact.binding.digests().snapshot,
            TransactionState::AutoApproved,
            now_ms,
        );
        let bytes = (artifact.diff.len() as u64).saturating_mul(256)
            + (artifact.read_set.len() as u64).saturating_mul(128)
            + artifact.evidence.len() as u64
            + receipt.output.stdout_bytes().len() as u64
            + contents.values().map(|bytes| bytes.len() as u64).sum::<u64>();
        let mut held = self.lock();
        let total: u64 = held.values().map(|preview| preview.bytes).sum();
        if held.len() >= MAX_PREVIEWS || total.saturating_add(bytes) > MAX_PREVIEW_BYTES {
            return Err(VshError::EphemeralCapacity { entries: held.len(), bytes: total });
        }
        held.insert(transaction, Preview { artifact, receipt, bytes, unwritten: Some(record), contents });
        Ok(())
    }

    /// The record of `transaction`'s preview while it is not written yet.
    pub(crate) fn unwritten(&self, transaction: TransactionId) -> Option<TransactionRecord> {
        self.lock().get(&transaction).and_then(|preview| preview.unwritten)
    }

    /// The ids of the held previews whose records are not written yet.
    pub(crate) fn unwritten_ids(&self) -> Vec<TransactionId> {
        self.lock().iter().filter(|(_, preview)| preview.unwritten.is_some()).map(|(id, _)| *id).collect()
    }

    /// Write `transaction`'s contents to `blobs` and its record to `store`
    /// if it is a held preview's and not written yet (before anything acts
    /// on it through the store).
    pub(crate) fn materialize(
        &self,
        store: &TransactionStore,
        blobs: &BlobStore,
        transaction: TransactionId,
    ) -> Result<(), VshError> {
        if let Some(record) = self.materialize_contents(blobs, transaction)? {
            store.create(&record)?;
        }
        Ok(())
    }

    /// Write `transaction`'s contents to `blobs` if it is a held preview's,
    /// and hand over its record if not written yet (the caller writes it).
    fn materialize_contents(
        &self,
        blobs: &BlobStore,
        transaction: TransactionId,
    ) -> Result<Option<TransactionRecord>, VshError> {
        let mut held = self.lock();
        let Some(preview) = held.get_mut(&transaction) else { return Ok(None) };
        for (id, bytes) in &preview.contents {
            // Bytes the store holds intact are not written again.
            if blobs.status(*id)? != vsh_store::BlobStatus::Intact || blobs.refresh_due(*id)? {
                blobs.put_expected_deferred(bytes, *id)?;
            }
        }
        preview.contents.clear();
        Ok(preview.unwritten.take())
    }

    /// Stop holding `transaction`'s preview, and its record if nothing wrote
    /// it yet (the caller writes it as it ends it: a rejection or a discard
    /// needs no contents).
    pub(crate) fn take_unwritten(&self, transaction: TransactionId) -> Option<TransactionRecord> {
        self.lock().remove(&transaction).and_then(|preview| preview.unwritten)
    }

    /// What a commit of `transaction` by this process needs if it is a held
    /// preview's: its record, if not written yet (the caller writes it now,
    /// with its reservation, in one append, and from here on it counts as
    /// written), and the contents it keeps in memory, which the commit
    /// stages from there: nothing is written to the blob store for them.
    pub(crate) fn commit_parts(&self, transaction: TransactionId) -> (Option<TransactionRecord>, MemoryContents) {
        let mut held = self.lock();
        match held.get_mut(&transaction) {
            Some(preview) => (preview.unwritten.take(), std::mem::take(&mut preview.contents)),
            None => (None, MemoryContents::new()),
        }
    }

    /// The bytes of `blob` if a held preview keeps them in memory.
    pub(crate) fn content(&self, blob: BlobId) -> Option<Arc<[u8]>> {
        self.lock().values().find_map(|preview| preview.contents.get(&blob).map(Arc::clone))
    }

    /// A copy of the preview of `transaction`, if held.
    pub(crate) fn get(&self, transaction: TransactionId) -> Option<Preview> {
        self.lock().get(&transaction).cloned()
    }

    /// Whether the preview of `transaction` is held.
    pub(crate) fn holds(&self, transaction: TransactionId) -> bool {
        self.lock().contains_key(&transaction)
    }

    /// The artifact of `transaction`'s preview, if held.
    pub(crate) fn artifact(&self, transaction: TransactionId) -> Option<PendingArtifact> {
        self.lock().get(&transaction).map(|preview| preview.artifact.clone())
    }

    /// The receipt of `transaction`'s preview, if held.
    pub(crate) fn receipt(&self, transaction: TransactionId) -> Option<Receipt> {
        self.lock().get(&transaction).map(|preview| preview.receipt.clone())
    }

    /// The dependencies (read set) of `transaction`'s preview, if held.
    pub(crate) fn dependencies(&self, transaction: TransactionId) -> Option<ReadSet> {
        self.lock().get(&transaction).map(|preview| preview.artifact.read_set.clone())
    }

    /// Keep the receipt of a preview this runtime committed (the last
    /// [`MAX_COMMITTED`]).
    pub(crate) fn remember_committed(&self, receipt: Receipt) {
        let mut committed = self.committed.lock().unwrap_or_else(PoisonError::into_inner);
        if committed.len() >= MAX_COMMITTED {
            committed.pop_front();
        }
        committed.push_back(receipt);
    }

    /// The receipt of `transaction`'s commit, if this runtime committed it
    /// from a preview it held (and still remembers it).
    pub(crate) fn committed(&self, transaction: TransactionId) -> Option<Receipt> {
        let committed = self.committed.lock().unwrap_or_else(PoisonError::into_inner);
        committed.iter().rev().find(|receipt| receipt.transaction == transaction).cloned()
    }

    /// Stop holding `transaction`'s preview; whether it was held.
    pub(crate) fn forget(&self, transaction: TransactionId) -> bool {
        self.lock().remove(&transaction).is_some()
    }

    /// Every blob a held preview's commit will need (garbage collection keeps them).
    pub(crate) fn blobs(&self) -> BTreeSet<BlobId> {
        self.lock().values().flat_map(|preview| preview.artifact.diff.content_blobs()).collect()
    }

    /// Take auto-approved work off the auto-approved path without committing
    /// it: the preview is forgotten, and a record still `AutoApproved` moves
    /// to `PendingApproval` when its artifact is durable (an operator can
    /// still review it) or to `Rejected` when it is not (nobody could).
    /// Returns the state it moved to, or `None` when the record is missing or
    /// no longer `AutoApproved` (nothing moved).
    pub(crate) fn demote(
        &self,
        store: &TransactionStore,
        transaction: TransactionId,
        now_ms: u64,
    ) -> Result<Option<TransactionState>, VshError> {
        // Its record says where it went, written now if it was not yet (its
        // contents are not needed: nothing will commit it). One with no
        // durable artifact is written rejected, in one append: no moment in
        // which the log holds it `AutoApproved`.
        match self.take_unwritten(transaction) {
            Some(unwritten) if unwritten.artifact.is_none() && unwritten.state == TransactionState::AutoApproved => {
                return Ok(Some(store.create_rejected(&unwritten, now_ms)?.state));
            }
            Some(unwritten) => store.create(&unwritten)?,
            None => {}
        }
        let Some(record) = store.get(transaction)? else { return Ok(None) };
        if record.state != TransactionState::AutoApproved {
            return Ok(None);
        }
        let moved = if record.artifact.is_some() {
            store.compare_and_transition(
                transaction,
                TransactionState::AutoApproved,
                TransactionState::PendingApproval,
                now_ms,
            )?
        } else {
            store.reject(transaction, now_ms)?
        };
        Ok(Some(moved.state))
    }
}
