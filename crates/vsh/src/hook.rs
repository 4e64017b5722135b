//! Commit hooks: a host-supplied reviewer in the commit path.
//!
//! A [`HookConfig`] names the hook and its scope. When a hook is configured and
//! in scope for a transaction, [`crate::Runtime::commit`] refuses with
//! [`crate::VshError::HookRequired`]: the only way to commit is
//! [`crate::Runtime::prepare_commit`] → the handler → [`crate::Runtime::resolve_commit`]
//! (or [`HookedRuntime`], which does exactly that). A hard policy denial never
//! reaches a hook. The [`RequestEvent`] handed to the handler is regenerated
//! deterministically from the stored transaction, so `resolve_commit` can check
//! that the handler decided on exactly what is being committed.

use vsh_policy::Decision;
use vsh_types::canon::{self, Canonical};
use vsh_types::{BlobId, CanonicalDiff, TransactionBinding, TransactionId, TransactionState, VPath};

use vsh_vfs::Effect;

use crate::{Receipt, RunRequest, Runtime, VshError};

/// Which transactions a hook reviews.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HookScope {
    /// Only transactions the policy escalated (`PendingApproval`).
    #[default]
    ReviewRequired,
    /// Every transaction that could commit: auto-approved ones too.
    AllRequests,
}

/// A configured hook: its identity, scope and bounds. Bound into the runtime
/// configuration digest of every transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookConfig {
    label: String,
    scope: HookScope,
    approval_ttl_ms: u64,
    max_reason_bytes: usize,
    max_content_bytes: u64,
}

impl HookConfig {
    /// A hook named `label` (its id is the label's digest): scope `ReviewRequired`,
    /// approvals valid 5 minutes, reasons up to 16 KiB, no content evidence.
    pub fn new(label: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            scope: HookScope::ReviewRequired,
            approval_ttl_ms: 5 * 60 * 1000,
            max_reason_bytes: 16 << 10,
            max_content_bytes: 0,
        }
    }

    /// Replace the scope.
    #[must_use]
    pub fn with_scope(mut self, scope: HookScope) -> Self {
        self.scope = scope;
        self
    }

    /// How long an approval granted by the hook stays valid.
    #[must_use]
    pub fn with_approval_ttl_ms(mut self, ttl_ms: u64) -> Self {
        self.approval_ttl_ms = ttl_ms.max(1);
        self
    }

    /// The longest reason or feedback text accepted from the handler.
    #[must_use]
    pub fn with_max_reason_bytes(mut self, maximum: usize) -> Self {
        self.max_reason_bytes = maximum;
        self
    }

    /// Opt into content evidence: up to `maximum` bytes of before and after file
    /// contents in each [`RequestEvent`] (default 0: structure only).
    #[must_use]
    pub fn with_max_content_bytes(mut self, maximum: u64) -> Self {
        self.max_content_bytes = maximum;
        self
    }

    /// The hook's id: the digest of its label.
    pub fn id(&self) -> HookId {
        HookId(*blake3::Hasher::new_derive_key("vsh 2026 hook v1").update(self.label.as_bytes()).finalize().as_bytes())
    }

    /// The scope.
    pub fn scope(&self) -> HookScope {
        self.scope
    }

    /// Whether the hook reviews a transaction in `state`.
    pub fn applies_to(&self, state: TransactionState) -> bool {
        match self.scope {
            HookScope::ReviewRequired => state == TransactionState::PendingApproval,
            HookScope::AllRequests => {
                matches!(state, TransactionState::PendingApproval | TransactionState::AutoApproved)
            }
        }
    }

    pub(crate) fn approval_ttl_ms(&self) -> u64 {
        self.approval_ttl_ms
    }

    pub(crate) fn max_reason_bytes(&self) -> usize {
        self.max_reason_bytes
    }

    pub(crate) fn max_content_bytes(&self) -> u64 {
        self.max_content_bytes
    }
}

/// The encoding bound into the runtime configuration digest: the hook's id,
/// scope, approval lifetime and bounds.
impl Canonical for HookConfig {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.id().0);
        canon::put_u8(
            out,
            match self.scope {
                HookScope::ReviewRequired => 1,
                HookScope::AllRequests => 2,
            },
        );
        canon::put_u64(out, self.approval_ttl_ms);
        canon::put_u64(out, self.max_reason_bytes as u64);
        canon::put_u64(out, self.max_content_bytes);
    }
}

/// A hook's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HookId(pub [u8; 32]);

/// What the handler decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookDecision {
    /// Do what the policy says: commit auto-approved or approved work, leave
    /// pending work pending.
    FollowPolicy,
    /// Approve (pending work gets a grant from the hook for its TTL) and commit.
    Approve {
        /// Why.
        reason: String,
    },
    /// Send to human review: auto-approved work becomes `PendingApproval`.
    Review {
        /// Feedback for the reviewer.
        feedback: String,
    },
    /// Reject: the transaction can never commit.
    Reject {
        /// Why.
        reason: String,
    },
}

/// One file's content as evidence, loaded from hash-verified bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewContent {
    /// The path.
    pub path: VPath,
    /// Before (`false`) or after (`true`) the change.
    pub after: bool,
    /// The content's digest.
    pub blob: BlobId,
    /// The bytes (their BLAKE3 digest equals `blob`).
    pub bytes: Vec<u8>,
}

