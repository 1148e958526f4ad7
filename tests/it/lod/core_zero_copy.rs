//! Core 2.0: slices are owned tensors that share their parent's bytes and
//! offsets. A slice of a tensor read from a memory-mapped file outlives the
//! file handle and points into the map; slicing allocates O(levels).

use crate::common;

use crate::tracking;
use lodt::format::save_batch;
use lodt::{Batch, Lod, LodTensor, LodtFile};

/// The bytes `f` allocates on this thread, and its result.
fn allocated_by<R>(f: impl FnOnce() -> R) -> (usize, R) {
    let before = tracking::allocated();
    let r = f();
    (tracking::allocated().wrapping_sub(before), r)
}

use common::seed_tensor;

#[test]
fn a_branch_of_a_mapped_tensor_outlives_the_file_and_points_into_the_map() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seed.lodt");
    save_batch(
        &path,
        &Batch::try_from_tensors([("words", seed_tensor())]).unwrap(),
    )
    .unwrap();

    let file = LodtFile::open(&path).unwrap();
    let map = file.storage().unwrap().bytes().as_ptr_range();
    let map = map.start as usize..map.end as usize;
    let weak = std::sync::Arc::downgrade(file.storage().unwrap());
    let tensor = file.batch(0).unwrap().tensor("words").unwrap();
    let (copied, branch) = allocated_by(|| tensor.branch(&[2]).unwrap());
    drop(tensor);
    drop(file);

    // The map lives on in the branch.
    assert!(weak.upgrade().is_some());
    assert_eq!(branch.as_slice::<i64>().unwrap(), &[10, 11, 12, 13, 14]);
    assert_eq!(branch.lod().to_offsets(), [vec![0, 2, 5]]);
    let data = branch.as_bytes().as_ptr() as usize;
    assert!(map.contains(&data), "the branch's data lies in the map");
    let offsets = branch.lod().level(0).unwrap().raw().as_ptr() as usize;
    assert!(map.contains(&offsets), "so do its offsets");
    // 0 bytes of data copied: the slice allocated only its level list and
    // shape, far less than the 120 bytes of data or 56 of offsets.
    assert!(copied < 120, "a branch allocated {copied} bytes");
    drop(branch);
    assert!(weak.upgrade().is_none(), "the last slice releases the map");
}

#[test]
fn a_lod_holds_one_reference_count_whatever_its_levels() {
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("counts.lodt");
    save_batch(
        &path,
        &Batch::try_from_tensors([("words", seed_tensor())]).unwrap(),
    )
    .unwrap();
    let file = LodtFile::open(&path).unwrap();
    let map = file.storage().unwrap().clone();
    let count = || Arc::strong_count(&map);
    let base = count();
    let batch = file.batch(0).unwrap();
    assert_eq!(
        count(),
        base,
        "reaching a batch of a mapped file takes no count"
    );
    let tensor = batch.tensor("words").unwrap();
    assert_eq!(tensor.lod().num_levels(), 2);
    assert_eq!(
        count(),
        base + 2,
        "one for the LoD (two levels), one for the body"
    );
    let article = tensor.branch(&[2]).unwrap();
    assert_eq!(article.lod().num_levels(), 1);
    assert_eq!(count(), base + 4, "a branch keeping a level: LoD and body");
    let sentence = tensor.branch(&[2, 0]).unwrap();
    assert!(sentence.lod().storage().is_none());
    assert_eq!(
        count(),
        base + 5,
        "a branch keeping no level: its body only"
    );
    let shared = tensor.lod().clone();
    assert!(shared.ptr_eq(tensor.lod()));
    assert_eq!(count(), base + 6);
    drop((batch, tensor, article, sentence, shared));
    assert_eq!(count(), base);

    // A LoD built from lengths is one block too, however many levels.
    let lod = Lod::try_from_lengths(&[vec![2], vec![1, 2], vec![1, 1, 1]]).unwrap();
    assert_eq!(Arc::strong_count(lod.storage().unwrap()), 1);
    let (two_levels, rows) = lod.branch(&[0]).unwrap();
    assert_eq!((two_levels.num_levels(), rows), (2, 0..3));
    assert!(Arc::ptr_eq(
        two_levels.storage().unwrap(),
        lod.storage().unwrap()
    ));
    assert_eq!(Arc::strong_count(lod.storage().unwrap()), 2);
    assert!(Lod::empty().storage().is_none());
}

#[test]
fn slice_level_allocates_o_levels() {
    fn tensor(top: usize) -> LodTensor {
        // Three levels: `top` sequences of 2 of 5 rows each.
        let lod = Lod::try_from_lengths(&[vec![2u64; top], vec![5u64; 2 * top]]).unwrap();
        LodTensor::from_vec(vec![0u8; 10 * top], vec![10 * top], lod).unwrap()
    }
    let small = tensor(100);
    let big = tensor(100_000); // 10^6 rows
    assert_eq!(big.rows(), 1_000_000);
    let (small_bytes, s) = allocated_by(|| small.slice_level(0, 10, 60).unwrap());
    let (big_bytes, b) = allocated_by(|| big.slice_level(0, 10_000, 60_000).unwrap());
    assert_eq!((s.rows(), b.rows()), (500, 500_000));
    assert_eq!(b.lod().to_lengths()[1].len(), 100_000);
    assert_eq!(
        small_bytes, big_bytes,
        "allocation does not grow with the tensor"
    );
    assert!(big_bytes <= 256, "slice_level allocated {big_bytes} bytes");
    assert!(b.buffer().shares_storage(big.buffer()));
}

#[test]
fn tensors_batches_files_readers_and_writers_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<LodTensor>();
    send_sync::<Lod>();
    send_sync::<Batch>();
    send_sync::<LodtFile>();
    send_sync::<lodt::buffer::Buffer>();
    send_sync::<lodt::dataset::Dataset>();
    send::<lodt::format::LodtFileReader>();
    send::<lodt::format::StreamReader<std::fs::File>>();
    send::<lodt::format::Writer<lodt::format::FileSink>>();
    send::<lodt::paddle::PaddleBatchReader>();
    send::<lodt::arrow::ipc::IpcFileReader<std::fs::File>>();
    send::<lodt::arrow::ipc::IpcStreamReader<std::fs::File>>();
    send::<lodt::arrow::parquet::ParquetReader>();
    send::<lodt::batch::BoxBatchReader<'static, lodt::ConvertError>>();
    send::<lodt::batch::BoxBatchWriter<'static, lodt::ConvertError>>();
    send::<lodt::dataset::Loader>();
    send::<lodt::dataset::DatasetWriter>();
    // And a file read on one thread is sliced on others, sharing its map.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.lodt");
    save_batch(
        &path,
        &Batch::try_from_tensors([("words", seed_tensor())]).unwrap(),
    )
    .unwrap();
    let file = std::sync::Arc::new(LodtFile::open(&path).unwrap());
    let sums: Vec<i64> = (0..3)
        .map(|a| {
            let file = file.clone();
            std::thread::spawn(move || {
                let t = file.batch(0).unwrap().tensor("words").unwrap();
                t.branch(&[a])
                    .unwrap()
                    .as_slice::<i64>()
                    .unwrap()
                    .iter()
                    .sum()
            })
        })
        .map(|h| h.join().unwrap())
        .collect();
    assert_eq!(sums, vec![36, 9, 60]);
}
