//! A write queue whose writes start and end on [`ALIGN`]-byte file offsets,
//! and which holds large buffers by reference instead of copying them.
//!
//! The kernel's buffered write path caches a file in folios (runs of pages)
//! no larger than a write's alignment allows: writes that start and end
//! mid-page are cached a page at a time, and cost more per byte than the same
//! bytes written in aligned runs. A `.lodt` batch is a few small pieces
//! (header, metadata, padding, checksum table) around large buffers, so a
//! plain `BufWriter` issues writes of any length at any offset. Measured on
//! the 529 MiB benchmark file (README, "Write"), the writer's own call
//! boundaries cost 139 ms where 1 MiB calls cost 116 ms; the same
//! boundaries rounded to 64 KiB cost 120 ms.
//!
//! [`Spool`] queues small pieces by copying them into a buffer of its own,
//! and large shared [`Buffer`]s by holding a reference (a clone of the
//! `Arc`), never copying their bytes. [`Spool::write_aligned`] writes the
//! queue up to its last boundary with vectored writes (one system call for a
//! batch of a few buffers) and keeps the rest, a reference to the tail of a
//! buffer included; [`Spool::write_all`] (at the end of a file) writes what
//! is left, the one run that may end off a boundary.

use crate::buffer::Buffer;
use std::collections::VecDeque;
use std::io::{IoSlice, Write};

/// The file-offset alignment of every write but the last, in bytes.
pub(super) const ALIGN: usize = 64 << 10;

/// The length and file-offset alignment of the calls a [`Run`] is written
/// in (a multiple of [`ALIGN`]): those of a stream writer's 1 MiB calls,
/// the fastest this machine's page cache was measured to take (2 MiB-aligned
/// calls build 2 MiB folios, 3.5 times slower on a virtual machine).
pub(super) const RUN: u64 = 1 << 20;

/// Shared buffers of at least this many bytes are held, not copied: below,
/// a copy costs less than the extra segment of a vectored write.
pub(super) const SHARE_MIN: usize = 8 << 10;

/// The most segments given to one vectored write (Linux's `IOV_MAX`; std
/// passes at most that many anyway).
const MAX_SEGMENTS: usize = 1024;

/// The most bytes given to one vectored write: every segment and their sum
/// stay within what any platform's `IoSlice` (32-bit lengths on Windows) and
/// `usize` (32-bit targets) can hold. Linux writes at most 2 GiB a call.
const MAX_RUN: u64 = 1 << 30;

/// A queued piece: bytes the spool owns (from `.1` on), or a shared buffer.
#[derive(Debug)]
enum Piece {
    Owned(Vec<u8>, usize),
    Shared(Buffer),
}

impl Piece {
    fn bytes(&self) -> &[u8] {
        match self {
            Piece::Owned(v, from) => &v[*from..],
            Piece::Shared(b) => b.as_slice(),
        }
    }
}

/// Bytes queued for a file, written in runs that start and end on
/// [`ALIGN`]-byte file offsets (the first may start off one: the file offset
/// the spool starts at is `start`).
///
/// Nothing reaches the file until [`Spool::write_aligned`] or
/// [`Spool::write_all`]; dropping the spool drops what is queued.
#[derive(Debug)]
pub(super) struct Spool {
    pieces: VecDeque<Piece>,
    /// Small pieces copied since the last shared one.
    small: Vec<u8>,
    /// The file offset of the first queued byte.
    pos: u64,
    /// Bytes queued, `small` included (a batch may queue one buffer many
    /// times, past what a 32-bit `usize` holds).
    queued: u64,
}

impl Spool {
    /// A spool whose first byte lands at file offset `start`.
    pub(super) fn new(start: u64) -> Self {
        Self {
            pieces: VecDeque::new(),
            small: Vec::new(),
            pos: start,
            queued: 0,
        }
    }

    /// Queues a copy of `bytes`.
    pub(super) fn copy(&mut self, bytes: &[u8]) {
        self.small.extend_from_slice(bytes);
        self.queued += bytes.len() as u64;
    }

    /// Queues `buffer`'s bytes: held by reference from [`SHARE_MIN`] bytes,
    /// copied below.
    pub(super) fn share(&mut self, buffer: &Buffer) {
        if buffer.len() < SHARE_MIN {
            return self.copy(buffer.as_slice());
        }
        self.seal();
        self.queued += buffer.len() as u64;
        self.pieces.push_back(Piece::Shared(buffer.clone()));
    }

    /// Moves the small pieces gathered so far into the queue.
    fn seal(&mut self) {
        if !self.small.is_empty() {
            let small = std::mem::take(&mut self.small);
            self.pieces.push_back(Piece::Owned(small, 0));
        }
    }

