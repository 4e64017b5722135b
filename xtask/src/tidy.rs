//! Tidy: repository checks that run as ordinary `#[test]`s, so `cargo test --workspace` enforces them.
//!
//! Each check is one test whose failure lists every offending file. The checks:
//! - every Rust file starts with a `//!` module doc;
//! - no `#[should_panic]`, `todo!`, `unimplemented!` or `dbg!`, and no `#[ignore]` without a
//!   `FIXME` on the line before;
//! - `unsafe` only in `crates/vsh-host` and `crates/vsh-sandbox`, and every `unsafe` block there
//!   has a `// SAFETY:` comment just above;
//! - nothing but vsh-commit, vsh-store and vsh-tools names vsh-host's mutating capability
//!   (`WritableDir`), and clippy.toml's ban on `std::fs` is lifted for a whole crate or module
//!   only where the host is reached by path by design (`FS_BAN_LIFTED`);
//! - workspace crates depend on exactly the crates the "may depend on" table below names (the graph as built, checked both ways);
//! - every locked package comes from crates.io (the workspace's, the fuzz crate's and the comparison
//!   bench's lockfiles);
//! - every dependency's license is allowed by `deny.toml`, so that file is enforced even where
//!   cargo-deny is not installed;
//! - no trailing whitespace in the Rust, TOML and Markdown files of the repository;
//! - every test (or function) a document names in a code span exists, so a guarantee never
//!   points at a test that was renamed or removed;
//! - every on-disk magic the store and commit crates define is named in `docs/store-format.md`,
//!   and every commit `FaultPoint` in `docs/commit-protocol.md`, the one numbered list of the
//!   protocol's steps (no other document or crate doc numbers them).
//!
//! Source patterns are matched on code with comments and literals blanked out (see [`code`]),
//! so this file can name the patterns it bans.

mod code;
mod spdx;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::project_root;
use crate::shell::cargo_program;

/// The directories holding Rust code of ours (`bench` holds the comparison bench's packages,
/// outside the workspace but ours all the same).
const RUST_ROOTS: &[&str] = &["crates", "xtask", "tests", "fuzz", "bench"];

/// Directories never scanned, relative to the root; any directory named `target` is skipped too.
const SKIPPED_DIRS: &[&str] = &[".git", "fuzz/artifacts", "fuzz/corpus", "fuzz/coverage"];

/// The crates that may contain `unsafe`.
const UNSAFE_ALLOWED: &[&str] = &["crates/vsh-host", "crates/vsh-sandbox"];

/// The crates whose code may name vsh-host's mutating capability, `WritableDir`: vsh-host (which
/// defines it), the commit engine and the store (the only parts of the pipeline that change a
/// workspace or data directory), and vsh-tools, whose seed `Host::write_file` writes files directly
/// by the seed's contract (`host.txt`) and is used by no part of the pipeline.
const WRITABLE_ALLOWED: &[&str] = &["crates/vsh-host", "crates/vsh-commit", "crates/vsh-store", "crates/vsh-tools"];

/// For each crate in `crates/`, exactly the workspace crates its `[dependencies]` (and build
/// dependencies) name: the graph as built, checked both ways, so a new edge and an edge no longer
/// used both fail until this table says so. Dev-dependencies are not restricted.
const MAY_DEPEND_ON: &[(&str, &[&str])] = &[
    ("vsh-types", &[]),
    ("vsh-sandbox", &["vsh-types"]),
    ("vsh-host", &["vsh-types"]),
    ("vsh-tools", &["vsh-types", "vsh-host", "vsh-sandbox"]),
    ("vsh-store", &["vsh-types", "vsh-host"]),
    ("vsh-vfs", &["vsh-types", "vsh-host"]),
    ("vsh-policy", &["vsh-types"]),
    ("vsh-bash", &["vsh-types"]),
    ("vsh-candidate", &["vsh-types", "vsh-sandbox"]),
    ("vsh-monty", &["vsh-types", "vsh-vfs", "vsh-policy", "vsh-sandbox", "vsh-bash", "vsh-candidate"]),
    ("vsh-commit", &["vsh-types", "vsh-host", "vsh-store", "vsh-policy"]),
    (
        "vsh",
        &[
            "vsh-types",
            "vsh-host",
            "vsh-store",
            "vsh-vfs",
            "vsh-policy",
            "vsh-monty",
            "vsh-commit",
            "vsh-sandbox",
            "vsh-tools",
        ],
    ),
    ("vsh-cli", &["vsh"]),
    ("vsh-python", &["vsh"]),
];

