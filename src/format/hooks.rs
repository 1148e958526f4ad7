//! Test hooks (internal, doc-hidden): a test registers a function that an
//! append and an open call at their torn points, to pause them there and
//! check, deterministically, what a concurrent reader sees (`FORMAT.md` §9,
//! "Readers during an append"). Not part of the API: no semver promise.
//!
//! Compiled only with the `test-hooks` feature, which the crate's own tests
//! enable (through its dev-dependency on itself): a build without it has no
//! hook, no lock, and calls at the points that compile to nothing.

#[cfg(feature = "test-hooks")]
use std::sync::RwLock;

/// A point where an append or an open calls the hook.
#[cfg_attr(feature = "test-hooks", derive(Debug, Clone, Copy, PartialEq, Eq))]
pub enum Point {
    /// An append wrote its new batches (over the old footer) and is about to
    /// write its footer; the writer lock is held.
    AppendBatchesWritten,
    /// An append wrote its new footer header and index, not yet its trailer;
    /// the writer lock is held.
    AppendFooterWritten,
    /// An append wrote its trailer and has not yet released the lock.
    AppendTrailerWritten,
    /// An open found no valid footer and is about to check the writer lock.
    OpenFooterFailed,
}

#[cfg(feature = "test-hooks")]
type Hook = Box<dyn Fn(Point) + Send + Sync>;

#[cfg(feature = "test-hooks")]
static HOOK: RwLock<Option<Hook>> = RwLock::new(None);

/// Registers `hook` (or none), called at every [`Point`] in this process.
///
/// ```
/// lodt::format::hooks::set(Some(Box::new(|_point| {})));
/// lodt::format::hooks::set(None);
/// ```
#[cfg(feature = "test-hooks")]
pub fn set(hook: Option<Hook>) {
    *HOOK.write().unwrap_or_else(|e| e.into_inner()) = hook;
}

/// Calls the hook, if one is registered, at `point`.
#[cfg(feature = "test-hooks")]
pub(crate) fn at(point: Point) {
    if let Some(hook) = HOOK.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        hook(point);
    }
}

/// Without the `test-hooks` feature: nothing to call.
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub(crate) fn at(_point: Point) {}

#[cfg(feature = "test-hooks")]
thread_local! {
    static DECODES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many compressed batches this thread has decoded (format 2.0
/// batches whose buffers were decompressed), since the thread started: a
/// test reads, then compares the counts before and after.
///
/// ```
/// let before = lodt::format::hooks::decodes();
/// assert_eq!(lodt::format::hooks::decodes(), before);
/// ```
#[cfg(feature = "test-hooks")]
pub fn decodes() -> u64 {
    DECODES.with(|d| d.get())
}

/// Counts one decode of a compressed batch on this thread.
#[cfg(feature = "test-hooks")]
pub(crate) fn decoded() {
    DECODES.with(|d| d.set(d.get().wrapping_add(1)));
}

/// Without the `test-hooks` feature: nothing to count.
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub(crate) fn decoded() {}
