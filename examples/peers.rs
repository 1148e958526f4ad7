//! The lodt side of `bench/peers.py`, the side-by-side benchmark against
//! Arrow IPC, Parquet, Lance, safetensors, numpy `.npy` and HDF5 (see
//! `bench/README.md`). It reads the `.npy` arrays the script generates and
//! times lodt on the same data and the same work; it is not meant to be run
//! by hand except for `overhead`.
//!
//! ```text
//! peers write-lodt DIR               DIR/*.npy -> DIR/data.lodt
//! peers run open-doc DIR K J         open, then document J of batch K
//! peers run random DIR               open, then the sentences of DIR/queries.npy,
//!                                    one by one (zero-copy)
//! peers run random-rows DIR          the same, each sentence's rows found by
//!                                    `Lod::row_range` and read from the bodies
//! peers run random-prefetch DIR      the same, `LodtFile::prefetch` of them first
//! peers run random-take DIR          the same sentences gathered in one call
//!                                    (`LodtFile::take_level`, a copy)
//! peers run scan DIR                 open, then every batch
//! peers write DIR REPS [CALLS]       the writer vs write_all of the same bytes
//!                                    (and, given CALLS, a file of one write
//!                                    size per line: the same bytes written
//!                                    with those calls, the writer's own, as
//!                                    `bench/peers.py` gets them from strace)
//! peers verify DIR REPS              verify a file just written, then read back
//!                                    from disk, vs a CRC32 of its bytes (one
//!                                    core, all cores; in memory, mapped, and
//!                                    read with pread)
//! peers overhead                     per-batch overhead of 70-word batches
//! peers write-only DIR REPS          the writer alone (for a profiler)
//! peers verify-only DIR REPS [verify] verify data.lodt (for a profiler),
//!                                    next to a two-core CRC unless `verify`
//! peers write-pattern DIR REPS       data.lodt's bytes written with the writer's
//!                                    call boundaries (rounded down to
//!                                    CUT_ALIGN bytes) against 1 MiB calls
//! ```
//!
//! `run` prints `{"seconds": S, "checksum": C}`: the checksum (the sum of the
//! token ids and of the first embedding value of every row read) must equal
//! the peers'. Build: `cargo build --release --example peers`.

use lodt::format::{Advice, LodtFile, MappedFile, ReadOptions, RowLocation, WriteOptions, Writer};
use lodt::{Batch, Lod, LodTensor};
use std::collections::BTreeMap;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Instant;

type Res<T> = Result<T, Box<dyn Error>>;

/// The embedding width.
const DIM: usize = 64;

/// A `.npy` file, mapped: its shape and its (64-aligned, little-endian) data.
struct Npy {
    map: MappedFile,
    start: usize,
    shape: Vec<usize>,
}

impl Npy {
    fn open(path: &Path, descr: &str) -> Res<Self> {
        use lodt::buffer::ByteStorage;
        let map = MappedFile::open(path)?;
        let b = map.bytes();
        if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
            return Err(format!("{}: not a .npy file", path.display()).into());
        }
        let (hlen, at) = match b[6] {
            1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
            _ => (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12),
        };
        let header = std::str::from_utf8(&b[at..at + hlen])?;
        if !header.contains(&format!("'descr': '{descr}'"))
            || header.contains("'fortran_order': True")
        {
            return Err(format!("{}: expected {descr}, C order: {header}", path.display()).into());
        }
        let shape = header
            .split("'shape': (")
            .nth(1)
            .and_then(|s| s.split(')').next())
            .ok_or("no shape")?
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.trim().parse::<usize>())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Npy {
            map,
            start: at + hlen,
            shape,
        })
    }

    fn bytes(&self) -> &[u8] {
        use lodt::buffer::ByteStorage;
        &self.map.bytes()[self.start..]
    }

    fn i64s(&self) -> Vec<i64> {
        self.bytes()
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect()
    }

    fn f32s(&self, rows: std::ops::Range<usize>) -> Vec<f32> {
        let row = DIM * 4;
        self.bytes()[rows.start * row..rows.end * row]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect()
    }
}

/// The dataset's offsets: documents per batch, sentences per document,
/// tokens per sentence.
struct Offsets {
    batch_docs: Vec<i64>,
    doc_sents: Vec<i64>,
    sent_tokens: Vec<i64>,
}

