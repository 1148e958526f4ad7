//! Sharded dataset benchmarks (issue 14, part 5), on a generated local
//! dataset of token sequences (int32 tokens with a 1-level LoD, 256 to 1792
//! tokens each, 4 KiB on average, and an int64 label), in 8 shards:
//!
//! - `random_access/10k`: 10,000 sequences at random ids through
//!   [`Dataset::sequence`] (locate, open the shard on first touch, check the
//!   batch on first touch, zero-copy slices), summing every token; against
//!   the same reads from the mapped shards directly (`LodtFile`, no dataset
//!   layer) with the ids located in advance;
//! - `epoch/...`: one full epoch through the [`Loader`] (mini-batches of 64
//!   sequences, prefetch thread), shuffled (seed, 16384-sequence buffer) and
//!   in dataset order, summing every token; against reading every batch of
//!   every shard in order (`Dataset::batches`, zero copy).
//!
//! Run: `cargo bench --bench dataset` (a 64 MiB dataset, about a minute).
//! `LODT_BENCH_DATASET_MIB=1024` generates 1 GiB instead (in
//! `$TMPDIR`, removed at the end).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lodt::dataset::{
    Batching, Dataset, DatasetWriter, DatasetWriterOptions, Loader, LoaderOptions, LocalStore,
    ShuffleOptions,
};
use lodt::{Batch, Lod, LodTensor};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SEQUENCES_PER_BATCH: u64 = 256;
const SHARDS: u64 = 8;

fn lengths(first: u64, n: u64) -> Vec<u64> {
    (first..first + n)
        .map(|i| 256 + (i.wrapping_mul(0x9E37_79B9) >> 7) % 1537)
        .collect()
}

fn batch(first: u64, n: u64) -> Batch {
    let lengths = lengths(first, n);
    let rows: u64 = lengths.iter().sum();
    let tokens: Vec<i32> = (0..rows as i32)
        .map(|t| t.wrapping_mul(31) ^ first as i32)
        .collect();
    let lod = Lod::try_from_lengths(&[lengths]).unwrap();
    let tokens = LodTensor::from_vec(tokens, vec![rows as usize], lod).unwrap();
    let labels: Vec<i64> = (first..first + n).map(|i| i as i64).collect();
    let label = LodTensor::from_vec(labels, vec![n as usize], Lod::empty()).unwrap();
    Batch::try_from_tensors([("tokens", tokens), ("label", label)]).unwrap()
}

struct Data {
    _dir: tempfile::TempDir,
    dataset: Arc<Dataset>,
    bytes: u64,
}

fn generate() -> Data {
    let mib: u64 = std::env::var("LODT_BENCH_DATASET_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let total = mib << 20;
    let dir = tempfile::Builder::new()
        .prefix("lodt-bench-dataset")
        .tempdir_in(std::env::temp_dir())
        .unwrap();
    let store = Arc::new(LocalStore::new(dir.path()).with_fsync(false));
    let options = DatasetWriterOptions {
        shard_bytes: total / SHARDS + (1 << 20),
        ..Default::default()
    };
    let start = Instant::now();
    let mut w = DatasetWriter::create_in(store.clone(), options).unwrap();
    let mut next = 0;
    let mut written = 0u64;
    while written < total {
        let b = batch(next, SEQUENCES_PER_BATCH);
        written += b.get("tokens").unwrap().as_bytes().len() as u64;
        w.write(&b).unwrap();
        next += SEQUENCES_PER_BATCH;
    }
    let manifest = w.finish().unwrap();
    eprintln!(
        "dataset: {} MiB in {} shards, {} batches, {} sequences, written in {:.1} s",
        manifest.num_bytes() >> 20,
        manifest.num_shards(),
        manifest.num_batches(),
        manifest.num_sequences(),
        start.elapsed().as_secs_f64()
    );
    Data {
        _dir: dir,
        dataset: Arc::new(Dataset::open_in(store).unwrap()),
        bytes: manifest.num_bytes(),
    }
}

fn sum(t: &LodTensor) -> i64 {
    t.as_slice::<i32>()
        .unwrap()
        .iter()
        .map(|&x| i64::from(x))
        .sum()
}

/// 10,000 ids drawn with a fixed xorshift.
fn random_ids(n: u64) -> Vec<u64> {
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    (0..10_000)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
        })
        .collect()
}

fn random_access(c: &mut Criterion, d: &Data) {
    let ids = random_ids(d.dataset.num_sequences());
    let mut g = c.benchmark_group("random_access");
    g.throughput(Throughput::Elements(ids.len() as u64));
    g.bench_function("10k/dataset_sequence", |b| {
        b.iter(|| {
            let mut total = 0i64;
            for &id in &ids {
                let seq = d.dataset.sequence(id).unwrap();
                total += sum(seq.get("tokens").unwrap());
            }
            black_box(total)
        })
    });
    // The peer: the shards' own mapped files, ids located beforehand.
    let located: Vec<_> = ids
        .iter()
        .map(|&id| d.dataset.locate(id).unwrap())
        .collect();
    let files: Vec<_> = (0..d.dataset.num_shards())
        .map(|s| d.dataset.shard(s).unwrap())
        .collect();
    g.bench_function("10k/lodt_file_direct", |b| {
        b.iter(|| {
            let mut total = 0i64;
            for at in &located {
                let t = files[at.shard]
                    .batch(at.batch)
                    .unwrap()
                    .tensor("tokens")
                    .unwrap();
                total += sum(&t.slice_level(0, at.index, at.index + 1).unwrap());
            }
            black_box(total)
        })
    });
    g.finish();
}

fn epoch(c: &mut Criterion, d: &Data) {
    let mut g = c.benchmark_group("epoch");
    g.throughput(Throughput::Bytes(d.bytes));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(8));
    let run = |shuffle: Option<ShuffleOptions>, epoch: u64| {
        let options = LoaderOptions {
            batching: Batching::Sequences(64),
            shuffle,
            prefetch: 4,
            ..Default::default()
        };
        let mut loader = Loader::new(d.dataset.clone(), options).unwrap();
        loader.set_epoch(epoch).unwrap();
        let mut total = 0i64;
        let mut n = 0u64;
        for b in loader {
            let b = b.unwrap();
            n += b.ids.len() as u64;
            total += sum(b.batch.get("tokens").unwrap());
        }
        assert_eq!(n, d.dataset.num_sequences());
        black_box(total)
    };
    let mut e = 0;
    g.bench_function("loader_shuffled", |b| {
        b.iter(|| {
            e += 1;
            run(
                Some(ShuffleOptions {
                    seed: 1,
                    buffer: 16384,
                }),
                e,
            )
        })
    });
    g.bench_function("loader_in_order", |b| b.iter(|| run(None, 0)));
    g.bench_function("batches_in_order_zero_copy", |b| {
        b.iter(|| {
            let mut total = 0i64;
            for batch in d.dataset.batches() {
                total += sum(batch.unwrap().get("tokens").unwrap());
            }
            black_box(total)
        })
    });
    g.finish();
}

fn all(c: &mut Criterion) {
    let data = generate();
    random_access(c, &data);
    epoch(c, &data);
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = all
}
criterion_main!(benches);
