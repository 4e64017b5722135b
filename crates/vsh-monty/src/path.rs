//! Guest paths: strings in the guest's namespace, where the workspace is
//! mounted at [`VIRTUAL_ROOT`] and relative paths are relative to it.
//!
//! Normalization is lexical: `.` and empty components are dropped and `..`
//! removes the previous component (`/..` is `/`), as the kernel would do for a
//! path with no symlinks. A path that does not end up at or below
//! [`VIRTUAL_ROOT`] is outside the workspace: the guest gets a
//! `PermissionError` and nothing is looked up anywhere.

use vsh_types::VPath;

/// Where the workspace appears in the guest's namespace; also the guest's
/// working directory.
pub const VIRTUAL_ROOT: &str = "/workspace";

/// The absolute, lexically normalized form of a guest path: `/`, then the
/// components joined by `/`.
pub(crate) fn normalize_absolute(guest: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    if !guest.starts_with('/') {
        parts.extend(VIRTUAL_ROOT.split('/').filter(|part| !part.is_empty()));
    }
    for component in guest.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    let mut out = String::with_capacity(guest.len() + VIRTUAL_ROOT.len());
    for part in &parts {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// The workspace path a guest path names, or `None` if it lies outside the
/// workspace. The caller has already refused NUL bytes.
pub(crate) fn to_workspace(guest: &str) -> Option<VPath> {
    let absolute = normalize_absolute(guest);
    let rest = absolute.strip_prefix(VIRTUAL_ROOT)?;
    if rest.is_empty() {
        return Some(VPath::root());
    }
    let relative = rest.strip_prefix('/')?;
    VPath::parse(relative).ok()
}

/// `Path.absolute()`: the guest path made absolute against the working
/// directory, without resolving `..` (as `CPython` does).
pub(crate) fn absolute(guest: &str) -> String {
    if guest.starts_with('/') {
        return guest.to_owned();
    }
    if guest.is_empty() || guest == "." {
        return VIRTUAL_ROOT.to_owned();
    }
    format!("{VIRTUAL_ROOT}/{guest}")
}

/// The guest path of a workspace path.
pub(crate) fn to_guest(path: &VPath) -> String {
    if path.is_root() { VIRTUAL_ROOT.to_owned() } else { format!("{VIRTUAL_ROOT}/{}", path.as_str()) }
}

/// The path of `name` inside the directory the guest named `dir`, spelled the
/// way pathlib spells it (`Path(dir) / name`).
pub(crate) fn guest_child(dir: &str, name: &str) -> String {
    let trimmed = dir.trim_end_matches('/');
    if dir.is_empty() || dir == "." {
        name.to_owned()
    } else if trimmed.is_empty() {
        format!("/{name}")
    } else {
        format!("{trimmed}/{name}")
    }
}

/// Where a symlink at `link` whose target is `target` points, in the
/// workspace; `None` for absolute targets, targets that leave the workspace,
/// and targets that are not valid UTF-8 or hold NUL.
pub(crate) fn link_destination(link: &VPath, target: &[u8]) -> Option<VPath> {
    let target = std::str::from_utf8(target).ok()?;
    if target.is_empty() || target.contains('\0') || target.starts_with('/') {
        return None;
    }
    let parent = link.parent()?;
    to_workspace(&guest_child(&to_guest(&parent), target))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws(guest: &str) -> Option<String> {
        to_workspace(guest).map(|path| path.as_str().to_owned())
    }

    #[test]
    fn relative_and_absolute_paths_map_into_the_workspace() {
        assert_eq!(ws("a.txt").as_deref(), Some("a.txt"));
        assert_eq!(ws("./d//e/").as_deref(), Some("d/e"));
        assert_eq!(ws("/workspace").as_deref(), Some(""));
        assert_eq!(ws("/workspace/").as_deref(), Some(""));
        assert_eq!(ws(".").as_deref(), Some(""));
        assert_eq!(ws("").as_deref(), Some(""));
        assert_eq!(ws("/workspace/a/../b").as_deref(), Some("b"));
        assert_eq!(ws("a/b/../../c").as_deref(), Some("c"));
        assert_eq!(ws("/workspace/a\\b").as_deref(), Some("a\\b"));
    }

    #[test]
    fn escapes_are_outside() {
        for outside in
            ["/etc/passwd", "../x", "/workspace/../etc/passwd", "/", "/workspacex", "/workspace2/a", "a/../../x"]
        {
            assert_eq!(ws(outside), None, "{outside}");
        }
        // `/..` is `/`, so climbing above the root and back in stays inside.
        assert_eq!(ws("/../../workspace/a").as_deref(), Some("a"));
    }

    #[test]
    fn absolute_and_children_follow_pathlib_spelling() {
        assert_eq!(absolute("a/../b"), "/workspace/a/../b");
        assert_eq!(absolute("."), "/workspace");
        assert_eq!(absolute("/etc"), "/etc");
        assert_eq!(guest_child(".", "x"), "x");
        assert_eq!(guest_child("d/", "x"), "d/x");
        assert_eq!(guest_child("/workspace", "x"), "/workspace/x");
        assert_eq!(normalize_absolute("/a/./b/../c"), "/a/c");
        assert_eq!(normalize_absolute("/.."), "/");
    }

    #[test]
    fn link_targets_resolve_relative_to_the_link() {
        let link = VPath::parse("d/link").unwrap();
        assert_eq!(link_destination(&link, b"x").unwrap().as_str(), "d/x");
        assert_eq!(link_destination(&link, b"../y").unwrap().as_str(), "y");
        assert_eq!(link_destination(&link, b"../../etc"), None);
        assert_eq!(link_destination(&link, b"/workspace/y"), None);
        assert_eq!(link_destination(&link, b"\xff"), None);
    }
}
