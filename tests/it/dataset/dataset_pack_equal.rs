//! Equal packed counts (`spec/DATASET.md` 7.4, "Equal counts"): every
//! consumer (rank × worker) delivers the same number of packed mini-batches
//! per epoch, every sequence still exactly once, resume exact.
// These tests pin the behaviour of the deprecated packing constructors
// (`PackedLoader`, `Mixture::packed_loader`/`resume_packed`): thin calls of
// the one `Loader` with `LoaderOptions::packing` (dataset/loader_one_type.rs
// checks the two give the same stream).
#![allow(deprecated)]

use crate::dataset_util;

use dataset_util::{TestRng, check, open, write_dataset};
use lodt::dataset::{LoaderOptions, LoaderState, PackOptions, PackedLoader, ShuffleOptions};

const SIZES: [u64; 12] = [17, 3, 0, 25, 9, 14, 1, 30, 22, 11, 19, 8];

fn options(rank: usize, world_size: usize, worker: usize, workers: usize) -> LoaderOptions {
    LoaderOptions {
        shuffle: Some(ShuffleOptions {
            seed: 4,
            buffer: 32,
        }),
        rank,
        world_size,
        worker,
        num_workers: workers,
        prefetch: 1,
        ..Default::default()
    }
}

fn packs() -> Vec<PackOptions> {
    let words = |capacity, rows, buffer| PackOptions {
        capacity,
        rows,
        buffer,
        tensor: Some("words".into()),
        equal_batches: Some(true),
        truncate: false,
    };
    vec![
        words(40, None, 9),
        words(12, Some(2), 6),
        words(60, None, 1000),
    ]
}

/// Each consumer's mini-batches (ids) of an epoch.
fn epoch(
    dataset: &std::sync::Arc<lodt::dataset::Dataset>,
    world: usize,
    workers: usize,
    pack: &PackOptions,
) -> Vec<Vec<Vec<u64>>> {
    let mut out = Vec::new();
    for rank in 0..world {
        for worker in 0..workers {
            let l = PackedLoader::new(
                dataset.clone(),
                options(rank, world, worker, workers),
                pack.clone(),
            )
            .unwrap();
            out.push(
                l.map(|b| {
                    let b = b.unwrap();
                    check(&b.batch);
                    b.batch.ids
                })
                .collect(),
            );
        }
    }
    out
}

#[test]
fn every_rank_and_worker_delivers_as_many_mini_batches_and_every_sequence_once() {
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &SIZES, 4 * 1024);
    let dataset = open(dir.path());
    for pack in packs() {
        for (world, workers) in [(2, 1), (3, 1), (2, 2), (4, 3), (1, 3)] {
            let per = epoch(&dataset, world, workers, &pack);
            let counts: Vec<usize> = per.iter().map(Vec::len).collect();
            assert!(
                counts.iter().all(|&c| c == counts[0]),
                "{pack:?} {world}x{workers}: {counts:?}"
            );
            let mut seen: Vec<u64> = per.into_iter().flatten().flatten().collect();
            seen.sort_unstable();
            assert_eq!(
                seen,
                (0..n).collect::<Vec<_>>(),
                "{pack:?} {world}x{workers}"
            );
        }
    }
}

#[test]
fn without_equal_counts_the_consumers_differ_and_the_splits_are_what_equalises() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &SIZES, 4 * 1024);
    let dataset = open(dir.path());
    // Some world in which plain packing gives unequal counts: then equal
    // counts raise the smaller ones to the largest, never lower it.
    let mut unequal = 0;
    for pack in packs() {
        for (world, workers) in [(2, 1), (3, 1), (2, 2), (4, 3)] {
            let off = PackOptions {
                equal_batches: Some(false),
                ..pack.clone()
            };
            let plain: Vec<usize> = epoch(&dataset, world, workers, &off)
                .iter()
                .map(Vec::len)
                .collect();
            let equal = epoch(&dataset, world, workers, &pack);
            let max = *plain.iter().max().unwrap();
            assert_eq!(equal[0].len(), max, "{pack:?} {world}x{workers}: {plain:?}");
            if plain.iter().any(|&c| c != max) {
                unequal += 1;
            }
        }
    }
    assert!(unequal >= 3, "only {unequal} worlds had unequal counts");
    // The default: on with several ranks, off with one.
    let default = PackOptions {
        equal_batches: None,
        ..packs().remove(0)
    };
    let two = PackedLoader::new(dataset.clone(), options(0, 2, 0, 1), default.clone()).unwrap();
    assert!(two.state().packing.unwrap().equal);
    let one = PackedLoader::new(dataset.clone(), options(0, 1, 0, 2), default.clone()).unwrap();
    assert!(!one.state().packing.unwrap().equal);
    assert_eq!(one.state().version, 2);
    // A version-2 state written before `equal` and `truncate` existed
    // still resumes (both absent: false).
    let mut json = one.state().to_json();
    let packing = json["packing"].as_object_mut().unwrap();
    assert!(packing.remove("equal").is_some() && packing.remove("truncate").is_some());
    let old = LoaderState::from_json(&json).unwrap();
    let again = PackedLoader::resume(dataset.clone(), options(0, 1, 0, 2), default, &old).unwrap();
    assert_eq!(again.state(), one.state());
}

