//! [`CandidateFs`]: the kernel's requests on a candidate, as requests of the
//! file-access protocol.
//!
//! Each kernel operation maps to the request that observes or changes
//! exactly what the operation does, so the host records the same facet a
//! Monty access would: `lookup` and `getattr` are a metadata read (`Stat`,
//! never following a final symlink), `readdir` a name-set read (`ReadDir`
//! without metadata), the first `read` of a file a content read (`Read`),
//! `readlink` a metadata read.
//!
//! Per file, a process pays two round trips: the lookup and the first read.
//! Opening, flushing and closing a file cost none: `open` and `flush` answer
//! `ENOSYS`, which tells the kernel (for the rest of the mount) to open files
//! without asking and never to send a flush or a release. The kernel may keep
//! names, attributes and pages for as long as the mount lives, because every
//! change to the image while it is mounted comes through this filesystem.
//! After each answer the serving thread looks for the next request for a
//! short while before it sleeps ([`LINGER`]), so a process that works
//! through many files does not wait for that thread to be woken each time.
//!
//! Writes are kept per file in a buffer (loaded with `Read` unless the file
//! was truncated or created) and written back with one `Write`: the first
//! write of a file at once (so a write the host refuses fails in the
//! process, as `EACCES`), then at `fsync`, before a rename of the file, and
//! when the mount goes away ([`Filesystem::destroy`], while the host still
//! serves; the buffers move to the host then, uncopied). Past a bound of
//! bytes written and not yet charged, the new bytes are charged to the
//! write budget without writing anything (`Charge`); a file growing by more
//! than that bound at once (a truncation up, a write far past its end) is
//! charged before it grows here, so a spent budget refuses the growth
//! rather than follows its allocation. So the image holds what
//! the processes wrote by the time their command is over.
//!
//! Inode numbers are handed out per path; a rename moves the numbers of
//! everything beneath it. Hard links, device nodes and ownership changes
//! are refused (`EPERM`): the image has none of them.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use vsh_types::fsproto::{FsReply, FsRequest, Meta, NodeType};

use crate::backend::Backend;

/// The path of the filesystem's root in the protocol.
const ROOT: &str = "/workspace";

/// How long the kernel may keep names and attributes: as long as the mount
/// lives. Every change to the image made while the candidate is mounted
/// comes through this filesystem, which the kernel sees, so its caches stay
/// exact.
const TTL: Duration = Duration::from_hours(24);

/// The most bytes written to buffers and not yet charged to the write
/// budget; past it, every buffer's new bytes are charged
/// ([`FsRequest::Charge`]), so the budget stops a process at most this
/// many bytes after it is spent.
const MAX_BUFFERED: usize = 64 << 20;

/// The most bytes the buffers of removed files still open may hold in all
/// (see [`State::orphans`]): past it a removed file's content is dropped at
/// removal (a later access is `EIO`), and a write growing one is `ENOSPC`.
const MAX_ORPHAN_BYTES: usize = 64 << 20;

/// The largest a file may grow through a candidate unless it is told
/// otherwise ([`CandidateFs::with_max_file_bytes`]): the file size limit a
/// confined command gets (`vsh_sandbox::ResourceLimits`) enforces the same in
/// the kernel.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 4 << 30;

/// How long the serving thread keeps looking for the next request after an
/// answer before it sleeps. `cat` of 10,000 files in a candidate on an idle
/// machine, alternated runs: 1,206–2,066 ms p50 without, 819–1,174 ms with
/// 200 µs (100 µs: 925–1,496; 500 µs and more were slower again, the spinning
/// CPU competing with the process); a clean `cargo build` unchanged (1.03x
/// and 1.05x native with it, 0.98x and 1.06x without). See docs/benchmarks.md.
const LINGER: Duration = Duration::from_micros(200);

/// Files larger than this are read from the image a piece at a time, as the
/// kernel asks for each ([`FsRequest::ReadRange`]), never held here whole:
/// the host hashes such a file once, streamed, and reads each piece from the
/// workspace, so a process can read a file of any size. Smaller files are
/// loaded whole with their first read (one round trip for most files).
const RANGE_READS_FROM: u64 = 8 << 20;

/// What each node a process creates (a file, a directory, a symlink) costs
/// of the write budget, charged before it is made, as a filesystem charges
/// a block for an inode: an empty node costs this process some 3 KB in the
/// image, the filesystem and the run's records until the commit, so a
/// process making empty files by the million is stopped by the budget (a
/// 1 GiB budget: 262,144 nodes) instead of holding gigabytes here.
pub const NODE_WRITE_COST: u64 = 4096;

/// The time every directory shows whose entries no process changed through
/// this filesystem: 2000-01-01, fixed (see [`CandidateFs`]'s attributes);
/// one whose entries a process made, removed or renamed shows when.
const DIRECTORY_TIME: Duration = Duration::from_hours(262_968);

/// The permission bits a new file gets in the image, before the caller's mode.
const DEFAULT_FILE_MODE: u32 = 0o644;
/// The permission bits a new directory gets in the image.
const DEFAULT_DIR_MODE: u32 = 0o755;

/// Who the candidate's files belong to: the uid and gid of the process
/// that uses it (the image has no owners; this is what `stat` shows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// The uid.
    pub uid: u32,
    /// The gid.
    pub gid: u32,
}

