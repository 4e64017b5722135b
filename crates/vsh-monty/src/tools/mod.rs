//! The ten `vsh_*` guest functions ([`MONTY_VSH_TOOL_NAMES`]), served by the
//! same [`OsHost`] as pathlib, so each sees the other's writes.
//!
//! Every call is one suspension (one [`crate::ExecutionLimits::max_os_calls`]
//! slot, charged by the dispatcher), and is authorized and charged to the
//! budgets before it touches the virtual image, like the typed OS calls.
//! Arguments bind positionally or by keyword, with `CPython`'s `TypeError`
//! messages for missing, surplus, duplicate or unknown arguments.
//!
//! The guest-facing contract is documented on the crate (`# The vsh_*
//! functions`).
//!
//! By job: this file names the functions and turns each call into host
//! operations; [`args`] binds and decodes arguments; [`fs`] holds the
//! multi-node filesystem operations (`vsh_remove`, `vsh_copy`); [`walk`] holds
//! the tree walk and what walks (`vsh_glob`, `vsh_search`).

mod args;
mod fs;
mod walk;

use std::time::Duration;

use monty_types::MontyObject;
use vsh_policy::Pattern;

use self::args::{
    Args, Param, count_arg, keyword, optional, required, root_default, type_error, value_error, with_truncation,
};
use crate::host::{Fault, OsHost, WriteKind, decode_strict, int};
use crate::path;

pub(crate) use self::walk::Matcher;

/// The names of the `vsh_*` functions every program can call, in a stable
/// order.
pub const MONTY_VSH_TOOL_NAMES: [&str; 10] = [
    "vsh_read",
    "vsh_write",
    "vsh_list",
    "vsh_mkdir",
    "vsh_remove",
    "vsh_move",
    "vsh_copy",
    "vsh_glob",
    "vsh_search",
    "vsh_patch",
];

/// Every external function a program sees: the ten `vsh_*` functions,
/// `vsh_bash` (which raises `RuntimeError` unless the host enabled Bash) and
/// `vsh_exec` (which raises `RuntimeError` unless the host enabled real
/// commands).
pub const GUEST_FUNCTION_NAMES: [&str; 12] = {
    let mut names = [crate::bash::NESTED_NAME; 12];
    let mut index = 0;
    while index < MONTY_VSH_TOOL_NAMES.len() {
        names[index] = MONTY_VSH_TOOL_NAMES[index];
        index += 1;
    }
    names[11] = crate::command::EXEC_NAME;
    names
};

/// The `ValueError` message of a path holding NUL.
const NUL_MESSAGE: &str = "embedded null byte";

/// One of the `vsh_*` functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tool {
    Read,
    Write,
    List,
    Mkdir,
    Remove,
    Move,
    Copy,
    Glob,
    Search,
    Patch,
}

impl Tool {
    const ALL: [Tool; 10] = [
        Self::Read,
        Self::Write,
        Self::List,
        Self::Mkdir,
        Self::Remove,
        Self::Move,
        Self::Copy,
        Self::Glob,
        Self::Search,
        Self::Patch,
    ];

    /// The function of this name, if it is one.
    pub(crate) fn from_name(name: &str) -> Option<Tool> {
        MONTY_VSH_TOOL_NAMES.iter().position(|known| *known == name).map(|index| Self::ALL[index])
    }

    fn name(self) -> &'static str {
        MONTY_VSH_TOOL_NAMES[Self::ALL.iter().position(|tool| *tool == self).expect("listed")]
    }

    /// The parameters, in order.
    fn params(self) -> Vec<Param> {
        let no = || MontyObject::Bool(false);
        let yes = || MontyObject::Bool(true);
        match self {
            Self::Read => vec![required("path"), optional("binary", no())],
            Self::Write => vec![required("path"), required("data"), optional("append", no())],
            Self::List => vec![optional("path", root_default())],
            Self::Mkdir => vec![required("path"), optional("parents", yes()), optional("exist_ok", yes())],
            Self::Remove => vec![required("path"), optional("recursive", no()), optional("missing_ok", no())],
            Self::Move => vec![required("source"), required("destination")],
            Self::Copy => vec![
                required("source"),
                required("destination"),
                optional("recursive", no()),
                optional("overwrite", no()),
            ],
            Self::Glob => vec![
                required("pattern"),
                optional("path", root_default()),
                optional("max_results", MontyObject::Int(1000)),
                keyword("report_truncation", no()),
            ],
            Self::Search => vec![
                required("query"),
                optional("path", root_default()),
                optional("case_sensitive", yes()),
                optional("max_results", MontyObject::Int(100)),
                keyword("report_truncation", no()),
            ],
            Self::Patch => {
                vec![required("path"), required("old"), required("new"), optional("count", MontyObject::Int(1))]
            }
        }
    }
}

