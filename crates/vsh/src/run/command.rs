//! Real commands ([`crate::Language::Command`]): the argv a program text
//! stands for, and the environment commands get.

use crate::VshError;

/// The most arguments a command may have.
const MAX_ARGUMENTS: usize = 4096;
/// The most bytes the program text of a command may have.
const MAX_COMMAND_BYTES: usize = 1 << 20;

/// A command as its program text gives it: a JSON array of strings (the
/// argv), or an object `{"argv": [...], "cwd": "src/app", "stdin": "..."}`
/// (`cwd` and `stdin` optional). Both fields are part of the program text,
/// so the evidence binds where the command started and what it read.
#[derive(Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Command {
    /// The program and its arguments.
    pub(crate) argv: Vec<String>,
    /// The directory of the workspace it starts in (`""`: the root).
    #[serde(default)]
    pub(crate) cwd: String,
    /// Its standard input, as text (none: `/dev/null`).
    #[serde(default)]
    pub(crate) stdin: String,
}

impl Command {
    /// The command as vsh-monty runs it.
    pub(crate) fn line(&self) -> vsh_monty::CommandLine<'_> {
        vsh_monty::CommandLine { argv: &self.argv, cwd: &self.cwd, stdin: self.stdin.as_bytes() }
    }
}

/// The command `code` stands for (see [`Command`]).
pub(crate) fn argv(code: &str) -> Result<Command, VshError> {
    let invalid = |reason: &str| VshError::InvalidCommand { reason: reason.to_owned() };
    if code.len() > MAX_COMMAND_BYTES {
        return Err(invalid(
            "longer than 1 MiB as a program text (its argv, cwd and stdin as JSON, where a newline or a quote \
             takes two bytes)",
        ));
    }
    let command = if let Ok(argv) = serde_json::from_str::<Vec<String>>(code) {
        Command { argv, cwd: String::new(), stdin: String::new() }
    } else {
        serde_json::from_str(code).map_err(|_| {
            invalid(
                "the program text must be a JSON array of strings, or an object with \"argv\" (that array), \
                 and optionally \"cwd\" (a directory of the workspace) and \"stdin\" (text)",
            )
        })?
    };
    let Command { argv, cwd, .. } = &command;
    if !vsh_monty::is_working_dir(cwd) {
        return Err(invalid("\"cwd\" must be a relative path of plain components within the workspace"));
    }
    if argv.is_empty() || argv[0].is_empty() {
        return Err(invalid("no program"));
    }
    if argv.len() > MAX_ARGUMENTS {
        return Err(invalid("more than 4096 arguments"));
    }
    if argv.iter().any(|arg| arg.contains('\0')) {
        return Err(invalid("an argument contains a NUL byte"));
    }
    Ok(command)
}

/// The most variables a command's environment may have.
const MAX_VARIABLES: usize = 4096;

/// The environment of real commands: the defaults, then `granted` in order
/// (a later value of a name replaces an earlier one).
pub(crate) fn command_env(granted: Vec<(String, String)>) -> Result<Vec<(String, String)>, VshError> {
    let invalid = |reason: String| VshError::InvalidCommand { reason };
    let mut env = vsh_monty::CommandConfig::new("").env;
    for (key, value) in granted {
        if key.is_empty() || key.contains(['=', '\0']) {
            return Err(invalid(format!("{key:?} is not an environment variable name")));
        }
        if value.contains('\0') {
            return Err(invalid(format!("the value of {key} contains a NUL byte")));
        }
        env.retain(|(known, _)| *known != key);
        env.push((key, value));
    }
    if env.len() > MAX_VARIABLES {
        return Err(invalid(format!("more than {MAX_VARIABLES} environment variables")));
    }
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::{Command, argv};
    use crate::VshError;

    #[test]
    fn a_command_is_an_argv_or_an_argv_with_a_plain_relative_directory_and_its_input() {
        let plain = argv(r#"["cat", "a.txt"]"#).unwrap();
        let strings = |items: &[&str]| items.iter().map(|item| (*item).to_owned()).collect::<Vec<_>>();
        assert_eq!(plain, Command { argv: strings(&["cat", "a.txt"]), cwd: String::new(), stdin: String::new() });
        let located = argv(r#"{"argv": ["cargo", "test"], "cwd": "crates/app"}"#).unwrap();
        assert_eq!(located.argv, strings(&["cargo", "test"]));
        assert_eq!((located.cwd.as_str(), located.stdin.as_str()), ("crates/app", ""));
        let fed = argv(r#"{"argv": ["patch", "-p1"], "stdin": "--- a/x\n+++ b/x\n"}"#).unwrap();
        assert_eq!((fed.cwd.as_str(), fed.stdin.as_str()), ("", "--- a/x\n+++ b/x\n"));
        assert_eq!(fed.line().stdin, b"--- a/x\n+++ b/x\n");
        assert!(matches!(argv(r#"{"argv": ["cat"], "stdin": 7}"#), Err(VshError::InvalidCommand { .. })));
        for bad in ["..", "../up", "a/../b", "/abs", "a//b", "a/", "./a", "a\0b"] {
            let code = serde_json::json!({ "argv": ["true"], "cwd": bad }).to_string();
            assert!(matches!(argv(&code), Err(VshError::InvalidCommand { .. })), "{bad:?}");
        }
        let extra = r#"{"argv": ["true"], "cwd": "a", "env": {}}"#;
        assert!(matches!(argv(extra), Err(VshError::InvalidCommand { .. })), "unknown fields are refused");
        assert!(matches!(argv(r#"{"argv": [], "cwd": ""}"#), Err(VshError::InvalidCommand { .. })));
    }
}
