//! Writing and reading `.lodt` files: every dtype, every reader, zero copy,
//! threads, appending, atomic replacement.

use crate::common;

use half::{bf16, f16};
use lodt::format::{
    self, FilePart, FormatError, LodtFile, MAGIC, StreamReader, WriteOptions, Writer,
};
use lodt::{Batch, DType, Lod, LodTensor};
use std::collections::BTreeMap;
use std::sync::Arc;

use common::seed_lod;

fn meta(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A batch with one tensor of every dtype, in varied shapes and LoDs.
fn every_dtype_batch() -> Batch {
    let mut b = Batch::new();
    let lod1 = Lod::try_from_lengths(&[vec![1, 2]]).unwrap();
    b.push(
        "bool",
        LodTensor::from_vec(vec![true, false, true], vec![3], lod1.clone()).unwrap(),
    )
    .unwrap();
    b.push(
        "i8",
        LodTensor::from_vec(vec![-1i8, 2, -3], vec![3], Lod::empty()).unwrap(),
    )
    .unwrap();
    b.push(
        "i16",
        LodTensor::from_vec(vec![i16::MIN, 0, i16::MAX], vec![3, 1], lod1.clone()).unwrap(),
    )
    .unwrap();
    b.push(
        "i32",
        LodTensor::from_vec(vec![7i32; 6], vec![3, 2], lod1.clone()).unwrap(),
    )
    .unwrap();
    b.push(
        "i64",
        LodTensor::from_vec((0..15i64).collect(), vec![15, 1], seed_lod()).unwrap(),
    )
    .unwrap();
    b.push(
        "u8",
        LodTensor::from_vec(vec![0u8; 0], vec![0, 4], Lod::empty()).unwrap(),
    )
    .unwrap();
    b.push(
        "u16",
        LodTensor::from_vec(vec![65535u16], vec![], Lod::empty()).unwrap(),
    )
    .unwrap();
    b.push(
        "u32",
        LodTensor::from_vec(vec![1u32, 2, 3], vec![3], lod1.clone()).unwrap(),
    )
    .unwrap();
    b.push(
        "u64",
        LodTensor::from_vec(vec![u64::MAX, 0], vec![2], Lod::empty()).unwrap(),
    )
    .unwrap();
    b.push(
        "f16",
        LodTensor::from_vec(
            vec![f16::from_f32(0.5), f16::INFINITY, f16::NAN],
            vec![3],
            lod1.clone(),
        )
        .unwrap(),
    )
    .unwrap();
    b.push(
        "bf16",
        LodTensor::from_vec(vec![bf16::from_f32(-2.0), bf16::ONE], vec![2], Lod::empty()).unwrap(),
    )
    .unwrap();
    b.push(
        "f32",
        LodTensor::from_vec(vec![1.5f32, -0.0, 1e-30], vec![3], lod1).unwrap(),
    )
    .unwrap();
    b.push(
        "f64",
        LodTensor::from_vec(vec![std::f64::consts::PI], vec![], Lod::empty()).unwrap(),
    )
    .unwrap();
    b.metadata_mut().insert("split".into(), "train".into());
    b
}

fn words_batch(i: i64) -> Batch {
    let words = LodTensor::from_vec(
        (0..15).map(|x| x + 100 * i).collect(),
        vec![15, 1],
        seed_lod(),
    )
    .unwrap();
    let labels = LodTensor::from_vec(vec![i, i + 1, i + 2], vec![3], Lod::empty()).unwrap();
    let mut b = Batch::try_from_tensors([("words", words), ("labels", labels)]).unwrap();
    b.metadata_mut().insert("step".into(), i.to_string());
    b
}

/// The options of a file of major version `major`.
fn version(major: u16) -> WriteOptions {
    WriteOptions {
        format_version: Some(format::Version { major, minor: 0 }),
        ..Default::default()
    }
}

#[test]
fn every_dtype_round_trips_through_every_reader() {
    // `None`: the default options, which write 2.0.
    for (major, options) in [(2, None), (1, Some(version(1))), (2, Some(version(2)))] {
        every_dtype_round_trips_in(major, options);
    }
}

fn every_dtype_round_trips_in(major: u16, options: Option<WriteOptions>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("all.lodt");
    let batch = every_dtype_batch();
    let file_meta = meta(&[("source", "test")]);
    let mut w = match options {
        None => Writer::create(&path, file_meta.clone()).unwrap(),
        Some(o) => Writer::create_with(&path, file_meta.clone(), o).unwrap(),
    };
    w.write(&batch).unwrap();
    w.write(&words_batch(1)).unwrap();
    w.finish().unwrap();

    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.starts_with(&MAGIC));
    assert_eq!(bytes.len() % 64, 0);
    for file in [
        LodtFile::open(&path).unwrap(),
        LodtFile::read(&path).unwrap(),
        LodtFile::from_bytes(&bytes).unwrap(),
    ] {
        assert_eq!(file.metadata(), &file_meta);
        assert_eq!(file.num_batches(), 2);
        assert_eq!(file.version().to_string(), format!("{major}.0"));
        assert_eq!(file.read_batch(0).unwrap(), batch);
        assert_eq!(file.read_batch(1).unwrap(), words_batch(1));
        let view = file.batch(0).unwrap();
        assert_eq!(view.metadata()["split"], "train");
        assert_eq!(
            view.names().collect::<Vec<_>>(),
            batch.names().collect::<Vec<_>>()
        );
        for (name, t) in batch.iter() {
            let v = view.tensor(name).unwrap();
            assert_eq!(v.dtype(), t.dtype());
            assert_eq!(v.shape(), t.shape());
            assert_eq!(v.lod(), t.lod());
            assert_eq!(v.as_bytes(), t.as_bytes());
            assert_eq!(
                v.as_bytes().as_ptr() as usize % 64,
                0,
                "{name} is 64-aligned"
            );
        }
        assert_eq!(file.verify().unwrap().tensors, batch.len() + 2);
    }
    let streamed: Vec<Batch> = StreamReader::try_new(&bytes[..])
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(streamed, vec![batch, words_batch(1)]);
}

