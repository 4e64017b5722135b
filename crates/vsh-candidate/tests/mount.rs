//! Real programs on a candidate: a confined child mounts the FUSE
//! filesystem in its own mount namespace and works on it, and every access
//! arrives at the backend as the request that observes or changes exactly
//! that. The backend here is a small in-memory image with a request log
//! (the real one, the transaction's guarded image, lives in vsh-monty).

#![allow(clippy::disallowed_methods, reason = "tests set up and inspect real files and processes")]

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use vsh_candidate::{Backend, CandidateFs, Owner, serve};
use vsh_sandbox::{ConfinedCommand, ExecGrant, FuseMount, SandboxPolicy, ToolContext};
use vsh_types::fsproto::{FsReply, FsRequest, Meta, NodeType};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    File(Vec<u8>, u32),
    Dir(u32),
    Link(String),
}

/// An image: nodes by absolute path, and every request served, in order.
#[derive(Debug, Default)]
struct Image {
    nodes: BTreeMap<String, Node>,
    log: Vec<String>,
}

#[derive(Debug, Clone, Default)]
struct Memory(Arc<Mutex<Image>>);

const ENOENT: i32 = 2;
const EEXIST: i32 = 17;
const ENOTDIR: i32 = 20;
const EISDIR: i32 = 21;
const ENOTEMPTY: i32 = 39;
const EACCES: i32 = 13;

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

impl Image {
    fn meta(node: &Node) -> Meta {
        match node {
            Node::File(data, mode) => {
                Meta { kind: NodeType::File, size: data.len() as u64, mode: *mode, modified_ns: 0 }
            }
            Node::Dir(mode) => Meta { kind: NodeType::Directory, size: 0, mode: *mode, modified_ns: 0 },
            Node::Link(target) => {
                Meta { kind: NodeType::Symlink, size: target.len() as u64, mode: 0o777, modified_ns: 0 }
            }
        }
    }

    fn need_parent_dir(&self, path: &str) -> Result<(), i32> {
        match self.nodes.get(parent(path)) {
            Some(Node::Dir(_)) => Ok(()),
            Some(_) => Err(ENOTDIR),
            None => Err(ENOENT),
        }
    }

    fn children(&self, path: &str) -> Vec<String> {
        let prefix = format!("{path}/");
        self.nodes
            .keys()
            .filter_map(|key| key.strip_prefix(&prefix))
            .filter(|rest| !rest.contains('/'))
            .map(str::to_owned)
            .collect()
    }

