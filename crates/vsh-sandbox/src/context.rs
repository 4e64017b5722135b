//! [`ToolContext`]: which programs a spawn may execute, as absolute canonical paths.
//!
//! Admission works on resolved files, never on names: a program given as an absolute path is
//! canonicalized (symlinks resolved), a bare name is looked up in the fixed
//! [`EXEC_SEARCH_PATH`] (never the parent's `PATH`), and the result is admitted only if it is one
//! of the granted files. Grants are canonicalized when the context is built, so a grant of
//! `/bin/sh` admits `sh`, `/bin/sh` and `/usr/bin/sh` alike when they are the same file, and a
//! bare-name grant such as `git` admits nothing (it could mean any file called `git`).

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use crate::error::ToolError;

/// The directories searched, in order, for a program given as a bare name.
pub const EXEC_SEARCH_PATH: [&str; 2] = ["/usr/bin", "/bin"];

/// What a [`ToolContext`] allows to be executed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecGrant {
    /// Any program that resolves to an existing executable file.
    ///
    /// The Landlock ruleset still limits which files can be executed: the system program
    /// directories (`/usr`, `/bin`, `/sbin`, `/lib`, `/lib64`) and the policy's exec roots.
    Any,
    /// Only these programs, each an absolute path to an existing file (symlinks are resolved).
    ///
    /// The Landlock ruleset makes exactly these files (plus the dynamic loader and the policy's
    /// exec roots) executable for the child and its descendants. A script's interpreter (its `#!`
    /// line) must be granted too, and so must every program the granted one runs.
    Only(Vec<PathBuf>),
}

/// The granted programs, canonicalized.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Granted {
    Any,
    Only(BTreeSet<PathBuf>),
}

/// The authority to execute programs, checked by [`crate::ConfinedCommand::spawn`] before
/// anything else happens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolContext {
    granted: Granted,
    ignored: Vec<PathBuf>,
}

impl ToolContext {
    /// A context granting `grant`.
    ///
    /// A grant that is not an absolute path to an existing regular file (a bare name, a relative
    /// path, a missing file) admits nothing; it is listed by [`ToolContext::ignored_grants`].
    /// [`ToolContext::try_new`] refuses such grants instead.
    pub fn new(grant: ExecGrant) -> Self {
        match grant {
            ExecGrant::Any => Self { granted: Granted::Any, ignored: Vec::new() },
            ExecGrant::Only(paths) => {
                let mut granted = BTreeSet::new();
                let mut ignored = Vec::new();
                for path in paths {
                    match canonical_grant(&path) {
                        Ok(canonical) => {
                            granted.insert(canonical);
                        }
                        Err(_) => ignored.push(path),
                    }
                }
                Self { granted: Granted::Only(granted), ignored }
            }
        }
    }

    /// Like [`ToolContext::new`], but a grant that cannot be used is an
    /// [`ToolError::InvalidPolicy`] naming it.
    pub fn try_new(grant: ExecGrant) -> Result<Self, ToolError> {
        let context = Self::new(grant);
        match context.ignored.first() {
            None => Ok(context),
            Some(path) => Err(ToolError::InvalidPolicy {
                reason: format!("exec grant {} is not an absolute path to an existing regular file", path.display()),
            }),
        }
    }

    /// Whether any program may be executed.
    pub fn grants_any(&self) -> bool {
        self.granted == Granted::Any
    }

    /// The granted programs, canonical; empty for [`ExecGrant::Any`].
    pub fn granted_programs(&self) -> impl Iterator<Item = &Path> {
        let programs = match &self.granted {
            Granted::Any => None,
            Granted::Only(set) => Some(set.iter().map(PathBuf::as_path)),
        };
        programs.into_iter().flatten()
    }

    /// The grants [`ToolContext::new`] could not use, as given.
    pub fn ignored_grants(&self) -> &[PathBuf] {
        &self.ignored
    }

