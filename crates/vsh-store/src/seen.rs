//! [`SeenContents`]: what vsh last saw of each of a workspace's files, so
//! that a run that replaces a file it never read, changed since, waits for a
//! reviewer (`unseen-change`, ux64 F3: an agent writes a whole file from a
//! read made in an earlier transaction, dropping the user's edit made
//! since).
//!
//! A sighting is what a run read at a path (its read set's content, or the
//! path's absence) or what a commit left there (its diff's after state).
//! Each run records its own (read-only runs keep no other record), each
//! commit its after states. A workspace keeps one, in the settings file
//! [`SEEN_CONTENTS_FILE`] of its data directory (format in
//! `docs/store-format.md`, "Seen contents"), MAC'd under the authority key,
//! holding the newest [`MAX_SEEN_ENTRIES`] paths.

use vsh_types::canon::Canonical;
use vsh_types::{AuthorityKey, BlobId, TransactionId, VPath};

use crate::index::{IndexFormat, KeyedIndex, index_file};
use crate::{DataDir, StoreError};

/// The settings file that holds what vsh last saw of a workspace's files.
pub const SEEN_CONTENTS_FILE: &str = "seen-contents";

/// The most entries it holds (a sighting of any run is one, a session's
/// three); the ones seen longest ago go first.
pub const MAX_SEEN_ENTRIES: usize = 1024;

const KEY_DOMAIN: &str = "vsh 2026 seen content key v1";

const FORMAT: IndexFormat = IndexFormat {
    file: SEEN_CONTENTS_FILE,
    magic: b"VSHSEE01",
    mac_domain: "vsh 2026 seen contents v1",
    max_entries: MAX_SEEN_ENTRIES,
    corrupt: |reason| StoreError::CorruptSeenContents { reason },
};

/// The largest file it may be.
pub const MAX_SEEN_CONTENTS_BYTES: u64 = FORMAT.max_bytes::<64>();

/// What vsh last saw at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sighting {
    /// The file's content, or `None`: nothing was there.
    pub content: Option<BlobId>,
    /// The transaction whose commit left it, or `None`: a run read it.
    pub committed_by: Option<TransactionId>,
}

impl Sighting {
    /// The entry's value: the content's digest (zeros: absent), then the
    /// committing transaction's id (zeros: a read).
    fn to_value(self) -> [u8; 64] {
        let mut value = [0; 64];
        if let Some(content) = self.content {
            value[..32].copy_from_slice(content.as_bytes());
        }
        if let Some(by) = self.committed_by {
            value[32..].copy_from_slice(by.as_bytes());
        }
        value
    }

    fn from_value(value: &[u8; 64]) -> Self {
        let (content, by) = value.split_at(32);
        let content: [u8; 32] = content.try_into().expect("32 bytes");
        let by: [u8; 32] = by.try_into().expect("32 bytes");
        Self {
            content: (content != [0; 32]).then(|| BlobId::from_bytes(content)),
            committed_by: (by != [0; 32]).then(|| TransactionId::from_bytes(by)),
        }
    }
}

/// What vsh last saw of each of a workspace's files, by path, newest last:
/// kept in [`SEEN_CONTENTS_FILE`], MAC'd under the authority key (format in
/// `docs/store-format.md`, "Seen contents").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeenContents {
    index: KeyedIndex<64>,
}

impl SeenContents {
    /// The key of what `session` (`""`: any run) saw at `path`, or, with
    /// `content`, whether it ever saw that content there: BLAKE3 derived
    /// under its own context over the session's length and bytes, the
    /// path's canonical encoding and the content's digest if any.
    fn key(session: &str, path: &VPath, content: Option<&BlobId>) -> [u8; 32] {
        let mut hasher = blake3::Hasher::new_derive_key(KEY_DOMAIN);
        hasher.update(&(session.len() as u64).to_le_bytes());
        hasher.update(session.as_bytes());
        hasher.update(&path.to_canonical_bytes());
        match content {
            None => hasher.update(&[0]),
            Some(content) => hasher.update(&[1]).update(content.as_bytes()),
        };
        *hasher.finalize().as_bytes()
    }

    /// What vsh last saw at `path`, if it holds it.
    pub fn get(&self, path: &VPath) -> Option<Sighting> {
        self.get_for(None, path)
    }

    /// What `session` last saw at `path` (`None`: any run), if it holds it.
    pub fn get_for(&self, session: Option<&str>, path: &VPath) -> Option<Sighting> {
        self.index.get(&Self::key(session.unwrap_or(""), path, None)).map(Sighting::from_value)
    }

    /// Whether `session` ever saw `content` at `path` (read it, or wrote
    /// it), as far as the record reaches.
    pub fn knows(&self, session: &str, path: &VPath, content: &BlobId) -> bool {
        self.index.get(&Self::key(session, path, Some(content))).is_some()
    }

    /// Record that `session` wrote `content` at `path` (work it made, not
    /// yet on disk): content it saw, but no sighting of what is there.
    /// Whether anything changed.
    pub fn know(&mut self, session: &str, path: &VPath, content: &BlobId) -> bool {
        let value = Sighting { content: Some(*content), committed_by: None }.to_value();
        self.index.insert(Self::key(session, path, Some(content)), value, MAX_SEEN_ENTRIES)
    }

