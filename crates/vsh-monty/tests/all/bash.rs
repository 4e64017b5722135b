//! Bash programs through the same guarded image as Monty: in process and in
//! the confined worker, the same file accesses, read facets, refusals and
//! budgets.

use std::time::Duration;

use vsh_monty::{BashFailure, BashLimits, BashOutcome, ExecutionError, ExecutionLimits, LimitKind, Uninterrupted};
use vsh_policy::{AccessKind, CallPolicy};
use vsh_types::{DiffKind, VPath};

use crate::common::{MODES, Mode, Workspace, shared_worker};

impl Workspace {
    fn bash_with(
        &mut self,
        code: &str,
        limits: &ExecutionLimits,
        bash: &BashLimits,
    ) -> Result<BashOutcome, ExecutionError> {
        let policy = CallPolicy::balanced_default(None);
        let executor = match self.mode {
            Mode::InProcess => &vsh_monty::MontyExecutor::in_process(),
            Mode::Worker => shared_worker(),
        };
        executor.execute_bash(code, &mut self.vfs, &policy, limits, bash, &Uninterrupted)
    }

    fn bash(&mut self, code: &str) -> Result<BashOutcome, ExecutionError> {
        self.bash_with(code, &ExecutionLimits::default(), &BashLimits::default())
    }
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap()
}

fn files() -> Vec<(&'static str, &'static [u8])> {
    vec![
        ("a.txt", b"hello world\nsecond line\n"),
        ("src/main.rs", b"fn main() { println!(\"hello\"); }\n"),
        ("src/lib.rs", b"pub fn hello() {}\n"),
        (".env", b"SECRET=1\n"),
        ("notes/todo.md", b"- [ ] write tests\n"),
    ]
}

#[test]
fn agents_scripts_read_search_and_edit_through_the_image() {
    for mode in MODES {
        let mut ws = Workspace::with(&files()).in_mode(mode);
        let script = "grep -rn hello src | sort\nsed -i 's/hello/goodbye/' a.txt\nfind . -name '*.rs' | sort\n\
                      wc -l < a.txt\nmkdir -p out/deep && cat a.txt | tr a-z A-Z > out/deep/upper.txt\nls src";
        let outcome = ws.bash(script).unwrap_or_else(|error| panic!("{mode:?}: {error:?}"));
        assert_eq!(
            text(&outcome.stdout),
            "src/lib.rs:1:pub fn hello() {}\nsrc/main.rs:1:fn main() { println!(\"hello\"); }\n\
             ./src/lib.rs\n./src/main.rs\n2\nlib.rs\nmain.rs\n",
            "{mode:?}"
        );
        let diff = ws.diff();
        assert!(diff.contains(&("a.txt".to_owned(), DiffKind::Modify)), "{mode:?}: {diff:?}");
        assert!(diff.contains(&("out/deep/upper.txt".to_owned(), DiffKind::Create)), "{mode:?}: {diff:?}");
        assert!(diff.iter().all(|(path, _)| !path.contains(".bashkit")), "no temporary file is left: {diff:?}");
        assert_eq!(ws.host_file("a.txt").unwrap(), b"hello world\nsecond line\n", "the host is untouched");
        let upper = ws.vfs.read(&VPath::parse("out/deep/upper.txt").unwrap()).unwrap();
        assert_eq!(&upper[..], b"GOODBYE WORLD\nSECOND LINE\n");
    }
}

#[test]
fn reads_are_recorded_with_the_facets_the_commands_used() {
    for mode in MODES {
        let mut ws = Workspace::with(&files()).in_mode(mode);
        ws.bash("cat a.txt >/dev/null; ls notes >/dev/null; test -e missing.txt || true; [ -d src ]").unwrap();
        let reads = &ws.vfs.read_set().entries;
        let at = |path: &str| reads.get(&VPath::parse(path).unwrap()).cloned().unwrap_or_default();
        assert!(at("a.txt").content.is_some(), "{mode:?}: cat reads content: {reads:?}");
        assert!(at("notes").names.is_some(), "{mode:?}: ls lists names");
        assert_eq!(at("notes/todo.md").size_mode, None, "{mode:?}: a plain ls depends on no child's size");
        assert_eq!(at("missing.txt").kind, Some(None), "{mode:?}: test -e depends on absence");
        assert_eq!(at("src").content, None);
        let mut long = Workspace::with(&files()).in_mode(mode);
        long.bash("ls -l notes >/dev/null").unwrap();
        let reads = &long.vfs.read_set().entries;
        assert!(
            reads.get(&VPath::parse("notes/todo.md").unwrap()).is_some_and(|dep| dep.size_mode.is_some()),
            "{mode:?}: ls -l depends on each entry's size and mode: {reads:?}"
        );
    }
}

