//! A write buffer whose writes start and end on [`ALIGN`]-byte file offsets.
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
//! [`AlignedWriter`] copies the head of a large write (up to the next
//! boundary) into its buffer, writes the buffer, writes the whole aligned
//! runs of the data directly, and keeps the tail: at most `2 * ALIGN` bytes
//! of each large write are copied. Small writes are buffered as `BufWriter`
//! buffers them; the buffer is written out in aligned runs too. Only
//! [`Write::flush`] (at the end of a file) writes a run that ends off a
//! boundary.

use std::io::Write;

/// The file-offset alignment of every write but the last, in bytes.
pub(super) const ALIGN: usize = 64 << 10;

/// The buffer's size: once it holds this much, its aligned part is written.
const CAPACITY: usize = 4 * ALIGN;

/// Buffers writes to `F` so that each write to it starts and ends on an
/// [`ALIGN`]-byte offset of the file (the first may start off one: the file
/// offset the writer starts at is `start`).
#[derive(Debug)]
pub(super) struct AlignedWriter<F: Write> {
    inner: F,
    buf: Vec<u8>,
    /// The file offset of `buf[0]`.
    pos: u64,
}

impl<F: Write> AlignedWriter<F> {
    /// A writer whose first byte lands at file offset `start`.
    pub(super) fn new(inner: F, start: u64) -> Self {
        Self {
            inner,
            // At most CAPACITY before a write, which adds less than 2 * ALIGN.
            buf: Vec::with_capacity(CAPACITY + 2 * ALIGN),
            pos: start,
        }
    }

    /// The wrapped file.
    pub(super) fn get_ref(&self) -> &F {
        &self.inner
    }

    /// The wrapped file, after writing out what is buffered.
    pub(super) fn into_inner(mut self) -> std::io::Result<F> {
        self.flush()?;
        Ok(self.inner)
    }

    /// The wrapped file, dropping what is buffered (it never reaches the file).
    pub(super) fn into_inner_discarding(self) -> F {
        self.inner
    }

    /// Bytes from the end of the buffer to the next boundary.
    fn to_boundary(&self) -> usize {
        let end = self.pos + self.buf.len() as u64;
        ((ALIGN as u64 - end % ALIGN as u64) % ALIGN as u64) as usize
    }

    /// Writes the first `n` buffered bytes and keeps the rest.
    fn write_buffered(&mut self, n: usize) -> std::io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.inner.write_all(&self.buf[..n])?;
        self.buf.drain(..n);
        self.pos += n as u64;
        Ok(())
    }
}

impl<F: Write> Write for AlignedWriter<F> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.write_all(data).map(|()| data.len())
    }

    fn write_all(&mut self, mut data: &[u8]) -> std::io::Result<()> {
        let head = self.to_boundary();
        if data.len() >= head + ALIGN {
            // Fill the buffer to a boundary, write it, then every whole
            // aligned run of `data` directly; the tail is buffered below.
            self.buf.extend_from_slice(&data[..head]);
            data = &data[head..];
            self.write_buffered(self.buf.len())?;
            let direct = data.len() - data.len() % ALIGN;
            self.inner.write_all(&data[..direct])?;
            self.pos += direct as u64;
            data = &data[direct..];
        }
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CAPACITY {
            // Write up to the last boundary inside the buffer.
            let keep = (self.pos + self.buf.len() as u64) % ALIGN as u64;
            self.write_buffered(self.buf.len() - keep as usize)?;
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.write_buffered(self.buf.len())?;
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the offset and length of every write it is given.
    #[derive(Default)]
    struct Calls {
        bytes: Vec<u8>,
        calls: Vec<(usize, usize)>,
    }

    impl Write for Calls {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            self.calls.push((self.bytes.len(), data.len()));
            self.bytes.extend_from_slice(data);
            Ok(data.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_write_but_the_last_starts_and_ends_on_a_boundary() {
        for start in [0u64, 100, ALIGN as u64 - 1] {
            let mut w = AlignedWriter::new(
                Calls {
                    bytes: vec![0; start as usize],
                    ..Default::default()
                },
                start,
            );
            let mut expected = vec![0; start as usize];
            // Small and large pieces, as a batch writes them.
            for (i, len) in [200, 64, 527_000, 3, 16_000, 64, 1 << 20, 0, 5, 2 * ALIGN]
                .into_iter()
                .cycle()
                .take(40)
                .enumerate()
            {
                let piece: Vec<u8> = (0..len).map(|k| (i * 31 + k) as u8).collect();
                w.write_all(&piece).unwrap();
                expected.extend_from_slice(&piece);
            }
            let calls = w.into_inner().unwrap();
            assert_eq!(calls.bytes, expected, "start {start}");
            let (last, rest) = calls.calls.split_last().unwrap();
            for &(offset, len) in rest {
                assert_eq!((offset + len) % ALIGN, 0, "a write ends off a boundary");
                assert!(offset == start as usize || offset % ALIGN == 0);
            }
            assert_eq!(last.0 + last.1, expected.len());
        }
    }

    #[test]
    fn discarding_drops_what_is_buffered() {
        let mut w = AlignedWriter::new(Calls::default(), 0);
        w.write_all(&[7; 10]).unwrap();
        assert!(w.into_inner_discarding().bytes.is_empty());
    }
}
