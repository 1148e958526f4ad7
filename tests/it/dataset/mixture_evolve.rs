//! A mixture's state resumed on changed parameters (`spec/DATASET.md`
//! 10.6, `Mixture::evolve_state`): re-weighted, with a source added,
//! removed and added back, another world size, packing; each source's
//! draws of the epoch continue exactly once. The test vector
//! `spec/vectors/mixture/evolve.json` is regenerated here (`LODT_BLESS=1`
//! rewrites it) and recomputed by `spec/vectors/check_dataset.py --mixture`.

use crate::dataset_util;

use dataset_util::{open, python_output, write_dataset};
use lodt::dataset::{
    Batching, Dataset, Loader, LoaderOptions, LoaderState, Mixture, MixtureOptions, PackOptions,
    ShuffleOptions, Stop,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Datasets of the given sizes (distinct, so distinct fingerprints), in
/// batches of up to 40.
fn sources(sizes: &[u64]) -> (Vec<tempfile::TempDir>, Vec<Arc<Dataset>>) {
    let dirs: Vec<_> = sizes.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let sets = dirs
        .iter()
        .zip(sizes)
        .map(|(d, &n)| {
            let mut b = vec![40; (n / 40) as usize];
            if !n.is_multiple_of(40) {
                b.push(n % 40);
            }
            write_dataset(d.path(), &b, 8 * 1024);
            open(d.path())
        })
        .collect();
    (dirs, sets)
}

fn mixture(sets: &[&Arc<Dataset>], weights: &[f64], stop: Stop) -> Arc<Mixture> {
    let sets = sets.iter().map(|s| (*s).clone()).collect();
    Arc::new(Mixture::try_new(sets, weights, MixtureOptions { seed: 5, stop }).unwrap())
}

fn options(rank: usize, world_size: usize) -> LoaderOptions {
    LoaderOptions {
        batching: Batching::Sequences(6),
        shuffle: Some(ShuffleOptions {
            seed: 9,
            buffer: 16,
        }),
        rank,
        world_size,
        prefetch: 0,
        ..Default::default()
    }
}

/// Per source (by its dataset's fingerprint), how often each of its ids
/// was delivered.
type Counts = BTreeMap<u32, BTreeMap<u64, u64>>;

fn count(counts: &mut Counts, m: &Mixture, ids: &[u64]) {
    for &id in ids {
        let (k, local) = m.source_of(id).unwrap();
        *counts
            .entry(m.sources()[k].fingerprint())
            .or_default()
            .entry(local)
            .or_default() += 1;
    }
}

/// Runs `world` ranks of `m` for `steps[rank]` mini-batches each (all of
/// them for `None`), counting what they deliver; returns their merged state.
fn run(
    m: &Arc<Mixture>,
    state: Option<&LoaderState>,
    steps: &[Option<usize>],
    counts: &mut Counts,
) -> LoaderState {
    let world = steps.len();
    let mut states = Vec::new();
    for (rank, &n) in steps.iter().enumerate() {
        let mut l = match state {
            None => Loader::new(m.clone(), options(rank, world)).unwrap(),
            Some(s) => Loader::resume(m.clone(), options(rank, world), s).unwrap(),
        };
        for _ in 0..n.unwrap_or(usize::MAX) {
            let Some(b) = l.next() else { break };
            count(counts, m, &b.unwrap().ids);
        }
        states.push(l.state());
    }
    LoaderState::merge(&states).unwrap()
}

#[test]
fn a_reweighted_mixture_with_a_new_source_continues_each_source_exactly_once() {
    let (_dirs, s) = sources(&[300, 200, 150]);
    let before = mixture(&[&s[0], &s[1]], &[1.0, 1.0], Stop::FirstExhausted);
    let mut counts = Counts::new();
    // Two ranks out of step: a skip list.
    let saved = run(&before, None, &[Some(9), Some(5)], &mut counts);
    // What `lodt state show` reports: each source's delivered draws.
    let report = lodt::dataset::StateReport::of(&saved).unwrap();
    let per_source: Vec<u64> = (0..2)
        .map(|k| {
            counts
                .get(&s[k].fingerprint())
                .map_or(0, |c| c.len() as u64)
        })
        .collect();
    assert_eq!(report.mixture.unwrap().delivered, Some(per_source.clone()));
    let after = mixture(
        &[&s[0], &s[1], &s[2]],
        &[1.0, 3.0, 2.0],
        Stop::FirstExhausted,
    );
    let evolved = after.evolve_state(&options(0, 3), &saved).unwrap();
    let report = lodt::dataset::StateReport::of(&evolved)
        .unwrap()
        .mixture
        .unwrap();
    // The epoch's draws so far: the same, and none of the new source's.
    assert_eq!(report.delivered, Some([per_source, vec![0]].concat()));
    assert!(report.evolved.is_some());
    // The same state and mixture give the same state.
    assert_eq!(evolved, after.evolve_state(&options(0, 3), &saved).unwrap());
    let mixture_state = evolved.mixture.as_ref().unwrap();
    assert_eq!(
        mixture_state.version,
        lodt::dataset::MIXTURE_EVOLVED_VERSION
    );
    let progress = &mixture_state.evolved.as_ref().unwrap().sources;
    assert_eq!(
        progress.iter().map(|p| p.order).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    assert_eq!(progress[2].frontier, 0);
    let delivered: u64 = counts.values().flat_map(|c| c.values()).sum();
    assert_eq!(delivered, 14 * 6);
    assert_eq!(mixture_state.evolved.as_ref().unwrap().delivered, delivered);
    // Three ranks finish the epoch.
    let end = run(&after, Some(&evolved), &[None, None, None], &mut counts);
    // Nothing twice, in any source; the new one was drawn.
    for (f, c) in &counts {
        assert!(c.values().all(|&n| n == 1), "source {f:#x} repeats: {c:?}");
    }
    assert!(
        counts
            .get(&s[2].fingerprint())
            .is_some_and(|c| c.len() > 10)
    );
    // first_exhausted: the epoch ended at the first draw of an exhausted
    // source, so one of them was delivered whole.
    assert!(
        s.iter().any(
            |d| counts.get(&d.fingerprint()).map_or(0, |c| c.len() as u64) == d.num_sequences()
        )
    );
    // The next epoch is the new mixture's own (no change recorded).
    let mut next = Loader::resume(after.clone(), options(0, 3), &end).unwrap();
    next.set_epoch(1).unwrap();
    assert!(next.state().mixture.unwrap().evolved.is_none());
    let plain = Loader::at_epoch(after.clone(), options(0, 3), 1).unwrap();
    let a: Vec<u64> = next.flat_map(|b| b.unwrap().ids).collect();
    let b: Vec<u64> = plain.flat_map(|b| b.unwrap().ids).collect();
    assert_eq!(a, b);
}

#[test]
fn under_all_exhausted_every_sequence_of_every_source_comes_once_per_pass() {
    let (_dirs, s) = sources(&[120, 60, 90]);
    let before = mixture(&[&s[0], &s[1]], &[1.0, 2.0], Stop::AllExhausted);
    let mut counts = Counts::new();
    let saved = run(&before, None, &[Some(7), Some(4)], &mut counts);
    let after = mixture(&[&s[1], &s[2], &s[0]], &[1.0, 1.0, 3.0], Stop::AllExhausted);
    let evolved = after.evolve_state(&options(0, 2), &saved).unwrap();
    run(&after, Some(&evolved), &[None, None], &mut counts);
    for d in &s {
        let c = &counts[&d.fingerprint()];
        assert_eq!(
            c.len() as u64,
            d.num_sequences(),
            "every sequence at least once"
        );
        let (lo, hi) = (c.values().min().unwrap(), c.values().max().unwrap());
        assert!(hi - lo <= 1, "passes are whole: counts from {lo} to {hi}");
    }
}

#[test]
fn a_removed_source_keeps_its_progress_and_continues_when_added_back() {
    let (_dirs, s) = sources(&[200, 160]);
    let both = mixture(&[&s[0], &s[1]], &[1.0, 1.0], Stop::FirstExhausted);
    let mut counts = Counts::new();
    let saved = run(&both, None, &[Some(4), Some(3)], &mut counts);
    // Source 1 removed: it draws nothing, its progress kept.
    let only = mixture(&[&s[0]], &[1.0], Stop::Sequences(300));
    let evolved = only.evolve_state(&options(0, 1), &saved).unwrap();
    let e = evolved.mixture.as_ref().unwrap().evolved.clone().unwrap();
    assert_eq!(e.removed.len(), 1);
    assert_eq!(e.removed[0].fingerprint, s[1].fingerprint());
    let ones_before = counts.get(&s[1].fingerprint()).map_or(0, |c| c.len());
    let saved = run(&only, Some(&evolved), &[Some(3)], &mut counts);
    assert_eq!(counts[&s[1].fingerprint()].len(), ones_before);
    // Added back: it continues, nothing of it twice.
    let again = mixture(&[&s[1], &s[0]], &[1.0, 1.0], Stop::FirstExhausted);
    let evolved = again.evolve_state(&options(0, 2), &saved).unwrap();
    let e = evolved.mixture.as_ref().unwrap().evolved.clone().unwrap();
    assert!(e.removed.is_empty());
    assert_eq!(e.sources[0].order, 1, "source 1 keeps its order's seed");
    run(&again, Some(&evolved), &[None, None], &mut counts);
    for c in counts.values() {
        assert!(c.values().all(|&n| n == 1));
    }
    assert!(counts[&s[1].fingerprint()].len() > ones_before);
}

#[test]
fn the_strict_resume_still_refuses_a_changed_mixture_and_the_change_needs_a_complete_state() {
    let (_dirs, s) = sources(&[100, 80]);
    let before = mixture(&[&s[0], &s[1]], &[1.0, 1.0], Stop::FirstExhausted);
    let mut l = Loader::new(before.clone(), options(1, 2)).unwrap();
    l.next().unwrap().unwrap();
    let partial = l.state();
    let after = mixture(&[&s[0], &s[1]], &[1.0, 2.0], Stop::FirstExhausted);
    let err = Loader::resume(after.clone(), options(1, 2), &partial).unwrap_err();
    assert!(err.to_string().contains("another mixture"), "{err}");
    let err = after.evolve_state(&options(1, 2), &partial).unwrap_err();
    assert!(err.to_string().contains("complete state"), "{err}");
    // A state of the same mixture comes back as it is.
    assert_eq!(
        before.evolve_state(&options(1, 2), &partial).unwrap(),
        partial
    );
    // An evolved state on a mixture other than the one it names: refused.
    let mut counts = Counts::new();
    let saved = run(&before, None, &[Some(2)], &mut counts);
    let evolved = after.evolve_state(&options(0, 1), &saved).unwrap();
    let err = Loader::resume(before.clone(), options(0, 1), &evolved).unwrap_err();
    assert!(err.to_string().contains("another mixture"), "{err}");
    // The evolved state resumes (same world) exactly, saved and reloaded
    // mid-way.
    let mut l = Loader::resume(after.clone(), options(0, 1), &evolved).unwrap();
    let first: Vec<u64> = (0..3)
        .flat_map(|_| l.next().unwrap().unwrap().ids)
        .collect();
    let mid = LoaderState::from_json(&l.state().to_json()).unwrap();
    let rest: Vec<u64> = l.flat_map(|b| b.unwrap().ids).collect();
    let resumed: Vec<u64> = Loader::resume(after.clone(), options(0, 1), &mid)
        .unwrap()
        .flat_map(|b| b.unwrap().ids)
        .collect();
    assert_eq!(rest, resumed);
    let whole: Vec<u64> = Loader::resume(after.clone(), options(0, 1), &evolved)
        .unwrap()
        .flat_map(|b| b.unwrap().ids)
        .collect();
    assert_eq!([first, rest].concat(), whole);
}

#[test]
fn a_packing_state_continues_on_changed_weights_exactly_once() {
    let (_dirs, s) = sources(&[150, 100, 80]);
    let pack = PackOptions {
        buffer: 8,
        ..PackOptions::tokens(64)
    };
    let packed = |rank, world| LoaderOptions {
        packing: Some(pack.clone()),
        ..options(rank, world)
    };
    let before = mixture(&[&s[0], &s[1]], &[1.0, 1.0], Stop::FirstExhausted);
    let mut counts = Counts::new();
    let mut states = Vec::new();
    for (rank, steps) in [(0, 5), (1, 3)] {
        let mut l = Loader::new(before.clone(), packed(rank, 2)).unwrap();
        for _ in 0..steps {
            count(
                &mut counts,
                &before,
                &l.next_packed().unwrap().unwrap().batch.ids,
            );
        }
        states.push(l.state());
    }
    let saved = LoaderState::merge(&states).unwrap();
    // A removed source cannot be unpacked: kept at weight 0 instead.
    let dropped = mixture(&[&s[0], &s[2]], &[1.0, 1.0], Stop::FirstExhausted);
    let err = dropped.evolve_state(&packed(0, 3), &saved).unwrap_err();
    assert!(err.to_string().contains("weight 0"), "{err}");
    let after = mixture(
        &[&s[0], &s[1], &s[2]],
        &[2.0, 0.0, 1.0],
        Stop::FirstExhausted,
    );
    let evolved = after.evolve_state(&packed(0, 3), &saved).unwrap();
    assert!(evolved.packing.is_some());
    for rank in 0..3 {
        let mut l = Loader::resume(after.clone(), packed(rank, 3), &evolved).unwrap();
        while let Some(b) = l.next_packed() {
            count(&mut counts, &after, &b.unwrap().batch.ids);
        }
    }
    for c in counts.values() {
        assert!(c.values().all(|&n| n == 1));
    }
    assert!(counts.contains_key(&s[2].fingerprint()));
}

/// The vector of 10.6: the dataset vector as three sources; a state after
/// two consumers' uneven progress on weights [3, 1] (all_exhausted),
/// changed to three sources [1, 1, 2] (first_exhausted), then, after more
/// progress, to the first source alone (first_exhausted): each state's `mixture` and the
/// `(source, id)` of every position of the changed epoch.
fn vector() -> String {
    let dataset = Arc::new(
        Dataset::open(Path::new(env!("CARGO_MANIFEST_DIR")).join("spec/vectors/dataset")).unwrap(),
    );
    let shuffle = ShuffleOptions { seed: 7, buffer: 4 };
    let opts = |rank, world_size| LoaderOptions {
        shuffle: Some(shuffle),
        batching: Batching::Sequences(1),
        prefetch: 0,
        rank,
        world_size,
        ..Default::default()
    };
    let mix = |n: usize, weights: &[f64], stop| {
        Arc::new(
            Mixture::try_new(
                vec![dataset.clone(); n],
                weights,
                MixtureOptions { seed: 11, stop },
            )
            .unwrap(),
        )
    };
    let take = |m: &Arc<Mixture>, state: Option<&LoaderState>, steps: &[usize]| {
        let world = steps.len();
        let states: Vec<LoaderState> = steps
            .iter()
            .enumerate()
            .map(|(rank, &n)| {
                let mut l = match state {
                    None => Loader::at_epoch(m.clone(), opts(rank, world), 1).unwrap(),
                    Some(s) => Loader::resume(m.clone(), opts(rank, world), s).unwrap(),
                };
                for _ in 0..n {
                    l.next().unwrap().unwrap();
                }
                l.state()
            })
            .collect();
        LoaderState::merge(&states).unwrap()
    };
    let stream = |m: &Arc<Mixture>, state: &LoaderState| -> serde_json::Value {
        Loader::resume(m.clone(), opts(0, 1), state)
            .unwrap()
            .flat_map(|b| b.unwrap().ids)
            .map(|id| {
                let (k, local) = m.source_of(id).unwrap();
                serde_json::json!([k, local])
            })
            .collect::<Vec<_>>()
            .into()
    };
    let first = mix(2, &[3.0, 1.0], Stop::AllExhausted);
    let saved = take(&first, None, &[5, 2]);
    let second = mix(3, &[1.0, 1.0, 2.0], Stop::FirstExhausted);
    let changed = second.evolve_state(&opts(0, 1), &saved).unwrap();
    let stream_1 = stream(&second, &changed);
    let later = take(&second, Some(&changed), &[4]);
    let third = mix(1, &[1.0], Stop::FirstExhausted);
    let changed_again = third.evolve_state(&opts(0, 1), &later).unwrap();
    let stream_2 = stream(&third, &changed_again);
    let json = serde_json::json!({
        "sources": "../dataset",
        "shuffle": shuffle,
        "seed": 11,
        "epoch": 1,
        "first": {"weights": [3.0, 1.0], "stop": "all_exhausted", "consumers": 2,
                  "frontier": saved.frontier, "skip": saved.skip, "consumed": saved.consumed},
        "second": {"weights": [1.0, 1.0, 2.0], "stop": "first_exhausted",
                   "evolved": changed.mixture.as_ref().unwrap().evolved, "stream": stream_1,
                   "consumed": 4},
        "third": {"weights": [1.0], "stop": "first_exhausted",
                  "evolved": changed_again.mixture.as_ref().unwrap().evolved, "stream": stream_2},
    });
    let mut text = String::new();
    for (i, (k, v)) in json.as_object().unwrap().iter().enumerate() {
        let sep = if i == 0 { "{" } else { ",\n" };
        text.push_str(&format!("{sep}\"{k}\": {v}"));
    }
    text + "}\n"
}

#[test]
fn the_evolve_vector_matches_the_loader() {
    dataset_util::check_vector("mixture/evolve.json", &vector());
}

#[test]
fn an_independent_python_reader_agrees_on_the_evolve_vector() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("spec/vectors/check_dataset.py");
    if let Some(stdout) = python_output(&script, &["--evolve"]) {
        assert_eq!(
            stdout,
            "ok: the mixture changed twice in an epoch continues each source as section 10.6 says\n"
        );
    }
}

#[test]
fn a_hostile_state_is_refused_at_once_never_walked_for_hours() {
    let (_dirs, s) = sources(&[40, 30]);
    let after = mixture(&[&s[0], &s[1]], &[1.0, 1.0], Stop::FirstExhausted);
    let state = |stop: serde_json::Value, sequences: u64| {
        LoaderState::from_json(&serde_json::json!({"version": 1, "sequences": sequences,
            "fingerprint": 0, "shuffle": {"seed": 9, "buffer": 16}, "remainder": "keep",
            "epoch": 0, "frontier": 0, "skip": [], "consumers": 1, "consumed": {"0": 0},
            "mixture": {"version": 1, "seed": 1, "weights": [1.0, 1e-300], "stop": stop,
                "sources": [{"sequences": 1u64 << 62, "fingerprint": 1}, {"sequences": 1u64 << 62, "fingerprint": 2}]}}))
        .unwrap()
    };
    // An exhaustion rule whose epoch would take ~2^62 draws: refused.
    let e = after
        .evolve_state(
            &options(0, 1),
            &state(serde_json::json!("all_exhausted"), 5),
        )
        .unwrap_err();
    assert!(e.to_string().contains("MAX_MIXTURE_EPOCH"), "{e}");
    // A count of 2^63 sequences is counted, not drawn: another mixture's
    // state whose counts do not fit it is refused.
    let e = after
        .evolve_state(
            &options(0, 1),
            &state(serde_json::json!({"sequences": 1u64 << 63}), 7),
        )
        .unwrap_err();
    assert!(e.to_string().contains("another dataset"), "{e}");
    // Bad weights in the state.
    let mut bad = state(serde_json::json!("first_exhausted"), 5);
    bad.mixture.as_mut().unwrap().weights = vec![0.0, 0.0];
    let e = after.evolve_state(&options(0, 1), &bad).unwrap_err();
    assert!(e.to_string().contains("not all 0"), "{e}");
}

/// The number of values in `v` (itself included).
fn nodes(v: &serde_json::Value) -> u64 {
    1 + match v {
        serde_json::Value::Array(a) => a.iter().map(nodes).sum(),
        serde_json::Value::Object(o) => o.values().map(nodes).sum(),
        _ => 0,
    }
}

/// Value `at` of `v` (in the order of [`nodes`]) changed by `change`.
fn change_at(
    v: &mut serde_json::Value,
    at: &mut u64,
    change: &mut impl FnMut(&mut serde_json::Value),
) {
    if *at == 0 {
        change(v);
        *at = u64::MAX;
        return;
    }
    *at -= 1;
    match v {
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| change_at(x, at, change)),
        serde_json::Value::Object(o) => o.values_mut().for_each(|x| change_at(x, at, change)),
        _ => {}
    }
}

