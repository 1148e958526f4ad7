//! A reader that opens a file while another writer appends to it gets the
//! old contents, the new, or "being written" — never a damaged-file error
//! or advice to recover (issue 28 §5; FORMAT.md §9, "Readers during an
//! append"). Deterministic: the appender is paused at each torn point by
//! the (internal) test hook, and the reader opens there; in the last case
//! the appender finishes and releases its lock between the reader's failed
//! parse and its check of the lock.
//!
//! One test function: the hook is global to the process.

use lodt::atomic::AtomicError;
use lodt::format::hooks::{self, Point};
use lodt::format::{FormatError, LodtFile, ReadOptions, WriteOptions, Writer};
use lodt::{Batch, Lod, LodTensor};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

const OLD: u64 = 3;
const NEW: u64 = 5;
/// The number of the batch the tiny append writes.
const TINY: u64 = 100;

/// Batch `k`: tensor `v` of 40 + k int64 values k·1000 + i, 1-level LoD;
/// batch `TINY` has no tensor (128 bytes, less than the old footer it is
/// written over: the file does not grow until the new footer).
fn batch(k: u64) -> Batch {
    if k == TINY {
        return Batch::new();
    }
    let n = 40 + k as usize;
    let lod = Lod::try_from_lengths(&[vec![10, n as u64 - 10]]).unwrap();
    let v = LodTensor::from_vec(
        (0..n as i64).map(|i| k as i64 * 1000 + i).collect(),
        vec![n],
        lod,
    )
    .unwrap();
    Batch::try_from_tensors([("v", v)]).unwrap()
}

fn no_fsync() -> WriteOptions {
    WriteOptions {
        fsync: false,
        ..Default::default()
    }
}

/// What the test asks the hook to do.
#[derive(Default)]
struct Ctl {
    pause_at: Option<Point>,
    paused: bool,
    release: bool,
    /// At the reader's failed parse: let the appender finish first.
    finish_on_fail: bool,
    done: bool,
    reader_failed_parses: usize,
}

type Shared = Arc<(Mutex<Ctl>, Condvar)>;

fn wait(shared: &Shared, until: impl Fn(&Ctl) -> bool) {
    let (m, c) = &**shared;
    let mut g = m.lock().unwrap();
    while !until(&g) {
        g = c.wait(g).unwrap();
    }
}

fn hook(shared: Shared) -> Box<dyn Fn(Point) + Send + Sync> {
    Box::new(move |point| {
        let (m, c) = &*shared;
        let mut g = m.lock().unwrap();
        if point == Point::OpenFooterFailed {
            g.reader_failed_parses += 1;
            if g.finish_on_fail {
                g.release = true;
                c.notify_all();
                while !g.done {
                    g = c.wait(g).unwrap();
                }
            }
        } else if g.pause_at == Some(point) && !g.release {
            g.paused = true;
            c.notify_all();
            while !g.release {
                g = c.wait(g).unwrap();
            }
        }
    })
}

/// The batches of `file`, as batch numbers (checking every value).
fn contents(file: &LodtFile) -> u64 {
    let n = file.num_batches() as u64;
    for k in 0..n {
        let b = file.batch(k as usize).unwrap().to_batch().unwrap();
        let expected = if b.is_empty() { TINY } else { k };
        assert_eq!(b, batch(expected), "batch {k}");
    }
    n
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    Mmap,
    Pread,
    Read,
}

fn open(path: &Path, mode: Mode) -> Result<LodtFile, FormatError> {
    match mode {
        Mode::Mmap => LodtFile::open(path),
        Mode::Pread => LodtFile::open_with(
            path,
            &ReadOptions {
                mmap: false,
                ..Default::default()
            },
        ),
        Mode::Read => LodtFile::read(path),
    }
}

