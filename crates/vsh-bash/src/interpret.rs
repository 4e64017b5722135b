//! [`run`]: one script on an interpreter thread, its file requests answered
//! on the caller's.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bashkit::{Bash, ShellFeatures, hooks::HookAction};

use crate::fs::{Channel, Control, Direct, RpcFs, Transport};
use crate::guard::{self, Refuse};
use crate::{BashEnd, BashRun, Ending, FsHost, GUEST_ENVIRONMENT, VIRTUAL_ROOT};

/// How often the serving loop asks the host whether to stop while the
/// script computes.
const POLL: Duration = Duration::from_millis(20);

/// The interpreter thread's stack: bashkit recurses on nested syntax (its own
/// depth limits keep it far from this).
const STACK_BYTES: usize = 16 << 20;

/// Run `request` on this thread, the interpreter calling `host` directly:
/// for a host that owns its transport (the worker's pipe to its parent). No
/// interrupt is polled (whoever watches the host's time ends it); the host
/// comes back with the end.
pub fn run_direct<H: FsHost + Send + 'static>(request: &BashRun, host: H) -> (BashEnd, H) {
    let control = Arc::new(Control::default());
    let fs = Arc::new(RpcFs::new(Direct(Mutex::new(host)), Arc::clone(&control)));
    let end = interpret(request, Arc::clone(&fs), &control);
    let fs = Arc::into_inner(fs).expect("the interpreter is done with its filesystem");
    let host = fs.into_transport().0.into_inner().unwrap_or_else(PoisonError::into_inner);
    (end, host)
}

