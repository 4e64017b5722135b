//! Real commands in a candidate of the image: a confined child runs GNU
//! tools and Python on a FUSE filesystem that the same guarded image
//! serves, so reads land in the read set with Monty's facets, a secret is
//! refused and recorded, and writes are in the diff, never on the host.

use vsh_monty::{BashFailure, CommandConfig, ExecutionError, ExecutionLimits, MontyExecutor, Uninterrupted};
use vsh_policy::CallPolicy;
use vsh_types::{DiffKind, VPath};

use crate::common::{MODES, Mode, Workspace, exception, shared_worker};

/// The fork bomb fills its command's process count: it runs alone, and
/// every other command test holds this shared while it runs (each command
/// has a uid of its own, whose count `RLIMIT_NPROC` keeps, but a machine
/// whose scratch directories cannot be idmapped runs them all as one).
static PROCESSES: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Whether this machine can mount FUSE in a private namespace; with
/// `VSH_REQUIRE_SANDBOX=1` (CI) one that cannot fails the test. `Some` holds
/// [`PROCESSES`] shared for the test.
fn fuse_available() -> Option<std::sync::RwLockReadGuard<'static, ()>> {
    fuse_on_this_machine().then(|| PROCESSES.read().unwrap_or_else(std::sync::PoisonError::into_inner))
}

/// [`fuse_available`] for the fork bomb: [`PROCESSES`] held alone.
fn fuse_available_alone() -> Option<std::sync::RwLockWriteGuard<'static, ()>> {
    fuse_on_this_machine().then(|| PROCESSES.write().unwrap_or_else(std::sync::PoisonError::into_inner))
}

fn fuse_on_this_machine() -> bool {
    let available = std::path::Path::new("/dev/fuse").exists() && vsh_sandbox::effective_uid() == 0;
    assert!(
        available || std::env::var_os("VSH_REQUIRE_SANDBOX").is_none(),
        "VSH_REQUIRE_SANDBOX is set, and this machine has no /dev/fuse or the tests do not run as root"
    );
    available
}

impl Workspace {
    fn command(&mut self, argv: &[&str]) -> Result<vsh_monty::BashOutcome, ExecutionError> {
        self.command_with(argv, &ExecutionLimits::default())
    }

    fn command_with(
        &mut self,
        argv: &[&str],
        limits: &ExecutionLimits,
    ) -> Result<vsh_monty::BashOutcome, ExecutionError> {
        let argv: Vec<String> = argv.iter().map(|arg| (*arg).to_owned()).collect();
        let policy = CallPolicy::balanced_default(None);
        let config = CommandConfig::new(self.root());
        MontyExecutor::in_process().execute_command(&argv, &mut self.vfs, &policy, limits, &config, &Uninterrupted)
    }
}

impl Workspace {
    /// Run the Monty program `code` with `vsh_exec` enabled, in this
    /// workspace's mode.
    fn run_with_commands(&mut self, code: &str) -> Result<vsh_monty::MontyOutcome, ExecutionError> {
        self.run_with_commands_under(code, &ExecutionLimits::default())
    }

    fn run_with_commands_under(
        &mut self,
        code: &str,
        limits: &ExecutionLimits,
    ) -> Result<vsh_monty::MontyOutcome, ExecutionError> {
        let policy = CallPolicy::balanced_default(None);
        let config = CommandConfig::new(self.root());
        let in_process = MontyExecutor::in_process();
        let executor = match self.mode {
            Mode::InProcess => &in_process,
            Mode::Worker => shared_worker(),
        };
        executor.execute_with_commands(code, &mut self.vfs, &policy, limits, &config, &Uninterrupted)
    }
}

fn files() -> Vec<(&'static str, &'static [u8])> {
    vec![
        ("a.txt", b"hello world\nsecond line\n"),
        ("src/main.rs", b"fn main() {}\n"),
        ("notes/todo.md", b"- [ ] write tests\n"),
        (".env", b"SECRET=1\n"),
    ]
}

#[test]
fn gnu_tools_edit_the_image_and_never_the_host() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let script = "sed -i 's/hello/goodbye/' a.txt && mkdir -p out && tr a-z A-Z < a.txt > out/upper.txt && rm notes/todo.md && cat out/upper.txt";
    let outcome = ws.command(&["/bin/sh", "-c", script]).unwrap_or_else(|error| panic!("{error:?}"));
    assert_eq!(String::from_utf8_lossy(&outcome.stdout), "GOODBYE WORLD\nSECOND LINE\n");
    let diff = ws.diff();
    assert_eq!(
        diff,
        [
            ("a.txt".to_owned(), DiffKind::Modify),
            ("notes/todo.md".to_owned(), DiffKind::Delete),
            ("out".to_owned(), DiffKind::Create),
            ("out/upper.txt".to_owned(), DiffKind::Create),
        ]
    );
    assert_eq!(ws.host_file("a.txt").unwrap(), b"hello world\nsecond line\n", "the host is untouched");
    assert!(ws.host_file("out/upper.txt").is_none());
}

#[test]
fn what_a_process_reads_is_in_the_read_set_with_its_facets() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    ws.command(&["/bin/sh", "-c", "cat a.txt > /dev/null; ls notes > /dev/null; test -e missing.txt || true"]).unwrap();
    let reads = &ws.vfs.read_set().entries;
    let at = |path: &str| reads.get(&VPath::parse(path).unwrap()).cloned().unwrap_or_default();
    assert!(at("a.txt").content.is_some(), "cat reads content: {reads:?}");
    assert!(at("notes").names.is_some(), "ls lists names: {reads:?}");
    assert!(at("notes/todo.md").content.is_none(), "nothing read todo.md's bytes");
    assert_eq!(at("missing.txt").kind, Some(None), "test -e depends on absence: {reads:?}");
    assert!(at("src/main.rs").content.is_none() && at("src").names.is_none(), "src was never looked at");
}

#[test]
fn a_secret_is_invisible_and_refused_and_the_look_is_counted() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let outcome =
        ws.command(&["/bin/sh", "-c", "ls -a; cat .env || echo refused; echo x > .env || echo kept"]).unwrap();
    let listing = String::from_utf8_lossy(&outcome.stdout);
    assert!(!listing.contains(".env"), "{listing}");
    assert!(listing.ends_with("refused\nkept\n"), "{listing}");
    assert!(String::from_utf8_lossy(&outcome.stderr).contains("Permission denied"));
    // The kernel only ever looks the name up: refused, the same answer
    // whether it is there or not, so counted and never a denial.
    assert!(outcome.denied.is_empty(), "{:?}", outcome.denied);
    assert!(outcome.stats.hidden_looks >= 2, "{:?}", outcome.stats);
    assert!(ws.diff().is_empty());
    assert_eq!(ws.host_file(".env").unwrap(), b"SECRET=1\n");
}

#[test]
fn a_failing_command_is_an_error_that_carries_its_status_and_changes() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let result = ws.command(&["/bin/sh", "-c", "echo partial > p.txt; echo oops >&2; exit 3"]);
    let Err(ExecutionError::Bash { failure, exit_code, stderr, .. }) = result else { panic!("{result:?}") };
    assert_eq!((failure, exit_code), (BashFailure::Exit(3), 3));
    assert_eq!(stderr, b"oops\n");
    assert_eq!(ws.diff(), [("p.txt".to_owned(), DiffKind::Create)]);
}

#[test]
fn a_python_script_edits_files_in_the_candidate() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&[("n.txt", b"41\n")]);
    let program = "import pathlib; p = pathlib.Path('n.txt'); p.write_text(str(int(p.read_text()) + 1) + '\\n')";
    ws.command(&["/usr/bin/python3", "-c", program]).unwrap_or_else(|error| panic!("{error:?}"));
    assert_eq!(&ws.vfs.read(&VPath::parse("n.txt").unwrap()).unwrap()[..], b"42\n");
}

#[test]
fn a_large_file_is_charged_the_bytes_written_not_its_size_at_each_write_back() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    // 90 MiB written once, under a 100 MiB budget: the candidate writes it
    // back past 64 MiB buffered and again at the end; each write-back is
    // charged what was written since the last, so 90 MiB in all (and the
    // new file's node cost).
    let limits = ExecutionLimits {
        max_write_bytes: 100 << 20,
        max_duration: std::time::Duration::from_mins(1),
        max_request_duration: std::time::Duration::from_mins(1),
        ..ExecutionLimits::default()
    };
    let outcome = ws
        .command_with(&["/bin/sh", "-c", "head -c 94371840 /dev/zero > big.bin"], &limits)
        .unwrap_or_else(|error| panic!("{error:?}"));
    assert_eq!(outcome.stats.write_bytes, (90 << 20) + vsh_candidate::NODE_WRITE_COST);
    assert_eq!(ws.vfs.read(&VPath::parse("big.bin").unwrap()).unwrap().len(), 90 << 20);
}

#[test]
fn a_removed_file_still_open_is_read_and_written_as_posix_says_within_a_bound() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let program = [
        "import errno, os",
        "fd = os.open('t.bin', os.O_RDWR | os.O_CREAT, 0o600)",
        "os.write(fd, b'hello ')",
        "os.unlink('t.bin')",
        "os.write(fd, b'world')",
        "os.lseek(fd, 0, 0)",
        "print(os.read(fd, 100).decode(), os.fstat(fd).st_size, os.path.exists('t.bin'))",
        "os.ftruncate(fd, 5)",
        "print(os.pread(fd, 100, 0).decode(), os.fstat(fd).st_size)",
        "total = 0",
        "try:",
        "    while total < 200 << 20:",
        "        total += os.write(fd, b'x' * (1 << 20))",
        "except OSError as error:",
        "    print(errno.errorcode[error.errno], total <= 64 << 20)",
    ]
    .join("\n");
    // A write budget past the orphans' bound (64 MiB), so the bound is what stops it.
    let limits = ExecutionLimits {
        max_duration: std::time::Duration::from_mins(1),
        max_write_bytes: 256 << 20,
        ..ExecutionLimits::default()
    };
    let result = ws.command_with(&["/usr/bin/python3", "-c", &program], &limits);
    assert_eq!(stdout_of(&result), "hello world 11 False\nhello 5\nENOSPC True\n", "{result:?}");
    assert!(result.is_ok(), "{result:?}");
    // It is in no directory: nothing of it reaches the image.
    assert!(ws.diff().is_empty(), "{:?}", ws.diff());
}

#[test]
fn a_file_grown_past_what_the_run_may_write_is_refused_before_anything_is_allocated() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    // 3 GiB asked for under an 8 MiB write budget: by a truncation and by a
    // write far past the end. Each is EFBIG to the process, which goes on;
    // buffering either would have meant allocating 3 GiB in this process.
    let limits = ExecutionLimits { max_write_bytes: 8 << 20, ..ExecutionLimits::default() };
    let script = "truncate -s 3G grown.bin 2>&1 || echo truncate refused; \
                  python3 -c \"import os; fd = os.open('far.bin', os.O_WRONLY | os.O_CREAT); os.pwrite(fd, b'x', 3 << 30)\" \
                  2>&1 | tail -1; echo small > kept.txt";
    let result = ws.command_with(&["/bin/sh", "-c", script], &limits);
    let stdout = stdout_of(&result);
    assert!(result.is_ok(), "the run goes on: {result:?}");
    assert!(stdout.contains("File too large") && stdout.contains("truncate refused"), "{stdout}");
    assert!(stdout.contains("OSError: [Errno 27] File too large"), "{stdout}");
    assert_eq!(&ws.vfs.read(&VPath::parse("kept.txt").unwrap()).unwrap()[..], b"small\n");
    // What the files are in the image: created, never grown.
    for name in ["grown.bin", "far.bin"] {
        assert_eq!(ws.vfs.read(&VPath::parse(name).unwrap()).unwrap().len(), 0, "{name}");
    }
}

