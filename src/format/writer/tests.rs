//! The writer's own tests (checksum thread, sinks).

use super::crc::Done;
use super::*;
use crate::{Lod, LodTensor};

/// Batches with buffers of many sizes: empty, tiny, not a multiple of a
/// part, large; slices (windows of a larger buffer, LoD levels that do
/// not start at 0 and so are rebased copies).
fn batches() -> Vec<Batch> {
    let mut out = Vec::new();
    for (k, rows) in [0usize, 1, 3, 1000, 4099, 20_000, 300_000]
        .into_iter()
        .enumerate()
    {
        let values: Vec<f32> = (0..rows).map(|i| (i * 31 + k) as f32).collect();
        let lod = if rows < 2 {
            Lod::empty()
        } else {
            Lod::try_from_lengths(&[vec![1, rows as u64 - 1]]).unwrap()
        };
        let x = LodTensor::from_vec(values, vec![rows], lod).unwrap();
        let ids: Vec<i64> = (0..rows as i64 * 3).collect();
        let lod = if rows == 0 {
            Lod::empty()
        } else {
            Lod::try_from_lengths(&[vec![3u64; rows]]).unwrap()
        };
        let words = LodTensor::from_vec(ids, vec![rows * 3], lod).unwrap();
        let mut b = Batch::try_from_tensors([("x", x), ("words", words.clone())]).unwrap();
        if rows > 4 {
            // A slice: its body is a window of `words`' buffer, its LoD a
            // rebased copy.
            let part = words.slice_level(0, 1, rows - 1).unwrap();
            b.push("part", part).unwrap();
        }
        out.push(b);
    }
    // An empty batch, and rows of zero width (an empty body under a LoD).
    out.push(Batch::new());
    let lod = Lod::try_from_lengths(&[vec![2, 0, 3]]).unwrap();
    let empty_rows = LodTensor::from_vec(Vec::<f32>::new(), vec![5, 0], lod).unwrap();
    out.push(Batch::try_from_tensors([("w", empty_rows)]).unwrap());
    out
}

/// The options of a file of major version `major`, not synced.
fn version(major: u16) -> WriteOptions {
    WriteOptions {
        format_version: Some(crate::format::Version { major, minor: 0 }),
        fsync: false,
        ..Default::default()
    }
}

/// A 1.0 file (whose checksums follow the buffers, so they can be computed
/// while the buffers are written) with the checksum plan `plan`.
fn write_with(plan: CrcPlan) -> (Vec<u8>, bool) {
    write_version(plan, 1)
}

/// A file of major version `major` with the checksum plan `plan`.
fn write_version(plan: CrcPlan, major: u16) -> (Vec<u8>, bool) {
    let mut w = Writer::try_new_with(Vec::new(), Default::default(), version(major)).unwrap();
    w.crc_plan = plan;
    for b in batches() {
        w.write(&b).unwrap();
    }
    let threaded = w.crc_thread.is_some();
    (w.finish().unwrap(), threaded)
}

#[test]
fn checksums_off_the_writing_thread_equal_the_serial_ones() {
    let serial = CrcPlan {
        offload_min: usize::MAX,
        part: 1,
    };
    let (expected, threaded) = write_with(serial);
    assert!(!threaded);
    crate::format::LodtFile::from_bytes(&expected)
        .unwrap()
        .verify()
        .unwrap();
    for (offload_min, part) in [
        (0, 1 << 20),
        (1, 1000),
        (100, 4099),
        (4096, 65_536),
        (0, 128 << 10),
    ] {
        let (got, threaded) = write_with(CrcPlan { offload_min, part });
        assert!(threaded);
        assert!(
            got == expected,
            "offload from {offload_min} B in parts of {part} B"
        );
    }
    // And the machine's default.
    assert!(write_with(CrcPlan::default_for_machine()).0 == expected);
}

