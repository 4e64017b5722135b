//! 32-byte identifiers and domain-separated BLAKE3 digests.
//!
//! Every derived digest is computed with BLAKE3's key-derivation mode, whose
//! context string is the digest's *domain* (for example `"vsh 2026 snapshot v1"`).
//! Two digests of different kinds therefore never collide even over equal bytes.
//! The one exception is [`BlobId`], the plain BLAKE3 hash of a blob's bytes, so
//! content addresses can be checked with any BLAKE3 tool.
//!
//! Identifiers print as 64 lower-case hex digits and parse case-insensitively.

use std::fmt;

use crate::canon::Canonical;

/// A streaming hasher bound to one domain.
#[derive(Clone)]
pub struct DomainHasher(blake3::Hasher);

impl DomainHasher {
    /// Start hashing within `domain`.
    pub fn new(domain: &str) -> Self {
        Self(blake3::Hasher::new_derive_key(domain))
    }

    /// Feed bytes.
    pub fn update(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.update(bytes);
        self
    }

    /// Feed a value's canonical encoding.
    pub fn update_canonical(&mut self, value: &impl Canonical) -> &mut Self {
        let bytes = value.to_canonical_bytes();
        self.0.update(&bytes);
        self
    }

    /// The 32-byte digest.
    pub fn finalize(&self) -> [u8; 32] {
        *self.0.finalize().as_bytes()
    }
}

impl fmt::Debug for DomainHasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DomainHasher")
    }
}

/// A hex string that is not a 32-byte identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected 64 hex digits for {kind}, got {input:?}")]
pub struct DigestParseError {
    /// Which identifier was being parsed.
    pub kind: &'static str,
    /// The rejected input (truncated to 80 characters).
    pub input: String,
}

fn parse_hex32(kind: &'static str, input: &str) -> Result<[u8; 32], DigestParseError> {
    let error = || DigestParseError { kind, input: input.chars().take(80).collect() };
    crate::hex::decode32(input.as_bytes()).ok_or_else(error)
}

fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8; 32]) -> fmt::Result {
    f.write_str(&crate::hex::encode(bytes))
}

macro_rules! digest_type {
    ($(#[$meta:meta])* $name:ident, $domain:expr) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name([u8; 32]);

        impl $name {
            /// The hashing domain of this identifier.
            pub const DOMAIN: &'static str = $domain;

            /// Wrap raw bytes (no hashing).
            pub const fn from_bytes(bytes: [u8; 32]) -> Self {
                Self(bytes)
            }

            /// The raw bytes.
            pub const fn as_bytes(&self) -> &[u8; 32] {
                &self.0
            }

            /// Parse 64 hex digits (either case).
            pub fn parse_hex(input: &str) -> Result<Self, DigestParseError> {
                parse_hex32(stringify!($name), input).map(Self)
            }

            /// The lower-case hex form.
            pub fn to_hex(&self) -> String {
                self.to_string()
            }

            /// A short prefix for display (12 hex digits).
            pub fn short(&self) -> String {
                let mut text = self.to_string();
                text.truncate(12);
                text
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write_hex(f, &self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}(", stringify!($name))?;
                write_hex(f, &self.0)?;
                f.write_str(")")
            }
        }

        impl std::str::FromStr for $name {
            type Err = DigestParseError;
            fn from_str(input: &str) -> Result<Self, Self::Err> {
                Self::parse_hex(input)
            }
        }

        impl Canonical for $name {
            fn encode_canonical(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.0);
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                if serializer.is_human_readable() {
                    serializer.serialize_str(&self.to_string())
                } else {
                    serializer.serialize_bytes(&self.0)
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Visit;
                impl serde::de::Visitor<'_> for Visit {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("32 bytes or 64 hex digits")
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        $name::parse_hex(v).map_err(E::custom)
                    }
                    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<$name, E> {
                        <[u8; 32]>::try_from(v).map($name).map_err(|_| E::invalid_length(v.len(), &self))
                    }
                }
                if deserializer.is_human_readable() {
                    deserializer.deserialize_str(Visit)
                } else {
                    deserializer.deserialize_bytes(Visit)
                }
            }
        }
    };
}

