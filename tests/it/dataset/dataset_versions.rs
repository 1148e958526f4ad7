//! Dataset versions and tags (`spec/DATASET.md` section 3.3): every final
//! commit makes a version whose manifest stays readable, the log, a crash
//! between the main manifest and its copy (the next commit backfills it), a
//! dataset written before versions, concurrent appenders, and tags that
//! never move; locally and on S3 (moto).

use crate::dataset_util::{make_batch, store};
use lodt::dataset::names::version_manifest_name;
use lodt::dataset::{
    Dataset, DatasetError, DatasetStore, DatasetWriter, DatasetWriterOptions, MANIFEST_NAME,
    Manifest,
};
use std::sync::Arc;

/// Writes batches of 10 sequences from `first` (one shard each) as a
/// create or an append; returns the committed manifest.
fn commit(store: &Arc<dyn DatasetStore>, first: u64, batches: u64) -> Manifest {
    let options = DatasetWriterOptions {
        shard_bytes: 1,
        ..Default::default()
    };
    let mut w = match DatasetWriter::append_in(store.clone(), options.clone()) {
        Ok(w) => w,
        Err(DatasetError::NotADataset { .. }) => {
            DatasetWriter::create_in(store.clone(), options).unwrap()
        }
        Err(e) => panic!("{e}"),
    };
    for k in 0..batches {
        w.write(&make_batch(first + k * 10, 10)).unwrap();
    }
    w.finish().unwrap()
}

/// Every version of `store` opens as the manifest its commit made, and
/// reads the sequences that version held.
fn check_versions(store: &Arc<dyn DatasetStore>, made: &[Manifest]) {
    for (k, want) in made.iter().enumerate() {
        let n = k as u64 + 1;
        let ds = Dataset::open_version_in(store.clone(), n).unwrap();
        assert_eq!(ds.manifest(), want, "version {n}");
        assert_eq!(ds.commit_record().map(|r| r.version), Some(n));
        assert_eq!(ds.verify().unwrap().sequences, want.num_sequences());
    }
}

