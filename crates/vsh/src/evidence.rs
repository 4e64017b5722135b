//! Execution evidence and the transaction binding.
//!
//! The evidence (decision, output value, stdout, statistics and a per-run
//! nonce) is encoded once with postcard; those exact bytes are hashed into the
//! `ExecutionEvidenceDigest` and stored in a pending artifact. The transaction id
//! is a digest of every binding digest (`vsh_types::BindingDigests::derive_id`),
//! so a loaded artifact's id is derived again and compared: a tampered artifact
//! never passes for its transaction.

use serde::{Deserialize, Serialize};
use vsh_monty::{ExecutionStats, MontyObject};
use vsh_policy::Decision;
use vsh_vfs::Effect;

/// Version of the evidence encoding: 7 adds what a reviewer is told of the
/// decision ([`Evidence::notes`]: the numbers of a `content-rewrite`, the
/// losses before the run, the review rules); 6 adds the transaction whose program
/// `vsh rerun` ran again ([`Evidence::rerun_of`]); 5 adds the keyed digests of the values
/// of the variables real commands were granted ([`Evidence::env_values`]);
/// 4 adds a Monty program that raised after a refusal
/// ([`EvidenceOutput::MontyRaised`]), in the same layout as 3, which adds
/// what real commands were granted; 4, 3, 2 (either language's output) and 1
/// (a Monty value and stdout) are still read. Each is written only where it
/// is needed, so an older vsh still reads the rest.
const EVIDENCE_VERSION: u8 = 7;

/// The version that first wrote [`Evidence::rerun_of`].
const RERUN_VERSION: u8 = 6;

/// The version that first wrote [`Evidence::env_values`].
const ENV_VALUES_VERSION: u8 = 5;

/// The version that first wrote [`EvidenceOutput::MontyRaised`].
const RAISED_VERSION: u8 = 4;

/// The deepest value nesting kept as evidence. Encoding and decoding recurse
/// once per level, so the bound keeps both far from the stack's limit.
pub(crate) const MAX_VALUE_DEPTH: usize = 256;

/// What the program produced, as bound into its transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum EvidenceOutput {
    /// A Monty program's value and stdout.
    Monty { value: MontyObject, stdout: String },
    /// A Bash program's profile, exit status and streams.
    Bash { profile: String, exit_code: i32, stdout: Vec<u8>, stderr: Vec<u8> },
    /// A candidate workspace's steps.
    Session { steps: Vec<crate::SessionStep> },
    /// A Monty program's uncaught exception (as Python prints it) after a
    /// refusal, and its stdout before it (version 4 on).
    MontyRaised { exception: String, stdout: String },
}

impl EvidenceOutput {
    /// The facade's view of it.
    pub(crate) fn to_output(&self) -> crate::ExecutionOutput {
        match self {
            Self::Monty { value, stdout } => {
                crate::ExecutionOutput::Monty { value: value.clone(), stdout: stdout.clone() }
            }
            Self::Bash { profile, exit_code, stdout, stderr } => crate::ExecutionOutput::Bash(crate::BashResult {
                profile: profile.clone(),
                exit_code: *exit_code,
                stdout: stdout.clone(),
                stderr: stderr.clone(),
            }),
            Self::Session { steps } => crate::ExecutionOutput::Session { steps: steps.clone() },
            Self::MontyRaised { exception, stdout } => {
                crate::ExecutionOutput::MontyRaised { exception: exception.clone(), stdout: stdout.clone() }
            }
        }
    }

    /// The language that produced it.
    pub(crate) fn language(&self) -> crate::Language {
        match self {
            Self::Monty { .. } | Self::MontyRaised { .. } => crate::Language::Monty,
            Self::Bash { profile, .. } if profile == vsh_monty::COMMAND_PROFILE => crate::Language::Command,
            Self::Bash { .. } => crate::Language::Bash,
            Self::Session { .. } => crate::Language::Session,
        }
    }

    /// Standard output as text (bytes that are not UTF-8 replaced).
    pub(crate) fn stdout_text(&self) -> String {
        match self {
            Self::Monty { stdout, .. } | Self::MontyRaised { stdout, .. } => stdout.clone(),
            Self::Bash { stdout, .. } => String::from_utf8_lossy(stdout).into_owned(),
            Self::Session { .. } => String::new(),
        }
    }
}

