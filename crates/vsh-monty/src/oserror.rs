//! `CPython`-shaped `OSError`s for the guest: the subclass chosen by errno and
//! the message `[Errno N] Description: 'path'` (or `'src' -> 'dst'`).

use monty_types::{ExcType, MontyException, StringRepr};
use vsh_vfs::VfsError;

/// `ENOENT`.
pub(crate) const ENOENT: i32 = 2;
/// `EIO`, for the (unreachable) case of a guest error without an errno.
pub(crate) const EIO: i32 = 5;
/// `EACCES`.
pub(crate) const EACCES: i32 = 13;
/// `EEXIST`.
pub(crate) const EEXIST: i32 = 17;
/// `ENOTDIR`.
pub(crate) const ENOTDIR: i32 = 20;
/// `EISDIR`.
pub(crate) const EISDIR: i32 = 21;
/// `ELOOP`.
pub(crate) const ELOOP: i32 = 40;

/// The `OSError` subclass `CPython` raises for `errno`.
fn exc_type(errno: i32) -> ExcType {
    match errno {
        ENOENT => ExcType::FileNotFoundError,
        EACCES | 1 => ExcType::PermissionError,
        EEXIST => ExcType::FileExistsError,
        ENOTDIR => ExcType::NotADirectoryError,
        EISDIR => ExcType::IsADirectoryError,
        _ => ExcType::OSError,
    }
}

/// The C library's description of `errno`.
fn describe(errno: i32) -> &'static str {
    match errno {
        1 => "Operation not permitted",
        ENOENT => "No such file or directory",
        EIO => "Input/output error",
        EACCES => "Permission denied",
        EEXIST => "File exists",
        ENOTDIR => "Not a directory",
        EISDIR => "Is a directory",
        16 => "Device or resource busy",
        18 => "Invalid cross-device link",
        22 => "Invalid argument",
        27 => "File too large",
        28 => "No space left on device",
        30 => "Read-only file system",
        31 => "Too many links",
        36 => "File name too long",
        39 => "Directory not empty",
        ELOOP => "Too many levels of symbolic links",
        _ => "Unknown error",
    }
}

/// `[Errno N] Description: 'path'` as the matching `OSError` subclass.
pub(crate) fn os_error(errno: i32, path: &str) -> MontyException {
    let message = format!("[Errno {errno}] {}: {}", describe(errno), StringRepr(path));
    MontyException::new(exc_type(errno), Some(message))
}

/// `[Errno N] Description: 'src' -> 'dst'`, for two-path calls (rename).
pub(crate) fn os_error2(errno: i32, src: &str, dst: &str) -> MontyException {
    let message = format!("[Errno {errno}] {}: {} -> {}", describe(errno), StringRepr(src), StringRepr(dst));
    MontyException::new(exc_type(errno), Some(message))
}

/// The guest's view of a non-terminal [`VfsError`] about `path`.
pub(crate) fn from_vfs(error: &VfsError, path: &str) -> MontyException {
    os_error(error.errno().unwrap_or(EIO), path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_cpython() {
        let error = os_error(ENOENT, "/workspace/missing.txt");
        assert_eq!(error.exc_type(), ExcType::FileNotFoundError);
        assert_eq!(error.message(), Some("[Errno 2] No such file or directory: '/workspace/missing.txt'"));
        let error = os_error2(39, "a", "b");
        assert_eq!(error.exc_type(), ExcType::OSError);
        assert_eq!(error.message(), Some("[Errno 39] Directory not empty: 'a' -> 'b'"));
        assert_eq!(os_error(20, "x").exc_type(), ExcType::NotADirectoryError);
        assert_eq!(os_error(EISDIR, "x").exc_type(), ExcType::IsADirectoryError);
        assert_eq!(os_error(EEXIST, "x").exc_type(), ExcType::FileExistsError);
        assert_eq!(os_error(EACCES, "it's").message(), Some("[Errno 13] Permission denied: \"it's\""));
        // glibc's strerror, as CPython prints it.
        assert_eq!(os_error(36, "n").message(), Some("[Errno 36] File name too long: 'n'"));
        assert_eq!(os_error(28, "n").message(), Some("[Errno 28] No space left on device: 'n'"));
    }
}