#[test]
fn every_commit_makes_a_readable_version() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let mut made = vec![commit(&s, 0, 2), commit(&s, 20, 1)];
    // Parallel parts merged: a version too.
    for (id, first) in [("w1", 30u64), ("w2", 40)] {
        let mut w = DatasetWriter::create_part_in(s.clone(), id, Default::default()).unwrap();
        w.write(&make_batch(first, 10)).unwrap();
        w.finish().unwrap();
    }
    made.push(Dataset::commit_parts_in(s.clone()).unwrap());
    // An append with a checkpoint: one version, the checkpoint none.
    let mut w = DatasetWriter::append_in(s.clone(), Default::default()).unwrap();
    w.write(&make_batch(50, 10)).unwrap();
    w.flush().unwrap();
    assert_eq!(Dataset::open_in(s.clone()).unwrap().num_sequences(), 60);
    assert_eq!(Dataset::versions_in(s.clone()).unwrap().len(), 3);
    assert_eq!(
        Dataset::open_version_in(s.clone(), 3)
            .unwrap()
            .num_sequences(),
        50
    );
    w.write(&make_batch(60, 5)).unwrap();
    made.push(w.finish().unwrap());

    let log = Dataset::versions_in(s.clone()).unwrap();
    let rows: Vec<(u64, &str, u64, u64, u64)> = log
        .iter()
        .map(|r| {
            (
                r.version,
                r.operation.as_str(),
                r.sequences,
                r.sequences_added,
                r.sequences_removed,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (1, "create", 20, 20, 0),
            (2, "append", 30, 10, 0),
            (3, "merge", 50, 20, 0),
            (4, "append", 65, 15, 0),
        ]
    );
    for (r, m) in log.iter().zip(&made) {
        assert_eq!(r.bytes, m.num_bytes());
        assert_eq!(r.commit_id.as_deref(), m.commits.last().map(String::as_str));
        assert_eq!(r.bytes_removed, 0);
        assert!(r.time.as_deref().is_some_and(|t| t.ends_with('Z')));
    }
    assert_eq!(
        log[1].bytes_added,
        made[1].num_bytes() - made[0].num_bytes()
    );
    check_versions(&s, &made);
    // The main manifest is where it was, and is the latest version.
    let current = Dataset::open_in(s.clone()).unwrap();
    assert_eq!(current.commit_record(), made[3].commit.as_deref());
    let err = Dataset::open_version_in(s.clone(), 5).unwrap_err();
    assert!(
        matches!(
            err,
            DatasetError::NoSuchVersion {
                version: 5,
                latest: 4,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("no version 5"), "{err}");
    // A retry of a committed write (same commit id) makes no version.
    let id = made[3].commits.last().unwrap().clone();
    let options = DatasetWriterOptions {
        commit_id: Some(id),
        ..Default::default()
    };
    let mut w = DatasetWriter::append_in(s.clone(), options).unwrap();
    w.write(&make_batch(65, 5)).unwrap();
    w.finish().unwrap();
    assert_eq!(Dataset::versions_in(s).unwrap().len(), 4);
}

#[test]
fn a_crash_before_the_copy_loses_no_version() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let made = vec![commit(&s, 0, 1), commit(&s, 10, 1)];
    // The writer of version 2 stopped after its manifest, before its copy.
    std::fs::remove_file(dir.path().join(version_manifest_name(2))).unwrap();
    assert_eq!(
        Dataset::open_version_in(s.clone(), 2).unwrap().manifest(),
        &made[1]
    );
    assert_eq!(Dataset::versions_in(s.clone()).unwrap().len(), 2);
    // The next commit writes it from the manifest it read, then its own.
    let mut made = made;
    made.push(commit(&s, 20, 1));
    assert!(dir.path().join(version_manifest_name(2)).exists());
    assert!(dir.path().join(version_manifest_name(3)).exists());
    check_versions(&s, &made);
    // A tag of the current version backfills it too.
    std::fs::remove_file(dir.path().join(version_manifest_name(3))).unwrap();
    Dataset::tag_in(s.clone(), "now", None).unwrap();
    assert!(dir.path().join(version_manifest_name(3)).exists());
}

#[test]
fn a_dataset_written_before_versions_is_version_0() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    commit(&s, 0, 2);
    // As a 1.6 writer leaves it: no record, no copies.
    let mut old = Dataset::open_in(s.clone()).unwrap().manifest().clone();
    old.commit = None;
    std::fs::remove_file(dir.path().join(version_manifest_name(1))).unwrap();
    std::fs::write(dir.path().join(MANIFEST_NAME), old.to_json_bytes()).unwrap();
    let log = Dataset::versions_in(s.clone()).unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(
        (log[0].version, log[0].operation.as_str(), log[0].sequences),
        (0, lodt::dataset::UNRECORDED, 20)
    );
    assert_eq!(
        Dataset::open_version_in(s.clone(), 0).unwrap().manifest(),
        &old
    );
    let v1 = commit(&s, 20, 1);
    let record = v1.commit.clone().unwrap();
    assert_eq!(
        (
            record.version,
            record.operation.as_str(),
            record.sequences_added
        ),
        (1, "append", 10)
    );
    assert_eq!(
        Dataset::open_version_in(s.clone(), 0).unwrap().manifest(),
        &old
    );
    assert_eq!(
        Dataset::open_version_in(s.clone(), 1).unwrap().manifest(),
        &v1
    );
    // An older writer appends again (drops the record): the next number.
    let mut older = v1.clone();
    older.commit = None;
    older.shards.truncate(2);
    std::fs::write(dir.path().join(MANIFEST_NAME), older.to_json_bytes()).unwrap();
    let log = Dataset::versions_in(s.clone()).unwrap();
    let numbers: Vec<(u64, &str)> = log
        .iter()
        .map(|r| (r.version, r.operation.as_str()))
        .collect();
    assert_eq!(
        numbers,
        [(0, "unrecorded"), (1, "append"), (2, "unrecorded")]
    );
    assert_eq!(log[2].sequences_removed, 10);
    let v3 = commit(&s, 20, 1);
    assert_eq!(v3.commit.as_ref().unwrap().version, 3);
    assert_eq!(
        Dataset::open_version_in(s.clone(), 2).unwrap().manifest(),
        &older
    );
}

