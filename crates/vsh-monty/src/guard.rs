//! The guarded virtual image: [`OsHost`]'s view of the [`VirtualFs`], where
//! every access is authorized by construction.
//!
//! The image and the policy are private to this module. Everything else in the
//! crate reaches the image only through the methods here, and each of them
//! takes a [`Grant`]: proof, made only by [`OsHost::authorize`] (or
//! [`OsHost::authorize_write`]), that the policy allowed that kind of access
//! to that path in this run and that the refusal, had there been one, was
//! recorded. The path an operation acts on is the grant's own, so it cannot
//! act on another. A new guest operation therefore cannot forget the check:
//! without a grant of the right kind it does not compile.
//!
//! What each operation needs:
//!
//! | operation | grant |
//! |---|---|
//! | what is at a path, its size, its metadata; following a symlink's hop | any grant on the path |
//! | reading a file | [`ContentRead`] |
//! | listing a directory; the kinds of the names it listed | [`DirectoryRead`] |
//! | writing or appending | [`Write`] (`Create` or `Modify`, decided by what is there) |
//! | making a directory | [`Create`] (each missing ancestor too) |
//! | removing a file or an empty directory | [`Delete`] |
//! | copying a file | [`ContentRead`] on the source, [`Write`] on the destination |
//! | removing a tree, renaming | authorized here as a whole ([`OsHost::remove_tree`], [`OsHost::rename`]) |
//!
//! Enumerating what lies below a path to authorize it
//! ([`OsHost::descendants`]) shows the guest nothing; each path it returns is
//! authorized before anything uses it.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

use vsh_policy::{AccessKind, CallPolicy, DeniedAccess};
use vsh_types::{NodeKind, VPath};
use vsh_vfs::{Metadata, VfsError, VirtualFs};

use crate::host::{Fault, Target, vfs_fault};
use crate::limits::{ExecutionLimits, Meter};
use crate::oserror::{self, EACCES, ELOOP};
use crate::path;

/// Symlink hops followed before giving up with `ELOOP` (Linux's `MAXSYMLINKS`).
const MAX_SYMLINK_HOPS: u32 = 40;

/// A kind of access a [`Grant`] proves.
pub(crate) trait Access {
    /// The policy's name for it.
    const KIND: AccessKind;
}

macro_rules! access {
    ($($name:ident => $kind:ident),* $(,)?) => {
        $(
            #[doc = concat!("[`AccessKind::", stringify!($kind), "`], as a grant's type.")]
            #[derive(Debug)]
            pub(crate) enum $name {}

            impl Access for $name {
                const KIND: AccessKind = AccessKind::$kind;
            }
        )*
    };
}

access! {
    MetadataRead => MetadataRead,
    ContentRead => ContentRead,
    DirectoryRead => DirectoryRead,
    Create => Create,
    Modify => Modify,
    Delete => Delete,
    RenameSource => RenameSource,
    RenameDestination => RenameDestination,
}

/// `Create` or `Modify`, whichever the path's existence called for.
#[derive(Debug)]
pub(crate) enum Write {}

/// What a program means to do to a path it looks at first (see
/// [`OsHost::authorize_look_before`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Intent {
    /// Write a file: `Modify` if something is there, `Create` if not.
    Write,
    /// This access.
    Access(AccessKind),
}

/// Proof that access `A` to one path was authorized in this run. Made only in
/// this module; the operations that take it act on its path.
#[derive(Debug)]
pub(crate) struct Grant<A> {
    path: VPath,
    access: PhantomData<fn() -> A>,
}

impl<A> Grant<A> {
    fn new(path: VPath) -> Self {
        Self { path, access: PhantomData }
    }

    /// The path the grant is for.
    pub(crate) fn path(&self) -> &VPath {
        &self.path
    }
}

impl From<Grant<Create>> for Grant<Write> {
    fn from(grant: Grant<Create>) -> Self {
        Grant::new(grant.path)
    }
}

/// The refusals of one run: each distinct refusal once, in the order first
/// met (a program that retries `.env` a thousand times makes one line of
/// its receipt, and one evidence record), and how many accesses were
/// refused in all.
#[derive(Debug, Default)]
pub(crate) struct Denials {
    list: Vec<DeniedAccess>,
    /// The positions in `list` of the refusals with each hash.
    seen: std::collections::HashMap<u64, Vec<usize>>,
    attempts: u64,
}

impl Denials {
    /// Count a refusal, and keep it unless the same one is kept already.
    /// Returns whether it was new.
    fn record(&mut self, denied: DeniedAccess) -> bool {
        self.attempts += 1;
        let positions = self.seen.entry(Self::key(&denied)).or_default();
        if positions.iter().any(|at| self.list[*at] == denied) {
            return false;
        }
        positions.push(self.list.len());
        self.list.push(denied);
        true
    }

    /// Whether this refusal is kept already.
    fn holds(&self, denied: &DeniedAccess) -> bool {
        self.seen.get(&Self::key(denied)).is_some_and(|positions| positions.iter().any(|at| self.list[*at] == *denied))
    }

    /// The hash `seen` files a refusal under.
    fn key(denied: &DeniedAccess) -> u64 {
        use std::hash::{Hash as _, Hasher as _};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        denied.hash(&mut hasher);
        hasher.finish()
    }

    /// How many accesses were refused, each retry counted.
    pub(crate) fn attempts(&self) -> u64 {
        self.attempts
    }

    /// The distinct refusals, in the order first met.
    pub(crate) fn into_list(self) -> Vec<DeniedAccess> {
        self.list
    }
}

