//! Fuzzes the Parquet reader (`ParquetReader`): arbitrary bytes (written to
//! a scratch file, as the reader takes a `File`) give batches or errors; no
//! panic escapes lodt's API (upstream panics that lodt contains are logged,
//! see `common.rs`); every tensor of every batch is touched and sliced; what
//! reads writes back and re-reads unchanged.
//!
//! Seed: `mkdir -p corpus/parquet_reader && cp ../tests/data/arrow/*.parquet corpus/parquet_reader/`
//! Run: `RUSTC_BOOTSTRAP=1 cargo fuzz run -O parquet_reader corpus/parquet_reader -- -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=2048`
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use lodt::arrow::parquet::ParquetReader;
use lodt::batch::BatchReader;
use std::io::{Seek, Write};

fuzz_target!(init: common::install_hook(), |data: &[u8]| {
    let path = common::scratch_dir().join("input.parquet");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("scratch file");
    file.write_all(data).expect("scratch write");
    file.rewind().expect("scratch seek");
    let Ok(reader) = ParquetReader::try_new(file, &common::options(data)) else {
        return;
    };
    let _ = (reader.schema(), reader.num_row_groups(), reader.metadata());
    // Small batches sometimes, so row groups are cut.
    let reader = reader.with_max_batch_rows(if data.len() % 3 == 0 { 2 } else { 1 << 20 });
    let _ = reader.num_batches();
    for batch in reader.take(64).flatten() {
        common::check_batch(&batch);
    }
});
