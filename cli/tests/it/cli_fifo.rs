//! A FIFO (named pipe) or a device given to a command that reads by ranges
//! (`info`, `verify` on a `.lodt` file or a dataset shard; Parquet and Arrow
//! IPC files) is a clear error at once; `convert` and `show`, which read a
//! `.lodt` file that is not a regular file as a stream, still read one from a
//! FIFO, in order. `--check-bodies` checks a mapped
//! batch's bodies; `--no-mmap` reads are always checked.
//!
//! Every run is watched: a command still running after a minute (waiting on
//! the FIFO) is killed and fails the test rather than hanging it.

#![cfg(unix)]

use lodt::{Batch, Lod, LodTensor};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs lodt; (code, stderr). Fails if it runs for more than a minute.
fn lodt(args: &[&str]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lodt"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("lodt {args:?} blocked on a FIFO");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code().unwrap_or(-1), stderr)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

fn batch(k: usize) -> Batch {
    let lod = Lod::try_from_lengths(&[vec![2, 3]]).unwrap();
    let t =
        LodTensor::from_vec((0..5).map(|i| (k * 10 + i) as i64).collect(), vec![5], lod).unwrap();
    Batch::try_from_tensors([("t", t)]).unwrap()
}

fn fails_saying(args: &[&str], what: &str) {
    let (code, err) = lodt(args);
    assert_ne!(code, 0, "lodt {args:?} succeeded");
    assert!(err.contains(what), "lodt {args:?}: {err}");
}

#[test]
fn info_and_verify_refuse_a_fifo_lodt_file() {
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("pipe.lodt");
    mkfifo(&pipe);
    let refused = format!(
        "{} is a FIFO (named pipe), not a regular file",
        pipe.display()
    );
    for args in [
        vec!["info", s(&pipe)],
        vec!["info", "--no-mmap", s(&pipe)],
        vec!["verify", s(&pipe)],
        vec!["verify", "--no-mmap", s(&pipe)],
    ] {
        fails_saying(&args, &refused);
    }
    fails_saying(
        &["info", "/dev/null"],
        "/dev/null is a character device, not a regular file",
    );
}

#[test]
fn reading_commands_refuse_a_fifo_parquet_or_arrow_file() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["pipe.parquet", "pipe.arrow"] {
        let pipe = dir.path().join(name);
        mkfifo(&pipe);
        let out = dir.path().join("out.lodt");
        for args in [
            vec!["head", "-n", "1", s(&pipe)],
            vec!["stats", s(&pipe)],
            vec!["info", s(&pipe)],
            vec!["convert", s(&pipe), s(&out)],
        ] {
            fails_saying(&args, s(&pipe));
            let (_, err) = lodt(&args);
            assert!(
                err.contains("pipe") || err.contains("FIFO"),
                "{args:?}: {err}"
            );
        }
    }
}

#[test]
fn a_fifo_shard_fails_verify_of_its_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let options = lodt::dataset::DatasetWriterOptions {
        shard_bytes: 1,
        ..Default::default()
    };
    let mut w = lodt::dataset::DatasetWriter::create(&data, options).unwrap();
    for k in 0..3 {
        w.write(&batch(k)).unwrap();
    }
    let manifest = w.finish().unwrap();
    assert!(manifest.shards.len() >= 2);
    let shard = data.join(&manifest.shards[1].name);
    std::fs::remove_file(&shard).unwrap();
    mkfifo(&shard);
    let name = &manifest.shards[1].name;
    fails_saying(&["verify", s(&data)], name);
    fails_saying(&["verify", "--no-mmap", s(&data)], name);
}

#[test]
fn convert_still_reads_a_lodt_file_from_a_fifo() {
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("in.lodt");
    mkfifo(&pipe);
    let batches: Vec<Batch> = (0..3).map(batch).collect();
    let bytes = lodt::format::to_bytes(batches.iter(), Default::default()).unwrap();
    let p = pipe.clone();
    let writer = std::thread::spawn(move || std::fs::write(&p, bytes));
    let out = dir.path().join("out.lodt");
    let (code, err) = lodt(&["convert", s(&pipe), s(&out)]);
    assert_eq!(code, 0, "{err}");
    writer.join().unwrap().unwrap();
    // The same values (convert may regroup the batches).
    let file = lodt::LodtFile::open(&out).unwrap();
    let mut got = Vec::new();
    for k in 0..file.num_batches() {
        got.extend_from_slice(
            file.batch(k)
                .unwrap()
                .tensor("t")
                .unwrap()
                .as_slice::<i64>()
                .unwrap(),
        );
    }
    let want: Vec<i64> = [0, 1, 2, 3, 4, 10, 11, 12, 13, 14, 20, 21, 22, 23, 24].into();
    assert_eq!(got, want);
}

#[test]
fn show_still_reads_a_lodt_file_from_a_fifo() {
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("in.lodt");
    mkfifo(&pipe);
    let batches: Vec<Batch> = (0..3).map(batch).collect();
    let bytes = lodt::format::to_bytes(batches.iter(), Default::default()).unwrap();
    let p = pipe.clone();
    let writer = std::thread::spawn(move || {
        // show stops reading after its batch: the rest may find no reader.
        let _ = std::fs::write(&p, bytes);
    });
    let (code, err) = lodt(&["show", "--batch", "1", s(&pipe)]);
    assert_eq!(code, 0, "{err}");
    writer.join().unwrap();
}

/// A file of three batches whose batch 1 has body byte `k` flipped.
fn damaged(dir: &Path) -> PathBuf {
    let batches: Vec<Batch> = (0..3).map(batch).collect();
    let mut bytes = lodt::format::to_bytes(batches.iter(), Default::default()).unwrap();
    let body = lodt::LodtFile::from_bytes(&bytes)
        .unwrap()
        .tensor_buffers(1, "t")
        .unwrap()
        .body;
    bytes[body.start + 9] ^= 0x02;
    let path = dir.join("damaged.lodt");
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn check_bodies_and_no_mmap_catch_a_damaged_body() {
    let dir = tempfile::tempdir().unwrap();
    let path = damaged(dir.path());
    // A map reads no body: show and info show the batch.
    for args in [
        vec!["show", "--batch", "1", s(&path)],
        vec!["info", s(&path)],
    ] {
        let (code, err) = lodt(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
    }
    let mismatch = "checksum mismatch in batch 1, tensor \"t\", body";
    fails_saying(
        &["show", "--batch", "1", "--check-bodies", s(&path)],
        mismatch,
    );
    fails_saying(&["info", "--check-bodies", s(&path)], mismatch);
    fails_saying(&["show", "--batch", "1", "--no-mmap", s(&path)], mismatch);
    fails_saying(
        &["info", "--no-mmap", s(&path)],
        &format!("{}: {mismatch}", s(&path)),
    );
    fails_saying(&["verify", s(&path)], mismatch);
}