#[test]
fn protected_and_outside_paths_are_refused_and_recorded_even_when_caught() {
    for mode in MODES {
        for script in [
            "cat .env 2>/dev/null || true",
            "cat ../outside.txt 2>/dev/null || true",
            "cat /etc/passwd 2>/dev/null || true",
            "echo x > /tmp/x 2>/dev/null || true",
            "grep -r SECRET . 2>/dev/null || true",
            "cp .env leak.txt 2>/dev/null || true",
            "f=.env; eval \"cat $f\" 2>/dev/null || true",
            "echo \"$(cat .env 2>/dev/null)\" > copy.txt",
            "source .env 2>/dev/null || true",
        ] {
            let mut ws = Workspace::with(&files()).in_mode(mode);
            std::fs::write(ws.parent.path().join("outside.txt"), "outside").unwrap();
            let outcome = ws.bash(script);
            let (denied, stdout) = match &outcome {
                Ok(outcome) => (&outcome.denied, text(&outcome.stdout).to_owned()),
                Err(ExecutionError::Bash { denied, stdout, .. }) => {
                    (denied, String::from_utf8_lossy(stdout).into_owned())
                }
                other => panic!("{mode:?} {script}: {other:?}"),
            };
            if script.starts_with("grep") || script.starts_with("source") {
                // A recursive grep skips what it cannot read; `source` is
                // not in the profile and reads nothing: the secret is not shown.
                assert!(!stdout.contains("SECRET"), "{mode:?} {script}: {stdout}");
            } else {
                assert!(!denied.is_empty(), "{mode:?} {script}: the refusal is recorded: {outcome:?}");
            }
            assert!(!stdout.contains("SECRET") && !stdout.contains("outside"), "{mode:?} {script}: {stdout}");
            let copied = ws.vfs.read(&VPath::parse("copy.txt").unwrap()).ok();
            assert!(copied.is_none_or(|bytes| !bytes.windows(6).any(|w| w == b"SECRET")), "{mode:?} {script}");
        }
    }
}

#[test]
fn a_change_to_a_protected_path_is_refused_as_the_change() {
    for mode in MODES {
        for (script, path, access) in [
            ("echo x > .env 2>/dev/null || true", ".env", AccessKind::Modify),
            ("echo x >> server.pem 2>/dev/null || true", "server.pem", AccessKind::Modify),
            ("mkdir keys.pem 2>/dev/null || true", "keys.pem", AccessKind::Create),
        ] {
            let mut ws = Workspace::with(&files()).in_mode(mode);
            let denied = match ws.bash(script) {
                Ok(outcome) => outcome.denied,
                Err(ExecutionError::Bash { denied, .. }) => denied,
                other => panic!("{mode:?} {script}: {other:?}"),
            };
            let listed: Vec<(&str, AccessKind)> = denied.iter().map(|d| (d.path.as_str(), d.access)).collect();
            assert!(listed.contains(&(path, access)), "{mode:?} {script}: {listed:?}");
            assert_eq!(ws.diff(), vec![], "{mode:?} {script}");
        }
    }
}

