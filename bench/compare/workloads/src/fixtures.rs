//! Fixture builders: every workload's workspace, built the same way for
//! both engines, outside the timed region.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A scratch directory for one workload run: `ws/` (the workspace), `data/`
/// (the engine's data directory) and room for siblings, removed on drop.
#[derive(Debug)]
pub struct Scratch {
    root: PathBuf,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

impl Scratch {
    /// A fresh directory under `base`, with an empty `ws/`.
    pub fn new(base: &Path, label: &str) -> io::Result<Self> {
        let unique = NEXT.fetch_add(1, Ordering::Relaxed);
        let root = base.join(format!("{label}-{}-{unique}", std::process::id()));
        if root.exists() {
            fs::remove_dir_all(&root)?;
        }
        fs::create_dir_all(root.join("ws"))?;
        Ok(Self { root })
    }

    /// The scratch root (the workspace's parent).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The workspace.
    pub fn workspace(&self) -> PathBuf {
        self.root.join("ws")
    }

    /// The engine's data directory (a sibling of the workspace, not inside it).
    pub fn data(&self) -> PathBuf {
        self.root.join("data")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// Write `contents` at `root/relative`, creating parents.
pub fn put(root: &Path, relative: &str, contents: &[u8]) -> io::Result<()> {
    let path = root.join(relative);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(path, contents)
}

/// A zero-padded decimal of `width` digits (`pad(7, 3)` is `007`), the way
/// the programs spell names (`str(1000 + i)[1:]`).
pub fn pad(value: usize, width: usize) -> String {
    format!("{value:0width$}")
}

/// The tiny workspace: `in.txt` (`hello world`), `log.txt` (empty) and
/// `extra` small files, `extra` + 2 files in all.
pub fn tiny(ws: &Path, extra: usize) -> io::Result<()> {
    put(ws, "in.txt", b"hello world\n")?;
    put(ws, "log.txt", b"")?;
    for i in 0..extra {
        put(ws, &format!("misc/file-{}.txt", pad(i, 2)), format!("line-{i}\n").repeat(32).as_bytes())?;
    }
    Ok(())
}

/// `src/f000.txt` … `src/f099.txt`, 4 KiB of lower-case text each.
pub fn read_transform(ws: &Path) -> io::Result<()> {
    for i in 0..100 {
        put(ws, &format!("src/f{}.txt", pad(i, 3)), &text_4k(i))?;
    }
    Ok(())
}

/// The 4 KiB of file `i` of [`read_transform`].
pub fn text_4k(i: usize) -> Vec<u8> {
    let line = format!("file {i:03}: the quick brown fox jumps over the lazy dog\n");
    let mut text = line.repeat(4096 / line.len() + 1).into_bytes();
    text.truncate(4095);
    text.push(b'\n');
    text
}

/// `dirs` directories `d000`… each holding `files` empty files `f000.txt`…
/// (`f0000.txt`… past 1,000 files), under `under` in `ws`.
pub fn tree(ws: &Path, under: &str, dirs: std::ops::Range<usize>, files: usize) -> io::Result<()> {
    let width = if files > 1000 { 4 } else { 3 };
    for d in dirs {
        let dir = ws.join(under).join(format!("d{}", pad(d, 3)));
        fs::create_dir_all(&dir)?;
        for f in 0..files {
            fs::File::create(dir.join(format!("f{}.txt", pad(f, width))))?;
        }
    }
    Ok(())
}

/// `p/f0000.txt` … `p/f0999.txt`, each with a `version = 0` line among others.
pub fn patch(ws: &Path) -> io::Result<()> {
    for i in 0..1000 {
        put(ws, &format!("p/f{}.txt", pad(i, 4)), patch_text(i, 0).as_bytes())?;
    }
    Ok(())
}

/// File `i` of [`patch`] at `version`.
pub fn patch_text(i: usize, version: usize) -> String {
    format!(
        "# generated module {i:04}\nname = \"module-{i:04}\"\nversion = {version}\nowner = \"bench\"\n{}",
        "padding = \"0123456789abcdef0123456789abcdef\"\n".repeat(4)
    )
}

/// Write every dirty page back (`sync`): the quiet disk a commit sample
/// starts from, whatever an earlier workload (or sample) left unwritten.
pub fn settle_disk() -> io::Result<()> {
    let status = std::process::Command::new("sync").status()?;
    if status.success() { Ok(()) } else { Err(io::Error::other(format!("sync: {status}"))) }
}

/// Write `bytes` of unrelated data to memory in 1 MiB pieces, the same
/// bytes [`unsynced_burst`] writes to a file: the burst's time, its cache
/// and TLB pollution and its memory, with no file and no dirty page. Kept
/// until the caller drops it.
pub fn memory_burst(bytes: u64) -> Vec<Vec<u8>> {
    let mut pieces = Vec::new();
    let mut written = 0_u64;
    while written < bytes {
        let mut chunk = vec![0_u8; 1 << 20];
        chunk[..8].copy_from_slice(&written.to_le_bytes());
        // Touch every page, as the kernel's copy into the page cache does.
        for page in chunk.chunks_mut(4096) {
            page[8.min(page.len() - 1)] = 1;
        }
        pieces.push(std::hint::black_box(chunk));
        written += 1 << 20;
    }
    pieces
}

/// Write `bytes` of unrelated data into `dir/burst.bin` in 1 MiB writes,
/// never syncing: the dirty pages are the kernel's to write back.
pub fn unsynced_burst(dir: &Path, bytes: u64) -> io::Result<PathBuf> {
    fs::create_dir_all(dir)?;
    let path = dir.join("burst.bin");
    let mut file = fs::File::create(&path)?;
    let mut chunk = vec![0_u8; 1 << 20];
    let mut written = 0_u64;
    while written < bytes {
        // Different bytes in every chunk, so nothing below can share pages.
        chunk[..8].copy_from_slice(&written.to_le_bytes());
        file.write_all(&chunk)?;
        written += chunk.len() as u64;
    }
    Ok(path)
}
