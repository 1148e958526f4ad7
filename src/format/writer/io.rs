//! The writer's I/O thread ([`IoThread`]): writes a new file's runs (taken
//! out of the spool, `format/aligned.rs`) while the writing thread encodes
//! and checksums the batches after them.
//!
//! Why: a batch's system call (copying it into the page cache) takes most
//! of the time of a write, and the writing thread's own work (the head, the
//! checksums of small buffers, waiting for the checksum thread, allocating)
//! came on top of it, about 8 us per batch of 0.5 MiB. Here the two overlap;
//! and the runs go out in the calls of a stream writer (1 MiB at 1 MiB file
//! offsets, [`RUN`](super::super::aligned::RUN)) instead of one per batch.

use super::super::aligned::Run;
use std::collections::VecDeque;
use std::fs::File;
use std::io::ErrorKind;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// The most bytes queued for the thread before the writing thread waits for
/// it (held by reference: the batches' own buffers, kept alive until
/// written). The thread wakes a waiting writing thread once it is down to
/// half: one wake-up per 4 MiB written, not one per run.
pub(super) const QUEUE: u64 = 8 << 20;

#[derive(Default)]
struct State {
    runs: VecDeque<Run>,
    /// Bytes of the runs queued and of the run being written.
    queued: u64,
    /// The first failure; every run after it is dropped unwritten.
    error: Option<(ErrorKind, String)>,
    closed: bool,
    /// The I/O thread sleeps until a run comes.
    idle: bool,
    /// The writing thread sleeps until the queue is down to half, or empty.
    waiting: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Where the I/O thread sleeps.
    io: Condvar,
    /// Where the writing thread sleeps.
    writer: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A thread that writes runs to a file, in order, as they are queued.
///
/// A failed write is reported by the next [`IoThread::send`] or
/// [`IoThread::wait`]; the runs after it are not written.
pub(super) struct IoThread {
    shared: Arc<Shared>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl IoThread {
    /// Starts the thread, which writes to `file` at its current offset
    /// (`file` shares it with the writer's own descriptor: a clone of it).
    pub(super) fn start(file: File) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let theirs = shared.clone();
        let handle = std::thread::Builder::new()
            .name("lodt-io".into())
            .spawn(move || serve(file, &theirs))?;
        Ok(IoThread {
            shared,
            handle: Some(handle),
        })
    }

    /// Queues `run`; waits while more than [`QUEUE`] bytes are queued.
    pub(super) fn send(&self, run: Run) -> std::io::Result<()> {
        let mut st = self.shared.lock();
        failed(&st)?;
        st.queued += run.len();
        st.runs.push_back(run);
        if st.idle {
            self.shared.io.notify_one();
        }
        while st.queued > QUEUE && st.error.is_none() {
            st.waiting = true;
            st = self.wait_once(st);
        }
        failed(&st)
    }

    /// Waits until every queued run is written.
    pub(super) fn wait(&self) -> std::io::Result<()> {
        let mut st = self.shared.lock();
        while st.queued > 0 && st.error.is_none() {
            st = self.wait_once(st);
        }
        failed(&st)
    }

    fn wait_once<'a>(&'a self, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        st.waiting = true;
        let mut st = self
            .shared
            .writer
            .wait(st)
            .unwrap_or_else(|e| e.into_inner());
        st.waiting = false;
        st
    }
}

/// The failure recorded, if any.
fn failed(st: &State) -> std::io::Result<()> {
    match &st.error {
        Some((kind, message)) => Err(std::io::Error::new(*kind, message.clone())),
        None => Ok(()),
    }
}

/// The I/O thread's loop: writes the runs in order until closed.
fn serve(mut file: File, shared: &Shared) {
    let mut st = shared.lock();
    loop {
        let Some(run) = st.runs.pop_front() else {
            if st.closed {
                return;
            }
            st.idle = true;
            st = shared.io.wait(st).unwrap_or_else(|e| e.into_inner());
            st.idle = false;
            continue;
        };
        drop(st);
        let written = run.write_to(&mut file);
        let len = run.len();
        // The run's buffers go before the writer hears it is written.
        drop(run);
        st = shared.lock();
        st.queued -= len;
        if let Err(e) = written {
            st.error = Some((e.kind(), e.to_string()));
            st.runs.clear();
            st.queued = 0;
        }
        if st.waiting && (st.queued <= QUEUE / 2 || st.error.is_some()) {
            shared.writer.notify_one();
        }
    }
}

impl Drop for IoThread {
    /// Drops the runs not written yet, and ends the thread.
    fn drop(&mut self) {
        {
            let mut st = self.shared.lock();
            st.closed = true;
            st.runs.clear();
            self.shared.io.notify_one();
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::aligned::{RUN, Spool};
    use super::*;
    use crate::buffer::Buffer;
    use std::io::Read;

    /// Queues `pieces` in a spool starting at offset 0 and sends it to an
    /// I/O thread in runs cut at `RUN`; returns the file's bytes.
    fn through_thread(pieces: &[Vec<u8>]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = File::create(&path).unwrap();
        let io = IoThread::start(file.try_clone().unwrap()).unwrap();
        let mut spool = Spool::new(0);
        for p in pieces {
            spool.share(&Buffer::from_vec(p.clone()));
            let end = spool.end();
            io.send(spool.take_run(end - end % RUN)).unwrap();
        }
        let end = spool.end();
        io.send(spool.take_run(end)).unwrap();
        io.wait().unwrap();
        drop(io);
        let mut bytes = Vec::new();
        File::open(&path).unwrap().read_to_end(&mut bytes).unwrap();
        bytes
    }

    #[test]
    fn every_byte_arrives_in_order_past_the_queue_limit() {
        // Small pieces and large ones, 20 MiB in all: more than the queue
        // holds, so the sender waits for the thread.
        let mut pieces = Vec::new();
        let mut expected = Vec::new();
        for i in 0..60usize {
            let len = [100, 527_000, 3, 16_000, 1 << 20][i % 5] + i;
            let p: Vec<u8> = (0..len).map(|k| (k * 31 + i * 7) as u8).collect();
            expected.extend_from_slice(&p);
            pieces.push(p);
        }
        assert!(expected.len() as u64 > 2 * QUEUE);
        assert!(through_thread(&pieces) == expected);
    }

    #[test]
    fn a_failed_write_is_reported_and_nothing_after_it_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"x").unwrap();
        // Read-only: every write fails.
        let io = IoThread::start(File::open(&path).unwrap()).unwrap();
        let mut spool = Spool::new(0);
        spool.share(&Buffer::from_vec(vec![5u8; 3 << 20]));
        let err = io.send(spool.take_run(RUN)).and_then(|()| io.wait());
        let err = err.unwrap_err();
        // Later runs are refused with the same error.
        let again = io.send(spool.take_run(2 * RUN)).unwrap_err();
        assert_eq!(again.to_string(), err.to_string());
        assert_eq!(std::fs::read(&path).unwrap(), b"x");
    }
}
