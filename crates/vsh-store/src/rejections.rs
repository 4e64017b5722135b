//! [`RejectionScopes`]: what a rejection said of the work it rejected. A
//! rejected record says only that its run will never commit; whether the
//! operator said no to the work itself (every run of it, `vsh reject`), to
//! that run alone (`vsh reject --only`), or an agent dropped its own run
//! (MCP `vsh_discard`) is kept here, so an agent's server, restarted or
//! another, tells a refusal of the work from its own discard (ux77: an
//! operator's `--only` refused the agent's reruns, and a restarted server
//! took the agent's discards for an operator's). A workspace keeps one, in
//! the settings file [`REJECTION_SCOPES_FILE`] of its data directory (format
//! in `docs/store-format.md`, "Rejection scopes"), MAC'd under the authority
//! key, holding the newest [`MAX_REJECTION_SCOPES`]. A rejection it holds
//! nothing of is the work's: the safe reading, for a record made before it
//! or one it lost.

use vsh_types::{AuthorityKey, TransactionId};

use crate::index::{IndexFormat, KeyedIndex, index_file};
use crate::{DataDir, StoreError};

/// The settings file that holds the scopes.
pub const REJECTION_SCOPES_FILE: &str = "rejection-scopes";

/// The most rejections it holds; the ones recorded longest ago go first.
pub const MAX_REJECTION_SCOPES: usize = 4096;

const FORMAT: IndexFormat = IndexFormat {
    file: REJECTION_SCOPES_FILE,
    magic: b"VSHRJS01",
    mac_domain: "vsh 2026 rejection scopes v1",
    max_entries: MAX_REJECTION_SCOPES,
    corrupt: |reason| StoreError::CorruptRejectionScopes { reason },
};

/// The largest file it may be.
pub const MAX_REJECTION_SCOPES_BYTES: u64 = FORMAT.max_bytes::<1>();

/// What one rejection said no to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectionScope {
    /// The work: every run of it (an operator's `vsh reject`). What a
    /// rejection nothing is recorded of is.
    Work,
    /// That run alone: its other runs stand (`vsh reject --only`).
    ThisRun,
    /// The agent that made the run dropped it (MCP `vsh_discard`): nothing
    /// was said of the work.
    Discarded,
}

impl RejectionScope {
    const fn byte(self) -> u8 {
        match self {
            Self::Work => 1,
            Self::ThisRun => 2,
            Self::Discarded => 3,
        }
    }

    const fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            1 => Some(Self::Work),
            2 => Some(Self::ThisRun),
            3 => Some(Self::Discarded),
            _ => None,
        }
    }

    /// Whether the rejection said no to the work itself.
    pub const fn refuses_the_work(self) -> bool {
        matches!(self, Self::Work)
    }
}

/// The scopes of rejections, each by its transaction, newest last: kept in
/// [`REJECTION_SCOPES_FILE`], MAC'd under the authority key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RejectionScopes {
    index: KeyedIndex<1>,
}

impl RejectionScopes {
    /// What the rejection of `transaction` said no to: [`RejectionScope::Work`]
    /// unless something else was recorded (a value this vsh does not know
    /// is read as the work's too).
    pub fn scope_of(&self, transaction: &TransactionId) -> RejectionScope {
        self.index
            .get(transaction.as_bytes())
            .and_then(|value| RejectionScope::from_byte(value[0]))
            .unwrap_or(RejectionScope::Work)
    }

    /// What was recorded of the rejection of `transaction`, if anything (a
    /// value this vsh does not know is the work's).
    pub fn recorded(&self, transaction: &TransactionId) -> Option<RejectionScope> {
        self.index
            .get(transaction.as_bytes())
            .map(|value| RejectionScope::from_byte(value[0]).unwrap_or(RejectionScope::Work))
    }

    /// Record `scope` for the rejection of `transaction`, replacing what
    /// was recorded; whether anything changed.
    pub fn insert(&mut self, transaction: &TransactionId, scope: RejectionScope) -> bool {
        self.index.insert(*transaction.as_bytes(), [scope.byte()], MAX_REJECTION_SCOPES)
    }
}

index_file!(RejectionScopes, FORMAT, 1);

#[cfg(test)]
mod tests {
    use super::*;

    fn id(byte: u8) -> TransactionId {
        TransactionId::from_bytes([byte; 32])
    }

    #[test]
    fn a_rejection_is_the_works_unless_recorded_otherwise_and_the_newest_record_holds() {
        let mut scopes = RejectionScopes::default();
        assert_eq!(scopes.scope_of(&id(1)), RejectionScope::Work);
        assert_eq!(scopes.recorded(&id(1)), None);
        assert!(scopes.insert(&id(1), RejectionScope::Discarded));
        assert_eq!(scopes.recorded(&id(1)), Some(RejectionScope::Discarded));
        assert!(scopes.insert(&id(2), RejectionScope::ThisRun));
        assert_eq!(scopes.scope_of(&id(1)), RejectionScope::Discarded);
        assert_eq!(scopes.scope_of(&id(2)), RejectionScope::ThisRun);
        // An operator's rejection of the work later replaces the discard.
        assert!(scopes.insert(&id(1), RejectionScope::Work));
        assert!(!scopes.insert(&id(1), RejectionScope::Work), "the same again changes nothing");
        assert_eq!(scopes.scope_of(&id(1)), RejectionScope::Work);
        assert!(scopes.scope_of(&id(1)).refuses_the_work() && !scopes.scope_of(&id(2)).refuses_the_work());
        for n in 0..MAX_REJECTION_SCOPES {
            let mut bytes = [0xee; 32];
            bytes[..8].copy_from_slice(&(n as u64).to_le_bytes());
            scopes.insert(&TransactionId::from_bytes(bytes), RejectionScope::Discarded);
        }
        assert_eq!(scopes.scope_of(&id(2)), RejectionScope::Work, "the oldest went first: the safe reading");
        assert_eq!(scopes.len(), MAX_REJECTION_SCOPES);
    }

    #[test]
    fn it_round_trips_under_its_mac_and_refuses_anything_else() {
        let key = AuthorityKey::from_bytes([7; 32]);
        let mut scopes = RejectionScopes::default();
        scopes.insert(&id(4), RejectionScope::Discarded);
        let bytes = scopes.encode(&key);
        assert_eq!(&bytes[..8], b"VSHRJS01");
        assert_eq!(RejectionScopes::decode(&bytes, &key).unwrap(), scopes);
        let mut flipped = bytes.clone();
        flipped[12 + 32] ^= 1;
        assert!(matches!(RejectionScopes::decode(&flipped, &key), Err(StoreError::CorruptRejectionScopes { .. })));
        let other = AuthorityKey::from_bytes([8; 32]);
        assert!(matches!(RejectionScopes::decode(&bytes, &other), Err(StoreError::CorruptRejectionScopes { .. })));
        // A value this vsh does not know is the work's.
        let mut unknown = RejectionScopes::default();
        unknown.index.insert(*id(5).as_bytes(), [9], MAX_REJECTION_SCOPES);
        assert_eq!(unknown.scope_of(&id(5)), RejectionScope::Work);
    }
}
