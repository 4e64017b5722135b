//! [`Records`]: the durable side of a runtime: transaction records, pending
//! artifacts and the blob store, and the check that a stored artifact still
//! binds to its transaction under the active policy.

use vsh_store::{
    ArtifactError, ArtifactLimits, BlobStore, PendingArtifact, StoreError, TransactionRecord, TransactionStore,
};
use vsh_types::{CanonicalDiff, PolicyDigest, ReadSet, TransactionId, TransactionState};

use crate::evidence::Evidence;
use crate::receipt::{Receipt, StageTimings};
use crate::{DurablePreviews, VshError};

/// The settings file in the data directory that holds the workspace's policy.
pub(crate) const WORKSPACE_POLICY_FILE: &str = "policy.toml";

/// The settings file that keeps a policy the workspace recorded once, by
/// its digest (`policy-<64 hex digits>`), after another replaced it.
fn archived_policy_name(digest: vsh_types::PolicyDigest) -> String {
    format!("policy-{}", digest.to_hex())
}

/// What starts the recorded policy's last line, before its MAC in hex.
const POLICY_MAC_PREFIX: &str = "# vsh authority MAC: ";

/// The MAC's context string.
const POLICY_MAC_DOMAIN: &str = "vsh 2026 workspace policy v1";

/// `text` as the workspace records it: the policy, then (on a line of its
/// own, a TOML comment, so the file still reads as the policy) its MAC under
/// the authority key. Whoever can write the data directory but does not hold
/// the key can neither change the policy nor plant one.
fn signed_policy(text: &str, key: &vsh_types::AuthorityKey) -> String {
    let mut signed = text.to_owned();
    if !signed.is_empty() && !signed.ends_with('\n') {
        signed.push('\n');
    }
    let tag = key.mac(POLICY_MAC_DOMAIN).update(signed.as_bytes()).finalize();
    let hex = tag.iter().fold(String::with_capacity(64), |mut hex, byte| {
        let _ = std::fmt::Write::write_fmt(&mut hex, format_args!("{byte:02x}"));
        hex
    });
    signed.push_str(POLICY_MAC_PREFIX);
    signed.push_str(&hex);
    signed.push('\n');
    signed
}

/// The policy text `data` recorded, if it recorded one: its MAC line must
/// verify under `key`, and is taken off. A file without one, or with one
/// that does not verify, is [`VshError::WorkspacePolicyForged`].
pub(crate) fn recorded_policy(
    data: &vsh_store::DataDir,
    key: &vsh_types::AuthorityKey,
) -> Result<Option<String>, VshError> {
    let Some(bytes) =
        data.read_setting(WORKSPACE_POLICY_FILE, vsh_policy::MAX_POLICY_FILE_BYTES).map_err(VshError::DataDirectory)?
    else {
        return Ok(None);
    };
    let text = String::from_utf8(bytes).map_err(|_| VshError::WorkspacePolicyForged("is not UTF-8 text"))?;
    let body = text.strip_suffix('\n').unwrap_or(&text);
    let (policy, last) = body.rsplit_once('\n').map_or(("", body), |(policy, last)| (policy, last));
    let Some(hex) = last.strip_prefix(POLICY_MAC_PREFIX) else {
        return Err(VshError::WorkspacePolicyForged(
            "carries no MAC under the authority key (a vsh before this one recorded it, or someone planted it)",
        ));
    };
    let tag: Option<Vec<u8>> = (hex.len() == 64)
        .then(|| (0..32).map(|at| u8::from_str_radix(hex.get(2 * at..2 * at + 2)?, 16).ok()).collect())
        .flatten();
    let signed = &text[..text.len() - last.len() - usize::from(text.ends_with('\n'))];
    let valid = tag.is_some_and(|tag| key.mac(POLICY_MAC_DOMAIN).update(signed.as_bytes()).verify(&tag));
    if !valid {
        return Err(VshError::WorkspacePolicyForged("does not verify: it was changed since vsh init recorded it"));
    }
    let mut policy = policy.to_owned();
    if !policy.is_empty() {
        policy.push('\n');
    }
    Ok(Some(policy))
}

/// The workspace's recorded policy file as it read when a runtime that
/// decides under it opened ([`Records::watching_policy`]).
#[derive(Debug, PartialEq, Eq)]
enum PolicyFileAtOpen {
    /// None was recorded (the default profile).
    Absent,
    /// Its bytes.
    Read(Vec<u8>),
}

