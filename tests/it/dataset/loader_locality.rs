//! The locality partition (`spec/DATASET.md` 7.6): contiguous blocks of a
//! window-shuffled order. Every sequence exactly once per epoch at every
//! layout, balanced counts, each consumer reading only its own part of the
//! dataset, exact resume, a world-size change (twice) delivering the rest
//! exactly once, and the refusals.

use crate::dataset_util;

use dataset_util::{TestRng, open, partial_epoch, run, write_dataset};
use lodt::dataset::{
    Batching, Loader, LoaderOptions, LoaderState, Mixture, PackOptions, Partition, Remainder,
    ShuffleOptions,
};
use std::collections::BTreeSet;

/// Uneven batches, two empty; 373 sequences.
const SIZES: [u64; 24] = [
    17, 3, 0, 25, 9, 14, 1, 30, 22, 0, 11, 19, 8, 27, 5, 16, 12, 20, 4, 29, 13, 26, 33, 29,
];

fn dataset() -> (
    tempfile::TempDir,
    std::sync::Arc<lodt::dataset::Dataset>,
    u64,
) {
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &SIZES, 6 * 1024);
    let dataset = open(dir.path());
    assert!(dataset.num_shards() >= 8, "{} shards", dataset.num_shards());
    (dir, dataset, n)
}

fn options(rank: usize, world_size: usize, worker: usize, num_workers: usize) -> LoaderOptions {
    LoaderOptions {
        batching: Batching::Sequences(5),
        shuffle: Some(ShuffleOptions {
            seed: 42,
            buffer: 16,
        }),
        rank,
        world_size,
        worker,
        num_workers,
        prefetch: 0,
        partition: Some(Partition::Locality),
        ..Default::default()
    }
}

/// Every consumer's ids of one epoch, in consumer order.
fn epoch(
    dataset: &std::sync::Arc<lodt::dataset::Dataset>,
    world: usize,
    workers: usize,
    epoch: u64,
    tweak: impl Fn(&mut LoaderOptions),
) -> Vec<Vec<u64>> {
    let mut out = Vec::new();
    for rank in 0..world {
        for worker in 0..workers {
            let mut o = options(rank, world, worker, workers);
            o.prefetch = (rank + worker) % 3;
            tweak(&mut o);
            let loader = Loader::at_epoch(dataset.clone(), o, epoch).unwrap();
            let expected = loader.remaining();
            let ids: Vec<u64> = run(loader).into_iter().flatten().collect();
            assert_eq!(ids.len() as u64, expected);
            out.push(ids);
        }
    }
    out
}

#[test]
fn every_sequence_once_per_epoch_with_balanced_counts() {
    let (_dir, dataset, n) = dataset();
    let mut orders = BTreeSet::new();
    for (world, workers) in [(1, 1), (2, 1), (3, 2), (4, 3), (7, 1), (1, 4)] {
        for e in 0..3 {
            let per = epoch(&dataset, world, workers, e, |_| ());
            let c = (world * workers) as u64;
            for ids in &per {
                let k = ids.len() as u64;
                assert!(k == n / c || k == n.div_ceil(c), "{world}x{workers}: {k}");
            }
            let all: Vec<u64> = per.iter().flatten().copied().collect();
            assert_eq!(all.len() as u64, n);
            assert_eq!(
                all.iter().copied().collect::<BTreeSet<_>>(),
                (0..n).collect()
            );
            if world * workers == 1 {
                orders.insert(all.clone());
            }
            // Deterministic.
            assert_eq!(per, epoch(&dataset, world, workers, e, |_| ()));
        }
    }
    // One consumer: the order changes with the epoch.
    assert_eq!(orders.len(), 3);
    // Without a shuffle, the dataset order, cut in blocks.
    let plain = epoch(&dataset, 3, 1, 0, |o| o.shuffle = None);
    assert_eq!(plain.concat(), (0..n).collect::<Vec<_>>());
}

