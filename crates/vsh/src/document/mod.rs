//! The JSON documents of vsh's results, one versioned type each: what the
//! command line prints with `--json`, what the MCP server returns as
//! structured content, what the Python SDK's `to_dict()` gives.
//!
//! Each document is a serde type built from the facade's own types (a
//! [`Receipt`](crate::Receipt), a [`TransactionRecord`](crate::TransactionRecord),
//! a [`VshError`](crate::VshError), ...)
//! and carries its schema name (`"schema": "vsh.receipt/1"`). Its JSON
//! Schema is generated from the same type ([`schemas`]), so the two cannot
//! drift; the command line's tests validate real output against the
//! committed schemas in `docs/json/`.
//!
//! A name's version changes when a field is removed or changes meaning;
//! adding a field does not (consumers ignore fields they do not know, and
//! the schemas do not forbid them).

/// A schema-name field: serialized as the name, and in the schema as a
/// constant, so a document of another kind or version fails validation.
macro_rules! schema_name {
    ($type:ident, $name:expr) => {
        /// The schema name of this document, always the same string.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $type;

        impl serde::Serialize for $type {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str($name)
            }
        }

        impl<'de> serde::Deserialize<'de> for $type {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let name = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(deserializer)?;
                if name == $name {
                    Ok($type)
                } else {
                    Err(serde::de::Error::custom(format_args!("expected schema {}, found {name}", $name)))
                }
            }
        }

        impl schemars::JsonSchema for $type {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($type).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string", "const": $name })
            }
        }
    };
}

mod bound;
mod error;
mod event;
mod receipt;
mod record;
mod report;

pub use bound::TextBounds;
pub use error::{ErrorDocument, ErrorKind};
pub use event::{BindingDocument, ContentDocument, EffectDocument, RequestEventDocument};
pub use receipt::{
    ChangeDocument, CommitDocument, DecisionDocument, DenialDocument, ExecutionDocument, KeptDocument, MetricsDocument,
    NodeDocument, ReceiptDocument, ReviewDocument, StampDocument, TimingsDocument, value_json,
};
pub use record::{
    ApprovalDocument, HistoryDocument, LogDocument, PendingDocument, RecordDocument, RunPolicyDocument, ShowDocument,
    TransactionDocument,
};
pub(crate) use report::chain;
pub use report::{
    ConflictDocument, GcDocument, LeftPathDocument, RecoveryDocument, RestoreDocument, SalvageDocument,
    UnresolvedDocument,
};

use schemars::JsonSchema;

/// `vsh.receipt/1`: a run's or commit's receipt.
pub const RECEIPT: &str = "vsh.receipt/1";
/// `vsh.show/1`: a stored transaction's review.
pub const SHOW: &str = "vsh.show/1";
/// `vsh.pending/1`: work waiting for a decision or a commit.
pub const PENDING: &str = "vsh.pending/1";
/// `vsh.record/1`: one transaction's record.
pub const RECORD: &str = "vsh.record/1";
/// `vsh.log/1`: finished work.
pub const LOG: &str = "vsh.log/1";
/// `vsh.gc/1`: what garbage collection removed.
pub const GC: &str = "vsh.gc/1";
/// `vsh.recovery/1`: what recovery of interrupted commits did.
pub const RECOVERY: &str = "vsh.recovery/1";
/// `vsh.restore/1`: what an operator's restore put back.
pub const RESTORE: &str = "vsh.restore/1";
/// `vsh.error/1`: why a request failed and what to do.
pub const ERROR: &str = "vsh.error/1";
/// `vsh.request-event/1`: what a commit hook reviews.
pub const REQUEST_EVENT: &str = "vsh.request-event/1";

/// The schema of the document type `T`, titled with its schema name.
pub fn schema_of<T: JsonSchema>(name: &str) -> schemars::Schema {
    let mut schema = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
    schema.insert("title".into(), name.into());
    schema.insert("$id".into(), format!("https://vsh.invalid/schemas/{name}.json").into());
    schema
}

/// Every document this crate defines, by schema name, with its JSON Schema.
pub fn schemas() -> Vec<(&'static str, schemars::Schema)> {
    vec![
        (RECEIPT, schema_of::<ReceiptDocument>(RECEIPT)),
        (SHOW, schema_of::<ShowDocument>(SHOW)),
        (PENDING, schema_of::<PendingDocument>(PENDING)),
        (LOG, schema_of::<LogDocument>(LOG)),
        (RECORD, schema_of::<RecordDocument>(RECORD)),
        (GC, schema_of::<GcDocument>(GC)),
        (RECOVERY, schema_of::<RecoveryDocument>(RECOVERY)),
        (RESTORE, schema_of::<RestoreDocument>(RESTORE)),
        (ERROR, schema_of::<ErrorDocument>(ERROR)),
        (REQUEST_EVENT, schema_of::<RequestEventDocument>(REQUEST_EVENT)),
    ]
}
