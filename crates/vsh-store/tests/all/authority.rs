//! The authority key file: created once with fresh random bytes and private
//! modes, read back identically, and refused whenever someone else could read
//! or replace it.

use std::os::unix::fs::PermissionsExt;

use vsh_store::{AuthorityKeyFile, StoreError};

use crate::Result;

fn reason(error: &StoreError) -> &'static str {
    match error {
        StoreError::AuthorityKey { reason, .. } => reason,
        other => panic!("not a key-file refusal: {other:?}"),
    }
}

#[test]
fn a_key_file_is_created_once_privately_and_read_back_the_same() -> Result {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("config/vsh/authority.key");
    let file = AuthorityKeyFile::at(&path);
    assert!(matches!(file.load(), Err(StoreError::AuthorityKey { .. })), "load never creates");
    let key = file.load_or_create()?;
    assert!(!key.is_unauthenticated());
    assert_eq!(std::fs::metadata(&path)?.permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(path.parent().unwrap())?.permissions().mode() & 0o777, 0o700);
    let text = std::fs::read(&path)?;
    assert_eq!(text.len(), 86);
    assert!(text.starts_with(b"vsh-authority-key-v1 ") && text.ends_with(b"\n"));
    assert_eq!(file.load_or_create()?, key);
    assert_eq!(AuthorityKeyFile::at(&path).load()?, key);
    // Another file gets another key.
    let other = AuthorityKeyFile::at(dir.path().join("other.key")).load_or_create()?;
    assert_ne!(other, key);
    // Racing creators agree on one key, and none of them sees half a file.
    for round in 0..20 {
        let race = dir.path().join(format!("race{round}/authority.key"));
        let keys: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> =
                (0..4).map(|_| scope.spawn(|| AuthorityKeyFile::at(&race).load_or_create())).collect();
            handles.into_iter().map(|handle| handle.join().unwrap()).collect::<std::result::Result<Vec<_>, _>>()
        })?;
        assert!(keys.windows(2).all(|pair| pair[0] == pair[1]), "round {round}");
        let names: Vec<_> = std::fs::read_dir(race.parent().unwrap())?.collect();
        assert_eq!(names.len(), 1, "round {round}: no temporary file is left");
    }
    Ok(())
}

#[test]
fn a_key_file_others_could_read_or_replace_is_refused() -> Result {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("vsh/authority.key");
    AuthorityKeyFile::at(&path).load_or_create()?;
    let file = AuthorityKeyFile::at(&path);
    for mode in [0o640, 0o604, 0o660, 0o666] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        let error = file.load().unwrap_err();
        assert!(reason(&error).contains("group or others"), "{mode:o}: {error}");
        assert!(file.load_or_create().is_err(), "{mode:o}: never replaced");
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    std::fs::set_permissions(path.parent().unwrap(), std::fs::Permissions::from_mode(0o777))?;
    assert!(reason(&file.load().unwrap_err()).contains("directory"), "a directory others may write");
    std::fs::set_permissions(path.parent().unwrap(), std::fs::Permissions::from_mode(0o700))?;
    let key = file.load()?;

    // A symlink is never followed, whatever it points at.
    let link = dir.path().join("vsh/linked.key");
    std::os::unix::fs::symlink(&path, &link)?;
    assert!(reason(&AuthorityKeyFile::at(&link).load().unwrap_err()).contains("regular file"));
    // Not a key: refused, and not overwritten.
    for bad in [&b"vsh-authority-key-v1 xyz\n"[..], b"", &[b'0'; 86][..]] {
        let bad_path = dir.path().join("vsh/bad.key");
        std::fs::write(&bad_path, bad)?;
        std::fs::set_permissions(&bad_path, std::fs::Permissions::from_mode(0o600))?;
        assert!(AuthorityKeyFile::at(&bad_path).load_or_create().is_err(), "{bad:?}");
        assert_eq!(std::fs::read(&bad_path)?, bad);
    }
    // Owned by someone else (needs root to make one): refused.
    if vsh_host::effective_uid() == 0 {
        let foreign = dir.path().join("vsh/foreign.key");
        std::fs::copy(&path, &foreign)?;
        std::os::unix::fs::chown(&foreign, Some(65_534), None)?;
        assert!(reason(&AuthorityKeyFile::at(&foreign).load().unwrap_err()).contains("another user"));
    }
    assert_eq!(file.load()?, key);
    Ok(())
}