/// The only package source allowed in a lockfile.
const CRATES_IO: &str = "registry+https://github.com/rust-lang/crates.io-index";

#[test]
fn every_rust_file_starts_with_module_docs() {
    let mut problems = Vec::new();
    for file in rust_files() {
        let text = read(&file);
        let first = text.lines().map(str::trim).find(|line| !line.is_empty());
        if !first.is_some_and(|line| line.starts_with("//!")) {
            problems.push(relative(&file));
        }
    }
    fail_if_any("Rust files whose first line is not a `//!` module doc", &problems);
}

#[test]
fn no_banned_macros_or_attributes() {
    // Split so that these lines themselves hold no banned token.
    let banned =
        [concat!("#[should", "_panic"), concat!("todo", "!("), concat!("unimplemented", "!("), concat!("dbg", "!(")];
    let ignore = concat!("#[ig", "nore");
    let mut problems = Vec::new();
    for file in rust_files() {
        let text = read(&file);
        let original: Vec<&str> = text.lines().collect();
        let stripped = code::strip(&text);
        for (index, line) in stripped.lines().enumerate() {
            for pattern in banned {
                if code::contains_token(line, pattern) {
                    problems.push(format!("{}:{}: `{pattern}`", relative(&file), index + 1));
                }
            }
            let has_fixme = original[index].contains("FIXME") || (index > 0 && original[index - 1].contains("FIXME"));
            if line.contains(ignore) && !has_fixme {
                problems.push(format!(
                    "{}:{}: `{ignore}]` without a FIXME on the line before",
                    relative(&file),
                    index + 1
                ));
            }
        }
    }
    fail_if_any(
        "banned in tests and code: assert the current behaviour (with a FIXME) instead of ignoring or panicking",
        &problems,
    );
}

#[test]
fn unsafe_only_in_host_and_sandbox() {
    let root = project_root();
    let mut problems = Vec::new();
    for file in rust_files() {
        if UNSAFE_ALLOWED.iter().any(|dir| file.starts_with(root.join(dir))) {
            continue;
        }
        for (line, kind) in code::find_unsafe(&code::strip(&read(&file))) {
            problems.push(format!("{}:{}: {kind:?}", relative(&file), line + 1));
        }
    }
    fail_if_any(&format!("`unsafe` outside {}", UNSAFE_ALLOWED.join(" and ")), &problems);
}

#[test]
fn only_the_commit_engine_and_the_store_name_the_writable_handle() {
    let root = project_root();
    let mut problems = Vec::new();
    for file in rust_files() {
        if WRITABLE_ALLOWED.iter().any(|dir| file.starts_with(root.join(dir))) {
            continue;
        }
        for line in code::find_word(&code::strip(&read(&file)), "WritableDir") {
            problems.push(format!("{}:{}", relative(&file), line + 1));
        }
    }
    fail_if_any(&format!("the mutating workspace capability named outside {}", WRITABLE_ALLOWED.join(", ")), &problems);
}

/// Where clippy.toml's ban on reaching the host through `std::fs` may be lifted for a whole
/// crate or module: the crates that build handles or reach the host by path by design, the
/// build's own tools and tests, and the worker's binary pin and test hooks. Anywhere else an
/// exception is a `#[allow]` on one function.
const FS_BAN_LIFTED: &[&str] = &[
    "crates/vsh-host/",
    "crates/vsh-sandbox/",
    "crates/vsh-tools/",
    "crates/vsh-cli/",
    "crates/vsh-monty/src/worker/pool.rs",
    "crates/vsh-monty/src/worker/hooks.rs",
    "xtask/",
    "tests/",
    "fuzz/",
];

