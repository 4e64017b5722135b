//! A Monty value as the Python object it stands for
//! (`ResultCompatibility::Python`, which the runtime enforces before a
//! value is ever returned).
//!
//! Scalars, strings, bytes and containers are themselves; a path is a
//! `pathlib.PurePosixPath` (it names a place in the virtual image, not on
//! this machine); dates, times, durations and time zones are `datetime`
//! objects; a named tuple is a `collections.namedtuple` instance of its type
//! name; a builtin type or exception class is that class and an exception an
//! instance of it. What has no Python counterpart outside the sandbox (a
//! function, a class instance, an open file, a cycle) is its `repr` text.

use monty_types::{MontyTimeZone, MontyType};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyFrozenSet, PyList, PySet, PyTuple};
use vsh::MontyObject;

/// `value` as a Python object.
pub(crate) fn value_to_py(py: Python<'_>, value: &MontyObject) -> PyResult<Py<PyAny>> {
    Ok(match value {
        MontyObject::None => py.None(),
        MontyObject::Ellipsis => py.Ellipsis(),
        MontyObject::NotImplemented => py.NotImplemented(),
        MontyObject::Bool(flag) => flag.into_pyobject(py)?.to_owned().into_any().unbind(),
        MontyObject::Int(number) => number.into_pyobject(py)?.into_any().unbind(),
        MontyObject::BigInt(number) => py.import("builtins")?.getattr("int")?.call1((number.to_string(),))?.unbind(),
        MontyObject::Float(number) => number.into_pyobject(py)?.into_any().unbind(),
        MontyObject::String(text) => text.into_pyobject(py)?.into_any().unbind(),
        MontyObject::Bytes(bytes) => PyBytes::new(py, bytes).into_any().unbind(),
        MontyObject::Path(path) => py.import("pathlib")?.getattr("PurePosixPath")?.call1((path,))?.unbind(),
        MontyObject::List(items) => PyList::new(py, values_to_py(py, items)?)?.into_any().unbind(),
        MontyObject::Tuple(items) => PyTuple::new(py, values_to_py(py, items)?)?.into_any().unbind(),
        MontyObject::Set(items) => PySet::new(py, values_to_py(py, items)?)?.into_any().unbind(),
        MontyObject::FrozenSet(items) => PyFrozenSet::new(py, values_to_py(py, items)?)?.into_any().unbind(),
        MontyObject::Dict(pairs) => {
            let dict = PyDict::new(py);
            for (key, item) in pairs {
                dict.set_item(value_to_py(py, key)?, value_to_py(py, item)?)?;
            }
            dict.into_any().unbind()
        }
        MontyObject::NamedTuple { type_name, field_names, values } => {
            let name = type_name.rsplit('.').next().filter(|name| is_identifier(name)).unwrap_or("namedtuple");
            let kwargs = PyDict::new(py);
            kwargs.set_item("rename", true)?;
            let class =
                py.import("collections")?.getattr("namedtuple")?.call((name, field_names.clone()), Some(&kwargs))?;
            class.call1(PyTuple::new(py, values_to_py(py, values)?)?)?.unbind()
        }
        MontyObject::Date(date) => datetime(py, "date")?.call1((date.year, date.month, date.day))?.unbind(),
        MontyObject::DateTime(at) => {
            let kwargs = PyDict::new(py);
            kwargs.set_item("tzinfo", zone(py, at.offset_seconds, at.timezone_name.as_deref())?)?;
            datetime(py, "datetime")?
                .call((at.year, at.month, at.day, at.hour, at.minute, at.second, at.microsecond), Some(&kwargs))?
                .unbind()
        }
        MontyObject::Time(time) => {
            let kwargs = PyDict::new(py);
            kwargs.set_item("tzinfo", zone(py, time.offset_seconds, time.timezone_name.as_deref())?)?;
            kwargs.set_item("fold", time.fold)?;
            datetime(py, "time")?.call((time.hour, time.minute, time.second, time.microsecond), Some(&kwargs))?.unbind()
        }
        MontyObject::TimeDelta(delta) => {
            datetime(py, "timedelta")?.call1((delta.days, delta.seconds, delta.microseconds))?.unbind()
        }
        MontyObject::TimeZone(MontyTimeZone { offset_seconds, name }) => {
            zone(py, Some(*offset_seconds), name.as_deref())?
        }
        MontyObject::Type(ty) => match class_named(py, ty) {
            Some(class) => class.unbind(),
            None => value.py_repr().into_pyobject(py)?.into_any().unbind(),
        },
        MontyObject::Exception { exc_type, arg } => match class_named(py, &MontyType::Exception(*exc_type)) {
            Some(class) => match arg {
                Some(arg) => class.call1((arg,))?.unbind(),
                None => class.call0()?.unbind(),
            },
            None => value.py_repr().into_pyobject(py)?.into_any().unbind(),
        },
        other => other.py_repr().into_pyobject(py)?.into_any().unbind(),
    })
}

/// Each of `values` as a Python object.
fn values_to_py(py: Python<'_>, values: &[MontyObject]) -> PyResult<Vec<Py<PyAny>>> {
    values.iter().map(|value| value_to_py(py, value)).collect()
}

/// A class of the `datetime` module.
fn datetime<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("datetime")?.getattr(name)
}

/// A fixed-offset `datetime.timezone` (UTC when the offset is zero and it
/// has no name), or `None` for a naive value.
fn zone(py: Python<'_>, offset_seconds: Option<i32>, name: Option<&str>) -> PyResult<Py<PyAny>> {
    let Some(seconds) = offset_seconds else { return Ok(py.None()) };
    let offset = datetime(py, "timedelta")?.call1((0, seconds))?;
    let class = datetime(py, "timezone")?;
    Ok(match name {
        Some(name) => class.call1((offset, name))?.unbind(),
        None => class.call1((offset,))?.unbind(),
    })
}

/// The Python class a builtin type or exception names (`int`,
/// `datetime.date`, `ValueError`, `json.JSONDecodeError`), when this
/// interpreter has one.
fn class_named<'py>(py: Python<'py>, ty: &MontyType) -> Option<Bound<'py, PyAny>> {
    if matches!(ty, MontyType::Instance(_)) {
        return None;
    }
    let name = ty.name();
    let class = match name.rsplit_once('.') {
        Some((module, attribute)) => py.import(module).ok()?.getattr(attribute).ok()?,
        None => py.import("builtins").ok()?.getattr(name).ok()?,
    };
    class.is_instance_of::<pyo3::types::PyType>().then_some(class)
}

/// Whether `name` can name a `collections.namedtuple` type.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|first| first == '_' || first.is_ascii_alphabetic())
        && chars.all(|rest| rest == '_' || rest.is_ascii_alphanumeric())
}
