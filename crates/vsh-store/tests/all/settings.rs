//! Settings files in the data directory: replaced whole and durably, bounded
//! on read, and named by one component only.

use vsh_store::StoreError;

use crate::Result;
use crate::common::data_dir;

#[test]
fn a_setting_is_replaced_whole_and_read_back_within_its_bound() -> Result {
    let dir = tempfile::tempdir()?;
    let data = data_dir(dir.path())?;
    assert_eq!(data.read_setting("policy.toml", 1024)?, None);
    data.write_setting("policy.toml", b"version = 1\nprofile = \"strict\"\n")?;
    assert_eq!(data.read_setting("policy.toml", 1024)?.as_deref(), Some(&b"version = 1\nprofile = \"strict\"\n"[..]));
    data.write_setting("policy.toml", b"version = 1\n")?;
    assert_eq!(data.read_setting("policy.toml", 1024)?.as_deref(), Some(&b"version = 1\n"[..]));
    // No temporary file is left beside it, and a reopened directory reads the same.
    let names: Vec<String> = std::fs::read_dir(dir.path().join(".vsh/data"))?
        .map(|entry| entry.map(|entry| entry.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<_>>()?;
    assert!(
        !names.iter().any(|name| std::path::Path::new(name).extension().is_some_and(|extension| extension == "tmp")),
        "{names:?}"
    );
    assert_eq!(data_dir(dir.path())?.read_setting("policy.toml", 1024)?.as_deref(), Some(&b"version = 1\n"[..]));
    // Over the bound: an error, nothing allocated for it.
    assert!(matches!(data.read_setting("policy.toml", 4), Err(StoreError::DataDir { .. })));
    // A name is one component.
    for bad in ["", "a/b", "..", "."] {
        assert!(data.write_setting(bad, b"x").is_err(), "{bad:?}");
        assert!(data.read_setting(bad, 10).is_err(), "{bad:?}");
    }
    Ok(())
}
