//! Values and OS calls as the worker sends them to the parent.
//!
//! The parent never decodes a nested [`MontyObject`] from the worker with
//! serde: a hostile worker could nest a value a million levels deep in a
//! small frame, and serde's recursive decoding (or the value's recursive
//! `Drop`) would overflow the parent's stack. Instead a value travels as a
//! flat [`WireValue`]: a pre-order list of nodes, where a container carries
//! only its length, and a scalar carries the postcard encoding of a
//! non-container [`MontyObject`], whose variant tag the parent checks before
//! decoding it. The parent rebuilds the value with an explicit stack and a
//! depth bound. OS calls travel as [`WireOsCall`], a mirror of
//! [`OsFunctionCall`] whose only nested payload (`os.getenv`'s default) is a
//! [`WireValue`] too.
//!
//! In the other direction (parent to worker) values are the parent's own and
//! shallow, so they travel as plain serde values.

use std::ops::ControlFlow;
use std::sync::OnceLock;

use monty_types::{
    DictPairs, FileMode, GetenvArgs, MkdirCallArgs, MontyClassInstance, MontyClassType, MontyObject, MontyPath,
    MontyTimeZone, MontyType, MontyUuid, OpenCallArgs, OsFunctionCall, PathBytesDataArgs, PathStringDataArgs,
    RenameCallArgs,
};
use serde::{Deserialize, Serialize};

/// One node of a flattened value.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum WireNode {
    /// A non-container value, postcard-encoded as a [`MontyObject`].
    Scalar(Vec<u8>),
    /// A list of the next `n` values.
    List(u32),
    /// A tuple of the next `n` values.
    Tuple(u32),
    /// A set of the next `n` values.
    Set(u32),
    /// A frozenset of the next `n` values.
    FrozenSet(u32),
    /// A dict of the next `n` key/value pairs (2n values).
    Dict(u32),
    /// A named tuple of the next `n` values.
    NamedTuple {
        /// Its type name.
        type_name: String,
        /// Its field names.
        field_names: Vec<String>,
        /// How many values follow.
        len: u32,
    },
    /// A class type object; its attributes follow as `attrs` pairs.
    ClassType {
        /// The class, without its attributes.
        class: ClassHeader,
        /// How many attribute pairs follow.
        attrs: u32,
    },
    /// A class instance; its class's attribute pairs follow, then its own.
    Instance {
        /// The class, without its attributes.
        class: ClassHeader,
        /// The instance's identity.
        instance_id: MontyUuid,
        /// How many class attribute pairs follow.
        class_attrs: u32,
        /// How many instance attribute pairs follow them.
        attrs: u32,
    },
}

/// A [`MontyClassType`] without its attributes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ClassHeader {
    name: String,
    id: MontyUuid,
    host_defined: bool,
    is_dataclass: bool,
}

impl ClassHeader {
    fn of(class: &MontyClassType) -> Self {
        Self {
            name: class.name.clone(),
            id: class.id,
            host_defined: class.host_defined,
            is_dataclass: class.is_dataclass,
        }
    }

    fn with_attrs(self, attrs: DictPairs) -> MontyClassType {
        MontyClassType {
            name: self.name,
            id: self.id,
            host_defined: self.host_defined,
            is_dataclass: self.is_dataclass,
            attrs,
        }
    }
}

/// A value as a flat pre-order list of nodes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WireValue(Vec<WireNode>);

/// Why a [`WireValue`] was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireError {
    /// Nested deeper than allowed.
    TooDeep(usize),
    /// Not a well-formed value.
    Malformed(&'static str),
}

fn len32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

impl WireValue {
    /// A value made of these nodes, well-formed or not (for test hooks).
    #[cfg(feature = "test-hooks")]
    pub(crate) fn from_nodes(nodes: Vec<WireNode>) -> Self {
        Self(nodes)
    }