#[test]
fn a_tree_call_refused_for_a_hidden_name_below_names_only_the_path_the_program_gave() {
    let files: [(&str, &[u8]); 4] = [
        ("conf/readme.txt", b"ok\n"),
        ("conf/prod-signing.pem", b"key\n"),
        ("conf/.env.production", b"S=1\n"),
        ("conf/keys/id_rsa", b"key\n"),
    ];
    // Neither a hidden path nor the pattern that hid it (`**/id_rsa` names the file).
    let tells_nothing = |denied: &[vsh_policy::DeniedAccess]| {
        denied.iter().all(|denied| {
            let said = format!("{denied} {:?}", denied.rule);
            ["id_rsa", ".pem", ".env"].iter().all(|name| !said.contains(name))
        })
    };
    for mode in MODES {
        // Bash and Monty, moving, removing and copying the directory.
        for script in ["mv conf conf2 || true", "rm -rf conf || true"] {
            let mut ws = Workspace::with(&files).in_mode(mode);
            let denied = match ws.bash(script) {
                Ok(outcome) => outcome.denied,
                Err(ExecutionError::Bash { denied, .. }) => denied,
                other => panic!("{mode:?} {script}: {other:?}"),
            };
            let paths: Vec<&str> = denied.iter().map(|denied| denied.path.as_str()).collect();
            assert!(!paths.is_empty() && paths.iter().all(|path| *path == "conf"), "{mode:?} {script}: {paths:?}");
            assert!(tells_nothing(&denied), "{mode:?} {script}: {denied:?}");
            assert_eq!(ws.diff(), vec![], "{mode:?} {script}");
        }
        for call in
            ["vsh_move('conf', 'c2')", "vsh_remove('conf', recursive=True)", "vsh_copy('conf', 'c3', recursive=True)"]
        {
            let mut ws = Workspace::with(&files).in_mode(mode);
            let code = format!("try:\n    {call}\nexcept PermissionError as error:\n    print(error)");
            let outcome = ws.outcome(&code);
            let paths: Vec<&str> = outcome.denied.iter().map(|denied| denied.path.as_str()).collect();
            assert!(!paths.is_empty() && paths.iter().all(|path| ["conf", "c2", "c3"].contains(path)), "{paths:?}");
            assert!(tells_nothing(&outcome.denied), "{mode:?} {call}: {:?}", outcome.denied);
            assert!(!outcome.stdout.contains(".env") && !outcome.stdout.contains(".pem"), "{}", outcome.stdout);
        }
    }
    // Another workspace's vsh data directory inside one: refused and hidden,
    // and named by what it is, never by where it is.
    for mode in MODES {
        let nested: [(&str, &[u8]); 3] =
            [("vendor/x/txlog", b"log"), ("vendor/x/txlog.lock", b""), ("vendor/readme", b"r\n")];
        let mut ws = Workspace::with(&nested).in_mode(mode);
        let outcome = ws.outcome("try:\n    vsh_remove('vendor', recursive=True)\nexcept PermissionError:\n    pass");
        assert!(!outcome.denied.is_empty(), "{mode:?}");
        for denied in &outcome.denied {
            assert_eq!(denied.path.as_str(), "vendor", "{mode:?}: {denied:?}");
            assert!(!denied.rule.contains("vendor/x") && !denied.to_string().contains("vendor/x"), "{denied}");
        }
    }
    // What the policy protects but lets the program list (a repository's
    // `.git`) is still named: the program can see it.
    let mut ws = Workspace::with(&[("repo/.git/HEAD", b"ref: refs/heads/main\n"), ("repo/a.txt", b"a\n")]);
    let denied = match ws.bash("mv repo repo2 || true") {
        Ok(outcome) => outcome.denied,
        other => panic!("{other:?}"),
    };
    assert!(denied.iter().any(|denied| denied.path.as_str().starts_with("repo/.git")), "{denied:?}");
}

/// A FIFO and a socket in the workspace, where a dev server or a daemon left them.
fn plant_special_nodes(root: &std::path::Path, fifo: &str, socket: &str) -> std::os::unix::net::UnixListener {
    let status = std::process::Command::new("mkfifo").arg(root.join(fifo)).status().unwrap();
    assert!(status.success(), "mkfifo");
    std::os::unix::net::UnixListener::bind(root.join(socket)).unwrap()
}

#[test]
fn a_node_no_guest_can_be_shown_is_left_out_of_a_listing_and_the_rest_is_listed() {
    for mode in MODES {
        let mut ws = Workspace::with(&[("logs/a.log", b"a\n"), ("top.txt", b"t\n")]).in_mode(mode);
        let _socket = plant_special_nodes(&ws.root(), "logs/ctl", "dev.sock");
        let outcome =
            ws.bash("ls logs; ls; find . -name '*.log'").unwrap_or_else(|error| panic!("{mode:?}: {error:?}"));
        assert_eq!(text(&outcome.stdout), "a.log\nlogs\ntop.txt\n./logs/a.log\n", "{mode:?}");
        // Each listing that met one counted it: ls logs, ls, and find's two.
        assert_eq!(outcome.stats.skipped_nodes, 4, "{mode:?}");
        assert!(outcome.denied.is_empty(), "{mode:?}: nothing was refused");
    }
}

