//! Packing a mixture's stream (`spec/DATASET.md` 7.4 and 10.5): every
//! position of the mixed stream packed exactly once, ranks disjoint and
//! complete with equal counts, resume (same and another world size) exact.
// These tests pin the behaviour of the deprecated packing constructors
// (`PackedLoader`, `Mixture::packed_loader`/`resume_packed`): thin calls of
// the one `Loader` with `LoaderOptions::packing` (dataset/loader_one_type.rs
// checks the two give the same stream).
#![allow(deprecated)]

use crate::dataset_util;

use dataset_util::{TestRng, open, shape_of, words_of, write_dataset};
use lodt::dataset::{
    Batching, Dataset, Loader, LoaderOptions, LoaderState, Mixture, MixtureOptions, PackOptions,
    PackedBatch, ShuffleOptions, Stop,
};
use std::sync::Arc;

fn sources(sizes: &[u64]) -> (Vec<tempfile::TempDir>, Vec<Arc<Dataset>>) {
    let dirs: Vec<_> = sizes.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let sets = dirs
        .iter()
        .zip(sizes)
        .map(|(d, &n)| {
            let mut sizes = vec![40; (n / 40) as usize];
            if n % 40 != 0 {
                sizes.push(n % 40);
            }
            write_dataset(d.path(), &sizes, 8 * 1024);
            open(d.path())
        })
        .collect();
    (dirs, sets)
}

fn options(rank: usize, world_size: usize) -> LoaderOptions {
    LoaderOptions {
        shuffle: Some(ShuffleOptions {
            seed: 5,
            buffer: 32,
        }),
        rank,
        world_size,
        prefetch: 1,
        ..Default::default()
    }
}

fn packs() -> Vec<PackOptions> {
    let words = |capacity, rows, truncate| PackOptions {
        rows,
        buffer: 16,
        tensor: Some("words".into()),
        truncate,
        ..PackOptions::tokens(capacity)
    };
    vec![words(24, None, false), words(6, Some(3), true)]
}

/// Checks every sequence of a packed mini-batch against its mixture id
/// (cut to `capacity` rows when truncating).
fn check(m: &Mixture, b: &PackedBatch, pack: &PackOptions) {
    let labels = b
        .batch
        .batch
        .get("label")
        .unwrap()
        .as_slice::<i64>()
        .unwrap();
    let words = b.batch.batch.get("words").unwrap();
    for (i, &id) in b.batch.ids.iter().enumerate() {
        let (_, local) = m.source_of(id).unwrap();
        assert_eq!(labels[i], local as i64);
        let full = words_of(local);
        let keep = if pack.truncate {
            full.len().min(pack.capacity)
        } else {
            full.len()
        };
        let seq = words.slice_top(i, i + 1).unwrap();
        assert_eq!(seq.as_slice::<i64>().unwrap(), &full[..keep], "id {id}");
        if keep == full.len() {
            assert_eq!(
                seq.lod().to_lengths(),
                vec![vec![shape_of(local).len() as u64], shape_of(local)]
            );
        }
    }
}

/// The mixed stream's ids (one consumer, unpacked), sorted.
fn stream(m: &Arc<Mixture>) -> Vec<u64> {
    let o = LoaderOptions {
        batching: Batching::Sequences(7),
        ..options(0, 1)
    };
    let mut ids: Vec<u64> = Loader::new(m.clone(), o)
        .unwrap()
        .flat_map(|b| b.unwrap().ids)
        .collect();
    ids.sort_unstable();
    ids
}

#[test]
fn ranks_pack_a_mixture_disjoint_and_complete_with_equal_counts() {
    let (_dirs, sets) = sources(&[90, 40, 25]);
    for stop in [
        Stop::FirstExhausted,
        Stop::AllExhausted,
        Stop::Sequences(300),
    ] {
        let m = Arc::new(
            Mixture::try_new(
                sets.clone(),
                &[2.0, 1.0, 1.0],
                MixtureOptions { seed: 3, stop },
            )
            .unwrap(),
        );
        let expect = stream(&m);
        for pack in packs() {
            for world in [1usize, 2, 3] {
                let mut seen = Vec::new();
                let mut counts = Vec::new();
                for rank in 0..world {
                    let mut n = 0;
                    for b in m.packed_loader(options(rank, world), pack.clone()).unwrap() {
                        let b = b.unwrap();
                        check(&m, &b, &pack);
                        seen.extend(b.batch.ids);
                        n += 1;
                    }
                    counts.push(n);
                }
                assert!(
                    counts.iter().all(|&c| c == counts[0]),
                    "{stop:?} {pack:?} {counts:?}"
                );
                seen.sort_unstable();
                assert_eq!(seen, expect, "{stop:?} {pack:?} world {world}");
            }
        }
    }
}

#[test]
fn a_packed_mixture_resumes_into_the_identical_rest_on_the_same_and_another_world() {
    let (_dirs, sets) = sources(&[70, 30]);
    let m = Arc::new(
        Mixture::try_new(
            sets.clone(),
            &[1.0, 1.0],
            MixtureOptions {
                seed: 8,
                stop: Stop::AllExhausted,
            },
        )
        .unwrap(),
    );
    let expect = stream(&m);
    let mut rng = TestRng(21);
    for pack in packs() {
        // The same world: the exact rest.
        let all: Vec<PackedBatch> = m
            .packed_loader(options(1, 2), pack.clone())
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for _ in 0..4 {
            let k = rng.below(all.len() as u64 + 1) as usize;
            let mut a = m.packed_loader(options(1, 2), pack.clone()).unwrap();
            for _ in 0..k {
                a.next().unwrap().unwrap();
            }
            let json = a.state().to_json();
            assert!(json["mixture"].is_object() && json["packing"].is_object());
            let state = LoaderState::from_json(&json).unwrap();
            let rest: Vec<PackedBatch> = m
                .resume_packed(options(1, 2), pack.clone(), &state)
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert_eq!(rest, all[k..], "{pack:?} resumed after {k}");
            // A single dataset's packing loader refuses a mixture's state.
            assert!(
                lodt::dataset::PackedLoader::resume(
                    sets[0].clone(),
                    options(1, 2),
                    pack.clone(),
                    &state
                )
                .is_err()
            );
        }
        // Another world: 3 ranks stop out of step, 2 resume; the union is
        // the whole stream.
        let mut seen = Vec::new();
        let mut states = Vec::new();
        for rank in 0..3 {
            let mut l = m.packed_loader(options(rank, 3), pack.clone()).unwrap();
            for _ in 0..1 + rank * 2 {
                seen.extend(l.next().unwrap().unwrap().batch.ids);
            }
            states.push(l.state());
        }
        let merged = LoaderState::merge(&states).unwrap();
        let mut counts = Vec::new();
        for rank in 0..2 {
            let mut n = 0;
            for b in m
                .resume_packed(options(rank, 2), pack.clone(), &merged)
                .unwrap()
            {
                let b = b.unwrap();
                check(&m, &b, &pack);
                seen.extend(b.batch.ids);
                n += 1;
            }
            counts.push(n);
        }
        assert_eq!(counts[0], counts[1], "{pack:?}");
        seen.sort_unstable();
        assert_eq!(seen, expect, "{pack:?} 3 -> 2");
    }
}