#[test]
fn resuming_an_equal_count_loader_gives_the_identical_rest() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &SIZES, 4 * 1024);
    let dataset = open(dir.path());
    let mut rng = TestRng(31);
    for pack in packs() {
        for (rank, worker) in [(0, 0), (1, 1), (2, 0)] {
            let o = || options(rank, 3, worker, 2);
            let all: Vec<Vec<u64>> = PackedLoader::new(dataset.clone(), o(), pack.clone())
                .unwrap()
                .map(|b| b.unwrap().batch.ids)
                .collect();
            for _ in 0..5 {
                let k = rng.below(all.len() as u64 + 1) as usize;
                let mut a = PackedLoader::new(dataset.clone(), o(), pack.clone()).unwrap();
                for _ in 0..k {
                    a.next().unwrap().unwrap();
                }
                let json = a.state().to_json();
                assert_eq!(json["version"], 3);
                assert_eq!(json["packing"]["equal"], true);
                let state = LoaderState::from_json(&json).unwrap();
                let b = PackedLoader::resume(dataset.clone(), o(), pack.clone(), &state).unwrap();
                let rest: Vec<Vec<u64>> = b.map(|b| b.unwrap().batch.ids).collect();
                assert_eq!(
                    rest,
                    all[k..],
                    "{pack:?} ({rank}, {worker}) resumed after {k}"
                );
            }
            // Another equal setting is refused on the same world.
            let off = PackOptions {
                equal_batches: Some(false),
                ..pack.clone()
            };
            let state = PackedLoader::new(dataset.clone(), o(), pack.clone())
                .unwrap()
                .state();
            let err = PackedLoader::resume(dataset.clone(), o(), off, &state)
                .unwrap_err()
                .to_string();
            assert!(err.contains("equal packed counts true"), "{err}");
        }
    }
}

#[test]
fn a_world_size_change_of_an_equal_count_epoch_delivers_every_remaining_sequence_once() {
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &SIZES, 4 * 1024);
    let dataset = open(dir.path());
    let mut rng = TestRng(8);
    for pack in packs() {
        for (old, new) in [(4usize, 2usize), (2, 3)] {
            for _ in 0..3 {
                let mut seen = Vec::new();
                let mut states = Vec::new();
                for rank in 0..old {
                    let mut l =
                        PackedLoader::new(dataset.clone(), options(rank, old, 0, 1), pack.clone())
                            .unwrap();
                    for _ in 0..rng.below(5) {
                        if let Some(b) = l.next() {
                            seen.extend(b.unwrap().batch.ids);
                        }
                    }
                    states.push(l.state());
                }
                let merged = LoaderState::merge(&states).unwrap();
                let mut counts = Vec::new();
                for rank in 0..new {
                    let l = PackedLoader::resume(
                        dataset.clone(),
                        options(rank, new, 0, 1),
                        pack.clone(),
                        &merged,
                    )
                    .unwrap();
                    let mut k = 0;
                    for b in l {
                        seen.extend(b.unwrap().batch.ids);
                        k += 1;
                    }
                    counts.push(k);
                }
                assert!(counts.iter().all(|&c| c == counts[0]), "{counts:?}");
                seen.sort_unstable();
                assert_eq!(seen, (0..n).collect::<Vec<_>>(), "{pack:?} {old} -> {new}");
            }
        }
    }
}

#[test]
fn equal_counts_that_cannot_be_reached_are_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    // 3 sequences of one batch, 2 ranks: rank 0 gets 2, rank 1 gets 1. With a
    // capacity of 1 row, rank 0 packs 2 mini-batches; rank 1 cannot.
    write_dataset(dir.path(), &[3], 4 * 1024);
    let dataset = open(dir.path());
    let pack = PackOptions {
        tensor: Some("words".into()),
        equal_batches: Some(true),
        ..PackOptions::tokens(1)
    };
    for rank in 0..2 {
        let mut l =
            PackedLoader::new(dataset.clone(), options(rank, 2, 0, 1), pack.clone()).unwrap();
        let err = l.next().unwrap().unwrap_err().to_string();
        assert!(
            err.contains("consumer 1 has 1 sequences in this epoch, fewer than the 2 mini-batches consumer 0 packs"),
            "{err}"
        );
    }
}
