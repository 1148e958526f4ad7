//! Memory held by the readers of compressed (2.0) data, counted in bytes by
//! this binary's allocator (never by time): the loader's batch cache is
//! bounded by its byte budget, so is the dataset's random-access cache,
//! `take` and `sequence` without that cache decode each batch once per call
//! and keep none of it, `verify` holds one batch's decode, and
//! memory refused (a cap, simulated by the allocator) is reported as out of
//! memory, never as damage.
//!
//! The allocator counts all threads, so the tests take turns (`serial`).

use lodt::dataset::{
    Batching, Dataset, DatasetWriter, DatasetWriterOptions, Loader, LoaderOptions, Mixture,
    ShuffleOptions,
};
use lodt::format::{Compression, LodtFile, WriteOptions, Writer};
use lodt::{Batch, Lod, LodTensor};
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Allocations of at least this many bytes are "large": counted in
/// [`LARGE_BYTES`] and subject to [`CAP`].
const LARGE: usize = 256 << 10;

/// Live bytes, their peak since [`reset_peak`], the bytes of every large
/// allocation made so far, and the cap on live bytes (usize::MAX: none) a
/// large allocation may not pass.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LARGE_BYTES: AtomicUsize = AtomicUsize::new(0);
static CAP: AtomicUsize = AtomicUsize::new(usize::MAX);

struct Counting;

impl Counting {
    fn admit(size: usize) -> bool {
        if size >= LARGE {
            if LIVE.load(Ordering::Relaxed).saturating_add(size) > CAP.load(Ordering::Relaxed) {
                return false;
            }
            LARGE_BYTES.fetch_add(size, Ordering::Relaxed);
        }
        let now = LIVE.fetch_add(size, Ordering::Relaxed) + size;
        PEAK.fetch_max(now, Ordering::Relaxed);
        true
    }
}

// SAFETY: forwards to the system allocator, counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !Self::admit(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !Self::admit(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn serial() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Resets the peak to the bytes live now, and returns them.
fn reset_peak() -> usize {
    let now = live();
    PEAK.store(now, Ordering::Relaxed);
    now
}

/// The peak since `base` was taken, above it.
fn peak_above(base: usize) -> usize {
    PEAK.load(Ordering::Relaxed).saturating_sub(base)
}

fn large_bytes() -> usize {
    LARGE_BYTES.load(Ordering::Relaxed)
}

const MIB: usize = 1 << 20;

/// A batch of `sequences` sequences of int32 tokens, `bytes` of them in all
/// (well compressible), sequence `i` of batch `b` starting with value
/// `b * 1000 + i`.
fn batch(b: usize, sequences: usize, bytes: usize) -> Batch {
    let per = bytes / 4 / sequences;
    let values: Vec<i32> = (0..sequences)
        .flat_map(|i| {
            let first = (b * 1000 + i) as i32;
            std::iter::once(first).chain(std::iter::repeat_n(7, per - 1))
        })
        .collect();
    let n = values.len();
    let lod = Lod::try_from_lengths(&[vec![per as u64; sequences]]).unwrap();
    Batch::try_from_tensors([("tokens", LodTensor::from_vec(values, vec![n], lod).unwrap())])
        .unwrap()
}

/// The first token of each sequence of `b` (what identifies it).
fn firsts(b: &Batch) -> Vec<i32> {
    let t = b.get("tokens").unwrap();
    let values = t.as_slice::<i32>().unwrap();
    let offsets = t.lod().to_offsets().remove(0);
    offsets[..offsets.len() - 1]
        .iter()
        .map(|&o| values[o as usize])
        .collect()
}

/// A dataset of `batches` batches of `sequences` sequences, `bytes` each,
/// compressed with zstd or not.
fn dataset(dir: &Path, batches: usize, sequences: usize, bytes: usize, zstd: bool) -> Arc<Dataset> {
    let options = DatasetWriterOptions {
        compression: if zstd {
            Compression::Zstd { level: 1 }
        } else {
            Compression::None
        },
        ..Default::default()
    };
    let mut w = DatasetWriter::create(dir, options).unwrap();
    for b in 0..batches {
        w.write(&batch(b, sequences, bytes)).unwrap();
    }
    w.finish().unwrap();
    Arc::new(Dataset::open(dir).unwrap())
}