/// The script of a `vsh_bash(code)` call, bound as the other functions bind
/// their arguments (`TypeError` as `CPython` words it).
pub(crate) fn nested_bash_code(
    args: Vec<MontyObject>,
    kwargs: Vec<(MontyObject, MontyObject)>,
) -> Result<String, Fault> {
    let mut a = Args::new(crate::bash::NESTED_NAME, vec![required("code")], args, kwargs)?;
    a.string()
}

/// The most arguments, and environment variables, a `vsh_exec` call may pass.
const MAX_EXEC_ITEMS: usize = 4096;

/// A `vsh_exec(argv, timeout=None, env=None, input=None)` call's arguments, bound as the
/// other functions bind theirs: `argv` a non-empty list or tuple of `str`,
/// `timeout` `None` or a positive number of seconds, `env` `None` or a
/// `dict` of `str` to `str` (variables set on top of the runtime's), `input`
/// `None`, `str` (as UTF-8) or `bytes` (the command's standard input).
pub(crate) fn exec_args(args: Vec<MontyObject>, kwargs: Vec<(MontyObject, MontyObject)>) -> Result<ExecArgs, Fault> {
    let name = crate::command::EXEC_NAME;
    let params = vec![
        required("argv"),
        optional("timeout", MontyObject::None),
        optional("env", MontyObject::None),
        optional("input", MontyObject::None),
        optional("check", MontyObject::Bool(false)),
    ];
    let mut a = Args::new(name, params, args, kwargs)?;
    let items = match a.next() {
        (MontyObject::List(items) | MontyObject::Tuple(items), _) => items,
        (other, param) => return Err(a.wrong(param, "a list of str", &other)),
    };
    if items.is_empty() {
        return Err(value_error(format!("{name}() argument 'argv' must not be empty")));
    }
    if items.len() > MAX_EXEC_ITEMS {
        return Err(value_error(format!("{name}() argument 'argv' has more than {MAX_EXEC_ITEMS} items")));
    }
    let mut strings = Vec::with_capacity(items.len());
    for item in items {
        match item {
            MontyObject::String(text) if text.contains('\0') => return Err(value_error(NUL_MESSAGE.to_owned())),
            MontyObject::String(text) => strings.push(text),
            other => return Err(type_error(format!("{name}() argv items must be str, not {}", other.type_name()))),
        }
    }
    if strings[0].is_empty() {
        return Err(value_error(format!("{name}() argument 'argv' names no program")));
    }
    let timeout = match a.next() {
        (MontyObject::None, _) => None,
        (MontyObject::Int(seconds), _) if seconds > 0 => Some(Duration::from_secs(seconds.unsigned_abs())),
        (MontyObject::Float(seconds), _) if seconds > 0.0 && seconds.is_finite() => {
            Some(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX))
        }
        (MontyObject::Int(_) | MontyObject::Float(_), _) => {
            return Err(value_error(format!("{name}() argument 'timeout' must be a positive number")));
        }
        (other, param) => return Err(a.wrong(param, "int, float or None", &other)),
    };
    let env = match a.next() {
        (MontyObject::None, _) => Vec::new(),
        (MontyObject::Dict(pairs), _) => {
            let mut env = Vec::new();
            for (key, value) in pairs {
                let (MontyObject::String(key), MontyObject::String(value)) = (key, value) else {
                    return Err(type_error(format!("{name}() env keys and values must be str")));
                };
                if key.is_empty() || key.contains(['=', '\0']) || value.contains('\0') {
                    return Err(value_error(format!("{name}() env has an invalid variable: {key:?}")));
                }
                env.push((key, value));
            }
            if env.len() > MAX_EXEC_ITEMS {
                return Err(value_error(format!("{name}() env has more than {MAX_EXEC_ITEMS} variables")));
            }
            env
        }
        (other, param) => return Err(a.wrong(param, "dict or None", &other)),
    };
    let input = match a.next() {
        (MontyObject::None, _) => Vec::new(),
        (MontyObject::String(text), _) => text.into_bytes(),
        (MontyObject::Bytes(bytes), _) => bytes,
        (other, param) => return Err(a.wrong(param, "str, bytes or None", &other)),
    };
    let check = a.boolean()?;
    Ok(ExecArgs { argv: strings, timeout, env, input, check })
}

