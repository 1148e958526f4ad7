//! The decision after a failed manifest write, against a store whose
//! conditional write fails the ways an object store's does: the write
//! applied and its answer lost, a retried request refused (412) after the
//! first one applied, a failure before anything was applied, a store that
//! cannot be read afterwards, another writer's commit in between.
#![cfg(test)]

use super::super::store::{ObjectVersion, ShardSink, StoreLock};
use super::super::{
    Dataset, DatasetError, DatasetStore, DatasetWriter, DatasetWriterOptions, LocalStore,
    MANIFEST_MINOR, MANIFEST_NAME, Manifest,
};
use crate::format::LodtFile;
use crate::{Batch, Lod, LodTensor};
use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};

/// What the next conditional write does.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    None,
    /// Applied; the answer is lost (a connection reset).
    LoseAnswer,
    /// Applied; the retried request is refused (HTTP 412).
    RefuseRetry,
    /// Not applied; a server error.
    FailBefore,
    /// Applied; the answer is lost and the store cannot be read afterwards
    /// (for `reads` reads).
    Unreachable {
        reads: u32,
    },
    /// Another writer commits first; this write is refused (412).
    OtherWriterFirst,
}

/// Manifests in memory with versions (as an object store's ETags); shards
/// in a local directory.
#[derive(Debug)]
struct FlakyStore {
    shards: LocalStore,
    objects: Mutex<BTreeMap<String, (Vec<u8>, u64)>>,
    next_version: Mutex<u64>,
    fault: Mutex<Fault>,
    failing_reads: Mutex<u32>,
    /// Conditional writes applied.
    applied: Mutex<u32>,
}

impl FlakyStore {
    fn new(dir: &std::path::Path) -> Arc<Self> {
        Arc::new(FlakyStore {
            shards: LocalStore::new(dir).with_fsync(false),
            objects: Mutex::new(BTreeMap::new()),
            next_version: Mutex::new(1),
            fault: Mutex::new(Fault::None),
            failing_reads: Mutex::new(0),
            applied: Mutex::new(0),
        })
    }

    fn arm(&self, fault: Fault) {
        *self.fault.lock().unwrap() = fault;
    }

    fn version(v: u64) -> ObjectVersion {
        ObjectVersion {
            e_tag: Some(format!("\"v{v}\"")),
            version: None,
        }
    }

    fn put(&self, name: &str, bytes: &[u8]) -> ObjectVersion {
        let mut next = self.next_version.lock().unwrap();
        let v = *next;
        *next += 1;
        self.objects
            .lock()
            .unwrap()
            .insert(name.to_owned(), (bytes.to_vec(), v));
        Self::version(v)
    }

    fn manifest(&self) -> Manifest {
        let objects = self.objects.lock().unwrap();
        Manifest::from_json_bytes(&objects[MANIFEST_NAME].0, "mem").unwrap()
    }
}

fn lost(what: &str) -> DatasetError {
    DatasetError::io(
        "writing",
        "mem",
        io::Error::new(io::ErrorKind::ConnectionReset, what.to_owned()),
    )
}