/// What a run produced, as bound into its transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Evidence {
    version: u8,
    /// Distinguishes two runs of the same program against the same state.
    pub(crate) nonce: [u8; 16],
    pub(crate) decision: Decision,
    pub(crate) output: EvidenceOutput,
    pub(crate) stats: ExecutionStats,
    /// What the program did, in order (writes, directories made, removals,
    /// renames, mode changes): the rename evidence the diff alone does not show.
    pub(crate) effects: Vec<Effect>,
    /// What its real commands were granted, when it could run any.
    pub(crate) grants: Option<crate::CommandGrants>,
    /// The keyed digest (`run::env_value_mac`) of each granted variable's
    /// value, in the order of `grants.env` (version 5 on; empty before):
    /// `vsh rerun` gives a variable of its own environment to the commands
    /// again only when its value is the first run's.
    pub(crate) env_values: Vec<[u8; 32]>,
    /// The transaction whose stored program this run ran again (`vsh
    /// rerun`), by its id's bytes (version 6 on; `None` before): what
    /// tells a rerun from a new run of the same program, so that work is
    /// not run again once a rerun of it is committed or waiting (ux61 1).
    pub(crate) rerun_of: Option<[u8; 32]>,
    /// What the reviewer of pending work is told of its decision, as the
    /// run judged it (version 7 on; empty before): what a review shows
    /// again, however much later (ux64 F7, ux65 F1: the numbers were the
    /// run's alone).
    pub(crate) notes: Vec<DecisionNote>,
}

/// One thing a reviewer is told of a decision ([`Evidence::notes`]): the
/// lines of a [`crate::Warning`] of that kind and how many there were.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum DecisionNote {
    /// [`crate::Warning::EarlierLosses`].
    EarlierLosses { lines: Vec<String>, total: u64 },
    /// [`crate::Warning::Rewritten`].
    Rewritten { lines: Vec<String>, total: u64 },
    /// [`crate::Warning::ReviewRules`].
    ReviewRules { lines: Vec<String>, total: u64 },
    /// [`crate::Warning::UnseenChanges`].
    UnseenChanges { lines: Vec<String>, total: u64 },
}

impl DecisionNote {
    /// The note a warning is, if it is one.
    pub(crate) fn of(warning: &crate::Warning) -> Option<Self> {
        let total = |total: usize| total as u64;
        match warning {
            crate::Warning::EarlierLosses { files, total: all } => {
                Some(Self::EarlierLosses { lines: files.clone(), total: total(*all) })
            }
            crate::Warning::Rewritten { files, total: all } => {
                Some(Self::Rewritten { lines: files.clone(), total: total(*all) })
            }
            crate::Warning::ReviewRules { paths, total: all } => {
                Some(Self::ReviewRules { lines: paths.clone(), total: total(*all) })
            }
            crate::Warning::UnseenChanges { files, total: all } => {
                Some(Self::UnseenChanges { lines: files.clone(), total: total(*all) })
            }
            _ => None,
        }
    }

    /// The warning it was.
    pub(crate) fn to_warning(&self) -> crate::Warning {
        let total = |total: u64| usize::try_from(total).unwrap_or(usize::MAX);
        match self {
            Self::EarlierLosses { lines, total: all } => {
                crate::Warning::EarlierLosses { files: lines.clone(), total: total(*all) }
            }
            Self::Rewritten { lines, total: all } => {
                crate::Warning::Rewritten { files: lines.clone(), total: total(*all) }
            }
            Self::ReviewRules { lines, total: all } => {
                crate::Warning::ReviewRules { paths: lines.clone(), total: total(*all) }
            }
            Self::UnseenChanges { lines, total: all } => {
                crate::Warning::UnseenChanges { files: lines.clone(), total: total(*all) }
            }
        }
    }
}

/// Version 6's layout, for artifacts written before decision notes.
#[derive(Deserialize)]
struct EvidenceV6 {
    version: u8,
    nonce: [u8; 16],
    decision: Decision,
    output: EvidenceOutput,
    stats: ExecutionStats,
    effects: Vec<Effect>,
    grants: Option<crate::CommandGrants>,
    env_values: Vec<[u8; 32]>,
    rerun_of: Option<[u8; 32]>,
}

