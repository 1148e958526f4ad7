//! `lodt convert` is `lodt::convert::convert`: for the same input and
//! options the CLI and the crate write the same bytes (a `.lodt` file, a
//! Parquet file, a dataset's shards), and `lodt convert demo.lodt train`
//! (no extension, no slash, a path that does not exist) writes a dataset.

use lodt::batch::rebatch::BatchBytes;
use lodt::convert::{ConvertOptions, convert};
use lodt::dataset::Dataset;
use std::path::Path;
use std::process::Command;

/// Runs `lodt args` in `dir`; asserts success; returns stdout.
fn lodt(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_lodt"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the lodt binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "lodt {args:?}: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

/// A directory holding the demo's `lodt-demo/demo.lodt` (32 batches).
fn demo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    lodt(dir.path(), &["demo"]);
    dir
}

/// The bytes of every shard of the dataset at `dir`, in manifest order.
fn shards(dir: &Path) -> Vec<Vec<u8>> {
    let dataset = Dataset::open(dir).unwrap();
    dataset
        .manifest()
        .shards
        .iter()
        .map(|s| std::fs::read(dir.join(&s.name)).unwrap())
        .collect()
}

#[test]
fn the_cli_and_the_crate_write_the_same_lodt_and_parquet_files() {
    let dir = demo();
    let d = dir.path();
    let input = d.join("lodt-demo/demo.lodt");
    for (out, flags, options) in [
        ("a.lodt", vec![], ConvertOptions::default()),
        ("a.parquet", vec![], ConvertOptions::default()),
        (
            "b.parquet",
            vec!["--batch-rows", "10", "--small-lists"],
            ConvertOptions {
                batch_rows: Some(10),
                small_lists: true,
                ..Default::default()
            },
        ),
        (
            "c.lodt",
            vec!["--batch-bytes", "auto"],
            ConvertOptions {
                batch_bytes: Some(BatchBytes::DEFAULT),
                ..Default::default()
            },
        ),
    ] {
        let cli = d.join(format!("cli-{out}"));
        let mut args = vec!["convert", "lodt-demo/demo.lodt", cli.to_str().unwrap()];
        args.extend(flags);
        lodt(d, &args);
        let krate = d.join(format!("crate-{out}"));
        convert(&input, &krate, &options, |_| {}).unwrap();
        let (a, b) = (std::fs::read(&cli).unwrap(), std::fs::read(&krate).unwrap());
        assert!(a.len() > 1000, "{out}: {} bytes", a.len());
        assert!(a == b, "{out}: the CLI and lodt::convert differ");
    }
    // The default keeps the demo's 32 batches, from both.
    assert_eq!(
        lodt::LodtFile::open(d.join("cli-a.lodt"))
            .unwrap()
            .num_batches(),
        32
    );
    let rebatched = lodt::LodtFile::open(d.join("cli-c.lodt")).unwrap();
    assert_eq!(rebatched.num_batches(), 1);
}

#[test]
fn the_cli_and_the_crate_write_the_same_dataset_shards() {
    let dir = demo();
    let d = dir.path();
    lodt(
        d,
        &[
            "convert",
            "lodt-demo/demo.lodt",
            "cli-ds/",
            "--shard-bytes",
            "1M",
        ],
    );
    let options = ConvertOptions {
        shard_bytes: Some(1 << 20),
        ..Default::default()
    };
    convert(
        d.join("lodt-demo/demo.lodt"),
        d.join("crate-ds"),
        &options,
        |_| {},
    )
    .unwrap();
    let (a, b) = (shards(&d.join("cli-ds")), shards(&d.join("crate-ds")));
    assert!(a.len() >= 2, "{} shards", a.len());
    assert!(a == b, "the CLI's and lodt::convert's shards differ");
    let (a, b) = (
        Dataset::open(d.join("cli-ds")).unwrap(),
        Dataset::open(d.join("crate-ds")).unwrap(),
    );
    assert_eq!(a.manifest().shards, b.manifest().shards);
    assert_eq!(a.manifest().schema, b.manifest().schema);
    // The demo file's metadata is the dataset's.
    assert_eq!(
        a.metadata(),
        lodt::LodtFile::open(d.join("lodt-demo/demo.lodt"))
            .unwrap()
            .metadata()
    );
}

#[test]
fn a_new_path_with_no_extension_is_a_dataset() {
    let dir = demo();
    let d = dir.path();
    let stdout = lodt(d, &["convert", "lodt-demo/demo.lodt", "train"]);
    assert!(
        stdout.starts_with("wrote the dataset train (1 shard, 32 batches, "),
        "{stdout}"
    );
    let dataset = Dataset::open(d.join("train")).unwrap();
    assert_eq!(dataset.manifest().num_batches(), 32);
    let file = lodt::LodtFile::open(d.join("lodt-demo/demo.lodt")).unwrap();
    assert_eq!(
        dataset.read_batch(0, 7).unwrap(),
        file.read_batch(7).unwrap()
    );
    // And back: a dataset input is a directory, placed by the crate.
    let stdout = lodt(d, &["convert", "train", "back.lodt"]);
    assert!(
        stdout.starts_with("wrote back.lodt (lodt: 32 batches, 96 tensors, ")
            && stdout.contains("from the dataset train"),
        "{stdout}"
    );
    let back = lodt::LodtFile::open(d.join("back.lodt")).unwrap();
    for k in 0..file.num_batches() {
        assert_eq!(back.read_batch(k).unwrap(), file.read_batch(k).unwrap());
    }
}

#[test]
fn the_cli_writes_and_reads_megatron_datasets_as_the_crate_does() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lod = lodt::Lod::try_from_lengths(&[vec![2, 1], vec![3, 4, 5]]).unwrap();
    let tokens = lodt::LodTensor::from_vec((0..12i32).collect(), vec![12], lod).unwrap();
    let label = lodt::LodTensor::from_vec(vec![1u8, 0], vec![2], lodt::Lod::empty()).unwrap();
    let batch = lodt::Batch::try_from_tensors([("tokens", tokens), ("label", label)]).unwrap();
    lodt::format::save_batch(d.join("in.lodt"), &batch).unwrap();
    lodt(d, &["convert", "in.lodt", "cli.idx", "--columns", "tokens"]);
    let options = ConvertOptions {
        columns: Some(vec!["tokens".into()]),
        ..Default::default()
    };
    convert(d.join("in.lodt"), d.join("crate.bin"), &options, |_| {}).unwrap();
    for ext in ["bin", "idx"] {
        let (a, b) = (
            std::fs::read(d.join(format!("cli.{ext}"))).unwrap(),
            std::fs::read(d.join(format!("crate.{ext}"))).unwrap(),
        );
        assert!(!a.is_empty() && a == b, "{ext}");
    }
    // Read in place, and into a dataset of 2 documents.
    let stats = lodt(d, &["stats", "cli.idx"]);
    assert!(stats.contains("tokens"), "{stats}");
    lodt(d, &["convert", "cli.idx", "train"]);
    assert_eq!(Dataset::open(d.join("train")).unwrap().num_sequences(), 2);
    // Several tensors without --columns: the error says how to choose.
    let out = Command::new(env!("CARGO_BIN_EXE_lodt"))
        .args(["convert", "in.lodt", "both.idx"])
        .current_dir(d)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("--columns"),
        "{stderr}"
    );
    assert!(!d.join("both.idx").exists() && !d.join("both.bin").exists());
}