/// The host side of one run's OS calls and `vsh_*` functions.
pub(crate) struct OsHost<'a> {
    vfs: &'a mut VirtualFs,
    policy: &'a CallPolicy,
    pub(crate) meter: Meter<'a>,
    pub(crate) denied: Denials,
}

impl<'a> OsHost<'a> {
    /// The host of a request that began at `started`.
    pub(crate) fn new(
        vfs: &'a mut VirtualFs,
        policy: &'a CallPolicy,
        limits: &'a ExecutionLimits,
        started: Instant,
    ) -> Self {
        Self { vfs, policy, meter: Meter::new(limits, started), denied: Denials::default() }
    }

    /// Lend this host's image away (to a host on another thread: a
    /// candidate's server, which answers the kernel without a hop back to
    /// this one), leaving an empty image over the same workspace until
    /// [`OsHost::return_image`]. Only another `OsHost` ever works on it,
    /// through its grants.
    pub(crate) fn lend_image(&mut self) -> VirtualFs {
        let empty = VirtualFs::new(Arc::clone(self.vfs.host()), Vec::new(), vsh_vfs::SnapshotLimits::default());
        let mut lent = std::mem::replace(self.vfs, empty);
        // What the command reads, the program did not see.
        lent.serving_commands(true);
        lent
    }

    /// Take back the image [`OsHost::lend_image`] lent.
    pub(crate) fn return_image(&mut self, mut vfs: VirtualFs) {
        vfs.serving_commands(false);
        *self.vfs = vfs;
    }

    /// The policy this host authorizes with.
    pub(crate) fn policy(&self) -> &CallPolicy {
        self.policy
    }

    /// Names the base never listed (counted into the run's statistics).
    pub(crate) fn unlisted_names(&self) -> u64 {
        self.vfs.unlisted_names()
    }

    // ----- authorization -----

    /// Ask the policy for access `A` to `path`; a refusal is recorded and
    /// becomes the guest's `PermissionError` about `guest`. The check is one
    /// evidence record, and a refusal kept is another (see
    /// [`ExecutionLimits::max_evidence_records`]), both charged first.
    ///
    /// Beside the policy's rules, a path in (or at) another workspace's vsh
    /// data directory nested in this one, found by its store magic
    /// ([`VirtualFs::vsh_data_within`]), is refused for every access as
    /// runtime data.
    pub(crate) fn authorize<A: Access>(&mut self, path: &VPath, guest: &str) -> Result<Grant<A>, Fault> {
        self.check(path, A::KIND, guest)?;
        Ok(Grant::new(path.clone()))
    }

    /// [`OsHost::authorize`] for `path`, found below `named` (the path the
    /// guest gave) by a call that walks a tree (a directory moved, removed
    /// or copied): a refusal of a path whose name the guest cannot see is
    /// recorded against `named` ([`OsHost::as_named`]).
    pub(crate) fn authorize_below<A: Access>(
        &mut self,
        path: &VPath,
        named: &VPath,
        guest: &str,
    ) -> Result<Grant<A>, Fault> {
        self.meter.charge_evidence(1, path.as_str().len() as u64)?;
        if let Some(denied) = self.refusal(path, A::KIND, guest)? {
            let denied = self.as_named(denied, named);
            self.record_denial(denied)?;
            return Err(Fault::Guest(oserror::os_error(EACCES, guest)));
        }
        Ok(Grant::new(path.clone()))
    }

    /// `denied`, a refusal of a path below `named` that a tree walk found,
    /// as the receipt (which the program reads) keeps it: against `named`
    /// when a listing hides the refused path's name or a directory's on the
    /// way to it (a secret, vsh's data, a nested vsh data directory), since
    /// hidden names tell the program nothing, and then with the rule named by
    /// what it is, never by its pattern (which may spell the hidden name); as
    /// it is otherwise (a protected file it can list, in directories it can
    /// list).
    pub(crate) fn as_named(&self, mut denied: DeniedAccess, named: &VPath) -> DeniedAccess {
        if !denied.path.is_strictly_within(named) {
            return denied;
        }
        let runtime_data = denied.label == vsh_policy::RuleLabel::RuntimeData;
        let on_the_way = denied.path.ancestors().into_iter().filter(|dir| dir.is_strictly_within(named));
        let hidden = runtime_data
            || self.policy.is_hidden(&denied.path)
            || on_the_way.into_iter().any(|dir| self.policy.is_hidden(&dir));
        if hidden {
            // Neither its path nor its rule's pattern (`**/id_rsa` names the
            // file, an operator's rule may spell a whole path) is shown.
            denied.path = named.clone();
            let hiding = if runtime_data {
                "a vsh workspace's data (a nested workspace's .vsh, which no run changes) inside it"
            } else {
                "a rule that hides a path inside it"
            };
            format!("{hiding}; not shown").clone_into(&mut denied.rule);
        }
        denied
    }

    /// [`OsHost::authorize`] for a look at `path` that only asks what is
    /// there (`exists()`, `stat`, a command's lookup of a name), to answer
    /// it. A path a rule hides (a secret, a protected path of the
    /// operator's) is refused as unreadable, and the refusal is counted
    /// ([`crate::ExecutionStats::hidden_looks`]) but not recorded as a
    /// denial: the answer is the same whether it is there or not, so the
    /// look learns nothing, and tools look for such names all the time
    /// (dotenv loaders for `.env`, git for every tracked file). Reading or
    /// changing it is still a denial; so is a look the policy refuses for
    /// another reason (vsh's data, a way out of the workspace).
    pub(crate) fn look(&mut self, path: &VPath, guest: &str) -> Result<Grant<MetadataRead>, Fault> {
        self.meter.charge_evidence(1, path.as_str().len() as u64)?;
        match self.refusal(path, AccessKind::MetadataRead, guest)? {
            None => Ok(Grant::new(path.clone())),
            Some(denied) if matches!(denied.label, vsh_policy::RuleLabel::Secret | vsh_policy::RuleLabel::Custom) => {
                Err(self.looked_in_vain(path, guest))
            }
            Some(denied) => {
                self.record_denial(denied)?;
                Err(Fault::Guest(oserror::os_error(EACCES, guest)))
            }
        }
    }