/// Run `request`, answering its file requests with `host` on this thread.
pub fn run(request: &BashRun, host: &mut dyn FsHost) -> BashEnd {
    let (requests, incoming) = mpsc::sync_channel(0);
    let (answers, replies) = mpsc::sync_channel(1);
    let control = Arc::new(Control::default());
    let fs = Arc::new(RpcFs::new(Channel { requests, replies: Mutex::new(replies) }, Arc::clone(&control)));
    std::thread::scope(|scope| {
        let interpreter = std::thread::Builder::new()
            .name("vsh-bash".to_owned())
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, || interpret(request, fs, &control));
        let interpreter = match interpreter {
            Ok(thread) => thread,
            Err(error) => return failed(format!("cannot start the interpreter: {error}")),
        };
        loop {
            match incoming.recv_timeout(POLL) {
                Ok(file_request) => {
                    let answer = host.serve(file_request);
                    if answer.is_err() {
                        control.stop();
                    }
                    if answers.send(answer).is_err() {
                        break;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    if !control.is_stopped() && host.interrupted() {
                        control.stop();
                    }
                }
                // The interpreter is done (its filesystem, and with it the
                // sender, dropped).
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        interpreter.join().unwrap_or_else(|_| failed("the interpreter panicked".to_owned()))
    })
}

fn failed(message: String) -> BashEnd {
    BashEnd { exit_code: 1, stdout: Vec::new(), stderr: Vec::new(), ending: Ending::Failed(message) }
}

/// The interpreter's limits for `request`.
fn limits(request: &BashRun) -> bashkit::ExecutionLimits {
    let limits = &request.limits;
    let count = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
    let depth = count(request.max_depth);
    let output = count(request.max_output_bytes);
    bashkit::ExecutionLimits {
        max_work_units: limits.max_work_units,
        max_aggregate_input_bytes: limits.max_aggregate_input_bytes,
        max_live_intermediate_bytes: limits.max_live_intermediate_bytes,
        max_commands: count(limits.max_commands),
        max_loop_iterations: count(limits.max_loop_iterations),
        max_total_loop_iterations: count(limits.max_total_loop_iterations),
        max_function_depth: depth.min(64),
        timeout: request.timeout,
        parser_timeout: request.timeout.min(Duration::from_secs(5)),
        max_input_bytes: request.script.len().max(1),
        max_ast_depth: 64,
        max_parser_operations: count(limits.max_parser_operations),
        max_stdout_bytes: output,
        max_stderr_bytes: output,
        max_subst_depth: depth.min(16),
        max_subshell_depth: depth.min(16),
        max_file_descriptors: 128,
        max_history_entries: 0,
        max_history_bytes: 0,
        max_history_output_bytes: 0,
        ..bashkit::ExecutionLimits::default()
    }
}

/// A script that does not parse, or whose parse passes its budget, ends
/// before anything runs (the interpreter reports both as status 2 otherwise,
/// which a script's own `exit 2` could not be told from).
fn parse_failure(request: &BashRun) -> Option<BashEnd> {
    let fuel = usize::try_from(request.limits.max_parser_operations).unwrap_or(usize::MAX);
    let error = bashkit::parser::Parser::with_limits(&request.script, 64, fuel).parse().err()?;
    let message = match &error {
        bashkit::Error::Parse { message, .. } => message.clone(),
        other => other.to_string(),
    };
    let ending = if message.starts_with("parser fuel exhausted") || message.contains("nesting") {
        Ending::Limit(message)
    } else {
        Ending::Parse(error.to_string())
    };
    Some(BashEnd { exit_code: 2, stdout: Vec::new(), stderr: format!("vsh: {error}\n").into_bytes(), ending })
}

/// The interpreter thread: build the shell, run the script, say how it ended.
fn interpret<T: Transport>(request: &BashRun, fs: Arc<RpcFs<T>>, control: &Arc<Control>) -> BashEnd {
    if let Some(failure) = parse_failure(request) {
        return failure;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_time().build() {
        Ok(runtime) => runtime,
        Err(error) => return failed(format!("cannot start the interpreter's runtime: {error}")),
    };
    let mut builder = Bash::builder()
        .fs(fs)
        .cwd(VIRTUAL_ROOT)
        .username("vsh")
        .hostname("vsh")
        .limits(limits(request))
        .builtin_filter(guard::supported)
        // Nothing runs from a file by its path or through `PATH`: a name
        // the profile lacks reaches the resolver, which refuses it.
        .shell_features(ShellFeatures::all().script_execution(false))
        .command_resolver(Arc::new(Refuse { control: Arc::clone(control) }));
    for (name, value) in GUEST_ENVIRONMENT {
        builder = builder.env(name, value);
    }
    let before = Arc::clone(control);
    let after = Arc::clone(control);
    builder = builder
        .before_tool(Box::new(move |event| {
            if before.is_stopped() {
                return HookAction::Cancel("vsh ended the run".to_owned());
            }
            before.dispatching(&event.name, &event.args);
            HookAction::Continue(event)
        }))
        .after_tool(Box::new(move |result| {
            after.dispatched();
            HookAction::Continue(result)
        }));
    let mut bash = builder.build();
    let _ = control.cancel.set(bash.cancellation_token());
    let outcome = runtime.block_on(bash.exec(&request.script));
    drop(bash);
    let unsupported = control.first_unsupported();
    match outcome {
        Ok(result) => {
            let ending = if control.is_stopped() {
                Ending::Stopped
            } else if let Some(name) = unsupported {
                Ending::Unsupported(name)
            } else if result.stdout_truncated || result.stderr_truncated {
                Ending::Limit(format!("output above {} bytes", request.max_output_bytes))
            } else {
                Ending::Completed
            };
            BashEnd {
                exit_code: result.exit_code,
                stdout: result.stdout.into_bytes(),
                stderr: result.stderr.into_bytes(),
                ending,
            }
        }
        Err(error) => {
            let ending = if control.is_stopped() {
                Ending::Stopped
            } else if let Some(name) = unsupported {
                Ending::Unsupported(name)
            } else {
                match &error {
                    bashkit::Error::ResourceLimit(limit) => Ending::Limit(limit.to_string()),
                    bashkit::Error::Parse { .. } => Ending::Parse(error.to_string()),
                    bashkit::Error::Cancelled => Ending::Limit(format!("time above {:?}", request.timeout)),
                    _ => Ending::Failed(error.to_string()),
                }
            };
            let exit_code = if matches!(ending, Ending::Parse(_)) { 2 } else { 1 };
            BashEnd { exit_code, stdout: Vec::new(), stderr: format!("vsh: {error}\n").into_bytes(), ending }
        }
    }
}