    /// Flatten `value` in the order of the one value walk
    /// ([`crate::value::walk`]): each value's node, then its children's.
    pub(crate) fn flatten(value: &MontyObject) -> WireValue {
        let mut nodes = Vec::new();
        let walked: ControlFlow<()> = crate::value::walk(value, |value, _| {
            nodes.push(node_of(value));
            ControlFlow::Continue(())
        });
        debug_assert!(walked.is_continue());
        WireValue(nodes)
    }

    /// Rebuild the value, refusing nesting deeper than `max_depth` and any
    /// malformed node, without recursion.
    pub(crate) fn rebuild(self, max_depth: usize) -> Result<MontyObject, WireError> {
        let total = self.0.len();
        let mut nodes = self.0.into_iter();
        let mut stack: Vec<Partial> = Vec::new();
        let mut consumed = 0usize;
        loop {
            let node = nodes.next().ok_or(WireError::Malformed("value ends early"))?;
            consumed += 1;
            let remaining = total - consumed;
            let mut finished = match Partial::open(node, remaining)? {
                Opened::Done(value) => value,
                Opened::Container(partial) => {
                    if stack.len() >= max_depth {
                        return Err(WireError::TooDeep(max_depth));
                    }
                    stack.push(partial);
                    continue;
                }
            };
            // Hand the finished value to its parents, closing every parent
            // it completes.
            loop {
                let Some(top) = stack.last_mut() else {
                    if nodes.next().is_some() {
                        return Err(WireError::Malformed("trailing nodes after the value"));
                    }
                    return Ok(finished);
                };
                top.items.push(finished);
                if top.items.len() < top.wanted {
                    break;
                }
                let full = stack.pop().expect("non-empty");
                finished = full.close();
            }
        }
    }
}

/// The node of one value: a container's header (its children follow it), or
/// a scalar's postcard bytes.
fn node_of(value: &MontyObject) -> WireNode {
    match value {
        MontyObject::List(items) => WireNode::List(len32(items.len())),
        MontyObject::Tuple(items) => WireNode::Tuple(len32(items.len())),
        MontyObject::Set(items) => WireNode::Set(len32(items.len())),
        MontyObject::FrozenSet(items) => WireNode::FrozenSet(len32(items.len())),
        MontyObject::NamedTuple { type_name, field_names, values } => WireNode::NamedTuple {
            type_name: type_name.clone(),
            field_names: field_names.clone(),
            len: len32(values.len()),
        },
        MontyObject::Dict(pairs) => WireNode::Dict(len32(pairs.len())),
        MontyObject::Type(MontyType::Instance(class)) => {
            WireNode::ClassType { class: ClassHeader::of(class), attrs: len32(class.attrs.len()) }
        }
        MontyObject::ClassInstance(instance) => WireNode::Instance {
            class: ClassHeader::of(&instance.class_type),
            instance_id: instance.instance_id,
            class_attrs: len32(instance.class_type.attrs.len()),
            attrs: len32(instance.attrs.len()),
        },
        MontyObject::Ellipsis
        | MontyObject::NotImplemented
        | MontyObject::None
        | MontyObject::Bool(_)
        | MontyObject::Int(_)
        | MontyObject::BigInt(_)
        | MontyObject::Float(_)
        | MontyObject::String(_)
        | MontyObject::Bytes(_)
        | MontyObject::Date(_)
        | MontyObject::DateTime(_)
        | MontyObject::Time(_)
        | MontyObject::TimeDelta(_)
        | MontyObject::TimeZone(_)
        | MontyObject::Exception { .. }
        | MontyObject::Type(_)
        | MontyObject::BuiltinFunction(_)
        | MontyObject::Path(_)
        | MontyObject::FileHandle(_)
        | MontyObject::Function { .. }
        | MontyObject::Repr(_)
        | MontyObject::Cycle(..) => WireNode::Scalar(postcard::to_allocvec(value).unwrap_or_default()),
    }
}

