//! The writer's checksums: which buffers are checksummed off the writing
//! thread ([`CrcPlan`]), and the helper thread that does it ([`CrcThread`]).

use super::super::layout::crc32;
use crate::buffer::Buffer;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};

/// How the writer computes checksums: buffers of at least `offload_min`
/// bytes (that live in a shared [`Buffer`]) are checksummed on a helper
/// thread, in parts of `part` bytes, while the writing thread writes them.
#[derive(Debug, Clone, Copy)]
pub(super) struct CrcPlan {
    pub(super) offload_min: usize,
    pub(super) part: usize,
}

impl CrcPlan {
    /// Off the writing thread from 128 KiB (below, sending the work costs
    /// about what computing it does), in 1 MiB parts; on the writing thread
    /// alone on a machine of one core.
    pub(super) fn default_for_machine() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        CrcPlan {
            offload_min: if cores > 1 { 128 << 10 } else { usize::MAX },
            part: 1 << 20,
        }
    }
}

/// The state of a [`CrcJob`].
const PENDING: u8 = 0;
const TAKEN: u8 = 1;
const DONE: u8 = 2;

/// The checksum of one part of a buffer, computed by whichever of the
/// checksum thread and the writing thread takes it first.
pub(super) struct CrcJob {
    pub(super) bytes: Buffer,
    pub(super) state: AtomicU8,
    pub(super) crc: AtomicU32,
}

impl CrcJob {
    /// Takes the job if nobody has; then computes and stores its checksum.
    fn run(&self, done: &(Mutex<()>, Condvar)) -> bool {
        if self
            .state
            .compare_exchange(PENDING, TAKEN, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        self.crc
            .store(crc32(self.bytes.as_slice()), Ordering::Relaxed);
        // Under the lock, so that a waiter cannot miss the notification.
        let _guard = done.0.lock().unwrap_or_else(|e| e.into_inner());
        self.state.store(DONE, Ordering::Release);
        done.1.notify_all();
        true
    }
}

/// A thread that checksums large buffers while the writer writes them.
///
/// Two threads reading the same bytes compete for memory bandwidth, but a
/// buffer is checksummed about four times faster than it is copied into the
/// page cache, so the checksum hides behind the write. The writing thread
/// never waits for a part the thread has not started: it takes it.
pub(super) struct CrcThread {
    pub(super) jobs: Option<mpsc::Sender<Arc<CrcJob>>>,
    pub(super) done: Arc<(Mutex<()>, Condvar)>,
    pub(super) handle: Option<std::thread::JoinHandle<()>>,
}

impl CrcThread {
    /// Starts the thread (`None` if the OS refuses: checksums are then
    /// computed on the writing thread).
    pub(super) fn start() -> Option<Self> {
        let (tx, rx) = mpsc::channel::<Arc<CrcJob>>();
        let done = Arc::new((Mutex::new(()), Condvar::new()));
        let theirs = done.clone();
        let handle = std::thread::Builder::new()
            .name("lodt-crc".into())
            .spawn(move || {
                for job in rx {
                    job.run(&theirs);
                }
            })
            .ok()?;
        Some(CrcThread {
            jobs: Some(tx),
            done,
            handle: Some(handle),
        })
    }

    /// Sends `bytes` in parts of `part` bytes; returns the jobs, in order.
    pub(super) fn submit(&self, bytes: &Buffer, part: usize) -> Vec<Arc<CrcJob>> {
        let len = bytes.len();
        let mut jobs = Vec::with_capacity(len.div_ceil(part).max(1));
        let mut start = 0;
        loop {
            let end = len.min(start + part);
            // In range: start <= end <= len.
            let window = bytes.slice(start..end).unwrap_or_else(|_| bytes.clone());
            let job = Arc::new(CrcJob {
                bytes: window,
                state: AtomicU8::new(PENDING),
                crc: AtomicU32::new(0),
            });
            if let Some(tx) = &self.jobs {
                // A thread that is gone leaves its jobs pending: collect
                // computes them.
                let _ = tx.send(job.clone());
            }
            jobs.push(job);
            start = end;
            if start >= len {
                return jobs;
            }
        }
    }

    /// The checksum of the buffer whose parts are `jobs`: the parts' checksums
    /// combined, computing here any part not taken yet, waiting for those
    /// being computed.
    pub(super) fn collect(&self, jobs: &[Arc<CrcJob>]) -> u32 {
        for job in jobs.iter().rev() {
            job.run(&self.done);
        }
        let mut h = crc32fast::Hasher::new();
        for job in jobs {
            // Done (the usual case): no lock, which the thread would wait for.
            if job.state.load(Ordering::Acquire) != DONE {
                let mut guard = self.done.0.lock().unwrap_or_else(|e| e.into_inner());
                while job.state.load(Ordering::Acquire) != DONE {
                    guard = self.done.1.wait(guard).unwrap_or_else(|e| e.into_inner());
                }
            }
            let part = crc32fast::Hasher::new_with_initial_len(
                job.crc.load(Ordering::Relaxed),
                job.bytes.len() as u64,
            );
            h.combine(&part);
        }
        h.finalize()
    }
}

impl Drop for CrcThread {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop.
        self.jobs = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
