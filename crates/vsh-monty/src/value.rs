//! The host footprint of a returned value, measured without recursion and
//! stopping as soon as it passes the budget.

use monty_types::{MontyObject, MontyType};

/// The deep host footprint of `value` (the sum of
/// [`MontyObject::host_size`] over every value it contains, as
/// [`MontyObject::deep_host_size`] computes it), or `Err(total)` with the
/// running total as soon as it passes `max`.
pub(crate) fn measure(value: &MontyObject, max: u64) -> Result<u64, u64> {
    let mut total: u64 = 0;
    let mut pending: Vec<&MontyObject> = vec![value];
    while let Some(current) = pending.pop() {
        total = total.saturating_add(current.host_size() as u64);
        if total > max {
            return Err(total);
        }
        match current {
            MontyObject::List(items)
            | MontyObject::Tuple(items)
            | MontyObject::Set(items)
            | MontyObject::FrozenSet(items)
            | MontyObject::NamedTuple { values: items, .. } => pending.extend(items.iter()),
            MontyObject::Dict(pairs) => {
                for (key, item) in pairs {
                    pending.push(key);
                    pending.push(item);
                }
            }
            MontyObject::ClassInstance(instance) => {
                for (key, item) in instance.attrs.iter().chain(instance.class_type.attrs.iter()) {
                    pending.push(key);
                    pending.push(item);
                }
            }
            MontyObject::Type(MontyType::Instance(class_type)) => {
                for (key, item) in &class_type.attrs {
                    pending.push(key);
                    pending.push(item);
                }
            }
            _ => {}
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_recursive_measure_and_stops_early() {
        let value = MontyObject::List(vec![
            MontyObject::String("abc".repeat(10)),
            MontyObject::dict(vec![(MontyObject::Int(1), MontyObject::Bytes(vec![0; 50]))]),
            MontyObject::Tuple(vec![MontyObject::None, MontyObject::Path("/workspace/a".into())]),
        ]);
        let expected = value.deep_host_size() as u64;
        assert_eq!(measure(&value, u64::MAX), Ok(expected));
        assert_eq!(measure(&value, expected), Ok(expected));
        assert!(measure(&value, expected - 1).is_err());
    }
}
