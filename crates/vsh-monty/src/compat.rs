//! [`ResultCompatibility`]: which returned values a caller accepts.
//!
//! `Native` accepts every [`MontyObject`]. `Python` accepts only what a Python
//! binding can project: containers nested at most [`PYTHON_MAX_DEPTH`] deep,
//! and type objects of Python's builtin types and builtin exceptions (not
//! monty's own types, such as `FrozenInstanceError`, `json.JSONDecodeError`,
//! `io.UnsupportedOperation`, `re.PatternError`, `binascii.Error`, iterator or
//! module types, or classes defined in the sandbox). The check runs after the
//! run, before the outcome is returned, so a caller never commits work whose
//! value it then cannot convert.

use std::ops::ControlFlow;

use monty_types::{ExcType, MontyObject, MontyType};

use crate::error::CompatibilityError;

/// The deepest container nesting [`ResultCompatibility::Python`] accepts.
pub const PYTHON_MAX_DEPTH: usize = 200;

/// Which returned values an executor accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ResultCompatibility {
    /// Every value (the default).
    #[default]
    Native,
    /// Only values with a Python projection (see the module documentation).
    Python,
}

impl ResultCompatibility {
    /// Its tag in the executor's configuration digest.
    pub(crate) fn tag(self) -> u8 {
        match self {
            Self::Native => 1,
            Self::Python => 2,
        }
    }

    /// Check `value` under this mode.
    pub fn check(self, value: &MontyObject) -> Result<(), CompatibilityError> {
        match self {
            Self::Native => Ok(()),
            Self::Python => check_python(value),
        }
    }
}

/// Whether a type object has a Python counterpart.
fn type_has_projection(ty: &MontyType) -> bool {
    match ty {
        MontyType::Exception(exc) => !matches!(
            exc,
            ExcType::FrozenInstanceError
                | ExcType::JsonDecodeError
                | ExcType::UnsupportedOperation
                | ExcType::RePatternError
                | ExcType::BinasciiError
        ),
        MontyType::Ellipsis
        | MontyType::Type
        | MontyType::NoneType
        | MontyType::Bool
        | MontyType::Int
        | MontyType::Float
        | MontyType::Range
        | MontyType::Slice
        | MontyType::Date
        | MontyType::DateTime
        | MontyType::TimeDelta
        | MontyType::TimeZone
        | MontyType::Time
        | MontyType::Str
        | MontyType::Bytes
        | MontyType::List
        | MontyType::Tuple
        | MontyType::Dict
        | MontyType::Set
        | MontyType::FrozenSet
        | MontyType::Object
        | MontyType::Path => true,
        _ => false,
    }
}

/// Every type object projectable, and no container [`PYTHON_MAX_DEPTH`] or
/// more containers deep (so at most that many levels of containers), by the
/// one value walk ([`crate::value::walk`]).
fn check_python(value: &MontyObject) -> Result<(), CompatibilityError> {
    let walked = crate::value::walk(value, |current, depth| {
        if let MontyObject::Type(ty) = current
            && !type_has_projection(ty)
        {
            return ControlFlow::Break(CompatibilityError::TypeObject { type_name: ty.name().to_owned() });
        }
        if depth >= PYTHON_MAX_DEPTH && crate::value::is_container(current) {
            return ControlFlow::Break(CompatibilityError::Depth { max: PYTHON_MAX_DEPTH });
        }
        ControlFlow::Continue(())
    });
    match walked {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> MontyObject {
        let mut value = MontyObject::Int(1);
        for _ in 0..levels {
            value = MontyObject::List(vec![value]);
        }
        value
    }

    #[test]
    fn depth_is_counted_in_containers() {
        let python = ResultCompatibility::Python;
        python.check(&nested(PYTHON_MAX_DEPTH)).unwrap();
        assert_eq!(python.check(&nested(PYTHON_MAX_DEPTH + 1)), Err(CompatibilityError::Depth { max: 200 }));
        ResultCompatibility::Native.check(&nested(PYTHON_MAX_DEPTH + 1)).unwrap();
    }

    #[test]
    fn only_projectable_type_objects_pass() {
        let python = ResultCompatibility::Python;
        python.check(&MontyObject::Type(MontyType::Int)).unwrap();
        python.check(&MontyObject::Type(MontyType::Exception(ExcType::ValueError))).unwrap();
        let frozen = MontyObject::List(vec![MontyObject::Type(MontyType::Exception(ExcType::FrozenInstanceError))]);
        assert_eq!(
            python.check(&frozen),
            Err(CompatibilityError::TypeObject { type_name: "FrozenInstanceError".to_owned() })
        );
        assert!(python.check(&MontyObject::Type(MontyType::ListIterator)).is_err());
        ResultCompatibility::Native.check(&frozen).unwrap();
    }
}