/// A transaction ready to commit: what to apply, the new contents its
/// artifact carries, and the receipt to complete.
pub(crate) struct Committable {
    pub(crate) diff: CanonicalDiff,
    pub(crate) reads: ReadSet,
    pub(crate) contents: vsh_store::InlineContents,
    pub(crate) receipt: Receipt,
}

/// The transaction store, the blob store and the bounds of what they keep.
#[derive(Debug)]
pub(crate) struct Records {
    transactions: TransactionStore,
    blobs: BlobStore,
    /// The data directory, for its settings files (the workspace's policy).
    data: vsh_store::DataDir,
    limits: ArtifactLimits,
    /// The digest of the active policy: artifacts made under another are refused.
    policy: PolicyDigest,
    /// The workspace's recorded policy file as it read when the runtime
    /// opened, when the runtime decides under it ([`Records::watching_policy`]).
    watched_policy: Option<PolicyFileAtOpen>,
    /// The data directory's path in the workspace when it lies there, which
    /// every policy protects (for parsing an artifact's per-run policy).
    protected_data: Option<vsh_types::VPath>,
    /// The authority key: the recorded policy's MAC is made and checked with it.
    key: vsh_types::AuthorityKey,
    /// What runs whose previews stay in this process saw, newest last, not
    /// yet in the workspace's record of what vsh last saw: such a run
    /// writes nothing to the store; the next write of the record (a
    /// commit's) takes them.
    unsaved_sightings: std::sync::Mutex<Vec<crate::unseen::Noted>>,
    /// The session this runtime's work belongs to (an agent's connection:
    /// [`crate::RuntimeConfig::with_session`]), whose sightings are its own
    /// as well as any run's.
    session: Option<String>,
}

/// How long a run waits for another's hold on the record of what vsh saw.
const SEEN_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

impl Records {
    pub(crate) fn new(
        transactions: TransactionStore,
        blobs: BlobStore,
        data: vsh_store::DataDir,
        policy: PolicyDigest,
        protected_data: Option<vsh_types::VPath>,
        key: vsh_types::AuthorityKey,
    ) -> Self {
        Self {
            transactions,
            blobs,
            data,
            limits: ArtifactLimits::default(),
            policy,
            protected_data,
            key,
            watched_policy: None,
            unsaved_sightings: std::sync::Mutex::new(Vec::new()),
            session: None,
        }
    }

    /// The same, its work belonging to `session` (see [`Records::session`]).
    pub(crate) fn with_session(mut self, session: Option<String>) -> Self {
        self.session = session.filter(|session| !session.is_empty());
        self
    }

    /// The session this runtime's work belongs to, if any.
    pub(crate) fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// Watch the workspace's recorded policy file, as it reads now (or that
    /// none is recorded): the runtime decides under it, and refuses to go on
    /// once it reads otherwise ([`Records::check_policy_current`]).
    pub(crate) fn watching_policy(mut self) -> Result<Self, VshError> {
        self.watched_policy = Some(self.policy_file()?);
        Ok(self)
    }

    /// The workspace's recorded policy file as it reads now.
    fn policy_file(&self) -> Result<PolicyFileAtOpen, VshError> {
        let bytes = self
            .data
            .read_setting(WORKSPACE_POLICY_FILE, vsh_policy::MAX_POLICY_FILE_BYTES)
            .map_err(VshError::DataDirectory)?;
        Ok(bytes.map_or(PolicyFileAtOpen::Absent, PolicyFileAtOpen::Read))
    }

    /// `Ok` unless this runtime decides under the workspace's recorded policy
    /// and the file no longer reads as it did when the runtime opened
    /// ([`VshError::WorkspacePolicyReplaced`]): recorded again, removed, or
    /// changed by hand. One read of a small file.
    pub(crate) fn check_policy_current(&self) -> Result<(), VshError> {
        match &self.watched_policy {
            Some(at_open) if self.policy_file()? != *at_open => Err(VshError::WorkspacePolicyReplaced),
            _ => Ok(()),
        }
    }

    /// The lock over real commands' scratch directories, which also
    /// measures and clears them.
    pub(crate) fn scratch(&self) -> vsh_store::ScratchLock {
        self.data.scratch_lock()
    }

    /// The per-run policy an artifact carries, parsed as this runtime parses
    /// policies; an artifact whose policy text is not the policy its binding
    /// names is refused ([`VshError::ArtifactBinding`]).
    pub(crate) fn run_policy(&self, artifact: &PendingArtifact) -> Result<Option<crate::RunPolicy>, VshError> {
        let Some(text) = &artifact.policy else { return Ok(None) };
        let transaction = artifact.binding.transaction();
        let file = vsh_policy::PolicyFile::from_toml(text).map_err(|_| VshError::ArtifactBinding(transaction))?;
        let digest = file.policy(self.protected_data.as_ref()).digest();
        if digest != artifact.binding.digests().policy {
            return Err(VshError::ArtifactBinding(transaction));
        }
        Ok(Some(crate::RunPolicy { text: text.clone(), profile: file.profile(), digest }))
    }