    fn serve(&mut self, request: FsRequest) -> Result<FsReply, i32> {
        refuse_or_fail(&request)?;
        match request {
            FsRequest::Read { path } | FsRequest::Load { path } => match self.nodes.get(&path) {
                Some(Node::File(data, _)) => Ok(FsReply::Bytes(data.clone())),
                Some(_) => Err(EISDIR),
                None => Err(ENOENT),
            },
            FsRequest::Write { path, data } | FsRequest::WriteBack { path, data, .. } => {
                self.need_parent_dir(&path)?;
                let mode = match self.nodes.get(&path) {
                    Some(Node::File(_, mode)) => *mode,
                    Some(_) => return Err(EISDIR),
                    None => 0o644,
                };
                self.nodes.insert(path, Node::File(data, mode));
                Ok(FsReply::Done)
            }
            FsRequest::Mkdir { path, .. } => {
                self.need_parent_dir(&path)?;
                if self.nodes.contains_key(&path) {
                    return Err(EEXIST);
                }
                self.nodes.insert(path, Node::Dir(0o755));
                Ok(FsReply::Done)
            }
            FsRequest::Remove { path, .. } => {
                match self.nodes.get(&path) {
                    None => return Err(ENOENT),
                    Some(Node::Dir(_)) if !self.children(&path).is_empty() => return Err(ENOTEMPTY),
                    Some(_) => {}
                }
                self.nodes.remove(&path);
                Ok(FsReply::Done)
            }
            FsRequest::Stat { path, .. } => {
                self.nodes.get(&path).map(|node| FsReply::Meta(Self::meta(node))).ok_or(ENOENT)
            }
            FsRequest::ReadDir { path, .. } => {
                let names = self.children(&path);
                Ok(FsReply::Entries(
                    names
                        .into_iter()
                        .filter(|name| name != ".env")
                        .map(|name| {
                            let meta = Self::meta(&self.nodes[&format!("{path}/{name}")]);
                            (name, meta)
                        })
                        .collect(),
                ))
            }
            FsRequest::Exists { path } => Ok(FsReply::Exists(self.nodes.contains_key(&path))),
            FsRequest::Rename { from, to } => {
                let node = self.nodes.remove(&from).ok_or(ENOENT)?;
                self.nodes.insert(to, node);
                Ok(FsReply::Done)
            }
            FsRequest::ReadLink { path } => match self.nodes.get(&path) {
                Some(Node::Link(target)) => Ok(FsReply::Target(target.clone())),
                _ => Err(22),
            },
            FsRequest::Chmod { path, mode } => match self.nodes.get_mut(&path) {
                Some(Node::File(_, bits) | Node::Dir(bits)) => {
                    *bits = mode & 0o777;
                    Ok(FsReply::Done)
                }
                _ => Err(ENOENT),
            },
            FsRequest::Symlink { path, target } => {
                self.need_parent_dir(&path)?;
                self.nodes.insert(path, Node::Link(target));
                Ok(FsReply::Done)
            }
            FsRequest::ReadRange { path, offset, length } => match self.nodes.get(&path) {
                Some(Node::File(data, _)) => {
                    let start = usize::try_from(offset).unwrap_or(usize::MAX).min(data.len());
                    let end = start.saturating_add(length as usize).min(data.len());
                    Ok(FsReply::Bytes(data[start..end].to_vec()))
                }
                Some(_) => Err(EISDIR),
                None => Err(ENOENT),
            },
            // A write's charge: to a file, or to a node about to be made.
            FsRequest::Charge { path, .. } => match self.nodes.get(&path) {
                Some(Node::File(..)) => Ok(FsReply::Done),
                Some(_) => Err(EISDIR),
                None => self.need_parent_dir(&path).map(|()| FsReply::Done),
            },
            FsRequest::Append { .. } | FsRequest::Copy { .. } => Err(38),
        }
    }
}

impl Backend for Memory {
    fn call(&self, request: FsRequest) -> FsReply {
        let mut image = self.0.lock().unwrap();
        // The log keeps the request and its path, not written bytes.
        let line = match &request {
            FsRequest::Write { path, data } | FsRequest::WriteBack { path, data, .. } => {
                format!("Write {{ path: {path:?}, {} bytes", data.len())
            }
            other => format!("{other:?}"),
        };
        image.log.push(line.split(", data:").next().unwrap_or(&line).to_owned());
        image.serve(request).unwrap_or_else(FsReply::Failed)
    }
}

/// `.env` is refused; a look at `panics` panics, as a server that fails in
/// a way no errno says (sec78 F1: a panic in the policy's judgment of a name).
fn refuse_or_fail(request: &FsRequest) -> Result<(), i32> {
    if let Some(path) = match request {
        FsRequest::Read { path }
        | FsRequest::Load { path }
        | FsRequest::Stat { path, .. }
        | FsRequest::ReadDir { path, .. } => Some(path),
        _ => None,
    } && path.ends_with("/.env")
    {
        return Err(EACCES);
    }
    if let FsRequest::Stat { path, .. } = request
        && path.ends_with("/panics")
    {
        panic!("the backend failed on {path}");
    }
    Ok(())
}

fn workspace(files: &[(&str, &str)]) -> Memory {
    let memory = Memory::default();
    {
        let mut image = memory.0.lock().unwrap();
        image.nodes.insert("/workspace".to_owned(), Node::Dir(0o755));
        for (path, content) in files {
            let full = format!("/workspace/{path}");
            let mut ancestor = parent(&full).to_owned();
            while ancestor.len() > "/workspace".len() {
                image.nodes.entry(ancestor.clone()).or_insert(Node::Dir(0o755));
                ancestor = parent(&ancestor).to_owned();
            }
            image.nodes.insert(full, Node::File(content.as_bytes().to_vec(), 0o644));
        }
    }
    memory
}

