//! Reading the same data from a format 1.0 file and an uncompressed 2.0 file.
//!
//! ```sh
//! cargo run --release --example version_parity -- [--reps 15]
//! ```
//!
//! Two datasets, each written as 1.0 and as 2.0 without compression to a
//! temporary directory (page cache warm):
//!
//! - `ids`: 64 batches of 256 documents of 100 to 2,000 int32 token ids
//!   (one LoD level), 66 MiB: large batches, the bytes dominate;
//! - `small`: 20,000 batches of 70 words, two tensors sharing a two-level
//!   LoD (int64 ids, float32 weights): the per-batch work dominates.
//!
//! Per dataset and version, interleaved (the order alternates every rep),
//! medians of `--reps` runs (this thread's CPU time, user and system) of:
//!
//! - `scan`: open the file, `read_batch` every batch;
//! - `scan + sum`: the same, summing every tensor's bytes (the data touched);
//! - `open + one batch`: open the file and `read_batch` its middle batch,
//!   200 times (the time is per open).
//!
//! Prints each median and the ratio 2.0 / 1.0.

use lodt::format::{Compression, LodtFile, Version, WriteOptions, Writer};
use lodt::{Batch, Lod, LodTensor};
use std::path::Path;

mod bench_util;
use bench_util::{Clock, Rng, arg, median};

fn ids(n: usize) -> Vec<Batch> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|_| {
            let lengths: Vec<u64> = (0..256).map(|_| 100 + rng.next() % 1900).collect();
            let rows: u64 = lengths.iter().sum();
            let ids: Vec<i32> = (0..rows).map(|_| (rng.next() % 50_257) as i32).collect();
            let lod = Lod::try_from_lengths(&[lengths]).expect("lengths");
            let t = LodTensor::from_vec(ids, vec![rows as usize], lod).expect("tensor");
            Batch::try_from_tensors([("ids", t)]).expect("batch")
        })
        .collect()
}

fn small(n: usize) -> Vec<Batch> {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    (0..n)
        .map(|_| {
            // 70 words in 10 sentences in 3 paragraphs.
            let lod = Lod::try_from_lengths(&[vec![3, 3, 4], vec![7; 10]]).expect("lengths");
            let words: Vec<i64> = (0..70).map(|_| (rng.next() % 50_257) as i64).collect();
            let weights: Vec<f32> = (0..70).map(|_| (rng.next() % 1000) as f32).collect();
            let a = LodTensor::from_vec(words, vec![70], lod.clone()).expect("ids");
            let b = LodTensor::from_vec(weights, vec![70], lod).expect("weights");
            Batch::try_from_tensors([("ids", a), ("weights", b)]).expect("batch")
        })
        .collect()
}

fn write(path: &Path, data: &[Batch], major: u16) -> Result<(), Box<dyn std::error::Error>> {
    let options = WriteOptions {
        format_version: Some(Version { major, minor: 0 }),
        compression: Compression::None,
        fsync: false,
    };
    let mut w = Writer::create_with(path, Default::default(), options)?;
    for b in data {
        w.write(b)?;
    }
    w.finish()?;
    Ok(())
}

/// Open, read every batch; with `sum`, add up every byte of every tensor.
fn scan(path: &Path, sum: bool) -> Result<u64, Box<dyn std::error::Error>> {
    let file = LodtFile::open(path)?;
    let mut total = 0u64;
    for k in 0..file.num_batches() {
        let b = file.read_batch(k)?;
        for (_, t) in b.iter() {
            total += t.rows() as u64;
            if sum {
                let bytes = t.as_bytes();
                let (words, rest) = bytes.as_chunks::<8>();
                total = words
                    .iter()
                    .fold(total, |a, w| a.wrapping_add(u64::from_le_bytes(*w)));
                total += rest.iter().map(|&b| u64::from(b)).sum::<u64>();
            }
        }
    }
    Ok(total)
}

/// Open the file and read its middle batch, `times` times.
fn open_one(path: &Path, times: usize) -> Result<u64, Box<dyn std::error::Error>> {
    let mut total = 0u64;
    for _ in 0..times {
        let file = LodtFile::open(path)?;
        let b = file.read_batch(file.num_batches() / 2)?;
        total += b.iter().map(|(_, t)| t.rows() as u64).sum::<u64>();
    }
    Ok(total)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let reps = arg("--reps", 15);
    let dir = tempfile::tempdir()?;
    const OPENS: usize = 200;
    println!(
        "# medians of {reps} interleaved runs (CPU time); open + one batch: per open, of {OPENS}"
    );
    println!("| data | measure | 1.0 | 2.0 none | 2.0 / 1.0 |");
    println!("|---|---|---:|---:|---:|");
    for (name, data) in [("ids", ids(64)), ("small", small(20_000))] {
        let paths = [1u16, 2].map(|major| dir.path().join(format!("{name}-{major}.lodt")));
        write(&paths[0], &data, 1)?;
        write(&paths[1], &data, 2)?;
        drop(data);
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        // [measure][version] -> times
        let mut times = vec![[Vec::new(), Vec::new()]; 3];
        for rep in 0..=reps {
            let order = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
            for v in order {
                let p = &paths[v];
                let mut t = [0f64; 3];
                let clock = Clock::now();
                std::hint::black_box(scan(p, false)?);
                t[0] = clock.elapsed();
                let clock = Clock::now();
                std::hint::black_box(scan(p, true)?);
                t[1] = clock.elapsed();
                let clock = Clock::now();
                std::hint::black_box(open_one(p, OPENS)?);
                t[2] = clock.elapsed() / OPENS as f64;
                if rep > 0 {
                    for (m, x) in t.iter().enumerate() {
                        times[m][v].push(*x);
                    }
                }
            }
        }
        // Both versions deliver the same values.
        assert_eq!(scan(&paths[0], true)?, scan(&paths[1], true)?);
        for (m, label) in ["scan", "scan + sum", "open + one batch"]
            .iter()
            .enumerate()
        {
            let [a, b] = times[m].clone().map(median);
            let (scale, unit) = if m == 2 { (1e6, "µs") } else { (1e3, "ms") };
            println!(
                "| {name} ({:.1} / {:.1} MiB) | {label} | {:.1} {unit} | {:.1} {unit} | {:.3}× |",
                size(&paths[0]) as f64 / 1048576.0,
                size(&paths[1]) as f64 / 1048576.0,
                a * scale,
                b * scale,
                b / a
            );
        }
    }
    Ok(())
}
