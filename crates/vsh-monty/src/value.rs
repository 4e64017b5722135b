//! The one walk over a [`MontyObject`] that every bound on a returned value
//! uses: its host footprint (`measure`), its nesting ([`nesting`]) and the
//! Python projection check (`crate::compat`).
//!
//! [`children`] is the only definition of what a value contains: the items of
//! lists, tuples, sets, frozen sets and named tuples, the keys and values of
//! dicts (key, then value), the attributes of a class instance's class and
//! then its own, and the attributes of a class object, each in order. The
//! worker's wire encoding (`crate::worker::wire`) flattens a value in exactly
//! this walk's order. [`walk`] visits every value depth first
//! without recursion, with the number of containers above it.

use std::ops::ControlFlow;

use monty_types::{MontyObject, MontyType};

/// The values `value` holds directly (empty for a scalar).
pub fn children(value: &MontyObject) -> Vec<&MontyObject> {
    fn pairs(pairs: &monty_types::DictPairs) -> Vec<&MontyObject> {
        pairs.iter().flat_map(|(key, item)| [key, item]).collect()
    }
    match value {
        MontyObject::List(items)
        | MontyObject::Tuple(items)
        | MontyObject::Set(items)
        | MontyObject::FrozenSet(items)
        | MontyObject::NamedTuple { values: items, .. } => items.iter().collect(),
        MontyObject::Dict(items) => pairs(items),
        MontyObject::ClassInstance(instance) => {
            let mut out = pairs(&instance.class_type.attrs);
            out.extend(pairs(&instance.attrs));
            out
        }
        MontyObject::Type(MontyType::Instance(class_type)) => pairs(&class_type.attrs),
        _ => Vec::new(),
    }
}

/// Whether `value` is a container (it may hold other values, even if it holds none now).
pub fn is_container(value: &MontyObject) -> bool {
    matches!(
        value,
        MontyObject::List(_)
            | MontyObject::Tuple(_)
            | MontyObject::Set(_)
            | MontyObject::FrozenSet(_)
            | MontyObject::NamedTuple { .. }
            | MontyObject::Dict(_)
            | MontyObject::ClassInstance(_)
            | MontyObject::Type(MontyType::Instance(_))
    )
}

