//! [`Backend`]: who answers the filesystem's requests. The filesystem calls
//! it on the thread that serves the kernel, so a backend that owns (or is
//! lent) the image answers without a hop to another thread: every hop is
//! two more wake-ups per request, which on a virtual machine with idle
//! CPUs is most of a request's time.

use vsh_types::fsproto::{FsReply, FsRequest};

/// Answers file requests against an image.
pub trait Backend: Send + Sync + 'static {
    /// Answer one request.
    fn call(&self, request: FsRequest) -> FsReply;
}