/// A file being read or written: its whole content, once loaded.
#[derive(Debug, Default)]
struct Buffer {
    data: Vec<u8>,
    loaded: bool,
    /// Changed since it was loaded or last written back.
    dirty: bool,
    /// Bytes written (or the size changed by) since it was last charged or
    /// written back: its share of [`State::buffered`].
    unsynced: usize,
    /// Written back at least once (the host has accepted writing it).
    written_back: bool,
}

/// The paths behind inode numbers.
#[derive(Debug)]
struct Inodes {
    paths: HashMap<u64, String>,
    numbers: HashMap<String, u64>,
    next: u64,
}

impl Inodes {
    fn new() -> Self {
        let mut inodes = Self { paths: HashMap::new(), numbers: HashMap::new(), next: 2 };
        inodes.paths.insert(INodeNo::ROOT.0, ROOT.to_owned());
        inodes.numbers.insert(ROOT.to_owned(), INodeNo::ROOT.0);
        inodes
    }

    fn path(&self, ino: INodeNo) -> Result<String, Errno> {
        self.paths.get(&ino.0).cloned().ok_or(Errno::ENOENT)
    }

    fn number(&mut self, path: &str) -> u64 {
        if let Some(&number) = self.numbers.get(path) {
            return number;
        }
        let number = self.next;
        self.next += 1;
        self.paths.insert(number, path.to_owned());
        self.numbers.insert(path.to_owned(), number);
        number
    }

    /// `path` and everything beneath it are gone.
    fn remove(&mut self, path: &str) {
        let prefix = format!("{path}/");
        self.numbers.retain(|known, number| {
            let gone = known == path || known.starts_with(&prefix);
            if gone {
                self.paths.remove(number);
            }
            !gone
        });
    }

    /// `from` and everything beneath it moved to `to` (whatever was at `to` is gone).
    fn rename(&mut self, from: &str, to: &str) {
        self.remove(to);
        let prefix = format!("{from}/");
        let moved: Vec<(String, u64)> = self
            .numbers
            .iter()
            .filter(|(known, _)| *known == from || known.starts_with(&prefix))
            .map(|(known, number)| (known.clone(), *number))
            .collect();
        for (old, number) in moved {
            let new = format!("{to}{}", &old[from.len()..]);
            self.numbers.remove(&old);
            self.numbers.insert(new.clone(), number);
            self.paths.insert(number, new);
        }
    }
}

#[derive(Debug)]
struct State {
    inodes: Inodes,
    buffers: HashMap<u64, Buffer>,
    /// Each open directory's listing, taken when it is first read.
    listings: HashMap<u64, Vec<(u64, FileType, String)>>,
    /// When a process last changed each file through this filesystem.
    written: HashMap<u64, SystemTime>,
    /// The bytes written to buffers and not yet charged (each buffer's
    /// `unsynced`, summed): past [`MAX_BUFFERED`] they are charged, so the
    /// write budget learns of new bytes at least every [`MAX_BUFFERED`].
    /// Writing the files back there instead copied a growing file to the
    /// host again at each bound: quadratic in its size.
    buffered: usize,
    next_handle: u64,
    /// Files removed (or replaced by a rename) while this filesystem held
    /// their content, by inode, with their permission bits: a process that
    /// still has one open reads and writes it as POSIX says, in its buffer
    /// alone (it is in no directory, so nothing of it is written back).
    orphans: HashMap<u64, u32>,
    /// The bytes of the orphans' buffers, at most [`MAX_ORPHAN_BYTES`].
    orphan_bytes: usize,
    /// Files last seen larger than [`RANGE_READS_FROM`]: read a piece at a
    /// time while this filesystem holds no buffer of theirs.
    ranged: HashSet<u64>,
}

/// A candidate workspace as a FUSE filesystem over a [`Backend`].
#[derive(Debug)]
pub struct CandidateFs<B: Backend> {
    backend: B,
    owner: Owner,
    state: Mutex<State>,
    /// Paths (in the filesystem's own terms) shown as empty directories
    /// without asking the backend: where the child mounts something else.
    mount_points: Vec<String>,
    /// When the filesystem was made.
    made: SystemTime,
    /// The largest a file may grow through this filesystem
    /// ([`CandidateFs::with_max_file_bytes`]).
    max_file_bytes: u64,
    /// The device the kernel's requests come from, looked at after each
    /// answer (see [`CandidateFs::linger`]).
    device: Option<std::os::fd::OwnedFd>,
}

fn failed(errno: i32) -> Errno {
    Errno::from_i32(errno)
}

/// A reply that is not the one the request calls for: the host is broken.
fn unexpected() -> Errno {
    Errno::EIO
}

fn file_type(kind: NodeType) -> FileType {
    match kind {
        NodeType::File => FileType::RegularFile,
        NodeType::Directory => FileType::Directory,
        NodeType::Symlink => FileType::Symlink,
    }
}

/// A child's path, from its parent's and its name (names that are not
/// UTF-8, or hold a `/` or NUL, do not exist in the image).
fn child_path(parent: &str, name: &OsStr) -> Result<String, Errno> {
    let name = name.to_str().ok_or(Errno::EINVAL)?;
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(Errno::EINVAL);
    }
    Ok(format!("{parent}/{name}"))
}

