//! The shard index (spec/DATASET.md section 3.2): every commit writes one
//! and the manifest names it; readers use it in place, and read the JSON
//! whenever the index is missing, damaged or another manifest's. Either way
//! a dataset reads the same.

use crate::dataset_util;

use dataset_util::{collect, make_batch, open, store, write_dataset};
use lodt::dataset::names::{INDEX_PREFIX, valid_index_name};
use lodt::dataset::{
    Batching, Dataset, DatasetWriter, DatasetWriterOptions, LoaderOptions, MANIFEST_NAME, Manifest,
    Partition, ShuffleOptions,
};
use std::path::Path;

fn indexes(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(INDEX_PREFIX))
        .collect();
    names.sort();
    names
}

fn json_manifest(dir: &Path) -> Manifest {
    let bytes = std::fs::read(dir.join(MANIFEST_NAME)).unwrap();
    Manifest::from_json_bytes(&bytes, "m").unwrap()
}

/// Every sequence of every shard, and the ids of a shuffled epoch at 3
/// consumers in each partition: what a reader of `dir` sees.
fn everything(dir: &Path) -> (Vec<String>, Vec<Vec<Vec<u64>>>) {
    let dataset = open(dir);
    let sequences = (0..dataset.num_sequences())
        .map(|i| format!("{:?}", dataset.sequence(i).unwrap()))
        .collect();
    let mut epochs = Vec::new();
    for partition in [Partition::RoundRobin, Partition::Locality] {
        for consumer in 0..3 {
            epochs.push(collect(
                &dataset,
                LoaderOptions {
                    batching: Batching::Sequences(5),
                    shuffle: Some(ShuffleOptions {
                        seed: 3,
                        buffer: 16,
                    }),
                    rank: consumer,
                    world_size: 3,
                    partition: Some(partition),
                    prefetch: 0,
                    ..Default::default()
                },
            ));
        }
    }
    (sequences, epochs)
}

#[test]
fn a_commit_writes_the_index_and_readers_use_it() {
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &[3, 0, 5, 2, 7, 1, 4], 2048);
    let names = indexes(dir.path());
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(valid_index_name(&names[0]));
    let text = std::fs::read_to_string(dir.path().join(MANIFEST_NAME)).unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.contains(&format!("\"index\":{{\"name\":\"{}\"", names[0])),
        "{first}"
    );

    let dataset = Dataset::open_in(store(dir.path())).unwrap();
    assert!(dataset.is_indexed());
    assert_eq!(dataset.num_sequences(), n);
    let json = json_manifest(dir.path());
    assert_eq!(dataset.manifest(), &json);
    assert_eq!(dataset.num_batches(), json.num_batches());
    assert_eq!(dataset.num_bytes(), json.num_bytes());
    for s in 0..json.num_shards() {
        assert_eq!(dataset.shard_entry(s).unwrap(), json.shards[s]);
    }
    assert!(dataset.shard_entry(json.num_shards()).is_err());
    let (_copy, by_json) = from_json(dir.path());
    assert_eq!(dataset.fingerprint(), by_json.fingerprint());
    assert_eq!(dataset.shard_starts(), by_json.shard_starts());
    assert_eq!(dataset.verify().unwrap(), by_json.verify().unwrap());
}

/// The dataset of `dir` read from its JSON manifest: a copy of the
/// directory without its index.
fn from_json(dir: &Path) -> (tempfile::TempDir, Dataset) {
    let copy = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        if !name.starts_with(INDEX_PREFIX) {
            std::fs::copy(e.path(), copy.path().join(&name)).unwrap();
        }
    }
    let dataset = Dataset::open_in(store(copy.path())).unwrap();
    assert!(!dataset.is_indexed());
    (copy, dataset)
}

#[test]
fn a_missing_damaged_or_stale_index_means_the_json_is_read() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &[3, 0, 5, 2, 7, 1, 4, 6, 2], 2048);
    let expected = everything(dir.path());
    let index = dir.path().join(&indexes(dir.path())[0]);
    let good = std::fs::read(&index).unwrap();

    // Damaged: a byte of each section, and of the header.
    for at in [0, 20, 40, 100, 305, 320, good.len() / 2, good.len() - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x10;
        std::fs::write(&index, &bad).unwrap();
        let dataset = open(dir.path());
        assert!(!dataset.is_indexed(), "byte {at}");
        assert_eq!(everything(dir.path()), expected, "byte {at}");
    }
    // Truncated, and missing.
    std::fs::write(&index, &good[..good.len() / 3]).unwrap();
    assert!(!open(dir.path()).is_indexed());
    std::fs::remove_file(&index).unwrap();
    assert!(!open(dir.path()).is_indexed());
    assert_eq!(everything(dir.path()), expected);

    // Another manifest's: the manifest edited (one sequence count fewer
    // would change its size; so does any edit an older tool makes).
    std::fs::write(&index, &good).unwrap();
    assert!(open(dir.path()).is_indexed());
    let text = std::fs::read_to_string(dir.path().join(MANIFEST_NAME)).unwrap();
    let edited = text.replace("\"metadata\":{}", "\"metadata\":{\"k\":\"v\"}");
    assert_ne!(edited, text);
    std::fs::write(dir.path().join(MANIFEST_NAME), &edited).unwrap();
    let dataset = open(dir.path());
    assert!(!dataset.is_indexed());
    assert_eq!(dataset.metadata().get("k").map(String::as_str), Some("v"));

    // An older writer's rewrite: no pointer on the first line.
    let older = json_manifest(dir.path()).to_json_bytes();
    std::fs::write(dir.path().join(MANIFEST_NAME), older).unwrap();
    assert!(!open(dir.path()).is_indexed());
    assert_eq!(everything(dir.path()), expected);
}

#[test]
fn appends_replace_the_index_and_read_the_same_as_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let mut next = write_dataset(dir.path(), &[4, 4, 4], 1024);
    for round in 0..3 {
        let before = indexes(dir.path());
        let options = DatasetWriterOptions {
            shard_bytes: 1024,
            ..Default::default()
        };
        let mut w = DatasetWriter::append_in(store(dir.path()), options).unwrap();
        for n in [2, 5, 1] {
            w.write(&make_batch(next, n)).unwrap();
            next += n;
        }
        w.finish().unwrap();
        let after = indexes(dir.path());
        assert_eq!(after.len(), 1, "round {round}: {after:?}");
        assert_ne!(after, before, "round {round}");
        let dataset = open(dir.path());
        assert!(dataset.is_indexed());
        assert_eq!(dataset.num_sequences(), next);
        assert_eq!(dataset.manifest(), &json_manifest(dir.path()));
    }
    let indexed = everything(dir.path());
    let (copy, by_json) = from_json(dir.path());
    assert_eq!(by_json.num_sequences(), next);
    assert_eq!(everything(copy.path()), indexed);
}

#[test]
fn parts_have_no_index_and_the_merge_writes_one() {
    let dir = tempfile::tempdir().unwrap();
    for (id, first) in [("a", 0u64), ("b", 100)] {
        let mut w =
            DatasetWriter::create_part_in(store(dir.path()), id, Default::default()).unwrap();
        w.write(&make_batch(first, 3)).unwrap();
        w.finish().unwrap();
    }
    assert!(indexes(dir.path()).is_empty());
    Dataset::commit_parts_in(store(dir.path())).unwrap();
    assert_eq!(indexes(dir.path()).len(), 1);
    let dataset = open(dir.path());
    assert!(dataset.is_indexed());
    assert_eq!(dataset.num_sequences(), 6);
}
