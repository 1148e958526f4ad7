//! The layout of a batch, computed before it is written ([`plan_batch`]),
//! and the footer of a file ([`footer_bytes`]).

use super::super::error::{FormatError, Result};
use super::super::layout::{
    BATCH_TAG, BatchHeader, BatchMetaJson, BufferJson, FooterHeader, IndexEntry, MAX_METADATA_LEN,
    STRUCT_LEN, Sealed64, TensorJson, Trailer, crc32, pad64,
};
use crate::Batch;
use crate::buffer::Buffer;
use std::borrow::Cow;
use zerocopy::IntoBytes;
use zerocopy::little_endian::{U32, U64};

/// The footer (header, index, padding) and trailer of a file whose batches
/// `entries` describe and whose footer starts at `footer_offset` (a multiple
/// of 64).
pub(crate) fn footer_bytes(entries: &[IndexEntry], footer_offset: u64) -> Vec<u8> {
    let index = entries.as_bytes();
    let count = entries.len() as u64;
    let footer = FooterHeader::new(index, count);
    let mut out = Vec::with_capacity(index.len() + 3 * 64);
    out.extend_from_slice(footer.as_bytes());
    out.extend_from_slice(index);
    out.resize(out.len().next_multiple_of(64), 0);
    let trailer = Trailer::new(footer_offset, count, footer.crc.get());
    out.extend_from_slice(trailer.as_bytes());
    out
}

/// The layout of one batch, computed before writing it.
pub(super) struct Plan<'b> {
    pub(super) header: BatchHeader,
    pub(super) meta: Vec<u8>,
    /// LoD buffers are borrowed, or rebased copies of sliced levels.
    pub(super) buffers: Vec<Cow<'b, [u8]>>,
    /// Each buffer's bytes as a shared [`Buffer`], when they are one (a body,
    /// a level that starts at 0), which the checksum thread can hold.
    pub(super) shared: Vec<Option<Buffer>>,
    /// The file offset of each buffer.
    pub(super) offsets: Vec<u64>,
}

/// Lays out `batch`, whose section starts at file offset `start`: the
/// metadata JSON, every buffer's offset, the header.
pub(super) fn plan_batch(batch: &Batch, index: u64, start: u64) -> Result<Plan<'_>> {
    let mut buffers: Vec<Cow<'_, [u8]>> = Vec::new();
    let mut shared = Vec::new();
    let mut tensors = Vec::with_capacity(batch.len());
    for (name, t) in batch.iter() {
        let mut lod = Vec::new();
        for (l, level) in t.lod().levels().enumerate() {
            lod.push(buffers.len() as u64);
            let bytes = level.rebased_bytes();
            shared.push(match bytes {
                Cow::Borrowed(_) => t.lod().level_buffer(l),
                Cow::Owned(_) => None,
            });
            buffers.push(bytes);
        }
        let body = buffers.len() as u64;
        buffers.push(Cow::Borrowed(t.as_bytes()));
        shared.push(Some(t.buffer().clone()));
        tensors.push(TensorJson {
            name: name.to_owned(),
            dtype: t.dtype().name().to_owned(),
            shape: t.shape().iter().map(|&d| d as u64).collect(),
            lod,
            body,
        });
        if t.shape().len() > super::super::MAX_DIMS
            || t.lod().num_levels() > super::super::MAX_LOD_LEVELS
        {
            return Err(FormatError::Unwritable(format!(
                "tensor {name:?} has {} dimensions and {} LoD levels; the format allows {} and {}",
                t.shape().len(),
                t.lod().num_levels(),
                super::super::MAX_DIMS,
                super::super::MAX_LOD_LEVELS
            )));
        }
    }
    let buffer_count = u32::try_from(buffers.len())
        .map_err(|_| FormatError::Unwritable(format!("{} buffers in one batch", buffers.len())))?;
    // The JSON's length depends on the offsets, which depend on the JSON's
    // (padded) length: iterate until the padded length is stable.
    let mut data_start = STRUCT_LEN + 64;
    let overflow = || FormatError::Unwritable("batch size overflows u64".into());
    for _ in 0..8 {
        let mut offsets = Vec::with_capacity(buffers.len());
        let mut cursor = data_start;
        for b in &buffers {
            cursor = pad64(cursor).ok_or_else(overflow)?;
            offsets.push(BufferJson {
                offset: cursor,
                length: b.len() as u64,
            });
            cursor = cursor.checked_add(b.len() as u64).ok_or_else(overflow)?;
        }
        let json = BatchMetaJson {
            tensors,
            buffers: offsets,
            metadata: batch.metadata().clone(),
        };
        let meta = serde_json::to_vec(&json)
            .map_err(|e| FormatError::Unwritable(format!("batch metadata: {e}")))?;
        let needed = pad64(STRUCT_LEN + meta.len() as u64).ok_or_else(overflow)?;
        if needed != data_start {
            data_start = needed;
            tensors = json.tensors;
            continue;
        }
        if meta.len() as u64 > MAX_METADATA_LEN {
            return Err(FormatError::Unwritable(format!(
                "the batch metadata takes {} bytes of JSON, above the limit of {MAX_METADATA_LEN}",
                meta.len()
            )));
        }
        let table_start = pad64(cursor).ok_or_else(overflow)?;
        let section_len = pad64(4 * (buffer_count as u64 + 1))
            .and_then(|t| table_start.checked_add(t))
            .ok_or_else(overflow)?;
        let mut header = BatchHeader {
            tag: BATCH_TAG,
            section_len: U64::new(section_len),
            index: U64::new(index),
            meta_len: U64::new(meta.len() as u64),
            meta_crc: U32::new(crc32(&meta)),
            buffer_count: U32::new(buffer_count),
            reserved: [0; 20],
            crc: U32::ZERO,
        };
        header.seal();
        let offsets = json.buffers.iter().map(|b| start + b.offset).collect();
        return Ok(Plan {
            header,
            meta,
            buffers,
            shared,
            offsets,
        });
    }
    Err(FormatError::Unwritable(
        "the batch metadata layout did not settle".into(),
    ))
}
