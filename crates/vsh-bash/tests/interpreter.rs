//! The interpreter against a small in-memory host: what scripts ask for, and
//! how runs end.

use std::collections::BTreeMap;
use std::time::Duration;

use vsh_bash::{BashEnd, BashLimits, BashRun, Ending, FsHost, FsReply, FsRequest, Meta, NodeType, Stopped};

/// Files by absolute path; directories are implied by their files, plus `/workspace`.
#[derive(Default)]
struct Memory {
    files: BTreeMap<String, Vec<u8>>,
    dirs: Vec<String>,
    log: Vec<FsRequest>,
    stop_after: Option<usize>,
}

impl Memory {
    fn with(files: &[(&str, &str)]) -> Self {
        Self {
            files: files.iter().map(|(path, text)| (format!("/workspace/{path}"), text.as_bytes().to_vec())).collect(),
            dirs: vec!["/workspace".to_owned()],
            ..Self::default()
        }
    }

    fn is_dir(&self, path: &str) -> bool {
        self.dirs.iter().any(|dir| dir == path) || self.files.keys().any(|file| file.starts_with(&format!("{path}/")))
    }
}

fn meta(kind: NodeType, size: u64) -> Meta {
    Meta { kind, size, mode: if kind == NodeType::Directory { 0o755 } else { 0o644 }, modified_ns: 0 }
}

impl FsHost for Memory {
    fn serve(&mut self, request: FsRequest) -> Result<FsReply, Stopped> {
        self.log.push(request.clone());
        if self.stop_after.is_some_and(|after| self.log.len() > after) {
            return Err(Stopped);
        }
        Ok(match request {
            FsRequest::Read { path } => self.files.get(&path).map_or(FsReply::Failed(2), |b| FsReply::Bytes(b.clone())),
            FsRequest::Write { path, data } => {
                self.files.insert(path, data);
                FsReply::Done
            }
            FsRequest::Append { path, data } => {
                self.files.entry(path).or_default().extend(data);
                FsReply::Done
            }
            FsRequest::Stat { path, .. } | FsRequest::Exists { path } if !path.starts_with("/workspace") => {
                FsReply::Failed(13)
            }
            FsRequest::Stat { path, .. } => match self.files.get(&path) {
                Some(bytes) => FsReply::Meta(meta(NodeType::File, bytes.len() as u64)),
                None if self.is_dir(&path) => FsReply::Meta(meta(NodeType::Directory, 0)),
                None => FsReply::Failed(2),
            },
            FsRequest::Exists { path } => FsReply::Exists(self.files.contains_key(&path) || self.is_dir(&path)),
            FsRequest::ReadDir { path, .. } => {
                let prefix = format!("{path}/");
                let mut names: BTreeMap<String, Meta> = BTreeMap::new();
                for (file, bytes) in &self.files {
                    if let Some(rest) = file.strip_prefix(&prefix) {
                        match rest.split_once('/') {
                            Some((dir, _)) => names.insert(dir.to_owned(), meta(NodeType::Directory, 0)),
                            None => names.insert(rest.to_owned(), meta(NodeType::File, bytes.len() as u64)),
                        };
                    }
                }
                FsReply::Entries(names.into_iter().collect())
            }
            FsRequest::Mkdir { path, .. } => {
                self.dirs.push(path);
                FsReply::Done
            }
            FsRequest::Remove { path, .. } => {
                self.files.remove(&path);
                FsReply::Done
            }
            FsRequest::Rename { from, to } => {
                if let Some(bytes) = self.files.remove(&from) {
                    self.files.insert(to, bytes);
                }
                FsReply::Done
            }
            FsRequest::Chmod { .. } => FsReply::Done,
            other => panic!("not in this test host: {other:?}"),
        })
    }
}

fn run(host: &mut Memory, script: &str) -> BashEnd {
    let request = BashRun {
        script: script.to_owned(),
        limits: BashLimits::default(),
        timeout: Duration::from_secs(10),
        max_output_bytes: 1 << 20,
        max_depth: 512,
    };
    vsh_bash::run(&request, host)
}

fn stdout(end: &BashEnd) -> &str {
    std::str::from_utf8(&end.stdout).unwrap()
}