    /// Count a look at `path` answered as unreadable without a denial
    /// ([`crate::ExecutionStats::hidden_looks`]), and the answer: `EACCES`.
    fn looked_in_vain(&mut self, path: &VPath, guest: &str) -> Fault {
        self.count_look(path);
        Fault::Guest(oserror::os_error(EACCES, guest))
    }

    fn count_look(&mut self, path: &VPath) {
        let stats = &mut self.meter.stats;
        stats.hidden_looks += 1;
        if stats.hidden_paths.len() < crate::limits::MAX_HIDDEN_PATHS && !stats.hidden_paths.contains(path) {
            stats.hidden_paths.push(path.clone());
        }
    }

    /// A look's refusal `fault` (an [`OsHost::look`], a follow of a symlink
    /// for one): a symlink in the workspace that leads out of it is answered
    /// as unreadable and counted as a look, no denial, as a hidden path is
    /// (`is_file()` of every entry, a walk that stats what it meets: a
    /// project's `.venv/bin/python -> /usr/bin/python3` is no attempt at
    /// anything, and the answer is the same whatever lies outside); any
    /// other refusal is a denial, recorded. Other faults pass unchanged.
    pub(crate) fn settle_look(&mut self, fault: Fault) -> Result<Fault, Fault> {
        match fault {
            // A path the program named outside the workspace (refused at the
            // root) stays a denial: that is an attempt, not a walk that met a link.
            Fault::Refused(refused)
                if refused.1.label == vsh_policy::RuleLabel::OutsideWorkspace && !refused.1.path.is_root() =>
            {
                let (error, denied) = *refused;
                self.count_look(&denied.path);
                Ok(Fault::Guest(error))
            }
            Fault::Refused(refused) => {
                let (error, denied) = *refused;
                self.record_denial(denied)?;
                Ok(Fault::Guest(error))
            }
            other => Ok(other),
        }
    }

    /// [`OsHost::follow`] for a look (`exists()`, `is_file()`, `stat`): each
    /// hop is a look ([`OsHost::look`]), and a hop out of the workspace is
    /// answered as unreadable and counted, no denial ([`OsHost::settle_look`]).
    pub(crate) fn follow_look(
        &mut self,
        grant: Grant<MetadataRead>,
        guest: &str,
    ) -> Result<Grant<MetadataRead>, Fault> {
        self.follow_by(
            grant,
            guest,
            |host, next| host.look(next, guest),
            |host, link, _| host.looked_in_vain(link, guest),
        )
    }

    /// [`OsHost::authorize`] for a write to `path`: `Modify` if something is
    /// there (`exists`), `Create` if not.
    pub(crate) fn authorize_write(&mut self, path: &VPath, exists: bool, guest: &str) -> Result<Grant<Write>, Fault> {
        self.check(path, if exists { AccessKind::Modify } else { AccessKind::Create }, guest)?;
        Ok(Grant::new(path.clone()))
    }

    /// [`OsHost::authorize`] for removing `path` (and, for a directory,
    /// what is beneath it), as the diff will call it: a `Delete` where the
    /// base held the path; a node this run made and removes again deletes
    /// nothing, and is removed without one (ux78 H1: a rule denying
    /// `delete` refused a tool's own temporary file). Nothing beneath a path
    /// the base did not hold is the base's either.
    pub(crate) fn authorize_removal(&mut self, path: &VPath, guest: &str) -> Result<Grant<Delete>, Fault> {
        if self.vfs.in_base(path).map_err(|error| vfs_fault(error, guest))? {
            return self.authorize::<Delete>(path, guest);
        }
        self.meter.charge_evidence(1, path.as_str().len() as u64)?;
        Ok(Grant::new(path.clone()))
    }

    /// [`OsHost::authorize`] for the look a change to `path` starts from
    /// ([`MetadataRead`]: what is there decides what the change is), made by
    /// a program that means `intent`. When the policy refuses the look, the
    /// refusal kept is the change's own if the policy refuses that too (a
    /// program that writes `.env` is refused a write, as it asked for one,
    /// not a look it never wrote), and the look's only when the change
    /// would have been allowed. A write is kept as `Modify` (else `Create`)
    /// whatever the image holds: the receipt the program reads tells nothing
    /// of what is there, as its `EACCES` does not.
    pub(crate) fn authorize_look_before(
        &mut self,
        path: &VPath,
        intent: Intent,
        guest: &str,
    ) -> Result<Grant<MetadataRead>, Fault> {
        self.meter.charge_evidence(1, path.as_str().len() as u64)?;
        let Some(look) = self.refusal(path, AccessKind::MetadataRead, guest)? else {
            return Ok(Grant::new(path.clone()));
        };
        // What is there is never consulted: a path whose look is refused is
        // one the program may not learn anything of, its existence included,
        // and the refusal is in the receipt it reads.
        let denied = match intent {
            Intent::Write => match self.refusal(path, AccessKind::Modify, guest)? {
                Some(modify) => Some(modify),
                None => self.refusal(path, AccessKind::Create, guest)?,
            },
            Intent::Access(access) => self.refusal(path, access, guest)?,
        }
        .unwrap_or(look);
        self.record_denial(denied)?;
        Err(Fault::Guest(oserror::os_error(EACCES, guest)))
    }

