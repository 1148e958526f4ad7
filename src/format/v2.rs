//! Format 2.0's batch section (`spec/FORMAT.md` §12): the compact batch
//! head (varints, the schema once, buffer codecs and checksums), its parser,
//! the decoding of a batch with compressed buffers, and the encoding the
//! writer uses.
//!
//! ```text
//!  +0              tag "LODTBTCH" | section_len u64 | head_len u32
//!  +20             record: index, schema_back, [schema JSON], metadata JSON,
//!                  per tensor rows / lod_ref / level counts,
//!                  per buffer codec, [stored_len], crc
//!  head_len - 4    crc of the head
//!  pad64(head_len) buffers: raw ones 64-aligned, compressed ones packed
//! ```

use super::batch_meta::{
    BatchMeta, BufferMeta, Codec, FIND_SCAN, TensorMeta, buffer_location, check_tensor_bytes,
};
use super::error::{ErrorSite, FilePart, FormatError, Result};
use super::layout::{
    BATCH_TAG, MAX_DIMS, MAX_LOD_LEVELS, MAX_METADATA_LEN, crc32, pad64, parse_json, same_crc,
};
use super::schema::{Schema, SchemaTensor};
use super::shuffle::{shuffle, unshuffle_into};
use crate::Batch;
use crate::buffer::{AlignedBytes, Buffer};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The most bytes a 2.0 batch holding a compressed buffer decodes to (1 GiB,
/// `spec/FORMAT.md` §12.4, "Decode budget"): the sum of its buffers' decoded
/// lengths, each rounded up to 64. A reader checks it before allocating; the
/// writer stores a batch above it uncompressed.
///
/// ```
/// assert_eq!(lodt::format::MAX_DECODED_BATCH, 1 << 30);
/// ```
pub const MAX_DECODED_BATCH: u64 = 1 << 30;

/// The fixed part of a 2.0 batch head: tag, `section_len`, `head_len`.
pub(crate) const HEAD_FIXED: usize = 20;

/// How the buffers of a 2.0 file are compressed ([`WriteOptions::compression`](super::WriteOptions::compression)).
/// Each buffer is stored compressed only if that makes it smaller.
///
/// ```
/// use lodt::format::Compression;
/// assert_eq!(Compression::default(), Compression::None);
/// assert_eq!(Compression::Zstd { level: 3 }.to_string(), "zstd");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Every buffer stored raw, 64-byte aligned (read in place).
    #[default]
    None,
    /// The LZ4 block format (fast).
    Lz4,
    /// Zstandard at `level` (1 to 22; 3 is zstd's default).
    Zstd {
        /// The compression level.
        level: i32,
    },
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd { .. } => "zstd",
        })
    }
}

impl std::str::FromStr for Compression {
    type Err = FormatError;

    /// Parses `none`, `lz4`, `zstd` (level 3) or `zstd:LEVEL` (1 to 22): the
    /// spelling of the CLI's and Python's `compression` options.
    ///
    /// ```
    /// use lodt::format::Compression;
    /// assert_eq!("zstd:9".parse::<Compression>()?, Compression::Zstd { level: 9 });
    /// assert_eq!("lz4".parse::<Compression>()?, Compression::Lz4);
    /// assert!("gzip".parse::<Compression>().unwrap_err().to_string().contains("found \"gzip\""));
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            FormatError::Unwritable(format!(
                "expected a compression none, lz4, zstd or zstd:LEVEL (LEVEL 1 to 22), found {s:?}"
            ))
        };
        match s {
            "none" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd { level: 3 }),
            _ => {
                let level = s.strip_prefix("zstd:").ok_or_else(bad)?;
                let level: i32 = level.parse().map_err(|_| bad())?;
                if (1..=22).contains(&level) {
                    Ok(Compression::Zstd { level })
                } else {
                    Err(bad())
                }
            }
        }
    }
}

/// Reads the fields of a head's record, each error naming the batch.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    k: u64,
}

impl<'a> Cursor<'a> {
    fn err(&self, what: &str) -> FormatError {
        FormatError::corrupt(
            ErrorSite::batch(self.k, FilePart::BatchHeader),
            format!(
                "expected {what} at record byte {}, found the end of the {}-byte record",
                self.pos,
                self.bytes.len()
            ),
        )
    }

    fn varint(&mut self, what: &str) -> Result<u64> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.bytes.get(self.pos) else {
                return Err(self.err(what));
            };
            self.pos += 1;
            let bits = u64::from(b & 0x7f);
            if i == 9 && b > 1 {
                break;
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(FormatError::corrupt(
            ErrorSite::batch(self.k, FilePart::BatchHeader),
            format!("{what}: expected a varint below 2^64 (at most 10 bytes), found a longer one"),
        ))
    }

    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(FormatError::corrupt(
                ErrorSite::batch(self.k, FilePart::BatchHeader),
                format!(
                    "{what}: expected {n} bytes at record byte {}, the record has {} left",
                    self.pos,
                    self.bytes.len() - self.pos
                ),
            ));
        };
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }
}