impl From<EvidenceV6> for Evidence {
    /// Version 6's evidence, with no notes.
    fn from(old: EvidenceV6) -> Self {
        let EvidenceV6 { version, nonce, decision, output, stats, effects, grants, env_values, rerun_of } = old;
        Self { version, nonce, decision, output, stats, effects, grants, env_values, rerun_of, notes: Vec::new() }
    }
}

/// Version 5's layout, for artifacts written before reruns were linked.
#[derive(Deserialize)]
struct EvidenceV5 {
    version: u8,
    nonce: [u8; 16],
    decision: Decision,
    output: EvidenceOutput,
    stats: ExecutionStats,
    effects: Vec<Effect>,
    grants: Option<crate::CommandGrants>,
    env_values: Vec<[u8; 32]>,
}

impl From<EvidenceV5> for Evidence {
    /// Version 5's evidence, linked to no earlier run.
    fn from(old: EvidenceV5) -> Self {
        let EvidenceV5 { version, nonce, decision, output, stats, effects, grants, env_values } = old;
        EvidenceV6 { version, nonce, decision, output, stats, effects, grants, env_values, rerun_of: None }.into()
    }
}

/// Versions 3 and 4's layout, for artifacts written before the values of
/// granted variables were recorded.
#[derive(Deserialize)]
struct EvidenceV4 {
    version: u8,
    nonce: [u8; 16],
    decision: Decision,
    output: EvidenceOutput,
    stats: ExecutionStats,
    effects: Vec<Effect>,
    grants: Option<crate::CommandGrants>,
}

impl From<EvidenceV4> for Evidence {
    /// An older layout's evidence, with no value digests (version 5 on).
    fn from(old: EvidenceV4) -> Self {
        let EvidenceV4 { version, nonce, decision, output, stats, effects, grants } = old;
        EvidenceV5 { version, nonce, decision, output, stats, effects, grants, env_values: Vec::new() }.into()
    }
}

/// Version 2's layout, for artifacts written before grants were recorded.
#[derive(Deserialize)]
struct EvidenceV2 {
    version: u8,
    nonce: [u8; 16],
    decision: Decision,
    output: EvidenceOutput,
    stats: ExecutionStats,
    effects: Vec<Effect>,
}

/// Version 1's layout, for artifacts written before Bash.
#[derive(Deserialize)]
struct EvidenceV1 {
    version: u8,
    nonce: [u8; 16],
    decision: Decision,
    value: MontyObject,
    stdout: String,
    stats: ExecutionStats,
    effects: Vec<Effect>,
}

impl Evidence {
    pub(crate) fn new(
        nonce: [u8; 16],
        decision: Decision,
        output: EvidenceOutput,
        stats: &ExecutionStats,
        effects: Vec<Effect>,
        grants: Option<crate::CommandGrants>,
    ) -> Self {
        // Version 4 only where it is needed, so an older vsh still reads the rest.
        let version = if matches!(output, EvidenceOutput::MontyRaised { .. }) { RAISED_VERSION } else { 3 };
        Self {
            version,
            nonce,
            decision,
            output,
            stats: stats.clone(),
            effects,
            grants,
            env_values: Vec::new(),
            rerun_of: None,
            notes: Vec::new(),
        }
    }

    /// This evidence with the keyed digests of the granted variables'
    /// values (`values`, in the order of the grants' names): version 5 when
    /// there are any.
    pub(crate) fn with_env_values(mut self, values: Vec<[u8; 32]>) -> Self {
        if !values.is_empty() {
            self.version = self.version.max(ENV_VALUES_VERSION);
        }
        self.env_values = values;
        self
    }

    /// This evidence, as a run of transaction `of`'s stored program again
    /// (`vsh rerun`): version 6 when it is one.
    pub(crate) fn with_rerun_of(mut self, of: Option<vsh_types::TransactionId>) -> Self {
        if of.is_some() {
            self.version = self.version.max(RERUN_VERSION);
        }
        self.rerun_of = of.map(|id| *id.as_bytes());
        self
    }

