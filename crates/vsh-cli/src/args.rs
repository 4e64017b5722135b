//! Command-line parsing (hand-written: the grammar is small and fixed).

use std::path::PathBuf;

use vsh::{PolicyProfile, ReceiptDetail, RunMode};

pub(crate) const USAGE: &str = "\
usage:
  vsh run [--workspace DIR] [--mode preview|auto] [--profile balanced|strict|paranoid]
          [--policy FILE] [--full] [--json] [--intent TEXT] FILE|-
  vsh pending [--workspace DIR] [--json]         transactions waiting for approval or commit
  vsh show TX [--workspace DIR] [--json]         a stored transaction's review
  vsh approve TX [--workspace DIR] [--principal NAME] [--ttl SECONDS]
  vsh reject TX [--workspace DIR]
  vsh commit TX [--workspace DIR] [--json]       commit an approved transaction
  vsh recover [--workspace DIR]                  finish or roll back interrupted commits
  vsh demo        copy the example workspace to a temporary directory, preview a
                  program there, commit it, and print both receipts
  vsh --version
  vsh help

exit codes: 0 committed, 3 auto-approved preview, 4 pending approval, 5 denied,
            1 error, 2 usage";

#[derive(Debug, PartialEq)]
pub(crate) enum Command {
    Help,
    Version,
    Demo,
    Run(RunArgs),
    Tx(TxArgs),
}

/// What to do with a stored transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxAction {
    Pending,
    Show,
    Approve,
    Reject,
    Commit,
    Recover,
}

/// Arguments of the transaction commands.
#[derive(Debug, PartialEq)]
pub(crate) struct TxArgs {
    pub(crate) action: TxAction,
    pub(crate) workspace: PathBuf,
    pub(crate) transaction: Option<String>,
    pub(crate) principal: String,
    pub(crate) ttl_seconds: u64,
    pub(crate) json: bool,
}

#[derive(Debug, PartialEq)]
pub(crate) struct RunArgs {
    pub(crate) workspace: PathBuf,
    pub(crate) mode: RunMode,
    pub(crate) detail: ReceiptDetail,
    pub(crate) json: bool,
    pub(crate) intent: Option<String>,
    pub(crate) profile: PolicyProfile,
    pub(crate) policy: Option<PathBuf>,
    pub(crate) program: String,
}

pub(crate) fn parse(arguments: &[String]) -> Result<Command, String> {
    let Some((first, rest)) = arguments.split_first() else { return Err("missing command".into()) };
    match first.as_str() {
        "help" | "--help" | "-h" => Ok(Command::Help),
        "--version" | "-V" | "version" => Ok(Command::Version),
        "demo" if rest.is_empty() => Ok(Command::Demo),
        "demo" => Err("demo takes no arguments".into()),
        "run" => parse_run(rest).map(Command::Run),
        "pending" => parse_tx(TxAction::Pending, rest).map(Command::Tx),
        "show" => parse_tx(TxAction::Show, rest).map(Command::Tx),
        "approve" => parse_tx(TxAction::Approve, rest).map(Command::Tx),
        "reject" => parse_tx(TxAction::Reject, rest).map(Command::Tx),
        "commit" => parse_tx(TxAction::Commit, rest).map(Command::Tx),
        "recover" => parse_tx(TxAction::Recover, rest).map(Command::Tx),
        other => Err(format!("unknown command {other:?}")),
    }
}

fn parse_run(arguments: &[String]) -> Result<RunArgs, String> {
    let mut run = RunArgs {
        workspace: PathBuf::from("."),
        mode: RunMode::Preview,
        detail: ReceiptDetail::Compact,
        json: false,
        intent: None,
        profile: PolicyProfile::default(),
        policy: None,
        program: String::new(),
    };
    let mut program = None;
    let mut iter = arguments.iter();
    while let Some(argument) = iter.next() {
        let mut value = |name: &str| iter.next().cloned().ok_or_else(|| format!("{name} needs a value"));
        match argument.as_str() {
            "--workspace" | "-w" => run.workspace = PathBuf::from(value("--workspace")?),
            "--mode" => {
                run.mode = match value("--mode")?.as_str() {
                    "preview" => RunMode::Preview,
                    "auto" => RunMode::Auto,
                    other => return Err(format!("--mode must be preview or auto, not {other:?}")),
                }
            }
            "--intent" => run.intent = Some(value("--intent")?),
            "--profile" => {
                let name = value("--profile")?;
                run.profile = name
                    .parse()
                    .map_err(|_| format!("--profile must be balanced, strict or paranoid, not {name:?}"))?;
            }
            "--policy" => run.policy = Some(PathBuf::from(value("--policy")?)),
            "--full" => run.detail = ReceiptDetail::Full,
            "--json" => run.json = true,
            "-" => program = Some("-".to_owned()),
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag:?}")),
            path => {
                if program.replace(path.to_owned()).is_some() {
                    return Err("more than one program given".into());
                }
            }
        }
    }
    run.program = program.ok_or("missing program file (or - for stdin)")?;
    Ok(run)
}

