//! Parsing and checking one batch section, shared by the memory-mapped reader,
//! the sequential reader, `verify` and `recover`.
//!
//! ```text
//!  section start (64-aligned)
//!  +0            batch header (64 B)
//!  +64           metadata JSON, zero-padded to 64
//!  data_start    buffer 0 (64-aligned), zero padding
//!                buffer 1 ...
//!  table_start   CRC32 of each buffer (u32 LE), CRC32 of those, zero padding
//!  section_len
//! ```

use super::batch_meta::{
    BatchMeta, BufferMeta, Codec, TensorMeta, buffer_location, check_tensor_bytes,
};
use super::error::{ErrorSite, FilePart, FormatError, Result};
use super::layout::{
    BATCH_TAG, BatchHeader, BatchMetaJson, BufferJson, STRUCT_LEN, Sealed64, TensorJson,
    check_crc32, check_meta_len, check_zero, crc32, pad64, parse_json, read_struct, same_crc,
    to_usize,
};
use super::schema::Schema;
use crate::buffer::{Buffer, ByteStorage, check_range};
use crate::dtype::DType;
use crate::lod::Lod;
use crate::tensor::checked_byte_len;
use crate::{Error, LodTensor};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

/// The bytes of one batch: a window of the file's whole storage, borrowed
/// from the reader (reaching a batch then takes no reference count; its
/// tensors take one each for the LoD and the body), or a buffer read for it.
#[derive(Debug, Clone)]
pub(crate) struct Section<'a> {
    buf: Cow<'a, Buffer>,
    /// The batch's bytes within `buf`.
    range: Range<usize>,
}

impl<'a> Section<'a> {
    /// Bytes `range` of `whole` (an error if they are not inside it).
    #[inline]
    pub(crate) fn borrowed(whole: &'a Buffer, range: Range<usize>) -> Result<Self> {
        check_range(&range, whole.len())?;
        Ok(Section {
            buf: Cow::Borrowed(whole),
            range,
        })
    }

    /// All of `buf`, read for the batch.
    pub(crate) fn owned(buf: Buffer) -> Self {
        let range = 0..buf.len();
        Section {
            buf: Cow::Owned(buf),
            range,
        }
    }

    /// The batch's bytes.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        self.buf.as_slice().get(self.range.clone()).unwrap_or(&[])
    }

    /// The batch's bytes as a buffer of their own (one more reference to
    /// the storage).
    pub(crate) fn to_buffer(&self) -> Result<Buffer> {
        Ok(self.buf.slice(self.range.clone())?)
    }

    /// The storage holding the batch's bytes.
    pub(crate) fn storage(&self) -> &Arc<dyn ByteStorage> {
        self.buf.storage()
    }

    /// `r`, relative to the batch, relative to `buf`.
    #[inline]
    fn in_buf(&self, r: Range<usize>) -> Range<usize> {
        self.range.start + r.start..self.range.start + r.end
    }

    /// `r`, relative to the batch, relative to the storage.
    pub(crate) fn in_storage(&self, r: Range<usize>) -> Range<usize> {
        let base = self.buf.range().start + self.range.start;
        base + r.start..base + r.end
    }

    /// Bytes `r` of the batch, as a buffer sharing the storage.
    #[inline]
    fn slice(&self, r: Range<usize>) -> Result<Buffer> {
        check_range(&r, self.range.len())?;
        Ok(self.buf.slice(self.in_buf(r))?)
    }
}

/// Reads and checks a batch header that starts at `file_offset` (tag, CRC,
/// batch number, lengths).
pub(crate) fn parse_header(
    bytes: &[u8],
    file_offset: u64,
    expected_index: u64,
) -> Result<BatchHeader> {
    let at = || ErrorSite::batch(expected_index, FilePart::BatchHeader);
    let header: BatchHeader = read_struct(bytes, file_offset, at())?;
    if header.tag != BATCH_TAG {
        return Err(FormatError::corrupt(
            at(),
            format!(
                "expected tag {:?}, found {:?}",
                String::from_utf8_lossy(&BATCH_TAG),
                String::from_utf8_lossy(&header.tag)
            ),
        ));
    }
    header.check_crc(at())?;
    let index = header.index.get();
    if index != expected_index {
        return Err(FormatError::corrupt(
            at(),
            format!("expected batch number {expected_index}, found {index}"),
        ));
    }
    let section_len = header.section_len.get();
    if section_len < 2 * STRUCT_LEN || !section_len.is_multiple_of(64) {
        return Err(FormatError::corrupt(
            at(),
            format!("section length {section_len} is not a multiple of 64 of at least 128"),
        ));
    }
    check_meta_len(
        header.meta_len.get(),
        ErrorSite::batch(expected_index, FilePart::BatchMetadata),
    )?;
    Ok(header)
}