    /// Record `text` (validated first) as the workspace's policy, with its
    /// MAC under the authority key on a last line of its own (see
    /// [`signed_policy`]).
    pub(crate) fn record_workspace_policy(&self, text: &str) -> Result<vsh_types::PolicyDigest, VshError> {
        let key = &self.key;
        let policy = vsh_policy::PolicyFile::from_toml(text).map_err(VshError::PolicyFile)?.policy(None);
        let signed = signed_policy(text, key);
        if signed.len() as u64 > vsh_policy::MAX_POLICY_FILE_BYTES {
            return Err(VshError::PolicyFile(vsh_policy::PolicyFileError::TooLarge {
                size: signed.len() as u64,
                limit: vsh_policy::MAX_POLICY_FILE_BYTES,
            }));
        }
        // The policy it replaces is kept, for reviews of work made under it
        // (`known_policy`); best effort: without it such reviews withhold more.
        if let Ok(Some(old)) = self.workspace_policy_text()
            && let Ok(file) = vsh_policy::PolicyFile::from_toml(&old)
        {
            let digest = file.policy(self.protected_data.as_ref()).digest();
            let _ = self.data.write_setting(&archived_policy_name(digest), old.as_bytes());
        }
        self.data.write_setting(WORKSPACE_POLICY_FILE, signed.as_bytes()).map_err(VshError::DataDirectory)?;
        Ok(policy.digest())
    }

    /// The policy whose digest is `digest`, when this workspace knows it:
    /// `run_policy` (a per-run policy's text, from its artifact), a
    /// built-in profile, or a policy the workspace recorded before the one
    /// it records now (kept as `policy-<digest>` when replaced). Each is
    /// taken only if it parses to that very digest, so a file planted under
    /// such a name is no policy of anyone's.
    pub(crate) fn known_policy(
        &self,
        digest: vsh_types::PolicyDigest,
        run_policy: Option<&str>,
    ) -> Option<vsh_policy::TransactionPolicy> {
        let data = self.protected_data.as_ref();
        let parsed = |text: &str| {
            vsh_policy::PolicyFile::from_toml(text).ok().map(|file| file.policy(data)).filter(|p| p.digest() == digest)
        };
        if let Some(policy) = run_policy.and_then(parsed) {
            return Some(policy);
        }
        if let Some(policy) = vsh_policy::PolicyProfile::ALL
            .into_iter()
            .map(|profile| vsh_policy::TransactionPolicy::from_profile(profile, data))
            .find(|policy| policy.digest() == digest)
        {
            return Some(policy);
        }
        let bytes = self.data.read_setting(&archived_policy_name(digest), vsh_policy::MAX_POLICY_FILE_BYTES).ok()??;
        parsed(std::str::from_utf8(&bytes).ok()?)
    }

    /// The text of the policy the workspace recorded, if it recorded one,
    /// verified under the authority key (without its MAC line).
    pub(crate) fn workspace_policy_text(&self) -> Result<Option<String>, VshError> {
        recorded_policy(&self.data, &self.key)
    }

    /// The workspace's loss history (an empty one where none is kept).
    pub(crate) fn loss_history(&self) -> Result<vsh_store::LossHistory, VshError> {
        vsh_store::LossHistory::read(&self.data, &self.key).map_err(VshError::DataDirectory)
    }

    /// Replace the workspace's loss history with `history`.
    pub(crate) fn write_loss_history(&self, history: &vsh_store::LossHistory) -> Result<(), VshError> {
        history.write(&self.data, &self.key).map_err(VshError::DataDirectory)
    }

    /// Where the bytes are of files commits removed or replaced unread
    /// ([`vsh_store::UnreadContents`]).
    pub(crate) fn unread_contents(&self) -> Result<vsh_store::UnreadContents, VshError> {
        vsh_store::UnreadContents::read(&self.data, &self.key).map_err(VshError::DataDirectory)
    }

