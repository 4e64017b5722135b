//! Real commands ([`crate::Language::Command`]): the argv a program text
//! stands for, and the environment commands get.

use crate::VshError;

/// The most arguments a command may have.
const MAX_ARGUMENTS: usize = 4096;
/// The most bytes the program text of a command may have.
const MAX_COMMAND_BYTES: usize = 1 << 20;

/// The argv `code` stands for: a JSON array of strings.
pub(crate) fn argv(code: &str) -> Result<Vec<String>, VshError> {
    let invalid = |reason: &str| VshError::InvalidCommand { reason: reason.to_owned() };
    if code.len() > MAX_COMMAND_BYTES {
        return Err(invalid("longer than 1 MiB"));
    }
    let argv: Vec<String> =
        serde_json::from_str(code).map_err(|_| invalid("the program text must be a JSON array of strings"))?;
    if argv.is_empty() || argv[0].is_empty() {
        return Err(invalid("no program"));
    }
    if argv.len() > MAX_ARGUMENTS {
        return Err(invalid("more than 4096 arguments"));
    }
    if argv.iter().any(|arg| arg.contains('\0')) {
        return Err(invalid("an argument contains a NUL byte"));
    }
    Ok(argv)
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
