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

/// Version of the evidence encoding.
const EVIDENCE_VERSION: u8 = 1;

/// The deepest value nesting kept as evidence. Encoding and decoding recurse
/// once per level, so the bound keeps both far from the stack's limit.
pub(crate) const MAX_VALUE_DEPTH: usize = 256;

/// What a run produced, as bound into its transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Evidence {
    version: u8,
    /// Distinguishes two runs of the same program against the same state.
    pub(crate) nonce: [u8; 16],
    pub(crate) decision: Decision,
    pub(crate) value: MontyObject,
    pub(crate) stdout: String,
    pub(crate) stats: ExecutionStats,
    /// What the program did, in order (writes, directories made, removals,
    /// renames, mode changes): the rename evidence the diff alone does not show.
    pub(crate) effects: Vec<Effect>,
}

impl Evidence {
    pub(crate) fn new(
        nonce: [u8; 16],
        decision: Decision,
        value: MontyObject,
        stdout: String,
        stats: &ExecutionStats,
        effects: Vec<Effect>,
    ) -> Self {
        Self { version: EVIDENCE_VERSION, nonce, decision, value, stdout, stats: stats.clone(), effects }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("serializing to a vector cannot fail")
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, EvidenceError> {
        let evidence: Self = postcard::from_bytes(bytes).map_err(|_| EvidenceError::Malformed)?;
        if evidence.version != EVIDENCE_VERSION {
            return Err(EvidenceError::Version(evidence.version));
        }
        if value_depth(&evidence.value) > MAX_VALUE_DEPTH {
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
        let evidence =
            Evidence::new([7; 16], Decision::AutoApproved, value, "out".into(), &ExecutionStats::default(), effects);
        assert_eq!(Evidence::decode(&evidence.encode()).unwrap(), evidence);
        assert_eq!(Evidence::decode(b"\x05junk"), Err(EvidenceError::Malformed));
        let mut deep = MontyObject::None;
        for _ in 0..MAX_VALUE_DEPTH + 5 {
            deep = MontyObject::List(vec![deep]);
        }
        assert!(value_depth(&deep) > MAX_VALUE_DEPTH);
        assert_eq!(value_depth(&MontyObject::Int(1)), 1);
    }
}
