//! Format 2.0 (`spec/FORMAT.md` §12): round trips through every reader
//! (map, positional reads, bytes in memory, stream), every codec, shared
//! LoD, several schemas, append and recovery; the per-batch overhead of
//! §12.6; every single-byte flip of a 2.0 file detected by `verify`.

use lodt::format::{
    Compression, LodtFile, ReadOptions, StreamReader, Version, WriteOptions, Writer,
};
use lodt::{Batch, Lod, LodTensor};
use std::collections::BTreeMap;

const V2: Version = Version { major: 2, minor: 0 };
const V1: Version = Version { major: 1, minor: 0 };

fn options(compression: Compression) -> WriteOptions {
    WriteOptions {
        fsync: false,
        format_version: Some(V2),
        compression,
    }
}

/// Uncompressed, no fsync, format `version` asked for explicitly.
fn explicit(version: Version) -> WriteOptions {
    WriteOptions {
        format_version: Some(version),
        ..options(Compression::None)
    }
}

const CODECS: [Compression; 3] = [
    Compression::None,
    Compression::Lz4,
    Compression::Zstd { level: 3 },
];

/// The 70-word batch of §12.6: 3 documents of 2, 3 and 2 sentences of 10 words.
fn words_batch(k: i64) -> Batch {
    let lod = Lod::try_from_lengths(&[vec![2, 3, 2], vec![10; 7]]).unwrap();
    let words = LodTensor::from_vec((0..70).map(|i| i + k).collect(), vec![70, 1], lod).unwrap();
    let labels = LodTensor::from_vec(vec![1i64, 0, 1], vec![3], Lod::empty()).unwrap();
    Batch::try_from_tensors([("words", words), ("labels", labels)]).unwrap()
}

/// Batches that exercise the record: a shared LoD, a scalar, bools, halves,
/// an empty sequence, metadata, an empty batch, and a schema change.
fn varied() -> Vec<Batch> {
    let lod = Lod::try_from_lengths(&[vec![2, 0, 1], vec![3, 1, 4]]).unwrap();
    let ids =
        LodTensor::from_vec((0..8u32).map(|i| i * 3).collect(), vec![8], lod.clone()).unwrap();
    let emb = LodTensor::from_vec(
        (0..32).map(|i| i as f32 * 0.25).collect(),
        vec![8, 4],
        lod.clone(),
    )
    .unwrap();
    let scale = LodTensor::from_vec(vec![2.5f64], vec![], Lod::empty()).unwrap();
    let mask = LodTensor::from_vec(vec![true, false, true], vec![3], Lod::empty()).unwrap();
    let mut shared =
        Batch::try_from_tensors([("ids", ids), ("emb", emb), ("scale", scale), ("mask", mask)])
            .unwrap();
    shared.metadata_mut().insert("split".into(), "train".into());
    let half = LodTensor::from_vec(
        vec![half::f16::from_f32(1.5), half::f16::INFINITY],
        vec![2],
        Lod::empty(),
    )
    .unwrap();
    let other = Batch::try_from_tensors([("half", half)]).unwrap();
    vec![
        words_batch(0),
        words_batch(100),
        shared,
        Batch::new(),
        other,
        words_batch(7),
    ]
}

