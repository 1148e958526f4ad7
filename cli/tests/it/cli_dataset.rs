//! `lodt convert IN DIR/`, `lodt info DIR` and `lodt verify DIR`, run as a
//! user would (issue 14, part 3).

use crate::dataset_util;

use dataset_util::make_batch;
use lodt::LodtFile;
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

/// A `.lodt` file of 40 batches; returns its sequence count.
fn source(file: &Path) -> u64 {
    let mut w = lodt::format::Writer::create(file, Default::default()).unwrap();
    let mut next = 0;
    for k in 0..40 {
        w.write(&make_batch(next, 4 + k % 5)).unwrap();
        next += 4 + k % 5;
    }
    w.finish().unwrap();
    next
}

#[test]
fn convert_to_a_dataset_then_info_verify_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.lodt");
    let n = source(&input);
    let out = format!("{}/", dir.path().join("train").display());
    let (code, stdout, err) = lodt(&["convert", path(&input), &out, "--shard-bytes", "8K"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains(&format!("40 batches, {n} sequences")),
        "{stdout}"
    );
    let train = dir.path().join("train");
    let dataset = lodt::dataset::Dataset::open(&train).unwrap();
    let shards = dataset.num_shards();
    assert!(shards >= 3, "{shards} shards");
    assert!(dataset.manifest().shards.iter().all(|s| s.bytes <= 8192));

    let (code, stdout, err) = lodt(&["info", path(&train)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains(&format!("in {shards} shards; 40 batches; {n} sequences")),
        "{stdout}"
    );
    assert!(
        stdout.contains("words        int64    element [1]"),
        "{stdout}"
    );
    assert!(stdout.contains("shard 0: shard-000000.lodt"), "{stdout}");
    let (code, json, err) = lodt(&["info", path(&train), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["num_sequences"], n);
    assert_eq!(v["shards"].as_array().unwrap().len(), shards);
    assert_eq!(v["totals"][1]["rows"], n);

    let (code, stdout, err) = lodt(&["verify", path(&train)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.starts_with("ok      shard-"))
            .count(),
        shards
    );
    assert!(
        stdout.contains(&format!("ok: {shards} shards, 40 batches, {n} sequences")),
        "{stdout}"
    );

    // Back to one file: the same batches.
    let back = dir.path().join("back.lodt");
    let (code, _, err) = lodt(&["convert", path(&train), path(&back)]);
    assert_eq!(code, 0, "{err}");
    let (a, b) = (
        LodtFile::open(&input).unwrap(),
        LodtFile::open(&back).unwrap(),
    );
    assert_eq!(a.num_batches(), b.num_batches());
    for k in 0..a.num_batches() {
        assert_eq!(a.read_batch(k).unwrap(), b.read_batch(k).unwrap());
    }
    // Converting into an existing dataset is refused.
    let (code, _, err) = lodt(&["convert", path(&input), &out]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("already holds a lodt dataset"), "{err}");
    // --shard-bytes needs a dataset output.
    let (code, _, err) = lodt(&[
        "convert",
        path(&input),
        path(&dir.path().join("x.lodt")),
        "--shard-bytes",
        "1M",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("applies to a dataset output"), "{err}");
    let (code, _, err) = lodt(&["convert", path(&input), &out, "--shard-bytes", "lots"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn verify_names_every_damaged_shard_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.lodt");
    source(&input);
    let out = format!("{}/", dir.path().join("d").display());
    let (code, _, err) = lodt(&["convert", path(&input), &out, "--shard-bytes", "8K"]);
    assert_eq!(code, 0, "{err}");
    let d = dir.path().join("d");
    // Shard 1: a flipped body byte; shard 2: missing; an unlisted stray file.
    let s1 = d.join("shard-000001.lodt");
    let mut bytes = std::fs::read(&s1).unwrap();
    let file = LodtFile::open(&s1).unwrap();
    let words = file.tensor_buffers(0, "words").unwrap().body;
    bytes[words.start + 3] ^= 0x40;
    std::fs::write(&s1, &bytes).unwrap();
    std::fs::remove_file(d.join("shard-000002.lodt")).unwrap();
    std::fs::write(d.join("shard-999999.lodt"), b"stray").unwrap();
    let (code, stdout, err) = lodt(&["verify", path(&d)]);
    assert_eq!(code, 1, "{stdout}{err}");
    assert!(stdout.contains("ok      shard-000000.lodt"), "{stdout}");
    let failed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAILED")).collect();
    assert_eq!(failed.len(), 2, "{stdout}");
    assert!(
        failed[0].contains("shard-000001.lodt") && failed[0].contains("checksum"),
        "{stdout}"
    );
    assert!(
        failed[1].contains("shard-000002.lodt") && failed[1].contains("no such file"),
        "{stdout}"
    );
    assert!(
        stdout.contains("note: 1 unlisted (not part of the dataset): shard-999999.lodt"),
        "{stdout}"
    );
    assert!(
        err.contains("2 of") && err.contains("shards failed"),
        "{err}"
    );
    // The same with positional reads instead of memory maps.
    let (code, again, _) = lodt(&["verify", path(&d), "--no-mmap"]);
    assert_eq!((code, again), (1, stdout));
    // info reads the manifest only: it still works, and lists the stray file.
    let (code, stdout, err) = lodt(&["info", path(&d)]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("unlisted  shard-999999.lodt"), "{stdout}");
}

#[test]
fn index_writes_a_missing_shard_index_and_then_has_nothing_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.lodt");
    source(&input);
    let train = dir.path().join("train");
    let out = format!("{}/", train.display());
    let (code, _, err) = lodt(&["convert", path(&input), &out, "--shard-bytes", "8K"]);
    assert_eq!(code, 0, "{err}");
    let (code, stdout, err) = lodt(&["index", path(&train)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.starts_with("the shard index is up to date: "),
        "{stdout}"
    );
    for e in std::fs::read_dir(&train).unwrap() {
        let e = e.unwrap();
        if e.file_name()
            .to_string_lossy()
            .starts_with("lodt-dataset.index.")
        {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    assert!(!lodt::dataset::Dataset::open(&train).unwrap().is_indexed());
    let (code, stdout, err) = lodt(&["index", path(&train)]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.starts_with("wrote the shard index: "), "{stdout}");
    assert!(lodt::dataset::Dataset::open(&train).unwrap().is_indexed());
    let (code, _, err) = lodt(&["index", path(&dir.path().join("none"))]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("none"), "{err}");
}

#[test]
fn state_show_reports_a_saved_state_and_checks_it_against_a_dataset() {
    use lodt::dataset::{Batching, Loader, LoaderOptions, LoaderState, ShuffleOptions};
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.lodt");
    let n = source(&input);
    let train = dir.path().join("train");
    let (code, _, err) = lodt(&["convert", path(&input), &format!("{}/", train.display())]);
    assert_eq!(code, 0, "{err}");
    let dataset = std::sync::Arc::new(lodt::dataset::Dataset::open(&train).unwrap());
    let mut states = Vec::new();
    for (rank, steps) in [(0, 3), (1, 1)] {
        let options = LoaderOptions {
            batching: Batching::Sequences(4),
            shuffle: Some(ShuffleOptions {
                seed: 3,
                buffer: 32,
            }),
            rank,
            world_size: 2,
            prefetch: 0,
            ..Default::default()
        };
        let mut loader = Loader::new(dataset.clone(), options).unwrap();
        loader.by_ref().take(steps).for_each(|b| drop(b.unwrap()));
        states.push(loader.state());
    }
    let merged = LoaderState::merge(&states).unwrap();
    let file = dir.path().join("state.json");
    std::fs::write(&file, merged.to_json().to_string()).unwrap();
    let (code, stdout, err) = lodt(&["state", "show", path(&file), "--dataset", path(&train)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.starts_with("loader state version 1, round_robin partition, epoch 0\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "{n} sequences: 16 delivered, {} remaining; 2 consumers (every count",
            n - 16
        )),
        "{stdout}"
    );
    assert!(stdout.contains("consumer 0: 12 of "), "{stdout}");
    assert!(
        stdout.contains("dataset: the one it was saved on"),
        "{stdout}"
    );
    let (code, stdout, err) = lodt(&["state", "show", path(&file), "--json"]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["delivered"], 16);
    assert_eq!(report["per_consumer"][1]["delivered"], 4);
    assert_eq!(report["complete"], true);
    // Another dataset: exit 1, saying why.
    let other = dir.path().join("other");
    lodt::dataset::DatasetWriter::create(&other, Default::default())
        .unwrap()
        .finish()
        .unwrap();
    let (code, stdout, err) = lodt(&["state", "show", path(&file), "--dataset", path(&other)]);
    assert_eq!(code, 1, "{stdout}");
    assert!(err.contains("saved on a dataset of"), "{err}");
    // Not a state.
    std::fs::write(&file, "{\"version\": 9}").unwrap();
    let (code, _, err) = lodt(&["state", "show", path(&file)]);
    assert_eq!(code, 1);
    assert!(err.contains("state.json"), "{err}");
}

#[test]
fn state_check_dry_runs_the_rest_of_the_epoch_and_says_it_holds() {
    use lodt::dataset::{Batching, Loader, LoaderOptions, LoaderState, ShuffleOptions};
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.lodt");
    let n = source(&input);
    let train = dir.path().join("train");
    let (code, _, err) = lodt(&["convert", path(&input), &format!("{}/", train.display())]);
    assert_eq!(code, 0, "{err}");
    let dataset = std::sync::Arc::new(lodt::dataset::Dataset::open(&train).unwrap());
    // 2 ranks × 2 workers take 3, 1, 2 and 0 steps of 4.
    let mut states = Vec::new();
    for (c, steps) in [3, 1, 2, 0].into_iter().enumerate() {
        let options = LoaderOptions {
            batching: Batching::Sequences(4),
            shuffle: Some(ShuffleOptions {
                seed: 3,
                buffer: 32,
            }),
            rank: c / 2,
            world_size: 2,
            worker: c % 2,
            num_workers: 2,
            prefetch: 0,
            ..Default::default()
        };
        let mut loader = Loader::new(dataset.clone(), options).unwrap();
        loader.by_ref().take(steps).for_each(|b| drop(b.unwrap()));
        states.push(loader.state());
    }
    let merged = LoaderState::merge(&states).unwrap();
    let file = dir.path().join("state.json");
    std::fs::write(&file, merged.to_json().to_string()).unwrap();
    let left = n - 24;
    let (code, stdout, err) = lodt(&["state", "check", path(&file), "--dataset", path(&train)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.starts_with(
            "round_robin partition, epoch 0: saved by 4 consumers, resumed on 4 ranks × 1 workers\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "{n} sequences of the epoch: 24 delivered before, {left} remaining\n"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("delivered by the dry run: {left}; repeated 0, skipped 0; dropped (drop) 0, repeats (repeat) 0\nholds: ")),
        "{stdout}"
    );
    // Resumed as 3 × 1: the rest dealt anew, in JSON.
    let (code, stdout, err) = lodt(&[
        "state",
        "check",
        path(&file),
        "--dataset",
        path(&train),
        "--world-size",
        "3",
        "--workers",
        "1",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let share = |c: u64| (left - c).div_ceil(3);
    assert_eq!(
        report["per_consumer"],
        serde_json::json!([share(0), share(1), share(2)])
    );
    assert_eq!(
        (
            report["delivered_before"].as_u64(),
            report["delivered"].as_u64()
        ),
        (Some(24), Some(left))
    );
    assert_eq!(
        (report["holds"].as_bool(), report["first_offence"].is_null()),
        (Some(true), true)
    );
    // One rank's state: not every count, exit 1 saying so.
    std::fs::write(&file, states[0].to_json().to_string()).unwrap();
    let (code, _, err) = lodt(&["state", "check", path(&file), "--dataset", path(&train)]);
    assert_eq!(code, 1);
    assert!(
        err.contains("state check needs every consumer's count"),
        "{err}"
    );
}
