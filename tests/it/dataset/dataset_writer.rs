//! Writing and opening sharded datasets (issue 14, part 1): shard sizes,
//! schema refusal on write and errors on read, manifest/shard mismatches
//! naming the shard, appends, parallel writers with a merge.

use crate::dataset_util;

use dataset_util::{check, make_batch, open, store, write_dataset};
use lodt::dataset::names::part_manifest_name;
use lodt::dataset::{
    Dataset, DatasetError, DatasetWriter, DatasetWriterOptions, LocalStore, MANIFEST_NAME,
    Manifest, MiniBatch, Schema,
};
use lodt::{Batch, Lod, LodTensor};
use std::path::Path;
use std::sync::Arc;

fn manifest(dir: &Path) -> Manifest {
    let bytes = std::fs::read(dir.join(MANIFEST_NAME)).unwrap();
    Manifest::from_json_bytes(&bytes, "test").unwrap()
}

fn save_manifest(dir: &Path, m: &Manifest) {
    std::fs::write(dir.join(MANIFEST_NAME), m.to_json_bytes()).unwrap();
}

fn sizes(n: usize) -> Vec<u64> {
    (0..n as u64).map(|k| 5 + k % 7).collect()
}

#[test]
fn shards_keep_to_the_target_size_and_the_manifest_records_them() {
    let dir = tempfile::tempdir().unwrap();
    let target = 8 * 1024;
    let n = write_dataset(dir.path(), &sizes(60), target);
    let m = manifest(dir.path());
    assert!(m.num_shards() >= 4, "{} shards", m.num_shards());
    assert_eq!(m.num_sequences(), n);
    assert_eq!(m.num_batches(), 60);
    for (i, s) in m.shards.iter().enumerate() {
        assert_eq!(s.name, format!("shard-{i:06}.lodt"));
        let size = std::fs::metadata(dir.path().join(&s.name)).unwrap().len();
        assert_eq!(size, s.bytes);
        assert!(
            s.bytes <= target || s.batches == 1,
            "{}: {} bytes",
            s.name,
            s.bytes
        );
        // Not absurdly small either: at least half the target but the last.
        if i + 1 < m.num_shards() {
            assert!(s.bytes > target / 2, "{}: {} bytes", s.name, s.bytes);
        }
        let file = lodt::LodtFile::open(dir.path().join(&s.name)).unwrap();
        assert_eq!(file.num_batches() as u64, s.batches);
    }
    // Per-tensor counts: label has one row per sequence; words' levels.
    let totals = m.totals();
    assert_eq!(totals[1].rows, n);
    assert!(totals[1].levels.is_empty());
    assert_eq!(totals[0].levels[0], n);
    let sentences: u64 = (0..n)
        .map(|id| dataset_util::shape_of(id).len() as u64)
        .sum();
    let words: u64 = (0..n)
        .map(|id| dataset_util::shape_of(id).iter().sum::<u64>())
        .sum();
    assert_eq!((totals[0].levels[1], totals[0].rows), (sentences, words));
    let dataset = open(dir.path());
    let report = dataset.verify().unwrap();
    assert_eq!(
        (report.shards, report.batches, report.sequences),
        (m.num_shards(), 60, n)
    );
    assert!(dataset.unlisted().unwrap().is_empty());
    // Every batch reads back as written.
    let mut next = 0;
    for batch in dataset.batches() {
        let batch = batch.unwrap();
        let rows = batch.get("label").unwrap().rows() as u64;
        assert_eq!(batch, make_batch(next, rows));
        next += rows;
    }
    assert_eq!(next, n);
}

#[test]
fn opening_reads_the_manifest_only() {
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &sizes(30), 4096);
    let m = manifest(dir.path());
    // Remove every shard but the first: opening and counting still work.
    for s in &m.shards[1..] {
        std::fs::remove_file(dir.path().join(&s.name)).unwrap();
    }
    let dataset = open(dir.path());
    assert_eq!(dataset.num_sequences(), n);
    let first = dataset.sequence(0).unwrap();
    check(&MiniBatch {
        epoch: 0,
        ids: vec![0],
        batch: first,
    });
    let last = n - 1;
    let err = dataset.sequence(last).unwrap_err();
    let name = &m.shards.last().unwrap().name;
    assert!(
        matches!(&err, DatasetError::ShardMismatch { shard, .. } if shard.ends_with(name.as_str())),
        "{err}"
    );
    assert!(err.to_string().contains("no such file"), "{err}");
}

