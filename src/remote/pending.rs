//! The ranges of one object being fetched ahead of their reads
//! ([`RangeSource::will_gather`](crate::format::RangeSource::will_gather)):
//! each a request in flight (or answered) whose bytes a later read takes
//! instead of asking again.
//!
//! Bytes fetched ahead are held in memory until read, so they are bounded:
//! the loader asks for at most its read-ahead budget, and the process holds
//! at most [`MAX_PENDING_BYTES`] of them whoever asks (a hint beyond it is
//! dropped). An entry that is not read within [`STALE`] is dropped too.
//! An entry belongs to the process that made it: a child forked from it
//! never waits for a request of its parent's runtime.

use bytes::Bytes;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The most bytes fetched ahead and not yet read, in one process.
pub(crate) const MAX_PENDING_BYTES: u64 = 1 << 30;

/// How long fetched bytes wait to be read before they are dropped.
pub(crate) const STALE: Duration = Duration::from_secs(120);

/// How long a read waits for a request fetched ahead before it asks again
/// itself.
pub(crate) const WAIT: Duration = Duration::from_secs(300);

/// The bytes fetched ahead and not yet read, in this process.
static PENDING_BYTES: AtomicU64 = AtomicU64::new(0);

/// The answer to one request fetched ahead, once it has come.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    value: Mutex<Option<Result<Bytes, String>>>,
    ready: Condvar,
}

impl Slot {
    /// Stores the answer and wakes the readers waiting for it.
    pub(crate) fn set(&self, value: Result<Bytes, String>) {
        *self.value.lock().unwrap_or_else(PoisonError::into_inner) = Some(value);
        self.ready.notify_all();
    }

    /// The answer, waiting at most `timeout` for it (`None` then).
    pub(crate) fn wait(&self, timeout: Duration) -> Option<Result<Bytes, String>> {
        let guard = self.value.lock().unwrap_or_else(PoisonError::into_inner);
        let (guard, _) = self
            .ready
            .wait_timeout_while(guard, timeout, |v| v.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        guard.clone()
    }
}

#[derive(Debug)]
struct Entry {
    range: Range<u64>,
    /// Bytes of the range not read yet: the entry goes when none are left.
    unread: u64,
    slot: Arc<Slot>,
    pid: u32,
    made: Instant,
}

impl Drop for Entry {
    fn drop(&mut self) {
        PENDING_BYTES.fetch_sub(self.range.end - self.range.start, Ordering::Relaxed);
    }
}

/// The requests fetched ahead for one object.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    entries: Mutex<Vec<Entry>>,
    /// The last ranges served from requests fetched ahead (at most
    /// [`SERVED`]): a read found damaged asks again, as after a cache hit.
    served: Mutex<std::collections::VecDeque<Range<u64>>>,
}

/// How many served ranges [`Pending`] remembers.
const SERVED: usize = 256;

impl Pending {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let pid = std::process::id();
        let now = Instant::now();
        entries.retain(|e| e.pid == pid && now.duration_since(e.made) < STALE);
        entries
    }

    /// Whether any byte of `r` is being fetched ahead.
    pub(crate) fn overlaps(&self, r: &Range<u64>) -> bool {
        self.lock()
            .iter()
            .any(|e| e.range.start < r.end && r.start < e.range.end)
    }

    /// Records a request for `range` whose answer `slot` will hold, of which
    /// `wanted` bytes are to be read (the rest are gaps between them):
    /// `false` (nothing recorded, nothing to fetch) if the process already
    /// holds [`MAX_PENDING_BYTES`] fetched ahead.
    pub(crate) fn insert(&self, range: Range<u64>, wanted: u64, slot: Arc<Slot>) -> bool {
        let n = range.end - range.start;
        let mut entries = self.lock();
        let held = PENDING_BYTES.fetch_add(n, Ordering::Relaxed);
        let entry = Entry {
            range,
            unread: wanted.min(n),
            slot,
            pid: std::process::id(),
            made: Instant::now(),
        };
        if held.saturating_add(n) > MAX_PENDING_BYTES {
            drop(entry); // gives its bytes back
            return false;
        }
        entries.push(entry);
        true
    }

    /// The request covering all of `r` and where its range starts, if one
    /// is; its bytes count as read (the entry goes once all are).
    pub(crate) fn take(&self, r: &Range<u64>) -> Option<(Arc<Slot>, u64)> {
        let mut entries = self.lock();
        let k = entries
            .iter()
            .position(|e| e.range.start <= r.start && r.end <= e.range.end)?;
        let e = entries.get_mut(k)?;
        let found = (e.slot.clone(), e.range.start);
        e.unread = e.unread.saturating_sub(r.end - r.start);
        if e.unread == 0 {
            entries.swap_remove(k);
        }
        drop(entries);
        let mut served = self.served.lock().unwrap_or_else(PoisonError::into_inner);
        if served.len() >= SERVED {
            served.pop_front();
        }
        served.push_back(r.clone());
        Some(found)
    }

    /// Whether `r` was served by a request fetched ahead (forgotten then).
    pub(crate) fn served_and_forget(&self, r: &Range<u64>) -> bool {
        let mut served = self.served.lock().unwrap_or_else(PoisonError::into_inner);
        let before = served.len();
        served.retain(|s| !(s.start < r.end && r.start < s.end));
        served.len() != before
    }

    /// Forgets the request covering `r` (its answer was an error or damaged).
    pub(crate) fn forget(&self, r: &Range<u64>) {
        self.lock()
            .retain(|e| !(e.range.start <= r.start && r.end <= e.range.end));
    }
}

/// The bytes fetched ahead and not yet read, in this process (tests).
#[cfg(test)]
pub(crate) fn pending_bytes() -> u64 {
    PENDING_BYTES.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_serves_its_reads_and_goes_when_all_are_read() {
        let p = Pending::default();
        let slot = Arc::new(Slot::default());
        assert!(p.insert(100..200, 100, slot.clone()));
        assert!(p.overlaps(&(150..250)));
        assert!(!p.overlaps(&(200..300)));
        slot.set(Ok(Bytes::from(vec![7u8; 100])));
        let (s, start) = p.take(&(100..150)).expect("covered");
        assert_eq!(start, 100);
        assert_eq!(s.wait(WAIT).expect("answered").expect("bytes").len(), 100);
        assert!(p.take(&(150..250)).is_none(), "not covered");
        assert!(p.take(&(150..200)).is_some());
        assert!(!p.overlaps(&(100..200)), "all read: gone");
    }

    #[test]
    fn a_wait_gives_up_and_forget_drops() {
        let p = Pending::default();
        let slot = Arc::new(Slot::default());
        assert!(p.insert(0..10, 10, slot.clone()));
        assert!(slot.wait(Duration::from_millis(10)).is_none());
        p.forget(&(2..4));
        assert!(p.take(&(0..10)).is_none());
    }

    #[test]
    fn the_process_budget_is_kept() {
        let p = Pending::default();
        let slot = Arc::new(Slot::default());
        assert!(!p.insert(0..MAX_PENDING_BYTES + 1, 1, slot));
        assert!(!p.overlaps(&(0..1)));
        assert!(pending_bytes() < MAX_PENDING_BYTES);
    }
}