#[test]
fn typed_access_on_mapped_views() {
    let bytes = format::to_bytes([&every_dtype_batch()], BTreeMap::new()).unwrap();
    let file = LodtFile::from_bytes(&bytes).unwrap();
    let b = file.batch(0).unwrap();
    assert_eq!(
        b.tensor("bool").unwrap().as_slice::<bool>().unwrap(),
        &[true, false, true]
    );
    assert_eq!(
        b.tensor("i16").unwrap().as_slice::<i16>().unwrap(),
        &[i16::MIN, 0, i16::MAX]
    );
    assert_eq!(
        b.tensor("u64").unwrap().as_slice::<u64>().unwrap(),
        &[u64::MAX, 0]
    );
    let f16s = b.tensor("f16").unwrap();
    let f16s = f16s.as_slice::<f16>().unwrap();
    assert_eq!(f16s[0], f16::from_f32(0.5));
    assert!(f16s[2].is_nan());
    assert_eq!(b.tensor("f64").unwrap().shape(), Vec::<usize>::new());
    assert_eq!(b.tensor("u8").unwrap().shape(), vec![0, 4]);
    assert_eq!(
        b.tensor("i64")
            .unwrap()
            .branch(&[0, 2])
            .unwrap()
            .as_slice::<i64>()
            .unwrap(),
        &[5, 6, 7, 8]
    );
    assert!(matches!(
        b.tensor("f32").unwrap().as_slice::<f64>(),
        Err(lodt::Error::DTypeMismatch { .. })
    ));
}

