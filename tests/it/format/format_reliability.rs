//! Damage detection and recovery: every single-byte flip is caught by
//! `verify`, and every truncation is survived by `open`, the sequential reader
//! and `recover`, which keep every batch written before the cut; in both
//! format versions (2.0, the default, and 1.0).

use lodt::format::{self, LodtFile, StreamReader, WriteOptions};
use lodt::{Batch, Lod, LodTensor};
use std::collections::BTreeMap;

fn sample_batches() -> Vec<Batch> {
    let mut out = Vec::new();
    for i in 0..3i64 {
        let lod = Lod::try_from_lengths(&[vec![2, 1], vec![1, 2, 1]]).unwrap();
        let words = LodTensor::from_vec(vec![i, i + 1, i + 2, i + 3], vec![4, 1], lod).unwrap();
        let mask = LodTensor::from_vec(vec![true, false, i > 0], vec![3], Lod::empty()).unwrap();
        let scale =
            LodTensor::from_vec(vec![half::f16::from_f32(0.25)], vec![], Lod::empty()).unwrap();
        let mut b =
            Batch::try_from_tensors([("words", words), ("mask", mask), ("scale", scale)]).unwrap();
        b.metadata_mut().insert("i".into(), i.to_string());
        out.push(b);
    }
    out
}

/// The format versions every test runs on: the default, then 1.0.
const VERSIONS: [u16; 2] = [2, 1];

/// `batches` in a file of major version `major`.
fn sample_file(batches: &[Batch], major: u16) -> Vec<u8> {
    let meta: BTreeMap<String, String> = [("name".to_string(), "sample".to_string())].into();
    let options = WriteOptions {
        format_version: Some(format::Version { major, minor: 0 }),
        ..Default::default()
    };
    let mut w = format::Writer::try_new_with(Vec::new(), meta, options).unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    let bytes = w.finish().unwrap();
    assert_eq!(LodtFile::from_bytes(&bytes).unwrap().version().major, major);
    bytes
}

#[test]
fn the_default_sample_file_is_2_0() {
    let meta: BTreeMap<String, String> = [("name".to_string(), "sample".to_string())].into();
    let bytes = format::to_bytes(&sample_batches(), meta).unwrap();
    assert_eq!(bytes, sample_file(&sample_batches(), 2));
}

#[test]
fn every_single_byte_flip_is_detected() {
    for major in VERSIONS {
        every_single_byte_flip_is_detected_in(major);
    }
}

fn every_single_byte_flip_is_detected_in(major: u16) {
    let batches = sample_batches();
    let bytes = sample_file(&batches[..2], major);
    // 1.0 repeats each tensor's description in every batch; 2.0 writes the
    // schema once.
    let min = if major == 1 { 1500 } else { 1000 };
    assert!(bytes.len() > min, "a sample with every kind of part");
    LodtFile::from_bytes(&bytes).unwrap().verify().unwrap();
    let mut undetected = Vec::new();
    let mut stream_undetected = Vec::new();
    for pos in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[pos] ^= mask;
            let verified = LodtFile::from_bytes(&bad).and_then(|f| f.verify());
            if verified.is_ok() {
                undetected.push((pos, mask));
            }
            let streamed: Result<Vec<Batch>, _> =
                StreamReader::try_new(&bad[..]).and_then(|r| r.collect());
            if streamed.is_ok() {
                stream_undetected.push((pos, mask));
            }
        }
    }
    assert_eq!(undetected, vec![], "flips verify missed in {major}.0");
    assert_eq!(
        stream_undetected,
        vec![],
        "flips the stream reader missed in {major}.0"
    );
}

#[test]
fn flips_are_reported_where_they_are() {
    for major in VERSIONS {
        flips_are_reported_where_they_are_in(major);
    }
}

fn flips_are_reported_where_they_are_in(major: u16) {
    let bytes = sample_file(&sample_batches(), major);
    let file = LodtFile::from_bytes(&bytes).unwrap();
    let parts = file.tensor_buffers(1, "words").unwrap();
    let mut bad = bytes.clone();
    bad[parts.body.start + 3] ^= 1;
    let err = LodtFile::from_bytes(&bad).unwrap().verify().unwrap_err();
    let at = err.location().unwrap();
    assert_eq!(
        (at.batch, at.tensor.as_deref(), at.part),
        (Some(1), Some("words"), format::FilePart::Body)
    );
    assert!(
        err.to_string()
            .starts_with("checksum mismatch in batch 1, tensor \"words\", body")
    );
    // A LoD flip is caught when the batch is first read, not only by verify.
    let mut bad = bytes.clone();
    bad[parts.lod[1].start + 8] ^= 1;
    let file = LodtFile::from_bytes(&bad).unwrap();
    let err = file.batch(1).unwrap_err();
    assert_eq!(err.location().unwrap().part, format::FilePart::Lod(1));
    assert!(file.batch(0).is_ok() && file.batch(2).is_ok());
}

#[test]
fn every_truncation_keeps_every_complete_batch() {
    for major in VERSIONS {
        every_truncation_keeps_every_complete_batch_in(major);
    }
}