#[test]
fn a_write_past_the_end_is_charged_the_hole_it_makes() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    // One byte 40 MiB into each of two new files, under a 64 MiB write
    // budget: each file is 40 MiB of bytes the candidate holds, so the
    // second is past the budget (charging the one byte written let any
    // number of them through).
    let limits = ExecutionLimits { max_write_bytes: 64 << 20, ..ExecutionLimits::for_commands() };
    let script = "for name in one two; do python3 -c \"import os; fd = os.open('$name.bin', os.O_WRONLY | os.O_CREAT); \
                  os.pwrite(fd, b'x', 41943039)\"; done";
    let result = ws.command_with(&["/bin/sh", "-c", script], &limits);
    let Err(ExecutionError::Limit { limit, .. }) = &result else { panic!("{result:?}") };
    assert_eq!(limit.limit, vsh_monty::LimitKind::WriteBytes, "{limit}");
    assert!(limit.attempted > 79 << 20 && limit.max == 64 << 20, "{limit} {limit:?}");
}

#[test]
fn each_node_a_command_makes_costs_a_block_of_the_write_budget() {
    let Some(_processes) = fuse_available() else { return };
    // Empty files, directories and symlinks write no byte; each costs 4 KiB
    // of the budget all the same, so a 4 MiB budget holds 1,024 of them.
    assert_eq!(vsh_candidate::NODE_WRITE_COST, 4096);
    let limits = ExecutionLimits { max_write_bytes: 4 << 20, ..ExecutionLimits::for_commands() };
    let make = |count: u32| {
        format!(
            "mkdir d && cd d && i=0; while [ $i -lt {count} ]; do : > f$i; i=$((i+1)); done; ln -s f0 link; mkdir sub"
        )
    };
    let mut ws = Workspace::with(&files());
    let result = ws.command_with(&["/bin/sh", "-c", &make(900)], &limits);
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(ws.diff().len(), 903, "d, 900 files, a link and sub");
    let mut ws = Workspace::with(&files());
    let result = ws.command_with(&["/bin/sh", "-c", &make(1100)], &limits);
    let Err(ExecutionError::Limit { limit, .. }) = &result else { panic!("{result:?}") };
    assert_eq!(limit.limit, vsh_monty::LimitKind::WriteBytes, "{limit}");
    assert_eq!(limit.max, 4 << 20, "{limit}");
}

#[test]
fn a_command_past_its_time_is_killed_with_everything_it_started() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let limits = ExecutionLimits { max_duration: std::time::Duration::from_millis(500), ..ExecutionLimits::default() };
    let started = std::time::Instant::now();
    let result = ws.command_with(&["/bin/sh", "-c", "sleep 30 & sleep 30; echo never > late.txt"], &limits);
    let Err(ExecutionError::Limit { limit, .. }) = &result else { panic!("{result:?}") };
    assert_eq!(limit.limit, vsh_monty::LimitKind::Duration);
    // In the units every duration limit is reported in (nanoseconds).
    assert_eq!(limit.max, 500_000_000, "{limit}");
    assert!((500_000_000..10_000_000_000).contains(&limit.attempted), "{limit}");
    assert!(limit.to_string().starts_with("duration limit 0.5 s exceeded after "), "{limit}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "killed, not waited for");
    assert!(ws.diff().is_empty());
}

#[test]
fn a_command_reads_and_writes_files_larger_than_one_program_call_may_move() {
    let Some(_processes) = fuse_available() else { return };
    // 6 MiB: past the 4 MiB a single read or write of a program may move,
    // within the run's cumulative budgets.
    let big: Vec<u8> = (0..6u32 << 20).map(|i| (i % 251) as u8).collect();
    let commands = vsh_vfs::SnapshotLimits::for_commands();
    let mut ws = Workspace::with_snapshot_limits(&[("big.bin", &big)], commands);
    let limits = ExecutionLimits::default();
    assert!(big.len() as u64 > limits.max_io_call_bytes);
    let result = ws.command_with(&["/bin/sh", "-c", "cat big.bin big.bin > twice.bin && wc -c < big.bin"], &limits);
    assert_eq!(stdout_of(&result), format!("{}\n", big.len()));
    assert_eq!(ws.diff(), [("twice.bin".to_owned(), DiffKind::Create)]);
    let twice = ws.vfs.read(&VPath::parse("twice.bin").unwrap()).unwrap();
    assert_eq!(twice.len(), 2 * big.len());
    assert!(twice[..big.len()] == big[..] && twice[big.len()..] == big[..]);
    // The cumulative budgets still bound them: two copies, each within the
    // budget, together past it.
    let tight = ExecutionLimits { max_write_bytes: 10 << 20, ..ExecutionLimits::default() };
    let mut ws = Workspace::with_snapshot_limits(&[("big.bin", &big)], commands);
    let result = ws.command_with(&["/bin/sh", "-c", "cat big.bin > one.bin; cat big.bin > two.bin"], &tight);
    let Err(ExecutionError::Limit { limit, .. }) = &result else { panic!("{result:?}") };
    assert_eq!(limit.limit, vsh_monty::LimitKind::WriteBytes, "{limit}");
    assert!(limit.attempted > limit.max && limit.max == 10 << 20, "{limit}");
    // (A failed run is never committable: what it left in the image is dropped by its caller.)
    let _ = &ws;
}

#[test]
fn a_command_reads_a_file_larger_than_the_run_may_hold_a_piece_at_a_time() {
    let Some(_processes) = fuse_available() else { return };
    // 24 MiB, past the 16 MiB this run may hold of any file (or of all of
    // them): the candidate reads it a piece at a time, never whole.
    let big: Vec<u8> = (0..24_u32 << 20).map(|index| (index.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let limits = vsh_vfs::SnapshotLimits {
        max_materialized_bytes: 16 << 20,
        max_materialized_file_bytes: 16 << 20,
        ..vsh_vfs::SnapshotLimits::for_commands()
    };
    let ws = Workspace::with_snapshot_limits(&[("big.bin", &big), ("small.txt", b"small\n")], limits);
    // Just written, the file is read whole (its stat cannot yet stand for
    // its bytes from one piece to the next), and it is past the limit. Its
    // status changes once more after the image was opened, so the stamp is
    // unsettled however long writing it took on a loaded machine.
    let file = std::fs::File::options().write(true).open(ws.root().join("big.bin")).unwrap();
    file.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000)).unwrap();
    drop(file);
    let script = "cksum big.bin; tail -c 7 big.bin | od -An -tx1; cat small.txt";
    let mut ws = ws;
    let fresh = ws.command_with(&["/bin/sh", "-c", script], &ExecutionLimits::for_commands());
    assert!(
        matches!(&fresh, Err(ExecutionError::Vfs { source: vsh_vfs::VfsError::SnapshotLimit { .. } })),
        "{fresh:?}"
    );
    let mut ws = ws.settled(limits);
    let result = ws.command_with(&["/bin/sh", "-c", script], &ExecutionLimits::for_commands());
    let native = unconfined(&ws.root(), script);
    assert_eq!(stdout_of(&result), String::from_utf8_lossy(&native.stdout), "what the host's tools read there");
    assert!(ws.diff().is_empty());
    // One content dependency on the whole file, as a whole read records.
    let read = ws.vfs.read_set().entries.get(&VPath::parse("big.bin").unwrap()).cloned().unwrap();
    assert_eq!(read.content, Some(vsh_types::BlobId::of(&big)));
    // The first piece costs the whole file (the host reads all of it to
    // hash it): one byte of it is past a read budget smaller than the file.
    let tight = ExecutionLimits { max_read_bytes: 8 << 20, ..ExecutionLimits::for_commands() };
    let mut ws = ws.settled(limits);
    let result = ws.command_with(&["/bin/sh", "-c", "head -c 1 big.bin"], &tight);
    let Err(ExecutionError::Limit { limit, .. }) = &result else { panic!("{result:?}") };
    assert_eq!(limit.limit, vsh_monty::LimitKind::ReadBytes, "{limit}");
    assert!(limit.attempted >= 24 << 20, "{limit}");
}

/// `script` under `sh -c`, unconfined, in `dir`: each escape's baseline.
fn unconfined(dir: &std::path::Path, script: &str) -> std::process::Output {
    std::process::Command::new("/bin/sh").args(["-c", script]).current_dir(dir).output().unwrap()
}

fn stdout_of(result: &Result<vsh_monty::BashOutcome, ExecutionError>) -> String {
    match result {
        Ok(outcome) => String::from_utf8_lossy(&outcome.stdout).into_owned(),
        Err(ExecutionError::Bash { stdout, .. }) => String::from_utf8_lossy(stdout).into_owned(),
        Err(error) => panic!("{error:?}"),
    }
}