#[test]
fn a_batch_that_does_not_match_the_schema_is_refused_when_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut w =
        DatasetWriter::create_in(store(dir.path()), DatasetWriterOptions::default()).unwrap();
    w.write(&make_batch(0, 4)).unwrap();
    let words = make_batch(0, 2).get("words").unwrap().clone();
    let label = make_batch(0, 2).get("label").unwrap().clone();
    let f32_label = LodTensor::from_vec(vec![0f32, 1.0], vec![2], Lod::empty()).unwrap();
    let wide = LodTensor::from_vec(vec![0i64; 4], vec![2, 2], Lod::empty()).unwrap();
    let leveled = LodTensor::from_vec(
        vec![0i64; 2],
        vec![2],
        Lod::try_from_lengths(&[vec![1, 1]]).unwrap(),
    )
    .unwrap();
    let three = LodTensor::from_vec(vec![0i64; 3], vec![3], Lod::empty()).unwrap();
    let scalar = LodTensor::from_vec(vec![0i64], vec![], Lod::empty()).unwrap();
    let cases: Vec<(Batch, &str)> = vec![
        (
            Batch::try_from_tensors([("words", words.clone())]).unwrap(),
            "tensor names",
        ),
        (
            Batch::try_from_tensors([
                ("words", words.clone()),
                ("label", label.clone()),
                ("x", label.clone()),
            ])
            .unwrap(),
            "tensor names",
        ),
        (
            Batch::try_from_tensors([("words", words.clone()), ("label", f32_label)]).unwrap(),
            "float32",
        ),
        (
            Batch::try_from_tensors([("words", words.clone()), ("label", wide)]).unwrap(),
            "[2]",
        ),
        (
            Batch::try_from_tensors([("words", words.clone()), ("label", leveled)]).unwrap(),
            "1 LoD levels",
        ),
        (
            Batch::try_from_tensors([("words", words.clone()), ("label", three)]).unwrap(),
            "top-level sequences",
        ),
        (
            Batch::try_from_tensors([("words", words), ("label", scalar)]).unwrap(),
            "0-D",
        ),
    ];
    for (batch, says) in cases {
        let err = w.write(&batch).unwrap_err();
        assert!(matches!(err, DatasetError::SchemaMismatch { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains("batch 1 written to"), "{text}");
        assert!(text.contains(says), "{says}: {text}");
    }
    // The writer goes on; nothing of the refused batches was written.
    w.write(&make_batch(4, 3)).unwrap();
    let m = w.finish().unwrap();
    assert_eq!((m.num_batches(), m.num_sequences()), (2, 7));
    open(dir.path()).verify().unwrap();
    // Appending with another schema is refused up front.
    let other = Schema::of_batch(
        &Batch::try_from_tensors([(
            "x",
            LodTensor::from_vec(vec![1u8], vec![1], Lod::empty()).unwrap(),
        )])
        .unwrap(),
    )
    .unwrap();
    let options = DatasetWriterOptions {
        schema: Some(other),
        ..Default::default()
    };
    let err = DatasetWriter::append_in(store(dir.path()), options).unwrap_err();
    assert!(matches!(err, DatasetError::SchemaMismatch { .. }), "{err}");
}

#[test]
fn a_shard_that_does_not_match_the_schema_is_an_error_when_read() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &[3, 4], 1 << 20);
    // A foreign writer lists a shard of another schema, with correct counts.
    let foreign = dir.path().join("foreign.lodt");
    let x = LodTensor::from_vec(vec![1.5f32, 2.5], vec![2], Lod::empty()).unwrap();
    let label = LodTensor::from_vec(vec![7i64, 8], vec![2], Lod::empty()).unwrap();
    lodt::format::save_batch(
        &foreign,
        &Batch::try_from_tensors([("words", x), ("label", label)]).unwrap(),
    )
    .unwrap();
    let file = lodt::LodtFile::open(&foreign).unwrap();
    let bytes = std::fs::read(&foreign).unwrap();
    let crc = u32::from_le_bytes(
        bytes[bytes.len() - 40..bytes.len() - 36]
            .try_into()
            .unwrap(),
    );
    let mut m = manifest(dir.path());
    let mut entry = m.shards[0].clone();
    entry.name = "foreign.lodt".into();
    entry.bytes = file.file_size();
    entry.footer_crc = crc;
    entry.batches = 1;
    entry.sequences = 2;
    entry.batch_sequences = vec![2];
    entry.tensors[0].levels = vec![2, 2];
    entry.tensors[1].rows = 2;
    m.shards.push(entry);
    save_manifest(dir.path(), &m);
    let dataset = open(dir.path());
    let err = dataset.sequence(7).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, DatasetError::SchemaMismatch { .. }), "{text}");
    assert!(
        text.contains("batch 0 of shard") && text.contains("foreign.lodt"),
        "{text}"
    );
    assert!(text.contains("float32") && text.contains("int64"), "{text}");
    // The shards before it still read.
    dataset.sequence(6).unwrap();
}

