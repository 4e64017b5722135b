//! What a script may run: the profile's commands, checked as they are
//! dispatched (never by scanning the source), and what each command asks of
//! the filesystem (whether its listings need metadata).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use bashkit::{Builtin, BuiltinContext, CommandResolver, ExecResult, async_trait};

use crate::fs::Control;

/// The commands of [`crate::PROFILE`] (beside the shell's own syntax and
/// special builtins: `eval`, `declare`, `local`, `let`, `getopts`, `command`,
/// `builtin`). Anything else (clocks, randomness, processes, jobs, the
/// network, archives, links, ownership, the host's identity) fails with
/// status 127, naming the command, and makes the run terminal. Running a
/// script from a file (`./x.sh`, `source`, `.`, `bash`, `sh`, `exec`) is not
/// part of the profile either: each fails with status 127 ("command not
/// found"), nothing is read.
pub const SUPPORTED_COMMANDS: &[&str] = &[
    // The shell's own.
    ":",
    "[",
    "alias",
    "break",
    "cd",
    "continue",
    "dirs",
    "echo",
    "exit",
    "export",
    "false",
    "hash",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "test",
    "trap",
    "true",
    "type",
    "unalias",
    "unset",
    "which",
    // Files and directories.
    "basename",
    "cat",
    "chmod",
    "cp",
    "dirname",
    "du",
    "file",
    "find",
    "ls",
    "mkdir",
    "mv",
    "readlink",
    "realpath",
    "rm",
    "rmdir",
    "stat",
    "touch",
    "tree",
    "truncate",
    // Text.
    "awk",
    "base32",
    "base64",
    "cmp",
    "column",
    "comm",
    "cut",
    "diff",
    "expand",
    "fmt",
    "fold",
    "grep",
    "head",
    "hexdump",
    "join",
    "nl",
    "od",
    "paste",
    "patch",
    "rev",
    "rg",
    "sed",
    "sort",
    "split",
    "strings",
    "tac",
    "tail",
    "tee",
    "tr",
    "unexpand",
    "uniq",
    "wc",
    "xargs",
    "xxd",
    // Numbers and digests.
    "b2sum",
    "bc",
    "cksum",
    "expr",
    "factor",
    "md5sum",
    "numfmt",
    "seq",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
];

/// Whether `name` is one of the profile's commands.
pub(crate) fn supported(name: &str) -> bool {
    SUPPORTED_COMMANDS.contains(&name)
}

/// Options of `find` that look at more than names and kinds.
const FIND_METADATA: &[&str] = &[
    "-size",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-newer",
    "-perm",
    "-empty",
    "-ls",
    "-printf",
    "-fprintf",
    "-executable",
    "-user",
    "-group",
    "-nouser",
    "-nogroup",
    "-readable",
    "-writable",
    "-anewer",
    "-cnewer",
];

/// Options of `ls` and `tree` that only need names and kinds.
const NAMES_ONLY: &str = "aAR1dprmxCwhfLI";

/// Whether the command `name args` reads metadata of what it lists: then its
/// listings carry every entry's size, mode and time, and the run depends on
/// them; otherwise only the names and kinds.
pub(crate) fn lists_metadata(name: &str, args: &[String]) -> bool {
    match name {
        "ls" | "tree" => args.iter().any(|arg| match arg.strip_prefix("--") {
            Some(long) => !matches!(long, "" | "all" | "almost-all" | "recursive" | "directory"),
            None => arg.strip_prefix('-').is_some_and(|flags| flags.chars().any(|flag| !NAMES_ONLY.contains(flag))),
        }),
        "find" => args.iter().any(|arg| FIND_METADATA.contains(&arg.as_str())),
        "du" | "stat" => true,
        _ => false,
    }
}

/// The command every name outside the profile resolves to.
pub(crate) struct Unsupported {
    pub(crate) name: String,
    pub(crate) control: Arc<Control>,
}

#[async_trait]
impl Builtin for Unsupported {
    async fn execute(&self, _ctx: BuiltinContext<'_>) -> bashkit::Result<ExecResult> {
        self.control.unsupported(&self.name);
        Ok(ExecResult::err(
            format!("vsh: {}: command not available in the {} profile\n", self.name, crate::PROFILE),
            127,
        ))
    }
}

/// Resolves every command the interpreter does not know to [`Unsupported`],
/// so nothing is looked up on `PATH`.
pub(crate) struct Refuse {
    pub(crate) control: Arc<Control>,
}

impl CommandResolver for Refuse {
    fn resolve(&self, name: &str) -> Option<Arc<dyn Builtin>> {
        Some(Arc::new(Unsupported { name: name.to_owned(), control: Arc::clone(&self.control) }))
    }
}

impl Control {
    /// Record the first command outside the profile.
    pub(crate) fn unsupported(&self, name: &str) {
        let mut first = self.unsupported.lock().unwrap_or_else(PoisonError::into_inner);
        first.get_or_insert_with(|| name.to_owned());
    }

    /// The first command outside the profile, if any.
    pub(crate) fn first_unsupported(&self) -> Option<String> {
        self.unsupported.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Before a command runs: whether its listings need metadata.
    pub(crate) fn dispatching(&self, name: &str, args: &[String]) {
        self.eager_metadata.store(lists_metadata(name, args), Ordering::Release);
    }

    /// After it ran.
    pub(crate) fn dispatched(&self) {
        self.eager_metadata.store(false, Ordering::Release);
    }
}

/// A slot for the first unsupported command.
pub(crate) type FirstUnsupported = Mutex<Option<String>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn only_commands_that_show_metadata_list_it() {
        assert!(!lists_metadata("ls", &args(&["-a", "-R", "dir"])));
        assert!(!lists_metadata("ls", &args(&["-1p"])));
        assert!(lists_metadata("ls", &args(&["-la"])));
        assert!(lists_metadata("ls", &args(&["-t"])));
        assert!(lists_metadata("ls", &args(&["--sort=size"])));
        assert!(!lists_metadata("find", &args(&[".", "-name", "*.rs", "-type", "f"])));
        assert!(lists_metadata("find", &args(&[".", "-size", "+1k"])));
        assert!(!lists_metadata("grep", &args(&["-rl", "x", "."])));
        assert!(supported("grep") && supported("[") && !supported("curl") && !supported("date"));
    }
}