fn every_truncation_keeps_every_complete_batch_in(major: u16) {
    let batches = sample_batches();
    let bytes = sample_file(&batches, major);
    let file = LodtFile::from_bytes(&bytes).unwrap();
    let ends: Vec<u64> = (0..3).map(|k| file.batch_range(k).unwrap().end).collect();
    let data_start = file.batch_range(0).unwrap().start as usize;
    // Thousands of renames over an existing file: on ext4 each one flushes
    // (auto_da_alloc), so use a RAM file system when there is one.
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let path = dir.path().join("cut.lodt");
    let options = WriteOptions {
        fsync: false,
        ..Default::default()
    };
    for cut in 0..bytes.len() {
        let part = &bytes[..cut];
        let complete = ends.iter().filter(|&&e| e <= cut as u64).count();
        // Random access needs the footer.
        assert!(LodtFile::from_bytes(part).is_err(), "cut {cut} opened");
        // Sequential reading returns every complete batch, then an error.
        match StreamReader::try_new(part) {
            Err(_) => assert!(cut < data_start, "cut {cut}: header unreadable"),
            Ok(r) => {
                let results: Vec<_> = r.collect();
                let ok: Vec<&Batch> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
                assert_eq!(ok.len(), complete, "cut {cut}");
                assert_eq!(ok, batches.iter().take(complete).collect::<Vec<_>>());
                assert!(
                    results.last().is_some_and(|r| r.is_err()),
                    "cut {cut} ends in an error"
                );
            }
        }
        // Recovery keeps the same batches and makes the file whole again.
        std::fs::write(&path, part).unwrap();
        match format::recover_with(&path, options, &mut |_, _| {}) {
            Err(_) => assert!(cut < data_start, "cut {cut}: recover failed"),
            Ok(report) => {
                assert_eq!(report.batches, complete, "cut {cut}");
                assert!(report.rewritten);
                assert_eq!(report.dropped_bytes, cut as u64 - report.kept_bytes);
                let fixed = LodtFile::open(&path).unwrap();
                assert_eq!(fixed.num_batches(), complete);
                assert_eq!(fixed.version().major, major, "cut {cut}");
                fixed.verify().unwrap();
                for (k, b) in batches.iter().take(complete).enumerate() {
                    assert_eq!(&fixed.read_batch(k).unwrap(), b);
                }
            }
        }
    }
}

#[test]
fn recover_leaves_good_files_and_refuses_to_drop_data() {
    for major in VERSIONS {
        recover_leaves_good_files_and_refuses_to_drop_data_in(major);
    }
}

fn recover_leaves_good_files_and_refuses_to_drop_data_in(major: u16) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("good.lodt");
    let bytes = sample_file(&sample_batches(), major);
    std::fs::write(&path, &bytes).unwrap();
    let report = format::recover(&path).unwrap();
    assert_eq!(
        (report.batches, report.rewritten, report.dropped_bytes),
        (3, false, 0)
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    // A damaged middle batch under a valid footer: recovering would lose
    // batches 1 and 2, so recover refuses and leaves the file alone.
    let file = LodtFile::from_bytes(&bytes).unwrap();
    let body = file.tensor_buffers(0, "mask").unwrap().body;
    let mut bad = bytes.clone();
    bad[body.start] ^= 1;
    std::fs::write(&path, &bad).unwrap();
    let err = format::recover(&path).unwrap_err();
    assert!(matches!(err, format::FormatError::Refused(_)), "{err}");
    assert!(err.to_string().contains("stops at batch 0"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), bad);
}

#[test]
fn crash_during_append_loses_nothing_complete() {
    for major in VERSIONS {
        crash_during_append_loses_nothing_complete_in(major);
    }
}

/// Recovery keeps the file's version, and an append with the default options
/// writes batches of the file's version (a 1.0 file stays 1.0).
fn crash_during_append_loses_nothing_complete_in(major: u16) {
    // Simulate an append that died after writing one new batch and part of
    // another over the old footer.
    let batches = sample_batches();
    let old = sample_file(&batches[..1], major);
    let full = sample_file(&batches, major);
    let file = LodtFile::from_bytes(&full).unwrap();
    let end1 = file.batch_range(1).unwrap().end as usize;
    let mut crashed = full[..end1 + 100].to_vec();
    if crashed.len() < old.len() {
        crashed.extend_from_slice(&old[crashed.len()..]);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crashed.lodt");
    std::fs::write(&path, &crashed).unwrap();
    assert!(matches!(
        LodtFile::open(&path).unwrap_err(),
        format::FormatError::NoFooter { .. }
    ));
    let report = format::recover(&path).unwrap();
    assert_eq!(report.batches, 2);
    let fixed = LodtFile::open(&path).unwrap();
    assert_eq!(fixed.read_batch(1).unwrap(), batches[1]);
    assert_eq!(fixed.version().major, major);
    // And appending to the recovered file continues the numbering, in the
    // file's version: the bytes are those of the file written in one go.
    let mut w = format::Writer::append(&path).unwrap();
    w.write(&batches[2]).unwrap();
    w.finish().unwrap();
    let file = LodtFile::open(&path).unwrap();
    assert_eq!(file.read_batch(2).unwrap(), batches[2]);
    assert_eq!(file.version().major, major);
    file.verify().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), full);
}
