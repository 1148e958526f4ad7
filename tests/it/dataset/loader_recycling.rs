//! The loader gathers mini-batches into buffers recycled from mini-batches
//! that were dropped: a mini-batch that is still held never changes (that
//! the buffers are recycled is tested in `src/dataset/loader.rs`, where the
//! dataset's pool can be seen).

use lodt::dataset::{Batching, Dataset, DatasetWriter, Loader, LoaderOptions, ShuffleOptions};
use lodt::{Batch, Lod, LodTensor};
use std::collections::BTreeSet;
use std::sync::Arc;

/// 40 batches of 6 sequences of 40-90 rows of 64 float32 (10-23 KiB per
/// sequence, so mini-batches of 8 are pooled buffers), each value naming
/// its sequence and position.
fn dataset(dir: &std::path::Path) -> Arc<Dataset> {
    let mut w = DatasetWriter::create(dir, Default::default()).unwrap();
    let mut seq = 0u32;
    for _ in 0..40 {
        let lengths: Vec<u64> = (0..6)
            .map(|i| 40 + (seq as u64 * 7 + i * 13) % 51)
            .collect();
        let rows: u64 = lengths.iter().sum();
        let mut values = Vec::new();
        let mut ids = Vec::new();
        for &len in &lengths {
            for r in 0..len {
                ids.push(seq as i64);
                values.extend((0..64).map(|c| (seq * 100_000 + r as u32 * 64 + c) as f32));
            }
            seq += 1;
        }
        let lod = Lod::try_from_lengths(&[lengths]).unwrap();
        let x = LodTensor::from_vec(values, vec![rows as usize, 64], lod.clone()).unwrap();
        let id = LodTensor::from_vec(ids, vec![rows as usize, 1], lod).unwrap();
        w.write(&Batch::try_from_tensors([("x", x), ("id", id)]).unwrap())
            .unwrap();
    }
    w.finish().unwrap();
    Arc::new(Dataset::open(dir).unwrap())
}

fn options(prefetch: usize) -> LoaderOptions {
    LoaderOptions {
        batching: Batching::Sequences(8),
        shuffle: Some(ShuffleOptions {
            seed: 3,
            buffer: 1000,
        }),
        prefetch,
        ..Default::default()
    }
}

/// The mini-batch `ids` should hold: the same sequences gathered anew.
fn expected(dataset: &Dataset, ids: &[u64]) -> Batch {
    dataset.take(ids).unwrap()
}

#[test]
fn held_mini_batches_keep_their_values_while_later_ones_are_gathered() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = dataset(dir.path());
    for prefetch in [0, 2] {
        let mut held = Vec::new();
        for (k, b) in Loader::new(dataset.clone(), options(prefetch))
            .unwrap()
            .enumerate()
        {
            let b = b.unwrap();
            // Every third mini-batch is kept to the end; the others are
            // dropped as the next one comes, and their buffers recycled.
            if k % 3 == 0 {
                held.push(b);
            }
        }
        assert_eq!(held.len(), 10);
        let mut starts = BTreeSet::new();
        for b in &held {
            assert_eq!(b.batch, expected(&dataset, &b.ids), "prefetch {prefetch}");
            starts.insert(b.batch.get("x").unwrap().as_bytes().as_ptr() as usize);
        }
        // Live mini-batches never share a buffer.
        assert_eq!(starts.len(), held.len());
    }
}

#[test]
fn the_previous_mini_batch_is_intact_when_the_next_ones_are_gathered() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = dataset(dir.path());
    for prefetch in [0, 1, 3] {
        let mut previous: Option<lodt::dataset::MiniBatch> = None;
        let mut count = 0;
        for b in Loader::new(dataset.clone(), options(prefetch)).unwrap() {
            let b = b.unwrap();
            if let Some(p) = previous.take() {
                // Checked after the next one was gathered (and, with a
                // prefetch thread, while more are being gathered).
                assert_eq!(p.batch, expected(&dataset, &p.ids), "prefetch {prefetch}");
            }
            count += 1;
            previous = Some(b);
        }
        assert_eq!(count, 30);
    }
}
