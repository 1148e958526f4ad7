//! The loader over an object store: it reads ahead in the epoch order with
//! many requests in flight, merged where batches are adjacent; the node
//! cache serves a second reader (another process, or a worker) without
//! fetching again; and a store that throttles lowers the concurrency instead
//! of failing the epoch.

#![cfg(feature = "remote")]

use crate::dataset_util::{check, write_dataset};
use crate::remote_util::Server;
use lodt::dataset::{Dataset, Loader, LoaderOptions, Partition, ShuffleOptions};
use lodt::remote::{RemoteOptions, open_dataset};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// A dataset of `batches` batches of 20 sequences in shards of about 48 KiB,
/// written locally and served by `server` under `ds/`; its local copy.
fn served(server: &Server, batches: usize) -> (tempfile::TempDir, u64) {
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &vec![20; batches], 48 << 10);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        server.put(&format!("ds/{name}"), std::fs::read(entry.path()).unwrap());
    }
    (dir, n)
}

/// Options for `server`: a first read of 2 KiB (not the whole shard), no
/// disk cache.
fn options() -> RemoteOptions {
    RemoteOptions {
        suffix_bytes: 2 << 10,
        ..RemoteOptions::default().without_cache()
    }
}

fn shuffled(world_size: usize, rank: usize) -> LoaderOptions {
    LoaderOptions {
        shuffle: Some(ShuffleOptions {
            seed: 7,
            buffer: 64,
        }),
        world_size,
        rank,
        ..Default::default()
    }
}

/// The ids of one epoch, checking each mini-batch's tensors.
fn epoch(dataset: Arc<Dataset>, options: LoaderOptions) -> Vec<u64> {
    let mut ids = Vec::new();
    for mb in Loader::new(dataset, options).unwrap() {
        let mb = mb.unwrap();
        check(&mb);
        ids.extend(mb.ids);
    }
    ids
}

fn body_gets(log: &[String]) -> Vec<(u64, u64)> {
    log.iter()
        .filter(|l| l.starts_with("GET /ds/") && l.contains(".lodt bytes="))
        .filter_map(|l| {
            let spec = l.rsplit("bytes=").next()?;
            let (a, b) = spec.split_once('-')?;
            Some((a.parse().ok()?, b.parse::<u64>().ok()? + 1))
        })
        .collect()
}

#[test]
fn the_loader_reads_ahead_in_merged_concurrent_requests() {
    let server = Server::start();
    let (dir, n) = served(&server, 200);
    let local = Dataset::open(dir.path()).unwrap();
    let batches: u64 = local.manifest().shards.iter().map(|s| s.batches).sum();
    assert!(local.num_shards() >= 4, "{} shards", local.num_shards());
    server.state.delay_ms.store(5, Ordering::SeqCst);
    let o = options();

    // Without read-ahead: a request per batch, one at a time.
    let ds = Arc::new(open_dataset(&server.url("ds"), &o).unwrap());
    server.take_log();
    let plain = LoaderOptions {
        read_ahead_bytes: 0,
        ..shuffled(1, 0)
    };
    let ids = epoch(ds, plain);
    assert_eq!(ids.len() as u64, n);
    let one_by_one = body_gets(&server.take_log()).len() as u64;
    assert!(
        one_by_one >= batches,
        "{one_by_one} GETs for {batches} batches"
    );
    assert!(server.state.max_in_flight.load(Ordering::SeqCst) <= 2);

    // With it: every sequence once, in the same order, in fewer requests,
    // several in flight.
    server.state.max_in_flight.store(0, Ordering::SeqCst);
    let ds = Arc::new(open_dataset(&server.url("ds"), &o).unwrap());
    let ahead = epoch(ds, shuffled(1, 0));
    assert_eq!(ahead, ids, "the read-ahead changes no order");
    let set: BTreeSet<u64> = ahead.iter().copied().collect();
    assert_eq!(set.len() as u64, n);
    let gets = body_gets(&server.take_log());
    assert!(
        (gets.len() as u64) < batches / 2,
        "{} GETs for {batches} batches: merged",
        gets.len()
    );
    assert!(
        server.state.max_in_flight.load(Ordering::SeqCst) >= 3,
        "requests in flight at once: {}",
        server.state.max_in_flight.load(Ordering::SeqCst)
    );
    // Each byte fetched about once, besides the 4 KiB head each shard's
    // open reads.
    let fetched: u64 = gets.iter().map(|(a, b)| b - a).sum();
    let total: u64 = local.manifest().num_bytes();
    let heads = 4096 * local.num_shards() as u64;
    assert!(
        fetched <= total + heads + total / 20,
        "{fetched} bytes of {total}"
    );
}

#[test]
fn readers_sharing_a_cache_directory_fetch_each_range_once() {
    let server = Server::start();
    let (dir, n) = served(&server, 120);
    let local = Dataset::open(dir.path()).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let o = options().with_cache(cache.path(), 1 << 30);
    server.state.delay_ms.store(5, Ordering::SeqCst);
    server.take_log();
    // Two consumers of one epoch at once (the two workers of a node: each
    // its own store and cache handle, as in two processes), round-robin:
    // each needs nearly every batch.
    let run = |rank| {
        let ds = Arc::new(open_dataset(&server.url("ds"), &o).unwrap());
        let options = LoaderOptions {
            partition: Some(Partition::RoundRobin),
            ..shuffled(2, rank)
        };
        epoch(ds, options)
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| run(0));
        let b = s.spawn(|| run(1));
        (a.join().unwrap(), b.join().unwrap())
    });
    let all: BTreeSet<u64> = a.iter().chain(&b).copied().collect();
    assert_eq!((a.len() + b.len()) as u64, n);
    assert_eq!(all.len() as u64, n);
    let fetched: u64 = body_gets(&server.take_log())
        .iter()
        .map(|(a, b)| b - a)
        .sum();
    let total = local.manifest().num_bytes();
    // Each reader merges the ranges it needs into requests of its own, and
    // a range is claimed whole: when the two readers' merged requests only
    // overlap, both fetch the overlap. Seen up to 1.22× here under load
    // (the WAN benchmark, one node of two workers: 1.04–1.07×).
    assert!(
        fetched <= total + total / 2,
        "two readers fetched {fetched} bytes of a {total}-byte dataset"
    );
    // A third reader later: served by the cache, no batch fetched.
    let ds = Arc::new(open_dataset(&server.url("ds"), &o).unwrap());
    assert_eq!(epoch(ds, shuffled(1, 0)).len() as u64, n);
    let later = body_gets(&server.take_log());
    let shards = local.num_shards();
    assert!(
        later.len() <= shards,
        "{} GETs: only the shards' opening suffix reads",
        later.len()
    );
}

#[test]
fn a_throttling_store_slows_the_epoch_down_instead_of_failing_it() {
    let server = Server::start();
    let (_dir, n) = served(&server, 120);
    // One retry inside object_store: forty 503s in a row would fail a read
    // that did not lower its concurrency and try again.
    let o = RemoteOptions {
        max_retries: 1,
        ..options()
    };
    let ds = Arc::new(open_dataset(&server.url("ds"), &o).unwrap());
    for k in 0..ds.num_shards() {
        ds.shard(k).unwrap(); // opened before the store starts throttling
    }
    server.state.fail_next.store(40, Ordering::SeqCst);
    let ids = epoch(ds, shuffled(1, 0));
    let set: BTreeSet<u64> = ids.iter().copied().collect();
    assert_eq!((ids.len() as u64, set.len() as u64), (n, n));
    assert_eq!(server.state.fail_next.load(Ordering::SeqCst), 0);
}
