//! `vsh show`: a review an operator can act on.

use vsh::{Runtime, TransactionId};

use crate::{Asked, EXIT_ERROR, EXIT_OK, Output, exit_code, print_receipt_next, render, state_exit_code};

/// The digest of the policy that decided `receipt`, when its decision names it.
fn decided_under(receipt: &vsh::Receipt) -> Option<vsh::lower::vsh_types::PolicyDigest> {
    match &receipt.decision {
        vsh::RuntimeDecision::PendingApproval(manifest) => Some(manifest.policy),
        vsh::RuntimeDecision::Denied(manifest) => Some(manifest.policy),
        vsh::RuntimeDecision::AutoApproved => None,
    }
}

/// What `vsh show --full` reviews within: any text file a reviewer may
/// read whole, and a total past any diff an operator reads.
const FULL_REVIEW: vsh::ReviewLimits = vsh::ReviewLimits { max_file_bytes: 64 << 20, max_total_bytes: 1 << 30 };

/// Say on stderr how many changed files a receipt's review left without
/// hunks for their size (`full`: within [`FULL_REVIEW`], else the default
/// limits, and then the `vsh show --full` that shows them).
pub(crate) fn say_left_out(receipt: &vsh::Receipt, full: bool) {
    if let Some(note) = left_out(receipt, full) {
        say!("vsh: {note}");
    }
}

/// What the review of `receipt` (made within [`FULL_REVIEW`] when `full`,
/// else the default limits) left out, and how to see it; `None` when
/// nothing. JSON carries it among the receipt's warnings.
pub(crate) fn left_out(receipt: &vsh::Receipt, full: bool) -> Option<String> {
    let count = |why: vsh::NoHunks| receipt.review.iter().filter(|review| review.hunks == Err(why)).count();
    let (too_large, spent) = (count(vsh::NoHunks::TooLarge), count(vsh::NoHunks::BudgetSpent));
    let left_out = too_large + spent;
    (left_out > 0).then(|| {
        let limits = if full { FULL_REVIEW } else { vsh::ReviewLimits::default() };
        // Each reason with its own count when both apply (ux83 L4: files
        // past the budget for the content read were said to be over the
        // size or the hunks' budget, which none of them was).
        let counted = |n: usize| if n == left_out { String::new() } else { format!("{n} ") };
        let mut why = Vec::new();
        if too_large > 0 {
            why.push(format!("{}over {} a file", counted(too_large), crate::human_bytes(limits.max_file_bytes)));
        }
        if spent > 0 {
            why.push(format!(
                "{}past the review's budget of {} of hunks or {} of content read",
                counted(spent),
                crate::human_bytes(limits.max_total_bytes),
                crate::human_bytes(limits.max_total_bytes.saturating_mul(vsh::lower::vsh_vfs::READ_PER_SHOWN))
            ));
        }
        format!(
            "{left_out} changed file{} not reviewed ({}){}",
            if left_out == 1 { " was" } else { "s were" },
            why.join(", "),
            if full {
                String::new()
            } else {
                // Not yet looked at: some may be binary, which no review shows as hunks.
                format!(": vsh show {} --full reviews them (a binary one has no hunks)", receipt.transaction.short())
            }
        )
    })
}