    /// Resolve `program` and admit it, or refuse.
    ///
    /// An absolute `program` is canonicalized; a bare name is searched in
    /// [`EXEC_SEARCH_PATH`]; a relative path with a `/` is refused (its meaning would depend on
    /// the current directory). The result must be an existing regular file, and with
    /// [`ExecGrant::Only`] one of the granted files.
    ///
    /// # Errors
    ///
    /// [`ToolError::ExecDenied`] for a relative path or a program that is not granted;
    /// [`ToolError::Spawn`] (with [`io::ErrorKind::NotFound`] or the canonicalization error)
    /// when the program does not resolve to a file.
    pub fn check_exec(&self, program: &str) -> Result<PathBuf, ToolError> {
        let resolved = resolve_program(program)?;
        match &self.granted {
            Granted::Any => Ok(resolved),
            Granted::Only(set) if set.contains(&resolved) => Ok(resolved),
            Granted::Only(_) => Err(ToolError::ExecDenied { program: program.to_owned() }),
        }
    }
}

/// The canonical form of a grant: an absolute path to an existing regular file.
fn canonical_grant(path: &Path) -> io::Result<PathBuf> {
    if !path.is_absolute() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "exec grants must be absolute paths"));
    }
    let canonical = fs::canonicalize(path)?;
    if fs::metadata(&canonical)?.is_file() {
        Ok(canonical)
    } else {
        Err(io::Error::new(io::ErrorKind::InvalidInput, "exec grants must be regular files"))
    }
}

/// Resolve a program as [`ToolContext::check_exec`] describes.
/// The first executable regular file named `program` (a bare name, no `/`)
/// in the directories of `path` (a `PATH` value), as its directory and
/// name (a symlink not resolved: a program that acts on the name it was
/// started as, `xzcat` linking to `xz`, or a virtualenv's `python`, must
/// be started as that name); `None` when
/// there is none. Only directories beneath the system directories
/// (`/usr`, `/bin`, `/sbin`, `/lib`, `/lib64`) or beneath one of `also` are
/// looked in here: any other directory (relative, in a workspace, anywhere
/// else) ends the search with `Err(dir)`, so the caller lets the child
/// resolve the name from there on, in its own view and with its own rights
/// (a caller running as root never probes a directory the child could not).
///
/// # Errors
///
/// The first directory not looked in, when it comes before any match.
pub fn find_on_path(program: &str, path: &str, also: &[PathBuf]) -> Result<Option<PathBuf>, PathBuf> {
    if program.is_empty() || program.contains(['/', '\0']) {
        return Ok(None);
    }
    let looked_in = |dir: &Path| {
        dir.is_absolute()
            && !dir.components().any(|part| part == std::path::Component::ParentDir)
            && (crate::policy::SYSTEM_DIRS.iter().any(|system| dir.starts_with(system))
                || also.iter().any(|root| dir.starts_with(root)))
    };
    for dir in path.split(':').map(Path::new) {
        if !looked_in(dir) {
            return Err(dir.to_owned());
        }
        let candidate = dir.join(program);
        let Ok(metadata) = fs::metadata(&candidate) else { continue };
        if metadata.is_file() && metadata.permissions().mode() & 0o111 != 0 {
            return Ok(Some(candidate));
        }
    }
    Ok(None)
}

