//! The byte layout of a `.lodt` file: constants, the fixed 64-byte structs and
//! the metadata JSON, exactly as `spec/FORMAT.md` describes them.
//!
//! ```text
//!  offset 0   +-------------------------------+
//!             | file header (64 B)            |  magic, version, file metadata length + CRC
//!  64         | file metadata JSON, padded    |
//!             +-------------------------------+
//!             | batch 0                       |  header (64 B) | metadata JSON | buffers | CRC table
//!             | batch 1                       |
//!             | ...                           |
//!             +-------------------------------+
//!             | footer header (64 B)          |  batch count, index CRC
//!             | index: 24 B per batch, padded |  offset, length, header CRC, table CRC
//!             | trailer (64 B)                |  footer offset, batch count
//!  file size  +-------------------------------+
//! ```
//!
//! Every part starts at a multiple of [`ALIGN`] (64) and is zero-padded to one.

use super::error::{ErrorSite, FilePart, FormatError, Result};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The first 9 bytes of every `.lodt` file: `\x89LODT\r\n\x1a\n`.
///
/// As in PNG, the non-ASCII first byte catches 7-bit transfers, `\r\n`
/// catches line-ending conversion either way, and `\x1a` stops `type` on DOS.
///
/// ```
/// assert_eq!(&lodt::format::MAGIC[1..5], b"LODT");
/// ```
pub const MAGIC: [u8; 9] = *b"\x89LODT\r\n\x1a\n";

/// The major version this crate writes by default: 2 (the schema once, a
/// compact batch head, compressed buffers on request;
/// [`WriteOptions::format_version`](super::WriteOptions::format_version)
/// set to `Some` 1.0 writes 1.0 for readers that need it).
///
/// ```
/// assert_eq!(lodt::format::MAJOR_VERSION, 2);
/// ```
pub const MAJOR_VERSION: u16 = 2;

/// The highest major version this crate reads: it reads every major from 1
/// to this one (1.0 and 2.0), and rejects others.
///
/// ```
/// assert_eq!(lodt::format::MAX_MAJOR_VERSION, 2);
/// ```
pub const MAX_MAJOR_VERSION: u16 = 2;

/// Whether this crate reads files of major version `major`.
pub(crate) fn known_major(major: u16) -> bool {
    (1..=MAX_MAJOR_VERSION).contains(&major)
}

/// The minor version this crate writes. Readers accept any minor of their
/// major and ignore what newer minors add.
///
/// ```
/// assert_eq!(lodt::format::MINOR_VERSION, 0);
/// ```
pub const MINOR_VERSION: u16 = 0;

/// The alignment of every part of the file, in bytes.
///
/// ```
/// assert_eq!(lodt::format::ALIGN, 64);
/// ```
pub const ALIGN: u64 = 64;

/// The size of the file header, batch header, footer header and trailer.
pub(crate) const STRUCT_LEN: u64 = 64;

/// The largest metadata JSON (file or batch) a reader accepts, in bytes (16 MiB).
///
/// ```
/// assert_eq!(lodt::format::MAX_METADATA_LEN, 16 << 20);
/// ```
pub const MAX_METADATA_LEN: u64 = 16 << 20;

/// The most dimensions a tensor may have.
///
/// ```
/// assert_eq!(lodt::format::MAX_DIMS, 64);
/// ```
pub const MAX_DIMS: usize = 64;

/// The most LoD levels a tensor may have in a `.lodt` file (and a Paddle
/// file): [`lod::MAX_LOD_LEVELS`](crate::lod::MAX_LOD_LEVELS).
pub use crate::lod::MAX_LOD_LEVELS;

/// The tag of a batch header.
pub(crate) const BATCH_TAG: [u8; 8] = *b"LODTBTCH";
/// The tag of the footer header.
pub(crate) const FOOTER_TAG: [u8; 8] = *b"LODTFOOT";
/// The tag of the trailer.
pub(crate) const TRAILER_TAG: [u8; 8] = *b"LODTTAIL";
/// The size of one footer index entry.
pub(crate) const INDEX_ENTRY_LEN: u64 = 24;

/// Rounds `n` up to a multiple of [`ALIGN`], or `None` on overflow.
pub(crate) fn pad64(n: u64) -> Option<u64> {
    n.checked_add(ALIGN - 1).map(|x| x & !(ALIGN - 1))
}

/// Compares a stored checksum with the one found: the one place the checksum
/// error ([`FormatError::Checksum`]) is built.
pub(crate) fn same_crc(at: ErrorSite, expected: u32, found: u32) -> Result<()> {
    if expected != found {
        return Err(FormatError::Checksum {
            at,
            expected,
            found,
        });
    }
    Ok(())
}