    /// Writes the queue up to its last [`ALIGN`]-byte file offset, and keeps
    /// the rest.
    pub(super) fn write_aligned(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        let end = self.pos + self.queued;
        let cut = end - end % ALIGN as u64;
        self.write_first(out, cut.saturating_sub(self.pos))
    }

    /// Writes everything queued.
    pub(super) fn write_all(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        self.write_first(out, self.queued)
    }

    /// The file offset of the first queued byte.
    pub(super) fn start(&self) -> u64 {
        self.pos
    }

    /// The file offset just past the last queued byte.
    pub(super) fn end(&self) -> u64 {
        self.pos + self.queued
    }

    /// Moves the queued bytes before file offset `to` (at most what is
    /// queued) out of the queue, as a [`Run`] to write elsewhere; the rest
    /// stays queued. Shared buffers move by reference; small pieces split by
    /// the cut are copied.
    pub(super) fn take_run(&mut self, to: u64) -> Run {
        let start = self.pos;
        let mut left = to.clamp(self.pos, self.end()) - self.pos;
        self.seal();
        let mut pieces = Vec::new();
        while left > 0 {
            let Some(front) = self.pieces.front_mut() else {
                break;
            };
            let len = front.bytes().len() as u64;
            if len <= left {
                left -= len;
                if let Some(piece) = self.pieces.pop_front() {
                    pieces.push(piece);
                }
                continue;
            }
            // left < len, so it fits a usize.
            let k = left as usize;
            match front {
                Piece::Owned(v, from) => {
                    pieces.push(Piece::Owned(v[*from..*from + k].to_vec(), 0));
                    *from += k;
                }
                Piece::Shared(b) => {
                    if let (Ok(head), Ok(tail)) = (b.slice(0..k), b.slice(k..b.len())) {
                        pieces.push(Piece::Shared(head));
                        *b = tail;
                    }
                }
            }
            left = 0;
        }
        let len: u64 = pieces.iter().map(|p| p.bytes().len() as u64).sum();
        self.pos += len;
        self.queued -= len;
        Run { pieces, start, len }
    }

    /// Writes the first `n` queued bytes and drops them from the queue.
    fn write_first(&mut self, out: &mut impl Write, n: u64) -> std::io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.seal();
        let mut left = n;
        while left > 0 {
            let written = {
                let mut segments = Vec::with_capacity(self.pieces.len().min(MAX_SEGMENTS));
                // At most MAX_RUN bytes, so every length below fits a `usize`.
                let mut take = left.min(MAX_RUN) as usize;
                for piece in self.pieces.iter().take(MAX_SEGMENTS) {
                    let bytes = piece.bytes();
                    let k = bytes.len().min(take);
                    segments.push(IoSlice::new(&bytes[..k]));
                    take -= k;
                    if take == 0 {
                        break;
                    }
                }
                write_segments(out, &mut segments)?
            };
            self.consume(written);
            left -= written as u64;
        }
        Ok(())
    }

    /// Drops the first `n` queued bytes (all in sealed pieces).
    fn consume(&mut self, mut n: usize) {
        self.pos += n as u64;
        self.queued -= n as u64;
        while n > 0 {
            let Some(front) = self.pieces.front_mut() else {
                return;
            };
            let len = front.bytes().len();
            if n >= len {
                n -= len;
                if let Some(Piece::Owned(mut v, _)) = self.pieces.pop_front()
                    && self.small.is_empty()
                {
                    // Keep the allocation for the next small pieces.
                    v.clear();
                    self.small = v;
                }
                continue;
            }
            match front {
                Piece::Owned(_, from) => *from += n,
                Piece::Shared(b) => {
                    let rest = b.len();
                    // In range: n < len == rest.
                    if let Ok(tail) = b.slice(n..rest) {
                        *b = tail;
                    }
                }
            }
            return;
        }
    }
}

/// Bytes taken out of a [`Spool`] ([`Spool::take_run`]) to be written at
/// file offset `start`, where the file's offset is when [`Run::write_to`]
/// is called.
#[derive(Debug)]
pub(super) struct Run {
    pieces: Vec<Piece>,
    start: u64,
    len: u64,
}