impl<B: Backend> CandidateFs<B> {
    /// A filesystem whose requests `backend` answers, its files shown as `owner`'s.
    pub fn new(backend: B, owner: Owner) -> Self {
        let state = State {
            inodes: Inodes::new(),
            buffers: HashMap::new(),
            listings: HashMap::new(),
            written: HashMap::new(),
            buffered: 0,
            next_handle: 1,
            orphans: HashMap::new(),
            orphan_bytes: 0,
            ranged: HashSet::new(),
        };
        Self {
            backend,
            owner,
            state: Mutex::new(state),
            mount_points: Vec::new(),
            made: SystemTime::now(),
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            device: None,
        }
    }

    /// Refuse, with `EFBIG`, a write or a truncation that would make a file
    /// larger than `bytes` (default [`DEFAULT_MAX_FILE_BYTES`]), before
    /// anything is allocated for it: a file is buffered whole in this
    /// process, so a process that seeks far or truncates up must not make it
    /// allocate what the image would refuse anyway.
    #[must_use]
    pub fn with_max_file_bytes(mut self, bytes: u64) -> Self {
        self.max_file_bytes = bytes;
        self
    }

    /// `Ok` if a file of `size` bytes is within [`CandidateFs::with_max_file_bytes`].
    fn check_size(&self, size: u64) -> Result<usize, Errno> {
        if size > self.max_file_bytes {
            return Err(Errno::EFBIG);
        }
        usize::try_from(size).map_err(|_| Errno::EFBIG)
    }

    /// Answer a lookup of each of `relative` (plain relative paths, such as
    /// `target`) with a directory whatever the image holds there, without
    /// asking the backend, so the child can mount something over it (a
    /// scratch directory): nothing there is read from or written to the
    /// image. Listings show what the image holds, never these.
    #[must_use]
    pub fn with_mount_points(mut self, relative: impl IntoIterator<Item = String>) -> Self {
        self.mount_points.extend(relative.into_iter().map(|path| format!("{ROOT}/{path}")));
        self
    }

    /// Look at `device` (a duplicate of the served device) after each answer
    /// for a while before the serving thread goes back to sleep on it.
    pub(crate) fn linger_on(&mut self, device: std::os::fd::OwnedFd) {
        self.device = Some(device);
    }

