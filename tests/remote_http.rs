//! `.lodt` files and datasets read over HTTP through `lodt::remote`, against
//! a server on 127.0.0.1 started by the test (tests/remote_util): request
//! counts, ETag-keyed caching, retries, and the errors of a vanished,
//! truncated, rewritten or corrupt object.

#![cfg(feature = "remote")]

mod dataset_util;
mod remote_util;

use dataset_util::{make_batch, write_dataset};
use lodt::Batch;
use lodt::format::{LodtFile, RangeSource};
use lodt::remote::{ObjectSource, RemoteOptions, open_dataset, open_file};
use remote_util::Server;
use std::sync::Arc;

/// A file of `n` batches of 50 sequences each.
fn file_bytes(n: u64) -> Vec<u8> {
    let batches: Vec<Batch> = (0..n).map(|k| make_batch(k * 50, 50)).collect();
    lodt::format::to_bytes(batches.iter(), Default::default()).unwrap()
}

fn gets(log: &[String]) -> usize {
    log.iter().filter(|l| l.starts_with("GET ")).count()
}

fn same_batches(a: &LodtFile, b: &LodtFile) {
    assert_eq!(a.num_batches(), b.num_batches());
    for k in 0..a.num_batches() {
        assert_eq!(
            a.batch(k).unwrap().to_batch().unwrap(),
            b.batch(k).unwrap().to_batch().unwrap(),
            "batch {k}"
        );
    }
}

