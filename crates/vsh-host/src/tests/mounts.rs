//! Mount points inside the root are never crossed: a bind mount of a
//! directory outside the workspace is refused by every operation and by both
//! resolution strategies, naming the mount point; one the handle was allowed
//! to cross works.
//!
//! Making a bind mount needs a mount namespace of its own, so each test re-runs
//! itself in a child made by `unshare --user --map-root-user --mount` (which
//! works as root and as an unprivileged user with user namespaces). Under
//! `VSH_REQUIRE_SANDBOX=1` a machine that cannot do this fails the test.

use std::fs;
use std::process::Command;

use vsh_types::VPath;

use super::{Fixture, STRATEGIES, p};
use crate::{CapDir, HostError};

const CHILD: &str = "VSH_HOST_MOUNT_TEST_CHILD";

/// In the child: `true` (run the test body). In the parent: re-run `test` in
/// a private mount namespace, require it to pass, and return `false`.
fn in_own_mount_namespace(test: &str) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let exe = std::env::current_exe().unwrap();
    let output = Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "--propagation", "private"])
        .arg(&exe)
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .output();
    match output {
        Ok(output) if output.status.success() => {
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(stdout.contains("1 passed"), "the child ran nothing:\n{stdout}");
        }
        Ok(output) => panic!(
            "the child failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(error) => {
            assert!(
                std::env::var_os("VSH_REQUIRE_SANDBOX").is_none_or(|value| value != "1"),
                "VSH_REQUIRE_SANDBOX=1 but no mount namespace can be made: {error}"
            );
            eprintln!("skipped: cannot run unshare ({error})");
        }
    }
    false
}

fn bind(source: &std::path::Path, target: &std::path::Path) {
    let status = Command::new("mount").arg("--bind").arg(source).arg(target).status().unwrap();
    assert!(status.success(), "mount --bind {} {}", source.display(), target.display());
}

#[test]
fn a_bind_mount_inside_the_root_is_never_crossed() {
    if !in_own_mount_namespace("tests::mounts::a_bind_mount_inside_the_root_is_never_crossed") {
        return;
    }
    for strategy in STRATEGIES {
        let fixture = Fixture::new(strategy);
        fixture.mkdir("mnt");
        fixture.mkdir("d/inner");
        fixture.mkdir("rebound");
        fixture.write("kept.txt", b"kept");
        bind(&fixture.outside(""), &fixture.ws("mnt"));
        // A bind mount of a directory inside the workspace is a mount point too.
        bind(&fixture.ws("d/inner"), &fixture.ws("rebound"));
        let dir = &fixture.dir;
        let crosses = |result: Result<(), HostError>, at: &str| {
            assert!(
                matches!(&result, Err(HostError::CrossesMount { path }) if path.as_str() == at),
                "{strategy:?} {at}: {result:?}"
            );
        };
        crosses(dir.read_file(&p("mnt/secret.txt"), 1024).map(drop), "mnt");
        crosses(dir.hash_file(&p("mnt/secret.txt")).map(drop), "mnt");
        crosses(dir.lstat(&p("mnt/secret.txt")).map(drop), "mnt");
        crosses(dir.lstat(&p("mnt")).map(drop), "mnt");
        crosses(dir.list_dir(&p("mnt")).map(drop), "mnt");
        crosses(dir.list_dir(&p("mnt/sub")).map(drop), "mnt");
        crosses(dir.open_subdir(&p("mnt")).map(drop), "mnt");
        crosses(dir.create_file_exclusive(&p("mnt/planted"), b"x", 0o600).map(drop), "mnt");
        crosses(dir.create_dir(&p("mnt/made"), 0o700), "mnt");
        crosses(dir.lstat(&p("rebound")).map(drop), "rebound");
        assert!(!fixture.outside("planted").exists() && !fixture.outside("made").exists());
        // Everything else is as usual; the mount point shows in its parent's listing.
        assert_eq!(dir.read_file(&p("kept.txt"), 1024).unwrap().bytes, b"kept");
        let names: Vec<Vec<u8>> = dir.list_dir(&VPath::root()).unwrap().into_iter().map(|entry| entry.name).collect();
        assert!(names.contains(&b"mnt".to_vec()));
        // A handle allowed to cross `mnt` reads through it, and through nothing else.
        let allowed = CapDir::open(&fixture.ws("")).unwrap().with_allowed_mounts([p("mnt")]);
        assert_eq!(allowed.read_file(&p("mnt/secret.txt"), 1024).unwrap().bytes, b"secret");
        assert!(allowed.lstat(&p("mnt")).unwrap().is_some());
        assert!(matches!(allowed.lstat(&p("rebound")), Err(HostError::CrossesMount { .. })));
        // A subdirectory handle keeps the rule.
        let sub = dir.open_subdir(&p("d")).unwrap();
        assert!(sub.list_dir(&p("inner")).is_ok());
        let _ = fs::remove_dir(fixture.ws("mnt/made"));
    }
}