    fn check(&mut self, path: &VPath, access: AccessKind, guest: &str) -> Result<(), Fault> {
        self.meter.charge_evidence(1, path.as_str().len() as u64)?;
        match self.refusal(path, access, guest)? {
            None => Ok(()),
            Some(denied) if self.left_to_the_diff(&denied) => Ok(()),
            Some(denied) => {
                self.record_denial(denied)?;
                Err(Fault::Guest(oserror::os_error(EACCES, guest)))
            }
        }
    }

    /// Whether a real command's refused creation or removal `denied` is
    /// left to the diff instead (ux79 H2: a rule denying `create` refused
    /// `sed -i`'s, `os.replace`'s and `ln -sf`'s temporary files, never in
    /// the diff, so edits of files the workspace holds failed; ux81 M3: one
    /// denying `delete` refused `install` and `tar -x` over a file, which
    /// unlink it first and leave it modified): a command's processes
    /// make and remove what they like where the policy lets them see, and
    /// the transaction's decision judges what stays (a file left where a
    /// rule denies creating one, or gone where one denies deleting it,
    /// denies the run, naming it). Only the
    /// operator's rules and writable roots: never a name the policy hides,
    /// vsh's data, a nested vsh store or `.git` (git meets the refusal and
    /// stops there, instead of leaving objects for the decision to deny),
    /// which are refused as they are met; never a program's own call, whose
    /// `PermissionError` says at once what the policy refuses.
    /// So is what a Bash program's own `sed -i` does to the temporary
    /// file it writes beside the file it edits, and renames over it (ux86
    /// M1: a rule or writable roots naming the file alone denied the run,
    /// the remedy naming the temporary file): what it leaves is judged by
    /// the diff, and the rename onto the file is checked as any other.
    fn left_to_the_diff(&self, denied: &DeniedAccess) -> bool {
        let by_commands =
            matches!(denied.access, AccessKind::Create | AccessKind::Delete) && self.vfs.is_serving_commands();
        let sed_temporary = matches!(
            denied.access,
            AccessKind::Create | AccessKind::Delete | AccessKind::Modify | AccessKind::RenameSource
        ) && is_sed_temporary(&denied.path);
        (by_commands || sed_temporary)
            && matches!(denied.label, vsh_policy::RuleLabel::Custom | vsh_policy::RuleLabel::WritableRoots)
            && self.policy.authorize(&denied.path, AccessKind::MetadataRead).is_ok()
    }

    /// Why `access` to `path` is refused, if it is: a policy rule, or a
    /// nested vsh data directory.
    fn refusal(&mut self, path: &VPath, access: AccessKind, guest: &str) -> Result<Option<DeniedAccess>, Fault> {
        match self.policy.authorize(path, access) {
            Ok(()) => match self.nested_store(path, access).map_err(|error| vfs_fault(error, guest))? {
                None if matches!(access, AccessKind::Create | AccessKind::Modify)
                    && self.vfs.completes_store_magic(path).map_err(|error| vfs_fault(error, guest))? =>
                {
                    Ok(Some(DeniedAccess {
                        path: path.clone(),
                        access,
                        rule: "vsh data directory made by a program (store magic: txlog beside txlog.lock)".to_owned(),
                        label: vsh_policy::RuleLabel::RuntimeData,
                        rule_access: vsh_policy::AccessSet::ALL,
                    }))
                }
                found => Ok(found),
            },
            Err(denied) => Ok(Some(denied)),
        }
    }

    /// The refusal of `access` to `path` if it lies in a nested vsh data directory.
    fn nested_store(&mut self, path: &VPath, access: AccessKind) -> Result<Option<DeniedAccess>, VfsError> {
        Ok(self.vfs.vsh_data_within(path)?.map(|store| DeniedAccess {
            path: path.clone(),
            access,
            rule: format!("vsh data directory at {store} (store magic)"),
            label: vsh_policy::RuleLabel::RuntimeData,
            rule_access: vsh_policy::AccessSet::ALL,
        }))
    }

    /// Whether the listing of `dir` hides its entry `child`: a read of it is
    /// refused by a rule, or it is (in) a nested vsh data directory. The grant
    /// is what lets this check `child` alone: it was authorized, so `dir`
    /// neither is nor lies in a nested store.
    pub(crate) fn is_hidden(&mut self, dir: &Grant<DirectoryRead>, child: &VPath, guest: &str) -> Result<bool, Fault> {
        if self.policy.is_hidden(child) {
            return Ok(true);
        }
        // A direct child of `dir` (compared in place: this runs per entry).
        let direct = child.relative_to(dir.path()).is_some_and(|name| !name.is_empty() && !name.contains('/'));
        let nested = if direct {
            self.vfs.vsh_data_at_child(child)
        } else {
            self.vfs.vsh_data_within(child).map(|store| store.is_some())
        };
        nested.map_err(|error| vfs_fault(error, guest))
    }

    /// Keep a refusal (a new one charged to the evidence budget first; one
    /// kept already is only counted).
    pub(crate) fn record_denial(&mut self, denied: DeniedAccess) -> Result<(), Fault> {
        if !self.denied.holds(&denied) {
            let bytes = (denied.path.as_str().len() + denied.rule.len()) as u64;
            self.meter.charge_evidence(1, bytes)?;
        }
        self.denied.record(denied);
        self.meter.stats.denied_accesses = self.denied.attempts();
        Ok(())
    }

