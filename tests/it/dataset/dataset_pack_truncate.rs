//! Truncation when packing (`spec/DATASET.md` 7.4, "Truncation"): a
//! sequence longer than the capacity is cut to its first rows when asked
//! (aligned tensors too, the cut reported), and delivered whole and alone
//! otherwise, never dropped.
// These tests pin the behaviour of the deprecated packing constructors
// (`PackedLoader`, `Mixture::packed_loader`/`resume_packed`): thin calls of
// the one `Loader` with `LoaderOptions::packing` (dataset/loader_one_type.rs
// checks the two give the same stream).
#![allow(deprecated)]

use crate::dataset_util;

use dataset_util::{TestRng, open, shape_of, words_of, write_dataset};
use lodt::dataset::{
    LoaderOptions, LoaderState, PackOptions, PackedBatch, PackedLoader, ShuffleOptions,
    TRUNCATED_KEY,
};

const SIZES: [u64; 8] = [17, 3, 25, 9, 14, 30, 22, 11];

fn options(rank: usize, world_size: usize) -> LoaderOptions {
    LoaderOptions {
        shuffle: Some(ShuffleOptions {
            seed: 2,
            buffer: 16,
        }),
        rank,
        world_size,
        prefetch: 1,
        ..Default::default()
    }
}

fn pack(capacity: usize, rows: Option<usize>, truncate: bool) -> PackOptions {
    PackOptions {
        rows,
        buffer: 8,
        tensor: Some("words".into()),
        truncate,
        ..PackOptions::tokens(capacity)
    }
}

fn length(id: u64) -> usize {
    shape_of(id).iter().sum::<u64>() as usize
}

/// Checks one packed batch against the sequences' known words: each
/// sequence whole, or with `k`, its first `k` words when longer.
fn check_words(b: &PackedBatch, k: Option<usize>) {
    let words = b.batch.batch.get("words").unwrap();
    let label = b.batch.batch.get("label").unwrap();
    let labels = label.as_slice::<i64>().unwrap();
    let mut expect_cut = Vec::new();
    for (i, &id) in b.batch.ids.iter().enumerate() {
        assert_eq!(labels[i], id as i64, "a label is kept whole");
        let seq = words.slice_top(i, i + 1).unwrap();
        let full = words_of(id);
        let keep = k.map_or(full.len(), |k| full.len().min(k));
        assert_eq!(
            seq.as_slice::<i64>().unwrap(),
            &full[..keep],
            "sequence {id}"
        );
        if keep < full.len() {
            expect_cut.push((id, full.len()));
        }
    }
    assert_eq!(b.truncated, expect_cut);
    let text: Vec<String> = expect_cut.iter().map(|(i, r)| format!("{i}:{r}")).collect();
    assert_eq!(
        b.batch.batch.metadata().get(TRUNCATED_KEY).cloned(),
        (!text.is_empty()).then(|| text.join(","))
    );
}

#[test]
fn truncation_cuts_long_sequences_to_the_capacity_and_reports_each_cut() {
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &SIZES, 4 * 1024);
    let dataset = open(dir.path());
    let long = (0..n).filter(|&i| length(i) > 5).count();
    assert!(long > 20, "{long} long sequences");
    for p in [pack(5, None, true), pack(5, Some(3), true)] {
        for world in [1, 2] {
            let mut seen = Vec::new();
            let mut cuts = 0;
            for rank in 0..world {
                for b in
                    PackedLoader::new(dataset.clone(), options(rank, world), p.clone()).unwrap()
                {
                    let b = b.unwrap();
                    check_words(&b, Some(5));
                    let words = b.batch.batch.get("words").unwrap();
                    for w in b.bins.windows(2) {
                        assert!(words.slice_top(w[0], w[1]).unwrap().rows() <= 5);
                    }
                    cuts += b.truncated.len();
                    seen.extend(b.batch.ids);
                }
            }
            assert_eq!(cuts, long, "{p:?}");
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "{p:?} world {world}");
        }
    }
}

#[test]
fn without_truncation_a_long_sequence_comes_whole_and_alone_never_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &SIZES, 4 * 1024);
    let dataset = open(dir.path());
    for p in [pack(5, None, false), pack(5, Some(3), false)] {
        let mut seen = Vec::new();
        let mut rows = 0;
        for b in PackedLoader::new(dataset.clone(), options(0, 1), p.clone()).unwrap() {
            let b = b.unwrap();
            check_words(&b, None);
            for w in b.bins.windows(2) {
                let bin: usize = b.batch.ids[w[0]..w[1]].iter().map(|&i| length(i)).sum();
                assert!(bin <= 5 || w[1] - w[0] == 1, "{p:?}: a bin of {bin} rows");
            }
            rows += b.batch.batch.get("words").unwrap().rows();
            seen.extend(b.batch.ids);
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..n).collect::<Vec<_>>());
        assert_eq!(
            rows,
            (0..n).map(length).sum::<usize>(),
            "every token delivered"
        );
    }
}

#[test]
fn resuming_a_truncating_loader_gives_the_identical_rest_and_the_option_must_match() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &SIZES, 4 * 1024);
    let dataset = open(dir.path());
    let mut rng = TestRng(3);
    let p = pack(6, None, true);
    let all: Vec<PackedBatch> = PackedLoader::new(dataset.clone(), options(1, 2), p.clone())
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for _ in 0..5 {
        let k = rng.below(all.len() as u64 + 1) as usize;
        let mut a = PackedLoader::new(dataset.clone(), options(1, 2), p.clone()).unwrap();
        for _ in 0..k {
            a.next().unwrap().unwrap();
        }
        let json = a.state().to_json();
        assert_eq!(json["version"], 3);
        assert_eq!(json["packing"]["truncate"], true);
        let state = LoaderState::from_json(&json).unwrap();
        let rest: Vec<PackedBatch> =
            PackedLoader::resume(dataset.clone(), options(1, 2), p.clone(), &state)
                .unwrap()
                .map(Result::unwrap)
                .collect();
        assert_eq!(rest, all[k..], "resumed after {k}");
    }
    let state = PackedLoader::new(dataset.clone(), options(1, 2), p.clone())
        .unwrap()
        .state();
    let err = PackedLoader::resume(dataset.clone(), options(1, 2), pack(6, None, false), &state)
        .unwrap_err()
        .to_string();
    assert!(err.contains("truncate"), "{err}");
}

#[test]
fn a_world_size_change_of_a_truncating_epoch_delivers_every_remaining_sequence_once() {
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &SIZES, 4 * 1024);
    let dataset = open(dir.path());
    let mut rng = TestRng(12);
    for p in [pack(5, None, true), pack(4, Some(2), true)] {
        for (old, new) in [(3usize, 2usize), (2, 1)] {
            let mut seen = Vec::new();
            let mut states = Vec::new();
            for rank in 0..old {
                let mut l =
                    PackedLoader::new(dataset.clone(), options(rank, old), p.clone()).unwrap();
                for _ in 0..1 + rng.below(6) {
                    seen.extend(l.next().unwrap().unwrap().batch.ids);
                }
                states.push(l.state());
            }
            let merged = LoaderState::merge(&states).unwrap();
            for rank in 0..new {
                for b in
                    PackedLoader::resume(dataset.clone(), options(rank, new), p.clone(), &merged)
                        .unwrap()
                {
                    let b = b.unwrap();
                    check_words(&b, Some(p.capacity));
                    seen.extend(b.batch.ids);
                }
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "{p:?} {old} -> {new}");
        }
    }
}