fn resolve_program(program: &str) -> Result<PathBuf, ToolError> {
    let spawn_error = |source: io::Error| ToolError::Spawn { program: program.to_owned(), source };
    if program.is_empty() || program.contains('\0') {
        return Err(ToolError::ExecDenied { program: program.to_owned() });
    }
    if program.contains('/') {
        if !program.starts_with('/') {
            return Err(ToolError::ExecDenied { program: program.to_owned() });
        }
        let canonical = fs::canonicalize(program).map_err(spawn_error)?;
        let metadata = fs::metadata(&canonical).map_err(spawn_error)?;
        if !metadata.is_file() {
            return Err(spawn_error(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file")));
        }
        return Ok(canonical);
    }
    for dir in EXEC_SEARCH_PATH {
        let candidate = Path::new(dir).join(program);
        let Ok(metadata) = fs::metadata(&candidate) else { continue };
        if metadata.is_file() && metadata.permissions().mode() & 0o111 != 0 {
            return fs::canonicalize(&candidate).map_err(spawn_error);
        }
    }
    Err(spawn_error(io::Error::new(io::ErrorKind::NotFound, "not found in /usr/bin or /bin")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh() -> PathBuf {
        fs::canonicalize("/bin/sh").expect("/bin/sh exists")
    }

    #[test]
    fn bare_names_resolve_through_the_fixed_search_path() {
        let context = ToolContext::new(ExecGrant::Any);
        assert_eq!(context.check_exec("sh").expect("sh resolves"), sh());
        assert_eq!(context.check_exec("/bin/sh").expect("/bin/sh resolves"), sh());
        assert!(matches!(
            context.check_exec("vsh-no-such-program"),
            Err(ToolError::Spawn { source, .. }) if source.kind() == io::ErrorKind::NotFound
        ));
    }

    #[test]
    fn relative_paths_are_refused() {
        let context = ToolContext::new(ExecGrant::Any);
        for program in ["./sh", "bin/sh", "../bin/sh", ""] {
            assert!(matches!(context.check_exec(program), Err(ToolError::ExecDenied { .. })), "{program:?}");
        }
    }

    #[test]
    fn full_path_grant_admits_the_same_file_under_any_name() {
        let context = ToolContext::new(ExecGrant::Only(vec![PathBuf::from("/bin/sh")]));
        assert_eq!(context.granted_programs().collect::<Vec<_>>(), vec![sh().as_path()]);
        assert_eq!(context.check_exec("sh").expect("sh is granted"), sh());
        assert_eq!(context.check_exec(sh().to_str().expect("utf-8")).expect("canonical is granted"), sh());
        assert!(matches!(context.check_exec("true"), Err(ToolError::ExecDenied { program }) if program == "true"));
    }

    #[test]
    fn bare_name_and_missing_grants_admit_nothing() {
        let grant = ExecGrant::Only(vec![PathBuf::from("sh"), PathBuf::from("/no/such/tool")]);
        let context = ToolContext::new(grant.clone());
        assert_eq!(context.ignored_grants().len(), 2);
        assert!(matches!(context.check_exec("sh"), Err(ToolError::ExecDenied { .. })));
        assert!(matches!(ToolContext::try_new(grant), Err(ToolError::InvalidPolicy { .. })));
    }

    #[test]
    fn a_copied_program_is_not_admitted_by_a_grant_of_the_original() {
        let dir = tempfile::tempdir().expect("temp dir");
        let copy = dir.path().join("sh");
        fs::copy("/bin/sh", &copy).expect("copy sh");
        let context = ToolContext::new(ExecGrant::Only(vec![PathBuf::from("/bin/sh")]));
        let copy_str = copy.to_str().expect("utf-8 temp path");
        assert!(matches!(context.check_exec(copy_str), Err(ToolError::ExecDenied { .. })));
    }

    #[test]
    fn find_on_path_looks_only_in_system_and_granted_directories() {
        let found = find_on_path("sh", "/usr/bin:/bin", &[]).expect("system directories are looked in");
        assert!(found.is_some_and(|path| path.is_absolute()));
        assert_eq!(find_on_path("no-such-program-vsh", "/usr/bin:/bin", &[]), Ok(None));
        let other = tempfile::tempdir().unwrap();
        let other_path = other.path().to_str().unwrap().to_owned();
        assert_eq!(
            find_on_path("sh", &format!("{other_path}:/usr/bin"), &[]),
            Err(other.path().to_owned()),
            "stops at a directory it may not probe"
        );
        assert_eq!(
            find_on_path("sh", "bin:/usr/bin", &[]),
            Err(PathBuf::from("bin")),
            "relative directories are the child's"
        );
        assert_eq!(find_on_path("sh", "/usr/../root:/usr/bin", &[]), Err(PathBuf::from("/usr/../root")));
        assert_eq!(
            find_on_path("sh", &format!("{other_path}:/usr/bin"), &[other.path().to_owned()])
                .map(|found| found.is_some()),
            Ok(true),
            "a granted directory is looked in"
        );
        assert_eq!(find_on_path("a/b", "/usr/bin", &[]), Ok(None));
    }
}
