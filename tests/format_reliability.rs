//! Damage detection and recovery: every single-byte flip is caught by
//! `verify`, and every truncation is survived by `open`, the sequential reader
//! and `recover`, which keep every batch written before the cut.

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

fn sample_file(batches: &[Batch]) -> Vec<u8> {
    let meta: BTreeMap<String, String> = [("name".to_string(), "sample".to_string())].into();
    format::to_bytes(batches, meta).unwrap()
}

#[test]
fn every_single_byte_flip_is_detected() {
    let batches = sample_batches();
    let bytes = sample_file(&batches[..2]);
    assert!(bytes.len() > 1500, "a sample with every kind of part");
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
    assert_eq!(undetected, vec![], "flips verify missed");
    assert_eq!(stream_undetected, vec![], "flips the stream reader missed");
}

#[test]
fn flips_are_reported_where_they_are() {
    let bytes = sample_file(&sample_batches());
    let file = LodtFile::from_bytes(&bytes).unwrap();
    let parts = file.tensor_buffers(1, "words").unwrap();
    let mut bad = bytes.clone();
    bad[parts.body.start + 3] ^= 1;
    let err = LodtFile::from_bytes(&bad).unwrap().verify().unwrap_err();
    let at = err.location().unwrap();
    assert_eq!(
        (at.batch, at.tensor.as_deref(), at.part),
        (Some(1), Some("words"), format::Part::Body)
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
    assert_eq!(err.location().unwrap().part, format::Part::Lod(1));
    assert!(file.batch(0).is_ok() && file.batch(2).is_ok());
}

#[test]
fn every_truncation_keeps_every_complete_batch() {
    let batches = sample_batches();
    let bytes = sample_file(&batches);
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
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("good.lodt");
    let bytes = sample_file(&sample_batches());
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
    // Simulate an append that died after writing one new batch and part of
    // another over the old footer.
    let batches = sample_batches();
    let old = sample_file(&batches[..1]);
    let full = sample_file(&batches);
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
    // And appending to the recovered file continues the numbering.
    let mut w = format::Writer::append(&path).unwrap();
    w.write(&batches[2]).unwrap();
    w.finish().unwrap();
    let file = LodtFile::open(&path).unwrap();
    assert_eq!(file.read_batch(2).unwrap(), batches[2]);
    file.verify().unwrap();
}