    /// What a guest path `guest` that continues below the symlink `at` gets
    /// (see [`Fault::ThroughSymlink`]): a link that leads out of the
    /// workspace is a refused way out, recorded like any other so the
    /// transaction is denied even if the guest catches it (as following it
    /// as a last component would be); one that stays inside is `OSError`
    /// errno 40, since a link inside a path is never traversed.
    ///
    /// Where the link leads is judged hop by hop, as [`OsHost::follow`]
    /// would go: a target that is itself a link, or lies below one, is
    /// judged in turn (at most [`MAX_SYMLINK_HOPS`]), so a chain of links
    /// inside the workspace cannot hide the one that leaves it.
    pub(crate) fn through_symlink(&mut self, at: VPath, guest: &str) -> Fault {
        let mut link = at;
        for _ in 0..MAX_SYMLINK_HOPS {
            // Where a protected link leads is its content: refused as a read of it.
            if let Err(refused @ Fault::Refused(_)) = self.authorize::<ContentRead>(&link, guest) {
                return refused;
            }
            let target = match self.vfs.read_link(&link) {
                Ok(target) => target,
                Err(error) if error.is_terminal() => return Fault::Vfs(error),
                Err(_) => break,
            };
            let Some(next) = path::link_destination(&link, &target) else {
                let attempt = format!("{guest} -> {link} -> {}", String::from_utf8_lossy(&target));
                let denied = DeniedAccess::outside(&attempt, link, AccessKind::MetadataRead);
                return Fault::Refused(Box::new((oserror::os_error(EACCES, guest), denied)));
            };
            link = match self.vfs.kind(&next) {
                Ok(Some(NodeKind::Symlink)) => next,
                Err(VfsError::SymlinkInPath { path }) => path,
                Err(error) if error.is_terminal() => return Fault::Vfs(error),
                // It stays inside: a link inside a path is never traversed.
                _ => break,
            };
        }
        Fault::Guest(oserror::os_error(ELOOP, guest))
    }

    /// The grant for where `grant`'s path ends after following a symlink in
    /// its last component (see the `host` module's documentation): access `A`
    /// is authorized for every hop, and a hop out of the workspace is refused.
    pub(crate) fn follow<A: Access>(&mut self, grant: Grant<A>, guest: &str) -> Result<Grant<A>, Fault> {
        self.follow_by(
            grant,
            guest,
            |host, next| host.authorize::<A>(next, guest),
            |_, link, target| {
                let attempt = format!("{guest} -> {}", String::from_utf8_lossy(target));
                let denied = DeniedAccess::outside(&attempt, link.clone(), A::KIND);
                Fault::Refused(Box::new((oserror::os_error(EACCES, guest), denied)))
            },
        )
    }

    /// Follow a symlink in `grant`'s last component, at most
    /// [`MAX_SYMLINK_HOPS`] hops: each hop to a path of the workspace granted
    /// (or refused) by `hop`, a hop out of it (the link, its target) answered
    /// by `out`.
    fn follow_by<A>(
        &mut self,
        grant: Grant<A>,
        guest: &str,
        mut hop: impl FnMut(&mut Self, &VPath) -> Result<Grant<A>, Fault>,
        out: impl FnOnce(&mut Self, &VPath, &[u8]) -> Fault,
    ) -> Result<Grant<A>, Fault> {
        let mut current = grant;
        let mut hops = 0;
        loop {
            if self.kind(&current).map_err(|error| vfs_fault(error, guest))? != Some(NodeKind::Symlink) {
                return Ok(current);
            }
            hops += 1;
            if hops > MAX_SYMLINK_HOPS {
                return Err(Fault::Guest(oserror::os_error(ELOOP, guest)));
            }
            let link = current.path().clone();
            let link_target = self.link_target(&link, guest)?;
            let Some(next) = path::link_destination(current.path(), &link_target) else {
                return Err(out(self, current.path(), &link_target));
            };
            current = hop(self, &next)?;
        }
    }

    // ----- observations -----

    /// What is at the grant's path (nothing, or its kind).
    pub(crate) fn kind<A>(&mut self, grant: &Grant<A>) -> Result<Option<NodeKind>, VfsError> {
        self.vfs.kind(grant.path())
    }

    /// Whether the base held something at the grant's path (what a write
    /// there changes rather than makes): its kind, recorded, nothing read.
    pub(crate) fn in_base<A>(&mut self, grant: &Grant<A>) -> Result<bool, VfsError> {
        self.vfs.in_base(grant.path())
    }

    /// The size of the file at the grant's path.
    pub(crate) fn file_size<A>(&mut self, grant: &Grant<A>) -> Result<u64, VfsError> {
        self.vfs.file_size(grant.path())
    }

    /// The metadata at the grant's path.
    pub(crate) fn metadata<A>(&mut self, grant: &Grant<A>) -> Result<Metadata, VfsError> {
        self.vfs.metadata(grant.path())
    }

    /// A symlink's target, for a `readlink` or a follow of it: a link's
    /// target is its content, so its content read is authorized first (a
    /// `content-read` rule on a link protects where it points, as it
    /// protects a file's bytes; sec53: `readlink`, and `stat()` through the
    /// link sized against candidates, told it).
    pub(crate) fn link_target(&mut self, link: &VPath, guest: &str) -> Result<Arc<[u8]>, Fault> {
        self.authorize::<ContentRead>(link, guest)?;
        self.vfs.read_link(link).map_err(|error| vfs_fault(error, guest))
    }

