//! Batches read from an object store and its disk cache are checked against
//! their checksum tables, bodies included (`spec/FORMAT.md` §7.1): a damaged
//! cache entry is dropped and the batch fetched again, once.

#![cfg(feature = "remote")]

use crate::remote_util;

use lodt::format::LodtFile;
use lodt::remote::{RemoteOptions, open_file};
use lodt::{Batch, LodTensor};
use remote_util::Server;

fn file_bytes(n: usize) -> Vec<u8> {
    let batches: Vec<Batch> = (0..n)
        .map(|k| {
            let t = LodTensor::from_vec(
                (0..1000).map(|i| (k * 1000 + i) as i64).collect(),
                vec![1000],
                Default::default(),
            )
            .unwrap();
            Batch::try_from_tensors([("v", t)]).unwrap()
        })
        .collect();
    lodt::format::to_bytes(batches.iter(), Default::default()).unwrap()
}

/// The cache entry (its path, and where its bytes start in it) of bytes `r`.
fn entry(dir: &std::path::Path, r: &std::ops::Range<u64>) -> (std::path::PathBuf, usize) {
    let wanted = format!("\n{}..{}\n", r.start, r.end);
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        // The key: URI, ETag and range, one a line, before the bytes.
        let mut lines = 0;
        let key_end = bytes
            .iter()
            .position(|&b| {
                lines += (b == b'\n') as usize;
                lines == 3
            })
            .map(|i| i + 1);
        if let Some(end) = key_end
            && String::from_utf8_lossy(&bytes[..end]).ends_with(&wanted)
        {
            return (path, end);
        }
    }
    panic!("no cache entry of {r:?}");
}

#[test]
fn a_damaged_cache_entry_is_dropped_and_fetched_again_once() {
    let server = Server::start();
    let bytes = file_bytes(6);
    server.put("c.lodt", bytes.clone());
    let cache = tempfile::tempdir().unwrap();
    let options = RemoteOptions {
        suffix_bytes: 4 << 10,
        ..Default::default()
    }
    .with_cache(cache.path(), 64 << 20);
    let local = LodtFile::from_bytes(&bytes).unwrap();
    let want = local.read_batch(2).unwrap();
    let r = local.batch_range(2).unwrap();
    let body = local.tensor_buffers(2, "v").unwrap().body;
    let first = open_file(&server.url("c.lodt"), &options).unwrap();
    assert_eq!(first.read_batch(2).unwrap(), want);
    // One byte of the cached body flipped (a bad disk under the cache).
    let (path, at) = entry(cache.path(), &r);
    let mut cached = std::fs::read(&path).unwrap();
    let good_entry = cached.clone();
    cached[at + body.start - r.start as usize + 100] ^= 0x04;
    std::fs::write(&path, &cached).unwrap();
    server.take_log();
    let again = open_file(&server.url("c.lodt"), &options).unwrap();
    assert_eq!(again.read_batch(2).unwrap(), want);
    let log = server.take_log();
    let fetch = format!("GET /c.lodt bytes={}-{}", r.start, r.end - 1);
    assert_eq!(
        log.iter().filter(|l| **l == fetch).count(),
        1,
        "fetched again once: {log:?}"
    );
    // The entry was replaced by the good bytes, which serve the next read.
    assert_eq!(std::fs::read(&path).unwrap(), good_entry);
    assert_eq!(again.read_batch(2).unwrap(), want);
    assert!(!server.take_log().contains(&fetch));
}

