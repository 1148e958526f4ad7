//! The boundary between lodt and the decoders of foreign formats (arrow-ipc
//! and parquet): what the readers check before handing bytes to them, and
//! [`contain`], the one place where a panic of theirs is caught.
//!
//! arrow-rs and parquet trust parts of their input: arrow-ipc slices a
//! message body at whatever offsets the message claims, parquet asserts that
//! column chunk offsets are not negative, and both have panicking paths that
//! a corrupt file can reach. The readers therefore
//!
//! 1. refuse columns lodt cannot read before decoding them ([`check_schema`]),
//!    so only the primitive, list and fixed-size list decoders ever run;
//! 2. check every length, offset and count a message or footer gives against
//!    the schema and the bytes really present ([`check_record_batch`],
//!    [`check_parquet_metadata`]), so no buffer is sliced out of range and no
//!    allocation is sized by an unchecked field, and walk the Thrift of a
//!    Parquet footer and page headers for what parquet mishandles
//!    ([`check_parquet_schema_depth`], [`check_parquet_page_headers`]);
//! 3. run each remaining decoder call inside [`contain`], which turns a panic
//!    into [`ArrowError::Decode`](crate::arrow::ArrowError::Decode) naming the file and section (arrow-rs validates
//!    every array it decodes from IPC; Parquet output is validated with
//!    `ArrayData::validate_full` inside the boundary too).
//!
//! A caught panic still runs the process's panic hook (which prints it, by
//! default); the library installs no hook. The `lodt` binary installs a quiet
//! one. Containment needs `panic = "unwind"` (Rust's default).

use super::{Error, Result};
use arrow_schema::{DataType, Schema};
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs `decode`, a call into arrow-rs or parquet (named by `decoder`) on
/// input from `file`, and turns a panic into [`ArrowError::Decode`](crate::arrow::ArrowError::Decode) for the
/// `section` being read. Errors that `decode` returns pass through.
///
/// The callers hand in closures whose state is discarded after a panic:
/// the IPC readers decode a message from a buffer they own, and the Parquet
/// reader drops the row group reader that panicked. That is why asserting
/// unwind safety is sound here.
pub(crate) fn contain<T>(
    decoder: &'static str,
    file: &str,
    section: impl FnOnce() -> String,
    decode: impl FnOnce() -> Result<T>,
) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(decode)) {
        Ok(result) => result,
        Err(payload) => Err(Error::Decode {
            file: file.to_owned(),
            section: section(),
            message: format!("{decoder} panicked: {}", panic_message(payload.as_ref())),
        }),
    }
}

/// The message of a panic payload (`panic!` gives a `&str` or a `String`).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_owned()
    }
}

/// An [`ArrowError::Decode`](crate::arrow::ArrowError::Decode) for `section` of `file`.
pub(crate) fn decode_error(file: &str, section: &str, message: impl Into<String>) -> Error {
    Error::Decode {
        file: file.to_owned(),
        section: section.to_owned(),
        message: message.into(),
    }
}

/// Checks that every column of `schema` has a type lodt reads (lists, large
/// lists and fixed-size lists of booleans, integers and floats), so that no
/// other decoder of arrow-rs or parquet runs on untrusted input. The error is
/// the one [`from_arrow`](super::from_arrow) gives for such a column.
pub(crate) fn check_schema(schema: &Schema) -> Result<()> {
    for field in schema.fields() {
        let mut data_type = field.data_type();
        loop {
            match data_type {
                DataType::List(child) | DataType::LargeList(child) => {
                    data_type = child.data_type();
                }
                DataType::FixedSizeList(child, size) if *size >= 0 => {
                    data_type = child.data_type();
                }
                DataType::Boolean
                | DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
                | DataType::UInt64
                | DataType::Float16
                | DataType::Float32
                | DataType::Float64 => break,
                other => {
                    return Err(Error::Unsupported {
                        column: field.name().clone(),
                        data_type: other.to_string(),
                    });
                }
            }
        }
    }
    Ok(())
}

/// The flatbuffer of an encapsulated IPC message: `0xFFFFFFFF`, an `i32`
/// length and the flatbuffer, or (before Arrow 0.15) the length and the
/// flatbuffer. An error when `bytes` is too short for what it claims.
pub(crate) fn message_flatbuffer(bytes: &[u8]) -> std::result::Result<&[u8], String> {
    let word = |at: usize| -> Option<[u8; 4]> { bytes.get(at..at + 4)?.try_into().ok() };
    let Some(first) = word(0) else {
        return Err(format!(
            "{} bytes are too short for a message length",
            bytes.len()
        ));
    };
    let (len, start) = if first == [0xFF; 4] {
        let Some(len) = word(4) else {
            return Err("the message ends after its continuation marker".into());
        };
        (i32::from_le_bytes(len), 8)
    } else {
        (i32::from_le_bytes(first), 4)
    };
    let len = usize::try_from(len).map_err(|_| format!("negative message length {len}"))?;
    bytes.get(start..start + len).ok_or_else(|| {
        format!(
            "the message claims {len} bytes of metadata, {} are there",
            bytes.len() - start
        )
    })
}

/// Parses (and verifies) an IPC message flatbuffer.
pub(crate) fn parse_message(
    flatbuffer: &[u8],
) -> std::result::Result<arrow_ipc::Message<'_>, String> {
    arrow_ipc::root_as_message(flatbuffer).map_err(|e| format!("unreadable message: {e}"))
}

/// Checks an IPC record batch message against the schema (whose types
/// [`check_schema`] accepted) and the `body_len` bytes of its body: every
/// buffer inside the body, every node length and null count in range, every
/// buffer long enough for its node, every fixed-size list child long enough.
/// arrow-ipc checks none of the first and slices the body where the message
/// says, which panics when a buffer lies outside it; arrow's array validation,
/// which runs after that, checks the rest (offsets, values).
pub(crate) fn check_record_batch(
    batch: &arrow_ipc::RecordBatch<'_>,
    body_len: usize,
    schema: &Schema,
) -> std::result::Result<(), String> {
    if let Some(compression) = batch.compression() {
        return Err(format!(
            "compressed bodies ({:?}) are not supported",
            compression.codec()
        ));
    }
    let rows = batch.length();
    if rows < 0 {
        return Err(format!("negative row count {rows}"));
    }
    let nodes = batch.nodes().ok_or("the message has no field nodes")?;
    let buffers = batch.buffers().ok_or("the message has no buffer list")?;
    for (i, b) in buffers.iter().enumerate() {
        let (offset, length) = (b.offset(), b.length());
        let end = i128::from(offset) + i128::from(length);
        if offset < 0 || length < 0 || end > body_len as i128 {
            return Err(format!(
                "buffer {i} (offset {offset}, {length} bytes) lies outside the {body_len}-byte body"
            ));
        }
    }
    let mut walk = Walk {
        nodes: nodes.iter().map(|n| (n.length(), n.null_count())).collect(),
        buffers: buffers.iter().map(|b| b.length() as u64).collect(),
        node: 0,
        buffer: 0,
    };
    for field in schema.fields() {
        let length = walk.array(field.name(), field.data_type())?;
        if length != rows as u64 {
            return Err(format!(
                "column {:?} has {length} rows, the batch {rows}",
                field.name()
            ));
        }
    }
    Ok(())
}

