//! Packing (`spec/DATASET.md` 7.4): every sequence exactly once, the budget
//! kept, the efficiency on benchmark-like data, exact resume, varlen views.
// These tests pin the behaviour of the deprecated packing constructors
// (`PackedLoader`, `Mixture::packed_loader`/`resume_packed`): thin calls of
// the one `Loader` with `LoaderOptions::packing` (dataset/loader_one_type.rs
// checks the two give the same stream).
#![allow(deprecated)]

use crate::dataset_util;

use dataset_util::{TestRng, check, open, store, write_dataset};
use lodt::dataset::{
    DatasetWriter, DatasetWriterOptions, LoaderOptions, LoaderState, PackOptions, PackedBatch,
    PackedLoader, ShuffleOptions, varlen,
};
use lodt::{Batch, Lod, LodTensor};

const SIZES: [u64; 12] = [17, 3, 0, 25, 9, 14, 1, 30, 22, 11, 19, 8];

fn options(rank: usize, world_size: usize, prefetch: usize) -> LoaderOptions {
    LoaderOptions {
        shuffle: Some(ShuffleOptions {
            seed: 9,
            buffer: 32,
        }),
        rank,
        world_size,
        prefetch,
        ..Default::default()
    }
}

fn packs() -> Vec<PackOptions> {
    let words = |capacity, rows, buffer| PackOptions {
        capacity,
        rows,
        buffer,
        tensor: Some("words".into()),
        equal_batches: None,
        truncate: false,
    };
    vec![words(24, None, 10), words(9, Some(3), 7), words(5, None, 1)]
}

/// The rows of `words` per bin of a packed batch.
fn bin_rows(b: &PackedBatch) -> Vec<usize> {
    let words = b.batch.batch.get("words").unwrap();
    b.bins
        .windows(2)
        .map(|w| words.slice_top(w[0], w[1]).unwrap().rows())
        .collect()
}

#[test]
fn every_sequence_once_and_every_bin_within_its_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &SIZES, 4 * 1024);
    let dataset = open(dir.path());
    for pack in packs() {
        for world in [1usize, 3] {
            let mut seen = Vec::new();
            for rank in 0..world {
                let loader =
                    PackedLoader::new(dataset.clone(), options(rank, world, 2), pack.clone())
                        .unwrap();
                for b in loader {
                    let b = b.unwrap();
                    check(&b.batch);
                    if let Some(r) = pack.rows {
                        assert!(b.bins.len() - 1 <= r, "{:?}", b.bins);
                    }
                    for (rows, w) in bin_rows(&b).iter().zip(b.bins.windows(2)) {
                        // Over capacity only as a sequence alone.
                        assert!(
                            *rows <= pack.capacity || w[1] - w[0] == 1,
                            "{pack:?}: {rows} rows"
                        );
                    }
                    seen.extend(b.batch.ids);
                }
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "{pack:?} world {world}");
        }
    }
}

#[test]
fn resuming_after_any_mini_batch_gives_the_identical_rest() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &SIZES, 4 * 1024);
    let dataset = open(dir.path());
    let mut rng = TestRng(77);
    for pack in packs() {
        let all: Vec<Vec<u64>> = PackedLoader::new(dataset.clone(), options(1, 2, 0), pack.clone())
            .unwrap()
            .map(|b| b.unwrap().batch.ids)
            .collect();
        assert!(all.len() > 3, "{pack:?}: {} mini-batches", all.len());
        for _ in 0..6 {
            let k = rng.below(all.len() as u64 + 1) as usize;
            let mut a = PackedLoader::new(dataset.clone(), options(1, 2, 3), pack.clone()).unwrap();
            for _ in 0..k {
                a.next().unwrap().unwrap();
            }
            let json = a.state().to_json();
            // Two ranks: equal counts (section 7.4), a version-3 state.
            assert_eq!(json["version"], 3);
            assert_eq!(json["packing"]["equal"], true);
            let state = LoaderState::from_json(&json).unwrap();
            let b = PackedLoader::resume(dataset.clone(), options(1, 2, 1), pack.clone(), &state)
                .unwrap();
            // Until it delivers, a resumed loader's state is the one it resumed from.
            assert_eq!(b.state(), state);
            let rest: Vec<Vec<u64>> = b.map(|b| b.unwrap().batch.ids).collect();
            assert_eq!(rest, all[k..], "{pack:?} resumed after {k}");
        }
    }
}