impl Offsets {
    fn read(dir: &Path) -> Res<Self> {
        Ok(Offsets {
            batch_docs: Npy::open(&dir.join("batch_docs.npy"), "<i8")?.i64s(),
            doc_sents: Npy::open(&dir.join("doc_sents.npy"), "<i8")?.i64s(),
            sent_tokens: Npy::open(&dir.join("sent_tokens.npy"), "<i8")?.i64s(),
        })
    }

    /// The first sentence of each batch (and the end).
    fn batch_sents(&self) -> Vec<i64> {
        self.batch_docs
            .iter()
            .map(|&d| self.doc_sents[d as usize])
            .collect()
    }

    /// Batch `k`: `tokens` int64 [rows] and `emb` float32 [rows, 64], both
    /// with the LoD documents -> sentences -> tokens.
    fn batch(&self, k: usize, emb: &Npy, all_tokens: &[i64]) -> Res<Batch> {
        let (d0, d1) = (self.batch_docs[k] as usize, self.batch_docs[k + 1] as usize);
        let (s0, s1) = (self.doc_sents[d0] as usize, self.doc_sents[d1] as usize);
        let (t0, t1) = (self.sent_tokens[s0] as usize, self.sent_tokens[s1] as usize);
        let level0: Vec<u64> = self.doc_sents[d0..=d1]
            .iter()
            .map(|&s| (s as usize - s0) as u64)
            .collect();
        let level1: Vec<u64> = self.sent_tokens[s0..=s1]
            .iter()
            .map(|&t| (t as usize - t0) as u64)
            .collect();
        let lod = Lod::try_from_offsets(vec![level0, level1])?;
        let ids = LodTensor::from_vec(all_tokens[t0..t1].to_vec(), vec![t1 - t0], lod.clone())?;
        let e = LodTensor::from_vec(emb.f32s(t0..t1), vec![t1 - t0, DIM], lod)?;
        let mut b = Batch::try_from_tensors([("tokens", ids), ("emb", e)])?;
        b.metadata_mut().insert("first_doc".into(), d0.to_string());
        Ok(b)
    }

    fn batches(&self, dir: &Path) -> Res<Vec<Batch>> {
        let tokens = Npy::open(&dir.join("tokens.npy"), "<i8")?;
        let emb = Npy::open(&dir.join("emb.npy"), "<f4")?;
        if emb.shape.get(1) != Some(&DIM) {
            return Err("emb.npy is not [rows, 64]".into());
        }
        let all_tokens = tokens.i64s();
        (0..self.batch_docs.len() - 1)
            .map(|k| self.batch(k, &emb, &all_tokens))
            .collect()
    }
}

/// `PEERS_FORMAT=1.0|2.0` writes that format version instead of the
/// writer's default.
fn write_lodt(path: &Path, batches: &[Batch], fsync: bool) -> Res<()> {
    let mut options = WriteOptions {
        fsync,
        ..Default::default()
    };
    if let Ok(v) = std::env::var("PEERS_FORMAT") {
        options.format_version = Some(v.parse()?);
    }
    let mut w = Writer::create_with(path, BTreeMap::new(), options)?;
    for b in batches {
        w.write(b)?;
    }
    w.finish()?;
    Ok(())
}

/// `PEERS_ADVICE=off|random|sequential` overrides the API's choice of
/// access hints (to show what they do); `PEERS_PREAD=1` reads with
/// positional reads.
fn read_options() -> ReadOptions {
    let advice = match std::env::var("PEERS_ADVICE").as_deref() {
        Ok("off") => Advice::Off,
        Ok("random") => Advice::Random,
        Ok("sequential") => Advice::Sequential,
        _ => Advice::Auto,
    };
    ReadOptions {
        advice,
        mmap: std::env::var("PEERS_PREAD").is_err(),
        ..Default::default()
    }
}

/// The sum of the token ids and of the first embedding value of each row.
fn consume(tokens: &LodTensor, emb: &LodTensor) -> Res<f64> {
    let t: i64 = tokens.as_slice::<i64>()?.iter().sum();
    let e: f64 = emb
        .as_slice::<f32>()?
        .iter()
        .step_by(DIM)
        .map(|&v| v as f64)
        .sum();
    Ok(t as f64 + e)
}

