//! A dataset appended to since a state was saved (`spec/DATASET.md` 7.3, "A
//! dataset that grew"): the state's epoch continues over the sequences it
//! knew, exactly once, at the same world size (the uninterrupted stream)
//! and another, in both partitions; the appended sequences join from the
//! next epoch; a dataset whose shards changed is refused, naming them.

use crate::dataset_util;

use dataset_util::{TestRng, make_batch, open, partial_epoch, run, store, write_dataset};
use lodt::dataset::{
    Batching, DatasetWriter, DatasetWriterOptions, Loader, LoaderOptions, LoaderState, PackOptions,
    Partition, ResumeCheck, ShuffleOptions,
};
use std::collections::BTreeSet;

const SIZES: [u64; 10] = [17, 3, 0, 25, 9, 14, 1, 30, 22, 11];

fn options(partition: Partition) -> impl Fn(usize, usize, usize, usize) -> LoaderOptions {
    move |rank, world_size, worker, num_workers| LoaderOptions {
        batching: Batching::Sequences(4),
        shuffle: Some(ShuffleOptions {
            seed: 11,
            buffer: 8,
        }),
        rank,
        world_size,
        worker,
        num_workers,
        partition: Some(partition),
        ..Default::default()
    }
}

/// Appends batches of `sizes` sequences after the `first` the dataset has.
fn append(dir: &std::path::Path, first: u64, sizes: &[u64]) -> u64 {
    let o = DatasetWriterOptions {
        shard_bytes: 2048,
        ..Default::default()
    };
    let mut w = DatasetWriter::append_in(store(dir), o).unwrap();
    let mut next = first;
    for &n in sizes {
        w.write(&make_batch(next, n)).unwrap();
        next += n;
    }
    w.finish().unwrap();
    next
}

/// Every id of a whole epoch `epoch` of `layout` consumers, from `state` or
/// the epoch's start.
fn epoch_ids(
    ds: &std::sync::Arc<lodt::dataset::Dataset>,
    state: Option<&LoaderState>,
    (world, workers): (usize, usize),
    options: &impl Fn(usize, usize, usize, usize) -> LoaderOptions,
) -> Vec<u64> {
    let mut out = Vec::new();
    for rank in 0..world {
        for worker in 0..workers {
            let o = options(rank, world, worker, workers);
            let l = match state {
                Some(s) => Loader::resume(ds.clone(), o, s).unwrap(),
                None => Loader::new(ds.clone(), o).unwrap(),
            };
            out.extend(run(l).concat());
        }
    }
    out
}

#[test]
fn the_epoch_of_a_state_continues_over_what_it_knew_and_the_appended_join_next() {
    for partition in [Partition::RoundRobin, Partition::Locality] {
        let dir = tempfile::tempdir().unwrap();
        let n_old = write_dataset(dir.path(), &SIZES, 2048);
        let old = open(dir.path());
        assert!(old.num_shards() >= 3);
        let o = options(partition);
        let mut rng = TestRng(partition as u64 + 5);
        let (before, state) = partial_epoch(&old, None, (2, 2), &mut rng, Some(4), &o);
        assert!(!before.is_empty() && (before.len() as u64) < n_old);
        let n_new = append(dir.path(), n_old, &[12, 40, 7]);
        let grown = open(dir.path());
        assert!(grown.num_shards() > old.num_shards());
        assert_eq!(
            grown.shards_of(state.sequences, state.fingerprint).unwrap(),
            Some(old.num_shards())
        );
        // The dry run (lodt state check) agrees, on the grown dataset.
        let check = ResumeCheck::run(grown.clone(), &state, Some(3), Some(1)).unwrap();
        assert!(check.holds, "{check:?}");
        assert_eq!(check.sequences, n_old);
        assert_eq!(check.delivered_before + check.remaining, n_old);
        assert_eq!(check.delivered_before, before.len() as u64);
        for layout in [(2, 2), (3, 1)] {
            let rest = epoch_ids(&grown, Some(&state), layout, &o);
            let mut all: Vec<u64> = before.iter().copied().chain(rest).collect();
            all.sort_unstable();
            assert_eq!(
                all,
                (0..n_old).collect::<Vec<_>>(),
                "{partition:?} {layout:?}"
            );
        }
        // The same world continues exactly as it would have on the old dataset.
        for rank in 0..2 {
            for worker in 0..2 {
                let on = |ds: &std::sync::Arc<lodt::dataset::Dataset>| {
                    run(Loader::resume(ds.clone(), o(rank, 2, worker, 2), &state).unwrap())
                };
                assert_eq!(
                    on(&grown),
                    on(&old),
                    "{partition:?} consumer {rank}/{worker}"
                );
            }
        }
        // The next epoch is the whole dataset's.
        let mut l = Loader::resume(grown.clone(), o(0, 1, 0, 1), &state).unwrap();
        assert_eq!(l.state().fingerprint, old.fingerprint());
        l.set_epoch(1).unwrap();
        let next: BTreeSet<u64> = run(l).concat().into_iter().collect();
        assert_eq!(next, (0..n_new).collect::<BTreeSet<_>>());
    }
}