#[test]
fn failures_are_terminal_and_keep_their_streams() {
    for mode in MODES {
        let mut ws = Workspace::with(&files()).in_mode(mode);
        match ws.bash("echo out; echo err >&2; exit 3") {
            Err(ExecutionError::Bash { failure: BashFailure::Exit(3), exit_code: 3, stdout, stderr, .. }) => {
                assert_eq!((text(&stdout), text(&stderr)), ("out\n", "err\n"), "{mode:?}");
            }
            other => panic!("{mode:?}: {other:?}"),
        }
        match ws.bash("date") {
            Err(ExecutionError::Bash { failure: BashFailure::Unsupported(name), exit_code: 127, .. }) => {
                assert_eq!(name, "date");
            }
            other => panic!("{mode:?}: {other:?}"),
        }
        assert!(matches!(ws.bash("if then"), Err(ExecutionError::Bash { failure: BashFailure::Parse(_), .. })));
    }
}

#[test]
fn every_budget_ends_a_bash_run() {
    for mode in MODES {
        let mut ws = Workspace::with(&files()).in_mode(mode);
        let defaults = ExecutionLimits::default();
        let mut limited = |tight: BashLimits, script: &str| match ws.bash_with(script, &defaults, &tight) {
            Err(ExecutionError::Bash { failure: BashFailure::Limit(what), .. }) => what,
            other => panic!("{mode:?}: expected a limit, got {other:?}"),
        };
        let each_loop = BashLimits { max_loop_iterations: 20, ..BashLimits::default() };
        assert!(limited(each_loop, "for i in $(seq 1 25); do :; done").contains("loop iterations"));
        let all_loops = BashLimits { max_total_loop_iterations: 30, ..BashLimits::default() };
        let nested = "for i in 1 2 3 4 5 6; do for j in 1 2 3 4 5 6; do :; done; done";
        assert!(limited(all_loops, nested).contains("total loop"));
        let commands = BashLimits { max_commands: 50, ..BashLimits::default() };
        assert!(limited(commands, &"true\n".repeat(60)).contains("command"));
        let parser = BashLimits { max_parser_operations: 200, ..BashLimits::default() };
        let long_script = (0..100).map(|i| format!("a{i}=$((1+{i}))")).collect::<Vec<_>>().join("\n");
        assert!(limited(parser, &long_script).contains("parser"));
        let work = BashLimits { max_work_units: 1_000, ..BashLimits::default() };
        let busy = limited(work, "seq 1 20000 | sed 's/1/x/g' | grep -c x");
        assert!(busy.contains("budget") || busy.contains("work"), "{busy}");
        let input = BashLimits { max_aggregate_input_bytes: 10_000, ..BashLimits::default() };
        let piped = limited(input, "seq 1 100000 | wc -l");
        assert!(piped.contains("budget") || piped.contains("input"), "{piped}");
        let live = BashLimits { max_live_intermediate_bytes: 10_000, ..BashLimits::default() };
        let held = limited(live, "x=$(seq 1 100000); echo ${#x}");
        assert!(held.contains("budget") || held.contains("intermediate") || held.contains("live"), "{held}");
        // The shared budget: host calls, output, time.
        let few_calls = ExecutionLimits { max_os_calls: 3, ..ExecutionLimits::default() };
        let calls = ws.bash_with("cat a.txt; cat a.txt; cat a.txt; cat a.txt", &few_calls, &BashLimits::default());
        assert!(
            matches!(&calls, Err(ExecutionError::Limit { limit, .. }) if limit.limit == LimitKind::OsCalls),
            "{mode:?}: {calls:?}"
        );
        let small_output = ExecutionLimits { max_output_bytes: 100, ..ExecutionLimits::default() };
        let output = ws.bash_with("seq 1 1000", &small_output, &BashLimits::default());
        assert!(
            matches!(&output, Err(ExecutionError::Limit { limit, .. }) if limit.limit == LimitKind::OutputBytes)
                || matches!(&output, Err(ExecutionError::Bash { failure: BashFailure::Limit(_), .. })),
            "{mode:?}: {output:?}"
        );
        let short = ExecutionLimits { max_duration: Duration::from_millis(200), ..ExecutionLimits::default() };
        let spin = ws.bash_with(
            "while :; do :; done",
            &short,
            &BashLimits {
                max_loop_iterations: u64::MAX,
                max_total_loop_iterations: u64::MAX,
                max_commands: u64::MAX,
                max_work_units: u64::MAX,
                ..BashLimits::default()
            },
        );
        assert!(
            matches!(
                spin,
                Err(ExecutionError::Bash { failure: BashFailure::Limit(_), .. } | ExecutionError::Limit { .. })
            ),
            "{mode:?}: {spin:?}"
        );
    }
}