macro_rules! derived_digest {
    ($(#[$meta:meta])* $name:ident, $domain:expr) => {
        digest_type!($(#[$meta])* $name, $domain);

        impl $name {
            /// Digest `payload` within this identifier's domain.
            pub fn digest(payload: &[u8]) -> Self {
                let mut hasher = DomainHasher::new(Self::DOMAIN);
                hasher.update(payload);
                Self(hasher.finalize())
            }

            /// A streaming hasher within this identifier's domain.
            pub fn hasher() -> DomainHasher {
                DomainHasher::new(Self::DOMAIN)
            }

            /// Finish a hasher started with [`Self::hasher`].
            pub fn from_hasher(hasher: &DomainHasher) -> Self {
                Self(hasher.finalize())
            }
        }
    };
}

digest_type!(
    /// The content address of a blob: the plain BLAKE3 hash of its bytes.
    BlobId,
    "(plain blake3, no domain)"
);

impl BlobId {
    /// Hash `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(*blake3::hash(bytes).as_bytes())
    }

    /// A streaming hasher whose result is a [`BlobId`] (see [`BlobId::from_plain_hasher`]).
    pub fn plain_hasher() -> blake3::Hasher {
        blake3::Hasher::new()
    }

    /// Finish a plain hasher.
    pub fn from_plain_hasher(hasher: &blake3::Hasher) -> Self {
        Self(*hasher.finalize().as_bytes())
    }
}

derived_digest!(
    /// Identifies the observed base of one run: every base observation the run made.
    SnapshotId,
    "vsh 2026 snapshot v1"
);
derived_digest!(
    /// Identifies a transaction: binds program, snapshot, read set, write set, diff,
    /// policy, runtime configuration, intent and execution evidence.
    TransactionId,
    "vsh 2026 transaction v1"
);
derived_digest!(
    /// Digest of a canonical diff.
    DiffDigest,
    "vsh 2026 diff v1"
);
derived_digest!(
    /// Digest of a program's source and language.
    ProgramDigest,
    "vsh 2026 program v1"
);
derived_digest!(
    /// Digest of a run's read set (its dependencies on the base).
    ReadSetDigest,
    "vsh 2026 read-set v1"
);
derived_digest!(
    /// Digest of a run's write set (the preconditions of every mutated path).
    WriteSetDigest,
    "vsh 2026 write-set v1"
);
derived_digest!(
    /// Digest of the active policy.
    PolicyDigest,
    "vsh 2026 policy v1"
);
derived_digest!(
    /// Digest of the security-relevant runtime configuration.
    RuntimeConfigDigest,
    "vsh 2026 runtime-config v1"
);
derived_digest!(
    /// Digest of execution evidence (output, statistics, decision).
    ExecutionEvidenceDigest,
    "vsh 2026 execution-evidence v1"
);
derived_digest!(
    /// Digest of a caller-supplied intent text.
    IntentDigest,
    "vsh 2026 intent v1"
);
derived_digest!(
    /// An opaque principal label's digest. vsh binds it; authenticating it is the host's job.
    PrincipalId,
    "vsh 2026 principal v1"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_case_insensitive_parse() {
        let id = SnapshotId::digest(b"x");
        let hex = id.to_hex();
        assert_eq!(hex.len(), 64);
        assert_eq!(SnapshotId::parse_hex(&hex.to_uppercase()).unwrap(), id);
        assert!(SnapshotId::parse_hex(&hex[..63]).is_err());
        assert!(SnapshotId::parse_hex(&format!("{}g", &hex[..63])).is_err());
    }

    #[test]
    fn domains_separate_equal_payloads() {
        let a = SnapshotId::digest(b"payload");
        let b = DiffDigest::digest(b"payload");
        assert_ne!(a.as_bytes(), b.as_bytes());
        assert_eq!(BlobId::of(b"payload").as_bytes(), blake3::hash(b"payload").as_bytes());
    }

    #[test]
    fn serde_forms() {
        let id = BlobId::of(b"abc");
        let bytes = postcard::to_allocvec(&id).unwrap();
        assert_eq!(postcard::from_bytes::<BlobId>(&bytes).unwrap(), id);
    }
}