fn write(batches: &[Batch], compression: Compression) -> Vec<u8> {
    let mut w = Writer::try_new_with(Vec::new(), BTreeMap::new(), options(compression)).unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn every_reader_reads_back_every_codec() {
    let batches = varied();
    let dir = tempfile::tempdir().unwrap();
    for c in CODECS {
        let bytes = write(&batches, c);
        assert_eq!(&bytes[12..14], &[2, 0], "major 2");
        let path = dir.path().join(format!("{c}.lodt"));
        std::fs::write(&path, &bytes).unwrap();
        let mem = LodtFile::from_bytes(&bytes).unwrap();
        let map = LodtFile::open(&path).unwrap();
        let pread = LodtFile::open_with(
            &path,
            &ReadOptions {
                mmap: false,
                ..Default::default()
            },
        )
        .unwrap();
        for file in [&mem, &map, &pread] {
            assert_eq!(file.version(), V2);
            assert_eq!(file.num_batches(), batches.len());
            // Out of order first: the schema comes from an earlier head.
            for k in (0..batches.len()).rev() {
                assert_eq!(&file.read_batch(k).unwrap(), &batches[k], "{c}, batch {k}");
            }
            let report = file.verify().unwrap();
            assert_eq!(report.batches, batches.len());
        }
        let streamed: Vec<Batch> = StreamReader::try_new(&bytes[..])
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(streamed, batches, "{c}");
    }
}

#[test]
fn uncompressed_batches_are_zero_copy_and_aligned() {
    let bytes = write(&[words_batch(0)], Compression::None);
    let file = LodtFile::from_bytes(&bytes).unwrap();
    let storage = file.storage().unwrap().clone();
    let tb = file.tensor_buffers(0, "words").unwrap();
    assert!(
        std::sync::Arc::ptr_eq(&tb.storage, &storage),
        "a window of the file"
    );
    for r in tb.lod.iter().chain([&tb.body]) {
        assert_eq!(r.start % 64, 0);
    }
    // Compressed: one decoded allocation, aligned too.
    let bytes = write(&[words_batch(0)], Compression::Zstd { level: 3 });
    let file = LodtFile::from_bytes(&bytes).unwrap();
    let tb = file.tensor_buffers(0, "words").unwrap();
    assert!(!std::sync::Arc::ptr_eq(
        &tb.storage,
        file.storage().unwrap()
    ));
    assert_eq!(tb.body.start % 64, 0);
    assert_eq!(
        file.batch(0)
            .unwrap()
            .tensor("words")
            .unwrap()
            .as_slice::<i64>()
            .unwrap()[69],
        69
    );
}

/// §12.6: the per-batch overhead of the 70-word batch, measured over 1,000
/// batches (the schema is in batch 0): 176 B in 2.0 (<= 256), 560 B in 1.0.
#[test]
fn overhead_of_the_70_word_batch() {
    let n = 1000;
    let payload = 32 + 64 + 560 + 24; // LoD levels and bodies
    let batches: Vec<Batch> = (0..n).map(|k| words_batch(k as i64)).collect();
    let v2 = write(&batches, Compression::None);
    let v1_options = WriteOptions {
        format_version: Some(V1),
        ..options(Compression::None)
    };
    let mut w = Writer::try_new_with(Vec::new(), BTreeMap::new(), v1_options).unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    let v1 = w.finish().unwrap();
    // The default options write these 2.0 bytes.
    let mut w = Writer::try_new(Vec::new(), BTreeMap::new()).unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    assert!(w.finish().unwrap() == v2);
    for (bytes, expected) in [(&v2, 176u64), (&v1, 560)] {
        let file = LodtFile::from_bytes(bytes).unwrap();
        // Batch 500: past batch 128 (2-byte batch numbers), not batch 0.
        let section = file.batch_range(500).unwrap();
        let overhead = section.end - section.start - payload + 24;
        assert_eq!(overhead, expected);
    }
    // The whole file: header and `{}`, batch 0 (its head holds the schema:
    // 128 B more), 999 batches of 832 B, the footer with 24 B per batch.
    assert_eq!(
        v2.len() as u64,
        128 + (832 + 128) + 999 * 832 + 64 + 1000 * 24 + 64
    );
    // Per batch: its section and its index entry, less its payload.
    let per_batch = (v2.len() as u64 - 128 - 128 - 128) / n as u64 - payload;
    assert_eq!(per_batch, 176);
    assert!(per_batch <= 256);
}

#[test]
fn every_single_byte_flip_is_detected() {
    let small = vec![words_batch(0), words_batch(1)];
    for c in CODECS {
        let bytes = write(&small, c);
        assert!(LodtFile::from_bytes(&bytes).unwrap().verify().is_ok());
        for i in 0..bytes.len() {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[i] ^= mask;
                let caught = LodtFile::from_bytes(&bad).and_then(|f| f.verify()).is_err();
                assert!(
                    caught,
                    "{c}: flipping byte {i} with {mask:#x} went unnoticed"
                );
                let streamed: Result<Vec<Batch>, _> =
                    StreamReader::try_new(&bad[..]).and_then(|r| r.collect());
                assert!(
                    streamed.is_err(),
                    "{c}: the stream read byte {i} ^ {mask:#x}"
                );
            }
        }
    }
}