/// A container being rebuilt.
struct Partial {
    kind: WireNode,
    wanted: usize,
    items: Vec<MontyObject>,
}

enum Opened {
    Done(MontyObject),
    Container(Partial),
}

/// The postcard tags of [`MontyObject`] variants that may hold other values,
/// and of [`MontyType::Instance`], computed from the encoding itself.
struct Tags {
    containers: Vec<u8>,
    type_tag: u8,
    instance_type_tag: u8,
}

fn first_byte(value: &impl Serialize) -> u8 {
    postcard::to_allocvec(value).ok().and_then(|bytes| bytes.first().copied()).unwrap_or(u8::MAX)
}

fn tags() -> &'static Tags {
    static TAGS: OnceLock<Tags> = OnceLock::new();
    TAGS.get_or_init(|| {
        let class = MontyClassType {
            name: String::new(),
            id: MontyUuid::from_bytes([0; 16]),
            host_defined: false,
            is_dataclass: false,
            attrs: DictPairs::default(),
        };
        let instance = MontyClassInstance {
            class_type: class.clone(),
            instance_id: MontyUuid::from_bytes([0; 16]),
            attrs: DictPairs::default(),
        };
        let containers = vec![
            first_byte(&MontyObject::List(Vec::new())),
            first_byte(&MontyObject::Tuple(Vec::new())),
            first_byte(&MontyObject::Set(Vec::new())),
            first_byte(&MontyObject::FrozenSet(Vec::new())),
            first_byte(&MontyObject::Dict(DictPairs::default())),
            first_byte(&MontyObject::NamedTuple {
                type_name: String::new(),
                field_names: Vec::new(),
                values: Vec::new(),
            }),
            first_byte(&MontyObject::ClassInstance(Box::new(instance))),
        ];
        Tags {
            containers,
            type_tag: first_byte(&MontyObject::Type(MontyType::Int)),
            instance_type_tag: first_byte(&MontyType::Instance(Box::new(class))),
        }
    })
}

/// Decode a scalar node, after checking that its variant holds no values.
fn decode_scalar(bytes: &[u8]) -> Result<MontyObject, WireError> {
    let tags = tags();
    let tag = *bytes.first().ok_or(WireError::Malformed("empty scalar"))?;
    if tag >= 0x80 || tags.containers.contains(&tag) {
        return Err(WireError::Malformed("scalar holds a container"));
    }
    if tag == tags.type_tag {
        let inner = *bytes.get(1).ok_or(WireError::Malformed("empty type object"))?;
        if inner >= 0x80 || inner == tags.instance_type_tag {
            return Err(WireError::Malformed("scalar holds a class"));
        }
    }
    match postcard::take_from_bytes::<MontyObject>(bytes) {
        Ok((value, [])) => Ok(value),
        Ok(_) => Err(WireError::Malformed("trailing bytes in a scalar")),
        Err(_) => Err(WireError::Malformed("undecodable scalar")),
    }
}

impl Partial {
    /// Start a node: a scalar is done at once, as is an empty container.
    fn open(node: WireNode, remaining: usize) -> Result<Opened, WireError> {
        let wanted = match &node {
            WireNode::Scalar(bytes) => return decode_scalar(bytes).map(Opened::Done),
            WireNode::List(n) | WireNode::Tuple(n) | WireNode::Set(n) | WireNode::FrozenSet(n) => *n as usize,
            WireNode::NamedTuple { len, field_names, .. } => {
                if field_names.len() != *len as usize {
                    return Err(WireError::Malformed("named tuple fields and values differ"));
                }
                *len as usize
            }
            WireNode::Dict(n) | WireNode::ClassType { attrs: n, .. } => (*n as usize).saturating_mul(2),
            WireNode::Instance { class_attrs, attrs, .. } => {
                (*class_attrs as usize + *attrs as usize).saturating_mul(2)
            }
        };
        if wanted > remaining {
            return Err(WireError::Malformed("container longer than the value"));
        }
        let partial = Partial { kind: node, wanted, items: Vec::with_capacity(wanted) };
        Ok(if wanted == 0 { Opened::Done(partial.close()) } else { Opened::Container(partial) })
    }

