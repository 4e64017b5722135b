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

use monty_types::{ExcType, MontyException, MontyObject};
use vsh_policy::AccessKind;
use vsh_types::{NodeKind, VPath};
use vsh_vfs::VfsError;

use crate::host::{Fault, OsHost, Target, WriteKind, decode_strict, int, vfs_fault};
use crate::oserror::{self, EACCES, EEXIST, EISDIR, ELOOP, ENOENT, ENOTDIR};
use crate::path;

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

/// One parameter of a function: its name, its default (`None` for a required
/// one) and whether it can only be passed by keyword.
struct Param {
    name: &'static str,
    default: Option<MontyObject>,
    keyword_only: bool,
}

fn required(name: &'static str) -> Param {
    Param { name, default: None, keyword_only: false }
}

fn optional(name: &'static str, default: MontyObject) -> Param {
    Param { name, default: Some(default), keyword_only: false }
}

fn keyword(name: &'static str, default: MontyObject) -> Param {
    Param { name, default: Some(default), keyword_only: true }
}

fn type_error(message: String) -> Fault {
    Fault::Guest(MontyException::new(ExcType::TypeError, Some(message)))
}

fn value_error(message: String) -> Fault {
    Fault::Guest(MontyException::new(ExcType::ValueError, Some(message)))
}

/// `'a'`, `'a' and 'b'`, `'a', 'b', and 'c'`, as `CPython` lists missing
/// arguments.
fn name_list(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| format!("'{name}'")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [first, second] => format!("{first} and {second}"),
        [init @ .., last] => format!("{}, and {last}", init.join(", ")),
    }
}

/// Bind `args` and `kwargs` to `params` as `CPython` would, or raise its
/// `TypeError`.
fn bind(
    func: &str,
    params: Vec<Param>,
    args: Vec<MontyObject>,
    kwargs: Vec<(MontyObject, MontyObject)>,
) -> Result<Vec<MontyObject>, Fault> {
    let positional = params.iter().filter(|param| !param.keyword_only).count();
    let required_positional = params.iter().filter(|param| !param.keyword_only && param.default.is_none()).count();
    if args.len() > positional {
        let takes = if required_positional == positional {
            let plural = if positional == 1 { "" } else { "s" };
            format!("{positional} positional argument{plural}")
        } else {
            format!("from {required_positional} to {positional} positional arguments")
        };
        let verb = if args.len() == 1 { "was" } else { "were" };
        return Err(type_error(format!("{func}() takes {takes} but {} {verb} given", args.len())));
    }
    let mut bound: Vec<Option<MontyObject>> = vec![None; params.len()];
    for (slot, value) in bound.iter_mut().zip(args) {
        *slot = Some(value);
    }
    for (key, value) in kwargs {
        let MontyObject::String(key) = key else {
            return Err(type_error("keywords must be strings".to_owned()));
        };
        let Some(index) = params.iter().position(|param| param.name == key) else {
            return Err(type_error(format!("{func}() got an unexpected keyword argument '{key}'")));
        };
        if bound[index].is_some() {
            return Err(type_error(format!("{func}() got multiple values for argument '{key}'")));
        }
        bound[index] = Some(value);
    }
    let missing: Vec<&str> = params
        .iter()
        .zip(&bound)
        .filter(|(param, value)| value.is_none() && param.default.is_none())
        .map(|(param, _)| param.name)
        .collect();
    if !missing.is_empty() {
        let plural = if missing.len() == 1 { "" } else { "s" };
        return Err(type_error(format!(
            "{func}() missing {} required positional argument{plural}: {}",
            missing.len(),
            name_list(&missing)
        )));
    }
    Ok(params
        .into_iter()
        .zip(bound)
        .map(|(param, value)| value.or(param.default).unwrap_or(MontyObject::None))
        .collect())
}

/// Typed views of bound arguments, with `CPython`-like `TypeError`s.
struct Args<'f> {
    func: &'f str,
    values: std::vec::IntoIter<MontyObject>,
    names: Vec<&'static str>,
    position: usize,
}