#[test]
fn escapes_that_work_unconfined_fail_in_the_candidate() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let host_secret = ws.root().join(".env");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Another workspace's secret, outside every path a command is shown.
    let elsewhere = tempfile::tempdir_in("/var/tmp").unwrap();
    let other_secret = elsewhere.path().join(".env");
    std::fs::write(&other_secret, "TOKEN=elsewhere\n").unwrap();
    std::fs::set_permissions(elsewhere.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let open_dir = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::set_permissions(open_dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let attempts = [
        // Its size and time by `stat`, which Landlock does not judge (sec80
        // F2): the host's tree is not the command's root.
        ("stat", format!("stat -c %s {} && echo ESCAPED", other_secret.display())),
        // A timestamp of a world-writable host directory (sec80 F4; the
        // command's own /var/tmp is its private /tmp, not the host's).
        ("utime", format!("test -d {0} && touch {0} && echo ESCAPED", open_dir.path().display())),
        // The real workspace, through the parent process's root.
        ("proc", format!("cat /proc/$PPID/root{} && echo ESCAPED", host_secret.display())),
        // ptrace (PTRACE_TRACEME), a new mount namespace, a new session.
        ("ptrace", "python3 -c \"import ctypes; l = ctypes.CDLL(None); print('ESCAPED' if l.ptrace(0, 0, 0, 0) == 0 else 'no')\"".to_owned()),
        ("mount", "python3 -c \"import ctypes; l = ctypes.CDLL(None); print('ESCAPED' if l.unshare(0x20000) == 0 else 'no')\"".to_owned()),
        ("setsid", "python3 -c \"import os; os.setsid(); print('ESCAPED')\"".to_owned()),
        // A network connection, with the network off.
        ("connect", format!("python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('ESCAPED')\"")),
    ];
    for (name, script) in &attempts {
        let baseline = unconfined(&ws.root(), script);
        assert!(
            String::from_utf8_lossy(&baseline.stdout).contains("ESCAPED"),
            "{name}: the baseline succeeds unconfined: {}",
            String::from_utf8_lossy(&baseline.stderr)
        );
        let confined = ws.command(&["/bin/sh", "-c", script]);
        assert!(!stdout_of(&confined).contains("ESCAPED"), "{name}: {confined:?}");
    }
    drop(listener);
    assert!(ws.diff().is_empty());
}

#[test]
fn a_fork_bomb_stops_at_the_process_limit_and_never_stops_another_commands_fork() {
    let Some(_alone) = fuse_available_alone() else { return };
    let bomb = "python3 -c \"import os, time\nn = 0\ntry:\n    while n < 400:\n        if os.fork() == 0:\n            \
                time.sleep(8)\n            os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint(n, flush=True)\n\
                time.sleep(4)\"";
    let baseline = unconfined(&Workspace::with(&files()).root(), bomb);
    assert_eq!(String::from_utf8_lossy(&baseline.stdout).trim(), "400", "unconfined, all 400 start");
    // While the bomb holds every process its limit allows, a command of
    // another transaction still forks: the limit is per command.
    let (bombed, other) = std::thread::scope(|scope| {
        let limits = ExecutionLimits {
            max_duration: std::time::Duration::from_secs(30),
            max_request_duration: std::time::Duration::from_secs(30),
            ..ExecutionLimits::default()
        };
        let bombing = scope.spawn(move || Workspace::with(&files()).command_with(&["/bin/sh", "-c", bomb], &limits));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while processes_of(is_command_uid) < 200 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(processes_of(is_command_uid) >= 200, "the bomb filled its count");
        let script = "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.2 & done; wait; echo forked";
        let other = Workspace::with(&files()).command(&["/bin/sh", "-c", script]);
        (bombing.join().unwrap(), other)
    });
    let started: u64 = stdout_of(&bombed).trim().parse().unwrap_or_else(|_| panic!("{bombed:?}"));
    assert!(started < vsh_monty::COMMAND_PROCESSES, "stopped at the limit: {started}");
    assert_eq!(stdout_of(&other), "forked\n", "the other command forked ten times: {other:?}");
    // What the kernel still counts goes once reaped: the other command tests
    // wait for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while processes_of(is_command_uid) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Whether `uid` is one a command runs as.
fn is_command_uid(uid: u32) -> bool {
    vsh_sandbox::COMMAND_UIDS.contains(&uid) || uid == vsh_monty::COMMAND_USER.0
}

/// How many processes (zombies included) run as a uid `which` accepts.
fn processes_of(which: impl Fn(u32) -> bool) -> usize {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_str().is_some_and(|name| name.bytes().all(|byte| byte.is_ascii_digit())))
        .filter(|entry| std::fs::metadata(entry.path()).is_ok_and(|meta| which(meta.uid())))
        .count()
}

#[test]
fn each_command_runs_as_a_uid_of_its_own_and_owns_what_earlier_runs_kept() {
    use std::os::unix::fs::MetadataExt as _;
    let Some(_processes) = fuse_available() else { return };
    let scratch = scratch_dir();
    let mut ws = Workspace::with(&files());
    // Owner-only: only the file's owner may append to it.
    let first = "id -u; echo one > out/kept; chmod 600 out/kept; stat -c %u out/kept";
    let second = "id -u; echo two >> out/kept; stat -c %u out/kept; cat out/kept";
    let ran = |ws: &mut Workspace, script: &str| {
        let outcome = command_with_scratch(ws, &["/bin/sh", "-c", script], &[("out", scratch.path())])
            .unwrap_or_else(|error| panic!("{script}: {error:?}"));
        String::from_utf8_lossy(&outcome.stdout).lines().map(str::to_owned).collect::<Vec<_>>()
    };
    let one = ran(&mut ws, first);
    let uid_one: u32 = one[0].parse().unwrap();
    // A process reuses its uids while they are free: holding the first
    // one's lease (as a running command would) makes the second run take
    // another.
    let held = std::fs::File::open(format!("/run/vsh/command-uids/{uid_one}")).unwrap();
    held.lock().unwrap();
    let two = ran(&mut ws, second);
    drop(held);
    let uid_two: u32 = two[0].parse().unwrap();
    assert!(
        vsh_sandbox::COMMAND_UIDS.contains(&uid_one) && vsh_sandbox::COMMAND_UIDS.contains(&uid_two),
        "{one:?} {two:?}"
    );
    assert_ne!(uid_one, uid_two, "a uid of each command's own");
    assert_eq!(one[1], one[0], "the first run owns what it made");
    assert_eq!(two[1..], [two[0].clone(), "one".to_owned(), "two".to_owned()], "the second owns it too, and appended");
    // On the host, it belongs to the storage uid, whichever run wrote it.
    let kept = std::fs::metadata(scratch.path().join("kept")).unwrap();
    assert_eq!((kept.uid(), kept.gid()), vsh_monty::COMMAND_USER);
    assert!(ws.diff().is_empty(), "scratch is never in the diff: {:?}", ws.diff());
}

#[test]
fn a_symlink_made_in_the_candidate_points_where_it_says_and_is_never_followed_on_the_host() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("victim.txt");
    let script = format!("ln -s {} link && echo x > link; readlink link", target.display());
    let result = ws.command(&["/bin/sh", "-c", &script]);
    assert_eq!(stdout_of(&result).trim(), target.display().to_string());
    assert!(!target.exists(), "writing through the link never reached outside: {result:?}");
    assert_eq!(ws.diff(), [("link".to_owned(), DiffKind::Create)]);
    assert!(ws.host_file("link").is_none());
}

#[test]
fn a_monty_program_runs_a_command_on_its_own_changes_and_sees_what_the_command_changed() {
    let Some(_processes) = fuse_available() else { return };
    for mode in MODES {
        let mut ws = Workspace::with(&files()).in_mode(mode);
        let code = r#"
vsh_write("a.txt", "edited by monty\n")
status, out, err = vsh_exec(["/bin/sh", "-c", "cat a.txt; echo made by sh > made.txt; echo to-stderr >&2; exit 4"])
[status, out, err, vsh_read("made.txt")]
"#;
        let outcome = ws.run_with_commands(code).unwrap_or_else(|error| panic!("{mode:?}: {error:?}"));
        assert_eq!(
            outcome.value.py_repr(),
            "[4, 'edited by monty\\n', 'to-stderr\\n', 'made by sh\\n']",
            "{mode:?}: a non-zero status is the program's to judge"
        );
        assert_eq!(ws.diff(), [("a.txt".to_owned(), DiffKind::Modify), ("made.txt".to_owned(), DiffKind::Create)]);
        assert_eq!(ws.host_file("a.txt").unwrap(), b"hello world\nsecond line\n", "{mode:?}: the host is untouched");
    }
}

#[test]
fn vsh_exec_passes_its_environment_and_reads_are_recorded() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let code = r#"vsh_exec(["/bin/sh", "-c", "echo $GREETING-$HOME; cat src/main.rs > /dev/null"], env={"GREETING": "hi", "HOME": "/nowhere"})"#;
    let outcome = ws.run_with_commands(code).unwrap();
    assert_eq!(outcome.value.py_repr(), "(0, 'hi-/nowhere\\n', '')");
    let reads = &ws.vfs.read_set().entries;
    assert!(reads.get(&VPath::parse("src/main.rs").unwrap()).is_some_and(|read| read.content.is_some()), "{reads:?}");
    // check=True: a failing command raises, with the end of what it said;
    // a passing one returns as ever.
    let checked = "r = []\nfor script in ['echo ran >&1; echo 1 != 2 >&2; exit 3', 'echo FAILED test_x; exit 1']:\n    \
                   try:\n        vsh_exec(['/bin/sh', '-c', script], check=True)\n        r.append('no')\n    \
                   except RuntimeError as error:\n        r.append(str(error))\n\
                   (r, vsh_exec(['true'], check=True))";
    let outcome = ws.run_with_commands(checked).unwrap();
    // The end of each stream it wrote, each named when both were (cargo
    // test's panic is on stdout, its summary on stderr: ux51), or the one.
    assert_eq!(
        outcome.value.py_repr(),
        "([\"command '/bin/sh' exited 3: \\n[stdout, its end]\\nran\\n[stderr, its end]\\n1 != 2\", \
         \"command '/bin/sh' exited 1: FAILED test_x\"], (0, '', ''))"
    );
}

#[test]
fn a_command_reads_the_input_it_is_given_and_nothing_when_none_is() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    // A patch on standard input, applied by GNU patch in the candidate.
    let diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-hello world\n+goodbye world\n second line\n";
    let argv = ["patch".to_owned(), "-p1".to_owned()];
    let line = vsh_monty::CommandLine { argv: &argv, cwd: "", stdin: diff.as_bytes() };
    let config = CommandConfig::new(ws.root());
    let policy = CallPolicy::balanced_default(None);
    let limits = ExecutionLimits::default();
    let ran =
        MontyExecutor::in_process().execute_command_in(line, &mut ws.vfs, &policy, &limits, &config, &Uninterrupted);
    assert!(ran.is_ok(), "{ran:?}");
    assert_eq!(&*ws.vfs.read(&VPath::parse("a.txt").unwrap()).unwrap(), b"goodbye world\nsecond line\n");
    assert_eq!(ws.host_file("a.txt").unwrap(), b"hello world\nsecond line\n", "the host is untouched");
    // From a program: `input` as str or bytes; none is an empty input.
    let code = r#"
