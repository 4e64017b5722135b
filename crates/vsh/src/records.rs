//! [`Records`]: the durable side of a runtime: transaction records, pending
//! artifacts and the blob store, and the check that a stored artifact still
//! binds to its transaction under the active policy.

use vsh_store::{
    ArtifactError, ArtifactLimits, BlobStore, PendingArtifact, StoreError, TransactionRecord, TransactionStore,
};
use vsh_types::{CanonicalDiff, PolicyDigest, ReadSet, TransactionId, TransactionState};

use crate::VshError;
use crate::evidence::Evidence;
use crate::receipt::{ExecutionOutput, Receipt, StageTimings};

/// A transaction ready to commit: what to apply and the receipt to complete.
pub(crate) struct Committable {
    pub(crate) diff: CanonicalDiff,
    pub(crate) reads: ReadSet,
    pub(crate) receipt: Receipt,
}

/// The transaction store, the blob store and the bounds of what they keep.
#[derive(Debug)]
pub(crate) struct Records {
    transactions: TransactionStore,
    blobs: BlobStore,
    limits: ArtifactLimits,
    /// The digest of the active policy: artifacts made under another are refused.
    policy: PolicyDigest,
}

impl Records {
    pub(crate) fn new(transactions: TransactionStore, blobs: BlobStore, policy: PolicyDigest) -> Self {
        Self { transactions, blobs, limits: ArtifactLimits::default(), policy }
    }

    /// The transaction store.
    pub(crate) fn transactions(&self) -> &TransactionStore {
        &self.transactions
    }

    /// The blob store.
    pub(crate) fn blobs(&self) -> &BlobStore {
        &self.blobs
    }

    /// The bounds of a durable artifact.
    pub(crate) fn limits(&self) -> &ArtifactLimits {
        &self.limits
    }

    /// The record of `transaction`, if any.
    pub(crate) fn get(&self, transaction: TransactionId) -> Result<Option<TransactionRecord>, VshError> {
        Ok(self.transactions.get(transaction)?)
    }

    /// The record of `transaction`, or [`VshError::UnknownTransaction`].
    pub(crate) fn require(&self, transaction: TransactionId) -> Result<TransactionRecord, VshError> {
        self.get(transaction)?.ok_or(VshError::UnknownTransaction(transaction))
    }

    /// Store a preview's artifact durably beside its record (so that a hook
    /// can move the preview to pending review).
    pub(crate) fn put_artifact(&self, artifact: &PendingArtifact) -> Result<(), VshError> {
        self.transactions.put_artifact(&self.blobs, artifact, &self.limits)?;
        Ok(())
    }

    /// Load a stored artifact and check it still binds: its id re-derives from its
    /// binding and is this transaction's (the store checks both), and it was
    /// made under the active policy.
    pub(crate) fn load_verified(&self, transaction: TransactionId) -> Result<(PendingArtifact, Evidence), VshError> {
        let artifact = match self.transactions.load_artifact(&self.blobs, transaction, &self.limits) {
            Err(StoreError::Artifact { source: ArtifactError::Binding { field: "transaction" }, .. }) => {
                return Err(VshError::ArtifactBinding(transaction));
            }
            loaded => loaded?,
        };
        if artifact.binding.digests().policy != self.policy {
            return Err(VshError::PolicyChanged(transaction));
        }
        let evidence =
            Evidence::decode(&artifact.evidence).map_err(|source| VshError::Evidence { transaction, source })?;
        Ok((artifact, evidence))
    }

    /// A stored transaction's diff, dependencies and receipt, rebuilt from its
    /// verified artifact.
    pub(crate) fn committable(
        &self,
        transaction: TransactionId,
        state: TransactionState,
    ) -> Result<Committable, VshError> {
        let (artifact, evidence) = self.load_verified(transaction)?;
        let execution = evidence.stats.clone();
        let receipt = Receipt {
            transaction,
            base_snapshot: artifact.binding.digests().snapshot,
            state,
            decision: evidence.decision,
            diff: artifact.diff.digest(),
            changed_paths: artifact.diff.len(),
            changes: artifact.diff.entries().to_vec(),
            review: Vec::new(),
            output: ExecutionOutput::Monty { value: evidence.value, stdout: evidence.stdout },
            execution,
            timings: StageTimings::default(),
            commit: None,
            warnings: Vec::new(),
        };
        Ok(Committable { diff: artifact.diff, reads: artifact.read_set, receipt })
    }

    /// Transactions waiting for a decision or a commit: `PendingApproval` and `Approved`.
    pub(crate) fn pending(&self) -> Result<Vec<TransactionRecord>, VshError> {
        Ok(self
            .transactions
            .list()?
            .into_iter()
            .filter(|record| matches!(record.state, TransactionState::PendingApproval | TransactionState::Approved))
            .collect())
    }
}