    /// Set a node's permission bits: a write, `Create` or `Modify` as the
    /// diff will call it ([`OsHost::authorize_write`]).
    pub(crate) fn set_mode(&mut self, grant: &Grant<Write>, mode: u32) -> Result<(), VfsError> {
        self.vfs.set_mode(&grant.path, mode)
    }

    /// The bytes of the file at the grant's path.
    pub(crate) fn read(&mut self, grant: &Grant<ContentRead>) -> Result<Arc<[u8]>, VfsError> {
        self.vfs.read(grant.path())
    }

    /// Whether the guest read the content of base file `path` already.
    pub(crate) fn vfs_shown(&self, path: &VPath) -> bool {
        self.vfs.shown_contents().contains(path)
    }

    /// Take back that the guest read `path` ([`VirtualFs::unshow`]).
    pub(crate) fn unshow(&mut self, path: &VPath, shown_before: bool) {
        self.vfs.unshow(path, shown_before);
    }

    /// Note an edit in place of `path` ([`VirtualFs::note_edited_in_place`]).
    pub(crate) fn note_edited_in_place(&mut self, path: &VPath) -> Result<(), VfsError> {
        self.vfs.note_edited_in_place(path)
    }

    /// The bytes of the file at the grant's path, to change them: not
    /// counted shown ([`VirtualFs::read_unshown`]).
    pub(crate) fn read_unshown(&mut self, grant: &Grant<ContentRead>) -> Result<Arc<[u8]>, VfsError> {
        self.vfs.read_unshown(grant.path())
    }

    /// What a first piece of the file at the grant's path costs the host
    /// beyond the piece (see [`VirtualFs::read_range_cost`]).
    pub(crate) fn read_range_cost(&mut self, grant: &Grant<ContentRead>) -> Result<u64, VfsError> {
        self.vfs.read_range_cost(grant.path())
    }

    /// Up to `length` bytes from `offset` of the file at the grant's path.
    pub(crate) fn read_range(
        &mut self,
        grant: &Grant<ContentRead>,
        offset: u64,
        length: u32,
    ) -> Result<Vec<u8>, VfsError> {
        self.vfs.read_range(grant.path(), offset, length)
    }

    /// The names in the directory at the grant's path, sorted.
    pub(crate) fn read_dir(&mut self, grant: &Grant<DirectoryRead>) -> Result<Vec<String>, VfsError> {
        self.vfs.read_dir(grant.path())
    }

    /// Where the entries of the directory at the grant's path come from
    /// (see [`vsh_vfs::ListingView`]), for [`OsHost::listed_kind_in`].
    pub(crate) fn listing_view(&mut self, grant: &Grant<DirectoryRead>) -> Result<vsh_vfs::ListingView, VfsError> {
        self.vfs.listing_view(grant.path())
    }

    /// What is at `child`, an entry of the directory `view` was taken of.
    pub(crate) fn listed_kind_in(
        &mut self,
        view: &vsh_vfs::ListingView,
        child: &VPath,
    ) -> Result<Option<NodeKind>, VfsError> {
        if !child.is_strictly_within(view.dir()) || child.depth() != view.dir().depth() + 1 {
            return Err(VfsError::InvalidOperation {
                path: child.clone(),
                reason: "not a name of the listed directory",
            });
        }
        self.vfs.listed_kind(view, child)
    }

    /// [`OsHost::read_dir`], shared with the image (not a copy).
    pub(crate) fn read_dir_shared(&mut self, grant: &Grant<DirectoryRead>) -> Result<Arc<Vec<String>>, VfsError> {
        self.vfs.read_dir_shared(grant.path())
    }

    /// Every path strictly below the directory at the grant's path, with what
    /// is there, listed through the image for authorizing them (hidden ones
    /// included: the caller authorizes each). Each visited path is charged to
    /// the evidence budget, and the deadline is checked at each; `fault` maps
    /// image errors.
    pub(crate) fn descendants<A>(
        &mut self,
        root: &Grant<A>,
        fault: &dyn Fn(VfsError) -> Fault,
    ) -> Result<Vec<(VPath, Option<NodeKind>)>, Fault> {
        let mut out = Vec::new();
        let mut pending = vec![root.path().clone()];
        while let Some(dir) = pending.pop() {
            for name in self.vfs.read_dir(&dir).map_err(fault)? {
                let child = dir.child(&name).map_err(|_| fault(VfsError::NonUtf8Name { path: dir.clone() }))?;
                self.visit(&child)?;
                let kind = self.vfs.kind(&child).map_err(fault)?;
                if kind == Some(NodeKind::Directory) {
                    pending.push(child.clone());
                }
                out.push((child, kind));
            }
        }
        Ok(out)
    }

    /// One path a tree walk visits: an evidence record, and a check of the
    /// end-to-end deadline.
    pub(crate) fn visit(&mut self, path: &VPath) -> Result<(), Fault> {
        self.meter.check_deadline()?;
        self.meter.charge_evidence(1, path.as_str().len() as u64)?;
        Ok(())
    }

    // ----- changes -----

    /// Replace the file at the grant's path with `data`.
    pub(crate) fn write(&mut self, grant: &Grant<Write>, data: Arc<[u8]>) -> Result<(), VfsError> {
        self.vfs.write(grant.path(), data)
    }

    /// Extend the file at the grant's path with `data`.
    pub(crate) fn append(&mut self, grant: &Grant<Write>, data: &[u8]) -> Result<(), VfsError> {
        self.vfs.append(grant.path(), data).map(drop)
    }