#[test]
fn consumers_read_their_own_part_of_the_dataset() {
    let (_dir, dataset, n) = dataset();
    let batches = |ids: &[u64]| -> BTreeSet<(usize, usize)> {
        ids.iter()
            .map(|&id| {
                let at = dataset.locate(id).unwrap();
                (at.shard, at.batch)
            })
            .collect()
    };
    let total = batches(&(0..n).collect::<Vec<_>>()).len();
    for (world, workers) in [(2, 1), (4, 1), (2, 2), (6, 1)] {
        let c = world * workers;
        let local = epoch(&dataset, world, workers, 1, |_| ());
        let robin = epoch(&dataset, world, workers, 1, |o| {
            o.partition = Some(Partition::RoundRobin)
        });
        let touched = |per: &[Vec<u64>]| per.iter().map(|ids| batches(ids).len()).sum::<usize>();
        // Each consumer reads one block of the order (its windows lie within
        // it): a contiguous part of the source stream, which shares at most
        // the batch its boundary cuts with each neighbour.
        assert!(
            touched(&local) <= total + (c - 1),
            "{world}x{workers}: locality touched {} batch reads for {total} batches",
            touched(&local)
        );
        // Round robin: nearly every consumer reads nearly every batch.
        assert!(
            touched(&robin) > touched(&local) * 3 / 2,
            "{world}x{workers}: round robin {} vs locality {}",
            touched(&robin),
            touched(&local)
        );
        // Per rank (its workers together), the same.
        let per_rank: usize = (0..world)
            .map(|r| batches(&local[r * workers..(r + 1) * workers].concat()).len())
            .sum();
        assert!(per_rank <= total + (world - 1));
    }
}

#[test]
fn resuming_at_random_steps_equals_the_uninterrupted_stream() {
    let (_dir, dataset, _n) = dataset();
    let mut rng = TestRng(0xdead_5eed);
    for (world, workers) in [(1, 1), (2, 1), (3, 2)] {
        for e in [0, 4] {
            let rank = rng.below(world as u64) as usize;
            let worker = rng.below(workers as u64) as usize;
            let o = LoaderOptions {
                prefetch: rng.below(3) as usize,
                ..options(rank, world, worker, workers)
            };
            let whole = run(Loader::at_epoch(dataset.clone(), o.clone(), e).unwrap());
            for _ in 0..3 {
                let k = rng.below(whole.len() as u64 + 1) as usize;
                let mut loader = Loader::at_epoch(dataset.clone(), o.clone(), e).unwrap();
                let head: Vec<Vec<u64>> = loader.by_ref().take(k).map(|b| b.unwrap().ids).collect();
                assert_eq!(head, whole[..k]);
                let text = loader.state().to_json().to_string();
                drop(loader);
                let json: serde_json::Value = serde_json::from_str(&text).unwrap();
                // One consumer: one block (version 4); more: version 5.
                let c = (world * workers) as u64;
                assert_eq!(json["version"], if c == 1 { 4 } else { 5 });
                assert_eq!(
                    json.get("blocks"),
                    (c > 1).then(|| serde_json::json!(c)).as_ref()
                );
                assert!(json["ranges"].is_array());
                let state = LoaderState::from_json(&json).unwrap();
                // The default partition follows the state's.
                let auto = LoaderOptions {
                    partition: None,
                    ..o.clone()
                };
                let tail = run(Loader::resume(dataset.clone(), auto, &state).unwrap());
                assert_eq!(tail, whole[k..], "{world}x{workers}, epoch {e}, after {k}");
            }
        }
    }
}

#[test]
fn a_world_size_change_delivers_every_remaining_sequence_exactly_once() {
    let (_dir, dataset, n) = dataset();
    let mut rng = TestRng(0x0bad_cafe);
    let layouts = [(1, 1), (2, 1), (3, 1), (4, 2), (5, 1), (2, 3)];
    for round in 0..12 {
        let a = layouts[rng.below(6) as usize];
        let mut b = layouts[rng.below(6) as usize];
        if b.0 * b.1 == a.0 * a.1 {
            b = (a.0 * a.1 + 1, 1);
        }
        let c = layouts[rng.below(6) as usize];
        let (mut seen, s1) = partial_epoch(&dataset, None, a, &mut rng, Some(12), options);
        let (more, s2) = partial_epoch(&dataset, Some(&s1), b, &mut rng, Some(8), options);
        seen.extend(more);
        let (rest, s3) = partial_epoch(&dataset, Some(&s2), c, &mut rng, None, options);
        seen.extend(rest);
        assert_eq!(
            seen.len() as u64,
            n,
            "round {round}: {a:?} -> {b:?} -> {c:?}: a sequence twice or missing"
        );
        assert_eq!(
            seen.iter().copied().collect::<BTreeSet<_>>(),
            (0..n).collect()
        );
        // The epoch is over for any layout.
        for (world, workers) in [(1, 1), (3, 2)] {
            let l = Loader::resume(dataset.clone(), options(0, world, 0, workers), &s3).unwrap();
            assert_eq!(l.remaining(), 0, "round {round}: {s3:?}");
        }
    }
}

