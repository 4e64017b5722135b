//! Binding a run into its transaction and storing what a commit will need.

use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use vsh_policy::Decision;
use vsh_store::{PendingArtifact, TransactionRecord};
use vsh_types::canon::{self, Canonical};
use vsh_types::{
    BindingDigests, CanonicalDiff, ExecutionEvidenceDigest, IntentDigest, NodeKind, ProgramDigest, RuntimeConfigDigest,
    TransactionBinding, TransactionState,
};
use vsh_vfs::VirtualFs;

use super::{Runs, clock_ms};
use crate::evidence::Evidence;
use crate::records::Records;
use crate::request::RunRequest;
use crate::{VshError, Warning};

impl Runs {
    /// Bind the run into its transaction id and store what a commit will need:
    /// the record, the final contents, and for pending work the durable
    /// artifact; `notes` are what its reviewer is told of the decision,
    /// kept in its evidence.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn bind_and_store(
        &self,
        records: &Records,
        request: &RunRequest<'_>,
        vfs: &mut VirtualFs,
        diff: &CanonicalDiff,
        state: TransactionState,
        decision: &Decision,
        outcome: &super::Executed,
        notes: &[Warning],
    ) -> Result<(PendingArtifact, Vec<Warning>, Contents), VshError> {
        let evidence = Evidence::new(
            self.next_nonce(),
            decision.clone(),
            outcome.output.clone(),
            &outcome.stats,
            vfs.effects().to_vec(),
            self.command_grants(request),
        )
        .with_env_values(self.granted_env_values(request))
        .with_rerun_of(request.rerun_of)
        .with_notes(notes);
        let evidence_bytes = evidence.encode();
        let intent = request.intent.unwrap_or("");
        let binding = TransactionBinding::new(BindingDigests {
            snapshot: vfs.snapshot_id(),
            program: program_digest(request.language, request.code),
            intent: IntentDigest::digest(intent.as_bytes()),
            read_set: vfs.read_set().digest(),
            write_set: diff.write_set_digest(),
            diff: diff.digest(),
            policy: self.policy.digest(),
            runtime_config: self.config_digest(request),
            evidence: ExecutionEvidenceDigest::digest(&evidence_bytes),
        });
        let transaction = binding.transaction();
        let mut warnings = Vec::new();
        if self.own_policy {
            warnings.push(Warning::OwnPolicy { profile: self.policy.profile(), digest: self.policy.digest() });
        }
        let mut contents = Contents::new();
        let mut inline = Contents::new();
        let process_local =
            state == TransactionState::AutoApproved && self.durable_preview(state, diff.len()).is_none();
        let stores_artifact =
            state == TransactionState::PendingApproval || self.durable_preview(state, diff.len()).is_some();
        if process_local {
            // A process-local preview keeps its contents in memory: nothing
            // reaches the store until something acts on it through the store
            // (`Previews::materialize`).
            contents = new_contents(vfs, diff)?;
        } else if state != TransactionState::Denied {
            // Small contents travel inside the artifact (one file, one
            // barrier, however many there are); the others go to the blob
            // store, where they need not be durable until something durable
            // refers to them: the artifact writers make them durable first,
            // all at once (one batch of concurrent barriers).
            if stores_artifact {
                inline = inline_contents(vfs, diff, records.limits().max_inline_bytes)?;
            }
            store_contents(records, vfs, diff, &inline, &mut warnings)?;
        }
        let record = TransactionRecord::new(transaction, binding.digests().snapshot, state, clock_ms());
        let artifact = PendingArtifact {
            binding,
            intent: intent.to_owned(),
            program: Some(request.code.to_owned()),
            policy: self.run_policy.clone(),
            diff: diff.clone(),
            read_set: vfs.read_set().clone(),
            evidence: evidence_bytes,
            contents: inline,
        };
        let transactions = records.transactions();
        if state == TransactionState::PendingApproval {
            // The record and its artifact appear together or not at all.
            transactions.create_with_artifact(records.blobs(), &record, &artifact, records.limits())?;
        } else if let Some(limits) = self.durable_preview(state, diff.len()) {
            let now = clock_ms();
            records.check_durable_capacity(&limits, now)?;
            let record = record.with_pending_expiry(now.saturating_add(limits.ttl_ms));
            transactions.create_with_artifact(records.blobs(), &record, &artifact, records.limits())?;
        } else if state == TransactionState::Denied {
            // Denied work is kept for review (`vsh show`: what it changed and
            // what it was refused), never its contents: it can never commit.
            // Work too large for an artifact (more diff entries than one may
            // hold) keeps its record alone: `vsh log` still says it was
            // denied (sec64 F5: it failed as an invalid artifact, unrecorded).
            match transactions.create_with_artifact(records.blobs(), &record, &artifact, records.limits()) {
                Err(vsh_store::StoreError::Artifact { .. }) => transactions.create(&record)?,
                other => drop(other?),
            }
        } else if state != TransactionState::AutoApproved {
            transactions.create(&record)?;
        }
        // A process-local preview has no durable record until something must
        // act on it through the store (`Previews::materialize`): a preview that
        // is never committed never touches the transaction log.
        Ok((artifact, warnings, contents))
    }

    /// 16 bytes that differ for every run of every runtime: a counter, the clock and the process.
    fn next_nonce(&self) -> [u8; 16] {
        let mut hasher = blake3::Hasher::new();
        hasher.update(&self.nonce.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        hasher.update(&SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()).to_le_bytes());
        hasher.update(&std::process::id().to_le_bytes());
        hasher.update(&(std::ptr::from_ref(self) as usize).to_le_bytes());
        let mut nonce = [0; 16];
        nonce.copy_from_slice(&hasher.finalize().as_bytes()[..16]);
        nonce
    }

    /// Whether `request` can run real commands: a command, real Bash, or a
    /// Monty program (or a session) when commands are enabled.
    fn runs_commands(&self, request: &RunRequest<'_>) -> bool {
        let scripts = matches!(request.language, crate::Language::Bash | crate::Language::Session);
        let confined = scripts && self.bash.is_some_and(|bash| bash.profile == crate::BashProfile::Confined);
        let may_run_commands =
            matches!(request.language, crate::Language::Command | crate::Language::Monty | crate::Language::Session);
        confined || may_run_commands && self.commands
    }

    /// What `request`'s real commands are granted, when it can run any.
    pub(crate) fn command_grants(&self, request: &RunRequest<'_>) -> Option<crate::CommandGrants> {
        // What every command gets is no grant (a variable set otherwise is).
        let every = vsh_monty::CommandConfig::new("/").env;
        self.runs_commands(request).then(|| crate::CommandGrants {
            env: self.granted_env(&every).map(|(name, _)| name.clone()).collect(),
            tools: self.command_tools.iter().map(|tool| tool.display().to_string()).collect(),
            network: match self.command_network {
                vsh_sandbox::NetworkAccess::None => "none",
                vsh_sandbox::NetworkAccess::Loopback => "loopback",
                vsh_sandbox::NetworkAccess::All => "all",
            }
            .to_owned(),
            ports: self.command_ports.clone(),
            unix_sockets: self.command_unix_sockets,
        })
    }

    /// The keyed digest of each variable's value in [`Runs::command_grants`]'s
    /// `env`, in its order (empty when the run's program runs no command).
    fn granted_env_values(&self, request: &RunRequest<'_>) -> Vec<[u8; 32]> {
        if !self.runs_commands(request) {
            return Vec::new();
        }
        let every = vsh_monty::CommandConfig::new("/").env;
        self.granted_env(&every).map(|(_, value)| super::env_value_mac(&self.env_key, value)).collect()
    }

    /// The variables commands get besides `every` (what every command gets).
    fn granted_env<'a>(&'a self, every: &'a [(String, String)]) -> impl Iterator<Item = &'a (String, String)> + 'a {
        self.command_env.iter().filter(move |pair| !every.contains(pair))
    }

    /// The digest of everything a run's outcome depends on besides the program
    /// and the workspace: the version, the executor, the request's budget, the
    /// snapshot limits, the hidden paths, the mounts a run may cross, the hook.
    fn config_digest(&self, request: &RunRequest<'_>) -> RuntimeConfigDigest {
        let mut out = Vec::new();
        canon::put_bytes(&mut out, crate::VERSION.as_bytes());
        canon::put_bytes(&mut out, vsh_monty::VIRTUAL_ROOT.as_bytes());
        out.extend_from_slice(&self.executor.config_digest());
        request.budget.encode_canonical(&mut out);
        let scripts = matches!(request.language, crate::Language::Bash | crate::Language::Session);
        let bash = if scripts { self.bash } else { None };
        if let Some(bash) = bash {
            canon::put_bytes(&mut out, bash.profile.name().as_bytes());
            bash.limits.encode_canonical(&mut out);
        }
        // A real command, real Bash, or a Monty program that may run
        // commands (`vsh_exec`): the environment the commands get.
        if self.runs_commands(request) {
            canon::put_bytes(&mut out, vsh_monty::COMMAND_PROFILE.as_bytes());
            let env = &self.command_env;
            canon::put_u64(&mut out, env.len() as u64);
            for (key, value) in env {
                canon::put_bytes(&mut out, key.as_bytes());
                // The value by its keyed MAC: a binding never lets it be guessed.
                canon::put_bytes(&mut out, &super::env_value_mac(&self.env_key, value));
            }
            canon::put_u64(&mut out, self.command_tools.len() as u64);
            for tool in &self.command_tools {
                canon::put_bytes(&mut out, tool.as_os_str().as_encoded_bytes());
            }
            canon::put_u64(&mut out, self.scratch.len() as u64);
            for (name, _) in &self.scratch {
                canon::put_bytes(&mut out, name.as_bytes());
            }
            // One byte for the network, 16 more when ports follow and 32
            // more when unix sockets are allowed (so a binding made without
            // either keeps the digest it always had).
            let network: u8 = match self.command_network {
                vsh_sandbox::NetworkAccess::None => 0,
                vsh_sandbox::NetworkAccess::Loopback => 1,
                vsh_sandbox::NetworkAccess::All => 2,
            } + if self.command_unix_sockets { 32 } else { 0 };
            if self.command_ports.is_empty() {
                canon::put_u8(&mut out, network);
            } else {
                canon::put_u8(&mut out, network + 16);
                canon::put_u64(&mut out, self.command_ports.len() as u64);
                for port in &self.command_ports {
                    canon::put_u64(&mut out, u64::from(*port));
                }
            }
        }
        self.snapshot_limits.encode_canonical(&mut out);
        canon::put_seq(&mut out, self.excluded.iter());
        canon::put_seq(&mut out, self.workspace.allowed_mounts().iter());
        out.extend_from_slice(&self.hook_encoding);
        RuntimeConfigDigest::digest(&out)
    }
}

