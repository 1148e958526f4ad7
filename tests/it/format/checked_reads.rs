//! Every batch read through a source that copies its bytes (positional
//! reads, an object store, its disk cache) is checked against the batch's
//! checksum table, bodies included, before any tensor of it is handed out
//! (`spec/FORMAT.md` §7.1); a memory map is checked lazily unless asked
//! (`check_bodies`). A damaged copy is an error naming the source and the
//! batch; a damaged copy the source kept (a cache entry) is dropped and read
//! again, once.

use lodt::buffer::{AlignedBytes, Buffer};
use lodt::format::{FilePart, FormatError, LodtFile, MemorySource, RangeSource, ReadOptions};
use lodt::{Batch, Lod, LodTensor};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Batch `k`: a 2-level LoD tensor of float32 values and an int64 tensor.
fn batch(k: usize) -> Batch {
    let lod = Lod::try_from_lengths(&[vec![2, 1], vec![3, 2, 4]]).unwrap();
    let x = LodTensor::from_vec(
        (0..18).map(|i| (k * 100 + i) as f32 + 0.5).collect(),
        vec![9, 2],
        lod,
    )
    .unwrap();
    let ids = LodTensor::from_vec(vec![k as i64; 4], vec![4], Default::default()).unwrap();
    Batch::try_from_tensors([("x", x), ("ids", ids)]).unwrap()
}

fn file_bytes(n: usize) -> Vec<u8> {
    let batches: Vec<Batch> = (0..n).map(batch).collect();
    lodt::format::to_bytes(batches.iter(), Default::default()).unwrap()
}

/// [`file_bytes`] in format 1.0.
fn file_bytes_v1(n: usize) -> Vec<u8> {
    let options = lodt::format::WriteOptions::for_codec(Some("1.0"), "none").unwrap();
    let mut w =
        lodt::format::Writer::try_new_with(Vec::new(), Default::default(), options).unwrap();
    for k in 0..n {
        w.write(&batch(k)).unwrap();
    }
    w.finish().unwrap()
}

/// The file offsets of tensor `name`'s body and of its LoD level 0 (empty
/// without a LoD) in batch `k`.
fn parts(bytes: &[u8], k: usize, name: &str) -> (Range<usize>, Range<usize>) {
    let file = LodtFile::from_bytes(bytes).unwrap();
    let b = file.tensor_buffers(k, name).unwrap();
    (b.body, b.lod.first().cloned().unwrap_or(0..0))
}

/// A source over bytes in memory that copies what it reads (no
/// [`RangeSource::whole`]) and flips byte `flip` in the copies made by the
/// reads numbered in `bad_reads` (counting the reads that cover it, from 0;
/// `None`: all of them). With `keeps`, it says it kept a copy it can drop.
struct Flaky {
    inner: MemorySource,
    flip: u64,
    bad_reads: Option<Vec<usize>>,
    keeps: bool,
    covering: AtomicUsize,
    discarded: AtomicUsize,
    reads: Mutex<Vec<Range<u64>>>,
}

impl Flaky {
    fn new(bytes: &[u8], flip: usize, bad_reads: Option<Vec<usize>>, keeps: bool) -> Arc<Self> {
        Arc::new(Flaky {
            inner: MemorySource::new(Arc::new(bytes.to_vec()), "flaky://x.lodt"),
            flip: flip as u64,
            bad_reads,
            keeps,
            covering: AtomicUsize::new(0),
            discarded: AtomicUsize::new(0),
            reads: Mutex::new(Vec::new()),
        })
    }

    fn reads_of(&self, r: &Range<u64>) -> usize {
        self.reads
            .lock()
            .unwrap()
            .iter()
            .filter(|x| *x == r)
            .count()
    }
}

impl RangeSource for Flaky {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_ranges(&self, ranges: &[Range<u64>]) -> std::io::Result<Vec<Buffer>> {
        self.reads.lock().unwrap().extend(ranges.iter().cloned());
        let got = self.inner.read_ranges(ranges)?;
        Ok(ranges
            .iter()
            .zip(got)
            .map(|(r, b)| {
                let mut copy = AlignedBytes::from_slice(b.as_slice());
                if r.contains(&self.flip) {
                    let n = self.covering.fetch_add(1, Ordering::SeqCst);
                    if self.bad_reads.as_ref().is_none_or(|bad| bad.contains(&n)) {
                        copy.as_mut_slice()[(self.flip - r.start) as usize] ^= 0x10;
                    }
                }
                Buffer::from_storage(Arc::new(copy))
            })
            .collect())
    }
    fn discard(&self, _range: &Range<u64>) -> bool {
        self.discarded.fetch_add(1, Ordering::SeqCst);
        self.keeps
    }
    fn describe(&self) -> String {
        "flaky://x.lodt".into()
    }
}