    /// The finished container.
    fn close(self) -> MontyObject {
        fn pairs(items: impl Iterator<Item = MontyObject>) -> DictPairs {
            let mut items = items;
            let mut out = Vec::new();
            while let (Some(key), Some(value)) = (items.next(), items.next()) {
                out.push((key, value));
            }
            DictPairs::from(out)
        }
        match self.kind {
            WireNode::List(_) => MontyObject::List(self.items),
            WireNode::Tuple(_) => MontyObject::Tuple(self.items),
            WireNode::Set(_) => MontyObject::Set(self.items),
            WireNode::FrozenSet(_) => MontyObject::FrozenSet(self.items),
            WireNode::Dict(_) => MontyObject::Dict(pairs(self.items.into_iter())),
            WireNode::NamedTuple { type_name, field_names, .. } => {
                MontyObject::NamedTuple { type_name, field_names, values: self.items }
            }
            WireNode::ClassType { class, .. } => {
                MontyObject::Type(MontyType::Instance(Box::new(class.with_attrs(pairs(self.items.into_iter())))))
            }
            WireNode::Instance { class, instance_id, class_attrs, .. } => {
                let mut items = self.items.into_iter();
                let class_pairs = pairs(items.by_ref().take(class_attrs as usize * 2));
                let own = pairs(items);
                MontyObject::ClassInstance(Box::new(MontyClassInstance {
                    class_type: class.with_attrs(class_pairs),
                    instance_id,
                    attrs: own,
                }))
            }
            WireNode::Scalar(_) => unreachable!("scalars are never opened as containers"),
        }
    }
}

/// [`OsFunctionCall`] on the wire: the same variants, in the same order, with
/// paths as strings and `os.getenv`'s default as a [`WireValue`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum WireOsCall {
    Exists(String),
    IsFile(String),
    IsDir(String),
    IsSymlink(String),
    ReadText(String),
    ReadBytes(String),
    Stat(String),
    Iterdir(String),
    Resolve(String),
    Absolute(String),
    WriteText(String, String),
    AppendText(String, String),
    WriteBytes(String, Vec<u8>),
    AppendBytes(String, Vec<u8>),
    Open(String, FileMode),
    Mkdir { path: String, parents: bool, exist_ok: bool },
    Unlink(String),
    Rmdir(String),
    Rename(String, String),
    Getenv { key: String, default: WireValue },
    GetEnviron,
    DateToday,
    DateTimeNow(Option<MontyTimeZone>),
}