/// Appends `v` as a varint.
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads the fixed part of a 2.0 batch head (tag, `section_len`,
/// `head_len`) from `bytes` (at least its first 20 bytes) and checks them;
/// returns `(section_len, head_len)`.
pub(crate) fn parse_fixed(bytes: &[u8], file_offset: u64, k: u64) -> Result<(u64, u64)> {
    let at = || ErrorSite::batch(k, FilePart::BatchHeader);
    let Some(fixed) = bytes.get(..HEAD_FIXED) else {
        return Err(FormatError::Truncated {
            at: at(),
            needed: file_offset + HEAD_FIXED as u64,
            available: file_offset + bytes.len() as u64,
        });
    };
    if fixed[..8] != BATCH_TAG {
        return Err(FormatError::corrupt(
            at(),
            format!(
                "expected tag \"LODTBTCH\", found {:?}",
                String::from_utf8_lossy(&fixed[..8])
            ),
        ));
    }
    let section_len = u64::from_le_bytes(fixed[8..16].try_into().unwrap_or([0; 8]));
    let head_len = u64::from(u32::from_le_bytes(
        fixed[16..20].try_into().unwrap_or([0; 4]),
    ));
    if section_len < 64 || !section_len.is_multiple_of(64) {
        return Err(FormatError::corrupt(
            at(),
            format!(
                "expected a section length that is a multiple of 64 of at least 64, found {section_len}"
            ),
        ));
    }
    if head_len < HEAD_FIXED as u64 + 7 || head_len > section_len {
        return Err(FormatError::corrupt(
            at(),
            format!(
                "expected a head length from 27 to the section's {section_len} bytes, found {head_len}"
            ),
        ));
    }
    Ok((section_len, head_len))
}

/// Checks the crc of the head of batch `k` (`bytes` holds at least its
/// `head_len` bytes, which [`parse_fixed`] checked, at `file_offset`): the
/// one check that vouches for `section_len` and `head_len`, made before
/// anything they size is read (the stream reader reads the head, checks it,
/// then the rest). The crc.
pub(crate) fn check_head_crc(bytes: &[u8], file_offset: u64, k: u64, head_len: u64) -> Result<u32> {
    let at = || ErrorSite::batch(k, FilePart::BatchHeader);
    let head = usize::try_from(head_len)
        .ok()
        .and_then(|n| bytes.get(..n))
        .filter(|h| h.len() >= HEAD_FIXED + 4)
        .ok_or_else(|| FormatError::Truncated {
            at: at(),
            needed: file_offset + head_len,
            available: file_offset + bytes.len() as u64,
        })?;
    let crc_at = head.len() - 4;
    let stored = u32::from_le_bytes(head[crc_at..].try_into().unwrap_or([0; 4]));
    let header_crc = crc32(&head[..crc_at]);
    same_crc(at(), stored, header_crc)?;
    Ok(header_crc)
}

/// Parses a whole 2.0 batch section (`section`, 64-aligned in memory, at
/// `file_offset`) and checks its head, record, layout and padding; the
/// tensors of a batch with no compressed buffer are checked as in 1.0 (LoD
/// checksums and rules, body lengths, bools), those of a compressed batch by
/// [`decode`]. `schema_of(j)` gives the schema held by batch `j`'s head.
pub(crate) fn parse_batch(
    section: &[u8],
    file_offset: u64,
    k: u64,
    schema_of: &mut dyn FnMut(u64) -> Result<Arc<Schema>>,
) -> Result<BatchMeta> {
    let head = check_head(section, file_offset, k)?;
    let mut c = Cursor {
        bytes: section.get(HEAD_FIXED..head.crc_at).unwrap_or(&[]),
        pos: 0,
        k,
    };
    let (schema, back) = read_schema(&mut c, schema_of)?;
    let metadata = read_metadata(&mut c)?;
    let record = read_tensors(&mut c, &schema)?;
    let mut placed = read_buffers(&mut c, &record.lens, head.data_start, head.section_len)?;
    check_record_end(&c, head.crc_at)?;
    check_section_end(k, placed.end, head.section_len)?;
    let decoded_len = decoded_len(k, &mut placed)?;
    let table: SmallVec<[u8; 64]> = placed
        .buffers
        .iter()
        .flat_map(|b| b.crc.to_le_bytes())
        .collect();
    let meta = BatchMeta {
        index: k,
        header_crc: head.header_crc,
        table_crc: crc32(&table),
        section_len: head.section_len,
        metadata,
        tensors: record.tensors,
        by_name: record.by_name,
        buffers: placed.buffers,
        data_start: head.head_len,
        table_start: head.section_len as usize,
        schema: Some(schema),
        holds_schema: back == 0,
        schema_at: k - back,
        decoded_len,
    };
    if decoded_len.is_none() {
        for t in 0..meta.tensors.len() {
            check_tensor_bytes(section, &meta, t, true)?;
        }
    }
    Ok(meta)
}

/// Where the errors of a batch's head are reported.
fn head_at(k: u64) -> ErrorSite {
    ErrorSite::batch(k, FilePart::BatchHeader)
}

/// The error for a length of batch `k`'s head that overflows 64 bits.
fn overflows(k: u64, what: &str) -> FormatError {
    FormatError::corrupt(head_at(k), format!("{what} overflows a 64-bit length"))
}

/// The fixed part of a checked 2.0 head.
struct Head {
    section_len: u64,
    header_crc: u32,
    /// The head's length, crc included.
    head_len: usize,
    /// Where the head's crc is (the record ends there).
    crc_at: usize,
    /// Where the buffers start: the head's length, padded to 64.
    data_start: usize,
}

/// Checks a 2.0 batch's fixed head fields against the section the index
/// gives it, the head's crc, and the zero padding after the head.
fn check_head(section: &[u8], file_offset: u64, k: u64) -> Result<Head> {
    let (section_len, head_len) = parse_fixed(section, file_offset, k)?;
    if section_len != section.len() as u64 {
        return Err(FormatError::corrupt(
            head_at(k),
            format!(
                "section length {section_len} does not match the {} bytes the index gives the batch",
                section.len()
            ),
        ));
    }
    let header_crc = check_head_crc(section, file_offset, k, head_len)?;
    let head_len = head_len as usize;
    let data_start = pad64(head_len as u64).unwrap_or(u64::MAX) as usize;
    super::layout::check_zero(
        section.get(head_len..data_start).unwrap_or(&[]),
        file_offset + head_len as u64,
        || ErrorSite::batch(k, FilePart::Padding),
    )?;
    Ok(Head {
        section_len,
        header_crc,
        head_len,
        crc_at: head_len - 4,
        data_start,
    })
}

/// Reads the record's batch number (checked) and the schema in force: the
/// one the head holds (`schema_back` 0) or an earlier batch's
/// (`schema_of`). Returns it with `schema_back`.
fn read_schema(
    c: &mut Cursor<'_>,
    schema_of: &mut dyn FnMut(u64) -> Result<Arc<Schema>>,
) -> Result<(Arc<Schema>, u64)> {
    let k = c.k;
    let index = c.varint("the batch number")?;
    if index != k {
        return Err(FormatError::corrupt(
            head_at(k),
            format!("expected batch number {k}, found {index}"),
        ));
    }
    let back = c.varint("schema_back")?;
    if back == 0 {
        let len = c.varint("the schema length")?;
        check_json_len(len, k)?;
        let json = c.take(len, "the schema JSON")?;
        return Ok((Arc::new(Schema::parse(json, k)?), 0));
    }
    let Some(j) = k.checked_sub(back) else {
        return Err(FormatError::corrupt(
            head_at(k),
            format!("schema_back {back} points before batch 0 (expected at most {k})"),
        ));
    };
    Ok((schema_of(j)?, back))
}

/// Reads the record's batch metadata (JSON, empty for none).
fn read_metadata(c: &mut Cursor<'_>) -> Result<BTreeMap<String, String>> {
    let meta_len = c.varint("the metadata length")?;
    check_json_len(meta_len, c.k)?;
    let meta_json = c.take(meta_len, "the metadata JSON")?;
    if meta_json.is_empty() {
        return Ok(BTreeMap::new());
    }
    parse_json(meta_json, ErrorSite::batch(c.k, FilePart::BatchMetadata))
}

/// The tensors of a record, and what they say of the buffers.
struct Tensors {
    tensors: SmallVec<[TensorMeta; 2]>,
    /// `BatchMeta::find` looks a few names up without it.
    by_name: HashMap<String, usize>,
    /// Each buffer's decoded length and element width (8 for a LoD level).
    lens: SmallVec<[(u64, usize); 16]>,
}

/// Reads each tensor of the schema's rows, LoD references and level counts,
/// and the decoded length of every buffer.
fn read_tensors(c: &mut Cursor<'_>, schema: &Schema) -> Result<Tensors> {
    let k = c.k;
    let mut out = Tensors {
        tensors: SmallVec::with_capacity(schema.tensors.len()),
        by_name: HashMap::new(),
        lens: SmallVec::new(),
    };
    // Whether each tensor has LoD levels of its own (others share them).
    let mut own_lod: SmallVec<[bool; 8]> = SmallVec::with_capacity(schema.tensors.len());
    if schema.tensors.len() > FIND_SCAN {
        out.by_name.reserve(schema.tensors.len());
    }
    for (t, st) in schema.tensors.iter().enumerate() {
        let rows = if st.scalar {
            None
        } else {
            Some(c.varint("a tensor's rows")?)
        };
        let mut shape = SmallVec::with_capacity(st.shape.len() + 1);
        if let Some(r) = rows {
            shape.push(usize::try_from(r).map_err(|_| overflows(k, "the rows"))?);
        }
        shape.extend_from_slice(&st.shape);
        let (lod, own) = read_lod(c, t, st, schema, &out.tensors, &own_lod, &mut out.lens)?;
        let body = out.lens.len();
        let elems = shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
            .and_then(|e| e.checked_mul(st.dtype.size() as u64))
            .ok_or_else(|| overflows(k, "a body"))?;
        out.lens.push((elems, st.dtype.size()));
        if schema.tensors.len() > FIND_SCAN {
            out.by_name.insert(st.name.to_string(), t);
        }
        own_lod.push(own);
        out.tensors.push(TensorMeta {
            name: st.name.clone(),
            dtype: st.dtype,
            shape,
            lod,
            body,
        });
    }
    Ok(out)
}

/// Reads the LoD reference of tensor `t` (`st` in the schema): levels of
/// its own (their offset counts; their buffers are added to `lens`), or an
/// earlier tensor's (one of `earlier`, which must have levels of its own:
/// `own_lod`). Returns the buffer index of each level, and whether they are
/// the tensor's own.
fn read_lod(
    c: &mut Cursor<'_>,
    t: usize,
    st: &SchemaTensor,
    schema: &Schema,
    earlier: &[TensorMeta],
    own_lod: &[bool],
    lens: &mut SmallVec<[(u64, usize); 16]>,
) -> Result<(SmallVec<[usize; 4]>, bool)> {
    let k = c.k;
    let mut lod = SmallVec::with_capacity(st.lod);
    if st.lod == 0 {
        return Ok((lod, false));
    }
    let r = c.varint("lod_ref")?;
    if r == 0 {
        for _ in 0..st.lod {
            let n = c.varint("a level's offset count")?;
            if n == 0 {
                return Err(FormatError::corrupt(
                    ErrorSite::tensor(k, &st.name, FilePart::Lod(lod.len())),
                    "expected at least 1 offset in a LoD level, found 0",
                ));
            }
            lod.push(lens.len());
            lens.push((n.checked_mul(8).ok_or_else(|| overflows(k, "a level"))?, 8));
        }
        return Ok((lod, true));
    }
    let source = usize::try_from(r)
        .ok()
        .and_then(|r| t.checked_sub(r))
        .and_then(|s| schema.tensors.get(s).map(|st| (s, st)));
    let shared = source.and_then(|(s, sst)| {
        let tm = earlier.get(s)?;
        let own = own_lod.get(s).copied().unwrap_or(false);
        (own && sst.lod == st.lod).then(|| tm.lod.clone())
    });
    let Some(shared) = shared else {
        return Err(FormatError::corrupt(
            ErrorSite::tensor(k, &st.name, FilePart::Lod(0)),
            format!(
                "lod_ref {r}: expected an earlier tensor with {} levels of its own",
                st.lod
            ),
        ));
    };
    Ok((shared, false))
}

/// The buffers of a record, placed in the section.
struct Placed {
    buffers: SmallVec<[BufferMeta; 6]>,
    /// Where the last buffer ends in the section.
    end: u64,
    /// The length of the decoded batch (where the last buffer's view ends).
    decoded: u64,
    /// Whether a buffer is compressed.
    compressed: bool,
}

/// Reads each buffer's codec, stored length and crc (`lens`: its decoded
/// length and element width), and places it in the section: raw ones
/// 64-aligned from `data_start`, compressed ones packed, each within the
/// section's `section_len` bytes; and in the decoded batch, 64-aligned.
fn read_buffers(
    c: &mut Cursor<'_>,
    lens: &[(u64, usize)],
    data_start: usize,
    section_len: u64,
) -> Result<Placed> {
    let k = c.k;
    let mut out = Placed {
        buffers: SmallVec::with_capacity(lens.len()),
        end: data_start as u64,
        decoded: 0,
        compressed: false,
    };
    for (i, &(dlen, width)) in lens.iter().enumerate() {
        let b = c.take(1, "a buffer's codec")?[0];
        let codec = Codec::from_byte(b & !SHUFFLE);
        let shuffle = b & SHUFFLE != 0;
        let Some(codec) = codec.filter(|&c| !shuffle || (c != Codec::None && width > 1)) else {
            return Err(FormatError::corrupt(
                head_at(k),
                format!(
                    "buffer {i}: expected codec 0 (none), 1 (lz4) or 2 (zstd), plus 16 (byte \
                     shuffle) with 1 or 2 for elements of {width} bytes, found {b}"
                ),
            ));
        };
        let (start, len) = if codec == Codec::None {
            (
                pad64(out.end).ok_or_else(|| overflows(k, "a buffer"))?,
                dlen,
            )
        } else {
            out.compressed = true;
            (out.end, c.varint("a buffer's stored length")?)
        };
        let crc = c.take(4, "a buffer's crc")?;
        let crc = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        let end = start
            .checked_add(len)
            .filter(|&e| e <= section_len)
            .ok_or_else(|| {
                FormatError::corrupt(
                    head_at(k),
                    format!(
                        "buffer {i} ({len} bytes at {start}) runs past the section's {section_len} bytes"
                    ),
                )
            })?;
        let dstart = pad64(out.decoded).ok_or_else(|| overflows(k, "the decoded batch"))?;
        out.decoded = dstart
            .checked_add(dlen)
            .ok_or_else(|| overflows(k, "the decoded batch"))?;
        out.buffers.push(BufferMeta {
            range: start as usize..end as usize,
            crc,
            codec,
            shuffle: if shuffle { width } else { 0 },
            view: dstart as usize..out.decoded.min(usize::MAX as u64) as usize,
        });
        out.end = end;
    }
    Ok(out)
}

/// Checks that the record ends where the head's crc starts (`crc_at`).
fn check_record_end(c: &Cursor<'_>, crc_at: usize) -> Result<()> {
    if c.pos == c.bytes.len() {
        return Ok(());
    }
    Err(FormatError::corrupt(
        head_at(c.k),
        format!(
            "expected the record to end at head byte {crc_at}, it ends at {}",
            HEAD_FIXED + c.pos
        ),
    ))
}

/// Checks that the section ends where its last buffer (ending at `end`)
/// does, padded to 64.
fn check_section_end(k: u64, end: u64, section_len: u64) -> Result<()> {
    let expected_len = pad64(end).unwrap_or(u64::MAX).max(64);
    if expected_len == section_len {
        return Ok(());
    }
    Err(FormatError::corrupt(
        head_at(k),
        format!("expected a section of {expected_len} bytes for its buffers, found {section_len}"),
    ))
}

/// The bytes a batch with a compressed buffer decodes to (within the decode
/// budget, [`MAX_DECODED_BATCH`]); `None` for a batch with none, whose
/// buffers are then read where they are stored.
fn decoded_len(k: u64, placed: &mut Placed) -> Result<Option<usize>> {
    if !placed.compressed {
        for b in &mut placed.buffers {
            b.view = b.range.clone();
        }
        return Ok(None);
    }
    let total = pad64(placed.decoded).unwrap_or(u64::MAX);
    if total > MAX_DECODED_BATCH {
        return Err(FormatError::TooLarge {
            at: head_at(k),
            what: "decoded batch (the decode budget)",
            limit: MAX_DECODED_BATCH,
            found: total,
        });
    }
    Ok(Some(total as usize))
}

/// The schema held by the head of batch `j` (`section` is its section, or
/// at least its head, at `file_offset`): checks the head's crc, its batch
/// number and that it holds one. Reads nothing else of the batch (no
/// recursion through other batches' heads).
pub(crate) fn head_schema(section: &[u8], file_offset: u64, j: u64) -> Result<Arc<Schema>> {
    let at = || ErrorSite::batch(j, FilePart::BatchHeader);
    let (_, head_len) = parse_fixed(section, file_offset, j)?;
    check_head_crc(section, file_offset, j, head_len)?;
    let head = section.get(..head_len as usize).unwrap_or(&[]);
    let crc_at = head.len() - 4;
    let mut c = Cursor {
        bytes: &head[HEAD_FIXED..crc_at],
        pos: 0,
        k: j,
    };
    let index = c.varint("the batch number")?;
    let back = c.varint("schema_back")?;
    if index != j || back != 0 {
        return Err(FormatError::corrupt(
            at(),
            format!(
                "expected the head of batch {j} holding a schema, found batch number {index} with schema_back {back}"
            ),
        ));
    }
    let len = c.varint("the schema length")?;
    check_json_len(len, j)?;
    Ok(Arc::new(Schema::parse(c.take(len, "the schema JSON")?, j)?))
}

fn check_json_len(len: u64, k: u64) -> Result<()> {
    super::layout::check_meta_len(len, ErrorSite::batch(k, FilePart::BatchMetadata))
}

/// Decodes a checked 2.0 batch that holds a compressed buffer (`section`,
/// its stored bytes): checks every buffer's crc over its stored bytes,
/// decompresses each into one 64-aligned allocation (bounded by the decoded
/// lengths, which [`MAX_DECODED_BATCH`] bounds), then checks every tensor
/// (LoD rules, body lengths, bools) on the decoded bytes.
///
/// A shuffled buffer of up to [`SCRATCH_KEPT`] bytes decompresses into this
/// thread's scratch and is un-shuffled from there; a larger one of zstd
/// streams through a [`STREAM_CHUNK`] scratch straight into place, so a
/// decode holds the batch and at most [`SCRATCH_KEPT`] more (an lz4 one, whose
/// blocks do not stream, still needs its size in scratch).
pub(crate) fn decode(section: &[u8], meta: &BatchMeta) -> Result<Buffer> {
    super::hooks::decoded();
    decode_streaming_above(section, meta, SCRATCH_KEPT)
}

/// [`decode`], streaming the shuffled zstd buffers larger than `stream_above`.
fn decode_streaming_above(section: &[u8], meta: &BatchMeta, stream_above: usize) -> Result<Buffer> {
    let total = meta.decoded_len.unwrap_or(0);
    let mut out = AlignedBytes::try_zeroed(total).map_err(FormatError::Core)?;
    let dst_all = out.as_mut_slice();
    for (i, b) in meta.buffers.iter().enumerate() {
        let at = || buffer_location(meta, i);
        let stored = section.get(b.range.clone()).unwrap_or(&[]);
        same_crc(at(), b.crc, crc32(stored))?;
        let Some(dst) = dst_all.get_mut(b.view.clone()) else {
            return Err(FormatError::corrupt(at(), "decoded range out of the batch"));
        };
        let want = dst.len();
        // A shuffled buffer decompresses into this thread's scratch and is
        // un-shuffled from there into place (no second copy).
        let got = if b.shuffle > 1 && b.codec == Codec::Zstd && want > stream_above {
            // The same one-frame check as a buffer decoded whole.
            check_zstd_frame(stored, want)
                .map_err(Decode::Bad)
                .and_then(|()| zstd_unshuffle_into(stored, dst, b.shuffle))
        } else if b.shuffle > 1 {
            SCRATCH.with(|scratch| -> Result<std::result::Result<usize, Decode>> {
                let mut scratch = scratch.borrow_mut();
                if scratch.len() < want {
                    let more = want - scratch.len();
                    // Memory refused is not damage: its own error.
                    scratch.try_reserve_exact(more).map_err(|_| {
                        FormatError::Core(crate::Error::OutOfMemory {
                            what: "decoding a shuffled buffer",
                            needed: want as u64,
                        })
                    })?;
                    scratch.resize(want, 0);
                }
                let n = decompress(b.codec, stored, scratch.get_mut(..want).unwrap_or_default());
                if n == Ok(want) {
                    unshuffle_into(scratch.get(..want).unwrap_or_default(), dst, b.shuffle);
                }
                if scratch.capacity() > SCRATCH_KEPT {
                    *scratch = Vec::new();
                }
                Ok(n)
            })?
        } else {
            decompress(b.codec, stored, dst)
        };
        match got {
            Ok(n) if n == want => {}
            Ok(n) => {
                return Err(FormatError::corrupt(
                    at(),
                    format!(
                        "expected {want} decoded bytes, the {} bytes decompress to {n}",
                        stored.len()
                    ),
                ));
            }
            Err(Decode::NoMemory) => {
                return Err(FormatError::Core(crate::Error::OutOfMemory {
                    what: "a zstd decompression context",
                    needed: ZSTD_CONTEXT_BYTES,
                }));
            }
            Err(Decode::Bad(e)) => {
                return Err(FormatError::corrupt(
                    at(),
                    format!(
                        "expected {} bytes of {:?} data decoding to {want} bytes, found data that does not: {e}",
                        stored.len(),
                        b.codec
                    ),
                ));
            }
        }
    }
    for t in 0..meta.tensors.len() {
        check_tensor_bytes(out.as_slice(), meta, t, false)?;
    }
    Ok(Buffer::from_storage(Arc::new(out)))
}

/// The most scratch a thread keeps between batches (a larger buffer's is
/// freed after use).
const SCRATCH_KEPT: usize = 64 << 20;

std::thread_local! {
    /// Where a shuffled buffer is decompressed before it is un-shuffled into
    /// the batch (grown to the largest buffer decoded on this thread).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Why a buffer did not decompress.
#[derive(Debug, PartialEq)]
enum Decode {
    /// The stored bytes are not what their codec decodes (damage).
    Bad(String),
    /// The codec could not have the memory it works in (not damage).
    NoMemory,
}

/// About the bytes of a zstd decompression context (`ZSTD_estimateDCtxSize`).
const ZSTD_CONTEXT_BYTES: u64 = 96 << 10;

/// Decompresses `stored` into `dst` (its decoded length): the bytes written.
/// A raw buffer is copied when its length is `dst`'s.
fn decompress(codec: Codec, stored: &[u8], dst: &mut [u8]) -> std::result::Result<usize, Decode> {
    match codec {
        Codec::None if stored.len() == dst.len() => {
            dst.copy_from_slice(stored);
            Ok(dst.len())
        }
        Codec::None => Ok(stored.len()),
        Codec::Lz4 => {
            lz4_flex::block::decompress_into(stored, dst).map_err(|e| Decode::Bad(e.to_string()))
        }
        Codec::Zstd => {
            check_zstd_frame(stored, dst.len()).map_err(Decode::Bad)?;
            zstd_one_frame(stored, dst)
        }
    }
}

/// The largest zstd window a 2.0 reader accepts (FORMAT.md §12.4): 2^27
/// bytes, libzstd's default limit, which `spec/vectors/check.py` (Python's
/// `zstandard`) applies too. A single-segment frame has no window
/// descriptor: its window is its content size (the buffer's decoded
/// length), bounded the same way. zstd makes a frame single-segment only
/// when its content fits the window its level chooses, at most 2^27.
pub(crate) const MAX_ZSTD_WINDOW: u64 = 1 << 27;

/// Checks that `stored` is exactly one zstd frame (RFC 8878 §3.1.1): its
/// magic (no skippable frame), a frame header with no reserved bit, no
/// dictionary, a window of at most [`MAX_ZSTD_WINDOW`] (a single-segment
/// frame's is its content size), a content size, when given, of `decoded`
/// bytes, and a frame that ends where `stored` ends.
fn check_zstd_frame(stored: &[u8], decoded: usize) -> std::result::Result<(), String> {
    const MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
    let Some((magic, rest)) = stored.split_first_chunk::<4>() else {
        return Err(format!("{} bytes hold no zstd frame header", stored.len()));
    };
    if *magic != MAGIC {
        return Err(
            if magic[1..] == [0x2a, 0x4d, 0x18] && magic[0] & 0xf0 == 0x50 {
                "a skippable frame, where one zstd frame is expected".into()
            } else {
                format!("magic {magic:02x?}, expected a zstd frame ({MAGIC:02x?})")
            },
        );
    }
    let Some((&descriptor, mut rest)) = rest.split_first() else {
        return Err("a zstd frame header cut short".into());
    };
    let single_segment = descriptor & 0x20 != 0;
    if descriptor & 0x08 != 0 {
        return Err("a zstd frame header with its reserved bit set".into());
    }
    if descriptor & 0x03 != 0 {
        return Err("a zstd frame that needs a dictionary".into());
    }
    let mut take = |n: usize| -> std::result::Result<u64, String> {
        let (field, tail) = rest
            .split_at_checked(n)
            .ok_or_else(|| "a zstd frame header cut short".to_string())?;
        rest = tail;
        let mut v = [0u8; 8];
        v[..n].copy_from_slice(field);
        Ok(u64::from_le_bytes(v))
    };
    let window = if single_segment {
        None
    } else {
        let w = take(1)?;
        let log = 10 + (w >> 3);
        let base = 1u64 << log;
        Some(base + (base / 8) * (w & 7))
    };
    let content = match (descriptor >> 6, single_segment) {
        (0, false) => None,
        (0, true) => Some(take(1)?),
        (1, _) => Some(take(2)? + 256),
        (2, _) => Some(take(4)?),
        _ => Some(take(8)?),
    };
    if let Some(c) = content
        && c != decoded as u64
    {
        return Err(format!(
            "a zstd frame of content size {c}, expected the decoded length {decoded}"
        ));
    }
    // A single-segment frame's window is its content size.
    if let Some(w) = window.or(content)
        && w > MAX_ZSTD_WINDOW
    {
        return Err(format!(
            "a zstd window of {w} bytes, more than the {MAX_ZSTD_WINDOW} a reader accepts"
        ));
    }
    match zstd::zstd_safe::find_frame_compressed_size(stored) {
        Ok(n) if n == stored.len() => Ok(()),
        Ok(n) => Err(format!(
            "{} bytes after the zstd frame's {n} (one frame is expected)",
            stored.len() - n
        )),
        Err(code) => Err(format!(
            "not a whole zstd frame: {}",
            zstd::zstd_safe::get_error_name(code)
        )),
    }
}

/// Decompresses one checked zstd frame into `dst` with this thread's context.
fn zstd_one_frame(stored: &[u8], dst: &mut [u8]) -> std::result::Result<usize, Decode> {
    ZSTD.with(|context| {
        let mut context = context.borrow_mut();
        let context = match &mut *context {
            Some(c) => c,
            // Making a context fails only when its memory is refused.
            empty => empty.insert(zstd::bulk::Decompressor::new().map_err(|_| Decode::NoMemory)?),
        };
        context.decompress_to_buffer(stored, dst).map_err(|e| {
            let e = e.to_string();
            // zstd's ZSTD_error_memory_allocation.
            if e.contains("Allocation error") {
                Decode::NoMemory
            } else {
                Decode::Bad(e)
            }
        })
    })
}

/// The scratch a streamed buffer decompresses through: 1 MiB.
const STREAM_CHUNK: usize = 1 << 20;

std::thread_local! {
    /// This thread's streaming zstd context, made once (reset per frame).
    static ZSTD_STREAM: std::cell::RefCell<Option<zstd::zstd_safe::DCtx<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Decompresses the zstd frame `stored` of byte-shuffled `width`-byte
/// elements straight into `dst` (its decoded length), through a
/// [`STREAM_CHUNK`] scratch: each decompressed piece of a byte plane is
/// scattered to its bytes' places. The bytes decoded (more than `dst` holds
/// stops the decode and says how many came).
fn zstd_unshuffle_into(
    stored: &[u8],
    dst: &mut [u8],
    width: usize,
) -> std::result::Result<usize, Decode> {
    use zstd::zstd_safe::{DCtx, InBuffer, OutBuffer, ResetDirective, get_error_name};
    let bad = |code: usize| {
        let e = get_error_name(code);
        if e.contains("Allocation error") {
            Decode::NoMemory
        } else {
            Decode::Bad(e.to_string())
        }
    };
    ZSTD_STREAM.with(|cell| {
        let mut cell = cell.borrow_mut();
        let dctx = match &mut *cell {
            Some(c) => c,
            empty => empty.insert(DCtx::try_create().ok_or(Decode::NoMemory)?),
        };
        dctx.reset(ResetDirective::SessionOnly).map_err(bad)?;
        let mut chunk = Vec::new();
        chunk
            .try_reserve_exact(STREAM_CHUNK)
            .map_err(|_| Decode::NoMemory)?;
        chunk.resize(STREAM_CHUNK, 0u8);
        let mut input = InBuffer::around(stored);
        let mut produced = 0usize;
        loop {
            let mut out = OutBuffer::around(&mut chunk[..]);
            let hint = dctx.decompress_stream(&mut out, &mut input).map_err(bad)?;
            let got = out.pos();
            let Some(end) = produced.checked_add(got).filter(|&e| e <= dst.len()) else {
                return Ok(produced.saturating_add(got));
            };
            scatter_shuffled(chunk.get(..got).unwrap_or_default(), produced, dst, width);
            produced = end;
            if hint == 0 {
                // The frame is complete: anything after it is not this buffer's.
                if input.pos() < stored.len() {
                    return Err(Decode::Bad(format!(
                        "{} bytes after the end of the zstd frame",
                        stored.len() - input.pos()
                    )));
                }
                return Ok(produced);
            }
            if got == 0 && input.pos() >= stored.len() {
                return Err(Decode::Bad("the zstd frame ends early".into()));
            }
        }
    })
}

/// Puts `chunk`, the bytes from `from` of the byte-shuffled form of `dst`
/// (its `width` planes of `dst.len() / width` bytes, then the bytes of a
/// last partial element as they are), in their places in `dst`.
fn scatter_shuffled(chunk: &[u8], from: usize, dst: &mut [u8], width: usize) {
    let m = dst.len() / width.max(1);
    let whole = m * width.max(1);
    let mut p = from;
    let mut rest = chunk;
    while !rest.is_empty() {
        if p >= whole || m == 0 {
            let n = rest.len().min(dst.len().saturating_sub(p));
            if let (Some(to), Some(from)) = (dst.get_mut(p..p + n), rest.get(..n)) {
                to.copy_from_slice(from);
            }
            return;
        }
        let (j, i0) = (p / m, p % m);
        let n = rest.len().min(m - i0);
        let (now, later) = rest.split_at(n);
        let start = i0 * width + j;
        for (to, &b) in dst
            .get_mut(start..)
            .unwrap_or_default()
            .iter_mut()
            .step_by(width)
            .zip(now)
        {
            *to = b;
        }
        p += n;
        rest = later;
    }
}

std::thread_local! {
    /// This thread's zstd decompression context, made once: making one per
    /// buffer (what `zstd::bulk::decompress_to_buffer` does) costs about as
    /// much as decoding a small buffer. Each frame starts afresh in it.
    static ZSTD: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// The bit of a buffer's codec byte that says its elements are byte-shuffled
/// (`spec/FORMAT.md` §12.4).
const SHUFFLE: u8 = 0x10;

/// The schema a 2.0 writer has in force: the batch whose head holds it.
#[derive(Debug, Clone)]
pub(crate) struct SchemaState {
    pub batch: u64,
    pub schema: Arc<Schema>,
}

/// A 2.0 batch ready to write: its head and its buffers (stored bytes) with
/// their file offsets.
pub(crate) struct Encoded<'b> {
    pub head: Vec<u8>,
    pub buffers: Vec<Cow<'b, [u8]>>,
    /// The batch's own buffer (for zero-copy spooling), when stored raw.
    pub shared: Vec<Option<Buffer>>,
    pub offsets: Vec<u64>,
    pub section_len: u64,
    pub header_crc: u32,
    pub table_crc: u32,
    /// The schema in force after this batch (a new one if its head holds one).
    pub state: SchemaState,
}

/// Computes the checksums of a batch's buffers (see [`encode`]).
pub(crate) type Checksums<'b, 'f> =
    dyn FnMut(&[Cow<'b, [u8]>], &[Option<Buffer>]) -> Result<Vec<u32>> + 'f;

/// Encodes batch `index` of a 2.0 file, to start at file offset `start`:
/// its schema (a new one in its head if it differs from `state`'s, which it
/// the returned state then replaces), its buffers compressed as `compression` says (each kept
/// only if smaller; none above [`MAX_DECODED_BATCH`]). The checksums of the
/// buffers as stored come from `checksums` (given each buffer's bytes and,
/// when they are one, the shared [`Buffer`] holding them; the writer
/// computes large ones on its checksum thread), one per buffer.
pub(crate) fn encode<'b>(
    batch: &'b Batch,
    index: u64,
    start: u64,
    state: &Option<SchemaState>,
    compression: Compression,
    checksums: &mut Checksums<'b, '_>,
) -> Result<Encoded<'b>> {
    let schema = Schema::of(batch);
    check_writable(&schema)?;
    let mut rec = Vec::with_capacity(64);
    put_varint(&mut rec, index);
    let new_state = put_schema(&mut rec, index, state, schema)?;
    put_metadata(&mut rec, batch)?;
    let raw = put_tensors(&mut rec, batch);
    let packed = pack(raw, compression)?;
    let crcs = checksums(&packed.buffers, &packed.shared)?;
    if crcs.len() != packed.buffers.len() {
        return Err(FormatError::Unwritable(format!(
            "internal error: {} checksums for {} buffers",
            crcs.len(),
            packed.buffers.len()
        )));
    }
    for ((b, &codec), crc) in packed.buffers.iter().zip(&packed.codecs).zip(&crcs) {
        rec.push(codec);
        if codec != 0 {
            put_varint(&mut rec, b.len() as u64);
        }
        rec.extend_from_slice(&crc.to_le_bytes());
    }
    let head_len = HEAD_FIXED + rec.len() + 4;
    let head_len32 = u32::try_from(head_len)
        .map_err(|_| FormatError::Unwritable(format!("a batch head of {head_len} bytes")))?;
    let (offsets, section_len) = place(&packed, head_len, start)?;
    let (head, header_crc) = seal_head(&rec, head_len32, section_len);
    let table: Vec<u8> = crcs.iter().flat_map(|c| c.to_le_bytes()).collect();
    Ok(Encoded {
        head,
        buffers: packed.buffers,
        shared: packed.shared,
        offsets,
        section_len,
        header_crc,
        table_crc: crc32(&table),
        state: new_state,
    })
}

/// Refuses a batch whose tensors have more dimensions or LoD levels than
/// the format allows.
fn check_writable(schema: &Schema) -> Result<()> {
    for (t, st) in schema.tensors.iter().enumerate() {
        if st.shape.len() >= MAX_DIMS || st.lod > MAX_LOD_LEVELS {
            return Err(FormatError::Unwritable(format!(
                "tensor {t} ({:?}) has {} dimensions and {} LoD levels; the format allows {MAX_DIMS} and {MAX_LOD_LEVELS}",
                st.name,
                st.shape.len() + 1,
                st.lod
            )));
        }
    }
    Ok(())
}

/// Writes the record's `schema_back`: back to `state`'s batch when its
/// schema is `schema`, else 0 and the schema's JSON. Returns the schema in
/// force after batch `index`.
fn put_schema(
    rec: &mut Vec<u8>,
    index: u64,
    state: &Option<SchemaState>,
    schema: Schema,
) -> Result<SchemaState> {
    if let Some(s) = state.as_ref().filter(|s| *s.schema == schema) {
        put_varint(rec, index - s.batch);
        return Ok(s.clone());
    }
    let json = schema.to_json()?;
    if json.len() as u64 > MAX_METADATA_LEN {
        return Err(FormatError::Unwritable(format!(
            "the schema takes {} bytes of JSON, above the limit of {MAX_METADATA_LEN}",
            json.len()
        )));
    }
    put_varint(rec, 0);
    put_varint(rec, json.len() as u64);
    rec.extend_from_slice(&json);
    Ok(SchemaState {
        batch: index,
        schema: Arc::new(schema),
    })
}

/// Writes the record's batch metadata (its length, 0 for none, and JSON).
fn put_metadata(rec: &mut Vec<u8>, batch: &Batch) -> Result<()> {
    if batch.metadata().is_empty() {
        put_varint(rec, 0);
        return Ok(());
    }
    let json = serde_json::to_vec(batch.metadata())
        .map_err(|e| FormatError::Unwritable(format!("batch metadata: {e}")))?;
    if json.len() as u64 > MAX_METADATA_LEN {
        return Err(FormatError::Unwritable(format!(
            "the batch metadata takes {} bytes of JSON, above the limit of {MAX_METADATA_LEN}",
            json.len()
        )));
    }
    put_varint(rec, json.len() as u64);
    rec.extend_from_slice(&json);
    Ok(())
}

/// A buffer to store: its bytes, its storage when the batch owns it, its
/// element width.
type Raw<'b> = (Cow<'b, [u8]>, Option<Buffer>, usize);

/// Writes each tensor's rows, LoD reference and level counts, and returns
/// the buffers in order: a tensor's own LoD levels, then its body.
fn put_tensors<'b>(rec: &mut Vec<u8>, batch: &'b Batch) -> Vec<Raw<'b>> {
    let mut raw: Vec<Raw<'b>> = Vec::new();
    // The first tensor of each LoD (by value): a later tensor of the same
    // LoD points back at it.
    let mut first: HashMap<&crate::Lod, usize> = HashMap::new();
    for (t, (_, tensor)) in batch.iter().enumerate() {
        if let Some(&rows) = tensor.shape().first() {
            put_varint(rec, rows as u64);
        }
        let lod = tensor.lod();
        if lod.num_levels() > 0 {
            let shared = match first.entry(lod) {
                std::collections::hash_map::Entry::Occupied(s) => Some(t - *s.get()),
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(t);
                    None
                }
            };
            match shared {
                Some(r) => put_varint(rec, r as u64),
                None => {
                    put_varint(rec, 0);
                    for (l, level) in lod.levels().enumerate() {
                        put_varint(rec, level.len() as u64);
                        let bytes = level.rebased_bytes();
                        let own = match bytes {
                            Cow::Borrowed(_) => lod.level_buffer(l),
                            Cow::Owned(_) => None,
                        };
                        raw.push((bytes, own, 8));
                    }
                }
            }
        }
        raw.push((
            Cow::Borrowed(tensor.as_bytes()),
            Some(tensor.buffer().clone()),
            tensor.dtype().size(),
        ));
    }
    raw
}

