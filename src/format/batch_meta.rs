//! What parsing a batch section finds, in either version: a checked batch's
//! metadata ([`BatchMeta`]: its tensors, buffers and codecs), where a buffer
//! is for messages ([`buffer_location`]), and the check of a tensor's LoD and
//! body against it ([`check_tensor_bytes`]). Below the 1.0 parser
//! (`section.rs`) and the 2.0 one (`v2.rs`), which both make it.

use super::error::{ErrorSite, FilePart, FormatError, Result};
use super::layout::check_crc32;
use super::schema::Schema;
use crate::dtype::{DType, Element};
use crate::lod::check_view_levels;
use crate::tensor::check_parts;
use smallvec::SmallVec;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::Arc;

/// A checked batch: everything about it except its body checksums.
#[derive(Debug)]
pub(crate) struct BatchMeta {
    /// The batch number stored in the header.
    pub index: u64,
    pub header_crc: u32,
    pub table_crc: u32,
    pub section_len: u64,
    pub metadata: BTreeMap<String, String>,
    /// Inline for a few tensors and buffers: a parsed batch is one
    /// allocation plus its metadata map.
    pub tensors: SmallVec<[TensorMeta; 2]>,
    /// The position of each tensor name in `tensors` (empty for a 2.0
    /// batch of at most [`FIND_SCAN`] tensors, which `find` scans).
    pub by_name: HashMap<String, usize>,
    pub buffers: SmallVec<[BufferMeta; 6]>,
    /// Where the buffers start and the checksum table starts (section-relative).
    pub data_start: usize,
    pub table_start: usize,
    /// The schema in force (2.0; `None` for 1.0).
    pub schema: Option<Arc<Schema>>,
    /// Whether this batch's head holds the schema (2.0).
    pub holds_schema: bool,
    /// The batch whose head holds the schema in force (2.0).
    pub schema_at: u64,
    /// The bytes a batch with a compressed buffer decodes to (2.0).
    pub decoded_len: Option<usize>,
}

/// A buffer of a batch: its byte range within the section and its CRC32.
#[derive(Debug, Clone)]
pub(crate) struct BufferMeta {
    /// The stored bytes, within the section (what the crc covers).
    pub range: Range<usize>,
    pub crc: u32,
    /// How the stored bytes are compressed (2.0).
    pub codec: Codec,
    /// The element width of a byte-shuffled buffer, 0 if not shuffled (2.0).
    pub shuffle: usize,
    /// The decoded bytes: within the decoded batch when the batch has a
    /// compressed buffer, else `range`.
    pub view: Range<usize>,
}

/// A tensor of a batch, checked against its buffers.
#[derive(Debug)]
pub(crate) struct TensorMeta {
    /// Shared with the 2.0 schema (no copy per batch).
    pub name: Arc<str>,
    pub dtype: DType,
    pub shape: SmallVec<[usize; 4]>,
    /// The buffer index of each LoD level.
    pub lod: SmallVec<[usize; 4]>,
    /// The buffer index of the body.
    pub body: usize,
}

/// Up to this many tensors, [`BatchMeta::find`] compares names one by one
/// (a 2.0 batch of so few builds no `by_name` map).
pub(crate) const FIND_SCAN: usize = 8;

impl BatchMeta {
    /// The tensor named `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        // A few names compare faster than they hash.
        if self.tensors.len() <= FIND_SCAN {
            return self.tensors.iter().position(|t| *t.name == *name);
        }
        self.by_name.get(name).copied()
    }

    /// The tensor names.
    pub fn names(&self) -> Vec<String> {
        self.tensors.iter().map(|t| t.name.to_string()).collect()
    }

    /// The byte range (section-relative) of buffer `i`.
    pub fn range(&self, i: usize) -> Range<usize> {
        self.buffers.get(i).map(|b| b.range.clone()).unwrap_or(0..0)
    }

    /// The byte range of buffer `i`'s decoded bytes (section-relative, or
    /// within the decoded batch: see [`BufferMeta::view`]).
    pub fn view(&self, i: usize) -> Range<usize> {
        self.buffers.get(i).map(|b| b.view.clone()).unwrap_or(0..0)
    }

    /// The total number of body bytes (decoded).
    pub fn body_bytes(&self) -> u64 {
        self.tensors
            .iter()
            .map(|t| self.view(t.body).len() as u64)
            .sum()
    }
}

/// The codec of one stored buffer (the record's `codec` byte).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Codec {
    /// Stored raw (0).
    #[default]
    None,
    /// LZ4 block (1).
    Lz4,
    /// One zstd frame (2).
    Zstd,
}

impl Codec {
    /// The codec of a record's `codec` byte, if it names one.
    pub(super) fn from_byte(b: u8) -> Option<Codec> {
        match b {
            0 => Some(Codec::None),
            1 => Some(Codec::Lz4),
            2 => Some(Codec::Zstd),
            _ => None,
        }
    }

    /// The record's `codec` byte of this codec.
    pub(super) fn byte(self) -> u8 {
        match self {
            Codec::None => 0,
            Codec::Lz4 => 1,
            Codec::Zstd => 2,
        }
    }
}

/// Checks one tensor's LoD against Paddle's rules and its shape, and (for
/// bool) its body bytes; `bytes` is the section with `stored` (and then the
/// LoD checksums are checked too), else the decoded batch.
pub(crate) fn check_tensor_bytes(
    section: &[u8],
    meta: &BatchMeta,
    t: usize,
    stored: bool,
) -> Result<()> {
    let buffer = |i: usize| -> &[u8] {
        let r = if stored { meta.range(i) } else { meta.view(i) };
        section.get(r).unwrap_or(&[])
    };
    let Some(tm) = meta.tensors.get(t) else {
        return Ok(());
    };
    let tat = |part| ErrorSite::tensor(meta.index, &tm.name, part);
    let mut levels: SmallVec<[&[u64]; 4]> = SmallVec::with_capacity(tm.lod.len());
    for (l, &b) in tm.lod.iter().enumerate() {
        let bytes = buffer(b);
        if stored {
            let expected = meta.buffers.get(b).map_or(0, |b| b.crc);
            check_crc32(bytes, expected, tat(FilePart::Lod(l)))?;
        }
        levels.push(
            u64::slice_from_bytes(bytes).map_err(|source| FormatError::Tensor {
                at: tat(FilePart::Lod(l)),
                source,
            })?,
        );
    }
    let lod_rows = levels.last().and_then(|w| w.last().copied());
    let body = buffer(tm.body);
    check_view_levels(&levels, tm.shape.first().map(|&r| r as u64))
        .and_then(|()| check_parts(tm.dtype, &tm.shape, levels.len(), lod_rows, body))
        .map_err(|source| FormatError::Tensor {
            at: tat(FilePart::Body),
            source,
        })
}

/// Where buffer `i` of a checked batch is: the tensor part that uses it, or
/// the buffer itself when no tensor does (O(tensors): for error messages).
pub(crate) fn buffer_location(meta: &BatchMeta, i: usize) -> ErrorSite {
    for tm in &meta.tensors {
        if let Some(l) = tm.lod.iter().position(|&b| b == i) {
            return ErrorSite::tensor(meta.index, &tm.name, FilePart::Lod(l));
        }
        if tm.body == i {
            return ErrorSite::tensor(meta.index, &tm.name, FilePart::Body);
        }
    }
    ErrorSite::batch(meta.index, FilePart::Buffer(i))
}
