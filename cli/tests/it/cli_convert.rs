//! `lodt convert`, run as a user would: the built binary on the fixtures.

use std::path::Path;
use std::process::Command;

fn lodt(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lodt"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn paddle_params_to_lodt_and_back_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let lodt_file = dir.path().join("p.lodt");
    let (code, out, err) = lodt(&[
        "convert",
        "../tests/data/paddle/combined.pdparams",
        path(&lodt_file),
        "--names",
        "words,x,frames,params,deep,u8,half,flags",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("1 batch, 8 tensors"), "{out}");
    let (code, json, err) = lodt(&[
        "show",
        path(&lodt_file),
        "--tensor",
        "words",
        "--branch",
        "0,2",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        json.trim(),
        r#"{"name":"words","dtype":"int64","shape":[4,1],"lod":[],"values":[5,6,7,8]}"#
    );
    let back = dir.path().join("p.pdparams");
    let (code, _, err) = lodt(&["convert", path(&lodt_file), path(&back)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(back).unwrap(),
        std::fs::read("../tests/data/paddle/combined.pdparams").unwrap()
    );
}

#[test]
fn pdtensor_without_names_is_tensor0() {
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("x.lodt");
    let (code, _, err) = lodt(&[
        "convert",
        "../tests/data/paddle/seed_1level_float32.pdtensor",
        path(&out_file),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, json, _) = lodt(&["show", path(&out_file), "--json"]);
    assert_eq!(code, 0);
    assert_eq!(
        json.trim(),
        r#"{"name":"tensor0","dtype":"float32","shape":[4,1],"lod":[[0,1,4]],"values":[1.1,2.2,3.3,4.4]}"#
    );
}

#[test]
fn parquet_to_lodt_to_arrow_stream_with_rebatching() {
    let dir = tempfile::tempdir().unwrap();
    let lodt_file = dir.path().join("b.lodt");
    let (code, _, err) = lodt(&[
        "convert",
        "../tests/data/arrow/batch0.parquet",
        path(&lodt_file),
    ]);
    assert_eq!(code, 0, "{err}");
    let stream = dir.path().join("b.arrows");
    let (code, out, err) = lodt(&[
        "convert",
        path(&lodt_file),
        path(&stream),
        "--batch-rows",
        "1",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(": 3 batches, 9 tensors, 3 top-level rows"),
        "{out}"
    );
    assert!(
        out.contains("re-batched to 1 top-level row per batch"),
        "{out}"
    );
    let again = dir.path().join("c.lodt");
    // By default every batch is kept as it is (--keep-batches says so too).
    let (code, out, err) = lodt(&["convert", path(&stream), path(&again), "--keep-batches"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(": 3 batches, 9 tensors, 3 top-level rows")
            && out.contains("kept every input batch as it is"),
        "{out}"
    );
    let (code, json, _) = lodt(&[
        "show",
        path(&again),
        "--batch",
        "2",
        "--tensor",
        "words",
        "--json",
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        json.trim(),
        r#"{"name":"words","dtype":"int64","shape":[5],"lod":[[0,2],[0,2,5]],"values":[-20,85,9,-86,8]}"#
    );
}

#[test]
fn bad_conversions_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = lodt(&[
        "convert",
        "../tests/data/paddle/combined.pdparams",
        path(&dir.path().join("x.pdtensor")),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("error: a .pdtensor file holds exactly one tensor"),
        "{err}"
    );
    let (code, _, err) = lodt(&["convert", "in.csv", "out.lodt"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot tell the format of in.csv"), "{err}");
    // An output it cannot place names the dataset option too.
    let (code, _, err) = lodt(&[
        "convert",
        "../tests/data/paddle/combined.pdparams",
        "out.csv",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("cannot tell the format of out.csv") && err.contains("or a dataset directory"),
        "{err}"
    );
}

#[test]
fn show_reads_every_format_convert_reads() {
    let (code, json, err) = lodt(&[
        "show",
        "../tests/data/paddle/seed_2level_int64.pdtensor",
        "--branch",
        "2",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        json.trim(),
        r#"{"name":"tensor0","dtype":"int64","shape":[5,1],"lod":[[0,2,5]],"values":[10,11,12,13,14]}"#
    );
    let (code, _, err) = lodt(&[
        "show",
        "../tests/data/paddle/seed_2level_int64.pdtensor",
        "--batch",
        "1",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("has no batch 1"), "{err}");
}

#[test]
fn show_reads_parquet_and_arrow_ipc() {
    let (code, json, err) = lodt(&[
        "show",
        "../tests/data/arrow/batch1.parquet",
        "--tensor",
        "words",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        json.trim(),
        r#"{"name":"words","dtype":"int64","shape":[8],"lod":[[0,2,4],[0,1,1,6,8]],"values":[94,79,-40,-15,-52,-71,71,34]}"#
    );
    let (code, _, err) = lodt(&["show", "../tests/data/arrow/batch0.arrow"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("choose one with --tensor: words, frames, labels"),
        "{err}"
    );
}

#[test]
fn to_parquet_dir_writes_shards_in_order_and_reads_back_as_one_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = "../spec/vectors/multi_batch.lodt"; // 3 batches
    let out = dir.path().join("shards");
    let (code, stdout, err) = lodt(&[
        "convert",
        input,
        path(&out),
        "--to",
        "parquet-dir",
        "--shard-bytes",
        "1",
        "--metadata",
        "first",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("wrote the directory of Parquet files")
            && stdout.contains("(3 files, snappy: 3 batches"),
        "{stdout}"
    );
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "part-00000.parquet",
            "part-00001.parquet",
            "part-00002.parquet"
        ]
    );
    // The directory is an input as it is: back to .lodt, the same rows.
    let back = dir.path().join("back.lodt");
    let (code, stdout, err) = lodt(&["convert", path(&out), path(&back)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("3 batches") && stdout.contains("from the directory of Parquet files"),
        "{stdout}"
    );
    let (_, a, _) = lodt(&["cat", input]);
    let (_, b, _) = lodt(&["cat", path(&back)]);
    assert_eq!(a, b);
    // An existing directory that is not empty is refused, and kept.
    let (code, _, err) = lodt(&["convert", input, path(&out), "--to", "parquet-dir"]);
    assert_ne!(code, 0);
    assert!(err.contains("not empty"), "{err}");
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 3);
    // Not to stdout; and an unknown name lists the ones there are.
    let (code, _, err) = lodt(&["convert", input, "-", "--to", "parquet-dir"]);
    assert_ne!(code, 0);
    assert!(err.contains("a directory: give a path"), "{err}");
    let (code, _, err) = lodt(&["convert", input, path(&out), "--to", "csv"]);
    assert_ne!(code, 0);
    assert!(err.contains("parquet-dir"), "{err}");
}