impl Run {
    /// The number of bytes.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Writes the run whole, in vectored calls that end on [`RUN`]-byte file
    /// offsets (so a run from one such offset to another goes out in calls
    /// of [`RUN`] bytes).
    pub(super) fn write_to(&self, out: &mut impl Write) -> std::io::Result<()> {
        let mut at = self.start;
        let mut pieces = self.pieces.iter().map(Piece::bytes);
        let mut current: &[u8] = &[];
        let end = self.start + self.len;
        while at < end {
            let call_end = (at - at % RUN + RUN).min(end);
            // At most RUN bytes, so it fits a usize.
            let mut take = (call_end - at) as usize;
            let mut segments = Vec::new();
            while take > 0 && segments.len() < MAX_SEGMENTS {
                if current.is_empty() {
                    match pieces.next() {
                        Some(next) => current = next,
                        None => break,
                    }
                    continue;
                }
                let k = current.len().min(take);
                segments.push(IoSlice::new(&current[..k]));
                current = &current[k..];
                take -= k;
            }
            if segments.is_empty() {
                break;
            }
            at += write_segments(out, &mut segments)? as u64;
        }
        Ok(())
    }
}

/// Writes `segments` whole, a vectored write at a time; returns their length.
fn write_segments(out: &mut impl Write, segments: &mut [IoSlice<'_>]) -> std::io::Result<usize> {
    let total = segments.iter().map(|s| s.len()).sum();
    let mut view = segments;
    while !view.is_empty() {
        match out.write_vectored(view) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    "failed to write whole buffer",
                ));
            }
            Ok(k) => IoSlice::advance_slices(&mut view, k),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the offset and length of every write, and the address of
    /// every segment, it is given; takes at most `limit` bytes a call.
    struct Calls {
        bytes: Vec<u8>,
        calls: Vec<(usize, usize)>,
        segments: Vec<*const u8>,
        limit: usize,
    }

    impl Calls {
        fn new(start: usize, limit: usize) -> Self {
            Calls {
                bytes: vec![0; start],
                calls: Vec::new(),
                segments: Vec::new(),
                limit,
            }
        }
    }

    impl Write for Calls {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            self.write_vectored(&[IoSlice::new(data)])
        }
        fn write_vectored(&mut self, data: &[IoSlice<'_>]) -> std::io::Result<usize> {
            let at = self.bytes.len();
            for s in data {
                self.segments.push(s.as_ptr());
                let room = self.limit - (self.bytes.len() - at);
                self.bytes.extend_from_slice(&s[..s.len().min(room)]);
            }
            self.calls.push((at, self.bytes.len() - at));
            Ok(self.bytes.len() - at)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_write_but_the_last_starts_and_ends_on_a_boundary() {
        for start in [0usize, 100, ALIGN - 1] {
            let mut spool = Spool::new(start as u64);
            let mut out = Calls::new(start, usize::MAX);
            let mut expected = vec![0; start];
            let mut shared = Vec::new();
            // Small and large pieces, as a batch writes them.
            for (i, len) in [200, 64, 527_000, 3, 16_000, 64, 1 << 20, 0, 5, 2 * ALIGN]
                .into_iter()
                .cycle()
                .take(40)
                .enumerate()
            {
                let piece: Vec<u8> = (0..len).map(|k| (i * 31 + k) as u8).collect();
                expected.extend_from_slice(&piece);
                let buffer = Buffer::from_vec(piece);
                spool.share(&buffer);
                if buffer.len() >= SHARE_MIN {
                    shared.push(buffer);
                }
                if i % 3 == 2 {
                    spool.write_aligned(&mut out).unwrap();
                }
            }
            spool.write_all(&mut out).unwrap();
            assert_eq!(out.bytes, expected, "start {start}");
            let (last, rest) = out.calls.split_last().unwrap();
            for &(offset, len) in rest {
                assert_eq!((offset + len) % ALIGN, 0, "a write ends off a boundary");
                assert!(offset == start || offset % ALIGN == 0);
            }
            assert_eq!(last.0 + last.1, expected.len());
            // Large buffers reach the writer as themselves, not as copies.
            for b in &shared {
                assert!(out.segments.contains(&b.as_slice().as_ptr()));
            }
        }
    }

    #[test]
    fn runs_taken_anywhere_go_out_in_calls_that_end_on_run_offsets() {
        let mut spool = Spool::new(100);
        let mut out = Calls::new(100, usize::MAX);
        let mut expected = vec![0; 100];
        let mut shared = Vec::new();
        let mut cuts = [7u64, RUN, 3 * RUN + 5, 0, 5 * RUN].into_iter().cycle();
        let mut run_ends = Vec::new();
        for (i, len) in [200, 527_000, 3, 16_000, 3 << 20, 5, 2 * ALIGN]
            .into_iter()
            .cycle()
            .take(30)
            .enumerate()
        {
            let piece: Vec<u8> = (0..len).map(|k| (i * 13 + k) as u8).collect();
            expected.extend_from_slice(&piece);
            let buffer = Buffer::from_vec(piece);
            spool.share(&buffer);
            if buffer.len() >= SHARE_MIN {
                shared.push(buffer);
            }
            // Cut mid-piece (small or shared), on a run offset, or before
            // what was taken already (nothing).
            let cut = spool.start() + cuts.next().unwrap_or(0);
            let run = spool.take_run(cut);
            assert_eq!(run.len(), cut.min(spool.end()) - run.start);
            assert_eq!(spool.start(), run.start + run.len());
            run_ends.push(spool.start());
            run.write_to(&mut out).unwrap();
        }
        let end = spool.end();
        spool.take_run(end).write_to(&mut out).unwrap();
        assert_eq!(spool.start(), end);
        assert!(out.bytes == expected);
        for &(offset, len) in &out.calls[..out.calls.len() - 1] {
            let end = (offset + len) as u64;
            assert!(len as u64 <= RUN, "a call of {len} bytes");
            // A call ends on a run offset, or where its run ends.
            assert!(
                end.is_multiple_of(RUN) || run_ends.contains(&end),
                "a call ends at {end}"
            );
        }
        for b in &shared {
            assert!(out.segments.contains(&b.as_slice().as_ptr()));
        }
    }

    #[test]
    fn short_writes_are_continued() {
        let mut spool = Spool::new(0);
        let mut out = Calls::new(0, 1000);
        let big = Buffer::from_vec((0..3 * ALIGN + 7).map(|k| k as u8).collect::<Vec<_>>());
        spool.copy(&[9; 10]);
        spool.share(&big);
        spool.write_aligned(&mut out).unwrap();
        assert_eq!(out.bytes.len(), 3 * ALIGN);
        spool.write_all(&mut out).unwrap();
        assert_eq!(&out.bytes[..10], &[9; 10]);
        assert_eq!(&out.bytes[10..], big.as_slice());
    }

    /// Says `Interrupted` on every other call; takes at most `limit` bytes.
    struct Flaky {
        bytes: Vec<u8>,
        calls: usize,
        limit: usize,
    }

    impl Write for Flaky {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            self.write_vectored(&[IoSlice::new(data)])
        }
        fn write_vectored(&mut self, data: &[IoSlice<'_>]) -> std::io::Result<usize> {
            self.calls += 1;
            if self.calls % 2 == 1 {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            assert!(data.len() <= MAX_SEGMENTS, "{} segments", data.len());
            let mut n = 0;
            for s in data {
                let k = s.len().min(self.limit - n);
                self.bytes.extend_from_slice(&s[..k]);
                n += k;
            }
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn many_pieces_interrupts_and_short_writes_keep_every_byte_in_order() {
        // 1,500 shared buffers with one-byte copies between them: more
        // segments than one vectored write takes.
        let mut spool = Spool::new(0);
        let mut out = Flaky {
            bytes: Vec::new(),
            calls: 0,
            limit: 1000,
        };
        let mut expected = Vec::new();
        for i in 0..1500usize {
            spool.copy(&[i as u8]);
            expected.push(i as u8);
            let piece: Vec<u8> = (0..SHARE_MIN + i).map(|k| (k * 7 + i) as u8).collect();
            expected.extend_from_slice(&piece);
            spool.share(&Buffer::from_vec(piece));
        }
        spool.write_aligned(&mut out).unwrap();
        assert_eq!(out.bytes.len() % ALIGN, 0);
        spool.write_all(&mut out).unwrap();
        assert!(out.bytes == expected);
    }

    /// Takes nothing.
    struct Full;

    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Ok(0)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_sink_that_takes_nothing_is_an_error() {
        let mut spool = Spool::new(0);
        spool.copy(&[1; 100]);
        let e = spool.write_all(&mut Full).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WriteZero);
    }

    #[test]
    fn one_buffer_queued_many_times_is_written_each_time() {
        let big = Buffer::from_vec((0..ALIGN + 3).map(|k| k as u8).collect::<Vec<_>>());
        let mut spool = Spool::new(5);
        for _ in 0..4 {
            spool.share(&big);
        }
        assert_eq!(spool.queued, 4 * (ALIGN as u64 + 3));
        let mut out = Calls::new(5, usize::MAX);
        spool.write_all(&mut out).unwrap();
        assert_eq!(out.bytes.len(), 5 + 4 * (ALIGN + 3));
        for k in 0..4 {
            let at = 5 + k * (ALIGN + 3);
            assert!(&out.bytes[at..at + ALIGN + 3] == big.as_slice());
        }
    }

    #[test]
    fn nothing_is_written_before_it_is_asked_for() {
        let mut spool = Spool::new(0);
        spool.copy(&[7; 10]);
        spool.share(&Buffer::from_vec(vec![1u8; ALIGN / 2]));
        let mut out = Calls::new(0, usize::MAX);
        spool.write_aligned(&mut out).unwrap();
        assert!(out.bytes.is_empty());
    }
}
