//! Writing a directory of Parquet shards (`--to parquet-dir`): shards of
//! about the shard size, ending at batch boundaries, named in order, read
//! back as the same batches by lodt's own directory layout and by pyarrow,
//! written all or nothing.
#![cfg(feature = "parquet")]

use crate::arrow::arrow_pyarrow::{python, skipped};
use lodt::batch::write_all;
use lodt::convert::{Conversion, ConvertError, ConvertOptions, Endpoint, Format, Layout};
use lodt::{Batch, BatchReader, Lod, LodTensor};
use std::path::{Path, PathBuf};

/// Batch `k`: `rows` articles of 1-3 sentences of 1-4 words (i64 ids) and a
/// float label per article.
fn batch(k: usize, rows: usize) -> Batch {
    let sentences: Vec<u64> = (0..rows).map(|i| 1 + ((i + k) % 3) as u64).collect();
    let words: Vec<u64> = (0..sentences.iter().sum::<u64>() as usize)
        .map(|j| 1 + ((j * 7 + k) % 4) as u64)
        .collect();
    let n = words.iter().sum::<u64>() as usize;
    let lod = Lod::try_from_lengths(&[sentences, words]).unwrap();
    let start = (k * 1000) as i64;
    let ids = LodTensor::from_vec((start..start + n as i64).collect(), vec![n], lod).unwrap();
    let labels = (0..rows).map(|i| (k * 10 + i) as f32).collect();
    let label = LodTensor::from_vec(labels, vec![rows], Lod::empty()).unwrap();
    Batch::try_from_tensors([("ids", ids), ("label", label)]).unwrap()
}

/// The top-level rows of `batches`.
fn rows(batches: &[Batch]) -> usize {
    batches
        .iter()
        .map(|b| b.get("label").or(b.get("tokens")).unwrap().top_level_rows())
        .sum()
}

/// A tensor's values as nested JSON lists, one entry per top-level row.
fn nested_json(t: &LodTensor) -> Vec<serde_json::Value> {
    fn json(n: &lodt::Nested<i64>) -> serde_json::Value {
        match n {
            lodt::Nested::Rows(v) => serde_json::json!(v),
            lodt::Nested::Seqs(s) => serde_json::Value::Array(s.iter().map(json).collect()),
        }
    }
    match json(&t.to_nested::<i64>().unwrap()) {
        serde_json::Value::Array(rows) => rows,
        other => vec![other],
    }
}

fn batches() -> Vec<Batch> {
    (0..12).map(|k| batch(k, 20 + k * 5)).collect()
}

fn write(format: Format, path: &Path, batches: &[Batch]) {
    let writer = format
        .create_writer(path, Default::default(), &ConvertOptions::default())
        .unwrap();
    write_all(writer, batches.iter().cloned().map(Ok::<_, ConvertError>)).unwrap();
}

fn to_parquet_dir(
    input: &Path,
    output: &Path,
    options: &ConvertOptions,
) -> lodt::batch::WriteStats {
    let from = Endpoint::input(input).unwrap();
    let to = Endpoint::from_name("parquet-dir").unwrap();
    Conversion::open_as(input, from, output, to, options)
        .unwrap()
        .run(|_| {})
        .unwrap()
        .stats
}

fn read_all(reader: impl BatchReader<Error = ConvertError>) -> Vec<Batch> {
    reader.collect::<Result<_, _>>().unwrap()
}

/// The batches of the directory read back as one input, by its layout.
fn read_dir(dir: &Path) -> Vec<Batch> {
    assert_eq!(
        Endpoint::input(dir).unwrap(),
        Endpoint::Layout(Layout::ParquetFiles)
    );
    read_all(
        Endpoint::input(dir)
            .unwrap()
            .open_reader(dir, &ConvertOptions::default())
            .unwrap(),
    )
}

fn shard_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    all.sort();
    all
}