#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Whether this machine can mount FUSE in a private namespace; with
/// `VSH_REQUIRE_SANDBOX=1` (CI) a machine that cannot fails the test.
fn fuse_available() -> bool {
    let available = std::path::Path::new("/dev/fuse").exists() && rustix_ids().0 == 0;
    assert!(
        available || std::env::var_os("VSH_REQUIRE_SANDBOX").is_none(),
        "VSH_REQUIRE_SANDBOX is set, and this machine has no /dev/fuse or the tests do not run as root"
    );
    available
}

/// Run `script` with `sh -c` in a confined child whose working directory
/// is the candidate of `memory`, mounted only in the child's namespace.
fn run(memory: &Memory, script: &str) -> Ran {
    let (ran, served) = run_served(memory, script);
    served.expect("serving ends with the mount");
    ran
}

/// [`run`], with how serving ended.
fn run_served(memory: &Memory, script: &str) -> (Ran, std::io::Result<()>) {
    let dir = tempfile::tempdir().unwrap();
    let mountpoint = dir.path().join("candidate");
    std::fs::create_dir(&mountpoint).unwrap();
    let (mount, mounted) = FuseMount::open(&mountpoint).expect("/dev/fuse");
    let owner = Owner { uid: rustix_ids().0, gid: rustix_ids().1 };
    // The candidate is writable by descriptor: no path of the host is.
    let policy = SandboxPolicy::new();
    let serving = serve(CandidateFs::new(memory.clone(), owner), mounted).expect("the server starts");
    let child = ConfinedCommand::new("sh")
        .args(["-c", script])
        .env("PATH", "/usr/bin:/bin")
        .current_dir(&mountpoint)
        .private_fuse_mount(mount)
        .sandbox_policy(Arc::new(policy))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .new_process_group()
        .spawn(&ToolContext::new(ExecGrant::Any))
        .expect("the confined child starts");
    assert!(
        std::fs::read_dir(&mountpoint).unwrap().next().is_none(),
        "the parent's namespace never sees the candidate"
    );
    let output = child.into_child().wait_with_output().unwrap();
    let served = serving.join();
    let ran = Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    (ran, served)
}

/// A server that panics ends serving with an error, which its caller
/// must take as the command's failure however the command exited (sec78
/// F1: the command exited 0 and its partial writes were committed).
#[test]
fn a_server_that_panics_ends_serving_with_an_error_whatever_the_command_exits_with() {
    if !fuse_available() {
        return;
    }
    let memory = workspace(&[("a.txt", "alpha\n")]);
    let (ran, served) = run_served(&memory, "echo half > half.txt; cat panics; echo done");
    assert!(served.is_err(), "{ran:?}");
}

