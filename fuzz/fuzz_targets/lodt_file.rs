//! Fuzzes the `.lodt` readers: random access (open from bytes), walking every
//! batch and tensor, slicing, owned tensors, verify, and the sequential reader.
//!
//! Each input is read twice: as it is (which mostly exercises the checksum
//! checks), and after recomputing every CRC32 it contains as
//! `spec/FORMAT.md` says, so that mutations reach the structural checks behind
//! the checksums (metadata JSON, buffer layout, LoD rules, footer index).
//!
//! Run (stable toolchain, nightly features unlocked):
//! `cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run lodt_file -- -max_total_time=600`
//! Seed the corpus with the spec's vectors first:
//! `mkdir -p corpus/lodt_file && cp ../spec/vectors/*.lodt corpus/lodt_file/`

#![no_main]

use libfuzzer_sys::fuzz_target;
use lodt::format::{LodtFile, StreamReader};
use lodt::tensor::tensor_json;
use lodt::LodTensor;

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

fn get_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

fn get_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    if let Some(dst) = at.checked_add(4).and_then(|end| b.get_mut(at..end)) {
        dst.copy_from_slice(&v.to_le_bytes());
    }
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    if let Some(dst) = at.checked_add(8).and_then(|end| b.get_mut(at..end)) {
        dst.copy_from_slice(&v.to_le_bytes());
    }
}

fn crc(b: &[u8], range: std::ops::Range<usize>) -> u32 {
    b.get(range).map_or(0, crc32fast::hash)
}

/// Sets the CRC field (bytes 60..64) of the 64-byte struct at `at`.
fn seal(b: &mut [u8], at: usize) -> u32 {
    let c = crc(b, at..at + 60);
    put_u32(b, at + 60, c);
    c
}

fn pad64(n: u64) -> Option<u64> {
    n.checked_add(63).map(|x| x & !63)
}

/// A copy of `data` with every CRC32 recomputed, best effort.
fn fix_crcs(data: &[u8]) -> Option<Vec<u8>> {
    let mut b = data.to_vec();
    let len = b.len();
    let meta_len = usize::try_from(get_u64(&b, 16)?).ok()?;
    let meta_end = 64usize.checked_add(meta_len)?;
    let c = crc(&b, 64..meta_end);
    put_u32(&mut b, 24, c);
    seal(&mut b, 0);
    let mut pos = usize::try_from(pad64(meta_end as u64)?).ok()?;
    let mut entries = Vec::new();
    while b.get(pos..pos + 8) == Some(b"LODTBTCH") {
        let section_len = usize::try_from(get_u64(&b, pos + 8)?).ok()?;
        let end = pos.checked_add(section_len)?;
        if section_len < 128 || end > len {
            break;
        }
        let meta_len = usize::try_from(get_u64(&b, pos + 24)?).ok()?;
        let meta = pos + 64..pos.checked_add(64)?.checked_add(meta_len)?;
        let c = crc(&b, meta.clone());
        put_u32(&mut b, pos + 32, c);
        let n = get_u32(&b, pos + 36)? as usize;
        let table_len = usize::try_from(pad64(4 * (n as u64 + 1))?).ok()?;
        let table = end.checked_sub(table_len)?;
        let json: Option<serde_json::Value> =
            b.get(meta).and_then(|m| serde_json::from_slice(m).ok());
        let buffers = json
            .as_ref()
            .and_then(|j| j.get("buffers"))
            .and_then(|v| v.as_array())
            .cloned()
            .unwrap_or_default();
        for i in 0..n.min(buffers.len()).min(4096) {
            let off = buffers[i].get("offset").and_then(|v| v.as_u64()).unwrap_or(0) as usize;
            let blen = buffers[i].get("length").and_then(|v| v.as_u64()).unwrap_or(0) as usize;
            let start = pos.saturating_add(off);
            let c = crc(&b, start..start.saturating_add(blen));
            put_u32(&mut b, table + 4 * i, c);
        }
        let table_crc = crc(&b, table..table + 4 * n);
        put_u32(&mut b, table + 4 * n, table_crc);
        let header_crc = seal(&mut b, pos);
        entries.push((pos, section_len, header_crc, table_crc));
        pos = end;
    }
    if b.get(pos..pos + 8) == Some(b"LODTFOOT") {
        let index = pos + 64;
        for (i, &(offset, length, header_crc, table_crc)) in entries.iter().enumerate() {
            let at = index + 24 * i;
            put_u64(&mut b, at, offset as u64);
            put_u64(&mut b, at + 8, length as u64);
            put_u32(&mut b, at + 16, header_crc);
            put_u32(&mut b, at + 20, table_crc);
        }
        let index_len = usize::try_from(get_u64(&b, pos + 16)?).ok()?;
        let c = crc(&b, index..index.checked_add(index_len)?);
        put_u32(&mut b, pos + 24, c);
        let footer_crc = seal(&mut b, pos);
        let trailer = len.checked_sub(64)?;
        put_u32(&mut b, trailer + 24, footer_crc);
        seal(&mut b, trailer);
    }
    Some(b)
}

fuzz_target!(|data: &[u8]| {
    read(data);
    if let Some(fixed) = fix_crcs(data) {
        read(&fixed);
    }
});