/// [`file_bytes`] in format 1.0.
fn file_bytes_v1(n: u64) -> Vec<u8> {
    let options = lodt::format::WriteOptions::for_codec(Some("1.0"), "none").unwrap();
    let mut w =
        lodt::format::Writer::try_new_with(Vec::new(), Default::default(), options).unwrap();
    for k in 0..n {
        w.write(&make_batch(k * 50, 50)).unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn open_is_two_requests_and_a_batch_is_one() {
    open_is_two_requests_and_a_batch_is_one_in(&file_bytes_v1(20));
    let bytes = file_bytes(20);
    assert_eq!(bytes[12], 2, "the default writes 2.0");
    open_is_two_requests_and_a_batch_is_one_in(&bytes);
}

/// In 1.0 a batch is one request. In 2.0 the first batch read that is not
/// the schema's also reads the head of the batch that holds the schema
/// (batch 0: its first 16 KiB, which hold a small head whole), in one
/// request, once per file; every other batch is one request.
fn open_is_two_requests_and_a_batch_is_one_in(bytes: &[u8]) {
    let v2 = bytes[12] == 2;
    let server = Server::start();
    assert!(bytes.len() > 64 << 10, "bigger than the suffix used below");
    server.put("a.lodt", bytes.to_vec());
    let options = RemoteOptions {
        suffix_bytes: 16 << 10,
        ..Default::default()
    };
    let file = open_file(&server.url("a.lodt"), &options).unwrap();
    let log = server.take_log();
    assert_eq!(log.len(), 2, "open: the suffix, then the head: {log:?}");
    assert_eq!(log[0], format!("GET /a.lodt bytes=-{}", 16 << 10));
    assert!(log[1].starts_with("GET /a.lodt bytes=0-"), "{log:?}");
    // One batch: one ranged GET of exactly its section (in 2.0, after the
    // schema's head, the first time).
    let local = LodtFile::from_bytes(bytes).unwrap();
    let section = |k: usize| {
        let r = local.batch_range(k).unwrap();
        format!("GET /a.lodt bytes={}-{}", r.start, r.end - 1)
    };
    let got = file.batch(3).unwrap().to_batch().unwrap();
    assert_eq!(got, local.batch(3).unwrap().to_batch().unwrap());
    let mut log = server.take_log();
    if v2 {
        let head = local.batch_range(0).unwrap().start;
        let end = local.batch_range(0).unwrap().end.min(head + (16 << 10));
        assert_eq!(log.len(), 2, "{log:?}");
        assert_eq!(log[1], format!("GET /a.lodt bytes={head}-{}", end - 1));
        log.truncate(1);
    }
    assert_eq!(log, vec![section(3)]);
    for k in [5, 10] {
        file.batch(k).unwrap().to_batch().unwrap();
        assert_eq!(server.take_log(), vec![section(k)]);
    }
    // Every batch equal to the local file's, and verify passes.
    same_batches(&file, &local);
    file.verify().unwrap();
}

#[test]
fn a_small_file_opens_with_one_request() {
    let server = Server::start();
    let bytes = file_bytes(2);
    assert!(bytes.len() < 256 << 10);
    server.put("small.lodt", bytes.clone());
    let file = open_file(&server.url("small.lodt"), &RemoteOptions::default()).unwrap();
    assert_eq!(gets(&server.take_log()), 1);
    // The whole file came with the suffix: batches cost nothing more.
    same_batches(&file, &LodtFile::from_bytes(&bytes).unwrap());
    assert_eq!(server.take_log(), Vec::<String>::new());
}

#[test]
fn the_cache_is_keyed_by_etag() {
    let server = Server::start();
    let cache = tempfile::tempdir().unwrap();
    let options = RemoteOptions {
        suffix_bytes: 4 << 10,
        ..Default::default()
    }
    .with_cache(cache.path(), 64 << 20);
    let v1 = file_bytes(10);
    server.put("c.lodt", v1.clone());
    let first = open_file(&server.url("c.lodt"), &options).unwrap();
    same_batches(&first, &LodtFile::from_bytes(&v1).unwrap());
    server.take_log();
    // Opened again: the suffix is asked for (it tells the ETag), the rest
    // comes from the cache.
    let again = open_file(&server.url("c.lodt"), &options).unwrap();
    same_batches(&again, &LodtFile::from_bytes(&v1).unwrap());
    assert_eq!(gets(&server.take_log()), 1, "only the suffix read");
    // Rewritten under the same name: a new ETag, nothing stale served.
    let v2 = file_bytes(12);
    server.put("c.lodt", v2.clone());
    let fresh = open_file(&server.url("c.lodt"), &options).unwrap();
    same_batches(&fresh, &LodtFile::from_bytes(&v2).unwrap());
    assert!(gets(&server.take_log()) > 12, "v2's batches were fetched");
    // The size limit holds (a fresh cache: evictions happen on inserts).
    let cache = tempfile::tempdir().unwrap();
    let small = RemoteOptions {
        suffix_bytes: 4 << 10,
        ..Default::default()
    }
    .with_cache(cache.path(), 32 << 10);
    let f = open_file(&server.url("c.lodt"), &small).unwrap();
    for k in 0..f.num_batches() {
        f.batch(k).unwrap();
    }
    let cache_store = lodt::remote::DiskCache::new(cache.path(), 32 << 10).unwrap();
    assert!(cache_store.size() <= 32 << 10, "{}", cache_store.size());
}

#[test]
fn a_dataset_opens_with_one_request() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &[40, 40, 40, 40, 40, 40], 4 << 10);
    let local = lodt::dataset::Dataset::open(dir.path()).unwrap();
    assert!(local.num_shards() >= 3);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        server.put(&format!("ds/{name}"), std::fs::read(entry.path()).unwrap());
    }
    let index = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.starts_with(lodt::dataset::names::INDEX_PREFIX))
        .unwrap();
    let remote = open_dataset(&server.url("ds"), &RemoteOptions::default()).unwrap();
    assert_eq!(
        server.take_log(),
        vec![
            "GET /ds/lodt-dataset.json bytes=0-4095".to_string(),
            format!("GET /ds/{index}")
        ],
        "two requests: the manifest's first line, and the shard index it names"
    );
    assert!(remote.is_indexed());
    assert_eq!(remote.num_sequences(), n);
    // A manifest without an index (an older writer's) that fits in the
    // first read: one request.
    let older = lodt::dataset::Manifest::from_json_bytes(
        &std::fs::read(dir.path().join("lodt-dataset.json")).unwrap(),
        "m",
    )
    .unwrap();
    server.put("ds/lodt-dataset.json", older.to_json_bytes());
    let again = open_dataset(&server.url("ds"), &RemoteOptions::default()).unwrap();
    assert_eq!(
        server.take_log(),
        vec!["GET /ds/lodt-dataset.json bytes=0-4095".to_string()],
        "one request: the manifest"
    );
    assert!(!again.is_indexed());
    assert_eq!(again.num_sequences(), n);
    for id in [0, n / 2, n - 1] {
        assert_eq!(
            remote.sequence(id).unwrap(),
            local.sequence(id).unwrap(),
            "sequence {id}"
        );
    }
    // Every shard checks against its manifest entry.
    let report = remote.verify().unwrap();
    assert_eq!(report.shards, local.num_shards());
}

#[test]
fn transient_failures_are_retried() {
    let server = Server::start();
    let bytes = file_bytes(3);
    server.put("r.lodt", bytes.clone());
    server
        .state
        .fail_next
        .store(2, std::sync::atomic::Ordering::SeqCst);
    let file = open_file(&server.url("r.lodt"), &RemoteOptions::default()).unwrap();
    same_batches(&file, &LodtFile::from_bytes(&bytes).unwrap());
    assert_eq!(gets(&server.take_log()), 3, "two 503s, then the answer");
    // More failures than retries: a clear error naming the URI.
    let few = RemoteOptions {
        max_retries: 1,
        ..Default::default()
    };
    server
        .state
        .fail_next
        .store(5, std::sync::atomic::Ordering::SeqCst);
    let err = open_file(&server.url("r.lodt"), &few)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&server.url("r.lodt")), "{err}");
}