a = vsh_exec(["/bin/sh", "-c", "tr a-z A-Z"], input="shout\n")
b = vsh_exec(["/bin/sh", "-c", "wc -c"], input=b"\x00\x01\x02")
c = vsh_exec(["/bin/sh", "-c", "cat; echo end"])
(a, b, c)
"#;
    let outcome = ws.run_with_commands(code).unwrap();
    assert_eq!(outcome.value.py_repr(), "((0, 'SHOUT\\n', ''), (0, '3\\n', ''), (0, 'end\\n', ''))");
    // An input past what one call may move is refused before anything runs.
    let tight = ExecutionLimits { max_io_call_bytes: 4, ..ExecutionLimits::default() };
    let raised = exception(ws.run_with_commands_under(r#"vsh_exec(["cat"], input="12345")"#, &tight));
    assert_eq!(raised.type_name, "ValueError", "{raised:?}");
    let raised = exception(ws.run_with_commands(r#"vsh_exec(["cat"], input=5)"#));
    assert_eq!(raised.type_name, "TypeError", "{raised:?}");
}

#[test]
fn vsh_exec_refuses_what_it_cannot_run_as_python_would() {
    let Some(_processes) = fuse_available() else { return };
    let cases = [
        (r#"vsh_exec(["/no/such/program"])"#, "FileNotFoundError"),
        ("vsh_exec([])", "ValueError"),
        (r#"vsh_exec("ls")"#, "TypeError"),
        (r#"vsh_exec(["ls", 3])"#, "TypeError"),
        (r#"vsh_exec(["ls"], timeout=0)"#, "ValueError"),
        (r#"vsh_exec(["ls"], env={"A=B": "x"})"#, "ValueError"),
        (r#"vsh_exec(["/bin/sleep", "30"], timeout=0.3)"#, "TimeoutError"),
    ];
    for (code, expected) in cases {
        let mut ws = Workspace::with(&files());
        let raised = exception(ws.run_with_commands(code));
        assert_eq!(raised.type_name, expected, "{code}: {raised:?}");
    }
}

#[test]
fn a_timed_out_command_keeps_what_it_changed_and_the_program_goes_on() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let code = r#"
try:
    vsh_exec(["/bin/sh", "-c", "echo before > t.txt; sleep 30"], timeout=0.5)
    r = "no timeout"
except TimeoutError:
    r = vsh_read("t.txt")
r
"#;
    let started = std::time::Instant::now();
    assert_eq!(ws.run_with_commands(code).unwrap().value.py_repr(), "'before\\n'");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "the sleep was killed");
}

#[test]
fn vsh_exec_without_commands_enabled_is_a_runtime_error() {
    let mut ws = Workspace::with(&files());
    let raised = exception(ws.run(r#"vsh_exec(["true"])"#));
    assert_eq!(raised.type_name, "RuntimeError", "{raised:?}");
}

#[test]
fn long_output_keeps_its_head_and_tail() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let limits = ExecutionLimits { max_output_bytes: 4096, ..ExecutionLimits::default() };
    let code = r#"vsh_exec(["/bin/sh", "-c", "echo FIRST; yes filler | head -c 100000; echo; echo LAST"])[1]"#;
    let outcome = ws.run_with_commands_under(code, &limits).unwrap();
    let vsh_monty::MontyObject::String(text) = outcome.value else { panic!("{:?}", outcome.value) };
    assert!(text.starts_with("FIRST\n") && text.ends_with("LAST\n"), "{text}");
    assert!(text.len() <= 2048, "one stream keeps at most half the output budget: {}", text.len());
    assert!(text.contains("bytes left out]"), "{text}");
}

/// ux76: `ps`, psutil and a sanitizer's look at its own maps failed: its
/// `/proc` was unreadable. It reads its own, which holds its processes
/// alone (a pid namespace of its own) and none of the kernel's tables.
#[test]
fn a_command_reads_its_own_proc_and_nothing_of_the_hosts() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    // A listener of the host's, which the host's /proc/net/tcp lists (the baseline).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = format!("{:04X}", listener.local_addr().unwrap().port());
    let host_tcp = std::fs::read_to_string("/proc/net/tcp").unwrap();
    assert!(host_tcp.contains(&format!("0100007F:{port}")), "{host_tcp}");
    let script = "grep -c '^Name:' /proc/self/status; ps -e -o pid= | wc -l; test -e /proc/1 || echo no-init; \
                  grep -c '^MemTotal:' /proc/meminfo; grep -c '^processor' /proc/cpuinfo; cut -d' ' -f1 /proc/uptime; \
                  ls /proc/sys | wc -l; wc -c < /proc/kallsyms; cat /proc/self/net/tcp | wc -l";
    let outcome = ws.command(&["/bin/sh", "-c", script]).unwrap_or_else(|error| panic!("{error:?}"));
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    assert_eq!(lines.len(), 9, "{stdout}{}", String::from_utf8_lossy(&outcome.stderr));
    assert_eq!(lines[0], "1", "{stdout}");
    // The shell, ps (and wc): a handful, never the host's hundreds, and not
    // vsh's init (made before the namespaces: sec82 1).
    let processes: usize = lines[1].parse().unwrap();
    assert!((2..=5).contains(&processes), "{stdout}");
    assert_eq!(lines[2], "no-init", "{stdout}");
    // What tools read of the machine (ux76: `free`, Node's `os.cpus()`).
    assert_eq!(lines[3], "1", "{stdout}");
    let host_cpus =
        std::fs::read_to_string("/proc/cpuinfo").unwrap().lines().filter(|l| l.starts_with("processor")).count();
    assert_eq!(lines[4], host_cpus.to_string(), "{stdout}");
    assert!(lines[5].parse::<f64>().is_ok_and(|seconds| seconds > 0.0), "{stdout}");
    // No kernel table or setting, no socket of the host's.
    assert_eq!(&lines[6..], ["0", "0", "1"], "{stdout}");
    drop(listener);
}

/// ux76: `whoami`, Python's `getpass.getuser()` and Node's `os.userInfo()`
/// failed: the command's uid had no name. Its `/etc/passwd` and
/// `/etc/group` name it and its group, home `/tmp`.
#[test]
fn a_commands_user_has_a_name() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let script = "whoami && id -gn && python3 -c 'import getpass, pwd, os; print(getpass.getuser(), pwd.getpwuid(os.getuid()).pw_dir)'";
    let outcome = ws.command(&["/bin/sh", "-c", script]).unwrap_or_else(|error| panic!("{error:?}"));
    assert_eq!(
        String::from_utf8_lossy(&outcome.stdout),
        "vsh\nvsh\nvsh /tmp\n",
        "{}",
        String::from_utf8_lossy(&outcome.stderr)
    );
    assert!(ws.diff().is_empty());
}

/// ux76 H1: nothing a command wrote in its private `/tmp` could run, so
/// `cargo test`'s doctests (built there) and a test's script in pytest's
/// `tmp_path` failed with EACCES. It runs there as in the candidate.
#[test]
fn a_command_runs_what_it_wrote_in_its_private_tmp() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let script = "printf '#!/bin/sh\\necho ran from tmp\\n' > /tmp/s.sh && chmod +x /tmp/s.sh && /tmp/s.sh && \
                  cp /tmp/s.sh /dev/shm/s.sh && /dev/shm/s.sh";
    let outcome = ws.command(&["/bin/sh", "-c", script]).unwrap_or_else(|error| panic!("{error:?}"));
    assert_eq!(String::from_utf8_lossy(&outcome.stdout), "ran from tmp\nran from tmp\n");
    assert!(ws.diff().is_empty());
}

#[test]
fn a_command_gets_a_private_tmp_of_its_own() {
    let Some(_processes) = fuse_available() else { return };
    let marker = tempfile::Builder::new().prefix("vsh-host-tmp-").tempfile_in("/tmp").unwrap();
    let marker_name = marker.path().file_name().unwrap().to_str().unwrap().to_owned();
    let mut ws = Workspace::with(&files());
    let script = format!(
        "echo scratch > /tmp/vsh-scratch && cat /tmp/vsh-scratch && ls -a /tmp && test ! -e /tmp/{marker_name} && stat -f -c '%T %b %S' /tmp"
    );
    let outcome = ws.command(&["/bin/sh", "-c", &script]).unwrap_or_else(|error| panic!("{error:?}"));
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("scratch"));
    // What the private /tmp holds: vsh's git configuration, what the command
    // made, and (for a workspace beneath /tmp, as here) the directories the
    // candidate is mounted on.
    let root = ws.root();
    let holder =
        root.strip_prefix("/tmp").ok().and_then(|inside| inside.iter().next()).map(|name| name.to_str().unwrap());
    let mut expected = vec![".", "..", ".gitconfig", "vsh-scratch"];
    expected.extend(holder);
    expected.sort_unstable();
    let mut listed: Vec<&str> = (0..expected.len()).filter_map(|_| lines.next()).collect();
    listed.sort_unstable();
    assert_eq!(listed, expected, "{stdout}");
    let statfs: Vec<String> = lines.next().unwrap_or_default().split(' ').map(str::to_owned).collect();
    assert_eq!(statfs[0], "tmpfs", "{statfs:?}");
    let size = statfs[1].parse::<u64>().unwrap() * statfs[2].parse::<u64>().unwrap();
    assert_eq!(size, vsh_monty::COMMAND_TMP_BYTES, "the private /tmp is bounded: {statfs:?}");
    assert!(!std::path::Path::new("/tmp/vsh-scratch").exists(), "the host's /tmp never sees it");
    assert!(ws.diff().is_empty(), "/tmp is not the workspace");
}

/// sec80 F1: a command's System V shared memory segment (and its queues
/// and semaphores) stayed on the host after the run, where a later run
/// without the first one's grants read what it held. Each command has an
/// IPC namespace of its own, gone with it.
#[test]
fn a_commands_system_v_ipc_objects_stay_its_own_and_end_with_it() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    // A key of this process's own, so parallel runs never meet.
    let key = 0x7600_0000 | (std::process::id() & 0xffff);
    let make = format!(
        "python3 -c \"import ctypes; l = ctypes.CDLL(None); print('ESCAPED' if l.shmget({key}, 4096, 0o1666) >= 0 and \
         l.msgget({key}, 0o1666) >= 0 else 'no')\""
    );
    // The segment's and the queue's ids under the key, -1 where none is.
    let look = format!(
        "python3 -c \"import ctypes; l = ctypes.CDLL(None); print(l.shmget({key}, 0, 0), l.msgget({key}, 0))\""
    );
    let root = ws.root();
    let on_host = || String::from_utf8_lossy(&unconfined(&root, &look).stdout).trim().to_owned();
    // The baseline: unconfined, the objects are made on the host (and
    // removed again: IPC_RMID is 0).
    let baseline = unconfined(&root, &make);
    assert!(String::from_utf8_lossy(&baseline.stdout).contains("ESCAPED"), "{baseline:?}");
    let ids = on_host();
    assert_ne!(ids, "-1 -1", "the baseline's objects are on the host");
    let (shm, msg) = ids.split_once(' ').unwrap();
    let remove = format!(
        "python3 -c \"import ctypes; l = ctypes.CDLL(None); print(l.shmctl({shm}, 0, None), l.msgctl({msg}, 0, None))\""
    );
    assert_eq!(String::from_utf8_lossy(&unconfined(&root, &remove).stdout).trim(), "0 0");
    assert_eq!(on_host(), "-1 -1");
    // In a candidate the command makes them in its own namespace...
    let confined = ws.command(&["/bin/sh", "-c", &make]);
    assert_eq!(stdout_of(&confined).trim(), "ESCAPED", "{confined:?}");
    // ...which the host never sees, nor does the next command.
    assert_eq!(on_host(), "-1 -1", "nothing of the command's stays on the host");
    let later = ws.command(&["/bin/sh", "-c", &look]);
    assert_eq!(stdout_of(&later).trim(), "-1 -1", "{later:?}");
    assert!(ws.diff().is_empty());
}

#[test]
fn a_command_runs_in_its_own_pid_namespace_under_an_init_that_reaps() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    // This test's own process id is a host process the command cannot see;
    // the command is pid 2, under vsh's init (pid 1).
    let host = std::process::id();
    let script = format!(
        "echo $$ $PPID; kill -0 {host} 2>/dev/null && echo sees-the-host || echo hidden; \
         sleep 30 & echo $!; exit 3"
    );
    let started = std::time::Instant::now();
    let result = ws.command_with(&["/bin/sh", "-c", &script], &ExecutionLimits::for_commands());
    let Err(ExecutionError::Bash { exit_code, stdout, .. }) = &result else { panic!("{result:?}") };
    // Its exit status reaches vsh through the supervisor outside, and what
    // it left running dies with it (not after its 30 s).
    assert_eq!(*exit_code, 3);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let stdout = String::from_utf8_lossy(stdout);
    assert_eq!(stdout.lines().collect::<Vec<_>>(), ["2 1", "hidden", "3"], "{stdout}");
    // Orphans are reaped by the init: a command that never waits for what
    // its children left leaves no zombie (each would hold one of its 256
    // processes until it ended). Each orphan names itself to be counted here.
    let name = format!("vshz{}", std::process::id() % 100_000);
    let orphans = format!(
        "import ctypes, os, time\n\
         for _ in range(40):\n    \
             child = os.fork()\n    \
             if child == 0:\n        \
                 if os.fork() == 0:\n            \
                     ctypes.CDLL(None).prctl(15, b'{name}', 0, 0, 0)\n            \
                     time.sleep(0.2)\n            \
                     os._exit(0)\n        \
                 os._exit(0)\n    \
             os.waitpid(child, 0)\n\
         time.sleep(2.5)\n\
         print('done')"
    );
    let counted = name.clone();
    let zombies = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1800));
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(Result::ok)
            .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
            .filter(|stat| stat.contains(&format!("({counted}) Z")))
            .count()
    });
    let result = ws.command_with(&["/usr/bin/python3", "-c", &orphans], &ExecutionLimits::for_commands());
    assert_eq!(stdout_of(&result), "done\n", "{result:?}");
    assert_eq!(zombies.join().unwrap(), 0, "every orphan was reaped");
    // Its signals act as anywhere (an init would ignore its own SIGTERM).
    let result = ws.command_with(&["/bin/sh", "-c", "kill -TERM $$; echo survived"], &ExecutionLimits::for_commands());
    let Err(ExecutionError::Bash { exit_code, stdout, .. }) = &result else { panic!("{result:?}") };
    assert!(stdout.is_empty() && *exit_code == 128 + 15, "{result:?}");
}

