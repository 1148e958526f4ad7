//! Weighted mixtures of datasets (`spec/DATASET.md`, "Mixtures"): the
//! proportions, the stopping rules, resume (same and another world size),
//! disjoint and complete ranks, and the test vector `spec/vectors/mixture/mixture.json`
//! (regenerated here, `LODT_BLESS=1` rewrites it) checked by the independent
//! `spec/vectors/check_dataset.py --mixture`.
// These tests pin the behaviour of the deprecated packing constructors
// (`PackedLoader`, `Mixture::packed_loader`/`resume_packed`): thin calls of
// the one `Loader` with `LoaderOptions::packing` (dataset/loader_one_type.rs
// checks the two give the same stream).
#![allow(deprecated)]

use crate::dataset_util;

use dataset_util::{open, python_output, shape_of, words_of, write_dataset};
use lodt::dataset::{
    Batching, Dataset, DatasetError, Loader, LoaderOptions, LoaderState, MiniBatch, Mixture,
    MixtureOptions, PackOptions, Remainder, ShuffleOptions, Stop,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// A dataset of `n` sequences in batches of up to 50.
fn source(dir: &Path, n: u64) -> Arc<Dataset> {
    let mut sizes = vec![50; (n / 50) as usize];
    if !n.is_multiple_of(50) {
        sizes.push(n % 50);
    }
    write_dataset(dir, &sizes, 8 * 1024);
    open(dir)
}

fn sources(sizes: &[u64]) -> (Vec<tempfile::TempDir>, Vec<Arc<Dataset>>) {
    let dirs: Vec<_> = sizes.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let sets = dirs
        .iter()
        .zip(sizes)
        .map(|(d, &n)| source(d.path(), n))
        .collect();
    (dirs, sets)
}

fn mixture(sets: &[Arc<Dataset>], weights: &[f64], seed: u64, stop: Stop) -> Arc<Mixture> {
    Arc::new(Mixture::try_new(sets.to_vec(), weights, MixtureOptions { seed, stop }).unwrap())
}

fn options(rank: usize, world_size: usize, batch: usize) -> LoaderOptions {
    LoaderOptions {
        batching: Batching::Sequences(batch),
        shuffle: Some(ShuffleOptions {
            seed: 9,
            buffer: 32,
        }),
        rank,
        world_size,
        ..Default::default()
    }
}

/// Checks that every sequence of a mini-batch is the one its id names.
fn check(m: &Mixture, b: &MiniBatch) {
    let labels = b.batch.get("label").unwrap().as_slice::<i64>().unwrap();
    let words = b.batch.get("words").unwrap();
    for (i, &id) in b.ids.iter().enumerate() {
        let (_, local) = m.source_of(id).unwrap();
        assert_eq!(labels[i] as u64, local, "id {id}");
        let seq = words.sequence(0, i).unwrap();
        assert_eq!(seq.lod().to_lengths(), vec![shape_of(local)]);
        assert_eq!(seq.as_slice::<i64>().unwrap(), &words_of(local)[..]);
    }
}

fn ids(m: &Mixture, loader: Loader) -> Vec<u64> {
    loader
        .flat_map(|b| {
            let b = b.unwrap();
            check(m, &b);
            b.ids
        })
        .collect()
}

#[test]
fn proportions_are_within_binomial_bounds_over_120000_draws() {
    let (_d, sets) = sources(&[700, 300, 150]);
    let weights = [0.5, 0.3, 0.2];
    let draws = 120_000u64;
    let m = mixture(&sets, &weights, 3, Stop::Sequences(draws));
    assert_eq!(m.num_sequences(0), draws);
    let loader = Loader::new(
        m.clone(),
        LoaderOptions {
            batching: Batching::Sequences(4096),
            ..options(0, 1, 1)
        },
    )
    .unwrap();
    let mut counts = [0u64; 3];
    for b in loader {
        for id in b.unwrap().ids {
            counts[m.source_of(id).unwrap().0] += 1;
        }
    }
    assert_eq!(counts.iter().sum::<u64>(), draws);
    for (k, &w) in weights.iter().enumerate() {
        let expected = draws as f64 * w;
        let sigma = (draws as f64 * w * (1.0 - w)).sqrt();
        let off = (counts[k] as f64 - expected).abs();
        assert!(
            off < 5.0 * sigma,
            "source {k}: {} draws, expected {expected} ± 5·{sigma:.1}",
            counts[k]
        );
    }
}

#[test]
fn first_exhausted_delivers_no_sequence_twice_and_ends_at_the_first_exhausted_source() {
    let (_d, sets) = sources(&[400, 60]);
    let m = mixture(&sets, &[1.0, 1.0], 5, Stop::FirstExhausted);
    let all = ids(&m, Loader::new(m.clone(), options(0, 1, 16)).unwrap());
    assert_eq!(all.len() as u64, m.num_sequences(0));
    let mut sorted = all.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), all.len(), "a sequence twice");
    // The small source (ids 400..460) is used up; the large one is not.
    assert_eq!(all.iter().filter(|&&i| i >= 400).count(), 60);
    assert!(all.iter().filter(|&&i| i < 400).count() < 400);
    // Deterministic per seed and epoch; another epoch, another stream.
    assert_eq!(
        all,
        ids(&m, Loader::new(m.clone(), options(0, 1, 16)).unwrap())
    );
    let mut l = Loader::new(m.clone(), options(0, 1, 16)).unwrap();
    l.set_epoch(1).unwrap();
    assert_ne!(all, ids(&m, l));
}

