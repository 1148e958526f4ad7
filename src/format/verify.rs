//! [`verify`]: checks every checksum and rule of a `.lodt` file, on every
//! core.
//!
//! The parallel check splits the file into pieces that one helper thread
//! per core claims in file order from one counter; nobody waits for anyone
//! to claim. A piece is either a run of whole batches smaller than
//! [`PIECE`] (about [`PIECE`] bytes of them: one claim, and no state shared
//! per batch), each checked as the serial check does, or [`PIECE`] bytes of
//! a larger batch. A worker checks the checksum of each buffer wholly in its
//! piece itself. The worker that checks a large batch's last piece decodes
//! it (2.0, compressed buffers) and drops its bytes and its parsed metadata
//! (which the file does not keep: freeing every batch's metadata when the
//! file is dropped would be a serial tail). The calling thread checks
//! nothing while the helpers run (a thread that keeps its core busy while
//! it starts another leaves the new one queued behind it on its core until
//! the scheduler moves it, milliseconds on a small VM): it waits, woken by
//! a helper after a failure and when a helper ends, and every
//! [`PROGRESS_EVERY`], and takes the results in file order: it combines
//! the checksums of buffers split across pieces, reports progress, and
//! stops at the first failure in file order, the one a serial check finds.
//! No piece after a failure a helper found is claimed.

use super::LodtFile;
use super::batch_meta::{BatchMeta, buffer_location};
use super::error::{ErrorSite, FilePart, FormatError, Result};
use super::layout::{check_zero, crc32};
use super::reader::MetaRef;
use super::section::{self, Section};
use smallvec::SmallVec;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// What [`verify`] checked.
///
/// ```
/// let r = lodt::format::VerifyReport::default();
/// assert_eq!(r.batches, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// The number of batches.
    pub batches: usize,
    /// The number of tensors, over all batches.
    pub tensors: usize,
    /// The file's size in bytes (every byte was checked).
    pub file_bytes: u64,
    /// The bytes of tensor bodies.
    pub body_bytes: u64,
}

/// Opens (maps) the file at `path` and checks every byte of it: see
/// [`LodtFile::verify`].
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("v.lodt");
/// let t = lodt::LodTensor::from_vec(vec![1u8, 2, 3], vec![3], Default::default())?;
/// lodt::format::save_tensor(&path, "t", &t)?;
/// assert_eq!(lodt::format::verify(&path)?.body_bytes, 3);
/// let mut bytes = std::fs::read(&path)?;
/// let n = bytes.len();
/// bytes[n / 2] ^= 0x10;
/// std::fs::write(&path, &bytes)?;
/// assert!(lodt::format::verify(&path).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn verify(path: impl AsRef<Path>) -> Result<VerifyReport> {
    LodtFile::open(path)?.verify()
}

/// The largest piece of a batch one thread checks: larger batches are split,
/// so that one large batch (or buffer) is checked on every core too.
const PIECE: usize = 4 << 20;

/// The number of cores this process may use
/// ([`std::thread::available_parallelism`], 1 if unknown), asked once per
/// process: asking reads the cgroup's files each time (0.07–0.12 ms here, the
/// time a core takes to check some 3 MB).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// How often the calling thread, waiting for the helpers, wakes to report
/// progress.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// Files smaller than this are checked on the calling thread alone (starting
/// threads would cost more than it saves).
const PARALLEL_MIN: u64 = 8 << 20;