impl<'f> Args<'f> {
    fn new(
        func: &'f str,
        params: Vec<Param>,
        args: Vec<MontyObject>,
        kwargs: Vec<(MontyObject, MontyObject)>,
    ) -> Result<Self, Fault> {
        let names = params.iter().map(|param| param.name).collect();
        let values = bind(func, params, args, kwargs)?;
        Ok(Self { func, values: values.into_iter(), names, position: 0 })
    }

    fn next(&mut self) -> (MontyObject, &'static str) {
        let name = self.names[self.position];
        self.position += 1;
        (self.values.next().unwrap_or(MontyObject::None), name)
    }

    fn wrong(&self, name: &str, expected: &str, value: &MontyObject) -> Fault {
        type_error(format!("{}() argument '{name}' must be {expected}, not {}", self.func, value.type_name()))
    }

    /// A `str` or a `Path`.
    fn path(&mut self) -> Result<String, Fault> {
        match self.next() {
            (MontyObject::String(text) | MontyObject::Path(text), _) => Ok(text),
            (other, name) => Err(self.wrong(name, "str or Path", &other)),
        }
    }

    fn string(&mut self) -> Result<String, Fault> {
        match self.next() {
            (MontyObject::String(text), _) => Ok(text),
            (other, name) => Err(self.wrong(name, "str", &other)),
        }
    }

    fn boolean(&mut self) -> Result<bool, Fault> {
        match self.next() {
            (MontyObject::Bool(value), _) => Ok(value),
            (other, name) => Err(self.wrong(name, "bool", &other)),
        }
    }

    fn integer(&mut self) -> Result<i64, Fault> {
        match self.next() {
            (MontyObject::Int(value), _) => Ok(value),
            (MontyObject::BigInt(_), name) => Err(Fault::Guest(MontyException::new(
                ExcType::OverflowError,
                Some(format!("{}() argument '{name}' is too large", self.func)),
            ))),
            (other, name) => Err(self.wrong(name, "int", &other)),
        }
    }

    /// A `str` or `bytes` payload.
    fn data(&mut self) -> Result<MontyObject, Fault> {
        match self.next() {
            (value @ (MontyObject::String(_) | MontyObject::Bytes(_)), _) => Ok(value),
            (other, name) => Err(self.wrong(name, "str or bytes", &other)),
        }
    }
}

fn root_default() -> MontyObject {
    MontyObject::String(path::VIRTUAL_ROOT.to_owned())
}

/// A non-negative count argument as `usize`, or a `ValueError`.
fn count_arg(func: &str, name: &str, value: i64) -> Result<usize, Fault> {
    usize::try_from(value).map_err(|_| value_error(format!("{func}() {name} must not be negative")))
}

/// `results`, or `(results, truncated)` when the caller asked for the flag.
fn with_truncation(results: Vec<MontyObject>, truncated: bool, report: bool) -> MontyObject {
    if report {
        MontyObject::Tuple(vec![MontyObject::List(results), MontyObject::Bool(truncated)])
    } else {
        MontyObject::List(results)
    }
}

/// What a tree walk does with one entry.
enum Step {
    /// Go on with the next entry.
    Skip,
    /// Walk into this directory (after its remaining siblings' turn comes
    /// later: the walk is depth-first).
    Descend(Vec<usize>),
    /// End the walk.
    Stop,
}