/// Walks the field nodes and buffers of a record batch message in schema order.
struct Walk {
    nodes: Vec<(i64, i64)>,
    buffers: Vec<u64>,
    node: usize,
    buffer: usize,
}

impl Walk {
    fn next_buffer(&mut self, column: &str) -> std::result::Result<u64, String> {
        let len = self.buffers.get(self.buffer).copied().ok_or_else(|| {
            format!(
                "column {column:?}: the message has {} buffers, the schema needs more",
                self.buffers.len()
            )
        })?;
        self.buffer += 1;
        Ok(len)
    }

    /// Checks the node (and buffers, and children) of one array of type
    /// `data_type` and returns its length.
    fn array(&mut self, column: &str, data_type: &DataType) -> std::result::Result<u64, String> {
        let index = self.node;
        let (length, null_count) = self.nodes.get(index).copied().ok_or_else(|| {
            format!(
                "column {column:?}: the message has {} field nodes, the schema needs more",
                self.nodes.len()
            )
        })?;
        self.node += 1;
        if length < 0 || null_count < 0 || null_count > length {
            return Err(format!(
                "column {column:?}: field node {index} has length {length} and null count {null_count}"
            ));
        }
        let length = length as u64;
        let short = |what: &str, needed: Option<u64>, found: u64| {
            format!(
                "column {column:?}: field node {index} of length {length} needs {} bytes of {what}, its buffer has {found}",
                needed.map_or_else(|| "more than 2^64".to_owned(), |n| n.to_string())
            )
        };
        let bitmap = length.div_ceil(8);
        let validity = self.next_buffer(column)?;
        if null_count > 0 && validity < bitmap {
            return Err(short("validity bitmap", Some(bitmap), validity));
        }
        match data_type {
            DataType::List(child) | DataType::LargeList(child) => {
                let width = if matches!(data_type, DataType::List(_)) {
                    4
                } else {
                    8
                };
                let offsets = self.next_buffer(column)?;
                let needed = length.checked_add(1).and_then(|n| n.checked_mul(width));
                if length > 0 && needed.is_none_or(|n| offsets < n) {
                    return Err(short("offsets", needed, offsets));
                }
                // arrow's offset validation views the whole buffer as
                // offsets, and panics on a partial one.
                if offsets % width != 0 {
                    return Err(format!(
                        "column {column:?}: field node {index} has an offsets buffer of {offsets} bytes, not a multiple of {width}"
                    ));
                }
                self.array(column, child.data_type())?;
            }
            DataType::FixedSizeList(child, size) => {
                let child_length = self.array(column, child.data_type())?;
                let needed = length.checked_mul(u64::try_from(*size).unwrap_or(u64::MAX));
                if needed.is_none_or(|n| child_length < n) {
                    return Err(format!(
                        "column {column:?}: field node {index} holds {length} lists of {size}, its child has {child_length} values"
                    ));
                }
            }
            DataType::Boolean => {
                let values = self.next_buffer(column)?;
                if values < bitmap {
                    return Err(short("values", Some(bitmap), values));
                }
            }
            other => {
                let width = other
                    .primitive_width()
                    .ok_or_else(|| format!("column {column:?}: unsupported type {other}"))?
                    as u64;
                let values = self.next_buffer(column)?;
                let needed = length.checked_mul(width);
                if needed.is_none_or(|n| values < n) {
                    return Err(short("values", needed, values));
                }
            }
        }
        Ok(length)
    }
}

/// Checks what parquet trusts in a file's metadata: row counts, value counts
/// and column chunk byte ranges (non-negative, inside the `file_len`-byte
/// file). parquet asserts some of them (`ColumnChunkMetaData::byte_range`
/// panics on a negative offset) and sizes reads by others.
#[cfg(feature = "parquet")]
pub(crate) fn check_parquet_metadata(
    file: &str,
    metadata: &::parquet::file::metadata::ParquetMetaData,
    file_len: u64,
) -> Result<()> {
    for (i, row_group) in metadata.row_groups().iter().enumerate() {
        let rows = row_group.num_rows();
        if rows < 0 {
            return Err(decode_error(
                file,
                &format!("row group {i}"),
                format!("negative row count {rows}"),
            ));
        }
        for column in row_group.columns() {
            let section = || format!("row group {i} column {:?}", column.column_path().string());
            let start = column
                .dictionary_page_offset()
                .unwrap_or_else(|| column.data_page_offset());
            let (data, size, values) = (
                column.data_page_offset(),
                column.compressed_size(),
                column.num_values(),
            );
            let end = i128::from(start) + i128::from(size);
            if start < 0 || data < 0 || size < 0 || end > i128::from(file_len) {
                return Err(decode_error(
                    file,
                    &section(),
                    format!(
                        "the column chunk (offset {start}, data pages at {data}, {size} bytes) lies outside the {file_len}-byte file"
                    ),
                ));
            }
            if values < 0 {
                return Err(decode_error(
                    file,
                    &section(),
                    format!("negative value count {values}"),
                ));
            }
        }
    }
    Ok(())
}

/// The deepest nesting of groups lodt lets parquet decode in a file's schema.
///
/// parquet builds the schema tree by recursion, once per level: a footer of
/// about 20 KiB nesting 2,000 groups overflows the stack, an abort that no
/// boundary catches. pyarrow reads at most 100 schema levels; the deepest
/// file lodt writes nests 67 groups (32 LoD levels and an element shape, two
/// groups each, under the root).
#[cfg(feature = "parquet")]
pub(crate) const MAX_PARQUET_SCHEMA_DEPTH: usize = 128;