#[test]
fn all_exhausted_repeats_the_small_source_and_delivers_all_of_the_large_one() {
    let (_d, sets) = sources(&[500, 40]);
    let m = mixture(&sets, &[0.5, 0.5], 1, Stop::AllExhausted);
    let all = ids(&m, Loader::new(m.clone(), options(0, 1, 32)).unwrap());
    let mut large: Vec<u64> = all.iter().copied().filter(|&i| i < 500).collect();
    large.sort();
    assert_eq!(
        large,
        (0..500).collect::<Vec<u64>>(),
        "the large source exactly once"
    );
    let small: Vec<u64> = all.iter().copied().filter(|&i| i >= 500).collect();
    assert!(
        small.len() >= 400,
        "{} draws of the small source",
        small.len()
    );
    // Each full pass over the small source is a permutation of it, and the
    // passes are in different orders.
    let passes: Vec<&[u64]> = small.chunks(40).filter(|c| c.len() == 40).collect();
    for p in &passes {
        let mut s = p.to_vec();
        s.sort();
        assert_eq!(s, (500..540).collect::<Vec<u64>>());
    }
    assert_ne!(passes[0], passes[1]);
}

#[test]
fn a_zero_weight_source_is_never_drawn_and_bad_weights_are_errors() {
    let (_d, sets) = sources(&[100, 100]);
    let m = mixture(&sets, &[1.0, 0.0], 2, Stop::AllExhausted);
    let all = ids(&m, Loader::new(m.clone(), options(0, 1, 16)).unwrap());
    assert_eq!(all.len(), 100);
    assert!(all.iter().all(|&i| i < 100));
    let err = |w: &[f64], stop| {
        Mixture::try_new(sets.clone(), w, MixtureOptions { seed: 0, stop })
            .unwrap_err()
            .to_string()
    };
    assert!(err(&[1.0, -1.0], Stop::FirstExhausted).contains("weight 1 is -1"));
    assert!(err(&[f64::INFINITY, 1.0], Stop::FirstExhausted).contains("finite"));
    assert!(err(&[0.0, 0.0], Stop::FirstExhausted).contains("at least one must be positive"));
    assert!(err(&[1.0], Stop::FirstExhausted).contains("2 sources and 1 weights"));
    // A source so rare that the epoch would never end in practice.
    assert!(err(&[1.0, 1e-12], Stop::AllExhausted).contains("MAX_MIXTURE_EPOCH"));
    assert!(
        Mixture::try_new(
            sets.clone(),
            &[1.0, 1e-12],
            MixtureOptions {
                seed: 0,
                stop: Stop::Sequences(10)
            }
        )
        .is_ok()
    );
    // Another schema.
    let other = tempfile::tempdir().unwrap();
    let mut w = lodt::dataset::DatasetWriter::create(other.path(), Default::default()).unwrap();
    let x = lodt::LodTensor::from_vec(vec![1u8; 3], vec![3], Default::default()).unwrap();
    w.write(&lodt::Batch::try_from_tensors([("x", x)]).unwrap())
        .unwrap();
    w.finish().unwrap();
    let odd = vec![
        sets[0].clone(),
        Arc::new(Dataset::open(other.path()).unwrap()),
    ];
    let e = Mixture::try_new(odd, &[1.0, 1.0], Default::default()).unwrap_err();
    assert!(e.to_string().contains("source 1 has another schema"), "{e}");
}

