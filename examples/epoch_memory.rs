//! The memory of one loader epoch over a dataset, compressed (zstd, 2.0) or
//! not: write it in one process, read an epoch in another, and measure the
//! reader's peak RSS from outside, e.g.
//!
//! ```text
//! cargo run --release --example epoch_memory -- write /tmp/ds-zstd zstd 200
//! /usr/bin/time -v target/release/examples/epoch_memory read /tmp/ds-zstd
//! ```
//!
//! Each batch is 8 MiB of int32 tokens (32 sequences, well compressible).

use lodt::dataset::{
    Batching, Dataset, DatasetWriter, DatasetWriterOptions, Loader, LoaderOptions, ShuffleOptions,
};
use lodt::format::Compression;
use lodt::{Batch, Lod, LodTensor};
use std::sync::Arc;

fn batch(b: usize) -> Batch {
    const SEQUENCES: usize = 32;
    let per = (8 << 20) / 4 / SEQUENCES;
    let values: Vec<i32> = (0..SEQUENCES * per)
        .map(|i| ((b * 31 + i / 1024) % 1000) as i32)
        .collect();
    let n = values.len();
    let lod = Lod::try_from_lengths(&[vec![per as u64; SEQUENCES]]).unwrap();
    Batch::try_from_tensors([("tokens", LodTensor::from_vec(values, vec![n], lod).unwrap())])
        .unwrap()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["write", dir, codec, batches] => {
            let compression = match codec {
                "zstd" => Compression::Zstd { level: 1 },
                _ => Compression::None,
            };
            let options = DatasetWriterOptions {
                compression,
                ..Default::default()
            };
            let mut w = DatasetWriter::create(dir, options)?;
            for b in 0..batches.parse()? {
                w.write(&batch(b))?;
            }
            w.finish()?;
        }
        ["read", dir] => {
            let dataset = Arc::new(Dataset::open(dir)?);
            let options = LoaderOptions {
                batching: Batching::Sequences(32),
                shuffle: Some(ShuffleOptions::default()),
                ..Default::default()
            };
            let (mut batches, mut tokens) = (0u64, 0u64);
            for b in Loader::new(dataset, options)? {
                let b = b?;
                batches += 1;
                tokens += b.batch.get("tokens").map_or(0, |t| t.rows() as u64);
            }
            println!("{batches} mini-batches, {tokens} tokens");
        }
        _ => return Err("usage: epoch_memory write DIR zstd|none BATCHES | read DIR".into()),
    }
    Ok(())
}
