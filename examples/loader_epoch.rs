//! One shuffled epoch through the [`Loader`] against its copy floor: the
//! same mini-batches (the order the loader delivered, recorded first) walked
//! zero-copy through the mapped shards and copied once, with `memcpy`, into
//! buffers reused from one mini-batch to the next (already faulted in).
//!
//! ```text
//! cargo run --release --example loader_epoch -- [--batches 1150] [--reps 5]
//!     [--batch-sizes 32,256] [--systems 0,1,2,3] [--dir DIR] [--keep]
//! ```
//!
//! The data is `python/bench/bench_epoch.py`'s shape, generated here from a
//! seed: `--batches` batches of 4-9 documents of 5-16 sentences of 10-51
//! tokens; per token an int64 token id (`tokens`, `[tokens, 1]`) and a
//! float32 embedding row (`emb`, `[tokens, 64]`), both with the LoD
//! documents -> sentences -> tokens, plus an int64 document number per
//! document (`doc`); 128 MiB shards. 1,150 batches: about 7,500 documents,
//! 640 MB. The page cache is warm (every shard read once first).
//!
//! Systems, interleaved within each repetition (medians of `--reps`, with
//! the range):
//!
//! - `loader`: [`Loader`] with the default options (a prefetch thread, 2
//!   mini-batches ahead), shuffled with a buffer of every sequence;
//! - `loader, no thread`: the same with `prefetch: 0` (each mini-batch built
//!   when asked for, on the caller's thread);
//! - `walk + memcpy` (the goal's floor): per mini-batch and tensor, each
//!   sequence located ([`Dataset::locate`]), its batch's tensor taken from
//!   the mapped shard and sliced (zero copy), its bytes appended to a reused
//!   buffer;
//! - `memcpy`: the same copies with every slice resolved before the clock
//!   starts (the bandwidth floor alone).
//!
//! Before the clock, one pass checks that the loader's mini-batches hold
//! exactly the bytes the floor copies.

use lodt::dataset::{
    Batching, Dataset, DatasetWriter, DatasetWriterOptions, Loader, LoaderOptions, LocalStore,
    ShuffleOptions,
};
use lodt::{Batch, Lod, LodTensor};
use std::error::Error;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

type Res<T> = Result<T, Box<dyn Error>>;