#[test]
fn a_manifest_that_disagrees_with_a_shard_is_an_error_naming_the_shard() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &sizes(12), 4096);
    let good = manifest(dir.path());
    let name = good.shards[1].name.clone();
    let first_of_1 = good.shards[0].sequences;
    let expect = |m: &Manifest, what: &str| {
        save_manifest(dir.path(), m);
        let dataset = open(dir.path());
        let err = match dataset.sequence(first_of_1) {
            Err(e) => e,
            Ok(_) => dataset.verify().unwrap_err(),
        };
        let text = err.to_string();
        assert!(
            matches!(err, DatasetError::ShardMismatch { .. }),
            "{what}: {text}"
        );
        assert!(
            text.contains(&name) && text.contains(what),
            "{what}: {text}"
        );
    };
    let mut m = good.clone();
    m.shards[1].bytes += 64;
    expect(&m, "byte size");
    let mut m = good.clone();
    m.shards[1].footer_crc ^= 1;
    expect(&m, "footer CRC");
    let mut m = good.clone();
    // The other version than the shard's (2.0 by default).
    let major = 3 - good.shards[1].expected_format_version().unwrap().major;
    m.shards[1].format_version = Some(lodt::format::Version { major, minor: 0 });
    expect(&m, "format version");
    // One more batch claimed: counts kept consistent so the manifest is valid.
    let mut m = good.clone();
    m.shards[1].batches += 1;
    m.shards[1].batch_sequences.push(0);
    expect(&m, "batch count");
    // Sequences moved between batches: caught when the batch is read.
    let mut m = good.clone();
    m.shards[1].batch_sequences[0] += 1;
    m.shards[1].batch_sequences[1] -= 1;
    expect(&m, "top-level sequences of batch 0");
    // Rows: caught by verify.
    let mut m = good.clone();
    m.shards[1].tensors[0].rows += 1;
    expect(&m, "rows of tensor \"words\"");
    let mut m = good.clone();
    m.shards[1].tensors[0].levels[1] += 1;
    expect(&m, "sequences of LoD level 1 of tensor \"words\"");
    // The shard replaced by another valid file.
    save_manifest(dir.path(), &good);
    let other = tempfile::tempdir().unwrap();
    write_dataset(other.path(), &sizes(12), 4096);
    std::fs::copy(
        other.path().join("shard-000002.lodt"),
        dir.path().join(&name),
    )
    .unwrap();
    let dataset = open(dir.path());
    let err = dataset.sequence(first_of_1).unwrap_err();
    assert!(matches!(err, DatasetError::ShardMismatch { .. }), "{err}");
    assert!(err.to_string().contains(&name), "{err}");
}