/// What a walk asks about each entry: the host, the entry's path and name,
/// and the state of its directory.
type OnEntry<'f, 'h> = dyn FnMut(&mut OsHost<'h>, &VPath, &str, &[usize]) -> Result<Step, Fault> + 'f;

/// One directory being walked.
struct Frame {
    dir: VPath,
    names: std::vec::IntoIter<String>,
    state: Vec<usize>,
}

impl<'a> OsHost<'a> {
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
        let bytes = self.read_file(&target)?;
        if binary {
            Ok(MontyObject::Bytes(bytes.to_vec()))
        } else {
            Ok(MontyObject::String(decode_strict(&bytes)?.to_owned()))
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
        let bytes = self.read_file(&target)?;
        let text = decode_strict(&bytes)?;
        let found = text.match_indices(old.as_str()).take(count).count();
        if found == 0 {
            return Err(value_error(format!("{func}() text not found in {}", monty_types::StringRepr(target.guest))));
        }
        let patched = text.replacen(old.as_str(), &new, found);
        self.write_file(&target, patched.into_bytes(), WriteKind::Replace)?;
        Ok(int(found))
    }

    /// `vsh_remove`: a file or symlink is unlinked, an empty directory removed;
    /// a recursive remove authorizes `Delete` for the whole tree before
    /// anything changes.
    fn remove(&mut self, target: &Target<'_>, recursive: bool, missing_ok: bool) -> Result<(), Fault> {
        let guest = target.guest;
        let fault = |error: VfsError| vfs_fault(error, guest);
        self.authorize(&target.path, AccessKind::MetadataRead, guest)?;
        match self.vfs.kind(&target.path).map_err(fault)? {
            None if missing_ok => Ok(()),
            None => Err(Fault::Guest(oserror::os_error(ENOENT, guest))),
            Some(NodeKind::File | NodeKind::Symlink) => {
                self.authorize(&target.path, AccessKind::Delete, guest)?;
                self.vfs.unlink(&target.path).map_err(fault)
            }
            Some(NodeKind::Directory) if !recursive => {
                self.authorize(&target.path, AccessKind::Delete, guest)?;
                self.vfs.rmdir(&target.path).map_err(fault)
            }
            Some(NodeKind::Directory) => {
                if target.path.is_root() {
                    return Err(Fault::Guest(oserror::os_error(EACCES, guest)));
                }
                self.authorize(&target.path, AccessKind::Delete, guest)?;
                let descendants = self.descendants(&target.path, &fault)?;
                let mut refusal = self.policy.authorize_tree(&target.path, &descendants, AccessKind::Delete).err();
                if refusal.is_none() {
                    // A nested workspace's vsh data directory goes nowhere either.
                    for descendant in &descendants {
                        refusal = self.nested_store(descendant, AccessKind::Delete).map_err(fault)?;
                        if refusal.is_some() {
                            break;
                        }
                    }
                }
                if let Some(denied) = refusal {
                    // The refused path may be hidden from the guest: name only
                    // the path it gave.
                    self.record_denial(denied)?;
                    return Err(Fault::Guest(oserror::os_error(EACCES, guest)));
                }
                self.vfs.remove_tree(&target.path).map_err(fault)
            }
        }
    }

    /// `vsh_copy`.
    fn copy(
        &mut self,
        source: &Target<'_>,
        destination: &Target<'_>,
        recursive: bool,
        overwrite: bool,
    ) -> Result<(), Fault> {
        self.authorize(&source.path, AccessKind::MetadataRead, source.guest)?;
        match self.vfs.kind(&source.path).map_err(|error| vfs_fault(error, source.guest))? {
            None => Err(Fault::Guest(oserror::os_error(ENOENT, source.guest))),
            Some(NodeKind::Symlink) => {
                Err(value_error(format!("vsh_copy() cannot copy a symlink: {}", monty_types::StringRepr(source.guest))))
            }
            Some(NodeKind::File) => self.copy_file(source, destination, overwrite),
            Some(NodeKind::Directory) if !recursive => Err(Fault::Guest(oserror::os_error(EISDIR, source.guest))),
            Some(NodeKind::Directory) => self.copy_tree(source, destination),
        }
    }

    fn copy_file(&mut self, source: &Target<'_>, destination: &Target<'_>, overwrite: bool) -> Result<(), Fault> {
        if source.path == destination.path {
            return Err(value_error("vsh_copy() source and destination are the same file".to_owned()));
        }
        let to_fault = |error: VfsError| vfs_fault(error, destination.guest);
        self.authorize(&source.path, AccessKind::ContentRead, source.guest)?;
        self.authorize(&destination.path, AccessKind::MetadataRead, destination.guest)?;
        let existing = self.vfs.kind(&destination.path).map_err(to_fault)?;
        match existing {
            Some(NodeKind::Directory) => return Err(Fault::Guest(oserror::os_error(EISDIR, destination.guest))),
            Some(_) if !overwrite => return Err(Fault::Guest(oserror::os_error(EEXIST, destination.guest))),
            _ => {}
        }
        let access = if existing.is_some() { AccessKind::Modify } else { AccessKind::Create };
        self.authorize(&destination.path, access, destination.guest)?;
        let size = self.vfs.file_size(&source.path).map_err(|error| vfs_fault(error, source.guest))?;
        self.meter.charge_read_call(size)?;
        self.meter.charge_write_call(size)?;
        self.vfs.copy_file(&source.path, &destination.path).map_err(to_fault)
    }

    /// A recursive copy: everything is authorized and charged before the
    /// first directory is created.
    fn copy_tree(&mut self, source: &Target<'_>, destination: &Target<'_>) -> Result<(), Fault> {
        if destination.path.is_within(&source.path) {
            return Err(value_error("vsh_copy() cannot copy a directory into itself".to_owned()));
        }
        let from_fault = |error: VfsError| vfs_fault(error, source.guest);
        let to_fault = |error: VfsError| vfs_fault(error, destination.guest);
        self.authorize(&destination.path, AccessKind::MetadataRead, destination.guest)?;
        if self.vfs.kind(&destination.path).map_err(to_fault)?.is_some() {
            return Err(Fault::Guest(oserror::os_error(EEXIST, destination.guest)));
        }
        if let Some(parent) = destination.path.parent() {
            let errno = match self.vfs.kind(&parent).map_err(to_fault)? {
                Some(NodeKind::Directory) => None,
                None => Some(ENOENT),
                Some(NodeKind::File) => Some(ENOTDIR),
                Some(NodeKind::Symlink) => Some(ELOOP),
            };
            if let Some(errno) = errno {
                return Err(Fault::Guest(oserror::os_error(errno, destination.guest)));
            }
        }
        self.authorize(&source.path, AccessKind::DirectoryRead, source.guest)?;
        self.authorize(&destination.path, AccessKind::Create, destination.guest)?;
        let mut entries = self.descendants(&source.path, &from_fault)?;
        entries.sort();
        let mut plan = Vec::with_capacity(entries.len());
        for entry in entries {
            let kind = self.vfs.kind(&entry).map_err(from_fault)?;
            let access =
                if kind == Some(NodeKind::Directory) { AccessKind::DirectoryRead } else { AccessKind::ContentRead };
            self.authorize(&entry, access, source.guest)?;
            let relative = entry.relative_to(&source.path).unwrap_or_default().to_owned();
            if kind != Some(NodeKind::File) && kind != Some(NodeKind::Directory) {
                return Err(value_error(format!(
                    "vsh_copy() cannot copy a symlink: {}",
                    monty_types::StringRepr(&path::guest_child(source.guest, &relative))
                )));
            }
            let landing = entry
                .rebase(&source.path, &destination.path)
                .ok_or_else(|| Fault::Guest(oserror::os_error(EACCES, destination.guest)))?;
            self.authorize(&landing, AccessKind::Create, destination.guest)?;
            let mode = self.vfs.metadata(&entry).map_err(from_fault)?.mode;
            if kind == Some(NodeKind::File) {
                let size = self.vfs.file_size(&entry).map_err(from_fault)?;
                self.meter.charge_read_call(size)?;
                self.meter.charge_write_call(size)?;
            }
            plan.push((entry, landing, kind == Some(NodeKind::Directory), mode));
        }
        let root_mode = self.vfs.metadata(&source.path).map_err(from_fault)?.mode;
        self.vfs.mkdir(&destination.path, root_mode).map_err(to_fault)?;
        for (entry, landing, is_dir, mode) in plan {
            if is_dir {
                self.vfs.mkdir(&landing, mode).map_err(to_fault)?;
            } else {
                self.vfs.copy_file(&entry, &landing).map_err(to_fault)?;
            }
        }
        Ok(())
    }

    /// Walk below the directory `root` depth-first in sorted name order,
    /// skipping hidden paths. `on_entry` decides for each child; the walk
    /// lists each directory it enters (charging the directory-entry budget),
    /// charges one evidence record per child and checks the deadline.
    fn walk(
        &mut self,
        root: &VPath,
        guest: &str,
        state: Vec<usize>,
        on_entry: &mut OnEntry<'_, 'a>,
    ) -> Result<(), Fault> {
        let fault = |error: VfsError| vfs_fault(error, guest);
        let mut stack: Vec<Frame> = Vec::new();
        let names = self.vfs.read_dir(root).map_err(fault)?;
        self.meter.charge_directory_entries(names.len() as u64)?;
        stack.push(Frame { dir: root.clone(), names: names.into_iter(), state });
        while let Some(frame) = stack.last_mut() {
            let Some(name) = frame.names.next() else {
                stack.pop();
                continue;
            };
            let Ok(child) = frame.dir.child(&name) else { continue };
            let state = frame.state.clone();
            self.visit(&child)?;
            if self.is_hidden(&child, guest)? {
                continue;
            }
            let kind = self.vfs.kind(&child).map(drop);
            if !self.representable(kind, guest)? {
                continue;
            }
            match on_entry(self, &child, &name, &state)? {
                Step::Skip => {}
                Step::Stop => return Ok(()),
                Step::Descend(next) => {
                    if self.authorize(&child, AccessKind::DirectoryRead, guest).is_err() {
                        continue;
                    }
                    let names = self.vfs.read_dir(&child);
                    let Some(names) = self.representable_value(names, guest)? else { continue };
                    self.meter.charge_directory_entries(names.len() as u64)?;
                    stack.push(Frame { dir: child, names: names.into_iter(), state: next });
                }
            }
        }
        Ok(())
    }

    /// Whether a walk goes on with a node it reached (`result` of looking at
    /// it): a node the guest cannot be shown (see [`VfsError::is_unrepresentable`])
    /// is skipped and counted; any other error is the walk's.
    fn representable(&mut self, result: Result<(), VfsError>, guest: &str) -> Result<bool, Fault> {
        Ok(self.representable_value(result, guest)?.is_some())
    }

    /// [`Self::representable`], keeping the value.
    fn representable_value<T>(&mut self, result: Result<T, VfsError>, guest: &str) -> Result<Option<T>, Fault> {
        match result {
            Ok(value) => Ok(Some(value)),
            Err(error) if error.is_unrepresentable() => {
                self.meter.stats.skipped_nodes += 1;
                Ok(None)
            }
            Err(error) => Err(vfs_fault(error, guest)),
        }
    }

    /// The directory a walk starts at: authorized, and required to be one.
    fn walk_root(&mut self, target: &Target<'_>) -> Result<(), Fault> {
        self.authorize(&target.path, AccessKind::DirectoryRead, target.guest)?;
        match self.vfs.kind(&target.path).map_err(|error| vfs_fault(error, target.guest))? {
            Some(NodeKind::Directory) => Ok(()),
            None => Err(Fault::Guest(oserror::os_error(ENOENT, target.guest))),
            Some(NodeKind::File) => Err(Fault::Guest(oserror::os_error(ENOTDIR, target.guest))),
            Some(NodeKind::Symlink) => Err(Fault::Guest(oserror::os_error(ELOOP, target.guest))),
        }
    }

    /// `vsh_glob`: the matches and whether there were more.
    fn glob(
        &mut self,
        target: &Target<'_>,
        pattern: &Pattern,
        max_results: usize,
    ) -> Result<(Vec<MontyObject>, bool), Fault> {
        self.walk_root(target)?;
        let mut results = Vec::new();
        let mut truncated = false;
        let root = target.path.clone();
        let guest = target.guest;
        self.walk(&root, guest, pattern.start(), &mut |host, child, name, state| {
            let next = pattern.step(state, name);
            if next.is_empty() {
                return Ok(Step::Skip);
            }
            if pattern.is_match(&next) {
                if results.len() == max_results {
                    truncated = true;
                    return Ok(Step::Stop);
                }
                let relative = child.relative_to(&root).unwrap_or_default();
                results.push(MontyObject::Path(path::guest_child(guest, relative)));
            }
            if pattern.can_continue(&next)
                && host.vfs.kind(child).map_err(|error| vfs_fault(error, guest))? == Some(NodeKind::Directory)
            {
                return Ok(Step::Descend(next));
            }
            Ok(Step::Skip)
        })?;
        Ok((results, truncated))
    }

    /// `vsh_search`: the hits and whether there were more.
    fn search(
        &mut self,
        target: &Target<'_>,
        matcher: &Matcher,
        max_results: usize,
    ) -> Result<(Vec<MontyObject>, bool), Fault> {
        self.authorize(&target.path, AccessKind::MetadataRead, target.guest)?;
        let mut hits = Hits { results: Vec::new(), max_results, truncated: false };
        if self.vfs.kind(&target.path).map_err(|error| vfs_fault(error, target.guest))? == Some(NodeKind::File) {
            self.search_file(&target.path, target.guest, target.guest, matcher, &mut hits)?;
        } else {
            self.walk_root(target)?;
            {
                let root = target.path.clone();
                let guest = target.guest;
                self.walk(&root, guest, Vec::new(), &mut |host, child, _name, _state| match host
                    .vfs
                    .kind(child)
                    .map_err(|error| vfs_fault(error, guest))?
                {
                    Some(NodeKind::Directory) => Ok(Step::Descend(Vec::new())),
                    Some(NodeKind::File) => {
                        let relative = child.relative_to(&root).unwrap_or_default();
                        let shown = path::guest_child(guest, relative);
                        let go_on = host.search_file(child, &shown, guest, matcher, &mut hits)?;
                        Ok(if go_on { Step::Skip } else { Step::Stop })
                    }
                    _ => Ok(Step::Skip),
                })?;
            }
        }
        Ok((hits.results, hits.truncated))
    }

    /// Search one file; `false` once the results are full.
    fn search_file(
        &mut self,
        file: &VPath,
        shown: &str,
        guest: &str,
        matcher: &Matcher,
        hits: &mut Hits,
    ) -> Result<bool, Fault> {
        match self.authorize(file, AccessKind::ContentRead, guest) {
            Ok(()) => {}
            Err(Fault::Guest(_)) => return Ok(true),
            Err(other) => return Err(other),
        }
        let size = self.vfs.file_size(file).map_err(|error| vfs_fault(error, guest))?;
        self.meter.charge_read_call(size)?;
        let read = self.vfs.read(file);
        let Some(bytes) = self.representable_value(read, guest)? else { return Ok(true) };
        let Ok(text) = std::str::from_utf8(&bytes) else { return Ok(true) };
        for (index, line) in text.split('\n').enumerate() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let Some(column) = matcher.find(line) else { continue };
            if hits.results.len() == hits.max_results {
                hits.truncated = true;
                return Ok(false);
            }
            hits.results.push(MontyObject::dict(vec![
                (MontyObject::String("path".to_owned()), MontyObject::String(shown.to_owned())),
                (MontyObject::String("line".to_owned()), int(index + 1)),
                (MontyObject::String("column".to_owned()), int(column)),
                (MontyObject::String("text".to_owned()), MontyObject::String(line.to_owned())),
            ]));
        }
        Ok(true)
    }
}