impl DatasetStore for FlakyStore {
    fn location(&self) -> String {
        "mem://ds".into()
    }
    fn object_location(&self, name: &str) -> String {
        format!("mem://ds/{name}")
    }
    fn prepare(&self) -> Result<(), DatasetError> {
        self.shards.prepare()
    }
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, DatasetError> {
        Ok(self.read_versioned(name)?.map(|(b, _)| b))
    }
    fn read_versioned(&self, name: &str) -> Result<Option<(Vec<u8>, ObjectVersion)>, DatasetError> {
        {
            let mut failing = self.failing_reads.lock().unwrap();
            if *failing > 0 {
                *failing -= 1;
                return Err(DatasetError::io(
                    "reading",
                    self.object_location(name),
                    io::Error::new(io::ErrorKind::TimedOut, "the store is unreachable"),
                ));
            }
        }
        let objects = self.objects.lock().unwrap();
        Ok(objects
            .get(name)
            .map(|(b, v)| (b.clone(), Self::version(*v))))
    }
    fn write_atomic(&self, name: &str, bytes: &[u8]) -> Result<(), DatasetError> {
        self.put(name, bytes);
        Ok(())
    }
    fn write_if(
        &self,
        name: &str,
        bytes: &[u8],
        expected: Option<&ObjectVersion>,
    ) -> Result<ObjectVersion, DatasetError> {
        let fault = std::mem::replace(&mut *self.fault.lock().unwrap(), Fault::None);
        if fault == Fault::FailBefore {
            return Err(lost("500 Internal Server Error"));
        }
        if fault == Fault::OtherWriterFirst {
            let mut other = self.manifest();
            other.record_commit("another-writer");
            self.put(name, &other.to_json_bytes());
        }
        let current = self
            .objects
            .lock()
            .unwrap()
            .get(name)
            .map(|(_, v)| Self::version(*v));
        if current.as_ref() != expected {
            return Err(DatasetError::PreconditionFailed {
                path: self.object_location(name),
            });
        }
        let version = self.put(name, bytes);
        *self.applied.lock().unwrap() += 1;
        match fault {
            Fault::LoseAnswer => Err(lost("connection reset before the answer")),
            Fault::RefuseRetry => Err(DatasetError::PreconditionFailed {
                path: self.object_location(name),
            }),
            Fault::Unreachable { reads } => {
                *self.failing_reads.lock().unwrap() = reads;
                Err(lost("timed out"))
            }
            _ => Ok(version),
        }
    }
    fn open_shard(&self, name: &str) -> Result<LodtFile, DatasetError> {
        self.shards.open_shard(name)
    }
    fn create_shard(&self, name: &str) -> Result<Box<dyn ShardSink>, DatasetError> {
        self.shards.create_shard(name)
    }
    fn list(&self) -> Result<Vec<String>, DatasetError> {
        let mut names = self.shards.list()?;
        names.extend(self.objects.lock().unwrap().keys().cloned());
        names.sort();
        Ok(names)
    }
    fn remove(&self, name: &str) -> Result<(), DatasetError> {
        self.objects.lock().unwrap().remove(name);
        self.shards.remove(name)
    }
    fn unique_shard_names(&self) -> bool {
        true
    }
    fn lock(&self) -> Result<StoreLock, DatasetError> {
        Ok(StoreLock::new(()))
    }
    fn lock_object(&self, name: &str) -> Result<Option<StoreLock>, DatasetError> {
        Ok(self.read(name)?.map(|_| StoreLock::new(())))
    }
}

/// A batch of `n` sequences whose values are their ids `first..first + n`.
fn batch(first: i64, n: i64) -> Batch {
    let lod = Lod::try_from_lengths(&[vec![1; n as usize]]).unwrap();
    let x = LodTensor::from_vec((first..first + n).collect(), vec![n as usize], lod).unwrap();
    Batch::try_from_tensors([("x", x)]).unwrap()
}

/// Every value of the dataset, in order.
fn values(store: Arc<FlakyStore>) -> Vec<i64> {
    let ds = Dataset::open_in(store).unwrap();
    let mut out = Vec::new();
    for b in ds.batches() {
        out.extend_from_slice(b.unwrap().get("x").unwrap().as_slice::<i64>().unwrap());
    }
    out
}

fn options(id: &str) -> DatasetWriterOptions {
    DatasetWriterOptions {
        shard_bytes: 1024,
        commit_id: Some(id.into()),
        ..Default::default()
    }
}

/// A dataset holding 0..10, then an append of 100..110 under `fault`.
fn append_under(
    fault: Fault,
) -> (
    tempfile::TempDir,
    Arc<FlakyStore>,
    Result<Manifest, DatasetError>,
) {
    let dir = tempfile::tempdir().unwrap();
    let store = FlakyStore::new(dir.path());
    let mut w = DatasetWriter::create_in(store.clone(), options("create")).unwrap();
    w.write(&batch(0, 10)).unwrap();
    w.finish().unwrap();
    let mut w = DatasetWriter::append_in(store.clone(), options("append-1")).unwrap();
    w.write(&batch(100, 6)).unwrap();
    w.write(&batch(106, 4)).unwrap();
    store.arm(fault);
    let result = w.finish();
    (dir, store, result)
}

fn expected() -> Vec<i64> {
    (0..10).chain(100..110).collect()
}

