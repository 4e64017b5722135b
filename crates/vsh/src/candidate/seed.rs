//! Exporting a candidate's work and bringing it back: [`SeedFile`],
//! [`CandidateWorkspace::export_accepted`],
//! [`CandidateWorkspace::restore_exported`] and
//! [`CandidateWorkspace::restore_seeded`].

use std::sync::Arc;

use vsh_types::{NodeKind, NodeState, VPath};
use vsh_vfs::VirtualFs;

use super::{CandidateWorkspace, promotable, session_step};
use crate::VshError;
use crate::evidence::EvidenceOutput;
use crate::receipt::StepKind;

/// The most files one restore writes.
pub(crate) const MAX_SEED_FILES: usize = 100_000;

/// What a path holds in an exported candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeedNode {
    /// A regular file: its bytes and permission bits.
    File {
        /// The content.
        bytes: Vec<u8>,
        /// The permission bits.
        mode: u32,
    },
    /// A directory with its permission bits.
    Directory {
        /// The permission bits.
        mode: u32,
    },
    /// A symbolic link (data: never followed).
    Symlink {
        /// The target.
        target: Vec<u8>,
    },
}

/// One path of an exported candidate: what it holds (`None`: removed) and
/// what the workspace held there when the candidate began (`None`: nothing),
/// so a resumed candidate still notices the workspace changing meanwhile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedFile {
    /// The path.
    pub path: VPath,
    /// What the candidate holds there.
    pub node: Option<SeedNode>,
    /// What the workspace held there.
    pub before: Option<NodeState>,
}

impl CandidateWorkspace {
    /// The candidate's own work as files: every path promotion would change,
    /// with what it holds now (`None` when removed) and what the workspace
    /// held, in path order. For durable checkpoints of a long task: give
    /// them to [`CandidateWorkspace::restore_exported`] of a later
    /// candidate.
    ///
    /// # Errors
    ///
    /// The image's error, if the diff or a content cannot be read.
    pub fn export_accepted(&self) -> Result<Vec<SeedFile>, VshError> {
        let mut state = self.lock();
        let state = &mut *state;
        let diff = promotable(&state.vfs.canonical_diff()?, &state.touched, &state.seeded)?;
        let mut files = Vec::with_capacity(diff.len());
        for entry in diff.entries() {
            let node = match entry.after {
                None => None,
                Some(after) => Some(match after.kind {
                    NodeKind::Directory => SeedNode::Directory { mode: after.mode },
                    NodeKind::File => SeedNode::File { bytes: content(&mut state.vfs, &entry.path)?, mode: after.mode },
                    NodeKind::Symlink => SeedNode::Symlink { target: content(&mut state.vfs, &entry.path)? },
                }),
            };
            files.push(SeedFile { path: entry.path.clone(), node, before: entry.before });
        }
        Ok(files)
    }

    /// Bring exported work back (a resumed task): each file is written into
    /// the candidate and becomes its own work again (promotable), as a step
    /// of the transcript. Each file's `before` must still be what the
    /// workspace holds: the workspace changing while the task was stopped
    /// is noticed here, never overwritten at promotion.
    ///
    /// # Errors
    ///
    /// [`VshError::SeedChanged`] naming every path whose workspace state is
    /// no longer its `before` (nothing is written then);
    /// [`VshError::InvalidSeed`] for a file the image refuses (nothing of
    /// this restore is kept); [`VshError::CandidatePromoted`].
    pub fn restore_exported(&self, files: &[SeedFile]) -> Result<(), VshError> {
        self.restore_files(files, true)
    }

    /// Inherit files (what a predecessor candidate made): they are written
    /// into the candidate, so its steps see them, but they are not its own
    /// work: promotion writes one only if a step changed it. Their `before`
    /// is checked as by [`CandidateWorkspace::restore_exported`].
    ///
    /// # Errors
    ///
    /// As [`CandidateWorkspace::restore_exported`].
    pub fn restore_seeded(&self, files: &[SeedFile]) -> Result<(), VshError> {
        self.restore_files(files, false)
    }