#[test]
fn a_protected_file_is_refused_through_every_command_that_reads_and_a_symlink_out_is_never_followed() {
    let readers = [
        "cat",
        "head",
        "tail",
        "wc",
        "grep x",
        "sed -n p",
        "awk 1",
        "cut -c1",
        "sort",
        "uniq",
        "tac",
        "rev",
        "nl",
        "od -c",
        "xxd",
        "base64",
        "md5sum",
        "sha256sum",
        "cksum",
        "strings",
        "fold",
        "fmt",
        "expand",
        "file",
        "cmp a.txt",
        "diff a.txt",
        "cp",
        "mv",
        "tee /dev/null <",
        "xargs echo <",
        "paste",
        "column",
        "split -l1",
        "tr a b <",
        "readlink -f",
        "stat",
    ];
    for mode in MODES {
        for reader in readers {
            let mut ws = Workspace::with(&files()).in_mode(mode);
            ws.symlink("out-link", "/etc/hostname");
            let target = if reader == "cp" || reader == "mv" { ".env stolen.txt" } else { ".env" };
            let script =
                format!("{reader} {target} > result.txt 2>/dev/null; cat out-link >> result.txt 2>/dev/null; true");
            let outcome = ws.bash(&script);
            let (denied, stdout) = match &outcome {
                Ok(outcome) => (&outcome.denied, outcome.stdout.clone()),
                Err(ExecutionError::Bash { denied, stdout, .. }) => (denied, stdout.clone()),
                other => panic!("{mode:?} {script}: {other:?}"),
            };
            if !matches!(reader, "file" | "stat" | "readlink -f") {
                assert!(!denied.is_empty(), "{mode:?} {script}: the refusal is recorded: {outcome:?}");
            }
            let result =
                ws.vfs.read(&VPath::parse("result.txt").unwrap()).map(|bytes| bytes.to_vec()).unwrap_or_default();
            for bytes in [&result, &stdout] {
                let text = String::from_utf8_lossy(bytes);
                assert!(!text.contains("SECRET"), "{mode:?} {script}: {text}");
                let hostname = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
                assert!(
                    hostname.trim().is_empty() || !text.contains(hostname.trim()),
                    "{mode:?} {script}: followed out"
                );
            }
            assert!(ws.host_file("stolen.txt").is_none() && ws.host_file(".env").is_some(), "{mode:?} {script}");
        }
    }
}

impl Workspace {
    fn monty_with_bash(
        &mut self,
        code: &str,
        bash: Option<BashLimits>,
    ) -> Result<vsh_monty::MontyOutcome, ExecutionError> {
        let policy = CallPolicy::balanced_default(None);
        let limits = ExecutionLimits::default();
        match self.mode {
            Mode::InProcess => vsh_monty::MontyExecutor::in_process().with_nested_bash(bash).execute(
                code,
                &mut self.vfs,
                &policy,
                &limits,
            ),
            Mode::Worker => {
                let executor = vsh_monty::MontyExecutor::worker(vsh_monty::WorkerConfig::new(crate::common::WORKER))
                    .unwrap()
                    .with_nested_bash(bash);
                executor.execute(code, &mut self.vfs, &policy, &limits)
            }
        }
    }
}