/// Give `receipt` the review `args` ask for: only the changed paths they
/// name (a directory: every changed path beneath it; a name that matches
/// none is said on stderr), no hunks for `--stat`, within the full limits
/// for `--full`.
fn review_as_asked(
    runtime: &Runtime,
    receipt: &mut vsh::Receipt,
    args: &crate::args::ShowArgs,
    output: Output,
) -> Result<(), Box<dyn std::error::Error>> {
    let (id, full) = (receipt.transaction, args.full);
    if !args.paths.is_empty() {
        // A path asks for itself and, a directory, for every changed path beneath it.
        let mut asked = Vec::new();
        for path in &args.paths {
            let trimmed = path.trim_end_matches('/');
            let named = if trimmed.is_empty() || trimmed == "." {
                vsh::VPath::root()
            } else {
                vsh::VPath::parse(trimmed.strip_prefix("./").unwrap_or(trimmed))
                    .map_err(|error| format!("{path:?} is not a path of the workspace: {error}"))?
            };
            asked.push((path, named));
        }
        let changed = receipt.changes.len();
        receipt.changes.retain(|entry| asked.iter().any(|(_, named)| entry.path.is_within(named)));
        // Nothing it asked for: no review to print (ux62: a whole header, then exit 0).
        if changed > 0 && receipt.changes.is_empty() {
            let listed: Vec<String> = args.paths.iter().map(|path| render::shown(path, false).into_owned()).collect();
            return Err(format!(
                "transaction {} changes none of {} (nor anything beneath): `vsh show {} --stat` lists every path it \
                 changes",
                id.short(),
                listed.join(", "),
                id.short()
            )
            .into());
        }
        for (path, named) in &asked {
            if !receipt.changes.iter().any(|entry| entry.path.is_within(named)) && !output.quiet {
                eprintln!(
                    "vsh: {} is not changed by this transaction (nor anything beneath it)",
                    render::shown(path, false)
                );
            }
        }
        receipt.review.clear();
    }
    if args.stat {
        receipt.review.clear();
    } else {
        let selected: std::collections::BTreeSet<vsh::VPath> =
            receipt.changes.iter().map(|entry| entry.path.clone()).collect();
        let limits = if full { FULL_REVIEW } else { vsh::ReviewLimits::default() };
        if args.protected {
            receipt.review = runtime
                .review_as_operator(id, limits)?
                .into_iter()
                .filter(|review| args.paths.is_empty() || selected.contains(&review.path))
                .collect();
            if !output.quiet {
                say!("vsh: --protected: these hunks include what the policy withholds from programs and agents");
            }
        } else if !args.paths.is_empty() {
            receipt.review = runtime.review_paths(id, limits, &selected)?;
        } else if full {
            receipt.review = runtime.review_within(id, FULL_REVIEW)?;
        } else if receipt.review.is_empty() {
            receipt.review = runtime.review(id)?;
        }
        if !output.quiet {
            say_left_out(receipt, full);
        }
    }
    Ok(())
}