#[test]
fn packing_states_are_refused_where_they_do_not_apply() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &SIZES, 4 * 1024);
    let dataset = open(dir.path());
    let pack = packs().remove(0);
    let mut a = PackedLoader::new(dataset.clone(), options(0, 2, 0), pack.clone()).unwrap();
    a.next().unwrap().unwrap();
    let state = a.state();
    // Merging works (one rank's workers); resuming on another world size not.
    let mut b = PackedLoader::new(dataset.clone(), options(1, 2, 0), pack.clone()).unwrap();
    b.next().unwrap().unwrap();
    let merged = LoaderState::merge(&[state.clone(), b.state()]).unwrap();
    assert_eq!(merged.packing.as_ref().unwrap().windows.len(), 2);
    // Another world size needs every consumer's state.
    let err = PackedLoader::resume(dataset.clone(), options(0, 3, 0), pack.clone(), &state)
        .unwrap_err()
        .to_string();
    assert!(err.contains("consumer 1 is missing"), "{err}");
    let plain = lodt::dataset::Loader::new(dataset.clone(), options(1, 2, 0))
        .unwrap()
        .state();
    assert!(LoaderState::merge(&[state.clone(), plain]).is_err());
    // The merged state resumes each consumer exactly.
    let rest: Vec<Vec<u64>> = b.map(|x| x.unwrap().batch.ids).collect();
    let again: Vec<Vec<u64>> =
        PackedLoader::resume(dataset.clone(), options(1, 2, 0), pack.clone(), &merged)
            .unwrap()
            .map(|x| x.unwrap().batch.ids)
            .collect();
    assert_eq!(again, rest);
    // A carry that no loader saved: one id twice would be delivered twice,
    // an id past the epoch does not exist, and more mini-batches delivered
    // than the window has sequences would skip into the next window.
    for (carry, delivered, what) in [
        (vec![0, 0], 0, "sequence 0 twice"),
        (vec![1000], 0, "past the epoch"),
        (vec![], 1000, "delivered 1000 mini-batches"),
    ] {
        let mut bad = state.clone();
        let window = bad.packing.as_mut().unwrap().windows.get_mut(&0).unwrap();
        window.carry = carry;
        window.delivered = delivered;
        let err = PackedLoader::resume(dataset.clone(), options(0, 2, 0), pack.clone(), &bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains(what), "{err}");
    }
    // A state that claims no consumers, and one whose counts exceed their
    // shares, resumed on another world size (which re-plans the windows):
    // refused with the reason, never a panic.
    let mut none = merged.clone();
    none.consumers = 0;
    let err = PackedLoader::resume(dataset.clone(), options(0, 3, 0), pack.clone(), &none)
        .unwrap_err()
        .to_string();
    assert!(err.contains("0 consumers"), "{err}");
    let mut big = merged.clone();
    big.consumed.insert(1, 1 << 40);
    let err = PackedLoader::resume(dataset.clone(), options(0, 3, 0), pack.clone(), &big)
        .unwrap_err()
        .to_string();
    assert!(err.contains("share"), "{err}");
    // Other packing options.
    let other = PackOptions {
        capacity: 25,
        ..pack.clone()
    };
    let err = PackedLoader::resume(dataset.clone(), options(0, 2, 0), other, &state)
        .unwrap_err()
        .to_string();
    assert!(err.contains("capacity"), "{err}");
    // A plain state, and a version 1 state with `packing`.
    let plain = lodt::dataset::Loader::new(dataset.clone(), options(0, 2, 0))
        .unwrap()
        .state();
    assert!(PackedLoader::resume(dataset.clone(), options(0, 2, 0), pack, &plain).is_err());
    let mut json = state.to_json();
    json["version"] = 1.into();
    let err = LoaderState::from_json(&json).unwrap_err().to_string();
    assert!(err.contains("version 1 with `packing`"), "{err}");
}

/// Documents of 5 to 16 sentences of 10 to 51 tokens (bench/peers.py's
/// shape), as `tokens` (int64, LoD documents > sentences > tokens).
fn benchmark_like(dir: &std::path::Path, docs: usize) -> usize {
    let mut rng = TestRng(12);
    let mut w = DatasetWriter::create_in(store(dir), DatasetWriterOptions::default()).unwrap();
    let mut total = 0;
    let mut done = 0;
    while done < docs {
        let n = (4 + rng.below(6) as usize).min(docs - done);
        let sents: Vec<u64> = (0..n).map(|_| 5 + rng.below(12)).collect();
        let toks: Vec<u64> = (0..sents.iter().sum::<u64>())
            .map(|_| 10 + rng.below(42))
            .collect();
        let rows = toks.iter().sum::<u64>() as usize;
        total += rows;
        let lod = Lod::try_from_lengths(&[sents, toks]).unwrap();
        let t = LodTensor::from_vec((0..rows as i64).collect(), vec![rows], lod).unwrap();
        w.write(&Batch::try_from_tensors([("tokens", t)]).unwrap())
            .unwrap();
        done += n;
    }
    w.finish().unwrap();
    total
}