/// Files go through the spool (aligned runs, shared buffers held):
/// their bytes are the ones any other sink gets, created or appended, in
/// both format versions.
#[test]
fn files_hold_the_bytes_any_sink_gets() {
    let dir = tempfile::tempdir().unwrap();
    let serial = CrcPlan {
        offload_min: usize::MAX,
        part: 1,
    };
    for (plan, major) in [serial, CrcPlan::default_for_machine()]
        .into_iter()
        .flat_map(|plan| [(plan, 1), (plan, 2)])
    {
        let options = version(major);
        let (expected, _) = write_version(plan, major);
        assert_eq!(expected[12], major as u8);
        let path = dir.path().join("f.lodt");
        let mut w = Writer::create_with(&path, Default::default(), options).unwrap();
        w.crc_plan = plan;
        for b in batches() {
            w.write(&b).unwrap();
        }
        w.finish().unwrap();
        assert!(std::fs::read(&path).unwrap() == expected);
        let mut w = Writer::append_with(&path, options).unwrap();
        w.crc_plan = plan;
        for b in batches() {
            w.write(&b).unwrap();
        }
        w.finish().unwrap();
        let file = LodtFile::open(&path).unwrap();
        file.verify().unwrap();
        assert_eq!(file.version().major, major);
        assert_eq!(file.num_batches(), 2 * batches().len());
        let last = file.batch(file.num_batches() - 1).unwrap();
        assert!(last.to_batch().unwrap() == batches().pop().unwrap());
    }
}

#[test]
fn a_part_the_thread_has_not_taken_is_computed_by_the_writer() {
    // No thread: `collect` computes every part itself.
    let thread = CrcThread {
        jobs: None,
        done: Arc::new(Done::default()),
        handle: None,
        owner: std::process::id(),
    };
    let bytes = Buffer::from_storage(Arc::new(
        (0..10_000u32).map(|i| i as u8).collect::<Vec<_>>(),
    ));
    let empty = Buffer::from_storage(Arc::new(Vec::<u8>::new()));
    let small = Buffer::from_storage(Arc::new(vec![5u8; 333]));
    // Three buffers in one message.
    let parts = thread.submit(&[&bytes, &empty, &small], 333);
    assert_eq!(parts[0].jobs().len(), 31);
    assert_eq!(thread.collect(parts[0].jobs()), crc32(bytes.as_slice()));
    assert_eq!(thread.collect(parts[1].jobs()), crc32(&[]));
    assert_eq!(parts[2].jobs().len(), 1);
    assert_eq!(thread.collect(parts[2].jobs()), crc32(small.as_slice()));
}

/// A 2.0 file goes out to the disk batch by batch, as a 1.0 file does: when
/// `write` returns, every byte before the batch is written but for less
/// than one aligned run ([`ALIGN`]), so the writer holds the last batch, not
/// every batch until `finish`. And its bytes are the ones any other sink
/// gets.
#[test]
fn a_2_0_file_goes_out_batch_by_batch() {
    use crate::format::aligned::ALIGN;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.lodt");
    for compression in [Compression::None, Compression::Lz4] {
        let v2 = WriteOptions {
            fsync: false,
            format_version: Some(crate::format::Version { major: 2, minor: 0 }),
            compression,
        };
        let mut w = Writer::create_with(&path, Default::default(), v2).unwrap();
        let tmp = match &w.sink {
            Some(FileSink {
                out: Out::New(Some(a)),
                ..
            }) => a.temp_path().to_path_buf(),
            _ => panic!("a new file's sink"),
        };
        let mut expected = Writer::try_new_with(Vec::new(), Default::default(), v2).unwrap();
        for b in batches().iter().chain(&batches()) {
            let before = w.bytes_written();
            w.write(b).unwrap();
            expected.write(b).unwrap();
            let on_disk = std::fs::metadata(&tmp).unwrap().len();
            assert!(
                on_disk + ALIGN as u64 > before,
                "{compression}: {on_disk} bytes on disk, {before} written before the batch"
            );
        }
        w.finish().unwrap();
        assert!(std::fs::read(&path).unwrap() == expected.finish().unwrap());
        LodtFile::open(&path).unwrap().verify().unwrap();
    }
}

/// Both format versions: a file whose checksums are computed off the
/// writing thread, in parts of any size, is byte for byte the one computed
/// on it.
#[test]
fn both_versions_are_the_same_bytes_whatever_the_parts() {
    let serial = CrcPlan {
        offload_min: usize::MAX,
        part: 1,
    };
    for major in [1, 2] {
        let (expected, _) = write_version(serial, major);
        for part in [1, 777, 64 << 10, 128 << 10, 1 << 20] {
            let (got, threaded) = write_version(
                CrcPlan {
                    offload_min: 0,
                    part,
                },
                major,
            );
            assert!(threaded);
            assert!(got == expected, "version {major}, parts of {part} B");
        }
    }
}

