//! A dataset writer killed with SIGKILL at random points (issue 14, part 4):
//! the previous manifest stays valid, no shard is half-listed, and the next
//! writer carries on.
//!
//! The writers are this test binary itself, re-run with `LODT_DATASET_CHILD`
//! naming a role (see [`child`]). Set `LODT_SEED` to replay the random kill
//! delays of a run (each test prints its seed).

#![cfg(unix)]

use crate::dataset_util;

use dataset_util::{TestRng, make_batch, open, store, write_dataset};
use lodt::dataset::{Dataset, DatasetWriter, DatasetWriterOptions};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn env_u64(name: &str) -> u64 {
    env(name).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The entry point of the child processes: a no-op unless
/// `LODT_DATASET_CHILD` names a role.
///
/// - `append`: appends `LODT_COUNT` batches of sequences from `LODT_FIRST`
///   to the dataset in `LODT_DIR`, in shards of 6 KiB, writing the manifest
///   every `LODT_FLUSH` batches (0: only at the end).
/// - `part`: the same as writer `w` of a parallel write.
#[test]
fn child() {
    let Some(role) = env("LODT_DATASET_CHILD") else {
        return;
    };
    let dir = std::path::PathBuf::from(env("LODT_DIR").unwrap());
    let options = DatasetWriterOptions {
        shard_bytes: 6 * 1024,
        ..Default::default()
    };
    let mut w = match role.as_str() {
        "append" => DatasetWriter::append_in(store(&dir), options).unwrap(),
        "part" => DatasetWriter::create_part_in(store(&dir), "w", options).unwrap(),
        _ => panic!("unknown role {role}"),
    };
    let flush = env_u64("LODT_FLUSH");
    let mut next = env_u64("LODT_FIRST");
    for k in 0..env_u64("LODT_COUNT") {
        let n = 3 + k % 9;
        w.write(&make_batch(next, n)).unwrap();
        next += n;
        if flush > 0 && (k + 1) % flush == 0 {
            w.flush().unwrap();
        }
    }
    w.finish().unwrap();
    std::process::exit(0);
}

/// The name of the [`child`] test in this test binary: its module path
/// less the crate's name.
fn child_test() -> String {
    let module = module_path!()
        .split_once("::")
        .map_or(module_path!(), |(_, m)| m);
    format!("{module}::child")
}

fn child_command(role: &str, dir: &Path, first: u64, count: u64, flush: u64) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        child_test().as_str(),
        "--nocapture",
        "--test-threads=1",
        "-q",
    ])
    .env("LODT_DATASET_CHILD", role)
    .env("LODT_DIR", dir)
    .env("LODT_FIRST", first.to_string())
    .env("LODT_COUNT", count.to_string())
    .env("LODT_FLUSH", flush.to_string())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    cmd
}

fn seed(test: &str) -> TestRng {
    let seed = env("LODT_SEED")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("{test}: LODT_SEED={seed}");
    TestRng(seed)
}

/// Checks the dataset in `dir` completely and that its sequences are
/// exactly `0..n` (each batch as written); returns `n`.
fn check_prefix(dir: &Path) -> u64 {
    let dataset = open(dir);
    let report = dataset.verify().unwrap();
    let mut next = 0;
    for batch in dataset.batches() {
        let batch = batch.unwrap();
        let rows = batch.get("label").unwrap().rows() as u64;
        assert_eq!(batch, make_batch(next, rows));
        next += rows;
    }
    assert_eq!(report.sequences, next);
    next
}

/// Copies every file of `from` into `to` (a fresh directory).
fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn kill_9_while_appending_leaves_a_valid_manifest_and_no_half_listed_shard() {
    let mut rng = seed("kill_9_while_appending");
    let tmp = tempfile::tempdir().unwrap();
    let template = tmp.path().join("template");
    let initial = write_dataset(&template, &[5, 7, 9, 4, 6, 8], 6 * 1024);
    let dir = tmp.path().join("data");
    let count = 48;
    let total = initial + (0..count).map(|k| 3 + k % 9).sum::<u64>();

    // How long an uninterrupted child takes, to spread the kills over it.
    copy_dir(&template, &dir);
    let start = Instant::now();
    let out = child_command("append", &dir, initial, count, 0)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let full = start.elapsed().as_millis() as u64;
    assert_eq!(check_prefix(&dir), total);

    let runs = 24;
    let (mut old, mut new, mut checkpoints) = (0, 0, 0);
    for run in 0..runs {
        copy_dir(&template, &dir);
        let flush = [0, 4][run % 2];
        let mut child = child_command("append", &dir, initial, count, flush)
            .spawn()
            .unwrap();
        let delay = rng.below(full + full / 4 + 1);
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        child.wait().unwrap();
        // The manifest is whole; every listed shard is whole and as written.
        let n = check_prefix(&dir);
        if n == initial {
            old += 1;
        } else if n == total {
            new += 1;
        } else {
            checkpoints += 1;
            assert!(flush > 0, "run {run}: {n} sequences without checkpoints");
        }
        // The next writer carries on: the lock died with the child, and no
        // name of an unlisted shard is reused.
        let mut w = DatasetWriter::append_in(store(&dir), DatasetWriterOptions::default()).unwrap();
        w.write(&make_batch(n, 5)).unwrap();
        w.finish().unwrap();
        assert_eq!(
            check_prefix(&dir),
            n + 5,
            "run {run} (killed after {delay} ms)"
        );
        let dataset = Dataset::open_in(store(&dir)).unwrap();
        for name in dataset.unlisted().unwrap() {
            assert!(
                name.starts_with("shard-") && name.ends_with(".lodt"),
                "{name}"
            );
        }
    }
    eprintln!(
        "kill -9 while appending: {runs} runs ({full} ms uninterrupted): {old} kept the old manifest, \
         {checkpoints} a checkpoint, {new} the new one; every listed shard verified"
    );
}

#[test]
fn kill_9_while_writing_a_part_leaves_the_merge_whole() {
    let mut rng = seed("kill_9_while_writing_a_part");
    let tmp = tempfile::tempdir().unwrap();
    let template = tmp.path().join("template");
    let initial = write_dataset(&template, &[5, 7, 9], 6 * 1024);
    let dir = tmp.path().join("data");
    let count = 30;
    for run in 0..8 {
        copy_dir(&template, &dir);
        let mut child = child_command("part", &dir, initial, count, 5)
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.below(60)));
        let _ = child.kill();
        child.wait().unwrap();
        let merged = Dataset::commit_parts_in(store(&dir)).unwrap();
        let n = check_prefix(&dir);
        assert_eq!(merged.num_sequences(), n, "run {run}");
        assert!(n >= initial);
    }
}