#[test]
fn vanished_truncated_rewritten_and_corrupt_objects_are_clear_errors() {
    let server = Server::start();
    let url = server.url("x.lodt");
    // Missing.
    let err = open_file(&url, &RemoteOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&url) && msg.to_lowercase().contains("not found"),
        "{msg}"
    );
    let options = RemoteOptions {
        suffix_bytes: 4 << 10,
        ..Default::default()
    };
    let bytes = file_bytes(10);
    // Truncated before it is opened: the footer is not where it should be.
    server.put("x.lodt", bytes[..bytes.len() - 100].to_vec());
    let err = open_file(&url, &options).unwrap_err().to_string();
    assert!(
        err.contains(&url) || err.contains("footer") || err.contains("trailer"),
        "{err}"
    );
    // Rewritten (or truncated) after it was opened: the ETag no longer
    // matches, and no batch of the new bytes is mixed in.
    server.put("x.lodt", bytes.clone());
    let file = open_file(&url, &options).unwrap();
    server.put("x.lodt", bytes[..bytes.len() / 2].to_vec());
    let err = file.batch(1).unwrap_err().to_string();
    assert!(
        err.contains(&url) && err.contains("changed since it was read"),
        "{err}"
    );
    // Vanished after it was opened.
    server.remove("x.lodt");
    let err = file.batch(2).unwrap_err().to_string();
    assert!(err.contains(&url), "{err}");
    // Corrupt (one byte of a batch flipped): the checksum says so.
    let mut bad = bytes.clone();
    let r = LodtFile::from_bytes(&bytes)
        .unwrap()
        .batch_range(4)
        .unwrap();
    bad[(r.end - 1) as usize - 64] ^= 0x40;
    server.put("x.lodt", bad);
    let file = open_file(&url, &options).unwrap();
    let err = file.verify().unwrap_err().to_string();
    assert!(err.contains("batch 4"), "{err}");
}

#[test]
fn object_source_reads_ranges_concurrently_and_checks_bounds() {
    let server = Server::start();
    let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    server.put("raw", bytes.clone());
    let Ok(lodt::remote::ResolvedLocation::Remote { store, path, uri }) =
        lodt::remote::ResolvedLocation::parse(&server.url("raw"), &RemoteOptions::default())
    else {
        panic!("a remote location")
    };
    let options = RemoteOptions {
        suffix_bytes: 1000,
        max_concurrency: 3,
        ..Default::default()
    };
    let src = ObjectSource::open(store, path, uri, &options).unwrap();
    assert_eq!(src.len(), 100_000);
    let ranges: Vec<_> = (0..10u64).map(|i| i * 5000..i * 5000 + 777).collect();
    let got = src.read_ranges(&ranges).unwrap();
    for (r, b) in ranges.iter().zip(&got) {
        assert_eq!(b.as_slice(), &bytes[r.start as usize..r.end as usize]);
        assert_eq!(b.as_slice().as_ptr() as usize % 64, 0, "64-aligned");
    }
    assert_eq!(src.requests(), 11);
    let err = src.read_range(99_000..100_001).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    // The last bytes came with the open: no request.
    assert_eq!(
        src.read_range(99_500..100_000).unwrap().as_slice(),
        &bytes[99_500..]
    );
    assert_eq!(src.requests(), 11);
    let _ = Arc::new(src);
}

/// A file opened and read in this process is read in a child forked from it
/// (as a DataLoader worker is): the child makes its own client and runtime
/// instead of waiting on the parent's threads, which it does not have. On a
/// client inherited across the fork the child hangs: the alarm kills it, and
/// the test fails.
#[cfg(target_os = "linux")]
#[test]
fn a_forked_child_reads_what_its_parent_opened() {
    let server = Server::start();
    let bytes = file_bytes(20);
    server.put("f.lodt", bytes.clone());
    let options = RemoteOptions {
        suffix_bytes: 4 << 10,
        ..Default::default()
    };
    let file = open_file(&server.url("f.lodt"), &options).unwrap();
    let want = LodtFile::from_bytes(&bytes).unwrap();
    let batch = |f: &LodtFile, k: usize| f.batch(k).unwrap().to_batch().unwrap();
    // The parent reads first: its runtime and pooled connections exist.
    assert_eq!(batch(&file, 0), batch(&want, 0));
    // SAFETY: the child only reads through lodt, then leaves with _exit
    // (no destructors, no test harness code); the parent waits for it.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: alarm and _exit are async-signal-safe.
        unsafe { libc::alarm(60) };
        let same = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            (0..want.num_batches()).all(|k| batch(&file, k) == batch(&want, k))
        }));
        unsafe { libc::_exit(if matches!(same, Ok(true)) { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child made above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child did not read every batch: wait status {status:#x} (signal {} is the alarm: a hang)",
        libc::SIGALRM
    );
    // The parent's client still works.
    assert_eq!(batch(&file, 19), batch(&want, 19));
}
