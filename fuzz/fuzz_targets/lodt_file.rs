//! Fuzzes the `.lodt` readers: random access (open from bytes), walking every
//! batch and tensor, slicing, owned tensors, verify, and the sequential reader.
//!
//! Each input is read twice: as it is (which mostly exercises the checksum
//! checks), and after recomputing every CRC32 it contains as
//! `spec/FORMAT.md` says, so that mutations reach the structural checks behind
//! the checksums (metadata JSON, buffer layout, LoD rules, footer index).
//! Format 1.0 and 2.0 files both: for 2.0 (section 12), the head's record is
//! walked to find and reseal every buffer's crc, so that mutated compressed
//! buffers reach the lz4 and zstd decoders, and mutated counts, codecs and
//! lengths reach the record's checks.
//!
//! Run (stable toolchain, nightly features unlocked):
//! `cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run lodt_file -- -max_total_time=600`
//! Seed the corpus with the spec's vectors first:
//! `mkdir -p corpus/lodt_file && cp ../spec/vectors/*.lodt corpus/lodt_file/`
//! (`seeds/lodt_file/` holds them for `campaign.py lodt_file`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use lodt::format::{LodtFile, StreamReader};
use lodt::tensor::tensor_json;
use lodt::LodTensor;

mod reseal;
use reseal::fix_crcs;

/// Slices a tensor every way the reader's users do: each top-level
/// sequence, one level down, and level ranges.
fn slice(view: &LodTensor) {
    let _ = view.as_bytes().len();
    let levels = view.lod().num_levels();
    if levels == 0 {
        return;
    }
    let n = view.lod().num_sequences(0).unwrap_or(0);
    for i in 0..n.min(8) {
        if let Ok(s) = view.branch(&[i]) {
            let _ = s.shape();
            let _ = s.branch(&[0]);
            let _ = s.lod().to_offsets();
        }
        let _ = view.sequence(levels - 1, i);
    }
    let _ = view.slice_level(0, 0, n);
    let _ = view.branch(&[n]); // one past the end: an error, not a panic
}

fn read(data: &[u8]) {
    if let Ok(file) = LodtFile::from_bytes(data) {
        for k in 0..file.num_batches().min(64) {
            let Ok(batch) = file.batch(k) else {
                continue;
            };
            let names: Vec<String> = batch.names().map(str::to_owned).collect();
            for t in batch.tensors() {
                let Ok((name, view)) = t else {
                    continue;
                };
                if view.as_bytes().len() <= 1 << 16 {
                    let _ = tensor_json(name, &view);
                }
                slice(&view);
            }
            for name in &names {
                if let Ok(parts) = file.tensor_buffers(k, name) {
                    let _ = parts.to_tensor();
                }
            }
            let _ = file.read_batch(k);
        }
        let _ = file.verify();
    }
    if let Ok(reader) = StreamReader::try_new(data) {
        for batch in reader.take(64).flatten() {
            for (_, t) in batch.iter() {
                slice(t);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    read(data);
    if let Some(fixed) = fix_crcs(data) {
        read(&fixed);
    }
});
