//! `ResumeCheck` (`lodt state check`): the dry run of the rest of an epoch
//! from a saved state, at the world it was saved at and at another, in
//! both partitions and under each remainder rule, with the exact counts, and
//! what it refuses.

use crate::dataset_util;

use dataset_util::{open, write_dataset};
use lodt::dataset::{
    Batching, Dataset, Loader, LoaderOptions, LoaderState, Mixture, PackOptions, Partition,
    Remainder, ResumeCheck, ShuffleOptions,
};
use std::sync::Arc;

/// Uneven batches, two empty; 373 sequences.
const SIZES: [u64; 24] = [
    17, 3, 0, 25, 9, 14, 1, 30, 22, 0, 11, 19, 8, 27, 5, 16, 12, 20, 4, 29, 13, 26, 33, 29,
];

/// Mini-batches each of the 2 × 2 consumers takes before the state is
/// saved: 15, 5, 10 and 0 sequences.
const STEPS: [usize; 4] = [3, 1, 2, 0];

fn dataset() -> (tempfile::TempDir, Arc<Dataset>) {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(write_dataset(dir.path(), &SIZES, 6 * 1024), 373);
    let dataset = open(dir.path());
    (dir, dataset)
}

fn options(
    (rank, world_size): (usize, usize),
    (worker, num_workers): (usize, usize),
    partition: Partition,
    remainder: Remainder,
) -> LoaderOptions {
    LoaderOptions {
        batching: Batching::Sequences(5),
        shuffle: Some(ShuffleOptions {
            seed: 11,
            buffer: 16,
        }),
        rank,
        world_size,
        worker,
        num_workers,
        remainder,
        prefetch: 0,
        partition: Some(partition),
        ..Default::default()
    }
}

/// The merged state of 2 ranks × 2 workers after `STEPS`, and the ids they
/// delivered.
fn saved(
    dataset: &Arc<Dataset>,
    partition: Partition,
    remainder: Remainder,
) -> (LoaderState, Vec<u64>) {
    let mut states = Vec::new();
    let mut ids = Vec::new();
    for (c, &steps) in STEPS.iter().enumerate() {
        let o = options((c / 2, 2), (c % 2, 2), partition, remainder);
        let mut loader = Loader::new(dataset.clone(), o).unwrap();
        for b in loader.by_ref().take(steps) {
            ids.extend(b.unwrap().ids);
        }
        states.push(loader.state());
    }
    (LoaderState::merge(&states).unwrap(), ids)
}

/// What real loaders resumed from `state` on `world` ranks of `workers`
/// deliver, per consumer.
fn resumed(
    dataset: &Arc<Dataset>,
    state: &LoaderState,
    (world, workers): (usize, usize),
    partition: Partition,
) -> Vec<Vec<u64>> {
    let mut out = Vec::new();
    for c in 0..world * workers {
        let o = options(
            (c / workers, world),
            (c % workers, workers),
            partition,
            state.remainder,
        );
        let loader = Loader::resume(dataset.clone(), o, state).unwrap();
        out.push(loader.flat_map(|b| b.unwrap().ids).collect());
    }
    out
}

/// The check of `state` on `world × workers`, with the counts it reports
/// checked against real resumed loaders.
fn check(
    dataset: &Arc<Dataset>,
    state: &LoaderState,
    (world, workers): (usize, usize),
    partition: Partition,
) -> ResumeCheck {
    let check = ResumeCheck::run(
        dataset.clone(),
        state,
        Some(world as u64),
        Some(workers as u64),
    )
    .unwrap();
    let real = resumed(dataset, state, (world, workers), partition);
    let lens: Vec<u64> = real.iter().map(|ids| ids.len() as u64).collect();
    assert_eq!(check.per_consumer, lens);
    assert_eq!(
        (check.world_size, check.workers),
        (world as u64, workers as u64)
    );
    check
}

/// The counts a check reports: delivered before, remaining, per consumer,
/// repeated, skipped, dropped, repeats.
type Counts = (u64, u64, Vec<u64>, u64, u64, u64, u64);

fn counts(c: &ResumeCheck) -> Counts {
    (
        c.delivered_before,
        c.remaining,
        c.per_consumer.clone(),
        c.repeated,
        c.skipped,
        c.dropped,
        c.repeats,
    )
}

#[test]
fn a_shuffled_round_robin_state_holds_at_its_world_and_on_3_ranks() {
    let (_dir, dataset) = dataset();
    let (state, ids) = saved(&dataset, Partition::RoundRobin, Remainder::Keep);
    assert_eq!(ids.len(), 30);
    // 373 dealt to 4: shares 94, 93, 93, 93, less 15, 5, 10, 0.
    let same = check(&dataset, &state, (2, 2), Partition::RoundRobin);
    assert!(same.holds, "{same:?}");
    assert_eq!(counts(&same), (30, 343, vec![79, 88, 83, 93], 0, 0, 0, 0));
    assert_eq!(
        (same.sequences, same.state_consumers, same.delivered),
        (373, 4, 343)
    );
    assert_eq!(
        (same.partition.as_str(), same.first_offence),
        ("round_robin", None)
    );
    // The world the state was saved at, by default.
    let default = ResumeCheck::run(dataset.clone(), &state, None, None).unwrap();
    assert_eq!(
        (default.world_size, default.workers, default.per_consumer),
        (4, 1, vec![79, 88, 83, 93])
    );
    let ranks = ResumeCheck::run(dataset.clone(), &state, None, Some(2)).unwrap();
    assert_eq!((ranks.world_size, ranks.workers), (2, 2));
    // The 343 left dealt anew to 3: 115, 114, 114.
    let three = check(&dataset, &state, (3, 1), Partition::RoundRobin);
    assert!(three.holds, "{three:?}");
    assert_eq!(counts(&three), (30, 343, vec![115, 114, 114], 0, 0, 0, 0));
}