/// Checks, before parquet decodes the footer, that the schema it holds does
/// not nest groups deeper than [`MAX_PARQUET_SCHEMA_DEPTH`]. Reads the footer
/// (the file's last 8 bytes give its length) and reads its Thrift encoding as
/// parquet does ([`thrift::read_footer`]) for the schema elements' child
/// counts, refusing a group claiming more children than follow it and a list
/// of booleans parquet would skip. A footer parquet fails on before it has a
/// whole schema is left to parquet, which reports it (before building any
/// tree).
#[cfg(feature = "parquet")]
pub(crate) fn check_parquet_schema_depth(file: &str, reader: &std::fs::File) -> Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut reader = reader;
    let len = reader.seek(SeekFrom::End(0))?;
    if len < 12 {
        return Ok(());
    }
    reader.seek(SeekFrom::End(-8))?;
    let mut tail = [0u8; 8];
    reader.read_exact(&mut tail)?;
    let footer_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if &tail[4..] != b"PAR1" || footer_len + 8 > len {
        return Ok(());
    }
    reader.seek(SeekFrom::Start(len - 8 - footer_len))?;
    let mut footer = vec![0u8; footer_len as usize];
    reader.read_exact(&mut footer)?;
    reader.seek(SeekFrom::Start(0))?;
    let footer = thrift::read_footer(&footer);
    if let Some(message) = footer.refused {
        return Err(decode_error(file, "Parquet footer", message));
    }
    // Without a whole schema parquet fails before it builds one, and says why.
    let Some(children) = footer.children else {
        return Ok(());
    };
    if let Some((index, n, after)) = thrift::oversized_group(&children) {
        return Err(decode_error(
            file,
            "Parquet footer",
            format!("schema element {index} has {n} children, and {after} elements follow it"),
        ));
    }
    // parquet's Arrow schema conversion reads the root as a list when its
    // converted_type is LIST (3), and asserts on the root's repetition, which
    // a root has not (found by the `parquet_reader` fuzz target).
    if let (Some(3), Some(&n)) = (footer.root_converted, children.first())
        && n > 0
    {
        return Err(decode_error(
            file,
            "Parquet footer",
            "the schema's root is annotated LIST; the root is the message, never a list",
        ));
    }
    if thrift::schema_depth(&children, MAX_PARQUET_SCHEMA_DEPTH) > MAX_PARQUET_SCHEMA_DEPTH {
        return Err(decode_error(
            file,
            "Parquet footer",
            format!(
                "the schema nests groups more than {MAX_PARQUET_SCHEMA_DEPTH} deep (lodt's limit; pyarrow reads at most 100 levels)"
            ),
        ));
    }
    Ok(())
}

/// Checks the page headers of every column chunk of row group `index`
/// before parquet reads them, as [`check_parquet_schema_depth`] checks the
/// footer: a header holding a Thrift list, set or map of booleans is refused,
/// and so is a dictionary-encoded data page before any dictionary page (which
/// parquet meets with a panic).
///
/// parquet skips the fields of a header it does not know, and skips a
/// boolean in a list without reading it (the compact protocol gives it a
/// byte), so such a list of 2^31 elements costs it 2^31 steps on no input:
/// seconds per header, without end for a file of many (found by the
/// `parquet_reader` fuzz target). No field of a valid footer or page header
/// is such a list. Everything else parquet skips consumes input, so its work
/// stays in proportion to the file.
///
/// The walk follows parquet's: from the chunk's first page, a header, then
/// `compressed_page_size` bytes of page, until the chunk's bytes are used up.
/// Where a header does not parse or a size is out of range the walk stops,
/// as parquet does (with an error of its own). parquet has a second walk:
/// when it peeks at the next page (`SerializedPageReader::peek_next_page`,
/// which a list column's reader calls at page boundaries) and finds an index
/// page, it reads the next header right after the index page's header,
/// without skipping the page's bytes. So at an index page the walk forks and
/// follows both ways; each position is walked at most twice (before and
/// after a dictionary page), so its work stays in proportion to the chunk.
/// (Found reading parquet's page reader after the `parquet_reader` fuzz
/// target's inputs that got past the walk through
/// `thrift::skim_page_header`'s field 6.)
#[cfg(feature = "parquet")]
pub(crate) fn check_parquet_page_headers(
    file: &str,
    reader: &std::fs::File,
    metadata: &::parquet::file::metadata::ParquetMetaData,
    index: usize,
) -> Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let Some(row_group) = metadata.row_groups().get(index) else {
        return Ok(());
    };
    let mut reader = reader;
    let file_len = reader.seek(SeekFrom::End(0))?;
    for column in row_group.columns() {
        let start = column
            .dictionary_page_offset()
            .unwrap_or_else(|| column.data_page_offset());
        let (Ok(start), Ok(size)) = (
            u64::try_from(start),
            u64::try_from(column.compressed_size()),
        ) else {
            continue; // refused by check_parquet_metadata
        };
        let end = start.saturating_add(size);
        let refuse = |pos: u64, message: String| {
            decode_error(
                file,
                &format!(
                    "row group {index} column {:?}",
                    column.column_path().string()
                ),
                format!("the page header at byte {pos}: {message}"),
            )
        };
        // Where a header starts, and whether a dictionary page came before it.
        let mut todo = vec![(start, false)];
        let mut walked = std::collections::HashSet::new();
        while let Some((pos, mut dictionary)) = todo.pop() {
            // A position walked without a dictionary was checked the hardest.
            if pos >= end.min(file_len)
                || walked.contains(&(pos, false))
                || !walked.insert((pos, dictionary))
            {
                continue;
            }
            let remaining = end - pos;
            let rest = file_len - pos;
            let mut window = rest.min(4096);
            let header = loop {
                reader.seek(SeekFrom::Start(pos))?;
                let mut bytes = vec![0u8; window as usize];
                reader.read_exact(&mut bytes)?;
                match thrift::skim_page_header(&bytes) {
                    Ok(found) => break Some(found),
                    Err(thrift::Skim::Refused(message)) => return Err(refuse(pos, message)),
                    Err(thrift::Skim::Unparsed) if window < rest => {
                        window = rest.min(window.saturating_mul(16));
                    }
                    Err(thrift::Skim::Unparsed) => break None,
                }
            };
            let Some((header_len, header)) = header else {
                continue;
            };
            let header_len = header_len as u64;
            // The peek's way past an index page (type 1): the next header
            // right after this one, if this one fits in the chunk.
            if header.page_type == Some(1) && header_len < remaining {
                todo.push((pos + header_len, dictionary));
            }
            // parquet reads a data page's header by its type, and unwraps it
            // (`PageMetadata::try_from`: it panics when the header is absent).
            let data_page = match header.page_type {
                Some(0) => Some(("data_page_header", header.data_page)),
                Some(3) => Some(("data_page_header_v2", header.data_page_v2)),
                _ => None,
            };
            if let Some((name, None)) = data_page {
                return Err(refuse(pos, format!("a data page without its {name}")));
            }
            // parquet sets up a column's dictionary decoder when it reads a
            // dictionary page, and panics at a dictionary-encoded data page
            // that comes before any (`Decoder for dict should have been set`).
            // The encoding is the one in the header the page's type names.
            let encoding = data_page.and_then(|(_, found)| found.flatten());
            match (header.page_type, encoding) {
                (Some(2), _) => dictionary = true,
                (Some(_), Some(encoding @ (2 | 8))) if !dictionary => {
                    let name = if encoding == 2 {
                        "PLAIN_DICTIONARY"
                    } else {
                        "RLE_DICTIONARY"
                    };
                    return Err(refuse(
                        pos,
                        format!(
                            "a data page encoded {name}, and no dictionary page before it in the column chunk"
                        ),
                    ));
                }
                _ => {}
            }
            let Some(page_len) = header
                .compressed_page_size
                .and_then(|n| u64::try_from(n).ok())
            else {
                continue;
            };
            // parquet allocates `uncompressed_page_size` bytes (and zeroes
            // them, for Snappy and LZ4) before it decompresses a page.
            if let (Some(ratio), Some(claimed)) = (
                max_expansion(column.compression()),
                header.uncompressed_page_size,
            ) {
                let most = page_len
                    .saturating_mul(ratio)
                    .saturating_add(EXPANSION_SLACK);
                if u64::try_from(claimed).is_ok_and(|claimed| claimed > most) {
                    return Err(refuse(
                        pos,
                        format!(
                            "uncompressed_page_size {claimed} is more than {:?} can expand \
                             {page_len} compressed bytes to (at most {most})",
                            column.compression()
                        ),
                    ));
                }
            }
            // parquet sizes a column's dictionary by the dictionary page's
            // `num_values` before it decodes the values (8 bytes each for
            // INT64: 400 million of them in a 2 KiB file asked for 3.2 GB;
            // found by the `parquet_reader` fuzz target). Plain-encoded, they
            // fit in the page's bytes.
            if let (Some(2), Some(values)) = (header.page_type, header.dictionary_values) {
                let bytes = if column.compression() == ::parquet::basic::Compression::UNCOMPRESSED {
                    page_len
                } else {
                    header
                        .uncompressed_page_size
                        .and_then(|n| u64::try_from(n).ok())
                        .unwrap_or(page_len)
                };
                let bits = plain_bits(column.column_descr());
                let most = bytes.saturating_mul(8) / bits;
                if u64::try_from(values).is_ok_and(|values| values > most) {
                    return Err(refuse(
                        pos,
                        format!(
                            "a dictionary page of {values} values, and its {bytes} bytes hold at \
                             most {most} plain-encoded {:?} values",
                            column.column_type()
                        ),
                    ));
                }
            }
            if let Some(used) = header_len
                .checked_add(page_len)
                .filter(|&used| used <= remaining)
            {
                todo.push((pos + used, dictionary));
            }
        }
    }
    Ok(())
}

