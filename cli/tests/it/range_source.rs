//! The `.lodt` reader reads through a `RangeSource`: at open the header, the
//! footer and the index; then one batch's section when the batch is touched,
//! never another batch's bytes. Positional reads turn a file truncated
//! underneath into an error, not a signal.

use lodt::buffer::Buffer;
use lodt::format::{
    self, Advice, LodtFile, MemorySource, Pattern, RangeSource, ReadOptions, Writer,
};
use lodt::{Batch, Lod, LodTensor};
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// A source that records every range asked of it, and every hint.
struct Counting {
    inner: MemorySource,
    reads: Mutex<Vec<Range<u64>>>,
    calls: Mutex<usize>,
    hints: Mutex<Vec<(Range<u64>, Pattern)>>,
}

impl Counting {
    fn new(bytes: &[u8]) -> Arc<Self> {
        Arc::new(Counting {
            inner: MemorySource::new(Arc::new(bytes.to_vec()), "x"),
            reads: Mutex::new(Vec::new()),
            calls: Mutex::new(0),
            hints: Mutex::new(Vec::new()),
        })
    }

    fn take_hints(&self) -> Vec<(Range<u64>, Pattern)> {
        std::mem::take(&mut *self.hints.lock().unwrap())
    }
}

impl RangeSource for Counting {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_ranges(&self, ranges: &[Range<u64>]) -> std::io::Result<Vec<Buffer>> {
        self.reads.lock().unwrap().extend(ranges.iter().cloned());
        *self.calls.lock().unwrap() += 1;
        self.inner.read_ranges(ranges)
    }
    fn will_read(&self, ranges: &[Range<u64>], pattern: Pattern) {
        let mut hints = self.hints.lock().unwrap();
        hints.extend(ranges.iter().map(|r| (r.clone(), pattern)));
    }
    fn describe(&self) -> String {
        "counting".into()
    }
}

fn batch(k: u64) -> Batch {
    let n = 1 + (k % 7) as usize;
    let lod = Lod::try_from_lengths(&[vec![1, n as u64]]).unwrap();
    let t = LodTensor::from_vec(vec![k as i64; n + 1], vec![n + 1], lod).unwrap();
    Batch::try_from_tensors([("ids", t)]).unwrap()
}

/// 1000 batches in a file of major version `major`.
fn thousand_batches(major: u16) -> Vec<u8> {
    let options = format::WriteOptions {
        format_version: Some(format::Version { major, minor: 0 }),
        ..Default::default()
    };
    let meta = [("name".into(), "counted".into())].into();
    let mut w = Writer::try_new_with(Vec::new(), meta, options).unwrap();
    for k in 0..1000 {
        w.write(&batch(k)).unwrap();
    }
    w.finish().unwrap()
}

