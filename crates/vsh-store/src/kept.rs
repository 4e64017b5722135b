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

use crate::{DataDir, StoreError};

/// The settings file that holds a workspace's unread contents.
pub const UNREAD_CONTENTS_FILE: &str = "unread-contents";

/// The most entries it holds; the oldest go first.
pub const MAX_UNREAD_ENTRIES: usize = 10_000;

const MAGIC: &[u8; 8] = b"VSHUNR01";
const MAC_DOMAIN: &str = "vsh 2026 unread contents v1";
const KEY_DOMAIN: &str = "vsh 2026 unread content key v1";
/// Magic and entry count.
const HEADER: usize = 8 + 4;
/// Key and content.
const ENTRY: usize = 32 + 32;
const TAG: usize = 32;

/// The largest file it may be.
pub const MAX_UNREAD_CONTENTS_BYTES: u64 = (HEADER + MAX_UNREAD_ENTRIES * ENTRY + TAG) as u64;

/// The digests of files commits removed or replaced unread, each by the
/// path and the state its diff recorded ([`UnreadContents::key`]), oldest
/// first: kept in [`UNREAD_CONTENTS_FILE`], MAC'd under the authority key
/// (format in `docs/store-format.md`, "Unread contents").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnreadContents {
    entries: Vec<([u8; 32], BlobId)>,
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
        let key = Self::key(path, state);
        self.entries.iter().rev().find(|(known, _)| *known == key).map(|(_, content)| *content)
    }

    /// Name `content` as the bytes of the file at `path` in `state`: the
    /// newest entry; the oldest go past [`MAX_UNREAD_ENTRIES`].
    pub fn insert(&mut self, path: &VPath, state: &NodeState, content: BlobId) {
        let key = Self::key(path, state);
        self.entries.retain(|(known, _)| *known != key);
        self.entries.push((key, content));
        if self.entries.len() > MAX_UNREAD_ENTRIES {
            let over = self.entries.len() - MAX_UNREAD_ENTRIES;
            self.entries.drain(..over);
        }
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The contents it names (for garbage collection to keep).
    pub fn contents(&self) -> impl Iterator<Item = BlobId> + '_ {
        self.entries.iter().map(|(_, content)| *content)
    }

    /// The file's bytes: the magic, the count (`u32`, little-endian), each
    /// entry oldest first (key, content), then the MAC under `key` over all
    /// of it.
    pub fn encode(&self, key: &AuthorityKey) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + self.entries.len() * ENTRY + TAG);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for (entry, content) in &self.entries {
            out.extend_from_slice(entry);
            out.extend_from_slice(content.as_bytes());
        }
        let tag = key.mac(MAC_DOMAIN).update(&out).finalize();
        out.extend_from_slice(&tag);
        out
    }

    /// Decode and verify what [`UnreadContents::encode`] wrote under `key`;
    /// anything else is [`StoreError::CorruptUnreadContents`].
    pub fn decode(bytes: &[u8], key: &AuthorityKey) -> Result<Self, StoreError> {
        let corrupt = |reason| StoreError::CorruptUnreadContents { reason };
        if bytes.len() < HEADER + TAG || bytes.len() as u64 > MAX_UNREAD_CONTENTS_BYTES {
            return Err(corrupt("its length is out of bounds"));
        }
        let (body, tag) = bytes.split_at(bytes.len() - TAG);
        if !key.mac(MAC_DOMAIN).update(body).verify(tag) {
            return Err(corrupt("its MAC under the authority key does not verify"));
        }
        let (magic, rest) = body.split_at(8);
        if magic != MAGIC {
            return Err(corrupt("its magic is not VSHUNR01"));
        }
        let (count, rest) = rest.split_at(4);
        let count = u32::from_le_bytes(count.try_into().map_err(|_| corrupt("it is cut short"))?) as usize;
        if count > MAX_UNREAD_ENTRIES || rest.len() != count * ENTRY {
            return Err(corrupt("its entry count does not match its length"));
        }
        let entries = rest
            .chunks_exact(ENTRY)
            .map(|entry| {
                let (key, content) = entry.split_at(32);
                let key: [u8; 32] = key.try_into().expect("32 bytes");
                let content: [u8; 32] = content.try_into().expect("32 bytes");
                (key, BlobId::from_bytes(content))
            })
            .collect();
        Ok(Self { entries })
    }

    /// What `data` holds (none where it holds no file).
    pub fn read(data: &DataDir, key: &AuthorityKey) -> Result<Self, StoreError> {
        match data.read_setting(UNREAD_CONTENTS_FILE, MAX_UNREAD_CONTENTS_BYTES)? {
            Some(bytes) => Self::decode(&bytes, key),
            None => Ok(Self::default()),
        }
    }

    /// Replace what `data` holds with this, whole and unsynced (as the loss
    /// history is written: a machine crash may leave the one before, or one
    /// whose MAC fails and is refused).
    pub fn write(&self, data: &DataDir, key: &AuthorityKey) -> Result<(), StoreError> {
        data.write_setting_unsynced(UNREAD_CONTENTS_FILE, &self.encode(key))
    }
}

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
