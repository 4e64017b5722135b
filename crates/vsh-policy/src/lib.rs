//! Protected-path rules and the transaction decision: Denied, AutoApproved or PendingApproval.