/// Checks the CRC32 of `bytes` against the stored `expected`.
pub(crate) fn check_crc32(bytes: &[u8], expected: u32, at: ErrorSite) -> Result<()> {
    same_crc(at, expected, crc32(bytes))
}

/// The CRC32 (IEEE, as zlib) of `bytes`.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// A 64-byte struct whose last 4 bytes are the CRC32 of the first 60.
pub(crate) trait Sealed64: IntoBytes + Immutable {
    /// The stored CRC field.
    fn stored_crc(&self) -> u32;
    /// Sets the CRC field.
    fn set_crc(&mut self, crc: u32);
    /// The CRC32 of the first 60 bytes.
    fn computed_crc(&self) -> u32 {
        crc32(self.as_bytes().get(..60).unwrap_or(&[]))
    }
    /// Sets the CRC field from the other 60 bytes.
    fn seal(&mut self) {
        let crc = self.computed_crc();
        self.set_crc(crc);
    }
    /// Checks the CRC field.
    fn check_crc(&self, at: ErrorSite) -> Result<()> {
        same_crc(at, self.stored_crc(), self.computed_crc())
    }
}

macro_rules! sealed64 {
    ($t:ty) => {
        impl Sealed64 for $t {
            fn stored_crc(&self) -> u32 {
                self.crc.get()
            }
            fn set_crc(&mut self, crc: u32) {
                self.crc = U32::new(crc);
            }
        }
    };
}

/// The file header, at offset 0.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(crate) struct FileHeader {
    pub magic: [u8; 9],
    pub zero: [u8; 3],
    pub major: U16,
    pub minor: U16,
    pub meta_len: U64,
    pub meta_crc: U32,
    pub reserved: [u8; 32],
    pub crc: U32,
}
sealed64!(FileHeader);

/// The header of a batch section.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(crate) struct BatchHeader {
    pub tag: [u8; 8],
    pub section_len: U64,
    pub index: U64,
    pub meta_len: U64,
    pub meta_crc: U32,
    pub buffer_count: U32,
    pub reserved: [u8; 20],
    pub crc: U32,
}
sealed64!(BatchHeader);

/// The header of the footer.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(crate) struct FooterHeader {
    pub tag: [u8; 8],
    pub batch_count: U64,
    pub index_len: U64,
    pub index_crc: U32,
    pub reserved: [u8; 32],
    pub crc: U32,
}
sealed64!(FooterHeader);

/// The last 64 bytes of the file.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(crate) struct Trailer {
    pub tag: [u8; 8],
    pub footer_offset: U64,
    pub batch_count: U64,
    pub footer_crc: U32,
    pub reserved: [u8; 32],
    pub crc: U32,
}
sealed64!(Trailer);

/// One entry of the footer index.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub(crate) struct IndexEntry {
    pub offset: U64,
    pub length: U64,
    pub header_crc: U32,
    pub table_crc: U32,
}

impl FileHeader {
    pub fn new(meta: &[u8], major: u16) -> Self {
        let mut h = FileHeader {
            magic: MAGIC,
            zero: [0; 3],
            major: U16::new(major),
            minor: U16::new(MINOR_VERSION),
            meta_len: U64::new(meta.len() as u64),
            meta_crc: U32::new(crc32(meta)),
            reserved: [0; 32],
            crc: U32::ZERO,
        };
        h.seal();
        h
    }
}

impl FooterHeader {
    pub fn new(index: &[u8], batch_count: u64) -> Self {
        let mut h = FooterHeader {
            tag: FOOTER_TAG,
            batch_count: U64::new(batch_count),
            index_len: U64::new(index.len() as u64),
            index_crc: U32::new(crc32(index)),
            reserved: [0; 32],
            crc: U32::ZERO,
        };
        h.seal();
        h
    }
}

impl Trailer {
    pub fn new(footer_offset: u64, batch_count: u64, footer_crc: u32) -> Self {
        let mut t = Trailer {
            tag: TRAILER_TAG,
            footer_offset: U64::new(footer_offset),
            batch_count: U64::new(batch_count),
            footer_crc: U32::new(footer_crc),
            reserved: [0; 32],
            crc: U32::ZERO,
        };
        t.seal();
        t
    }
}

