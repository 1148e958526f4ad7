//! Property tests: random LoD tensors (all 13 dtypes, 0-4 LoD levels, empty
//! sequences, element shapes of rank 0-3, 0-D tensors) round-trip exactly
//! through Arrow arrays, Arrow IPC files and streams, and Parquet files.
#![cfg(feature = "parquet")]

use lodt::arrow::ipc::{IpcFileReader, IpcStreamReader, write_ipc_file, write_ipc_stream};
use lodt::arrow::parquet::{ParquetReader, write_parquet};
use lodt::arrow::{ArrowOptions, ArrowWriteOptions, ListType, from_arrow, to_arrow};
use lodt::{Batch, DType, Lod, LodTensor};
use proptest::collection::vec;
use proptest::prelude::*;

/// LoD lengths for `levels` levels: 1-3 top-level sequences, each level's
/// lengths 0-3, and every level above the last holding at least one entry (a
/// LoD level needs at least one sequence).
fn lengths(levels: usize) -> BoxedStrategy<Vec<Vec<u64>>> {
    if levels == 0 {
        return Just(Vec::new()).boxed();
    }
    let mut strategy = vec(0u64..=3, 1..=3).prop_map(|l| vec![l]).boxed();
    for _ in 1..levels {
        strategy = strategy
            .prop_flat_map(|mut ls| {
                let last = ls.last_mut().unwrap();
                if last.iter().sum::<u64>() == 0 {
                    last[0] = 1;
                }
                let n = last.iter().sum::<u64>() as usize;
                vec(0u64..=3, n).prop_map(move |next| {
                    let mut ls = ls.clone();
                    ls.push(next);
                    ls
                })
            })
            .boxed();
    }
    strategy
}

fn data(dtype: DType, len: usize) -> BoxedStrategy<Vec<u8>> {
    if dtype == DType::Bool {
        vec(0u8..=1, len).boxed()
    } else {
        vec(any::<u8>(), len * dtype.size()).boxed()
    }
}

/// A random tensor: dtype, LoD, element shape, data.
fn tensor() -> impl Strategy<Value = LodTensor> {
    let dtype = proptest::sample::select(DType::ALL.to_vec());
    let scalar = (dtype.clone(), any::<bool>()).prop_flat_map(|(dtype, _)| {
        data(dtype, 1).prop_map(move |bytes| {
            LodTensor::from_bytes(dtype, vec![], &bytes, Lod::empty()).unwrap()
        })
    });
    let dim = prop_oneof![9 => 1usize..=3, 1 => Just(0usize)];
    let shaped = (dtype, 0usize..=4, vec(dim, 0..=3), 0usize..=5).prop_flat_map(
        |(dtype, levels, element_shape, flat_rows)| {
            lengths(levels).prop_flat_map(move |lengths| {
                let rows = match lengths.last() {
                    Some(last) => last.iter().sum::<u64>() as usize,
                    None => flat_rows,
                };
                let element: usize = element_shape.iter().product();
                let lod = Lod::try_from_lengths(&lengths).unwrap();
                let mut shape = vec![rows];
                shape.extend_from_slice(&element_shape);
                data(dtype, rows * element).prop_map(move |bytes| {
                    LodTensor::from_bytes(dtype, shape.clone(), &bytes, lod.clone()).unwrap()
                })
            })
        },
    );
    prop_oneof![1 => scalar, 12 => shaped]
}

fn batch_of(tensor: &LodTensor) -> Batch {
    let mut batch = Batch::try_from_tensors([("t", tensor.clone())]).unwrap();
    batch
        .metadata_mut()
        .insert("dtype".into(), tensor.dtype().to_string());
    batch
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arrow_arrays_round_trip(t in tensor()) {
        for list_type in [ListType::LargeList, ListType::List] {
            let options = ArrowOptions::default().with_list_type(list_type);
            let (field, array) = to_arrow("t", &t, &options).unwrap();
            let expected_rows = match t.lod().level(0) {
                Some(level) => level.len() - 1,
                None => t.rows(),
            };
            prop_assert_eq!(array.len(), expected_rows);
            let back = from_arrow(&field, &array, &options).unwrap();
            prop_assert_eq!(&back, &t);
            // The copying path of views agrees with the zero-copy path.
            let (vfield, varray) = to_arrow("t", &t, &options).unwrap();
            prop_assert_eq!(&vfield, &field);
            prop_assert_eq!(varray.to_data(), array.to_data());
        }
    }

    #[test]
    fn sliced_views_round_trip(t in tensor(), begin in 0usize..3, len in 0usize..3) {
        // A top-level slice (its offsets do not start at 0) converts to the
        // same tensor as its owned, rebased copy.
        if t.lod().num_levels() > 0 {
            let n = t.lod().num_sequences(0).unwrap();
            let begin = begin.min(n - 1);
            let end = (begin + len.max(1)).min(n);
            let view = t.slice_level(0, begin, end).unwrap();
            let (field, array) = to_arrow("s", &view, &ArrowOptions::default()).unwrap();
            let read = from_arrow(&field, &array, &ArrowOptions::default());
            // A slice can leave a lower level with no sequence at all (a level
            // `[0]`, LOD.md §3.1): it reads back as exactly that.
            prop_assert_eq!(read.unwrap(), view.to_owned());
            // And slicing the Arrow array agrees too.
            let (field, array) = to_arrow("s", &t, &ArrowOptions::default()).unwrap();
            let sliced = array.slice(begin, end - begin);
            let back = from_arrow(&field, &sliced, &ArrowOptions::default()).unwrap();
            prop_assert_eq!(back, view.to_owned());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn parquet_files_round_trip(t in tensor(), list in any::<bool>()) {
        let list_type = if list { ListType::List } else { ListType::LargeList };
        let options = ArrowWriteOptions::default().with_arrow(ArrowOptions::default().with_list_type(list_type));
        let batch = batch_of(&t);
        let file = tempfile::tempfile().unwrap();
        let items = [Ok::<_, lodt::Error>(batch.clone()), Ok(batch.clone())];
        let (_, stats) = write_parquet(file.try_clone().unwrap(), items, &options).unwrap();
        prop_assert_eq!(stats.batches, 2);
        let reader = ParquetReader::try_new(file, &ArrowOptions::default()).unwrap();
        let back: Vec<Batch> = reader.collect::<Result<_, _>>().unwrap();
        if t.top_level_rows() == 0 {
            // Parquet has no empty row groups: a batch with no rows is not stored.
            prop_assert!(back.is_empty());
        } else {
            prop_assert_eq!(back, vec![batch.clone(), batch]);
        }
    }

    #[test]
    fn ipc_files_and_streams_round_trip(t in tensor()) {
        let batch = batch_of(&t);
        let items = || [Ok::<_, lodt::Error>(batch.clone()), Ok(batch.clone())];
        let (bytes, _) = write_ipc_file(Vec::new(), items(), &ArrowWriteOptions::default()).unwrap();
        let reader = IpcFileReader::try_new(std::io::Cursor::new(bytes), &ArrowOptions::default()).unwrap();
        let back: Vec<Batch> = reader.collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(&back, &vec![batch.clone(), batch.clone()]);
        let (bytes, _) = write_ipc_stream(Vec::new(), items(), &ArrowWriteOptions::default()).unwrap();
        let reader = IpcStreamReader::try_new(&bytes[..], &ArrowOptions::default()).unwrap();
        let back: Vec<Batch> = reader.collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(back, vec![batch.clone(), batch]);
    }
}