/// Asserts that `err` is a damaged read of `flaky://x.lodt` in batch `k`,
/// in `part` of tensor `tensor`.
fn assert_bad_read(err: &FormatError, k: u64, tensor: &str, part: FilePart) {
    let msg = err.to_string();
    assert!(
        msg.starts_with("flaky://x.lodt: checksum mismatch in batch"),
        "{msg}"
    );
    match err {
        FormatError::BadRead { file, source } => {
            assert_eq!(file, "flaky://x.lodt");
            let at = source.location().expect("a location");
            assert_eq!(
                (at.batch, at.tensor.as_deref(), at.part),
                (Some(k), Some(tensor), part),
                "{msg}"
            );
        }
        other => panic!("expected a bad read, got {other:?}"),
    }
}

#[test]
fn a_flipped_body_byte_in_a_copy_is_an_error_naming_the_source_and_batch() {
    let bytes = file_bytes(3);
    let (body, _) = parts(&bytes, 1, "x");
    // A byte in the middle of batch 1's float body.
    let flip = body.start + 37;
    let src = Flaky::new(&bytes, flip, None, false);
    let file = LodtFile::from_source(src.clone()).unwrap();
    let good = LodtFile::from_bytes(&bytes).unwrap();
    assert_eq!(file.read_batch(0).unwrap(), good.read_batch(0).unwrap());
    let err = file.batch(1).unwrap_err();
    assert_bad_read(&err, 1, "x", FilePart::Body);
    assert_bad_read(&file.read_batch(1).unwrap_err(), 1, "x", FilePart::Body);
    assert!(file.tensor_buffers(1, "ids").is_err(), "no tensor of it");
    assert_eq!(file.read_batch(2).unwrap(), good.read_batch(2).unwrap());
    // Nothing was kept, so nothing was read again: one read per touch.
    let r = file.batch_range(1).unwrap();
    assert_eq!(src.reads_of(&r), 3);
    // `verify` finds it too, reading each batch once.
    let err = file.verify().unwrap_err().to_string();
    assert!(err.contains("batch 1") && err.contains("body"), "{err}");
}

#[test]
fn a_flip_in_the_last_body_byte_of_a_batch_is_caught() {
    let bytes = file_bytes(2);
    // "ids" is written after "x": its last byte is the batch's last body byte.
    let (body, _) = parts(&bytes, 0, "ids");
    let src = Flaky::new(&bytes, body.end - 1, None, false);
    let file = LodtFile::from_source(src).unwrap();
    assert_bad_read(&file.batch(0).unwrap_err(), 0, "ids", FilePart::Body);
    file.batch(1).unwrap();
}

#[test]
fn every_read_of_a_copy_is_checked_not_only_the_first() {
    let bytes = file_bytes(2);
    let (body, lod) = parts(&bytes, 1, "x");
    // The body damaged in the second read only.
    let file = LodtFile::from_source(Flaky::new(&bytes, body.start, Some(vec![1]), false)).unwrap();
    file.batch(1).unwrap();
    assert_bad_read(&file.batch(1).unwrap_err(), 1, "x", FilePart::Body);
    file.batch(1).unwrap();
    // The LoD damaged in the second read: the batch was parsed (and its LoD
    // checked) from the first copy; the second copy's LoD is checked too.
    let file =
        LodtFile::from_source(Flaky::new(&bytes, lod.start + 8, Some(vec![1]), false)).unwrap();
    file.batch(1).unwrap();
    assert_bad_read(&file.batch(1).unwrap_err(), 1, "x", FilePart::Lod(0));
    assert_eq!(
        file.read_batch(1).unwrap(),
        LodtFile::from_bytes(&bytes).unwrap().read_batch(1).unwrap()
    );
}

#[test]
fn a_damaged_copy_the_source_kept_is_dropped_and_read_again_once() {
    let bytes = file_bytes(2);
    let (body, _) = parts(&bytes, 1, "x");
    let good = LodtFile::from_bytes(&bytes).unwrap().read_batch(1).unwrap();
    // Damaged once (a bad cache entry), then fetched whole: the batch is
    // right, after one drop and one more read.
    let src = Flaky::new(&bytes, body.start + 5, Some(vec![0]), true);
    let file = LodtFile::from_source(src.clone()).unwrap();
    let r = file.batch_range(1).unwrap();
    assert_eq!(file.read_batch(1).unwrap(), good);
    assert_eq!(src.discarded.load(Ordering::SeqCst), 1);
    assert_eq!(src.reads_of(&r), 2);
    // Damaged every time: dropped and read again once, then an error.
    let src = Flaky::new(&bytes, body.start + 5, None, true);
    let file = LodtFile::from_source(src.clone()).unwrap();
    assert_bad_read(&file.batch(1).unwrap_err(), 1, "x", FilePart::Body);
    assert_eq!(src.discarded.load(Ordering::SeqCst), 1);
    assert_eq!(src.reads_of(&r), 2);
    // A damaged header is read again too (any failed check of the copy).
    let hdr = r.start as usize + 20;
    let src = Flaky::new(&bytes, hdr, Some(vec![0]), true);
    let file = LodtFile::from_source(src.clone()).unwrap();
    assert_eq!(file.read_batch(1).unwrap(), good);
    assert_eq!(src.discarded.load(Ordering::SeqCst), 1);
}

