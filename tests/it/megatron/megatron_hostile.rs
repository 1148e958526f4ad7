//! Hostile Megatron index files: every field wrong in turn, every byte
//! flipped, counts that claim more than the file holds. Each is an error
//! that names the file and what was expected and found; none panics or
//! allocates by a count.

use lodt::batch::BatchWriter;
use lodt::megatron::{MegatronReader, MegatronWriter};
use lodt::{Batch, Lod, LodTensor};
use std::path::Path;

/// A valid pair at `dir/c`: 3 documents (of 2, 1 and 1 sequences) of int32.
fn valid(dir: &Path) -> Vec<u8> {
    let t = LodTensor::from_vec(
        (0..10i32).collect(),
        vec![10],
        Lod::try_from_lengths(&[vec![2, 1, 1], vec![3, 1, 2, 4]]).unwrap(),
    )
    .unwrap();
    let mut w = MegatronWriter::create(dir.join("c")).unwrap();
    w.write(&Batch::try_from_tensors([("t", t)]).unwrap())
        .unwrap();
    w.finish().unwrap();
    std::fs::read(dir.join("c.idx")).unwrap()
}

/// Reads the pair with `idx` as its index: the error, or "" for success.
fn read_with(dir: &Path, idx: &[u8]) -> String {
    std::fs::write(dir.join("c.idx"), idx).unwrap();
    match MegatronReader::open(dir.join("c")) {
        Err(e) => e.to_string(),
        Ok(r) => match r.collect::<Result<Vec<_>, _>>() {
            Err(e) => e.to_string(),
            Ok(_) => String::new(),
        },
    }
}

fn set_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn each_wrong_field_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = valid(d);
    assert_eq!(read_with(d, &good), "");
    type Mutation = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Mutation)> = vec![
        ("magic", Box::new(|b| b[0] = b'X')),
        (
            "version: expected 1, found 2",
            Box::new(|b| set_u64(b, 9, 2)),
        ),
        (
            "dtype code: expected 1 to 8, found 9",
            Box::new(|b| b[17] = 9),
        ),
        ("file length", Box::new(|b| set_u64(b, 18, u64::MAX))),
        ("file length", Box::new(|b| set_u64(b, 26, 1 << 60))),
        ("file length", Box::new(|b| b.truncate(33))),
        ("file length", Box::new(|b| b.push(0))),
        (
            "the length of sequence 1: expected >= 0, found -1",
            Box::new(|b| b[38..42].copy_from_slice(&(-1i32).to_le_bytes())),
        ),
        (
            "sequence 3 (pointer 1000000",
            Box::new(|b| set_u64(b, 34 + 16 + 24, 1_000_000)),
        ),
        (
            "sequence 0 (pointer -8",
            Box::new(|b| set_u64(b, 34 + 16, (-8i64) as u64)),
        ),
        (
            "the sequences' tokens",
            Box::new(|b| b[34..38].copy_from_slice(&9i32.to_le_bytes())),
        ),
        (
            "the document indices: expected 0 first",
            Box::new(|b| set_u64(b, 34 + 48, 1)),
        ),
        (
            "the document indices: expected 0 first and 4 (the sequence count) last",
            Box::new(|b| set_u64(b, 34 + 48 + 24, 3)),
        ),
        ("nondecreasing", Box::new(|b| set_u64(b, 34 + 48 + 8, 4))),
    ];
    for (needle, mutate) in cases {
        let mut bytes = good.clone();
        mutate(&mut bytes);
        let err = read_with(d, &bytes);
        assert!(err.contains(needle), "{needle:?} not in {err:?}");
        assert!(err.is_empty() || err.contains("c.idx"), "{err}");
    }
}

#[test]
fn a_multimodal_index_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = valid(dir.path());
    bytes.extend_from_slice(&[0; 4]); // a mode per sequence
    let err = read_with(dir.path(), &bytes);
    assert!(err.contains("multimodal"), "{err}");
}

#[test]
fn every_flipped_byte_reads_or_fails_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let good = valid(dir.path());
    let mut failed = 0;
    for i in 0..good.len() {
        for bit in [0x01u8, 0x80] {
            let mut bytes = good.clone();
            bytes[i] ^= bit;
            if !read_with(dir.path(), &bytes).is_empty() {
                failed += 1;
            }
        }
    }
    // Flips of the magic, version, code, counts and most array bits fail;
    // a flipped low bit of a length (then the tokens do not fit) too.
    assert!(
        failed > good.len(),
        "{failed} of {} flips failed",
        2 * good.len()
    );
}

#[test]
fn a_missing_data_file_names_it() {
    let dir = tempfile::tempdir().unwrap();
    valid(dir.path());
    std::fs::remove_file(dir.path().join("c.bin")).unwrap();
    let err = MegatronReader::open(dir.path().join("c.idx"))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("c.bin"), "{err}");
}