/// `value` with one of its numbers, arrays or fields changed at random:
/// extremes, off-by-ones, truncations, swaps, removals.
fn mutate(value: &mut serde_json::Value, rng: &mut dataset_util::TestRng) {
    use serde_json::Value;
    let mut at = rng.below(nodes(value));
    let kind = rng.below(8);
    let cut = rng.below(1 << 20);
    change_at(value, &mut at, &mut |slot: &mut Value| {
        *slot = match (slot.clone(), kind) {
            (Value::Number(n), 0) => serde_json::json!(n.as_u64().unwrap_or(0).wrapping_add(1)),
            (Value::Number(n), 1) => serde_json::json!(n.as_u64().unwrap_or(1).saturating_sub(1)),
            (Value::Number(_), 2) => serde_json::json!(u64::MAX),
            (Value::Number(_), 3) => serde_json::json!(1u64 << 40),
            (Value::Number(_), 4) => serde_json::json!(0),
            (Value::Array(mut a), 5) if !a.is_empty() => {
                a.truncate(cut as usize % a.len());
                Value::Array(a)
            }
            (Value::Array(mut a), 6) if a.len() > 1 => {
                let last = a.len() - 1;
                a.swap(0, last);
                Value::Array(a)
            }
            (Value::Object(mut o), 7) if !o.is_empty() => {
                let key = o.keys().nth(cut as usize % o.len()).cloned();
                if let Some(k) = key {
                    o.remove(&k);
                }
                Value::Object(o)
            }
            (v, _) => v,
        };
    });
}