    /// Name the bytes `kept` (each a path, the state its diff recorded and
    /// the content's digest) in the workspace's unread contents. Best
    /// effort, as the bytes themselves are kept: a record that cannot be
    /// read is started afresh.
    pub(crate) fn name_unread_contents(&self, kept: &[(vsh_types::VPath, vsh_types::NodeState, vsh_types::BlobId)]) {
        if kept.is_empty() {
            return;
        }
        let mut contents = self.unread_contents().unwrap_or_default();
        for (path, state, content) in kept {
            contents.insert(path, state, *content);
        }
        let _ = contents.write(&self.data, &self.key);
    }

    /// What vsh last saw of the workspace's files
    /// ([`vsh_store::SeenContents`]), with what this process's runs saw
    /// and have not written yet; none where the record does not verify
    /// (the next run that reads a file starts it afresh).
    pub(crate) fn seen_contents(&self) -> vsh_store::SeenContents {
        self.seen_contents_verified().0
    }

    /// [`Records::seen_contents`], and whether the record was there but did
    /// not verify (damaged, or written without the authority key).
    pub(crate) fn seen_contents_verified(&self) -> (vsh_store::SeenContents, bool) {
        let (mut seen, corrupt) = match vsh_store::SeenContents::read(&self.data, &self.key) {
            Ok(seen) => (seen, false),
            Err(vsh_store::StoreError::CorruptSeenContents { .. }) => (vsh_store::SeenContents::default(), true),
            Err(_) => (vsh_store::SeenContents::default(), false),
        };
        for noted in self.unsaved_sightings.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
            noted.apply(&mut seen, self.session());
        }
        (seen, corrupt)
    }

    /// Record `noted` (what runs saw, and what this session's work wrote)
    /// in the workspace's record, after `seen` ([`Records::seen_contents`]):
    /// written when `write` (with what earlier runs left unsaved) and that
    /// changes anything, else kept in this process for the next write.
    /// Best effort: a write refused leaves the record before it.
    pub(crate) fn note_sightings(&self, seen: vsh_store::SeenContents, noted: Vec<crate::unseen::Noted>, write: bool) {
        let session = self.session();
        let mut unsaved = self.unsaved_sightings.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !write {
            unsaved.extend(noted);
            let over = unsaved.len().saturating_sub(vsh_store::MAX_SEEN_ENTRIES);
            unsaved.drain(..over);
            return;
        }
        let mut probe = seen;
        if unsaved.is_empty() && !noted.iter().any(|noted| noted.apply(&mut probe, session)) {
            return;
        }
        // Read again under the lock, so that runs at the same moment add
        // up, never overwrite each other's (sec74 F4).
        // Best effort: a lock someone holds past a few seconds costs this
        // run's sightings, never the run.
        let Ok(_held) = self.data.lock_setting(vsh_store::SEEN_CONTENTS_FILE, SEEN_LOCK_WAIT) else { return };
        let mut current = vsh_store::SeenContents::read(&self.data, &self.key).unwrap_or_default();
        for noted in unsaved.drain(..).chain(noted) {
            noted.apply(&mut current, session);
        }
        let _ = current.write(&self.data, &self.key);
    }

    /// The names recorded for approvers' digests (none where the record
    /// does not verify: the digests are shown instead).
    pub(crate) fn principal_names(&self) -> vsh_store::PrincipalNames {
        vsh_store::PrincipalNames::read(&self.data, &self.key).unwrap_or_default()
    }

    /// What rejections said no to (none recorded where the record does not
    /// verify: every rejection is then the work's).
    pub(crate) fn rejection_scopes(&self) -> vsh_store::RejectionScopes {
        vsh_store::RejectionScopes::read(&self.data, &self.key).unwrap_or_default()
    }

    /// Record what the rejection of `transaction` said no to, best effort
    /// (a record lost reads as the work's, the safe reading).
    pub(crate) fn record_rejection_scope(&self, transaction: &TransactionId, scope: vsh_store::RejectionScope) {
        let mut scopes = self.rejection_scopes();
        if scopes.insert(transaction, scope) {
            let _ = scopes.write(&self.data, &self.key);
        }
    }

    /// Record `name` behind its digest, best effort.
    pub(crate) fn record_principal_name(&self, name: &str) {
        let mut names = self.principal_names();
        if names.insert(name) {
            let _ = names.write(&self.data, &self.key);
        }
    }

    /// The authority key its settings files are MAC'd under.
    pub(crate) fn key(&self) -> &vsh_types::AuthorityKey {
        &self.key
    }

    /// The data directory.
    pub(crate) fn data(&self) -> &vsh_store::DataDir {
        &self.data
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

    /// The one stored transaction `name` names: its whole id, or a unique
    /// prefix of at least [`crate::MIN_ID_PREFIX`] hex digits (either case).
    pub(crate) fn resolve(&self, name: &str, unwritten: &[TransactionId]) -> Result<TransactionId, VshError> {
        let prefix = name.to_ascii_lowercase();
        if prefix.len() < crate::MIN_ID_PREFIX || prefix.len() > 64 || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(VshError::TransactionName(named(name)));
        }
        let mut matching: Vec<TransactionId> = self
            .transactions
            .list()?
            .into_iter()
            .map(|record| record.id)
            .chain(unwritten.iter().copied())
            .filter(|id| id.to_hex().starts_with(&prefix))
            .collect();
        matching.sort_unstable();
        matching.dedup();
        match matching.len() {
            0 => Err(VshError::NoSuchTransaction(name.to_owned())),
            1 => Ok(matching[0]),
            total => {
                matching.truncate(crate::MAX_LISTED_CANDIDATES);
                Err(VshError::AmbiguousTransaction { prefix: name.to_owned(), candidates: matching, total })
            }
        }
    }

    /// [`VshError::DurablePreviewCapacity`] if the durable previews still
    /// waiting for a commit at `now_ms` are at `limits`' count or byte bound.
    pub(crate) fn check_durable_capacity(&self, limits: &DurablePreviews, now_ms: u64) -> Result<(), VshError> {
        let waiting: Vec<TransactionRecord> = self
            .transactions
            .list()?
            .into_iter()
            .filter(|record| record.state == TransactionState::AutoApproved && !record.is_due_to_expire(now_ms))
            .filter(|record| record.artifact.is_some() && record.pending_expires_ms.is_some())
            .collect();
        let mut bytes = 0u64;
        for record in &waiting {
            let artifact = record.artifact.expect("filtered on it");
            bytes = bytes.saturating_add(self.blobs.stored_size(artifact)?.unwrap_or(0));
        }
        if waiting.len() >= limits.max_count || bytes >= limits.max_bytes {
            return Err(VshError::DurablePreviewCapacity { entries: waiting.len(), bytes });
        }
        Ok(())
    }

    /// [`VshError::StoreSpace`] if storing `needed` bytes of contents would
    /// take more than half the space available on the data directory's
    /// disk, or leave it less than a reserve of 2 % of its size (at most
    /// 64 MiB; [`vsh_types::space`]). Asked of every run that stores anything: one `fstatvfs`.
    pub(crate) fn check_store_space(&self, needed: u64) -> Result<(), VshError> {
        if needed == 0 {
            return Ok(());
        }
        let space = self.data.dir().space().map_err(|source| {
            VshError::Store(vsh_store::StoreError::DataDir { path: vsh_types::VPath::root(), source })
        })?;
        let (available, size) = (space.available, space.size);
        if needed > vsh_types::space::may_take(available, size, vsh_types::space::MAX_RESERVE_BYTES) {
            let reserve = vsh_types::space::reserve(size, vsh_types::space::MAX_RESERVE_BYTES);
            return Err(VshError::StoreSpace { needed, available, reserve });
        }
        Ok(())
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
        let artifact = self.load_bound(transaction)?;
        if artifact.binding.digests().policy != self.policy {
            return Err(VshError::PolicyChanged(transaction));
        }
        let evidence =
            Evidence::decode(&artifact.evidence).map_err(|source| VshError::Evidence { transaction, source })?;
        Ok((artifact, evidence))
    }

    /// A stored transaction's receipt, rebuilt from its bound artifact under
    /// whatever policy made it, with what it read, that policy's digest and
    /// what its reviewer was told of its decision: for a review, never for a
    /// commit.
    pub(crate) fn stored_receipt(
        &self,
        transaction: TransactionId,
        state: TransactionState,
    ) -> Result<StoredReceipt, VshError> {
        let artifact = self.load_bound(transaction)?;
        let evidence =
            Evidence::decode(&artifact.evidence).map_err(|source| VshError::Evidence { transaction, source })?;
        let notes = evidence.notes.iter().map(crate::evidence::DecisionNote::to_warning).collect();
        let receipt = receipt_of(transaction, state, &artifact, evidence);
        let policy = artifact.binding.digests().policy;
        Ok(StoredReceipt { receipt, reads: artifact.read_set, policy, notes })
    }

    /// Load a stored artifact that binds to `transaction` (the store checks
    /// its id), its program text checked against the binding's program digest
    /// (the text rides in the artifact for review and reruns). Any policy.
    pub(crate) fn load_bound(&self, transaction: TransactionId) -> Result<PendingArtifact, VshError> {
        let artifact = match self.transactions.load_artifact(&self.blobs, transaction, &self.limits) {
            Err(StoreError::Artifact { source: ArtifactError::Binding { field: "transaction" }, .. }) => {
                return Err(VshError::ArtifactBinding(transaction));
            }
            loaded => loaded?,
        };
        let program = artifact.binding.digests().program;
        let language = crate::evidence::Evidence::decode(&artifact.evidence)
            .map_or(crate::Language::Monty, |evidence| evidence.output.language());
        if artifact.program.as_deref().is_some_and(|code| crate::run::program_digest(language, code) != program) {
            return Err(VshError::ArtifactBinding(transaction));
        }
        self.run_policy(&artifact)?;
        Ok(artifact)
    }

    /// What would stop each transaction still waiting for a decision or a
    /// commit ([`Records::pending`]) from being committed, as far as the
    /// store alone can tell: an artifact that no longer loads or binds, or a
    /// content the commit reads from the blob store that is missing or
    /// corrupt (re-hashed). Each such transaction with its first fault, in
    /// the order `pending` lists them; what `vsh doctor` checks.
    pub(crate) fn stored_work_faults(&self) -> Result<Vec<(TransactionId, VshError)>, VshError> {
        let mut faults = Vec::new();
        for record in self.pending()? {
            if let Err(fault) = self.check_stored(record.id) {
                faults.push((record.id, fault));
            }
        }
        Ok(faults)
    }

    /// `Ok` if `transaction`'s artifact loads and binds, and every content
    /// its commit would read from the blob store is there intact.
    fn check_stored(&self, transaction: TransactionId) -> Result<(), VshError> {
        let artifact = self.load_bound(transaction)?;
        for id in artifact.stored_content_blobs() {
            match self.blobs.status(id)? {
                vsh_store::BlobStatus::Intact => {}
                vsh_store::BlobStatus::Missing => return Err(StoreError::MissingBlob { id }.into()),
                vsh_store::BlobStatus::Corrupt { path } => return Err(StoreError::CorruptBlob { id, path }.into()),
            }
        }
        Ok(())
    }

    /// The diff a stored transaction's artifact binds (its id re-derived
    /// from its binding by the store), whatever policy made it: what a
    /// commit whose record lost how it ended is settled against.
    pub(crate) fn stored_diff(&self, transaction: TransactionId) -> Result<vsh_types::CanonicalDiff, VshError> {
        Ok(self.transactions.load_artifact(&self.blobs, transaction, &self.limits)?.diff)
    }

    /// A stored transaction's diff, dependencies and receipt, rebuilt from its
    /// verified artifact.
    pub(crate) fn committable(
        &self,
        transaction: TransactionId,
        state: TransactionState,
    ) -> Result<Committable, VshError> {
        let (artifact, evidence) = self.load_verified(transaction)?;
        let mut receipt = receipt_of(transaction, state, &artifact, evidence);
        if let Some(policy) = self.run_policy(&artifact)? {
            receipt.warnings.push(crate::Warning::OwnPolicy { profile: policy.profile, digest: policy.digest });
        }
        Ok(Committable { diff: artifact.diff, reads: artifact.read_set, contents: artifact.contents, receipt })
    }

    /// Transactions waiting for a decision or a commit: `PendingApproval` and `Approved`.
    pub(crate) fn pending(&self) -> Result<Vec<TransactionRecord>, VshError> {
        Ok(self
            .transactions
            .list()?
            .into_iter()
            .filter(|record| match record.state {
                TransactionState::PendingApproval | TransactionState::Approved => true,
                // A durable preview: stored with its artifact, committable by a later process.
                TransactionState::AutoApproved => record.artifact.is_some(),
                _ => false,
            })
            .collect())
    }
}

