//! The dataset loader (issue 14, part 2): partitions cover every sequence
//! exactly once, orders are deterministic per (seed, epoch), resuming equals
//! the uninterrupted stream, and a world-size change delivers every
//! remaining sequence exactly once.

use crate::dataset_util;

use dataset_util::{TestRng, check, collect, open, partial_epoch, run, write_dataset};
use lodt::dataset::{
    Batching, DatasetError, Loader, LoaderOptions, LoaderState, Remainder, ShuffleOptions,
};
use std::collections::BTreeSet;

/// Batch sizes of the test dataset: uneven, with empty batches; 373 sequences.
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
    assert_eq!(dataset.num_sequences(), n);
    (dir, dataset, n)
}

fn shuffled(seed: u64, buffer: usize) -> Option<ShuffleOptions> {
    Some(ShuffleOptions { seed, buffer })
}

fn options(rank: usize, world_size: usize, worker: usize, num_workers: usize) -> LoaderOptions {
    LoaderOptions {
        batching: Batching::Sequences(7),
        shuffle: shuffled(42, 64),
        rank,
        world_size,
        worker,
        num_workers,
        prefetch: 0,
        ..Default::default()
    }
}

#[test]
fn partitions_are_disjoint_and_cover_every_sequence_each_epoch() {
    let (_dir, dataset, n) = dataset();
    let mut orders = BTreeSet::new();
    for (world, workers) in [(1, 1), (2, 1), (3, 2), (4, 3), (7, 1), (1, 4)] {
        for epoch in 0..3 {
            let mut all = Vec::new();
            let mut per_consumer = Vec::new();
            for rank in 0..world {
                for worker in 0..workers {
                    let mut o = options(rank, world, worker, workers);
                    // Exercise the prefetch thread on some consumers.
                    o.prefetch = (rank + worker) % 3;
                    let mut loader = Loader::new(dataset.clone(), o).unwrap();
                    loader.set_epoch(epoch).unwrap();
                    let expected = loader.remaining();
                    let ids: Vec<u64> = run(loader).into_iter().flatten().collect();
                    assert_eq!(ids.len() as u64, expected);
                    per_consumer.push(ids.len() as u64);
                    all.extend(ids);
                }
            }
            let c = (world * workers) as u64;
            // Keep: the first N mod C consumers have one more.
            let counts: Vec<u64> = (0..c).map(|i| n / c + u64::from(i < n % c)).collect();
            assert_eq!(per_consumer, counts, "world {world} x {workers}");
            let unique: BTreeSet<u64> = all.iter().copied().collect();
            assert_eq!(
                all.len() as u64,
                n,
                "world {world} x {workers}, epoch {epoch}"
            );
            assert_eq!(
                unique,
                (0..n).collect(),
                "world {world} x {workers}, epoch {epoch}"
            );
            if world == 1 && workers == 1 {
                orders.insert(all);
            }
        }
    }
    // A different permutation each epoch.
    assert_eq!(orders.len(), 3);
}

#[test]
fn the_order_is_a_function_of_seed_and_epoch_only() {
    let (_dir, dataset, n) = dataset();
    let order = |seed: u64, epoch: u64, batching: Batching, prefetch: usize| -> Vec<u64> {
        let o = LoaderOptions {
            batching,
            shuffle: shuffled(seed, 100),
            prefetch,
            ..Default::default()
        };
        let mut loader = Loader::new(dataset.clone(), o).unwrap();
        loader.set_epoch(epoch).unwrap();
        run(loader).into_iter().flatten().collect()
    };
    let a = order(1, 0, Batching::Sequences(5), 0);
    assert_eq!(a, order(1, 0, Batching::Sequences(64), 3));
    assert_eq!(
        a,
        order(
            1,
            0,
            Batching::Rows {
                max_rows: 40,
                tensor: None
            },
            1
        )
    );
    assert_ne!(a, order(2, 0, Batching::Sequences(5), 0));
    assert_ne!(a, order(1, 1, Batching::Sequences(5), 0));
    // Shuffled: shards, batches and sequences move; far from the dataset order.
    let in_place = a
        .iter()
        .enumerate()
        .filter(|&(i, &id)| i as u64 == id)
        .count();
    assert!(in_place < 20, "{in_place} of {n} sequences in place");
    // Without a shuffle: the dataset order, every epoch.
    let plain = LoaderOptions {
        prefetch: 0,
        ..Default::default()
    };
    let ids: Vec<u64> = collect(&dataset, plain).into_iter().flatten().collect();
    assert_eq!(ids, (0..n).collect::<Vec<_>>());
}

#[test]
fn random_access_returns_the_sequence_asked_for() {
    let (_dir, dataset, n) = dataset();
    let mut rng = TestRng(0x5eed);
    for _ in 0..200 {
        let id = rng.below(n);
        let seq = dataset.sequence(id).unwrap();
        let mb = lodt::dataset::MiniBatch {
            epoch: 0,
            ids: vec![id],
            batch: seq,
        };
        check(&mb);
    }
    assert!(matches!(
        dataset.sequence(n),
        Err(DatasetError::OutOfRange { index, len, .. }) if index == n && len == n
    ));
}