/// `dataset` with its random-access cache off.
fn uncached(dataset: Arc<Dataset>) -> Arc<Dataset> {
    let dataset = Arc::try_unwrap(dataset).unwrap();
    Arc::new(dataset.with_cache_bytes(0))
}

/// One epoch of a shuffled loader with cache budget `cache_bytes`: the peak
/// bytes held above what was live before, and the first tokens delivered.
fn epoch(dataset: &Arc<Dataset>, cache_bytes: usize) -> (usize, Vec<i32>) {
    let options = LoaderOptions {
        batching: Batching::Sequences(4),
        shuffle: Some(ShuffleOptions {
            seed: 3,
            buffer: 64,
        }),
        prefetch: 0,
        cache_bytes,
        ..Default::default()
    };
    let base = reset_peak();
    let loader = Loader::new(dataset.clone(), options).unwrap();
    let mut seen = Vec::new();
    for b in loader {
        // Only the first tokens are kept (the mini-batch is dropped).
        seen.extend(firsts(&b.unwrap().batch));
    }
    (peak_above(base), seen)
}

#[test]
fn a_compressed_epoch_holds_at_most_the_cache_budget() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    // 24 batches of 512 KiB decoded each (a few KiB stored).
    const BATCH: usize = 512 << 10;
    let data = dataset(dir.path(), 24, 16, BATCH, true);
    let mut want: Vec<i32> = (0..24)
        .flat_map(|b| (0..16).map(move |i| b * 1000 + i))
        .collect();
    want.sort_unstable();
    for budget in [0usize, BATCH, 5 * BATCH / 2, 6 * BATCH] {
        let (peak, mut seen) = epoch(&data, budget);
        seen.sort_unstable();
        assert_eq!(seen, want, "every sequence once, budget {budget}");
        // The budget (or one batch), the batch being decoded and its
        // scratch, mini-batches and bookkeeping.
        let bound = budget.max(BATCH) + 3 * BATCH + MIB;
        assert!(
            peak <= bound,
            "budget {budget}: the epoch held {peak} bytes (bound {bound})"
        );
    }
    // The default budget (256 MiB) holds the whole dataset here: 12 MiB.
    let (peak, _) = epoch(&data, LoaderOptions::default().cache_bytes);
    assert!((10 * MIB..16 * MIB).contains(&peak), "{peak}");
}

#[test]
fn an_uncompressed_epoch_holds_views_only() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(dir.path(), 40, 16, MIB, false);
    // Mapped batches cost their views: a tiny budget still caches them and
    // the epoch holds next to nothing.
    for budget in [0usize, 64 << 10, 256 << 20] {
        let (peak, seen) = epoch(&data, budget);
        assert_eq!(seen.len(), 640);
        assert!(peak < 2 * MIB, "budget {budget}: {peak}");
    }
}

#[test]
fn the_random_access_cache_holds_at_most_its_budget_and_decodes_once() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    // 6 batches of 32 sequences, 8 MiB decoded each.
    let path = dir.path();
    drop(dataset(path, 6, 32, 8 * MIB, true));
    // A first decode, uncached: this thread's decode scratch is made now,
    // not counted as the cache's below.
    let warm = uncached(Arc::new(Dataset::open(path).unwrap()));
    assert_eq!(firsts(&warm.sequence(0).unwrap()), [0]);
    drop(warm);
    let mut trials = 0;
    for fit in [1usize, 2, 3] {
        let budget = fit * 8 * MIB + MIB;
        let base = live();
        let data = Dataset::open(path).unwrap().with_cache_bytes(budget);
        // Every batch in turn, 32 reads each: one decode per batch.
        for b in 0..6u64 {
            let before = large_bytes();
            for i in 0..32u64 {
                let id = b * 32 + (i * 5) % 32;
                let seq = data.sequence(id).unwrap();
                assert_eq!(firsts(&seq), [(b * 1000 + id % 32) as i32]);
            }
            let decoded = large_bytes() - before;
            // One batch, and the 32 sequences copied out: not 32 decodes.
            assert!(
                decoded <= 8 * MIB + 8 * MIB + MIB,
                "budget {fit} batches, batch {b}: {decoded} bytes allocated"
            );
            // What the dataset keeps: at most its budget.
            let held = live().saturating_sub(base);
            assert!(
                held <= budget + MIB,
                "budget {budget}: the dataset holds {held} bytes"
            );
            trials += 1;
        }
        // Again, the last `fit` batches: no decode at all.
        let before = large_bytes();
        for b in (6 - fit as u64)..6 {
            let got = data.take(&[b * 32, b * 32 + 31]).unwrap();
            assert_eq!(firsts(&got), [(b * 1000) as i32, (b * 1000 + 31) as i32]);
        }
        // The 2 sequences of each take copied twice (out of the batch, into
        // the result): 1 MiB a take, far from one batch's decode (8 MiB).
        let again = large_bytes() - before;
        assert!(
            again <= fit * MIB,
            "budget {fit} batches: {again} bytes allocated"
        );
        drop(data);
        assert!(live().saturating_sub(base) <= MIB);
    }
    assert_eq!(trials, 18);
}