    /// Make a symbolic link at the grant's path pointing at `target` (kept
    /// as bytes, never followed here).
    pub(crate) fn create_symlink(&mut self, grant: &Grant<Create>, target: &[u8]) -> Result<(), VfsError> {
        self.vfs.symlink(grant.path(), target)
    }

    /// Make the directory at the grant's path.
    pub(crate) fn create_dir(&mut self, grant: &Grant<Create>, mode: u32) -> Result<(), VfsError> {
        self.vfs.mkdir(grant.path(), mode)
    }

    /// Make each missing directory in `ancestors` (the granted missing
    /// ancestors of `grant`'s path, outermost first), then `grant`'s.
    pub(crate) fn mkdir_all(
        &mut self,
        ancestors: &[Grant<Create>],
        grant: &Grant<Create>,
        mode: u32,
    ) -> Result<(), VfsError> {
        for ancestor in ancestors {
            if !grant.path().is_strictly_within(ancestor.path()) {
                return Err(VfsError::InvalidOperation {
                    path: ancestor.path().clone(),
                    reason: "not an ancestor of the directory made",
                });
            }
            if self.vfs.kind(ancestor.path())?.is_none() {
                self.vfs.mkdir(ancestor.path(), mode)?;
            }
        }
        self.vfs.mkdir(grant.path(), mode)
    }

    /// Remove the file or symlink at the grant's path.
    pub(crate) fn unlink(&mut self, grant: &Grant<Delete>) -> Result<(), VfsError> {
        self.vfs.unlink(grant.path())
    }

    /// Remove the empty directory at the grant's path. A directory the
    /// guest sees as empty that holds hidden names is refused (see
    /// [`OsHost::refuse_hidden_contents`]), so the answer never depends on
    /// what is hidden there.
    pub(crate) fn rmdir(&mut self, grant: &Grant<Delete>, guest: &str) -> Result<(), Fault> {
        self.refuse_hidden_contents(grant.path(), guest)?;
        self.vfs.rmdir(grant.path()).map_err(|error| vfs_fault(error, guest))
    }

    /// Before `dir` is removed or replaced by a rename: when it holds names
    /// and every one is hidden from the guest (a secret, vsh's data), the
    /// change would remove what it may not see, and whether it fails
    /// ("not empty") would tell what is hidden there. It is refused as a
    /// tree walk refuses it, recorded against `dir` (the run is denied), so
    /// the only way to learn what is hidden is one that is on record. A
    /// directory with a name the guest sees fails as not empty as it is.
    pub(crate) fn refuse_hidden_contents(&mut self, dir: &VPath, guest: &str) -> Result<(), Fault> {
        if self.vfs.kind(dir).map_err(|error| vfs_fault(error, guest))? != Some(NodeKind::Directory) {
            return Ok(());
        }
        let listed = self.authorize::<DirectoryRead>(dir, guest)?;
        let names = self.vfs.read_dir(dir).map_err(|error| vfs_fault(error, guest))?;
        let mut hidden = None;
        for name in &*names {
            let Ok(child) = dir.child(name) else { return Ok(()) };
            if !self.is_hidden(&listed, &child, guest)? {
                return Ok(());
            }
            hidden.get_or_insert(child);
        }
        // Refused as its removal, or, where a rule hides it but lets it be
        // removed, as the look the removal needs.
        if let Some(child) = hidden {
            self.authorize_below::<Delete>(&child, dir, guest)?;
            self.authorize_below::<MetadataRead>(&child, dir, guest)?;
            self.authorize_below::<ContentRead>(&child, dir, guest)?;
        }
        Ok(())
    }

    /// Copy the file `source` to `destination`.
    pub(crate) fn copy_content(
        &mut self,
        source: &Grant<ContentRead>,
        destination: &Grant<Write>,
    ) -> Result<(), VfsError> {
        self.vfs.copy_file(source.path(), destination.path())
    }

    /// Remove the directory at `root` and everything below it, once `Delete`
    /// is authorized for every path below it too (by the policy's tree check,
    /// and for nested vsh data directories). A refusal is recorded and names
    /// only the path the guest gave; nothing changes.
    pub(crate) fn remove_tree(&mut self, root: &Grant<Delete>, guest: &str) -> Result<(), Fault> {
        let fault = |error: VfsError| vfs_fault(error, guest);
        // A tree this run made deletes nothing of the base's
        // ([`OsHost::authorize_removal`]).
        if !self.vfs.in_base(root.path()).map_err(fault)? {
            return self.vfs.remove_tree(root.path()).map_err(fault);
        }
        let descendants: Vec<VPath> = self.descendants(root, &fault)?.into_iter().map(|(path, _)| path).collect();
        let mut refusal = self.policy.authorize_tree(root.path(), &descendants, AccessKind::Delete).err();
        // A path a rule hides, though it lets it be deleted, is removed only
        // by what cannot see it: the walk is refused as its look, so what the
        // receipt lists never tells what was hidden there.
        if refusal.is_none() {
            refusal = descendants
                .iter()
                .find_map(|descendant| self.policy.authorize(descendant, AccessKind::MetadataRead).err());
        }
        if refusal.is_none() {
            // A nested workspace's vsh data directory goes nowhere either.
            for descendant in &descendants {
                refusal = self.nested_store(descendant, AccessKind::Delete).map_err(fault)?;
                if refusal.is_some() {
                    break;
                }
            }
        }
        if let Some(denied) = refusal {
            // The refused path may be hidden from the guest: name only the path it gave.
            let denied = self.as_named(denied, root.path());
            self.record_denial(denied)?;
            return Err(Fault::Guest(oserror::os_error(EACCES, guest)));
        }
        self.vfs.remove_tree(root.path()).map_err(fault)
    }