    /// This evidence with what a reviewer is told of its decision (the
    /// warnings among `warnings` that are [`DecisionNote`]s): version 7
    /// when there are any.
    pub(crate) fn with_notes(mut self, warnings: &[crate::Warning]) -> Self {
        self.notes = warnings.iter().filter_map(DecisionNote::of).collect();
        if !self.notes.is_empty() {
            self.version = EVIDENCE_VERSION;
        }
        self
    }

    /// The keyed digest of the value granted variable `name` had, when this
    /// evidence keeps one (version 5 on).
    pub(crate) fn env_value(&self, name: &str) -> Option<&[u8; 32]> {
        let names = &self.grants.as_ref()?.env;
        // Recorded in step: one name, one digest.
        if names.len() != self.env_values.len() {
            return None;
        }
        names.iter().position(|granted| granted == name).map(|at| &self.env_values[at])
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("serializing to a vector cannot fail")
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, EvidenceError> {
        // postcard writes a `u8` as its one byte, so the version leads.
        let evidence = match bytes.first() {
            Some(1) => {
                let old: EvidenceV1 = postcard::from_bytes(bytes).map_err(|_| EvidenceError::Malformed)?;
                Self {
                    version: old.version,
                    nonce: old.nonce,
                    decision: old.decision,
                    output: EvidenceOutput::Monty { value: old.value, stdout: old.stdout },
                    stats: old.stats,
                    effects: old.effects,
                    grants: None,
                    env_values: Vec::new(),
                    rerun_of: None,
                    notes: Vec::new(),
                }
            }
            Some(2) => {
                let old: EvidenceV2 = postcard::from_bytes(bytes).map_err(|_| EvidenceError::Malformed)?;
                let EvidenceV2 { version, nonce, decision, output, stats, effects } = old;
                EvidenceV4 { version, nonce, decision, output, stats, effects, grants: None }.into()
            }
            // Version 4's layout is version 3's, with one more kind of output.
            Some(3 | 4) => postcard::from_bytes::<EvidenceV4>(bytes).map_err(|_| EvidenceError::Malformed)?.into(),
            Some(&ENV_VALUES_VERSION) => {
                postcard::from_bytes::<EvidenceV5>(bytes).map_err(|_| EvidenceError::Malformed)?.into()
            }
            Some(&RERUN_VERSION) => {
                postcard::from_bytes::<EvidenceV6>(bytes).map_err(|_| EvidenceError::Malformed)?.into()
            }
            Some(&EVIDENCE_VERSION) => postcard::from_bytes::<Self>(bytes).map_err(|_| EvidenceError::Malformed)?,
            Some(&other) => return Err(EvidenceError::Version(other)),
            None => return Err(EvidenceError::Malformed),
        };
        if let EvidenceOutput::Monty { value, .. } = &evidence.output
            && value_depth(value) > MAX_VALUE_DEPTH
        {
            return Err(EvidenceError::TooDeep);
        }
        Ok(evidence)
    }
}

/// Why stored evidence was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EvidenceError {
    /// The bytes do not decode.
    #[error("execution evidence is malformed")]
    Malformed,
    /// An unknown encoding version.
    #[error("execution evidence has unknown version {0}")]
    Version(u8),
    /// The value nests deeper than vsh keeps.
    #[error("execution evidence nests deeper than {MAX_VALUE_DEPTH} levels")]
    TooDeep,
}

