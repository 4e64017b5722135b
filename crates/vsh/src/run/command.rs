//! Real commands ([`crate::Language::Command`]): the argv a program text
//! stands for. (Each run's directory, which holds the candidate's mount
//! point, is the store's: `vsh_store::RunDirs`.)

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