#[test]
fn drop_and_repeat_give_every_consumer_the_same_count() {
    let (_dir, dataset, n) = dataset();
    for (world, workers) in [(2, 1), (3, 2), (5, 1), (4, 1)] {
        let c = (world * workers) as u64;
        for remainder in [Remainder::Drop, Remainder::Repeat] {
            let per = epoch(&dataset, world, workers, 0, |o| o.remainder = remainder);
            let want = match remainder {
                Remainder::Drop => n / c,
                _ => n.div_ceil(c),
            };
            assert!(
                per.iter().all(|ids| ids.len() as u64 == want),
                "{remainder:?}"
            );
            let unique: BTreeSet<u64> = per.iter().flatten().copied().collect();
            match remainder {
                Remainder::Drop => assert_eq!(unique.len() as u64, want * c),
                _ => assert_eq!(unique.len() as u64, n),
            }
        }
    }
}

#[test]
fn what_the_locality_partition_does_not_read_is_refused_with_the_reason() {
    let (_dir, dataset, _n) = dataset();
    // A round-robin state in the locality partition, and the reverse.
    let robin = LoaderOptions {
        partition: Some(Partition::RoundRobin),
        ..options(0, 1, 0, 1)
    };
    let mut l = Loader::new(dataset.clone(), robin.clone()).unwrap();
    l.next().unwrap().unwrap();
    let err = Loader::resume(dataset.clone(), options(0, 1, 0, 1), &l.state()).unwrap_err();
    assert!(err.to_string().contains("round_robin partition"), "{err}");
    let mut l = Loader::new(dataset.clone(), options(0, 1, 0, 1)).unwrap();
    l.next().unwrap().unwrap();
    let state = l.state();
    let err = Loader::resume(dataset.clone(), robin, &state).unwrap_err();
    assert!(err.to_string().contains("locality partition"), "{err}");
    // Forged ranges and counts.
    let mut json = state.to_json();
    json["ranges"] = serde_json::json!([[5, 3]]);
    let forged = LoaderState::from_json(&json).unwrap();
    let err = Loader::resume(dataset.clone(), options(0, 1, 0, 1), &forged).unwrap_err();
    assert!(
        err.to_string().contains("ranges must be non-empty"),
        "{err}"
    );
    let mut json = state.to_json();
    json["consumed"]["0"] = serde_json::json!(10_000);
    let forged = LoaderState::from_json(&json).unwrap();
    let err = Loader::resume(dataset.clone(), options(0, 1, 0, 1), &forged).unwrap_err();
    assert!(err.to_string().contains("block"), "{err}");
    // An old reader's version with ranges.
    let mut json = state.to_json();
    json["version"] = serde_json::json!(1);
    let err = LoaderState::from_json(&json).unwrap_err();
    assert!(err.to_string().contains("version 4"), "{err}");
    // Packing and mixtures deal round robin.
    let packing = LoaderOptions {
        packing: Some(PackOptions::tokens(64)),
        ..options(0, 1, 0, 1)
    };
    let err = Loader::new(dataset.clone(), packing).unwrap_err();
    assert!(err.to_string().contains("a packing loader"), "{err}");
    let mixture = Mixture::try_new(vec![dataset.clone()], &[1.0], Default::default()).unwrap();
    let err = Loader::new(mixture, options(0, 1, 0, 1)).unwrap_err();
    assert!(err.to_string().contains("a mixture's loader"), "{err}");
    // A local dataset deals round robin by default.
    let l = Loader::new(
        dataset,
        LoaderOptions {
            partition: None,
            ..options(0, 1, 0, 1)
        },
    )
    .unwrap();
    assert_eq!(l.state().version, 1);
}
