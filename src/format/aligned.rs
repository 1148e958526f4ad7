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