#[test]
fn a_damaged_body_from_the_store_is_an_error_naming_the_uri_and_batch() {
    let server = Server::start();
    let bytes = file_bytes(4);
    let local = LodtFile::from_bytes(&bytes).unwrap();
    let body = local.tensor_buffers(1, "v").unwrap().body;
    // The object itself holds a damaged body (stored so, or damaged on the
    // way: the reader sees the same bytes).
    let mut bad = bytes.clone();
    bad[body.start + 777] ^= 0x80;
    server.put("d.lodt", bad);
    let cache = tempfile::tempdir().unwrap();
    let options = RemoteOptions {
        suffix_bytes: 4 << 10,
        ..Default::default()
    };
    let url = server.url("d.lodt");
    for options in [options.clone(), options.with_cache(cache.path(), 64 << 20)] {
        let file = open_file(&url, &options).unwrap();
        assert_eq!(file.read_batch(0).unwrap(), local.read_batch(0).unwrap());
        let err = file.batch(1).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "{url}: checksum mismatch in batch 1, tensor \"v\", body"
            )),
            "{err}"
        );
    }
}

#[test]
fn a_footer_damaged_in_transit_is_fetched_again_once() {
    let server = Server::start();
    let bytes = file_bytes(4);
    server.put("t.lodt", bytes.clone());
    let url = server.url("t.lodt");
    // No disk cache: each open fetches anew.
    let options = RemoteOptions {
        suffix_bytes: 4 << 10,
        ..RemoteOptions::default().without_cache()
    };
    let local = LodtFile::from_bytes(&bytes).unwrap();
    // The trailer's tag, its crc, and a byte of the index: each damaged in
    // the first response that holds it, intact in the object.
    for offset in [bytes.len() - 64, bytes.len() - 2, bytes.len() - 64 - 40] {
        *server.state.damage_next.lock().unwrap() = Some((offset, 1));
        let file = open_file(&url, &options).unwrap();
        assert_eq!(file.num_batches(), 4);
        assert_eq!(file.read_batch(3).unwrap(), local.read_batch(3).unwrap());
        assert!(server.state.damage_next.lock().unwrap().is_none());
    }
    // Damage that persists is damage: named after the URI, with no advice to
    // run `lodt recover` on an object (it repairs local files).
    for offset in [bytes.len() - 64, bytes.len() - 2] {
        *server.state.damage_next.lock().unwrap() = Some((offset, 2));
        let err = open_file(&url, &options).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{url}: ")), "{err}");
        assert!(!err.contains("rebuilds the footer"), "{err}");
        *server.state.damage_next.lock().unwrap() = None;
    }
    // A local file keeps the advice.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.lodt");
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let err = LodtFile::open(&path).unwrap_err().to_string();
    assert!(err.contains("`lodt recover` rebuilds the footer"), "{err}");
}

#[test]
fn adversarial_every_footer_byte_damaged_in_transit() {
    let server = Server::start();
    let bytes = file_bytes(4);
    server.put("a.lodt", bytes.clone());
    let url = server.url("a.lodt");
    let options = RemoteOptions {
        suffix_bytes: 4 << 10,
        ..Default::default()
    };
    let trailer = bytes.len() - 64;
    let footer = u64::from_le_bytes(bytes[trailer + 8..trailer + 16].try_into().unwrap()) as usize;
    let (mut once, mut twice, mut refused) = (0, 0, 0);
    for offset in footer..bytes.len() {
        *server.state.damage_next.lock().unwrap() = Some((offset, 1));
        let file = open_file(&url, &options).unwrap();
        assert_eq!(file.num_batches(), 4, "byte {offset}");
        once += 1;
    }
    for offset in (footer..bytes.len()).step_by(5) {
        *server.state.damage_next.lock().unwrap() = Some((offset, 2));
        if let Err(e) = open_file(&url, &options) {
            let e = e.to_string();
            assert!(e.starts_with(&format!("{url}: ")), "{e}");
            assert!(!e.contains("rebuilds the footer"), "{e}");
            refused += 1;
        }
        *server.state.damage_next.lock().unwrap() = None;
        twice += 1;
    }
    eprintln!(
        "ADVERSARIAL footer in transit: {once} bytes damaged once, all opened after one re-read; \
         {twice} damaged twice, {refused} refused naming the URI with no recover advice, the rest \
         in padding no check reads"
    );
}