/// One trial: an append of batches OLD..NEW to a file of OLD batches,
/// paused at `at`; the reader opens there (with `finish_on_fail`, the
/// appender finishes between the reader's failed parse and its lock check).
/// Returns the reader's outcome: Some(batches) or None for "being written".
fn trial(dir: &Path, at: Point, mode: Mode, finish_on_fail: bool) -> Option<u64> {
    trial_of(dir, at, mode, finish_on_fail, OLD..NEW)
}

/// [`trial`], appending batches `new`.
fn trial_of(
    dir: &Path,
    at: Point,
    mode: Mode,
    finish_on_fail: bool,
    new: std::ops::Range<u64>,
) -> Option<u64> {
    let total = OLD + new.clone().count() as u64;
    let path = dir.join(format!(
        "{at:?}-{mode:?}-{finish_on_fail}-{}.lodt",
        new.start
    ));
    let _ = std::fs::remove_file(&path);
    let mut w = Writer::create_with(&path, Default::default(), no_fsync()).unwrap();
    for k in 0..OLD {
        w.write(&batch(k)).unwrap();
    }
    w.finish().unwrap();

    let shared: Shared = Arc::new((
        Mutex::new(Ctl {
            pause_at: Some(at),
            finish_on_fail,
            ..Default::default()
        }),
        Condvar::new(),
    ));
    hooks::set(Some(hook(shared.clone())));
    let appender = {
        let path = path.clone();
        let shared = shared.clone();
        std::thread::spawn(move || {
            let mut w = Writer::append_with(&path, no_fsync()).unwrap();
            for k in new {
                w.write(&batch(k)).unwrap();
            }
            w.finish().unwrap();
            let (m, c) = &*shared;
            m.lock().unwrap().done = true;
            c.notify_all();
        })
    };
    wait(&shared, |g| g.paused);
    let outcome = open(&path, mode);
    {
        let (m, c) = &*shared;
        m.lock().unwrap().release = true;
        c.notify_all();
    }
    appender.join().unwrap();
    hooks::set(None);
    let failed_parses = shared.0.lock().unwrap().reader_failed_parses;
    // After the append: the new contents.
    assert_eq!(contents(&open(&path, mode).unwrap()), total);
    match outcome {
        Ok(file) => Some(contents(&file)),
        Err(FormatError::Atomic(AtomicError::Locked { .. })) => {
            assert!(!finish_on_fail || failed_parses == 0, "{at:?} {mode:?}");
            None
        }
        Err(e) => panic!("{at:?} {mode:?} finish_on_fail={finish_on_fail}: {e}"),
    }
}

#[test]
fn a_reader_during_an_append_gets_old_new_or_being_written_never_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let trials = 10;
    let mut outcomes = Vec::new();
    for _ in 0..trials {
        for mode in [Mode::Mmap, Mode::Pread, Mode::Read] {
            // While the lock is held and the footer is torn: being written.
            for at in [Point::AppendBatchesWritten, Point::AppendFooterWritten] {
                assert_eq!(trial(dir.path(), at, mode, false), None, "{at:?} {mode:?}");
            }
            // Trailer written, lock not yet released: the new contents.
            assert_eq!(
                trial(dir.path(), Point::AppendTrailerWritten, mode, false),
                Some(NEW)
            );
            // The footer is torn when read, the lock free when checked (the
            // appender finished in between): opened again, the new contents.
            for at in [Point::AppendBatchesWritten, Point::AppendFooterWritten] {
                assert_eq!(
                    trial(dir.path(), at, mode, true),
                    Some(NEW),
                    "{at:?} {mode:?}"
                );
                outcomes.push(at);
            }
            // An append that does not grow the file before its footer: the
            // reader finds the old trailer over a torn old footer.
            let tiny = TINY..TINY + 1;
            assert_eq!(
                trial_of(
                    dir.path(),
                    Point::AppendBatchesWritten,
                    mode,
                    false,
                    tiny.clone()
                ),
                None
            );
            assert_eq!(
                trial_of(dir.path(), Point::AppendBatchesWritten, mode, true, tiny),
                Some(OLD + 1)
            );
        }
    }
    assert_eq!(outcomes.len(), trials * 3 * 2);
}
