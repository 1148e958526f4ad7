//! Reseals every CRC32 of a `.lodt` file as `spec/FORMAT.md` says (1.0 and
//! 2.0; for 2.0 by walking each batch head's record), best effort, so that
//! the `.lodt` targets' mutations reach the structural checks behind the
//! checksums (metadata, records, layout, LoD rules, codecs, footer index).
//! Shared by `lodt_file` and `lodt_stream`.

#![allow(dead_code)]

fn get_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

fn get_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
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
pub fn fix_crcs(data: &[u8]) -> Option<Vec<u8>> {
    if data.get(12..14) == Some(&[2, 0]) {
        return fix_crcs_v2(data);
    }
    let mut b = data.to_vec();
    let len = b.len();
    let mut pos = fix_start(&mut b)?;
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
            let off = buffers[i]
                .get("offset")
                .and_then(|v| v.as_u64())
                .unwrap_or(0) as usize;
            let blen = buffers[i]
                .get("length")
                .and_then(|v| v.as_u64())
                .unwrap_or(0) as usize;
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
    fix_footer(&mut b, pos, &entries)?;
    Some(b)
}

/// Reseals the file header and returns the offset of the first batch.
fn fix_start(b: &mut [u8]) -> Option<usize> {
    let meta_len = usize::try_from(get_u64(b, 16)?).ok()?;
    let meta_end = 64usize.checked_add(meta_len)?;
    let c = crc(b, 64..meta_end);
    put_u32(b, 24, c);
    seal(b, 0);
    usize::try_from(pad64(meta_end as u64)?).ok()
}

/// Reads a varint (FORMAT.md 12.1) at `*pos`, before `end`.
fn varint(b: &[u8], pos: &mut usize, end: usize) -> Option<u64> {
    let mut v = 0u64;
    for i in 0..10 {
        if *pos >= end {
            return None;
        }
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// One tensor of a 2.0 schema, as the record walk needs it: scalar, LoD
/// levels, bytes per row.
type SchemaTensor = (bool, u64, u64);

fn dtype_size(name: &str) -> u64 {
    match name {
        "bool" | "int8" | "uint8" => 1,
        "int16" | "uint16" | "float16" | "bfloat16" => 2,
        "int32" | "uint32" | "float32" => 4,
        _ => 8,
    }
}

fn parse_schema(json: &[u8]) -> Option<Vec<SchemaTensor>> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    let tensors = v.get("tensors")?.as_array()?;
    Some(
        tensors
            .iter()
            .take(4096)
            .map(|t| {
                let scalar = t.get("scalar").and_then(|x| x.as_bool()).unwrap_or(false);
                let lod = t.get("lod").and_then(|x| x.as_u64()).unwrap_or(0).min(64);
                let size = dtype_size(t.get("dtype").and_then(|x| x.as_str()).unwrap_or(""));
                let per_row = t
                    .get("shape")
                    .and_then(|x| x.as_array())
                    .map(|d| {
                        d.iter()
                            .filter_map(|x| x.as_u64())
                            .fold(1u64, u64::saturating_mul)
                    })
                    .unwrap_or(1);
                (scalar, lod, per_row.saturating_mul(size))
            })
            .collect(),
    )
}

/// [`fix_crcs`] of a 2.0 file: walks each batch head's record (its schema,
/// or the one of an earlier head) to reseal every buffer's crc, then the
/// head's, then the index and the footer.
fn fix_crcs_v2(data: &[u8]) -> Option<Vec<u8>> {
    let mut b = data.to_vec();
    let len = b.len();
    let mut pos = fix_start(&mut b)?;
    let mut entries = Vec::new();
    let mut schemas: std::collections::HashMap<u64, Vec<SchemaTensor>> = Default::default();
    while b.get(pos..pos + 8) == Some(b"LODTBTCH") {
        let section_len = usize::try_from(get_u64(&b, pos + 8)?).ok()?;
        let head_len = get_u32(&b, pos + 16)? as usize;
        let end = pos.checked_add(section_len)?;
        if section_len < 64 || end > len || head_len < 27 || head_len > section_len {
            break;
        }
        let rec_end = pos + head_len - 4;
        let mut c = pos + 20;
        let mut crcs = Vec::new();
        // Best effort: a record that does not walk still gets its head resealed.
        let _ = (|| -> Option<()> {
            let k = varint(&b, &mut c, rec_end)?;
            let back = varint(&b, &mut c, rec_end)?;
            if back == 0 {
                let l = usize::try_from(varint(&b, &mut c, rec_end)?).ok()?;
                let json = b.get(c..c.checked_add(l)?)?;
                schemas.insert(k, parse_schema(json)?);
                c += l;
            }
            let schema = schemas.get(&k.checked_sub(back)?)?.clone();
            let meta = usize::try_from(varint(&b, &mut c, rec_end)?).ok()?;
            c = c.checked_add(meta)?;
            let mut lens = Vec::new();
            for (scalar, lod, per_row) in schema {
                let rows = if scalar {
                    1
                } else {
                    varint(&b, &mut c, rec_end)?
                };
                if lod > 0 && varint(&b, &mut c, rec_end)? == 0 {
                    for _ in 0..lod {
                        lens.push(varint(&b, &mut c, rec_end)?.saturating_mul(8));
                    }
                }
                lens.push(rows.saturating_mul(per_row));
            }
            let mut cursor = pad64(head_len as u64)?;
            for dlen in lens.into_iter().take(4096) {
                let codec = *b.get(c)?;
                c += 1;
                let stored = if codec == 0 {
                    dlen
                } else {
                    varint(&b, &mut c, rec_end)?
                };
                let start = if codec == 0 { pad64(cursor)? } else { cursor };
                let from = pos.checked_add(usize::try_from(start).ok()?)?;
                let to = from.checked_add(usize::try_from(stored).ok()?)?.min(end);
                let value = crc(&b, from..to);
                put_u32(&mut b, c, value);
                crcs.extend_from_slice(&value.to_le_bytes());
                c += 4;
                cursor = start.checked_add(stored)?;
            }
            Some(())
        })();
        let head_crc = crc(&b, pos..rec_end);
        put_u32(&mut b, rec_end, head_crc);
        entries.push((pos, section_len, head_crc, crc32fast::hash(&crcs)));
        pos = end;
    }
    fix_footer(&mut b, pos, &entries)?;
    Some(b)
}

/// Rewrites the index entries of the footer at `pos` (if there is one) and
/// reseals the footer and the trailer.
fn fix_footer(b: &mut [u8], pos: usize, entries: &[(usize, usize, u32, u32)]) -> Option<()> {
    let len = b.len();
    let mut b = b;
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
    Some(())
}