/// Visit `value` and everything it contains, depth first, each with the
/// number of containers above it (0 for `value` itself), until `visit` breaks.
pub fn walk<'v, B>(
    value: &'v MontyObject,
    mut visit: impl FnMut(&'v MontyObject, usize) -> ControlFlow<B>,
) -> ControlFlow<B> {
    let mut pending: Vec<(&'v MontyObject, usize)> = vec![(value, 0)];
    while let Some((current, depth)) = pending.pop() {
        visit(current, depth)?;
        pending.extend(children(current).into_iter().rev().map(|child| (child, depth + 1)));
    }
    ControlFlow::Continue(())
}

/// The deep host footprint of `value` (the sum of
/// [`MontyObject::host_size`] over every value it contains, as
/// [`MontyObject::deep_host_size`] computes it), or `Err(total)` with the
/// running total as soon as it passes `max`.
pub(crate) fn measure(value: &MontyObject, max: u64) -> Result<u64, u64> {
    let mut total: u64 = 0;
    let walked = walk(value, |current, _| {
        total = total.saturating_add(current.host_size() as u64);
        if total > max { ControlFlow::Break(total) } else { ControlFlow::Continue(()) }
    });
    match walked {
        ControlFlow::Continue(()) => Ok(total),
        ControlFlow::Break(total) => Err(total),
    }
}

/// How many levels deep `value` nests (a scalar is 1, `[1]` is 2), counting
/// only until the answer passes `stop_above`: the walk ends at the first value
/// deeper than that, and the result is then `stop_above + 1`.
pub fn nesting(value: &MontyObject, stop_above: usize) -> usize {
    let mut deepest = 0;
    let walked = walk(value, |_, depth| {
        deepest = deepest.max(depth + 1);
        if deepest > stop_above { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    });
    if walked.is_break() { stop_above + 1 } else { deepest }
}

#[cfg(test)]
mod tests {
    use monty_types::{DictPairs, MontyClassInstance, MontyClassType, MontyUuid};

    use super::*;

    fn instance(attrs: Vec<(MontyObject, MontyObject)>, class_attrs: Vec<(MontyObject, MontyObject)>) -> MontyObject {
        let class_type = MontyClassType {
            name: "C".to_owned(),
            id: MontyUuid::from_bytes([1; 16]),
            host_defined: false,
            is_dataclass: true,
            attrs: DictPairs::from(class_attrs),
        };
        MontyObject::ClassInstance(Box::new(MontyClassInstance {
            class_type,
            instance_id: MontyUuid::from_bytes([2; 16]),
            attrs: DictPairs::from(attrs),
        }))
    }

    #[test]
    fn agrees_with_the_recursive_measure_and_stops_early() {
        let value = MontyObject::List(vec![
            MontyObject::String("abc".repeat(10)),
            MontyObject::dict(vec![(MontyObject::Int(1), MontyObject::Bytes(vec![0; 50]))]),
            MontyObject::Tuple(vec![MontyObject::None, MontyObject::Path("/workspace/a".into())]),
            instance(
                vec![(MontyObject::String("x".into()), MontyObject::Bytes(vec![1; 30]))],
                vec![(MontyObject::String("k".into()), MontyObject::String("class".into()))],
            ),
        ]);
        let expected = value.deep_host_size() as u64;
        assert_eq!(measure(&value, u64::MAX), Ok(expected));
        assert_eq!(measure(&value, expected), Ok(expected));
        assert!(measure(&value, expected - 1).is_err());
    }

    #[test]
    fn nesting_descends_into_every_container_class_instances_included() {
        assert_eq!(nesting(&MontyObject::Int(1), 10), 1);
        assert_eq!(nesting(&MontyObject::List(vec![]), 10), 1);
        let mut deep = MontyObject::Int(1);
        for _ in 0..5 {
            deep = MontyObject::List(vec![deep]);
        }
        assert_eq!(nesting(&deep, 10), 6);
        assert_eq!(nesting(&deep, 3), 4, "stops once past the bound");
        // Hidden under an instance attribute, a class attribute, a dict value.
        let under_instance = instance(vec![(MontyObject::String("a".into()), deep.clone())], vec![]);
        assert_eq!(nesting(&under_instance, 10), 7);
        let under_class = instance(vec![], vec![(MontyObject::String("a".into()), deep.clone())]);
        assert_eq!(nesting(&under_class, 10), 7);
        let under_dict = MontyObject::dict(vec![(MontyObject::None, deep)]);
        assert_eq!(nesting(&under_dict, 10), 7);
    }

    #[test]
    fn the_walk_visits_in_order_with_depths_and_stops_when_asked() {
        let value = MontyObject::List(vec![
            MontyObject::Int(1),
            MontyObject::List(vec![MontyObject::Int(2)]),
            MontyObject::Int(3),
        ]);
        let mut seen = Vec::new();
        let walked: ControlFlow<()> = walk(&value, |current, depth| {
            seen.push((current.clone(), depth));
            ControlFlow::Continue(())
        });
        assert!(walked.is_continue());
        let ints: Vec<(i64, usize)> = seen
            .iter()
            .filter_map(|(value, depth)| if let MontyObject::Int(n) = value { Some((*n, *depth)) } else { None })
            .collect();
        assert_eq!(ints, vec![(1, 1), (2, 2), (3, 1)]);
        let mut count = 0;
        let stopped = walk(&value, |_, _| {
            count += 1;
            if count == 2 { ControlFlow::Break("stop") } else { ControlFlow::Continue(()) }
        });
        assert_eq!(stopped, ControlFlow::Break("stop"));
        assert_eq!(count, 2);
    }
}
