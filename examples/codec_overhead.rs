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
//! `--reps` runs, page cache warm, in this thread's CPU time (user and
//! system: the time other processes hold the core does not count):
//!
//! - `lodt`: `LodtFile::read_batch` of every batch of the mapped file (the
//!   stored bytes checksummed, decompressed, un-shuffled, the LoD checked);
//! - `codec`: the codec crate alone decompressing the same buffers (each
//!   buffer byte-shuffled and compressed here as the writer does) into one
//!   reused allocation (zstd with one reused context): the floor;
//! - `codec + alloc`: the same into a new zeroed allocation per batch, as any
//!   reader that hands each batch out in memory of its own must;
//! - `codec + alloc + copy`: decompressed into a reused scratch, then copied
//!   into a new allocation per batch: the floor of any reader that must make
//!   a second pass over the decoded bytes (as the un-shuffle is);
//! - `codec + alloc + un-shuffle`: the same with the crate's un-shuffle in
//!   place of the copy (lodt's decode without its checks);
//! - `un-shuffle alone`: the crate's un-shuffle of the decoded buffers into
//!   a reused allocation;
//! - `shuffle alone`: the writer's shuffle of the buffers' values (into a
//!   new allocation per buffer, as the writer does).
//!
//! Prints each time and `lodt / codec`, `lodt / (codec + alloc)`,
//! `lodt / (codec + alloc + copy)`.

use lodt::format::{Compression, LodtFile, Version, WriteOptions, Writer};
use lodt::{Batch, Lod, LodTensor};

mod bench_util;
use bench_util::{Clock, Rng, arg, median};

/// The crate's own byte shuffle (FORMAT.md §12.4), compiled in here: the
/// writer's and reader's code, timed alone.
#[allow(dead_code)]
#[path = "../src/format/shuffle.rs"]
mod shuffle;
use shuffle::{shuffle, unshuffle_into};

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

/// The buffers of every batch, as the writer stores them: (stored, decoded
/// length, element width), two per batch (the offsets, the ids).
fn stored(batches: &[Batch], codec: Compression) -> Vec<(Vec<u8>, usize, usize)> {
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
            out.push((packed, bytes.len(), width));
        }
    }
    out
}

/// The codec crate's own decompression at its best: lz4's block decoder,
/// zstd through one reused context.
fn decompress(codec: Compression, packed: &[u8], dst: &mut [u8]) -> usize {
    thread_local! {
        static ZSTD: std::cell::RefCell<zstd::bulk::Decompressor<'static>> =
            std::cell::RefCell::new(zstd::bulk::Decompressor::new().expect("a zstd context"));
    }
    let n = match codec {
        Compression::Lz4 => lz4_flex::block::decompress_into(packed, dst).expect("lz4"),
        _ => ZSTD.with(|z| {
            z.borrow_mut()
                .decompress_to_buffer(packed, dst)
                .expect("zstd")
        }),
    };
    assert_eq!(n, dst.len());
    n
}

/// What one rep runs, by column.
const COLUMNS: [&str; 7] = [
    "lodt read",
    "codec alone",
    "codec + alloc",
    "codec + alloc + copy",
    "codec + alloc + un-shuffle",
    "un-shuffle alone",
    "shuffle alone",
];

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
        "# {n} batches, {:.1} MiB of token ids; medians of {reps} interleaved runs (ms of CPU time)",
        raw as f64 / 1048576.0
    );
    println!(
        "| codec | file | {} | lodt / codec | lodt / (codec + alloc) | lodt / (codec + alloc + copy) |",
        COLUMNS.join(" | ")
    );
    println!("|---|---:|{}---:|---:|---:|", "---:|".repeat(COLUMNS.len()));
    for codec in [Compression::Lz4, Compression::Zstd { level: 3 }] {
        let path = dir.path().join(format!("{codec}.lodt"));
        let options = WriteOptions {
            format_version: Some(Version { major: 2, minor: 0 }),
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
        let mut dst = vec![0u8; largest];
        // The decoded, still shuffled, buffers: the un-shuffle's input.
        let planes: Vec<Vec<u8>> = buffers
            .iter()
            .map(|(packed, len, _)| {
                let mut out = vec![0u8; *len];
                decompress(codec, packed, &mut out);
                out
            })
            .collect();
        // The buffers' values: the shuffle's input.
        let elements: Vec<Vec<u8>> = buffers
            .iter()
            .zip(&planes)
            .map(|((_, len, width), from)| {
                let mut out = vec![0u8; *len];
                unshuffle_into(from, &mut out, *width);
                out
            })
            .collect();
        let mut times = vec![Vec::new(); COLUMNS.len()];
        for rep in 0..reps + 1 {
            let mut t = [0f64; COLUMNS.len()];
            let clock = Clock::now();
            let mut rows = 0usize;
            for k in 0..file.num_batches() {
                rows += file.read_batch(k)?.get("ids").map_or(0, |t| t.rows());
            }
            t[0] = clock.elapsed();
            assert_eq!(rows * 4, raw);
            let clock = Clock::now();
            for (packed, len, _) in &buffers {
                decompress(codec, packed, &mut scratch[..*len]);
            }
            t[1] = clock.elapsed();
            // Per batch, a fresh zeroed allocation holding both buffers;
            // `how` 0: decompressed into place, 1: decompressed into the
            // scratch then copied, 2: decompressed into the scratch then
            // un-shuffled (what lodt does).
            for how in 0..3 {
                let clock = Clock::now();
                for pair in buffers.chunks(2) {
                    let mut out = vec![0u8; pair.iter().map(|b| b.1).sum()];
                    let mut at = 0;
                    for (packed, len, width) in pair {
                        let to = &mut out[at..at + len];
                        at += len;
                        match how {
                            0 => _ = decompress(codec, packed, to),
                            _ => {
                                let from = &mut scratch[..*len];
                                decompress(codec, packed, from);
                                if how == 1 {
                                    to.copy_from_slice(from);
                                } else {
                                    unshuffle_into(from, to, *width);
                                }
                            }
                        }
                    }
                    std::hint::black_box(&out);
                }
                t[2 + how] = clock.elapsed();
            }
            let clock = Clock::now();
            for ((_, len, width), from) in buffers.iter().zip(&planes) {
                unshuffle_into(from, &mut dst[..*len], *width);
                std::hint::black_box(&dst);
            }
            t[5] = clock.elapsed();
            let clock = Clock::now();
            for ((_, _, width), values) in buffers.iter().zip(&elements) {
                std::hint::black_box(shuffle(values, *width));
            }
            t[6] = clock.elapsed();
            if rep > 0 {
                for (all, x) in times.iter_mut().zip(t) {
                    all.push(x);
                }
            }
        }
        let m: Vec<f64> = times.into_iter().map(median).collect();
        let size = std::fs::metadata(&path)?.len();
        let cells: Vec<String> = m.iter().map(|x| format!("{:.1}", x * 1e3)).collect();
        println!(
            "| {codec} | {:.1} MiB | {} | {:.2}× | {:.2}× | {:.2}× |",
            size as f64 / 1048576.0,
            cells.join(" | "),
            m[0] / m[1],
            m[0] / m[2],
            m[0] / m[3],
        );
    }
    Ok(())
}
