//! Real commands ([`crate::Language::Command`]): the argv a program text
//! stands for, and the environment commands get.

use crate::VshError;

/// The most arguments a command may have.
const MAX_ARGUMENTS: usize = 4096;
/// The most bytes the program text of a command may have.
const MAX_COMMAND_BYTES: usize = 1 << 20;

/// A command in the object form of its program text.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Located {
    argv: Vec<String>,
    cwd: String,
}

/// The argv `code` stands for, and the directory of the workspace it starts
/// in (`""`: the root): a JSON array of strings, or an object
/// `{"argv": [...], "cwd": "src/app"}`.
pub(crate) fn argv(code: &str) -> Result<(Vec<String>, String), VshError> {
    let invalid = |reason: &str| VshError::InvalidCommand { reason: reason.to_owned() };
    if code.len() > MAX_COMMAND_BYTES {
        return Err(invalid("longer than 1 MiB"));
    }
    let (argv, cwd) = if let Ok(argv) = serde_json::from_str::<Vec<String>>(code) {
        (argv, String::new())
    } else {
        let located: Located = serde_json::from_str(code).map_err(|_| {
            invalid(
                "the program text must be a JSON array of strings, or an object with \"argv\" (that array) \
                 and \"cwd\" (a directory of the workspace)",
            )
        })?;
        (located.argv, located.cwd)
    };
    if !vsh_monty::is_working_dir(&cwd) {
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
    Ok((argv, cwd))
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
    use super::argv;
    use crate::VshError;

    #[test]
    fn a_command_is_an_argv_or_an_argv_with_a_plain_relative_directory() {
        let plain = argv(r#"["cat", "a.txt"]"#).unwrap();
        assert_eq!(plain, (vec!["cat".to_owned(), "a.txt".to_owned()], String::new()));
        let located = argv(r#"{"argv": ["cargo", "test"], "cwd": "crates/app"}"#).unwrap();
        assert_eq!(located, (vec!["cargo".to_owned(), "test".to_owned()], "crates/app".to_owned()));
        for bad in ["..", "../up", "a/../b", "/abs", "a//b", "a/", "./a", "a\0b"] {
            let code = serde_json::json!({ "argv": ["true"], "cwd": bad }).to_string();
            assert!(matches!(argv(&code), Err(VshError::InvalidCommand { .. })), "{bad:?}");
        }
        let extra = r#"{"argv": ["true"], "cwd": "a", "env": {}}"#;
        assert!(matches!(argv(extra), Err(VshError::InvalidCommand { .. })), "unknown fields are refused");
        assert!(matches!(argv(r#"{"argv": [], "cwd": ""}"#), Err(VshError::InvalidCommand { .. })));
    }
}