#[test]
fn a_lodt_file_becomes_shards_of_about_the_shard_size_read_back_as_the_same_batches() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.lodt");
    let expected = batches();
    write(Format::Lodt, &input, &expected);
    let out = dir.path().join("shards");
    let shard_bytes = 4096;
    let options = ConvertOptions {
        shard_bytes: Some(shard_bytes),
        ..Default::default()
    };
    let stats = to_parquet_dir(&input, &out, &options);
    assert_eq!((stats.batches, stats.tensors), (12, 24));
    assert_eq!(stats.rows, rows(&expected) as u64);

    // Named in order, several of them, nothing else in the directory.
    let names = shard_names(&out);
    assert!(names.len() >= 3, "{names:?}");
    let numbered: Vec<String> = (0..names.len())
        .map(|i| format!("part-{i:05}.parquet"))
        .collect();
    assert_eq!(names, numbered);

    // Each shard holds whole batches, in order; every shard but the last
    // reached the shard size (a shard ends at the first batch boundary past
    // it), and holds no batch after the one that reached it.
    let mut next = 0;
    for (i, name) in names.iter().enumerate() {
        let path = out.join(name);
        let shard = read_all(
            Format::Parquet
                .open_reader(&path, &ConvertOptions::default())
                .unwrap(),
        );
        assert!(!shard.is_empty(), "{name} holds no batch");
        assert_eq!(shard, expected[next..next + shard.len()], "{name}");
        next += shard.len();
        // The bytes before the footer: the magic number and the row groups
        // (one per batch).
        use parquet::file::reader::FileReader;
        let reader =
            parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&path).unwrap())
                .unwrap();
        let groups: Vec<u64> = reader
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.compressed_size() as u64)
            .collect();
        assert_eq!(groups.len(), shard.len());
        let all = 4 + groups.iter().sum::<u64>();
        let before_last = all - groups.last().unwrap();
        assert!(
            before_last < shard_bytes,
            "{name}: {before_last} bytes before its last batch"
        );
        if i + 1 < names.len() {
            assert!(all >= shard_bytes, "{name}: {all} bytes");
        }
    }
    assert_eq!(next, expected.len());

    // lodt's own reader of the layout gives back the same batches.
    assert_eq!(read_dir(&out), expected);
    // No temporary directory is left beside the output.
    let left: Vec<PathBuf> = entries(dir.path());
    assert!(
        left.iter()
            .all(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.')),
        "{left:?}"
    );
}

#[test]
fn the_default_shard_size_keeps_a_small_input_in_one_shard() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.lodt");
    let expected = batches();
    write(Format::Lodt, &input, &expected);
    let out = dir.path().join("one");
    to_parquet_dir(&input, &out, &ConvertOptions::default());
    assert_eq!(shard_names(&out), ["part-00000.parquet"]);
    // The shard is what the single-file writer writes for the same batches.
    let single = dir.path().join("single.parquet");
    lodt::convert::convert(&input, &single, &ConvertOptions::default(), |_| {}).unwrap();
    assert_eq!(
        std::fs::read(out.join("part-00000.parquet")).unwrap(),
        std::fs::read(&single).unwrap()
    );
}

#[test]
fn a_dataset_and_a_megatron_dataset_convert_to_a_parquet_directory() {
    let dir = tempfile::tempdir().unwrap();
    let expected = batches();
    // A lodt dataset of several shards.
    let dataset = dir.path().join("train");
    let options = ConvertOptions {
        shard_bytes: Some(2048),
        ..Default::default()
    };
    let writer = Endpoint::Dataset
        .create_writer(&dataset, Default::default(), &options)
        .unwrap();
    write_all(writer, expected.iter().cloned().map(Ok::<_, ConvertError>)).unwrap();
    assert!(lodt::dataset::Dataset::open(&dataset).unwrap().num_shards() > 1);
    let out = dir.path().join("from-dataset");
    to_parquet_dir(&dataset, &out, &options);
    assert!(shard_names(&out).len() > 1);
    assert_eq!(read_dir(&out), expected);

    // A Megatron .bin/.idx pair: the same documents as its own reader gives.
    let tokens: Vec<Batch> = expected
        .iter()
        .map(|b| {
            let ids = b.get("ids").unwrap();
            let words = ids.lod().to_lengths()[1].clone();
            let values = ids
                .as_slice::<i64>()
                .unwrap()
                .iter()
                .map(|&v| v as i32)
                .collect();
            let t = LodTensor::from_vec(
                values,
                vec![ids.rows()],
                Lod::try_from_lengths(&[words]).unwrap(),
            )
            .unwrap();
            Batch::try_from_tensors([("tokens", t)]).unwrap()
        })
        .collect();
    let prefix = dir.path().join("corpus.idx");
    write(Format::Megatron, &prefix, &tokens);
    let direct = read_all(
        Format::Megatron
            .open_reader(&prefix, &ConvertOptions::default())
            .unwrap(),
    );
    let out = dir.path().join("from-megatron");
    let stats = to_parquet_dir(
        &prefix,
        &out,
        &ConvertOptions {
            shard_bytes: Some(1),
            ..Default::default()
        },
    );
    assert_eq!(stats.batches as usize, direct.len());
    assert_eq!(shard_names(&out).len(), direct.len()); // a shard per batch
    let back = read_dir(&out);
    assert_eq!(back, direct);
    let words: usize = expected
        .iter()
        .map(|b| b.get("ids").unwrap().lod().to_lengths()[1].len())
        .sum();
    assert_eq!(rows(&back), words); // a document per sentence
    let flat = |bs: &[Batch], name: &str| -> Vec<i64> {
        bs.iter()
            .flat_map(|b| b.get(name).unwrap().as_slice::<i64>().unwrap().to_vec())
            .collect()
    };
    let tokens_back: Vec<i32> = back
        .iter()
        .flat_map(|b| b.get("tokens").unwrap().as_slice::<i32>().unwrap().to_vec())
        .collect();
    assert_eq!(
        tokens_back.iter().map(|&v| v as i64).collect::<Vec<_>>(),
        flat(&expected, "ids")
    );
}