fn run(task: &str, dir: &Path, args: &[String]) -> Res<()> {
    let path = dir.join("data.lodt");
    let arg =
        |i: usize| -> Res<usize> { Ok(args.get(i).ok_or("missing argument")?.parse::<usize>()?) };
    // Prepared before the clock starts: which batch and sentence each query is.
    let queries: Vec<(usize, usize)> = if task.starts_with("random") {
        let offsets = Offsets::read(dir)?;
        let starts = offsets.batch_sents();
        Npy::open(&dir.join("queries.npy"), "<i8")?
            .i64s()
            .into_iter()
            .map(|q| {
                let k = starts.partition_point(|&s| s <= q) - 1;
                (k, (q - starts[k]) as usize)
            })
            .collect()
    } else {
        Vec::new()
    };
    let options = read_options();
    let t = Instant::now();
    let file = LodtFile::open_with(&path, &options)?;
    let mut sum = 0.0;
    match task {
        "open-doc" => {
            let b = file.batch(arg(0)?)?;
            let j = arg(1)?;
            sum += consume(
                &b.tensor("tokens")?.sequence(0, j)?,
                &b.tensor("emb")?.sequence(0, j)?,
            )?;
        }
        "random-take" => {
            let at: Vec<RowLocation> = queries
                .iter()
                .map(|&(batch, row)| RowLocation { batch, row })
                .collect();
            let got = file.take_level(1, &at)?;
            sum += consume(
                got.get("tokens").ok_or("no tokens")?,
                got.get("emb").ok_or("no emb")?,
            )?;
        }
        "random" | "random-prefetch" => {
            if task == "random-prefetch" {
                let at: Vec<RowLocation> = queries
                    .iter()
                    .map(|&(batch, row)| RowLocation { batch, row })
                    .collect();
                file.prefetch(1, &at)?;
            }
            // The tensors of each batch touched, kept (as the IPC and Parquet
            // peers keep their record batches).
            let mut cache = std::collections::HashMap::new();
            for &(k, l) in &queries {
                let (tokens, emb) = match cache.entry(k) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        let b = file.batch(k)?;
                        e.insert((b.tensor("tokens")?, b.tensor("emb")?))
                    }
                };
                sum += consume(&tokens.sequence(1, l)?, &emb.sequence(1, l)?)?;
            }
        }
        "random-rows" => {
            // The same loop, each sentence located by `Lod::row_range` and
            // read from the tensors' bodies (no tensor made per sentence).
            let mut cache = std::collections::HashMap::new();
            for &(k, l) in &queries {
                let (tokens, emb) = match cache.entry(k) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        let b = file.batch(k)?;
                        e.insert((b.tensor("tokens")?, b.tensor("emb")?))
                    }
                };
                let (t, e) = (tokens.lod().row_range(1, l)?, emb.lod().row_range(1, l)?);
                let ids = tokens.as_slice::<i64>()?;
                let rows = emb.as_slice::<f32>()?;
                let t = ids.get(t.start as usize..t.end as usize).ok_or("rows")?;
                let e = rows
                    .get(e.start as usize * DIM..e.end as usize * DIM)
                    .ok_or("rows")?;
                sum += t.iter().sum::<i64>() as f64
                    + e.iter().step_by(DIM).map(|&v| v as f64).sum::<f64>();
            }
        }
        "scan" => {
            for b in file.batches() {
                let b = b?;
                sum += consume(&b.tensor("tokens")?, &b.tensor("emb")?)?;
            }
        }
        _ => return Err(format!("unknown task {task}").into()),
    }
    let seconds = t.elapsed().as_secs_f64();
    println!("{{\"seconds\": {seconds}, \"checksum\": {sum}}}");
    Ok(())
}