#[test]
fn a_buffer_of_1000_sequences_fills_at_least_98_percent_of_a_16384_token_budget() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = benchmark_like(dir.path(), 6400);
    let dataset = open(dir.path());
    let loader = PackedLoader::new(dataset, options(0, 1, 2), PackOptions::tokens(16384)).unwrap();
    let mut batches = 0usize;
    let mut delivered = 0usize;
    let mut seqs = 0usize;
    for b in loader {
        let b = b.unwrap();
        let t = b.batch.batch.get("tokens").unwrap();
        assert!(t.rows() <= 16384);
        delivered += t.rows();
        seqs += b.batch.ids.len();
        batches += 1;
    }
    assert_eq!((delivered, seqs), (tokens, 6400));
    let efficiency = tokens as f64 / (batches * 16384) as f64;
    println!("efficiency {efficiency:.4} over {batches} mini-batches");
    assert!(efficiency >= 0.98, "efficiency {efficiency}");
}

#[test]
fn varlen_views_of_a_packed_batch_at_every_level() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &SIZES, 4 * 1024);
    let dataset = open(dir.path());
    let pack = PackOptions {
        rows: Some(2),
        ..PackOptions::tokens(12)
    };
    let pack = PackOptions {
        tensor: Some("words".into()),
        ..pack
    };
    let b = PackedLoader::new(dataset, options(0, 1, 0), pack)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let words = b.batch.batch.get("words").unwrap();
    let lengths = words.lod().to_lengths();
    // Level 0: each sequence in rows; level 1: each sentence.
    let rows_per_seq: Vec<u64> = (0..b.batch.ids.len())
        .map(|i| words.slice_top(i, i + 1).unwrap().rows() as u64)
        .collect();
    for (level, lens) in [(0, rows_per_seq), (1, lengths[1].clone())] {
        let v = varlen(words, level).unwrap();
        let mut cu = vec![0i32];
        for l in &lens {
            cu.push(cu.last().unwrap() + *l as i32);
        }
        assert_eq!(v.cu_seqlens, cu, "level {level}");
        assert_eq!(v.max_seqlen as u64, *lens.iter().max().unwrap());
        let pos: Vec<i64> = lens.iter().flat_map(|&l| 0..l as i64).collect();
        assert_eq!(v.position_ids, pos);
    }
    // Per row: level 0 offsets within each row.
    let (cu, starts) = b.row_cu_seqlens("words", 0).unwrap();
    assert_eq!(starts.len(), b.bins.len());
    for (r, w) in b.bins.windows(2).enumerate() {
        let row = &cu[starts[r]..starts[r + 1]];
        assert_eq!(row.len(), w[1] - w[0] + 1);
        let lens: Vec<i32> = (w[0]..w[1])
            .map(|i| words.slice_top(i, i + 1).unwrap().rows() as i32)
            .collect();
        let mut expect = vec![0];
        for l in lens {
            expect.push(expect.last().unwrap() + l);
        }
        assert_eq!(row, &expect[..]);
    }
}

#[test]
fn best_fit_takes_the_fullest_bin_that_fits_not_the_first() {
    // 1 fits the bins of 6 (2 free) and of 4 + 3 (1 free): the fuller one.
    assert_eq!(
        lodt::dataset::best_fit(&[6, 4, 3, 1], 8),
        vec![vec![0], vec![1, 2, 3]]
    );
    // Ties: the earliest bin; longer than the capacity: alone.
    assert_eq!(
        lodt::dataset::best_fit(&[3, 3, 1, 20], 4),
        vec![vec![3], vec![0, 2], vec![1]]
    );
}

#[test]
fn a_world_size_change_mid_window_delivers_every_remaining_sequence_once() {
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &SIZES, 4 * 1024);
    let dataset = open(dir.path());
    let mut rng = TestRng(5);
    for pack in packs() {
        for (old, new) in [(2usize, 3usize), (4, 2), (3, 1)] {
            for _ in 0..4 {
                let mut seen = Vec::new();
                let mut states = Vec::new();
                for rank in 0..old {
                    let mut l =
                        PackedLoader::new(dataset.clone(), options(rank, old, 1), pack.clone())
                            .unwrap();
                    for _ in 0..rng.below(6) {
                        if let Some(b) = l.next() {
                            seen.extend(b.unwrap().batch.ids);
                        }
                    }
                    states.push(l.state());
                }
                let merged =
                    LoaderState::from_json(&LoaderState::merge(&states).unwrap().to_json())
                        .unwrap();
                for rank in 0..new {
                    let l = PackedLoader::resume(
                        dataset.clone(),
                        options(rank, new, 2),
                        pack.clone(),
                        &merged,
                    )
                    .unwrap();
                    for b in l {
                        let b = b.unwrap();
                        check(&b.batch);
                        seen.extend(b.batch.ids);
                    }
                }
                seen.sort_unstable();
                assert_eq!(seen, (0..n).collect::<Vec<_>>(), "{pack:?} {old} -> {new}");
            }
        }
    }
}