#[test]
fn a_lost_answer_of_an_applied_write_is_success() {
    let (_dir, store, result) = append_under(Fault::LoseAnswer);
    let manifest = result.unwrap();
    assert!(manifest.has_commit("append-1"));
    assert_eq!(manifest, store.manifest());
    assert_eq!(values(store), expected());
}

#[test]
fn a_412_to_a_retry_after_the_write_applied_is_success() {
    let (_dir, store, result) = append_under(Fault::RefuseRetry);
    assert!(result.unwrap().has_commit("append-1"));
    assert_eq!(values(store), expected());
}

#[test]
fn a_failure_before_the_write_is_not_committed_and_a_retry_writes_once() {
    let (_dir, store, result) = append_under(Fault::FailBefore);
    let err = result.unwrap_err();
    assert!(matches!(err, DatasetError::NotCommitted { .. }), "{err}");
    assert_eq!(err.commit_id(), Some("append-1"));
    assert!(
        err.to_string()
            .contains("nothing of this write is in the dataset"),
        "{err}"
    );
    assert_eq!(values(store.clone()), (0..10).collect::<Vec<_>>());
    // The retry with the same id writes, once.
    let mut w = DatasetWriter::append_in(store.clone(), options("append-1")).unwrap();
    assert!(!w.already_committed());
    w.write(&batch(100, 10)).unwrap();
    w.finish().unwrap();
    assert_eq!(values(store), expected());
}