#[test]
fn take_and_sequence_decode_each_batch_once_and_keep_none_of_it() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    // 4 batches of 32 sequences, 8 MiB decoded each; no random-access cache.
    let data = uncached(dataset(dir.path(), 4, 32, 8 * MIB, true));
    let mut trials = 0;
    // 32 ids of one batch, in scrambled order with repeats: one decode.
    for k in 0..4u64 {
        let ids: Vec<u64> = (0..32u64).map(|i| k * 32 + (i * 7 + k) % 32).collect();
        let before = large_bytes();
        let base = reset_peak();
        let got = data.take(&ids).unwrap();
        let decoded = large_bytes() - before;
        // One batch decoded (8 MiB, and its scratch the first time) and the
        // 32 sequences copied twice (out of the batch, into the result).
        assert!(
            decoded <= 4 * 8 * MIB + MIB,
            "batch {k}: {decoded} bytes allocated"
        );
        assert!(
            peak_above(base) <= 4 * 8 * MIB + MIB,
            "batch {k}: peak {}",
            peak_above(base)
        );
        let want: Vec<i32> = ids
            .iter()
            .map(|&id| ((id / 32) * 1000 + id % 32) as i32)
            .collect();
        assert_eq!(firsts(&got), want);
        trials += 1;
    }
    // A few ids of each batch, interleaved: each batch decoded once, and
    // the result holds the sequences taken, not the batches.
    for n in 1..=16u64 {
        let ids: Vec<u64> = (0..4 * n).map(|i| (i % 4) * 32 + (i / 4) * 2).collect();
        let before = large_bytes();
        let base = live();
        let got = data.take(&ids).unwrap();
        let decoded = large_bytes() - before;
        let taken = ids.len() * 8 * MIB / 32;
        // Each batch once, the sequences taken copied twice.
        assert!(
            decoded <= 4 * 8 * MIB + 2 * taken + MIB,
            "{n} per batch: {decoded} bytes allocated"
        );
        let held = live().saturating_sub(base);
        assert!(
            held <= taken + MIB,
            "{n} per batch: the result holds {held} bytes for {taken}"
        );
        let want: Vec<i32> = ids
            .iter()
            .map(|&id| ((id / 32) * 1000 + id % 32) as i32)
            .collect();
        assert_eq!(firsts(&got), want);
        trials += 1;
    }
    // ds[i]: the sequence, not its batch.
    for id in [0u64, 5, 31, 32, 100, 127] {
        let base = live();
        let seq = data.sequence(id).unwrap();
        let held = live().saturating_sub(base);
        assert!(held <= MIB, "sequence {id} holds {held} bytes");
        assert_eq!(firsts(&seq), [((id / 32) * 1000 + id % 32) as i32]);
        trials += 1;
    }
    // A mixture whose ids alternate between its two sources: each source's
    // batch decoded once.
    let other = tempfile::tempdir().unwrap();
    let data2 = uncached(dataset(other.path(), 1, 32, 8 * MIB, true));
    let mixture =
        Mixture::try_new(vec![data.clone(), data2], &[1.0, 1.0], Default::default()).unwrap();
    for n in [2u64, 8, 16, 32] {
        let ids: Vec<u64> = (0..n).flat_map(|i| [i, 128 + i]).collect();
        let before = large_bytes();
        let got = mixture.take(&ids).unwrap();
        let decoded = large_bytes() - before;
        // Each source's batch once, the sequences copied four times.
        assert!(
            decoded <= 2 * 8 * MIB + 3 * n as usize * MIB + MIB,
            "{n}: {decoded}"
        );
        let want: Vec<i32> = (0..n as i32).flat_map(|i| [i, i]).collect();
        assert_eq!(firsts(&got), want);
        trials += 1;
    }
    assert_eq!(trials, 30);
}

