//! [`HookGate`]: the configured commit hook's part of a commit. It decides
//! whether a hook must see a transaction, builds the [`RequestEvent`] the
//! handler sees (always regenerated from what is stored, so a decision applies
//! exactly to what the handler saw), and turns the handler's decision, or its
//! failure, into record transitions and a [`Verdict`] on whether to commit.

use vsh_host::CapDir;
use vsh_store::ApprovalGrant;
use vsh_types::{BlobId, NodeKind, PrincipalId, TransactionId, TransactionState};

use crate::VshError;
use crate::evidence::Evidence;
use crate::hook::{CommitPreparation, HookConfig, HookDecision, RequestEvent, ReviewContent};
use crate::previews::Previews;
use crate::records::Records;

/// What the gate reads: the durable records, this runtime's previews and the
/// workspace (for the before-contents a handler is shown).
pub(crate) struct Sources<'a> {
    pub(crate) records: &'a Records,
    pub(crate) previews: &'a Previews,
    pub(crate) workspace: &'a CapDir,
}

impl Sources<'_> {
    /// The record of `transaction`: a held preview's not yet written, else
    /// the store's ([`VshError::UnknownTransaction`] when neither has it).
    pub(crate) fn record(&self, transaction: TransactionId) -> Result<vsh_store::TransactionRecord, VshError> {
        match self.previews.unwritten(transaction) {
            Some(record) => Ok(record),
            None => self.records.require(transaction),
        }
    }
}

/// What happens after a hook's decision was applied.
pub(crate) enum Verdict {
    /// Nothing more: the transaction is now in this state.
    Settled(TransactionState),
    /// Commit the transaction, now in this state, without asking the hook again.
    Commit(TransactionState),
}

/// The configured hook, if any.
#[derive(Debug)]
pub(crate) struct HookGate {
    hook: Option<HookConfig>,
}

impl HookGate {
    pub(crate) fn new(hook: Option<HookConfig>) -> Self {
        Self { hook }
    }

    /// The hook that must decide before a transaction in `state` commits.
    fn applying(&self, state: TransactionState) -> Option<&HookConfig> {
        self.hook.as_ref().filter(|hook| hook.applies_to(state))
    }

    /// [`VshError::HookRequired`] when a hook must decide before a
    /// transaction in `state` commits.
    pub(crate) fn check(
        &self,
        sources: &Sources<'_>,
        transaction: TransactionId,
        state: TransactionState,
    ) -> Result<(), VshError> {
        match self.applying(state) {
            Some(hook) => Err(VshError::HookRequired(Box::new(Self::event(sources, hook, transaction, state)?))),
            None => Ok(()),
        }
    }

    /// Whether a hook must decide before `transaction` commits; a
    /// process-local preview is made durable first (so a hook's Review or a
    /// failed handler can move it to pending review).
    pub(crate) fn prepare(
        &self,
        sources: &Sources<'_>,
        transaction: TransactionId,
    ) -> Result<CommitPreparation, VshError> {
        let record = sources.record(transaction)?;
        if !matches!(
            record.state,
            TransactionState::AutoApproved | TransactionState::PendingApproval | TransactionState::Approved
        ) {
            return Err(VshError::NotCommittable { transaction, state: record.state });
        }
        let Some(hook) = self.applying(record.state) else {
            return Ok(CommitPreparation::Ready { transaction, state: record.state });
        };
        sources.previews.materialize(sources.records.transactions(), sources.records.blobs(), transaction)?;
        if record.artifact.is_none() {
            let artifact = sources
                .previews
                .artifact(transaction)
                .ok_or(VshError::NotCommittable { transaction, state: record.state })?;
            sources.records.put_artifact(&artifact)?;
        }
        Ok(CommitPreparation::Review(Box::new(Self::event(sources, hook, transaction, record.state)?)))
    }

