//! Fuzzes the Arrow IPC file reader (`IpcFileReader`, through the
//! `BatchReader` contract): arbitrary bytes give batches or errors; no panic
//! escapes lodt's API (upstream panics that lodt contains are logged, see
//! `common.rs`); every tensor of every batch is touched and sliced; what
//! reads writes back and re-reads unchanged; random access agrees with the
//! iterator.
//!
//! Seed: `mkdir -p corpus/ipc_file && cp ../tests/data/arrow/*.arrow corpus/ipc_file/`
//! Run: `RUSTC_BOOTSTRAP=1 cargo fuzz run -O ipc_file corpus/ipc_file -- -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=2048`
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use lodt::arrow::ipc::IpcFileReader;
use lodt::batch::BatchReader;

fuzz_target!(init: common::install_hook(), |data: &[u8]| {
    let open = || IpcFileReader::try_new(std::io::Cursor::new(data), &common::options(data));
    let Ok(mut reader) = open() else {
        return;
    };
    let _ = (reader.schema(), BatchReader::metadata(&reader));
    let n = reader.num_batches();
    assert_eq!(BatchReader::num_batches(&reader), Some(n));
    let direct = if reader.random_access() && n > 0 {
        reader.read_batch(n - 1)
    } else {
        None
    };
    let mut last = None;
    for result in reader.take(64) {
        if let Ok(batch) = &result {
            common::check_batch(batch);
        }
        last = Some(result);
    }
    if let (Some(Ok(direct)), Some(Ok(last)), true) = (direct, last, n <= 64) {
        assert_eq!(direct, last, "random access and the iterator disagree");
    }
});