/// A writer waiting for a part the checksum thread is computing sleeps
/// (after spinning) and is woken when the part is done.
#[test]
fn a_waiting_writer_is_woken_when_its_part_is_done() {
    let done = Arc::new(Done::default());
    let bytes = Buffer::from_storage(Arc::new((0..5000u32).map(|i| i as u8).collect::<Vec<_>>()));
    let thread = CrcThread {
        jobs: None,
        done: done.clone(),
        handle: None,
        owner: std::process::id(),
    };
    let parts = thread.submit(&[&bytes], 1 << 20);
    let jobs = parts[0].jobs();
    assert!(jobs[0].take(), "nobody took the part before");
    let expected = crc32(bytes.as_slice());
    std::thread::scope(|s| {
        let parts = jobs;
        let done = &done;
        s.spawn(move || {
            // Until the writer has stopped spinning and sleeps (it counts
            // itself a waiter under the lock, then waits on the condvar).
            while done.waiters.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                std::thread::yield_now();
            }
            parts[0].finish(expected, done);
        });
        assert_eq!(thread.collect(jobs), expected);
    });
    assert_eq!(
        done.waiters.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the waiter unregistered"
    );
}

/// The checksum thread, once it stopped looking for work and went to sleep,
/// is woken by the next buffer and computes it.
#[test]
fn the_checksum_thread_takes_work_after_it_went_to_sleep() {
    let thread = CrcThread::start().unwrap();
    for round in 0..3 {
        let bytes = Buffer::from_storage(Arc::new(
            (0..300_000u32)
                .map(|i| (i * 7 + round) as u8)
                .collect::<Vec<_>>(),
        ));
        let parts = thread.submit(&[&bytes], 100_000);
        let jobs = parts[0].jobs();
        // Not collected: the thread computes every part on its own.
        let start = std::time::Instant::now();
        while jobs
            .iter()
            .any(|j| j.state.load(std::sync::atomic::Ordering::Acquire) != crc::DONE)
        {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(30),
                "round {round}: the thread did not take the work"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(thread.collect(jobs), crc32(bytes.as_slice()));
        // Longer than the thread looks for work: it sleeps until woken.
        std::thread::sleep(crc::IDLE * 20);
    }
}

/// A batch the writer refuses leaves the file as it was: nothing at the
/// destination, no temporary file, after the writer is dropped.
#[test]
fn a_refused_batch_then_a_drop_leaves_no_file() {
    for major in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.lodt");
        let mut w = Writer::create_with(&path, Default::default(), version(major)).unwrap();
        for b in batches() {
            w.write(&b).unwrap();
        }
        let deep = LodTensor::from_vec(
            vec![1u8],
            vec![1; crate::format::MAX_DIMS + 2],
            Lod::empty(),
        )
        .unwrap();
        let bad = Batch::try_from_tensors([("deep", deep)]).unwrap();
        assert!(w.write(&bad).is_err());
        drop(w);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "version {major}: {left:?}");
    }
}

/// A writer forked while it has a checksum thread writes on in the child
/// (the child computes every checksum itself: the thread is not there) and
/// drops without waiting for the thread.
#[cfg(target_os = "linux")]
#[test]
fn a_writer_in_a_forked_child_checksums_itself() {
    let big =
        crate::LodTensor::from_vec(vec![7u8; 4 << 20], vec![4 << 20], Default::default()).unwrap();
    let batch = crate::Batch::try_from_tensors([("x", big)]).unwrap();
    let mut w = crate::format::Writer::try_new(Vec::new(), Default::default()).unwrap();
    w.write(&batch).unwrap();
    // SAFETY: the child only writes to memory through lodt, then leaves with
    // _exit (no test harness code); the parent waits for it.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: alarm and _exit are async-signal-safe.
        unsafe { libc::alarm(30) };
        let ok = w.write(&batch).is_ok()
            && w.finish().is_ok_and(|bytes| {
                crate::format::LodtFile::from_bytes(&bytes)
                    .and_then(|f| f.verify())
                    .is_ok()
            });
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child made above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "wait status {status:#x}"
    );
    w.write(&batch).unwrap();
    let bytes = w.finish().unwrap();
    assert_eq!(
        crate::format::LodtFile::from_bytes(&bytes)
            .unwrap()
            .num_batches(),
        2
    );
}