/// Merges ranges into a sorted list of disjoint ranges.
fn union(mut ranges: Vec<Range<u64>>) -> Vec<Range<u64>> {
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::new();
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

#[test]
fn reading_batch_k_reads_the_header_the_footer_and_batch_k_only() {
    for major in [1, 2] {
        reading_batch_k_in(major);
    }
}

/// In 2.0 the first batch read also reads the head of the batch that holds
/// the schema (batch 0), once, in one read (of at most 16 KiB).
fn reading_batch_k_in(major: u16) {
    let bytes = thousand_batches(major);
    let reference = LodtFile::from_bytes(&bytes).unwrap();
    let first = reference.batch_range(0).unwrap().start; // end of the header
    let last = reference.batch_range(999).unwrap().end; // start of the footer
    let k = 617;
    let section = reference.batch_range(k).unwrap();

    let source = Counting::new(&bytes);
    let file = LodtFile::from_source(source.clone()).unwrap();
    let opened = union(source.reads.lock().unwrap().clone());
    assert_eq!(
        opened,
        vec![0..first, last..bytes.len() as u64],
        "open reads the header and the footer, index and trailer"
    );
    assert!(*source.calls.lock().unwrap() <= 4);

    source.reads.lock().unwrap().clear();
    let got = file.read_batch(k).unwrap();
    assert_eq!(got, batch(k as u64));
    let mut reads = source.reads.lock().unwrap().clone();
    if major == 2 {
        let head = reference.batch_range(0).unwrap();
        assert_eq!(reads.len(), 2, "{reads:?}");
        assert_eq!(reads[1], head.start..head.end.min(head.start + (16 << 10)));
        reads.truncate(1);
    }
    assert_eq!(reads, vec![section.clone()]);
    source.reads.lock().unwrap().clear();
    file.read_batch(k + 1).unwrap();
    let next = reference.batch_range(k + 1).unwrap();
    assert_eq!(*source.reads.lock().unwrap(), vec![next]);

    // Every read of one batch, verification included, stays in its section.
    source.reads.lock().unwrap().clear();
    file.verify().unwrap();
    let reads = source.reads.lock().unwrap().clone();
    if major == 1 {
        assert_eq!(reads.len(), 1000, "each batch read once");
        for (j, r) in reads.iter().enumerate() {
            assert_eq!(*r, reference.batch_range(j).unwrap());
        }
    } else {
        // `verify` reads a 2.0 file's batches a second time (to decode the
        // compressed ones): every read is still one whole section.
        let sections: Vec<_> = (0..1000)
            .map(|j| reference.batch_range(j).unwrap())
            .collect();
        assert!(reads.len() >= 1000, "{}", reads.len());
        assert!(reads.iter().all(|r| sections.contains(r)));
        for s in &sections {
            assert!(reads.contains(s), "{s:?} not read");
        }
    }
}

#[test]
fn positional_reads_match_the_map_and_copy_each_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.lodt");
    std::fs::write(&path, thousand_batches(2)).unwrap();
    let mapped = LodtFile::open(&path).unwrap();
    let pread = LodtFile::open_with(
        &path,
        &ReadOptions {
            mmap: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(pread.storage().is_none());
    assert_eq!(pread.num_batches(), 1000);
    for k in [0, 1, 500, 999] {
        assert_eq!(pread.read_batch(k).unwrap(), mapped.read_batch(k).unwrap());
    }
    let report = pread.verify().unwrap();
    assert_eq!(report.batches, 1000);
    // A tensor read with positional reads owns its batch's copy: it outlives
    // the file and the file's removal.
    let t = pread.batch(3).unwrap().tensor("ids").unwrap();
    drop(pread);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(t.as_slice::<i64>().unwrap(), &[3; 5]);
}

#[test]
fn a_file_truncated_underneath_positional_reads_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.lodt");
    std::fs::write(&path, thousand_batches(2)).unwrap();
    let file = LodtFile::open_with(
        &path,
        &ReadOptions {
            mmap: false,
            ..Default::default()
        },
    )
    .unwrap();
    let keep = file.batch_range(10).unwrap().end;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(keep)
        .unwrap();
    assert_eq!(file.read_batch(3).unwrap(), batch(3));
    let err = file.read_batch(500).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("reading batch 500"), "{text}");
    assert!(text.contains("t.lodt"), "{text}");
    assert!(file.verify().is_err());
}

