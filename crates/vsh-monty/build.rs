//! Computes the build identity the worker protocol's handshake compares.
//!
//! The identity is a BLAKE3 digest of this package's sources (every file under
//! `src/`, and `Cargo.toml`), its version, the enabled features, the profile,
//! the target and the compiler's version. The library and the
//! `vsh-monty-worker` binary of one build get the same value, so a parent only
//! accepts a worker built from the same sources with the same configuration.
//! It is exported to the crate as `VSH_MONTY_BUILD_ID` (64 hex digits).
// A build script reads the sources it fingerprints by path.
#![allow(clippy::disallowed_methods)]
#![forbid(unsafe_code)]

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let root = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    collect(&root.join("src"), &mut files);
    files.push(root.join("Cargo.toml"));
    files.sort();

    let mut hasher = blake3::Hasher::new_derive_key("vsh-monty build identity v1");
    for file in &files {
        let relative = file.strip_prefix(&root).unwrap_or(file);
        field(&mut hasher, relative.to_string_lossy().as_bytes());
        field(&mut hasher, &fs::read(file).expect("readable source file"));
    }
    for name in ["CARGO_PKG_VERSION", "PROFILE", "TARGET", "OPT_LEVEL", "DEBUG"] {
        field(&mut hasher, env::var(name).unwrap_or_default().as_bytes());
    }
    let mut features: Vec<String> =
        env::vars().map(|(key, _)| key).filter(|key| key.starts_with("CARGO_FEATURE_")).collect();
    features.sort();
    field(&mut hasher, features.join(",").as_bytes());
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let version = Command::new(rustc).arg("-V").output().map(|out| out.stdout).unwrap_or_default();
    field(&mut hasher, &version);

    println!("cargo:rustc-env=VSH_MONTY_BUILD_ID={}", hasher.finalize().to_hex());
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.toml");
}

/// Length-prefixed, so no two different field sequences hash alike.
fn field(hasher: &mut blake3::Hasher, bytes: &[u8]) {
    hasher.update(&(bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}

/// Every regular file beneath `dir`.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => collect(&path, out),
            Ok(kind) if kind.is_file() => out.push(path),
            _ => {}
        }
    }
}
