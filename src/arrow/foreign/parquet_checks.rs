//! The checks of a Parquet file before parquet decodes it: the footer's
//! counts and byte ranges, the schema's depth and child counts, and the page
//! headers (walked with [`thrift`](super::thrift)).

use super::*;

/// Checks what parquet trusts in a file's metadata: row counts, value counts
/// and column chunk byte ranges (non-negative, inside the `file_len`-byte
/// file). parquet asserts some of them (`ColumnChunkMetaData::byte_range`
/// panics on a negative offset) and sizes reads by others.
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
pub(crate) const MAX_PARQUET_SCHEMA_DEPTH: usize = 128;

/// Checks, before parquet decodes the footer, that the schema it holds does
/// not nest groups deeper than [`MAX_PARQUET_SCHEMA_DEPTH`]. Reads the footer
/// (the file's last 8 bytes give its length) and reads its Thrift encoding as
/// parquet does ([`thrift::read_footer`]) for the schema elements' child
/// counts, refusing a group claiming more children than follow it and a list
/// of booleans parquet would skip. A footer parquet fails on before it has a
/// whole schema is left to parquet, which reports it (before building any
/// tree).
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
pub(crate) fn check_parquet_page_headers(
    file: &str,
    reader: &std::fs::File,
    metadata: &::parquet::file::metadata::ParquetMetaData,
    index: usize,
) -> Result<()> {
    use std::io::{Seek, SeekFrom};
    let Some(row_group) = metadata.row_groups().get(index) else {
        return Ok(());
    };
    let mut reader = reader;
    let file_len = reader.seek(SeekFrom::End(0))?;
    for column in row_group.columns() {
        let chunk = Chunk {
            file,
            index,
            column,
        };
        chunk.walk_pages(reader, file_len)?;
    }
    Ok(())
}

/// One column chunk of a row group whose page headers are walked.
struct Chunk<'a> {
    file: &'a str,
    /// The row group.
    index: usize,
    column: &'a ::parquet::file::metadata::ColumnChunkMetaData,
}