/// Reads a 64-byte struct from the start of `bytes`, or reports truncation.
pub(crate) fn read_struct<T: FromBytes + KnownLayout + Immutable + Copy>(
    bytes: &[u8],
    file_offset: u64,
    at: ErrorSite,
) -> Result<T> {
    match T::read_from_prefix(bytes) {
        Ok((t, _)) => Ok(t),
        Err(_) => Err(FormatError::Truncated {
            at,
            needed: file_offset + std::mem::size_of::<T>() as u64,
            available: file_offset + bytes.len() as u64,
        }),
    }
}

/// Checks that every byte of `bytes` (which start at `file_offset`) is zero.
pub(crate) fn check_zero(
    bytes: &[u8],
    file_offset: u64,
    at: impl FnOnce() -> ErrorSite,
) -> Result<()> {
    match bytes.iter().position(|&b| b != 0) {
        None => Ok(()),
        Some(i) => Err(FormatError::NonZeroPadding {
            at: at(),
            offset: file_offset + i as u64,
            found: bytes.get(i).copied().unwrap_or(0),
        }),
    }
}

/// The file metadata JSON. An empty `metadata` (the default) is not written.
#[derive(Serialize, Deserialize, Default)]
pub(crate) struct FileMetaJson {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

/// The batch metadata JSON. An empty `metadata` (the default) is not
/// written: every byte of it counts in a file of many small batches.
#[derive(Serialize, Deserialize)]
pub(crate) struct BatchMetaJson {
    pub tensors: Vec<TensorJson>,
    pub buffers: Vec<BufferJson>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

/// One tensor of the batch metadata JSON.
#[derive(Serialize, Deserialize)]
pub(crate) struct TensorJson {
    pub name: String,
    pub dtype: String,
    #[serde(deserialize_with = "bounded_dims")]
    pub shape: Vec<u64>,
    #[serde(deserialize_with = "bounded_levels")]
    pub lod: Vec<u64>,
    pub body: u64,
}

/// One buffer of the batch metadata JSON (offset relative to the batch start).
#[derive(Serialize, Deserialize, Clone, Copy)]
pub(crate) struct BufferJson {
    pub offset: u64,
    pub length: u64,
}

/// Deserializes a list of at most `N` integers, failing before allocating more.
fn bounded_list<'de, D: Deserializer<'de>, const N: usize>(d: D) -> Result<Vec<u64>, D::Error> {
    struct Visitor<const N: usize>;
    impl<'de, const N: usize> serde::de::Visitor<'de> for Visitor<N> {
        type Value = Vec<u64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a list of at most {N} unsigned integers")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u64>, A::Error> {
            let mut out = Vec::new();
            while let Some(v) = seq.next_element::<u64>()? {
                if out.len() == N {
                    return Err(serde::de::Error::custom(format!("more than {N} entries")));
                }
                out.push(v);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Visitor::<N>)
}

pub(crate) fn bounded_dims<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
    bounded_list::<D, MAX_DIMS>(d)
}

fn bounded_levels<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
    bounded_list::<D, MAX_LOD_LEVELS>(d)
}

/// Parses metadata JSON, attributing errors to `at`.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8], at: ErrorSite) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|source| FormatError::Json { at, source })
}

/// Converts a file quantity to `usize`, or reports it as too large.
pub(crate) fn to_usize(
    v: u64,
    at: impl FnOnce() -> ErrorSite,
    what: &'static str,
) -> Result<usize> {
    usize::try_from(v).map_err(|_| FormatError::TooLarge {
        at: at(),
        what,
        limit: usize::MAX as u64,
        found: v,
    })
}

/// Checks a metadata length against [`MAX_METADATA_LEN`].
pub(crate) fn check_meta_len(len: u64, at: ErrorSite) -> Result<()> {
    if len > MAX_METADATA_LEN {
        return Err(FormatError::TooLarge {
            at,
            what: "metadata length",
            limit: MAX_METADATA_LEN,
            found: len,
        });
    }
    Ok(())
}

/// Explains bytes that are not the magic, recognising common transfer damage.
pub(crate) fn diagnose_magic(head: &[u8]) -> String {
    let crlf_damaged: &[u8] = b"\x89LODT\r\r\n";
    let lf_damaged: &[u8] = b"\x89LODT\n\x1a\n";
    if head.starts_with(crlf_damaged) {
        "the magic's \\n became \\r\\n: the file went through a text-mode (LF to CRLF) transfer"
            .into()
    } else if head.starts_with(lf_damaged) {
        "the magic's \\r\\n became \\n: the file went through a text-mode (CRLF to LF) transfer"
            .into()
    } else if head.get(1..5) == Some(b"LODT") && head.first() != Some(&0x89) {
        "the magic's first byte lost its high bit: the file went through a 7-bit transfer".into()
    } else if head.len() < MAGIC.len() {
        format!(
            "expected {} bytes of magic \\x89LODT\\r\\n\\x1a\\n, the file has only {}",
            MAGIC.len(),
            head.len()
        )
    } else {
        format!(
            "expected magic \\x89LODT\\r\\n\\x1a\\n, found {}",
            head.iter()
                .take(MAGIC.len())
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        )
    }
}