#[test]
fn a_key_file_written_by_hand_reads_as_exactly_its_bytes() -> Result {
    let dir = tempfile::tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
    let path = dir.path().join("authority.key");
    // Every hex digit in both nibbles, so each one's value matters.
    let bytes: [u8; 32] = std::array::from_fn(|index| (index as u8).wrapping_mul(0x1f) ^ 0xa5);
    let hex = bytes.iter().fold(String::new(), |mut hex, byte| {
        use std::fmt::Write as _;
        let _ = write!(hex, "{byte:02x}");
        hex
    });
    std::fs::write(&path, format!("vsh-authority-key-v1 {hex}\n"))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    let key = AuthorityKeyFile::at(&path).load()?;
    assert_eq!(key.to_bytes(), bytes);
    // Upper-case digits, a missing newline or one digit too few are not a key.
    for bad in [
        format!("vsh-authority-key-v1 {}\n", hex.to_uppercase()),
        format!("vsh-authority-key-v1 {hex}"),
        format!("vsh-authority-key-v1 {}\n", &hex[1..]),
    ] {
        std::fs::write(&path, bad)?;
        assert_eq!(reason(&AuthorityKeyFile::at(&path).load().unwrap_err()), "the key file is not a vsh authority key");
    }
    Ok(())
}

#[test]
fn the_default_location_follows_the_variables_in_order() {
    const EXPECT: &str = "VSH_TEST_EXPECT_KEY_AT";
    // The child: check what this process's environment names.
    if let Some(expected) = std::env::var_os(EXPECT) {
        assert_eq!(AuthorityKeyFile::default_location().unwrap().path(), std::path::Path::new(&expected));
        return;
    }
    // The parent: one child per case, so this binary's environment is untouched.
    let cases: [(&[(&str, &str)], &str); 4] = [
        (&[("VSH_AUTHORITY_KEY", "/keys/explicit.key"), ("XDG_CONFIG_HOME", "/xdg")], "/keys/explicit.key"),
        (&[("VSH_AUTHORITY_KEY", ""), ("XDG_CONFIG_HOME", "/xdg")], "/xdg/vsh/authority.key"),
        (&[("XDG_CONFIG_HOME", "relative/dir")], "/home/someone/.config/vsh/authority.key"),
        (&[], "/home/someone/.config/vsh/authority.key"),
    ];
    for (env, expected) in cases {
        let output = std::process::Command::new(std::env::current_exe().expect("the test binary"))
            .args(["--exact", "authority::the_default_location_follows_the_variables_in_order", "--test-threads=1"])
            .env_clear()
            .env("HOME", "/home/someone")
            .envs(env.iter().copied())
            .env(EXPECT, expected)
            .output()
            .expect("run the child");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success() && stdout.contains("1 passed"), "{env:?}: {stdout}");
    }
}

#[test]
fn a_key_file_holding_more_than_one_key_is_refused_as_such() -> Result {
    let dir = tempfile::tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
    let path = dir.path().join("authority.key");
    let line = format!("vsh-authority-key-v1 {}\n", "ab".repeat(32));
    std::fs::write(&path, line.repeat(2))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    assert_eq!(reason(&AuthorityKeyFile::at(&path).load().unwrap_err()), "the key file holds more than one key");
    Ok(())
}

#[test]
fn the_nearest_existing_directory_is_found_without_creating_anything() -> Result {
    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join("existing"))?;
    let file = AuthorityKeyFile::at(dir.path().join("existing/missing/deeper/authority.key"));
    let nearest = file.nearest_existing_directory()?;
    let existing = vsh_host::CapDir::open(&dir.path().join("existing"))?;
    assert_eq!(nearest.location_within(&existing)?, Some(vsh_types::VPath::root()));
    assert!(!dir.path().join("existing/missing").exists(), "nothing was created");
    // A key directory that exists is its own nearest.
    std::fs::create_dir_all(dir.path().join("existing/missing/deeper"))?;
    let deeper = vsh_host::CapDir::open(&dir.path().join("existing/missing/deeper"))?;
    assert_eq!(file.nearest_existing_directory()?.location_within(&deeper)?, Some(vsh_types::VPath::root()));
    Ok(())
}
