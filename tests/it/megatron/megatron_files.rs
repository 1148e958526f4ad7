//! Megatron `.bin`/`.idx` pairs written and read back: the bytes are the
//! layout megatron-core writes (checked field by field here, and against
//! megatron-core itself in `python/tests/test_megatron.py`).

use lodt::batch::{BatchWriter, copy};
use lodt::convert::{ConvertOptions, Endpoint, Format, convert};
use lodt::megatron::{MegatronIndex, MegatronReader, MegatronWriter};
use lodt::{Batch, DType, Lod, LodTensor};
use std::path::Path;

fn tokens<T: lodt::Element>(values: Vec<T>, lengths: &[Vec<u64>]) -> LodTensor
where
    Vec<T>: lodt::buffer::ByteStorage,
{
    let n = values.len();
    LodTensor::from_vec(values, vec![n], Lod::try_from_lengths(lengths).unwrap()).unwrap()
}

fn write(prefix: &Path, batches: &[LodTensor]) -> MegatronIndex {
    let mut w = MegatronWriter::create(prefix).unwrap();
    for t in batches {
        w.write(&Batch::try_from_tensors([("tokens", t.clone())]).unwrap())
            .unwrap();
    }
    w.finish().unwrap()
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

#[test]
fn the_index_is_megatron_cores_layout_field_by_field() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("c");
    // Two batches: documents of 2 and 1 sequences, then one of 1.
    write(
        &prefix,
        &[
            tokens(vec![1i32, 2, 3, 4, 5, 6], &[vec![2, 1], vec![3, 2, 1]]),
            tokens(vec![7i32, 8], &[vec![1], vec![2]]),
        ],
    );
    let idx = std::fs::read(dir.path().join("c.idx")).unwrap();
    assert_eq!(&idx[..9], b"MMIDIDX\x00\x00");
    assert_eq!(le_u64(&idx, 9), 1, "version");
    assert_eq!(idx[17], 4, "int32's code");
    assert_eq!(le_u64(&idx, 18), 4, "sequences");
    assert_eq!(
        le_u64(&idx, 26),
        4,
        "document indices: 0 and one per document"
    );
    let lengths: Vec<i32> = idx[34..50]
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(lengths, [3, 2, 1, 2]);
    let pointers: Vec<u64> = (0..4).map(|i| le_u64(&idx, 50 + 8 * i)).collect();
    assert_eq!(pointers, [0, 12, 20, 24]);
    let documents: Vec<u64> = (0..4).map(|i| le_u64(&idx, 82 + 8 * i)).collect();
    assert_eq!(documents, [0, 2, 3, 4]);
    assert_eq!(idx.len(), 82 + 32);
    let bin = std::fs::read(dir.path().join("c.bin")).unwrap();
    let values: Vec<i32> = bin
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(values, [1, 2, 3, 4, 5, 6, 7, 8]);
}

#[test]
fn documents_of_many_sequences_read_back_as_2_levels_and_of_one_as_1_level() {
    let dir = tempfile::tempdir().unwrap();
    let two = tokens(vec![1u16, 2, 3, 4, 5], &[vec![1, 2], vec![2, 1, 2]]);
    write(&dir.path().join("two"), std::slice::from_ref(&two));
    let batch = MegatronReader::open(dir.path().join("two.bin"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(batch.get("tokens"), Some(&two));
    let one = tokens(vec![9i64, 8, 7], &[vec![2, 1]]);
    write(&dir.path().join("one"), std::slice::from_ref(&one));
    let mut reader = MegatronReader::open(dir.path().join("one")).unwrap();
    assert!(reader.index().one_sequence_per_document());
    let back = reader.next().unwrap().unwrap();
    assert_eq!(back.get("tokens").unwrap().lod().num_levels(), 1);
    assert_eq!(back.get("tokens"), Some(&one));
    assert!(reader.next().is_none());
}

#[test]
fn every_megatron_dtype_round_trips_and_others_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for dtype in DType::ALL {
        let t = LodTensor::try_new(
            dtype,
            vec![3],
            lodt::buffer::AlignedBytes::zeroed(3 * dtype.size()),
            Lod::try_from_lengths(&[vec![1, 2]]).unwrap(),
        )
        .unwrap();
        let prefix = dir.path().join(format!("{dtype}"));
        let mut w = MegatronWriter::create(&prefix).unwrap();
        let result = w.write(&Batch::try_from_tensors([("t", t.clone())]).unwrap());
        match lodt::megatron::dtype_code(dtype) {
            Some(code) => {
                result.unwrap();
                w.finish().unwrap();
                let idx = std::fs::read(prefix.with_extension("idx")).unwrap();
                assert_eq!(idx[17], code);
                let back = MegatronReader::open(&prefix)
                    .unwrap()
                    .next()
                    .unwrap()
                    .unwrap();
                assert_eq!(back.get("tokens"), Some(&t), "{dtype}");
            }
            None => {
                let err = result.unwrap_err().to_string();
                assert!(err.contains(&format!("not {dtype}")), "{err}");
            }
        }
    }
}

#[test]
fn tokens_are_views_of_the_data_files_map() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("c");
    write(&prefix, &[tokens((0..1000i32).collect(), &[vec![10; 100]])]);
    let mut reader = MegatronReader::open(&prefix).unwrap().with_batch_bytes(400);
    let (a, b) = (
        reader.next().unwrap().unwrap(),
        reader.next().unwrap().unwrap(),
    );
    let (a, b) = (a.get("tokens").unwrap(), b.get("tokens").unwrap());
    assert_eq!(
        a.lod().num_sequences(0).unwrap(),
        10,
        "10 documents of 10 int32 tokens in 400 bytes"
    );
    assert_eq!(b.as_slice::<i32>().unwrap()[0], 100);
    assert!(
        a.buffer().shares_storage(b.buffer()),
        "both batches view one map"
    );
    assert_eq!(reader.count(), 8);
}