#[test]
fn a_damaged_shard_body_is_found_by_verify() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &sizes(6), 1 << 20);
    let m = manifest(dir.path());
    let path = dir.path().join(&m.shards[0].name);
    let dataset = open(dir.path());
    let range = dataset.shard(0).unwrap().batch(2).unwrap().byte_range();
    drop(dataset);
    let mut bytes = std::fs::read(&path).unwrap();
    // The last body byte of batch 2, before its checksum table.
    let at = (range.end - 200) as usize;
    let at = (range.start as usize + 64..at)
        .rev()
        .find(|&i| bytes[i] != 0)
        .unwrap();
    bytes[at] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let err = open(dir.path()).verify().unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, DatasetError::Shard { .. }), "{text}");
    assert!(
        text.contains(&m.shards[0].name) && text.contains("batch 2"),
        "{text}"
    );
}

#[test]
fn bad_manifests_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &[2, 2], 1 << 20);
    let good = std::fs::read_to_string(dir.path().join(MANIFEST_NAME)).unwrap();
    // These edits keep the manifest's first line, and some its size: a tool
    // that edits a manifest must drop its index (spec section 3.2). Without
    // it, the JSON is what is read and checked.
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name.starts_with(lodt::dataset::names::INDEX_PREFIX) {
            std::fs::remove_file(dir.path().join(name)).unwrap();
        }
    }
    let cases = [
        ("not json", "not a JSON object"),
        ("{\"format\":\"other\"}", "\"format\" field"),
        (
            &good.replace("\"major\":1", "\"major\":2") as &str,
            "version 2.5",
        ),
        (
            &good.replace("shard-000000.lodt", "../shard-000000.lodt"),
            "shard name",
        ),
        (
            &good.replace("\"batch_sequences\":[2,2]", "\"batch_sequences\":[2,3]"),
            "sum to 5",
        ),
        (&good.replace("\"int64\"", "\"complex64\""), "unknown dtype"),
    ];
    for (text, says) in cases {
        std::fs::write(dir.path().join(MANIFEST_NAME), text).unwrap();
        let err = Dataset::open(dir.path()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(says), "{says}: {msg}");
        assert!(msg.contains(MANIFEST_NAME), "{msg}");
    }
    // A newer minor version with an unknown field reads.
    let newer = good
        .replace("\"minor\":0", "\"minor\":3")
        .replace("\"shards\":[", "\"future\":{\"x\":1},\n\"shards\":[");
    std::fs::write(dir.path().join(MANIFEST_NAME), newer).unwrap();
    assert_eq!(Dataset::open(dir.path()).unwrap().num_sequences(), 4);
}

#[test]
fn appends_add_shards_under_new_names_and_one_writer_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &sizes(10), 4096);
    let before = manifest(dir.path());
    // A file left by an interrupted writer is never overwritten.
    let stray = format!("shard-{:06}.lodt", before.num_shards());
    std::fs::write(dir.path().join(&stray), b"left over").unwrap();
    let options = DatasetWriterOptions {
        shard_bytes: 4096,
        metadata: [("split".to_string(), "train".to_string())].into(),
        ..Default::default()
    };
    let mut w = DatasetWriter::append_in(store(dir.path()), options).unwrap();
    // A second writer is refused while this one holds the dataset.
    let err =
        DatasetWriter::append_in(store(dir.path()), DatasetWriterOptions::default()).unwrap_err();
    assert!(matches!(err, DatasetError::Locked { .. }), "{err}");
    let err = Dataset::commit_parts_in(store(dir.path())).unwrap_err();
    assert!(matches!(err, DatasetError::Locked { .. }), "{err}");
    // Readers are not blocked, and see the old manifest until finish.
    assert_eq!(open(dir.path()).num_sequences(), n);
    let mut next = n;
    for k in 0..10 {
        w.write(&make_batch(next, 3 + k)).unwrap();
        next += 3 + k;
    }
    assert_eq!(open(dir.path()).num_sequences(), n);
    let after = w.finish().unwrap();
    assert_eq!(after.shards[..before.num_shards()], before.shards[..]);
    assert_eq!(after.metadata["split"], "train");
    let names: Vec<&str> = after.shards.iter().map(|s| s.name.as_str()).collect();
    assert!(!names.contains(&stray.as_str()));
    assert_eq!(
        std::fs::read(dir.path().join(&stray)).unwrap(),
        b"left over"
    );
    let dataset = open(dir.path());
    assert_eq!(dataset.num_sequences(), next);
    assert_eq!(dataset.verify().unwrap().sequences, next);
    assert_eq!(dataset.unlisted().unwrap(), vec![stray]);
    for id in [0, n - 1, n, next - 1] {
        check(&MiniBatch {
            epoch: 0,
            ids: vec![id],
            batch: dataset.sequence(id).unwrap(),
        });
    }
    // create refuses an existing dataset.
    let err =
        DatasetWriter::create_in(store(dir.path()), DatasetWriterOptions::default()).unwrap_err();
    assert!(matches!(err, DatasetError::AlreadyExists { .. }), "{err}");
}

