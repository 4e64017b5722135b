//! [`AuthorityKey`]: the secret that authenticates every durable record that
//! lets work commit, and [`Mac`], the keyed checksum computed with it.
//!
//! Whoever can write a workspace (a guest of an outer workspace, a tool with
//! file access, another user) must not be able to approve its work. So the
//! records that decide what may commit (the transaction log's frames, the
//! commit engine's plan, journal and markers) carry a keyed BLAKE3 MAC instead
//! of a public checksum: without the key, a frame cannot be forged, and a
//! frame copied from elsewhere fails its binding (offset, generation,
//! transaction). Loading the key from a file kept outside every workspace is
//! the store's job (`vsh_store::AuthorityKeyFile`); this type is only the value.
//!
//! Each use derives its own subkey: `blake3::derive_key(domain, key)`, so a MAC
//! made for one record kind never verifies as another. The
//! [`AuthorityKey::unauthenticated`] key is public (all zero bytes): it gives
//! the same integrity as a plain checksum and no authenticity, for tests and
//! for callers that keep no authority.

use std::fmt;

/// A 32-byte secret key (see the module docs).
#[derive(Clone, PartialEq, Eq)]
pub struct AuthorityKey {
    key: [u8; 32],
}

impl AuthorityKey {
    /// The key made of `bytes` (from a key file, or supplied by the embedding
    /// application).
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self { key: bytes }
    }

    /// The public, all-zero key: integrity without authenticity.
    pub const fn unauthenticated() -> Self {
        Self { key: [0; 32] }
    }

    /// Whether this is the public key of [`AuthorityKey::unauthenticated`].
    pub fn is_unauthenticated(&self) -> bool {
        self.key == [0; 32]
    }

    /// A public identifier of the key (a one-way digest of it), recorded next
    /// to authenticated data so that "written with another key" is told apart
    /// from corruption.
    pub fn id(&self) -> [u8; 32] {
        blake3::derive_key("vsh 2026 authority key id v1", &self.key)
    }

    /// A MAC for records of `domain` (a fixed context string naming the record
    /// kind and its version).
    pub fn mac(&self, domain: &str) -> Mac {
        self.mac_key(domain).mac()
    }

    /// The subkey for `domain`, derived once, for callers that compute many
    /// MACs of one kind (the transaction log's frames).
    pub fn mac_key(&self, domain: &str) -> MacKey {
        MacKey(blake3::derive_key(domain, &self.key))
    }

    /// The raw bytes, for writing a key file.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.key
    }
}

impl fmt::Debug for AuthorityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the secret: its id is enough to tell keys apart.
        let id = self.id();
        write!(f, "AuthorityKey(id {}..)", crate::hex::encode(&id[..4]))
    }
}

/// A derived subkey for one record kind (see [`AuthorityKey::mac_key`]).
#[derive(Clone, PartialEq, Eq)]
pub struct MacKey([u8; 32]);

impl MacKey {
    /// A fresh MAC under this subkey.
    pub fn mac(&self) -> Mac {
        Mac(blake3::Hasher::new_keyed(&self.0))
    }
}

impl fmt::Debug for MacKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MacKey")
    }
}

/// An incremental keyed BLAKE3 MAC (see [`AuthorityKey::mac`]).
#[derive(Clone)]
pub struct Mac(blake3::Hasher);

impl Mac {
    /// Feed bytes.
    pub fn update(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.update(bytes);
        self
    }

    /// The 32-byte tag.
    pub fn finalize(&self) -> [u8; 32] {
        *self.0.finalize().as_bytes()
    }

    /// Whether `tag` is the tag of what was fed, compared in constant time.
    pub fn verify(&self, tag: &[u8]) -> bool {
        let expected = self.finalize();
        tag.len() == expected.len() && expected.iter().zip(tag).fold(0_u8, |diff, (a, b)| diff | (a ^ b)) == 0
    }

    /// Whether the first `tag.len()` bytes (at least 16) of the tag equal
    /// `tag`, compared in constant time: for records that store a truncated tag.
    pub fn verify_prefix(&self, tag: &[u8]) -> bool {
        let expected = self.finalize();
        tag.len() >= 16
            && tag.len() <= expected.len()
            && expected.iter().zip(tag).fold(0_u8, |diff, (a, b)| diff | (a ^ b)) == 0
    }
}

impl fmt::Debug for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Mac")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_depend_on_key_domain_and_bytes() {
        let key = AuthorityKey::from_bytes([7; 32]);
        let other = AuthorityKey::from_bytes([8; 32]);
        let tag = key.mac("d1").update(b"bytes").finalize();
        assert!(key.mac("d1").update(b"bytes").verify(&tag));
        assert!(!key.mac("d2").update(b"bytes").verify(&tag));
        assert!(!other.mac("d1").update(b"bytes").verify(&tag));
        assert!(!key.mac("d1").update(b"bytez").verify(&tag));
        assert!(!key.mac("d1").update(b"bytes").verify(&tag[..31]));
        assert!(key.mac("d1").update(b"bytes").verify_prefix(&tag[..16]));
        assert!(!key.mac("d1").update(b"bytes").verify_prefix(&tag[..15]));
        // The public key is still a checksum: it is deterministic and domain-separated.
        let public = AuthorityKey::unauthenticated();
        assert!(public.is_unauthenticated() && !key.is_unauthenticated());
        assert_eq!(public.mac("d1").update(b"x").finalize(), public.mac("d1").update(b"x").finalize());
        assert_ne!(key.id(), other.id());
        assert!(!format!("{key:?}").contains("0707"));
    }
}
