//! Listing parts, deleting stale ones, and a job's clean-up, in a local
//! directory and in an object store in memory (`object_store`'s `InMemory`
//! behind the same [`ObjectDatasetStore`](crate::remote::ObjectDatasetStore)
//! that serves S3, Azure and GCS).
#![cfg(test)]

use super::super::names::part_manifest_name;
use super::super::{
    Dataset, DatasetStore, DatasetWriter, DatasetWriterOptions, LocalStore, PartJob,
};
use crate::{Batch, Lod, LodTensor};
use std::sync::Arc;

/// The stores the tests run on: a local directory, and (feature `remote`)
/// an in-memory object store. The temporary directory lives as long as the
/// store is used.
fn stores() -> Vec<(Arc<dyn DatasetStore>, tempfile::TempDir)> {
    let dir = tempfile::tempdir().unwrap();
    let local: Arc<dyn DatasetStore> = Arc::new(LocalStore::new(dir.path()).with_fsync(false));
    #[allow(unused_mut)]
    let mut out = vec![(local, dir)];
    #[cfg(feature = "remote")]
    {
        let memory = Arc::new(object_store::memory::InMemory::new());
        let store: Arc<dyn DatasetStore> = Arc::new(crate::remote::ObjectDatasetStore::new(
            memory,
            object_store::path::Path::from("data/ds"),
            "memory://data/ds".into(),
            Default::default(),
        ));
        out.push((store, tempfile::tempdir().unwrap()));
    }
    out
}

/// A batch of `n` sequences of one token each, `first..first + n`.
fn batch(first: i64, n: i64) -> Batch {
    let lod = Lod::try_from_lengths(&[vec![1; n as usize]]).unwrap();
    let x = LodTensor::from_vec((first..first + n).collect(), vec![n as usize], lod).unwrap();
    Batch::try_from_tensors([("x", x)]).unwrap()
}