#[test]
fn a_locality_state_holds_at_its_world_and_on_3_ranks() {
    let (_dir, dataset) = dataset();
    let (state, _) = saved(&dataset, Partition::Locality, Remainder::Keep);
    assert_eq!(state.blocks, Some(4));
    // Blocks of 93, 93, 93, 94, less 15, 5, 10, 0.
    let same = check(&dataset, &state, (2, 2), Partition::Locality);
    assert!(same.holds, "{same:?}");
    assert_eq!(counts(&same), (30, 343, vec![78, 88, 83, 94], 0, 0, 0, 0));
    assert_eq!(same.partition, "locality");
    // 343 in blocks of 114, 114, 115.
    let three = check(&dataset, &state, (3, 1), Partition::Locality);
    assert!(three.holds, "{three:?}");
    assert_eq!(counts(&three), (30, 343, vec![114, 114, 115], 0, 0, 0, 0));
}

#[test]
fn drop_counts_its_dropped_tail_and_repeat_its_repeats() {
    let (_dir, dataset) = dataset();
    let p = Partition::RoundRobin;
    let (state, _) = saved(&dataset, p, Remainder::Drop);
    // 373 to 4: 93 each, the last 1 dropped; 343 to 3: 114 each, 1 dropped.
    let same = check(&dataset, &state, (2, 2), p);
    assert_eq!(counts(&same), (30, 343, vec![78, 88, 83, 93], 0, 0, 1, 0));
    let three = check(&dataset, &state, (3, 1), p);
    assert_eq!(counts(&three), (30, 343, vec![114, 114, 114], 0, 0, 1, 0));
    assert!(same.holds && three.holds);
    // 373 to 4: 94 each, 3 repeats; 343 to 3: 115 each, 2 repeats.
    let (state, _) = saved(&dataset, p, Remainder::Repeat);
    let same = check(&dataset, &state, (2, 2), p);
    assert_eq!(counts(&same), (30, 343, vec![79, 89, 84, 94], 0, 0, 0, 3));
    let three = check(&dataset, &state, (3, 1), p);
    assert_eq!(counts(&three), (30, 343, vec![115, 115, 115], 0, 0, 0, 2));
    assert!(same.holds && three.holds);
    // Locality: drop takes the last of the longer block (consumer 3's).
    let (state, _) = saved(&dataset, Partition::Locality, Remainder::Drop);
    let same = check(&dataset, &state, (2, 2), Partition::Locality);
    assert_eq!(counts(&same), (30, 343, vec![78, 88, 83, 93], 0, 0, 1, 0));
    let (state, _) = saved(&dataset, Partition::Locality, Remainder::Repeat);
    let same = check(&dataset, &state, (2, 2), Partition::Locality);
    assert_eq!(counts(&same), (30, 343, vec![79, 89, 84, 94], 0, 0, 0, 3));
    assert!(same.holds);
}

#[test]
fn a_checkpoint_is_read_as_state_show_reads_it() {
    let (_dir, dataset) = dataset();
    let (state, _) = saved(&dataset, Partition::RoundRobin, Remainder::Keep);
    let checkpoint = lodt::dataset::Checkpoint::new(state, 0).to_json();
    let check = ResumeCheck::of_json(dataset, &checkpoint, Some(1), None).unwrap();
    assert!(check.holds);
    assert_eq!((check.remaining, check.per_consumer), (343, vec![343]));
}

#[test]
fn what_a_check_does_not_cover_is_an_error_saying_so() {
    let (_dir, dataset) = dataset();
    let (state, _) = saved(&dataset, Partition::RoundRobin, Remainder::Keep);
    let err = |s: &LoaderState, w: Option<u64>, k: Option<u64>| {
        ResumeCheck::run(dataset.clone(), s, w, k)
            .unwrap_err()
            .to_string()
    };
    // A rank's own state: not every count.
    let mut one = state.clone();
    one.consumed.remove(&3);
    let e = err(&one, None, None);
    assert!(e.contains("no count for consumer 3 of its 4"), "{e}");
    // Worlds of no consumer, too many, or workers that do not split the state's.
    assert!(err(&state, Some(0), None).contains("1 to 16777216 consumers"));
    assert!(err(&state, Some(1 << 20), Some(1 << 20)).contains("1 to 16777216 consumers"));
    assert!(err(&state, None, Some(3)).contains("not ranks of 3 workers"));
    // A state the loader refuses (a count past the share).
    let mut past = state.clone();
    past.consumed.insert(0, 95);
    let e = err(&past, None, None);
    assert!(e.contains("consumer 0 consumed 95 sequences"), "{e}");
    // A packing loader's state.
    let o = LoaderOptions {
        packing: Some(PackOptions::tokens(64)),
        prefetch: 0,
        ..Default::default()
    };
    let mut packed = Loader::new(dataset.clone(), o).unwrap();
    packed.next_packed().unwrap().unwrap();
    let e = err(&packed.state(), None, None);
    assert!(e.contains("packing loader's state"), "{e}");
    // A mixture's.
    let mixture =
        Arc::new(Mixture::try_new(vec![dataset.clone()], &[1.0], Default::default()).unwrap());
    let mut mixed = Loader::new(
        mixture.clone(),
        LoaderOptions {
            prefetch: 0,
            ..Default::default()
        },
    )
    .unwrap();
    mixed.next().unwrap().unwrap();
    let e = ResumeCheck::run(mixture, &mixed.state(), None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("a mixture's state"), "{e}");
}