/// Parses a whole batch section (`section` is exactly the section's bytes,
/// starting at `file_offset`, and 64-byte aligned in memory) and checks its
/// header, metadata, checksum table, buffer layout and every tensor: LoD
/// checksums and LoD rules, body lengths, bools. Body checksums are left to
/// [`check_buffers`].
pub(crate) fn parse_batch(section: &[u8], file_offset: u64, k: u64) -> Result<BatchMeta> {
    let header = parse_header(section, file_offset, k)?;
    let section_len = header.section_len.get();
    if section_len != section.len() as u64 {
        return Err(FormatError::corrupt(
            ErrorSite::batch(k, FilePart::BatchHeader),
            format!(
                "section length {section_len} does not match the {} bytes the index gives the batch",
                section.len()
            ),
        ));
    }
    let (json, data_start) = read_metadata(section, file_offset, k, &header)?;
    let table = read_table(
        section,
        file_offset,
        k,
        &header,
        json.buffers.len(),
        data_start,
    )?;
    let entries = &section[table.start..table.entries_end];
    let buffers = place_buffers(k, &json.buffers, entries, data_start, table.start)?;
    let (tensors, by_name) = read_tensors(k, json.tensors, &buffers)?;
    let meta = BatchMeta {
        index: k,
        header_crc: header.crc.get(),
        table_crc: table.crc,
        section_len,
        metadata: json.metadata,
        tensors,
        by_name,
        buffers,
        data_start,
        table_start: table.start,
        schema: None,
        holds_schema: false,
        schema_at: 0,
        decoded_len: None,
    };
    // LoD checksums and rules, body lengths and bools.
    for i in 0..meta.tensors.len() {
        check_tensor_bytes(section, &meta, i, true)?;
    }
    Ok(meta)
}

/// Reads and checks the batch metadata after the header (its crc, the zero
/// padding after it) of a section whose length is checked; returns it with
/// where the data area starts.
fn read_metadata(
    section: &[u8],
    file_offset: u64,
    k: u64,
    header: &BatchHeader,
) -> Result<(BatchMetaJson, usize)> {
    let section_len = section.len() as u64;
    let meta_at = || ErrorSite::batch(k, FilePart::BatchMetadata);
    let meta_len = header.meta_len.get();
    let meta_end = STRUCT_LEN + meta_len;
    // Cannot overflow: meta_len <= MAX_METADATA_LEN.
    let data_start = pad64(meta_end).unwrap_or(u64::MAX);
    if data_start > section_len {
        return Err(FormatError::corrupt(
            meta_at(),
            format!("metadata ends at {data_start}, past the section's {section_len} bytes"),
        ));
    }
    let (meta_end, data_start) = (meta_end as usize, data_start as usize);
    // In range: data_start <= section.len().
    let meta = &section[STRUCT_LEN as usize..meta_end];
    check_crc32(meta, header.meta_crc.get(), meta_at())?;
    check_zero(
        &section[meta_end..data_start],
        file_offset + meta_end as u64,
        meta_at,
    )?;
    Ok((parse_json(meta, meta_at())?, data_start))
}

/// Where a batch's checksum table is in its section.
struct Table {
    start: usize,
    /// Where the buffers' checksums end (the table's own crc follows).
    entries_end: usize,
    /// The crc of the buffers' checksums.
    crc: u32,
}

/// Finds and checks the checksum table at the end of the section: as many
/// entries as the header counts and the metadata lists (`listed`), between
/// the data area (from `data_start`) and the section's end, its crc, and
/// the zero padding after it.
fn read_table(
    section: &[u8],
    file_offset: u64,
    k: u64,
    header: &BatchHeader,
    listed: usize,
    data_start: usize,
) -> Result<Table> {
    let section_len = section.len() as u64;
    let table_at = || ErrorSite::batch(k, FilePart::ChecksumTable);
    let count = header.buffer_count.get() as usize;
    if count != listed {
        return Err(FormatError::corrupt(
            table_at(),
            format!("the header counts {count} buffers, the metadata lists {listed}"),
        ));
    }
    // count < 2^32, so these cannot overflow u64.
    let table_bytes = 4 * (count as u64 + 1);
    let table_len = pad64(table_bytes).unwrap_or(u64::MAX);
    if table_len > section_len - data_start as u64 {
        return Err(FormatError::corrupt(
            table_at(),
            format!(
                "a table of {count} checksums needs {table_len} bytes, the section has {} after its metadata",
                section_len - data_start as u64
            ),
        ));
    }
    let table_start = (section_len - table_len) as usize;
    let entries_end = table_start + 4 * count;
    let table_end = table_start + table_bytes as usize;
    let entries = &section[table_start..entries_end];
    let table_crc = u32::from_le_bytes(
        section[entries_end..table_end]
            .try_into()
            .map_err(|_| FormatError::corrupt(table_at(), "short checksum table"))?,
    );
    check_crc32(entries, table_crc, table_at())?;
    check_zero(
        &section[table_end..],
        file_offset + table_end as u64,
        table_at,
    )?;
    Ok(Table {
        start: table_start,
        entries_end,
        crc: table_crc,
    })
}