#[test]
fn a_directory_shows_one_fixed_time_run_after_run() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let script = "stat -c %Y . && mkdir -p made && stat -c %Y made";
    let first = stdout_of(&ws.command(&["/bin/sh", "-c", script]));
    // A secret made beside it moves the host's time, never the one shown.
    std::fs::write(ws.root().join(".env"), "S=1\n").unwrap();
    let again = stdout_of(&ws.command(&["/bin/sh", "-c", "stat -c %Y ."]));
    assert_eq!(first, "946684800\n946684800\n", "2000-01-01, whatever the host says");
    assert_eq!(again, "946684800\n");
}

/// ux79 H1: every directory showed one fixed time, so Python, which caches
/// a directory's listing until its time changes, never found a module a
/// command wrote after its first import (a test generating code, then
/// importing it). A directory whose entries a process changed shows when.
#[test]
fn a_module_a_command_writes_is_found_by_its_next_import() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let script = "try:\n    import not_here\nexcept ImportError:\n    pass\n\
                  import os\nos.makedirs('gen', exist_ok=True)\n\
                  open('gen_mod.py', 'w').write('X = 1\\n')\nopen('gen/inner.py', 'w').write('Y = 2\\n')\n\
                  import gen_mod, gen.inner\nprint(gen_mod.X + gen.inner.Y)\n\
                  before = os.stat('src').st_mtime\nos.rename('notes/todo.md', 'src/todo.md')\n\
                  print(os.stat('src').st_mtime > before, os.stat('notes').st_mtime > before)";
    let outcome = ws.command(&["python3", "-c", script]);
    assert_eq!(stdout_of(&outcome), "3\nTrue True\n", "{outcome:?}");
}

/// ux76: `/var/tmp` did not exist in a command's root, and `mktemp -p
/// /var/tmp` failed. It is the command's private `/tmp` again: writable,
/// executable, gone with the command, never the host's.
#[test]
fn a_command_has_its_private_tmp_at_var_tmp_too() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let marker = format!("vsh-var-tmp-{}", std::process::id());
    let script = format!(
        "f=$(mktemp -p /var/tmp) && echo made > /var/tmp/{marker} && cat /tmp/{marker} && \
         printf '#!/bin/sh\necho ran\n' > \"$f\" && chmod +x \"$f\" && \"$f\""
    );
    let outcome = ws.command(&["/bin/sh", "-c", &script]).unwrap_or_else(|error| panic!("{error:?}"));
    assert_eq!(stdout_of(&Ok(outcome)), "made\nran\n");
    assert!(!std::path::Path::new("/var/tmp").join(&marker).exists(), "the host's /var/tmp is not the command's");
    assert!(ws.diff().is_empty(), "{:?}", ws.diff());
}

#[test]
fn a_command_gets_a_private_dev_shm_where_python_multiprocessing_works() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    // A semaphore (sem_open: a file made and linked in /dev/shm), shared
    // memory, and a pool of processes that uses both.
    let program = "import multiprocessing as mp, os\n\
                   from multiprocessing import shared_memory\n\
                   lock = mp.Lock(); lock.acquire(); lock.release()\n\
                   block = shared_memory.SharedMemory(create=True, size=4096)\n\
                   block.buf[0] = 7; print('shm', block.buf[0], os.path.exists('/dev/shm/' + block.name.lstrip('/')))\n\
                   block.close(); block.unlink()\n\
                   with mp.get_context('fork').Pool(2) as pool: print('pool', sum(pool.map(abs, [-1, -2, 3])))\n";
    let script = "python3 -c \"$0\" && touch /dev/shm/vsh-made && stat -f -c '%T %b %S' /dev/shm";
    let outcome = ws.command(&["/bin/sh", "-c", script, program]).unwrap_or_else(|error| panic!("{error:?}"));
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    let stderr = String::from_utf8_lossy(&outcome.stderr);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[..2], ["shm 7 True", "pool 6"], "{stdout}{stderr}");
    let statfs: Vec<&str> = lines[2].split(' ').collect();
    assert_eq!(statfs[0], "tmpfs", "{statfs:?}");
    let size = statfs[1].parse::<u64>().unwrap() * statfs[2].parse::<u64>().unwrap();
    assert_eq!(size, vsh_monty::COMMAND_SHM_BYTES, "bounded and its own: {statfs:?}");
    assert!(!std::path::Path::new("/dev/shm/vsh-made").exists(), "the host's /dev/shm never sees it");
    assert!(ws.diff().is_empty(), "{:?}", ws.diff());
}

#[test]
fn a_command_reads_the_public_tables_of_etc_without_a_network_and_nothing_private() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    // Python's media types (http.server's), a service's port, a protocol's
    // number: what the host's own tables say, with the network off.
    let program = "import mimetypes, socket\n\
                   print(mimetypes.guess_type('a.html')[0], socket.getservbyname('http', 'tcp'), \
                   socket.getprotobyname('udp'))\n";
    let outcome = ws.command(&["python3", "-c", program]).unwrap_or_else(|error| panic!("{error:?}"));
    assert_eq!(String::from_utf8_lossy(&outcome.stdout), "text/html 80 17\n");
    // The public certificates TLS trusts (npm reads the bundle its
    // configuration names, network or not).
    if std::path::Path::new("/etc/ssl/certs").is_dir() {
        let listed = ws.command(&["/bin/sh", "-c", "ls /etc/ssl/certs > /dev/null && echo LISTED"]);
        assert!(stdout_of(&listed).contains("LISTED"), "{listed:?}");
    }
    // The rest of /etc stays refused (the baseline reads it unconfined).
    for (private, read) in [("/etc/shadow", "cat"), ("/etc/ssh", "ls"), ("/etc/ssl/private", "ls")] {
        if std::path::Path::new(private).exists() {
            assert!(unconfined(&ws.root(), &format!("{read} {private}")).status.success(), "{private}");
            let refused = ws.command(&["/bin/sh", "-c", &format!("{read} {private} && echo READ")]);
            assert!(!stdout_of(&refused).contains("READ"), "{private}: {refused:?}");
        }
    }
}

#[test]
fn the_candidate_is_where_the_workspace_is_and_covers_it() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let root = ws.root();
    let root = root.to_str().unwrap();
    let script =
        format!("pwd; cat {root}/a.txt | head -1; echo absolute > {root}/abs.txt; cat {root}/.env || echo refused");
    let outcome = ws.command(&["/bin/sh", "-c", &script]).unwrap_or_else(|error| panic!("{error:?}"));
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    assert_eq!(stdout, format!("{root}\nhello world\nrefused\n"), "{}", String::from_utf8_lossy(&outcome.stderr));
    assert_eq!(ws.diff(), [("abs.txt".to_owned(), DiffKind::Create)], "a write by absolute path is in the image");
    assert!(ws.host_file("abs.txt").is_none(), "and never on the host");
    assert_eq!(outcome.stats.hidden_looks, 1, "the secret is refused by absolute path too");
}