#[test]
fn lodt_verify_no_mmap_on_a_file_truncated_while_verifying_is_an_error_not_a_signal() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.lodt");
    // 48 batches of 1 MiB.
    let mut w = Writer::create(&path, Default::default()).unwrap();
    for k in 0..48u8 {
        let t = LodTensor::from_vec(vec![k; 1 << 20], vec![1 << 20], Lod::empty()).unwrap();
        w.write(&Batch::try_from_tensors([("x", t)]).unwrap())
            .unwrap();
    }
    w.finish().unwrap();
    for delay_ms in [0u64, 20, 60] {
        let copy = dir.path().join(format!("copy{delay_ms}.lodt"));
        std::fs::copy(&path, &copy).unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_lodt"))
            .args(["verify", "--no-mmap"])
            .arg(&copy)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&copy)
            .unwrap()
            .set_len(4 << 20)
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.signal(), None, "killed by a signal");
        let code = out.status.code().unwrap();
        // Truncated before or during the run: a clear error (exit 1); the
        // verification may also have finished first (exit 0).
        assert!(code == 0 || code == 1, "exit {code}");
        if code == 1 {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(&format!("copy{delay_ms}.lodt")), "{err}");
        }
    }
    // And the library: a positional reader whose file shrank reports it.
    let file = LodtFile::open_with(
        &path,
        &ReadOptions {
            mmap: false,
            ..Default::default()
        },
    )
    .unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    assert!(matches!(
        file.verify().unwrap_err(),
        format::FormatError::Io { .. }
    ));
}

#[test]
fn the_access_hint_follows_the_api_used() {
    let bytes = thousand_batches(2);
    let reference = LodtFile::from_bytes(&bytes).unwrap();
    let range = |k: usize| reference.batch_range(k).unwrap();
    let footer = range(999).end;
    let source = Counting::new(&bytes);
    let file = LodtFile::from_source(source.clone()).unwrap();
    assert_eq!(file.advice(), Advice::Auto);
    assert!(source.take_hints().is_empty(), "opening gives no hint");

    // Random access: that batch's section only, on its first touch only.
    for k in [617, 3, 0, 998, 5] {
        file.batch(k).unwrap();
        assert_eq!(
            source.take_hints(),
            vec![(range(k), Pattern::Random)],
            "batch {k}"
        );
        file.read_batch(k).unwrap();
        assert!(source.take_hints().is_empty(), "batch {k} again");
    }
    // Batches touched in order are a scan: read ahead (16 MiB, here the
    // rest of the file from batch 7 on).
    file.batch(9).unwrap();
    assert_eq!(source.take_hints(), vec![(range(9), Pattern::Random)]);
    file.batch(10).unwrap();
    assert_eq!(
        source.take_hints(),
        vec![(range(10).start..footer, Pattern::Sequential)]
    );
    file.batch(11).unwrap();
    assert!(source.take_hints().is_empty(), "already asked for");

    // Iterating and verifying are scans.
    let file = LodtFile::from_source(source.clone()).unwrap();
    assert_eq!(file.batches().count(), 1000);
    assert_eq!(
        source.take_hints(),
        vec![(range(0).start..footer, Pattern::Sequential)]
    );
    let file = LodtFile::from_source(source.clone()).unwrap();
    file.verify().unwrap();
    assert_eq!(
        source.take_hints(),
        vec![(range(0).start..footer, Pattern::Sequential)]
    );

    // An explicit advice wins over the API's.
    let file = LodtFile::from_source(source.clone())
        .unwrap()
        .with_advice(Advice::Sequential);
    file.batch(500).unwrap();
    assert_eq!(
        source.take_hints(),
        vec![(range(500).start..footer, Pattern::Sequential)]
    );
    let file = LodtFile::from_source(source.clone())
        .unwrap()
        .with_advice(Advice::Random);
    for b in file.batches().take(3) {
        b.unwrap();
    }
    assert_eq!(
        source.take_hints(),
        (0..3)
            .map(|k| (range(k), Pattern::Random))
            .collect::<Vec<_>>()
    );
    let file = LodtFile::from_source(source.clone())
        .unwrap()
        .with_advice(Advice::Off);
    file.verify().unwrap();
    file.batch(1).unwrap();
    assert!(source.take_hints().is_empty());
}

