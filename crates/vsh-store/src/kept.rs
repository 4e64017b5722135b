//! [`UnreadContents`]: where the bytes are of files commits removed or
//! replaced that the work itself never read, so that `vsh revert` can put
//! them back.
//!
//! A run that deletes a file it never read records the file by its stamp
//! alone (no digest: deleting reads nothing). A commit of such work reads
//! the file's bytes while the workspace still holds them (checked against
//! the stamp), keeps them in the blob store as it keeps the bytes it
//! replaces, and names their digest here, under a key derived from the path
//! and the state the diff recorded ([`UnreadContents::key`]). A workspace
//! keeps one, in the settings file [`UNREAD_CONTENTS_FILE`] of its data
//! directory (format in `docs/store-format.md`, "Unread contents"), MAC'd
//! under the authority key, holding the newest [`MAX_UNREAD_ENTRIES`].

use vsh_types::canon::Canonical;
use vsh_types::{AuthorityKey, BlobId, NodeState, VPath};

use crate::index::{IndexFormat, KeyedIndex, index_file};
use crate::{DataDir, StoreError};

/// The settings file that holds a workspace's unread contents.
pub const UNREAD_CONTENTS_FILE: &str = "unread-contents";

/// The most entries it holds; the oldest go first.
pub const MAX_UNREAD_ENTRIES: usize = 10_000;

const KEY_DOMAIN: &str = "vsh 2026 unread content key v1";

const FORMAT: IndexFormat = IndexFormat {
    file: UNREAD_CONTENTS_FILE,
    magic: b"VSHUNR01",
    mac_domain: "vsh 2026 unread contents v1",
    max_entries: MAX_UNREAD_ENTRIES,
    corrupt: |reason| StoreError::CorruptUnreadContents { reason },
};

/// The largest file it may be.
pub const MAX_UNREAD_CONTENTS_BYTES: u64 = FORMAT.max_bytes::<32>();

/// The digests of files commits removed or replaced unread, each by the
/// path and the state its diff recorded ([`UnreadContents::key`]), oldest
/// first: kept in [`UNREAD_CONTENTS_FILE`], MAC'd under the authority key
/// (format in `docs/store-format.md`, "Unread contents").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnreadContents {
    index: KeyedIndex<32>,
}

impl UnreadContents {
    /// The key of the file at `path` in `state` (as a diff recorded it):
    /// BLAKE3 derived under its own context over the path and the state's
    /// canonical encoding (its stamp among them).
    pub fn key(path: &VPath, state: &NodeState) -> [u8; 32] {
        let mut hasher = blake3::Hasher::new_derive_key(KEY_DOMAIN);
        hasher.update(&path.to_canonical_bytes());
        hasher.update(&state.to_canonical_bytes());
        *hasher.finalize().as_bytes()
    }

    /// The content of the file at `path` in `state`, if a commit named it.
    pub fn get(&self, path: &VPath, state: &NodeState) -> Option<BlobId> {
        self.index.get(&Self::key(path, state)).map(|content| BlobId::from_bytes(*content))
    }

    /// Name `content` as the bytes of the file at `path` in `state`: the
    /// newest entry; the oldest go past [`MAX_UNREAD_ENTRIES`].
    pub fn insert(&mut self, path: &VPath, state: &NodeState, content: BlobId) {
        self.index.insert(Self::key(path, state), *content.as_bytes(), MAX_UNREAD_ENTRIES);
    }

    /// The contents it names (for garbage collection to keep).
    pub fn contents(&self) -> impl Iterator<Item = BlobId> + '_ {
        self.index.values().map(|content| BlobId::from_bytes(*content))
    }
}

index_file!(UnreadContents, FORMAT, 32);

#[cfg(test)]
mod tests {
    use vsh_types::FileStamp;

    use super::*;

    fn unread(ino: u64) -> NodeState {
        NodeState::unread_file(5, 0o644, FileStamp { dev: 1, ino, mtime_ns: 7, ctime_ns: 8 })
    }

    #[test]
    fn an_entry_is_found_by_its_path_and_state_only() {
        let mut kept = UnreadContents::default();
        let (a, b) = (VPath::parse("a.txt").unwrap(), VPath::parse("b.txt").unwrap());
        let content = BlobId::of(b"hello");
        kept.insert(&a, &unread(3), content);
        assert_eq!(kept.get(&a, &unread(3)), Some(content));
        assert_eq!(kept.get(&b, &unread(3)), None, "another path");
        assert_eq!(kept.get(&a, &unread(4)), None, "another file at the path");
        // Named again: one entry, the newest.
        let other = BlobId::of(b"other");
        kept.insert(&a, &unread(3), other);
        assert_eq!((kept.len(), kept.get(&a, &unread(3))), (1, Some(other)));
    }

    #[test]
    fn it_keeps_the_newest_entries_and_round_trips_under_its_mac() {
        let key = AuthorityKey::from_bytes([9; 32]);
        let mut kept = UnreadContents::default();
        let path = VPath::parse("f").unwrap();
        for ino in 0..=MAX_UNREAD_ENTRIES as u64 {
            kept.insert(&path, &unread(ino), BlobId::of(&ino.to_le_bytes()));
        }
        assert_eq!(kept.len(), MAX_UNREAD_ENTRIES);
        assert_eq!(kept.get(&path, &unread(0)), None, "the oldest went first");
        assert!(kept.get(&path, &unread(MAX_UNREAD_ENTRIES as u64)).is_some());
        let bytes = kept.encode(&key);
        assert_eq!(UnreadContents::decode(&bytes, &key).unwrap(), kept);
        // Any byte changed, another key, or cut short: refused.
        let mut flipped = bytes.clone();
        flipped[20] ^= 1;
        for (bad, with) in [
            (flipped, key.clone()),
            (bytes.clone(), AuthorityKey::from_bytes([8; 32])),
            (bytes[..bytes.len() - 1].to_vec(), key.clone()),
        ] {
            assert!(matches!(UnreadContents::decode(&bad, &with), Err(StoreError::CorruptUnreadContents { .. })));
        }
    }
}