#[test]
fn resuming_mid_epoch_equals_the_uninterrupted_stream() {
    let (_d, sets) = sources(&[230, 70, 40]);
    for stop in [
        Stop::FirstExhausted,
        Stop::AllExhausted,
        Stop::Sequences(333),
    ] {
        let m = mixture(&sets, &[2.0, 1.0, 1.0], 8, stop);
        let opts = options(0, 1, 7);
        let whole = ids(&m, Loader::new(m.clone(), opts.clone()).unwrap());
        for steps in [0, 1, 5, 20] {
            let mut l = Loader::new(m.clone(), opts.clone()).unwrap();
            let mut got: Vec<u64> = l
                .by_ref()
                .take(steps)
                .flat_map(|b| b.unwrap().ids)
                .collect();
            let state = LoaderState::from_json(&l.state().to_json()).unwrap();
            drop(l);
            got.extend(ids(
                &m,
                Loader::resume(m.clone(), opts.clone(), &state).unwrap(),
            ));
            assert_eq!(got, whole, "{stop:?}, {steps} steps");
        }
    }
}

#[test]
fn two_ranks_are_disjoint_and_complete_and_take_the_stream_round_robin() {
    let (_d, sets) = sources(&[300, 120]);
    let m = mixture(&sets, &[0.6, 0.4], 4, Stop::FirstExhausted);
    let one = ids(&m, Loader::new(m.clone(), options(0, 1, 1)).unwrap());
    let ranks: Vec<Vec<u64>> = (0..2)
        .map(|r| ids(&m, Loader::new(m.clone(), options(r, 2, 5)).unwrap()))
        .collect();
    // Rank r takes positions r, r + 2, ... of the single-consumer stream.
    for (r, got) in ranks.iter().enumerate() {
        let expected: Vec<u64> = one.iter().copied().skip(r).step_by(2).collect();
        assert_eq!(got, &expected, "rank {r}");
    }
    let mut union: Vec<u64> = ranks.concat();
    union.sort();
    let mut all = one.clone();
    all.sort();
    assert_eq!(union, all);
    union.dedup();
    assert_eq!(union.len(), one.len(), "the ranks overlap");
}

#[test]
fn a_world_size_change_delivers_the_rest_of_the_epoch_once() {
    let (_d, sets) = sources(&[260, 90]);
    let m = mixture(&sets, &[0.5, 0.5], 6, Stop::FirstExhausted);
    let mut seen = Vec::new();
    let mut states = Vec::new();
    for (rank, steps) in [(0, 4), (1, 2)] {
        let mut l = Loader::new(m.clone(), options(rank, 2, 6)).unwrap();
        seen.extend(l.by_ref().take(steps).flat_map(|b| b.unwrap().ids));
        states.push(l.state());
    }
    let merged = LoaderState::merge(&states).unwrap();
    assert!(merged.mixture.is_some());
    for rank in 0..3 {
        seen.extend(ids(
            &m,
            Loader::resume(m.clone(), options(rank, 3, 6), &merged).unwrap(),
        ));
    }
    let mut whole = ids(&m, Loader::new(m.clone(), options(0, 1, 6)).unwrap());
    seen.sort();
    whole.sort();
    assert_eq!(seen, whole);
}

#[test]
fn ranks_with_remainder_drop_get_equal_counts() {
    let (_d, sets) = sources(&[101, 50]);
    let m = mixture(&sets, &[1.0, 1.0], 2, Stop::Sequences(1001));
    let counts: Vec<usize> = (0..4)
        .map(|r| {
            let o = LoaderOptions {
                remainder: Remainder::Drop,
                ..options(r, 4, 8)
            };
            ids(&m, Loader::new(m.clone(), o).unwrap()).len()
        })
        .collect();
    assert_eq!(counts, vec![250; 4]);
}