#[test]
fn a_scan_reads_16_mib_ahead_and_asks_again_when_half_is_left() {
    // 40 batches of 1 MiB.
    let mut w = Writer::try_new(Vec::new(), Default::default()).unwrap();
    for k in 0..40u8 {
        let t = LodTensor::from_vec(vec![k; 1 << 20], vec![1 << 20], Lod::empty()).unwrap();
        w.write(&Batch::try_from_tensors([("x", t)]).unwrap())
            .unwrap();
    }
    let bytes = w.finish().unwrap();
    let source = Counting::new(&bytes);
    let file = LodtFile::from_source(source.clone()).unwrap();
    let mut hints = Vec::new();
    for (k, b) in file.batches().enumerate() {
        b.unwrap();
        for (r, p) in source.take_hints() {
            assert_eq!(p, Pattern::Sequential);
            hints.push((k, r));
        }
    }
    // Contiguous, in order, covering every batch, each asked before its batch.
    let start = file.batch_range(0).unwrap().start;
    assert_eq!(hints[0], (0, start..start + (16 << 20)));
    for w in hints.windows(2) {
        assert_eq!(w[0].1.end, w[1].1.start);
    }
    assert_eq!(
        hints.last().unwrap().1.end,
        file.batch_range(39).unwrap().end
    );
    for j in 0..40 {
        let at = file.batch_range(j).unwrap().start;
        assert!(
            hints.iter().any(|(k, r)| *k <= j && r.contains(&at)),
            "batch {j} asked for before it is touched"
        );
    }
    assert!(hints.len() >= 4 && hints.len() <= 8, "{hints:?}");
}

#[test]
fn every_advice_reads_the_same_through_a_map_and_positional_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lodt");
    std::fs::write(&path, thousand_batches(2)).unwrap();
    for mmap in [true, false] {
        for advice in [
            Advice::Auto,
            Advice::Random,
            Advice::Sequential,
            Advice::Off,
        ] {
            let file = LodtFile::open_with(
                &path,
                &ReadOptions {
                    mmap,
                    advice,
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!(file.advice(), advice);
            for k in [999, 0, 1, 2, 500] {
                assert_eq!(file.read_batch(k).unwrap(), batch(k as u64));
            }
            assert_eq!(file.batches().count(), 1000);
            assert_eq!(file.verify().unwrap().batches, 1000);
        }
    }
}

/// A 2.0 schema longer than the first read of its head (16 KiB: here 600
/// tensors with long names) is read whole by a second read, and the batch
/// read through the source equals the batch in memory.
#[test]
fn a_schema_longer_than_the_first_read_of_its_head_takes_a_second_read() {
    let tensors: Vec<(String, LodTensor)> = (0..600i32)
        .map(|i| {
            let lod = Lod::try_from_lengths(&[vec![2]]).unwrap();
            let t = LodTensor::from_vec(vec![i; 2], vec![2], lod).unwrap();
            (format!("a_rather_long_tensor_name_number_{i:04}"), t)
        })
        .collect();
    let b = Batch::try_from_tensors(tensors).unwrap();
    let mut w = Writer::try_new_with(Vec::new(), Default::default(), Default::default()).unwrap();
    w.write(&b).unwrap();
    w.write(&b).unwrap();
    let bytes = w.finish().unwrap();
    let reference = LodtFile::from_bytes(&bytes).unwrap();
    assert_eq!(reference.version().major, 2);
    let head = reference.batch_range(0).unwrap();
    let source = Counting::new(&bytes);
    let file = LodtFile::from_source(source.clone()).unwrap();
    source.reads.lock().unwrap().clear();
    assert_eq!(file.read_batch(1).unwrap(), b);
    let reads = source.reads.lock().unwrap().clone();
    // Batch 1, then batch 0's first 16 KiB, then its whole (longer) head.
    assert_eq!(reads.len(), 3, "{reads:?}");
    assert_eq!(reads[0], reference.batch_range(1).unwrap());
    assert_eq!(reads[1], head.start..head.start + (16 << 10));
    assert!(reads[2].start == head.start && reads[2].end - reads[2].start > 16 << 10);
}