/// The digest of a program's language and text, as a binding holds it (the
/// language tag: 1 Monty, 2 Bash, 3 a real command, 4 a candidate's session).
pub(crate) fn program_digest(language: crate::Language, code: &str) -> ProgramDigest {
    let mut program = Vec::new();
    canon::put_u8(
        &mut program,
        match language {
            crate::Language::Monty => 1,
            crate::Language::Bash => 2,
            crate::Language::Command => 3,
            crate::Language::Session => 4,
        },
    );
    canon::put_bytes(&mut program, code.as_bytes());
    ProgramDigest::digest(&program)
}

/// New contents a run's diff names, by their digests.
type Contents = vsh_commit::MemoryContents;

/// Every final file and symlink content `diff` names that its before state
/// does not already hold, checked against the digest the diff promised.
fn new_contents(vfs: &mut VirtualFs, diff: &CanonicalDiff) -> Result<Contents, VshError> {
    new_contents_within(vfs, diff, u64::MAX, u64::MAX)
}

/// The most bytes of new contents one artifact carries inline; beyond it,
/// contents go to the blob store.
const MAX_INLINE_TOTAL: u64 = 16 << 20;

/// The new contents of `diff` an artifact carries inline: each at most
/// `max_each` bytes, while their total stays within [`MAX_INLINE_TOTAL`].
fn inline_contents(vfs: &mut VirtualFs, diff: &CanonicalDiff, max_each: u64) -> Result<Contents, VshError> {
    new_contents_within(vfs, diff, max_each, MAX_INLINE_TOTAL)
}

