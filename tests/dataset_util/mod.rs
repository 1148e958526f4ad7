//! Helpers shared by the dataset tests: batches whose every sequence says
//! which it is, small datasets of them, and a check of delivered data.

#![allow(dead_code)]

use lodt::dataset::{
    Batching, Dataset, DatasetStore, DatasetWriter, DatasetWriterOptions, Loader, LoaderOptions,
    LoaderState, LocalStore, MiniBatch,
};
use lodt::{Batch, Lod, LodTensor};
use std::path::Path;
use std::sync::Arc;

/// The sentences of sequence `id` (1 to 3) and the words of each (1 to 4).
pub fn shape_of(id: u64) -> Vec<u64> {
    (0..id % 3 + 1).map(|s| (id + s) % 4 + 1).collect()
}

/// Sequence `id`'s words: `id * 1000 + j` for its j-th word.
pub fn words_of(id: u64) -> Vec<i64> {
    let n: u64 = shape_of(id).iter().sum();
    (0..n as i64).map(|j| id as i64 * 1000 + j).collect()
}

/// A batch of sequences `first..first + n`: `words` (int64 [rows, 1], two
/// LoD levels: sequences > sentences > words) and `label` (int64, no LoD,
/// the sequence's id).
pub fn make_batch(first: u64, n: u64) -> Batch {
    let ids: Vec<u64> = (first..first + n).collect();
    let level0: Vec<u64> = ids.iter().map(|&i| shape_of(i).len() as u64).collect();
    let level1: Vec<u64> = ids.iter().flat_map(|&i| shape_of(i)).collect();
    let values: Vec<i64> = ids.iter().flat_map(|&i| words_of(i)).collect();
    let rows = values.len();
    let lod = if n == 0 {
        Lod::try_from_stored(vec![vec![0], vec![0]]).unwrap() // no sequence
    } else {
        Lod::try_from_lengths(&[level0, level1]).unwrap()
    };
    let words = LodTensor::from_vec(values, vec![rows, 1], lod).unwrap();
    let label = LodTensor::from_vec(
        ids.iter().map(|&i| i as i64).collect(),
        vec![ids.len()],
        Lod::empty(),
    )
    .unwrap();
    Batch::try_from_tensors([("words", words), ("label", label)]).unwrap()
}

/// A local store with fsync off (tests survive process kills, not power cuts).
pub fn store(dir: &Path) -> Arc<dyn DatasetStore> {
    Arc::new(LocalStore::new(dir).with_fsync(false))
}

/// Writes a new dataset of batches of `sizes` sequences into shards of
/// about `shard_bytes`; returns the number of sequences.
pub fn write_dataset(dir: &Path, sizes: &[u64], shard_bytes: u64) -> u64 {
    let options = DatasetWriterOptions {
        shard_bytes,
        ..Default::default()
    };
    let mut w = DatasetWriter::create_in(store(dir), options).unwrap();
    let mut next = 0;
    for &n in sizes {
        w.write(&make_batch(next, n)).unwrap();
        next += n;
    }
    w.finish().unwrap();
    next
}

/// Opens the dataset in `dir`.
pub fn open(dir: &Path) -> Arc<Dataset> {
    Arc::new(Dataset::open_in(store(dir)).unwrap())
}

/// Checks that a mini-batch holds exactly the sequences its ids name.
pub fn check(batch: &MiniBatch) {
    let label = batch.batch.get("label").unwrap();
    let labels: Vec<u64> = label
        .as_slice::<i64>()
        .unwrap()
        .iter()
        .map(|&x| x as u64)
        .collect();
    assert_eq!(labels, batch.ids);
    let words = batch.batch.get("words").unwrap();
    assert_eq!(words.top_level_rows(), batch.ids.len());
    for (i, &id) in batch.ids.iter().enumerate() {
        let seq = words.sequence(0, i).unwrap();
        assert_eq!(seq.lod().to_lengths(), vec![shape_of(id)], "sequence {id}");
        assert_eq!(
            seq.as_slice::<i64>().unwrap(),
            &words_of(id)[..],
            "sequence {id}"
        );
    }
}

/// The ids of every mini-batch a loader delivers (each checked).
pub fn run(loader: Loader) -> Vec<Vec<u64>> {
    loader
        .map(|b| {
            let b = b.unwrap();
            check(&b);
            b.ids
        })
        .collect()
}

/// The ids of every mini-batch of a new loader with `options`.
pub fn collect(dataset: &Arc<Dataset>, options: LoaderOptions) -> Vec<Vec<u64>> {
    run(Loader::new(dataset.clone(), options).unwrap())
}

/// One partial epoch of every consumer of a `world` × `workers` layout,
/// from `state` (the epoch's start with `None`): each consumer delivers a
/// random number of mini-batches, up to `steps` (all of its share with
/// `None`), of 1 to 6 sequences, 0 to 2 of them prefetched, each checked.
/// `options(rank, world, worker, workers)` gives a consumer's options.
/// Returns every id delivered and the consumers' states merged.
pub fn partial_epoch(
    dataset: &Arc<Dataset>,
    state: Option<&LoaderState>,
    (world, workers): (usize, usize),
    rng: &mut TestRng,
    steps: Option<u64>,
    options: impl Fn(usize, usize, usize, usize) -> LoaderOptions,
) -> (Vec<u64>, LoaderState) {
    let mut delivered = Vec::new();
    let mut states = Vec::new();
    for rank in 0..world {
        for worker in 0..workers {
            let o = LoaderOptions {
                batching: Batching::Sequences(1 + rng.below(6) as usize),
                prefetch: rng.below(3) as usize,
                ..options(rank, world, worker, workers)
            };
            let mut loader = match state {
                Some(s) => Loader::resume(dataset.clone(), o, s).unwrap(),
                None => Loader::new(dataset.clone(), o).unwrap(),
            };
            let take = steps.map_or(usize::MAX, |s| rng.below(s + 1) as usize);
            for b in loader.by_ref().take(take) {
                let b = b.unwrap();
                check(&b);
                delivered.extend(b.ids);
            }
            states.push(loader.state());
        }
    }
    (delivered, LoaderState::merge(&states).unwrap())
}

/// A small deterministic generator (xorshift64*) for test choices.
pub struct TestRng(pub u64);

impl TestRng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// The standard output of `python3 SCRIPT ARGS` (`LODT_PYTHON` names
/// another interpreter) after checking that it succeeded, or `None` (and a
/// SKIP line) when no interpreter runs.
pub fn python_output(script: &Path, args: &[&str]) -> Option<String> {
    let python = std::env::var("LODT_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = match std::process::Command::new(&python)
        .arg(script)
        .args(args)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!("SKIP: cannot run {python} ({e}); the Python cross-check did not run");
            return None;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(stdout)
}

/// Checks that the committed test vector `spec/vectors/{name}` is
/// `expected`, what the code produces; `LODT_BLESS=1` rewrites it first.
pub fn check_vector(name: &str, expected: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("spec/vectors")
        .join(name);
    if std::env::var_os("LODT_BLESS").is_some() {
        std::fs::write(&path, expected).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == expected,
        "spec/vectors/{name} differs from what the code produces (LODT_BLESS=1 rewrites it)"
    );
}