#[test]
fn branch_slices_borrow_the_map_with_no_copy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.lodt");
    format::save_batch(&path, &words_batch(0)).unwrap();
    let file = LodtFile::open(&path).unwrap();
    let map = file.storage().unwrap().bytes().as_ptr_range();
    let words = file.batch(0).unwrap().tensor("words").unwrap();
    let slice = words.branch(&[2, 1]).unwrap();
    assert_eq!(slice.as_slice::<i64>().unwrap(), &[12, 13, 14]);
    assert!(
        map.contains(&slice.as_bytes().as_ptr()),
        "slice data lies inside the map"
    );
    assert_eq!(slice.lod().num_levels(), 0);
    let upper = words.branch(&[2]).unwrap();
    let level = upper.lod().raw_level(0).unwrap();
    assert!(
        map.contains(&(level.as_ptr() as *const u8)),
        "LoD window lies inside the map"
    );
    // Owned tensors from the reader borrow the map too.
    let owned = file.read_batch(0).unwrap();
    let body = owned.get("words").unwrap().as_bytes();
    assert!(map.contains(&body.as_ptr()));
    let parts = file.tensor_buffers(0, "words").unwrap();
    assert!(Arc::ptr_eq(&parts.storage, file.storage().unwrap()));
    assert_eq!(parts.lod.len(), 2);
    assert_eq!(
        *parts.to_tensor().unwrap().lod().level(1).unwrap(),
        [0, 3, 5, 9, 10, 12, 15]
    );
    assert_eq!(parts.body.start % 64, 0);
    assert_eq!(parts.body.len(), 15 * 8);
    assert_eq!(
        &parts.to_tensor().unwrap(),
        words_batch(0).get("words").unwrap()
    );
    assert!(map.contains(&parts.to_tensor().unwrap().as_bytes().as_ptr()));
}

#[test]
fn many_threads_read_one_file() {
    fn check<T: Send + Sync>() {}
    check::<LodtFile>();
    check::<format::BatchView<'static>>();
    let bytes = format::to_bytes(
        (0..16).map(words_batch).collect::<Vec<_>>().iter(),
        BTreeMap::new(),
    )
    .unwrap();
    let file = LodtFile::from_bytes(&bytes).unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            let file = &file;
            s.spawn(move || {
                for round in 0..20 {
                    let k = (t * 7 + round * 3) % 16;
                    let b = file.batch(k).unwrap();
                    let w = b.tensor("words").unwrap();
                    let first = w.branch(&[1]).unwrap().as_slice::<i64>().unwrap()[0];
                    assert_eq!(first, 9 + 100 * k as i64);
                    assert_eq!(b.metadata()["step"], k.to_string());
                }
            });
        }
    });
    assert_eq!(file.verify().unwrap().batches, 16);
}

#[test]
fn streaming_writer_to_a_plain_write() {
    /// A sink that is only `Write` (a pipe, stdout).
    struct Pipe(Vec<u8>);
    impl std::io::Write for Pipe {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let n = b.len().min(1000);
            self.0.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut w = Writer::try_new(Pipe(Vec::new()), meta(&[("a", "b")])).unwrap();
    for i in 0..5 {
        w.write(&words_batch(i)).unwrap();
    }
    assert_eq!(w.batches_written(), 5);
    let Pipe(bytes) = w.finish().unwrap();
    /// A source that returns a few bytes at a time.
    struct Trickle<'a>(&'a [u8]);
    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(7).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let mut r = StreamReader::try_new(Trickle(&bytes)).unwrap();
    assert_eq!(r.metadata()["a"], "b");
    for i in 0..5 {
        assert_eq!(r.next().unwrap().unwrap(), words_batch(i));
    }
    assert!(r.next().is_none());
    assert!(r.next().is_none());
    assert_eq!(r.position(), bytes.len() as u64);
    assert_eq!(LodtFile::from_bytes(&bytes).unwrap().num_batches(), 5);
}