#[test]
fn batches_hold_whole_documents_and_a_big_one_alone() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("c");
    write(&prefix, &[tokens(vec![1u8; 25], &[vec![1, 20, 2, 2]])]);
    let rows: Vec<usize> = MegatronReader::open(&prefix)
        .unwrap()
        .with_batch_bytes(4)
        .map(|b| {
            b.unwrap()
                .get("tokens")
                .unwrap()
                .lod()
                .num_sequences(0)
                .unwrap()
        })
        .collect();
    assert_eq!(rows, [1, 1, 2]);
}

#[test]
fn a_copy_through_reader_and_writer_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let docs: Vec<u64> = (0..300).map(|i| 1 + i % 7).collect();
    let total: u64 = docs.iter().sum();
    write(
        &a,
        &[tokens((0..total as i32).collect(), &[vec![1; 300], docs])],
    );
    let reader = MegatronReader::open(&a).unwrap().with_batch_bytes(100);
    copy(
        reader,
        MegatronWriter::create(dir.path().join("b")).unwrap(),
        |_| {},
    )
    .unwrap();
    for ext in ["bin", "idx"] {
        assert_eq!(
            std::fs::read(dir.path().join(format!("a.{ext}"))).unwrap(),
            std::fs::read(dir.path().join(format!("b.{ext}"))).unwrap(),
            "{ext}"
        );
    }
}

#[test]
fn convert_reaches_megatron_by_the_index_file_and_through_a_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let t = tokens((0..40i32).collect(), &[vec![2, 2], vec![10, 10, 10, 10]]);
    write(&d.join("corpus"), std::slice::from_ref(&t));
    assert_eq!(
        Endpoint::input(d.join("corpus.idx")).unwrap(),
        Endpoint::File(Format::Megatron)
    );
    assert_eq!(Format::sniff(d.join("corpus.idx")), Some(Format::Megatron));
    let options = ConvertOptions::default();
    convert(d.join("corpus.idx"), d.join("train"), &options, |_| {}).unwrap();
    let ds = lodt::dataset::Dataset::open(d.join("train")).unwrap();
    assert_eq!(ds.num_sequences(), 2, "two documents");
    convert(d.join("train"), d.join("back.idx"), &options, |_| {}).unwrap();
    for ext in ["bin", "idx"] {
        assert_eq!(
            std::fs::read(d.join(format!("corpus.{ext}"))).unwrap(),
            std::fs::read(d.join(format!("back.{ext}"))).unwrap(),
            "{ext}"
        );
    }
    // Another tensor name on the way in.
    let named = ConvertOptions {
        names: Some(vec!["ids".into()]),
        ..Default::default()
    };
    convert(d.join("corpus.bin"), d.join("named.lodt"), &named, |_| {}).unwrap();
    let f = lodt::LodtFile::open(d.join("named.lodt")).unwrap();
    assert_eq!(f.read_batch(0).unwrap().get("ids"), Some(&t));
}

#[test]
fn what_a_megatron_dataset_cannot_hold_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = MegatronWriter::create(dir.path().join("x")).unwrap();
    let flat = LodTensor::from_vec(vec![1i32, 2], vec![2], Lod::empty()).unwrap();
    let err = w
        .write(&Batch::try_from_tensors([("flat", flat)]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("expected a LoD of 1 level") && err.contains("found 0"),
        "{err}"
    );
    let wide = LodTensor::from_vec(
        vec![1i32; 4],
        vec![2, 2],
        Lod::try_from_lengths(&[vec![2]]).unwrap(),
    )
    .unwrap();
    let err = w
        .write(&Batch::try_from_tensors([("wide", wide)]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("scalar tokens") && err.contains("[2, 2]"),
        "{err}"
    );
    let a = tokens(vec![1i32], &[vec![1]]);
    let b = tokens(vec![1i64], &[vec![1]]);
    let two = Batch::try_from_tensors([("a", a.clone()), ("b", b.clone())]).unwrap();
    assert!(w.write(&two).unwrap_err().to_string().contains("--columns"));
    w.write(&Batch::try_from_tensors([("a", a)]).unwrap())
        .unwrap();
    let err = w
        .write(&Batch::try_from_tensors([("b", b)]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("expected int32, found int64"), "{err}");
    drop(w);
    assert!(!dir.path().join("x.bin").exists() && !dir.path().join("x.idx").exists());
    // A pipe cannot take two files.
    let err = Format::Megatron
        .create_stream_writer(
            std::io::sink(),
            Default::default(),
            &ConvertOptions::default(),
        )
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("two files"), "{err}");
}