/// Parses and checks the file header and the file metadata from the first
/// bytes of a file. `available` is the whole file when known (for the
/// truncation report). Returns the version, the metadata and the offset of the
/// first batch.
/// Checks a footer read whole: `region` holds the file's bytes from
/// `footer_offset` to its end (footer header, index, padding, trailer), and
/// the file has `count` batches (as `counted_by` says: its trailer, or the
/// batches a stream read). The one footer parser of the mapped reader, the stream
/// reader and recovery. Returns the index entries.
pub(crate) fn check_footer_region(
    region: &[u8],
    footer_offset: u64,
    count: u64,
    counted_by: &str,
) -> Result<Vec<IndexEntry>> {
    let corrupt = |part, reason: String| Err(FormatError::corrupt(ErrorSite::file(part), reason));
    let index_len = count.checked_mul(INDEX_ENTRY_LEN);
    let padded = index_len.and_then(pad64);
    let (Some(index_len), Some(padded)) = (index_len, padded) else {
        return corrupt(
            FilePart::FooterHeader,
            format!("an index of {count} batches"),
        );
    };
    let trailer_at = STRUCT_LEN.saturating_add(padded);
    let needed = trailer_at.saturating_add(STRUCT_LEN);
    if (region.len() as u64) < needed {
        return Err(FormatError::Truncated {
            at: ErrorSite::file(FilePart::Index),
            needed: footer_offset.saturating_add(needed),
            available: footer_offset + region.len() as u64,
        });
    }
    let footer: FooterHeader = read_struct(
        region,
        footer_offset,
        ErrorSite::file(FilePart::FooterHeader),
    )?;
    if footer.tag == BATCH_TAG {
        // An append writes its first batch over the old footer and the new
        // trailer last: until then, the old trailer points at the new batch.
        return Err(FormatError::NoFooter {
            reason: format!(
                "the trailer points at a batch header at offset {footer_offset}, where its footer \
                 was: an append overwrote the footer and has not written the new one"
            ),
        });
    }
    if footer.tag != FOOTER_TAG {
        return corrupt(
            FilePart::FooterHeader,
            format!(
                "expected tag \"LODTFOOT\", found {:?}",
                String::from_utf8_lossy(&footer.tag)
            ),
        );
    }
    footer.check_crc(ErrorSite::file(FilePart::FooterHeader))?;
    if footer.batch_count.get() != count || footer.index_len.get() != index_len {
        return corrupt(
            FilePart::FooterHeader,
            format!(
                "footer counts {} batches in {} bytes, {counted_by} {count} batches in {index_len} bytes",
                footer.batch_count.get(),
                footer.index_len.get()
            ),
        );
    }
    // In range: the region holds the footer header, the padded index and the
    // trailer (checked above).
    let index_end = (STRUCT_LEN + index_len) as usize;
    let index = &region[STRUCT_LEN as usize..index_end];
    check_crc32(
        index,
        footer.index_crc.get(),
        ErrorSite::file(FilePart::Index),
    )?;
    check_zero(
        &region[index_end..trailer_at as usize],
        footer_offset + index_end as u64,
        || ErrorSite::file(FilePart::Index),
    )?;
    let trailer_offset = footer_offset + trailer_at;
    let trailer: Trailer = read_struct(
        &region[trailer_at as usize..],
        trailer_offset,
        ErrorSite::file(FilePart::Trailer),
    )?;
    if trailer.tag != TRAILER_TAG {
        return corrupt(FilePart::Trailer, "expected tag \"LODTTAIL\"".into());
    }
    trailer.check_crc(ErrorSite::file(FilePart::Trailer))?;
    same_crc(
        ErrorSite::file(FilePart::Trailer),
        trailer.footer_crc.get(),
        footer.crc.get(),
    )?;
    if trailer.footer_offset.get() != footer_offset || trailer.batch_count.get() != count {
        return corrupt(
            FilePart::Trailer,
            format!(
                "trailer points at a footer at {} with {} batches; found one at {footer_offset} with {count}",
                trailer.footer_offset.get(),
                trailer.batch_count.get()
            ),
        );
    }
    if region.len() as u64 > needed {
        return corrupt(
            FilePart::Trailer,
            format!(
                "data continues after the trailer at offset {}",
                footer_offset + needed
            ),
        );
    }
    Ok(<[IndexEntry]>::ref_from_bytes(index)
        .map_err(|_| FormatError::corrupt(ErrorSite::file(FilePart::Index), "misaligned index"))?
        .to_vec())
}