#[test]
fn append_continues_the_schema_or_starts_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lodt");
    let opts = options(Compression::Lz4);
    let mut w = Writer::create_with(&path, BTreeMap::new(), opts).unwrap();
    w.write(&words_batch(0)).unwrap();
    w.finish().unwrap();
    let mut w = Writer::append_with(&path, opts).unwrap();
    w.write(&words_batch(1)).unwrap();
    w.write(&varied()[2]).unwrap();
    w.finish().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let file = LodtFile::open(&path).unwrap();
    assert_eq!(file.num_batches(), 3);
    assert_eq!(file.read_batch(1).unwrap(), words_batch(1));
    assert_eq!(file.read_batch(2).unwrap(), varied()[2]);
    file.verify().unwrap();
    // Batch 1 points at batch 0's schema (schema_back 1): a head with no
    // schema JSON in it.
    let r = file.batch_range(1).unwrap();
    let head = &bytes[r.start as usize..];
    assert_eq!(&head[20..22], &[1, 1], "index 1, schema_back 1");
    // Compression on a 1.0 file is refused, naming both.
    let p1 = dir.path().join("v1.lodt");
    let v1 = WriteOptions {
        format_version: Some(V1),
        ..options(Compression::None)
    };
    let mut w = Writer::create_with(&p1, BTreeMap::new(), v1).unwrap();
    w.write(&words_batch(0)).unwrap();
    w.finish().unwrap();
    let lz4 = WriteOptions {
        format_version: None,
        ..opts
    };
    let err = Writer::append_with(&p1, lz4).unwrap_err().to_string();
    assert!(err.contains("needs format version 2.0"), "{err}");
    // An append with the default options (which write 2.0 files) writes 1.0
    // batches into a 1.0 file: the bytes of the file written in one go.
    let mut w = Writer::append(&p1).unwrap();
    w.write(&words_batch(1)).unwrap();
    w.finish().unwrap();
    let file = LodtFile::open(&p1).unwrap();
    assert_eq!(file.version(), V1);
    file.verify().unwrap();
    let mut w = Writer::try_new_with(Vec::new(), BTreeMap::new(), v1).unwrap();
    w.write(&words_batch(0)).unwrap();
    w.write(&words_batch(1)).unwrap();
    assert!(std::fs::read(&p1).unwrap() == w.finish().unwrap());
}

/// An append that asks explicitly for the other version than its file's is
/// refused before anything is written (the file keeps its bytes and reads
/// as before); with no version it writes the file's, and with the file's
/// own it works: either way, the bytes of the file written in one go.
#[test]
fn an_append_refuses_an_explicit_version_other_than_the_file_s() {
    let dir = tempfile::tempdir().unwrap();
    for (found, asked) in [(V1, V2), (V2, V1)] {
        let path = dir.path().join(format!("v{}.lodt", found.major));
        let mut w = Writer::create_with(&path, BTreeMap::new(), explicit(found)).unwrap();
        w.write(&words_batch(0)).unwrap();
        w.finish().unwrap();
        let before = std::fs::read(&path).unwrap();

        let err = Writer::append_with(&path, explicit(asked))
            .unwrap_err()
            .to_string();
        let want = format!("is format {found}; asked to append format {asked}");
        assert!(err.contains(&want), "{err}");
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(
            std::fs::read(&path).unwrap() == before,
            "{found}: bytes changed"
        );
        let file = LodtFile::open(&path).unwrap();
        assert_eq!((file.version(), file.num_batches()), (found, 1));
        assert_eq!(file.read_batch(0).unwrap(), words_batch(0));
        file.verify().unwrap();

        // No version: the file's. The file's own, explicitly: the same.
        let default = WriteOptions {
            format_version: None,
            ..options(Compression::None)
        };
        for (k, opts) in [(1, default), (2, explicit(found))] {
            let mut w = Writer::append_with(&path, opts).unwrap();
            w.write(&words_batch(k)).unwrap();
            w.finish().unwrap();
        }
        let file = LodtFile::open(&path).unwrap();
        assert_eq!((file.version(), file.num_batches()), (found, 3));
        file.verify().unwrap();
        let mut w = Writer::try_new_with(Vec::new(), BTreeMap::new(), explicit(found)).unwrap();
        for k in 0..3 {
            w.write(&words_batch(k)).unwrap();
        }
        assert!(
            std::fs::read(&path).unwrap() == w.finish().unwrap(),
            "{found}"
        );
    }
}

#[test]
fn recovery_keeps_the_complete_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.lodt");
    let batches = varied();
    let bytes = write(&batches, Compression::Zstd { level: 1 });
    let file = LodtFile::from_bytes(&bytes).unwrap();
    // Cut inside batch 4: batches 0 to 3 are complete.
    let cut = file.batch_range(4).unwrap().start + 10;
    std::fs::write(&path, &bytes[..cut as usize]).unwrap();
    let report = lodt::format::recover(&path).unwrap();
    assert_eq!(report.batches, 4);
    let file = LodtFile::open(&path).unwrap();
    for (k, b) in batches.iter().take(4).enumerate() {
        assert_eq!(&file.read_batch(k).unwrap(), b);
    }
}