impl WireOsCall {
    /// The worker's side: one exhaustive match, so a new monty variant is a
    /// compile error here.
    pub(crate) fn from_call(call: OsFunctionCall) -> Self {
        match call {
            OsFunctionCall::Exists(path) => Self::Exists(path.into_string()),
            OsFunctionCall::IsFile(path) => Self::IsFile(path.into_string()),
            OsFunctionCall::IsDir(path) => Self::IsDir(path.into_string()),
            OsFunctionCall::IsSymlink(path) => Self::IsSymlink(path.into_string()),
            OsFunctionCall::ReadText(path) => Self::ReadText(path.into_string()),
            OsFunctionCall::ReadBytes(path) => Self::ReadBytes(path.into_string()),
            OsFunctionCall::Stat(path) => Self::Stat(path.into_string()),
            OsFunctionCall::Iterdir(path) => Self::Iterdir(path.into_string()),
            OsFunctionCall::Resolve(path) => Self::Resolve(path.into_string()),
            OsFunctionCall::Absolute(path) => Self::Absolute(path.into_string()),
            OsFunctionCall::WriteText(PathStringDataArgs { path, data }) => Self::WriteText(path.into_string(), data),
            OsFunctionCall::AppendText(PathStringDataArgs { path, data }) => Self::AppendText(path.into_string(), data),
            OsFunctionCall::WriteBytes(PathBytesDataArgs { path, data }) => Self::WriteBytes(path.into_string(), data),
            OsFunctionCall::AppendBytes(PathBytesDataArgs { path, data }) => {
                Self::AppendBytes(path.into_string(), data)
            }
            OsFunctionCall::Open(OpenCallArgs { path, mode }) => Self::Open(path.into_string(), mode),
            OsFunctionCall::Mkdir(MkdirCallArgs { path, parents, exist_ok }) => {
                Self::Mkdir { path: path.into_string(), parents, exist_ok }
            }
            OsFunctionCall::Unlink(path) => Self::Unlink(path.into_string()),
            OsFunctionCall::Rmdir(path) => Self::Rmdir(path.into_string()),
            OsFunctionCall::Rename(RenameCallArgs { src, dst }) => Self::Rename(src.into_string(), dst.into_string()),
            OsFunctionCall::Getenv(GetenvArgs { key, default }) => {
                Self::Getenv { key, default: WireValue::flatten(&default) }
            }
            OsFunctionCall::GetEnviron => Self::GetEnviron,
            OsFunctionCall::DateToday => Self::DateToday,
            OsFunctionCall::DateTimeNow(zone) => Self::DateTimeNow(zone),
        }
    }

