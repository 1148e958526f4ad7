//! The writer's checksums: which buffers are checksummed off the writing
//! thread ([`CrcPlan`]), and the helper thread that does it ([`CrcThread`]).

use super::super::layout::crc32;
use crate::buffer::Buffer;
use std::sync::atomic::{AtomicI32, AtomicU8, AtomicU32, AtomicUsize, Ordering};
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
    /// Off the writing thread from 8 KiB (below, sending the work costs
    /// about what computing it does; the thread is usually awake, see
    /// [`serve`]), in 128 KiB parts (so that the writing thread, if the
    /// checksum thread starts late, takes the parts it has not reached,
    /// rather than the whole buffer); on the writing thread alone on a
    /// machine of one core.
    pub(super) fn default_for_machine() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        CrcPlan {
            offload_min: if cores > 1 { 8 << 10 } else { usize::MAX },
            part: 128 << 10,
        }
    }
}

/// The state of a [`CrcJob`].
const PENDING: u8 = 0;
const TAKEN: u8 = 1;
pub(super) const DONE: u8 = 2;

/// How long the writing thread spins on a part the checksum thread is
/// computing before it sleeps (a part of [`CrcPlan::part`] bytes takes a few
/// microseconds; sleeping and being woken costs two system calls and the
/// scheduler's latency).
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// Where a thread waiting for a part sleeps. The thread that finishes a part
/// wakes it only if a waiter is registered (`waiters`): the usual case, a
/// part done before anyone waits for it, costs no system call.
#[derive(Default)]
pub(super) struct Done {
    lock: Mutex<()>,
    cond: Condvar,
    pub(super) waiters: AtomicUsize,
    /// The core the writing thread last submitted work from (see
    /// [`serve`]), or -1.
    writer_core: AtomicI32,
}

/// The checksum of one part of a buffer, computed by whichever of the
/// checksum thread and the writing thread takes it first.
pub(super) struct CrcJob {
    pub(super) bytes: Buffer,
    pub(super) state: AtomicU8,
    pub(super) crc: AtomicU32,
}

impl CrcJob {
    /// Takes the job if nobody has; then computes and stores its checksum.
    fn run(&self, done: &Done) -> bool {
        if !self.take() {
            return false;
        }
        self.finish(crc32(self.bytes.as_slice()), done);
        true
    }