#[test]
fn an_unreachable_store_is_an_unknown_outcome_and_the_retry_writes_nothing() {
    let (_dir, store, result) = append_under(Fault::Unreachable { reads: 1 });
    let err = result.unwrap_err();
    assert!(matches!(err, DatasetError::CommitUnknown { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("outcome of committing mem://ds/lodt-dataset.json is unknown"),
        "{text}"
    );
    assert!(text.contains("\"append-1\""), "{text}");
    assert!(!text.contains("write again"), "{text}");
    // The write had been applied: the retry with the same id finds it.
    let mut w = DatasetWriter::append_in(store.clone(), options("append-1")).unwrap();
    assert!(w.already_committed());
    w.write(&batch(100, 10)).unwrap();
    let applied = *store.applied.lock().unwrap();
    let manifest = w.finish().unwrap();
    assert_eq!(*store.applied.lock().unwrap(), applied); // nothing written
    assert_eq!(manifest.num_sequences(), 20);
    assert_eq!(values(store), expected());
}

#[test]
fn another_writers_commit_is_the_conflict_error() {
    let (_dir, store, result) = append_under(Fault::OtherWriterFirst);
    let err = result.unwrap_err();
    assert!(matches!(err, DatasetError::ManifestChanged { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("does not list this write's commit id \"append-1\""),
        "{err}"
    );
    let manifest = store.manifest();
    assert!(manifest.has_commit("another-writer") && !manifest.has_commit("append-1"));
    assert_eq!(values(store), (0..10).collect::<Vec<_>>());
}

#[test]
fn a_created_dataset_whose_answer_was_lost_is_not_created_twice() {
    let dir = tempfile::tempdir().unwrap();
    let store = FlakyStore::new(dir.path());
    for attempt in 0..2 {
        let mut w = DatasetWriter::create_in(store.clone(), options("create-7")).unwrap();
        assert_eq!(w.already_committed(), attempt == 1);
        w.write(&batch(0, 5)).unwrap();
        store.arm(Fault::LoseAnswer);
        assert_eq!(w.finish().unwrap().num_sequences(), 5);
    }
    // Another id is refused: the dataset exists.
    let err = DatasetWriter::create_in(store.clone(), options("create-8")).unwrap_err();
    assert!(matches!(err, DatasetError::AlreadyExists { .. }), "{err}");
    assert_eq!(values(store), (0..5).collect::<Vec<_>>());
}

#[test]
fn a_checkpoint_whose_answer_was_lost_is_kept_and_the_write_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = FlakyStore::new(dir.path());
    let mut w = DatasetWriter::create_in(store.clone(), options("c")).unwrap();
    w.write(&batch(0, 5)).unwrap();
    store.arm(Fault::RefuseRetry);
    w.flush().unwrap();
    w.write(&batch(5, 5)).unwrap();
    store.arm(Fault::LoseAnswer);
    w.flush().unwrap();
    w.write(&batch(10, 5)).unwrap();
    w.finish().unwrap();
    assert_eq!(values(store), (0..15).collect::<Vec<_>>());
}

#[test]
fn parts_and_their_merge_survive_lost_answers() {
    let dir = tempfile::tempdir().unwrap();
    let store = FlakyStore::new(dir.path());
    for (k, id) in ["a", "b"].into_iter().enumerate() {
        for _attempt in 0..2 {
            let o = options(&format!("part-{id}"));
            let mut w = DatasetWriter::create_part_in(store.clone(), id, o).unwrap();
            w.write(&batch(10 * k as i64, 3)).unwrap();
            store.arm(Fault::LoseAnswer);
            w.finish().unwrap();
        }
    }
    store.arm(Fault::RefuseRetry);
    let merged = Dataset::commit_parts_with(store.clone(), Some("merge")).unwrap();
    assert_eq!(merged.commits, ["part-a", "part-b", "merge"]);
    // The merge retried, and a part writer retried after the merge: nothing
    // is added.
    assert_eq!(
        Dataset::commit_parts_with(store.clone(), Some("merge")).unwrap(),
        merged
    );
    let w = DatasetWriter::create_part_in(store.clone(), "a", options("part-a")).unwrap();
    assert!(w.already_committed());
    w.finish().unwrap();
    assert_eq!(
        Dataset::commit_parts_with(store.clone(), None)
            .unwrap()
            .num_sequences(),
        6
    );
    assert_eq!(values(store), vec![0, 1, 2, 10, 11, 12]);
}

#[test]
fn commit_ids_are_checked_and_generated_ids_differ() {
    let dir = tempfile::tempdir().unwrap();
    let err = DatasetWriter::create(dir.path(), options("a b")).unwrap_err();
    assert!(matches!(err, DatasetError::InvalidArgument(_)), "{err}");
    let a = super::new_commit_id();
    let b = super::new_commit_id();
    assert_ne!(a, b);
    assert!(super::super::names::valid_commit_id(&a) && a.len() == 32);
}

#[cfg(unix)]
#[test]
fn a_manifest_that_is_not_a_regular_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join(MANIFEST_NAME);
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let err = Dataset::open(dir.path()).unwrap_err();
    assert!(
        err.to_string()
            .contains("expected a regular file, found a FIFO"),
        "{err}"
    );
    std::fs::remove_file(&fifo).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &fifo).unwrap();
    let err = Dataset::open(dir.path()).unwrap_err();
    assert!(
        err.to_string()
            .contains("expected a regular file, found a device"),
        "{err}"
    );
}

#[test]
fn a_manifest_above_the_cap_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(MANIFEST_NAME);
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(super::super::MAX_MANIFEST_BYTES + 1).unwrap(); // sparse
    let err = Dataset::open(dir.path()).unwrap_err();
    assert!(
        err.to_string().contains(
            "a manifest is at most 1073741824 bytes (MAX_MANIFEST_BYTES), found 1073741825 bytes"
        ),
        "{err}"
    );
}

#[test]
fn a_1_0_manifest_reads_and_an_append_makes_it_current_with_its_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = DatasetWriter::create(dir.path(), options("first")).unwrap();
    w.write(&batch(0, 3)).unwrap();
    w.finish().unwrap();
    let path = dir.path().join(MANIFEST_NAME);
    let text = std::fs::read_to_string(&path).unwrap();
    let old = text
        .replace(&format!("\"minor\":{MANIFEST_MINOR}"), "\"minor\":0")
        .replace("\n\"commits\":[\"first\"],", "");
    assert_ne!(old, text);
    std::fs::write(&path, &old).unwrap();
    let ds = Dataset::open(dir.path()).unwrap();
    assert!(ds.manifest().commits.is_empty());
    let mut w = DatasetWriter::append(dir.path(), options("second")).unwrap();
    w.write(&batch(3, 2)).unwrap();
    let m = w.finish().unwrap();
    assert_eq!(
        (m.version.minor, m.commits.clone()),
        (MANIFEST_MINOR, vec!["second".to_string()])
    );
    assert_eq!(Dataset::open(dir.path()).unwrap().num_sequences(), 5);
}