#[test]
fn verify_and_check_batches_read_each_batch_once() {
    // 1.0: `verify` reads a 2.0 file's batches a second time (to find the
    // compressed ones and decode them), which this count would see.
    let bytes = file_bytes_v1(4);
    let src = Flaky::new(&bytes, 0, Some(vec![]), false);
    let file = LodtFile::from_source(src.clone()).unwrap();
    file.check_batches().unwrap();
    let report = file.verify().unwrap();
    assert_eq!(report.batches, 4);
    for k in 0..4 {
        // Once by check_batches, once by verify: no read is repeated to check.
        assert_eq!(src.reads_of(&file.batch_range(k).unwrap()), 2, "batch {k}");
    }
}

/// `bytes` written to a file with byte `at` flipped.
fn damaged_file(dir: &std::path::Path, bytes: &[u8], at: usize) -> std::path::PathBuf {
    let mut bad = bytes.to_vec();
    bad[at] ^= 0x01;
    let path = dir.join("damaged.lodt");
    std::fs::write(&path, bad).unwrap();
    path
}

#[test]
fn local_reads_a_map_lazily_unless_asked_and_positional_reads_always() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = file_bytes(3);
    let (body, _) = parts(&bytes, 2, "x");
    let path = damaged_file(dir.path(), &bytes, body.start + 3);
    let x = |f: &LodtFile| f.batch(2).and_then(|b| b.tensor("x"));
    // A map, by default: the body is not read, and the damaged value shows.
    let mapped = LodtFile::open(&path).unwrap();
    assert!(!mapped.check_bodies());
    let got = x(&mapped).unwrap();
    let want = LodtFile::from_bytes(&bytes)
        .unwrap()
        .batch(2)
        .unwrap()
        .tensor("x")
        .unwrap();
    assert_ne!(got, want);
    // A map with `check_bodies`: an error on the first touch, every touch.
    let checked = ReadOptions {
        check_bodies: true,
        ..Default::default()
    };
    let mapped = LodtFile::open_with(&path, &checked).unwrap();
    for _ in 0..2 {
        let err = x(&mapped).unwrap_err();
        let at = err.location().expect("a location");
        assert!(
            matches!(err, FormatError::BadRead { .. })
                && at.batch == Some(2)
                && at.part == FilePart::Body,
            "{err}"
        );
        let named = format!("{}: checksum mismatch in batch 2", path.display());
        assert!(err.to_string().starts_with(&named), "{err}");
    }
    mapped.batch(0).unwrap();
    // Positional reads: always checked, the error names the file.
    let pread = ReadOptions {
        mmap: false,
        ..Default::default()
    };
    let file = LodtFile::open_with(&path, &pread).unwrap();
    let err = x(&file).unwrap_err();
    assert!(matches!(err, FormatError::BadRead { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("{}: checksum mismatch in batch 2", path.display())),
        "{msg}"
    );
    file.batch(1).unwrap();
    // Read into memory: checked on first touch.
    let err = x(&LodtFile::read(&path).unwrap()).unwrap_err();
    let named = format!(
        "{}: checksum mismatch in batch 2, tensor \"x\", body",
        path.display()
    );
    assert!(err.to_string().starts_with(&named), "{err}");
}

#[test]
fn an_undamaged_file_reads_the_same_every_way() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = file_bytes(5);
    let path = dir.path().join("ok.lodt");
    std::fs::write(&path, &bytes).unwrap();
    let want: Vec<Batch> = (0..5).map(batch).collect();
    for (mmap, check_bodies) in [(true, false), (true, true), (false, false), (false, true)] {
        let options = ReadOptions {
            mmap,
            check_bodies,
            ..Default::default()
        };
        let file = LodtFile::open_with(&path, &options).unwrap();
        for round in 0..2 {
            for (k, b) in want.iter().enumerate() {
                assert_eq!(&file.read_batch(k).unwrap(), b, "{options:?} round {round}");
            }
        }
        file.verify().unwrap();
    }
}