/// The buffers the metadata lists, with their checksums (`entries`):
/// 64-aligned, in order, not overlapping, inside the data area (from
/// `data_start` to the checksum table at `table_start`).
fn place_buffers(
    k: u64,
    listed: &[BufferJson],
    entries: &[u8],
    data_start: usize,
    table_start: usize,
) -> Result<SmallVec<[BufferMeta; 6]>> {
    let mut buffers: SmallVec<[BufferMeta; 6]> = SmallVec::with_capacity(listed.len());
    let mut prev_end = data_start as u64;
    for (i, (b, crc)) in listed.iter().zip(entries.chunks_exact(4)).enumerate() {
        let end = b.offset.checked_add(b.length);
        let bad = if !b.offset.is_multiple_of(64) {
            Some(format!(
                "buffer {i} starts at {}, not a multiple of 64",
                b.offset
            ))
        } else if b.offset < prev_end {
            Some(format!(
                "buffer {i} starts at {}, before the end ({prev_end}) of what precedes it",
                b.offset
            ))
        } else if end.is_none_or(|e| e > table_start as u64) {
            Some(format!(
                "buffer {i} ({} bytes at {}) runs past the checksum table at {table_start}",
                b.length, b.offset
            ))
        } else {
            None
        };
        if let Some(reason) = bad {
            return Err(FormatError::corrupt(
                ErrorSite::batch(k, FilePart::BatchMetadata),
                reason,
            ));
        }
        let end = end.unwrap_or(0);
        prev_end = end;
        buffers.push(BufferMeta {
            range: b.offset as usize..end as usize,
            crc: u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]),
            codec: Codec::None,
            shuffle: 0,
            view: b.offset as usize..end as usize,
        });
    }
    Ok(buffers)
}

/// A batch's tensors, inline for a few.
type Tensors = SmallVec<[TensorMeta; 2]>;

/// The tensors the metadata lists, checked against the `buffers`: names
/// non-empty and unique, dtypes known, each buffer used once, body lengths
/// as the shape says, LoD levels of whole offsets. Returns them with the
/// position of each name.
fn read_tensors(
    k: u64,
    listed: Vec<TensorJson>,
    buffers: &[BufferMeta],
) -> Result<(Tensors, HashMap<String, usize>)> {
    let meta_at = || ErrorSite::batch(k, FilePart::BatchMetadata);
    let mut by_name = HashMap::with_capacity(listed.len());
    let mut owner: Vec<bool> = vec![false; buffers.len()];
    let mut tensors = SmallVec::with_capacity(listed.len());
    for t in listed {
        if t.name.is_empty() {
            return Err(FormatError::corrupt(
                meta_at(),
                "a tensor has an empty name",
            ));
        }
        if by_name.insert(t.name.clone(), tensors.len()).is_some() {
            return Err(FormatError::corrupt(
                meta_at(),
                format!("two tensors are named {:?}", t.name),
            ));
        }
        tensors.push(read_tensor(k, t, buffers, &mut owner)?);
    }
    Ok((tensors, by_name))
}