#[test]
fn a_dropped_writer_leaves_the_manifest_and_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &[4, 4], 1 << 20);
    let mut w = DatasetWriter::append_in(
        store(dir.path()),
        DatasetWriterOptions {
            shard_bytes: 2048,
            ..Default::default()
        },
    )
    .unwrap();
    for k in 0..6 {
        w.write(&make_batch(n + 10 * k, 10)).unwrap();
    }
    drop(w);
    let dataset = open(dir.path());
    assert_eq!(dataset.num_sequences(), n);
    // Closed shards remain, unlisted; the open one's temporary file is gone.
    let unlisted = dataset.unlisted().unwrap();
    assert!(!unlisted.is_empty());
    let hidden: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(hidden.is_empty(), "{hidden:?}");
    // The lock went with the writer.
    DatasetWriter::append_in(store(dir.path()), DatasetWriterOptions::default())
        .unwrap()
        .finish()
        .unwrap();
}

#[test]
fn two_parallel_writers_and_a_merge() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    // Two writers at once, in two threads, each with its own id.
    let handles: Vec<_> = [("a", 0u64), ("b", 1000)]
        .into_iter()
        .map(|(id, first)| {
            let root = root.clone();
            std::thread::spawn(move || {
                let options = DatasetWriterOptions {
                    shard_bytes: 4096,
                    metadata: [("source".to_string(), "test".to_string())].into(),
                    ..Default::default()
                };
                let mut w = DatasetWriter::create_part_in(store(&root), id, options).unwrap();
                let mut next = first;
                for k in 0..12 {
                    w.write(&make_batch(next, 2 + k % 5)).unwrap();
                    next += 2 + k % 5;
                }
                let m = w.finish().unwrap();
                (m, next - first)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let total: u64 = results.iter().map(|r| r.1).sum();
    // Not visible before the merge.
    assert!(matches!(
        Dataset::open(&root),
        Err(DatasetError::NotADataset { .. })
    ));
    let merged = Dataset::commit_parts_in(store(&root)).unwrap();
    assert_eq!(merged.num_sequences(), total);
    assert_eq!(merged.metadata["source"], "test");
    let a = results[0].0.num_shards();
    assert!(
        merged.shards[..a]
            .iter()
            .all(|s| s.name.starts_with("a-shard-"))
    );
    assert!(
        merged.shards[a..]
            .iter()
            .all(|s| s.name.starts_with("b-shard-"))
    );
    assert!(!root.join(part_manifest_name("a")).exists());
    let dataset = open(&root);
    assert_eq!(dataset.verify().unwrap().sequences, total);
    assert!(dataset.unlisted().unwrap().is_empty());
    // Every sequence reads as written (ids 0.. for a, 1000.. for b).
    let mut labels = Vec::new();
    for id in 0..dataset.num_sequences() {
        let seq = dataset.sequence(id).unwrap();
        labels.push(seq.get("label").unwrap().as_slice::<i64>().unwrap()[0]);
    }
    let (la, lb) = labels.split_at(results[0].1 as usize);
    assert_eq!(la, (0..results[0].1 as i64).collect::<Vec<_>>());
    assert_eq!(lb, (1000..1000 + results[1].1 as i64).collect::<Vec<_>>());

    // Writer "a" writes more later: new names, after its merged shards.
    let mut w =
        DatasetWriter::create_part_in(store(&root), "a", DatasetWriterOptions::default()).unwrap();
    w.write(&make_batch(5000, 3)).unwrap();
    let part = w.finish().unwrap();
    assert_eq!(part.shards[0].name, format!("a-shard-{a:06}.lodt"));
    // A merge stopped after writing the manifest, before deleting the part,
    // is redone harmlessly: identical entries are kept once.
    let part_bytes = std::fs::read(root.join(part_manifest_name("a"))).unwrap();
    let merged = Dataset::commit_parts_in(store(&root)).unwrap();
    std::fs::write(root.join(part_manifest_name("a")), &part_bytes).unwrap();
    assert_eq!(Dataset::commit_parts_in(store(&root)).unwrap(), merged);
    assert_eq!(merged.num_sequences(), total + 3);
}

#[test]
fn conflicting_parts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut a =
        DatasetWriter::create_part_in(store(root), "a", DatasetWriterOptions::default()).unwrap();
    a.write(&make_batch(0, 2)).unwrap();
    a.finish().unwrap();
    // Another schema.
    let mut b =
        DatasetWriter::create_part_in(store(root), "b", DatasetWriterOptions::default()).unwrap();
    let x = LodTensor::from_vec(vec![1u8], vec![1], Lod::empty()).unwrap();
    b.write(&Batch::try_from_tensors([("x", x)]).unwrap())
        .unwrap();
    b.finish().unwrap();
    let err = Dataset::commit_parts_in(store(root)).unwrap_err();
    assert!(
        matches!(err, DatasetError::Conflict { ref what, .. } if what == "schema"),
        "{err}"
    );
    std::fs::remove_file(root.join(part_manifest_name("b"))).unwrap();
    // Another value for a metadata key.
    let options = |v: &str| DatasetWriterOptions {
        metadata: [("k".to_string(), v.to_string())].into(),
        ..Default::default()
    };
    DatasetWriter::create_part_in(store(root), "c", options("1"))
        .unwrap()
        .finish()
        .unwrap();
    DatasetWriter::create_part_in(store(root), "d", options("2"))
        .unwrap()
        .finish()
        .unwrap();
    let err = Dataset::commit_parts_in(store(root)).unwrap_err();
    assert!(err.to_string().contains("metadata key \"k\""), "{err}");
    std::fs::remove_file(root.join(part_manifest_name("d"))).unwrap();
    // A part whose shard is missing.
    let part_a = std::fs::read_to_string(root.join(part_manifest_name("a"))).unwrap();
    std::fs::remove_file(root.join("a-shard-000000.lodt")).unwrap();
    let err = Dataset::commit_parts_in(store(root)).unwrap_err();
    assert!(err.to_string().contains("a-shard-000000.lodt"), "{err}");
    // Nothing was committed by the failed merges.
    assert!(!root.join(MANIFEST_NAME).exists());
    assert!(part_a.contains("a-shard-000000.lodt"));
    // Bad writer ids.
    for id in ["", "a/b", "..", "x y"] {
        let err = DatasetWriter::create_part_in(store(root), id, DatasetWriterOptions::default())
            .unwrap_err();
        assert!(
            matches!(err, DatasetError::InvalidArgument(_)),
            "{id:?}: {err}"
        );
    }
}

#[test]
fn a_store_is_a_seam_other_backends_can_fill() {
    // Everything goes through the store: a wrapper that counts reads sees
    // two reads to open (the manifest, for its first line, then the shard
    // index it names: the wrapper maps nothing), and one shard open per
    // shard touched.
    #[derive(Debug)]
    struct Counting {
        inner: LocalStore,
        reads: std::sync::atomic::AtomicUsize,
        opens: std::sync::atomic::AtomicUsize,
    }
    use lodt::dataset::DatasetStore;
    use lodt::dataset::store::{ShardSink, StoreLock};
    use std::sync::atomic::Ordering::Relaxed;
    impl DatasetStore for Counting {
        fn location(&self) -> String {
            self.inner.location()
        }
        fn object_location(&self, name: &str) -> String {
            self.inner.object_location(name)
        }
        fn read(&self, name: &str) -> lodt::dataset::Result<Option<Vec<u8>>> {
            self.reads.fetch_add(1, Relaxed);
            self.inner.read(name)
        }
        fn write_atomic(&self, name: &str, bytes: &[u8]) -> lodt::dataset::Result<()> {
            self.inner.write_atomic(name, bytes)
        }
        fn open_shard(&self, name: &str) -> lodt::dataset::Result<lodt::LodtFile> {
            self.opens.fetch_add(1, Relaxed);
            self.inner.open_shard(name)
        }
        fn create_shard(&self, name: &str) -> lodt::dataset::Result<Box<dyn ShardSink>> {
            self.inner.create_shard(name)
        }
        fn list(&self) -> lodt::dataset::Result<Vec<String>> {
            self.inner.list()
        }
        fn remove(&self, name: &str) -> lodt::dataset::Result<()> {
            self.inner.remove(name)
        }
        fn lock(&self) -> lodt::dataset::Result<StoreLock> {
            self.inner.lock()
        }
        fn lock_object(&self, name: &str) -> lodt::dataset::Result<Option<StoreLock>> {
            self.inner.lock_object(name)
        }
    }
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &sizes(20), 4096);
    let counting = Arc::new(Counting {
        inner: LocalStore::new(dir.path()),
        reads: 0.into(),
        opens: 0.into(),
    });
    let dataset = Dataset::open_in(counting.clone()).unwrap();
    assert_eq!(
        (counting.reads.load(Relaxed), counting.opens.load(Relaxed)),
        (2, 0)
    );
    assert!(dataset.is_indexed());
    dataset.sequence(0).unwrap();
    dataset.sequence(1).unwrap();
    dataset.sequence(dataset.num_sequences() - 1).unwrap();
    assert_eq!(
        (counting.reads.load(Relaxed), counting.opens.load(Relaxed)),
        (2, 2)
    );
}

/// An explicit version on a dataset append is the new shards' (each shard is
/// a file of its own): no error when the dataset's shards have another.
#[test]
fn an_explicit_version_on_a_dataset_append_writes_the_new_shards_in_it() {
    use lodt::format::Version;
    let dir = tempfile::tempdir().unwrap();
    let mut w = DatasetWriter::create(dir.path(), DatasetWriterOptions::default()).unwrap();
    w.write(&make_batch(0, 5)).unwrap();
    w.finish().unwrap();
    let v1 = DatasetWriterOptions {
        format_version: Some(Version { major: 1, minor: 0 }),
        ..Default::default()
    };
    let mut w = DatasetWriter::append(dir.path(), v1).unwrap();
    w.write(&make_batch(5, 5)).unwrap();
    w.finish().unwrap();
    let versions: Vec<String> = manifest(dir.path())
        .shards
        .iter()
        .map(|s| s.expected_format_version().unwrap().to_string())
        .collect();
    assert_eq!(versions, ["2.0", "1.0"]);
    let dataset = open(dir.path());
    for id in 0..10u64 {
        assert_eq!(dataset.sequence(id).unwrap(), make_batch(id, 1), "{id}");
    }
    dataset.verify().unwrap();
}

#[test]
fn a_dataset_mixes_shards_of_both_format_versions_and_records_each() {
    use lodt::format::{Compression, LodtFile, Version};
    let dir = tempfile::tempdir().unwrap();
    let batches: Vec<Batch> = (0..6).map(|k| make_batch(k * 5, 5)).collect();
    // Written as 1.0, on request.
    let mut w = DatasetWriter::create(
        dir.path(),
        DatasetWriterOptions {
            shard_bytes: 1,
            format_version: Some(Version { major: 1, minor: 0 }),
            ..Default::default()
        },
    )
    .unwrap();
    for b in &batches[..3] {
        w.write(b).unwrap();
    }
    w.finish().unwrap();
    // Appended with the default options: 2.0 shards beside the 1.0 ones.
    let mut w = DatasetWriter::append(
        dir.path(),
        DatasetWriterOptions {
            shard_bytes: 1,
            ..Default::default()
        },
    )
    .unwrap();
    for b in &batches[3..5] {
        w.write(b).unwrap();
    }
    w.finish().unwrap();
    // Appended as 2.0, compressed.
    let mut w = DatasetWriter::append(
        dir.path(),
        DatasetWriterOptions {
            shard_bytes: 1,
            compression: Compression::Zstd { level: 3 },
            ..Default::default()
        },
    )
    .unwrap();
    for b in &batches[5..] {
        w.write(b).unwrap();
    }
    w.finish().unwrap();
    let m = manifest(dir.path());
    let versions: Vec<String> = m
        .shards
        .iter()
        .map(|s| s.expected_format_version().unwrap().to_string())
        .collect();
    assert_eq!(versions, ["1.0", "1.0", "1.0", "2.0", "2.0", "2.0"]);
    for s in &m.shards {
        let file = LodtFile::open(dir.path().join(&s.name)).unwrap();
        assert_eq!(Some(file.version()), s.format_version);
    }
    // Every sequence reads back, from either kind of shard, and verify passes.
    let dataset = open(dir.path());
    for id in 0..30u64 {
        let want = make_batch(id, 1);
        assert_eq!(dataset.sequence(id).unwrap(), want, "sequence {id}");
    }
    dataset.verify().unwrap();
    // A manifest without the field (a writer before 1.3, or an older writer
    // that rewrote the manifest and dropped the field it does not know)
    // means the shard header's version: every shard reads, of either version.
    let mut old = m.clone();
    for s in &mut old.shards {
        s.format_version = None;
    }
    save_manifest(dir.path(), &old);
    let dataset = open(dir.path());
    assert_eq!(dataset.sequence(0).unwrap(), make_batch(0, 1));
    assert_eq!(dataset.sequence(29).unwrap(), make_batch(29, 1));
    dataset.verify().unwrap();
}

/// A manifest rewritten by an older writer (which drops the `format_version`
/// it does not know, and writes its own manifest version) reads every shard
/// as its header says; a recorded version that is not the header's is still
/// an error. Every subset of the six shards losing the field, as raw JSON.
#[test]
fn a_manifest_rewritten_by_an_older_writer_reads_every_shard() {
    use lodt::format::{Compression, Version};
    let dir = tempfile::tempdir().unwrap();
    let batches: Vec<Batch> = (0..6).map(|k| make_batch(k * 5, 5)).collect();
    for (range, version, compression) in [
        (
            0..2,
            Some(Version { major: 1, minor: 0 }),
            Compression::None,
        ),
        (2..4, None, Compression::None),
        (4..6, None, Compression::Zstd { level: 1 }),
    ] {
        let options = DatasetWriterOptions {
            shard_bytes: 1,
            format_version: version,
            compression,
            ..Default::default()
        };
        let mut w = if range.start == 0 {
            DatasetWriter::create(dir.path(), options)
        } else {
            DatasetWriter::append(dir.path(), options)
        }
        .unwrap();
        for b in &batches[range] {
            w.write(b).unwrap();
        }
        w.finish().unwrap();
    }
    let path = dir.path().join("lodt-dataset.json");
    let original: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut trials = 0;
    for mask in 0u32..64 {
        let mut json = original.clone();
        json["version"] = serde_json::json!({"major": 1, "minor": 2});
        for (k, shard) in json["shards"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .enumerate()
        {
            if mask & (1 << k) != 0 {
                shard.as_object_mut().unwrap().remove("format_version");
            }
        }
        std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
        let dataset = open(dir.path());
        for id in 0..30u64 {
            assert_eq!(
                dataset.sequence(id).unwrap(),
                make_batch(id, 1),
                "mask {mask:#b}, id {id}"
            );
        }
        dataset.verify().unwrap();
        trials += 1;
    }
    // A recorded version other than the header's is refused, naming both.
    for k in 0..6 {
        let mut json = original.clone();
        let theirs = json["shards"][k]["format_version"]
            .as_str()
            .unwrap()
            .to_owned();
        let other = if theirs == "1.0" { "2.0" } else { "1.0" };
        json["shards"][k]["format_version"] = other.into();
        std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
        let err = open(dir.path())
            .sequence(k as u64 * 5)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("format version") && err.contains(other) && err.contains(&theirs),
            "{err}"
        );
        trials += 1;
    }
    assert_eq!(trials, 70);
}