#[test]
fn the_std_fs_ban_is_lifted_wholesale_only_where_the_host_is_reached_by_path() {
    let root = project_root();
    let mut problems = Vec::new();
    for file in rust_files() {
        let name = relative(&file);
        let in_tests = name.contains("/tests/") || name.contains("/benches/") || name.ends_with("/build.rs");
        if in_tests || FS_BAN_LIFTED.iter().any(|prefix| name.starts_with(prefix)) {
            continue;
        }
        let stripped = code::strip(&read(&root.join(&name)));
        for (index, line) in stripped.lines().enumerate() {
            if line.trim_start().starts_with("#![allow(") && line.contains("disallowed_methods") {
                problems.push(format!("{name}:{}", index + 1));
            }
        }
    }
    fail_if_any("a whole-module lift of the std::fs ban (clippy.toml) outside FS_BAN_LIFTED", &problems);
}

#[test]
fn unsafe_blocks_have_safety_comments() {
    let root = project_root();
    let mut problems = Vec::new();
    for file in rust_files() {
        if !UNSAFE_ALLOWED.iter().any(|dir| file.starts_with(root.join(dir))) {
            continue;
        }
        let text = read(&file);
        let lines: Vec<&str> = text.lines().collect();
        let blocks: BTreeSet<usize> = code::find_unsafe(&code::strip(&text))
            .into_iter()
            .filter(|(_, kind)| *kind == code::UnsafeKind::Block)
            .map(|(line, _)| line)
            .collect();
        for &line in &blocks {
            if !has_safety_comment(&lines, line, &blocks) {
                problems.push(format!("{}:{}", relative(&file), line + 1));
            }
        }
    }
    fail_if_any("`unsafe` blocks without their own `// SAFETY:` comment within the 3 lines above", &problems);
}

/// Whether the `unsafe` block on line `at` has a `// SAFETY:` comment: on its line, within the
/// 3 lines above, or in the run of comment lines right above it. A comment above another
/// `unsafe` block (one of `blocks`) belongs to that block, not to this one.
fn has_safety_comment(lines: &[&str], at: usize, blocks: &BTreeSet<usize>) -> bool {
    let is_safety = |line: &str| line.contains("// SAFETY:");
    if is_safety(lines[at]) {
        return true;
    }
    for above in (at.saturating_sub(3)..at).rev() {
        if blocks.contains(&above) {
            return false;
        }
        if is_safety(lines[above]) {
            return true;
        }
    }
    lines[..at].iter().rev().take_while(|line| line.trim_start().starts_with("//")).any(|line| is_safety(line))
}

#[test]
fn safety_comment_rule() {
    let lines = [
        "// SAFETY: the pointer is valid.",
        "// More reasons.",
        "// Even more.",
        "// And more.",
        "let a = unsafe { f() };",
        "let b = unsafe { f() };",
        "",
        "let c = 1; // SAFETY: on the line above.",
        "let d = unsafe { f() };",
    ];
    let blocks = BTreeSet::from([4, 5, 8]);
    assert!(has_safety_comment(&lines, 4, &blocks), "a long comment run right above counts");
    assert!(!has_safety_comment(&lines, 5, &blocks), "one comment does not cover two blocks");
    assert!(has_safety_comment(&lines, 8, &blocks));
}