#[test]
fn a_state_of_another_mixture_or_of_a_dataset_is_refused() {
    let (_d, sets) = sources(&[80, 40]);
    let m = mixture(&sets, &[1.0, 1.0], 2, Stop::FirstExhausted);
    let mut l = Loader::new(m.clone(), options(0, 1, 4)).unwrap();
    l.next().unwrap().unwrap();
    let state = l.state();
    let json = state.to_json();
    assert_eq!(json["mixture"]["version"], 1);
    assert_eq!(json["mixture"]["weights"], serde_json::json!([1.0, 1.0]));
    let other = mixture(&sets, &[1.0, 2.0], 2, Stop::FirstExhausted);
    let e = Loader::resume(other.clone(), options(0, 1, 4), &state).unwrap_err();
    assert!(matches!(e, DatasetError::BadState { .. }), "{e}");
    assert!(e.to_string().contains("another mixture"), "{e}");
    // A dataset's loader refuses the mixture's state, and the reverse.
    let e = Loader::resume(sets[0].clone(), options(0, 1, 4), &state).unwrap_err();
    assert!(e.to_string().contains("mixture's loader"), "{e}");
    let plain = Loader::new(sets[0].clone(), options(0, 1, 4))
        .unwrap()
        .state();
    let e = Loader::resume(m.clone(), options(0, 1, 4), &plain).unwrap_err();
    assert!(e.to_string().contains("single dataset's loader"), "{e}");
}

#[test]
fn rows_batching_works_on_a_mixture() {
    let (_d, sets) = sources(&[120, 80]);
    let m = mixture(&sets, &[1.0, 1.0], 3, Stop::FirstExhausted);
    let o = LoaderOptions {
        batching: Batching::Rows {
            max_rows: 20,
            tensor: None,
        },
        ..options(0, 1, 1)
    };
    let mut total = 0;
    for b in Loader::new(m.clone(), o).unwrap() {
        let b = b.unwrap();
        check(&m, &b);
        let rows = b.batch.get("words").unwrap().rows();
        assert!(rows <= 20 || b.ids.len() == 1, "{rows} rows");
        total += b.ids.len() as u64;
    }
    assert_eq!(total, m.num_sequences(0));
}

// -- the test vector ---------------------------------------------------------

/// The mixture vector: the dataset vector twice, weights 3 and 1, draw seed
/// 11, shuffle seed 7 buffer 4; per stopping rule, the `(source, id)` of
/// every position of epochs 0 and 1.
fn vector() -> String {
    let dataset = Arc::new(
        Dataset::open(Path::new(env!("CARGO_MANIFEST_DIR")).join("spec/vectors/dataset")).unwrap(),
    );
    let shuffle = ShuffleOptions { seed: 7, buffer: 4 };
    let mut lines = vec![format!(
        "{{\"sources\": [\"../dataset\", \"../dataset\"], \"weights\": [3.0, 1.0], \"seed\": 11, \"shuffle\": {},",
        serde_json::to_value(shuffle).unwrap()
    )];
    let rules = [
        ("first_exhausted", Stop::FirstExhausted),
        ("all_exhausted", Stop::AllExhausted),
        ("sequences_30", Stop::Sequences(30)),
    ];
    let mut streams = BTreeMap::new();
    for (name, stop) in rules {
        let m = Arc::new(
            Mixture::try_new(
                vec![dataset.clone(), dataset.clone()],
                &[3.0, 1.0],
                MixtureOptions { seed: 11, stop },
            )
            .unwrap(),
        );
        let mut epochs = Vec::new();
        for epoch in 0..2 {
            let mut l = Loader::new(
                m.clone(),
                LoaderOptions {
                    shuffle: Some(shuffle),
                    prefetch: 0,
                    ..Default::default()
                },
            )
            .unwrap();
            l.set_epoch(epoch).unwrap();
            let pairs: Vec<serde_json::Value> = l
                .flat_map(|b| b.unwrap().ids)
                .map(|id| {
                    let (k, local) = m.source_of(id).unwrap();
                    serde_json::json!([k, local])
                })
                .collect();
            epochs.push(serde_json::Value::from(pairs));
        }
        streams.insert(name, epochs);
    }
    for (name, epochs) in streams {
        lines.push(format!("\"{name}\": {},", serde_json::Value::from(epochs)));
    }
    // Epoch 1 of all_exhausted packed (section 7.4) by 2 consumers with
    // equal counts: each consumer's mini-batches (mixture ids, bins).
    let m = Arc::new(
        Mixture::try_new(
            vec![dataset.clone(), dataset],
            &[3.0, 1.0],
            MixtureOptions {
                seed: 11,
                stop: Stop::AllExhausted,
            },
        )
        .unwrap(),
    );
    let pack = PackOptions {
        buffer: 3,
        equal_batches: Some(true),
        ..PackOptions::tokens(4)
    };
    let packed: Vec<serde_json::Value> = (0..2)
        .map(|rank| {
            let o = LoaderOptions {
                shuffle: Some(shuffle),
                prefetch: 0,
                rank,
                world_size: 2,
                ..Default::default()
            };
            let mut l = m.packed_loader(o, pack.clone()).unwrap();
            l.set_epoch(1).unwrap();
            l.map(|b| {
                let b = b.unwrap();
                serde_json::json!({"ids": b.batch.ids, "bins": b.bins})
            })
            .collect::<Vec<_>>()
            .into()
        })
        .collect();
    lines.push(
        "\"packed\": {\"stop\": \"all_exhausted\", \"epoch\": 1, \"consumers\": 2, \"capacity\": 4, \"rows\": null, \"buffer\": 3, \"equal\": true,"
            .to_string(),
    );
    lines.push(format!(
        "\"batches\": {}}}}}",
        serde_json::Value::from(packed)
    ));
    lines.join("\n") + "\n"
}

