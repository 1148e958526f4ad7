//! Fuzzes conversion, as `lodt convert` does it: the first byte picks the
//! input format (Arrow IPC file, IPC stream, Parquet), whether to re-batch
//! and the second output format; the rest is the input file. The input is
//! opened with `Format::open_reader` and copied into a `.lodt` writer in
//! memory; if that succeeds, the `.lodt` bytes must read back as the input
//! reads. Then `lodt::convert::convert` writes the input to the second
//! format (`.arrow`, `.arrows`, `.parquet`, `.pdparams`) in a scratch
//! directory. No panic may escape (upstream panics that lodt contains are
//! logged, see `common.rs`).
//!
//! Seed: each test file with a first byte naming its format (0 `.arrow`,
//! 1 `.arrows`, 2 `.parquet`). Run:
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run -O convert corpus/convert -- -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=2048`
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use lodt::batch::{copy, BatchReader, BatchWriter};
use lodt::convert::{convert, ConvertError, ConvertOptions, Format};
use lodt::{format, Batch, LodtFile};

fuzz_target!(init: common::install_hook(), |data: &[u8]| {
    let Some((&kind, bytes)) = data.split_first() else {
        return;
    };
    let ext = ["arrow", "arrows", "parquet"][usize::from(kind % 3)];
    let dir = common::scratch_dir();
    let input = dir.join(format!("input.{ext}"));
    std::fs::write(&input, bytes).expect("scratch write");
    let options = ConvertOptions {
        small_lists: kind & 0x80 != 0,
        batch_rows: (kind & 0x40 != 0).then_some(usize::from(kind >> 4 & 3) + 1),
        ..Default::default()
    };
    let from = Format::from_path(&input).expect("a known extension");
    let Ok(reader) = from.open_reader(&input, &options) else {
        return;
    };
    let metadata = reader.metadata();
    let _ = reader.num_batches();
    let writer = format::Writer::try_new(Vec::new(), metadata)
        .expect("a .lodt writer in memory")
        .err_into::<ConvertError>();
    let mut seen = Vec::new();
    let copied = copy(
        reader.inspect(|b| {
            if let Ok(batch) = b {
                for (_, tensor) in batch.iter() {
                    common::touch(tensor);
                }
                if seen.len() < 64 {
                    seen.push(batch.clone());
                }
            }
        }),
        writer,
        |_| {},
    );
    if let Ok((lodt_bytes, stats)) = copied {
        let file = LodtFile::from_bytes(&lodt_bytes).expect("lodt reads the .lodt bytes it wrote");
        assert_eq!(file.num_batches() as u64, stats.batches);
        file.verify().expect("the .lodt output verifies");
        for (k, want) in seen.iter().enumerate() {
            let got: Batch = file.read_batch(k).expect("a batch of the .lodt output reads");
            assert_eq!(got.len(), want.len());
            for ((n1, t1), (n2, t2)) in got.iter().zip(want.iter()) {
                assert_eq!((n1, t1), (n2, t2), "the .lodt output differs from the input");
            }
        }
    }
    let out_ext = ["arrow", "arrows", "parquet", "pdparams"][usize::from(kind >> 2 & 3)];
    let output = dir.join(format!("output.{out_ext}"));
    let _ = convert(&input, &output, &options, |_| {});
});
