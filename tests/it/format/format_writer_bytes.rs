//! The writer's bytes do not change with how it is built inside: a file of
//! small and large buffers (checksummed on the writing thread and on the
//! checksum thread, written through the aligned spool of a file and straight
//! into a `Vec`) is the same whichever way it is written, and the same as
//! the writer made it before its code was split into files (the 1.0 CRC32
//! below was taken from that writer's output; the 2.0 one from the writer
//! that made 2.0 the default), in both format versions.

use lodt::format::{self, LodtFile, Version, WriteOptions, Writer};
use lodt::{Batch, Lod, LodTensor};

/// Batches of a 2-level LoD with bodies from 40 B to 3 MiB (above the
/// checksum thread's 128 KiB and the 2 MiB chunk), values from a fixed
/// generator.
fn batches() -> Vec<Batch> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    [5usize, 3_000, 40_000, 100, 200_000, 1]
        .iter()
        .enumerate()
        .map(|(k, &rows)| {
            let lod = Lod::try_from_lengths(&[vec![1, rows as u64 - 1], vec![1; rows]]).unwrap();
            let ids: Vec<i64> = (0..rows).map(|_| next() as i64).collect();
            let emb: Vec<f32> = (0..rows * 4)
                .map(|_| (next() % 1000) as f32 / 8.0)
                .collect();
            let mut b = Batch::try_from_tensors([
                (
                    "ids",
                    LodTensor::from_vec(ids, vec![rows], lod.clone()).unwrap(),
                ),
                ("emb", LodTensor::from_vec(emb, vec![rows, 4], lod).unwrap()),
            ])
            .unwrap();
            b.metadata_mut().insert("k".into(), k.to_string());
            b
        })
        .collect()
}

#[test]
fn file_and_vec_writers_give_the_same_bytes_as_before_the_split() {
    // `None`: the default options (2.0).
    for (version, golden) in [
        (None, GOLDEN_2_0),
        (Some(Version { major: 1, minor: 0 }), GOLDEN_1_0),
        (Some(Version { major: 2, minor: 0 }), GOLDEN_2_0),
    ] {
        same_bytes(version, golden);
    }
}

/// The file and the `Vec` writers of `version` (`None`: the default) write
/// the `golden` bytes (length and CRC32).
fn same_bytes(version: Option<Version>, golden: (usize, u32)) {
    let options = WriteOptions {
        fsync: false,
        format_version: version,
        ..Default::default()
    };
    let batches = batches();
    let meta = [("who".to_string(), "test".to_string())].into();
    let mut w = match version {
        None => Writer::try_new(Vec::new(), meta).unwrap(),
        Some(_) => Writer::try_new_with(Vec::new(), meta, options).unwrap(),
    };
    for b in &batches {
        w.write(b).unwrap();
    }
    let in_memory = w.finish().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.lodt");
    let meta = [("who".to_string(), "test".to_string())].into();
    let mut w = Writer::create_with(&path, meta, options).unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    w.finish().unwrap();
    let on_disk = std::fs::read(&path).unwrap();

    assert_eq!(on_disk.len(), in_memory.len());
    assert!(on_disk == in_memory, "the file and the Vec differ");
    assert_eq!(
        (in_memory.len(), crc32fast::hash(&in_memory)),
        golden,
        "{version:?}"
    );
    let file = LodtFile::open(&path).unwrap();
    file.verify().unwrap();
    for (k, b) in batches.iter().enumerate() {
        assert_eq!(&file.read_batch(k).unwrap(), b);
    }
    let _ = format::verify(&path).unwrap();
}

/// The length and CRC32 of the 1.0 file.
const GOLDEN_1_0: (usize, u32) = (9_729_408, 1_981_137_971);
/// The length and CRC32 of the 2.0 file.
const GOLDEN_2_0: (usize, u32) = (7_781_440, 103_809_730);
