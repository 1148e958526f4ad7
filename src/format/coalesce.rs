//! [`Coalesce`]: the `.lodt` file writer's output buffer. Like
//! [`std::io::BufWriter`], it gathers small writes; unlike it, a large write
//! goes out together with what is gathered, in one vectored system call
//! (`writev`), instead of as a flush and then a write.
//!
//! A batch is written as a few small pieces (header, metadata, LoD levels,
//! small bodies, padding) around its large bodies. With `BufWriter` each
//! large body cost two system calls (the flush and the body), and every
//! system call on a file pays for the file's locks and timestamps: for 1,000
//! batches of 0.5 MiB, the writer's 3,000 calls took 25 % longer than the
//! same bytes in 1 MiB calls (`examples/peers.rs write-pattern`).

use std::io::{self, IoSlice, Write};

/// Writes of at least this many bytes are not copied into the buffer.
const DIRECT: usize = 64 << 10;
/// The buffer is written out when the next small write would take it past
/// this many bytes.
const HOLD: usize = 1 << 20;

/// A write buffer that joins its contents with the next large write in one
/// vectored write. Small writes (below 64 KiB) are copied into it; a large
/// one is written, with the buffer before it, by `write_vectored` (repeated
/// until both are out), and is never copied.
#[derive(Debug)]
pub(crate) struct Coalesce<W: Write> {
    inner: W,
    buf: Vec<u8>,
}

impl<W: Write> Coalesce<W> {
    /// A buffer in front of `inner`.
    pub(crate) fn new(inner: W) -> Self {
        Coalesce {
            inner,
            buf: Vec::with_capacity(DIRECT),
        }
    }

    /// The writer underneath (what is buffered is not in it yet).
    pub(crate) fn get_ref(&self) -> &W {
        &self.inner
    }

    /// The writer underneath, after writing out what is buffered.
    pub(crate) fn into_inner(mut self) -> io::Result<W> {
        self.write_buffer()?;
        Ok(self.inner)
    }

    /// The writer underneath, dropping what is buffered (it never reaches
    /// the writer).
    pub(crate) fn into_discarded(self) -> W {
        self.inner
    }

    fn write_buffer(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.inner.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }
}

impl<W: Write> Write for Coalesce<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_all(data).map(|()| data.len())
    }

    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        if data.len() < DIRECT {
            if self.buf.len() + data.len() > HOLD {
                self.write_buffer()?;
            }
            self.buf.extend_from_slice(data);
            return Ok(());
        }
        let mut parts = [IoSlice::new(&self.buf), IoSlice::new(data)];
        let mut left: &mut [IoSlice<'_>] = &mut parts;
        // Drops a leading empty buffer.
        IoSlice::advance_slices(&mut left, 0);
        while !left.is_empty() {
            match self.inner.write_vectored(left) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => IoSlice::advance_slices(&mut left, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.buf.clear();
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_buffer()?;
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that takes at most `most` bytes per call and logs each
    /// call's slices.
    struct Stingy {
        out: Vec<u8>,
        most: usize,
        calls: Vec<Vec<usize>>,
    }

    impl Write for Stingy {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.write_vectored(&[IoSlice::new(buf)])
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            self.calls.push(bufs.iter().map(|b| b.len()).collect());
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(self.most - n);
                self.out.extend_from_slice(&b[..take]);
                n += take;
            }
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn small_writes_are_joined_with_the_next_large_one_and_nothing_is_lost() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        // Pieces: small, small, large, small, large, large, small, large.
        let cuts = [
            0, 10, 100, 300_000, 300_064, 1_000_000, 2_000_000, 2_000_007, 3_000_000,
        ];
        for most in [usize::MAX, 100_000, 7] {
            let mut w = Coalesce::new(Stingy {
                out: Vec::new(),
                most,
                calls: Vec::new(),
            });
            for c in cuts.windows(2) {
                w.write_all(&data[c[0]..c[1]]).unwrap();
            }
            w.flush().unwrap();
            assert_eq!(w.get_ref().out, data, "at most {most} bytes per call");
            if most == usize::MAX {
                // One call per large write, carrying the small ones before it.
                assert_eq!(
                    w.get_ref().calls,
                    vec![
                        vec![100, 299_900],
                        vec![64, 699_936],
                        vec![1_000_000],
                        vec![7, 999_993]
                    ]
                );
            }
        }
    }

    #[test]
    fn small_writes_are_written_out_at_one_mebibyte_and_discarded_on_request() {
        let mut w = Coalesce::new(Stingy {
            out: Vec::new(),
            most: usize::MAX,
            calls: Vec::new(),
        });
        let piece = vec![1u8; 60_000];
        for _ in 0..18 {
            w.write_all(&piece).unwrap();
        }
        // 17 pieces fit in 1 MiB (1,020,000 bytes); the 18th wrote them out.
        assert_eq!(w.get_ref().calls, vec![vec![1_020_000]]);
        w.write_all(b"never").unwrap();
        let inner = w.into_discarded();
        assert_eq!(inner.out.len(), 1_020_000);
    }
}
