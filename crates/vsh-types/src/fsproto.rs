//! The file-access protocol between a program that runs outside the host's
//! own code and the host that serves its image: a Bash script's builtins
//! (vsh-bash) and a real process's kernel requests (vsh-candidate) become
//! these requests, and the host answers each after authorizing, charging
//! and recording it. Paths are absolute and normalized (`/workspace/...`;
//! anything else is outside the workspace, and the host refuses it).

use serde::{Deserialize, Serialize};

/// One file access.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FsRequest {
    /// A file's bytes (following a final symlink).
    Read {
        /// The file.
        path: String,
    },
    /// A file's bytes, to change them (following a final symlink): what a
    /// candidate's server loads before a write into the middle of a file
    /// or a truncation to a non-zero size. Served as [`FsRequest::Read`]
    /// is, but the process has not read them: a file only changed this
    /// way was not read by the run (the image does not count it shown).
    Load {
        /// The file.
        path: String,
    },
    /// Replace a file's bytes, creating it if missing.
    Write {
        /// The file.
        path: String,
        /// Its new bytes.
        data: Vec<u8>,
    },
    /// Extend a file, creating it if missing.
    Append {
        /// The file.
        path: String,
        /// The bytes to add.
        data: Vec<u8>,
    },
    /// Make a directory (`recursive`: with its missing ancestors, and no error if it exists).
    Mkdir {
        /// The directory.
        path: String,
        /// `mkdir -p`.
        recursive: bool,
    },
    /// Remove a file, a symlink, an empty directory, or (`recursive`) a tree.
    Remove {
        /// The path.
        path: String,
        /// A whole tree.
        recursive: bool,
    },
    /// What is at a path (`follow`: through a final symlink).
    Stat {
        /// The path.
        path: String,
        /// Follow a final symlink.
        follow: bool,
    },
    /// A directory's names and kinds (`metadata`: with every entry's size,
    /// mode and time, which the run then depends on).
    ReadDir {
        /// The directory.
        path: String,
        /// Whether the command asked for more than names and kinds.
        metadata: bool,
    },
    /// Whether anything is at a path (and nothing more).
    Exists {
        /// The path.
        path: String,
    },
    /// Move a node.
    Rename {
        /// From.
        from: String,
        /// To.
        to: String,
    },
    /// Copy a file over another or to a new path.
    Copy {
        /// From.
        from: String,
        /// To.
        to: String,
    },
    /// A symlink's target.
    ReadLink {
        /// The link.
        path: String,
    },
    /// A real process's buffered file written back whole (vsh-candidate):
    /// as [`FsRequest::Write`], but charged `written` bytes, the bytes the
    /// process wrote to it since its last write-back, not the file's size
    /// each time it is written back.
    WriteBack {
        /// The file.
        path: String,
        /// Its bytes now.
        data: Vec<u8>,
        /// The bytes the process wrote (or a truncation added or cut)
        /// since the last write-back.
        written: u64,
    },
    /// Set permission bits.
    Chmod {
        /// The path.
        path: String,
        /// The bits (0o7777 at most; the image keeps 0o777).
        mode: u32,
    },
    /// Make a symbolic link at `path` pointing at `target` (never followed
    /// by the host; whether it may be committed is the policy's decision).
    Symlink {
        /// The new link.
        path: String,
        /// What it points at, as given.
        target: String,
    },
    /// A real process wrote `written` more bytes to a file whose content the
    /// candidate still holds (vsh-candidate): charged to the write budget
    /// as a write of the file would be, and nothing written. The content
    /// follows in one [`FsRequest::WriteBack`] (charged what was written
    /// after this), so a large file is not copied to the host again each
    /// time its bytes are charged.
    Charge {
        /// The file.
        path: String,
        /// The bytes written since the last charge or write-back.
        written: u64,
    },
    /// Up to `length` bytes of a file from `offset` (following a final
    /// symlink), recorded as a read of the whole file: a real process reading
    /// a file larger than the host holds whole (vsh-candidate).
    ReadRange {
        /// The file.
        path: String,
        /// Where the bytes start.
        offset: u64,
        /// The most bytes wanted.
        length: u32,
    },
}

impl FsRequest {
    /// The name of the request's kind, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Read { .. } | Self::Load { .. } | Self::ReadRange { .. } => "read",
            Self::Write { .. } | Self::WriteBack { .. } | Self::Charge { .. } => "write",
            Self::Append { .. } => "append",
            Self::Mkdir { .. } => "mkdir",
            Self::Remove { .. } => "remove",
            Self::Stat { .. } => "stat",
            Self::ReadDir { .. } => "read_dir",
            Self::Exists { .. } => "exists",
            Self::Rename { .. } => "rename",
            Self::Copy { .. } => "copy",
            Self::ReadLink { .. } => "read_link",
            Self::Chmod { .. } => "chmod",
            Self::Symlink { .. } => "symlink",
        }
    }
}

/// A node's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeType {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
}

/// What a script learns of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// Its kind.
    pub kind: NodeType,
    /// Bytes (0 for directories).
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// Modification time, nanoseconds since the Unix epoch (0 when unknown).
    pub modified_ns: i64,
}

/// An answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FsReply {
    /// Done, nothing to return.
    Done,
    /// Bytes read.
    Bytes(Vec<u8>),
    /// What is at the path.
    Meta(Meta),
    /// A directory's visible entries: name, and what the listing may tell
    /// (its kind only, unless the request asked for metadata).
    Entries(Vec<(String, Meta)>),
    /// Whether something is there.
    Exists(bool),
    /// A symlink's target.
    Target(String),
    /// The access failed with this errno (`EACCES` for a refusal).
    Failed(i32),
}
