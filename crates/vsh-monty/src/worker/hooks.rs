//! Test-only worker behaviours, compiled only with the `test-hooks` feature.
//!
//! A program run by a worker built with the feature can call
//! `vsh_test_hook(name, argument)`; the worker handles the call itself instead
//! of asking the parent. The hooks make the worker misbehave the ways a
//! broken or compromised interpreter could (crash, send garbage, oversized or
//! out-of-turn frames, flood output, stall) and try to reach the host (open
//! files, create files, open sockets, execute programs), returning the
//! errno the kernel answered (0 for success).
//!
//! How tests get it: the package dev-depends on itself with
//! `features = ["test-hooks"]`, so `cargo test -p vsh-monty` (and the
//! benchmark) build the library and the `vsh-monty-worker` binary with the
//! hooks, while `cargo build` never does. The feature is part of the build
//! identity, so a parent without the hooks refuses a worker with them.

// These hooks try to reach the host by path on purpose, to show the sandbox refuses it.
#![allow(clippy::disallowed_methods)]

use std::fs;
use std::io::{self, Write as _};
use std::net::{TcpStream, UdpSocket};
use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::process::Command;
use std::time::{Duration, Instant};

use monty_types::{ExcType, MontyException, MontyObject};

use crate::drive::Reply;
use crate::worker::child::Link;
use crate::worker::protocol::{self, HEADER_BYTES, WireFinish, kind};
use crate::worker::wire::{WireNode, WireValue};

/// The guest-visible name of the hook function.
pub(crate) const HOOK_NAME: &str = "vsh_test_hook";

/// The errno of an I/O result (0 for success).
fn errno<T>(result: io::Result<T>) -> Reply {
    Reply::Return(MontyObject::Int(match result {
        Ok(_) => 0,
        Err(error) => i64::from(error.raw_os_error().unwrap_or(-1)),
    }))
}

/// Write raw bytes, then wait for the parent to end the worker.
fn send_raw_and_wait(link: &mut Link, bytes: &[u8]) -> ! {
    let _ = link.output.write_all(bytes);
    let _ = link.output.flush();
    let _ = link.recv();
    std::process::exit(3)
}

fn header(len: u32, frame_kind: u8) -> [u8; HEADER_BYTES] {
    let mut header = [0u8; HEADER_BYTES];
    header[..4].copy_from_slice(&len.to_le_bytes());
    header[4] = frame_kind;
    header
}

/// Serve one hook call.
pub(crate) fn run(link: &mut Link, args: &[MontyObject]) -> Reply {
    let name = match args.first() {
        Some(MontyObject::String(name)) => name.as_str(),
        _ => return Reply::Raise(MontyException::new(ExcType::TypeError, Some("hook name must be a str".into()))),
    };
    let text = match args.get(1) {
        Some(MontyObject::String(text)) => text.clone(),
        _ => String::new(),
    };
    let number = match args.get(1) {
        Some(MontyObject::Int(number)) => u64::try_from(*number).unwrap_or(0),
        _ => 0,
    };
    match name {
        "pid" => Reply::Return(MontyObject::Int(i64::from(std::process::id()))),
        "env" => Reply::Return(MontyObject::Int(i64::try_from(std::env::vars_os().count()).unwrap_or(i64::MAX))),
        "abort" => std::process::abort(),
        "garbage" => {
            let mut bytes = header(16, kind::SUSPEND).to_vec();
            bytes.extend_from_slice(&[0xff; 16]);
            send_raw_and_wait(link, &bytes)
        }
        "bad-kind" => send_raw_and_wait(link, &header(0, 99)),
        "oversized" => send_raw_and_wait(link, &header(u32::MAX, kind::SUSPEND)),
        "cut-frame" => {
            let mut bytes = header(100, kind::OUTPUT).to_vec();
            bytes.extend_from_slice(b"only part");
            let _ = link.output.write_all(&bytes);
            let _ = link.output.flush();
            std::process::exit(0)
        }
        "stall-frame" => {
            // Half a frame, then nothing for `number` ms: the parent, inside
            // the frame, waits on it; only its watchdog ends this.
            let mut bytes = header(100, kind::OUTPUT).to_vec();
            bytes.extend_from_slice(b"only part");
            let _ = link.output.write_all(&bytes);
            let _ = link.output.flush();
            std::thread::sleep(Duration::from_millis(number));
            std::process::exit(3)
        }
        "empty-output" => {
            let _ = protocol::send(&mut link.output, kind::OUTPUT, &String::new());
            send_raw_and_wait(link, &[])
        }
        "flood" => {
            let chunk = "x".repeat(60 << 10);
            loop {
                if protocol::send(&mut link.output, kind::OUTPUT, &chunk).is_err() {
                    std::process::exit(3)
                }
            }
        }
        "unasked-abort" => {
            let _ = protocol::send(&mut link.output, kind::FINISHED, &WireFinish::Aborted);
            send_raw_and_wait(link, &[])
        }
        "hello-again" => {
            let _ = protocol::send(&mut link.output, kind::RESET_DONE, &protocol::ResetDone { live_bytes: 0 });
            send_raw_and_wait(link, &[])
        }
        "deep-value" => {
            let depth = usize::try_from(number).unwrap_or(0);
            let mut nodes: Vec<WireNode> = (0..depth).map(|_| WireNode::List(1)).collect();
            nodes.push(WireNode::Scalar(postcard::to_allocvec(&MontyObject::None).unwrap_or_default()));
            let finish = WireFinish::Value(wire_value(nodes));
            let _ = protocol::send(&mut link.output, kind::FINISHED, &finish);
            send_raw_and_wait(link, &[])
        }
        "sleep" => {
            std::thread::sleep(Duration::from_millis(number));
            Reply::Return(MontyObject::None)
        }
        "spin" => {
            let until = Instant::now() + Duration::from_millis(number);
            let mut counter = 0u64;
            while Instant::now() < until {
                counter = counter.wrapping_add(1);
            }
            Reply::Return(MontyObject::Int(i64::from(counter > 0)))
        }
        "leak" => {
            let leaked: &'static mut [u8] = Vec::leak(vec![1u8; usize::try_from(number).unwrap_or(0)]);
            Reply::Return(MontyObject::Int(i64::from(leaked.first().copied().unwrap_or(0))))
        }
        "open" => errno(fs::File::open(&text)),
        "list" => errno(fs::read_dir(&text)),
        "create" => errno(fs::OpenOptions::new().write(true).create(true).truncate(true).open(&text)),
        "tcp" => errno(TcpStream::connect(&text)),
        "udp" => errno(UdpSocket::bind("0.0.0.0:0").and_then(|socket| socket.send_to(b"x", &text))),
        "unix" => errno(UnixStream::connect(&text)),
        "unix-abstract" => errno(
            SocketAddr::from_abstract_name(text.as_bytes()).and_then(|address| UnixStream::connect_addr(&address)),
        ),
        "exec" => errno(Command::new(&text).status()),
        _ => Reply::Raise(MontyException::new(ExcType::ValueError, Some(format!("unknown hook {name:?}")))),
    }
}

fn wire_value(nodes: Vec<WireNode>) -> WireValue {
    WireValue::from_nodes(nodes)
}
