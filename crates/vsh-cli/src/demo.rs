//! `vsh demo`: the main job on an embedded example, with nothing to set up.
//!
//! The example workspace and programs ship in the repository (`examples/`) and
//! are compiled into the binary, so the demo runs from anywhere, copies the
//! workspace into a fresh temporary directory, and never touches the checkout.

use std::path::Path;

use vsh::{ReceiptDetail, RunRequest, Runtime};

use crate::render::receipt_text;

const FILES: &[(&str, &str)] = &[
    ("README.md", include_str!("../../../examples/demo-workspace/README.md")),
    ("src/greeting.txt", include_str!("../../../examples/demo-workspace/src/greeting.txt")),
    ("notes/todo.txt", include_str!("../../../examples/demo-workspace/notes/todo.txt")),
    (".env", include_str!("../../../examples/demo-workspace/.env")),
];
const PROGRAM: &str = include_str!("../../../examples/demo.py");
const DENIED_PROGRAM: &str = include_str!("../../../examples/demo-denied.py");

fn copy_example(root: &Path) -> std::io::Result<()> {
    for (path, contents) in FILES {
        let target = root.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(target, contents)?;
    }
    Ok(())
}

/// `println!` through anstream, unless the demo prints JSON.
macro_rules! say {
    ($json:expr, $($arg:tt)*) => {
        if !$json {
            anstream::println!($($arg)*);
        }
    };
}

/// `vsh demo`: the whole story printed, or (`quiet`) only a line saying it
/// held; JSON when asked.
pub(crate) fn run(json: bool, quiet: bool) -> Result<u8, Box<dyn std::error::Error>> {
    let scratch = tempfile::Builder::new().prefix("vsh-demo-").tempdir()?;
    let workspace = scratch.path().join("workspace");
    std::fs::create_dir(&workspace)?;
    copy_example(&workspace)?;
    let silent = json || quiet;
    say!(silent, "== vsh demo: example workspace copied to {} (removed when the demo ends)\n", workspace.display());
    say!(silent, "== program\n{}", PROGRAM.trim_end());

    let runtime = Runtime::open(crate::runtime_config(&workspace)?)?;
    say!(silent, "Monty runs in the confined worker: {}\n", !runtime.is_in_process());
    let preview = runtime.preview(&RunRequest::new(PROGRAM).with_detail(ReceiptDetail::Full).with_intent("demo"))?;
    say!(silent, "\n== preview receipt (nothing on disk has changed yet)\n{}", receipt_text(&preview));
    let unchanged = !workspace.join("notes/summary.txt").exists();
    say!(silent, "notes/summary.txt exists on disk after preview: {}", !unchanged);

    let committed = runtime.commit(preview.transaction, 0)?;
    say!(silent, "\n== commit receipt\n{}", receipt_text(&committed));
    say!(
        silent,
        "== notes/summary.txt on disk after commit:\n{}",
        std::fs::read_to_string(workspace.join("notes/summary.txt"))?
    );
    say!(
        silent,
        "== src/greeting.txt on disk after commit:\n{}",
        std::fs::read_to_string(workspace.join("src/greeting.txt"))?
    );

    say!(silent, "== a program that reaches for a secret\n{}", DENIED_PROGRAM.trim_end());
    let denied = runtime.preview(&RunRequest::new(DENIED_PROGRAM).with_detail(ReceiptDetail::Full))?;
    say!(silent, "\n== its receipt\n{}", receipt_text(&denied));
    say!(silent, "notes/leak.txt exists on disk: {}", workspace.join("notes/leak.txt").exists());
    if !unchanged || workspace.join("notes/leak.txt").exists() {
        return Err("the demo observed a change that should not have happened".into());
    }
    say!(
        silent,
        "\nnext: on a project of your own, `vsh init` there, then `vsh run PROGRAM` or `vsh exec -- COMMAND`, \
         `vsh pending`, `vsh commit TX` (README: On your own project)"
    );
    if quiet && !json {
        println!("vsh demo: previewed, committed and denied as expected");
    }
    if json {
        let document = crate::documents::DemoDocument {
            schema: crate::documents::DEMO.to_owned(),
            workspace: workspace.display().to_string(),
            preview: (&preview).into(),
            commit: (&committed).into(),
            denied: (&denied).into(),
        };
        println!("{}", serde_json::to_string_pretty(&document)?);
    }
    Ok(crate::exit_code(&committed, crate::Asked::Commit, false))
}