/// A 2.0 file of `batches` batches of `bytes` decoded each (int32, byte
/// shuffled, zstd).
fn compressed_file(path: &Path, batches: usize, bytes: usize) {
    let options = WriteOptions {
        compression: Compression::Zstd { level: 1 },
        fsync: false,
        ..Default::default()
    };
    let mut w = Writer::create_with(path, BTreeMap::new(), options).unwrap();
    for b in 0..batches {
        w.write(&batch(b, 4, bytes)).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn verify_holds_one_batch_decode() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.lodt");
    // 2 batches of 72 MiB decoded each (a few hundred KiB stored): larger
    // than the scratch a thread keeps, so the decode streams.
    compressed_file(&path, 2, 72 * MIB);
    let file = LodtFile::open(&path).unwrap();
    assert!(file.file_size() < 4 * MIB as u64, "{}", file.file_size());
    let base = reset_peak();
    let report = file.verify().unwrap();
    assert_eq!(report.batches, 2);
    let peak = peak_above(base);
    // One batch and the stream's chunk; not a batch and its scratch.
    assert!(peak <= 72 * MIB + 4 * MIB, "verify held {peak} bytes");
    // And reading holds one batch too.
    let base = reset_peak();
    let b = file.read_batch(1).unwrap();
    assert_eq!(firsts(&b), [1000, 1001, 1002, 1003]);
    drop(b);
    assert!(
        peak_above(base) <= 96 * MIB + 4 * MIB,
        "{}",
        peak_above(base)
    );
}

#[test]
fn memory_refused_under_a_cap_is_out_of_memory_not_damage() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    // 2 batches of 8 MiB decoded (int32, shuffled: a scratch of 8 MiB too);
    // no random-access cache, so that every read decodes.
    let data = uncached(dataset(dir.path(), 2, 32, 8 * MIB, true));
    let mut trials = 0;
    // Caps that leave no room for the batch, or for the batch but not its
    // scratch: each read fails as out of memory, naming the bytes.
    for extra in [
        0usize,
        MIB,
        4 * MIB,
        7 * MIB,
        8 * MIB + 4096,
        12 * MIB,
        15 * MIB,
    ] {
        for call in 0..5 {
            let cap = live() + extra;
            CAP.store(cap, Ordering::Relaxed);
            let err = match call {
                0 => data.sequence(3).map(|_| ()).unwrap_err(),
                1 => data.take(&[1, 2, 40, 41]).map(|_| ()).unwrap_err(),
                2 => data.read_batch(0, 1).map(|_| ()).unwrap_err(),
                3 => {
                    let options = LoaderOptions {
                        prefetch: 0,
                        ..Default::default()
                    };
                    Loader::new(data.clone(), options)
                        .unwrap()
                        .next()
                        .unwrap()
                        .map(|_| ())
                        .unwrap_err()
                }
                _ => data.verify().map(|_| ()).unwrap_err(),
            };
            CAP.store(usize::MAX, Ordering::Relaxed);
            let text = err.to_string();
            assert!(
                text.contains("out of memory: needed "),
                "cap +{extra}, call {call}: {text}"
            );
            assert!(
                !text.contains("corrupt"),
                "cap +{extra}, call {call}: {text}"
            );
            assert_eq!(
                err.io_kind(),
                Some(std::io::ErrorKind::OutOfMemory),
                "{text}"
            );
            trials += 1;
        }
    }
    // With the memory back, everything reads.
    assert_eq!(firsts(&data.sequence(3).unwrap()), [3]);
    data.verify().unwrap();
    assert_eq!(trials, 35);
}
