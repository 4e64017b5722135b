//! Binding a `vsh_*` call's arguments to its parameters (positionally or by
//! keyword, with `CPython`'s `TypeError` messages) and decoding each one.

use monty_types::{ExcType, MontyException, MontyObject};

use crate::host::Fault;
use crate::path;

/// One parameter of a function: its name, its default (`None` for a required
/// one) and whether it can only be passed by keyword.
pub(super) struct Param {
    name: &'static str,
    default: Option<MontyObject>,
    keyword_only: bool,
}

pub(super) fn required(name: &'static str) -> Param {
    Param { name, default: None, keyword_only: false }
}

pub(super) fn optional(name: &'static str, default: MontyObject) -> Param {
    Param { name, default: Some(default), keyword_only: false }
}

pub(super) fn keyword(name: &'static str, default: MontyObject) -> Param {
    Param { name, default: Some(default), keyword_only: true }
}

pub(super) fn type_error(message: String) -> Fault {
    Fault::Guest(MontyException::new(ExcType::TypeError, Some(message)))
}

pub(super) fn value_error(message: String) -> Fault {
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
pub(super) struct Args<'f> {
    pub(super) func: &'f str,
    values: std::vec::IntoIter<MontyObject>,
    names: Vec<&'static str>,
    position: usize,
}

impl<'f> Args<'f> {
    pub(super) fn new(
        func: &'f str,
        params: Vec<Param>,
        args: Vec<MontyObject>,
        kwargs: Vec<(MontyObject, MontyObject)>,
    ) -> Result<Self, Fault> {
        let names = params.iter().map(|param| param.name).collect();
        let values = bind(func, params, args, kwargs)?;
        Ok(Self { func, values: values.into_iter(), names, position: 0 })
    }

    pub(super) fn next(&mut self) -> (MontyObject, &'static str) {
        let name = self.names[self.position];
        self.position += 1;
        (self.values.next().unwrap_or(MontyObject::None), name)
    }

    pub(super) fn wrong(&self, name: &str, expected: &str, value: &MontyObject) -> Fault {
        type_error(format!("{}() argument '{name}' must be {expected}, not {}", self.func, value.type_name()))
    }

    /// A `str` or a `Path`.
    pub(super) fn path(&mut self) -> Result<String, Fault> {
        match self.next() {
            (MontyObject::String(text) | MontyObject::Path(text), _) => Ok(text),
            (other, name) => Err(self.wrong(name, "str or Path", &other)),
        }
    }

    pub(super) fn string(&mut self) -> Result<String, Fault> {
        match self.next() {
            (MontyObject::String(text), _) => Ok(text),
            (other, name) => Err(self.wrong(name, "str", &other)),
        }
    }

    pub(super) fn boolean(&mut self) -> Result<bool, Fault> {
        match self.next() {
            (MontyObject::Bool(value), _) => Ok(value),
            (other, name) => Err(self.wrong(name, "bool", &other)),
        }
    }

    pub(super) fn integer(&mut self) -> Result<i64, Fault> {
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
    pub(super) fn data(&mut self) -> Result<MontyObject, Fault> {
        match self.next() {
            (value @ (MontyObject::String(_) | MontyObject::Bytes(_)), _) => Ok(value),
            (other, name) => Err(self.wrong(name, "str or bytes", &other)),
        }
    }
}

pub(super) fn root_default() -> MontyObject {
    MontyObject::String(path::VIRTUAL_ROOT.to_owned())
}

/// A non-negative count argument as `usize`, or a `ValueError`.
pub(super) fn count_arg(func: &str, name: &str, value: i64) -> Result<usize, Fault> {
    usize::try_from(value).map_err(|_| value_error(format!("{func}() {name} must not be negative")))
}

/// `results`, or `(results, truncated)` when the caller asked for the flag.
pub(super) fn with_truncation(results: Vec<MontyObject>, truncated: bool, report: bool) -> MontyObject {
    if report {
        MontyObject::Tuple(vec![MontyObject::List(results), MontyObject::Bool(truncated)])
    } else {
        MontyObject::List(results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn missing_arguments_are_listed_as_cpython_does() {
        assert_eq!(name_list(&["a"]), "'a'");
        assert_eq!(name_list(&["a", "b"]), "'a' and 'b'");
        assert_eq!(name_list(&["a", "b", "c"]), "'a', 'b', and 'c'");
    }
}