/// Syncs, then touches 1.5 GiB of fresh memory and frees it. This machine's
/// virtual memory balloon reports free pages to the host (virtio
/// `F_REPORTING`), which takes them back: the page cache of a file just
/// deleted is returned that way, and a write that then allocates pages
/// faults them in from the host again (a 555 MB write took 0.5 to 1.4 s
/// instead of 0.12). Touched just before a timed run, the pages it will
/// allocate are the guest's again; every system gets the same.
fn settle() {
    let _ = std::process::Command::new("sync").status();
    let mut warm = vec![0u8; 3 << 29];
    for page in warm.chunks_mut(4096) {
        page[0] = 1;
    }
    std::hint::black_box(&warm);
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `prepare`, then times `f` into `log`.
fn time(log: &mut Vec<f64>, prepare: impl FnOnce(), f: impl FnOnce() -> Res<()>) -> Res<()> {
    prepare();
    let t = Instant::now();
    f()?;
    log.push(t.elapsed().as_secs_f64());
    Ok(())
}

/// The writer against `std::fs::write` of the same bytes (the finished
/// file's), each to a new file, interleaved; with and without fsync. The
/// data to write is in memory (the page cache is warm).
fn bench_write(dir: &Path, reps: usize, calls: Option<&Path>) -> Res<()> {
    let batches = Offsets::read(dir)?.batches(dir)?;
    let lodt = dir.join("write-test.lodt");
    let raw = dir.join("write-test.bin");
    write_lodt(&lodt, &batches, false)?;
    let bytes = std::fs::read(&lodt)?;
    // The writer's own write calls (their sizes), replayed by a raw writer.
    let sizes: Vec<usize> = match calls {
        Some(p) => std::fs::read_to_string(p)?
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.trim().parse::<usize>())
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    if calls.is_some() && sizes.iter().sum::<usize>() != bytes.len() {
        return Err(format!(
            "the write calls add up to {} bytes, the file has {}",
            sizes.iter().sum::<usize>(),
            bytes.len()
        )
        .into());
    }
    let same_calls = |p: &Path| -> Res<()> {
        let mut f = std::fs::File::create(p)?;
        let mut at = 0;
        for &n in &sizes {
            std::io::Write::write_all(&mut f, &bytes[at..at + n])?;
            at += n;
        }
        Ok(())
    };
    // Each run writes a new file, with no dirty pages left from the run
    // before (whose writeback would throttle this one).
    let fresh = |p: &Path| {
        let _ = std::fs::remove_file(p);
        settle();
    };
    // The same bytes written in 1 MiB calls, as a stream writer would.
    let chunked = |p: &Path| -> Res<()> {
        let mut f = std::fs::File::create(p)?;
        for c in bytes.chunks(1 << 20) {
            std::io::Write::write_all(&mut f, c)?;
        }
        Ok(())
    };
    // The floor of a writer that checksums what it writes: the same 1 MiB
    // calls while a second thread computes the CRC32 of the same bytes
    // (the two share the memory bandwidth and the cores).
    let chunked_crc = |p: &Path| -> Res<()> {
        std::thread::scope(|s| {
            let crc = s.spawn(|| crc32fast::hash(&bytes));
            let written = chunked(p);
            std::hint::black_box(crc.join().map_err(|_| "the CRC thread panicked")?);
            written
        })
    };
    let mut names = vec![
        "raw_write_all",
        "lodt_writer",
        "raw_write_all_fsync",
        "lodt_writer_fsync",
        "raw_write_all_1MiB",
        "raw_same_calls",
        "raw_write_all_1MiB_crc",
    ];
    let mut log: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    // Without fsync first, then with: the fsync runs' writeback disturbed
    // the runs after them when they were interleaved.
    for _ in 0..reps {
        time(&mut log[4], || fresh(&raw), || chunked(&raw))?;
        time(&mut log[6], || fresh(&raw), || chunked_crc(&raw))?;
        if !sizes.is_empty() {
            time(&mut log[5], || fresh(&raw), || same_calls(&raw))?;
        }
        time(
            &mut log[0],
            || fresh(&raw),
            || Ok(std::fs::write(&raw, &bytes)?),
        )?;
        time(
            &mut log[1],
            || fresh(&lodt),
            || write_lodt(&lodt, &batches, false),
        )?;
    }
    for _ in 0..reps {
        time(
            &mut log[2],
            || fresh(&raw),
            || {
                std::fs::write(&raw, &bytes)?;
                std::fs::File::open(&raw)?.sync_all()?;
                Ok(())
            },
        )?;
        time(
            &mut log[3],
            || fresh(&lodt),
            || write_lodt(&lodt, &batches, true),
        )?;
    }
    fresh(&raw);
    fresh(&lodt);
    // Throughput of lodt over raw, run by run (raw's time over the lodt
    // run next to it), whose median is steadier than a ratio of medians.
    let paired =
        |raw: &[f64], lodt: &[f64]| median(raw.iter().zip(lodt).map(|(r, l)| r / l).collect());
    eprintln!(
        "paired throughput lodt/raw: one call {:.3}, 1 MiB calls {:.3}, fsync {:.3}, \
         1 MiB calls with a CRC32 thread {:.3} (that writer / 1 MiB calls {:.3})",
        paired(&log[0], &log[1]),
        paired(&log[4], &log[1]),
        paired(&log[2], &log[3]),
        paired(&log[6], &log[1]),
        paired(&log[4], &log[6])
    );
    if sizes.is_empty() {
        names.remove(5);
        log.remove(5);
    }
    report(&names, log, bytes.len())
}

fn report(names: &[&str], log: Vec<Vec<f64>>, bytes: usize) -> Res<()> {
    let fields: Vec<String> = names
        .iter()
        .zip(log)
        .map(|(n, runs)| {
            let list: Vec<String> = runs.iter().map(|s| format!("{s}")).collect();
            format!(
                "\"{n}\": {{\"median\": {}, \"runs\": [{}]}}",
                median(runs),
                list.join(", ")
            )
        })
        .collect();
    println!("{{\"bytes\": {bytes}, {}}}", fields.join(", "));
    Ok(())
}

/// The CRC32 of `bytes` cut in one part per core, each part checksummed on
/// its own thread (the parts' checksums are not combined: a floor).
fn crc32_parts(bytes: &[u8], cores: usize) {
    let part = bytes.len().div_ceil(cores).max(1);
    std::thread::scope(|s| {
        for c in bytes.chunks(part) {
            s.spawn(move || std::hint::black_box(crc32fast::hash(c)));
        }
    });
}

/// What the kernel adds to a check of a file's bytes: `path` mapped, its
/// bytes checksummed as by [`crc32_parts`], then unmapped; no parsing.
fn crc32_mapped(path: &Path, cores: usize) -> Res<()> {
    let file = std::fs::File::open(path)?;
    // SAFETY: the benchmark's own file, which nothing truncates or writes
    // while it is mapped.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    crc32_parts(&map, cores);
    Ok(())
}

/// The other way to the bytes of a file in the page cache: [`crc32_parts`]
/// over `path` read with positional reads of 1 MiB into one reused buffer
/// per thread (a copy out of the page cache, no mapping).
fn crc32_pread(path: &Path, cores: usize) -> Res<()> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path)?;
    let len = usize::try_from(file.metadata()?.len())?;
    let part = len.div_ceil(cores).max(1);
    let file = &file;
    std::thread::scope(|s| {
        let parts: Vec<_> = (0..len)
            .step_by(part)
            .map(|start| {
                s.spawn(move || -> std::io::Result<u32> {
                    let mut buf = vec![0u8; 1 << 20];
                    let mut crc = crc32fast::Hasher::new();
                    let end = len.min(start + part);
                    let mut at = start;
                    while at < end {
                        let n = buf.len().min(end - at);
                        file.read_exact_at(&mut buf[..n], at as u64)?;
                        crc.update(&buf[..n]);
                        at += n;
                    }
                    Ok(crc.finalize())
                })
            })
            .collect();
        for p in parts {
            std::hint::black_box(p.join().map_err(|_| "a CRC thread panicked")??);
        }
        Ok(())
    })
}