    /// Takes the job: true if nobody had.
    pub(super) fn take(&self) -> bool {
        self.state
            .compare_exchange(PENDING, TAKEN, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Stores the checksum of a taken job, and wakes the waiters if any.
    pub(super) fn finish(&self, crc: u32, done: &Done) {
        self.crc.store(crc, Ordering::Relaxed);
        // Either a waiter registered before this store sees DONE when it
        // checks after registering, or this load sees the waiter (both
        // SeqCst): no wake-up is missed.
        self.state.store(DONE, Ordering::SeqCst);
        if done.waiters.load(Ordering::SeqCst) > 0 {
            // Under the lock, so that a waiter between its check and its
            // sleep cannot miss the notification.
            let _guard = done.lock.lock().unwrap_or_else(|e| e.into_inner());
            done.cond.notify_all();
        }
    }

    /// Waits until the job is done: spins for [`SPIN`], then sleeps.
    pub(super) fn wait(&self, done: &Done) {
        let start = std::time::Instant::now();
        let mut spins = 0u32;
        while self.state.load(Ordering::Acquire) != DONE {
            std::hint::spin_loop();
            spins += 1;
            if spins.is_multiple_of(64) && start.elapsed() > SPIN {
                let mut guard = done.lock.lock().unwrap_or_else(|e| e.into_inner());
                done.waiters.fetch_add(1, Ordering::SeqCst);
                while self.state.load(Ordering::SeqCst) != DONE {
                    guard = done.cond.wait(guard).unwrap_or_else(|e| e.into_inner());
                }
                done.waiters.fetch_sub(1, Ordering::SeqCst);
                return;
            }
        }
    }
}

/// One buffer's parts, in the message that holds those of its batch.
pub(super) struct Parts {
    all: Arc<[CrcJob]>,
    range: std::ops::Range<usize>,
}

impl Parts {
    /// The buffer's parts, in order.
    pub(super) fn jobs(&self) -> &[CrcJob] {
        self.all.get(self.range.clone()).unwrap_or(&[])
    }
}

/// A thread that checksums large buffers while the writer writes them.
///
/// Two threads reading the same bytes compete for memory bandwidth, but a
/// buffer is checksummed about four times faster than it is copied into the
/// page cache, so the checksum hides behind the write. The writing thread
/// never waits for a part the thread has not started: it takes it (the
/// thread takes a buffer's parts from the first, the writing thread from the
/// last, so a thread woken late still shares the work).
pub(super) struct CrcThread {
    /// Each message is the parts of a batch's buffers, in order.
    pub(super) jobs: Option<mpsc::Sender<Arc<[CrcJob]>>>,
    pub(super) done: Arc<Done>,
    pub(super) handle: Option<std::thread::JoinHandle<()>>,
    /// The process the thread runs in: a child forked from it has the
    /// writer but not the thread, and computes every checksum itself.
    pub(super) owner: u32,
}

impl CrcThread {
    /// Starts the thread (`None` if the OS refuses: checksums are then
    /// computed on the writing thread).
    pub(super) fn start() -> Option<Self> {
        let (tx, rx) = mpsc::channel::<Arc<[CrcJob]>>();
        let done = Arc::new(Done::default());
        let theirs = done.clone();
        let handle = std::thread::Builder::new()
            .name("lodt-crc".into())
            .spawn(move || serve(&rx, &theirs))
            .ok()?;
        Some(CrcThread {
            jobs: Some(tx),
            done,
            handle: Some(handle),
            owner: std::process::id(),
        })
    }

    /// Sends each of `buffers` in parts of `part` bytes, all in one message
    /// (one wake-up at most for a batch); returns each buffer's parts.
    pub(super) fn submit(&self, buffers: &[&Buffer], part: usize) -> Vec<Parts> {
        let mut jobs = Vec::new();
        let mut ranges = Vec::with_capacity(buffers.len());
        for bytes in buffers {
            let len = bytes.len();
            let first = jobs.len();
            let mut start = 0;
            loop {
                let end = len.min(start + part);
                // In range: start <= end <= len.
                let window = bytes.slice(start..end).unwrap_or_else(|_| (*bytes).clone());
                jobs.push(CrcJob {
                    bytes: window,
                    state: AtomicU8::new(PENDING),
                    crc: AtomicU32::new(0),
                });
                start = end;
                if start >= len {
                    break;
                }
            }
            ranges.push(first..jobs.len());
        }
        let all: Arc<[CrcJob]> = jobs.into();
        self.done.writer_core.store(core(), Ordering::Relaxed);
        if let Some(tx) = &self.jobs
            && self.owner == std::process::id()
        {
            // A thread that is gone (or in the process this one was forked
            // from) leaves its jobs pending: collect computes them.
            let _ = tx.send(all.clone());
        }
        ranges
            .into_iter()
            .map(|range| Parts {
                all: all.clone(),
                range,
            })
            .collect()
    }

    /// The checksum of the buffer whose parts are `jobs`: the parts' checksums
    /// combined, computing here any part not taken yet (from the last),
    /// waiting for those being computed.
    pub(super) fn collect(&self, jobs: &[CrcJob]) -> u32 {
        for job in jobs.iter().rev() {
            job.run(&self.done);
        }
        let mut h = crc32fast::Hasher::new();
        for job in jobs {
            job.wait(&self.done);
            let part = crc32fast::Hasher::new_with_initial_len(
                job.crc.load(Ordering::Relaxed),
                job.bytes.len() as u64,
            );
            h.combine(&part);
        }
        h.finalize()
    }
}

/// While work came in the last [`IDLE`], the checksum thread looks for more
/// every [`NAP`] instead of sleeping until it is woken: waking a sleeping
/// thread is a system call (and, when its core is idle, an interrupt to that
/// core) that the writing thread would pay on every batch, about 10 us on a
/// virtual machine of two cores, while a batch of 0.5 MiB takes about 100 us
/// to write. After `IDLE` without work it sleeps until woken.
///
/// On busy cores a nap ends late (the thread waits for a core while work
/// waits for it, where a thread woken by the writer would run sooner), and a
/// thread waking every few microseconds takes time from the others: after a
/// nap that lasted more than [`LATE`], or one that ended on the core the
/// writing thread last submitted from, the thread sleeps until woken for
/// the next [`CALM`] buffers. (A 30 us nap takes 55 us at the median on a
/// two-core virtual machine, 75 us at the 99th percentile: `LATE` is well
/// above what an idle core gives, and well below the milliseconds a busy one
/// can take.)
const NAP: std::time::Duration = std::time::Duration::from_micros(30);
pub(super) const IDLE: std::time::Duration = std::time::Duration::from_micros(250);
const LATE: std::time::Duration = std::time::Duration::from_micros(250);
const CALM: u32 = 64;

/// The checksum thread's loop: runs the parts it receives, in order, until
/// the channel closes.
fn serve(rx: &mpsc::Receiver<Arc<[CrcJob]>>, done: &Done) {
    precise_naps();
    let mut last = std::time::Instant::now();
    // Buffers left to take sleeping until woken, after a late nap.
    let mut calm = 0u32;
    loop {
        let parts = match rx.try_recv() {
            Ok(parts) => parts,
            Err(mpsc::TryRecvError::Disconnected) => return,
            Err(mpsc::TryRecvError::Empty) if calm == 0 && last.elapsed() < IDLE => {
                let nap = std::time::Instant::now();
                std::thread::sleep(NAP);
                let mine = core();
                if nap.elapsed() > LATE
                    || (mine >= 0 && mine == done.writer_core.load(Ordering::Relaxed))
                {
                    calm = CALM;
                }
                continue;
            }
            Err(mpsc::TryRecvError::Empty) => match rx.recv() {
                Ok(parts) => parts,
                Err(_) => return,
            },
        };
        for job in parts.iter() {
            job.run(done);
        }
        last = std::time::Instant::now();
        calm = calm.saturating_sub(1);
    }
}

/// Makes this thread's short sleeps last what they ask: Linux lets a sleep
/// of a normal thread end up to 50 us late by default (its timer slack).
#[cfg(target_os = "linux")]
fn precise_naps() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer (nanoseconds) and changes
    // only this thread's timer slack; no memory is passed.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong);
    }
}

#[cfg(not(target_os = "linux"))]
fn precise_naps() {}

/// The core this thread runs on, or -1 if unknown.
#[cfg(target_os = "linux")]
fn core() -> i32 {
    // SAFETY: sched_getcpu takes nothing and returns a number.
    unsafe { libc::sched_getcpu() }
}

#[cfg(not(target_os = "linux"))]
fn core() -> i32 {
    -1
}

impl Drop for CrcThread {
    fn drop(&mut self) {
        if self.owner != std::process::id() {
            // Forked: the thread is not in this process and cannot be
            // joined; its channel and handle are left as they are.
            std::mem::forget(self.jobs.take());
            std::mem::forget(self.handle.take());
            return;
        }
        // Closing the channel ends the thread's loop.
        self.jobs = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
