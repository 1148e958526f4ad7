//! Fuzzes the `.lodt` stream reader (`StreamReader`, what `lodt cat -`,
//! `convert -` and `recover` read with) over arbitrary bytes, 1.0 and 2.0:
//! as they are, and with every CRC32 resealed (`reseal.rs`, as `lodt_file`
//! does) so that mutations reach the checks behind the checksums.
//!
//! The bytes arrive in short reads of a size chosen from the input, then
//! (for some inputs) up to 1 MiB of zeros more: a length the stream reader
//! trusts before its checksum would read into them (an allocation past
//! `-malloc_limit_mb` is a crash). And the readers must agree: a file that
//! opens by ranges and verifies reads in order to the same batches and its
//! footer, and a stream that reads to a valid footer verifies.
//!
//! Run (stable toolchain, nightly features unlocked):
//! `cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run lodt_stream -- -max_total_time=600`
//! (`seeds/lodt_stream/` holds the spec's vectors; `campaign.py lodt_stream`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use lodt::format::{LodtFile, StreamReader};
use lodt::Batch;
use std::io::Read;

mod reseal;
use reseal::fix_crcs;

/// `data` in reads of at most `step` bytes, then `tail` zero bytes.
struct Chunked<'a> {
    data: &'a [u8],
    step: usize,
    tail: u64,
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.data.is_empty() {
            let n = buf.len().min(self.step).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            return Ok(n);
        }
        let n = buf
            .len()
            .min(usize::try_from(self.tail).unwrap_or(usize::MAX));
        buf[..n].fill(0);
        self.tail -= n as u64;
        Ok(n)
    }
}

/// The batches of `data` read in order (at most 256), and whether the
/// stream ended with a valid footer.
fn stream(data: &[u8], step: usize, tail: u64) -> (Vec<Batch>, bool) {
    let reader = Chunked { data, step, tail };
    let Ok(mut r) = StreamReader::try_new(reader) else {
        return (Vec::new(), false);
    };
    let _ = (r.version(), r.metadata().len(), r.position());
    let mut batches = Vec::new();
    for _ in 0..256 {
        match r.next() {
            Some(Ok(b)) => {
                for (_, t) in b.iter() {
                    let _ = (t.as_bytes().len(), t.lod().to_offsets(), t.shape());
                }
                batches.push(b);
            }
            Some(Err(e)) => {
                let _ = e.to_string();
                return (batches, false);
            }
            None => return (batches, true),
        }
    }
    (batches, false)
}

/// Whether two batches hold the same tensors, byte for byte (not `==`,
/// which compares float values: NaN is not NaN).
fn same(a: &Batch, b: &Batch) -> bool {
    a.len() == b.len()
        && a.metadata() == b.metadata()
        && a.iter().zip(b.iter()).all(|((na, ta), (nb, tb))| {
            na == nb
                && ta.dtype() == tb.dtype()
                && ta.shape() == tb.shape()
                && ta.lod().to_offsets() == tb.lod().to_offsets()
                && ta.as_bytes() == tb.as_bytes()
        })
}

fn check(data: &[u8]) {
    let step = 1 + data.len() % 97 * 31;
    // Zeros after the data for one input in four (a cut file followed by
    // more bytes, or a pipe that goes on).
    let tail = if data.len() % 4 == 1 { 1 << 20 } else { 0 };
    let (batches, complete) = stream(data, step, tail);
    let verified = LodtFile::from_bytes(data)
        .ok()
        .filter(|f| f.num_batches() <= 256 && f.verify().is_ok());
    if let Some(file) = &verified {
        // A file `verify` accepts reads in order, to its footer, as the
        // same batches (unless zeros follow it: then the end is an error).
        if tail == 0 {
            assert!(complete, "verify accepts a file the stream reader refuses");
        }
        assert_eq!(batches.len(), file.num_batches(), "batch counts differ");
        for (k, b) in batches.iter().enumerate() {
            let by_range = file.read_batch(k).expect("a verified batch reads");
            assert!(same(b, &by_range), "batch {k} differs between the readers");
        }
    } else if complete && tail == 0 {
        // A stream read to a valid footer is a file that verifies.
        let file = LodtFile::from_bytes(data).expect("a complete stream opens by ranges");
        assert!(
            file.verify().is_ok(),
            "the stream reader accepts a file verify refuses"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some(fixed) = fix_crcs(data) {
        check(&fixed);
    }
});