    /// The parent's side.
    pub(crate) fn into_call(self, max_depth: usize) -> Result<OsFunctionCall, WireError> {
        let path = MontyPath::new;
        Ok(match self {
            Self::Exists(p) => OsFunctionCall::Exists(path(p)),
            Self::IsFile(p) => OsFunctionCall::IsFile(path(p)),
            Self::IsDir(p) => OsFunctionCall::IsDir(path(p)),
            Self::IsSymlink(p) => OsFunctionCall::IsSymlink(path(p)),
            Self::ReadText(p) => OsFunctionCall::ReadText(path(p)),
            Self::ReadBytes(p) => OsFunctionCall::ReadBytes(path(p)),
            Self::Stat(p) => OsFunctionCall::Stat(path(p)),
            Self::Iterdir(p) => OsFunctionCall::Iterdir(path(p)),
            Self::Resolve(p) => OsFunctionCall::Resolve(path(p)),
            Self::Absolute(p) => OsFunctionCall::Absolute(path(p)),
            Self::WriteText(p, data) => OsFunctionCall::WriteText(PathStringDataArgs { path: path(p), data }),
            Self::AppendText(p, data) => OsFunctionCall::AppendText(PathStringDataArgs { path: path(p), data }),
            Self::WriteBytes(p, data) => OsFunctionCall::WriteBytes(PathBytesDataArgs { path: path(p), data }),
            Self::AppendBytes(p, data) => OsFunctionCall::AppendBytes(PathBytesDataArgs { path: path(p), data }),
            Self::Open(p, mode) => OsFunctionCall::Open(OpenCallArgs { path: path(p), mode }),
            Self::Mkdir { path: p, parents, exist_ok } => {
                OsFunctionCall::Mkdir(MkdirCallArgs { path: path(p), parents, exist_ok })
            }
            Self::Unlink(p) => OsFunctionCall::Unlink(path(p)),
            Self::Rmdir(p) => OsFunctionCall::Rmdir(path(p)),
            Self::Rename(src, dst) => OsFunctionCall::Rename(RenameCallArgs { src: path(src), dst: path(dst) }),
            Self::Getenv { key, default } => {
                OsFunctionCall::Getenv(GetenvArgs { key, default: default.rebuild(max_depth)? })
            }
            Self::GetEnviron => OsFunctionCall::GetEnviron,
            Self::DateToday => OsFunctionCall::DateToday,
            Self::DateTimeNow(zone) => OsFunctionCall::DateTimeNow(zone),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(value: &MontyObject) -> MontyObject {
        let wire = WireValue::flatten(value);
        let bytes = postcard::to_allocvec(&wire).unwrap();
        let decoded: WireValue = postcard::from_bytes(&bytes).unwrap();
        decoded.rebuild(64).unwrap()
    }

    #[test]
    fn values_round_trip() {
        let class = MontyClassType {
            name: "Point".to_owned(),
            id: MontyUuid::from_bytes([7; 16]),
            host_defined: false,
            is_dataclass: true,
            attrs: DictPairs::from(vec![(MontyObject::String("k".into()), MontyObject::Int(1))]),
        };
        let value = MontyObject::List(vec![
            MontyObject::Int(1),
            MontyObject::dict(vec![(
                MontyObject::String("a".into()),
                MontyObject::Tuple(vec![MontyObject::None, MontyObject::Bytes(vec![1, 2])]),
            )]),
            MontyObject::NamedTuple {
                type_name: "os.stat_result".into(),
                field_names: vec!["x".into()],
                values: vec![MontyObject::Float(1.5)],
            },
            MontyObject::List(vec![]),
            MontyObject::Type(MontyType::Str),
            MontyObject::Type(MontyType::Instance(Box::new(class.clone()))),
            MontyObject::ClassInstance(Box::new(MontyClassInstance {
                class_type: class,
                instance_id: MontyUuid::from_bytes([9; 16]),
                attrs: DictPairs::from(vec![(MontyObject::String("x".into()), MontyObject::Int(3))]),
            })),
            MontyObject::Set(vec![MontyObject::Path("/workspace/a".into())]),
        ]);
        assert_eq!(round_trip(&value), value);
    }

    #[test]
    fn depth_is_bounded_without_recursion() {
        let nodes = (0..1_000_000).map(|_| WireNode::List(1)).chain([WireNode::Scalar(vec![2])]).collect();
        assert_eq!(WireValue(nodes).rebuild(100).unwrap_err(), WireError::TooDeep(100));
    }

    #[test]
    fn malformed_values_are_refused() {
        let hidden_list = postcard::to_allocvec(&MontyObject::List(vec![MontyObject::Int(1)])).unwrap();
        assert!(matches!(WireValue(vec![WireNode::Scalar(hidden_list)]).rebuild(8), Err(WireError::Malformed(_))));
        let class_type = postcard::to_allocvec(&MontyObject::Type(MontyType::Instance(Box::new(MontyClassType {
            name: String::new(),
            id: MontyUuid::from_bytes([0; 16]),
            host_defined: false,
            is_dataclass: false,
            attrs: DictPairs::default(),
        }))))
        .unwrap();
        assert!(matches!(WireValue(vec![WireNode::Scalar(class_type)]).rebuild(8), Err(WireError::Malformed(_))));
        assert!(WireValue(vec![WireNode::List(3), WireNode::Scalar(vec![2])]).rebuild(8).is_err());
        assert!(WireValue(vec![]).rebuild(8).is_err());
        let two = vec![WireNode::Scalar(vec![2]), WireNode::Scalar(vec![2])];
        assert!(matches!(WireValue(two).rebuild(8), Err(WireError::Malformed("trailing nodes after the value"))));
    }

    #[test]
    fn os_calls_round_trip() {
        let call = OsFunctionCall::Getenv(GetenvArgs { key: "HOME".into(), default: MontyObject::List(vec![]) });
        let back = WireOsCall::from_call(call).into_call(8).unwrap();
        assert!(matches!(back, OsFunctionCall::Getenv(GetenvArgs { default: MontyObject::List(_), .. })));
        let call =
            OsFunctionCall::Mkdir(MkdirCallArgs { path: MontyPath::new("d".into()), parents: true, exist_ok: false });
        let back = WireOsCall::from_call(call).into_call(8).unwrap();
        assert!(matches!(back, OsFunctionCall::Mkdir(MkdirCallArgs { parents: true, exist_ok: false, .. })));
    }
}