    /// Apply `decision` on `event` (see [`HookDecision`]): the event must be
    /// the one the stored transaction gives now.
    pub(crate) fn resolve(
        &self,
        sources: &Sources<'_>,
        event: &RequestEvent,
        decision: &HookDecision,
        now_ms: u64,
    ) -> Result<Verdict, VshError> {
        let hook = self.hook.as_ref().ok_or(VshError::NoHook)?;
        let transaction = event.transaction();
        let records = sources.records;
        let record = sources.record(transaction)?;
        if record.state != event.state || Self::event(sources, hook, transaction, record.state)? != *event {
            return Err(VshError::HookEventMismatch(transaction));
        }
        let text = match decision {
            HookDecision::FollowPolicy => "",
            HookDecision::Approve { reason } | HookDecision::Reject { reason } => reason,
            HookDecision::Review { feedback } => feedback,
        };
        if text.len() > hook.max_reason_bytes() {
            return Err(VshError::HookReasonLimit { length: text.len(), max: hook.max_reason_bytes() });
        }
        Ok(match (decision, record.state) {
            (HookDecision::Reject { .. }, _) => {
                sources.previews.forget(transaction);
                Verdict::Settled(records.transactions().reject(transaction, now_ms)?.state)
            }
            (HookDecision::Review { .. }, TransactionState::AutoApproved) => Verdict::Settled(
                sources.previews.demote(records.transactions(), transaction, now_ms)?.unwrap_or(record.state),
            ),
            (HookDecision::Review { .. } | HookDecision::FollowPolicy, TransactionState::PendingApproval) => {
                Verdict::Settled(record.state)
            }
            (HookDecision::Approve { .. }, TransactionState::PendingApproval) => {
                if !event.evidence_complete {
                    return Err(VshError::IncompleteHookEvidence(transaction));
                }
                let principal = PrincipalId::digest(&event.hook.0);
                let grant = ApprovalGrant::new(transaction, principal, now_ms, now_ms + hook.approval_ttl_ms())?;
                records.transactions().approve(transaction, &grant)?;
                Verdict::Commit(TransactionState::Approved)
            }
            (HookDecision::Approve { .. } | HookDecision::FollowPolicy, state) => {
                if matches!(decision, HookDecision::Approve { .. }) && !event.evidence_complete {
                    return Err(VshError::IncompleteHookEvidence(transaction));
                }
                Verdict::Commit(state)
            }
            (HookDecision::Review { .. }, state) => Verdict::Settled(state),
        })
    }

    /// The handler failed (an error, a timeout, a cancellation): auto-approved
    /// work whose artifact is durable falls back to pending review; nothing
    /// commits. Returns the transaction's state afterwards.
    pub(crate) fn fail(sources: &Sources<'_>, event: &RequestEvent, now_ms: u64) -> Result<TransactionState, VshError> {
        let transaction = event.transaction();
        let record = sources.record(transaction)?;
        if record.state == TransactionState::AutoApproved && record.artifact.is_some() {
            let transactions = sources.records.transactions();
            return Ok(sources.previews.demote(transactions, transaction, now_ms)?.unwrap_or(record.state));
        }
        Ok(record.state)
    }

    /// The event a hook sees for `transaction`, regenerated from what is stored.
    fn event(
        sources: &Sources<'_>,
        hook: &HookConfig,
        transaction: TransactionId,
        state: TransactionState,
    ) -> Result<RequestEvent, VshError> {
        let artifact = match sources.previews.artifact(transaction) {
            Some(artifact) => artifact,
            None => sources.records.load_verified(transaction)?.0,
        };
        let evidence =
            Evidence::decode(&artifact.evidence).map_err(|source| VshError::Evidence { transaction, source })?;
        let (contents, content_complete) = content_evidence(sources, &artifact, hook.max_content_bytes())?;
        Ok(RequestEvent {
            event_id: RequestEvent::derive_id(transaction, hook.id(), state),
            hook: hook.id(),
            state,
            decision: evidence.decision,
            binding: artifact.binding,
            intent: artifact.intent,
            diff: artifact.diff,
            effects: evidence.effects,
            stdout: evidence.output.stdout_text(),
            contents,
            evidence_complete: true,
            content_complete,
        })
    }
}

/// Before and after contents of changed files, from hash-verified bytes
/// only: after-states from a held preview's memory, the artifact's inline
/// contents or the blob store, before-states from the workspace when (and
/// only when) the live bytes still hash to the recorded state (for a file
/// deleted unread: when its stamp still matches; its blob is then the
/// digest of the bytes read).
fn content_evidence(
    sources: &Sources<'_>,
    artifact: &vsh_store::PendingArtifact,
    budget: u64,
) -> Result<(Vec<ReviewContent>, bool), VshError> {
    let diff = artifact.diff.entries();
    let mut contents = Vec::new();
    let mut complete = true;
    let mut spent = 0u64;
    for entry in diff {
        for (after, state) in [(false, entry.before), (true, entry.after)] {
            let Some(state) = state.filter(|state| state.kind == NodeKind::File) else { continue };
            if state.content.is_none() && state.stamp.is_none() {
                continue;
            }
            if budget == 0 || spent.saturating_add(state.size) > budget {
                complete = false;
                continue;
            }
            let bytes = match (after, state.content) {
                // A held preview's own bytes, else the store's (a missing or
                // corrupt blob is a store failure, never "not reviewed").
                (true, Some(blob)) => {
                    match sources.previews.content(blob).or_else(|| artifact.contents.get(&blob).cloned()) {
                        Some(bytes) => Some(bytes.to_vec()),
                        None => Some(sources.records.blobs().get(blob, state.size)?),
                    }
                }
                (true, None) => None,
                // By digest, or for a file deleted unread by its stamp.
                (false, _) => vsh_vfs::live_content_if_unchanged(sources.workspace, &entry.path, &state),
            };
            match bytes {
                Some(bytes) => {
                    spent += state.size;
                    let blob = state.content.unwrap_or_else(|| BlobId::of(&bytes));
                    contents.push(ReviewContent { path: entry.path.clone(), after, blob, bytes });
                }
                None => complete = false,
            }
        }
    }
    Ok((contents, complete))
}