/// Open and verify (every core) against a CRC32 of the same bytes held in
/// memory (one core, every core), and against the same every-core CRC32 of
/// the file mapped (the kernel's part: mapping the page cache's pages) and
/// of the file read with positional reads (copied out of the page cache);
/// the file is in the page cache.
fn bench_verify(dir: &Path, reps: usize) -> Res<()> {
    // A file just written by the writer, its page cache as the writer left
    // it; then the same file read back from disk by `read()` (the kernel
    // caches what it reads in large folios).
    let batches = Offsets::read(dir)?.batches(dir)?;
    let path = dir.join("verify-test.lodt");
    settle();
    write_lodt(&path, &batches, false)?;
    drop(batches);
    let bytes = std::fs::read(&path)?;
    let names = [
        "lodt_verify_just_written",
        "lodt_verify_read_back",
        "crc32_one_core",
        "crc32_all_cores",
        "crc32_mapped_just_written",
        "crc32_mapped_read_back",
        "sum_all_cores",
        "crc32_pread_just_written",
        "crc32_pread_read_back",
    ];
    let mut log: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let verify = || -> Res<()> {
        LodtFile::open_with(&path, &read_options())?.verify()?;
        Ok(())
    };
    let in_memory = |log: &mut Vec<Vec<f64>>| -> Res<()> {
        time(
            &mut log[2],
            || {},
            || {
                std::hint::black_box(crc32fast::hash(std::hint::black_box(&bytes)));
                Ok(())
            },
        )?;
        // The floor of a parallel check: the same bytes cut in one part per
        // core, each checksummed on its own thread (memory bandwidth shared).
        time(
            &mut log[3],
            || {},
            || {
                crc32_parts(&bytes, cores);
                Ok(())
            },
        )?;
        // Reading the bytes alone (a sum of 64-bit words on every core): the
        // memory bandwidth, which bounds any CRC, however fast.
        time(
            &mut log[6],
            || {},
            || {
                let part = bytes.len().div_ceil(cores).max(1);
                std::thread::scope(|s| {
                    for c in bytes.chunks(part) {
                        s.spawn(move || {
                            let words = c
                                .chunks_exact(8)
                                .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()));
                            std::hint::black_box(words.fold(0u64, u64::wrapping_add))
                        });
                    }
                });
                Ok(())
            },
        )
    };
    for _ in 0..reps {
        time(&mut log[0], || {}, verify)?;
        time(&mut log[4], || {}, || crc32_mapped(&path, cores))?;
        time(&mut log[7], || {}, || crc32_pread(&path, cores))?;
        in_memory(&mut log)?;
    }
    let _ = std::process::Command::new("sync").status();
    evict(&path)?;
    std::hint::black_box(std::fs::read(&path)?);
    for _ in 0..reps {
        time(&mut log[1], || {}, verify)?;
        time(&mut log[5], || {}, || crc32_mapped(&path, cores))?;
        time(&mut log[8], || {}, || crc32_pread(&path, cores))?;
        in_memory(&mut log)?;
    }
    let _ = std::fs::remove_file(&path);
    report(&names, log, bytes.len())
}