    /// Whether a rename of `path` moves what the base holds: a path the base
    /// holds, a node that is the base's under a name of this run's, or holds
    /// one (moved there, whatever was written to it since:
    /// [`VirtualFs::holds_moved_base`]; sec85 F1, sec86), or one the policy
    /// hides (judged so whether it exists or not, which is never told).
    fn moves_the_bases(&mut self, path: &VPath) -> Result<bool, VfsError> {
        Ok(self.policy.authorize(path, AccessKind::MetadataRead).is_err()
            || self.vfs.holds_moved_base(path)
            || self.vfs.in_base(path)?)
    }

    /// Rename with every path authorized first: where the base held the
    /// source ([`OsHost::moves_the_bases`]), the source (`RenameSource`,
    /// `Delete`) and each of its descendants the base held (`RenameSource`),
    /// the destination (`RenameDestination`); always the destination as a
    /// write (`Modify` where it replaces what the base held, else `Create`)
    /// and each path the
    /// descendants land on (`RenameDestination`). One refusal leaves everything
    /// unchanged.
    pub(crate) fn rename(&mut self, source: &Target<'_>, destination: &Target<'_>) -> Result<(), Fault> {
        let fault = |error: VfsError| match error {
            // A link on either path's way: judged as for any other call.
            VfsError::SymlinkInPath { path } => {
                let guest = if source.path.is_within(&path) { source.guest } else { destination.guest };
                Fault::ThroughSymlink { at: path, guest: guest.to_owned() }
            }
            error if error.is_terminal() => Fault::Vfs(error),
            error => {
                Fault::Guest(oserror::os_error2(error.errno().unwrap_or(oserror::EIO), source.guest, destination.guest))
            }
        };
        // A refusal is the rename's own `PermissionError`, naming both paths;
        // a budget or a terminal image error still ends the run.
        let refused = |error: Fault| match error {
            Fault::Guest(_) => Fault::Guest(oserror::os_error2(EACCES, source.guest, destination.guest)),
            other => other,
        };
        // Each side is what the diff will call it, as a write is: moving a
        // node the base did not hold moves nothing of the base's, so it
        // deletes nothing and is no rename a `rename-source` or
        // `rename-destination` rule judges, only a write of its destination
        // (ux78 H1, ux80 H1: `sed -i` and every tool that writes a temporary
        // file and renames it were refused by such rules, naming the
        // temporary file). A name the policy hides is judged as ever, so
        // whether it exists is never told.
        let of_the_base = self.moves_the_bases(&source.path).map_err(fault)?;
        let moved = if of_the_base {
            let moved = self.authorize::<RenameSource>(&source.path, source.guest).map_err(refused)?;
            self.authorize::<Delete>(&source.path, source.guest).map_err(refused)?;
            moved
        } else {
            self.meter.charge_evidence(1, source.path.as_str().len() as u64)?;
            Grant::new(source.path.clone())
        };
        let landing = if of_the_base {
            self.authorize::<RenameDestination>(&destination.path, source.guest).map_err(refused)?
        } else {
            Grant::new(destination.path.clone())
        };
        let source_kind = self.kind(&moved).map_err(fault)?;
        if source_kind.is_none() {
            return Err(fault(VfsError::NotFound { path: source.path.clone() }));
        }
        // The destination is looked at first, as any write's is: one a rule
        // hides is refused there or not, never replaced or made by what is
        // hidden.
        let intent = if of_the_base { Intent::Access(AccessKind::RenameDestination) } else { Intent::Write };
        self.authorize_look_before(&destination.path, intent, source.guest).map_err(refused)?;
        let replaces = self.in_base(&landing).map_err(fault)?;
        self.authorize_write(&destination.path, replaces, source.guest).map_err(refused)?;
        // A directory replaced whole: refused if it holds only hidden names.
        self.refuse_hidden_contents(&destination.path, destination.guest).map_err(refused)?;
        if source_kind == Some(NodeKind::Directory) && !destination.path.is_strictly_within(&source.path) {
            for (descendant, _) in self.descendants(&moved, &fault)? {
                let Some(landing) = descendant.rebase(&source.path, &destination.path) else { continue };
                if self.moves_the_bases(&descendant).map_err(fault)? {
                    self.authorize_below::<RenameSource>(&descendant, &source.path, source.guest).map_err(refused)?;
                    self.authorize_below::<RenameDestination>(&landing, &destination.path, source.guest)
                        .map_err(refused)?;
                }
                // Where each lands is written there, as the diff will call
                // it (sec85 F2: a program's directory moved under a rule
                // denying creation there met no refusal until the decision).
                let replaces = self.vfs.in_base(&landing).map_err(fault)?;
                self.authorize_write(&landing, replaces, source.guest).map_err(refused)?;
            }
        }
        self.vfs.rename(&source.path, &destination.path).map_err(fault)
    }
}

/// Whether `path` names the temporary file bashkit's `sed -i` (a Bash
/// program's) writes beside the file it edits: `.bashkit-sed-HEX.tmp`.
fn is_sed_temporary(path: &VPath) -> bool {
    path.file_name()
        .and_then(|name| name.strip_prefix(".bashkit-sed-"))
        .and_then(|rest| rest.strip_suffix(".tmp"))
        .is_some_and(|hex| !hex.is_empty() && hex.len() <= 32 && hex.bytes().all(|byte| byte.is_ascii_hexdigit()))
}