fn parse_tx(action: TxAction, arguments: &[String]) -> Result<TxArgs, String> {
    let mut tx = TxArgs {
        action,
        workspace: PathBuf::from("."),
        transaction: None,
        principal: "cli".to_owned(),
        ttl_seconds: 15 * 60,
        json: false,
    };
    let mut iter = arguments.iter();
    while let Some(argument) = iter.next() {
        let mut value = |name: &str| iter.next().cloned().ok_or_else(|| format!("{name} needs a value"));
        match argument.as_str() {
            "--workspace" | "-w" => tx.workspace = PathBuf::from(value("--workspace")?),
            "--json" => tx.json = true,
            "--principal" if action == TxAction::Approve => tx.principal = value("--principal")?,
            "--ttl" if action == TxAction::Approve => {
                let text = value("--ttl")?;
                tx.ttl_seconds = text
                    .parse()
                    .ok()
                    .filter(|ttl| *ttl > 0)
                    .ok_or(format!("--ttl must be a positive number of seconds, not {text:?}"))?;
            }
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag:?}")),
            id => {
                if tx.transaction.replace(id.to_owned()).is_some() {
                    return Err("more than one transaction given".into());
                }
            }
        }
    }
    let needs_id = !matches!(action, TxAction::Pending | TxAction::Recover);
    match (needs_id, &tx.transaction) {
        (true, None) => Err("missing transaction id".into()),
        (false, Some(_)) => Err("this command takes no transaction id".into()),
        _ => Ok(tx),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| (*item).to_owned()).collect()
    }

    #[test]
    fn parses_run() {
        let command =
            parse(&strings(&["run", "--workspace", "/tmp/w", "--mode", "auto", "--json", "--full", "p.py"])).unwrap();
        assert_eq!(
            command,
            Command::Run(RunArgs {
                workspace: PathBuf::from("/tmp/w"),
                mode: RunMode::Auto,
                detail: ReceiptDetail::Full,
                json: true,
                intent: None,
                profile: PolicyProfile::Balanced,
                policy: None,
                program: "p.py".into()
            })
        );
    }

    #[test]
    fn rejects_bad_usage() {
        assert!(parse(&[]).is_err());
        assert!(parse(&strings(&["run"])).is_err());
        assert!(parse(&strings(&["run", "--mode", "yolo", "p.py"])).is_err());
        assert!(parse(&strings(&["run", "a.py", "b.py"])).is_err());
        assert!(parse(&strings(&["run", "--bogus", "a.py"])).is_err());
        assert!(parse(&strings(&["frobnicate"])).is_err());
        assert!(parse(&strings(&["run", "--profile", "lax", "a.py"])).is_err());
        assert!(parse(&strings(&["approve"])).is_err());
        assert!(parse(&strings(&["pending", "abc"])).is_err());
        assert!(parse(&strings(&["approve", "abc", "--ttl", "0"])).is_err());
        assert!(parse(&strings(&["reject", "abc", "--principal", "x"])).is_err());
        match parse(&strings(&["approve", "abc", "--principal", "ann", "--ttl", "60", "-w", "/w"])).unwrap() {
            Command::Tx(tx) => {
                assert_eq!(tx.action, TxAction::Approve);
                assert_eq!(tx.transaction.as_deref(), Some("abc"));
                assert_eq!((tx.principal.as_str(), tx.ttl_seconds), ("ann", 60));
            }
            other => panic!("unexpected {other:?}"),
        }
        match parse(&strings(&["run", "--profile", "Strict", "--policy", "p.toml", "a.py"])).unwrap() {
            Command::Run(run) => {
                assert_eq!(run.profile, PolicyProfile::Strict);
                assert_eq!(run.policy, Some(PathBuf::from("p.toml")));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