/// What a hook reviews: the transaction, every binding digest, the decision,
/// the canonical diff and (if configured) content evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestEvent {
    /// A stable delivery id (so handlers can be idempotent).
    pub event_id: [u8; 32],
    /// The hook.
    pub hook: HookId,
    /// Its state when the event was made.
    pub state: TransactionState,
    /// The policy decision.
    pub decision: Decision,
    /// Every binding digest (snapshot, program, intent, read set, write set,
    /// diff, policy, runtime configuration, evidence), with the id derived from them.
    pub binding: TransactionBinding,
    /// The intent text (its digest is the binding's).
    pub intent: String,
    /// The canonical diff (its digest is the binding's).
    pub diff: CanonicalDiff,
    /// What the program did, in order (the diff shows a rename as a delete and
    /// a create; the effects show it was a rename).
    pub effects: Vec<Effect>,
    /// The program's stdout.
    pub stdout: String,
    /// Content evidence (empty unless [`HookConfig::with_max_content_bytes`]).
    pub contents: Vec<ReviewContent>,
    /// Whether the structural evidence (diff, digests, decision) is complete.
    pub evidence_complete: bool,
    /// Whether every changed file's before and after content is in `contents`.
    /// Oversized content, or content changed on disk since the run, is left out
    /// and must not be assumed reviewed.
    pub content_complete: bool,
}

impl RequestEvent {
    /// The transaction (the binding's id).
    pub fn transaction(&self) -> TransactionId {
        self.binding.transaction()
    }

    /// The event id for a transaction, hook and state.
    pub(crate) fn derive_id(transaction: TransactionId, hook: HookId, state: TransactionState) -> [u8; 32] {
        let mut out = Vec::new();
        transaction.encode_canonical(&mut out);
        out.extend_from_slice(&hook.0);
        canon::put_u8(&mut out, state.tag());
        *blake3::Hasher::new_derive_key("vsh 2026 request-event v1").update(&out).finalize().as_bytes()
    }
}

/// The outcome of [`Runtime::prepare_commit`].
#[derive(Debug, Clone, PartialEq)]
pub enum CommitPreparation {
    /// No hook applies: commit with [`Runtime::commit`].
    Ready {
        /// The transaction.
        transaction: TransactionId,
        /// Its state.
        state: TransactionState,
    },
    /// The hook must decide; pass the decision to [`Runtime::resolve_commit`].
    Review(Box<RequestEvent>),
}

/// What the hook decided, as recorded with the resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookDecisionRecord {
    /// The event decided on.
    pub event_id: [u8; 32],
    /// The hook.
    pub hook: HookId,
    /// The decision.
    pub decision: HookDecision,
}

/// The outcome of [`Runtime::resolve_commit`].
#[derive(Debug, Clone, PartialEq)]
pub struct CommitResolution {
    /// The transaction's state afterwards.
    pub state: TransactionState,
    /// The commit receipt, when the resolution committed.
    pub receipt: Option<Receipt>,
    /// The recorded decision.
    pub hook: HookDecisionRecord,
}

/// A synchronous reviewer.
pub trait CommitHook {
    /// Decide on one event. An error is handled like [`Runtime::fail_hook`]:
    /// auto-approved work falls back to pending review, nothing commits.
    fn decide(&self, event: &RequestEvent) -> Result<HookDecision, Box<dyn std::error::Error + Send + Sync>>;
}

/// A [`Runtime`] and its [`CommitHook`]: run, then let the hook decide, then commit.
#[derive(Debug)]
pub struct HookedRuntime<H: CommitHook> {
    runtime: Runtime,
    hook: H,
}

impl<H: CommitHook> HookedRuntime<H> {
    /// Pair a runtime (opened with a [`HookConfig`]) with its handler.
    pub fn new(runtime: Runtime, hook: H) -> Self {
        Self { runtime, hook }
    }

    /// The runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The handler.
    pub fn hook(&self) -> &H {
        &self.hook
    }

    /// Preview `request`; if a hook applies, ask it (holding no runtime lock)
    /// and resolve; otherwise, in Auto mode, commit auto-approved work.
    pub fn run(&self, request: &RunRequest<'_>, now_ms: u64) -> Result<(Receipt, Option<CommitResolution>), VshError> {
        let preview = self.runtime.preview(request)?;
        if matches!(preview.state, TransactionState::Denied) {
            return Ok((preview, None));
        }
        match self.runtime.prepare_commit(preview.transaction)? {
            CommitPreparation::Ready { state, .. } => {
                if request.mode == crate::RunMode::Auto && state == TransactionState::AutoApproved {
                    let receipt = self.runtime.commit(preview.transaction, now_ms)?;
                    return Ok((receipt, None));
                }
                Ok((preview, None))
            }
            CommitPreparation::Review(event) => match self.hook.decide(&event) {
                Ok(decision) => {
                    let resolution = self.runtime.resolve_commit(&event, decision, now_ms)?;
                    let receipt = resolution.receipt.clone().unwrap_or(preview);
                    Ok((receipt, Some(resolution)))
                }
                Err(error) => {
                    self.runtime.fail_hook(&event, now_ms)?;
                    Err(VshError::HookHandler(error))
                }
            },
        }
    }
}
