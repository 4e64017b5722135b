//! Real commands in a candidate workspace.
//!
//! A candidate is the transaction's view of the workspace (the base plus
//! everything the transaction changed so far) as a real filesystem: a FUSE
//! filesystem ([`CandidateFs`]) whose every kernel request becomes one
//! [`FsRequest`] of the file-access protocol, answered by the host that
//! serves the transaction's image ([`Backend`]). The host authorizes,
//! charges and records each request exactly as it does a Monty or Bash
//! access, so what a real process looks at lands in the read set with the
//! same facets, a protected path is `ENOENT`/`EACCES` and denies the
//! transaction, and what it changes is in the image, hence in the canonical
//! diff. Nothing is copied: creating a candidate costs the same on any
//! workspace size.
//!
//! The filesystem is mounted only for the child: vsh-sandbox gives it a
//! private mount namespace and mounts the device there
//! ([`vsh_sandbox::FuseMount`]); [`serve`] answers the kernel from the parent.
//!
//! [`FsRequest`]: vsh_types::fsproto::FsRequest

mod backend;
mod fs;
mod serve;

pub use backend::Backend;
pub use fs::{CandidateFs, DEFAULT_MAX_FILE_BYTES, NODE_WRITE_COST, Owner};
pub use serve::{Serving, serve, serve_then};
