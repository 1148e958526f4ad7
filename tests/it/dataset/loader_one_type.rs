//! One loader type: `Loader` with `LoaderOptions::packing` is the packing
//! loader, a `Feed` makes it read a dataset or a mixture, and `at_epoch`
//! starts an epoch directly. The deprecated constructors (`PackedLoader`,
//! `Mixture::{loader, resume, packed_loader, resume_packed}`) give the same
//! streams and states.
#![allow(deprecated)]

use crate::dataset_util;

use dataset_util::{open, write_dataset};
use lodt::dataset::{
    Feed, Loader, LoaderOptions, Mixture, MixtureOptions, PackOptions, PackedLoader,
    ShuffleOptions, Stop,
};
use std::sync::Arc;

const SIZES: [u64; 9] = [17, 3, 25, 9, 14, 1, 30, 22, 11];

fn options(rank: usize, world_size: usize) -> LoaderOptions {
    LoaderOptions {
        shuffle: Some(ShuffleOptions {
            seed: 4,
            buffer: 16,
        }),
        rank,
        world_size,
        prefetch: 1,
        ..Default::default()
    }
}

fn pack() -> PackOptions {
    PackOptions {
        rows: Some(3),
        buffer: 8,
        tensor: Some("words".into()),
        ..PackOptions::tokens(20)
    }
}

fn packed(options: LoaderOptions) -> LoaderOptions {
    LoaderOptions {
        packing: Some(pack()),
        ..options
    }
}

/// Every packed mini-batch of a loader: ids, bins, truncations.
fn drain(mut l: Loader) -> Vec<(Vec<u64>, Vec<usize>)> {
    let mut out = Vec::new();
    while let Some(b) = l.next_packed() {
        let b = b.unwrap();
        out.push((b.batch.ids, b.bins));
    }
    out
}

#[test]
fn a_packing_loader_is_the_packed_loader_and_resumes_the_same() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &SIZES, 2048);
    let dataset = open(dir.path());
    for rank in 0..2 {
        let new = drain(Loader::new(dataset.clone(), packed(options(rank, 2))).unwrap());
        let old: Vec<(Vec<u64>, Vec<usize>)> =
            PackedLoader::new(dataset.clone(), options(rank, 2), pack())
                .unwrap()
                .map(|b| b.map(|b| (b.batch.ids, b.bins)).unwrap())
                .collect();
        assert!(new.len() > 2, "too few mini-batches to test: {new:?}");
        assert_eq!(new, old);
        // Bins are `[R, L]` rows: at most 3 per mini-batch.
        assert!(new.iter().all(|(_, bins)| bins.len() <= 4));
        // The state after two mini-batches resumes the rest, through either
        // constructor, and the states are the same.
        let mut a = Loader::new(dataset.clone(), packed(options(rank, 2))).unwrap();
        let mut b = PackedLoader::new(dataset.clone(), options(rank, 2), pack()).unwrap();
        for _ in 0..2 {
            a.next().unwrap().unwrap();
            b.next().unwrap().unwrap();
        }
        let state = a.state();
        assert_eq!(state, b.state());
        assert_eq!(state.version, 3); // equal counts: on with world size 2
        let rest =
            drain(Loader::resume(dataset.clone(), packed(options(rank, 2)), &state).unwrap());
        assert_eq!(rest, new[2..].to_vec());
        assert_eq!(drain(a), rest);
    }
}

#[test]
fn a_loader_reads_a_mixture_given_as_its_feed() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_dataset(da.path(), &SIZES, 2048);
    write_dataset(db.path(), &SIZES[..4], 2048);
    let sources = vec![open(da.path()), open(db.path())];
    let mixture = Arc::new(
        Mixture::try_new(
            sources,
            &[0.7, 0.3],
            MixtureOptions {
                seed: 8,
                stop: Stop::AllExhausted,
            },
        )
        .unwrap(),
    );
    let ids = |l: Loader| -> Vec<u64> { l.flat_map(|b| b.unwrap().ids).collect() };
    let new = ids(Loader::new(mixture.clone(), options(0, 1)).unwrap());
    assert_eq!(new, ids(mixture.loader(options(0, 1)).unwrap()));
    assert_eq!(new.len() as u64, mixture.num_sequences(0));
    let loader = Loader::new(Feed::from(mixture.clone()), options(0, 1)).unwrap();
    assert!(loader.feed().mixture().is_some() && loader.feed().dataset().is_none());
    // Packed, resumed halfway: the old and the new constructors agree.
    let mut a = Loader::new(mixture.clone(), packed(options(1, 2))).unwrap();
    a.next().unwrap().unwrap();
    let state = a.state();
    let rest = drain(a);
    let new = drain(Loader::resume(mixture.clone(), packed(options(1, 2)), &state).unwrap());
    let old: Vec<(Vec<u64>, Vec<usize>)> = mixture
        .resume_packed(options(1, 2), pack(), &state)
        .unwrap()
        .map(|b| b.map(|b| (b.batch.ids, b.bins)).unwrap())
        .collect();
    assert_eq!((&new, &old), (&rest, &rest));
}

#[test]
fn at_epoch_is_new_then_set_epoch_for_plain_and_packed_loaders() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &SIZES, 2048);
    let dataset = open(dir.path());
    for opts in [options(1, 2), packed(options(1, 2))] {
        let at = Loader::at_epoch(dataset.clone(), opts.clone(), 5).unwrap();
        let mut set = Loader::new(dataset.clone(), opts.clone()).unwrap();
        set.set_epoch(5).unwrap();
        assert_eq!((at.epoch(), at.state()), (5, set.state()));
        assert_eq!(at.options(), &opts);
        let (a, s) = (drain(at), drain(set));
        assert!(!a.is_empty());
        assert_eq!(a, s);
        // Another epoch is another order.
        assert_ne!(a, drain(Loader::new(dataset.clone(), opts).unwrap()));
    }
}