#[test]
fn a_row_budget_bounds_every_mini_batch() {
    let (_dir, dataset, n) = dataset();
    let max_rows = 20;
    let o = LoaderOptions {
        batching: Batching::Rows {
            max_rows,
            tensor: Some("words".into()),
        },
        shuffle: shuffled(3, 50),
        prefetch: 2,
        ..Default::default()
    };
    let mut total = 0;
    for b in Loader::new(dataset.clone(), o).unwrap() {
        let b = b.unwrap();
        check(&b);
        let rows = b.batch.get("words").unwrap().rows();
        // Sequences here have at most 12 words, so every batch fits.
        assert!(rows <= max_rows, "{rows} rows");
        assert!(!b.ids.is_empty());
        total += b.ids.len() as u64;
    }
    assert_eq!(total, n);
    let bad = LoaderOptions {
        batching: Batching::Rows {
            max_rows: 10,
            tensor: Some("nope".into()),
        },
        ..Default::default()
    };
    let err = Loader::new(dataset, bad).unwrap_err();
    assert!(err.to_string().contains("\"nope\""), "{err}");
}

#[test]
fn resuming_at_random_steps_equals_the_uninterrupted_stream() {
    let (_dir, dataset, _n) = dataset();
    let mut rng = TestRng(0xfeed_beef);
    let batchings = [
        Batching::Sequences(1),
        Batching::Sequences(6),
        Batching::Rows {
            max_rows: 25,
            tensor: None,
        },
    ];
    for (world, workers) in [(1, 1), (2, 1), (3, 2)] {
        for batching in &batchings {
            for epoch in [0, 5] {
                let rank = rng.below(world as u64) as usize;
                let worker = rng.below(workers as u64) as usize;
                let o = LoaderOptions {
                    batching: batching.clone(),
                    prefetch: rng.below(3) as usize,
                    ..options(rank, world, worker, workers)
                };
                let mut full = Loader::new(dataset.clone(), o.clone()).unwrap();
                full.set_epoch(epoch).unwrap();
                let whole = run(full);
                for _ in 0..3 {
                    let k = rng.below(whole.len() as u64 + 1) as usize;
                    let mut loader = Loader::new(dataset.clone(), o.clone()).unwrap();
                    loader.set_epoch(epoch).unwrap();
                    let head: Vec<Vec<u64>> =
                        loader.by_ref().take(k).map(|b| b.unwrap().ids).collect();
                    assert_eq!(head, whole[..k]);
                    // Through JSON text, as a checkpoint would store it.
                    let text = loader.state().to_json().to_string();
                    drop(loader);
                    let state =
                        LoaderState::from_json(&serde_json::from_str(&text).unwrap()).unwrap();
                    let resumed = Loader::resume(dataset.clone(), o.clone(), &state).unwrap();
                    assert_eq!(resumed.epoch(), epoch);
                    let tail = run(resumed);
                    assert_eq!(
                        tail,
                        whole[k..],
                        "world {world} x {workers}, {batching:?}, epoch {epoch}, resumed after {k} steps"
                    );
                }
            }
        }
    }
}

#[test]
fn a_world_size_change_delivers_every_remaining_sequence_exactly_once() {
    let (_dir, dataset, n) = dataset();
    let mut rng = TestRng(0x1234_5678);
    let layouts = [(1, 1), (2, 1), (3, 1), (4, 2), (5, 1), (2, 3)];
    for round in 0..12 {
        // Three generations: a random partial epoch, another after a change
        // of layout, then the rest of the epoch on a third layout.
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
        let unique: BTreeSet<u64> = seen.iter().copied().collect();
        assert_eq!(
            seen.len() as u64,
            n,
            "round {round}: layouts {a:?} -> {b:?} -> {c:?}: a sequence was delivered twice"
        );
        assert_eq!(unique, (0..n).collect(), "round {round}");
        // The epoch is over for any layout.
        assert_eq!(s3.epoch, 0);
        for (world, workers) in [(1, 1), (3, 2)] {
            let o = options(0, world, 0, workers);
            let loader = Loader::resume(dataset.clone(), o, &s3);
            match loader {
                Ok(l) => assert_eq!(l.remaining(), 0),
                Err(e) => panic!("round {round}: {e}"),
            }
        }
    }
}