#[test]
fn recovery_refuses_an_explicit_version_other_than_the_file_s() {
    let dir = tempfile::tempdir().unwrap();
    for (found, asked) in [(V1, V2), (V2, V1)] {
        let path = dir.path().join(format!("cut{}.lodt", found.major));
        let mut w = Writer::try_new_with(Vec::new(), BTreeMap::new(), explicit(found)).unwrap();
        for k in 0..3 {
            w.write(&words_batch(k)).unwrap();
        }
        let bytes = w.finish().unwrap();
        // Cut inside batch 2: the footer is gone, batches 0 and 1 are complete.
        let cut = LodtFile::from_bytes(&bytes)
            .unwrap()
            .batch_range(2)
            .unwrap()
            .start
            + 10;
        std::fs::write(&path, &bytes[..cut as usize]).unwrap();

        let recover = |write| {
            let options = lodt::format::RecoverOptions {
                write,
                drop_damaged: false,
            };
            lodt::format::recover_with_options(&path, options, &mut |_, _| {})
        };
        let err = recover(explicit(asked)).unwrap_err().to_string();
        let want = format!("is format {found}; asked to recover it as format {asked}");
        assert!(err.contains(&want), "{err}");
        assert!(
            std::fs::read(&path).unwrap() == bytes[..cut as usize],
            "{found}: bytes changed"
        );

        // The file's own version, explicitly, recovers it.
        let report = recover(explicit(found)).unwrap();
        assert_eq!((report.batches, report.rewritten), (2, true));
        let file = LodtFile::open(&path).unwrap();
        assert_eq!((file.version(), file.num_batches()), (found, 2));
        assert_eq!(file.read_batch(1).unwrap(), words_batch(1));
    }
}

#[test]
fn options_refuse_unknown_versions_and_compressed_1_0() {
    let bad = WriteOptions {
        format_version: Some(Version { major: 3, minor: 0 }),
        ..Default::default()
    };
    let err = Writer::try_new_with(Vec::new(), BTreeMap::new(), bad).unwrap_err();
    assert!(
        err.to_string()
            .contains("expected format version 1.0 or 2.0, found 3.0")
    );
    let bad = WriteOptions {
        format_version: Some(V1),
        compression: Compression::Lz4,
        ..Default::default()
    };
    let err = Writer::try_new_with(Vec::new(), BTreeMap::new(), bad).unwrap_err();
    assert!(
        err.to_string()
            .contains("compression lz4 needs format version 2.0, the options ask for 1.0"),
        "{err}"
    );
    // A compression alone: the default version, 2.0.
    let lz4 = WriteOptions {
        compression: Compression::Lz4,
        ..Default::default()
    };
    let mut w = Writer::try_new_with(Vec::new(), BTreeMap::new(), lz4).unwrap();
    assert_eq!(w.finish().unwrap()[12], 2);
}

/// A file writer sends each batch out as it goes (up to its last aligned
/// offset), in 2.0 as in 1.0: it does not hold every batch until `finish`.
#[test]
fn a_file_writer_writes_each_batch_out_before_finish() {
    let dir = tempfile::tempdir().unwrap();
    for (version, name) in [(V1, "v1.lodt"), (V2, "v2.lodt")] {
        let path = dir.path().join(name);
        let options = WriteOptions {
            format_version: Some(version),
            ..options(Compression::None)
        };
        let batch = |k: i64| {
            let t = LodTensor::from_vec(vec![k; 25_000], vec![25_000], Lod::empty()).unwrap();
            Batch::try_from_tensors([("t", t)]).unwrap()
        };
        let mut w = Writer::create_with(&path, BTreeMap::new(), options).unwrap();
        for k in 0..20 {
            w.write(&batch(k)).unwrap();
        }
        // The temporary file beside `path` holds all but the last batch
        // (2.0 writes it out while the next one is checksummed) and less
        // than 64 KiB before it.
        let written: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .map(|e| e.metadata().unwrap().len())
            .sum();
        assert!(
            written + 200_000 + (64 << 10) >= 20 * 200_000,
            "{version}: {written} bytes written of 20 batches of 200,000"
        );
        w.finish().unwrap();
        assert_eq!(LodtFile::open(&path).unwrap().num_batches(), 20);
    }
}
