//! The private runtime that runs `object_store`'s requests: lodt's API is
//! synchronous, so each call blocks on its requests here.

use std::future::Future;
use std::io;
use std::sync::{Mutex, PoisonError};
use tokio::runtime::{Builder, Runtime};

/// This process's runtime, made on first use: two worker threads (requests
/// are I/O bound; concurrency comes from the requests in flight, not from
/// threads).
///
/// A child forked from a process that had a runtime inherits its memory but
/// not its threads: blocking on it would wait forever. So a runtime belongs
/// to the process that made it, and a child makes its own on first use; the
/// parent's is never used or dropped there (dropping it would wait for
/// threads that do not exist), it is left as it is.
fn runtime() -> io::Result<&'static Runtime> {
    /// The process that made the runtime, and the runtime (leaked: it lives
    /// as long as the process).
    static RUNTIME: Mutex<Option<(u32, &'static Runtime)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((owner, runtime)) = *slot
        && owner == pid
    {
        return Ok(runtime);
    }
    let runtime = Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("lodt-remote")
        .enable_all()
        .build()
        .map_err(|e| io::Error::other(format!("starting lodt's I/O runtime: {e}")))?;
    let runtime: &'static Runtime = Box::leak(Box::new(runtime));
    *slot = Some((pid, runtime));
    Ok(runtime)
}

/// Runs `future` to completion on the runtime. An error, not a panic, when
/// called from inside an async runtime (blocking there would stall it).
pub(crate) fn block_on<F: Future>(future: F) -> io::Result<F::Output> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(io::Error::other(
            "lodt's remote reads block: call them outside an async runtime \
             (for example in tokio::task::spawn_blocking)",
        ));
    }
    Ok(runtime()?.block_on(future))
}

/// Starts `future` on the runtime and returns its handle.
pub(crate) fn spawn<F>(future: F) -> io::Result<tokio::task::JoinHandle<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Ok(runtime()?.spawn(future))
}

/// Maps an `object_store` error to an I/O error naming `uri`, keeping the
/// kind callers test (not found, precondition failed, invalid input).
pub(crate) fn io_error(uri: &str, e: object_store::Error) -> io::Error {
    use object_store::Error as E;
    let kind = match &e {
        E::NotFound { .. } => io::ErrorKind::NotFound,
        E::AlreadyExists { .. } => io::ErrorKind::AlreadyExists,
        E::InvalidPath { .. } => io::ErrorKind::InvalidInput,
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => io::ErrorKind::PermissionDenied,
        _ => io::ErrorKind::Other,
    };
    let what = match &e {
        E::Precondition { .. } => format!("{uri} changed since it was read: {e}"),
        _ => format!("{uri}: {e}"),
    };
    io::Error::new(kind, what)
}