#[test]
fn crate_dependencies_respect_layers() {
    let root = project_root();
    let metadata = cargo_metadata(&root.join("Cargo.toml"), true);
    let packages = metadata["packages"].as_array().expect("cargo metadata has packages");
    let ours: BTreeSet<&str> = packages.iter().filter_map(|package| package["name"].as_str()).collect();
    let mut problems = Vec::new();
    for package in packages {
        let name = package["name"].as_str().expect("package name");
        let manifest = Path::new(package["manifest_path"].as_str().expect("manifest path"));
        if !manifest.starts_with(root.join("crates")) {
            continue;
        }
        let Some((_, allowed)) = MAY_DEPEND_ON.iter().find(|(crate_name, _)| *crate_name == name) else {
            problems.push(format!("{name}: not in the MAY_DEPEND_ON table of xtask/src/tidy.rs; add its layer there"));
            continue;
        };
        let mut used = BTreeSet::new();
        for dependency in package["dependencies"].as_array().expect("dependencies") {
            let dependency_name = dependency["name"].as_str().expect("dependency name");
            let is_dev = dependency["kind"].as_str() == Some("dev");
            if !is_dev && ours.contains(dependency_name) {
                used.insert(dependency_name);
                if !allowed.contains(&dependency_name) {
                    problems.push(format!("{name} depends on {dependency_name}; it may depend only on {allowed:?}"));
                }
            }
        }
        for unused in allowed.iter().filter(|allowed| !used.contains(*allowed)) {
            problems.push(format!("{name} may depend on {unused} but does not: tighten its row of the table"));
        }
    }
    fail_if_any("dependencies that break the crate layering (the MAY_DEPEND_ON table in xtask/src/tidy.rs)", &problems);
}

#[test]
fn lockfiles_use_only_crates_io() {
    let mut problems = Vec::new();
    for lockfile in lockfiles() {
        let text = read(&lockfile);
        let mut package = "?";
        for line in text.lines() {
            if let Some(name) = toml_string_value(line, "name") {
                package = name;
            }
            if let Some(source) = toml_string_value(line, "source")
                && source != CRATES_IO
            {
                problems.push(format!("{}: {package} comes from {source}", relative(&lockfile)));
            }
        }
    }
    fail_if_any(&format!("locked packages from a source other than {CRATES_IO}"), &problems);
}

#[test]
fn dependency_licenses_are_allowed_by_deny_toml() {
    let root = project_root();
    let allowed = deny_allowed_licenses(&read(&root.join("deny.toml")));
    assert!(!allowed.is_empty(), "deny.toml has no [licenses] allow list");
    let mut problems = Vec::new();
    for lockfile in lockfiles() {
        let manifest = lockfile.with_file_name("Cargo.toml");
        let metadata = cargo_metadata(&manifest, false);
        for package in metadata["packages"].as_array().expect("cargo metadata has packages") {
            let id =
                format!("{} {}", package["name"].as_str().unwrap_or("?"), package["version"].as_str().unwrap_or("?"));
            match package["license"].as_str() {
                None => problems.push(format!("{id}: no SPDX license expression (only a license file)")),
                Some(expression) => match spdx::is_allowed(expression, &allowed) {
                    Ok(true) => {}
                    Ok(false) => problems.push(format!("{id}: `{expression}`")),
                    Err(error) => problems.push(format!("{id}: {error}")),
                },
            }
        }
    }
    fail_if_any(&format!("dependencies whose license deny.toml does not allow (allowed: {allowed:?})"), &problems);
}

#[test]
fn no_trailing_whitespace() {
    let mut problems = Vec::new();
    let mut files = Vec::new();
    collect_files(&project_root(), &["rs", "toml", "md"], &mut files);
    for file in files {
        for (index, line) in read(&file).lines().enumerate() {
            if line.trim_end() != line {
                problems.push(format!("{}:{}", relative(&file), index + 1));
            }
        }
    }
    fail_if_any("lines with trailing whitespace", &problems);
}

/// The documents whose claims name the tests that check them.
const CLAIMING_DOCS: &[&str] = &[
    "docs/guarantees.md",
    "docs/store-format.md",
    "docs/commit-protocol.md",
    "docs/testing.md",
    "ARCHITECTURE.md",
    "README.md",
];