    /// After an answer, wait up to [`LINGER`] for the next request without
    /// sleeping (yielding the CPU between looks): a process working through
    /// files sends its next request a few tens of microseconds after the last
    /// answer, and a serving thread asleep by then has to be woken, which on
    /// a virtual machine whose idle CPU halts costs about as much again.
    fn linger(&self) {
        if let Some(device) = &self.device {
            use std::os::fd::AsFd;
            // Readable or not, the serving loop reads next; a failed poll
            // only means it sleeps as it would have.
            let _ = vsh_sandbox::wait_readable_spinning(device.as_fd(), LINGER, LINGER);
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The path behind `ino` (the lock is released before this returns:
    /// never call it with the state locked).
    fn path_of(&self, ino: INodeNo) -> Result<String, Errno> {
        self.lock().inodes.path(ino)
    }

    /// The path of `name` in the directory `parent`.
    /// Note that the directory `parent`'s entries changed now: its time
    /// shows it from here on (ux79 H1: every directory kept its fixed time,
    /// and Python, which caches a directory's listing until its time
    /// changes, never found a module the command wrote and then imported).
    fn entries_changed(&self, parent: INodeNo) {
        self.lock().written.insert(parent.0, SystemTime::now());
    }

    fn child_of(&self, parent: INodeNo, name: &OsStr) -> Result<String, Errno> {
        let parent = self.path_of(parent)?;
        child_path(&parent, name)
    }

    fn call(&self, request: FsRequest) -> Result<FsReply, Errno> {
        match self.backend.call(request) {
            FsReply::Failed(errno) => Err(failed(errno)),
            reply => Ok(reply),
        }
    }

    fn done(&self, request: FsRequest) -> Result<(), Errno> {
        match self.call(request)? {
            FsReply::Done => Ok(()),
            _ => Err(unexpected()),
        }
    }

    fn stat(&self, path: &str) -> Result<Meta, Errno> {
        if self.mount_points.iter().any(|point| point == path) {
            return Ok(Meta { kind: NodeType::Directory, size: 0, mode: 0o755, modified_ns: 0 });
        }
        match self.call(FsRequest::Stat { path: path.to_owned(), follow: false })? {
            FsReply::Meta(meta) => Ok(meta),
            _ => Err(unexpected()),
        }
    }

    fn attr(&self, number: u64, meta: &Meta, state: &State) -> FileAttr {
        let size = match state.buffers.get(&number) {
            Some(buffer) if buffer.loaded => buffer.data.len() as u64,
            _ => meta.size,
        };
        // A file a process changed here shows when it did. The image gives
        // no time for what the transaction changed before: such a node shows
        // when the filesystem was made (after any change made before it). So
        // a build tool sees an edit as newer than its last build's outputs.
        let kind = file_type(meta.kind);
        let modified = match (state.written.get(&number), u64::try_from(meta.modified_ns)) {
            (Some(&written), _) => written,
            // A directory has no time in the image (its host time would tell
            // when hidden names came and went): one fixed old time, the
            // same every run, so a build that compares a directory's time
            // with its outputs' sees it unchanged.
            (None, Ok(0) | Err(_)) if kind == FileType::Directory => SystemTime::UNIX_EPOCH + DIRECTORY_TIME,
            (None, Ok(0) | Err(_)) => self.made,
            (None, Ok(nanos)) => SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos),
        };
        FileAttr {
            ino: INodeNo(number),
            size,
            blocks: size.div_ceil(512),
            atime: modified,
            mtime: modified,
            ctime: modified,
            crtime: modified,
            kind,
            perm: u16::try_from(meta.mode & 0o7777).unwrap_or(0),
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.owner.uid,
            gid: self.owner.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// The attributes of the node at `path`, numbering it.
    fn entry(&self, path: &str) -> Result<FileAttr, Errno> {
        let meta = self.stat(path)?;
        let mut state = self.lock();
        let number = state.inodes.number(path);
        Self::note_size(&mut state, number, &meta);
        Ok(self.attr(number, &meta, &state))
    }

    /// Note whether the node `number`, as the image describes it, is a file
    /// read a piece at a time ([`RANGE_READS_FROM`]).
    fn note_size(state: &mut State, number: u64, meta: &Meta) {
        if meta.kind == NodeType::File && meta.size > RANGE_READS_FROM {
            state.ranged.insert(number);
        } else {
            state.ranged.remove(&number);
        }
    }

    /// Load `ino`'s content into its buffer, if not yet.
    fn load(&self, state: &mut State, ino: u64, path: &str, to_change: bool) -> Result<(), Errno> {
        if state.buffers.get(&ino).is_some_and(|buffer| buffer.loaded) {
            return Ok(());
        }
        // Loaded for a write, the bytes are not what the process read.
        let path = path.to_owned();
        let request = if to_change { FsRequest::Load { path } } else { FsRequest::Read { path } };
        let FsReply::Bytes(bytes) = self.call(request)? else {
            return Err(unexpected());
        };
        let buffer = state.buffers.entry(ino).or_default();
        buffer.data = bytes;
        buffer.loaded = true;
        Ok(())
    }

    /// Load the content of the file behind `ino` into its buffer, if not
    /// yet: for the process to read, or `to_change` (a write's copy-up).
    fn load_ino(&self, state: &mut State, ino: INodeNo, to_change: bool) -> Result<(), Errno> {
        if state.orphans.contains_key(&ino.0) {
            return Ok(());
        }
        let path = state.inodes.path(ino)?;
        self.load(state, ino.0, &path, to_change)
    }

    /// Write `ino`'s buffer back if it changed.
    fn write_back(&self, state: &mut State, ino: u64) -> Result<(), Errno> {
        if state.orphans.contains_key(&ino) {
            // In no directory: its bytes stay in its buffer.
            if let Some(buffer) = state.buffers.get_mut(&ino) {
                buffer.dirty = false;
                buffer.written_back = true;
                state.buffered = state.buffered.saturating_sub(std::mem::take(&mut buffer.unsynced));
            }
            return Ok(());
        }
        let path = state.inodes.path(INodeNo(ino))?;
        let Some(buffer) = state.buffers.get_mut(&ino) else { return Ok(()) };
        if !buffer.dirty {
            return Ok(());
        }
        let written = buffer.unsynced as u64;
        self.done(FsRequest::WriteBack { path, data: buffer.data.clone(), written })?;
        buffer.dirty = false;
        buffer.written_back = true;
        state.buffered = state.buffered.saturating_sub(std::mem::take(&mut buffer.unsynced));
        Ok(())
    }

    /// `changed` bytes of `ino`'s buffer changed: note it dirty and when,
    /// counting them.
    fn dirtied(state: &mut State, ino: u64, changed: usize) {
        let buffer = state.buffers.entry(ino).or_default();
        buffer.dirty = true;
        buffer.unsynced = buffer.unsynced.saturating_add(changed);
        state.buffered = state.buffered.saturating_add(changed);
        state.written.insert(ino, SystemTime::now());
    }

    /// Write back every dirty buffer, giving the buffers up: the mount is
    /// going away, so each file's bytes move to the host, not a copy. A
    /// refusal is recorded by the host. (An orphan's bytes stay with it.)
    fn write_back_all(&self) {
        let mut state = self.lock();
        let dirty: Vec<u64> = state
            .buffers
            .iter()
            .filter(|(number, buffer)| buffer.dirty && !state.orphans.contains_key(number))
            .map(|(&number, _)| number)
            .collect();
        for number in dirty {
            let Ok(path) = state.inodes.path(INodeNo(number)) else { continue };
            let Some(buffer) = state.buffers.remove(&number) else { continue };
            state.buffered = state.buffered.saturating_sub(buffer.unsynced);
            let written = buffer.unsynced as u64;
            let _ = self.done(FsRequest::WriteBack { path, data: buffer.data, written });
        }
    }

    /// Charge the bytes written to `ino` since its last charge or
    /// write-back (`FsRequest::Charge`), writing nothing back: the budget
    /// learns of them, and the content follows in one write-back.
    fn charge(&self, state: &mut State, ino: u64) -> Result<(), Errno> {
        let path = match state.inodes.path(INodeNo(ino)) {
            Ok(path) if !state.orphans.contains_key(&ino) => path,
            // An orphan is never written back: nothing to charge.
            _ => return self.write_back(state, ino),
        };
        let Some(buffer) = state.buffers.get_mut(&ino) else { return Ok(()) };
        if buffer.unsynced == 0 {
            return Ok(());
        }
        self.done(FsRequest::Charge { path, written: buffer.unsynced as u64 })?;
        state.buffered = state.buffered.saturating_sub(std::mem::take(&mut buffer.unsynced));
        Ok(())
    }

    /// Before `ino`'s buffer grows by `growth` bytes, of which `new` are new
    /// bytes to charge: when the growth is past [`MAX_BUFFERED`], charge
    /// those bytes now (the write authorized and the budget asked before
    /// anything is allocated, so a spent budget refuses a large truncation
    /// or a write far past the end instead of following it). Returns the
    /// bytes charged (0 when the growth is small, or for a file in no
    /// directory, whose bytes are bounded by [`MAX_ORPHAN_BYTES`]).
    fn charge_growth(&self, state: &State, ino: u64, growth: usize, new: usize) -> Result<usize, Errno> {
        if growth <= MAX_BUFFERED || state.orphans.contains_key(&ino) {
            return Ok(0);
        }
        let path = state.inodes.path(INodeNo(ino))?;
        self.done(FsRequest::Charge { path, written: new as u64 })?;
        Ok(new)
    }

    /// Charge every dirty buffer ([`CandidateFs::charge`]). A refusal is
    /// recorded by the host (and the file's own write, fsync or close
    /// reports it to the process).
    fn charge_dirty(&self, state: &mut State) {
        let dirty: Vec<u64> =
            state.buffers.iter().filter(|(_, buffer)| buffer.unsynced > 0).map(|(&number, _)| number).collect();
        for number in dirty {
            let _ = self.charge(state, number);
        }
    }

    /// Charge the node about to be made at `path` ([`NODE_WRITE_COST`]).
    fn charge_node(&self, path: &str) -> Result<(), Errno> {
        self.done(FsRequest::Charge { path: path.to_owned(), written: NODE_WRITE_COST })
    }

    /// Set the mode bits `mode & !umask` unless they are the image's default.
    fn set_created_mode(&self, path: &str, mode: u32, umask: u32, default: u32) -> Result<(), Errno> {
        let wanted = mode & !umask & 0o7777;
        if wanted == default {
            return Ok(());
        }
        self.done(FsRequest::Chmod { path: path.to_owned(), mode: wanted })
    }

    fn open_handle(state: &mut State) -> u64 {
        let handle = state.next_handle;
        state.next_handle += 1;
        handle
    }

    fn do_setattr(
        &self,
        ino: INodeNo,
        mode: Option<u32>,
        ids: (Option<u32>, Option<u32>),
        size: Option<u64>,
    ) -> Result<FileAttr, Errno> {
        if ids.0.is_some_and(|uid| uid != self.owner.uid) || ids.1.is_some_and(|gid| gid != self.owner.gid) {
            return Err(Errno::EPERM);
        }
        let path = match self.path_of(ino) {
            Ok(path) => path,
            Err(errno) => return self.set_orphan_attr(ino.0, mode, size).ok_or(errno)?,
        };
        if let Some(size) = size {
            let mut state = self.lock();
            if size == 0 {
                let buffer = state.buffers.entry(ino.0).or_default();
                buffer.data.clear();
                buffer.loaded = true;
            } else {
                self.load(&mut state, ino.0, &path, true)?;
            }
            let length = self.check_size(size)?;
            let old = state.buffers.get(&ino.0).map_or(0, |buffer| buffer.data.len());
            let growth = length.saturating_sub(old);
            let charged = self.charge_growth(&state, ino.0, growth, growth)?;
            Self::dirtied(&mut state, ino.0, length.abs_diff(old) - charged);
            let state = &mut *state;
            let buffer = state.buffers.entry(ino.0).or_default();
            buffer.data.resize(length, 0);
            self.write_back(state, ino.0)?;
        }
        if let Some(mode) = mode {
            self.done(FsRequest::Chmod { path: path.clone(), mode: mode & 0o7777 })?;
        }
        let meta = self.stat(&path)?;
        let state = self.lock();
        Ok(self.attr(ino.0, &meta, &state))
    }

    fn do_create(
        &self,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    ) -> Result<(FileAttr, u64), Errno> {
        let path = self.child_of(parent, name)?;
        if flags & O_EXCL != 0 {
            let FsReply::Exists(exists) = self.call(FsRequest::Exists { path: path.clone() })? else {
                return Err(unexpected());
            };
            if exists {
                return Err(Errno::EEXIST);
            }
        }
        self.charge_node(&path)?;
        self.done(FsRequest::Write { path: path.clone(), data: Vec::new() })?;
        self.entries_changed(parent);
        self.set_created_mode(&path, mode, umask, DEFAULT_FILE_MODE)?;
        let meta = self.stat(&path)?;
        let mut guard = self.lock();
        let state = &mut *guard;
        let number = state.inodes.number(&path);
        let buffer = state.buffers.entry(number).or_default();
        state.buffered = state.buffered.saturating_sub(buffer.unsynced);
        *buffer = Buffer { data: Vec::new(), loaded: true, dirty: false, unsynced: 0, written_back: true };
        state.written.insert(number, SystemTime::now());
        let handle = Self::open_handle(state);
        Ok((self.attr(number, &meta, state), handle))
    }

    fn do_remove(&self, parent: INodeNo, name: &OsStr, directory: bool) -> Result<(), Errno> {
        let path = self.child_of(parent, name)?;
        let meta = self.stat(&path)?;
        match (meta.kind == NodeType::Directory, directory) {
            (true, false) => return Err(Errno::EISDIR),
            (false, true) => return Err(Errno::ENOTDIR),
            _ => {}
        }
        self.done(FsRequest::Remove { path: path.clone(), recursive: false })?;
        self.entries_changed(parent);
        let mut state = self.lock();
        if let Some(&number) = state.inodes.numbers.get(&path) {
            if meta.kind == NodeType::File {
                Self::orphan(&mut state, number, meta.mode);
            } else {
                Self::forget_buffer(&mut state, number);
            }
        }
        state.inodes.remove(&path);
        Ok(())
    }

    fn do_rename(&self, from: (INodeNo, &OsStr), to: (INodeNo, &OsStr), flags: RenameFlags) -> Result<(), Errno> {
        if flags.contains(RenameFlags::RENAME_EXCHANGE) || flags.contains(RenameFlags::RENAME_WHITEOUT) {
            return Err(Errno::EINVAL);
        }
        let (source, destination) = {
            let state = self.lock();
            (child_path(&state.inodes.path(from.0)?, from.1)?, child_path(&state.inodes.path(to.0)?, to.1)?)
        };
        if flags.contains(RenameFlags::RENAME_NOREPLACE) {
            let FsReply::Exists(exists) = self.call(FsRequest::Exists { path: destination.clone() })? else {
                return Err(unexpected());
            };
            if exists {
                return Err(Errno::EEXIST);
            }
        }
        // Pending writes of the source land first, under its name.
        let replaced = {
            let mut state = self.lock();
            if let Some(&number) = state.inodes.numbers.get(&source) {
                self.write_back(&mut state, number)?;
            }
            state.inodes.numbers.get(&destination).copied()
        };
        // A file the rename replaces, whose content this filesystem holds,
        // stays readable by whoever has it open (its mode, asked first).
        let replaced_mode = match replaced {
            Some(number) if self.lock().buffers.get(&number).is_some_and(|buffer| buffer.loaded) => {
                self.stat(&destination).ok().filter(|meta| meta.kind == NodeType::File).map(|meta| meta.mode)
            }
            _ => None,
        };
        self.done(FsRequest::Rename { from: source.clone(), to: destination.clone() })?;
        let mut state = self.lock();
        if let Some(&replaced) = state.inodes.numbers.get(&destination) {
            match replaced_mode {
                Some(mode) => Self::orphan(&mut state, replaced, mode),
                None => Self::forget_buffer(&mut state, replaced),
            }
        }
        state.inodes.rename(&source, &destination);
        Ok(())
    }

    fn do_readdir(&self, ino: INodeNo, handle: u64) -> Result<Vec<(u64, FileType, String)>, Errno> {
        if let Some(listing) = self.lock().listings.get(&handle) {
            return Ok(listing.clone());
        }
        let path = self.path_of(ino)?;
        let FsReply::Entries(entries) = self.call(FsRequest::ReadDir { path: path.clone(), metadata: false })? else {
            return Err(unexpected());
        };
        let mut state = self.lock();
        let parent = match path.rsplit_once('/') {
            Some((parent, _)) if path != ROOT => state.inodes.number(parent),
            _ => INodeNo::ROOT.0,
        };
        let mut listing =
            vec![(ino.0, FileType::Directory, ".".to_owned()), (parent, FileType::Directory, "..".to_owned())];
        for (name, meta) in entries {
            let number = state.inodes.number(&format!("{path}/{name}"));
            listing.push((number, file_type(meta.kind), name));
        }
        state.listings.insert(handle, listing.clone());
        Ok(listing)
    }
}

/// Lingers ([`CandidateFs::linger`]) when dropped: at the end of a request's
/// handler, once its answer is sent.
struct Linger<'a, B: Backend>(&'a CandidateFs<B>);

impl<B: Backend> Drop for Linger<'_, B> {
    fn drop(&mut self) {
        self.0.linger();
    }
}

/// `O_EXCL`.
const O_EXCL: i32 = 0o200;
/// `S_IFMT` and `S_IFREG`.
const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;

impl<B: Backend> Filesystem for CandidateFs<B> {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Large writes, fewer round trips (the kernel clamps what it cannot do).
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn destroy(&mut self) {
        self.write_back_all();
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _linger = Linger(self);
        let looked = self.child_of(parent, name);
        match looked.and_then(|path| self.entry(&path)) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(errno) => reply.error(errno),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _linger = Linger(self);
        let attr = match self.path_of(ino) {
            Ok(path) => self.stat(&path).map(|meta| {
                let mut state = self.lock();
                Self::note_size(&mut state, ino.0, &meta);
                self.attr(ino.0, &meta, &state)
            }),
            // In no directory: an orphan's, if it is one.
            Err(errno) => self.orphan_attr(&self.lock(), ino.0).ok_or(errno),
        };
        match attr {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(errno) => reply.error(errno),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let _linger = Linger(self);
        // Times are not part of the image: setting them succeeds and changes nothing.
        match self.do_setattr(ino, mode, (uid, gid), size) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(errno) => reply.error(errno),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _linger = Linger(self);
        let target = self.path_of(ino).and_then(|path| match self.call(FsRequest::ReadLink { path })? {
            FsReply::Target(target) => Ok(target),
            _ => Err(unexpected()),
        });
        match target {
            Ok(target) => reply.data(target.as_bytes()),
            Err(errno) => reply.error(errno),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let _linger = Linger(self);
        if mode & S_IFMT != S_IFREG {
            return reply.error(Errno::EPERM);
        }
        let created = self.do_create(parent, name, mode, umask, O_EXCL).map(|(attr, _handle)| attr);
        match created {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(errno) => reply.error(errno),
        }
    }

    fn mkdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let _linger = Linger(self);
        let created = self.child_of(parent, name).and_then(|path| {
            self.charge_node(&path)?;
            self.done(FsRequest::Mkdir { path: path.clone(), recursive: false })?;
            self.entries_changed(parent);
            self.set_created_mode(&path, mode, umask, DEFAULT_DIR_MODE)?;
            self.entry(&path)
        });
        match created {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(errno) => reply.error(errno),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _linger = Linger(self);
        match self.do_remove(parent, name, false) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _linger = Linger(self);
        match self.do_remove(parent, name, true) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn symlink(&self, _req: &Request, parent: INodeNo, link_name: &OsStr, target: &std::path::Path, reply: ReplyEntry) {
        let _linger = Linger(self);
        let made = self.child_of(parent, link_name).and_then(|path| {
            let target = target.to_str().ok_or(Errno::EINVAL)?.to_owned();
            self.charge_node(&path)?;
            self.done(FsRequest::Symlink { path: path.clone(), target })?;
            self.entries_changed(parent);
            self.entry(&path)
        });
        match made {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(errno) => reply.error(errno),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let _linger = Linger(self);
        match self.do_rename((parent, name), (newparent, newname), flags) {
            Ok(()) => {
                self.entries_changed(parent);
                self.entries_changed(newparent);
                reply.ok();
            }
            Err(errno) => reply.error(errno),
        }
    }

    fn link(&self, _req: &Request, _ino: INodeNo, _newparent: INodeNo, _newname: &OsStr, reply: ReplyEntry) {
        let _linger = Linger(self);
        reply.error(Errno::EPERM);
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // The kernel takes ENOSYS as "opening needs no server": this open
        // succeeds, and files are opened (and closed) without asking from
        // now on. A truncating open arrives as a `setattr` of the size.
        reply.error(Errno::ENOSYS);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _linger = Linger(self);
        let mut state = self.lock();
        let held = state.buffers.get(&ino.0).is_some_and(|buffer| buffer.loaded);
        if !held && state.ranged.contains(&ino.0) && !state.orphans.contains_key(&ino.0) {
            let piece = state.inodes.path(ino).and_then(|path| {
                drop(state);
                match self.call(FsRequest::ReadRange { path, offset, length: size })? {
                    FsReply::Bytes(bytes) => Ok(bytes),
                    _ => Err(unexpected()),
                }
            });
            return match piece {
                Ok(bytes) => reply.data(&bytes),
                Err(errno) => reply.error(errno),
            };
        }
        if let Err(errno) = self.load_ino(&mut state, ino, false) {
            return reply.error(errno);
        }
        let data = state.buffers.get(&ino.0).map_or(&[][..], |buffer| &buffer.data[..]);
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(data.len());
        let end = start.saturating_add(size as usize).min(data.len());
        reply.data(&data[start..end]);
        // Read to its end and unchanged: the kernel's page cache has it now (a
        // later read that misses there loads it again, the same frozen bytes).
        // (An orphan's buffer is all there is of it: kept.)
        if end == data.len()
            && !state.orphans.contains_key(&ino.0)
            && state.buffers.get(&ino.0).is_some_and(|buffer| !buffer.dirty)
        {
            state.buffers.remove(&ino.0);
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _linger = Linger(self);
        let mut state = self.lock();
        if let Err(errno) = self.load_ino(&mut state, ino, true) {
            return reply.error(errno);
        }
        let Ok(start) = usize::try_from(offset) else { return reply.error(Errno::EFBIG) };
        let Some(end) = start.checked_add(data.len()) else { return reply.error(Errno::EFBIG) };
        if let Err(errno) = self.check_size(end as u64) {
            return reply.error(errno);
        }
        let old = state.buffers.get(&ino.0).map_or(0, |buffer| buffer.data.len());
        if let Err(errno) = Self::orphan_grows(&mut state, ino.0, end.max(old)) {
            return reply.error(errno);
        }
        // A write past the end fills the hole with zeros: those bytes are
        // written too (and held here), so they count, or a process could
        // make this filesystem hold a file's size for every byte charged.
        let new = data.len() + start.saturating_sub(old);
        let charged = match self.charge_growth(&state, ino.0, end.saturating_sub(old), new) {
            Ok(charged) => charged,
            Err(errno) => return reply.error(errno),
        };
        Self::dirtied(&mut state, ino.0, new - charged);
        let state = &mut *state;
        let buffer = state.buffers.entry(ino.0).or_default();
        if end > buffer.data.len() {
            buffer.data.resize(end, 0);
        }
        buffer.data[start..end].copy_from_slice(data);
        let first = !buffer.written_back;
        // The first write of a file goes to the host at once, so a refusal
        // (a protected file) fails this write; past the bound, this file's
        // new bytes are charged, so a spent budget fails this write, and
        // then every other buffer's.
        if first && let Err(errno) = self.write_back(state, ino.0) {
            return reply.error(errno);
        }
        if state.buffered > MAX_BUFFERED {
            if let Err(errno) = self.charge(state, ino.0) {
                return reply.error(errno);
            }
            self.charge_dirty(state);
        }
        reply.written(u32::try_from(data.len()).unwrap_or(u32::MAX));
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        // ENOSYS: the kernel never sends a flush again (closing a file costs
        // no round trip); buffers are written back as the module says.
        reply.error(Errno::ENOSYS);
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _linger = Linger(self);
        // Only a file made by `create` is released (the others are opened
        // without the server): nothing to do, its buffer stays until written back.
        let _ = (ino, fh);
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let _linger = Linger(self);
        // The image has no durability of its own: a sync is a write-back.
        self.reply_written_back(ino, reply);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _linger = Linger(self);
        let mut state = self.lock();
        if state.inodes.path(ino).is_err() {
            return reply.error(Errno::ENOENT);
        }
        let handle = Self::open_handle(&mut state);
        reply.opened(FileHandle(handle), FopenFlags::empty());
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let _linger = Linger(self);
        match self.do_readdir(ino, fh.0) {
            Ok(listing) => {
                let skip = usize::try_from(offset).unwrap_or(usize::MAX);
                for (index, (number, kind, name)) in listing.iter().enumerate().skip(skip) {
                    if reply.add(INodeNo(*number), index as u64 + 1, *kind, name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(errno) => reply.error(errno),
        }
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        let _linger = Linger(self);
        self.lock().listings.remove(&fh.0);
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let _linger = Linger(self);
        reply.statfs(1 << 24, 1 << 23, 1 << 23, 1 << 24, 1 << 23, 4096, 255, 4096);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        let _linger = Linger(self);
        // The kernel checks permission bits itself (`default_permissions`).
        reply.ok();
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let _linger = Linger(self);
        match self.do_create(parent, name, mode, umask, flags) {
            Ok((attr, handle)) => reply.created(&TTL, &attr, Generation(0), FileHandle(handle), FopenFlags::empty()),
            Err(errno) => reply.error(errno),
        }
    }
}

impl<B: Backend> CandidateFs<B> {
    /// Write `ino`'s buffer back and reply with the outcome.
    fn reply_written_back(&self, ino: INodeNo, reply: ReplyEmpty) {
        let mut state = self.lock();
        match self.write_back(&mut state, ino.0) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    /// `ino` is gone or replaced: drop its buffer, and its bytes from the count.
    fn forget_buffer(state: &mut State, ino: u64) {
        if let Some(buffer) = state.buffers.remove(&ino) {
            state.buffered = state.buffered.saturating_sub(buffer.unsynced);
        }
    }

    /// The file `ino` (permission bits `mode`) left its directory: keep its
    /// content for a process that still has it open, as an orphan, when this
    /// filesystem holds all of it and the orphans' bound allows; otherwise
    /// drop it ([`CandidateFs::forget_buffer`]).
    fn orphan(state: &mut State, ino: u64, mode: u32) {
        let held = state.buffers.get(&ino).filter(|buffer| buffer.loaded).map(|buffer| buffer.data.len());
        match held {
            Some(bytes) if state.orphan_bytes.saturating_add(bytes) <= MAX_ORPHAN_BYTES => {
                state.orphan_bytes += bytes;
                state.orphans.insert(ino, mode);
                if let Some(buffer) = state.buffers.get_mut(&ino) {
                    buffer.dirty = false;
                    state.buffered = state.buffered.saturating_sub(std::mem::take(&mut buffer.unsynced));
                }
            }
            _ => Self::forget_buffer(state, ino),
        }
    }

    /// The attributes of the orphan `ino`, if it is one.
    fn orphan_attr(&self, state: &State, ino: u64) -> Option<FileAttr> {
        let mode = *state.orphans.get(&ino)?;
        let size = state.buffers.get(&ino).map_or(0, |buffer| buffer.data.len() as u64);
        let meta = Meta { kind: NodeType::File, size, mode, modified_ns: 0 };
        let mut attr = self.attr(ino, &meta, state);
        attr.nlink = 0;
        Some(attr)
    }

    /// setattr of `ino` if it is an orphan (a removed file still open: its
    /// buffer and mode alone); `None` if it is not one.
    fn set_orphan_attr(&self, ino: u64, mode: Option<u32>, size: Option<u64>) -> Option<Result<FileAttr, Errno>> {
        let mut state = self.lock();
        if !state.orphans.contains_key(&ino) {
            return None;
        }
        if let Some(size) = size {
            let length = match self
                .check_size(size)
                .and_then(|length| Self::orphan_grows(&mut state, ino, length).map(|()| length))
            {
                Ok(length) => length,
                Err(errno) => return Some(Err(errno)),
            };
            state.buffers.entry(ino).or_default().data.resize(length, 0);
            state.written.insert(ino, SystemTime::now());
        }
        if let Some(mode) = mode {
            state.orphans.insert(ino, mode & 0o7777);
        }
        self.orphan_attr(&state, ino).map(Ok)
    }

    /// An orphan's buffer grows to `length` bytes: within [`MAX_ORPHAN_BYTES`]
    /// for all of them, or `ENOSPC`. Nothing to check for a file in a directory.
    fn orphan_grows(state: &mut State, ino: u64, length: usize) -> Result<(), Errno> {
        if !state.orphans.contains_key(&ino) {
            return Ok(());
        }
        let old = state.buffers.get(&ino).map_or(0, |buffer| buffer.data.len());
        let total = (state.orphan_bytes - old.min(state.orphan_bytes)).saturating_add(length);
        if total > MAX_ORPHAN_BYTES {
            return Err(Errno::ENOSPC);
        }
        state.orphan_bytes = total;
        Ok(())
    }
}