const DIM: usize = 64;
const SEED: u64 = 12;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `lo..hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

/// Batch `k` of the generated data, its documents numbered from `first`.
fn make_batch(k: u64, first: i64) -> Res<Batch> {
    let mut rng = Rng(SEED.wrapping_mul(1_000_003).wrapping_add(k));
    let docs = rng.range(4, 10) as usize;
    let sents: Vec<u64> = (0..docs).map(|_| rng.range(5, 17)).collect();
    let tokens: Vec<u64> = (0..sents.iter().sum::<u64>())
        .map(|_| rng.range(10, 52))
        .collect();
    let n = tokens.iter().sum::<u64>() as usize;
    let lod = Lod::try_from_lengths(&[sents, tokens])?;
    let ids: Vec<i64> = (0..n).map(|_| rng.range(0, 30_000) as i64).collect();
    let emb: Vec<f32> = (0..n * DIM)
        .map(|_| rng.range(0, 4096) as f32 / 8.0)
        .collect();
    let doc: Vec<i64> = (first..first + docs as i64).collect();
    Ok(Batch::try_from_tensors([
        ("tokens", LodTensor::from_vec(ids, vec![n, 1], lod.clone())?),
        ("emb", LodTensor::from_vec(emb, vec![n, DIM], lod)?),
        ("doc", LodTensor::from_vec(doc, vec![docs], Lod::empty())?),
    ])?)
}

fn write(dir: &Path, batches: u64) -> Res<()> {
    let store = Arc::new(LocalStore::new(dir).with_fsync(false));
    let options = DatasetWriterOptions {
        shard_bytes: 128 << 20,
        ..Default::default()
    };
    let mut w = DatasetWriter::create_in(store, options)?;
    let mut first = 0i64;
    for k in 0..batches {
        let b = make_batch(k, first)?;
        first += b.get("doc").map_or(0, LodTensor::rows) as i64;
        w.write(&b)?;
    }
    w.finish()?;
    Ok(())
}

/// Reads every file under `dir` once (the page cache warm).
fn warm(dir: &Path) -> Res<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_file() {
            black_box(std::fs::read(&path)?.len());
        }
    }
    Ok(())
}

fn options(batch: usize, prefetch: usize, n: u64) -> LoaderOptions {
    LoaderOptions {
        batching: Batching::Sequences(batch),
        shuffle: Some(ShuffleOptions {
            seed: SEED,
            buffer: n as usize,
        }),
        prefetch,
        ..Default::default()
    }
}

/// One loader epoch; returns the bytes delivered.
fn loader_epoch(dataset: &Arc<Dataset>, batch: usize, prefetch: usize) -> Res<u64> {
    let n = dataset.num_sequences();
    let mut bytes = 0u64;
    for b in Loader::new(dataset.clone(), options(batch, prefetch, n))? {
        let b = b?;
        for (_, t) in b.batch.iter() {
            bytes += t.as_bytes().len() as u64;
            black_box(t.as_bytes().as_ptr());
        }
    }
    Ok(bytes)
}

/// The floor: the mini-batches `order`, each sequence walked zero copy and
/// its bytes appended to `out` (one reused buffer per tensor).
fn walk_epoch(dataset: &Dataset, order: &[Vec<u64>], out: &mut [Vec<u8>]) -> Res<u64> {
    let names: Vec<&str> = dataset
        .schema()
        .tensors
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    let mut bytes = 0u64;
    for ids in order {
        for o in out.iter_mut() {
            o.clear();
        }
        for &id in ids {
            let at = dataset.locate(id)?;
            let view = dataset.shard(at.shard)?.batch(at.batch)?;
            for (name, o) in names.iter().zip(out.iter_mut()) {
                let t = view.tensor(name)?.slice_top(at.index, at.index + 1)?;
                o.extend_from_slice(t.as_bytes());
            }
        }
        for o in out.iter() {
            bytes += o.len() as u64;
            black_box(o.as_ptr());
        }
    }
    Ok(bytes)
}

/// The floor's copies alone: `slices[k][t]` are mini-batch `k`'s sequences'
/// bytes of tensor `t`.
fn memcpy_epoch(slices: &[Vec<Vec<&[u8]>>], out: &mut [Vec<u8>]) -> u64 {
    let mut bytes = 0u64;
    for batch in slices {
        for (parts, o) in batch.iter().zip(out.iter_mut()) {
            o.clear();
            for p in parts {
                o.extend_from_slice(p);
            }
            bytes += o.len() as u64;
            black_box(o.as_ptr());
        }
    }
    bytes
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

fn main() -> Res<()> {
    let mut batches = 1150u64;
    let mut reps = 5usize;
    let mut sizes = vec![32usize, 256];
    let mut dir: Option<PathBuf> = None;
    let mut keep = false;
    let mut only: Option<Vec<usize>> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--batches" => batches = value()?.parse()?,
            "--reps" => reps = value()?.parse()?,
            "--batch-sizes" => {
                sizes = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--dir" => dir = Some(value()?.into()),
            "--systems" => {
                only = Some(
                    value()?
                        .split(',')
                        .map(str::parse)
                        .collect::<Result<_, _>>()?,
                )
            }
            "--keep" => keep = true,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let dir = dir.unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target")
            .join("loader-epoch")
    });
    let result = run(&dir, batches, reps, &sizes, only.as_deref());
    if !keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

fn run(dir: &Path, batches: u64, reps: usize, sizes: &[usize], only: Option<&[usize]>) -> Res<()> {
    if !dir.join("lodt-dataset.json").exists() {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir)?;
        let t = Instant::now();
        write(dir, batches)?;
        println!(
            "wrote {} in {:.1} s",
            dir.display(),
            t.elapsed().as_secs_f64()
        );
    }
    warm(dir)?;
    let dataset = Arc::new(Dataset::open(dir)?);
    let n = dataset.num_sequences();
    let tensors = dataset.schema().tensors.len();
    println!(
        "{n} documents, {} shards; {} cores; median of {reps}; load {} at the start",
        dataset.num_shards(),
        std::thread::available_parallelism().map_or(0, |p| p.get()),
        load()
    );
    let systems = ["loader", "loader, no thread", "walk + memcpy", "memcpy"];
    let mut rows = Vec::new();
    for &batch in sizes {
        // The order the loader delivers, and a check that its bytes are the
        // floor's.
        let mut order = Vec::new();
        let mut expected: Vec<Vec<Vec<u8>>> = Vec::new();
        for b in Loader::new(dataset.clone(), options(batch, 0, n))? {
            let b = b?;
            expected.push(b.batch.iter().map(|(_, t)| t.as_bytes().to_vec()).collect());
            order.push(b.ids);
        }
        let mut out: Vec<Vec<u8>> = vec![Vec::new(); tensors];
        let mut check = Vec::new();
        for (ids, want) in order.iter().zip(&expected) {
            walk_epoch(&dataset, std::slice::from_ref(ids), &mut out)?;
            check.push(out.as_slice() == want.as_slice());
        }
        if check.iter().any(|ok| !ok) {
            return Err(
                format!("batch {batch}: the loader's bytes differ from the floor's").into(),
            );
        }
        drop(expected);
        // Every slice resolved, for the memcpy-only floor.
        let mut shards = Vec::new();
        for ids in &order {
            let mut per_tensor: Vec<Vec<LodTensor>> = vec![Vec::new(); tensors];
            for &id in ids {
                let seq = dataset.sequence(id)?;
                for (k, (_, t)) in seq.iter().enumerate() {
                    per_tensor[k].push(t.clone());
                }
            }
            shards.push(per_tensor);
        }
        let slices: Vec<Vec<Vec<&[u8]>>> = shards
            .iter()
            .map(|b| {
                b.iter()
                    .map(|ts| ts.iter().map(LodTensor::as_bytes).collect())
                    .collect()
            })
            .collect();
        // The reused buffers hold the largest mini-batch, faulted in.
        for (k, o) in out.iter_mut().enumerate() {
            let most = slices
                .iter()
                .map(|b| b[k].iter().map(|s| s.len()).sum::<usize>())
                .max()
                .unwrap_or(0);
            o.clear();
            o.resize(most, 1);
        }
        let mut times = vec![Vec::new(); systems.len()];
        let mut bytes = 0;
        for _ in 0..reps {
            for (s, t) in times.iter_mut().enumerate() {
                if only.is_some_and(|o| !o.contains(&s)) {
                    t.push(f64::NAN);
                    continue;
                }
                let start = Instant::now();
                let b = match s {
                    0 => loader_epoch(&dataset, batch, 2)?,
                    1 => loader_epoch(&dataset, batch, 0)?,
                    2 => walk_epoch(&dataset, &order, &mut out)?,
                    _ => memcpy_epoch(&slices, &mut out),
                };
                t.push(start.elapsed().as_secs_f64());
                if b != bytes && bytes != 0 {
                    return Err(format!("system {s} delivered {b} bytes, not {bytes}").into());
                }
                bytes = b;
            }
        }
        println!(
            "batch {batch}: {}; {:.0} MB per epoch; load {}",
            systems
                .iter()
                .zip(&times)
                .map(|(s, t)| format!("{s} {:.3} s", median(t)))
                .collect::<Vec<_>>()
                .join(", "),
            bytes as f64 / 1e6,
            load()
        );
        rows.push((batch, times));
    }
    println!();
    println!(
        "| mini-batch | {} | loader / walk + memcpy | no thread / walk + memcpy | walk + memcpy / memcpy |",
        systems.join(" | ")
    );
    println!("|---|{}---:|---:|---:|", "---:|".repeat(systems.len()));
    for (batch, times) in &rows {
        let cell = |t: &Vec<f64>| {
            let lo = t.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = t.iter().copied().fold(0.0, f64::max);
            format!("{:.3} s ({lo:.3}-{hi:.3})", median(t))
        };
        let m: Vec<f64> = times.iter().map(|t| median(t)).collect();
        println!(
            "| {batch} | {} | {:.2}× | {:.2}× | {:.2}× |",
            times.iter().map(cell).collect::<Vec<_>>().join(" | "),
            m[0] / m[2],
            m[1] / m[2],
            m[2] / m[3]
        );
    }
    Ok(())
}
