//! [`StoreError`]: every way a data-directory, blob, transaction-log, approval
//! or artifact operation can fail.
//!
//! Corruption is always an error naming the blob, log offset or transaction,
//! never data: a blob whose bytes do not hash to its id, a log frame whose
//! checksum or rules fail and an artifact whose binding does not re-derive are
//! refused before anything is returned. Storage failures
//! ([`StoreError::Io`]) stop the store: every later call is
//! [`StoreError::Poisoned`] until it is reopened.

use vsh_host::HostError;
use vsh_types::{BlobId, TransactionId, TransactionState, TransitionError, VPath};

use crate::artifact::ArtifactError;
use crate::backend::BackendError;
use crate::txlog::LogError;

/// An error from the trusted data directory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The data directory could not be opened or created safely (a symlink or a
    /// non-directory in its path, or an I/O error).
    #[error("cannot open the data directory at {path}")]
    DataDir {
        /// The data directory, relative to the workspace (`.` for an external one).
        path: VPath,
        /// What the host reported.
        #[source]
        source: HostError,
    },
    /// The data directory would be the workspace root itself.
    #[error("the data directory cannot be the workspace root")]
    DataDirIsRoot,
    /// Storage I/O inside the data directory failed (or a test injected a
    /// fault). The store that reported it is now poisoned.
    #[error("i/o failed in the data directory during {op}")]
    Io {
        /// The step that failed, e.g. `"append to the transaction log"`.
        op: &'static str,
        /// What the backend reported (it names the path).
        #[source]
        source: BackendError,
    },
    /// An earlier storage failure stopped this store; reopen it to continue.
    /// Reopening replays the durable state, which is the state before or after
    /// the failed operation.
    #[error("the store stopped after an earlier i/o failure; reopen it")]
    Poisoned,
    /// The transaction log failed a check (see [`crate::txlog`]).
    #[error("transaction log is corrupt at byte {offset}: {reason}")]
    CorruptLog {
        /// Where the bad header or frame starts.
        offset: u64,
        /// Which check failed.
        reason: &'static str,
    },
    /// A file in the data directory was written by a newer format version.
    #[error("{file} has format {}, newer than this build; upgrade vsh", String::from_utf8_lossy(.found))]
    UpgradeRequired {
        /// The file, relative to the data directory.
        file: &'static str,
        /// The magic found.
        found: [u8; 8],
    },
    /// The transaction log has reached its size bound even after compaction.
    #[error("the transaction log is full ({size} bytes of at most {max})")]
    LogFull {
        /// The size the log would reach.
        size: u64,
        /// The configured bound.
        max: u64,
    },
    /// Creating one more live record would pass the configured bound.
    #[error("the store holds {max} live records, its limit")]
    RecordLimit {
        /// The configured bound.
        max: u64,
    },
    /// The transaction log was written under another authority key: this
    /// process holds a different key (another user's, or a replaced key file),
    /// so nothing in the log can be trusted or changed with it.
    #[error(
        "the transaction log was written under another authority key (id {}…, this key's id {}…), or its header is damaged",
        hex4(found),
        hex4(expected)
    )]
    WrongAuthorityKey {
        /// The id of the key that wrote the log.
        found: [u8; 32],
        /// The id of the key in use.
        expected: [u8; 32],
    },
    /// The authority key file is unusable (see `AuthorityKeyFile`): missing
    /// where it must exist, not a regular file, owned by another user, open to
    /// group or others, or not a key.
    #[error("authority key {}: {reason}", path.display())]
    AuthorityKey {
        /// The key file.
        path: std::path::PathBuf,
        /// What is wrong.
        reason: &'static str,
    },
    /// Reading or creating the authority key file failed.
    #[error("authority key {}: host I/O failed", path.display())]
    AuthorityKeyIo {
        /// The key file.
        path: std::path::PathBuf,
        /// What the host reported.
        #[source]
        source: vsh_host::HostError,
    },
    /// The transaction log is in the unauthenticated first format; opening the
    /// store migrates it (voiding every approval it holds).
    #[error("the transaction log is in the unauthenticated first format and must be migrated")]
    LegacyLog,
    /// A stored blob's bytes do not hash to its id (or it is not a regular file).
    #[error("blob {id} at {} is corrupt", path.display())]
    CorruptBlob {
        /// The blob's id.
        id: BlobId,
        /// Where its file is (for the operator; never used to reach it).
        path: std::path::PathBuf,
    },
    /// No blob with this id is stored.
    #[error("blob {id} is missing")]
    MissingBlob {
        /// The blob's id.
        id: BlobId,
    },
    /// A blob is larger than the caller's limit; nothing was allocated for it.
    #[error("blob {id} is {size} bytes, over the limit of {max}")]
    TooLarge {
        /// The blob's id.
        id: BlobId,
        /// Its stored size.
        size: u64,
        /// The caller's limit.
        max: u64,
    },
    /// Bytes given with an expected id hash to a different id.
    #[error("bytes hash to {actual}, expected {expected}")]
    DigestMismatch {
        /// The id the caller expected.
        expected: BlobId,
        /// The id of the bytes given.
        actual: BlobId,
    },
    /// No unique temporary name could be found after many attempts.
    #[error("no free temporary name under {path}")]
    TempNames {
        /// The temporary directory, relative to the data directory.
        path: VPath,
    },
    /// A legacy (`VSHTXR01`) transaction record failed its checks during migration.
    #[error("transaction record {id} is corrupt: {reason}")]
    CorruptRecord {
        /// The transaction the record belongs to (from its file name).
        id: TransactionId,
        /// Which check failed.
        reason: &'static str,
    },
    /// A record for this transaction already exists.
    #[error("transaction {id} already exists")]
    Duplicate {
        /// The transaction.
        id: TransactionId,
    },
    /// No record for this transaction exists.
    #[error("transaction {id} not found")]
    NotFound {
        /// The transaction.
        id: TransactionId,
    },
    /// A compare-and-transition found a different current state.
    #[error("transaction {id} is {}, expected {}", .actual.name(), .expected.name())]
    StateConflict {
        /// The transaction.
        id: TransactionId,
        /// The state the caller expected.
        expected: TransactionState,
        /// The state on record.
        actual: TransactionState,
    },
    /// The state table does not allow the requested transition.
    #[error("transaction {id} cannot move from {} to {}", .source.from.name(), .source.to.name())]
    Transition {
        /// The transaction.
        id: TransactionId,
        /// The refused edge.
        #[source]
        source: TransitionError,
    },
    /// The transaction already records a different artifact.
    #[error("transaction {id} already has artifact {existing}, refusing {requested}")]
    ArtifactConflict {
        /// The transaction.
        id: TransactionId,
        /// The artifact on record.
        existing: BlobId,
        /// The artifact the caller tried to set.
        requested: BlobId,
    },
    /// A record given to [`crate::TransactionStore::create`] breaks a creation rule.
    #[error("transaction {id} cannot be created: {reason}")]
    InvalidRecord {
        /// The transaction.
        id: TransactionId,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// An approval grant that would expire no later than it was issued.
    #[error("a grant issued at {issued_ms} must expire after it, not at {expires_ms}")]
    InvalidGrant {
        /// When it was issued.
        issued_ms: u64,
        /// When it would expire.
        expires_ms: u64,
    },
    /// A grant was offered for a different transaction.
    #[error("grant for transaction {grant_for} offered to transaction {id}")]
    GrantMismatch {
        /// The transaction being approved.
        id: TransactionId,
        /// The transaction the grant names.
        grant_for: TransactionId,
    },
    /// The operation does not apply to a transaction in this state (for
    /// example approving one that is not pending approval).
    #[error("cannot {op} transaction {id} while it is {}", .state.name())]
    WrongState {
        /// The transaction.
        id: TransactionId,
        /// The refused operation, e.g. `"approve"`.
        op: &'static str,
        /// Its current state.
        state: TransactionState,
    },
    /// Only an auto-approved transaction, or an approved one whose grant has
    /// not expired, can be reserved for commit.
    #[error("transaction {id} is {} and cannot be reserved", .state.name())]
    NotReservable {
        /// The transaction.
        id: TransactionId,
        /// Its current state.
        state: TransactionState,
    },
    /// A durable auto-approved preview was committed after its expiry; the
    /// transaction is now durably `Expired`.
    #[error(
        "the preview of transaction {} expired {} ago: it can never be committed now",
        id.short(),
        elapsed(*expires_ms, *now_ms)
    )]
    PreviewExpired {
        /// The transaction.
        id: TransactionId,
        /// When the preview expired.
        expires_ms: u64,
        /// The caller's clock.
        now_ms: u64,
    },
    /// The approval lapsed; the transaction is now durably `Expired`.
    #[error(
        "the approval of transaction {} expired {} ago: it can never be committed now (a new run of its program \
         can be)",
        id.short(),
        elapsed(*expires_ms, *now_ms)
    )]
    ApprovalExpired {
        /// The transaction.
        id: TransactionId,
        /// When the grant expired.
        expires_ms: u64,
        /// The caller's clock.
        now_ms: u64,
    },
    /// The approval lapsed before the work was committed; the work waits
    /// for an approval again (durably `PendingApproval`, its grant dropped).
    #[error(
        "the approval of transaction {} lapsed {} ago, before its commit: the work waits for an approval again \
         (an approval lasts its --ttl; `vsh approve --commit` approves and commits in one)",
        id.short(),
        elapsed(*expires_ms, *now_ms)
    )]
    ApprovalLapsed {
        /// The transaction.
        id: TransactionId,
        /// When the grant expired.
        expires_ms: u64,
        /// The caller's clock.
        now_ms: u64,
    },
    /// The record changed since the reservation last moved it (someone else
    /// transitioned it), so the reservation no longer holds.
    #[error("the reservation of transaction {id} was lost: the record changed under it")]
    ReservationLost {
        /// The transaction.
        id: TransactionId,
    },
    /// A reservation was used for a step it cannot make (for example
    /// [`crate::TransactionStore::advance`] to a terminal state).
    #[error("reservation of transaction {id} cannot move to {}: {reason}", .next.name())]
    ReservationMisuse {
        /// The transaction.
        id: TransactionId,
        /// The requested state.
        next: TransactionState,
        /// Why not.
        reason: &'static str,
    },
    /// The transaction has no pending-approval artifact.
    #[error("transaction {id} has no artifact")]
    NoArtifact {
        /// The transaction.
        id: TransactionId,
    },
    /// The workspace's loss history (`loss-history`) does not decode or
    /// verify under the authority key.
    #[error(
        "the workspace's loss history (loss-history in its data directory) is corrupt: {reason}; remove the file \
         to start afresh (every file's content then counts as reviewed as it stands)"
    )]
    CorruptLossHistory {
        /// What failed.
        reason: &'static str,
    },
    /// The workspace's record of unread contents (`unread-contents`) does
    /// not decode or verify under the authority key.
    #[error(
        "the workspace's record of the files commits removed unread (unread-contents in its data directory) is \
         corrupt: {reason}; remove the file (only `vsh revert` of such a removal needs it)"
    )]
    CorruptUnreadContents {
        /// What failed.
        reason: &'static str,
    },
    /// The workspace's record of what vsh last saw of its files
    /// (`seen-contents`) does not decode or verify under the authority key.
    #[error(
        "the workspace's record of what vsh last saw of its files (seen-contents in its data directory) is \
         corrupt: {reason}; remove the file to start afresh"
    )]
    CorruptSeenContents {
        /// What failed.
        reason: &'static str,
    },
    /// The workspace's record of its approvers' names (`principal-names`)
    /// does not decode or verify under the authority key.
    #[error(
        "the workspace's record of its approvers' names (principal-names in its data directory) is corrupt: \
         {reason}; remove the file (approvals are then shown by their digests)"
    )]
    CorruptPrincipalNames {
        /// What failed.
        reason: &'static str,
    },
    /// The record of what rejections said no to failed to verify or decode.
    #[error(
        "the workspace's record of what its rejections refused (rejection-scopes in its data directory) is \
         corrupt: {reason}; remove the file (every rejection is then taken as an operator's refusal of its work)"
    )]
    CorruptRejectionScopes {
        /// What failed.
        reason: &'static str,
    },
    /// A pending-approval artifact failed to decode or verify.
    #[error("artifact {blob} is invalid")]
    Artifact {
        /// The artifact's blob (of the bytes that were checked).
        blob: BlobId,
        /// What failed.
        #[source]
        source: ArtifactError,
    },
}

