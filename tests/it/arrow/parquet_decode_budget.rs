#![cfg(feature = "parquet")]
//! Issue 28 §3: a Parquet row group is read in batches that fit the decode
//! budget (`ArrowOptions::decode_budget`), never whole. The file,
//! tests/data/big_row_group.parquet (made by
//! tests/data/make_big_row_group.py with pyarrow), is 129 KB: one row group
//! of 500,000 rows of 1,000 int64 zeros, 4 GB decoded. On the old reader its
//! first batch was the whole row group (it aborted at ~3.3 GB).

use lodt::arrow::{ArrowOptions, parquet::ParquetReader};
use lodt::batch::BatchReader;

const FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/big_row_group.parquet"
);

fn reader(budget: u64) -> ParquetReader {
    ParquetReader::open(FILE, &ArrowOptions::default().with_decode_budget(budget)).unwrap()
}

#[test]
fn the_default_budget_cuts_the_row_group_into_23_batches() {
    // By the footer a row is 1,000 values × (8 + 4) bytes: 22,369 rows fit
    // in 256 MiB.
    let mut r = reader(lodt::arrow::DEFAULT_DECODE_BUDGET);
    assert_eq!((r.num_row_groups(), r.num_batches()), (1, Some(23)));
    let first = r.next().unwrap().unwrap();
    let x = first.get("x").unwrap();
    assert_eq!(x.shape(), &[22_369_000]);
    assert_eq!(x.lod().num_sequences(0).unwrap(), 22_369);
    assert!(x.as_slice::<i64>().unwrap().iter().all(|&v| v == 0));
}

#[test]
fn a_small_budget_gives_small_batches() {
    let mut r = reader(1 << 20);
    assert_eq!(r.num_batches(), Some(500_000usize.div_ceil(87)));
    for _ in 0..3 {
        let b = r.next().unwrap().unwrap();
        assert_eq!(b.get("x").unwrap().lod().num_sequences(0).unwrap(), 87);
    }
}

#[test]
fn a_budget_below_one_row_is_an_error_before_decoding() {
    let mut r = reader(4096);
    let err = r.next().unwrap().unwrap_err().to_string();
    assert!(
        err.contains("row group 0: one row decodes to about 12000 bytes")
            && err.contains("decode budget of 4096 bytes per batch"),
        "{err}"
    );
    // The error ends the row group: nothing follows.
    assert!(r.next().is_none());
}

#[test]
fn a_batch_that_decodes_past_the_budget_is_an_error_after_decoding() {
    use lodt::arrow::parquet::write_parquet;
    use lodt::{Batch, Lod, LodTensor};
    // 100 rows: the first of 100,000 values, the others of 1. By the footer
    // a row is about 12 KB, so a 64 KiB budget takes 5 rows a batch; the
    // first batch holds the big row and decodes to about 800 KB.
    let mut lengths = vec![1u64; 100];
    lengths[0] = 100_000;
    let total: u64 = lengths.iter().sum();
    let lod = Lod::try_from_lengths(&[lengths]).unwrap();
    let x = LodTensor::from_vec(vec![7i64; total as usize], vec![total as usize], lod).unwrap();
    let batch = Batch::try_from_tensors([("x", x)]).unwrap();
    let file = tempfile::tempfile().unwrap();
    write_parquet(
        file.try_clone().unwrap(),
        [Ok::<_, lodt::Error>(batch)],
        &Default::default(),
    )
    .unwrap();
    let options = ArrowOptions::default().with_decode_budget(64 << 10);
    let mut r = ParquetReader::try_new(file, &options).unwrap();
    assert_eq!(r.num_batches(), Some(20));
    let err = r.next().unwrap().unwrap_err().to_string();
    assert!(
        err.contains("row group 0: a batch of 5 rows decoded to")
            && err.contains("more than the decode budget of 65536 bytes per batch"),
        "{err}"
    );
}
