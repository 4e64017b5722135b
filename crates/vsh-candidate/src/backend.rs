//! [`Backend`]: who answers the filesystem's requests. [`channel`] makes one
//! whose requests another thread answers (the thread that owns the image),
//! one at a time.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use vsh_types::fsproto::{FsReply, FsRequest};

/// `EIO`: what a request gets when nobody answers any more.
const EIO: i32 = 5;

/// Answers file requests against an image.
pub trait Backend: Send + Sync + 'static {
    /// Answer one request.
    fn call(&self, request: FsRequest) -> FsReply;
}

/// One request waiting for its answer.
#[derive(Debug)]
pub struct Call {
    /// The request.
    pub request: FsRequest,
    reply: SyncSender<FsReply>,
}

impl Call {
    /// Answer it (an answer nobody waits for any more is dropped).
    pub fn answer(self, reply: FsReply) {
        let _ = self.reply.send(reply);
    }
}

/// A [`Backend`] whose requests arrive as [`Call`]s (wrapped in the
/// caller's event type `T`, so one receiver can wait for them and for
/// anything else) on a channel.
#[derive(Debug)]
pub struct ChannelBackend<T = Call> {
    events: SyncSender<T>,
    wrap: fn(Call) -> T,
}

/// A backend and the receiver its calls arrive on. When the receiver is
/// gone, every request fails with `EIO`.
pub fn channel() -> (ChannelBackend, Receiver<Call>) {
    let (events, receiver) = sync_channel(1);
    (ChannelBackend::new(events, |call| call), receiver)
}

impl<T: Send + 'static> ChannelBackend<T> {
    /// A backend that sends each call, wrapped by `wrap`, on `events`.
    pub fn new(events: SyncSender<T>, wrap: fn(Call) -> T) -> Self {
        Self { events, wrap }
    }
}

impl<T: Send + 'static> Backend for ChannelBackend<T> {
    fn call(&self, request: FsRequest) -> FsReply {
        let (reply, answer) = sync_channel(1);
        if self.events.send((self.wrap)(Call { request, reply })).is_err() {
            return FsReply::Failed(EIO);
        }
        answer.recv().unwrap_or(FsReply::Failed(EIO))
    }
}
