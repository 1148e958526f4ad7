//! Fuzzes the Arrow IPC stream reader (`IpcStreamReader`): arbitrary bytes
//! give batches or errors; no panic escapes lodt's API (upstream panics that
//! lodt contains are logged, see `common.rs`); every tensor of every batch is
//! touched and sliced; what reads writes back and re-reads unchanged.
//!
//! Seed: `.arrows` files (`lodt convert` of the test files, or pyarrow).
//! Run: `RUSTC_BOOTSTRAP=1 cargo fuzz run -O ipc_stream corpus/ipc_stream -- -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=2048`
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use lodt::arrow::ipc::IpcStreamReader;
use lodt::batch::BatchReader;

fuzz_target!(init: common::install_hook(), |data: &[u8]| {
    let Ok(reader) = IpcStreamReader::try_new(data, &common::options(data)) else {
        return;
    };
    let _ = (reader.schema(), BatchReader::metadata(&reader));
    for batch in reader.take(64).flatten() {
        common::check_batch(&batch);
    }
});