/// A bound `vsh_exec` call.
#[derive(Debug)]
pub(crate) struct ExecArgs {
    /// The program and its arguments.
    pub(crate) argv: Vec<String>,
    /// Its own time limit.
    pub(crate) timeout: Option<Duration>,
    /// Variables set on top of the runtime's environment.
    pub(crate) env: Vec<(String, String)>,
    /// Its standard input (`str` as UTF-8); empty: `/dev/null`.
    pub(crate) input: Vec<u8>,
    /// Raise when it exits non-zero (as `subprocess.run(check=True)`).
    pub(crate) check: bool,
}

impl OsHost<'_> {
    /// Serve one `vsh_*` call.
    pub(crate) fn call_tool(
        &mut self,
        tool: Tool,
        args: Vec<MontyObject>,
        kwargs: Vec<(MontyObject, MontyObject)>,
    ) -> Result<MontyObject, Fault> {
        let mut a = Args::new(tool.name(), tool.params(), args, kwargs)?;
        match tool {
            Tool::Read => self.vsh_read(&mut a),
            Tool::Write => self.vsh_write(&mut a),
            Tool::List => {
                let guest = a.path()?;
                let target = self.target(&guest, NUL_MESSAGE)?;
                self.iterdir(&target)
            }
            Tool::Mkdir => {
                let (guest, parents, exist_ok) = (a.path()?, a.boolean()?, a.boolean()?);
                let target = self.target(&guest, NUL_MESSAGE)?;
                self.mkdir(&target, parents, exist_ok)?;
                Ok(MontyObject::None)
            }
            Tool::Remove => {
                let (guest, recursive, missing_ok) = (a.path()?, a.boolean()?, a.boolean()?);
                let target = self.target(&guest, NUL_MESSAGE)?;
                self.remove(&target, recursive, missing_ok)?;
                Ok(MontyObject::None)
            }
            Tool::Move => {
                let (source, destination) = (a.path()?, a.path()?);
                let source = self.target(&source, NUL_MESSAGE)?;
                let destination = self.target(&destination, NUL_MESSAGE)?;
                self.rename(&source, &destination)?;
                Ok(MontyObject::Path(path::to_guest(&destination.path)))
            }
            Tool::Copy => {
                let (source, destination, recursive, overwrite) = (a.path()?, a.path()?, a.boolean()?, a.boolean()?);
                let source = self.target(&source, NUL_MESSAGE)?;
                let destination = self.target(&destination, NUL_MESSAGE)?;
                self.copy(&source, &destination, recursive, overwrite)?;
                Ok(MontyObject::Path(path::to_guest(&destination.path)))
            }
            Tool::Glob => self.vsh_glob(&mut a),
            Tool::Search => self.vsh_search(&mut a),
            Tool::Patch => self.vsh_patch(&mut a),
        }
    }

    fn vsh_read(&mut self, a: &mut Args<'_>) -> Result<MontyObject, Fault> {
        let (guest, binary) = (a.path()?, a.boolean()?);
        let target = self.target(&guest, NUL_MESSAGE)?;
        if binary {
            Ok(MontyObject::Bytes(self.read_file(&target)?.to_vec()))
        } else {
            let text = self.read_text_file(&target, |bytes| decode_strict(bytes).map(str::to_owned))?;
            Ok(MontyObject::String(text))
        }
    }

    fn vsh_write(&mut self, a: &mut Args<'_>) -> Result<MontyObject, Fault> {
        let (guest, data, append) = (a.path()?, a.data()?, a.boolean()?);
        let target = self.target(&guest, NUL_MESSAGE)?;
        let (bytes, written) = match data {
            MontyObject::String(text) => {
                let count = text.chars().count();
                (text.into_bytes(), count)
            }
            MontyObject::Bytes(bytes) => {
                let count = bytes.len();
                (bytes, count)
            }
            _ => unreachable!("checked by Args::data"),
        };
        let kind = if append { WriteKind::Append } else { WriteKind::Replace };
        self.write_file(&target, bytes, kind)?;
        Ok(int(written))
    }

    fn vsh_glob(&mut self, a: &mut Args<'_>) -> Result<MontyObject, Fault> {
        let func = a.func;
        let (pattern, guest, max_results, report) = (a.string()?, a.path()?, a.integer()?, a.boolean()?);
        let max_results = count_arg(func, "max_results", max_results)?;
        self.meter.check_path(pattern.len())?;
        if pattern.contains('\0') {
            return Err(value_error(NUL_MESSAGE.to_owned()));
        }
        let pattern = Pattern::parse(&pattern).map_err(|reason| value_error(format!("{func}() {reason}")))?;
        let target = self.target(&guest, NUL_MESSAGE)?;
        let (results, truncated) = self.glob(&target, &pattern, max_results)?;
        self.meter.stats.truncated_results += u64::from(truncated);
        Ok(with_truncation(results, truncated, report))
    }

    fn vsh_search(&mut self, a: &mut Args<'_>) -> Result<MontyObject, Fault> {
        let func = a.func;
        let (query, guest, case_sensitive, max_results, report) =
            (a.string()?, a.path()?, a.boolean()?, a.integer()?, a.boolean()?);
        let max_results = count_arg(func, "max_results", max_results)?;
        if query.is_empty() {
            return Err(value_error(format!("{func}() query must not be empty")));
        }
        let target = self.target(&guest, NUL_MESSAGE)?;
        let matcher = Matcher::new(&query, case_sensitive);
        let (results, truncated) = self.search(&target, &matcher, max_results)?;
        self.meter.stats.truncated_results += u64::from(truncated);
        Ok(with_truncation(results, truncated, report))
    }

    fn vsh_patch(&mut self, a: &mut Args<'_>) -> Result<MontyObject, Fault> {
        let func = a.func;
        let (guest, old, new, count) = (a.path()?, a.string()?, a.string()?, a.integer()?);
        if old.is_empty() {
            return Err(value_error(format!("{func}() old must not be empty")));
        }
        let count = match usize::try_from(count) {
            Ok(count) if count > 0 => count,
            _ => return Err(value_error(format!("{func}() count must be positive"))),
        };
        let target = self.target(&guest, NUL_MESSAGE)?;
        // A patch shows the program none of the file (sec77: a failed one
        // made the rewrite the program fell back to pass); its own write
        // is an edit in place of what the file held.
        let bytes = self.read_file_to_change(&target)?;
        let text = decode_strict(&bytes)?;
        let found = text.match_indices(old.as_str()).take(count).count();
        if found == 0 {
            return Err(value_error(format!("{func}() text not found in {}", monty_types::StringRepr(target.guest))));
        }
        let patched = text.replacen(old.as_str(), &new, found);
        self.write_file(&target, patched.into_bytes(), WriteKind::Replace)?;
        self.note_edited_in_place(&target.path).map_err(|error| crate::host::vfs_fault(error, target.guest))?;
        Ok(int(found))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_found_by_its_name() {
        for tool in Tool::ALL {
            assert_eq!(Tool::from_name(tool.name()), Some(tool));
        }
        assert_eq!(Tool::from_name("vsh_exec"), None);
    }
}
