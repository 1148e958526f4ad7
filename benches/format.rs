//! `.lodt` format benchmarks, each against a peer in the same run:
//!
//! - `write_256MiB`: the streaming writer (checksums included) against
//!   `std::fs::write` of the same bytes (with and without fsync);
//! - `open_reach/{16MiB,1GiB}`: open a file, reach the last batch's `frames`
//!   tensor and read an element, against `safetensors` (map +
//!   `SafeTensors::deserialize` + `tensor`) on a file with the same tensors;
//! - `branch_slice`: a `<i, j>` slice of a mapped file's 2-level tensor;
//! - `read_verify_256MiB`: open and verify every byte (on every core), and
//!   a sequential read of every batch, against `std::fs::read` and against
//!   a one-core CRC32 of the same bytes in memory.
//!
//! Run: `cargo bench --bench format` (about a minute). Files go to a
//! temporary directory (about 2.3 GB at peak), removed at the end.
//! `LODT_BENCH=write,read` runs only some groups.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use lodt::buffer::ByteStorage;
use lodt::format::{LodtFile, MappedFile, StreamReader, WriteOptions, Writer};
use lodt::{Batch, Lod, LodTensor};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

const MIB: usize = 1 << 20;
/// Frames of 64 x 64 float32 (16 KiB each).
const FRAME: [usize; 2] = [64, 64];

/// A batch of about `mib` MiB: video-like frames (1-level LoD), words
/// (2-level LoD) and labels.
fn batch(k: usize, mib: usize) -> Batch {
    let frame_elems = FRAME[0] * FRAME[1];
    let frames = mib * MIB / (frame_elems * 4);
    let videos = 8;
    let per = frames / videos;
    let lod = Lod::try_from_lengths(&[vec![per as u64; videos]]).unwrap();
    let values: Vec<f32> = (0..per * videos * frame_elems)
        .map(|i| (i % 251) as f32 + k as f32)
        .collect();
    let frames = LodTensor::from_vec(values, vec![per * videos, FRAME[0], FRAME[1]], lod).unwrap();
    let sentences = vec![4u64; 64];
    let words = vec![8u64; 256];
    let rows = 256 * 8;
    let lod = Lod::try_from_lengths(&[sentences, words]).unwrap();
    let words = LodTensor::from_vec((0..rows as i64).collect(), vec![rows, 1], lod).unwrap();
    let labels = LodTensor::from_vec(vec![k as i64; 64], vec![64], Lod::empty()).unwrap();
    Batch::try_from_tensors([("frames", frames), ("words", words), ("labels", labels)]).unwrap()
}

fn write_lodt(path: &Path, batches: &[Batch], fsync: bool) {
    let mut w = Writer::create_with(
        path,
        BTreeMap::new(),
        WriteOptions {
            fsync,
            ..Default::default()
        },
    )
    .unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    w.finish().unwrap();
}

/// A lodt file of `count` batches of `mib` MiB, written batch by batch.
fn make_lodt(path: &Path, count: usize, mib: usize) {
    let mut w = Writer::create_with(
        path,
        BTreeMap::new(),
        WriteOptions {
            fsync: false,
            ..Default::default()
        },
    )
    .unwrap();
    for k in 0..count {
        w.write(&batch(k, mib)).unwrap();
    }
    w.finish().unwrap();
}

