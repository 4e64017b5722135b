//! `vsh.request-event/1`: what a commit hook reviews, as JSON.

use base64::Engine as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use vsh_vfs::Effect;

use super::{ChangeDocument, DecisionDocument};
use crate::hook::{RequestEvent, ReviewContent};

schema_name!(RequestEventSchema, "vsh.request-event/1");

/// A [`RequestEvent`]: the transaction, its binding digests, the policy
/// decision, the canonical diff, the program's effects and (when the hook
/// opted in) content evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RequestEventDocument {
    /// `vsh.request-event/1`.
    pub schema: RequestEventSchema,
    /// The delivery id, 64 hex digits (the same for the same transaction,
    /// hook and state, so a handler can be idempotent).
    pub event_id: String,
    /// The hook's id, 64 hex digits.
    pub hook: String,
    /// The transaction id, 64 hex digits.
    pub transaction: String,
    /// The transaction's state when the event was made.
    pub state: String,
    /// The policy decision.
    pub decision: DecisionDocument,
    /// Every digest the transaction id derives from.
    pub binding: BindingDocument,
    /// The intent text.
    pub intent: String,
    /// The canonical diff.
    pub changes: Vec<ChangeDocument>,
    /// What the program did, in order.
    pub effects: Vec<EffectDocument>,
    /// The program's stdout.
    pub stdout: String,
    /// Content evidence: before and after contents of changed files.
    pub contents: Vec<ContentDocument>,
    /// Whether the structural evidence (diff, digests, decision) is complete.
    pub evidence_complete: bool,
    /// Whether every changed file's before and after content is in `contents`.
    pub content_complete: bool,
}

/// The binding digests, each 64 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BindingDocument {
    /// The observed base snapshot.
    pub snapshot: String,
    /// The program.
    pub program: String,
    /// The intent text.
    pub intent: String,
    /// The read set.
    pub read_set: String,
    /// The write set.
    pub write_set: String,
    /// The canonical diff.
    pub diff: String,
    /// The policy in force.
    pub policy: String,
    /// The security-relevant runtime configuration.
    pub runtime_config: String,
    /// The execution evidence.
    pub evidence: String,
}

/// One effect of the program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EffectDocument {
    /// `write`, `mkdir`, `remove`, `rename` or `set-mode`.
    pub kind: String,
    /// The path (a rename's source).
    pub path: String,
    /// A rename's destination.
    pub to: Option<String>,
}

impl From<&Effect> for EffectDocument {
    fn from(effect: &Effect) -> Self {
        let (kind, path, to) = match effect {
            Effect::Write(path) => ("write", path, None),
            Effect::Mkdir(path) => ("mkdir", path, None),
            Effect::Remove(path) => ("remove", path, None),
            Effect::Rename { from, to } => ("rename", from, Some(to.to_string())),
            Effect::SetMode(path) => ("set-mode", path, None),
        };
        Self { kind: kind.to_owned(), path: path.to_string(), to }
    }
}

/// One file's content, before or after the change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ContentDocument {
    /// The path.
    pub path: String,
    /// `false` for the content before the change, `true` after.
    pub after: bool,
    /// The content's digest, 64 hex digits.
    pub blob: String,
    /// Its length in bytes.
    pub size: u64,
    /// The bytes as text, when they are valid UTF-8.
    pub text: Option<String>,
    /// The bytes in base64, when they are not.
    pub base64: Option<String>,
}

impl From<&ReviewContent> for ContentDocument {
    fn from(content: &ReviewContent) -> Self {
        let text = std::str::from_utf8(&content.bytes).ok().map(str::to_owned);
        Self {
            path: content.path.to_string(),
            after: content.after,
            blob: content.blob.to_hex(),
            size: content.bytes.len() as u64,
            base64: text.is_none().then(|| base64::engine::general_purpose::STANDARD.encode(&content.bytes)),
            text,
        }
    }
}

impl From<&RequestEvent> for RequestEventDocument {
    fn from(event: &RequestEvent) -> Self {
        let digests = event.binding.digests();
        Self {
            schema: RequestEventSchema,
            event_id: vsh_types::hex::encode(&event.event_id),
            hook: vsh_types::hex::encode(&event.hook.0),
            transaction: event.transaction().to_hex(),
            state: event.state.name().to_owned(),
            decision: (&event.decision).into(),
            binding: BindingDocument {
                snapshot: digests.snapshot.to_hex(),
                program: digests.program.to_hex(),
                intent: digests.intent.to_hex(),
                read_set: digests.read_set.to_hex(),
                write_set: digests.write_set.to_hex(),
                diff: digests.diff.to_hex(),
                policy: digests.policy.to_hex(),
                runtime_config: digests.runtime_config.to_hex(),
                evidence: digests.evidence.to_hex(),
            },
            intent: event.intent.clone(),
            changes: event.diff.entries().iter().map(Into::into).collect(),
            effects: event.effects.iter().map(Into::into).collect(),
            stdout: event.stdout.clone(),
            contents: event.contents.iter().map(Into::into).collect(),
            evidence_complete: event.evidence_complete,
            content_complete: event.content_complete,
        }
    }
}
