//! Zero copy from a memory-mapped `.lodt` file to Arrow: the array's buffers
//! are the map's own bytes.
#![cfg(feature = "arrow")]

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Float32Type;
use lodt::arrow::{ArrowOptions, ListType, lodt_tensor_to_arrow};
use lodt::{Batch, Lod, LodTensor, LodtFile};

fn inside(storage: &[u8], ptr: *const u8) -> bool {
    storage.as_ptr_range().contains(&ptr)
}

#[test]
fn large_list_from_a_mapped_file_uses_the_map() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("words.lodt");
    let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    let values: Vec<f32> = (0..30).map(|i| i as f32 * 0.5).collect();
    let words = LodTensor::from_vec(values.clone(), vec![15, 2], lod).unwrap();
    let labels = LodTensor::from_vec(vec![1i64, 0, 1], vec![3], Lod::empty()).unwrap();
    let batch = Batch::try_from_tensors([("words", words), ("labels", labels)]).unwrap();
    lodt::format::save_batch(&path, &batch).unwrap();

    let file = LodtFile::open(&path).unwrap();
    let map = file.storage().unwrap().bytes();
    let (field, array) = lodt_tensor_to_arrow(&file, 0, "words", &ArrowOptions::default()).unwrap();
    assert_eq!(field.name(), "words");
    let articles = array.as_list::<i64>();
    assert_eq!(articles.len(), 3);
    assert_eq!(articles.value_offsets(), &[0, 3, 4, 6]);
    assert!(inside(map, articles.offsets().inner().inner().as_ptr()));
    let sentences = articles.values().as_list::<i64>();
    assert_eq!(sentences.value_offsets(), &[0, 3, 5, 9, 10, 12, 15]);
    assert!(inside(map, sentences.offsets().inner().inner().as_ptr()));
    let rows = sentences.values().as_fixed_size_list();
    assert_eq!(rows.value_length(), 2);
    let leaf = rows.values().as_primitive::<Float32Type>();
    assert_eq!(leaf.values().as_ref(), values.as_slice());
    assert!(inside(map, leaf.values().inner().as_ptr()));

    // The array outlives the file handle: it holds the map.
    drop(file);
    assert_eq!(leaf.value(29), 14.5);
}

#[test]
fn small_lists_share_values_and_unknown_names_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.lodt");
    let lod = Lod::try_from_lengths(&[vec![1, 2]]).unwrap();
    let t = LodTensor::from_vec(vec![1u16, 2, 3], vec![3], lod).unwrap();
    lodt::format::save_tensor(&path, "x", &t).unwrap();
    let file = LodtFile::open(&path).unwrap();
    let options = ArrowOptions::default().with_list_type(ListType::List);
    let (_, array) = lodt_tensor_to_arrow(&file, 0, "x", &options).unwrap();
    let list = array.as_list::<i32>();
    assert_eq!(list.value_offsets(), &[0, 1, 3]);
    let err = lodt_tensor_to_arrow(&file, 0, "y", &options).unwrap_err();
    assert!(err.to_string().contains("y"), "{err}");
    assert!(lodt_tensor_to_arrow(&file, 1, "x", &options).is_err());
}