/// One tensor the metadata lists (named, uniquely), checked against the
/// `buffers`; `owner` says which buffers earlier tensors use.
fn read_tensor(
    k: u64,
    t: TensorJson,
    buffers: &[BufferMeta],
    owner: &mut [bool],
) -> Result<TensorMeta> {
    let count = buffers.len();
    let tat = |part| ErrorSite::tensor(k, &t.name, part);
    let dtype: DType = t.dtype.parse().map_err(|_| {
        FormatError::corrupt(
            tat(FilePart::BatchMetadata),
            format!("unknown dtype {:?}", t.dtype),
        )
    })?;
    let shape = t
        .shape
        .iter()
        .map(|&d| to_usize(d, || tat(FilePart::BatchMetadata), "dimension"))
        .collect::<Result<Vec<_>>>()?;
    let mut claim = |index: u64, part: FilePart| -> Result<usize> {
        let i = usize::try_from(index)
            .ok()
            .filter(|&i| i < count)
            .ok_or_else(|| {
                FormatError::corrupt(
                    tat(part),
                    format!("buffer index {index} is not below the {count} buffers"),
                )
            })?;
        match owner.get_mut(i) {
            Some(used) if !*used => {
                *used = true;
                Ok(i)
            }
            _ => Err(FormatError::corrupt(
                tat(part),
                format!("buffer {i} is used twice"),
            )),
        }
    };
    let lod = t
        .lod
        .iter()
        .enumerate()
        .map(|(l, &b)| claim(b, FilePart::Lod(l)))
        .collect::<Result<Vec<_>>>()?;
    let body = claim(t.body, FilePart::Body)?;
    let expected = checked_byte_len(dtype, &shape).map_err(|source| FormatError::Tensor {
        at: tat(FilePart::Body),
        source,
    })?;
    let found = buffers.get(body).map_or(0, |b| b.range.len());
    if found != expected {
        return Err(FormatError::Tensor {
            at: tat(FilePart::Body),
            source: Error::DataLength {
                dtype,
                shape: t.shape.clone(),
                expected: expected as u64,
                found: found as u64,
            },
        });
    }
    for (l, &b) in lod.iter().enumerate() {
        let len = buffers.get(b).map_or(0, |b| b.range.len());
        if !len.is_multiple_of(8) {
            return Err(FormatError::corrupt(
                tat(FilePart::Lod(l)),
                format!("{len} bytes is not a whole number of u64 offsets"),
            ));
        }
    }
    Ok(TensorMeta {
        name: t.name.into(),
        dtype,
        shape: shape.into(),
        lod: lod.into(),
        body,
    })
}

/// Parses batch `k` of a file of major version `major`: the one place the
/// batch section's version is dispatched on (1.0: section 5 of
/// `spec/FORMAT.md`, 2.0: section 12). `schema_of(j)` gives the 2.0 schema
/// held by batch `j`'s head.
pub(crate) fn parse_any(
    major: u16,
    section: &[u8],
    file_offset: u64,
    k: u64,
    schema_of: &mut dyn FnMut(u64) -> Result<Arc<Schema>>,
) -> Result<BatchMeta> {
    if major >= 2 {
        super::v2::parse_batch(section, file_offset, k, schema_of)
    } else {
        parse_batch(section, file_offset, k)
    }
}

/// The section a checked batch's tensors are windows of: `section` itself,
/// or, for a 2.0 batch with a compressed buffer, its decoded bytes.
pub(crate) fn decoded<'a>(section: Section<'a>, meta: &BatchMeta) -> Result<Section<'a>> {
    if meta.decoded_len.is_none() {
        return Ok(section);
    }
    Ok(Section::owned(super::v2::decode(section.bytes(), meta)?))
}

/// Tensor `t` of a checked batch whose bytes are `section`: an owned tensor
/// whose LoD offsets and body are windows of the section's storage (no copy).
/// (Its name is `meta.tensors[t].name`: the result stays small, and moves
/// without a call to `memcpy`.)
#[inline]
pub(crate) fn tensor(section: &Section<'_>, meta: &BatchMeta, t: usize) -> Result<LodTensor> {
    let Some(tm) = meta.tensors.get(t) else {
        return Err(FormatError::Core(Error::OutOfRange {
            what: "tensor",
            index: t as u64,
            len: meta.tensors.len() as u64,
        }));
    };
    // LoD rules, shape and body length were checked by `parse_batch`
    // (`check_tensor`) before the batch was handed out; only the buffers'
    // ranges and alignment are checked again as they are wrapped (O(levels)).
    // The LoD holds one reference to the storage, the body another.
    let lod = Lod::from_buffer_windows(
        &section.buf,
        tm.lod.iter().map(|&b| section.in_buf(meta.view(b))),
    )?;
    let body = section.slice(meta.view(tm.body))?;
    Ok(LodTensor::from_checked_parts(
        tm.dtype, &tm.shape, body, lod,
    ))
}