#[test]
fn vsh_bash_inside_monty_shares_the_image_and_the_budget() {
    for mode in MODES {
        let mut ws = Workspace::with(&files()).in_mode(mode);
        let program = "from pathlib import Path\n\
                       Path('made.txt').write_text('from monty\\n')\n\
                       code, out, err = vsh_bash('cat made.txt; echo from bash >> made.txt; wc -l < a.txt; echo e >&2; exit 7')\n\
                       (code, out, err, Path('made.txt').read_text())";
        let outcome =
            ws.monty_with_bash(program, Some(BashLimits::default())).unwrap_or_else(|e| panic!("{mode:?}: {e:?}"));
        assert_eq!(
            outcome.value.py_repr(),
            "(7, 'from monty\\n2\\n', 'e\\n', 'from monty\\nfrom bash\\n')",
            "{mode:?}: each sees the other's writes, and a non-zero status is the program's to judge"
        );
        // One budget: the script's file accesses are the program's OS calls.
        assert!(outcome.stats.os_calls >= 5, "{mode:?}: {:?}", outcome.stats);
        // Its refusals are the program's: the transaction is denied.
        let mut ws = Workspace::with(&files()).in_mode(mode);
        let outcome =
            ws.monty_with_bash("vsh_bash('cat .env 2>/dev/null || true')", Some(BashLimits::default())).unwrap();
        assert!(!outcome.denied.is_empty(), "{mode:?}");
        // A command outside the profile ends the whole run; bad arguments are a TypeError.
        let mut ws = Workspace::with(&files()).in_mode(mode);
        let ended = ws.monty_with_bash(
            "try:\n    vsh_bash('date')\nexcept BaseException:\n    pass\n1",
            Some(BashLimits::default()),
        );
        assert!(
            matches!(ended, Err(ExecutionError::Bash { failure: BashFailure::Unsupported(_), .. })),
            "{mode:?}: {ended:?}"
        );
        let typed = ws.monty_with_bash("vsh_bash(3)", Some(BashLimits::default()));
        assert!(
            matches!(&typed, Err(ExecutionError::Exception { exception, .. }) if exception.type_name == "TypeError"),
            "{mode:?}: {typed:?}"
        );
        // Without the host's consent it is not there.
        let off = ws.monty_with_bash("vsh_bash('echo hi')", None);
        assert!(
            matches!(&off, Err(ExecutionError::Exception { exception, .. }) if exception.message.contains("not configured for Bash")),
            "{mode:?}: {off:?}"
        );
    }
}

#[test]
fn an_interrupt_ends_a_bash_run_that_computes_or_calls_the_host() {
    let endless = BashLimits {
        max_commands: u64::MAX,
        max_loop_iterations: u64::MAX,
        max_total_loop_iterations: u64::MAX,
        max_work_units: u64::MAX,
        ..BashLimits::default()
    };
    let limits = ExecutionLimits {
        max_duration: Duration::from_mins(1),
        max_request_duration: Duration::from_mins(2),
        max_os_calls: u64::MAX,
        ..ExecutionLimits::default()
    };
    for mode in MODES {
        for script in ["while :; do :; done", "while :; do cat a.txt > /dev/null; done"] {
            let mut ws = Workspace::with(&files()).in_mode(mode);
            let stop = std::sync::atomic::AtomicBool::new(false);
            let started = std::time::Instant::now();
            let executor = match mode {
                Mode::InProcess => &vsh_monty::MontyExecutor::in_process(),
                Mode::Worker => shared_worker(),
            };
            let result = std::thread::scope(|scope| {
                scope.spawn(|| {
                    std::thread::sleep(Duration::from_millis(150));
                    stop.store(true, std::sync::atomic::Ordering::Release);
                });
                executor.execute_bash(
                    script,
                    &mut ws.vfs,
                    &CallPolicy::balanced_default(None),
                    &limits,
                    &endless,
                    &stop,
                )
            });
            assert!(matches!(result, Err(ExecutionError::Cancelled { .. })), "{mode:?} {script}: {result:?}");
            assert!(started.elapsed() < Duration::from_secs(30), "{mode:?} {script}: the interrupt ended it");
        }
    }
}

/// A Bash test of a symlink that leads out of the workspace (`[ -f
/// outlink ]`, a `.venv/bin/python -> /usr/bin/python3`) is a look like
/// Monty's `is_file()`: answered as unreadable, counted, no denial.
#[test]
fn a_bash_test_through_a_symlink_out_of_the_workspace_is_no_denial() {
    for mode in MODES {
        let mut ws = Workspace::with(&files()).in_mode(mode);
        std::os::unix::fs::symlink("/etc/passwd", ws.root().join("outlink")).unwrap();
        let outcome =
            ws.bash("if [ -f outlink ]; then echo file; else echo no; fi; [ -e outlink ] || echo gone").unwrap();
        assert_eq!(text(&outcome.stdout), "no\ngone\n", "{mode:?}");
        assert!(outcome.denied.is_empty(), "{mode:?}: {:?}", outcome.denied);
        assert!(outcome.stats.hidden_looks >= 1, "{mode:?}: {:?}", outcome.stats);
    }
}
