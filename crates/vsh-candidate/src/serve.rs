//! [`serve`]: answer the kernel's requests on a mounted candidate from a
//! thread of the parent, until the mount goes away.

use std::thread::JoinHandle;

use fuser::{Session, SessionACL};
use vsh_sandbox::MountWaiter;

use crate::backend::Backend;
use crate::fs::CandidateFs;

/// A candidate being served.
#[derive(Debug)]
pub struct Serving {
    thread: JoinHandle<std::io::Result<()>>,
}

impl Serving {
    /// Whether serving ended: the mount is gone (its namespace's last
    /// process exited), or the device failed.
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Wait for the end of serving.
    ///
    /// # Errors
    ///
    /// The device's error, if reading it failed for another reason than the
    /// mount going away.
    pub fn join(self) -> std::io::Result<()> {
        self.thread.join().unwrap_or_else(|_| Err(std::io::Error::other("the candidate's server panicked")))
    }
}

/// Serve `fs` from a new thread, once the child has mounted the device
/// `mounted` waits for (start this before spawning the child: the child
/// waits for the server's first answer before it runs its program). Every
/// request is answered on that thread, one at a time, until the mount goes
/// away.
///
/// # Errors
///
/// When the thread cannot be started. The child never mounting (it failed
/// to spawn) or a failed handshake is the error [`Serving::join`] returns.
pub fn serve<B: Backend>(fs: CandidateFs<B>, mounted: MountWaiter) -> std::io::Result<Serving> {
    serve_then(fs, mounted, || {})
}

/// [`serve`], calling `ended` on the serving thread when serving ends
/// (to wake whoever waits for it).
///
/// # Errors
///
/// As [`serve`].
pub fn serve_then<B: Backend>(
    fs: CandidateFs<B>,
    mounted: MountWaiter,
    ended: impl FnOnce() + Send + 'static,
) -> std::io::Result<Serving> {
    let thread = std::thread::Builder::new().name("vsh-candidate".to_owned()).spawn(move || {
        let served = (|| {
            let device = mounted.wait()?;
            let mut fs = fs;
            fs.linger_on(device.try_clone()?);
            let mut config = fuser::Config::default();
            config.n_threads = Some(1);
            // Any uid may use the mount: the child may have changed its uid, and
            // only the child's namespace sees the mount at all.
            Session::from_fd(fs, device, SessionACL::All, config)?.run()
        })();
        ended();
        served
    })?;
    Ok(Serving { thread })
}
