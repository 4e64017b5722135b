//! [`AuthorityKeyFile`]: where the [`AuthorityKey`] that authenticates a
//! workspace's transaction log and commit records lives on disk.
//!
//! The key is the line between "can write the workspace" and "can approve its
//! work": it must be readable by the operator's vsh and by nothing a guest or
//! a workspace file can reach. So the default key is a per-user file outside
//! every workspace:
//!
//! 1. `$VSH_AUTHORITY_KEY`, if set (a path);
//! 2. else `$XDG_CONFIG_HOME/vsh/authority.key`;
//! 3. else `~/.config/vsh/authority.key` (`$HOME`, or this user's home in
//!    the password database).
//!
//! It is created on first use with 32 random bytes from the kernel, mode
//! `0o600`, in directories created `0o700`. Loading refuses (with
//! [`StoreError::AuthorityKey`]) a key file that is not a regular file (a
//! symlink included), is owned by another user, is readable or writable by
//! group or others, sits in a directory others may write, or does not hold
//! exactly one key. The runtime also refuses a key file inside the workspace
//! it opens. An application that keeps its own secret passes it instead
//! (`RuntimeConfig::with_authority_key`).
//!
//! File format: the 21 bytes `vsh-authority-key-v1 `, 64 lower-case hex
//! digits, a newline (86 bytes).

use std::path::{Path, PathBuf};

use vsh_host::{CapDir, HostError, HostKind, WritableDir};
use vsh_types::{AuthorityKey, VPath};

use crate::error::StoreError;

/// The environment variable that names the key file.
pub const AUTHORITY_KEY_ENV: &str = "VSH_AUTHORITY_KEY";

const PREFIX: &[u8] = b"vsh-authority-key-v1 ";
const FILE_BYTES: usize = PREFIX.len() + 64 + 1;

/// A key file at a host path (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorityKeyFile {
    path: PathBuf,
}

impl AuthorityKeyFile {
    /// The key file at `path`.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The default key file of this user (see the module docs), or
    /// [`StoreError::AuthorityKey`] if neither variable names a place.
    pub fn default_location() -> Result<Self, StoreError> {
        if let Some(path) = std::env::var_os(AUTHORITY_KEY_ENV).filter(|path| !path.is_empty()) {
            return Ok(Self::at(path));
        }
        // `home_dir` is `$HOME`, or the password database's entry for this user.
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|path| Path::new(path).is_absolute())
            .map(PathBuf::from)
            .or_else(|| std::env::home_dir().filter(|home| home.is_absolute()).map(|home| home.join(".config")));
        match config {
            Some(config) => Ok(Self::at(config.join("vsh").join("authority.key"))),
            None => Err(StoreError::AuthorityKey {
                path: PathBuf::new(),
                reason: "neither $VSH_AUTHORITY_KEY, $XDG_CONFIG_HOME nor a home directory names a place for the key",
            }),
        }
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Load the key, creating the file (and its directories) if missing.
    ///
    /// # Ambient authority
    ///
    /// This reaches the host filesystem by path.
    pub fn load_or_create(&self) -> Result<AuthorityKey, StoreError> {
        let (dir, name) = self.open_dir()?;
        match self.read(&dir, &name) {
            Err(StoreError::AuthorityKey { reason: MISSING, .. }) => {}
            other => return other,
        }
        // 32 bytes of key, and 4 more that name the temporary file (the name
        // must tell nothing about the key).
        let mut random = [0_u8; 36];
        getrandom::fill(&mut random).map_err(|_| self.error("the kernel gave no random bytes for a new key"))?;
        let (key, nonce) = random.split_at(32);
        let mut text = PREFIX.to_vec();
        text.extend_from_slice(vsh_types::hex::encode(key).as_bytes());
        text.push(b'\n');
        // Written whole under a private name, then moved to the key's name
        // without replacing anything: a reader sees no key or a whole one, and
        // of two racing creators the first to move wins (theirs is the key).
        let temp = VPath::from_component(&format!(
            ".{}.{}.{:08x}.tmp",
            name.as_str(),
            std::process::id(),
            u32::from_le_bytes([nonce[0], nonce[1], nonce[2], nonce[3]])
        ))
        .map_err(|_| self.error("the key file's name is too long"))?;
        dir.create_file_exclusive(&temp, &text, 0o600).map_err(|source| self.host(source))?;
        let moved = dir.rename_noreplace(&temp, &name);
        let _ = dir.remove_file(&temp);
        match moved {
            Ok(()) | Err(HostError::AlreadyExists { .. }) => {}
            Err(source) => return Err(self.host(source)),
        }
        dir.sync_dir(&VPath::root()).map_err(|source| self.host(source))?;
        self.read(&dir, &name)
    }