/// The receipt an artifact and its evidence describe (no timings: they were
/// the run's, not this reading's).
/// [`Records::stored_receipt`]: a stored transaction's receipt and what a
/// review of it needs besides.
pub(crate) struct StoredReceipt {
    /// The receipt, rebuilt from the artifact.
    pub(crate) receipt: Receipt,
    /// What the run read.
    pub(crate) reads: vsh_types::ReadSet,
    /// The policy it was bound to.
    pub(crate) policy: vsh_types::PolicyDigest,
    /// What its reviewer was told of the decision, as the run judged it
    /// (evidence version 7 on; empty before).
    pub(crate) notes: Vec<crate::Warning>,
}

fn receipt_of(
    transaction: TransactionId,
    state: TransactionState,
    artifact: &PendingArtifact,
    evidence: Evidence,
) -> Receipt {
    // What the run's statistics still say to whoever reads it later.
    let mut warnings = if evidence.stats.truncated_results > 0 {
        vec![crate::Warning::ResultsCut { lists: evidence.stats.truncated_results }]
    } else {
        Vec::new()
    };
    // Why it waits with the rename flag, from the renames its evidence keeps.
    warnings.extend(crate::receipt::renamed(&evidence.decision, &evidence.effects));
    Receipt {
        transaction,
        base_snapshot: artifact.binding.digests().snapshot,
        state,
        decision: evidence.decision,
        diff: artifact.diff.digest(),
        // Decided by the runtime, which knows the policy (`Runtime::show`).
        diff_withheld: false,
        snapshot_withheld: false,
        changed_paths: artifact.diff.len(),
        changes: artifact.diff.entries().to_vec(),
        review: Vec::new(),
        output: evidence.output.to_output(),
        execution: evidence.stats,
        timings: StageTimings::default(),
        commit: None,
        grants: evidence.grants,
        warnings,
    }
}

