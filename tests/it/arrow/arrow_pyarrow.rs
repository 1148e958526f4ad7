//! pyarrow reads what lodt writes: Parquet, Arrow IPC files and streams of
//! batches holding every dtype, 0-3 LoD levels, element shapes, a 0-D tensor.
//! `tests/pyarrow/check.py` checks values, LoD and list types against a
//! manifest this test writes beside the files.
//!
//! Needs `LODT_PYTHON` (a python with pyarrow and numpy; `.ci/run` sets it up).
//! Without it the test prints `SKIPPED: pyarrow not available`, passes, and
//! is listed as skipped at the end of `scripts/test`'s output.
#![cfg(feature = "parquet")]

use lodt::arrow::ipc::{write_ipc_file, write_ipc_stream};
use lodt::arrow::parquet::write_parquet;
use lodt::arrow::{ArrowOptions, ArrowWriteOptions, ListType, TensorType};
use lodt::{Batch, DType, Lod, LodTensor};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A small deterministic generator (no dependency on test randomness).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// LoD lengths with `top` top-level sequences and `levels` levels; every level
/// above the last has at least one entry.
fn lengths(rng: &mut Lcg, top: u64, levels: usize) -> Vec<Vec<u64>> {
    let mut out: Vec<Vec<u64>> = Vec::new();
    let mut count = top;
    for l in 0..levels {
        let mut level: Vec<u64> = (0..count).map(|_| rng.below(4)).collect();
        if l + 1 < levels && level.iter().sum::<u64>() == 0 {
            level[0] = 1;
        }
        count = level.iter().sum();
        out.push(level);
    }
    out
}

fn values(rng: &mut Lcg, dtype: DType, n: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(n * dtype.size());
    for _ in 0..n {
        let r = rng.next();
        let signed = r as i64 % 1000 - 500;
        match dtype {
            DType::Bool => bytes.push((r & 1) as u8),
            DType::Int8 => bytes.extend_from_slice(&(r as i8).to_le_bytes()),
            DType::Int16 => bytes.extend_from_slice(&(signed as i16 * 60).to_le_bytes()),
            DType::Int32 => bytes.extend_from_slice(&(signed as i32 * 4_000_000).to_le_bytes()),
            DType::Int64 => bytes.extend_from_slice(&(signed * 10_000_000_000_000).to_le_bytes()),
            DType::UInt8 => bytes.push(r as u8),
            DType::UInt16 => bytes.extend_from_slice(&(r as u16).to_le_bytes()),
            DType::UInt32 => bytes.extend_from_slice(&(r as u32).to_le_bytes()),
            DType::UInt64 => bytes.extend_from_slice(&((r << 20) | 7).to_le_bytes()),
            DType::Float16 => {
                bytes.extend_from_slice(&half::f16::from_f32(signed as f32 / 8.0).to_le_bytes())
            }
            DType::BFloat16 => {
                bytes.extend_from_slice(&half::bf16::from_f32(signed as f32 / 4.0).to_le_bytes())
            }
            DType::Float32 => bytes.extend_from_slice(&(signed as f32 / 3.0).to_le_bytes()),
            DType::Float64 => bytes.extend_from_slice(&(signed as f64 / 7.0).to_le_bytes()),
        }
    }
    bytes
}

/// The tensor's values as JSON numbers (bfloat16: raw bits, as pyarrow sees them).
fn json_values(t: &LodTensor) -> Vec<Value> {
    match t.dtype() {
        DType::Bool => t
            .as_slice::<bool>()
            .unwrap()
            .iter()
            .map(|v| json!(v))
            .collect(),
        DType::Int8 => t
            .as_slice::<i8>()
            .unwrap()
            .iter()
            .map(|v| json!(v))
            .collect(),
        DType::Int16 => t
            .as_slice::<i16>()
            .unwrap()
            .iter()
            .map(|v| json!(v))
            .collect(),
        DType::Int32 => t
            .as_slice::<i32>()
            .unwrap()
            .iter()
            .map(|v| json!(v))
            .collect(),
        DType::Int64 => t
            .as_slice::<i64>()
            .unwrap()
            .iter()
            .map(|v| json!(v))
            .collect(),
        DType::UInt8 => t
            .as_slice::<u8>()
            .unwrap()
            .iter()
            .map(|v| json!(v))
            .collect(),
        DType::UInt16 => t
            .as_slice::<u16>()
            .unwrap()
            .iter()
            .map(|v| json!(v))
            .collect(),
        DType::UInt32 => t
            .as_slice::<u32>()
            .unwrap()
            .iter()
            .map(|v| json!(v))
            .collect(),
        DType::UInt64 => t
            .as_slice::<u64>()
            .unwrap()
            .iter()
            .map(|v| json!(v))
            .collect(),
        DType::Float16 => t
            .as_slice::<half::f16>()
            .unwrap()
            .iter()
            .map(|v| json!(v.to_f64()))
            .collect(),
        DType::BFloat16 => t
            .as_slice::<half::bf16>()
            .unwrap()
            .iter()
            .map(|v| json!(v.to_bits()))
            .collect(),
        DType::Float32 => t
            .as_slice::<f32>()
            .unwrap()
            .iter()
            .map(|v| json!(f64::from(*v)))
            .collect(),
        DType::Float64 => t
            .as_slice::<f64>()
            .unwrap()
            .iter()
            .map(|v| json!(v))
            .collect(),
    }
}

