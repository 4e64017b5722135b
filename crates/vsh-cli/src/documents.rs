//! The command line's own JSON documents (`vsh.init/1`, `vsh.doctor/1`,
//! `vsh.policy-check/1`), beside the library's ([`vsh::document`]), and the
//! catalogue of every schema `vsh schema` prints.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `vsh.init/1`.
pub(crate) const INIT: &str = "vsh.init/1";
/// `vsh.doctor/1`.
pub(crate) const DOCTOR: &str = "vsh.doctor/1";
/// `vsh.policy/1`.
pub(crate) const POLICY: &str = "vsh.policy/1";
/// `vsh.demo/1`.
pub(crate) const DEMO: &str = "vsh.demo/1";
/// `vsh.policy-check/1`.
pub(crate) const POLICY_CHECK: &str = "vsh.policy-check/1";

/// What `vsh init` recorded.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub(crate) struct InitDocument {
    /// `vsh.init/1`.
    #[schemars(extend("const" = "vsh.init/1"))]
    pub(crate) schema: String,
    /// What was recorded: a profile or a policy file.
    pub(crate) policy: String,
    /// The recorded policy's digest, 64 hex digits.
    pub(crate) digest: String,
    /// The workspace's directory, the one whose policy this is.
    pub(crate) workspace: String,
}

impl InitDocument {
    pub(crate) fn new(policy: String, digest: String, workspace: String) -> Self {
        Self { schema: INIT.to_owned(), policy, digest, workspace }
    }
}

/// What `vsh demo` did: its three receipts.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub(crate) struct DemoDocument {
    /// `vsh.demo/1`.
    #[schemars(extend("const" = "vsh.demo/1"))]
    pub(crate) schema: String,
    /// Where the example workspace was copied.
    pub(crate) workspace: String,
    /// The preview (nothing written yet).
    pub(crate) preview: vsh::document::ReceiptDocument,
    /// Its commit.
    pub(crate) commit: vsh::document::ReceiptDocument,
    /// A program that reaches for a secret, denied.
    pub(crate) denied: vsh::document::ReceiptDocument,
}

/// `vsh policy show`: the workspace's effective policy.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub(crate) struct PolicyDocument {
    /// `vsh.policy/1`.
    #[schemars(extend("const" = "vsh.policy/1"))]
    pub(crate) schema: String,
    /// The profile it starts from.
    pub(crate) profile: String,
    /// Its digest, 64 hex digits (what transactions made under it bind).
    pub(crate) digest: String,
    /// Whether the workspace recorded it (`vsh init`), or it is the default.
    pub(crate) recorded: bool,
    /// It as a policy file, every threshold written out.
    pub(crate) text: String,
}

/// `vsh policy check FILE`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub(crate) struct PolicyCheckDocument {
    /// `vsh.policy-check/1`.
    #[schemars(extend("const" = "vsh.policy-check/1"))]
    pub(crate) schema: String,
    /// The file checked.
    pub(crate) file: String,
    /// The profile it starts from.
    pub(crate) profile: String,
    /// Its policy's digest, 64 hex digits.
    pub(crate) digest: String,
    /// What in it does nothing, or not what it may seem to (a review rule
    /// whose ratio cannot lower the thresholds', two that differ only in
    /// case): it is valid all the same.
    #[serde(default)]
    pub(crate) notes: Vec<String>,
}

impl PolicyCheckDocument {
    pub(crate) fn new(file: String, profile: String, digest: String, notes: Vec<String>) -> Self {
        Self { schema: POLICY_CHECK.to_owned(), file, profile, digest, notes }
    }
}

/// `vsh doctor`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub(crate) struct DoctorDocument {
    /// `vsh.doctor/1`.
    #[schemars(extend("const" = "vsh.doctor/1"))]
    pub(crate) schema: String,
    /// Whether nothing failed.
    pub(crate) ok: bool,
    /// Every finding, in order.
    pub(crate) checks: Vec<CheckDocument>,
}

impl DoctorDocument {
    pub(crate) fn new(ok: bool, checks: Vec<CheckDocument>) -> Self {
        Self { schema: DOCTOR.to_owned(), ok, checks }
    }
}

/// One finding of `vsh doctor`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub(crate) struct CheckDocument {
    /// What was checked (`landlock`, `worker`, ...).
    pub(crate) name: String,
    /// How it came out.
    pub(crate) status: CheckStatus,
    /// What was found.
    pub(crate) detail: String,
    /// What to do, when it is not ok.
    pub(crate) remedy: Option<String>,
}

/// How a doctor's check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum CheckStatus {
    /// As vsh needs it.
    Ok,
    /// Works, but deserves attention.
    Warn,
    /// vsh cannot do its job here until this is fixed.
    Fail,
    /// Not needed by anything vsh does yet.
    Info,
}

/// Every document the command line prints, by schema name, with its JSON Schema.
pub(crate) fn schemas() -> Vec<(&'static str, schemars::Schema)> {
    let mut all = vsh::document::schemas();
    all.push((INIT, vsh::document::schema_of::<InitDocument>(INIT)));
    all.push((DOCTOR, vsh::document::schema_of::<DoctorDocument>(DOCTOR)));
    all.push((DEMO, vsh::document::schema_of::<DemoDocument>(DEMO)));
    all.push((POLICY, vsh::document::schema_of::<PolicyDocument>(POLICY)));
    all.push((POLICY_CHECK, vsh::document::schema_of::<PolicyCheckDocument>(POLICY_CHECK)));
    all
}

/// The file name `docs/json/` keeps a schema under: `vsh.receipt-1.schema.json`.
pub(crate) fn file_name(name: &str) -> String {
    format!("{}.schema.json", name.replace('/', "-"))
}