/// The hits of one search.
struct Hits {
    results: Vec<MontyObject>,
    max_results: usize,
    truncated: bool,
}

/// A literal query, case-sensitive or Unicode-lowercased.
pub(crate) struct Matcher {
    query: String,
    case_sensitive: bool,
}

/// `text` lowercased character by character (so every character maps to its
/// own run of bytes), with the index of the original character of each
/// output byte.
fn lowercase_with_origins(text: &str) -> (String, Vec<usize>) {
    let mut lowered = String::with_capacity(text.len());
    let mut origins = Vec::with_capacity(text.len());
    for (index, character) in text.chars().enumerate() {
        let start = lowered.len();
        lowered.extend(character.to_lowercase());
        origins.resize(origins.len() + (lowered.len() - start), index);
    }
    (lowered, origins)
}

impl Matcher {
    pub(crate) fn new(query: &str, case_sensitive: bool) -> Self {
        let query = if case_sensitive { query.to_owned() } else { lowercase_with_origins(query).0 };
        Self { query, case_sensitive }
    }

    /// The 1-based column (in characters) of the first hit in `line`.
    pub(crate) fn find(&self, line: &str) -> Option<usize> {
        if self.case_sensitive {
            line.find(&self.query).map(|offset| line[..offset].chars().count() + 1)
        } else {
            let (lowered, origins) = lowercase_with_origins(line);
            lowered.find(&self.query).map(|offset| origins[offset] + 1)
        }
    }
}