#[test]
fn bad_commit_lists_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    DatasetWriter::create(dir.path(), options("x"))
        .unwrap()
        .finish()
        .unwrap();
    let path = dir.path().join(MANIFEST_NAME);
    let good = std::fs::read_to_string(&path).unwrap();
    let many: Vec<String> = (0..1025).map(|i| format!("\"c{i}\"")).collect();
    for (commits, says) in [
        ("[\"x\",\"x\"]", "commit id \"x\" is listed twice"),
        ("[\"a b\"]", "commit id \"a b\": a commit id must be"),
        (
            &*format!("[{}]", many.join(",")),
            "lists 1025 ids, expected at most 1024",
        ),
    ] {
        std::fs::write(&path, good.replace("[\"x\"]", commits)).unwrap();
        let err = Dataset::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains(says), "{says}: {err}");
    }
}

/// Whether version `n`'s manifest is kept (`spec/DATASET.md` section 3.3).
fn kept(store: &FlakyStore, n: u64) -> bool {
    let name = crate::dataset::names::version_manifest_name(n);
    store.objects.lock().unwrap().contains_key(&name)
}

#[test]
fn a_version_is_kept_only_once_its_commit_is_confirmed() {
    for (fault, committed) in [
        (Fault::LoseAnswer, true),
        (Fault::RefuseRetry, true),
        (Fault::FailBefore, false),
        (Fault::Unreachable { reads: 1 }, false),
    ] {
        let (_dir, store, result) = append_under(fault);
        assert_eq!(result.is_ok(), committed, "{fault:?}: {result:?}");
        assert!(kept(&store, 1), "{fault:?}");
        // Unreachable: the commit applied but could not be confirmed, so no
        // copy yet; the next commit writes it from the main manifest.
        assert_eq!(kept(&store, 2), committed, "{fault:?}");
        let next = DatasetWriter::append_in(store.clone(), options("append-2"))
            .unwrap()
            .finish()
            .unwrap();
        let applied = committed || matches!(fault, Fault::Unreachable { .. });
        let n = next.commit.as_ref().unwrap().version;
        assert_eq!(n, if applied { 3 } else { 2 }, "{fault:?}");
        assert!((1..=n).all(|k| kept(&store, k)), "{fault:?}");
        let v2 = Dataset::open_version_in(store.clone(), 2).unwrap();
        assert_eq!(
            v2.num_sequences(),
            if applied { 20 } else { 10 },
            "{fault:?}"
        );
    }
}

#[test]
fn a_failed_backfill_stops_the_commit_before_anything_is_written() {
    let (_dir, store, result) = append_under(Fault::None);
    result.unwrap();
    // Version 2's copy lost (a crash before it), and its backfill fails.
    store
        .remove(&crate::dataset::names::version_manifest_name(2))
        .unwrap();
    let before = store.manifest();
    let w = DatasetWriter::append_in(store.clone(), options("append-2")).unwrap();
    store.arm(Fault::FailBefore);
    assert!(w.finish().is_err());
    assert_eq!(store.manifest(), before);
    // A retry backfills it, then commits version 3.
    let m = DatasetWriter::append_in(store.clone(), options("append-2"))
        .unwrap()
        .finish()
        .unwrap();
    assert_eq!(m.commit.as_ref().unwrap().version, 3);
    assert!(kept(&store, 2) && kept(&store, 3));
}

#[test]
fn a_tag_whose_answer_was_lost_is_decided_by_reading_it_again() {
    let (_dir, store, result) = append_under(Fault::None);
    result.unwrap();
    for (name, fault) in [("a", Fault::LoseAnswer), ("b", Fault::RefuseRetry)] {
        store.arm(fault);
        let tag = Dataset::tag_in(store.clone(), name, Some(1)).unwrap();
        assert_eq!(tag.version, 1);
        assert_eq!(Dataset::tag_in(store.clone(), name, Some(1)).unwrap(), tag);
    }
    store.arm(Fault::FailBefore);
    assert!(Dataset::tag_in(store.clone(), "c", None).is_err());
    assert!(Dataset::tag_version_in(store.clone(), "c").is_err());
    assert_eq!(
        Dataset::tag_in(store.clone(), "c", None).unwrap().version,
        2
    );
    assert!(matches!(
        Dataset::tag_in(store.clone(), "a", Some(2)),
        Err(DatasetError::TagExists { version: 1, .. })
    ));
}
