//! The commands that list and tidy the store: `vsh pending`, `vsh log` and
//! `vsh gc`.

use std::fmt::Write as _;

use vsh::{Runtime, TransactionState};

use crate::args::LogArgs;
use crate::{EXIT_OK, render};

/// The states `vsh log` lists: every terminal state.
const FINISHED: [TransactionState; 6] = [
    TransactionState::Committed,
    TransactionState::Rejected,
    TransactionState::Expired,
    TransactionState::Stale,
    TransactionState::Failed,
    TransactionState::Denied,
];

type Outcome = Result<u8, Box<dyn std::error::Error>>;

/// The rows for `records`: each with its receipt and intent when stored.
fn rows(runtime: &Runtime, records: Vec<vsh::TransactionRecord>) -> Vec<render::PendingRow> {
    records
        .into_iter()
        .map(|record| {
            let receipt = runtime.listed_receipt(record.id).ok().flatten();
            let stored = runtime.stored_program(record.id).ok().flatten();
            let id = record.id;
            let mut row = render::PendingRow::new(record, receipt, stored.as_ref());
            // Work made under a policy of its own (`--profile`, `--policy`)
            // is approved and committed under it, whatever the workspace's
            // (ux79 M3: it was listed as made under a policy since replaced).
            row.policy_changed = runtime.policy_since_replaced(id);
            row.approver = crate::show::approver_name(runtime, &row.record);
            // A rerun names the work it ran again (its intent is that work's).
            row.rerun_of = runtime.rerun_origin(id).ok().filter(|origin| *origin != id);
            if let Some(origin) = row.rerun_of {
                let _ = write!(row.label, " (rerun of {})", origin.short());
            }
            row
        })
        .collect()
}

/// The rows as documents.
fn documents(rows: &[render::PendingRow]) -> Vec<vsh::document::TransactionDocument> {
    rows.iter()
        .map(|row| {
            let mut document = vsh::document::TransactionDocument::new(&row.record, row.receipt.as_ref(), &row.intent);
            document.command.clone_from(&row.command);
            document.policy_changed = row.policy_changed;
            document.label.clone_from(&row.label);
            document.rerun_of = row.rerun_of.map(|origin| origin.to_hex());
            if let Some(approval) = &mut document.approval {
                approval.name.clone_from(&row.approver);
            }
            document
        })
        .collect()
}

/// `vsh pending`: work waiting for a decision or a commit.
pub(crate) fn pending(runtime: &Runtime, json: bool, now: u64) -> Outcome {
    // Newest first, as `vsh log` lists.
    let (mut waiting, stale) = runtime.pending_and_stale()?;
    // A commit an operator must settle waits too (ux68 M4: it was in no list).
    let recovering: Vec<_> = runtime
        .transactions()?
        .into_iter()
        .filter(|record| record.state == TransactionState::RecoveryRequired)
        .collect();
    let settle: Vec<String> = recovering.iter().map(|record| record.id.short()).collect();
    waiting.extend(recovering);
    // What went stale is said, with what changed (ux63 1: dropped without a word).
    for found in &stale {
        say!("vsh: {}", crate::render::found_stale_text(found, &crate::failure::what_next(runtime, found.transaction)));
    }
    waiting.sort_by_key(|record| std::cmp::Reverse((record.created_ms, record.id)));
    let rows = rows(runtime, waiting);
    if json {
        println!("{}", serde_json::to_string_pretty(&vsh::document::PendingDocument::new(documents(&rows)))?);
    } else if rows.is_empty() {
        println!("no pending transactions");
    } else {
        anstream::print!("{}", render::pending_table(&rows, now));
        // Work made under a replaced policy whose work is done already is
        // not to run again (ux81 M4): said, with how to drop it.
        let done: Vec<(String, String)> = rows
            .iter()
            .filter(|row| row.policy_changed)
            .filter_map(|row| crate::failure::work_done(runtime, row.record.id).map(|why| (row.record.id.short(), why)))
            .collect();
        for (id, why) in &done {
            println!("{id}: nothing is left to do: {why}; `vsh reject --only {id}` drops it");
        }
        for id in &settle {
            println!(
                "{id} is an interrupted commit whose paths someone else changed meanwhile: `vsh recover` names \
                 them, `vsh recover --restore {id}` puts the workspace back as it was before it, and `vsh recover \
                 --keep {id}` keeps it as it is"
            );
        }
        if rows.len() > 1 {
            // A long queue's shape in one line (ux57 #5).
            // Work made under a policy since replaced is counted apart: it can
            // never be approved or committed (ux74 L6: it counted as "to commit").
            let count = |state: vsh::TransactionState| {
                rows.iter().filter(|row| row.record.state == state && !row.policy_changed).count()
            };
            let interrupted = count(vsh::TransactionState::RecoveryRequired);
            let replaced = rows.iter().filter(|row| row.policy_changed).count() - done.len();
            println!(
                "{} waiting: {} pending approval, {} approved, {} auto-approved (to commit){}{}",
                rows.len(),
                count(vsh::TransactionState::PendingApproval),
                count(vsh::TransactionState::Approved),
                count(vsh::TransactionState::AutoApproved),
                if interrupted > 0 { format!(", {interrupted} interrupted (to recover)") } else { String::new() },
                if replaced > 0 {
                    format!(", {replaced} made under a policy since replaced (to run again)")
                } else {
                    String::new()
                }
            );
        }
    }
    Ok(EXIT_OK)
}

/// `vsh log`: finished work, newest first.
pub(crate) fn log(runtime: &Runtime, log: &LogArgs, now: u64) -> Outcome {
    if let Some(state) = &log.state
        && !FINISHED.iter().any(|finished| finished.name() == state)
    {
        return Err(
            format!("--state {state:?}: give one of committed, rejected, expired, stale, failed, denied").into()
        );
    }
    let mut finished: Vec<_> = runtime
        .transactions()?
        .into_iter()
        .filter(|record| FINISHED.contains(&record.state))
        .filter(|record| log.state.as_deref().is_none_or(|state| record.state.name() == state))
        .collect();
    finished.sort_by_key(|record| std::cmp::Reverse((record.updated_ms, record.id)));
    let total = finished.len();
    finished.truncate(usize::try_from(log.limit).unwrap_or(usize::MAX));
    let rows = rows(runtime, finished);
    if log.common.json {
        let document = vsh::document::LogDocument::new(documents(&rows), total as u64);
        println!("{}", serde_json::to_string_pretty(&document)?);
    } else if rows.is_empty() {
        println!("no finished transactions");
    } else {
        anstream::print!("{}", render::log_table(&rows, now));
        if total > rows.len() {
            println!("... {} older (--limit N lists more)", total - rows.len());
        }
    }
    Ok(EXIT_OK)
}

/// `vsh gc`: the store's retention, and what it removed.
pub(crate) fn gc(runtime: &Runtime, args: &crate::args::GcArgs, quiet: bool, now: u64) -> Outcome {
    let json = args.common.json;
    let mut retention = vsh::RetentionConfig::default();
    if let Some(grace) = args.grace {
        retention.blob_grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
    }
    if args.scratch {
        // `--scratch`: whatever the scratch directories hold is past the bound.
        retention.max_scratch_bytes = Some(0);
    }
    let report = runtime.collect_garbage(now, &retention)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&vsh::document::GcDocument::from(&report))?);
    } else if !quiet {
        print!("{}", render::gc_text(&report, now));
    }
    Ok(EXIT_OK)
}
