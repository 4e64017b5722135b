//! `vsh show`: a review an operator can act on.

use vsh::{Runtime, TransactionId};

use crate::{Asked, Output, exit_code, print_receipt, render};

/// `vsh show TX`: the receipt with every changed path's hunks, then the
/// record (state, times, approval, expiry), the per-run policy if any, the
/// intent and the program.
pub(crate) fn show(
    runtime: &Runtime,
    id: TransactionId,
    json: bool,
    output: Output,
    now: u64,
) -> Result<u8, Box<dyn std::error::Error>> {
    let mut receipt = runtime.show(id)?.ok_or_else(|| format!("transaction {id} has nothing stored to show"))?;
    if receipt.review.is_empty() {
        receipt.review = runtime.review(id)?;
    }
    if json {
        let record = runtime.transaction(id)?;
        let intent = runtime.stored_program(id)?;
        let document = vsh::document::ShowDocument::new(
            &receipt,
            record.as_ref().map(|record| {
                vsh::document::TransactionDocument::new(
                    record,
                    Some(&receipt),
                    intent.as_ref().map_or("", |stored| stored.intent.as_str()),
                )
            }),
            &runtime.history(id)?,
            runtime.run_policy(id)?.as_ref(),
            intent.map(|stored| stored.code),
        );
        println!("{}", serde_json::to_string_pretty(&document)?);
        return Ok(exit_code(&receipt, Asked::Review, output.detailed));
    }
    print_receipt(&receipt, json, output)?;
    if !output.quiet {
        if let Some(record) = runtime.transaction(id)? {
            anstream::print!("{}", render::record_text(&record, now));
        }
        anstream::print!("{}", render::history_text(&runtime.history(id)?, now));
        if let Some(policy) = runtime.run_policy(id)? {
            println!(
                "policy       made under a per-run policy (profile {}, {}), not the workspace's; \
                 reviewed, approved and committed under it",
                policy.profile.name(),
                policy.digest.short()
            );
        }
        if let Some(stored) = runtime.stored_program(id)? {
            anstream::print!("{}", render::program_text(&stored));
        }
    }
    Ok(exit_code(&receipt, Asked::Review, output.detailed))
}