#[test]
fn a_script_reads_and_writes_through_the_host() {
    let mut host = Memory::with(&[("a.txt", "hello\nworld\n")]);
    let end = run(&mut host, "cat a.txt | tr a-z A-Z > b.txt; wc -l < a.txt; echo $PWD $HOME");
    assert_eq!(end.ending, Ending::Completed, "{end:?}");
    assert_eq!(end.exit_code, 0);
    assert_eq!(stdout(&end).split_whitespace().collect::<Vec<_>>(), ["2", "/workspace", "/workspace"]);
    assert_eq!(host.files["/workspace/b.txt"], b"HELLO\nWORLD\n");
    assert!(host.log.contains(&FsRequest::Read { path: "/workspace/a.txt".to_owned() }), "{:?}", host.log);
}

#[test]
fn a_command_outside_the_profile_is_never_looked_up_and_ends_the_run() {
    // A workspace file with the command's name: still not run.
    let mut host = Memory::with(&[("curl", "echo ran the file")]);
    let end = run(&mut host, "curl http://example.com || echo handled; echo after");
    assert_eq!(end.ending, Ending::Unsupported("curl".to_owned()), "{end:?}");
    assert!(String::from_utf8_lossy(&end.stderr).contains("curl: command not available"), "{end:?}");
    assert!(!stdout(&end).contains("ran the file"));
    assert!(host.log.iter().all(|request| !matches!(request, FsRequest::Read { path } if path.ends_with("curl"))));
    // A command hidden behind eval, a function or a variable is found as it is dispatched.
    for script in ["eval 'da''te'", "f() { sleep 1; }; f", "c=mktemp; $c"] {
        let end = run(&mut Memory::with(&[]), script);
        assert!(matches!(end.ending, Ending::Unsupported(_)), "{script}: {end:?}");
    }
}

#[test]
fn listings_carry_metadata_only_for_commands_that_show_it() {
    let mut host = Memory::with(&[("a.txt", "x"), ("d/b.txt", "yy")]);
    let end = run(&mut host, "ls; ls -l; find . -name '*.txt'; find . -size -1k");
    assert_eq!(end.ending, Ending::Completed, "{end:?}");
    let listings: Vec<bool> = host
        .log
        .iter()
        .filter_map(|request| match request {
            FsRequest::ReadDir { path, metadata } if path == "/workspace" => Some(*metadata),
            _ => None,
        })
        .collect();
    assert_eq!(listings, [false, true, false, true], "{:?}", host.log);
}

#[test]
fn budgets_of_the_interpreter_end_the_run() {
    let end = run(&mut Memory::with(&[]), "i=0; while true; do i=$((i+1)); done");
    assert!(matches!(&end.ending, Ending::Limit(_)), "{end:?}");
    let end = run(&mut Memory::with(&[]), "for i in $(seq 1 20000); do :; done");
    assert!(matches!(end.ending, Ending::Limit(_)), "{end:?}");
    let end = run(&mut Memory::with(&[]), "if then fi (");
    assert!(matches!(end.ending, Ending::Parse(_)), "{end:?}");
}

#[test]
fn a_host_that_stops_the_run_stops_it() {
    let mut host = Memory::with(&[("a.txt", "x")]);
    host.stop_after = Some(1);
    let end = run(&mut host, "cat a.txt; cat a.txt; echo never");
    assert_eq!(end.ending, Ending::Stopped, "{end:?}");
    assert!(!stdout(&end).contains("never"));
    assert_eq!(host.log.len(), 2, "nothing is asked after the stop: {:?}", host.log);
}

/// What a command asks of the host, request by request: one round trip each
/// in the worker, so each one counts.
#[test]
fn commands_ask_the_host_no_more_than_they_need() {
    let count = |script: &str| {
        let mut host = Memory::with(&[("a.txt", "x"), ("d/b.txt", "x")]);
        let end = run(&mut host, script);
        assert_eq!(end.ending, Ending::Completed, "{script}: {end:?}");
        host.log
    };
    assert_eq!(count("cat a.txt"), [FsRequest::Read { path: "/workspace/a.txt".to_owned() }]);
    assert_eq!(count("[ -f a.txt ]").len(), 1);
    assert_eq!(count("ls d").len(), 2);
    // `sed -i` stats its directory and its temporary file again and again;
    // the answers hold until the script changes something (12 requests without).
    let sed = count("sed -i 's/x/y/' a.txt");
    assert_eq!(sed.len(), 9, "{sed:#?}");
    let stats = sed.iter().filter(|request| matches!(request, FsRequest::Stat { .. })).count();
    assert_eq!(stats, 5, "{sed:#?}");
}
