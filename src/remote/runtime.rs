//! The private runtime that runs `object_store`'s requests: lodt's API is
//! synchronous, so each call blocks on its requests here.

use std::future::Future;
use std::io;
use std::sync::OnceLock;
use tokio::runtime::{Builder, Runtime};

/// The runtime, made on first use: two worker threads (requests are I/O
/// bound; concurrency comes from the requests in flight, not from threads).
fn runtime() -> io::Result<&'static Runtime> {
    static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("lodt-remote")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| io::Error::other(format!("starting lodt's I/O runtime: {e}")))
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
