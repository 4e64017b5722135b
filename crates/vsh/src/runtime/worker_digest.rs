//! The worker binary's digest, kept between processes in the data directory.
//!
//! A worker executor pins its binary by BLAKE3 when it is created, and every
//! later spawn refuses a binary with another digest. The `vsh` binary is its
//! own worker and weighs tens to hundreds of megabytes, so hashing it was most
//! of a short command's time (`vsh run` of a one-line program: 32 ms with a
//! 152 MB binary, 10 ms with the same code stripped to 33 MB). A runtime
//! therefore records the digest with the binary's `stat` identity in the
//! settings file `worker-digest` with a MAC under the authority key, and the next
//! process takes it instead of hashing while the identity is unchanged: the
//! trust the pool already places in that identity between spawns
//! (`vsh_monty::WorkerConfig::with_known_digest`).
//!
//! The digest is evidence (it is part of the executor's configuration digest,
//! bound into every transaction), so the file is authenticated: without the
//! authority key nobody can make a record that is taken. A file that does not
//! decode or verify, names another path or another identity, is ignored and
//! the binary hashed as before; with the public, all-zero key nothing is read
//! or written. The layout is in `docs/store-format.md` (`worker-digest`).

use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::PathBuf;

use vsh_monty::{BinaryDigest, BinaryStamp};
use vsh_store::DataDir;
use vsh_types::AuthorityKey;
use vsh_types::canon::{self, Reader};

/// The settings file's name in the data directory.
pub(crate) const WORKER_DIGEST_FILE: &str = "worker-digest";

/// The file's first bytes: its format and version.
const MAGIC: &[u8; 8] = b"VSHWDG01";

/// The MAC's context string.
const DOMAIN: &str = "vsh 2026 worker digest v1";

/// The longest path recorded (a Linux path is at most 4,096 bytes).
const MAX_PATH_BYTES: u64 = 4096;

/// The largest file read: the header, the longest path, the fixed fields and the MAC.
const MAX_FILE_BYTES: u64 = 8 + 8 + MAX_PATH_BYTES + 7 * 8 + 32 + 32;

/// The digest recorded in `data`, if one is there and verifies under `key`.
pub(crate) fn load(data: &DataDir, key: &AuthorityKey) -> Option<BinaryDigest> {
    if key.is_unauthenticated() {
        return None;
    }
    let bytes = data.read_setting(WORKER_DIGEST_FILE, MAX_FILE_BYTES).ok()??;
    decode(&bytes, key)
}

/// Record `binary` in `data` unless `known` already says the same. A failure
/// to write is ignored: the record only spares a later process the hash.
pub(crate) fn save(data: &DataDir, key: &AuthorityKey, known: Option<&BinaryDigest>, binary: &BinaryDigest) {
    if key.is_unauthenticated() || known == Some(binary) {
        return;
    }
    let _ = data.write_setting(WORKER_DIGEST_FILE, &encode(binary, key));
}

fn encode(binary: &BinaryDigest, key: &AuthorityKey) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    canon::put_bytes(&mut out, binary.path.as_os_str().as_bytes());
    let stamp = &binary.stamp;
    for value in [stamp.dev, stamp.ino, stamp.size] {
        canon::put_u64(&mut out, value);
    }
    for value in [stamp.mtime.0, stamp.mtime.1, stamp.ctime.0, stamp.ctime.1] {
        out.extend_from_slice(&value.to_le_bytes());
    }
    out.extend_from_slice(&binary.digest);
    let tag = key.mac(DOMAIN).update(&out).finalize();
    out.extend_from_slice(&tag);
    out
}

fn decode(bytes: &[u8], key: &AuthorityKey) -> Option<BinaryDigest> {
    let body = bytes.len().checked_sub(32)?;
    let (signed, tag) = bytes.split_at(body);
    if !key.mac(DOMAIN).update(signed).verify(tag) {
        return None;
    }
    let mut reader = Reader::new(signed);
    if reader.array::<8>().ok()? != *MAGIC {
        return None;
    }
    let path = PathBuf::from(std::ffi::OsString::from_vec(reader.bytes(MAX_PATH_BYTES).ok()?.to_vec()));
    let mut field = || reader.u64().ok();
    let (dev, ino, size) = (field()?, field()?, field()?);
    let mut time = || reader.array::<8>().ok().map(i64::from_le_bytes);
    let (mtime, ctime) = ((time()?, time()?), (time()?, time()?));
    let digest = reader.array::<32>().ok()?;
    reader.finish().ok()?;
    Some(BinaryDigest { path, stamp: BinaryStamp { dev, ino, size, mtime, ctime }, digest })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> BinaryDigest {
        BinaryDigest {
            path: PathBuf::from("/usr/local/bin/vsh"),
            stamp: BinaryStamp { dev: 2049, ino: 77, size: 152_170_184, mtime: (1_700_000_000, 5), ctime: (-3, 999) },
            digest: [7; 32],
        }
    }

    #[test]
    fn a_record_reads_back_only_under_its_key_and_whole() {
        let key = AuthorityKey::from_bytes([1; 32]);
        let bytes = encode(&sample(), &key);
        assert_eq!(decode(&bytes, &key), Some(sample()));
        assert_eq!(decode(&bytes, &AuthorityKey::from_bytes([2; 32])), None, "another key");
        for at in [0, 8, 20, bytes.len() - 40, bytes.len() - 1] {
            let mut flipped = bytes.clone();
            flipped[at] ^= 1;
            assert_eq!(decode(&flipped, &key), None, "a bit flipped at {at}");
        }
        for len in [0, 31, 32, 40, bytes.len() - 1] {
            assert_eq!(decode(&bytes[..len], &key), None, "cut to {len} bytes");
        }
    }

    #[test]
    fn a_record_with_trailing_bytes_under_a_valid_mac_is_refused() {
        let key = AuthorityKey::from_bytes([1; 32]);
        let mut body = encode(&sample(), &key);
        body.truncate(body.len() - 32);
        body.push(0);
        let tag = key.mac(DOMAIN).update(&body).finalize();
        body.extend_from_slice(&tag);
        assert_eq!(decode(&body, &key), None);
    }
}
