//! The review of a stored transaction: unified hunks of every changed text
//! file and symlink target, from hash-verified bytes only (for a file deleted unread, bytes
//! whose stamp still matches), never from a protected file.

use vsh_host::CapDir;
use vsh_policy::{AccessKind, CallPolicy};
use vsh_types::NodeKind;
use vsh_vfs::{FileReview, NoHunks, ReviewLimits, Side};

use crate::VshError;
use crate::previews::Previews;
use crate::records::Records;

/// The review of `artifact`'s diff: after-states from a held preview's memory
/// (`held`), the artifact's inline contents (`inline`, re-hashed when the
/// artifact was decoded) or the blob store (a missing or corrupt blob is a
/// store failure),
/// before-states from the workspace when, and only when, its live bytes
/// still hash to the recorded state and `calls` lets a program read them.
/// A set of workspace paths.
type PathSet = std::collections::BTreeSet<vsh_types::VPath>;

#[allow(clippy::too_many_arguments, reason = "the runtime's parts a review reads, each once")]
pub(crate) fn stored_review(
    records: &Records,
    held: &Previews,
    workspace: &CapDir,
    calls: &CallPolicy,
    artifact: &vsh_store::PendingArtifact,
    collected: bool,
    limits: ReviewLimits,
    (visible, only): (Option<&PathSet>, Option<&PathSet>),
) -> Result<Vec<FileReview>, VshError> {
    let inline = &artifact.contents;
    // What the reader may not see takes no part, not even as a rename's other end.
    let entries: Vec<vsh_types::DiffEntry> = match visible {
        Some(paths) => artifact.diff.entries().iter().filter(|entry| paths.contains(&entry.path)).cloned().collect(),
        None => artifact.diff.entries().to_vec(),
    };
    let wanted = |index: usize| only.is_none_or(|paths| entries.get(index).is_some_and(|e| paths.contains(&e.path)));
    vsh_vfs::review_entries_of(&entries, &wanted, limits, |entry, side| {
        // Neither side of a path protected from reading is shown: the
        // before state is the workspace's, and the after state, made by
        // whoever ran it (an operator's per-run policy may have let it copy
        // a secret there, or it generated one), is the protected file's
        // content to whoever reads this review (sec56 F1).
        if calls.authorize(&entry.path, AccessKind::ContentRead).is_err() {
            return Ok(Err(NoHunks::Protected));
        }
        let state = match side {
            Side::Before => entry.before,
            Side::After => entry.after,
        };
        let Some(state) = state.filter(|state| matches!(state.kind, NodeKind::File | NodeKind::Symlink)) else {
            return Ok(Err(NoHunks::Unavailable));
        };
        Ok(match (side, state.content) {
            // A file's bytes, or a symlink's target, by the digest the diff names.
            (Side::After, Some(blob)) => match held.content(blob).or_else(|| inline.get(&blob).cloned()) {
                Some(bytes) => Ok(bytes.to_vec()),
                // Work that can never commit may have had its contents
                // collected (`vsh gc`): no hunks, not a store failure.
                None if collected && records.blobs().status(blob)? == vsh_store::BlobStatus::Missing => {
                    Err(NoHunks::Unavailable)
                }
                None => Ok(records.blobs().get(blob, state.size)?),
            },
            (Side::After, None) => Err(NoHunks::Unavailable),
            // Where the link on disk points, while it is still the link the diff names.
            (Side::Before, Some(digest)) if state.kind == NodeKind::Symlink => workspace
                .read_link(&entry.path, state.size)
                .ok()
                .filter(|target| vsh_types::BlobId::of(target) == digest)
                .ok_or(NoHunks::Unavailable),
            (Side::Before, None) if state.kind == NodeKind::Symlink => Err(NoHunks::Unavailable),
            // By digest, or for a file deleted unread by its stamp; once
            // committed, from what the commit kept of it (by digest).
            (Side::Before, content) => match vsh_vfs::live_content_if_unchanged(workspace, &entry.path, &state) {
                Some(bytes) => Ok(bytes),
                None => match content {
                    Some(digest) if records.blobs().status(digest)? == vsh_store::BlobStatus::Intact => {
                        Ok(records.blobs().get(digest, state.size)?)
                    }
                    _ => Err(NoHunks::Unavailable),
                },
            },
        })
    })
}