/// How many bytes from the start of a file [`parse_file_start`] needs: the
/// header and its metadata, padded (64 when `head` is too short to tell or
/// announces too much metadata, so that parsing reports what is wrong).
pub(crate) fn file_start_len(head: &[u8]) -> u64 {
    if !head.starts_with(&MAGIC) {
        return STRUCT_LEN;
    }
    match read_struct::<FileHeader>(head, 0, ErrorSite::file(FilePart::FileHeader)) {
        Ok(h) if h.meta_len.get() <= MAX_METADATA_LEN => {
            pad64(STRUCT_LEN + h.meta_len.get()).unwrap_or(STRUCT_LEN)
        }
        _ => STRUCT_LEN,
    }
}

pub(crate) fn parse_file_start(
    bytes: &[u8],
) -> Result<(super::Version, BTreeMap<String, String>, u64)> {
    let at = || ErrorSite::file(FilePart::FileHeader);
    if !bytes.starts_with(&MAGIC) {
        return Err(FormatError::NotLodt {
            reason: diagnose_magic(bytes),
        });
    }
    let header: FileHeader = read_struct(bytes, 0, at())?;
    let (major, minor) = (header.major.get(), header.minor.get());
    // The version is read before the CRC so that a future major, which may
    // change the header, is reported as such.
    if !known_major(major) {
        return Err(FormatError::UnsupportedVersion {
            major,
            minor,
            supported: MAX_MAJOR_VERSION,
        });
    }
    header.check_crc(at())?;
    let meta_len = header.meta_len.get();
    check_meta_len(meta_len, ErrorSite::file(FilePart::FileMetadata))?;
    let meta_end = STRUCT_LEN + meta_len;
    let data_start = pad64(meta_end).unwrap_or(u64::MAX);
    let available = bytes.len() as u64;
    if data_start > available {
        return Err(FormatError::Truncated {
            at: ErrorSite::file(FilePart::FileMetadata),
            needed: data_start,
            available,
        });
    }
    // In range: data_start <= bytes.len().
    let meta = &bytes[STRUCT_LEN as usize..meta_end as usize];
    check_crc32(
        meta,
        header.meta_crc.get(),
        ErrorSite::file(FilePart::FileMetadata),
    )?;
    check_zero(
        &bytes[meta_end as usize..data_start as usize],
        meta_end,
        || ErrorSite::file(FilePart::FileMetadata),
    )?;
    let json: FileMetaJson = parse_json(meta, ErrorSite::file(FilePart::FileMetadata))?;
    Ok((super::Version { major, minor }, json.metadata, data_start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structs_are_64_bytes() {
        assert_eq!(std::mem::size_of::<FileHeader>(), 64);
        assert_eq!(std::mem::size_of::<BatchHeader>(), 64);
        assert_eq!(std::mem::size_of::<FooterHeader>(), 64);
        assert_eq!(std::mem::size_of::<Trailer>(), 64);
        assert_eq!(std::mem::size_of::<IndexEntry>(), 24);
    }

    #[test]
    fn pad64_rounds_up() {
        assert_eq!(pad64(0), Some(0));
        assert_eq!(pad64(1), Some(64));
        assert_eq!(pad64(64), Some(64));
        assert_eq!(pad64(u64::MAX), None);
    }

    #[test]
    fn magic_damage_is_diagnosed() {
        assert!(diagnose_magic(b"\x89LODT\r\r\n\x1a\r\n").contains("LF to CRLF"));
        assert!(diagnose_magic(b"\x89LODT\n\x1a\nxx").contains("CRLF to LF"));
        assert!(diagnose_magic(b"\x09LODT\r\n\x1a\n").contains("7-bit"));
        assert!(diagnose_magic(b"PK\x03\x04zzzzzz").contains("50 4b 03 04"));
    }

    #[test]
    fn bounded_lists_reject_long_shapes() {
        let json = format!(
            r#"{{"name":"x","dtype":"int8","shape":[{}],"lod":[],"body":0}}"#,
            vec!["1"; 65].join(",")
        );
        let err = serde_json::from_str::<TensorJson>(&json)
            .err()
            .map(|e| e.to_string());
        assert!(err.unwrap_or_default().contains("more than 64 entries"));
    }
}