fn rustix_ids() -> (u32, u32) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| -> u32 {
        let line = status.lines().find(|line| line.starts_with(name)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    (field("Uid:"), field("Gid:"))
}

fn file(memory: &Memory, path: &str) -> Option<String> {
    match memory.0.lock().unwrap().nodes.get(&format!("/workspace/{path}")) {
        Some(Node::File(data, _)) => Some(String::from_utf8_lossy(data).into_owned()),
        _ => None,
    }
}

fn log(memory: &Memory) -> Vec<String> {
    memory.0.lock().unwrap().log.clone()
}

#[test]
fn cat_reads_through_the_image_and_a_listing_is_a_name_read() {
    if !fuse_available() {
        return;
    }
    let memory = workspace(&[("a.txt", "alpha\n"), ("src/lib.rs", "fn main() {}\n"), (".env", "SECRET=1\n")]);
    let ran = run(&memory, "cat a.txt; ls -a; cat .env");
    assert_eq!(ran.stdout, "alpha\n.\n..\na.txt\nsrc\n", "{}", ran.stderr);
    assert!(ran.stderr.contains(".env") && ran.stderr.contains("Permission denied"), "{}", ran.stderr);
    assert_ne!(ran.code, Some(0));
    let log = log(&memory);
    assert!(log.iter().any(|line| line == r#"Read { path: "/workspace/a.txt" }"#), "{log:?}");
    assert!(log.iter().any(|line| line == r#"ReadDir { path: "/workspace", metadata: false }"#), "{log:?}");
    assert!(!log.iter().any(|line| line.contains("src/lib.rs")), "nothing looked inside src: {log:?}");
}

#[test]
fn a_file_past_eight_mebibytes_is_read_a_piece_at_a_time_and_a_smaller_one_whole() {
    if !fuse_available() {
        return;
    }
    // 9 MiB of lines numbered in order, and a small file.
    let mut big = String::new();
    for line in 0..900_000 {
        std::fmt::Write::write_fmt(&mut big, format_args!("{line:09}\n")).unwrap();
    }
    assert!(big.len() > 8 << 20);
    let memory = workspace(&[("big.txt", &big), ("small.txt", "small\n")]);
    let ran = run(&memory, "wc -c < big.txt; tail -n 1 big.txt; sed -n 450001p big.txt; cat small.txt");
    assert_eq!(ran.stdout, format!("{}\n000899999\n000450000\nsmall\n", big.len()), "{}", ran.stderr);
    let log = log(&memory);
    let pieces = log.iter().filter(|line| line.starts_with(r#"ReadRange { path: "/workspace/big.txt""#)).count();
    assert!(pieces > 1, "read a piece at a time: {log:?}");
    assert!(!log.iter().any(|line| line == r#"Read { path: "/workspace/big.txt" }"#), "never whole");
    assert!(log.iter().any(|line| line == r#"Read { path: "/workspace/small.txt" }"#), "{log:?}");
}

#[test]
fn gnu_sed_in_place_and_redirections_change_the_image() {
    if !fuse_available() {
        return;
    }
    let memory = workspace(&[("a.txt", "alpha\nbeta\n")]);
    let ran = run(
        &memory,
        "sed -i s/alpha/ALPHA/ a.txt && printf 'one\\n' > b.txt && printf 'two\\n' >> b.txt && mkdir -p d/e \
         && mv b.txt d/e/c.txt && ln -s ../a.txt d/link && chmod 600 a.txt && rm -f nothing",
    );
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(file(&memory, "a.txt").as_deref(), Some("ALPHA\nbeta\n"));
    assert_eq!(file(&memory, "d/e/c.txt").as_deref(), Some("one\ntwo\n"));
    assert_eq!(file(&memory, "b.txt"), None);
    let image = memory.0.lock().unwrap();
    assert_eq!(image.nodes.get("/workspace/d/link"), Some(&Node::Link("../a.txt".to_owned())));
    assert!(matches!(image.nodes.get("/workspace/a.txt"), Some(Node::File(_, 0o600))));
    // sed wrote a temporary file and renamed it over a.txt: no stray file is left.
    let names: Vec<&String> = image.nodes.keys().collect();
    assert_eq!(
        names,
        [
            "/workspace",
            "/workspace/a.txt",
            "/workspace/d",
            "/workspace/d/e",
            "/workspace/d/e/c.txt",
            "/workspace/d/link"
        ]
    );
}

#[test]
fn a_file_larger_than_the_charge_bound_is_charged_every_64_mib_and_written_back_once_at_the_end() {
    if !fuse_available() {
        return;
    }
    // 160 MiB in 1 MiB blocks: the image gets all of it, written back at the
    // first write (so a refusal fails it) and once at the end, its new bytes
    // charged to the write budget each time 64 MiB more were written.
    // (Counting the whole dirty file against the bound wrote all of it back
    // at every block past the first 64 MiB: hundreds of write-backs; writing
    // it back at each bound copied the growing file each time.)
    let memory = workspace(&[]);
    let ran = run(&memory, "dd if=/dev/zero of=big bs=1M count=160 status=none && printf x >> big");
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    match memory.0.lock().unwrap().nodes.get("/workspace/big") {
        Some(Node::File(data, _)) => {
            assert_eq!(data.len(), (160 << 20) + 1);
            assert!(data[..160 << 20].iter().all(|byte| *byte == 0) && data[160 << 20] == b'x');
        }
        other => panic!("big is {other:?}"),
    }
    let log = log(&memory);
    let writes = log.iter().filter(|line| line.starts_with(r#"Write { path: "/workspace/big""#)).count();
    assert_eq!(writes, 2, "the first write and the end: {log:?}");
    let mut charges: Vec<u64> = log
        .iter()
        .filter(|line| line.starts_with(r#"Charge { path: "/workspace/big""#))
        .map(|line| line.rsplit("written: ").next().unwrap().trim_end_matches(" }").parse().unwrap())
        .collect();
    // The first is the node's own cost, charged before it is made.
    assert_eq!(charges.first(), Some(&vsh_candidate::NODE_WRITE_COST), "{charges:?}");
    charges.remove(0);
    assert_eq!(charges.len(), 2, "each time 64 MiB more were written: {charges:?}");
    // Each the bound and at most the write that passed it (1 MiB).
    assert!(charges.iter().all(|bytes| (64 << 20..=65 << 20).contains(bytes)), "{charges:?}");
}

#[test]
fn a_large_growth_is_charged_before_anything_is_allocated_for_it() {
    if !fuse_available() {
        return;
    }
    // A truncation up and a write far past the end: each one's new bytes
    // are charged (the budget asked) before the file grows here, so a spent
    // budget refuses the growth instead of following it.
    let memory = workspace(&[("small.txt", "x\n")]);
    let script = "truncate -s 100M big && python3 -c \"import os; \
                  os.pwrite(os.open('small.txt', os.O_WRONLY), b'y', 100 << 20)\"";
    let ran = run(&memory, script);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let log = log(&memory);
    for (name, size, charged) in
        [("big", 100_u64 << 20, 100_u64 << 20), ("small.txt", (100 << 20) + 1, (100 << 20) - 1)]
    {
        let path = format!("\"/workspace/{name}\"");
        let charge = format!("Charge {{ path: {path}, written: {charged} }}");
        let at = log.iter().position(|line| *line == charge).unwrap_or_else(|| panic!("{charge}: {log:?}"));
        let grown = log
            .iter()
            .position(|line| line.starts_with(&format!("Write {{ path: {path}, {size} bytes")))
            .unwrap_or_else(|| panic!("{name} written back: {log:?}"));
        assert!(at < grown, "{name}: charged first: {log:?}");
    }
}

#[test]
fn a_python_script_edits_files_through_the_candidate() {
    if !fuse_available() {
        return;
    }
    let memory = workspace(&[("data/n.txt", "41\n")]);
    let script = "python3 -c \"import pathlib; p = pathlib.Path('data/n.txt'); \
                  p.write_text(str(int(p.read_text()) + 1) + '\\n'); print(sorted(x.name for x in pathlib.Path('data').iterdir()))\"";
    let ran = run(&memory, script);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(ran.stdout, "['n.txt']\n");
    assert_eq!(file(&memory, "data/n.txt").as_deref(), Some("42\n"));
}

#[test]
fn writing_outside_the_candidate_is_refused_by_the_sandbox() {
    if !fuse_available() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escaped.txt");
    let memory = workspace(&[("a.txt", "alpha\n")]);
    // A host directory outside what the command is shown does not exist for
    // it; a system directory it is shown is not writable.
    let shown = "/usr/lib/vsh-escaped.txt";
    let ran = run(&memory, &format!("echo x > {}; echo x > {shown}; echo x > inside.txt", target.display()));
    assert!(!target.exists() && !std::path::Path::new(shown).exists(), "{}", ran.stderr);
    assert!(
        ran.stderr.contains(&format!("cannot create {}: Directory nonexistent", target.display())),
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.contains(&format!("cannot create {shown}: Read-only file system")), "{}", ran.stderr);
    assert_eq!(file(&memory, "inside.txt").as_deref(), Some("x\n"));
}

#[test]
fn a_child_that_never_starts_ends_serving_with_an_error_and_leaves_no_mount() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mountpoint = dir.path().join("candidate");
    std::fs::create_dir(&mountpoint).unwrap();
    let (mount, mounted) = FuseMount::open(&mountpoint).expect("/dev/fuse");
    let owner = Owner { uid: rustix_ids().0, gid: rustix_ids().1 };
    let serving = serve(CandidateFs::new(workspace(&[]), owner), mounted).expect("the server starts");
    let spawned = ConfinedCommand::new("/nonexistent/program")
        .private_fuse_mount(mount)
        .sandbox_policy(Arc::new(SandboxPolicy::new()))
        .spawn(&ToolContext::new(ExecGrant::Any));
    assert!(spawned.is_err());
    let ended = serving.join().expect_err("nobody mounted");
    assert_eq!(ended.kind(), std::io::ErrorKind::NotConnected, "{ended}");
    assert!(std::fs::read_dir(&mountpoint).unwrap().next().is_none());
}