/// The sysroot of the toolchain running these tests (`rustc --print sysroot`).
fn sysroot() -> std::path::PathBuf {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = std::process::Command::new(rustc).args(["--print", "sysroot"]).output().expect("rustc runs");
    std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

#[test]
fn cargo_test_in_the_candidate_judges_each_edit_and_target_is_scratch() {
    let Some(_processes) = fuse_available() else { return };
    let crate_files: Vec<(&str, &[u8])> = vec![
        ("Cargo.toml", b"[package]\nname = \"adder\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"),
        (
            "src/lib.rs",
            b"pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n#[test]\nfn adds() {\n    assert_eq!(add(2, 3), 5);\n}\n",
        ),
    ];
    let sysroot = sysroot();
    let scratch = tempfile::tempdir().unwrap();
    // The command's user writes it (as the store makes its scratch directories).
    std::fs::set_permissions(scratch.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let run = |edit: &str| {
        let mut ws = Workspace::with(&crate_files);
        let mut config = CommandConfig::new(ws.root());
        config.tools.push(sysroot.clone());
        config.scratch.push(("target".to_owned(), scratch.path().to_owned()));
        config.env.retain(|(key, _)| key != "PATH");
        config.env.push(("PATH".to_owned(), format!("{}/bin:/usr/bin:/bin", sysroot.display())));
        let limits = ExecutionLimits {
            max_duration: std::time::Duration::from_mins(4),
            max_request_duration: std::time::Duration::from_mins(5),
            max_os_calls: 1_000_000,
            ..ExecutionLimits::default()
        };
        let code = format!(
            "vsh_patch('src/lib.rs', 'a + b', {edit:?})\nstatus, out, err = vsh_exec(['cargo', 'test', '--offline', '-q'])\n(status, out, err)"
        );
        let policy = CallPolicy::balanced_default(None);
        let outcome = MontyExecutor::in_process()
            .execute_with_commands(&code, &mut ws.vfs, &policy, &limits, &config, &Uninterrupted)
            .unwrap_or_else(|error| panic!("{error:?}"));
        let diff = ws.diff();
        (outcome.value, diff)
    };
    // A broken edit: the tests fail in the candidate, and the program sees it.
    let (value, diff) = run("a - b");
    let vsh_monty::MontyObject::Tuple(items) = value else { panic!("{value:?}") };
    assert_eq!(items[0], vsh_monty::MontyObject::Int(101), "cargo test fails: {items:?}");
    let vsh_monty::MontyObject::String(stdout) = &items[1] else { panic!("{items:?}") };
    assert!(stdout.contains("adds") && stdout.contains("FAILED"), "the test ran and failed: {items:?}");
    // Cargo writes its lock file (a real change); target/ never enters the diff.
    let expected = [("Cargo.lock".to_owned(), DiffKind::Create), ("src/lib.rs".to_owned(), DiffKind::Modify)];
    assert_eq!(diff, expected);
    // The fixed edit passes, building incrementally in the kept target/.
    let (value, diff) = run("b + a");
    let vsh_monty::MontyObject::Tuple(items) = value else { panic!("{value:?}") };
    assert_eq!(items[0], vsh_monty::MontyObject::Int(0), "cargo test passes: {items:?}");
    assert_eq!(diff, expected);
    assert!(scratch.path().join("debug").is_dir(), "the build output is in the scratch directory");
}

impl Workspace {
    fn command_on(
        &mut self,
        argv: &[&str],
        network: vsh_sandbox::NetworkAccess,
    ) -> Result<vsh_monty::BashOutcome, ExecutionError> {
        let argv: Vec<String> = argv.iter().map(|arg| (*arg).to_owned()).collect();
        let policy = CallPolicy::balanced_default(None);
        let mut config = CommandConfig::new(self.root());
        config.network = network;
        MontyExecutor::in_process().execute_command(
            &argv,
            &mut self.vfs,
            &policy,
            &ExecutionLimits::default(),
            &config,
            &Uninterrupted,
        )
    }
}

#[test]
fn the_network_switch_gives_none_a_private_loopback_or_the_hosts() {
    use vsh_sandbox::NetworkAccess;
    let Some(_processes) = fuse_available() else { return };
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    // A host daemon's unix socket, where daemons keep them (/run: the rest
    // of the host, /var/tmp say, does not exist for a command).
    let daemon_dir = tempfile::Builder::new().prefix("vsh-daemon-").tempdir_in("/run").unwrap();
    let daemon = daemon_dir.path().join("daemon.sock");
    let _daemon = std::os::unix::net::UnixListener::bind(&daemon).unwrap();
    // Anyone may connect, as to a daemon that serves every user (the command runs as another uid).
    std::fs::set_permissions(daemon_dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&daemon, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    std::os::unix::net::UnixStream::connect(&daemon).expect("the baseline: the host reaches its daemon");
    // A host datagram socket, as /dev/log is.
    let log = daemon_dir.path().join("log.sock");
    let log_listener = std::os::unix::net::UnixDatagram::bind(&log).unwrap();
    std::fs::set_permissions(&log, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    std::os::unix::net::UnixDatagram::unbound()
        .unwrap()
        .send_to(b"baseline", &log)
        .expect("the baseline: it takes datagrams");
    let mut received = [0_u8; 16];
    assert_eq!(log_listener.recv(&mut received).unwrap(), 8);
    // Its own server and client on 127.0.0.1, the host's listener, then the host's daemon.
    let script = format!(
        "import socket\n\
         try:\n    s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n    \
         c = socket.create_connection(s.getsockname()); a, _ = s.accept(); c.sendall(b'ping'); print('own', a.recv(4).decode())\n\
         except OSError as e:\n    print('own failed', e.errno)\n\
         try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2); print('host reached')\n\
         except OSError as e:\n    print('host unreachable')\n\
         try:\n    u = socket.socket(socket.AF_UNIX); u.connect({daemon:?}); print('daemon reached')\n\
         except OSError as e:\n    print('daemon unreachable', e.errno)\n\
         try:\n    d, _ = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); d.sendto(b'x', {log:?}); print('log reached')\n\
         except OSError as e:\n    print('log unreachable', e.errno)\n\
         a, b = socket.socketpair(); a.sendall(b'pair'); print('pair', b.recv(4).decode())\n"
    );
    let ran = |network| {
        let mut ws = Workspace::with(&files());
        let outcome = ws
            .command_on(&["python3", "-c", &script], network)
            .unwrap_or_else(|error| panic!("{network:?}: {error:?}"));
        String::from_utf8_lossy(&outcome.stdout).into_owned()
    };
    assert_eq!(
        ran(NetworkAccess::None),
        "own failed 1\nhost unreachable\ndaemon unreachable 1\nlog unreachable 1\npair pair\n",
        "no sockets but stream pairs (EPERM)"
    );
    assert_eq!(
        ran(NetworkAccess::Loopback),
        "own ping\nhost unreachable\ndaemon unreachable 1\nlog unreachable 1\npair pair\n",
        "its own loopback, nothing outside"
    );
    assert_eq!(
        ran(NetworkAccess::All),
        "own ping\nhost reached\ndaemon reached\nlog reached\npair pair\n",
        "the host's network, its unix sockets too"
    );
    drop(host);
}

/// A new user's `npm install` without a network waited 70 s before it
/// failed (ux49 M11): the resolver could not be reached, a temporary
/// failure, retried. Without a network a name is looked up in files only
/// (loopback names), so a lookup fails at once, and package managers are
/// told not to retry; a variable given wins. With a network, the host's
/// resolver configuration is the command's.
#[test]
fn without_a_network_a_name_lookup_fails_at_once_and_package_managers_do_not_retry() {
    use vsh_sandbox::NetworkAccess;
    let Some(_processes) = fuse_available() else { return };
    let script = "import os, socket, time\n\
                  started = time.monotonic()\n\
                  try:\n    socket.getaddrinfo('registry.npmjs.org', 443); print('resolved')\n\
                  except socket.gaierror as e:\n    print('lookup', e.errno, time.monotonic() - started < 2)\n\
                  print(socket.getaddrinfo('localhost', 80)[0][4][0] in ('127.0.0.1', '::1'))\n\
                  print([l.split()[0] for l in open('/etc/nsswitch.conf') if l.startswith('hosts:')])\n\
                  print(os.environ.get('npm_config_fetch_retries'), os.environ.get('PIP_RETRIES'))\n";
    let mut ws = Workspace::with(&files());
    let outcome = ws.command_on(&["python3", "-c", script], NetworkAccess::None).unwrap();
    let printed = String::from_utf8_lossy(&outcome.stdout).into_owned();
    // EAI_NONAME (-2), within two seconds; loopback names still resolve.
    assert_eq!(printed, "lookup -2 True\nTrue\n['hosts:']\n0 0\n", "{printed}");
    let hosts = ws.command_on(&["cat", "/etc/hosts", "/etc/nsswitch.conf"], NetworkAccess::None).unwrap();
    let shown = String::from_utf8_lossy(&hosts.stdout).into_owned();
    assert!(shown.starts_with("127.0.0.1\tlocalhost\n::1\t") && shown.contains("\nhosts: files\n"), "{shown}");
    // With a network, the host's files (and no variable of vsh's).
    let host_hosts = std::fs::read_to_string("/etc/hosts").unwrap();
    let online = ws
        .command_on(&["sh", "-c", "cat /etc/hosts; echo \"[$npm_config_fetch_retries]\""], NetworkAccess::All)
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&online.stdout), format!("{host_hosts}[]\n"));
}

#[test]
fn a_fifo_or_socket_in_a_directory_leaves_the_rest_of_it_listable_to_a_command() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&[("logs/a.log", b"a\n"), ("new.txt", b"n\n")]);
    let status = std::process::Command::new("mkfifo").arg(ws.root().join("logs/ctl")).status().unwrap();
    assert!(status.success(), "mkfifo");
    let _socket = std::os::unix::net::UnixListener::bind(ws.root().join("dev.sock")).unwrap();
    let outcome = ws.command(&["sh", "-c", "ls; ls logs; find . -name '*.txt'"]).unwrap();
    assert_eq!(String::from_utf8_lossy(&outcome.stdout), "logs\nnew.txt\na.log\n./new.txt\n");
    assert!(outcome.stderr.is_empty(), "{}", String::from_utf8_lossy(&outcome.stderr));
}

#[test]
fn a_program_inside_the_workspace_is_the_candidates_file_never_the_hosts() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(_processes) = fuse_available() else { return };
    for mode in MODES {
        let mut ws = Workspace::with(&[("tool.sh", b"#!/bin/sh\necho host version\n")]);
        std::fs::set_permissions(ws.root().join("tool.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = ws.root();
        let code = format!(
            "vsh_write('tool.sh', '#!/bin/sh\\necho candidate version\\n')\n\
             [vsh_exec(['./tool.sh'])[1], vsh_exec([{:?}])[1]]",
            root.join("tool.sh").to_str().unwrap()
        );
        let outcome = ws.run_with_commands(&code).unwrap_or_else(|error| panic!("{mode:?}: {error:?}"));
        assert_eq!(
            outcome.value.py_repr(),
            "['candidate version\\n', 'candidate version\\n']",
            "{mode:?}: by relative and by absolute path, the edited file runs"
        );
        let reads = &ws.vfs.read_set().entries;
        assert!(
            reads.get(&VPath::parse("tool.sh").unwrap()).is_some(),
            "{mode:?}: the run depends on tool.sh: {reads:?}"
        );
    }
}

/// sec82 4: a command left a set-user-id binary and device-like nodes in a
/// scratch directory, which is kept between runs, unreviewed. It is
/// mounted `nosuid` and `nodev`: nothing left there raises a later
/// process's privileges or opens a device.
#[test]
fn scratch_directories_are_mounted_nosuid_and_nodev() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    let scratch = tempfile::tempdir().unwrap();
    let target = format!("{}/out", ws.root().display());
    let script = format!("grep ' {target} ' /proc/self/mountinfo | cut -d' ' -f6");
    let outcome = command_with_scratch(&mut ws, &["/bin/sh", "-c", &script], &[("out", scratch.path())])
        .unwrap_or_else(|error| panic!("{error:?}"));
    let options = String::from_utf8_lossy(&outcome.stdout).trim().to_owned();
    let options: Vec<&str> = options.split(',').collect();
    assert!(options.contains(&"nosuid") && options.contains(&"nodev"), "{options:?}");
}

/// Run `argv` in a candidate of `ws` whose scratch directories are `scratch`.
fn command_with_scratch(
    ws: &mut Workspace,
    argv: &[&str],
    scratch: &[(&str, &std::path::Path)],
) -> Result<vsh_monty::BashOutcome, ExecutionError> {
    let argv: Vec<String> = argv.iter().map(|arg| (*arg).to_owned()).collect();
    let policy = CallPolicy::balanced_default(None);
    let mut config = CommandConfig::new(ws.root());
    config.scratch = scratch.iter().map(|(name, dir)| ((*name).to_owned(), dir.to_path_buf())).collect();
    MontyExecutor::in_process().execute_command(
        &argv,
        &mut ws.vfs,
        &policy,
        &ExecutionLimits::default(),
        &config,
        &Uninterrupted,
    )
}

/// An outside probe had 4 processes of 5 GiB each take 13 GB of the host
/// before the run's timeout: the memory budget bounded each process, not the
/// command. Now it bounds them together (a memory cgroup of the command's
/// own): three children of 150 MB each, every one within the 256 MiB a
/// process may have, cannot all live at once.
#[test]
fn a_commands_processes_together_stay_within_its_memory_budget() {
    let Some(_processes) = fuse_available() else { return };
    if !std::path::Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists() {
        assert!(std::env::var_os("VSH_REQUIRE_SANDBOX").is_none(), "no cgroup v1 memory controller");
        return;
    }
    let script = "import os, time\n\
                  children = []\n\
                  for _ in range(3):\n\
                  \x20   pid = os.fork()\n\
                  \x20   if pid == 0:\n\
                  \x20       b = bytearray(150 << 20)\n\
                  \x20       for i in range(0, len(b), 4096): b[i] = 1\n\
                  \x20       time.sleep(0.3)\n\
                  \x20       os._exit(0)\n\
                  \x20   children.append(pid)\n\
                  killed = sum(1 for pid in children if os.WIFSIGNALED(os.waitpid(pid, 0)[1]))\n\
                  print('killed', killed)\n";
    let mut ws = Workspace::with(&files());
    let limits = ExecutionLimits { max_duration: std::time::Duration::from_secs(20), ..ExecutionLimits::default() };
    assert_eq!(limits.max_memory_bytes, 256 << 20, "the budget this test is written for");
    let outcome = ws.command_with(&["python3", "-c", script], &limits).unwrap();
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    let killed: u32 =
        stdout.trim().strip_prefix("killed ").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{stdout}"));
    assert!(killed >= 1, "450 MB of processes within a 256 MiB budget: {stdout}");
    // One child alone fits.
    let one = script.replace("range(3)", "range(1)");
    let outcome = ws.command_with(&["python3", "-c", &one], &limits).unwrap();
    assert_eq!(String::from_utf8_lossy(&outcome.stdout), "killed 0\n");
}

/// A tmpfs of `size` mounted for one test, unmounted when dropped.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(size: &str) -> Self {
        Self::mount_with(&format!("size={size}"))
    }

    /// A tmpfs with these mount options (`size=64m,nr_inodes=4000`).
    fn mount_with(options: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("{options},mode=0777"), "vsh-test-disk"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "mount a tmpfs (the command tests run as root)");
        Self(dir)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