#[test]
fn concurrent_appenders_make_consecutive_versions() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    commit(&s, 0, 1);
    let appenders: Vec<_> = [100u64, 200]
        .into_iter()
        .map(|first| {
            let s = s.clone();
            std::thread::spawn(move || {
                loop {
                    match DatasetWriter::append_in(s.clone(), Default::default()) {
                        Ok(mut w) => {
                            w.write(&make_batch(first, 10)).unwrap();
                            return w.finish().unwrap();
                        }
                        Err(DatasetError::Locked { .. }) => {
                            std::thread::sleep(std::time::Duration::from_millis(20));
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    let mut made: Vec<Manifest> = appenders.into_iter().map(|t| t.join().unwrap()).collect();
    made.sort_by_key(|m| m.commit.as_ref().unwrap().version);
    let numbers: Vec<u64> = Dataset::versions_in(s.clone())
        .unwrap()
        .iter()
        .map(|r| r.version)
        .collect();
    assert_eq!(numbers, [1, 2, 3]);
    for m in &made {
        let n = m.commit.as_ref().unwrap().version;
        assert_eq!(
            Dataset::open_version_in(s.clone(), n).unwrap().manifest(),
            m
        );
    }
    assert_eq!(made[0].num_sequences(), 20);
    assert_eq!(made[1].num_sequences(), 30);
}

#[test]
fn tags_never_move() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    commit(&s, 0, 1);
    commit(&s, 10, 1);
    let a = Dataset::tag_in(s.clone(), "run-a", None).unwrap();
    assert_eq!(a.version, 2);
    assert_eq!(Dataset::tag_in(s.clone(), "run-a", Some(2)).unwrap(), a);
    let err = Dataset::tag_in(s.clone(), "run-a", Some(1)).unwrap_err();
    assert!(
        matches!(
            err,
            DatasetError::TagExists {
                version: 2,
                requested: 1,
                ..
            }
        ),
        "{err}"
    );
    Dataset::tag_in(s.clone(), "base", Some(1)).unwrap();
    commit(&s, 20, 1);
    assert_eq!(
        Dataset::open_tag_in(s.clone(), "base")
            .unwrap()
            .num_sequences(),
        10
    );
    assert_eq!(
        Dataset::open_tag_in(s.clone(), "run-a")
            .unwrap()
            .num_sequences(),
        20
    );
    assert_eq!(Dataset::tag_version_in(s.clone(), "run-a").unwrap(), 2);
    let names: Vec<(String, u64)> = Dataset::tags_in(s.clone())
        .unwrap()
        .into_iter()
        .map(|t| (t.name, t.version))
        .collect();
    assert_eq!(names, [("base".into(), 1), ("run-a".into(), 2)]);
    for bad in ["12", "a/b", "", ".x"] {
        let err = Dataset::tag_in(s.clone(), bad, None).unwrap_err();
        assert!(
            matches!(err, DatasetError::InvalidArgument(_)),
            "{bad:?}: {err}"
        );
    }
    let err = Dataset::tag_in(s.clone(), "later", Some(9)).unwrap_err();
    assert!(
        matches!(err, DatasetError::NoSuchVersion { version: 9, .. }),
        "{err}"
    );
    let err = Dataset::open_tag_in(s.clone(), "none").unwrap_err();
    assert!(matches!(err, DatasetError::NoSuchTag { .. }), "{err}");
    assert!(!dir.path().join("lodt-dataset.tag.later.json").exists());
}

#[cfg(feature = "remote")]
#[test]
fn versions_on_s3() {
    use crate::remote::remote_s3::{create_bucket, options, python_with_moto, start_moto};
    let Some(python) = python_with_moto() else {
        eprintln!("SKIPPED: moto not available (set LODT_PYTHON to a python with moto[server])");
        return;
    };
    let moto = start_moto(&python);
    create_bucket(moto.port, "data");
    let o = options(moto.port);
    let s = lodt::remote::store_for("s3://data/versions", &o).unwrap();
    let first = commit(&s, 0, 2);
    // Two appenders racing: the loser's conditional put fails (another
    // writer's manifest), it writes again; versions 2 and 3, both kept.
    let racers: Vec<_> = [100u64, 200]
        .into_iter()
        .map(|first| {
            let s = s.clone();
            std::thread::spawn(move || {
                loop {
                    let mut w = DatasetWriter::append_in(s.clone(), Default::default()).unwrap();
                    w.write(&make_batch(first, 10)).unwrap();
                    match w.finish() {
                        Ok(m) => return m,
                        Err(DatasetError::ManifestChanged { .. }) => continue,
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    let mut made: Vec<Manifest> = racers.into_iter().map(|t| t.join().unwrap()).collect();
    made.sort_by_key(|m| m.commit.as_ref().unwrap().version);
    made.insert(0, first);
    let numbers: Vec<u64> = Dataset::versions_in(s.clone())
        .unwrap()
        .iter()
        .map(|r| r.version)
        .collect();
    assert_eq!(numbers, [1, 2, 3]);
    for (k, m) in made.iter().enumerate() {
        let ds = Dataset::open_version_in(s.clone(), k as u64 + 1).unwrap();
        assert_eq!(ds.manifest(), m, "version {}", k + 1);
        assert_eq!(ds.num_sequences(), 20 + 10 * k as u64);
    }
    // A crash before the copy: the next commit backfills it.
    s.remove(&version_manifest_name(3)).unwrap();
    assert_eq!(
        Dataset::open_version_in(s.clone(), 3).unwrap().manifest(),
        &made[2]
    );
    made.push(commit(&s, 300, 1));
    assert!(s.read(&version_manifest_name(3)).unwrap().is_some());
    check_versions(&s, &made);
    // Tags: a conditional create; the same version again is a no-op,
    // another version an error.
    let t = Dataset::tag_in(s.clone(), "run-1", Some(2)).unwrap();
    assert_eq!(Dataset::tag_in(s.clone(), "run-1", Some(2)).unwrap(), t);
    let err = Dataset::tag_in(s.clone(), "run-1", None).unwrap_err();
    assert!(
        matches!(
            err,
            DatasetError::TagExists {
                version: 2,
                requested: 4,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        Dataset::open_tag_in(s.clone(), "run-1").unwrap().manifest(),
        &made[1]
    );
}