#[test]
fn every_test_a_document_names_exists() {
    let mut functions = BTreeSet::new();
    for file in rust_files() {
        functions.extend(function_names(&read(&file), "fn "));
    }
    // The Python SDK's tests and tools are named as tests too.
    let mut python = Vec::new();
    for dir in ["python", "examples/python"] {
        collect_files(&project_root().join(dir), &["py"], &mut python);
    }
    for file in python {
        functions.extend(function_names(&read(&file), "def "));
    }
    let mut problems = Vec::new();
    for doc in CLAIMING_DOCS {
        let text = read(&project_root().join(doc));
        for name in test_like_names(&text) {
            if !functions.contains(&name) {
                problems.push(format!("{doc}: `{name}`"));
            }
        }
    }
    fail_if_any("documents name tests (or functions) that do not exist", &problems);
}

/// The names of `fn` items in Rust source (any visibility).
fn function_names(text: &str, keyword: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find(keyword) {
        let preceded = at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric() && rest.as_bytes()[at - 1] != b'_';
        rest = &rest[at + keyword.len()..];
        let name: String = rest.chars().take_while(|ch| ch.is_ascii_alphanumeric() || *ch == '_').collect();
        if preceded && !name.is_empty() {
            names.insert(name);
        }
    }
    names
}

/// Code spans in Markdown that read like a test's name: lower-case words
/// joined by at least four underscores (field and option names are shorter).
fn test_like_names(markdown: &str) -> Vec<String> {
    markdown
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| {
            span.matches('_').count() >= 4
                && span.starts_with(|ch: char| ch.is_ascii_lowercase())
                && span.chars().all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_')
        })
        .map(str::to_owned)
        .collect()
}

/// The crates whose constants define on-disk formats, and the document that describes them.
const FORMAT_CRATES: &[&str] = &["crates/vsh-store/src", "crates/vsh-commit/src"];

#[test]
fn every_file_magic_and_fault_point_is_documented() {
    let format_doc = read(&project_root().join("docs/store-format.md"));
    let mut problems = Vec::new();
    for dir in FORMAT_CRATES {
        let mut files = Vec::new();
        collect_files(&project_root().join(dir), &["rs"], &mut files);
        for file in files {
            for magic in defined_magics(&read(&file)) {
                if !format_doc.contains(&magic) {
                    problems.push(format!("{}: magic {magic} is not in docs/store-format.md", relative(&file)));
                }
            }
        }
    }
    let protocol_doc = read(&project_root().join("docs/commit-protocol.md"));
    let faults = read(&project_root().join("crates/vsh-commit/src/fault.rs"));
    for point in enum_variants(&faults, "pub enum FaultPoint") {
        if !protocol_doc.contains(&format!("`{point}")) {
            problems.push(format!("fault point {point} is not in docs/commit-protocol.md"));
        }
    }
    fail_if_any("formats and fault points the documentation does not name", &problems);
}

/// The commit protocol is written once: no other document or crate doc numbers its
/// steps by their fault points, so there is one list to keep true.
#[test]
fn the_commit_protocol_steps_are_listed_only_in_the_protocol_doc() {
    let faults = read(&project_root().join("crates/vsh-commit/src/fault.rs"));
    let points = enum_variants(&faults, "pub enum FaultPoint");
    let mut places = vec![project_root().join("docs/store-format.md"), project_root().join("ARCHITECTURE.md")];
    collect_files(&project_root().join("crates/vsh-commit/src"), &["rs"], &mut places);
    let mut problems = Vec::new();
    for place in places {
        let text = read(&place);
        // A step of the list is a numbered line that names its fault point in brackets.
        for (number, line) in text.lines().enumerate() {
            let item = line.trim_start().trim_start_matches("//!").trim_start();
            let numbered =
                item.split_once(". ").is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if numbered
                && points
                    .iter()
                    .any(|point| line.contains(&format!("`{point}`")) || line.contains(&format!("FaultPoint::{point}")))
            {
                problems.push(format!(
                    "{}:{}: a numbered protocol step outside docs/commit-protocol.md",
                    relative(&place),
                    number + 1
                ));
            }
        }
    }
    fail_if_any("the commit protocol's steps listed twice", &problems);
}