#[test]
fn a_failed_conversion_leaves_no_destination_and_no_temporary_directory() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.lodt");
    // Batch 5 has another schema: Parquet shards share one.
    let mut mixed = batches();
    mixed[5] = Batch::try_from_tensors([(
        "other",
        LodTensor::from_vec(vec![1u8, 2], vec![2], Lod::empty()).unwrap(),
    )])
    .unwrap();
    write(Format::Lodt, &input, &mixed);
    let out = dir.path().join("shards");
    let from = Endpoint::input(&input).unwrap();
    let options = ConvertOptions {
        shard_bytes: Some(1), // shards 0..4 are written before the failure
        ..Default::default()
    };
    let err = Conversion::open_as(
        &input,
        from,
        &out,
        Endpoint::Layout(Layout::ParquetFiles),
        &options,
    )
    .unwrap()
    .run(|_| {})
    .unwrap_err();
    let message = err.to_string();
    assert!(message.contains("batch 5"), "{message}");
    assert!(!out.exists());
    assert_eq!(entries(dir.path()), vec![input.clone()]);

    // Metadata that changes is refused across shards as within one file.
    let mut tagged = batches();
    for (k, b) in tagged.iter_mut().enumerate() {
        b.metadata_mut().insert("step".into(), (k / 6).to_string());
    }
    let input2 = dir.path().join("tagged.lodt");
    write(Format::Lodt, &input2, &tagged);
    let from = Endpoint::input(&input2).unwrap();
    let err = Conversion::open_as(
        &input2,
        from,
        &out,
        Endpoint::Layout(Layout::ParquetFiles),
        &options,
    )
    .unwrap()
    .run(|_| {})
    .unwrap_err();
    assert!(err.to_string().contains("batch 6"), "{err}");
    assert!(!out.exists());
    // With metadata=first every shard keeps the first batch's, as one file does.
    let first = ConvertOptions {
        metadata_policy: lodt::arrow::MetadataPolicy::KeepFirst,
        ..options.clone()
    };
    to_parquet_dir(&input2, &out, &first);
    assert!(shard_names(&out).len() > 6);
    let back = read_dir(&out);
    assert!(
        back.iter()
            .all(|b| b.metadata().get("step").map(String::as_str) == Some("0"))
    );

    // A writer dropped unfinished leaves nothing either.
    let dropped = dir.path().join("dropped");
    let mut writer = Endpoint::Layout(Layout::ParquetFiles)
        .create_writer(&dropped, Default::default(), &options)
        .unwrap();
    for b in &tagged[..3] {
        writer.write(b).unwrap();
    }
    drop(writer);
    assert!(!dropped.exists());
    assert_eq!(
        entries(dir.path()),
        [input.clone(), out.clone(), input2.clone()]
    );
}

