//! Fuzzes the MDS dataset reader (`MdsReader`): the input is split into an
//! `index.json` and up to two shard files, written to a scratch directory,
//! opened through the public reader and read to the end. Hostile datasets
//! (an index naming missing shards, offsets past a shard, a zstd shard that
//! is not zstd or decodes to more than the index says) must be errors with
//! a message, never a panic, an abort, a hang or a huge allocation. A shard
//! that reads gives a batch of one tensor per column, named as the index
//! names them, each with a row (or a top-level sequence) per sample; every
//! byte of every tensor is touched, sliced, and written to an IPC stream and
//! read back unchanged.
//!
//! Input framing: byte 0 holds flags (bit 0: the first shard file is named
//! `shard.00000.mds.zstd`, else `shard.00000.mds`; bit 1: the second is
//! named `shard.00001.mds.zstd`, else `shard.00001.mds`; bit 2: no second
//! shard file), bytes 1..3 and 3..5 the lengths of `index.json` and of the
//! first shard file (u16 LE, cut to what is left), the rest the three files
//! in that order. The index may name those files or others.
//!
//! Seeds: `python3 seeds/make_seeds_megatron_mds.py seeds` (the datasets of
//! `tests/data/mds/`, written by MosaicML Streaming). Run:
//! `python3 campaign.py mds_reader --flat 600 --cap 1800`.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use lodt::batch::BatchReader;
use lodt::mds::{MdsIndex, MdsReader};

/// Every name a shard file of this target may have.
const NAMES: [&str; 4] = [
    "shard.00000.mds",
    "shard.00000.mds.zstd",
    "shard.00001.mds",
    "shard.00001.mds.zstd",
];

fuzz_target!(init: common::install_hook(), |data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Some((lens, files)) = rest.split_first_chunk::<4>() else {
        return;
    };
    let json_len = (u16::from_le_bytes([lens[0], lens[1]]) as usize).min(files.len());
    let (json, files) = files.split_at(json_len);
    let first_len = (u16::from_le_bytes([lens[2], lens[3]]) as usize).min(files.len());
    let (first, second) = files.split_at(first_len);

    let dir = common::scratch_dir().join("mds");
    std::fs::create_dir_all(&dir).expect("scratch directory");
    for name in NAMES {
        let _ = std::fs::remove_file(dir.join(name));
    }
    std::fs::write(dir.join("index.json"), json).expect("scratch write");
    std::fs::write(dir.join(NAMES[usize::from(flags & 1)]), first).expect("scratch write");
    if flags & 4 == 0 {
        std::fs::write(dir.join(NAMES[2 + usize::from(flags >> 1 & 1)]), second)
            .expect("scratch write");
    }

    let parsed = MdsIndex::parse(json, "index.json");
    let reader = match MdsReader::open(&dir) {
        Ok(reader) => reader,
        Err(err) => {
            assert!(!err.to_string().is_empty(), "an error without a message");
            if common::verbose() {
                eprintln!("mds_reader: {err}");
            }
            assert!(parsed.is_err(), "the index parses but does not open: {err}");
            return;
        }
    };
    let index = reader.index().clone();
    let parsed = parsed.expect("an index that opens parses");
    assert_eq!(parsed.names(), index.names());
    assert_eq!(parsed.shards(), index.shards());
    assert_eq!(reader.num_batches(), Some(index.shards().len()));
    for (k, batch) in reader.take(64).enumerate() {
        let batch = match batch {
            Ok(batch) => batch,
            Err(err) => {
                assert!(!err.to_string().is_empty(), "an error without a message");
                if common::verbose() {
                    eprintln!("mds_reader: shard {k}: {err}");
                }
                continue;
            }
        };
        let samples = index.shards()[k].samples as usize;
        assert_eq!(batch.len(), index.names().len(), "a tensor per column");
        for ((name, tensor), want) in batch.iter().zip(index.names()) {
            assert_eq!(name, want, "the columns in the index's order");
            let rows = match tensor.lod().num_levels() {
                0 => tensor.shape().first().copied().unwrap_or(1),
                1 => tensor.lod().num_sequences(0).expect("a top level"),
                n => panic!("column {name}: a tensor of {n} levels"),
            };
            assert_eq!(rows, samples, "column {name}: a row or sequence per sample");
        }
        common::check_batch(&batch);
        if common::verbose() {
            eprintln!("mds_reader: shard {k}: {samples} samples, {} columns", batch.len());
        }
    }
});