/// Room for the framing of a compressed page (a codec's headers, one
/// Zstandard block) beyond its ratio, in [`max_expansion`]'s bound.
#[cfg(feature = "parquet")]
const EXPANSION_SLACK: u64 = 1 << 17;

/// The most bytes one compressed byte of `codec` can decode to, for the
/// codecs lodt decodes (`None`: no decompression, or a codec parquet is built
/// without, which it refuses before allocating). Snappy: a 3-byte copy
/// produces at most 64 bytes. LZ4: each further byte of a match length adds
/// 255. Zstandard: a 4-byte RLE block produces at most 128 KiB (the largest
/// block). Found by the `convert` fuzz target: a page header claiming 2 GiB
/// for a few bytes of page made parquet allocate 2 GiB.
#[cfg(feature = "parquet")]
fn max_expansion(codec: ::parquet::basic::Compression) -> Option<u64> {
    use ::parquet::basic::Compression;
    match codec {
        Compression::SNAPPY => Some(22),
        Compression::LZ4 | Compression::LZ4_RAW => Some(256),
        Compression::ZSTD(_) => Some(32_768),
        _ => None,
    }
}

/// The fewest bits one plain-encoded value of `column` takes (at least 1).
#[cfg(feature = "parquet")]
pub(crate) fn plain_bits(column: &::parquet::schema::types::ColumnDescriptor) -> u64 {
    use ::parquet::basic::Type;
    match column.physical_type() {
        Type::BOOLEAN => 1,
        Type::INT32 | Type::FLOAT | Type::BYTE_ARRAY => 32,
        Type::INT64 | Type::DOUBLE => 64,
        Type::INT96 => 96,
        Type::FIXED_LEN_BYTE_ARRAY => u64::try_from(column.type_length())
            .unwrap_or(0)
            .saturating_mul(8)
            .max(1),
    }
}