#[test]
fn large_buffers_are_verified_on_two_threads() {
    let n = 3 << 20; // 12 MiB of f32: verify splits its checksum over two threads
    let lod = Lod::try_from_lengths(&[vec![n as u64 / 2, n as u64 / 2]]).unwrap();
    let t =
        LodTensor::from_vec((0..n).map(|i| i as f32).collect::<Vec<f32>>(), vec![n], lod).unwrap();
    let batch = Batch::try_from_tensors([("big", t)]).unwrap();
    let bytes = format::to_bytes([&batch], BTreeMap::new()).unwrap();
    let file = LodtFile::from_bytes(&bytes).unwrap();
    assert_eq!(file.verify().unwrap().body_bytes, n as u64 * 4);
    let v = file.batch(0).unwrap().tensor("big").unwrap();
    assert_eq!(
        v.branch(&[1]).unwrap().as_slice::<f32>().unwrap()[0],
        (n / 2) as f32
    );
    let mut bad = bytes.clone();
    let at = bad.len() / 2;
    bad[at] ^= 4;
    let err = LodtFile::from_bytes(&bad).unwrap().verify().unwrap_err();
    assert!(matches!(err, FormatError::Checksum { .. }), "{err}");
    assert_eq!(err.location().unwrap().part, FilePart::Body);
}

#[test]
fn appending_keeps_old_readers_and_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.lodt");
    let mut w = Writer::create(&path, meta(&[("kind", "log")])).unwrap();
    w.write(&words_batch(0)).unwrap();
    w.finish().unwrap();
    let before = LodtFile::open(&path).unwrap();
    let old_len = before.file_size();

    let mut w = Writer::append(&path).unwrap();
    assert_eq!(w.batches_written(), 1);
    w.write(&words_batch(1)).unwrap();
    w.write(&words_batch(2)).unwrap();
    w.finish().unwrap();

    // The reader opened before still sees its batch.
    assert_eq!(before.num_batches(), 1);
    assert_eq!(before.read_batch(0).unwrap(), words_batch(0));
    let after = LodtFile::open(&path).unwrap();
    assert!(after.file_size() > old_len);
    assert_eq!(after.metadata()["kind"], "log");
    assert_eq!(after.num_batches(), 3);
    for k in 0..3 {
        assert_eq!(after.read_batch(k).unwrap(), words_batch(k as i64));
    }
    after.verify().unwrap();
    let streamed = StreamReader::try_new(std::fs::File::open(&path).unwrap())
        .unwrap()
        .count();
    assert_eq!(streamed, 3);

    // An appending writer dropped without `finish` rolls the append back:
    // the file is byte for byte what it was.
    let before = std::fs::read(&path).unwrap();
    let mut w = Writer::append(&path).unwrap();
    w.write(&words_batch(3)).unwrap();
    w.write(&words_batch(4)).unwrap();
    drop(w);
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let file = LodtFile::open(&path).unwrap();
    assert_eq!(file.num_batches(), 3);
    file.verify().unwrap();
}

#[test]
fn saving_is_atomic_and_leaves_mapped_readers_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.lodt");
    format::save_batch(&path, &words_batch(1)).unwrap();
    let old = LodtFile::open(&path).unwrap();
    // Overwrite with different (and larger) content while `old` is mapped.
    let mut w = Writer::create_with(
        &path,
        BTreeMap::new(),
        WriteOptions {
            fsync: false,
            ..Default::default()
        },
    )
    .unwrap();
    for i in 5..9 {
        w.write(&words_batch(i)).unwrap();
    }
    // Before `finish`, the destination is untouched.
    assert_eq!(LodtFile::open(&path).unwrap().num_batches(), 1);
    w.finish().unwrap();
    assert_eq!(old.read_batch(0).unwrap(), words_batch(1));
    old.verify().unwrap();
    let new = LodtFile::open(&path).unwrap();
    assert_eq!(new.num_batches(), 4);
    assert_eq!(new.read_batch(3).unwrap(), words_batch(8));

    // A writer dropped without `finish` leaves no file behind.
    let other = dir.path().join("never.lodt");
    let mut w = Writer::create(&other, BTreeMap::new()).unwrap();
    w.write(&words_batch(0)).unwrap();
    drop(w);
    assert!(!other.exists());
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["model.lodt".to_string()],
        "no temporary file left"
    );
}

