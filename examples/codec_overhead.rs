//! What reading a compressed 2.0 file costs beyond the codec itself.
//!
//! ```sh
//! cargo run --release --example codec_overhead -- [--batches 400] [--reps 9]
//! ```
//!
//! Token ids (int32, drawn from a Zipf-like law over a 50,257-token
//! vocabulary, frequent tokens small) in batches of 256 documents of 100 to
//! 2,000 tokens, written as format 2.0 with lz4 and with zstd (level 3) to
//! files in a temporary directory. Per codec, interleaved, medians of
//! `--reps` runs, page cache warm:
//!
//! - `lodt`: `LodtFile::read_batch` of every batch of the mapped file (the
//!   stored bytes checksummed, decompressed, un-shuffled, the LoD checked);
//! - `codec`: the codec crate alone decompressing the same buffers (each
//!   buffer byte-shuffled and compressed here as the writer does) into one
//!   reused allocation: the floor;
//! - `codec + alloc`: the same into a new zeroed allocation per batch, as any
//!   reader that hands each batch out in memory of its own must.
//!
//! Prints each time and `lodt / codec`, `lodt / (codec + alloc)`.

use lodt::format::{Compression, LodtFile, Version, WriteOptions, Writer};
use lodt::{Batch, Lod, LodTensor};
use std::time::Instant;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A small xorshift generator: the data is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A token id: frequent ones small (a Zipf-like law by inverse transform).
    fn token(&mut self) -> i32 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        let id = (50_257f64.powf(u) - 1.0) as i32;
        id.min(50_256)
    }
}

fn batches(n: usize) -> Vec<Batch> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|_| {
            let lengths: Vec<u64> = (0..256).map(|_| 100 + rng.next() % 1900).collect();
            let rows: u64 = lengths.iter().sum();
            let ids: Vec<i32> = (0..rows).map(|_| rng.token()).collect();
            let lod = Lod::try_from_lengths(&[lengths]).expect("lengths");
            let t = LodTensor::from_vec(ids, vec![rows as usize], lod).expect("tensor");
            Batch::try_from_tensors([("ids", t)]).expect("batch")
        })
        .collect()
}

/// Byte-shuffles `src` (elements of `width` bytes), as FORMAT.md 12.4 says.
fn shuffle(src: &[u8], width: usize) -> Vec<u8> {
    let m = src.len() / width;
    let mut out = vec![0u8; src.len()];
    for (j, plane) in out.chunks_exact_mut(m.max(1)).take(width).enumerate() {
        for (o, &b) in plane.iter_mut().zip(src[j..].iter().step_by(width)) {
            *o = b;
        }
    }
    out
}

/// The buffers of every batch, as the writer stores them: (stored, decoded length).
fn stored(batches: &[Batch], codec: Compression) -> Vec<(Vec<u8>, usize)> {
    let mut out = Vec::new();
    for b in batches {
        let t = b.get("ids").expect("ids");
        let offsets: Vec<u8> = t
            .lod()
            .raw_level(0)
            .expect("a level")
            .iter()
            .flat_map(|o| o.to_le_bytes())
            .collect();
        for (bytes, width) in [(offsets, 8), (t.as_bytes().to_vec(), 4)] {
            let shuffled = shuffle(&bytes, width);
            let packed = match codec {
                Compression::Lz4 => lz4_flex::block::compress(&shuffled),
                Compression::Zstd { level } => {
                    zstd::bulk::compress(&shuffled, level).expect("zstd")
                }
                Compression::None => shuffled,
            };
            out.push((packed, bytes.len()));
        }
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = arg("--batches", 400);
    let reps = arg("--reps", 9);
    let data = batches(n);
    let raw: usize = data
        .iter()
        .map(|b| b.get("ids").map_or(0, |t| t.as_bytes().len()))
        .sum();
    let dir = tempfile::tempdir()?;
    println!(
        "# {n} batches, {:.1} MiB of token ids; medians of {reps}",
        raw as f64 / 1048576.0
    );
    println!(
        "| codec | file | lodt read | codec alone | codec + alloc | lodt / codec | lodt / (codec + alloc) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for codec in [Compression::Lz4, Compression::Zstd { level: 3 }] {
        let path = dir.path().join(format!("{codec}.lodt"));
        let options = WriteOptions {
            format_version: Version { major: 2, minor: 0 },
            compression: codec,
            fsync: false,
        };
        let mut w = Writer::create_with(&path, Default::default(), options)?;
        for b in &data {
            w.write(b)?;
        }
        w.finish()?;
        let file = LodtFile::open(&path)?;
        let buffers = stored(&data, codec);
        let largest = buffers.iter().map(|b| b.1).max().unwrap_or(0);
        let mut scratch = vec![0u8; largest];
        let (mut lodt_t, mut codec_t, mut alloc_t) = (Vec::new(), Vec::new(), Vec::new());
        for rep in 0..reps + 1 {
            let t = Instant::now();
            let mut rows = 0usize;
            for k in 0..file.num_batches() {
                rows += file.read_batch(k)?.get("ids").map_or(0, |t| t.rows());
            }
            let a = t.elapsed().as_secs_f64();
            assert_eq!(rows * 4, raw);
            let t = Instant::now();
            let mut total = 0usize;
            for (packed, len) in &buffers {
                let dst = &mut scratch[..*len];
                total += match codec {
                    Compression::Lz4 => lz4_flex::block::decompress_into(packed, dst)?,
                    _ => zstd::bulk::decompress_to_buffer(packed, dst)?,
                };
            }
            let b = t.elapsed().as_secs_f64();
            assert!(total >= raw);
            let t = Instant::now();
            let mut total = 0usize;
            for pair in buffers.chunks(2) {
                let mut out = vec![0u8; pair.iter().map(|b| b.1).sum()];
                let mut at = 0;
                for (packed, len) in pair {
                    let dst = &mut out[at..at + len];
                    at += len;
                    total += match codec {
                        Compression::Lz4 => lz4_flex::block::decompress_into(packed, dst)?,
                        _ => zstd::bulk::decompress_to_buffer(packed, dst)?,
                    };
                }
                std::hint::black_box(&out);
            }
            let c = t.elapsed().as_secs_f64();
            assert!(total >= raw);
            if rep > 0 {
                lodt_t.push(a);
                codec_t.push(b);
                alloc_t.push(c);
            }
        }
        let (a, b, c) = (median(lodt_t), median(codec_t), median(alloc_t));
        let size = std::fs::metadata(&path)?.len();
        println!(
            "| {codec} | {:.1} MiB | {:.1} ms | {:.1} ms | {:.1} ms | {:.2}× | {:.2}× |",
            size as f64 / 1048576.0,
            a * 1e3,
            b * 1e3,
            c * 1e3,
            a / b,
            a / c
        );
    }
    Ok(())
}