    /// Load the key; a missing file is an error.
    pub fn load(&self) -> Result<AuthorityKey, StoreError> {
        let (dir, name) = self.open_dir()?;
        self.read(&dir, &name)
    }

    /// The directory holding the key, opened without following symlinks
    /// (created `0o700` if missing), as a handle; and the file's name.
    pub fn directory(&self) -> Result<CapDir, StoreError> {
        let (dir, _) = self.open_dir()?;
        dir.open_subdir(&VPath::root()).map_err(|source| self.host(source))
    }

    /// The nearest directory on the way to the key's that exists now, opened
    /// without creating anything: where the key would be made, for a caller
    /// that must refuse a place (a workspace) before anything is created there.
    /// Finding it asks the host by path (the key's location is a host path),
    /// then opens it as a handle.
    #[allow(clippy::disallowed_methods)]
    pub fn nearest_existing_directory(&self) -> Result<CapDir, StoreError> {
        let parent = self.path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let existing = parent
            .ancestors()
            .find(|ancestor| !ancestor.as_os_str().is_empty() && std::fs::metadata(ancestor).is_ok_and(|m| m.is_dir()))
            .unwrap_or(Path::new("."));
        CapDir::open(existing).map_err(|source| self.host(source))
    }

    fn open_dir(&self) -> Result<(WritableDir, VPath), StoreError> {
        let name = self
            .path
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| VPath::from_component(name).ok())
            .ok_or_else(|| self.error("the key file's name is not a valid file name"))?;
        let parent = self.path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let dir = WritableDir::open_or_create_trusted(parent).map_err(|source| self.host(source))?;
        let stat = dir.lstat(&VPath::root()).map_err(|source| self.host(source))?.ok_or_else(|| self.error(MISSING))?;
        if stat.mode & 0o022 != 0 && stat.mode & 0o1000 == 0 {
            return Err(self.error("the key's directory is writable by group or others"));
        }
        Ok((dir, name))
    }

    fn read(&self, dir: &CapDir, name: &VPath) -> Result<AuthorityKey, StoreError> {
        let content = match dir.read_file(name, FILE_BYTES as u64) {
            Ok(content) => content,
            Err(HostError::NotFound { .. }) => return Err(self.error(MISSING)),
            Err(HostError::NotAFile { .. }) => return Err(self.error("the key file is not a regular file")),
            Err(HostError::TooLarge { .. }) => return Err(self.error("the key file holds more than one key")),
            Err(source) => return Err(self.host(source)),
        };
        let stat = content.stat;
        if stat.kind != HostKind::File {
            return Err(self.error("the key file is not a regular file"));
        }
        if stat.uid != rustix_euid() {
            return Err(self.error("the key file belongs to another user"));
        }
        if stat.mode & 0o077 != 0 {
            return Err(self.error("the key file is readable or writable by group or others (it must be 0600)"));
        }
        let bytes = content.bytes;
        let hex = bytes
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.strip_suffix(b"\n"))
            .filter(|hex| hex.len() == 64)
            .ok_or_else(|| self.error("the key file is not a vsh authority key"))?;
        // The file is written in lower case; anything else is not one.
        let key = Some(hex)
            .filter(|hex| vsh_types::hex::is_lower(hex))
            .and_then(vsh_types::hex::decode32)
            .ok_or_else(|| self.error("the key file is not a vsh authority key"))?;
        Ok(AuthorityKey::from_bytes(key))
    }

    fn error(&self, reason: &'static str) -> StoreError {
        StoreError::AuthorityKey { path: self.path.clone(), reason }
    }

    fn host(&self, source: HostError) -> StoreError {
        StoreError::AuthorityKeyIo { path: self.path.clone(), source }
    }
}

const MISSING: &str = "the key file does not exist";

fn rustix_euid() -> u32 {
    vsh_host::effective_uid()
}
