//! A FIFO (named pipe) or a device given where a file is read by ranges (a
//! `.lodt` file, a dataset shard, a Parquet file) is a clear error at once,
//! never a wait for a writer that never comes; the stream readers, which
//! read in order, keep accepting pipes.
//!
//! Each check runs on a thread watched by the test: a reader that blocks
//! fails the test (after a minute) instead of hanging it.

#![cfg(unix)]

use crate::dataset_util;

use lodt::format::{LodtFile, MappedFile, ReadOptions};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// `f()`'s result, or a failure if it has not returned within a minute (it
/// waits on the FIFO).
fn within_a_minute<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what} blocked on a FIFO"))
}

/// Asserts that `err` says `path` is `kind`, not a regular file.
fn refused(err: impl std::fmt::Display, path: &Path, kind: &str) {
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("{} is {kind}, not a regular file", path.display())),
        "{msg}"
    );
}

fn fifo(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    mkfifo(&path);
    path
}

#[test]
fn a_fifo_lodt_file_is_refused_by_every_random_access_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = fifo(dir.path(), "pipe.lodt");
    let p = path.clone();
    let errors = within_a_minute("opening", move || {
        let pread = ReadOptions {
            mmap: false,
            ..Default::default()
        };
        vec![
            LodtFile::open(&p).unwrap_err().to_string(),
            LodtFile::open_with(&p, &pread).unwrap_err().to_string(),
            LodtFile::read(&p).unwrap_err().to_string(),
            lodt::format::verify(&p).unwrap_err().to_string(),
            MappedFile::open(&p).err().unwrap().to_string(),
            lodt::format::PreadSource::open(&p)
                .err()
                .unwrap()
                .to_string(),
            lodt::format::open_regular(&p).unwrap_err().to_string(),
        ]
    });
    for e in errors {
        refused(e, &path, "a FIFO (named pipe)");
    }
}

#[test]
fn a_device_or_a_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let null = Path::new("/dev/null");
    let errors = within_a_minute("opening /dev/null", move || {
        vec![
            LodtFile::open("/dev/null").unwrap_err().to_string(),
            LodtFile::read("/dev/null").unwrap_err().to_string(),
        ]
    });
    for e in errors {
        refused(e, null, "a character device");
    }
    refused(
        LodtFile::open(dir.path()).unwrap_err(),
        dir.path(),
        "a directory",
    );
}

#[test]
fn a_fifo_shard_is_an_error_naming_the_shard() {
    let dir = tempfile::tempdir().unwrap();
    let n = dataset_util::write_dataset(dir.path(), &[30, 30, 30], 2 << 10);
    let dataset = lodt::dataset::Dataset::open(dir.path()).unwrap();
    assert!(dataset.num_shards() >= 2);
    let name = dataset.manifest().shards[1].name.clone();
    let shard = dir.path().join(&name);
    std::fs::remove_file(&shard).unwrap();
    mkfifo(&shard);
    let d = dir.path().to_path_buf();
    let (first, second) = within_a_minute("reading the dataset", move || {
        let dataset = lodt::dataset::Dataset::open(&d).unwrap();
        let first = dataset.read_batch(0, 0).map(|b| b.len());
        let second = dataset.read_batch(1, 0).unwrap_err().to_string();
        (first, second)
    });
    assert!(first.is_ok());
    refused(second, &shard, "a FIFO (named pipe)");
    assert!(n > 0);
}

#[cfg(feature = "parquet")]
#[test]
fn a_fifo_parquet_or_arrow_file_is_refused() {
    use lodt::convert::Format;
    let dir = tempfile::tempdir().unwrap();
    let parquet = fifo(dir.path(), "pipe.parquet");
    let arrow = fifo(dir.path(), "pipe.arrow");
    let (p, a) = (parquet.clone(), arrow.clone());
    let (direct, via_parquet, via_arrow) = within_a_minute("opening", move || {
        let direct = lodt::arrow::parquet::ParquetReader::open(&p, &Default::default())
            .err()
            .unwrap()
            .to_string();
        let err = |f: Format, path: &Path| {
            f.open_reader(path, &Default::default())
                .err()
                .unwrap()
                .to_string()
        };
        (direct, err(Format::Parquet, &p), err(Format::ArrowFile, &a))
    });
    refused(direct, &parquet, "a FIFO (named pipe)");
    for (msg, path) in [(via_parquet, &parquet), (via_arrow, &arrow)] {
        assert!(
            msg.contains(&format!("{} is a pipe or a device", path.display())),
            "{msg}"
        );
    }
}

#[test]
fn the_stream_reader_still_reads_a_lodt_file_from_a_fifo() {
    use lodt::convert::Format;
    let dir = tempfile::tempdir().unwrap();
    let path = fifo(dir.path(), "stream.lodt");
    let batches: Vec<lodt::Batch> = (0..3)
        .map(|k| dataset_util::make_batch(k * 10, 10))
        .collect();
    let bytes = lodt::format::to_bytes(batches.iter(), Default::default()).unwrap();
    let p = path.clone();
    let writer = std::thread::spawn(move || std::fs::write(&p, bytes));
    let p = path.clone();
    let got = within_a_minute("streaming", move || {
        Format::Lodt
            .open_reader(&p, &Default::default())
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
    });
    writer.join().unwrap().unwrap();
    assert_eq!(got, batches);
}