/// One component of a glob pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// `**`: zero or more whole components.
    AnyDepth,
    /// A component with `*` and `?` wildcards.
    Segment(Vec<char>),
}

/// A parsed `vsh_glob` pattern. Matching is a set of positions in the
/// pattern, advanced one path component at a time, so the walk needs no
/// recursion and can prune directories no match can lie below.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    parts: Vec<Part>,
}

impl Pattern {
    /// Parse a relative pattern; the error says what is wrong.
    pub(crate) fn parse(text: &str) -> Result<Pattern, &'static str> {
        if text.starts_with('/') {
            return Err("pattern must be relative");
        }
        let mut parts: Vec<Part> = Vec::new();
        for component in text.split('/') {
            match component {
                "" | "." => {}
                ".." => return Err("pattern must not contain '..'"),
                "**" => {
                    if parts.last() != Some(&Part::AnyDepth) {
                        parts.push(Part::AnyDepth);
                    }
                }
                segment => parts.push(Part::Segment(segment.chars().collect())),
            }
        }
        if parts.is_empty() {
            return Err("pattern must name at least one component");
        }
        Ok(Pattern { parts })
    }

    /// The positions before any component is consumed.
    pub(crate) fn start(&self) -> Vec<usize> {
        self.close(vec![0])
    }

    /// Add the position after every `**` (which may match nothing).
    fn close(&self, mut states: Vec<usize>) -> Vec<usize> {
        let mut index = 0;
        while index < states.len() {
            let state = states[index];
            if self.parts.get(state) == Some(&Part::AnyDepth) && !states.contains(&(state + 1)) {
                states.push(state + 1);
            }
            index += 1;
        }
        states.sort_unstable();
        states
    }

    /// The positions after consuming the component `name`.
    pub(crate) fn step(&self, states: &[usize], name: &str) -> Vec<usize> {
        let name: Vec<char> = name.chars().collect();
        let mut next = Vec::new();
        for &state in states {
            match self.parts.get(state) {
                Some(Part::AnyDepth) => next.push(state),
                Some(Part::Segment(segment)) if wildcard_match(segment, &name) => next.push(state + 1),
                _ => {}
            }
        }
        next.dedup();
        self.close(next)
    }

    /// Whether the components consumed so far match the whole pattern.
    pub(crate) fn is_match(&self, states: &[usize]) -> bool {
        states.contains(&self.parts.len())
    }

    /// Whether a longer path could still match.
    pub(crate) fn can_continue(&self, states: &[usize]) -> bool {
        states.iter().any(|state| *state < self.parts.len())
    }
}