    fn restore_files(&self, files: &[SeedFile], own: bool) -> Result<(), VshError> {
        if files.len() > MAX_SEED_FILES {
            return Err(VshError::InvalidSeed {
                path: VPath::root(),
                reason: format!("{} files, more than {MAX_SEED_FILES}", files.len()),
            });
        }
        let mut state = self.open()?;
        let state = &mut *state;
        let mut changed = Vec::new();
        for file in files {
            if file.path.is_root() {
                return Err(VshError::InvalidSeed { path: file.path.clone(), reason: "the root".to_owned() });
            }
            if !state.vfs.base_holds(&file.path, file.before.as_ref())? {
                changed.push(file.path.clone());
            }
        }
        if !changed.is_empty() {
            return Err(VshError::SeedChanged { paths: changed });
        }
        let before = state.vfs.checkpoint();
        let policy = self.runtime.runs().policy().calls();
        // Parents before what they hold.
        let mut ordered: Vec<&SeedFile> = files.iter().collect();
        ordered.sort_by(|a, b| a.path.cmp(&b.path));
        for file in ordered {
            if let Err(reason) = apply(&mut state.vfs, policy, file) {
                state.vfs.restore(&before);
                return Err(VshError::InvalidSeed { path: file.path.clone(), reason });
            }
        }
        state.check_image(&before)?;
        for file in files {
            if own {
                state.touched.insert(file.path.clone());
            } else if !super::covered(&state.touched, &file.path) {
                state.seeded.insert(file.path.clone());
            }
        }
        let paths: Vec<&str> = files.iter().map(|file| file.path.as_str()).collect();
        let program = serde_json::to_string(&paths).expect("paths serialize");
        let kind = if own { StepKind::RestoreExported } else { StepKind::RestoreSeeded };
        let output =
            EvidenceOutput::Bash { profile: String::new(), exit_code: 0, stdout: Vec::new(), stderr: Vec::new() };
        state.steps.push(session_step(kind, &program, output, true, false));
        Ok(())
    }
}

/// The bytes of the file or symlink at `path` in the image.
pub(crate) fn content(vfs: &mut VirtualFs, path: &VPath) -> Result<Vec<u8>, VshError> {
    let source = vfs
        .content_source(path)?
        .ok_or_else(|| VshError::InvalidSeed { path: path.clone(), reason: "no content in the image".to_owned() })?;
    Ok(vfs.materialize(&source)?.to_vec())
}

/// Make `file` what the image holds at its path, as a guest could: every
/// path is authorized as a write (a protected path is refused), a
/// directory's parents must exist, what is in the way is replaced.
pub(crate) fn apply(vfs: &mut VirtualFs, policy: &vsh_policy::CallPolicy, file: &SeedFile) -> Result<(), String> {
    let error = |error: vsh_vfs::VfsError| error.to_string();
    let existing = vfs.kind(&file.path).map_err(error)?;
    // As the diff will call it.
    let access = match (&file.node, existing) {
        (None, _) => vsh_policy::AccessKind::Delete,
        (Some(_), None) => vsh_policy::AccessKind::Create,
        (Some(_), Some(_)) => vsh_policy::AccessKind::Modify,
    };
    policy.authorize(&file.path, access).map_err(|denied| format!("refused by the policy ({})", denied.rule))?;
    let replace = |vfs: &mut VirtualFs, wanted: Option<NodeKind>| -> Result<(), String> {
        match existing {
            Some(NodeKind::Directory) if wanted != Some(NodeKind::Directory) => {
                vfs.remove_tree(&file.path).map_err(error)
            }
            Some(kind) if Some(kind) != wanted && kind != NodeKind::Directory => vfs.unlink(&file.path).map_err(error),
            _ => Ok(()),
        }
    };
    match &file.node {
        None => replace(vfs, None),
        Some(SeedNode::Directory { mode }) => {
            replace(vfs, Some(NodeKind::Directory))?;
            if existing != Some(NodeKind::Directory) {
                vfs.mkdir(&file.path, *mode).map_err(error)?;
            }
            vfs.set_mode(&file.path, *mode).map_err(error)
        }
        Some(SeedNode::File { bytes, mode }) => {
            replace(vfs, Some(NodeKind::File))?;
            vfs.write(&file.path, Arc::from(bytes.as_slice())).map_err(error)?;
            vfs.set_mode(&file.path, *mode).map_err(error)
        }
        Some(SeedNode::Symlink { target }) => {
            replace(vfs, Some(NodeKind::Symlink))?;
            if existing == Some(NodeKind::Symlink) {
                vfs.unlink(&file.path).map_err(error)?;
            }
            vfs.symlink(&file.path, target).map_err(error)
        }
    }
}