    /// Record `sighting` as the newest at `path`; the oldest go past
    /// [`MAX_SEEN_ENTRIES`]. Whether anything changed.
    pub fn insert(&mut self, path: &VPath, sighting: Sighting) -> bool {
        self.insert_for(None, path, sighting)
    }

    /// Record `sighting` as the newest at `path` for any run and, with a
    /// `session`, as that session's newest and as content it saw there.
    /// Whether anything changed.
    pub fn insert_for(&mut self, session: Option<&str>, path: &VPath, sighting: Sighting) -> bool {
        let value = sighting.to_value();
        let mut changed = self.index.insert(Self::key("", path, None), value, MAX_SEEN_ENTRIES);
        if let Some(session) = session.filter(|session| !session.is_empty()) {
            changed |= self.index.insert(Self::key(session, path, None), value, MAX_SEEN_ENTRIES);
            if let Some(content) = &sighting.content {
                changed |= self.index.insert(Self::key(session, path, Some(content)), value, MAX_SEEN_ENTRIES);
            }
        }
        changed
    }
}

index_file!(SeenContents, FORMAT, 64);

#[cfg(test)]
mod tests {
    use super::*;

    fn path(name: &str) -> VPath {
        VPath::parse(name).unwrap()
    }

    #[test]
    fn a_path_holds_its_newest_sighting_and_the_oldest_paths_go_first() {
        let mut seen = SeenContents::default();
        let read = Sighting { content: Some(BlobId::of(b"one")), committed_by: None };
        let committed =
            Sighting { content: Some(BlobId::of(b"two")), committed_by: Some(TransactionId::digest(b"tx")) };
        let absent = Sighting { content: None, committed_by: None };
        assert!(seen.insert(&path("a.py"), read));
        assert!(!seen.insert(&path("a.py"), read), "the same sighting again changes nothing");
        assert_eq!(seen.get(&path("a.py")), Some(read));
        assert!(seen.insert(&path("a.py"), committed));
        assert_eq!((seen.get(&path("a.py")), seen.len()), (Some(committed), 1));
        assert!(seen.insert(&path("b.py"), absent));
        assert_eq!(seen.get(&path("b.py")), Some(absent));
        assert_eq!(seen.get(&path("c.py")), None);
        for n in 0..MAX_SEEN_ENTRIES {
            seen.insert(&path(&format!("f{n}")), read);
        }
        assert_eq!(seen.len(), MAX_SEEN_ENTRIES);
        assert_eq!((seen.get(&path("a.py")), seen.get(&path("b.py"))), (None, None), "the oldest went first");
        assert_eq!(seen.get(&path(&format!("f{}", MAX_SEEN_ENTRIES - 1))), Some(read));
    }

    #[test]
    fn a_session_knows_every_content_it_saw_and_any_run_the_newest() {
        let mut seen = SeenContents::default();
        let (one, two) = (BlobId::of(b"one"), BlobId::of(b"two"));
        let read = |content| Sighting { content: Some(content), committed_by: None };
        seen.insert_for(Some("agent"), &path("a.py"), read(one));
        seen.insert_for(Some("agent"), &path("a.py"), read(two));
        assert!(seen.knows("agent", &path("a.py"), &one) && seen.knows("agent", &path("a.py"), &two));
        assert!(!seen.knows("other", &path("a.py"), &one), "another session saw nothing");
        assert!(!seen.knows("agent", &path("b.py"), &one), "nor at another path");
        // Another run's sighting is any run's newest, not the session's.
        let three = BlobId::of(b"three");
        seen.insert(&path("a.py"), read(three));
        assert_eq!(seen.get(&path("a.py")), Some(read(three)));
        assert_eq!(seen.get_for(Some("agent"), &path("a.py")), Some(read(two)));
        assert!(!seen.knows("agent", &path("a.py"), &three));
    }

    #[test]
    fn it_round_trips_under_its_mac_and_refuses_anything_else() {
        let key = AuthorityKey::from_bytes([9; 32]);
        let mut seen = SeenContents::default();
        seen.insert(&path("a"), Sighting { content: Some(BlobId::of(b"x")), committed_by: None });
        seen.insert(&path("b"), Sighting { content: None, committed_by: Some(TransactionId::digest(b"t")) });
        let bytes = seen.encode(&key);
        assert_eq!(&bytes[..8], b"VSHSEE01");
        assert_eq!(bytes.len(), 8 + 4 + 2 * 96 + 32);
        assert_eq!(SeenContents::decode(&bytes, &key).unwrap(), seen);
        let mut flipped = bytes.clone();
        flipped[20] ^= 1;
        // Another index's file under the same key: its MAC domain differs.
        let unread = crate::UnreadContents::default().encode(&key);
        for (bad, with) in [
            (flipped, key.clone()),
            (bytes.clone(), AuthorityKey::from_bytes([8; 32])),
            (bytes[..bytes.len() - 1].to_vec(), key.clone()),
            (unread, key.clone()),
        ] {
            assert!(matches!(SeenContents::decode(&bad, &with), Err(StoreError::CorruptSeenContents { .. })));
        }
    }
}
