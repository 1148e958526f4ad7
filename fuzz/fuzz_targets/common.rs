//! What the foreign-format fuzz targets share: a panic hook that tells
//! lodt's bugs from the upstream panics lodt contains, and checks on the
//! batches a reader returns.
//!
//! libfuzzer-sys's hook aborts on every panic, including those lodt's
//! boundary (`contain` in `src/arrow/foreign.rs`) catches on purpose. The
//! hook installed here aborts only for panics raised outside the crates of
//! the registry (in lodt itself, or in std on lodt's behalf): a panic of
//! arrow-rs or parquet is logged once per location (`UPSTREAM PANIC ...` on
//! stderr) and left to unwind. If lodt contains it, the run goes on; if it
//! escapes lodt's API, libfuzzer-sys's `catch_unwind` around the target
//! aborts, and the input is a crash. With `LODT_FUZZ_BACKTRACE` set, each
//! upstream panic's first report comes with a backtrace (to name the caller
//! of a panic raised in a helper crate such as `bytes`).

#![allow(dead_code)]

use lodt::arrow::ipc::{IpcStreamReader, IpcStreamWriter};
use lodt::arrow::{ArrowOptions, ArrowWriteOptions, NullLists};
use lodt::{Batch, LodTensor};
use std::collections::HashSet;
use std::sync::Mutex;

static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Installs the hook (call from `fuzz_target!(init: ...)`).
pub fn install_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        if location.contains("/.cargo/registry/") {
            let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
            if seen
                .get_or_insert_with(HashSet::new)
                .insert(location.clone())
            {
                let message = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                eprintln!("UPSTREAM PANIC at {location}: {message}");
                if std::env::var_os("LODT_FUZZ_BACKTRACE").is_some() {
                    eprintln!("{}", std::backtrace::Backtrace::force_capture());
                }
            }
        } else {
            eprintln!("PANIC IN LODT: {info}");
            eprintln!("{}", std::backtrace::Backtrace::force_capture());
            std::process::abort();
        }
    }));
}

/// Reader options chosen from the input, so both null-list policies run.
pub fn options(data: &[u8]) -> ArrowOptions {
    if data.len() % 2 == 0 {
        ArrowOptions::default()
    } else {
        ArrowOptions::default().with_null_lists(NullLists::Empty)
    }
}

/// Touches every byte of a tensor and slices it as its users do: each of
/// the first top-level sequences, one level down, a level range, and one
/// past the end (an error, not a panic).
pub fn touch(tensor: &LodTensor) {
    let sum = tensor
        .as_bytes()
        .iter()
        .fold(0u8, |a, &b| a.wrapping_add(b));
    std::hint::black_box(sum);
    let levels = tensor.lod().num_levels();
    if levels == 0 {
        return;
    }
    let n = tensor.lod().num_sequences(0).unwrap_or(0);
    for i in 0..n.min(4) {
        let branch = tensor
            .branch(&[i])
            .expect("a sequence of a valid tensor slices");
        let _ = branch.lod().to_offsets();
        let _ = branch.branch(&[0]);
        let _ = tensor.sequence(levels - 1, i);
    }
    let _ = tensor.slice_level(0, 0, n);
    assert!(tensor.branch(&[n]).is_err());
}

/// Touches every tensor of a batch read from a file, and checks that the
/// batch writes to an IPC stream and reads back unchanged (when lodt can
/// write it).
pub fn check_batch(batch: &Batch) {
    for (_, tensor) in batch.iter() {
        touch(tensor);
    }
    let mut writer = IpcStreamWriter::new(Vec::new(), &ArrowWriteOptions::default());
    if writer.write(batch).is_err() {
        return; // too deep for the Arrow writer
    }
    let bytes = writer
        .finish()
        .expect("a stream that took a batch finishes");
    let back: Vec<Batch> = IpcStreamReader::try_new(&bytes[..], &ArrowOptions::default())
        .expect("lodt reads the stream it wrote")
        .collect::<Result<_, _>>()
        .expect("lodt reads the batch it wrote");
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].len(), batch.len());
    for ((name, t), (name2, t2)) in batch.iter().zip(back[0].iter()) {
        assert_eq!(name, name2);
        assert_eq!(t, t2, "tensor {name} changed through an IPC stream");
    }
}

/// A directory for the targets that need files, in memory where possible.
pub fn scratch_dir() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            std::path::PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("lodt-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir
    })
}

/// Whether `LODT_FUZZ_VERBOSE` is set: then the targets that support it say
/// on stderr what each input read to (to check that seeds read), e.g.
/// `LODT_FUZZ_VERBOSE=1 target/x86_64-unknown-linux-gnu/release/TARGET -runs=0 seeds/TARGET`.
pub fn verbose() -> bool {
    static VERBOSE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *VERBOSE.get_or_init(|| std::env::var_os("LODT_FUZZ_VERBOSE").is_some())
}
