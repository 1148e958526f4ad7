//! The cost of mixing: a shuffled epoch of one dataset through the `Loader`
//! against a `Mixture` of it and a second dataset (weights 0.8 / 0.2,
//! `first_exhausted`, about as many sequences), and the time per draw of
//! finding an `all_exhausted` epoch's length. Runs interleaved, medians.
//!
//! `cargo run --release --no-default-features --example mixture_throughput [REPS]`

use lodt::dataset::{
    Batching, Dataset, DatasetWriter, DatasetWriterOptions, Loader, LoaderOptions, Mixture,
    MixtureOptions, ShuffleOptions, Stop,
};
use lodt::{Batch, Lod, LodTensor};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// `n` sequences of 1 to 31 int32 tokens, in batches of 1,000.
fn write(dir: &Path, n: usize) -> Result<Arc<Dataset>, Box<dyn std::error::Error>> {
    let options = DatasetWriterOptions {
        shard_bytes: 8 << 20,
        ..Default::default()
    };
    let mut w = DatasetWriter::create(dir, options)?;
    for start in (0..n).step_by(1000) {
        let m = 1000.min(n - start);
        let lengths: Vec<u64> = (0..m).map(|i| ((start + i) % 31 + 1) as u64).collect();
        let rows = lengths.iter().sum::<u64>() as usize;
        let lod = Lod::try_from_lengths(&[lengths])?;
        let x = LodTensor::from_vec((0..rows as i32).collect::<Vec<i32>>(), vec![rows], lod)?;
        w.write(&Batch::try_from_tensors([("x", x)])?)?;
    }
    w.finish()?;
    Ok(Arc::new(Dataset::open(dir)?))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let reps: u64 = std::env::args().nth(1).map_or(Ok(7), |s| s.parse())?;
    let (dir_a, dir_b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let a = write(dir_a.path(), 200_000)?;
    let b = write(dir_b.path(), 50_000)?;
    let options = LoaderOptions {
        batching: Batching::Sequences(256),
        shuffle: Some(ShuffleOptions {
            seed: 1,
            buffer: 16384,
        }),
        ..Default::default()
    };
    let (mut plain, mut mixed, mut draw) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..reps {
        let t = Instant::now();
        let mut n = 0;
        for batch in Loader::new(a.clone(), options.clone())? {
            n += batch?.ids.len();
        }
        plain.push(n as f64 / t.elapsed().as_secs_f64());

        // A new mixture each time: the loader finds the epoch's length anew.
        let stop = Stop::FirstExhausted;
        let sources = vec![a.clone(), b.clone()];
        let m = Arc::new(Mixture::try_new(
            sources,
            &[0.8, 0.2],
            MixtureOptions { seed: rep, stop },
        )?);
        let t = Instant::now();
        let mut n = 0;
        for batch in Loader::new(m.clone(), options.clone())? {
            n += batch?.ids.len();
        }
        mixed.push(n as f64 / t.elapsed().as_secs_f64());

        let stop = Stop::AllExhausted;
        let sources = vec![a.clone(), b.clone()];
        let m = Mixture::try_new(sources, &[0.8, 0.2], MixtureOptions { seed: rep, stop })?;
        let t = Instant::now();
        let len = m.num_sequences(0);
        draw.push(t.elapsed().as_secs_f64() * 1e9 / len as f64);
    }
    let (p, m) = (median(plain), median(mixed));
    println!("one dataset, shuffled epoch:   {p:.0} sequences/s (median of {reps})");
    println!(
        "mixture of two, same options:  {m:.0} sequences/s (median of {reps}); ratio {:.2}",
        m / p
    );
    println!(
        "all_exhausted epoch length:    {:.2} ns per draw (median of {reps})",
        median(draw)
    );
    Ok(())
}
