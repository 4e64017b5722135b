//! Command-line parsing (hand-written: the grammar is small and fixed).

use std::path::PathBuf;

use vsh::{PolicyProfile, ReceiptDetail, RunMode};

pub(crate) const USAGE: &str = "\
usage:
  vsh run [--workspace DIR] [--mode preview|auto] [--profile balanced|strict|paranoid]
          [--policy FILE] [--full] [--json] [--intent TEXT] FILE|-
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
        match parse(&strings(&["run", "--profile", "Strict", "--policy", "p.toml", "a.py"])).unwrap() {
            Command::Run(run) => {
                assert_eq!(run.profile, PolicyProfile::Strict);
                assert_eq!(run.policy, Some(PathBuf::from("p.toml")));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