/// Writes part `writer_id` (with commit id `commit_id`): `batches` batches
/// of 4 sequences, one shard each (`shard_bytes` 1).
fn part(store: &Arc<dyn DatasetStore>, writer_id: &str, commit_id: Option<String>, batches: i64) {
    let options = DatasetWriterOptions {
        shard_bytes: 1,
        commit_id,
        ..Default::default()
    };
    let mut w = DatasetWriter::create_part_in(store.clone(), writer_id, options).unwrap();
    for b in 0..batches {
        w.write(&batch(b * 4, 4)).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn parts_are_listed_in_name_order_with_their_manifests() {
    for (store, _dir) in stores() {
        assert!(Dataset::list_parts(&*store).unwrap().is_empty());
        part(&store, "w2", None, 1);
        part(&store, "w1", None, 2);
        let parts = Dataset::list_parts(&*store).unwrap();
        let got: Vec<(&str, &str, u64, usize)> = parts
            .iter()
            .map(|p| {
                (
                    p.writer_id.as_str(),
                    p.name.as_str(),
                    p.manifest.num_sequences(),
                    p.manifest.num_shards(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("w1", "lodt-dataset.part.w1.json", 8, 2),
                ("w2", "lodt-dataset.part.w2.json", 4, 1)
            ],
            "{store:?}"
        );
        // Merged: no parts left.
        Dataset::commit_parts_with(store.clone(), None).unwrap();
        assert!(Dataset::list_parts(&*store).unwrap().is_empty());
    }
}

#[test]
fn a_shard_the_manifest_lists_is_never_removed() {
    for (store, _dir) in stores() {
        part(&store, "a", None, 1);
        Dataset::commit_parts_with(store.clone(), None).unwrap(); // lists a-shard-000000
        // Writer "a" again: a new part, unmerged, and a shard of a writer
        // that stopped before its partial manifest.
        part(&store, "a", None, 1);
        let mut dead = DatasetWriter::create_part_in(
            store.clone(),
            "a",
            DatasetWriterOptions {
                shard_bytes: 1,
                ..Default::default()
            },
        )
        .unwrap();
        dead.write(&batch(100, 4)).unwrap();
        dead.write(&batch(104, 4)).unwrap(); // closes a shard
        drop(dead);
        part(&store, "b", None, 1);
        let before = store.list().unwrap();
        assert!(
            before.contains(&"a-shard-000002.lodt".to_owned()),
            "{before:?}"
        );
        let mut expected = vec!["lodt-dataset.part.a.json".to_owned()];
        expected.extend(
            before
                .iter()
                .filter(|n| n.starts_with("a-shard-") && *n != "a-shard-000000.lodt")
                .cloned(),
        );
        let removed = Dataset::remove_parts(&*store, &|id: &str| id == "a").unwrap();
        assert_eq!(removed, expected, "{store:?}");
        let left: Vec<String> = store
            .list()
            .unwrap()
            .into_iter()
            .filter(|n| !crate::dataset::names::valid_index_name(n))
            .filter(|n| crate::dataset::names::version_of_name(n).is_none())
            .collect();
        assert_eq!(
            left,
            [
                "a-shard-000000.lodt",
                "b-shard-000000.lodt",
                "lodt-dataset.json",
                "lodt-dataset.part.b.json"
            ]
        );
        let dataset = Dataset::open_in(store.clone()).unwrap();
        assert_eq!(dataset.verify().unwrap().sequences, 4);
        // b is still merged whole.
        let merged = Dataset::commit_parts_with(store.clone(), None).unwrap();
        assert_eq!(merged.num_sequences(), 8);
    }
}

#[test]
fn nothing_is_removed_when_the_manifest_cannot_be_read() {
    for (store, _dir) in stores() {
        part(&store, "a", None, 1);
        store
            .write_atomic("lodt-dataset.json", b"{not a manifest")
            .unwrap();
        let before = store.list().unwrap();
        assert!(Dataset::remove_parts(&*store, &|_: &str| true).is_err());
        assert_eq!(store.list().unwrap(), before);
    }
}

#[test]
fn a_job_keeps_one_part_per_task_and_removes_the_rest_of_its_family() {
    for (store, _dir) in stores() {
        let job = PartJob::new("ray").unwrap();
        let other = PartJob::new("ray").unwrap();
        // Task 0: two attempts finished; task 1: one; a failed job's attempt;
        // a writer of another family and an unrelated part, left alone.
        let mut task0 = [job.new_writer_id(0), job.new_writer_id(0)];
        task0.sort();
        for w in &task0 {
            part(&store, w, Some(job.task_commit_id(0)), 1);
        }
        let task1 = job.new_writer_id(1);
        part(&store, &task1, Some(job.task_commit_id(1)), 2);
        let stray = other.new_writer_id(0);
        part(&store, &stray, Some(other.task_commit_id(0)), 1);
        let spark = "spark-0123456789ab-000000-deadbeef";
        part(&store, spark, None, 1);
        part(&store, "host1", None, 1);

        assert_eq!(
            job.committed_attempt(&*store, 0).unwrap(),
            Some(task0[0].clone())
        );
        assert_eq!(job.committed_attempt(&*store, 2).unwrap(), None);

        let cleanup = job.clean(&*store, true).unwrap();
        let kept: Vec<(u64, &str)> = cleanup
            .kept
            .iter()
            .map(|(t, p)| (*t, p.writer_id.as_str()))
            .collect();
        assert_eq!(kept, [(0, task0[0].as_str()), (1, task1.as_str())]);
        assert_eq!(cleanup.sequences(), 4 + 8);
        let mut removed = cleanup.removed.clone();
        removed.sort();
        let mut expected = vec![
            part_manifest_name(&task0[1]),
            format!("{}-shard-000000.lodt", task0[1]),
            part_manifest_name(&stray),
            format!("{stray}-shard-000000.lodt"),
        ];
        expected.sort();
        assert_eq!(removed, expected, "{store:?}");
        let left: Vec<String> = Dataset::list_parts(&*store)
            .unwrap()
            .into_iter()
            .map(|p| p.writer_id)
            .collect();
        let mut want = vec![
            task0[0].clone(),
            task1.clone(),
            spark.to_owned(),
            "host1".to_owned(),
        ];
        want.sort();
        assert_eq!(left, want);

        // The merge takes what is left; afterwards the job's clean-up of
        // everything removes nothing the manifest lists.
        let merged = Dataset::commit_parts_with(store.clone(), Some(job.id())).unwrap();
        assert_eq!(merged.num_sequences(), 4 + 8 + 4 + 4);
        assert!(job.clean(&*store, false).unwrap().removed.is_empty());
        assert_eq!(
            Dataset::open_in(store.clone())
                .unwrap()
                .verify()
                .unwrap()
                .sequences,
            20
        );
    }
}

#[test]
fn a_failed_job_removes_every_part_of_its_family() {
    for (store, _dir) in stores() {
        let job = PartJob::new("ray").unwrap();
        part(
            &store,
            &job.new_writer_id(0),
            Some(job.task_commit_id(0)),
            1,
        );
        part(&store, "host1", None, 1);
        let cleanup = job.clean(&*store, false).unwrap();
        assert!(cleanup.kept.is_empty());
        assert_eq!(cleanup.removed.len(), 2);
        assert_eq!(
            store.list().unwrap(),
            ["host1-shard-000000.lodt", "lodt-dataset.part.host1.json"]
        );
    }
}

#[test]
fn job_ids_round_trip_and_bad_ones_are_refused() {
    let job = PartJob::new("ray").unwrap();
    assert_eq!(PartJob::try_from_id(job.id()).unwrap(), job);
    for bad in [
        "",
        "ray",
        "ray-",
        "ray-0123456789aB",
        "r y-0123456789ab",
        "-0123456789ab",
    ] {
        let e = PartJob::try_from_id(bad).unwrap_err().to_string();
        assert!(e.contains("expected FAMILY-"), "{bad:?}: {e}");
    }
    // A task index past six digits still parses.
    let w = job.new_writer_id(12_345_678);
    assert_eq!(job.task_of(&w), Some(12_345_678));
    assert_eq!(job.task_of(&format!("{}-000001-DEADBEEF", job.id())), None);
}

#[test]
fn a_location_not_made_yet_has_no_parts() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path().join("not-yet"));
    assert!(Dataset::list_parts(&store).unwrap().is_empty());
    assert!(
        Dataset::remove_parts(&store, &|_: &str| true)
            .unwrap()
            .is_empty()
    );
    let job = PartJob::new("ray").unwrap();
    assert_eq!(job.committed_attempt(&store, 0).unwrap(), None);
    assert_eq!(job.clean(&store, false).unwrap(), Default::default());
    assert!(!dir.path().join("not-yet").exists());
}
