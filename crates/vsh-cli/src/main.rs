//! The `vsh` command line: run agent programs against a virtual image of a
//! workspace, preview or commit their changes, and print receipts.
//!
//! Exit codes tell a script what happened without parsing output:
//! 0 committed, 3 auto-approved preview (not committed), 4 pending approval,
//! 5 denied, 1 error, 2 usage.

#![forbid(unsafe_code)]

mod args;
mod demo;
mod render;

use std::io::Read;
use std::process::ExitCode;

use vsh::{RunRequest, Runtime, RuntimeConfig, RuntimeDecision, TransactionState};

use crate::args::{Command, RunArgs, TxAction, TxArgs};

/// Exit code: the transaction was committed.
const EXIT_COMMITTED: u8 = 0;
/// Exit code: an error.
const EXIT_ERROR: u8 = 1;
/// Exit code: bad usage.
const EXIT_USAGE: u8 = 2;
/// Exit code: an auto-approved preview (nothing written).
const EXIT_AUTO_APPROVED: u8 = 3;
/// Exit code: the transaction waits for approval.
const EXIT_PENDING: u8 = 4;
/// Exit code: policy denied the transaction.
const EXIT_DENIED: u8 = 5;

/// The argument that makes this binary serve as its own confined Monty worker.
const WORKER_ARGUMENT: &str = "__vsh-monty-worker";

// The worker's memory budget is enforced by monty's limited allocator; with no
// limit set (the command line itself) it only counts.
#[global_allocator]
static ALLOCATOR: monty_alloc::LimitedAllocator = monty_alloc::LimitedAllocator;

fn main() -> ExitCode {
    if std::env::args_os().nth(1).is_some_and(|argument| argument == WORKER_ARGUMENT) {
        return vsh::lower::vsh_monty::worker_process::worker_main();
    }
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let command = match args::parse(&arguments) {
        Ok(command) => command,
        Err(message) => {
            eprintln!("vsh: {message}\n\n{}", args::USAGE);
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let result = match command {
        Command::Help => {
            println!("{}", args::USAGE);
            Ok(EXIT_COMMITTED)
        }
        Command::Version => {
            println!("vsh {} ({})", vsh::VERSION, vsh::engine_kind());
            Ok(EXIT_COMMITTED)
        }
        Command::Run(run) => run_command(&run),
        Command::Tx(tx) => tx_command(&tx),
        Command::Demo => demo::run(),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("vsh: {}", render::error_chain(error.as_ref()));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// A runtime configuration whose Monty worker is this very binary, confined
/// by the sandbox like any worker (so the command line needs no second binary).
pub(crate) fn runtime_config(workspace: &std::path::Path) -> Result<RuntimeConfig, Box<dyn std::error::Error>> {
    let exe = std::env::current_exe()?;
    let worker = vsh::WorkerConfig::new(exe).with_args([WORKER_ARGUMENT]);
    Ok(RuntimeConfig::new(workspace).with_worker(worker))
}

/// The exit code for a receipt.
pub(crate) fn exit_code(receipt: &vsh::Receipt) -> u8 {
    match (&receipt.decision, receipt.state) {
        (_, TransactionState::Committed) => EXIT_COMMITTED,
        (RuntimeDecision::Denied(_), _) => EXIT_DENIED,
        (RuntimeDecision::PendingApproval(_), _) => EXIT_PENDING,
        (RuntimeDecision::AutoApproved, _) => EXIT_AUTO_APPROVED,
    }
}

fn run_command(run: &RunArgs) -> Result<u8, Box<dyn std::error::Error>> {
    let code = if run.program == "-" {
        let mut code = String::new();
        std::io::stdin().read_to_string(&mut code)?;
        code
    } else {
        std::fs::read_to_string(&run.program).map_err(|error| format!("cannot read {}: {error}", run.program))?
    };
    let mut config = runtime_config(&run.workspace)?.with_policy_profile(run.profile);
    if let Some(policy) = &run.policy {
        config = config.with_policy_file(policy);
    }
    let runtime = Runtime::open(config)?;
    let mut request = RunRequest::new(&code).with_mode(run.mode).with_detail(run.detail);
    if let Some(intent) = &run.intent {
        request = request.with_intent(intent);
    }
    let receipt = runtime.run(&request)?;
    print_receipt(&receipt, run.json)?;
    Ok(exit_code(&receipt))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

fn print_receipt(receipt: &vsh::Receipt, json: bool) -> Result<(), Box<dyn std::error::Error>> {
    use std::io::IsTerminal;
    if json {
        println!("{}", serde_json::to_string_pretty(&render::receipt_json(receipt))?);
    } else {
        print!("{}", render::receipt_text_colored(receipt, std::io::stdout().is_terminal()));
    }
    Ok(())
}

fn tx_command(tx: &TxArgs) -> Result<u8, Box<dyn std::error::Error>> {
    let runtime = Runtime::open(runtime_config(&tx.workspace)?)?;
    let id = tx.transaction.as_deref().map(vsh::TransactionId::parse_hex).transpose()?;
    let now = now_ms();
    match (tx.action, id) {
        (TxAction::Pending, _) => {
            let pending = runtime.pending()?;
            if tx.json {
                let rows: Vec<_> = pending
                    .iter()
                    .map(|record| serde_json::json!({"transaction": record.id.to_hex(), "state": record.state.name()}))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else if pending.is_empty() {
                println!("no pending transactions");
            } else {
                for record in pending {
                    println!("{}  {}", record.id, record.state.name());
                }
            }
            Ok(EXIT_COMMITTED)
        }
        (TxAction::Show, Some(id)) => {
            let receipt = runtime.show(id)?.ok_or_else(|| format!("transaction {id} has nothing stored to show"))?;
            print_receipt(&receipt, tx.json)?;
            Ok(exit_code(&receipt))
        }
        (TxAction::Approve, Some(id)) => {
            let principal = vsh::PrincipalId::digest(tx.principal.as_bytes());
            let expires = now.saturating_add(tx.ttl_seconds.saturating_mul(1000));
            let record = runtime.approve(id, principal, now, expires)?;
            println!("{}  {} by {} for {} s", record.id, record.state.name(), tx.principal, tx.ttl_seconds);
            Ok(EXIT_COMMITTED)
        }
        (TxAction::Reject, Some(id)) => {
            let record = runtime.reject(id, now)?;
            println!("{}  {}", record.id, record.state.name());
            Ok(EXIT_COMMITTED)
        }
        (TxAction::Commit, Some(id)) => {
            let receipt = runtime.commit(id, now)?;
            print_receipt(&receipt, tx.json)?;
            Ok(exit_code(&receipt))
        }
        (TxAction::Recover, _) => {
            let startup = runtime.startup_recovery();
            println!(
                "rolled forward {}, rolled back {}, cleaned {}, conflicts {}",
                startup.rolled_forward.len(),
                startup.rolled_back.len(),
                startup.cleaned.len(),
                startup.conflicts.len()
            );
            for conflict in &startup.conflicts {
                println!("  conflict: {conflict:?}");
            }
            Ok(if startup.is_clean() { EXIT_COMMITTED } else { EXIT_ERROR })
        }
        (_, None) => Err("missing transaction id".into()),
    }
}
