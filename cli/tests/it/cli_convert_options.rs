//! `lodt convert`'s options as a data engineer meets them: compression,
//! column selection, null lists, type-change warnings, re-batching by size,
//! metadata, stdin/stdout and FIFOs. The built binary on real files.

use arrow_array::builder::{Int64Builder, ListBuilder};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use lodt::{Batch, Lod, LodTensor};
use parquet::file::reader::{FileReader, SerializedFileReader};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

fn lodt_in(args: &[&str], stdin: &[u8]) -> (i32, Vec<u8>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lodt"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&bytes);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code().unwrap_or(-1), out.stdout, stderr)
}

fn lodt(args: &[&str]) -> (i32, String, String) {
    let (code, out, err) = lodt_in(args, b"");
    (code, String::from_utf8(out).unwrap(), err)
}

fn ok(args: &[&str]) -> (String, String) {
    let (code, out, err) = lodt(args);
    assert_eq!(code, 0, "lodt {args:?}: {err}");
    (out, err)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `batches` batches of `seqs` sequences of `tokens` (int64, lengths 1, 2,
/// 3, ...) with `label`, all with metadata `split=train`.
fn batches_file(path: &Path, batches: usize, seqs: usize) {
    let mut writer = lodt::format::Writer::create(path, Default::default()).unwrap();
    let mut next = 0i64;
    for _ in 0..batches {
        let lengths: Vec<u64> = (0..seqs as u64).map(|i| i % 5 + 1).collect();
        let rows = lengths.iter().sum::<u64>() as usize;
        let tokens = LodTensor::from_vec(
            (next..next + rows as i64).collect(),
            vec![rows],
            Lod::try_from_lengths(&[lengths]).unwrap(),
        )
        .unwrap();
        next += rows as i64;
        let label = LodTensor::from_vec(vec![7i32; seqs], vec![seqs], Lod::empty()).unwrap();
        let mut batch = Batch::try_from_tensors([("tokens", tokens), ("label", label)]).unwrap();
        batch.metadata_mut().insert("split".into(), "train".into());
        writer.write(&batch).unwrap();
    }
    writer.finish().unwrap();
}

fn parquet_meta(path: &Path) -> parquet::file::metadata::ParquetMetaData {
    SerializedFileReader::new(std::fs::File::open(path).unwrap())
        .unwrap()
        .metadata()
        .clone()
}

#[test]
fn compression_defaults_to_snappy_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.lodt");
    batches_file(&input, 1, 2000);
    let json = |file: &Path| ok(&["show", s(file), "--tensor", "tokens", "--json"]).0;
    let want = json(&input);
    let mut sizes = Vec::new();
    for (flag, codec) in [
        (None, "SNAPPY"),
        (Some("none"), "UNCOMPRESSED"),
        (Some("snappy"), "SNAPPY"),
        (Some("zstd"), "ZSTD"),
        (Some("lz4"), "LZ4_RAW"),
    ] {
        let out = dir
            .path()
            .join(format!("{}.parquet", flag.unwrap_or("default")));
        let mut args = vec!["convert", s(&input), s(&out)];
        if let Some(flag) = flag {
            args.extend(["--compression", flag]);
        }
        let (stdout, _) = ok(&args);
        assert!(
            stdout.contains(&format!("(Parquet, {}:", flag.unwrap_or("snappy"))),
            "{stdout}"
        );
        let meta = parquet_meta(&out);
        for column in meta.row_group(0).columns() {
            assert!(
                format!("{:?}", column.compression()).starts_with(codec),
                "{flag:?}: {:?}",
                column.compression()
            );
        }
        sizes.push(std::fs::metadata(&out).unwrap().len());
        // Back to .lodt: the same values.
        let back = dir
            .path()
            .join(format!("{}.lodt", flag.unwrap_or("default")));
        ok(&["convert", s(&out), s(&back)]);
        assert_eq!(json(&back), want, "{flag:?}");
    }
    // Compressed files are smaller than the uncompressed one.
    assert!(
        sizes
            .iter()
            .enumerate()
            .all(|(i, &n)| i == 1 || n < sizes[1]),
        "{sizes:?}"
    );
    let (code, _, err) = lodt(&[
        "convert",
        s(&input),
        s(&dir.path().join("x.arrows")),
        "--compression",
        "zstd",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("compression (zstd) applies to .lodt and Parquet output"),
        "{err}"
    );
    let (code, _, err) = lodt(&[
        "convert",
        s(&input),
        s(&dir.path().join("x.parquet")),
        "--compression",
        "gzip",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown compression \"gzip\": expected none, snappy, zstd or lz4"),
        "{err}"
    );
}

/// A Parquet file (written by arrow-rs, as pyarrow would) with a
/// `list<int64>` column, a string column and, if `null`, a null list.
fn mixed_parquet(path: &Path, null: bool) {
    let mut tokens = ListBuilder::new(Int64Builder::new());
    for row in 0..4i64 {
        if null && row == 2 {
            tokens.append_null();
            continue;
        }
        for v in 0..=row {
            tokens.values().append_value(row * 10 + v);
        }
        tokens.append(true);
    }
    let tokens: ArrayRef = Arc::new(tokens.finish());
    let names: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c", "d"]));
    let batch = RecordBatch::try_from_iter([("tokens", tokens), ("name", names)]).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

#[test]
fn columns_pick_what_lodt_reads_and_null_lists_name_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("mixed.parquet");
    mixed_parquet(&input, false);
    let out = dir.path().join("out.lodt");
    let (code, _, err) = lodt(&["convert", s(&input), s(&out)]);
    assert_eq!(code, 1);
    assert!(
        err.contains("column \"name\": unsupported Arrow type Utf8"),
        "{err}"
    );
    assert!(err.contains("leave the column out with --columns"), "{err}");
    assert!(!out.exists());
    let (_, err) = ok(&["convert", s(&input), s(&out), "--columns", "tokens"]);
    assert_eq!(err, "");
    let (rows, _) = ok(&["cat", s(&out)]);
    assert_eq!(
        rows,
        "{\"tokens\":[0]}\n{\"tokens\":[10,11]}\n{\"tokens\":[20,21,22]}\n{\"tokens\":[30,31,32,33]}\n"
    );
    let (code, _, err) = lodt(&["convert", s(&input), s(&out), "--columns", "tokens,nope"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no column \"nope\"; the file has: tokens, name"),
        "{err}"
    );
    // head and stats take --columns too.
    let (rows, _) = ok(&["head", s(&input), "--columns", "tokens", "-n", "1"]);
    assert_eq!(rows, "{\"tokens\":[0]}\n");
    // A .lodt input: tensors selected and ordered.
    let picked = dir.path().join("picked.lodt");
    let words = format!(
        "{}/../spec/vectors/words_labels.lodt",
        env!("CARGO_MANIFEST_DIR")
    );
    ok(&["convert", &words, s(&picked), "--columns", "labels"]);
    let (info, _) = ok(&["info", s(&picked)]);
    assert!(info.contains("schema    1 tensor\n  labels "), "{info}");
    // Null lists: an error naming the CLI flag, or empty sequences.
    let nulls = dir.path().join("nulls.parquet");
    mixed_parquet(&nulls, true);
    let (code, _, err) = lodt(&["convert", s(&nulls), s(&out), "--columns", "tokens"]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "error: column \"tokens\": null list at level 0, index 2 (a LoD tensor has no nulls; read null lists as empty sequences with --null-lists empty)\n"
    );
    ok(&[
        "convert",
        s(&nulls),
        s(&out),
        "--columns",
        "tokens",
        "--null-lists",
        "empty",
    ]);
    let (json, _) = ok(&["show", s(&out), "--json"]);
    assert_eq!(
        json.trim(),
        r#"{"name":"tokens","dtype":"int64","shape":[7],"lod":[[0,1,3,3,7]],"values":[0,10,11,30,31,32,33]}"#
    );
}

#[test]
fn type_changes_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let input = "../tests/data/arrow/batch0.parquet"; // written by pyarrow: list, fixed_size_list
    let (_, err) = ok(&["convert", input, s(&dir.path().join("a.parquet"))]);
    assert_eq!(
        err,
        "warning: words: list<list<int64>> becomes large_list<large_list<int64>> (--small-lists keeps 32-bit lists)\n\
         warning: frames: list<fixed_size_list<float, 4>> becomes large_list<fixed_size_list<float, 4>> (--small-lists keeps 32-bit lists)\n\
         warning: labels: list<int64> becomes large_list<int64> (--small-lists keeps 32-bit lists)\n"
    );
    let (_, err) = ok(&[
        "convert",
        input,
        s(&dir.path().join("b.arrow")),
        "--small-lists",
    ]);
    // Fixed-size lists stay as they are (the default nested_lists).
    assert_eq!(err, "");
    // With --tensor-type fixed_shape they become the tensor extension.
    let (_, err) = ok(&[
        "convert",
        input,
        s(&dir.path().join("b2.arrow")),
        "--small-lists",
        "--tensor-type",
        "fixed_shape",
    ]);
    assert_eq!(
        err,
        "warning: frames: list<fixed_size_list<float, 4>> becomes list<arrow.fixed_shape_tensor<float, [4]>>\n"
    );
    // Into .lodt nothing is an Arrow type: no warning.
    let (_, err) = ok(&["convert", input, s(&dir.path().join("c.lodt"))]);
    assert_eq!(err, "");
}

#[test]
fn batches_are_kept_by_default_and_batch_bytes_auto_merges_small_ones() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("small.lodt");
    batches_file(&input, 200, 3);
    let out = dir.path().join("merged.parquet");
    // The default keeps every batch, as lodt::convert and lodt.convert() do.
    let (stdout, _) = ok(&["convert", s(&input), s(&out)]);
    assert!(
        stdout.contains(": 200 batches, 400 tensors, 600 top-level rows"),
        "{stdout}"
    );
    assert!(
        stdout.contains("kept every input batch as it is (the default; --batch-rows or --batch-bytes regroup them)"),
        "{stdout}"
    );
    assert_eq!(parquet_meta(&out).num_row_groups(), 200);
    let (stdout, _) = ok(&["convert", s(&input), s(&out), "--keep-batches"]);
    assert!(
        stdout.contains("kept every input batch as it is"),
        "{stdout}"
    );
    assert_eq!(parquet_meta(&out).num_row_groups(), 200);
    // --batch-bytes auto: 1 MiB to 64 MiB pass, smaller ones are merged.
    let (stdout, _) = ok(&["convert", s(&input), s(&out), "--batch-bytes", "auto"]);
    assert!(
        stdout.contains(": 1 batch, 2 tensors, 600 top-level rows"),
        "{stdout}"
    );
    assert!(
        stdout.contains("re-batched 200 input batches into 1: merged 200 smaller batches (up to 16.0 MiB each, never across a metadata change) (--batch-bytes auto: batches of 1.0 MiB to 64.0 MiB pass"),
        "{stdout}"
    );
    assert_eq!(parquet_meta(&out).num_row_groups(), 1);
    // The values survive the merge, in order.
    let lodt_out = dir.path().join("merged.lodt");
    ok(&["convert", s(&input), s(&lodt_out), "--batch-bytes", "auto"]);
    let (json, _) = ok(&[
        "show",
        s(&lodt_out),
        "--tensor",
        "tokens",
        "--branch",
        "598..600",
        "--json",
    ]);
    let total: i64 = 200 * (1 + 2 + 3);
    assert_eq!(
        json.trim(),
        format!(
            r#"{{"name":"tokens","dtype":"int64","shape":[5],"lod":[[0,2,5]],"values":[{},{},{},{},{}]}}"#,
            total - 5,
            total - 4,
            total - 3,
            total - 2,
            total - 1
        )
    );
    // --batch-bytes splits a larger batch: 2000 sequences, 6000 rows:
    // 6000*8 + 2001*8 body and offsets of tokens, 2000*4 of label.
    let big = dir.path().join("big.lodt");
    batches_file(&big, 1, 2000);
    let bytes = 6000 * 8 + 2001 * 8 + 2000 * 4;
    let (stdout, _) = ok(&[
        "convert",
        s(&big),
        s(&dir.path().join("split.lodt")),
        "--batch-bytes",
        "16K",
    ]);
    let pieces = (bytes as u64).div_ceil(16 << 10);
    assert!(
        stdout.contains(&format!("re-batched 1 input batch into {pieces}: split 1 larger batch into pieces of about 16.0 KiB (batches of about 16.0 KiB (--batch-bytes))")),
        "{stdout}"
    );
    let (stdout, _) = ok(&["stats", s(&dir.path().join("split.lodt")), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["batches"], pieces);
    assert_eq!(v["tensors"][0]["levels"][0]["sequences"], 2000);
}

#[test]
fn batches_with_different_metadata_are_never_merged() {
    let dir = tempfile::tempdir().unwrap();
    // Three tiny batches with metadata step=0, 1, 2.
    let multi = format!(
        "{}/../spec/vectors/multi_batch.lodt",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = dir.path().join("out.lodt");
    let (stdout, _) = ok(&["convert", &multi, s(&out), "--batch-bytes", "auto"]);
    assert!(
        stdout.contains("kept the input's 3 batches as they are"),
        "{stdout}"
    );
    let (info, _) = ok(&["info", s(&out)]);
    assert!(info.contains("batches   3\n"), "{info}");
    // Parquet keeps one metadata map: the error names the flag.
    let pq = dir.path().join("out.parquet");
    let (code, _, err) = lodt(&["convert", &multi, s(&pq)]);
    assert_eq!(code, 1);
    assert!(
        err.contains("metadata differs from the first batch's at key \"step\""),
        "{err}"
    );
    assert!(
        err.contains("--metadata first keeps the first batch's"),
        "{err}"
    );
    assert!(!err.contains("MetadataPolicy"), "{err}");
    ok(&["convert", &multi, s(&pq), "--metadata", "first"]);
    assert_eq!(parquet_meta(&pq).num_row_groups(), 3);
}

#[test]
fn stdin_stdout_and_fifos() {
    let dir = tempfile::tempdir().unwrap();
    let params = std::fs::read("../tests/data/paddle/combined.pdparams").unwrap();
    // Paddle on stdin, .lodt on stdout, read back from stdin.
    let (code, lodt_bytes, err) = lodt_in(
        &[
            "convert",
            "-",
            "-",
            "--format",
            "pdparams",
            "--to",
            "lodt",
            "--names",
            "a,b,c,d,e,f,g,h",
        ],
        &params,
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("wrote stdout (lodt: 1 batch, 8 tensors"),
        "{err}"
    );
    let (code, json, err) = lodt_in(
        &[
            "show", "-", "--format", "lodt", "--tensor", "a", "--branch", "0,2", "--json",
        ],
        &lodt_bytes,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        String::from_utf8(json).unwrap().trim(),
        r#"{"name":"a","dtype":"int64","shape":[4,1],"lod":[],"values":[5,6,7,8]}"#
    );
    // An Arrow IPC stream through a pipe.
    let input = dir.path().join("in.lodt");
    batches_file(&input, 2, 3);
    let (code, arrows, err) = lodt_in(
        &[
            "convert",
            s(&input),
            "-",
            "--format",
            "arrows",
            "--keep-batches",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let (code, rows, err) = lodt_in(&["cat", "-", "--format", "arrows"], &arrows);
    assert_eq!(code, 0, "{err}");
    assert_eq!(String::from_utf8(rows).unwrap().lines().count(), 6);
    // - needs a format; a Parquet file cannot come from a pipe.
    let (code, _, err) = lodt(&["convert", "-", s(&dir.path().join("x.lodt"))]);
    assert_eq!(code, 2);
    assert!(err.contains("- (stdin or stdout) needs --format"), "{err}");
    let pq = std::fs::read("../tests/data/arrow/batch0.parquet").unwrap();
    let (code, _, err) = lodt_in(&["stats", "-", "--format", "parquet"], &pq);
    assert_eq!(code, 2);
    assert!(
        err.contains("stdin is a pipe or a device, and the Parquet format needs a seekable file"),
        "{err}"
    );
    // A FIFO: written by one lodt, read by another; it stays a FIFO.
    let fifo = dir.path().join("pipe.lodt");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let writer = Command::new(env!("CARGO_BIN_EXE_lodt"))
        .args(["convert", s(&input), s(&fifo), "--keep-batches"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (rows, _) = ok(&["cat", s(&fifo), "--columns", "label"]);
    let writer = writer.wait_with_output().unwrap();
    assert_eq!(
        writer.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&writer.stderr)
    );
    assert_eq!(rows, "{\"label\":7}\n".repeat(6));
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

#[test]
fn tensor_type_chooses_nested_lists_or_a_tensor_extension() {
    let dir = tempfile::tempdir().unwrap();
    let input = "../tests/data/arrow/batch0.parquet"; // frames: list<fixed_size_list<float, 4>>
    let extension_of = |path: &Path| {
        let file = std::fs::File::open(path).unwrap();
        let reader = arrow_ipc::reader::FileReader::try_new(file, None).unwrap();
        let schema = reader.schema();
        let frames = schema.field_with_name("frames").unwrap();
        let arrow_schema::DataType::LargeList(item) = frames.data_type() else {
            panic!("{frames:?}")
        };
        assert!(matches!(
            item.data_type(),
            arrow_schema::DataType::FixedSizeList(_, 4)
        ));
        item.metadata().get("ARROW:extension:name").cloned()
    };
    let nested = dir.path().join("nested.arrow");
    ok(&["convert", input, s(&nested)]);
    assert_eq!(extension_of(&nested), None);
    let fixed = dir.path().join("fixed.arrow");
    ok(&["convert", input, s(&fixed), "--tensor-type", "fixed_shape"]);
    assert_eq!(
        extension_of(&fixed).as_deref(),
        Some("arrow.fixed_shape_tensor")
    );
    // Both read back to the same tensors.
    let show = |p: &Path| ok(&["show", s(p), "--tensor", "frames", "--json"]).0;
    assert_eq!(show(&nested), show(&fixed));
    // variable_shape: the 1-level tensor is one arrow.variable_shape_tensor column.
    let variable = dir.path().join("variable.arrow");
    ok(&[
        "convert",
        input,
        s(&variable),
        "--tensor-type",
        "variable_shape",
    ]);
    let file = std::fs::File::open(&variable).unwrap();
    let schema = arrow_ipc::reader::FileReader::try_new(file, None)
        .unwrap()
        .schema();
    let frames = schema.field_with_name("frames").unwrap();
    assert_eq!(
        frames
            .metadata()
            .get("ARROW:extension:name")
            .map(String::as_str),
        Some("arrow.variable_shape_tensor")
    );
    assert!(matches!(
        frames.data_type(),
        arrow_schema::DataType::Struct(_)
    ));
    assert_eq!(show(&variable), show(&fixed));
    let (code, _, err) = lodt(&[
        "convert",
        input,
        s(&dir.path().join("x.arrow")),
        "--tensor-type",
        "ragged",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("expected nested_lists or fixed_shape or variable_shape, found \"ragged\""),
        "{err}"
    );
}

#[test]
fn format_version_and_compression_of_lodt_and_dataset_output() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.lodt");
    // Repetitive token ids: they compress.
    let tokens: Vec<i64> = (0..4000).map(|i| i % 10).collect();
    let lod = Lod::try_from_lengths(&[vec![1000; 4]]).unwrap();
    let batch = Batch::try_from_tensors([(
        "tokens",
        LodTensor::from_vec(tokens, vec![4000], lod).unwrap(),
    )])
    .unwrap();
    let v1_options = lodt::format::WriteOptions::for_codec(Some("1.0"), "none").unwrap();
    let mut w = lodt::format::Writer::create_with(&input, Default::default(), v1_options).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
    let version = |p: &Path| {
        lodt::format::LodtFile::open(p)
            .unwrap()
            .version()
            .to_string()
    };
    assert_eq!(version(&input), "1.0");
    // No option: 2.0, uncompressed; `lodt info` says so.
    let default = dir.path().join("default.lodt");
    ok(&["convert", s(&input), s(&default)]);
    assert_eq!(version(&default), "2.0");
    assert_eq!(
        lodt::format::LodtFile::open(&default)
            .unwrap()
            .read_batch(0)
            .unwrap(),
        batch
    );
    let (info, _) = ok(&["info", s(&default)]);
    assert!(info.contains("format    .lodt 2.0\n"), "{info}");
    assert!(!info.contains("(compressed)"), "{info}");
    // A codec writes 2.0; the values read back the same.
    let zstd = dir.path().join("zstd.lodt");
    let (out, _) = ok(&["convert", s(&input), s(&zstd), "--compression", "zstd"]);
    assert!(out.contains("zstd"), "{out}");
    assert_eq!(version(&zstd), "2.0");
    let file = lodt::format::LodtFile::open(&zstd).unwrap();
    assert_eq!(file.read_batch(0).unwrap(), batch);
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    assert!(
        size(&zstd) * 4 < size(&input),
        "{} vs {}",
        size(&zstd),
        size(&input)
    );
    let (info, _) = ok(&["info", s(&zstd)]);
    assert!(info.contains("format    .lodt 2.0"), "{info}");
    assert!(
        info.contains("the file's") && info.contains("(compressed)"),
        "{info}"
    );
    // And back to 1.0, for readers that predate 2.0.
    let v1 = dir.path().join("v1.lodt");
    ok(&["convert", s(&zstd), s(&v1), "--format-version", "1.0"]);
    assert_eq!(version(&v1), "1.0");
    assert_eq!(std::fs::read(&v1).unwrap(), std::fs::read(&input).unwrap());
    // 2.0 uncompressed on request.
    let v2 = dir.path().join("v2.lodt");
    ok(&["convert", s(&input), s(&v2), "--format-version", "2.0"]);
    assert_eq!(version(&v2), "2.0");
    // A dataset's shards: 2.0 by default, 1.0 on request.
    for (args, says) in [
        (vec![], "\"format_version\":\"2.0\""),
        (
            vec!["--format-version", "1.0"],
            "\"format_version\":\"1.0\"",
        ),
    ] {
        let ds = dir.path().join(format!("ds-{}", args.len()));
        let ds_arg = format!("{}/", ds.display());
        let mut all = vec!["convert", s(&input), &ds_arg];
        all.extend(args.iter());
        ok(&all);
        let manifest = std::fs::read_to_string(ds.join("lodt-dataset.json")).unwrap();
        assert!(manifest.contains(says), "{args:?}: {manifest}");
        ok(&["verify", s(&ds)]);
    }
    let ds = dir.path().join("ds");
    let ds_arg = format!("{}/", ds.display());
    ok(&["convert", s(&input), &ds_arg, "--compression", "lz4"]);
    let manifest = std::fs::read_to_string(ds.join("lodt-dataset.json")).unwrap();
    assert!(
        manifest.contains("\"format_version\":\"2.0\""),
        "{manifest}"
    );
    ok(&["verify", s(&ds)]);
    // Clear errors: 1.0 has no compression; codecs that do not apply.
    for (args, says) in [
        (
            vec!["--format-version", "1.0", "--compression", "zstd"],
            "needs format version 2.0",
        ),
        (vec!["--compression", "snappy"], "expected a compression"),
        (vec!["--format-version", "3.0"], "3.0"),
    ] {
        let out = dir.path().join("bad.lodt");
        let mut all = vec!["convert", s(&input), s(&out)];
        all.extend(args.iter());
        let (code, _, err) = lodt(&all);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!out.exists());
    }
    let (code, _, err) = lodt(&[
        "convert",
        s(&input),
        s(&dir.path().join("x.arrow")),
        "--compression",
        "zstd",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("applies to .lodt and Parquet output"), "{err}");
}
