//! [`Dispatcher`]: the parent's side of a run. It answers every suspension of
//! the guest, in process or for the worker, with the same code: the deadline
//! and the call budget first, then the typed OS call or `vsh_*` function on
//! the [`OsHost`].
//!
//! A call of an unknown function is a `NameError`, as in `CPython` (monty
//! suspends on any call of an undefined global). A budget that runs out, a
//! terminal VFS error or an unsupported suspension (a method call on a host
//! object, awaiting futures) ends the run: the dispatcher keeps the cause ([`Stop`]) and answers
//! [`Reply::Abort`], which the drive loop turns into an exception the guest
//! cannot catch. Once stopped, every later request is refused too.

use monty_types::{ExcType, MontyException};
use vsh_vfs::VfsError;

use crate::drive::{Reply, Request, Service};
use crate::host::{Fault, OsHost};
use crate::interrupt::Interrupt;
use crate::limits::{LimitExceeded, LimitKind};
use crate::output::OutputSink;
use crate::tools::Tool;

/// Why the dispatcher ended a run.
#[derive(Debug)]
pub(crate) enum Stop {
    /// A budget ran out.
    Limit(LimitExceeded),
    /// The virtual image failed terminally.
    Vfs(VfsError),
    /// The guest asked for something no executor serves.
    Unsupported(String),
    /// The caller's interrupt ended the run.
    Cancelled,
    /// A nested `vsh_bash` script failed terminally (a budget, a command
    /// outside the profile, a parse error).
    Bash(crate::BashFailure),
    /// A `vsh_exec` candidate could not be made or served (the host lacks
    /// what it needs, or the mount failed): the run ends with that error.
    Candidate(Box<crate::ExecutionError>),
}

/// Serves one run's suspensions from an [`OsHost`].
pub(crate) struct Dispatcher<'a> {
    pub(crate) host: OsHost<'a>,
    stop: Option<Stop>,
    interrupt: &'a dyn Interrupt,
    /// The interpreter budgets of `vsh_bash`, when the host enabled it.
    pub(crate) nested_bash: Option<vsh_bash::BashLimits>,
    /// Where `vsh_exec` runs its commands, when the host enabled them.
    pub(crate) nested_command: Option<&'a crate::CommandConfig>,
    /// The disk guard of this run's commands, made at its first: every
    /// later command of the run counts from the same start, so the run's
    /// commands together lose no more than one command may (sec53).
    pub(crate) disk_guard: Option<crate::command::DiskGuard>,
}

/// What a Monty run may call besides the `vsh_*` functions.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Nested<'a> {
    /// `vsh_bash`, with these interpreter budgets.
    pub(crate) bash: Option<vsh_bash::BashLimits>,
    /// `vsh_exec`, in candidates made here.
    pub(crate) command: Option<&'a crate::CommandConfig>,
}

impl<'a> Dispatcher<'a> {
    pub(crate) fn new(host: OsHost<'a>, interrupt: &'a dyn Interrupt) -> Self {
        Self { host, stop: None, interrupt, nested_bash: None, nested_command: None, disk_guard: None }
    }

    /// Enable what `nested` enables.
    pub(crate) fn with_nested(mut self, nested: Nested<'a>) -> Self {
        self.nested_bash = nested.bash;
        self.nested_command = nested.command;
        self
    }

    /// Whether the caller asked the run to stop.
    pub(crate) fn interrupted(&self) -> bool {
        self.interrupt.interrupted()
    }

    /// The cause of the end, if the dispatcher ended the run.
    pub(crate) fn take_stop(&mut self) -> Option<Stop> {
        self.stop.take()
    }

    /// The host and the run's end, to serve a request with.
    pub(crate) fn parts(&mut self) -> (&mut OsHost<'a>, &mut Option<Stop>) {
        (&mut self.host, &mut self.stop)
    }

    /// Whether the dispatcher has ended the run.
    pub(crate) fn stopped(&self) -> bool {
        self.stop.is_some()
    }

    /// End the run (outside a request, e.g. when the worker's wait passed the
    /// deadline); the first cause wins.
    pub(crate) fn end(&mut self, stop: Stop, reason: &str) -> Reply {
        self.stop.get_or_insert(stop);
        Reply::Abort(reason.to_owned())
    }
}

impl Service for Dispatcher<'_> {
    fn serve(&mut self, request: Request, _sink: &mut OutputSink) -> Reply {
        if self.stop.is_some() {
            return Reply::Abort("the run was already ended".to_owned());
        }
        if self.interrupt.interrupted() {
            return self.end(Stop::Cancelled, "cancelled");
        }
        if let Err(limit) = self.host.meter.check_deadline() {
            return self.end(Stop::Limit(limit), "request deadline passed");
        }
        if let Err(limit) = self.host.meter.charge_os_call() {
            return self.end(Stop::Limit(limit), "too many host calls");
        }
        let served = match request {
            Request::Os(call) => self.host.handle(call),
            Request::Function { name, args, kwargs } if name == crate::bash::NESTED_NAME => {
                return self.nested_bash_call(args, kwargs);
            }
            Request::Function { name, args, kwargs } if name == crate::command::EXEC_NAME => {
                return self.nested_exec_call(args, kwargs);
            }
            Request::Function { name, args, kwargs } => match Tool::from_name(&name) {
                Some(tool) => self.host.call_tool(tool, args, kwargs),
                // Monty suspends on a call of any undefined global name; as in
                // `CPython`, that is a `NameError` the guest may catch.
                None => Err(Fault::Guest(MontyException::new(
                    ExcType::NameError,
                    Some(format!("name '{name}' is not defined")),
                ))),
            },
            Request::Method { name } => {
                let what = format!("method call `{name}` on a host object");
                return self.end(Stop::Unsupported(what), "unsupported suspension");
            }
            Request::Lookup { .. } => return Reply::Undefined,
            Request::Futures { pending } => {
                let what = format!("waiting on {pending} host futures");
                return self.end(Stop::Unsupported(what), "unsupported suspension");
            }
            Request::Oversized { bytes } => {
                let max = self.host.meter.limits().max_io_call_bytes;
                let limit = LimitExceeded { limit: LimitKind::WriteCallBytes, attempted: bytes, max };
                return self.end(Stop::Limit(limit), "budget exhausted");
            }
        };
        let served = match served {
            Err(Fault::ThroughSymlink { at, guest }) => Err(self.host.through_symlink(at, &guest)),
            served => served,
        };
        match served {
            Ok(value) => Reply::Return(value),
            Err(Fault::Guest(exception)) => Reply::Raise(exception),
            Err(Fault::Refused(refused)) => {
                let (exception, denied) = *refused;
                match self.host.record_denial(denied) {
                    Err(Fault::Limit(limit)) => self.end(Stop::Limit(limit), "budget exhausted"),
                    _ => Reply::Raise(exception),
                }
            }
            Err(Fault::Limit(limit)) => self.end(Stop::Limit(limit), "budget exhausted"),
            Err(Fault::Vfs(error)) => self.end(Stop::Vfs(error), "virtual filesystem failed"),
            Err(Fault::ThroughSymlink { guest, .. }) => {
                Reply::Raise(crate::oserror::os_error(crate::oserror::ELOOP, &guest))
            }
        }
    }
}