#[test]
fn the_mixture_vector_matches_the_loader() {
    dataset_util::check_vector("mixture/mixture.json", &vector());
}

#[test]
fn an_independent_python_reader_agrees_on_the_mixture_vector() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("spec/vectors/check_dataset.py");
    if let Some(stdout) = python_output(&script, &["--mixture"]) {
        assert_eq!(
            stdout,
            "ok: the mixture streams of first_exhausted, all_exhausted and 30 sequences, and the packed stream, match\n"
        );
    }
}

#[test]
fn an_empty_source_of_weight_0_is_accepted_and_draws_nothing() {
    // An empty dataset (no shards: no schema either), first, between or
    // last, at weight 0: accepted; it draws nothing, and ids skip none.
    let (_dirs, sets) = sources(&[120, 80]);
    let empty_dir = tempfile::tempdir().unwrap();
    write_dataset(empty_dir.path(), &[], 8 * 1024);
    let empty = open(empty_dir.path());
    assert_eq!(empty.num_sequences(), 0);
    let mut trials = 0;
    for at in 0..3 {
        let mut with = sets.clone();
        with.insert(at, empty.clone());
        let mut weights = vec![2.0, 1.0];
        weights.insert(at, 0.0);
        for stop in [
            Stop::FirstExhausted,
            Stop::AllExhausted,
            Stop::Sequences(150),
        ] {
            for seed in 0..4 {
                let m = mixture(&with, &weights, seed, stop);
                assert_eq!(m.schema(), sets[0].schema());
                let got = ids(&m, Loader::new(m.clone(), options(0, 1, 16)).unwrap());
                assert!(!got.is_empty());
                assert!(
                    got.iter().all(|&id| m.source_of(id).unwrap().0 != at),
                    "{at} {stop:?}"
                );
                // take: the sequences of the other sources, as the ids say.
                let taken = m.take(&got[..got.len().min(20)]).unwrap();
                assert_eq!(taken.top_level_rows(), got.len().min(20));
                trials += 1;
            }
        }
    }
    assert_eq!(trials, 36);
    // At a positive weight it is refused, as before.
    let err = Mixture::try_new(
        vec![sets[0].clone(), empty],
        &[1.0, 1.0],
        Default::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("no sequences"), "{err}");
}

#[test]
fn equal_subnormal_weights_draw_one_to_one() {
    let (_dirs, sets) = sources(&[100, 100]);
    for (w, seed) in [(5e-324, 1u64), (1e-320, 2), (1e-310, 3), (1.7e308, 4)] {
        let m = mixture(&sets, &[w, w], seed, Stop::Sequences(4000));
        let got = ids(&m, Loader::new(m.clone(), options(0, 1, 64)).unwrap());
        let first = got.iter().filter(|&&id| id < 100).count();
        // 2,000 expected: sigma about 32.
        assert!(
            (1850..2150).contains(&first),
            "weights {w:e}: {first} of 4000"
        );
    }
}