impl Chunk<'_> {
    /// The error for the page header at byte `pos`.
    fn refuse(&self, pos: u64, message: String) -> Error {
        decode_error(
            self.file,
            &format!(
                "row group {} column {:?}",
                self.index,
                self.column.column_path().string()
            ),
            format!("the page header at byte {pos}: {message}"),
        )
    }

    /// Walks the chunk's pages as parquet does (see
    /// [`check_parquet_page_headers`]), checking each header.
    fn walk_pages(&self, reader: &std::fs::File, file_len: u64) -> Result<()> {
        let column = self.column;
        let start = column
            .dictionary_page_offset()
            .unwrap_or_else(|| column.data_page_offset());
        let (Ok(start), Ok(size)) = (
            u64::try_from(start),
            u64::try_from(column.compressed_size()),
        ) else {
            return Ok(()); // refused by check_parquet_metadata
        };
        let end = start.saturating_add(size);
        // Where a header starts, and whether a dictionary page came before it.
        let mut todo = vec![(start, false)];
        let mut walked = std::collections::HashSet::new();
        while let Some((pos, dictionary)) = todo.pop() {
            // A position walked without a dictionary was checked the hardest.
            if pos >= end.min(file_len)
                || walked.contains(&(pos, false))
                || !walked.insert((pos, dictionary))
            {
                continue;
            }
            let remaining = end - pos;
            let Some((header_len, header)) = self.read_header(reader, pos, file_len - pos)? else {
                continue;
            };
            let header_len = header_len as u64;
            // The peek's way past an index page (type 1): the next header
            // right after this one, if this one fits in the chunk.
            if header.page_type == Some(1) && header_len < remaining {
                todo.push((pos + header_len, dictionary));
            }
            let dictionary = self.check_data_page(pos, &header, dictionary)?;
            let Some(page_len) = header
                .compressed_page_size
                .and_then(|n| u64::try_from(n).ok())
            else {
                continue;
            };
            self.check_sizes(pos, &header, page_len)?;
            if let Some(used) = header_len
                .checked_add(page_len)
                .filter(|&used| used <= remaining)
            {
                todo.push((pos + used, dictionary));
            }
        }
        Ok(())
    }

    /// The page header at byte `pos` (`rest` bytes before the file's end)
    /// and its length, read in windows growing from 4 KiB; `None` where it
    /// does not parse (parquet then stops with an error of its own).
    fn read_header(
        &self,
        reader: &std::fs::File,
        pos: u64,
        rest: u64,
    ) -> Result<Option<(usize, thrift::PageHeader)>> {
        use std::io::{Read, Seek, SeekFrom};
        let mut reader = reader;
        let mut window = rest.min(4096);
        loop {
            reader.seek(SeekFrom::Start(pos))?;
            let mut bytes = vec![0u8; window as usize];
            reader.read_exact(&mut bytes)?;
            match thrift::skim_page_header(&bytes) {
                Ok(found) => return Ok(Some(found)),
                Err(thrift::Skim::Refused(message)) => return Err(self.refuse(pos, message)),
                Err(thrift::Skim::Unparsed) if window < rest => {
                    window = rest.min(window.saturating_mul(16));
                }
                Err(thrift::Skim::Unparsed) => return Ok(None),
            }
        }
    }

    /// Checks that a data page's header has the header its type names, and
    /// that a dictionary-encoded data page comes after a dictionary page
    /// (`dictionary`: one came before). Returns whether one has come after
    /// this page.
    fn check_data_page(
        &self,
        pos: u64,
        header: &thrift::PageHeader,
        dictionary: bool,
    ) -> Result<bool> {
        // parquet reads a data page's header by its type, and unwraps it
        // (`PageMetadata::try_from`: it panics when the header is absent).
        let data_page = match header.page_type {
            Some(0) => Some(("data_page_header", header.data_page)),
            Some(3) => Some(("data_page_header_v2", header.data_page_v2)),
            _ => None,
        };
        if let Some((name, None)) = data_page {
            return Err(self.refuse(pos, format!("a data page without its {name}")));
        }
        // parquet sets up a column's dictionary decoder when it reads a
        // dictionary page, and panics at a dictionary-encoded data page
        // that comes before any (`Decoder for dict should have been set`).
        // The encoding is the one in the header the page's type names.
        let encoding = data_page.and_then(|(_, found)| found.flatten());
        match (header.page_type, encoding) {
            (Some(2), _) => Ok(true),
            (Some(_), Some(encoding @ (2 | 8))) if !dictionary => {
                let name = if encoding == 2 {
                    "PLAIN_DICTIONARY"
                } else {
                    "RLE_DICTIONARY"
                };
                Err(self.refuse(
                    pos,
                    format!(
                        "a data page encoded {name}, and no dictionary page before it in the column chunk"
                    ),
                ))
            }
            _ => Ok(dictionary),
        }
    }

    /// Checks the sizes a page header of a page of `page_len` compressed
    /// bytes claims, which parquet allocates by: its uncompressed size, and a
    /// dictionary page's number of values.
    fn check_sizes(&self, pos: u64, header: &thrift::PageHeader, page_len: u64) -> Result<()> {
        let column = self.column;
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
                return Err(self.refuse(
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
                return Err(self.refuse(
                    pos,
                    format!(
                        "a dictionary page of {values} values, and its {bytes} bytes hold at \
                         most {most} plain-encoded {:?} values",
                        column.column_type()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Room for the framing of a compressed page (a codec's headers, one
/// Zstandard block) beyond its ratio, in [`max_expansion`]'s bound.
const EXPANSION_SLACK: u64 = 1 << 17;

/// The most bytes one compressed byte of `codec` can decode to, for the
/// codecs lodt decodes (`None`: no decompression, or a codec parquet is built
/// without, which it refuses before allocating). Snappy: a 3-byte copy
/// produces at most 64 bytes. LZ4: each further byte of a match length adds
/// 255. Zstandard: a 4-byte RLE block produces at most 128 KiB (the largest
/// block). Found by the `convert` fuzz target: a page header claiming 2 GiB
/// for a few bytes of page made parquet allocate 2 GiB.
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