fn batches(seed: u64) -> Vec<Batch> {
    let shapes: [&[usize]; 4] = [&[], &[2], &[2, 3], &[3]];
    let mut rng = Lcg(seed);
    (0..2u64)
        .map(|b| {
            let top = 3 + b;
            let mut batch = Batch::new();
            for (i, dtype) in DType::ALL.into_iter().enumerate() {
                let levels = i % 4;
                let lengths = lengths(&mut rng, top, levels);
                let rows = lengths.last().map_or(top, |l| l.iter().sum()) as usize;
                let element_shape = shapes[(i / 2) % 4];
                let n = rows * element_shape.iter().product::<usize>();
                let mut shape = vec![rows];
                shape.extend_from_slice(element_shape);
                let lod = Lod::try_from_lengths(&lengths).unwrap();
                let t =
                    LodTensor::from_bytes(dtype, shape, &values(&mut rng, dtype, n), lod).unwrap();
                batch
                    .push(format!("{}_{levels}lvl", dtype.name()), t)
                    .unwrap();
            }
            batch
                .metadata_mut()
                .insert("source".into(), "lodt-pyarrow-test".into());
            batch
        })
        .collect()
}

fn scalar_batches() -> Vec<Batch> {
    let scalar = LodTensor::from_vec(vec![2.5f64], vec![], Lod::empty()).unwrap();
    let lod = Lod::try_from_lengths(&[vec![4]]).unwrap();
    let one = LodTensor::from_vec(vec![1i32, 2, 3, 4], vec![4], lod).unwrap();
    let mut batch = Batch::try_from_tensors([("scalar", scalar), ("one", one)]).unwrap();
    batch
        .metadata_mut()
        .insert("source".into(), "lodt-pyarrow-test".into());
    vec![batch]
}

/// Tensors at the writers' depth limit (`MAX_LOD_LEVELS` levels), with and
/// without an element shape: the deepest files lodt writes, which pyarrow
/// must read (its Parquet reader allows 49 nested lists, its IPC reader 63).
fn deep_batches() -> Vec<Batch> {
    let mut rng = Lcg(7);
    let levels = lodt::arrow::MAX_LOD_LEVELS;
    let mut batch = Batch::new();
    for (name, element_shape) in [("deep", &[][..]), ("deep_shaped", &[2, 3][..])] {
        // Level 0: [2, 1]; below, one entry per sequence, the last two
        // long, and at odd levels the first empty: a few rows, every case.
        let mut lengths = vec![vec![2u64, 1]];
        for l in 1..levels {
            let count = lengths[l - 1].iter().sum::<u64>() as usize;
            let mut level = vec![1u64; count];
            level[count - 1] = 2;
            if l % 2 == 1 {
                level[0] = 0;
            }
            lengths.push(level);
        }
        let rows = lengths.last().map_or(0, |l| l.iter().sum()) as usize;
        let n = rows * element_shape.iter().product::<usize>();
        let mut shape = vec![rows];
        shape.extend_from_slice(element_shape);
        let lod = Lod::try_from_lengths(&lengths).unwrap();
        let t = LodTensor::from_bytes(
            DType::Float32,
            shape,
            &values(&mut rng, DType::Float32, n),
            lod,
        )
        .unwrap();
        batch.push(name, t).unwrap();
    }
    batch
        .metadata_mut()
        .insert("source".into(), "lodt-pyarrow-test".into());
    vec![batch]
}