#[test]
fn an_existing_destination_is_refused_unless_it_is_an_empty_directory() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.lodt");
    write(Format::Lodt, &input, &batches());
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep.txt"), b"mine").unwrap();
    let from = Endpoint::input(&input).unwrap();
    let to = Endpoint::Layout(Layout::ParquetFiles);
    let err = Conversion::open_as(&input, from, &out, to, &ConvertOptions::default())
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            ConvertError::Atomic(lodt::atomic::AtomicError::Occupied { .. })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("not empty"), "{err}");
    assert_eq!(shard_names(&out), ["keep.txt"]);
    // A file is refused too, and stays.
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert!(Conversion::open_as(&input, from, &file, to, &ConvertOptions::default()).is_err());
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
    // An empty directory is taken.
    std::fs::remove_file(out.join("keep.txt")).unwrap();
    to_parquet_dir(&input, &out, &ConvertOptions::default());
    assert_eq!(read_dir(&out), batches());
    // Options that do not apply to Parquet are refused before anything is
    // written; the other layouts are not written.
    let lodt_codec = ConvertOptions {
        lodt: lodt::format::WriteOptions::for_codec(None, "zstd").unwrap(),
        ..Default::default()
    };
    let new = dir.path().join("new");
    assert!(
        to.create_writer(&new, Default::default(), &lodt_codec)
            .is_err()
    );
    let hf = Endpoint::Layout(Layout::HuggingFace).create_writer(
        &new,
        Default::default(),
        &ConvertOptions::default(),
    );
    assert!(hf.err().unwrap().to_string().contains("read, not written"));
    assert!(!new.exists());
}

#[test]
fn pyarrow_reads_the_directory_as_one_dataset() {
    let Some(python) = python() else {
        skipped(
            "convert::parquet_dir::pyarrow_reads_the_directory_as_one_dataset",
            "pyarrow not available (set LODT_PYTHON to a python with pyarrow and numpy)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.lodt");
    let expected = batches();
    write(Format::Lodt, &input, &expected);
    let out = dir.path().join("shards");
    let mut options = ConvertOptions {
        shard_bytes: Some(4096),
        ..Default::default()
    };
    options
        .set_output_codec(Format::Parquet, None, Some("zstd"))
        .unwrap();
    to_parquet_dir(&input, &out, &options);
    let shards = shard_names(&out).len();
    assert!(shards >= 3);
    let script = r#"
import json, sys
import pyarrow.dataset as ds
import pyarrow.parquet as pq
d = sys.argv[1]
t = ds.dataset(d, format="parquet").to_table()
t2 = pq.read_table(d)
assert t.equals(t2)
files = sorted(ds.dataset(d, format="parquet").files)
codecs = {pq.ParquetFile(f).metadata.row_group(0).column(0).compression for f in files}
print(json.dumps({
    "rows": t.num_rows, "columns": t.column_names, "files": len(files),
    "ids": t.column("ids").to_pylist(), "label": t.column("label").to_pylist(),
    "codecs": sorted(codecs),
}))
"#;
    let out_text = std::process::Command::new(&python)
        .args(["-c", script])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        out_text.status.success(),
        "{}",
        String::from_utf8_lossy(&out_text.stderr)
    );
    let got: serde_json::Value = serde_json::from_slice(&out_text.stdout).unwrap();
    assert_eq!(got["rows"], rows(&expected));
    assert_eq!(got["columns"], serde_json::json!(["ids", "label"]));
    assert_eq!(got["files"], shards);
    assert_eq!(got["codecs"], serde_json::json!(["ZSTD"]));
    // Every article's sentences of word ids, and every label, in order.
    let mut ids = Vec::new();
    let mut labels = Vec::new();
    for b in &expected {
        ids.extend(nested_json(b.get("ids").unwrap()));
        labels.extend(
            b.get("label")
                .unwrap()
                .as_slice::<f32>()
                .unwrap()
                .iter()
                .map(|&v| serde_json::json!(v)),
        );
    }
    assert_eq!(got["ids"], serde_json::Value::Array(ids));
    assert_eq!(got["label"], serde_json::Value::Array(labels));
}

#[test]
fn the_temporary_directory_of_a_killed_conversion_is_deleted_by_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.lodt");
    write(Format::Lodt, &input, &batches());
    // What a conversion killed with SIGKILL leaves: its temporary directory,
    // named as lodt names it, whose lock died with the process.
    let stale = dir.path().join(".shards.4242.0.tmp");
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("part-00000.parquet"), b"partial").unwrap();
    let unrelated = dir.path().join(".other.4242.0.tmp");
    std::fs::create_dir(&unrelated).unwrap();
    let out = dir.path().join("shards");
    to_parquet_dir(&input, &out, &ConvertOptions::default());
    assert!(!stale.exists());
    assert!(unrelated.is_dir());
    assert_eq!(read_dir(&out), batches());
}