/// The most characters of a name that names no transaction an error
/// repeats (sec88 L1: an agent's 3,000,000-character name came back whole,
/// twice, in one tool result).
const SHOWN_NAME_CHARS: usize = 80;

/// `name` as an error repeats it: whole when short, else its head and its
/// length.
fn named(name: &str) -> String {
    match name.char_indices().nth(SHOWN_NAME_CHARS) {
        None => name.to_owned(),
        Some((end, _)) => format!("{}... ({} bytes)", &name[..end], name.len()),
    }
}

#[cfg(test)]
mod tests {
    use vsh_host::CapDir;
    use vsh_store::DataDir;
    use vsh_types::{AuthorityKey, SnapshotId, VshLayout};

    use super::*;

    /// Records over a fresh data directory holding transactions with these ids.
    fn holding(dir: &tempfile::TempDir, ids: &[[u8; 32]]) -> Records {
        let workspace = CapDir::open(dir.path()).unwrap();
        let data = DataDir::open_in_workspace(&workspace, &VshLayout::default_data()).unwrap();
        let transactions = TransactionStore::open(&data, &AuthorityKey::unauthenticated()).unwrap();
        for id in ids {
            let record = TransactionRecord::new(
                TransactionId::from_bytes(*id),
                SnapshotId::digest(b"base"),
                TransactionState::PendingApproval,
                1,
            );
            transactions.create(&record).unwrap();
        }
        let blobs = BlobStore::open(&data).unwrap();
        Records::new(
            transactions,
            blobs,
            data,
            PolicyDigest::digest(b"policy"),
            None,
            vsh_types::AuthorityKey::unauthenticated(),
        )
    }