/// The eight-byte magics a file defines as constants (`const X: [u8; 8] = *b"VSH.....";`).
fn defined_magics(text: &str) -> Vec<String> {
    text.lines()
        .filter(|line| {
            line.trim_start().starts_with("pub const ")
                || line.trim_start().starts_with("const ")
                || line.trim_start().starts_with("pub(crate) const ")
        })
        .filter(|line| line.contains("[u8; 8]"))
        .filter_map(|line| {
            let start = line.find("b\"VSH")? + 2;
            let magic = line.get(start..start + 8)?;
            magic.chars().all(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit()).then(|| magic.to_owned())
        })
        .collect()
}

/// The variant names of the enum whose declaration line starts with `header`.
fn enum_variants(text: &str, header: &str) -> Vec<String> {
    let Some(start) = text.find(header) else { return Vec::new() };
    let body = &text[start..];
    let Some(end) = body.find("\n}") else { return Vec::new() };
    body[..end]
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|line| line.starts_with(|ch: char| ch.is_ascii_uppercase()))
        .map(|line| line.chars().take_while(char::is_ascii_alphanumeric).collect())
        .collect()
}

#[test]
fn test_name_extraction() {
    let names = test_like_names("see `a_test_that_names_its_claim` and `max_log_bytes`, `Not_a_name_at_all_x`");
    assert_eq!(names, vec!["a_test_that_names_its_claim".to_owned()]);
    let functions = function_names("fn one() {}\npub(crate) fn two_three() {}\nlet defn = 1; // fn\n", "fn ");
    assert!(functions.contains("one") && functions.contains("two_three") && !functions.contains("defn"));
    assert_eq!(defined_magics("pub const LOG: [u8; 8] = *b\"VSHTXL02\";\nlet x = b\"VSHNOPE1\";"), vec!["VSHTXL02"]);
    let variants = enum_variants(
        "pub enum FaultPoint {\n    /// doc\n    PlanSynced,\n    Undone(u32),\n}\n",
        "pub enum FaultPoint",
    );
    assert_eq!(variants, vec!["PlanSynced".to_owned(), "Undone".to_owned()]);
}

#[test]
fn deny_toml_reader() {
    let text = "[graph]\nall-features = true\n\n[licenses]\n# Why.\nallow = [\n  \"MIT\", # note\n  \"Apache-2.0 WITH LLVM-exception\",\n]\nconfidence-threshold = 0.9\n\n[bans]\nallow = [\"x\"]\n";
    assert_eq!(deny_allowed_licenses(text), vec!["MIT".to_owned(), "Apache-2.0 WITH LLVM-exception".to_owned()]);
}

/// Every `.rs` file under [`RUST_ROOTS`], sorted.
fn rust_files() -> Vec<PathBuf> {
    let root = project_root();
    let mut files = Vec::new();
    for dir in RUST_ROOTS {
        collect_files(&root.join(dir), &["rs"], &mut files);
    }
    files.sort();
    files
}

/// The comparison bench's packages, each outside the workspace with a lockfile of its own.
const BENCH_PACKAGES: &[&str] = &["bench/compare/workloads", "bench/compare/ours", "bench/compare/peer"];

/// The lockfiles of the repository: the workspace's, the fuzz crate's and the comparison bench's.
fn lockfiles() -> Vec<PathBuf> {
    let root = project_root();
    [root.join("Cargo.lock"), root.join("fuzz/Cargo.lock")]
        .into_iter()
        .chain(BENCH_PACKAGES.iter().map(|package| root.join(package).join("Cargo.lock")))
        .filter(|path| path.is_file())
        .collect()
}