/// Drops `path`'s clean pages from the page cache.
fn evict(path: &Path) -> Res<()> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path)?;
    // SAFETY: a plain system call on a descriptor `file` keeps open; it
    // reads and writes no memory of this process.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(format!("posix_fadvise: error {rc}").into());
    }
    Ok(())
}

/// Bytes per batch beyond the LoD and body bytes, for 70-word batches.
fn overhead() -> Res<()> {
    println!(
        "| batch of 70 words | buffers | section bytes | LoD + body bytes | overhead per batch (incl. 24 B index entry) | of which JSON + its padding |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for shape in [
        "tokens + emb[70, 64], 2-level LoD each",
        "words [70, 1] 2-level LoD + labels [3]",
    ] {
        let n = 1000u64;
        let mut w = Writer::try_new(Vec::new(), BTreeMap::new())?;
        let mut payload = 0u64;
        for k in 0..n {
            // 3 documents of 2, 3 and 2 sentences of 10 words each.
            let lod = Lod::try_from_lengths(&[vec![2, 3, 2], vec![10; 7]])?;
            let b = if shape.starts_with("tokens") {
                let ids = LodTensor::from_vec(
                    (0..70).map(|i| i + k as i64).collect(),
                    vec![70],
                    lod.clone(),
                )?;
                let e = LodTensor::from_vec(vec![0.5f32; 70 * DIM], vec![70, DIM], lod)?;
                Batch::try_from_tensors([("tokens", ids), ("emb", e)])?
            } else {
                let words =
                    LodTensor::from_vec((0..70).map(|i| i + k as i64).collect(), vec![70, 1], lod)?;
                let labels = LodTensor::from_vec(vec![1i64, 0, 1], vec![3], Lod::empty())?;
                Batch::try_from_tensors([("words", words), ("labels", labels)])?
            };
            for (_, t) in b.iter() {
                payload += t.as_bytes().len() as u64;
                payload += t.lod().levels().map(|l| 8 * l.len() as u64).sum::<u64>();
            }
            w.write(&b)?;
        }
        let empty = Writer::try_new(Vec::new(), BTreeMap::new())?
            .finish()?
            .len() as u64;
        let bytes = w.finish()?;
        let file = LodtFile::from_bytes(&bytes)?;
        let section = file.batch_range(0)?;
        let at = section.start as usize;
        let meta_len = u64::from_le_bytes(bytes[at + 24..at + 32].try_into()?);
        let json_padded = (64 + meta_len).div_ceil(64) * 64 - 64;
        let buffers = u32::from_le_bytes(bytes[at + 36..at + 40].try_into()?);
        let per_batch = (bytes.len() as u64 - empty) as f64 / n as f64;
        println!(
            "| {shape} | {buffers} | {} | {} | {:.0} B | {json_padded} B (JSON {meta_len} B) |",
            section.end - section.start,
            payload / n,
            per_batch - (payload / n) as f64,
        );
    }
    Ok(())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = |i: usize| -> Res<PathBuf> { Ok(PathBuf::from(args.get(i).ok_or("missing DIR")?)) };
    let reps = |i: usize| args.get(i).and_then(|r| r.parse().ok()).unwrap_or(7);
    match args.first().map(String::as_str) {
        Some("write-lodt") => {
            let dir = dir(1)?;
            let batches = Offsets::read(&dir)?.batches(&dir)?;
            write_lodt(&dir.join("data.lodt"), &batches, false)
        }
        Some("run") => {
            let task = args.get(1).ok_or("missing task")?;
            run(task, &dir(2)?, &args[3..])
        }
        Some("write") => bench_write(&dir(1)?, reps(2), args.get(3).map(Path::new)),
        Some("verify") => bench_verify(&dir(1)?, reps(2)),
        Some("overhead") => overhead(),
        Some("write-pattern") => {
            // Profiling aid: the lodt file's bytes written with the writer's
            // call boundaries (small, then a body), against 1 MiB calls.
            let dir = dir(1)?;
            let src = dir.join("data.lodt");
            let bytes = std::fs::read(&src)?;
            let file = LodtFile::open(&src)?;
            let mut cuts = vec![0usize];
            for k in 0..file.num_batches() {
                let r = file.batch_range(k)?;
                let b = file.batch(k)?;
                let emb = file.tensor_buffers(k, "emb")?;
                let _ = b;
                cuts.push(emb.body.start);
                cuts.push(emb.body.end);
                cuts.push(r.end as usize);
            }
            cuts.push(bytes.len());
            let align: usize = std::env::var("CUT_ALIGN")
                .ok()
                .and_then(|a| a.parse().ok())
                .unwrap_or(1);
            for c in cuts.iter_mut() {
                if *c != bytes.len() {
                    *c -= *c % align;
                }
            }
            cuts.dedup();
            let path = dir.join("write-test.bin");
            for _ in 0..reps(2) {
                for aligned in [false, true] {
                    let _ = std::fs::remove_file(&path);
                    settle();
                    let t = Instant::now();
                    let mut f = std::fs::File::create(&path)?;
                    if aligned {
                        for c in bytes.chunks(1 << 20) {
                            std::io::Write::write_all(&mut f, c)?;
                        }
                    } else {
                        for w in cuts.windows(2) {
                            std::io::Write::write_all(&mut f, &bytes[w[0]..w[1]])?;
                        }
                    }
                    drop(f);
                    println!(
                        "{} {:.1} ms",
                        if aligned { "1MiB" } else { "lodt-cuts" },
                        t.elapsed().as_secs_f64() * 1e3
                    );
                }
            }
            let _ = std::fs::remove_file(&path);
            Ok(())
        }
        Some("verify-only") => {
            // Profiling aid: open and verify data.lodt `reps` times, each
            // timed, next to the two-core CRC of its bytes mapped.
            let path = dir(1)?.join("data.lodt");
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            for _ in 0..reps(2) {
                let t = Instant::now();
                LodtFile::open_with(&path, &read_options())?.verify()?;
                let lodt = t.elapsed().as_secs_f64() * 1e3;
                if args.get(3).is_some_and(|a| a == "verify") {
                    println!("verify {lodt:.1} ms");
                    continue;
                }
                let t = Instant::now();
                crc32_mapped(&path, cores)?;
                let crc = t.elapsed().as_secs_f64() * 1e3;
                println!("verify {lodt:.1} ms, crc32 mapped {crc:.1} ms");
            }
            Ok(())
        }
        Some("write-only") => {
            // Profiling aid: the writer alone, `reps` times.
            let dir = dir(1)?;
            let batches = Offsets::read(&dir)?.batches(&dir)?;
            let path = dir.join("write-test.lodt");
            for _ in 0..reps(2) {
                let _ = std::fs::remove_file(&path);
                settle();
                let t = Instant::now();
                write_lodt(&path, &batches, false)?;
                println!("{:.1} ms", t.elapsed().as_secs_f64() * 1e3);
            }
            let _ = std::fs::remove_file(&path);
            Ok(())
        }
        _ => Err("usage: peers write-lodt|run|write|verify|overhead ... (see the source)".into()),
    }
}