impl LodtFile {
    /// Checks every byte of the file: the header, footer and index (already
    /// checked by opening), and for every batch its header, metadata, checksum
    /// table, LoD, the checksum of every buffer (bodies included), that every
    /// padding byte is zero and that each tensor follows the LoD tensor rules.
    /// Stops at the first failure in file order, whose error names the part,
    /// batch and tensor.
    ///
    /// Runs of small batches, and the pieces of large batches, are checked on
    /// every core ([`std::thread::available_parallelism`], asked once per
    /// process); the first failure reported
    /// is the one a check on one thread finds. The source is told that the
    /// file is read in order ([`Pattern::Sequential`](super::Pattern)).
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1.0f32; 4], vec![4], Default::default())?;
    /// let bytes = lodt::format::to_bytes([&lodt::Batch::try_from_tensors([("t", t)])?], Default::default())?;
    /// let report = lodt::format::LodtFile::from_bytes(&bytes)?.verify()?;
    /// assert_eq!((report.batches, report.tensors, report.body_bytes), (1, 1, 16));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn verify(&self) -> Result<VerifyReport> {
        self.verify_with_progress(&mut |_, _| {})
    }

    /// [`LodtFile::verify`], calling `progress(bytes_done, bytes_total)` as
    /// the check advances (from the calling thread, with `bytes_done` never
    /// decreasing).
    ///
    /// ```
    /// let bytes = lodt::format::to_bytes([&lodt::Batch::new()], Default::default())?;
    /// let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// let mut last = 0;
    /// file.verify_with_progress(&mut |done, _| last = done)?;
    /// assert_eq!(last, bytes.len() as u64);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn verify_with_progress(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport> {
        let threads = if self.file_size() < PARALLEL_MIN {
            1
        } else {
            cores()
        };
        self.verify_on(threads, PIECE, progress)
    }

    /// [`LodtFile::verify_with_progress`] on `threads` worker threads (1: on
    /// the calling thread alone), in pieces of at most `piece` bytes.
    pub(crate) fn verify_on(
        &self,
        threads: usize,
        piece: usize,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<VerifyReport> {
        let mut report = VerifyReport {
            batches: self.num_batches(),
            file_bytes: self.file_size(),
            ..VerifyReport::default()
        };
        if threads <= 1 {
            self.verify_serial(&mut report, progress)?;
        } else {
            self.verify_parallel(threads, piece.max(1), &mut report, progress)?;
        }
        progress(report.file_bytes, report.file_bytes);
        Ok(report)
    }

    /// The check on the calling thread: batch after batch, buffer after
    /// buffer, then (a 2.0 batch with compressed buffers) the batch decoded.
    fn verify_serial(
        &self,
        report: &mut VerifyReport,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<()> {
        let total = self.file_size();
        for k in 0..self.num_batches() {
            let (tensors, body_bytes) = self.verify_whole_batch(k, &mut |done| {
                progress(done, total);
            })?;
            report.tensors += tensors;
            report.body_bytes += body_bytes;
        }
        Ok(())
    }

    /// Checks batch `k` whole, as [`LodtFile::verify`] does: parses it,
    /// checks every buffer and gap in order, then decodes it (2.0,
    /// compressed buffers); its number of tensors and body bytes.
    /// `progress` gets the file offset checked up to, after each buffer.
    fn verify_whole_batch(&self, k: usize, progress: &mut dyn FnMut(u64)) -> Result<(usize, u64)> {
        let offset = self.batch_range(k)?.start;
        let (meta, section) = self.verify_batch(k)?;
        let mut done = offset + meta.data_start as u64;
        progress(done);
        section::check_whole(section.bytes(), &meta, offset, &mut |n| {
            done += n;
            progress(done);
        })?;
        Ok((meta.tensors.len(), meta.body_bytes()))
    }

    /// The check on `threads` helper threads (the calling thread checks
    /// too if the OS starts fewer), whose results the calling thread takes
    /// in file order.
    fn verify_parallel(
        &self,
        threads: usize,
        piece: usize,
        report: &mut VerifyReport,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<()> {
        let pieces = self.pieces(piece);
        let batches = self.num_batches();
        let mut left = vec![0usize; batches];
        for p in &pieces {
            if let Job::Part(p) = p
                && let Some(n) = left.get_mut(p.k)
            {
                *n += 1;
            }
        }
        let shared = Shared {
            file: self,
            pieces: &pieces,
            slots: (0..batches).map(|_| Mutex::new(Slot::Empty)).collect(),
            left: left.into_iter().map(AtomicUsize::new).collect(),
            decoded: (0..batches).map(|_| Mutex::new(None)).collect(),
            results: (0..pieces.len()).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            failed_at: AtomicUsize::new(usize::MAX),
            stop: AtomicBool::new(false),
            caller: std::thread::current(),
        };
        // The calling thread checks nothing itself while the helpers run:
        // it waits (its core free for a helper) and takes the results. A
        // thread that keeps its core busy while starting another has the
        // new one queued behind it on the same core until the scheduler
        // moves it (milliseconds on a small VM).
        let helpers = threads.min(pieces.len());
        std::thread::scope(|s| {
            let mut handles = Vec::with_capacity(helpers);
            for _ in 0..helpers {
                // No thread (the OS refused): the calling thread does its share.
                if let Ok(h) = std::thread::Builder::new().spawn_scoped(s, || shared.help()) {
                    handles.push(h);
                }
            }
            let work_here = handles.len() < threads;
            let result = shared.drive(&handles, work_here, report, progress);
            // Stop the helpers (after an error).
            shared.stop.store(true, Ordering::Relaxed);
            let mut joined = Ok(());
            for h in handles {
                if h.join().is_err() {
                    joined = Err(panicked(self));
                }
            }
            result.and(joined)
        })
    }

    /// The pieces of the check, in file order: runs of whole batches of
    /// about `piece` bytes (a batch smaller than `piece` is checked whole by
    /// one worker, and a run of them is one claim), and the parts of each
    /// larger batch (section-relative ranges of at most `piece` bytes).
    fn pieces(&self, piece: usize) -> Vec<Job> {
        let mut out = Vec::new();
        // The run of small batches being gathered: its first batch.
        let mut run: Option<usize> = None;
        let mut run_bytes = 0usize;
        let entries = self.entries();
        for (k, e) in entries.iter().enumerate() {
            let len = usize::try_from(e.length.get()).unwrap_or(usize::MAX);
            if len < piece {
                let first = *run.get_or_insert(k);
                run_bytes = run_bytes.saturating_add(len);
                if run_bytes >= piece {
                    out.push(Job::Batches(first..k + 1));
                    (run, run_bytes) = (None, 0);
                }
                continue;
            }
            if let Some(first) = run.take() {
                out.push(Job::Batches(first..k));
                run_bytes = 0;
            }
            let count = len.div_ceil(piece).max(1);
            for p in 0..count {
                let start = p * piece;
                out.push(Job::Part(PieceJob {
                    k,
                    offset: e.offset.get(),
                    range: start..len.min(start.saturating_add(piece)),
                    first: p == 0,
                    last: p + 1 == count,
                }));
            }
        }
        if let Some(first) = run {
            out.push(Job::Batches(first..entries.len()));
        }
        out
    }
}

/// A 2.0 batch with compressed buffers decodes to its recorded lengths, and
/// its decoded LoD and bodies follow the rules (a batch with none: nothing
/// to do): [`section::decode_check`], the decoded bytes dropped.
///
/// The decoded bytes are dropped as soon as they are checked, and the checks
/// of a process decode together at most [`DECODES_IN_FLIGHT`] bytes, or one
/// batch larger than that alone: a verify holds one batch's decode (at most
/// [`MAX_DECODED_BATCH`](super::MAX_DECODED_BATCH)) or less, however many
/// threads check.
fn decode_check(section: &[u8], meta: &BatchMeta) -> Result<()> {
    let Some(n) = meta.decoded_len else {
        return Ok(());
    };
    let _held = DecodeGate::enter(n);
    section::decode_check(section, meta).map(drop)
}

/// The most decoded bytes the checks of a process hold at once (beyond one
/// batch larger than that): 256 MiB.
pub(crate) const DECODES_IN_FLIGHT: usize = 256 << 20;

/// The decoded bytes the checks hold now, and the threads waiting to decode.
static IN_FLIGHT: Mutex<usize> = Mutex::new(0);
static FREED: std::sync::Condvar = std::sync::Condvar::new();

/// A claim of `n` decoded bytes against [`DECODES_IN_FLIGHT`], released
/// when dropped.
struct DecodeGate(usize);

impl DecodeGate {
    /// Waits until `n` bytes fit (or nothing else is held), and claims them.
    fn enter(n: usize) -> DecodeGate {
        let mut held = lock(&IN_FLIGHT);
        while *held > 0 && held.saturating_add(n) > DECODES_IN_FLIGHT {
            held = FREED.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        *held = held.saturating_add(n);
        DecodeGate(n)
    }
}

impl Drop for DecodeGate {
    fn drop(&mut self) {
        let mut held = lock(&IN_FLIGHT);
        *held = held.saturating_sub(self.0);
        FREED.notify_all();
    }
}

/// The error of a checking thread that panicked.
fn panicked(file: &LodtFile) -> FormatError {
    FormatError::io(
        format!("verifying {}", file.source().describe()),
        std::io::Error::other("a checking thread panicked"),
    )
}

/// One piece of the check, claimed by one worker.
enum Job {
    /// Batches `k..l`, each smaller than a piece, checked whole one after
    /// the other (as the serial check does), until the first failure.
    Batches(Range<usize>),
    /// A part of a batch larger than a piece.
    Part(PieceJob),
}

/// One part of a large batch: bytes `range` of batch `k`'s section, which
/// starts at file offset `offset`.
struct PieceJob {
    k: usize,
    offset: u64,
    range: Range<usize>,
    /// The batch's first piece (where a batch that does not parse fails).
    first: bool,
    /// The batch's last piece (after it, the batch is done).
    last: bool,
}

/// A batch as the workers share it: parsed once, by the first worker that
/// needs it, and released by the worker that checks its last piece (the
/// calling thread needs nothing of it but a failure to parse).
enum Slot<'a> {
    Empty,
    Ready(MetaRef<'a>, Section<'a>),
    /// The batch does not parse: the error, taken by the calling thread.
    Failed(Option<FormatError>),
    Released,
}

/// What a worker found in one piece, in file order.
enum Event {
    /// The piece's first failure: padding before a buffer or before the
    /// table that is not zero, or a buffer wholly in the piece whose
    /// checksum differs. No event follows it.
    Failed(Box<FormatError>),
    /// Part of buffer `i`, split across pieces, with its checksum; its last
    /// part holds the checksum expected and where the buffer is.
    Part {
        i: usize,
        crc: crc32fast::Hasher,
        last: Option<Box<(u32, ErrorSite)>>,
    },
}

/// The events of a piece: inline for a few (most buffers are checked whole
/// by the worker, and have none).
type Events = SmallVec<[Event; 2]>;

enum Outcome {
    /// The piece's events; with the batch's last piece (in file order), its
    /// number of tensors and body bytes.
    Events(Events, Option<(usize, u64)>),
    /// The batch does not parse (its slot holds the error).
    Failed,
    /// A run of whole batches: their numbers of tensors and body bytes,
    /// and the file offset after the last batch checked; or the first
    /// failure.
    Batches(std::result::Result<(usize, u64, u64), Box<FormatError>>),
}

/// What the workers share. Pieces are claimed in file order from one
/// counter; each result goes to its own slot, which the calling thread
/// takes in file order. Nobody waits for room: a batch's bytes (a copy,
/// for positional reads) are dropped as soon as its last piece is checked,
/// so at most one batch per worker is held.
struct Shared<'a> {
    file: &'a LodtFile,
    pieces: &'a [Job],
    slots: Vec<Mutex<Slot<'a>>>,
    /// Per batch, how many of its pieces are not checked yet.
    left: Vec<AtomicUsize>,
    /// Per batch, the decoding check (2.0 with compressed buffers), run by
    /// the worker that checks the batch's last piece, before it stores that
    /// piece's result.
    decoded: Vec<Mutex<Option<Result<()>>>>,
    /// The result of each piece, until the calling thread takes it.
    results: Vec<Mutex<Option<Outcome>>>,
    /// The next piece to claim.
    next: AtomicUsize,
    /// The first piece (in file order) a worker found a failure in, as far
    /// as the workers know (`usize::MAX`: none): no piece after it is
    /// claimed, and the calling thread is woken for every result stored
    /// after it.
    failed_at: AtomicUsize,
    stop: AtomicBool,
    /// The calling thread, woken after a failure and when a helper ends.
    caller: std::thread::Thread,
}

/// Locks `m`, ignoring poisoning (a helper that panicked is reported by `join`).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<'a> Shared<'a> {
    /// Claims the next piece (`None`: none left, stopped, or past a
    /// failure).
    fn claim(&self) -> Option<usize> {
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        let j = self.next.fetch_add(1, Ordering::Relaxed);
        (j < self.pieces.len() && j <= self.failed_at.load(Ordering::Relaxed)).then_some(j)
    }

    /// Checks piece `j` and stores its result; whether it holds a failure
    /// (one that the piece alone shows: a buffer split across pieces is
    /// judged by the calling thread).
    fn run(&self, j: usize) -> bool {
        let (outcome, failed) = match self.pieces.get(j) {
            Some(Job::Part(piece)) => self.check(piece),
            Some(Job::Batches(ks)) => {
                let result = self.check_batches(ks.clone());
                let failed = result.is_err();
                (Outcome::Batches(result), failed)
            }
            None => return false,
        };
        if let Some(r) = self.results.get(j) {
            *lock(r) = Some(outcome);
        }
        failed
    }

    /// A helper thread: claims pieces in order and checks them. It wakes
    /// the calling thread after a failure (and for every result after
    /// one, which it may be waiting for), and when it ends.
    fn help(&self) {
        while let Some(j) = self.claim() {
            if self.run(j) {
                self.failed_at.fetch_min(j, Ordering::Relaxed);
                self.caller.unpark();
            } else if self.failed_at.load(Ordering::Relaxed) != usize::MAX {
                self.caller.unpark();
            }
        }
        self.caller.unpark();
    }

    /// Checks batches `ks` whole, in order, up to the first failure.
    fn check_batches(
        &self,
        ks: Range<usize>,
    ) -> std::result::Result<(usize, u64, u64), Box<FormatError>> {
        let (mut tensors, mut body_bytes, mut end) = (0, 0, 0);
        for k in ks {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            let (t, b) = self.file.verify_whole_batch(k, &mut |_| {})?;
            tensors += t;
            body_bytes += b;
            end = self.file.batch_range(k)?.end;
        }
        Ok((tensors, body_bytes, end))
    }

    /// Checks one part of a large batch: parses the batch if no worker has
    /// yet, checks the padding and computes the checksums of the buffer parts
    /// in the part; after the batch's last part, decodes it (compressed
    /// buffers) and drops its bytes. Whether the part holds a failure.
    fn check(&self, piece: &PieceJob) -> (Outcome, bool) {
        let Some(slot) = self.slots.get(piece.k) else {
            return (Outcome::Failed, true);
        };
        let ready = {
            let mut slot = lock(slot);
            if let Slot::Empty = *slot {
                *slot = match self.file.verify_batch(piece.k) {
                    Ok((meta, section)) => Slot::Ready(meta, section),
                    Err(e) => Slot::Failed(Some(e)),
                };
            }
            match &*slot {
                Slot::Ready(meta, section) => Some((meta.clone(), section.clone())),
                _ => None,
            }
        };
        let outcome = match &ready {
            Some((meta, section)) => Outcome::Events(
                piece_events(section.bytes(), meta, piece.offset, piece.range.clone()),
                piece.last.then(|| (meta.tensors.len(), meta.body_bytes())),
            ),
            None => Outcome::Failed,
        };
        let finished = self
            .left
            .get(piece.k)
            .is_some_and(|n| n.fetch_sub(1, Ordering::AcqRel) == 1);
        let mut failed = match &outcome {
            Outcome::Events(events, _) => events.iter().any(|e| matches!(e, Event::Failed(_))),
            _ => true,
        };
        if finished && let Some((meta, section)) = &ready {
            let decoded = decode_check(section.bytes(), meta);
            failed |= decoded.is_err();
            if let Some(d) = self.decoded.get(piece.k) {
                *lock(d) = Some(decoded);
            }
            // Checked: drop the batch's bytes and metadata (the last
            // worker holding them frees them).
            *lock(slot) = Slot::Released;
        }
        (outcome, failed)
    }

    /// Takes the result of piece `j` if it is there.
    fn take(&self, j: usize) -> Option<Outcome> {
        self.results.get(j).and_then(|r| lock(r).take())
    }

    /// The calling thread: takes the pieces' results in file order,
    /// combining the checksums of split buffers, reporting progress, and
    /// returning the first failure; between them it waits (woken by a
    /// helper, or every [`PROGRESS_EVERY`] to report progress), or with
    /// `work_here` (fewer helpers than cores) checks pieces itself.
    fn drive(
        &self,
        helpers: &[std::thread::ScopedJoinHandle<'_, ()>],
        work_here: bool,
        report: &mut VerifyReport,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<()> {
        let total = self.file.file_size();
        let mut order = InOrder::default();
        while order.next < self.pieces.len() {
            // Every result that is ready, in order.
            while let Some(outcome) = self.take(order.next) {
                order.take(self, outcome, report, progress, total)?;
            }
            if order.next >= self.pieces.len() {
                break;
            }
            if work_here && let Some(j) = self.claim() {
                if self.run(j) {
                    self.failed_at.fetch_min(j, Ordering::Relaxed);
                }
                continue;
            }
            // The next result is a helper's, still being checked: wait
            // for it. A helper that ended without storing it panicked.
            if helpers.iter().all(|h| h.is_finished())
                && self
                    .results
                    .get(order.next)
                    .is_some_and(|r| lock(r).is_none())
            {
                return Err(panicked(self.file));
            }
            std::thread::park_timeout(PROGRESS_EVERY);
        }
        Ok(())
    }
}

/// The calling thread's walk over the results in file order.
#[derive(Default)]
struct InOrder {
    /// The next piece whose result to take.
    next: usize,
    /// The buffer whose parts are being combined.
    open: Option<(usize, crc32fast::Hasher)>,
}

impl InOrder {
    /// Takes the result of piece `self.next`.
    fn take(
        &mut self,
        shared: &Shared<'_>,
        outcome: Outcome,
        report: &mut VerifyReport,
        progress: &mut dyn FnMut(u64, u64),
        total: u64,
    ) -> Result<()> {
        let j = self.next;
        self.next += 1;
        let (piece, outcome) = match (shared.pieces.get(j), outcome) {
            (_, Outcome::Batches(result)) => {
                let (tensors, body_bytes, end) = result.map_err(|e| *e)?;
                report.tensors += tensors;
                report.body_bytes += body_bytes;
                progress(end, total);
                return Ok(());
            }
            (Some(Job::Part(piece)), outcome) => (piece, outcome),
            // A run of batches has no other outcome.
            (_, _) => return Ok(()),
        };
        let (events, counts) = match outcome {
            Outcome::Events(events, counts) => (events, counts),
            Outcome::Batches(_) => return Ok(()),
            Outcome::Failed => {
                let slot = shared.slots.get(piece.k);
                return Err(slot
                    .and_then(|s| match &mut *lock(s) {
                        Slot::Failed(e) => e.take(),
                        _ => None,
                    })
                    .unwrap_or_else(|| {
                        FormatError::corrupt(
                            ErrorSite::batch(piece.k as u64, FilePart::BatchHeader),
                            "the batch does not parse",
                        )
                    }));
            }
        };
        if piece.first {
            self.open = None;
        }
        for event in events {
            match event {
                Event::Failed(e) => return Err(*e),
                Event::Part { i, crc, last } => {
                    let crc = match self.open.take() {
                        Some((o, mut sofar)) if o == i => {
                            sofar.combine(&crc);
                            sofar
                        }
                        _ => crc,
                    };
                    let Some(last) = last else {
                        self.open = Some((i, crc));
                        continue;
                    };
                    let (expected, at) = *last;
                    let found = crc.finalize();
                    if found != expected {
                        return Err(FormatError::Checksum {
                            at,
                            expected,
                            found,
                        });
                    }
                }
            }
        }
        progress(piece.offset + piece.range.end as u64, total);
        if piece.last {
            // Every piece of the batch is taken, so the worker that checked
            // the last of them stored the decoding check first.
            if let Some(r) = shared.decoded.get(piece.k).and_then(|d| lock(d).take()) {
                r?;
            }
            if let Some((tensors, body_bytes)) = counts {
                report.tensors += tensors;
                report.body_bytes += body_bytes;
            }
        }
        Ok(())
    }
}

/// The events of bytes `piece` of a checked batch's section, in order: the
/// part of each buffer split across pieces, and the piece's first failure
/// (padding before a buffer or before the checksum table that is not zero,
/// a buffer wholly in the piece whose checksum differs), after which the
/// piece has nothing more to say. An empty buffer belongs to the piece its
/// offset falls in.
fn piece_events(section: &[u8], meta: &BatchMeta, offset: u64, piece: Range<usize>) -> Events {
    let within = |r: &Range<usize>| r.start.max(piece.start)..r.end.min(piece.end);
    // Whether the padding `r` (its part in the piece) is zero; if not, its
    // error ends the events.
    let gap = |r: Range<usize>, events: &mut Events| {
        let part = within(&r);
        if part.start < part.end {
            let bytes = section.get(part.clone()).unwrap_or(&[]);
            let zero = check_zero(bytes, offset + part.start as u64, || {
                ErrorSite::batch(meta.index, FilePart::Padding)
            });
            if let Err(e) = zero {
                events.push(Event::Failed(Box::new(e)));
                return false;
            }
        }
        true
    };
    // Skip the buffers wholly before the piece (buffers are in order and do
    // not overlap, so this is a prefix), and count those that start in it.
    let first = meta.buffers.partition_point(|b| {
        if b.range.is_empty() {
            b.range.start < piece.start
        } else {
            b.range.end <= piece.start
        }
    });
    let mut events = Events::new();
    let mut prev_end = match first.checked_sub(1).and_then(|i| meta.buffers.get(i)) {
        Some(b) => b.range.end,
        None => meta.data_start,
    };
    for (i, b) in meta.buffers.iter().enumerate().skip(first) {
        if !gap(prev_end..b.range.start, &mut events) || b.range.start >= piece.end {
            return events;
        }
        let part = within(&b.range);
        let bytes = section.get(part.clone()).unwrap_or(&[]);
        if part == b.range {
            // Wholly in the piece (an empty buffer too): checked here.
            let found = crc32(bytes);
            if found != b.crc {
                events.push(Event::Failed(Box::new(FormatError::Checksum {
                    at: buffer_location(meta, i),
                    expected: b.crc,
                    found,
                })));
                return events;
            }
        } else if part.start < part.end {
            let mut crc = crc32fast::Hasher::new();
            crc.update(bytes);
            let last =
                (part.end == b.range.end).then(|| Box::new((b.crc, buffer_location(meta, i))));
            events.push(Event::Part { i, crc, last });
        }
        prev_end = b.range.end;
    }
    gap(prev_end..meta.table_start, &mut events);
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::batch_meta::Codec;
    use crate::format::layout::crc32;
    use crate::format::v2::Compression;
    use crate::format::writer::footer_bytes;
    use crate::format::{Version, WriteOptions, Writer};
    use crate::{Batch, Lod, LodTensor};
    use zerocopy::little_endian::U32;

    /// The piece size of the tests: small, so that small files have buffers
    /// and padding split across pieces.
    const TEST_PIECE: usize = 1000;

    /// Batch `k` of the test files: varied sizes, some of many pieces, with
    /// buffers split across pieces, empty tensors and buffers.
    fn batch(k: usize) -> Batch {
        let rows = match k % 4 {
            0 => 3,
            1 => 1500,
            2 => 0,
            _ => 700,
        };
        let values: Vec<f32> = (0..rows).map(|i| (i * 7 + k) as f32).collect();
        let lod = if rows == 0 {
            Lod::empty()
        } else {
            Lod::try_from_lengths(&[vec![1, rows as u64 - 1]]).unwrap()
        };
        let x = LodTensor::from_vec(values, vec![rows], lod).unwrap();
        let y = LodTensor::from_vec(vec![k as u8; k % 5], vec![k % 5], Lod::empty()).unwrap();
        Batch::try_from_tensors([("x", x), ("y", y)]).unwrap()
    }

    /// A file of `n` batches (see [`batch`]).
    fn file(n: usize) -> Vec<u8> {
        let mut w = crate::format::Writer::try_new(Vec::new(), Default::default()).unwrap();
        for k in 0..n {
            w.write(&batch(k)).unwrap();
        }
        w.finish().unwrap()
    }

    /// A 2.0 file of `n` batches (see [`batch`]), compressed.
    fn compressed_file(n: usize, compression: Compression) -> Vec<u8> {
        let options = WriteOptions {
            fsync: false,
            format_version: Some(Version { major: 2, minor: 0 }),
            compression,
        };
        let mut w = Writer::try_new_with(Vec::new(), Default::default(), options).unwrap();
        for k in 0..n {
            w.write(&batch(k)).unwrap();
        }
        w.finish().unwrap()
    }

    /// `bytes` (a 2.0 file) with the first compressed buffer of batch `k`
    /// overwritten by bytes no codec decodes (all 0xff), and every checksum
    /// over it sealed again: the buffer's in the head, the head's, the
    /// index entry's and the footer's. Only decoding finds it.
    fn spoil_compressed(bytes: &[u8], k: usize) -> Vec<u8> {
        let f = LodtFile::from_bytes(bytes).unwrap();
        let (meta, _) = f.verify_batch(k).unwrap();
        let offset = f.batch_range(k).unwrap().start;
        let i = meta
            .buffers
            .iter()
            .position(|b| b.codec != Codec::None)
            .expect("a compressed buffer");
        let mut out = bytes.to_vec();
        let at = |r: Range<usize>| offset as usize + r.start..offset as usize + r.end;
        let range = at(meta.buffers[i].range.clone());
        out[range.clone()].fill(0xff);
        let (old, new) = (meta.buffers[i].crc, crc32(&out[range]));
        // The buffer's checksum, in the head's record.
        let head_len = super::super::v2::parse_fixed(&out[at(0..64)], offset, k as u64)
            .unwrap()
            .1 as usize;
        let head = at(0..head_len);
        let record = &mut out[head.start + super::super::v2::HEAD_FIXED..head.end - 4];
        let hits: Vec<usize> = (0..record.len() - 3)
            .filter(|&p| record[p..p + 4] == old.to_le_bytes())
            .collect();
        assert_eq!(hits.len(), 1, "the old checksum once in the record");
        record[hits[0]..hits[0] + 4].copy_from_slice(&new.to_le_bytes());
        let head_crc = crc32(&out[head.start..head.end - 4]);
        out[head.end - 4..head.end].copy_from_slice(&head_crc.to_le_bytes());
        // The index entry and the footer.
        let table: Vec<u8> = meta
            .buffers
            .iter()
            .enumerate()
            .flat_map(|(j, b)| if j == i { new } else { b.crc }.to_le_bytes())
            .collect();
        let mut entries = f.entries().to_vec();
        entries[k].header_crc = U32::new(head_crc);
        entries[k].table_crc = U32::new(crc32(&table));
        let footer = f.footer_offset();
        out.truncate(footer as usize);
        out.extend_from_slice(&footer_bytes(&entries, footer));
        out
    }

    /// A piece size of the tests under which the small batches of the test
    /// files are checked in runs of several batches.
    const RUN_PIECE: usize = 4000;

    /// The first error (as text) of the serial and of the parallel check.
    fn both(bytes: &[u8]) -> (String, String) {
        both_in(bytes, TEST_PIECE)
    }

    /// [`both`], the parallel check in pieces of `piece` bytes.
    fn both_in(bytes: &[u8], piece: usize) -> (String, String) {
        let f = LodtFile::from_bytes(bytes);
        let Ok(f) = f else {
            let e = f.unwrap_err().to_string();
            return (e.clone(), e);
        };
        let serial = f.verify_on(1, TEST_PIECE, &mut |_, _| {});
        // A fresh reader: the serial check cached the parsed batches.
        let g = LodtFile::from_bytes(bytes).unwrap();
        let mut last = 0;
        let parallel = g.verify_on(3, piece, &mut |done, _| {
            assert!(done >= last, "progress went back");
            last = done;
        });
        let text = |r: Result<VerifyReport>| match r {
            Ok(r) => format!("ok {r:?}"),
            Err(e) => e.to_string(),
        };
        (text(serial), text(parallel))
    }

    #[test]
    fn parallel_verify_matches_serial_on_a_good_file() {
        let bytes = file(9);
        let (s, p) = both(&bytes);
        assert!(s.starts_with("ok"), "{s}");
        assert_eq!(s, p);
        // With buffers split over several pieces.
        assert!(
            LodtFile::from_bytes(&bytes)
                .unwrap()
                .pieces(TEST_PIECE)
                .len()
                > 18
        );
        // And the default pieces, on real threads.
        let f = LodtFile::from_bytes(&bytes).unwrap();
        assert_eq!(
            f.verify_on(2, PIECE, &mut |_, _| {}).unwrap(),
            f.verify().unwrap()
        );
    }

    /// Corrupts `bytes` (a file of 9 batches or more) at every `step`th byte
    /// of its batches and around every `piece` bytes of each batch, once and
    /// twice, and checks that the parallel check in pieces of `piece` bytes
    /// reports the serial check's first error; how many positions it tried.
    fn sweep(bytes: &[u8], piece: usize, step: usize) -> usize {
        let reference = LodtFile::from_bytes(bytes).unwrap();
        let n = reference.num_batches();
        let ranges: Vec<_> = (0..n).map(|k| reference.batch_range(k).unwrap()).collect();
        let mut positions: Vec<usize> = (ranges[0].start as usize..ranges[n - 1].end as usize)
            .step_by(step)
            .collect();
        for r in &ranges {
            for p in (r.start as usize..r.end as usize).step_by(piece).skip(1) {
                positions.extend(p - 2..p + 2);
            }
        }
        positions.sort_unstable();
        positions.dedup();
        let mut checked = 0;
        for (n, &p) in positions.iter().enumerate() {
            // One corruption, then two (the later must not win).
            let mut one = bytes.to_vec();
            one[p] ^= 0x5a;
            let (s, q) = both_in(&one, piece);
            assert_eq!(s, q, "corruption at {p}");
            if let Some(&later) = positions.get(n + 97) {
                let mut two = one.clone();
                two[later] ^= 0x21;
                let (s2, q2) = both_in(&two, piece);
                assert_eq!(s2, q2, "corruptions at {p} and {later}");
                let batch = |at: usize| ranges.iter().position(|r| r.contains(&(at as u64)));
                if batch(later) > batch(p) {
                    assert_eq!(s2, s, "the failure in the earlier batch is reported");
                }
            }
            checked += 1;
        }
        checked
    }

    #[test]
    fn parallel_verify_finds_the_same_first_error_as_serial() {
        // Every 11th byte of the batches (header, metadata, buffers,
        // padding, table), and every byte around the piece boundaries.
        let checked = sweep(&file(9), TEST_PIECE, 11);
        assert!(checked > 1000, "{checked}");
    }

    #[test]
    fn runs_of_small_batches_find_the_same_first_error_as_serial() {
        // Pieces of 4,000 bytes: the batches of 3 to 700 rows are checked
        // in runs of several batches, those of 1,500 rows in parts.
        let bytes = file(14);
        let f = LodtFile::from_bytes(&bytes).unwrap();
        let pieces = f.pieces(RUN_PIECE);
        let runs: Vec<Range<usize>> = pieces
            .iter()
            .filter_map(|p| match p {
                Job::Batches(ks) => Some(ks.clone()),
                Job::Part(_) => None,
            })
            .collect();
        assert!(runs.iter().any(|ks| ks.len() >= 3), "{runs:?}");
        assert!(pieces.iter().any(|p| matches!(p, Job::Part(p) if !p.last)));
        // Every batch in exactly one piece, in order.
        let covered: Vec<usize> = pieces
            .iter()
            .flat_map(|p| match p {
                Job::Batches(ks) => ks.clone(),
                Job::Part(p) => p.k..p.k + usize::from(p.first),
            })
            .collect();
        assert_eq!(covered, (0..14).collect::<Vec<_>>());
        let (s, p) = both_in(&bytes, RUN_PIECE);
        assert!(s.starts_with("ok"), "{s}");
        assert_eq!(s, p);
        let checked = sweep(&bytes, RUN_PIECE, 13);
        assert!(checked > 1000, "{checked}");
    }

    #[test]
    fn batches_read_before_and_positional_reads_verify_in_parallel_as_serially() {
        let good = file(9);
        let mut bad = good.clone();
        let r = LodtFile::from_bytes(&good).unwrap().batch_range(5).unwrap();
        bad[(r.end - 100) as usize] ^= 0x40;
        let text = |r: Result<VerifyReport>| match r {
            Ok(r) => format!("ok {r:?}"),
            Err(e) => e.to_string(),
        };
        let quiet = &mut |_: u64, _: u64| {};
        for bytes in [&good, &bad] {
            // Some batches parsed (and kept by the file) before the check.
            let serial = text(
                LodtFile::from_bytes(bytes)
                    .unwrap()
                    .verify_on(1, TEST_PIECE, quiet),
            );
            let read = LodtFile::from_bytes(bytes).unwrap();
            for k in [0, 3, 4, 5] {
                let _ = read.batch(k);
            }
            assert_eq!(text(read.verify_on(3, TEST_PIECE, quiet)), serial);
            // Positional reads: each batch a copy of its own.
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("f.lodt");
            std::fs::write(&path, bytes).unwrap();
            let options = super::super::ReadOptions {
                mmap: false,
                ..Default::default()
            };
            let open = || LodtFile::open_with(&path, &options).unwrap();
            let serial = text(open().verify_on(1, TEST_PIECE, quiet));
            assert_eq!(text(open().verify_on(3, TEST_PIECE, quiet)), serial);
            assert_eq!(serial.starts_with("ok"), bytes == &good, "{serial}");
        }
    }

    #[test]
    fn a_zero_padding_byte_set_in_a_gap_is_found_in_parallel() {
        let bytes = file(5);
        let f = LodtFile::from_bytes(&bytes).unwrap();
        let r = f.batch_range(1).unwrap();
        // The gap after buffer 0 (a 16-byte LoD level).
        let meta = f.verify_batch(1).unwrap().0;
        let gap = r.start as usize + meta.buffers[0].range.end + 3;
        let mut bad = bytes.clone();
        bad[gap] = 1;
        let (s, p) = both(&bad);
        assert!(s.contains("padding"), "{s}");
        assert_eq!(s, p);
    }

    #[test]
    fn compressed_files_verify_in_parallel_as_serially() {
        for c in [Compression::Lz4, Compression::Zstd { level: 3 }] {
            let bytes = compressed_file(9, c);
            for piece in [TEST_PIECE, RUN_PIECE] {
                let (s, p) = both_in(&bytes, piece);
                assert!(s.starts_with("ok"), "{c}: {s}");
                assert_eq!(s, p, "{c}, {piece}");
            }
            assert!(
                LodtFile::from_bytes(&bytes)
                    .unwrap()
                    .verify_batch(1)
                    .unwrap()
                    .0
                    .decoded_len
                    .is_some(),
                "{c}: batch 1 is compressed"
            );
        }
    }

    #[test]
    fn a_compressed_buffer_that_does_not_decode_is_found_in_file_order() {
        for c in [Compression::Lz4, Compression::Zstd { level: 3 }] {
            let good = compressed_file(9, c);
            // Batch 5 (1,500 rows: several pieces) does not decode.
            let bad = spoil_compressed(&good, 5);
            // And a checksum failure in a later batch: the decoding failure
            // comes first in file order, and is reported.
            let mut two = bad.clone();
            let later = LodtFile::from_bytes(&bad).unwrap().batch_range(7).unwrap();
            two[(later.end - 100) as usize] ^= 0x40;
            // In pieces of both sizes (runs of batches with the larger).
            for piece in [TEST_PIECE, RUN_PIECE] {
                let (s, p) = both_in(&bad, piece);
                assert!(s.contains("batch 5"), "{c}: {s}");
                assert!(!s.to_lowercase().contains("checksum"), "{c}: {s}");
                assert_eq!(s, p, "{c}, {piece}");
                let (s2, p2) = both_in(&two, piece);
                assert_eq!(s2, s, "{c}, {piece}");
                assert_eq!(p2, s, "{c}, {piece}");
            }
        }
    }
}
