//! Issue 28 §3: `prefetch` sizes a queue allocated when the loader starts;
//! 10^8 used to ask for 13.6 GB and abort. It is capped with a clear error.

use lodt::dataset::{Batching, Dataset, DatasetWriter, Loader, LoaderOptions, MAX_PREFETCH};
use lodt::{Batch, Lod, LodTensor};
use std::sync::Arc;

fn dataset(dir: &std::path::Path) -> Arc<Dataset> {
    let mut w = DatasetWriter::create(dir, Default::default()).unwrap();
    let lod = Lod::try_from_lengths(&[vec![1, 2, 3]]).unwrap();
    let x = LodTensor::from_vec((0..6i32).collect(), vec![6], lod).unwrap();
    w.write(&Batch::try_from_tensors([("x", x)]).unwrap())
        .unwrap();
    w.finish().unwrap();
    Arc::new(Dataset::open(dir).unwrap())
}

fn options(prefetch: usize) -> LoaderOptions {
    LoaderOptions {
        prefetch,
        batching: Batching::Sequences(2),
        ..Default::default()
    }
}

#[test]
fn a_huge_prefetch_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = Loader::new(dataset(dir.path()), options(100_000_000))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("prefetch 100000000: at most 1024 mini-batches"),
        "{err}"
    );
}

#[test]
fn prefetch_at_the_cap_reads_everything() {
    let dir = tempfile::tempdir().unwrap();
    let loader = Loader::new(dataset(dir.path()), options(MAX_PREFETCH)).unwrap();
    let ids: Vec<Vec<u64>> = loader.map(|b| b.unwrap().ids).collect();
    assert_eq!(ids, vec![vec![0, 1], vec![2]]);
}
