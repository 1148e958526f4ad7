//! The writer's bytes do not change with how it is built inside: a file of
//! small and large buffers (checksummed on the writing thread and on the
//! checksum thread, written through the aligned spool of a file and straight
//! into a `Vec`) is the same whichever way it is written, and the same as
//! the writer made it before its code was split into files (the CRC32 below
//! was taken from that writer's output).

use lodt::format::{self, LodtFile, WriteOptions, Writer};
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
    let batches = batches();
    let meta = [("who".to_string(), "test".to_string())].into();
    let mut w = Writer::try_new(Vec::new(), meta).unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    let in_memory = w.finish().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.lodt");
    let meta = [("who".to_string(), "test".to_string())].into();
    let mut w = Writer::create_with(
        &path,
        meta,
        WriteOptions {
            fsync: false,
            ..Default::default()
        },
    )
    .unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    w.finish().unwrap();
    let on_disk = std::fs::read(&path).unwrap();

    assert_eq!(on_disk.len(), in_memory.len());
    assert!(on_disk == in_memory, "the file and the Vec differ");
    assert_eq!(
        (in_memory.len(), crc32fast::hash(&in_memory)),
        (GOLDEN_LEN, GOLDEN_CRC)
    );
    let file = LodtFile::open(&path).unwrap();
    file.verify().unwrap();
    for (k, b) in batches.iter().enumerate() {
        assert_eq!(&file.read_batch(k).unwrap(), b);
    }
    let _ = format::verify(&path).unwrap();
}

const GOLDEN_LEN: usize = 9_729_408;
const GOLDEN_CRC: u32 = 1_981_137_971;