/// The new contents of `diff` (as [`new_contents`]) of at most `max_each`
/// bytes each, in diff order while their total stays within `max_total`.
fn new_contents_within(
    vfs: &mut VirtualFs,
    diff: &CanonicalDiff,
    max_each: u64,
    max_total: u64,
) -> Result<Contents, VshError> {
    let mut contents = Contents::new();
    let mut total = 0_u64;
    for entry in diff.entries() {
        let Some(after) = entry.after else { continue };
        if after.kind == NodeKind::Directory || entry.before.is_some_and(|before| before.content == after.content) {
            continue;
        }
        if after.size > max_each || total.saturating_add(after.size) > max_total {
            continue;
        }
        let expected = after.content.expect("files and symlinks carry a digest");
        if contents.contains_key(&expected) {
            continue;
        }
        let source = vfs.content_source(&entry.path)?.expect("a file or symlink has content");
        let bytes = vfs.materialize(&source)?;
        let actual = vsh_types::BlobId::of(&bytes);
        if actual != expected {
            return Err(VshError::Store(vsh_store::StoreError::DigestMismatch { expected, actual }));
        }
        total = total.saturating_add(after.size);
        contents.insert(expected, bytes);
    }
    Ok(contents)
}

/// Put every final file and symlink content into the blob store, checked
/// against the digest the diff promised.
///
/// A stored copy that is corrupt is replaced by this run's identical
/// bytes (and reported in `warnings`), never an obstacle to the run.
fn store_contents(
    records: &Records,
    vfs: &mut VirtualFs,
    diff: &CanonicalDiff,
    inline: &Contents,
    warnings: &mut Vec<Warning>,
) -> Result<(), VshError> {
    let blobs = records.blobs();
    // What the store will hold that it does not yet (each content once, the
    // ones carried inside the artifact too), asked of the disk before
    // anything is written.
    let mut to_store = std::collections::BTreeMap::new();
    for entry in diff.entries() {
        let Some(after) = entry.after else { continue };
        if after.kind == NodeKind::Directory || entry.before.is_some_and(|before| before.content == after.content) {
            continue;
        }
        let expected = after.content.expect("files and symlinks carry a digest");
        if !inline.contains_key(&expected) {
            to_store.insert(expected, after.size);
        }
    }
    let mut needed = inline.values().fold(0_u64, |total, bytes| total.saturating_add(bytes.len() as u64));
    for (id, size) in &to_store {
        if blobs.status(*id)? != vsh_store::BlobStatus::Intact {
            needed = needed.saturating_add(*size);
        }
    }
    records.check_store_space(needed)?;
    for entry in diff.entries() {
        let Some(after) = entry.after else { continue };
        if after.kind == NodeKind::Directory || entry.before.is_some_and(|before| before.content == after.content) {
            continue;
        }
        let expected = after.content.expect("files and symlinks carry a digest");
        if inline.contains_key(&expected) {
            continue;
        }
        // Bytes the store holds are not read again, unless the copy is old
        // enough that rewriting it must restart the GC grace period (this
        // run's preview depends on it until it commits).
        if blobs.status(expected)? == vsh_store::BlobStatus::Intact && !blobs.refresh_due(expected)? {
            continue;
        }
        let source = vfs.content_source(&entry.path)?.expect("a file or symlink has content");
        let bytes = vfs.materialize(&source)?;
        let outcome = blobs.put_expected_deferred(&bytes, expected)?;
        if outcome == vsh_store::PutOutcome::Repaired {
            warnings.push(Warning::BlobRepaired { id: expected, path: blobs.display_path(&expected) });
        }
    }
    Ok(())
}