fn manifest_entry(path: &str, format: &str, options: &ArrowOptions, batches: &[Batch]) -> Value {
    let list_type = options.list_type;
    let list_type = match list_type {
        ListType::List => "list",
        ListType::LargeList => "large_list",
    };
    let batches: Vec<Value> = batches
        .iter()
        .map(|b| {
            let columns: Vec<Value> = b
                .iter()
                .map(|(name, t)| {
                    json!({
                        "name": name,
                        "dtype": t.dtype().name(),
                        "lod": t.lod().to_offsets(),
                        "element_shape": t.element_shape(),
                        "scalar": t.shape().is_empty(),
                        "values": json_values(t),
                    })
                })
                .collect();
            let rows = b.iter().next().map_or(0, |(_, t)| t.top_level_rows());
            json!({ "rows": rows, "columns": columns })
        })
        .collect();
    json!({
        "path": path,
        "format": format,
        "list_type": list_type,
        "tensor_type": options.tensor_type.name(),
        "metadata": batches_metadata(),
        "batches": batches,
    })
}

fn batches_metadata() -> Value {
    json!({ "source": "lodt-pyarrow-test" })
}

/// Writes every file and the manifest into `dir`.
fn write_files(dir: &Path) {
    let mut files = Vec::new();
    for (list_type, tensor_type, suffix) in [
        (ListType::LargeList, TensorType::NestedLists, ""),
        (ListType::List, TensorType::NestedLists, "_list"),
        (ListType::LargeList, TensorType::FixedShape, "_fixed"),
    ] {
        let arrow = ArrowOptions::default()
            .with_list_type(list_type)
            .with_tensor_type(tensor_type);
        let options = ArrowWriteOptions::default().with_arrow(arrow);
        for (set, batches) in [
            ("data", batches(42)),
            ("scalar", scalar_batches()),
            ("deep", deep_batches()),
        ] {
            let items = || batches.iter().cloned().map(Ok::<_, lodt::Error>);
            let name = format!("{set}{suffix}.parquet");
            write_parquet(
                std::fs::File::create(dir.join(&name)).unwrap(),
                items(),
                &options,
            )
            .unwrap();
            files.push(manifest_entry(&name, "parquet", &arrow, &batches));
            let name = format!("{set}{suffix}.arrow");
            write_ipc_file(
                std::fs::File::create(dir.join(&name)).unwrap(),
                items(),
                &options,
            )
            .unwrap();
            files.push(manifest_entry(&name, "ipc_file", &arrow, &batches));
            let name = format!("{set}{suffix}.arrows");
            write_ipc_stream(
                std::fs::File::create(dir.join(&name)).unwrap(),
                items(),
                &options,
            )
            .unwrap();
            files.push(manifest_entry(&name, "ipc_stream", &arrow, &batches));
        }
    }
    let manifest = json!({ "files": files });
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
}

/// Reports a skipped test: on stderr, and as a line of
/// `target/tmp/skipped-tests.txt`, which `scripts/test` prints (and counts)
/// at the end of its output, so a skip is never mistaken for a pass.
pub(crate) fn skipped(test: &str, reason: &str) {
    use std::io::Write;
    eprintln!("SKIPPED: {reason}");
    let list = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped-tests.txt");
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(list)
    {
        let _ = writeln!(file, "{test}: {reason}");
    }
}

/// The python to use, if it can import pyarrow and numpy.
pub(crate) fn python() -> Option<PathBuf> {
    let python = PathBuf::from(std::env::var_os("LODT_PYTHON")?);
    let ok = Command::new(&python)
        .args(["-c", "import pyarrow, numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(python)
}

#[test]
fn pyarrow_reads_what_lodt_writes() {
    let Some(python) = python() else {
        skipped(
            "arrow_pyarrow::pyarrow_reads_what_lodt_writes",
            "pyarrow not available (set LODT_PYTHON to a python with pyarrow and numpy)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pyarrow/check.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "check.py failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("27 files"), "{stdout}");
    eprintln!("{stdout}");
}

#[test]
fn the_written_files_read_back_in_lodt_too() {
    // The same files, read by lodt: what pyarrow checks is what lodt wrote.
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path());
    let back: Vec<Batch> = lodt::arrow::parquet::ParquetReader::open(
        dir.path().join("data_list.parquet"),
        &ArrowOptions::default(),
    )
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap();
    assert_eq!(back, batches(42));
    let f = std::fs::File::open(dir.path().join("scalar.arrows")).unwrap();
    let back: Vec<Batch> = lodt::arrow::ipc::IpcStreamReader::try_new(f, &ArrowOptions::default())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(back, scalar_batches());
    let back: Vec<Batch> = lodt::arrow::parquet::ParquetReader::open(
        dir.path().join("deep.parquet"),
        &ArrowOptions::default(),
    )
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap();
    assert_eq!(back, deep_batches());
    let back: Vec<Batch> = lodt::arrow::parquet::ParquetReader::open(
        dir.path().join("data_fixed.parquet"),
        &ArrowOptions::default(),
    )
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap();
    assert_eq!(back, batches(42));
}