#[test]
fn mutated_mixture_states_are_clear_errors_or_resume_never_panic() {
    // Valid states to start from: a plain one, an evolved one, and one
    // saved in the evolved epoch.
    let (_dirs, s) = sources(&[60, 40, 30]);
    let before = mixture(&[&s[0], &s[1]], &[1.0, 1.0], Stop::AllExhausted);
    let after = mixture(
        &[&s[0], &s[1], &s[2]],
        &[1.0, 2.0, 1.0],
        Stop::FirstExhausted,
    );
    let mut counts = Counts::new();
    let saved = run(&before, None, &[Some(3), Some(2)], &mut counts);
    let evolved = after.evolve_state(&options(0, 1), &saved).unwrap();
    let mid = run(&after, Some(&evolved), &[Some(2)], &mut counts);
    let seeds = [saved.to_json(), evolved.to_json(), mid.to_json()];
    let mut rng = dataset_util::TestRng(77);
    let (mut ok, mut refused) = (0u32, 0u32);
    for trial in 0..3000 {
        let mut json = seeds[trial % seeds.len()].clone();
        for _ in 0..1 + rng.below(3) {
            mutate(&mut json, &mut rng);
        }
        let Ok(state) = LoaderState::from_json(&json) else {
            refused += 1;
            continue;
        };
        let _ = lodt::dataset::StateReport::of(&state);
        for m in [&before, &after] {
            let resumed = match m.evolve_state(&options(0, 1), &state) {
                Ok(st) => Loader::resume(m.clone(), options(0, 2), &st),
                Err(e) => Err(e),
            };
            match resumed {
                Ok(l) => {
                    // At most a few hundred mini-batches: bounded work.
                    for b in l.take(300).flatten() {
                        for &id in &b.ids {
                            assert!(m.source_of(id).is_some(), "trial {trial}: id {id}");
                        }
                    }
                    ok += 1;
                }
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    refused += 1;
                }
            }
        }
    }
    assert!(ok > 20 && refused > 20, "ok {ok}, refused {refused}");
}