/// `vsh show TX`: the receipt with every changed path's hunks (`full`:
/// within [`FULL_REVIEW`], else the default limits, saying on stderr what
/// they left out), then the record (state, times, approval, expiry), the
/// per-run policy if any, the intent and the program.
pub(crate) fn show(
    runtime: &Runtime,
    id: TransactionId,
    args: &crate::args::ShowArgs,
    json: bool,
    output: Output,
    now: u64,
) -> Result<u8, Box<dyn std::error::Error>> {
    let full = args.full;
    let Some(mut receipt) = runtime.show(id)? else {
        // Denied work keeps its record only; its receipt was printed when it ran.
        let record = runtime.transaction(id)?.ok_or(vsh::VshError::UnknownTransaction(id))?;
        if json {
            crate::print_record(runtime, &record)?;
        } else if !output.quiet {
            println!("transaction  {id}");
            anstream::print!("{}", render::record_text(&record, approver_name(runtime, &record).as_deref(), now));
            anstream::print!("{}", render::history_text(&runtime.history(id)?, now));
            println!("(nothing more is stored for {} work: its receipt went to whoever ran it)", record.state.name());
            if record.state == vsh::TransactionState::RecoveryRequired {
                println!(
                    "next       vsh recover --restore {0} (or, to keep the workspace as it is: vsh recover --keep {0})",
                    id.short()
                );
            }
        }
        return Ok(if output.detailed { state_exit_code(record.state).unwrap_or(EXIT_ERROR) } else { EXIT_OK });
    };
    review_as_asked(runtime, &mut receipt, args, output)?;
    // Work made under a policy since replaced can only be made again.
    let rerun = if runtime.decided_under_another_policy(id) {
        let line = crate::failure::rerun_line(runtime, id);
        Some(if line.starts_with("vsh rerun ") {
            format!("{line} (the policy changed since it was made: approve and commit refuse it)")
        } else {
            line
        })
    } else if matches!(
        receipt.state,
        vsh::TransactionState::Stale | vsh::TransactionState::Expired | vsh::TransactionState::Failed
    ) {
        // (A revert is made again by reverting again, when that can be.)
        Some(crate::failure::rerun_line(runtime, id))
    } else if receipt.state == vsh::TransactionState::Committed
        && let Some(revert) = runtime.reverted_by(id)?
    {
        Some(format!("nothing: reverted by {} (vsh show {})", revert.short(), revert.short()))
    } else {
        None
    };
    if json {
        let record = runtime.transaction(id)?;
        let intent = runtime.stored_program(id)?;
        let mut document = vsh::document::ShowDocument::new(
            &receipt,
            record.as_ref().map(|record| {
                crate::render::record_document(record, Some(&receipt), intent.as_ref())
                    .with_policy_changed(runtime.decided_under_another_policy(id))
                    .with_approver_name(approver_name(runtime, record))
            }),
            &runtime.history(id)?,
            runtime.run_policy(id)?.as_ref(),
            intent.map(|stored| stored.code),
        );
        document.receipt.warnings.extend(left_out(&receipt, full));
        document.receipt.next = render::json_next(&receipt, rerun);
        println!("{}", serde_json::to_string_pretty(&document)?);
        return Ok(exit_code(&receipt, Asked::Review, output.detailed));
    }
    if args.stat && !output.quiet {
        let next = rerun.or_else(|| render::next_step(&receipt));
        anstream::print!("{}", render::receipt_text_listing(&receipt, next, usize::MAX));
    } else {
        print_receipt_next(&receipt, json, output, rerun)?;
    }
    if !output.quiet {
        if let Some(record) = runtime.transaction(id)? {
            anstream::print!("{}", render::record_text(&record, approver_name(runtime, &record).as_deref(), now));
        }
        anstream::print!("{}", render::history_text(&runtime.history(id)?, now));
        if let Some(policy) = runtime.run_policy(id)? {
            println!(
                "policy       made under a per-run policy (profile {}, {}), not the workspace's; \
                 reviewed, approved and committed under it",
                policy.profile.name(),
                policy.digest.short()
            );
        } else if decided_under(&receipt).is_some_and(|digest| digest != runtime.policy().digest()) {
            println!("policy       {}", policy_changed_line(&receipt));
        }
        let program = if args.protected { runtime.program_to_run_again(id)? } else { runtime.stored_program(id)? };
        if let Some(stored) = program {
            anstream::print!("{}", render::program_text(&stored));
        }
    }
    Ok(exit_code(&receipt, Asked::Review, output.detailed))
}

/// What `vsh show` says of work made under a workspace policy replaced
/// since: what approving it does now, and what makes it again, for work
/// that could still be approved; only the fact, for work that is over
/// (ux68 M3: committed work was told `vsh rerun`, which would do it twice).
fn policy_changed_line(receipt: &vsh::Receipt) -> String {
    use vsh::TransactionState as S;
    match receipt.state {
        S::PendingApproval | S::AutoApproved | S::Approved => format!(
            "the workspace's policy changed since this was made: approve refuses it; `vsh rerun {}` makes new work \
             under the policy in force",
            receipt.transaction.short()
        ),
        _ => format!("made under the workspace's policy as it was then, since replaced ({})", receipt.state.name()),
    }
}

/// The name of whoever approved `record`, where the workspace recorded it.
pub(crate) fn approver_name(runtime: &Runtime, record: &vsh::TransactionRecord) -> Option<String> {
    record.approval.as_ref().and_then(|grant| runtime.principal_name(&grant.principal()))
}
