//! The invariants the fuzz targets check, as plain functions that panic on a violation.
//!
//! Each target in `fuzz_targets/` is one call into this library, so a crash reproduces with
//! an ordinary test too. `crates/vsh-types/tests/fuzz_corpus.rs` includes this file as a
//! module and replays the committed seed corpus through it on stable, as part of `cargo test`;
//! so this file may use only `std` and `vsh_types`.

use vsh_types::{VPath, VPathError};

/// Check `VPath::parse` and `VPath::join` on arbitrary bytes.
///
/// The bytes are read as UTF-8, lossily, so every input reaches the parser. The whole text
/// is parsed; then, split at its first line break, the first part is a base path and the
/// second a relative path to join onto it.
pub fn check_vpath(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let text: &str = &text;
    check_parse(text);
    let (base, relative) = text.split_once('\n').unwrap_or((text, ""));
    check_parse(base);
    check_parse(relative);
    let Ok(base) = VPath::parse(base) else { return };
    check_join(&base, relative);
    if let Ok(other) = VPath::parse(relative) {
        check_join_parsed(&base, &other);
    }
}

/// `VPath::parse(input)` agrees with a stack walk over the `/`-separated parts, and a parsed
/// path upholds every invariant of the type.
fn check_parse(input: &str) {
    let parsed = VPath::parse(input);
    assert_eq!(parsed, expected_parse(input), "parse({input:?})");
    if let Ok(path) = parsed {
        check_invariants(&path);
    }
}

/// `base.join(relative)` succeeds exactly when the stack walk from `base` stays inside the root,
/// and then gives the same path.
fn check_join(base: &VPath, relative: &str) {
    let joined = base.join(relative);
    let expected = if relative.starts_with('/') || (base.is_root() && relative.is_empty()) {
        None
    } else {
        walk(base.components().collect(), relative)
    };
    match (&joined, expected) {
        (Ok(path), Some(parts)) => {
            assert_eq!(path.as_str(), parts.join("/"), "{base:?}.join({relative:?})");
            check_invariants(path);
        }
        (Err(_), None) => {}
        (joined, expected) => panic!("{base:?}.join({relative:?}) = {joined:?}, expected components {expected:?}"),
    }
}

/// Joining a parsed path never escapes: the result lies within `base`, and `other` is what lies below it.
fn check_join_parsed(base: &VPath, other: &VPath) {
    // The display form, not `as_str`: the root displays as `.`, and joining "" onto the root fails.
    let other_shown = other.to_string();
    let joined = base.join(&other_shown).unwrap_or_else(|error| panic!("{base:?}.join({other:?}): {error}"));
    check_invariants(&joined);
    assert!(joined.is_within(base), "{joined:?} is not within {base:?}");
    assert_eq!(joined.relative_to(base), Some(other.as_str()), "{joined:?} relative to {base:?}");
    assert_eq!(joined.depth(), base.depth() + other.depth(), "depth of {joined:?}");
}

/// The invariants every `VPath` holds, whatever produced it.
fn check_invariants(path: &VPath) {
    let text = path.as_str();
    assert!(!text.starts_with('/'), "absolute: {path:?}");
    assert!(!text.contains('\0'), "NUL byte: {path:?}");
    assert_eq!(path.is_root(), text.is_empty(), "root is exactly the empty path: {path:?}");
    if !path.is_root() {
        for component in text.split('/') {
            assert!(!matches!(component, "" | "." | ".."), "component {component:?} in {path:?}");
        }
    }
    // The display form, not `as_str`: the root is "" inside but displays as `.`, which parses back.
    let shown = path.to_string();
    assert_eq!(VPath::parse(&shown).as_ref(), Ok(path), "re-parsing the display form of {path:?}");
    assert_eq!(path.components().count(), path.depth(), "depth of {path:?}");
    if let Some(parent) = path.parent() {
        assert!(path.is_strictly_within(&parent), "{path:?} is not below its parent {parent:?}");
        let name = path.file_name().expect("a path with a parent has a file name");
        assert_eq!(parent.child(name).as_ref(), Ok(path), "parent plus file name of {path:?}");
    }
}

/// What `VPath::parse(input)` must return, built without the parser: checks in the documented
/// order, then a stack walk, then the path rebuilt one `child` at a time.
fn expected_parse(input: &str) -> Result<VPath, VPathError> {
    if input.is_empty() {
        return Err(VPathError::Empty);
    }
    if input.contains('\0') {
        return Err(VPathError::Nul);
    }
    if input.starts_with('/') {
        return Err(VPathError::Absolute(input.to_owned()));
    }
    let parts = walk(Vec::new(), input).ok_or_else(|| VPathError::EscapesRoot(input.to_owned()))?;
    Ok(parts.into_iter().fold(VPath::root(), |path, part| {
        path.child(part).unwrap_or_else(|error| panic!("component {part:?} of {input:?}: {error}"))
    }))
}

/// Walk the `/`-separated parts of `relative` from the components in `stack`: skip empty parts
/// and `.`, pop on `..`. `None` if a `..` would leave the root or a part holds a NUL byte.
fn walk<'a>(mut stack: Vec<&'a str>, relative: &'a str) -> Option<Vec<&'a str>> {
    if relative.contains('\0') {
        return None;
    }
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                stack.pop()?;
            }
            name => stack.push(name),
        }
    }
    Some(stack)
}