#[test]
fn sliced_tensors_with_empty_sequences_round_trip() {
    let lod = Lod::try_from_offsets(vec![vec![0, 0, 2], vec![0, 0, 3]]).unwrap();
    let t = LodTensor::from_vec(vec![1u8, 2, 3], vec![3], lod).unwrap();
    let empty = t.branch(&[0]).unwrap().to_owned(); // LoD {{0}}: no sequence
    assert_eq!(empty.lod().to_offsets(), [vec![0u64]]);
    let batch = Batch::try_from_tensors([("empty", empty.clone()), ("t", t)]).unwrap();
    let bytes = format::to_bytes([&batch], BTreeMap::new()).unwrap();
    let file = LodtFile::from_bytes(&bytes).unwrap();
    assert_eq!(file.read_batch(0).unwrap(), batch);
    file.verify().unwrap();
}

#[test]
fn lookup_errors_name_what_exists() {
    let bytes = format::to_bytes([&words_batch(0)], BTreeMap::new()).unwrap();
    let file = LodtFile::from_bytes(&bytes).unwrap();
    let err = file.batch(0).unwrap().tensor("sentences").unwrap_err();
    assert_eq!(
        err.to_string(),
        "batch 0 has no tensor \"sentences\"; it has: words, labels"
    );
    assert!(matches!(
        file.batch(1).unwrap_err(),
        FormatError::NoSuchBatch { index: 1, count: 1 }
    ));
    assert!(file.tensor_buffers(0, "nope").is_err());
}

#[test]
fn file_layout_matches_the_spec() {
    // The default writes 2.0; 1.0 on request. Both share the file header,
    // the batch tag, the footer, index and trailer.
    let default = format::to_bytes([&words_batch(0)], meta(&[("k", "v")])).unwrap();
    assert_eq!(u16::from_le_bytes([default[12], default[13]]), 2);
    for major in [1, 2] {
        let mut w = Writer::try_new_with(Vec::new(), meta(&[("k", "v")]), version(major)).unwrap();
        w.write(&words_batch(0)).unwrap();
        let bytes = w.finish().unwrap();
        if major == 2 {
            assert_eq!(bytes, default);
        }
        file_layout_matches_the_spec_in(&bytes, major);
    }
}

fn file_layout_matches_the_spec_in(bytes: &[u8], major: u16) {
    // Header fields at the documented offsets.
    assert_eq!(&bytes[0..9], b"\x89LODT\r\n\x1a\n");
    assert_eq!(u16::from_le_bytes([bytes[12], bytes[13]]), major);
    assert_eq!(u16::from_le_bytes([bytes[14], bytes[15]]), 0);
    let meta_len = u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize;
    assert_eq!(&bytes[64..64 + meta_len], br#"{"metadata":{"k":"v"}}"#);
    let crc = u32::from_le_bytes(bytes[60..64].try_into().unwrap());
    assert_eq!(crc, crc32fast::hash(&bytes[..60]));
    // The first batch at pad64(64 + meta_len), tagged.
    let start = (64 + meta_len).div_ceil(64) * 64;
    assert_eq!(&bytes[start..start + 8], b"LODTBTCH");
    // The trailer at the end points at the footer.
    let n = bytes.len();
    assert_eq!(&bytes[n - 64..n - 56], b"LODTTAIL");
    let footer = u64::from_le_bytes(bytes[n - 56..n - 48].try_into().unwrap()) as usize;
    assert_eq!(&bytes[footer..footer + 8], b"LODTFOOT");
    let entry_offset = u64::from_le_bytes(bytes[footer + 64..footer + 72].try_into().unwrap());
    assert_eq!(entry_offset as usize, start);
    assert_eq!(DType::Int64.size(), 8);
}
