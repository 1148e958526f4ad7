//! Datasets written to and read from an S3-compatible server (moto's server
//! mode, started by the test on 127.0.0.1 with a free port): multipart shard
//! uploads, the manifest's conditional put (two writers: the loser gets
//! `ManifestChanged` and the winner's data stays), a failed writer leaving
//! the manifest untouched, and single files read by URI.
//!
//! Needs `LODT_PYTHON` (a python with `moto[server]`; `scripts/test` sets it
//! up). Without it the test prints `SKIPPED: moto not available` and passes.

#![cfg(feature = "remote")]

use crate::dataset_util;

use dataset_util::make_batch;
use lodt::dataset::{Dataset, DatasetError, DatasetWriter, DatasetWriterOptions};
use lodt::remote::{RemoteOptions, open_dataset, open_file, store_for};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) struct Moto {
    child: Child,
    pub(crate) port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn python_with_moto() -> Option<PathBuf> {
    let python = PathBuf::from(std::env::var_os("LODT_PYTHON")?);
    let ok = Command::new(&python)
        .args(["-c", "import moto.server"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(python)
}

pub(crate) fn start_moto(python: &PathBuf) -> Moto {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(python)
        .args([
            "-m",
            "moto.server",
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start moto");
    let moto = Moto { child, port };
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "moto did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    moto
}

/// Creates `bucket` (moto checks no signature).
pub(crate) fn create_bucket(port: u16, bucket: &str) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

pub(crate) fn options(port: u16) -> RemoteOptions {
    RemoteOptions::default()
        .with_option("aws_endpoint", format!("http://127.0.0.1:{port}"))
        .with_option("aws_allow_http", "true")
        .with_option("aws_access_key_id", "test")
        .with_option("aws_secret_access_key", "test")
        .with_option("aws_region", "us-east-1")
}

fn write(
    uri: &str,
    o: &RemoteOptions,
    first: u64,
    batches: u64,
    shard_bytes: u64,
) -> DatasetWriter {
    let store = store_for(uri, o).unwrap();
    let options = DatasetWriterOptions {
        shard_bytes,
        ..Default::default()
    };
    let mut w = match DatasetWriter::append_in(store.clone(), options.clone()) {
        Ok(w) => w,
        Err(DatasetError::NotADataset { .. }) => DatasetWriter::create_in(store, options).unwrap(),
        Err(e) => panic!("{e}"),
    };
    for k in 0..batches {
        w.write(&make_batch(first + k * 20, 20)).unwrap();
    }
    w
}

#[test]
fn datasets_on_s3() {
    let Some(python) = python_with_moto() else {
        eprintln!("SKIPPED: moto not available (set LODT_PYTHON to a python with moto[server])");
        return;
    };
    let moto = start_moto(&python);
    create_bucket(moto.port, "data");
    let o = options(moto.port);
    let uri = "s3://data/train";

    // A dataset of several shards, one above the multipart part size.
    let w = write(uri, &o, 0, 30, 8 << 10);
    let manifest = w.finish().unwrap();
    assert!(manifest.num_shards() >= 3);
    let big: Vec<i64> = (0..1_300_000).collect(); // 10.4 MB: a multipart upload
    let t = lodt::LodTensor::from_vec(big.clone(), vec![big.len()], lodt::Lod::empty()).unwrap();
    let store = store_for("s3://data/big", &o).unwrap();
    let mut bw = DatasetWriter::create_in(store, DatasetWriterOptions::default()).unwrap();
    bw.write(&lodt::Batch::try_from_tensors([("x", t)]).unwrap())
        .unwrap();
    bw.finish().unwrap();
    let big_ds = open_dataset("s3://data/big", &o).unwrap();
    assert_eq!(big_ds.num_shards(), 1);
    big_ds.verify().unwrap();

    // Read back: every sequence as written.
    let ds = open_dataset(uri, &o).unwrap();
    assert_eq!(ds.num_sequences(), 600);
    for id in [0u64, 1, 299, 599] {
        let seq = ds.sequence(id).unwrap();
        assert_eq!(seq, make_batch(id, 1), "sequence {id}");
    }
    ds.verify().unwrap();

    // A shard opened as a single file by URI.
    let shard = &manifest.shards[0].name;
    let file = open_file(&format!("{uri}/{shard}"), &o).unwrap();
    assert_eq!(file.num_batches() as u64, manifest.shards[0].batches);

    // Two appenders read the same manifest; the first to finish wins, the
    // other gets ManifestChanged and nothing of it is listed.
    let a = write(uri, &o, 1000, 2, 8 << 10);
    let b = write(uri, &o, 2000, 3, 8 << 10);
    a.finish().unwrap();
    let err = b.finish().unwrap_err();
    assert!(matches!(err, DatasetError::ManifestChanged { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("s3://data/train/lodt-dataset.json"),
        "{err}"
    );
    let ds = open_dataset(uri, &o).unwrap();
    assert_eq!(ds.num_sequences(), 640);
    assert_eq!(ds.sequence(600).unwrap(), make_batch(1000, 1));

    // A writer that fails (dropped before finish) changes nothing.
    let before = ds.manifest().clone();
    let c = write(uri, &o, 3000, 5, 8 << 10);
    drop(c);
    let ds = open_dataset(uri, &o).unwrap();
    assert_eq!(ds.manifest(), &before);

    // Creating over an existing dataset is refused.
    let store = store_for(uri, &o).unwrap();
    assert!(matches!(
        DatasetWriter::create_in(store, DatasetWriterOptions::default()),
        Err(DatasetError::AlreadyExists { .. })
    ));

    // A missing dataset and a missing file: clear errors naming the URI.
    let err = Dataset::open_in(store_for("s3://data/none", &o).unwrap()).unwrap_err();
    assert!(err.to_string().contains("s3://data/none"), "{err}");
    let err = open_file("s3://data/none.lodt", &o).unwrap_err();
    assert!(err.to_string().contains("s3://data/none.lodt"), "{err}");
}