/// `*` (any run of characters) and `?` (one character) against one name,
/// iteratively with one backtrack point.
fn wildcard_match(pattern: &[char], name: &[char]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
            }
            Some('?') => {
                p += 1;
                n += 1;
            }
            Some(literal) if *literal == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((star_p, star_n)) => {
                    p = star_p + 1;
                    n = star_n + 1;
                    star = Some((star_p, star_n + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, path: &str) -> bool {
        let pattern = Pattern::parse(pattern).unwrap();
        let mut states = pattern.start();
        for component in path.split('/') {
            states = pattern.step(&states, component);
            if states.is_empty() {
                return false;
            }
        }
        pattern.is_match(&states)
    }

    #[test]
    fn wildcards_stay_within_one_component() {
        assert!(wildcard_match(&['*'], &[]));
        assert!(wildcard_match(&"a*c".chars().collect::<Vec<_>>(), &"abbbc".chars().collect::<Vec<_>>()));
        assert!(!wildcard_match(&"a?c".chars().collect::<Vec<_>>(), &"ac".chars().collect::<Vec<_>>()));
        assert!(wildcard_match(&"*.r*s".chars().collect::<Vec<_>>(), &"x.rs.rs".chars().collect::<Vec<_>>()));
        assert!(matches("*.py", "a.py"));
        assert!(!matches("*.py", "d/a.py"));
        assert!(matches("**/*.py", "a.py"));
        assert!(matches("**/*.py", "d/e/a.py"));
        assert!(matches("d/**", "d/e/f"));
        assert!(!matches("d/**/x", "e/x"));
        assert!(matches("d/**/x", "d/x"));
        assert!(matches("[ab].txt", "[ab].txt"), "brackets are literal");
        assert!(!matches("[ab].txt", "a.txt"));
        assert!(matches("é?", "éü"));
    }

    #[test]
    fn bad_patterns_are_refused() {
        assert_eq!(Pattern::parse("/abs").unwrap_err(), "pattern must be relative");
        assert_eq!(Pattern::parse("a/../b").unwrap_err(), "pattern must not contain '..'");
        assert_eq!(Pattern::parse("./").unwrap_err(), "pattern must name at least one component");
        assert_eq!(Pattern::parse("**/**/a").unwrap().parts.len(), 2, "consecutive ** collapse");
    }

    #[test]
    fn case_insensitive_columns_map_back_to_the_original_line() {
        let matcher = Matcher::new("STRASSE", false);
        assert_eq!(matcher.find("in der Straße, strasse"), Some(16));
        let matcher = Matcher::new("i̇x", false);
        assert_eq!(matcher.find("aİX"), Some(2), "İ lowercases to two characters");
        assert_eq!(Matcher::new("b", true).find("ébc"), Some(2));
        assert_eq!(Matcher::new("B", true).find("ébc"), None);
    }

    #[test]
    fn a_walk_checks_the_request_deadline_at_every_path() {
        use std::sync::Arc;
        use std::time::{Duration, Instant};

        use vsh_policy::CallPolicy;
        use vsh_vfs::{SnapshotLimits, VirtualFs};

        use crate::limits::{ExecutionLimits, LimitKind};

        let parent = tempfile::tempdir().unwrap();
        std::fs::write(parent.path().join("a.txt"), b"a").unwrap();
        let dir = Arc::new(vsh_host::CapDir::open(parent.path()).unwrap());
        let mut vfs = VirtualFs::new(dir, vec![], SnapshotLimits::default());
        let policy = CallPolicy::balanced_default(None);
        let limits = ExecutionLimits { max_request_duration: Duration::from_millis(1), ..ExecutionLimits::default() };
        let long_ago = Instant::now().checked_sub(Duration::from_secs(1)).unwrap();
        let mut host = OsHost::new(&mut vfs, &policy, &limits, long_ago);
        // The dispatcher would refuse the call outright; called directly, the
        // walk itself must notice.
        match host.call_tool(Tool::Glob, vec![MontyObject::String("**/*".to_owned())], Vec::new()) {
            Err(Fault::Limit(limit)) => assert_eq!(limit.limit, LimitKind::RequestDuration),
            other => panic!("expected the deadline, got {other:?}"),
        }
    }

    #[test]
    fn missing_arguments_are_listed_as_cpython_does() {
        assert_eq!(name_list(&["a"]), "'a'");
        assert_eq!(name_list(&["a", "b"]), "'a' and 'b'");
        assert_eq!(name_list(&["a", "b", "c"]), "'a', 'b', and 'c'");
        for tool in Tool::ALL {
            assert_eq!(Tool::from_name(tool.name()), Some(tool));
        }
        assert_eq!(Tool::from_name("vsh_exec"), None);
    }
}