/// A batch's buffers as stored.
struct Packed<'b> {
    buffers: Vec<Cow<'b, [u8]>>,
    /// The batch's own buffer of each one stored raw.
    shared: Vec<Option<Buffer>>,
    /// Each one's codec byte.
    codecs: Vec<u8>,
}

/// The buffers `raw` compressed as `compression` says, each kept only if
/// smaller; all stored raw when the batch decodes to more than
/// [`MAX_DECODED_BATCH`].
fn pack(raw: Vec<Raw<'_>>, compression: Compression) -> Result<Packed<'_>> {
    let decoded: u64 = raw
        .iter()
        .map(|(b, _, _)| pad64(b.len() as u64).unwrap_or(u64::MAX))
        .fold(0u64, |a, b| a.saturating_add(b));
    let compression = if decoded > MAX_DECODED_BATCH {
        Compression::None
    } else {
        compression
    };
    let mut out = Packed {
        buffers: Vec::with_capacity(raw.len()),
        shared: Vec::with_capacity(raw.len()),
        codecs: Vec::with_capacity(raw.len()),
    };
    for (bytes, own, width) in raw {
        // Elements wider than a byte are byte-shuffled before compressing:
        // token ids' high bytes, mostly zero, then compress to almost nothing.
        let packed = if width > 1 && compression != Compression::None {
            compress(&shuffle(&bytes, width), compression)?.map(|(c, b)| (c.byte() | SHUFFLE, b))
        } else {
            compress(&bytes, compression)?.map(|(c, b)| (c.byte(), b))
        };
        match packed {
            Some((codec, c)) if c.len() < bytes.len() => {
                out.buffers.push(Cow::Owned(c));
                out.shared.push(None);
                out.codecs.push(codec);
            }
            _ => {
                out.buffers.push(bytes);
                out.shared.push(own);
                out.codecs.push(Codec::None.byte());
            }
        }
    }
    Ok(out)
}

/// The file offset of each buffer of a batch starting at `start` with a
/// head of `head_len` bytes (raw buffers 64-aligned, compressed ones
/// packed), and the section's length.
fn place(packed: &Packed<'_>, head_len: usize, start: u64) -> Result<(Vec<u64>, u64)> {
    let overflow = || FormatError::Unwritable("batch size overflows u64".into());
    let mut cursor = pad64(head_len as u64).ok_or_else(overflow)?;
    let mut offsets = Vec::with_capacity(packed.buffers.len());
    for (b, &codec) in packed.buffers.iter().zip(&packed.codecs) {
        if codec == 0 {
            cursor = pad64(cursor).ok_or_else(overflow)?;
        }
        offsets.push(start + cursor);
        cursor = cursor.checked_add(b.len() as u64).ok_or_else(overflow)?;
    }
    Ok((offsets, pad64(cursor).ok_or_else(overflow)?.max(64)))
}

/// The head of `head_len` bytes: tag, `section_len`, `head_len`, the
/// record `rec`, and the crc of all of them; and that crc.
fn seal_head(rec: &[u8], head_len: u32, section_len: u64) -> (Vec<u8>, u32) {
    let mut head = Vec::with_capacity(head_len as usize);
    head.extend_from_slice(&BATCH_TAG);
    head.extend_from_slice(&section_len.to_le_bytes());
    head.extend_from_slice(&head_len.to_le_bytes());
    head.extend_from_slice(rec);
    let header_crc = crc32(&head);
    head.extend_from_slice(&header_crc.to_le_bytes());
    (head, header_crc)
}

/// `bytes` compressed as `compression` says (`None`: stored raw).
fn compress(bytes: &[u8], compression: Compression) -> Result<Option<(Codec, Vec<u8>)>> {
    if bytes.is_empty() {
        return Ok(None);
    }
    Ok(match compression {
        Compression::None => None,
        Compression::Lz4 => Some((Codec::Lz4, lz4_flex::block::compress(bytes))),
        Compression::Zstd { level } => Some((
            Codec::Zstd,
            zstd::bulk::compress(bytes, level)
                .map_err(|e| FormatError::Unwritable(format!("zstd: {e}")))?,
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2.0 section of batch 0 whose record is `record` (after the fixed
    /// part) and whose buffer bytes are `tail`, placed at pad64(head_len).
    fn section(record: &[u8], tail: &[u8]) -> Vec<u8> {
        let head_len = HEAD_FIXED + record.len() + 4;
        let start = pad64(head_len as u64).unwrap() as usize;
        let section_len = pad64((start + tail.len()) as u64).unwrap().max(64);
        let mut s = Vec::new();
        s.extend_from_slice(&BATCH_TAG);
        s.extend_from_slice(&section_len.to_le_bytes());
        s.extend_from_slice(&(head_len as u32).to_le_bytes());
        s.extend_from_slice(record);
        let crc = crc32(&s);
        s.extend_from_slice(&crc.to_le_bytes());
        s.resize(start, 0);
        s.extend_from_slice(tail);
        s.resize(section_len as usize, 0);
        s
    }

    /// A record of batch 0 holding `schema`, then `rest`.
    fn record(schema: &str, rest: &[u8]) -> Vec<u8> {
        let mut r = vec![0, 0];
        put_varint(&mut r, schema.len() as u64);
        r.extend_from_slice(schema.as_bytes());
        r.push(0); // no metadata
        r.extend_from_slice(rest);
        r
    }

    fn parse(s: &[u8]) -> Result<BatchMeta> {
        let aligned = AlignedBytes::from_slice(s);
        parse_batch(aligned.as_slice(), 0, 0, &mut |j| {
            Err(FormatError::corrupt(
                ErrorSite::batch(j, FilePart::BatchHeader),
                "no schema",
            ))
        })
    }

    /// A compressed buffer entry: codec, stored length, crc.
    fn entry(codec: u8, stored: &[u8]) -> Vec<u8> {
        let mut e = vec![codec];
        put_varint(&mut e, stored.len() as u64);
        e.extend_from_slice(&crc32(stored).to_le_bytes());
        e
    }

    const ONE: &str = r#"{"tensors":[{"name":"x","dtype":"int64","shape":[]}]}"#;

    #[test]
    fn the_decode_budget_is_checked_before_allocating() {
        let stored = [0u8; 10];
        let mut rest = Vec::new();
        put_varint(&mut rest, (1 << 27) + 8); // 1 GiB + 64 B of int64
        rest.extend(entry(2, &stored));
        let err = parse(&section(&record(ONE, &rest), &stored)).unwrap_err();
        assert!(
            matches!(err, FormatError::TooLarge { limit, found, .. } if limit == MAX_DECODED_BATCH && found == (1 << 30) + 64),
            "{err}"
        );
        // Exactly the budget parses (and is never allocated here).
        let mut rest = Vec::new();
        put_varint(&mut rest, 1 << 27);
        rest.extend(entry(2, &stored));
        assert_eq!(
            parse(&section(&record(ONE, &rest), &stored))
                .unwrap()
                .decoded_len,
            Some(1 << 30)
        );
    }

    #[test]
    fn a_buffer_that_decodes_to_another_length_is_an_error() {
        for (codec, n) in [(2u8, 801usize), (2, 799), (1, 801), (1, 799)] {
            let raw = vec![7u8; n];
            let stored = if codec == 2 {
                zstd::bulk::compress(&raw, 3).unwrap()
            } else {
                lz4_flex::block::compress(&raw)
            };
            let mut rest = vec![100]; // 100 int64: 800 bytes
            rest.extend(entry(codec, &stored));
            let s = section(&record(ONE, &rest), &stored);
            let meta = parse(&s).unwrap();
            let err = decode(AlignedBytes::from_slice(&s).as_slice(), &meta)
                .unwrap_err()
                .to_string();
            assert!(err.contains("800"), "{codec} {n}: {err}");
            assert!(
                err.contains(&stored.len().to_string()),
                "{codec} {n}: {err}"
            );
        }
        // Garbage: an error, not a panic.
        let stored = [0xffu8, 0x13, 0x00, 0x45, 0x99, 0x01];
        for codec in [1u8, 2] {
            let mut rest = vec![100];
            rest.extend(entry(codec, &stored));
            let s = section(&record(ONE, &rest), &stored);
            let meta = parse(&s).unwrap();
            assert!(decode(AlignedBytes::from_slice(&s).as_slice(), &meta).is_err());
        }
    }

    #[test]
    fn the_reused_zstd_context_decodes_every_frame_afresh() {
        // One thread's context decodes a good frame after a bad one, and
        // frames of other contents one after the other.
        let values =
            |k: i64| -> Vec<u8> { (0..100i64).flat_map(|v| (v * k).to_le_bytes()).collect() };
        let decode_one = |stored: &[u8]| {
            let mut rest = vec![100];
            rest.extend(entry(2, stored));
            let s = section(&record(ONE, &rest), stored);
            let meta = parse(&s).unwrap();
            decode(AlignedBytes::from_slice(&s).as_slice(), &meta)
        };
        for k in [3, 7, 3] {
            let raw = values(k);
            let good = zstd::bulk::compress(&raw, 3).unwrap();
            let err = decode_one(&good[..good.len() - 3]).unwrap_err();
            assert!(err.to_string().contains("decoding to 800 bytes"), "{err}");
            let decoded = decode_one(&good).unwrap();
            assert_eq!(&decoded.as_slice()[..800], &raw[..], "values times {k}");
        }
    }

    #[test]
    fn byte_shuffle_round_trips_and_is_refused_where_it_cannot_apply() {
        let raw: Vec<u8> = (0..100i64).flat_map(|v| (v * 300).to_le_bytes()).collect();
        let shuffled = shuffle(&raw, 8);
        assert_eq!(&shuffled[..3], &[0, 44, 88]); // the low bytes of 0, 300, 600
        assert!(shuffled[200..].iter().all(|&b| b == 0), "the high bytes");
        let mut back = vec![0; raw.len()];
        unshuffle_into(&shuffled, &mut back, 8);
        assert_eq!(back, raw);
        // Through a section: zstd + shuffle decodes to the values.
        let stored = zstd::bulk::compress(&shuffled, 3).unwrap();
        let mut rest = vec![100];
        rest.extend(entry(2 | SHUFFLE, &stored));
        let s = section(&record(ONE, &rest), &stored);
        let meta = parse(&s).unwrap();
        let decoded = decode(AlignedBytes::from_slice(&s).as_slice(), &meta).unwrap();
        assert_eq!(&decoded.as_slice()[..800], &raw[..]);
        // Shuffle on a raw buffer, or of 1-byte elements: refused.
        let mut rest = vec![8, SHUFFLE];
        rest.extend_from_slice(&crc32(&raw[..8]).to_le_bytes());
        let err = parse(&section(&record(ONE, &rest), &raw[..8])).unwrap_err();
        assert!(err.to_string().contains("found 16"), "{err}");
        let bytes = r#"{"tensors":[{"name":"x","dtype":"uint8","shape":[]}]}"#;
        let mut rest = vec![8];
        rest.extend(entry(1 | SHUFFLE, &stored));
        let err = parse(&section(&record(bytes, &rest), &stored)).unwrap_err();
        assert!(
            err.to_string().contains("elements of 1 bytes, found 17"),
            "{err}"
        );
    }

    #[test]
    fn a_streamed_shuffled_buffer_decodes_as_the_scratch_one_does() {
        // Every length (with partial last elements), widths 2, 4 and 8,
        // whole and damaged frames: the streamed decode (forced here) gives
        // the scratch decode's bytes, or an error where it gives one.
        let mut trials = 0;
        for (dtype, width) in [("int16", 2usize), ("float32", 4), ("int64", 8)] {
            let schema = format!(r#"{{"tensors":[{{"name":"x","dtype":"{dtype}","shape":[]}}]}}"#);
            for n in [1usize, 2, 3, 7, 64, 255, 1000, 4099, 70_000, 300_001] {
                let raw: Vec<u8> = (0..n * width)
                    .map(|i| (i * 7 % 251 + i / 977) as u8)
                    .collect();
                let stored = zstd::bulk::compress(&shuffle(&raw, width), 1).unwrap();
                let mut rest = Vec::new();
                put_varint(&mut rest, n as u64);
                rest.extend(entry(2 | SHUFFLE, &stored));
                let s = section(&record(&schema, &rest), &stored);
                let meta = parse(&s).unwrap();
                let bytes = AlignedBytes::from_slice(&s);
                let streamed = decode_streaming_above(bytes.as_slice(), &meta, 0).unwrap();
                let scratch = decode_streaming_above(bytes.as_slice(), &meta, usize::MAX).unwrap();
                assert_eq!(&streamed.as_slice()[..raw.len()], &raw[..], "{dtype} x {n}");
                assert_eq!(streamed.as_slice(), scratch.as_slice());
                trials += 1;
                // A cut frame (its crc made right): an error either way.
                let cut = &stored[..stored.len() - 1 - stored.len() / 3];
                let mut rest = Vec::new();
                put_varint(&mut rest, n as u64);
                rest.extend(entry(2 | SHUFFLE, cut));
                let s = section(&record(&schema, &rest), cut);
                let meta = parse(&s).unwrap();
                let bytes = AlignedBytes::from_slice(&s);
                let err = decode_streaming_above(bytes.as_slice(), &meta, 0).unwrap_err();
                assert!(matches!(err, FormatError::Corrupt { .. }), "{err}");
                assert!(decode_streaming_above(bytes.as_slice(), &meta, usize::MAX).is_err());
                trials += 1;
            }
        }
        assert_eq!(trials, 60);
    }

    #[test]
    fn memory_refused_while_decoding_is_out_of_memory_not_damage() {
        let raw: Vec<u8> = (0..100i64).flat_map(|v| (v * 300).to_le_bytes()).collect();
        let stored = zstd::bulk::compress(&shuffle(&raw, 8), 3).unwrap();
        let mut rest = vec![100];
        rest.extend(entry(2 | SHUFFLE, &stored));
        let s = section(&record(ONE, &rest), &stored);
        let mut meta = parse(&s).unwrap();
        // A declared size the allocator cannot give (as under a memory cap).
        meta.decoded_len = Some(usize::MAX / 2);
        let err = decode(AlignedBytes::from_slice(&s).as_slice(), &meta).unwrap_err();
        assert!(
            matches!(err, FormatError::Core(crate::Error::OutOfMemory { needed, .. }) if needed == (usize::MAX / 2) as u64),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.starts_with("out of memory: needed "), "{text}");
        assert!(!text.contains("corrupt"), "{text}");
    }

    #[test]
    fn bad_records_are_errors_naming_what_was_expected() {
        let two = r#"{"tensors":[{"name":"a","dtype":"int8","shape":[],"lod":1},{"name":"b","dtype":"int8","shape":[],"lod":2}]}"#;
        let cases: Vec<(Vec<u8>, &str)> = vec![
            // b shares a's LoD, which has 1 level, not 2.
            (
                record(two, &[1, 0, 2, 1, 1]),
                "expected an earlier tensor with 2 levels",
            ),
            // An unknown codec.
            (record(ONE, &[0, 3, 0, 0, 0, 0]), "found 3"),
            // Bytes left over before the head's crc.
            (
                {
                    let mut r = record(ONE, &[0, 0]);
                    r.extend_from_slice(&crc32(&[]).to_le_bytes()[..]);
                    r.insert(r.len() - 4, 9);
                    r
                },
                "expected the record to end",
            ),
            // A schema in batch 0 that batch 0 does not hold.
            (vec![0, 1, 0], "schema_back 1 points before batch 0"),
            // An empty LoD level.
            (record(two, &[1, 0, 0]), "expected at least 1 offset"),
            // A varint of 11 bytes.
            (vec![0x80; 11], "expected a varint below 2^64"),
        ];
        for (rec, want) in cases {
            let err = parse(&section(&rec, &[])).unwrap_err().to_string();
            assert!(err.contains(want), "{want}: {err}");
        }
    }

    #[test]
    fn varints_round_trip_and_reject_overlong() {
        for v in [0u64, 1, 127, 128, 300, 16383, 16384, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut c = Cursor {
                bytes: &b,
                pos: 0,
                k: 0,
            };
            assert_eq!(c.varint("x").unwrap(), v);
            assert_eq!(c.pos, b.len());
        }
        let long = [0xffu8; 11];
        let mut c = Cursor {
            bytes: &long,
            pos: 0,
            k: 0,
        };
        let err = c.varint("rows").unwrap_err().to_string();
        assert!(err.contains("expected a varint below 2^64"), "{err}");
        // 2^64 exactly: ten bytes whose last carries a bit past 64.
        let over = [0x80u8, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02];
        let mut c = Cursor {
            bytes: &over,
            pos: 0,
            k: 0,
        };
        assert!(c.varint("rows").is_err());
    }
}