/// Just enough of Thrift's compact protocol, read as parquet 60 reads it, to
/// check what parquet sizes allocations by before it decodes: the schema's
/// child counts (`FileMetaData` field 2, a list of `SchemaElement`s whose
/// field 5 is `num_children`) and page headers.
#[cfg(feature = "parquet")]
mod thrift {
    struct Input<'a> {
        bytes: &'a [u8],
        at: usize,
    }

    impl Input<'_> {
        fn byte(&mut self) -> Option<u8> {
            let b = *self.bytes.get(self.at)?;
            self.at += 1;
            Some(b)
        }

        fn skip(&mut self, n: u64) -> Option<()> {
            let n = usize::try_from(n).ok()?;
            self.at = self
                .at
                .checked_add(n)
                .filter(|&end| end <= self.bytes.len())?;
            Some(())
        }

        /// A ULEB128 varint as parquet 60 reads one: of any length, each
        /// byte's bits shifted by `7 * i` modulo 64 (`wrapping_shl`), so a
        /// long varint wraps around instead of failing (found by the
        /// `parquet_reader` fuzz target: a 14-byte `num_values`).
        fn varint(&mut self) -> Option<u64> {
            let mut value = 0u64;
            let mut shift = 0u32;
            loop {
                let b = self.byte()?;
                value |= u64::from(b & 0x7F).wrapping_shl(shift);
                if b & 0x80 == 0 {
                    return Some(value);
                }
                shift = shift.wrapping_add(7);
            }
        }

        fn zigzag(&mut self) -> Option<i64> {
            let v = self.varint()?;
            Some((v >> 1) as i64 ^ -((v & 1) as i64))
        }

        /// An `i32` field, truncated from its varint as parquet does (`as i32`).
        fn zigzag_i32(&mut self) -> Option<i64> {
            Some(i64::from(self.zigzag()? as i32))
        }

        /// A field header: `(type, id)`, type 0 for the end of the struct.
        /// As parquet 60 reads one: a low nibble of 0 ends the struct
        /// whatever the high one holds, and a type above 13 fails.
        fn field(&mut self, last: i16) -> Option<(u8, i16)> {
            let b = self.byte()?;
            if b & 0x0F == 0 {
                return Some((0, 0));
            }
            if b & 0x0F > 13 {
                return None;
            }
            let delta = i16::from(b >> 4);
            let id = if delta == 0 {
                // parquet truncates a field id read in full (`as i16`).
                self.zigzag()? as i16
            } else {
                last.checked_add(delta)?
            };
            Some((b & 0x0F, id))
        }

        /// A list or set header: `(element type, count)`.
        fn list(&mut self) -> Option<(u8, u64)> {
            let b = self.byte()?;
            let count = match b >> 4 {
                15 => self.varint()?,
                n => u64::from(n),
            };
            Some((b & 0x0F, count))
        }
    }

    /// Why a walk of a page header stopped.
    pub(super) enum Skim {
        /// The bytes end before the struct does, or do not parse.
        Unparsed,
        /// The struct holds what parquet must not be given (the message says what).
        Refused(String),
    }

    /// How parquet skims: Thrift's compact protocol as it is defined, except
    /// that a boolean in a list, set or map takes no byte.
    struct Strict<'a> {
        input: Input<'a>,
        refused: Option<String>,
    }

    impl Strict<'_> {
        /// Like `Input::skip_value`, refusing containers of booleans.
        fn value(&mut self, ty: u8, depth: usize) -> Option<()> {
            if depth == 0 {
                return None;
            }
            let input = &mut self.input;
            match ty {
                1 | 2 => Some(()),
                3 => input.skip(1),
                4..=6 => input.varint().map(|_| ()),
                7 => input.skip(8),
                8 => {
                    let n = input.varint()?;
                    input.skip(n)
                }
                9 | 10 => {
                    let (element, count) = input.list()?;
                    self.container(count, &[element])?;
                    for _ in 0..count {
                        self.value(element, depth - 1)?;
                    }
                    Some(())
                }
                11 => {
                    let count = input.varint()?;
                    if count > 0 {
                        let types = input.byte()?;
                        self.container(count, &[types >> 4, types & 0x0F])?;
                        for _ in 0..count {
                            self.value(types >> 4, depth - 1)?;
                            self.value(types & 0x0F, depth - 1)?;
                        }
                    }
                    Some(())
                }
                12 => self.fields(depth - 1),
                13 => input.skip(16),
                _ => None,
            }
        }

        fn container(&mut self, count: u64, types: &[u8]) -> Option<()> {
            if count > 0 && types.iter().any(|t| matches!(t, 1 | 2)) {
                self.refused = Some(format!(
                    "a Thrift list, set or map of {count} booleans (no field of a valid file is one; parquet would skip it without reading it)"
                ));
                return None;
            }
            Some(())
        }

        /// Skims a struct's fields as parquet skips them: each field header
        /// read as if it followed field 0 (a delta never overflows).
        fn fields(&mut self, depth: usize) -> Option<()> {
            loop {
                let (ty, _) = self.input.field(0)?;
                if ty == 0 {
                    return Some(());
                }
                self.value(ty, depth)?;
            }
        }
    }

    /// What lodt needs of a Parquet `PageHeader`.
    #[derive(Debug, Default)]
    pub(super) struct PageHeader {
        /// Field 1, `type` (0 data page, 2 dictionary page, 3 data page v2).
        pub page_type: Option<i64>,
        /// Field 2, `uncompressed_page_size`.
        pub uncompressed_page_size: Option<i64>,
        /// Field 3, `compressed_page_size`.
        pub compressed_page_size: Option<i64>,
        /// Field 5, `data_page_header`, when present: its values'
        /// `encoding` (field 5.2), when present.
        pub data_page: Option<Option<i64>>,
        /// Field 8, `data_page_header_v2`, when present: its values'
        /// `encoding` (field 8.4), when present.
        pub data_page_v2: Option<Option<i64>>,
        /// A dictionary page's `num_values` (field 7.1).
        pub dictionary_values: Option<i64>,
    }

    /// Reads the `PageHeader` that starts `bytes` as parquet 60 does
    /// (`PageHeader::read_thrift_without_stats`), and returns its length in
    /// bytes and what lodt checks of it. Like parquet, it reads a field it
    /// knows by its id, whatever type the encoding gives it: an integer field
    /// is a varint even where the field header says it is a boolean (which
    /// has no bytes). A field it does not know is skimmed as parquet skips it
    /// (refusing a container of booleans).
    pub(super) fn skim_page_header(bytes: &[u8]) -> Result<(usize, PageHeader), Skim> {
        let mut strict = Strict {
            input: Input { bytes, at: 0 },
            refused: None,
        };
        let mut header = PageHeader::default();
        let mut last = 0;
        let done = loop {
            let Some((ty, id)) = strict.input.field(last) else {
                break false;
            };
            let read = match id {
                _ if ty == 0 => break true,
                1 => strict
                    .input
                    .zigzag_i32()
                    .map(|v| header.page_type = Some(v)),
                3 => strict
                    .input
                    .zigzag_i32()
                    .map(|v| header.compressed_page_size = Some(v)),
                2 => strict
                    .input
                    .zigzag_i32()
                    .map(|v| header.uncompressed_page_size = Some(v)),
                4 => strict.input.zigzag_i32().map(|_| ()),
                // DataPageHeader: num_values, encoding, two level encodings.
                5 => {
                    let found = header.data_page.insert(None);
                    strict.known_int(|f| (1..=4).contains(&f), |_| false, 2, found)
                }
                // IndexPageHeader: a struct, of no field parquet knows.
                6 => strict.record_with(|_| Known::Skip, |_, _| {}),
                // DictionaryPageHeader: num_values, encoding, is_sorted.
                7 => strict.known_int(
                    |f| (1..=2).contains(&f),
                    |f| f == 3,
                    1,
                    &mut header.dictionary_values,
                ),
                // DataPageHeaderV2: five counts and lengths, encoding, is_compressed.
                8 => {
                    let found = header.data_page_v2.insert(None);
                    strict.known_int(|f| (1..=6).contains(&f), |f| f == 7, 4, found)
                }
                _ => strict.value(ty, 64),
            };
            if read.is_none() {
                break false;
            }
            last = id;
        };
        if done {
            Ok((strict.input.at, header))
        } else {
            Err(strict.refused.map_or(Skim::Unparsed, Skim::Refused))
        }
    }

    /// A field of a struct parquet knows, as parquet reads it: by its id,
    /// whatever type its field header gives.
    #[derive(Clone, Copy)]
    enum Known {
        /// An integer or enum: a varint.
        Int,
        /// A boolean: no bytes, and a field header of type 1 or 2 (parquet
        /// fails on another).
        Bool,
        /// An `i8`: one byte.
        Byte,
        /// A double: eight bytes.
        Double,
        /// A string: a varint length, then that many bytes of UTF-8.
        Str,
        /// Binary: a varint length, then that many bytes.
        Bin,
        /// A struct with no fields: one zero byte.
        Empty,
        /// A list whose header must give element type `.0` (parquet's
        /// `validate_list_type`), of elements of kind `.1`.
        List(u8, &'static Known),
        /// A struct whose fields the function names.
        Fields(fn(i16) -> Known),
        /// A union whose variants the function names (`None`: parquet fails).
        Union(fn(i16) -> Option<Known>),
        /// An unknown field: skipped by the type its header gives.
        Skip,
    }

    /// Thrift compact element types, as a list header gives them.
    const I32: u8 = 5;
    const I64: u8 = 6;
    const STRUCT: u8 = 12;

    const INT: Known = Known::Int;
    const KEY_VALUE: Known = Known::Fields(|f| match f {
        1 | 2 => Known::Str,
        _ => Known::Skip,
    });
    /// `ColumnOrder`: a union of empty structs; an unknown variant is skipped.
    const COLUMN_ORDER: Known = Known::Union(|id| {
        Some(match id {
            1..=3 => Known::Empty,
            _ => Known::Skip,
        })
    });
    const TIME_UNIT: Known = Known::Union(|id| (1..=3).contains(&id).then_some(Known::Empty));
    const LOGICAL_TYPE: Known = Known::Union(|id| {
        Some(match id {
            1..=4 | 6 | 11..=15 | 19 => Known::Empty,
            // DecimalType: scale, precision.
            5 => Known::Fields(|f| match f {
                1 | 2 => Known::Int,
                _ => Known::Skip,
            }),
            // TimeType and TimestampType: isAdjustedToUTC, unit.
            7 | 8 => Known::Fields(|f| match f {
                1 => Known::Bool,
                2 => TIME_UNIT,
                _ => Known::Skip,
            }),
            // IntType: bitWidth, isSigned.
            10 => Known::Fields(|f| match f {
                1 => Known::Byte,
                2 => Known::Bool,
                _ => Known::Skip,
            }),
            // VariantType: specification_version.
            16 => Known::Fields(|f| match f {
                1 => Known::Byte,
                _ => Known::Skip,
            }),
            // GeometryType: crs.
            17 => Known::Fields(|f| match f {
                1 => Known::Str,
                _ => Known::Skip,
            }),
            // GeographyType: crs, algorithm.
            18 => Known::Fields(|f| match f {
                1 => Known::Str,
                2 => Known::Int,
                _ => Known::Skip,
            }),
            _ => Known::Skip,
        })
    });
    /// `SchemaElement` (its `num_children`, field 5, is read apart).
    fn schema_element(f: i16) -> Known {
        match f {
            1..=3 | 5..=9 => Known::Int,
            4 => Known::Str,
            10 => LOGICAL_TYPE,
            _ => Known::Skip,
        }
    }
    const STATISTICS: Known = Known::Fields(|f| match f {
        1 | 2 | 5 | 6 => Known::Bin,
        3 | 4 | 9 => Known::Int,
        7 | 8 => Known::Bool,
        _ => Known::Skip,
    });
    const PAGE_ENCODING_STATS: Known = Known::Fields(|f| match f {
        1..=3 => Known::Int,
        _ => Known::Skip,
    });
    const SIZE_STATISTICS: Known = Known::Fields(|f| match f {
        1 => Known::Int,
        2 | 3 => Known::List(I64, &INT),
        _ => Known::Skip,
    });
    const GEOSPATIAL_STATISTICS: Known = Known::Fields(|f| match f {
        // BoundingBox: eight doubles.
        1 => Known::Fields(|f| match f {
            1..=8 => Known::Double,
            _ => Known::Skip,
        }),
        2 => Known::List(I32, &INT),
        _ => Known::Skip,
    });
    /// `ColumnMetaData`, as parquet's `read_column_metadata` reads it
    /// (`path_in_schema` and `key_value_metadata` are skipped by type).
    const COLUMN_META_DATA: Known = Known::Fields(|f| match f {
        1 | 4..=7 | 9..=11 | 14 | 15 => Known::Int,
        2 => Known::List(I32, &INT),
        12 => STATISTICS,
        13 => Known::List(STRUCT, &PAGE_ENCODING_STATS),
        16 => SIZE_STATISTICS,
        17 => GEOSPATIAL_STATISTICS,
        _ => Known::Skip,
    });
    /// `ColumnChunk`, as parquet's `read_column_chunk` reads it (built
    /// without encryption, it skips fields 8 and 9 by type).
    const COLUMN_CHUNK: Known = Known::Fields(|f| match f {
        1 => Known::Str,
        2 | 4..=7 => Known::Int,
        3 => COLUMN_META_DATA,
        _ => Known::Skip,
    });
    const SORTING_COLUMN: Known = Known::Fields(|f| match f {
        1 => Known::Int,
        2 | 3 => Known::Bool,
        _ => Known::Skip,
    });
    /// `RowGroup`, as parquet's `read_row_group` reads it.
    const ROW_GROUP: Known = Known::Fields(|f| match f {
        1 => Known::List(STRUCT, &COLUMN_CHUNK),
        2 | 3 | 5 | 7 => Known::Int,
        4 => Known::List(STRUCT, &SORTING_COLUMN),
        _ => Known::Skip,
    });

    impl Strict<'_> {
        /// One value of kind `known` whose field header gave type `ty`.
        fn known_value(&mut self, known: Known, ty: u8) -> Option<()> {
            let input = &mut self.input;
            match known {
                Known::Int => input.varint().map(|_| ()),
                Known::Bool => matches!(ty, 1 | 2).then_some(()),
                Known::Byte => input.skip(1),
                Known::Double => input.skip(8),
                Known::Str | Known::Bin => {
                    let n = input.varint()?;
                    let start = input.at;
                    input.skip(n)?;
                    let utf8 = std::str::from_utf8(&input.bytes[start..input.at]).is_ok();
                    (utf8 || matches!(known, Known::Bin)).then_some(())
                }
                Known::Empty => (input.byte()? == 0).then_some(()),
                Known::List(element, kind) => {
                    for _ in 0..self.list_of(element)? {
                        self.known_value(*kind, element)?;
                    }
                    Some(())
                }
                Known::Fields(kind) => self.record_with(kind, |_, _| {}),
                Known::Union(variant) => self.union(variant),
                Known::Skip => self.value(ty, 64),
            }
        }

        /// A struct whose fields `kind` knows (the others are skipped),
        /// handing each `Int` field to `int` after it is read.
        fn record_with(
            &mut self,
            kind: impl Fn(i16) -> Known,
            mut int: impl FnMut(i16, i64),
        ) -> Option<()> {
            let mut last = 0;
            loop {
                let (ty, id) = self.input.field(last)?;
                if ty == 0 {
                    return Some(());
                }
                match kind(id) {
                    Known::Int => int(id, self.input.zigzag_i32()?),
                    known => self.known_value(known, ty)?,
                }
                last = id;
            }
        }

        /// A struct parquet knows whose fields `int` are integers and `bool`
        /// booleans (the others skipped); sets `found` to its integer field
        /// `wanted` (`None` when absent).
        fn known_int(
            &mut self,
            int: impl Fn(i16) -> bool,
            bool: impl Fn(i16) -> bool,
            wanted: i16,
            found: &mut Option<i64>,
        ) -> Option<()> {
            *found = None;
            self.record_with(
                |f| {
                    if int(f) {
                        Known::Int
                    } else if bool(f) {
                        Known::Bool
                    } else {
                        Known::Skip
                    }
                },
                |f, v| {
                    if f == wanted {
                        *found = Some(v);
                    }
                },
            )
        }

        /// A union: exactly one field, then the end. `variant` gives the
        /// kind of a variant by its id, `None` for one parquet fails on.
        fn union(&mut self, variant: fn(i16) -> Option<Known>) -> Option<()> {
            let (ty, id) = self.input.field(0)?;
            if ty == 0 {
                return None;
            }
            self.known_value(variant(id)?, ty)?;
            let (ty, _) = self.input.field(id)?;
            (ty == 0).then_some(())
        }

        /// A list header as parquet reads it where it expects elements of
        /// type `element` (`validate_list_type`: an empty list written as a
        /// 0 byte counts as a list of bytes): its count, at most `i32::MAX`
        /// and at most the bytes left (parquet fails on the bytes running
        /// out, or before, as every element takes a byte at least).
        fn list_of(&mut self, element: u8) -> Option<u64> {
            let (found, count) = match self.input.list()? {
                (0, 0) => (3, 0),
                (1 | 2, count) => (2, count),
                other => other,
            };
            let left = (self.input.bytes.len() - self.input.at) as u64;
            let expected = if element == 1 { 2 } else { element };
            (found == expected && count <= i32::MAX as u64 && count <= left).then_some(count)
        }
    }

    /// What lodt checks of a Parquet footer, read as parquet 60 reads a
    /// `FileMetaData` (`parquet_metadata_from_bytes`): each field parquet
    /// knows by its id, whatever type its field header gives, the others
    /// skipped by their type (and a list, set or map of booleans among
    /// those refused). A fuzzed footer whose `num_rows` claimed to be a
    /// string hid a schema from a walk by header types, where parquet read
    /// one that asked for 5.4 GB.
    pub(super) struct Footer {
        /// The `num_children` of every element of the schema parquet builds
        /// (its first), in order (0 where unset); `None` when parquet fails
        /// before it has read a whole schema.
        pub children: Option<Vec<i64>>,
        /// The `converted_type` (field 6) of that schema's root element,
        /// when it has one.
        pub root_converted: Option<i64>,
        /// Why lodt refuses the footer, if it does.
        pub refused: Option<String>,
        /// Where the `FileMetaData` ends, when it reads to its end.
        #[cfg_attr(not(test), allow(dead_code))]
        pub end: Option<usize>,
    }

    /// Reads `footer` as parquet 60 does (see [`Footer`]).
    pub(super) fn read_footer(footer: &[u8]) -> Footer {
        let mut strict = Strict {
            input: Input {
                bytes: footer,
                at: 0,
            },
            refused: None,
        };
        let mut children = None;
        let mut root_converted = None;
        let end = file_metadata(&mut strict, &mut children, &mut root_converted)
            .map(|()| strict.input.at);
        Footer {
            children,
            root_converted,
            refused: strict.refused,
            end,
        }
    }

    /// `FileMetaData`; `None` where parquet fails (or lodt refuses).
    fn file_metadata(
        strict: &mut Strict<'_>,
        schema: &mut Option<Vec<i64>>,
        root_converted: &mut Option<i64>,
    ) -> Option<()> {
        let mut last = 0;
        loop {
            let (ty, id) = strict.input.field(last)?;
            match id {
                _ if ty == 0 => return Some(()),
                // The first schema; parquet skips any later one by its type.
                2 if schema.is_none() => {
                    let mut children = Vec::new();
                    for k in 0..strict.list_of(STRUCT)? {
                        let mut n = 0;
                        strict.record_with(schema_element, |f, v| match f {
                            5 => n = v,
                            6 if k == 0 => *root_converted = Some(v),
                            _ => {}
                        })?;
                        children.push(n);
                    }
                    *schema = Some(children);
                }
                // Row groups before the schema: parquet fails.
                4 if schema.is_none() => return None,
                1 | 3 => strict.known_value(Known::Int, ty)?,
                4 => strict.known_value(Known::List(STRUCT, &ROW_GROUP), ty)?,
                5 => strict.known_value(Known::List(STRUCT, &KEY_VALUE), ty)?,
                6 => strict.known_value(Known::Str, ty)?,
                7 => strict.known_value(Known::List(STRUCT, &COLUMN_ORDER), ty)?,
                _ => strict.value(ty, 64)?,
            }
            last = id;
        }
    }

    /// The first schema element whose `num_children` (from
    /// [`read_footer`]) is negative or more than the elements after it:
    /// `(index, num_children, elements after it)`. parquet sizes a vector by
    /// `num_children` before it reads them (2^31 of them asked it for 16 GiB;
    /// found by the `convert` fuzz target).
    pub(super) fn oversized_group(children: &[i64]) -> Option<(u64, i64, u64)> {
        let count = children.len() as u64;
        children.iter().enumerate().find_map(|(k, &n)| {
            let after = count - k as u64 - 1;
            (n < 0 || n as u64 > after).then_some((k as u64, n, after))
        })
    }

    /// How deep the schema whose child counts are `children` nests groups
    /// (the root is 1), counting no further than just past `limit`.
    pub(super) fn schema_depth(children: &[i64], limit: usize) -> usize {
        let mut open: Vec<i64> = Vec::new();
        let mut depth = 0;
        for &n in children {
            if let Some(parent) = open.last_mut() {
                *parent -= 1;
            }
            if n > 0 {
                open.push(n);
                depth = depth.max(open.len());
                if depth > limit {
                    return depth;
                }
            } else {
                while open.last().is_some_and(|&left| left <= 0) {
                    open.pop();
                }
            }
        }
        depth
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_decode_error_naming_file_and_section() {
        let err = contain::<()>(
            "arrow-ipc",
            "x.arrow",
            || "record batch 3".into(),
            || panic!("boom {}", 7),
        )
        .unwrap_err();
        match err {
            Error::Decode {
                file,
                section,
                message,
            } => {
                assert_eq!(
                    (file.as_str(), section.as_str()),
                    ("x.arrow", "record batch 3")
                );
                assert_eq!(message, "arrow-ipc panicked: boom 7");
            }
            other => panic!("expected Decode, got {other:?}"),
        }
        let ok = contain("parquet", "f", String::new, || Ok(5)).unwrap();
        assert_eq!(ok, 5);
    }

    #[cfg(feature = "parquet")]
    #[test]
    fn the_schema_depth_of_lodt_files_is_two_groups_per_level_and_the_root() {
        use crate::{Batch, Lod, LodTensor};
        for (levels, shape, depth) in [(0, vec![3], 1), (1, vec![3], 3), (32, vec![3, 2], 67)] {
            let lod = if levels == 0 {
                Lod::empty()
            } else {
                let mut lengths = vec![vec![1u64]; levels];
                lengths[levels - 1] = vec![3];
                Lod::try_from_lengths(&lengths).unwrap()
            };
            let n: usize = shape.iter().product();
            let tensor = LodTensor::from_vec(vec![1i32; n], shape, lod).unwrap();
            let batch = Batch::try_from_tensors([("x", tensor)]).unwrap();
            let (bytes, _) = crate::arrow::parquet::write_parquet(
                Vec::new(),
                [Ok::<_, crate::Error>(batch)],
                &Default::default(),
            )
            .unwrap();
            let footer_len =
                u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap());
            let footer = &bytes[bytes.len() - 8 - footer_len as usize..bytes.len() - 8];
            let read = thrift::read_footer(footer);
            assert_eq!(read.end, Some(footer.len()));
            let children = read.children.unwrap();
            assert_eq!(
                thrift::schema_depth(&children, 1000),
                depth,
                "{levels} levels"
            );
        }
        // cut short
        assert!(thrift::read_footer(&[0x19, 0x1C]).children.is_none());
    }

    /// The footer of a Parquet file (between the data and the last 8 bytes).
    #[cfg(feature = "parquet")]
    fn parquet_footer(bytes: &[u8]) -> &[u8] {
        let n = bytes.len();
        let len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
        &bytes[n - 8 - len..n - 8]
    }

    #[cfg(feature = "parquet")]
    #[test]
    fn the_footer_walk_reads_real_footers_to_their_last_byte() {
        // Written by pyarrow (statistics, key-value metadata, logical types,
        // encoding stats, size statistics) and by lodt.
        for name in [
            "arrow/batch0.parquet",
            "arrow/batch1.parquet",
            "max_ratio_zstd.parquet",
            "max_ratio_snappy.parquet",
            "max_ratio_lz4.parquet",
        ] {
            let bytes =
                std::fs::read(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap();
            let footer = parquet_footer(&bytes);
            let read = thrift::read_footer(footer);
            assert_eq!(read.refused, None, "{name}");
            assert_eq!(read.end, Some(footer.len()), "{name}");
            assert!(read.children.unwrap().len() > 1, "{name}");
        }
    }

    #[cfg(feature = "parquet")]
    #[test]
    fn a_page_header_keeps_each_data_page_header_apart() {
        // type 0 (DATA_PAGE), sizes 1 and 1; field 5 (num_values 1, encoding
        // 8 = RLE_DICTIONARY, level encodings 0); field 8 (num_values 1, no
        // nulls, 1 row, encoding 0 = PLAIN, level lengths 0).
        let bytes = [
            0x15, 0x00, 0x15, 0x02, 0x15, 0x02, //
            0x2C, 0x15, 0x02, 0x15, 0x10, 0x15, 0x00, 0x15, 0x00, 0x00, //
            0x3C, 0x15, 0x02, 0x15, 0x00, 0x15, 0x02, 0x15, 0x00, 0x15, 0x00, 0x15, 0x00, 0x00,
            0x00,
        ];
        let (len, header) = thrift::skim_page_header(&bytes).unwrap_or_else(|_| panic!());
        assert_eq!(len, bytes.len());
        assert_eq!(header.page_type, Some(0));
        // parquet decodes a DATA_PAGE by field 5: the check must see
        // RLE_DICTIONARY there, not field 8's PLAIN.
        assert_eq!(header.data_page, Some(Some(8)));
        assert_eq!(header.data_page_v2, Some(Some(0)));
        // Without field 5 (its header byte turned into field 15's).
        let mut without = bytes;
        without[6] = 0xCC;
        let (_, header) = thrift::skim_page_header(&without).unwrap_or_else(|_| panic!());
        assert_eq!(header.data_page, None);
    }

    #[test]
    fn message_framing_is_checked() {
        assert!(message_flatbuffer(&[0xFF; 6]).is_err());
        assert!(message_flatbuffer(&[0xFF, 0xFF, 0xFF, 0xFF, 9, 0, 0, 0, 1]).is_err());
        assert_eq!(message_flatbuffer(&[2, 0, 0, 0, 7, 8, 9]).unwrap(), &[7, 8]);
        assert_eq!(
            message_flatbuffer(&[0xFF, 0xFF, 0xFF, 0xFF, 1, 0, 0, 0, 5]).unwrap(),
            &[5]
        );
        assert!(message_flatbuffer(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]).is_err());
    }
}