/// A safetensors file with the same tensors as the lodt file at `lodt`
/// (names `b{k}/{tensor}` and `b{k}/{tensor}.lod{l}`), copied from its map.
fn make_safetensors(lodt: &Path, path: &Path) {
    let file = LodtFile::open(lodt).unwrap();
    let mut tensors = Vec::new();
    for k in 0..file.num_batches() {
        let b = file.batch(k).unwrap();
        for t in b.tensors() {
            let (name, v) = t.unwrap();
            tensors.push((k, name.to_owned(), v));
        }
    }
    let mut views = Vec::new();
    for (k, name, v) in &tensors {
        {
            for l in 0..v.lod().num_levels() {
                let level = v.lod().raw_level(l).unwrap();
                let bytes = lodt::Element::slice_as_bytes(level);
                views.push((
                    format!("b{k}/{name}.lod{l}"),
                    TensorView::new(Dtype::U64, vec![level.len()], bytes).unwrap(),
                ));
            }
            let dtype = match v.dtype() {
                lodt::DType::Float32 => Dtype::F32,
                lodt::DType::Int64 => Dtype::I64,
                other => panic!("no safetensors dtype for {other}"),
            };
            views.push((
                format!("b{k}/{name}"),
                TensorView::new(dtype, v.shape().to_vec(), v.as_bytes()).unwrap(),
            ));
        }
    }
    safetensors::serialize_to_file(views, None, path).unwrap();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

struct Files {
    _dir: tempfile::TempDir,
    dir: PathBuf,
}

fn files() -> Files {
    let dir = tempfile::Builder::new()
        .prefix("lodt-bench")
        .tempdir_in(std::env::temp_dir())
        .unwrap();
    let path = dir.path().to_path_buf();
    Files {
        _dir: dir,
        dir: path,
    }
}

fn write(c: &mut Criterion, f: &Files) {
    let batches: Vec<Batch> = (0..16).map(|k| batch(k, 16)).collect();
    let lodt = f.dir.join("write.lodt");
    write_lodt(&lodt, &batches, false);
    let bytes = std::fs::read(&lodt).unwrap();
    let plain = f.dir.join("write.bin");
    let mut g = c.benchmark_group("write_256MiB");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    // Each run writes a new file (the old one is removed first, outside the
    // timing), as a dataset writer does.
    let fresh = |p: &Path| {
        let _ = std::fs::remove_file(p);
    };
    g.bench_function("std_fs_write", |b| {
        b.iter_batched(
            || fresh(&plain),
            |()| std::fs::write(&plain, &bytes).unwrap(),
            BatchSize::PerIteration,
        )
    });
    g.bench_function("lodt_writer", |b| {
        b.iter_batched(
            || fresh(&lodt),
            |()| write_lodt(&lodt, &batches, false),
            BatchSize::PerIteration,
        )
    });
    g.bench_function("std_fs_write_fsync", |b| {
        b.iter_batched(
            || fresh(&plain),
            |()| {
                std::fs::write(&plain, &bytes).unwrap();
                std::fs::File::open(&plain).unwrap().sync_all().unwrap();
            },
            BatchSize::PerIteration,
        )
    });
    g.bench_function("lodt_writer_fsync", |b| {
        b.iter_batched(
            || fresh(&lodt),
            |()| write_lodt(&lodt, &batches, true),
            BatchSize::PerIteration,
        )
    });
    g.finish();
    fresh(&plain);
}

fn read_verify(c: &mut Criterion, f: &Files) {
    let lodt = f.dir.join("write.lodt");
    let size = std::fs::metadata(&lodt).unwrap().len();
    let mut g = c.benchmark_group("read_verify_256MiB");
    g.throughput(Throughput::Bytes(size));
    g.bench_function("lodt_open_verify", |b| {
        b.iter(|| black_box(LodtFile::open(&lodt).unwrap().verify().unwrap()))
    });
    g.bench_function("lodt_stream_read", |b| {
        b.iter(|| {
            let file = std::fs::File::open(&lodt).unwrap();
            let n = StreamReader::try_new(std::io::BufReader::with_capacity(1 << 16, file))
                .unwrap()
                .map(|b| b.unwrap().len())
                .sum::<usize>();
            black_box(n)
        })
    });
    g.bench_function("std_fs_read", |b| {
        b.iter(|| black_box(std::fs::read(&lodt).unwrap().len()))
    });
    // The peer of verify's CPU cost: one core checksumming the same bytes,
    // in memory (verify runs on every core).
    let bytes = std::fs::read(&lodt).unwrap();
    g.bench_function("crc32_one_core", |b| {
        b.iter(|| black_box(crc32fast::hash(black_box(&bytes))))
    });
    g.finish();
}

fn open_reach(c: &mut Criterion, f: &Files) {
    // 4 MiB batches: 4 of them in 16 MiB, 256 in 1 GiB.
    for (label, count) in [("16MiB", 4usize), ("1GiB", 256)] {
        let lodt = f.dir.join(format!("reach_{label}.lodt"));
        let st = f.dir.join(format!("reach_{label}.safetensors"));
        make_lodt(&lodt, count, 4);
        make_safetensors(&lodt, &st);
        let k = count - 1;
        let name = format!("b{k}/frames");
        let mut g = c.benchmark_group(format!("open_reach/{label}"));
        g.bench_function("lodt", |b| {
            b.iter(|| {
                let file = LodtFile::open(&lodt).unwrap();
                let batch = file.batch(k).unwrap();
                let frames = batch.tensor("frames").unwrap();
                black_box(frames.as_slice::<f32>().unwrap()[1])
            })
        });
        g.bench_function("safetensors", |b| {
            b.iter(|| {
                let map = MappedFile::open(&st).unwrap();
                let st = SafeTensors::deserialize(map.bytes()).unwrap();
                let t = st.tensor(&name).unwrap();
                let v = f32::from_le_bytes(t.data()[4..8].try_into().unwrap());
                black_box(v)
            })
        });
        g.finish();
        std::fs::remove_file(&st).unwrap();
        if count > 4 {
            std::fs::remove_file(&lodt).unwrap();
        }
    }
}

fn branch_slice(c: &mut Criterion, f: &Files) {
    let lodt = f.dir.join("reach_16MiB.lodt");
    let file = LodtFile::open(&lodt).unwrap();
    let words = file.batch(2).unwrap().tensor("words").unwrap();
    let map = file.storage().unwrap().bytes().as_ptr_range();
    let s = words.branch(&[10, 3]).unwrap();
    assert!(map.contains(&s.as_bytes().as_ptr()), "no copy");
    let mut g = c.benchmark_group("branch_slice");
    g.bench_function("view_branch", |b| {
        b.iter(|| black_box(words.branch(black_box(&[10, 3])).unwrap().rows()))
    });
    g.bench_function("batch_tensor_branch", |b| {
        b.iter(|| {
            let w = file.batch(2).unwrap().tensor("words").unwrap();
            black_box(
                w.branch(black_box(&[10, 3]))
                    .unwrap()
                    .as_slice::<i64>()
                    .unwrap()[0],
            )
        })
    });
    g.finish();
}

/// Whether group `name` runs: all of them, unless `LODT_BENCH` lists some
/// (comma-separated: `write,read,open,branch`), which skips the others'
/// setup too.
fn wanted(name: &str) -> bool {
    match std::env::var("LODT_BENCH") {
        Ok(list) => list.split(',').any(|w| name.starts_with(w.trim())),
        Err(_) => true,
    }
}

fn all(c: &mut Criterion) {
    let f = files();
    if wanted("write") || wanted("read") {
        write(c, &f);
    }
    if wanted("read") {
        read_verify(c, &f);
    }
    if wanted("open") || wanted("branch") {
        open_reach(c, &f);
    }
    if wanted("branch") {
        branch_slice(c, &f);
    }
}

criterion_group! {
    name = benches;
    config = config();
    targets = all
}
criterion_main!(benches);