    fn id(first: [u8; 4]) -> [u8; 32] {
        let mut bytes = [0x11; 32];
        bytes[..4].copy_from_slice(&first);
        bytes
    }

    #[test]
    fn a_unique_prefix_names_a_transaction_and_an_ambiguous_one_lists_the_candidates() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (id([0xab, 0xcd, 0xef, 0x01]), id([0xab, 0xcd, 0xef, 0x02]), id([0x12, 0x34, 0x56, 0x78]));
        let records = holding(&dir, &[a, b, c]);
        let full = TransactionId::from_bytes(c);
        assert_eq!(records.resolve(&full.to_hex(), &[]).unwrap(), full);
        assert_eq!(records.resolve("123456", &[]).unwrap(), full, "six digits suffice");
        assert_eq!(records.resolve("ABCDEF02", &[]).unwrap(), TransactionId::from_bytes(b), "either case");
        match records.resolve("abcdef", &[]) {
            Err(VshError::AmbiguousTransaction { prefix, candidates, total }) => {
                assert_eq!((prefix.as_str(), total), ("abcdef", 2));
                assert_eq!(candidates, vec![TransactionId::from_bytes(a), TransactionId::from_bytes(b)]);
            }
            other => panic!("expected an ambiguity, got {other:?}"),
        }
        assert!(matches!(records.resolve("fedcba", &[]), Err(VshError::NoSuchTransaction(name)) if name == "fedcba"));
        // A preview whose record is not written yet is named like any other.
        let unwritten = TransactionId::from_bytes(id([0xfe, 0xdc, 0xba, 0x98]));
        assert_eq!(records.resolve("fedcba", &[unwritten]).unwrap(), unwritten);
        assert!(matches!(records.resolve("123456", &[full]), Ok(found) if found == full), "no duplicate candidate");
        for bad in ["12345", "12345g", "", &"1".repeat(65), "12 456"] {
            assert!(matches!(records.resolve(bad, &[]), Err(VshError::TransactionName(_))), "{bad:?}");
        }
        // A long name comes back cut, with its length (sec88 L1).
        let long = "é".repeat(100_000);
        match records.resolve(&long, &[]) {
            Err(VshError::TransactionName(shown)) => {
                assert_eq!(shown, format!("{}... (200000 bytes)", "é".repeat(80)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_ambiguous_prefix_lists_at_most_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<[u8; 32]> =
            (0..=u8::try_from(crate::MAX_LISTED_CANDIDATES).unwrap()).map(|n| id([0xaa, 0xbb, 0xcc, n])).collect();
        let records = holding(&dir, &ids);
        match records.resolve("aabbcc", &[]) {
            Err(VshError::AmbiguousTransaction { candidates, total, .. }) => {
                assert_eq!(total, crate::MAX_LISTED_CANDIDATES + 1);
                assert_eq!(candidates.len(), crate::MAX_LISTED_CANDIDATES);
            }
            other => panic!("expected an ambiguity, got {other:?}"),
        }
    }

    #[test]
    fn an_artifact_whose_program_or_policy_text_is_not_what_its_binding_names_is_refused() {
        use vsh_types::{
            BindingDigests, CanonicalDiff, ExecutionEvidenceDigest, IntentDigest, RuntimeConfigDigest,
            TransactionBinding,
        };
        let dir = tempfile::tempdir().unwrap();
        let records = holding(&dir, &[]);
        let strict = vsh_policy::render_policy(&vsh_policy::TransactionPolicy::from_profile(
            vsh_policy::PolicyProfile::Strict,
            None,
        ));
        let stored_with = |program: &str, text: &str, policy: (PolicyDigest, Option<String>)| {
            let diff = CanonicalDiff::default();
            let read_set = ReadSet::default();
            let binding = TransactionBinding::new(BindingDigests {
                snapshot: SnapshotId::digest(b"base"),
                program: crate::run::program_digest(crate::Language::Monty, program),
                intent: IntentDigest::digest(b""),
                read_set: read_set.digest(),
                write_set: diff.write_set_digest(),
                diff: diff.digest(),
                policy: policy.0,
                runtime_config: RuntimeConfigDigest::digest(b"config"),
                // The evidence tells the two transactions apart.
                evidence: ExecutionEvidenceDigest::digest(text.as_bytes()),
            });
            let transaction = binding.transaction();
            let record =
                TransactionRecord::new(transaction, SnapshotId::digest(b"base"), TransactionState::PendingApproval, 1);
            let artifact = PendingArtifact {
                binding,
                intent: String::new(),
                program: Some(text.to_owned()),
                policy: policy.1,
                diff,
                read_set,
                evidence: text.as_bytes().to_vec(),
                contents: vsh_store::InlineContents::new(),
            };
            records.transactions().create_with_artifact(records.blobs(), &record, &artifact, records.limits()).unwrap();
            transaction
        };
        let stored = |program: &str, text: &str| stored_with(program, text, (PolicyDigest::digest(b"policy"), None));
        let honest = stored("print('a')", "print('a')");
        assert_eq!(records.load_bound(honest).unwrap().program.as_deref(), Some("print('a')"));
        let swapped = stored("print('a')", "print('evil')");
        assert!(matches!(records.load_bound(swapped), Err(VshError::ArtifactBinding(id)) if id == swapped));
        // A per-run policy must parse to the policy digest the binding holds.
        let strict_digest =
            vsh_policy::TransactionPolicy::from_profile(vsh_policy::PolicyProfile::Strict, None).digest();
        let kept = stored_with("print('b')", "print('b')", (strict_digest, Some(strict.clone())));
        let artifact = records.load_bound(kept).unwrap();
        let policy = records.run_policy(&artifact).unwrap().expect("a per-run policy");
        assert_eq!((policy.profile, policy.digest), (vsh_policy::PolicyProfile::Strict, strict_digest));
        let balanced = strict.replace("profile = \"strict\"", "profile = \"balanced\"");
        assert_ne!(balanced, strict);
        let swapped = stored_with("print('c')", "print('c')", (strict_digest, Some(balanced)));
        assert!(matches!(records.load_bound(swapped), Err(VshError::ArtifactBinding(id)) if id == swapped));
        let garbage = stored_with("print('d')", "print('d')", (strict_digest, Some("version = [".to_owned())));
        assert!(matches!(records.load_bound(garbage), Err(VshError::ArtifactBinding(id)) if id == garbage));
    }
}