#[test]
fn mutated_joined_states_are_clear_errors_or_resume_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &[30, 20], 2048);
    let old = open(dir.path());
    let mut l = Loader::new(old.clone(), options(0, 1)).unwrap();
    l.next().unwrap().unwrap();
    let saved = l.state();
    let o = lodt::dataset::DatasetWriterOptions {
        shard_bytes: 2048,
        ..Default::default()
    };
    let mut w = lodt::dataset::DatasetWriter::append(dir.path(), o).unwrap();
    w.write(&dataset_util::make_batch(50, 25)).unwrap();
    w.finish().unwrap();
    let grown = open(dir.path());
    let joined = grown.join_appended(&saved).unwrap();
    let seeds = [saved.to_json(), joined.to_json()];
    let mut rng = dataset_util::TestRng(5);
    let (mut ok, mut refused) = (0u32, 0u32);
    for trial in 0..3000 {
        let mut json = seeds[trial % seeds.len()].clone();
        for _ in 0..1 + rng.below(3) {
            mutate(&mut json, &mut rng);
        }
        let Ok(state) = LoaderState::from_json(&json) else {
            refused += 1;
            continue;
        };
        let _ = lodt::dataset::StateReport::of(&state);
        let resumed = match grown.join_appended(&state) {
            Ok(st) => Loader::resume(grown.clone(), options(0, 2), &st),
            Err(_) => Loader::resume(grown.clone(), options(1, 2), &state),
        };
        match resumed {
            Ok(l) => {
                for b in l.take(300).flatten() {
                    assert!(
                        b.ids.iter().all(|&i| i < grown.num_sequences()),
                        "trial {trial}"
                    );
                }
                ok += 1;
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                refused += 1;
            }
        }
    }
    assert!(ok > 20 && refused > 20, "ok {ok}, refused {refused}");
}