#[test]
fn drop_and_repeat_give_every_consumer_the_same_count() {
    let (_dir, dataset, n) = dataset();
    for (world, workers) in [(2, 1), (3, 2), (5, 1), (4, 1)] {
        let c = (world * workers) as u64;
        for remainder in [Remainder::Drop, Remainder::Repeat] {
            let mut all = Vec::new();
            let mut steps = BTreeSet::new();
            for rank in 0..world {
                for worker in 0..workers {
                    let o = LoaderOptions {
                        remainder,
                        batching: Batching::Sequences(4),
                        ..options(rank, world, worker, workers)
                    };
                    let batches = collect(&dataset, o);
                    steps.insert(batches.len());
                    let ids: Vec<u64> = batches.into_iter().flatten().collect();
                    let expected = match remainder {
                        Remainder::Drop => n / c,
                        _ => n.div_ceil(c),
                    };
                    assert_eq!(
                        ids.len() as u64,
                        expected,
                        "{remainder:?} {world}x{workers}"
                    );
                    all.extend(ids);
                }
            }
            assert_eq!(steps.len(), 1, "equal step counts: {steps:?}");
            let unique: BTreeSet<u64> = all.iter().copied().collect();
            match remainder {
                Remainder::Drop => {
                    assert_eq!(unique.len(), all.len());
                    assert_eq!(all.len() as u64, n - n % c);
                }
                _ => {
                    assert_eq!(unique, (0..n).collect());
                    let pad = (c - n % c) % c;
                    assert_eq!(all.len() as u64, n + pad);
                }
            }
        }
    }
}

#[test]
fn drop_last_drops_only_a_short_last_batch() {
    let (_dir, dataset, n) = dataset();
    let o = LoaderOptions {
        batching: Batching::Sequences(10),
        drop_last: true,
        ..options(0, 1, 0, 1)
    };
    let batches = collect(&dataset, o);
    assert_eq!(batches.len() as u64, n / 10);
    assert!(batches.iter().all(|b| b.len() == 10));
}

#[test]
fn states_that_do_not_fit_are_refused_with_the_reason() {
    let (_dir, dataset, n) = dataset();
    let o = options(1, 2, 0, 1);
    let mut loader = Loader::new(dataset.clone(), o.clone()).unwrap();
    loader.next().unwrap().unwrap();
    let state = loader.state();
    drop(loader);
    let reason = |r: Result<Loader, DatasetError>| match r {
        Err(DatasetError::BadState { reason }) => reason,
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("resumed"),
    };
    // Another seed: the order would differ.
    let other = LoaderOptions {
        shuffle: shuffled(43, 64),
        ..o.clone()
    };
    let r = reason(Loader::resume(dataset.clone(), other, &state));
    assert!(r.contains("shuffle"), "{r}");
    // Another world size from one rank's state alone.
    let r = reason(Loader::resume(dataset.clone(), options(0, 3, 0, 1), &state));
    assert!(
        r.contains("LoaderState::merge") && r.contains("consumer 0 is missing"),
        "{r}"
    );
    // Another rank's state with the same world size.
    let r = reason(Loader::resume(dataset.clone(), options(0, 2, 0, 1), &state));
    assert!(r.contains("no count for consumer 0"), "{r}");
    // Another dataset.
    let dir2 = tempfile::tempdir().unwrap();
    write_dataset(dir2.path(), &[5, 5], 1 << 20);
    let r = reason(Loader::resume(open(dir2.path()), o.clone(), &state));
    assert!(r.contains("another dataset"), "{r}");
    // A tampered skip list.
    let mut bad = state.clone();
    bad.skip = vec![9, 3];
    let r = reason(Loader::resume(dataset.clone(), o.clone(), &bad));
    assert!(r.contains("skip list"), "{r}");
    // A count past the consumer's share (of n sequences dealt to 2
    // consumers, consumer 1 has n / 2) would resume into an empty epoch:
    // refused.
    let share = n / 2;
    let mut bad = state.clone();
    bad.consumed.insert(1, share + 1);
    let r = reason(Loader::resume(dataset.clone(), o.clone(), &bad));
    let want = format!("consumer 1 consumed {} sequences", share + 1);
    assert!(r.contains(&want) && r.contains("share"), "{r}");
    bad.consumed.insert(1, share);
    Loader::resume(dataset.clone(), o.clone(), &bad).unwrap();
    // A count for a consumer the state does not have.
    let mut bad = state.clone();
    bad.consumed.insert(5, 0);
    let r = reason(Loader::resume(dataset.clone(), o.clone(), &bad));
    assert!(r.contains("consumer 5"), "{r}");
    // Not a state at all; a future version.
    assert!(LoaderState::from_json(&serde_json::json!({"epoch": 1})).is_err());
    let mut json = state.to_json();
    json["version"] = 2.into();
    let err = LoaderState::from_json(&json).unwrap_err();
    assert!(err.to_string().contains("version 2"), "{err}");
    // Bad options.
    for bad in [
        options(2, 2, 0, 1),
        options(0, 1, 1, 1),
        LoaderOptions {
            batching: Batching::Sequences(0),
            ..o.clone()
        },
        LoaderOptions {
            shuffle: shuffled(1, 0),
            ..o
        },
    ] {
        assert!(matches!(
            Loader::new(dataset.clone(), bad),
            Err(DatasetError::InvalidArgument(_))
        ));
    }
}
