//! The cursor of a shuffled order (`spec/DATASET.md` 7.3): a state taken
//! past the first snapshot carries one; a resume from it delivers exactly
//! what the uninterrupted run would (the same as walking from the
//! frontier), at the same world size and at another; a cursor past a
//! consumer's next position is not used; a bad cursor is refused.

use crate::dataset_util;

use dataset_util::{open, run, write_dataset};
use lodt::dataset::{Batching, Loader, LoaderOptions, LoaderState, ShuffleOptions};
use std::collections::BTreeSet;

/// 140,000 sequences in 28 batches: past two snapshots (every 65,536
/// positions).
fn dataset() -> (
    tempfile::TempDir,
    std::sync::Arc<lodt::dataset::Dataset>,
    u64,
) {
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &[5_000; 28], 1 << 20);
    let dataset = open(dir.path());
    (dir, dataset, n)
}

fn options(consumer: usize, consumers: usize) -> LoaderOptions {
    LoaderOptions {
        batching: Batching::Sequences(64),
        shuffle: Some(ShuffleOptions {
            seed: 7,
            buffer: 1_000,
        }),
        rank: consumer,
        world_size: consumers,
        prefetch: 2,
        ..Default::default()
    }
}

/// Consumer `c` of `consumers` after `steps` mini-batches: what it
/// delivered and its state.
fn partial(
    dataset: &std::sync::Arc<lodt::dataset::Dataset>,
    state: Option<&LoaderState>,
    (c, consumers): (usize, usize),
    steps: usize,
) -> (Vec<u64>, LoaderState) {
    let o = options(c, consumers);
    let mut loader = match state {
        Some(s) => Loader::resume(dataset.clone(), o, s).unwrap(),
        None => Loader::new(dataset.clone(), o).unwrap(),
    };
    let ids: Vec<u64> = loader
        .by_ref()
        .take(steps)
        .flat_map(|b| b.unwrap().ids)
        .collect();
    (ids, loader.state())
}

#[test]
fn a_resume_from_a_cursor_continues_exactly_where_the_walk_would() {
    let (_dir, ds, _) = dataset();
    let whole: Vec<u64> = run(Loader::new(ds.clone(), options(0, 2)).unwrap()).concat();
    let (before, state) = partial(&ds, None, (0, 2), 800);
    assert_eq!(before, whole[..before.len()]);
    let cursor = state
        .cursor
        .clone()
        .expect("a state past 65,536 positions has a cursor");
    // The newest snapshot not past the consumer's next position (tail
    // index 2 × 51,200 = 102,400): the one at 65,536.
    assert_eq!(cursor.position, 65_536);
    assert_eq!(cursor.buffer.len(), 1_000);
    assert_eq!(cursor.drawn, 66_536);
    // JSON keeps it.
    let json = state.to_json();
    assert_eq!(json["cursor"]["position"], 65_536);
    assert_eq!(LoaderState::from_json(&json).unwrap(), state);
    // From the cursor and from the frontier: the same rest.
    let rest = run(Loader::resume(ds.clone(), options(0, 2), &state).unwrap()).concat();
    assert_eq!(rest, whole[before.len()..]);
    let walked = LoaderState {
        cursor: None,
        ..state.clone()
    };
    let rest2 = run(Loader::resume(ds.clone(), options(0, 2), &walked).unwrap()).concat();
    assert_eq!(rest2, rest);
    // A resumed loader's state keeps a cursor from the start (the one it
    // resumed from, until it walks past the next snapshot).
    let (_, again) = partial(&ds, Some(&state), (0, 2), 1);
    assert_eq!(again.cursor.map(|c| c.position), Some(65_536));
}

#[test]
fn a_merged_cursor_resumes_another_world_size_exactly_once() {
    let (_dir, ds, n) = dataset();
    let mut delivered = Vec::new();
    let mut states = Vec::new();
    for (c, steps) in [(0, 700), (1, 760)] {
        let (ids, s) = partial(&ds, None, (c, 2), steps);
        assert!(s.cursor.is_some());
        delivered.extend(ids);
        states.push(s);
    }
    let merged = LoaderState::merge(&states).unwrap();
    let low = states
        .iter()
        .map(|s| s.cursor.as_ref().unwrap().position)
        .min();
    assert_eq!(merged.cursor.as_ref().map(|c| c.position), low);
    for c in 0..3 {
        let o = options(c, 3);
        for b in Loader::resume(ds.clone(), o, &merged).unwrap() {
            delivered.extend(b.unwrap().ids);
        }
    }
    assert_eq!(delivered.len() as u64, n);
    assert_eq!(
        delivered.iter().copied().collect::<BTreeSet<_>>().len() as u64,
        n
    );
    // A state without a cursor merges into one without.
    let none = LoaderState {
        cursor: None,
        ..states[1].clone()
    };
    assert_eq!(
        LoaderState::merge(&[states[0].clone(), none])
            .unwrap()
            .cursor,
        None
    );
}

#[test]
fn a_cursor_past_a_consumers_next_position_is_not_used() {
    let (_dir, ds, _) = dataset();
    let whole: Vec<u64> = run(Loader::new(ds.clone(), options(0, 2)).unwrap()).concat();
    let (_, ahead) = partial(&ds, None, (1, 2), 1_000);
    let (before, behind) = partial(&ds, None, (0, 2), 10);
    assert_eq!(behind.cursor, None);
    // Consumer 0's count with consumer 1's cursor (at 65,536 or later):
    // starting there would lose what consumer 0 still needs before it.
    let odd = LoaderState {
        cursor: ahead.cursor.clone(),
        ..behind
    };
    assert!(odd.cursor.is_some());
    let rest = run(Loader::resume(ds.clone(), options(0, 2), &odd).unwrap()).concat();
    assert_eq!(rest, whole[before.len()..]);
}

#[test]
fn bad_cursors_are_refused_before_anything_is_read() {
    let (_dir, ds, _) = dataset();
    let (_, state) = partial(&ds, None, (0, 2), 800);
    let refused = |s: &LoaderState, o: LoaderOptions, what: &str| {
        let e = Loader::resume(ds.clone(), o, s).unwrap_err().to_string();
        assert!(e.contains(what), "{e}");
    };
    let mut twice = state.clone();
    let c = twice.cursor.as_mut().unwrap();
    c.buffer[1] = c.buffer[0];
    refused(&twice, options(0, 2), "twice");
    let mut short = state.clone();
    short.cursor.as_mut().unwrap().buffer.pop();
    refused(&short, options(0, 2), "inconsistent");
    let mut rng = state.clone();
    rng.cursor.as_mut().unwrap().rng[0] = "not hex".into();
    refused(&rng, options(0, 2), "hex");
    // A cursor in an unshuffled state.
    let plain = |c| LoaderOptions {
        shuffle: None,
        ..options(c, 2)
    };
    let with = LoaderState {
        shuffle: None,
        ..state.clone()
    };
    refused(&with, plain(0), "only a shuffled order");
}