#[test]
fn a_command_that_would_fill_the_disk_of_its_scratch_directories_is_stopped() {
    let Some(_processes) = fuse_available() else { return };
    let disk = SmallDisk::mount("64m");
    let mut ws = Workspace::with(&files());
    // Well within half of what is free: it runs and keeps what it built.
    let small = command_with_scratch(
        &mut ws,
        &["/bin/sh", "-c", "head -c 8000000 /dev/zero > out/small"],
        &[("out", disk.0.path())],
    );
    assert!(small.is_ok(), "{small:?}");
    assert_eq!(std::fs::metadata(disk.0.path().join("small")).unwrap().len(), 8_000_000);
    // Past half of it (about 28 MB of the 56 MB left): stopped, long before its sleep ends.
    let started = std::time::Instant::now();
    let big = command_with_scratch(
        &mut ws,
        &["/bin/sh", "-c", "head -c 40000000 /dev/zero > out/big; sleep 20"],
        &[("out", disk.0.path())],
    );
    match big {
        Err(ExecutionError::Limit { limit, .. }) => {
            assert_eq!(limit.limit, vsh_monty::LimitKind::DiskSpace);
            assert!(limit.attempted > limit.max, "{limit:?}");
            assert!(limit.max > 24_000_000 && limit.max < 32_000_000, "half of what was available: {limit:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "stopped, not waited out");
}

/// sec53 F2: each `vsh_exec` of one Monty run counted the disk from its own
/// start, so six commands each taking under half of what was left filled a
/// small disk within one run. The run's commands share one start: together
/// they take no more than one command may.
#[test]
fn the_commands_of_one_run_together_take_no_more_of_the_disk_than_one_may() {
    let Some(_processes) = fuse_available() else { return };
    let disk = SmallDisk::mount("64m");
    let mut ws = Workspace::with(&files());
    let policy = CallPolicy::balanced_default(None);
    let mut config = CommandConfig::new(ws.root());
    config.scratch = vec![("out".to_owned(), disk.0.path().to_path_buf())];
    // Each writes 16 MB, well within half of what is left when it starts;
    // the second's total passes half of what the run started with.
    let program = "r = []\nfor i in range(3):\n    r.append(vsh_exec(['/bin/sh', '-c', \
                   'head -c 16000000 /dev/zero > out/f' + str(i)])[0])\nr";
    let ran = MontyExecutor::in_process().execute_with_commands(
        program,
        &mut ws.vfs,
        &policy,
        &ExecutionLimits::default(),
        &config,
        &Uninterrupted,
    );
    match ran {
        Err(ExecutionError::Limit { limit, .. }) => assert_eq!(limit.limit, vsh_monty::LimitKind::DiskSpace),
        other => panic!("the run's commands together took more than half: {other:?}"),
    }
}

#[test]
fn a_command_that_would_use_up_the_inodes_of_its_scratch_directories_is_stopped() {
    let Some(_processes) = fuse_available() else { return };
    // Plenty of bytes, 4,000 inodes: empty files run out of the inodes first.
    let disk = SmallDisk::mount_with("size=64m,nr_inodes=4000");
    let mut ws = Workspace::with(&files());
    let make = |count: u32| format!("i=0; while [ $i -lt {count} ]; do : > out/f$i; i=$((i+1)); done; sleep 20");
    let few = command_with_scratch(
        &mut ws,
        &["/bin/sh", "-c", &make(100).replace("; sleep 20", "")],
        &[("out", disk.0.path())],
    );
    assert!(few.is_ok(), "{few:?}");
    let started = std::time::Instant::now();
    let many = command_with_scratch(&mut ws, &["/bin/sh", "-c", &make(3_000)], &[("out", disk.0.path())]);
    match many {
        Err(ExecutionError::Limit { limit, .. }) => {
            assert_eq!(limit.limit, vsh_monty::LimitKind::DiskNodes);
            assert!(limit.attempted > limit.max, "{limit:?}");
            assert!(limit.max > 1_800 && limit.max < 2_000, "half of what was available: {limit:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "stopped, not waited out");
}

/// A scratch directory the command's user may write (as the store makes them).
fn scratch_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    dir
}

#[test]
fn python_bytecode_goes_to_its_scratch_directory_and_never_into_the_diff() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&[("pkg/__init__.py", b""), ("pkg/mod.py", b"VALUE = 41\n")]);
    let pycache = scratch_dir();
    let script = "import sys; sys.path.insert(0, '.'); import pkg.mod; print(pkg.mod.VALUE + 1)";
    let argv = ["python3", "-c", script];
    let first = command_with_scratch(&mut ws, &argv, &[("__pycache__", pycache.path())]).unwrap();
    assert_eq!(String::from_utf8_lossy(&first.stdout), "42\n");
    assert!(ws.diff().is_empty(), "no __pycache__ in the diff: {:?}", ws.diff());
    // The bytecode is in the scratch directory, under the workspace's own path, for the next run.
    let compiled: Vec<String> = walk_names(pycache.path())
        .into_iter()
        .filter(|name| std::path::Path::new(name).extension().is_some_and(|ext| ext == "pyc"))
        .collect();
    assert!(compiled.iter().any(|name| name.starts_with("mod.")), "{compiled:?}");
    // Without the scratch name, Python writes no bytecode at all.
    let mut plain = Workspace::with(&[("pkg/__init__.py", b""), ("pkg/mod.py", b"VALUE = 41\n")]);
    command_with_scratch(&mut plain, &argv, &[]).unwrap();
    assert!(plain.diff().is_empty(), "{:?}", plain.diff());
}

/// sec80 F3: a run that changed nothing (so kept nothing) planted bytecode
/// for the system's `json` in the kept bytecode cache, and every later
/// Python command of the workspace ran it. Only the workspace's own
/// modules' bytecode is kept; the system's is the run's alone.
#[test]
fn a_run_leaves_no_bytecode_of_the_systems_modules_for_the_next() {
    let Some(_processes) = fuse_available() else { return };
    let plant = "import importlib.util, importlib._bootstrap_external as b, json, os\n\
                 src = json.__file__\n\
                 st = os.stat(src)\n\
                 code = compile(\"print('PLANTED')\", src, 'exec')\n\
                 path = importlib.util.cache_from_source(src)\n\
                 os.makedirs(os.path.dirname(path), exist_ok=True)\n\
                 open(path, 'wb').write(b._code_to_timestamp_pyc(code, st.st_mtime, st.st_size))\n";
    let import = "import json; print('imported')";
    // The baseline: a cache kept whole runs what was planted.
    let kept = scratch_dir();
    let python = |script: &str| {
        std::process::Command::new("python3")
            .args(["-c", script])
            .env("PYTHONPYCACHEPREFIX", kept.path())
            .output()
            .unwrap()
    };
    assert!(python(plant).status.success());
    assert_eq!(String::from_utf8_lossy(&python(import).stdout), "PLANTED\nimported\n", "the baseline");
    // In candidates: the next run imports the system's own.
    let mut ws = Workspace::with(&[("pkg/__init__.py", b""), ("pkg/mod.py", b"VALUE = 41\n")]);
    let pycache = scratch_dir();
    let planted = command_with_scratch(&mut ws, &["python3", "-c", plant], &[("__pycache__", pycache.path())]);
    assert!(planted.is_ok(), "{planted:?}");
    let script = format!("{import}; import sys; sys.path.insert(0, '.'); import pkg.mod");
    let next = command_with_scratch(&mut ws, &["python3", "-c", &script], &[("__pycache__", pycache.path())]).unwrap();
    assert_eq!(String::from_utf8_lossy(&next.stdout), "imported\n");
    // What was kept: the workspace's modules' bytecode, nothing of the system's.
    let kept_names = walk_names(pycache.path());
    assert!(kept_names.iter().any(|name| name.starts_with("mod.")), "{kept_names:?}");
    assert!(walk_dirs(pycache.path()).iter().all(|dir| !dir.contains("python3")), "{:?}", walk_dirs(pycache.path()));
}

/// Every directory beneath `dir`, as a path relative to it.
fn walk_dirs(dir: &std::path::Path) -> Vec<String> {
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            dirs.push(path.strip_prefix(dir).unwrap().to_string_lossy().into_owned());
            dirs.extend(
                walk_dirs(&path)
                    .into_iter()
                    .map(|inner| format!("{}/{inner}", path.file_name().unwrap().to_string_lossy())),
            );
        }
    }
    dirs
}

/// Every file name beneath `dir`.
fn walk_names(dir: &std::path::Path) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            names.extend(walk_names(&path));
        } else {
            names.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    names
}

#[test]
fn a_nested_scratch_directory_is_scratch_only_where_its_parent_is_a_directory() {
    let Some(_processes) = fuse_available() else { return };
    let cache = scratch_dir();
    let script =
        "mkdir -p node_modules/.cache && echo cached > node_modules/.cache/entry && cat node_modules/.cache/entry";
    // node_modules is a directory: its .cache is the scratch directory.
    let mut ws = Workspace::with(&[("node_modules/left-pad/index.js", b"module.exports = 1;\n")]);
    let outcome = command_with_scratch(&mut ws, &["/bin/sh", "-c", script], &[("node_modules/.cache", cache.path())])
        .unwrap_or_else(|error| panic!("{error:?}"));
    assert_eq!(String::from_utf8_lossy(&outcome.stdout), "cached\n");
    assert!(ws.diff().is_empty(), "the cache never enters the diff: {:?}", ws.diff());
    assert_eq!(std::fs::read_to_string(cache.path().join("entry")).unwrap(), "cached\n");
    // No node_modules yet: nothing is bound, and what the command makes is its change.
    let mut fresh = Workspace::with(&files());
    command_with_scratch(&mut fresh, &["/bin/sh", "-c", script], &[("node_modules/.cache", cache.path())]).unwrap();
    let paths: Vec<String> = fresh.diff().into_iter().map(|(path, _)| path).collect();
    assert_eq!(paths, ["node_modules", "node_modules/.cache", "node_modules/.cache/entry"]);
}

#[test]
fn a_target_scratch_directory_is_bound_only_beside_a_build_manifest() {
    let Some(_processes) = fuse_available() else { return };
    let script = "cat target/keep.txt 2>/dev/null || echo hidden; echo new > target/new.txt";
    let run = |files: &[(&str, &[u8])], scratch: &[(&str, &std::path::Path)]| {
        let mut ws = Workspace::with(files);
        let outcome = command_with_scratch(&mut ws, &["/bin/sh", "-c", script], scratch)
            .unwrap_or_else(|error| panic!("{files:?}: {error:?}"));
        let paths: Vec<String> = ws.diff().into_iter().map(|(path, _)| path).collect();
        (String::from_utf8_lossy(&outcome.stdout).into_owned(), paths)
    };
    // Not a Rust or Maven project: its target is its own, seen and changed in the diff.
    let target = scratch_dir();
    let own = run(&[("target/keep.txt", b"important\n"), ("Makefile", b"all:\n")], &[("target", target.path())]);
    assert_eq!(own, ("important\n".to_owned(), vec!["target/new.txt".to_owned()]));
    assert_eq!(std::fs::read_dir(target.path()).unwrap().count(), 0, "nothing went to the scratch directory");
    // Beside Cargo.toml (or pom.xml) it is the build's output: the scratch directory.
    for manifest in ["Cargo.toml", "pom.xml"] {
        let scratch = scratch_dir();
        let built = run(&[("target/keep.txt", b"host build\n"), (manifest, b"")], &[("target", scratch.path())]);
        assert_eq!(built, ("hidden\n".to_owned(), Vec::<String>::new()), "{manifest}");
        assert_eq!(std::fs::read_to_string(scratch.path().join("new.txt")).unwrap(), "new\n", "{manifest}");
    }
    // A nested one beside a crate in a subdirectory; a manifest elsewhere does not count.
    let nested = scratch_dir();
    let script = "echo new > rs/target/new.txt";
    let mut ws = Workspace::with(&[("rs/Cargo.toml", b""), ("rs/src/lib.rs", b"")]);
    command_with_scratch(&mut ws, &["/bin/sh", "-c", script], &[("rs/target", nested.path())]).unwrap();
    assert!(ws.diff().is_empty(), "{:?}", ws.diff());
    assert!(nested.path().join("new.txt").is_file());
    let mut elsewhere = Workspace::with(&[("Cargo.toml", b""), ("rs/src/lib.rs", b"")]);
    command_with_scratch(
        &mut elsewhere,
        &["/bin/sh", "-c", "mkdir rs/target && echo new > rs/target/new.txt"],
        &[("rs/target", nested.path())],
    )
    .unwrap();
    let paths: Vec<String> = elsewhere.diff().into_iter().map(|(path, _)| path).collect();
    assert_eq!(paths, ["rs/target", "rs/target/new.txt"]);
}