/// Checks the checksum of every buffer of a checked batch (bodies included)
/// and that the gaps between buffers are zero. `progress` gets the number of
/// bytes checked after each buffer.
pub(crate) fn check_buffers(
    section: &[u8],
    meta: &BatchMeta,
    file_offset: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<()> {
    let mut prev_end = meta.data_start;
    for (i, b) in meta.buffers.iter().enumerate() {
        let at = || buffer_location(meta, i);
        let gap = section.get(prev_end..b.range.start).unwrap_or(&[]);
        check_zero(gap, file_offset + prev_end as u64, || {
            ErrorSite::batch(meta.index, FilePart::Padding)
        })?;
        let bytes = section.get(b.range.clone()).unwrap_or(&[]);
        same_crc(at(), b.crc, crc32_large(bytes))?;
        progress(b.range.end as u64 - prev_end as u64);
        prev_end = b.range.end;
    }
    let gap = section.get(prev_end..meta.table_start).unwrap_or(&[]);
    check_zero(gap, file_offset + prev_end as u64, || {
        ErrorSite::batch(meta.index, FilePart::Padding)
    })?;
    Ok(())
}

/// Checks a parsed batch whole, as `verify` does: every buffer's checksum
/// and every gap ([`check_buffers`]), then, for a 2.0 batch with a
/// compressed buffer, its decoding ([`decode_check`]). The one home of that
/// check: `verify`, the stream reader and `recover` all call it, so a batch
/// one of them keeps the others keep too. Returns the decoded batch of a
/// compressed one (its tensors are windows of it).
pub(crate) fn check_whole(
    section: &[u8],
    meta: &BatchMeta,
    file_offset: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<Option<Buffer>> {
    check_buffers(section, meta, file_offset, progress)?;
    decode_check(section, meta)
}

/// A 2.0 batch with compressed buffers decoded: checked to decode to its
/// recorded lengths, with decoded LoD and bodies that follow the rules; a
/// batch with none: `None` (nothing to decode).
pub(crate) fn decode_check(section: &[u8], meta: &BatchMeta) -> Result<Option<Buffer>> {
    if meta.decoded_len.is_none() {
        return Ok(None);
    }
    super::v2::decode(section, meta).map(Some)
}

/// Checks the checksums of a checked batch's buffers that [`parse_batch`]
/// does not check (the bodies, and buffers no tensor uses), or with
/// `lod_too` of every buffer (a new copy of a batch parsed from an earlier
/// one). Each buffer is read once; padding, which no checksum covers and no
/// tensor shows, is not read (`verify` checks it).
pub(crate) fn check_unchecked_buffers(
    section: &[u8],
    meta: &BatchMeta,
    lod_too: bool,
) -> Result<()> {
    let check = |i: usize| -> Result<()> {
        let Some(b) = meta.buffers.get(i) else {
            return Ok(());
        };
        let found = crc32_large(section.get(b.range.clone()).unwrap_or(&[]));
        same_crc_at(|| buffer_location(meta, i), b.crc, found)
    };
    let mut used = 0;
    for tm in &meta.tensors {
        if lod_too {
            for &b in &tm.lod {
                check(b)?;
            }
        }
        check(tm.body)?;
        used += tm.lod.len() + 1;
    }
    if used < meta.buffers.len() {
        let mut owned = vec![false; meta.buffers.len()];
        for tm in &meta.tensors {
            for &b in tm.lod.iter().chain(std::iter::once(&tm.body)) {
                if let Some(o) = owned.get_mut(b) {
                    *o = true;
                }
            }
        }
        for (i, _) in owned.iter().enumerate().filter(|(_, o)| !**o) {
            check(i)?;
        }
    }
    Ok(())
}

/// [`same_crc`], with the location built only on a mismatch.
fn same_crc_at(at: impl Fn() -> ErrorSite, expected: u32, found: u32) -> Result<()> {
    if expected == found {
        Ok(())
    } else {
        same_crc(at(), expected, found)
    }
}

/// CRC32 of a large buffer, using two threads above a threshold.
pub(crate) fn crc32_large(bytes: &[u8]) -> u32 {
    const PARALLEL: usize = 8 << 20;
    if bytes.len() < PARALLEL {
        return crc32(bytes);
    }
    let (a, b) = bytes.split_at(bytes.len() / 2);
    let (ha, hb) = std::thread::scope(|s| {
        let other = s.spawn(|| {
            let mut h = crc32fast::Hasher::new();
            h.update(b);
            h
        });
        let mut h = crc32fast::Hasher::new();
        h.update(a);
        (h, other.join())
    });
    match hb {
        Ok(hb) => {
            let mut ha = ha;
            ha.combine(&hb);
            ha.finalize()
        }
        // The hashing thread cannot panic; compute it here if it somehow did.
        Err(_) => crc32(bytes),
    }
}
