//! Times reading every batch of a `.lodt` file, for `bench/checked_reads.py`
//! (which runs it built from two commits, to compare reads with and without
//! the body checks of `spec/FORMAT.md` §7.1):
//!
//! ```text
//! checked_reads write PATH BATCHES KIB_PER_BATCH
//! checked_reads pread|mmap|mmap-check PATH PASSES
//! checked_reads s3|cache URI PASSES CACHE_DIR
//! ```
//!
//! - `write`: a file of `BATCHES` batches of about `KIB_PER_BATCH` KiB each
//!   (float32 rows of 64 values in sequences of 1 to 64 rows, and their
//!   int64 ids);
//! - `pread`: `LodtFile::open_with(mmap: false)` (positional reads);
//! - `mmap`: `LodtFile::open` (a memory map; no copy, for reference);
//! - `mmap-check`: the same with `ReadOptions::check_bodies` (each batch's
//!   bodies checked on its first touch);
//! - `s3`: `remote::open_file` on an `s3://` URI (endpoint and keys from
//!   `BENCH_S3_ENDPOINT`), every batch one ranged GET;
//! - `cache`: the same with a disk cache in `CACHE_DIR`, filled by a first
//!   pass that is not timed: every timed read is a cache hit.
//!
//! Each pass opens the file, touches every batch and one byte of each of its
//! tensors (nothing else: the read and its checks are the whole cost), and
//! prints one line: `mode seconds cpu_seconds bytes` (the process's CPU
//! time, every thread's, which other processes on a busy machine disturb
//! less than the wall time; 0 off Linux).

use lodt::format::{ReadOptions, Writer};
use lodt::remote::{RemoteOptions, open_file};
use lodt::{Batch, Lod, LodTensor, LodtFile};
use std::time::Instant;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Opens the file as `mode` says.
fn open(mode: &str, location: &str, cache: Option<&str>) -> Res<LodtFile> {
    Ok(match mode {
        "pread" => LodtFile::open_with(
            location,
            &ReadOptions {
                mmap: false,
                ..Default::default()
            },
        )?,
        "mmap" => LodtFile::open(location)?,
        "mmap-check" => LodtFile::open_with(
            location,
            &ReadOptions {
                check_bodies: true,
                ..Default::default()
            },
        )?,
        "s3" | "cache" => {
            let endpoint = std::env::var("BENCH_S3_ENDPOINT")?;
            let mut options = RemoteOptions::default()
                .with_option("aws_endpoint", endpoint)
                .with_option("aws_allow_http", "true")
                .with_option("aws_access_key_id", "test")
                .with_option("aws_secret_access_key", "test")
                .with_option("aws_region", "us-east-1");
            if let Some(dir) = cache {
                options = options.with_cache(dir, 16 << 30);
            }
            open_file(location, &options)?
        }
        other => return Err(format!("unknown mode {other:?}").into()),
    })
}

/// Touches every batch of `file` and one byte of each tensor; the bytes read.
fn read_all(file: &LodtFile) -> Res<(u64, u64)> {
    let (mut bytes, mut seen) = (0u64, 0u64);
    for k in 0..file.num_batches() {
        let batch = file.batch(k)?;
        bytes += batch.byte_range().end - batch.byte_range().start;
        for t in batch.tensors() {
            let (_, t) = t?;
            seen = seen.wrapping_add(t.as_bytes().first().copied().unwrap_or(0) as u64);
        }
    }
    Ok((bytes, seen))
}

/// Writes the file of `write`.
fn write(path: &str, batches: usize, kib: usize) -> Res<()> {
    let rows = (kib << 10) / (64 * 4 + 8);
    let mut w = Writer::create(path, Default::default())?;
    for k in 0..batches {
        let mut lengths = Vec::new();
        let mut left = rows;
        while left > 0 {
            let n = (1 + (k * 31 + lengths.len() * 7) % 64).min(left);
            lengths.push(n as u64);
            left -= n;
        }
        let lod = Lod::try_from_lengths(&[lengths])?;
        let values: Vec<f32> = (0..rows * 64)
            .map(|i| (i % 1000) as f32 * 0.5 + k as f32)
            .collect();
        let emb = LodTensor::from_vec(values, vec![rows, 64], lod.clone())?;
        let ids = LodTensor::from_vec((0..rows as i64).collect(), vec![rows], lod)?;
        w.write(&Batch::try_from_tensors([("emb", emb), ("ids", ids)])?)?;
    }
    w.finish()?;
    Ok(())
}

/// The CPU time of this process so far, in seconds (0 off Linux).
fn cpu_seconds() -> f64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec, which `ts` is, and
        // reads nothing else of ours.
        if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } == 0 {
            return ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
        }
    }
    0.0
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("write") {
        let (Some(path), Some(b), Some(kib)) = (args.get(2), args.get(3), args.get(4)) else {
            return Err("usage: checked_reads write PATH BATCHES KIB_PER_BATCH".into());
        };
        return write(path, b.parse()?, kib.parse()?);
    }
    let (mode, location) = match (args.get(1), args.get(2)) {
        (Some(m), Some(l)) => (m.as_str(), l.as_str()),
        _ => return Err("usage: checked_reads MODE LOCATION PASSES [CACHE_DIR]".into()),
    };
    let passes: usize = args.get(3).map_or(Ok(5), |p| p.parse())?;
    let cache = if mode == "cache" {
        let dir = args.get(4).ok_or("cache needs a CACHE_DIR")?;
        // Fill the cache (not timed).
        read_all(&open(mode, location, Some(dir))?)?;
        Some(dir.as_str())
    } else {
        None
    };
    let mut check = 0u64;
    for _ in 0..passes {
        let (start, cpu) = (Instant::now(), cpu_seconds());
        let file = open(mode, location, cache)?;
        let (bytes, seen) = read_all(&file)?;
        let seconds = start.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu;
        check = check.wrapping_add(seen);
        println!("{mode} {seconds:.6} {cpu:.6} {bytes}");
    }
    eprintln!("checksum of bytes seen: {check}");
    Ok(())
}