/// The nesting depth of a value (by `vsh_monty`'s one value walk, which
/// descends into class instances too), counted until it passes the bound.
pub(crate) fn value_depth(value: &MontyObject) -> usize {
    vsh_monty::value::nesting(value, MAX_VALUE_DEPTH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_round_trips_and_depth_is_bounded() {
        let value = MontyObject::List(vec![MontyObject::Int(1), MontyObject::String("x".into())]);
        let effects = vec![Effect::Rename {
            from: vsh_types::VPath::parse("a").unwrap(),
            to: vsh_types::VPath::parse("b").unwrap(),
        }];
        let monty = EvidenceOutput::Monty { value: value.clone(), stdout: "out".into() };
        let evidence =
            Evidence::new([7; 16], Decision::AutoApproved, monty, &ExecutionStats::default(), effects.clone(), None);
        assert_eq!(Evidence::decode(&evidence.encode()).unwrap(), evidence);
        let bash = EvidenceOutput::Bash {
            profile: vsh_monty::BASH_PROFILE.into(),
            exit_code: 0,
            stdout: vec![0xff, b'\n'],
            stderr: b"warn".to_vec(),
        };
        let evidence =
            Evidence::new([8; 16], Decision::AutoApproved, bash, &ExecutionStats::default(), Vec::new(), None);
        assert_eq!(Evidence::decode(&evidence.encode()).unwrap(), evidence);
        assert_eq!(Evidence::decode(b"\x08junk"), Err(EvidenceError::Version(8)));
        assert_eq!(Evidence::decode(b"\x07junk"), Err(EvidenceError::Malformed));
        assert_eq!(Evidence::decode(b"\x06junk"), Err(EvidenceError::Malformed));
        assert_eq!(Evidence::decode(b"\x05junk"), Err(EvidenceError::Malformed));
        assert_eq!(Evidence::decode(b"\x02junk"), Err(EvidenceError::Malformed));
        assert_eq!(Evidence::decode(b""), Err(EvidenceError::Malformed));
        let mut deep = MontyObject::None;
        for _ in 0..MAX_VALUE_DEPTH + 5 {
            deep = MontyObject::List(vec![deep]);
        }
        assert!(value_depth(&deep) > MAX_VALUE_DEPTH);
        assert_eq!(value_depth(&MontyObject::Int(1)), 1);
    }

    /// Version 4 adds a Monty program that raised after a refusal; version
    /// 3's bytes, the same layout, still read.
    #[test]
    fn a_raised_programs_evidence_round_trips_and_version_three_still_reads() {
        let raised = EvidenceOutput::MontyRaised {
            exception: "Traceback (most recent call last):\nPermissionError: [Errno 13]".into(),
            stdout: "before\n".into(),
        };
        let evidence =
            Evidence::new([9; 16], Decision::AutoApproved, raised, &ExecutionStats::default(), Vec::new(), None);
        let bytes = evidence.encode();
        assert_eq!(bytes[0], 4);
        assert_eq!(Evidence::decode(&bytes).unwrap(), evidence);
        assert_eq!(evidence.output.language(), crate::Language::Monty);
        let monty = EvidenceOutput::Monty { value: MontyObject::None, stdout: String::new() };
        let mut three =
            Evidence::new([1; 16], Decision::AutoApproved, monty, &ExecutionStats::default(), Vec::new(), None);
        three.version = 3;
        let read = Evidence::decode(&three.encode()).unwrap();
        assert_eq!((read.version, read.output), (3, three.output));
        // Only what needs version 4 is written as it: an older vsh reads the rest.
        let plain = EvidenceOutput::Monty { value: MontyObject::Int(1), stdout: String::new() };
        let written =
            Evidence::new([2; 16], Decision::AutoApproved, plain, &ExecutionStats::default(), Vec::new(), None);
        assert_eq!(written.encode()[0], 3);
    }

    /// Version 1 evidence, as artifacts written before Bash hold it, is read
    /// as Monty output (its bytes written here field by field, as postcard
    /// lays out the old struct).
    #[test]
    fn version_one_evidence_still_reads() {
        #[derive(Serialize)]
        struct V1<'a> {
            version: u8,
            nonce: [u8; 16],
            decision: Decision,
            value: MontyObject,
            stdout: &'a str,
            stats: ExecutionStats,
            effects: Vec<Effect>,
        }
        let old = V1 {
            version: 1,
            nonce: [3; 16],
            decision: Decision::AutoApproved,
            value: MontyObject::Int(42),
            stdout: "hi",
            stats: ExecutionStats::default(),
            effects: Vec::new(),
        };
        let read = Evidence::decode(&postcard::to_allocvec(&old).unwrap()).unwrap();
        assert_eq!(read.output, EvidenceOutput::Monty { value: MontyObject::Int(42), stdout: "hi".into() });
        assert_eq!(read.nonce, [3; 16]);
    }

    /// Version 2 evidence (before grants were recorded) reads with no
    /// grants; version 3 keeps them.
    #[test]
    fn version_two_evidence_still_reads_and_grants_round_trip() {
        #[derive(Serialize)]
        struct V2 {
            version: u8,
            nonce: [u8; 16],
            decision: Decision,
            output: EvidenceOutput,
            stats: ExecutionStats,
            effects: Vec<Effect>,
        }
        let output = EvidenceOutput::Bash {
            profile: vsh_monty::COMMAND_PROFILE.into(),
            exit_code: 0,
            stdout: Vec::new(),
            stderr: Vec::new(),
        };
        let old = V2 {
            version: 2,
            nonce: [4; 16],
            decision: Decision::AutoApproved,
            output: output.clone(),
            stats: ExecutionStats::default(),
            effects: Vec::new(),
        };
        let read = Evidence::decode(&postcard::to_allocvec(&old).unwrap()).unwrap();
        assert_eq!((read.output, read.grants, read.nonce), (output.clone(), None, [4; 16]));
        let grants = crate::CommandGrants {
            env: vec!["TOKEN".into()],
            network: "loopback".into(),
            ports: vec![5432],
            ..crate::CommandGrants::default()
        };
        let evidence = Evidence::new(
            [5; 16],
            Decision::AutoApproved,
            output,
            &ExecutionStats::default(),
            Vec::new(),
            Some(grants),
        );
        assert_eq!(Evidence::decode(&evidence.encode()).unwrap(), evidence);
        // Version 3 keeps no value digest; version 5 keeps one per granted name.
        assert_eq!(evidence.encode()[0], 3);
        assert_eq!(Evidence::decode(&evidence.encode()).unwrap().env_value("TOKEN"), None);
        let valued = evidence.with_env_values(vec![[6; 32]]);
        assert_eq!(valued.encode()[0], 5);
        let read = Evidence::decode(&valued.encode()).unwrap();
        assert_eq!(read, valued);
        assert_eq!((read.env_value("TOKEN"), read.env_value("PATH")), (Some(&[6; 32]), None));
        // Version 6 links a rerun to the transaction it ran again; the
        // versions before it read as linked to none.
        assert_eq!(read.rerun_of, None);
        let first = vsh_types::TransactionId::from_bytes([9; 32]);
        let linked = read.clone().with_rerun_of(Some(first));
        assert_eq!(linked.encode()[0], 6);
        let reread = Evidence::decode(&linked.encode()).unwrap();
        assert_eq!((reread.rerun_of, reread.env_value("TOKEN")), (Some([9; 32]), Some(&[6; 32])));
        assert_eq!(read.clone().with_rerun_of(None).encode(), read.encode(), "unlinked stays version 5");
        // Version 7 keeps what the reviewer was told; those before it read
        // with nothing to tell, and only the notes make a version 7.
        assert!(reread.notes.is_empty());
        let told = [
            crate::Warning::ResultsCut { lists: 1 },
            crate::Warning::Rewritten { files: vec!["a.py: 90 of its 100 reviewed bytes lost".into()], total: 3 },
            crate::Warning::ReviewRules { paths: vec!["tests/a.py (delete): `tests/**`".into()], total: 1 },
            crate::Warning::UnseenChanges { files: vec!["a.py: changed since 0a1b read it".into()], total: 2 },
        ];
        let noted = linked.clone().with_notes(&told);
        assert_eq!(noted.encode()[0], 7);
        let reread = Evidence::decode(&noted.encode()).unwrap();
        assert_eq!(reread.rerun_of, Some([9; 32]));
        let shown: Vec<crate::Warning> = reread.notes.iter().map(DecisionNote::to_warning).collect();
        assert_eq!(shown.len(), 3, "{shown:?}");
        assert_eq!(shown[0].to_string(), told[1].to_string());
        assert_eq!(shown[1].to_string(), told[2].to_string());
        assert_eq!(shown[2].to_string(), told[3].to_string());
        assert_eq!(linked.clone().with_notes(&told[..1]).encode(), linked.encode(), "nothing noted stays version 6");
        // Digests out of step with the names are none of theirs.
        let unmatched = Evidence { env_values: vec![[6; 32], [7; 32]], ..read };
        assert_eq!(unmatched.env_value("TOKEN"), None);
    }
}