/// ux76: a command's descriptors were capped at 1024, hard: `ulimit -n
/// 4096` failed, and a runtime that raises its soft limit (Go's) could not.
/// It starts at 1024 (what `select` can watch) and may raise it to the
/// command's own ceiling, never past it.
#[test]
fn a_command_starts_with_1024_descriptors_and_may_raise_them_to_its_ceiling() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&[]);
    let script = "ulimit -Sn; ulimit -Hn; ulimit -n 4096 && ulimit -n; ulimit -n 70000 2>/dev/null || echo refused";
    let result = ws.command_with(&["/bin/bash", "-c", script], &ExecutionLimits::for_commands());
    // Never past what vsh itself may have (the kernel refuses raising a hard limit).
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let own: u64 = limits
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().nth(1))
        .and_then(|hard| hard.parse().ok())
        .unwrap_or(u64::MAX);
    let ceiling = own.min(vsh_monty::COMMAND_OPEN_FILES);
    assert!(ceiling >= 4096, "this test needs a hard limit of 4096 descriptors at least: {ceiling}");
    assert_eq!(stdout_of(&result), format!("1024\n{ceiling}\n4096\nrefused\n"), "{result:?}");
}

#[test]
fn the_memory_budget_bounds_each_process_of_a_command() {
    let Some(_processes) = fuse_available() else { return };
    // 512 MiB, touched: what the process really holds.
    let script = "b = bytearray(512 << 20); b[::4096] = b'x' * (len(b) // 4096); print('allocated')";
    let mut ws = Workspace::with(&[]);
    let roomy = ws.command_with(&["/usr/bin/python3", "-c", script], &ExecutionLimits::for_commands());
    assert_eq!(stdout_of(&roomy), "allocated\n", "{roomy:?}");
    let tight = ExecutionLimits { max_memory_bytes: 64 << 20, ..ExecutionLimits::for_commands() };
    let refused = ws.command_with(&["/usr/bin/python3", "-c", script], &tight);
    let Err(ExecutionError::Bash { stdout, stderr, .. }) = &refused else { panic!("{refused:?}") };
    assert!(stdout.is_empty(), "{}", String::from_utf8_lossy(stdout));
    assert!(String::from_utf8_lossy(stderr).contains("MemoryError"), "{}", String::from_utf8_lossy(stderr));
    // The limit is each process's: two processes of 40 MiB each fit under 64 MiB.
    let each = "python3 -c 'b = bytearray(40 << 20); print(len(b) >> 20)'";
    let two = ws.command_with(&["/bin/sh", "-c", &format!("{each}; {each}")], &tight);
    assert_eq!(stdout_of(&two), "40\n40\n");
}

#[test]
fn node_starts_in_a_candidate_and_reads_and_writes_the_workspace() {
    let Some(_processes) = fuse_available() else { return };
    let node = std::path::Path::new("/usr/bin/node");
    assert!(node.exists(), "this machine kind has Node.js at /usr/bin/node (the MCP client tests need it too)");
    let mut ws = Workspace::with(&[("in.txt", b"hello")]);
    let script = "const fs = require('fs'); \
                  fs.writeFileSync('out.txt', fs.readFileSync('in.txt', 'utf8').toUpperCase()); \
                  console.log(require('crypto').createHash('sha256').update('x').digest('hex').slice(0, 8))";
    let result = ws.command_with(&["/usr/bin/node", "-e", script], &ExecutionLimits::for_commands());
    assert_eq!(stdout_of(&result), "2d711642\n", "{result:?}");
    assert_eq!(ws.vfs.read(&VPath::parse("out.txt").unwrap()).unwrap().as_ref(), b"HELLO");
}

/// A script outside the workspace (`npm`, `pytest`, `zcat` are scripts) is
/// a command like any program, named by its path or through a symlink: the
/// kernel cannot run a script from a close-on-exec descriptor, so the child
/// falls back to its path.
#[test]
fn a_script_outside_the_workspace_runs_as_the_command_directly_or_through_a_symlink() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(_processes) = fuse_available() else { return };
    let tools = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tools.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = tools.path().join("greet");
    std::fs::write(&script, "#!/bin/sh\necho \"greet $1\" > greeted.txt\ncat greeted.txt\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let link = tools.path().join("greet-link");
    std::os::unix::fs::symlink(&script, &link).unwrap();
    for (program, word) in [(&script, "direct"), (&link, "linked")] {
        let mut ws = Workspace::with(&files());
        let mut config = CommandConfig::new(ws.root());
        config.tools.push(tools.path().to_owned());
        let argv = [program.to_str().unwrap().to_owned(), word.to_owned()];
        let outcome = MontyExecutor::in_process()
            .execute_command(
                &argv,
                &mut ws.vfs,
                &CallPolicy::balanced_default(None),
                &ExecutionLimits::default(),
                &config,
                &Uninterrupted,
            )
            .unwrap_or_else(|error| panic!("{word}: {error:?}"));
        assert_eq!(String::from_utf8_lossy(&outcome.stdout), format!("greet {word}\n"));
        assert_eq!(ws.diff(), [("greeted.txt".to_owned(), DiffKind::Create)], "{word}");
    }
}

/// An os-calls budget too small for even the sandbox's own look at the
/// mount ends the run with that limit, not a failed setup.
#[test]
fn an_os_calls_budget_spent_while_the_command_is_set_up_is_the_limit() {
    let Some(_processes) = fuse_available() else { return };
    for max in [0, 1, 2] {
        let mut ws = Workspace::with(&files());
        let limits = ExecutionLimits { max_os_calls: max, ..ExecutionLimits::default() };
        match ws.command_with(&["/bin/cat", "a.txt"], &limits) {
            Err(ExecutionError::Limit { limit, .. }) => assert_eq!(limit.limit, vsh_monty::LimitKind::OsCalls, "{max}"),
            other => panic!("{max}: {other:?}"),
        }
    }
}

/// A command starts in a directory of the image and nowhere else: a
/// symlink on the way (to the host's `/etc`, to a secret) is never
/// followed, and a file or a missing name is refused before anything runs.
#[test]
fn a_command_never_starts_through_a_symlink_or_outside_a_directory() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&files());
    std::os::unix::fs::symlink("/etc", ws.root().join("etclink")).unwrap();
    std::os::unix::fs::symlink("notes", ws.root().join("noteslink")).unwrap();
    let argv = ["/bin/pwd".to_owned()];
    let config = CommandConfig::new(ws.root());
    let policy = CallPolicy::balanced_default(None);
    let limits = ExecutionLimits::default();
    for (cwd, why) in [
        ("etclink", "symbolic link"),
        ("noteslink", "symbolic link"),
        ("etclink/ssl", "symbolic link"),
        ("a.txt", "not a directory"),
        ("missing", "does not exist"),
    ] {
        let line = vsh_monty::CommandLine { argv: &argv, cwd, stdin: b"" };
        let ran = MontyExecutor::in_process().execute_command_in(
            line,
            &mut ws.vfs,
            &policy,
            &limits,
            &config,
            &Uninterrupted,
        );
        let error = format!("{:?}", ran.as_ref().map(|outcome| String::from_utf8_lossy(&outcome.stdout).into_owned()));
        assert!(ran.is_err() && error.contains(why), "{cwd}: {error}");
    }
    let line = vsh_monty::CommandLine { argv: &argv, cwd: "notes", stdin: b"" };
    let ran =
        MontyExecutor::in_process().execute_command_in(line, &mut ws.vfs, &policy, &limits, &config, &Uninterrupted);
    let stdout = String::from_utf8_lossy(&ran.unwrap().stdout).into_owned();
    assert_eq!(stdout, format!("{}/notes\n", ws.root().display()));
}

/// A real command cannot tell whether a directory that lists as empty
/// holds a hidden name either: its `rmdir` or `mv -T` onto it is refused
/// and on record, while a truly empty one is removed.
#[test]
fn a_command_removing_a_directory_that_holds_only_hidden_names_is_refused_and_recorded() {
    let Some(_processes) = fuse_available() else { return };
    let mut ws = Workspace::with(&[("deploy/.env", b"K=1"), ("empty/.keep", b""), ("a.txt", b"a")]);
    let script = "rm empty/.keep; rmdir empty && echo removed; rmdir deploy || echo refused; mkdir e; \
                  mv -T e deploy || echo refused";
    let outcome = ws.command(&["/bin/sh", "-c", script]).unwrap_or_else(|error| panic!("{error:?}"));
    assert_eq!(String::from_utf8_lossy(&outcome.stdout), "removed\nrefused\nrefused\n");
    assert!(String::from_utf8_lossy(&outcome.stderr).contains("Permission denied"));
    assert!(outcome.denied.iter().all(|denied| denied.path.as_str() == "deploy"), "{:?}", outcome.denied);
    assert!(!outcome.denied.is_empty());
}

/// A program found on the command's PATH through a symlink starts under
/// the name it was found by, as a shell starts it: `xzcat` linking to `xz`
/// decompresses, a virtualenv's `python` keeps its environment, and a
/// script's `$0` is the link.
#[test]
fn a_program_found_through_a_symlink_starts_under_that_name() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(_processes) = fuse_available() else { return };
    let tools = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tools.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("/bin/sh", tools.path().join("mysh")).unwrap();
    let script = tools.path().join("named");
    std::fs::write(&script, "#!/bin/sh\nbasename \"$0\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&script, tools.path().join("named-link")).unwrap();
    let mut ws = Workspace::with(&files());
    let mut config = CommandConfig::new(ws.root());
    config.tools.push(tools.path().to_owned());
    config.env.push(("PATH".to_owned(), format!("{}:/usr/bin:/bin", tools.path().display())));
    for (argv, expected) in [(vec!["mysh", "-c", "basename \"$0\""], "mysh\n"), (vec!["named-link"], "named-link\n")] {
        let argv: Vec<String> = argv.iter().map(|arg| (*arg).to_owned()).collect();
        let outcome = MontyExecutor::in_process()
            .execute_command(
                &argv,
                &mut ws.vfs,
                &CallPolicy::balanced_default(None),
                &ExecutionLimits::default(),
                &config,
                &Uninterrupted,
            )
            .unwrap_or_else(|error| panic!("{argv:?}: {error:?}"));
        assert_eq!(String::from_utf8_lossy(&outcome.stdout), expected, "{argv:?}");
    }
}
