//! The environment-variable denylist: names that make a loader or an interpreter run code
//! the caller did not choose.
//!
//! [`crate::ConfinedCommand::env`] is the only way a variable reaches the child, and
//! [`crate::ConfinedCommand::spawn`] refuses any granted name on this list with
//! [`crate::ToolError::EnvDenied`]. The list is defence in depth for programs that are meant to be
//! run, not a complete model of every tool's configuration: a granted interpreter can still be
//! steered through its arguments or files.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;

/// Exact names that inject code into a dynamic loader, a shell, or a language runtime.
pub const DENIED_NAMES: &[&str] = &[
    // glibc's loader tunables (memory allocator behaviour; CVE-2023-4911).
    "GLIBC_TUNABLES",
    // Shells: startup files, options and hooks that run commands.
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PROMPT_COMMAND",
    "PS4",
    // Python.
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONBREAKPOINT",
    "PYTHONWARNINGS",
    "PYTHONINSPECT",
    // Node.js.
    "NODE_OPTIONS",
    "NODE_PATH",
    // Perl.
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "PERL5DB",
    // Ruby.
    "RUBYOPT",
    "RUBYLIB",
    // The JVM.
    "CLASSPATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    // Lua.
    "LUA_INIT",
    // git: variables that run commands or inject configuration.
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXEC_PATH",
    "GIT_TEMPLATE_DIR",
    "GIT_ASKPASS",
    "GIT_PROXY_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
];

/// Name prefixes with the same effect: every `LD_*` variable of the dynamic loader (`LD_PRELOAD`,
/// `LD_LIBRARY_PATH`, `LD_AUDIT`, ...), macOS's `DYLD_*`, bash's exported functions
/// (`BASH_FUNC_name%%`), and git's numbered configuration entries.
pub const DENIED_PREFIXES: &[&str] = &["LD_", "DYLD_", "BASH_FUNC_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"];

/// Whether `name` is on the denylist of variables that can hijack a loader or an interpreter.
///
/// Names are compared exactly (the environment is case-sensitive on Linux).
pub fn env_denylisted(name: &OsStr) -> bool {
    let bytes = name.as_bytes();
    DENIED_NAMES.iter().any(|denied| bytes == denied.as_bytes())
        || DENIED_PREFIXES.iter().any(|prefix| bytes.starts_with(prefix.as_bytes()))
}

/// Why `name` cannot be a variable name at all, if it cannot: empty, or containing `=` or NUL.
pub(crate) fn malformed_name(name: &OsStr) -> Option<&'static str> {
    let bytes = name.as_bytes();
    if bytes.is_empty() {
        Some("an environment variable name is empty")
    } else if bytes.contains(&b'=') {
        Some("an environment variable name contains `=`")
    } else if bytes.contains(&0) {
        Some("an environment variable name contains a NUL byte")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_and_interpreter_hijacks_are_denied() {
        for name in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "LD_AUDIT",
            "LD_DEBUG_OUTPUT",
            "PYTHONPATH",
            "PYTHONSTARTUP",
            "NODE_OPTIONS",
            "BASH_ENV",
            "ENV",
            "PERL5OPT",
            "RUBYOPT",
            "GIT_SSH_COMMAND",
            "GIT_CONFIG_KEY_0",
            "BASH_FUNC_ls%%",
            "GLIBC_TUNABLES",
            "DYLD_INSERT_LIBRARIES",
        ] {
            assert!(env_denylisted(OsStr::new(name)), "{name} must be denied");
        }
    }

    #[test]
    fn ordinary_variables_pass() {
        for name in ["PATH", "HOME", "LANG", "TMPDIR", "TERM", "ld_preload", "LDFLAGS", "ENVIRONMENT", "GIT_DIR"] {
            assert!(!env_denylisted(OsStr::new(name)), "{name} must pass");
        }
    }

    #[test]
    fn malformed_names_are_named() {
        assert!(malformed_name(OsStr::new("")).is_some());
        assert!(malformed_name(OsStr::new("A=B")).is_some());
        assert!(malformed_name(OsStr::from_bytes(b"A\0B")).is_some());
        assert_eq!(malformed_name(OsStr::new("HOME")), None);
    }
}
