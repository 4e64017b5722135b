//! [`PrincipalNames`]: the names behind the principals that approved a
//! workspace's work. An approval binds a principal's digest
//! ([`vsh_types::PrincipalId`]), never its name; the command line records
//! the name it digested here, so that `vsh log` and `vsh show` can say who
//! approved work later (ux68 M2: only the digest was ever shown again). A
//! workspace keeps one, in the settings file [`PRINCIPAL_NAMES_FILE`] of its
//! data directory (format in `docs/store-format.md`, "Principal names"),
//! MAC'd under the authority key, holding the newest
//! [`MAX_PRINCIPAL_NAMES`]. A name is only ever shown beside the digest it
//! must digest to, so a name that does not is never shown.

use vsh_types::{AuthorityKey, PrincipalId};

use crate::index::{IndexFormat, KeyedIndex, index_file};
use crate::{DataDir, StoreError};

/// The settings file that holds the names.
pub const PRINCIPAL_NAMES_FILE: &str = "principal-names";

/// The most names it holds; the ones named longest ago go first.
pub const MAX_PRINCIPAL_NAMES: usize = 256;

/// The longest name it holds, in bytes (longer ones are not recorded).
pub const MAX_PRINCIPAL_NAME_BYTES: usize = 64;

const FORMAT: IndexFormat = IndexFormat {
    file: PRINCIPAL_NAMES_FILE,
    magic: b"VSHPRN01",
    mac_domain: "vsh 2026 principal names v1",
    max_entries: MAX_PRINCIPAL_NAMES,
    corrupt: |reason| StoreError::CorruptPrincipalNames { reason },
};

/// The largest file it may be.
pub const MAX_PRINCIPAL_NAMES_BYTES: u64 = FORMAT.max_bytes::<MAX_PRINCIPAL_NAME_BYTES>();

/// The names of principals, each by its digest, newest last: kept in
/// [`PRINCIPAL_NAMES_FILE`], MAC'd under the authority key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrincipalNames {
    index: KeyedIndex<MAX_PRINCIPAL_NAME_BYTES>,
}

impl PrincipalNames {
    /// The name `principal` digests, if one was recorded and still digests
    /// to it.
    pub fn name_of(&self, principal: &PrincipalId) -> Option<String> {
        let padded = self.index.get(principal.as_bytes())?;
        let length = padded.iter().position(|byte| *byte == 0).unwrap_or(padded.len());
        let name = std::str::from_utf8(&padded[..length]).ok()?;
        (PrincipalId::digest(name.as_bytes()) == *principal).then(|| name.to_owned())
    }

    /// Record `name` as the name behind its digest; whether anything
    /// changed. A name that is empty, longer than
    /// [`MAX_PRINCIPAL_NAME_BYTES`] or holds a NUL byte is not recorded.
    pub fn insert(&mut self, name: &str) -> bool {
        if name.is_empty() || name.len() > MAX_PRINCIPAL_NAME_BYTES || name.contains('\0') {
            return false;
        }
        let mut padded = [0; MAX_PRINCIPAL_NAME_BYTES];
        padded[..name.len()].copy_from_slice(name.as_bytes());
        let principal = PrincipalId::digest(name.as_bytes());
        self.index.insert(*principal.as_bytes(), padded, MAX_PRINCIPAL_NAMES)
    }
}

index_file!(PrincipalNames, FORMAT, 64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_found_by_its_digest_and_only_where_it_digests_to_it() {
        let mut names = PrincipalNames::default();
        assert!(names.insert("alice"));
        assert!(!names.insert("alice"), "the same name again changes nothing");
        assert_eq!(names.name_of(&PrincipalId::digest(b"alice")).as_deref(), Some("alice"));
        assert_eq!(names.name_of(&PrincipalId::digest(b"bob")), None);
        for refused in ["", &"x".repeat(MAX_PRINCIPAL_NAME_BYTES + 1), "a\0b"] {
            assert!(!names.insert(refused), "{refused:?}");
        }
        assert!(names.insert(&"y".repeat(MAX_PRINCIPAL_NAME_BYTES)));
        assert_eq!(names.len(), 2);
        for n in 0..MAX_PRINCIPAL_NAMES {
            names.insert(&format!("user{n}"));
        }
        assert_eq!(names.name_of(&PrincipalId::digest(b"alice")), None, "the oldest went first");
    }

    #[test]
    fn it_round_trips_under_its_mac_and_a_name_put_under_another_digest_is_never_shown() {
        let key = AuthorityKey::from_bytes([9; 32]);
        let mut names = PrincipalNames::default();
        names.insert("alice");
        let bytes = names.encode(&key);
        assert_eq!(&bytes[..8], b"VSHPRN01");
        assert_eq!(PrincipalNames::decode(&bytes, &key).unwrap(), names);
        let mut flipped = bytes.clone();
        flipped[30] ^= 1;
        assert!(matches!(PrincipalNames::decode(&flipped, &key), Err(StoreError::CorruptPrincipalNames { .. })));
        // A name under another's digest (made with the key) is not shown.
        let mut forged = PrincipalNames::default();
        let mut padded = [0; MAX_PRINCIPAL_NAME_BYTES];
        padded[..7].copy_from_slice(b"mallory");
        forged.index.insert(*PrincipalId::digest(b"alice").as_bytes(), padded, MAX_PRINCIPAL_NAMES);
        assert_eq!(forged.name_of(&PrincipalId::digest(b"alice")), None);
    }
}