#[test]
fn a_state_of_shards_that_changed_is_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &SIZES, 2048);
    let ds = open(dir.path());
    let o = options(Partition::RoundRobin);
    let mut l = Loader::new(ds.clone(), o(0, 1, 0, 1)).unwrap();
    l.next().unwrap().unwrap();
    let state = l.state();
    // Another dataset of as many sequences whose first shard differs.
    let other = tempfile::tempdir().unwrap();
    let mut sizes = SIZES;
    sizes[0] -= 1;
    sizes[1] += 1;
    assert_eq!(write_dataset(other.path(), &sizes, 2048), n);
    append(other.path(), n, &[5]);
    let e = Loader::resume(open(other.path()), o(0, 1, 0, 1), &state)
        .unwrap_err()
        .to_string();
    assert!(e.contains("first") && e.contains("changed since"), "{e}");
    assert!(
        e.contains(&ds.shard_entry(ds.num_shards() - 1).unwrap().name),
        "{e}"
    );
    // A state of a dataset no prefix of this one matches.
    let odd = LoaderState {
        sequences: n + 1,
        ..state.clone()
    };
    let e = Loader::resume(ds.clone(), o(0, 1, 0, 1), &odd)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no prefix of its shards"), "{e}");
    // A packing loader resumes only on the shards it was saved on.
    append(dir.path(), n, &[5]);
    let packing = LoaderOptions {
        packing: Some(PackOptions::tokens(64)),
        ..o(0, 1, 0, 1)
    };
    let mut p = Loader::new(ds.clone(), packing.clone()).unwrap();
    p.next().unwrap().unwrap();
    let e = Loader::resume(open(dir.path()), packing, &p.state())
        .unwrap_err()
        .to_string();
    assert!(e.contains("packing loader resumes only"), "{e}");
}

#[test]
fn appended_sequences_join_now_when_asked_each_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let n_old = write_dataset(dir.path(), &SIZES, 2048);
    let old = open(dir.path());
    let o = options(Partition::RoundRobin);
    let mut rng = TestRng(21);
    let (before, state) = partial_epoch(&old, None, (2, 2), &mut rng, Some(4), &o);
    // Nothing appended yet: the state comes back as it is.
    assert_eq!(old.join_appended(&state).unwrap(), state);
    let n_new = append(dir.path(), n_old, &[12, 40, 7]);
    let grown = open(dir.path());
    let joined = grown.join_appended(&state).unwrap();
    assert_eq!((joined.version, joined.sequences), (6, n_new));
    assert_eq!(joined.fingerprint, grown.fingerprint());
    assert_eq!(
        joined.joined,
        Some(lodt::dataset::Joined {
            sequences: n_old,
            fingerprint: old.fingerprint()
        })
    );
    // Every sequence, old and appended, exactly once over the epoch, on the
    // same world and on others; the dry run agrees.
    for layout in [(2, 2), (3, 1), (1, 1)] {
        let rest = epoch_ids(&grown, Some(&joined), layout, &o);
        let mut all: Vec<u64> = before.iter().copied().chain(rest).collect();
        all.sort_unstable();
        assert_eq!(all, (0..n_new).collect::<Vec<_>>(), "{layout:?}");
        let check = ResumeCheck::run(
            grown.clone(),
            &joined,
            Some(layout.0 as u64),
            Some(layout.1 as u64),
        )
        .unwrap();
        assert!(check.holds, "{check:?}");
        assert_eq!(check.delivered_before + check.remaining, n_new);
    }
    // The same consumer delivers what it would have on the old dataset,
    // then its share of the appended ones; one alone delivers the appended
    // ones after all the old ones.
    let alone: Vec<u64> = run(Loader::resume(
        grown.clone(),
        o(0, 1, 0, 1),
        &LoaderState::merge(std::slice::from_ref(&joined)).unwrap(),
    )
    .unwrap())
    .concat();
    let cut = alone.iter().position(|&i| i >= n_old).unwrap();
    assert!(alone[cut..].iter().all(|&i| i >= n_old));
    for rank in 0..2 {
        for worker in 0..2 {
            let on_old =
                run(Loader::resume(old.clone(), o(rank, 2, worker, 2), &state).unwrap()).concat();
            let on_joined =
                run(Loader::resume(grown.clone(), o(rank, 2, worker, 2), &joined).unwrap())
                    .concat();
            assert_eq!(
                on_joined[..on_old.len()],
                on_old[..],
                "consumer {rank}/{worker}"
            );
        }
    }
    // A state saved mid-way through the joined epoch resumes it (JSON
    // round trip), and the next epoch is the whole dataset's.
    let mut l = Loader::resume(grown.clone(), o(0, 1, 0, 1), &joined).unwrap();
    l.next().unwrap().unwrap();
    let mid = LoaderState::from_json(&l.state().to_json()).unwrap();
    assert_eq!(mid.joined, joined.joined);
    assert!(mid.cursor.is_none());
    let rest: Vec<u64> = run(l).concat();
    assert_eq!(
        run(Loader::resume(grown.clone(), o(0, 1, 0, 1), &mid).unwrap()).concat(),
        rest
    );
    let mut l = Loader::resume(grown.clone(), o(0, 1, 0, 1), &mid).unwrap();
    l.set_epoch(1).unwrap();
    assert!(l.state().joined.is_none());
    assert_eq!(l.state().version, 1);
    let next: BTreeSet<u64> = run(l).concat().into_iter().collect();
    assert_eq!(next, (0..n_new).collect::<BTreeSet<_>>());
    // Grown again: the joined state resumes (the newest shards join at the
    // next epoch) but does not join twice.
    let n_more = append(dir.path(), n_new, &[5]);
    let again = open(dir.path());
    let e = again.join_appended(&mid).unwrap_err().to_string();
    assert!(e.contains("already took in"), "{e}");
    let rest_again: Vec<u64> =
        run(Loader::resume(again.clone(), o(0, 1, 0, 1), &mid).unwrap()).concat();
    assert_eq!(rest_again, rest);
    assert!(n_more > n_new);
    // A packing or locality state is refused.
    let (_, locality) = partial_epoch(
        &old,
        None,
        (1, 1),
        &mut rng,
        Some(2),
        options(Partition::Locality),
    );
    let e = grown.join_appended(&locality).unwrap_err().to_string();
    assert!(e.contains("locality"), "{e}");
}