/// Add the files under `dir` with one of `extensions` to `out`, skipping [`SKIPPED_DIRS`] and `target`.
fn collect_files(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    let root = project_root();
    let entries = std::fs::read_dir(dir).unwrap_or_else(|error| panic!("cannot list {}: {error}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        let file_type = std::fs::symlink_metadata(&path).expect("file metadata").file_type();
        if file_type.is_dir() {
            let skipped = path.file_name().is_some_and(|name| name == "target")
                || SKIPPED_DIRS.iter().any(|skipped| path == root.join(skipped));
            if !skipped {
                collect_files(&path, extensions, out);
            }
        } else if file_type.is_file()
            && path.extension().and_then(|ext| ext.to_str()).is_some_and(|ext| extensions.contains(&ext))
        {
            out.push(path);
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()))
}

/// `path` relative to the repository root, for messages.
fn relative(path: &Path) -> String {
    path.strip_prefix(project_root()).unwrap_or(path).display().to_string()
}

/// Panic with `what` and the list of problems, if there are any.
#[track_caller]
fn fail_if_any(what: &str, problems: &[String]) {
    if problems.is_empty() {
        return;
    }
    let mut message = format!("{what}:\n");
    for problem in problems {
        let _ = writeln!(message, "  {problem}");
    }
    panic!("{message}");
}

/// The value of a `key = "value"` TOML line, if `line` is one.
fn toml_string_value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = line.trim().strip_prefix(key)?.trim_start().strip_prefix('=')?.trim();
    rest.strip_prefix('"')?.strip_suffix('"')
}

/// The strings in the `allow = [...]` array of the `[licenses]` table of a deny.toml.
///
/// A tiny reader for the layout cargo-deny documents: one table header per line, `#` comments,
/// and the array possibly spread over several lines.
fn deny_allowed_licenses(text: &str) -> Vec<String> {
    let mut section = "";
    let mut in_allow = false;
    let mut allowed = Vec::new();
    for raw_line in text.lines() {
        let line = raw_line.split('#').next().unwrap_or("").trim();
        if !in_allow && line.starts_with('[') {
            section = line;
            continue;
        }
        if section != "[licenses]" {
            continue;
        }
        let mut rest = line;
        if !in_allow {
            let Some(after_key) = line.strip_prefix("allow").map(str::trim_start) else { continue };
            let Some(after_eq) = after_key.strip_prefix('=').map(str::trim_start) else { continue };
            let Some(after_bracket) = after_eq.strip_prefix('[') else { continue };
            in_allow = true;
            rest = after_bracket;
        }
        let (items, closed) = match rest.split_once(']') {
            Some((items, _)) => (items, true),
            None => (rest, false),
        };
        allowed.extend(
            items
                .split(',')
                .map(str::trim)
                .filter_map(|item| item.strip_prefix('"')?.strip_suffix('"'))
                .map(str::to_owned),
        );
        if closed {
            in_allow = false;
            section = "";
        }
    }
    allowed
}

/// `cargo metadata` for `manifest`, parsed; tries offline first so the check works without network.
fn cargo_metadata(manifest: &Path, no_deps: bool) -> serde_json::Value {
    let run = |offline: bool| {
        let mut command = Command::new(cargo_program());
        command.args(["metadata", "--format-version", "1", "--locked", "--manifest-path"]).arg(manifest);
        if no_deps {
            command.arg("--no-deps");
        }
        if offline {
            command.arg("--offline");
        }
        command.output().unwrap_or_else(|error| panic!("cannot run cargo metadata: {error}"))
    };
    let mut output = run(true);
    if !output.status.success() {
        output = run(false);
    }
    assert!(
        output.status.success(),
        "cargo metadata --locked --manifest-path {0} failed:\n{1}\n\
         if its lockfile is out of date, `cargo metadata --format-version 1 --manifest-path {0} >/dev/null` \
         updates it with the fewest changes",
        relative(manifest),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}