impl StoreError {
    /// Whether this error stopped (poisoned) the store that returned it.
    pub fn is_fatal(&self) -> bool {
        matches!(self, Self::Io { .. } | Self::Poisoned)
    }
}

/// How long ago `then_ms` was at `now_ms`, for people: whole seconds,
/// minutes, hours or days.
fn elapsed(then_ms: u64, now_ms: u64) -> String {
    let seconds = now_ms.saturating_sub(then_ms) / 1_000;
    match seconds {
        0..120 => format!("{seconds} s"),
        120..7_200 => format!("{} min", seconds / 60),
        7_200..172_800 => format!("{} h", seconds / 3_600),
        _ => format!("{} days", seconds / 86_400),
    }
}

fn hex4(id: &[u8; 32]) -> String {
    vsh_types::hex::encode(&id[..4])
}

impl From<LogError> for StoreError {
    fn from(error: LogError) -> Self {
        match error {
            LogError::Corrupt { offset, reason } => Self::CorruptLog { offset, reason },
            LogError::UpgradeRequired { found } => Self::UpgradeRequired { file: "txlog", found },
            LogError::WrongKey { found, expected } => Self::WrongAuthorityKey { found, expected },
            LogError::Legacy => Self::LegacyLog,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fatal_errors_and_key_ids_in_messages() {
        assert!(StoreError::Poisoned.is_fatal());
        let wrong = StoreError::WrongAuthorityKey { found: [0xab; 32], expected: [0x01; 32] };
        assert!(!wrong.is_fatal());
        let text = wrong.to_string();
        assert!(text.contains("id abababab…") && text.contains("this key's id 01010101…"), "{text}");
    }

    #[test]
    fn an_expiry_says_how_long_ago_for_people() {
        let id = TransactionId::digest(b"late");
        let at = |now_ms| StoreError::ApprovalExpired { id, expires_ms: 1_000_000, now_ms }.to_string();
        assert!(at(1_001_500).starts_with(&format!("the approval of transaction {} expired 1 s ago: ", id.short())));
        assert!(at(1_000_000 + 300_000).contains("expired 5 min ago"), "{}", at(1_300_000));
        assert!(at(1_000_000 + 3 * 3_600_000).contains("expired 3 h ago"));
        assert!(at(1_000_000 + 3 * 86_400_000).contains("expired 3 days ago"));
        let preview = StoreError::PreviewExpired { id, expires_ms: 5, now_ms: 1 }.to_string();
        assert!(preview.contains("expired 0 s ago: it can never be committed now"), "{preview}");
    }
}
