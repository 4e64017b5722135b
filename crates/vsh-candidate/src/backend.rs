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

/// A [`Backend`] whose requests arrive as [`Call`]s on the receiver
/// [`channel`] returns.
#[derive(Debug)]
pub struct ChannelBackend {
    calls: SyncSender<Call>,
}

/// A backend and the receiver its calls arrive on. When the receiver is
/// gone, every request fails with `EIO`.
pub fn channel() -> (ChannelBackend, Receiver<Call>) {
    let (calls, receiver) = sync_channel(1);
    (ChannelBackend { calls }, receiver)
}

impl Backend for ChannelBackend {
    fn call(&self, request: FsRequest) -> FsReply {
        let (reply, answer) = sync_channel(1);
        if self.calls.send(Call { request, reply }).is_err() {
            return FsReply::Failed(EIO);
        }
        answer.recv().unwrap_or(FsReply::Failed(EIO))
    }
}
