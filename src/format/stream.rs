//! [`StreamReader`]: reads a `.lodt` file in order from any [`Read`] (a pipe,
//! a socket), without the footer, checking every checksum.

use super::Version;
use super::batch_meta::BatchMeta;
use super::error::{ErrorSite, FilePart, FormatError, Result};
use super::layout::{
    BATCH_TAG, FOOTER_TAG, FileHeader, INDEX_ENTRY_LEN, IndexEntry, MAGIC, STRUCT_LEN, Sealed64,
    check_footer_region, check_meta_len, pad64, parse_file_start, read_struct,
};
use super::schema::Schema;
use super::section;
use super::storage::GrowBuf;
use crate::Batch;
use crate::buffer::Buffer;
use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;
use zerocopy::IntoBytes;
use zerocopy::little_endian::{U32, U64};

/// Reads batches in order from any [`Read`], with no seeking and no footer
/// needed: each batch is read whole into one 64-aligned buffer, every checksum
/// (bodies included) is checked, and it is returned as an owned [`Batch`]
/// whose tensors are regions of that buffer.
///
/// At the end, the footer is read and checked against the batches seen. A
/// stream that stops early (a file cut by a crash) yields every complete
/// batch, then an error.
///
/// It reads pipes, FIFOs, stdin and sockets as it reads files (it never
/// seeks), unlike [`LodtFile`](super::LodtFile), which reads by ranges and
/// refuses anything but a regular file.
///
/// ```
/// use lodt::{Batch, LodTensor, format::{StreamReader, Writer}};
/// let t = LodTensor::from_vec(vec![1u32, 2, 3], vec![3], Default::default())?;
/// let mut w = Writer::try_new(Vec::new(), Default::default())?;
/// for _ in 0..4 {
///     w.write(&Batch::try_from_tensors([("t", t.clone())])?)?;
/// }
/// let bytes = w.finish()?;
/// let cut = &bytes[..bytes.len() - 300];         // lose the footer and part of batch 3
/// let results: Vec<_> = StreamReader::try_new(cut)?.collect();
/// assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 3);
/// assert!(results.last().unwrap().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct StreamReader<R: Read> {
    reader: R,
    version: Version,
    metadata: BTreeMap<String, String>,
    pos: u64,
    entries: Vec<IndexEntry>,
    done: bool,
    /// The 2.0 schemas held by the heads read so far.
    schemas: Schemas,
}

/// A batch section read by [`StreamReader::next_section`], checked whole (as
/// `verify` checks it): its bytes, its parsed metadata, and its decoded
/// bytes when it has a compressed buffer.
pub(crate) struct StreamSection {
    pub buf: Arc<GrowBuf>,
    pub meta: BatchMeta,
    pub decoded: Option<Buffer>,
}

/// The most bytes of 2.0 schemas (by [`Schema::cost`])
/// the stream reader keeps: a head may point back at any earlier head that
/// holds a schema (FORMAT.md §12.2), so every one is kept, the oldest
/// dropped past this bound (the last is always kept). lodt's writers point
/// at the last only.
pub(crate) const STREAM_SCHEMA_BYTES: usize = 64 << 20;

/// The schemas held by the heads read so far, by batch, bounded by
/// [`STREAM_SCHEMA_BYTES`].
#[derive(Default)]
struct Schemas {
    held: std::collections::VecDeque<(u64, Arc<Schema>, usize)>,
    bytes: usize,
    /// The last batch whose schema was dropped, if one was.
    dropped: Option<u64>,
}

impl Schemas {
    fn insert(&mut self, k: u64, schema: Arc<Schema>) {
        let cost = schema.cost();
        // A schema like the last one held shares its allocation.
        let schema = match self.held.back() {
            Some((_, last, _)) if **last == *schema => last.clone(),
            _ => schema,
        };
        self.held.push_back((k, schema, cost));
        self.bytes = self.bytes.saturating_add(cost);
        while self.bytes > STREAM_SCHEMA_BYTES && self.held.len() > 1 {
            if let Some((j, _, c)) = self.held.pop_front() {
                self.bytes -= c;
                self.dropped = Some(j);
            }
        }
    }

    fn get(&self, j: u64) -> Option<Arc<Schema>> {
        let i = self.held.binary_search_by_key(&j, |h| h.0).ok()?;
        self.held.get(i).map(|h| h.1.clone())
    }

    /// Why batch `j`'s schema is not held.
    fn missing(&self, j: u64) -> String {
        match self.dropped {
            Some(d) if j <= d => format!(
                "a reference to the schema of batch {j}, which the stream reader no longer \
                 holds (it keeps the last {} MiB of schemas); read the file by ranges",
                STREAM_SCHEMA_BYTES >> 20
            ),
            _ => format!(
                "expected a reference to a batch whose head holds a schema, found one to batch {j}, \
                 which holds none"
            ),
        }
    }
}

impl<R: Read> std::fmt::Debug for StreamReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamReader")
            .field("version", &self.version)
            .field("batches_read", &self.entries.len())
            .field("position", &self.pos)
            .finish()
    }
}

/// Reads until `buf` is full or the source ends; returns the count read.
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl<R: Read> StreamReader<R> {
    /// Reads and checks the file header and the file metadata.
    ///
    /// ```
    /// let err = lodt::format::StreamReader::try_new(&b"GIF89a..."[..]).unwrap_err();
    /// assert!(err.to_string().contains("not a .lodt file"));
    /// ```
    pub fn try_new(mut reader: R) -> Result<Self> {
        let mut head = [0u8; STRUCT_LEN as usize];
        let got = read_full(&mut reader, &mut head)
            .map_err(|e| FormatError::io("reading the file header", e))?;
        let head = &head[..got];
        if !head.starts_with(&MAGIC) {
            return Err(FormatError::NotLodt {
                reason: super::layout::diagnose_magic(head),
            });
        }
        let header: FileHeader = read_struct(head, 0, ErrorSite::file(FilePart::FileHeader))?;
        if !super::layout::known_major(header.major.get()) {
            return Err(FormatError::UnsupportedVersion {
                major: header.major.get(),
                minor: header.minor.get(),
                supported: super::layout::MAX_MAJOR_VERSION,
            });
        }
        header.check_crc(ErrorSite::file(FilePart::FileHeader))?;
        let meta_len = header.meta_len.get();
        check_meta_len(meta_len, ErrorSite::file(FilePart::FileMetadata))?;
        // Cannot overflow: meta_len <= MAX_METADATA_LEN.
        let start_len = pad64(STRUCT_LEN + meta_len).unwrap_or(u64::MAX);
        let mut start = head.to_vec();
        let rest = start_len - STRUCT_LEN;
        (&mut reader)
            .take(rest)
            .read_to_end(&mut start)
            .map_err(|e| FormatError::io("reading the file metadata", e))?;
        if (start.len() as u64) < start_len {
            return Err(FormatError::Truncated {
                at: ErrorSite::file(FilePart::FileMetadata),
                needed: start_len,
                available: start.len() as u64,
            });
        }
        let (version, metadata, data_start) = parse_file_start(&start)?;
        Ok(StreamReader {
            reader,
            version,
            metadata,
            pos: data_start,
            entries: Vec::new(),
            done: false,
            schemas: Schemas::default(),
        })
    }

    /// The file's format version.
    ///
    /// ```
    /// let bytes = lodt::format::to_bytes([], Default::default())?;
    /// let r = lodt::format::StreamReader::try_new(&bytes[..])?;
    /// assert_eq!(r.version().major, 2); // the writer's default
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn version(&self) -> Version {
        self.version
    }

    /// The file's key/value metadata.
    ///
    /// ```
    /// let bytes = lodt::format::to_bytes([], [("a".to_string(), "b".to_string())].into())?;
    /// let r = lodt::format::StreamReader::try_new(&bytes[..])?;
    /// assert_eq!(r.metadata()["a"], "b");
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// The number of bytes read so far.
    ///
    /// ```
    /// let bytes = lodt::format::to_bytes([], Default::default())?;
    /// let r = lodt::format::StreamReader::try_new(&bytes[..])?;
    /// assert_eq!(r.position(), 128);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The number of batches read so far.
    ///
    /// ```
    /// let bytes = lodt::format::to_bytes([&lodt::Batch::new()], Default::default())?;
    /// let mut r = lodt::format::StreamReader::try_new(&bytes[..])?;
    /// r.next().transpose()?;
    /// assert_eq!(r.batches_read(), 1);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn batches_read(&self) -> usize {
        self.entries.len()
    }

    /// The next batch, or `None` after the last one (once the footer has been
    /// read and checked): what `next` returns, transposed.
    fn next_batch(&mut self) -> Result<Option<Batch>> {
        match self.next_section()? {
            None => Ok(None),
            Some(section) => to_batch(section).map(Some),
        }
    }

    /// The next batch section, fully checked (bodies included), with its
    /// parsed metadata; `None` after a valid footer.
    pub(crate) fn next_section(&mut self) -> Result<Option<StreamSection>> {
        if self.done {
            return Ok(None);
        }
        let r = self.read_section();
        if !matches!(r, Ok(Some(_))) {
            self.done = true;
        }
        r
    }

    fn read_section(&mut self) -> Result<Option<StreamSection>> {
        let k = self.entries.len() as u64;
        let offset = self.pos;
        let mut head = [0u8; STRUCT_LEN as usize];
        let got = read_full(&mut self.reader, &mut head)
            .map_err(|e| FormatError::io(format!("reading at offset {offset}"), e))?;
        if got == 0 {
            return Err(FormatError::NoFooter {
                reason: format!("the data ends after batch {k} (offset {offset}) without a footer"),
            });
        }
        if got < head.len() {
            return Err(FormatError::Truncated {
                at: ErrorSite::batch(k, FilePart::BatchHeader),
                needed: offset + STRUCT_LEN,
                available: offset + got as u64,
            });
        }
        if head.starts_with(&FOOTER_TAG) {
            self.read_footer(&head)?;
            return Ok(None);
        }
        if !head.starts_with(&BATCH_TAG) {
            return Err(FormatError::corrupt(
                ErrorSite::batch(k, FilePart::BatchHeader),
                format!(
                    "expected the tag of a batch (\"LODTBTCH\") or of the footer (\"LODTFOOT\"), found {:?}",
                    String::from_utf8_lossy(head.get(..8).unwrap_or(&[]))
                ),
            ));
        }
        // The head first, its checksum checked, then the rest: no length
        // read from the stream sizes anything before a checksum vouches for
        // it (a 1.0 header is 64 bytes and checks its own crc; a 2.0 head
        // is `head_len` bytes, at most `section_len`).
        let (section_len, head_len) = if self.version.major >= 2 {
            super::v2::parse_fixed(&head, offset, k)?
        } else {
            (
                section::parse_header(&head, offset, k)?.section_len.get(),
                STRUCT_LEN,
            )
        };
        let truncated = |got: usize| FormatError::Truncated {
            at: ErrorSite::batch(k, FilePart::BatchHeader),
            needed: offset + section_len,
            available: offset + STRUCT_LEN + got as u64,
        };
        let too_large = || FormatError::TooLarge {
            at: ErrorSite::batch(k, FilePart::BatchHeader),
            what: "section length",
            limit: usize::MAX as u64,
            found: section_len,
        };
        let reading = |e| FormatError::io(format!("reading batch {k} at offset {offset}"), e);
        let mut buf = GrowBuf::from_head(&head);
        let head_rest =
            usize::try_from(head_len.saturating_sub(STRUCT_LEN)).map_err(|_| too_large())?;
        if self.version.major >= 2 {
            if let Err(got) = buf
                .fill_from(&mut self.reader, head_rest)
                .map_err(reading)?
            {
                return Err(truncated(got));
            }
            super::v2::check_head_crc(buf.as_slice(), offset, k, head_len)?;
        }
        let rest = usize::try_from(section_len - STRUCT_LEN).map_err(|_| too_large())?;
        if let Err(got) = buf
            .fill_from(&mut self.reader, rest - head_rest.min(rest))
            .map_err(reading)?
        {
            return Err(truncated(head_rest + got));
        }
        let schemas = &self.schemas;
        let meta = section::parse_any(self.version.major, buf.as_slice(), offset, k, &mut |j| {
            schemas.get(j).ok_or_else(|| {
                FormatError::corrupt(
                    ErrorSite::batch(k, FilePart::BatchHeader),
                    schemas.missing(j),
                )
            })
        })?;
        let decoded = section::check_whole(buf.as_slice(), &meta, offset, &mut |_| {})?;
        if meta.holds_schema
            && let Some(schema) = &meta.schema
        {
            self.schemas.insert(k, schema.clone());
        }
        self.pos = offset + section_len;
        self.entries.push(IndexEntry {
            offset: U64::new(offset),
            length: U64::new(section_len),
            header_crc: U32::new(meta.header_crc),
            table_crc: U32::new(meta.table_crc),
        });
        Ok(Some(StreamSection {
            buf: Arc::new(buf),
            meta,
            decoded,
        }))
    }

    /// Reads the footer whose first 64 bytes are `head` and the trailer, and
    /// checks them against the batches read; then expects the end of the data.
    fn read_footer(&mut self, head: &[u8]) -> Result<()> {
        let footer_offset = self.pos;
        let count = self.entries.len() as u64;
        // Bounded by the batches actually read: the footer header, the
        // padded index and the trailer, then one byte more to see the end.
        let padded = pad64(count * INDEX_ENTRY_LEN).unwrap_or(u64::MAX);
        let mut region = head.to_vec();
        (&mut self.reader)
            .take(padded + STRUCT_LEN + 1)
            .read_to_end(&mut region)
            .map_err(|e| FormatError::io("reading the footer", e))?;
        let entries = check_footer_region(&region, footer_offset, count, "the stream had")?;
        if entries.as_bytes() != self.entries.as_bytes() {
            return Err(FormatError::corrupt(
                ErrorSite::file(FilePart::Index),
                "the index does not describe the batches that precede it",
            ));
        }
        let trailer_offset = footer_offset + STRUCT_LEN + padded;
        self.pos = trailer_offset + STRUCT_LEN;
        let mut extra = [0u8; 1];
        let got = read_full(&mut self.reader, &mut extra)
            .map_err(|e| FormatError::io("reading past the trailer", e))?;
        if got != 0 {
            return Err(FormatError::corrupt(
                ErrorSite::file(FilePart::Trailer),
                format!("data continues after the trailer at offset {}", self.pos),
            ));
        }
        Ok(())
    }
}

/// Builds an owned batch whose tensors' offsets and bodies are windows of
/// the section's bytes (or of its decoded bytes).
fn to_batch(s: StreamSection) -> Result<Batch> {
    let meta = &s.meta;
    let section = section::Section::owned(match s.decoded {
        Some(decoded) => decoded,
        None => Buffer::from_storage(s.buf),
    });
    let mut batch = Batch::new();
    *batch.metadata_mut() = meta.metadata.clone();
    for i in 0..meta.tensors.len() {
        let tensor = section::tensor(&section, meta, i)?;
        let name = meta.tensors.get(i).map_or("", |t| &*t.name);
        batch.push(name, tensor)?;
    }
    Ok(batch)
}

impl<R: Read> Iterator for StreamReader<R> {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        self.next_batch().transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::format::schema::SchemaTensor;

    /// A schema of one tensor whose name takes `bytes` bytes.
    fn schema(bytes: usize, tag: u8) -> Arc<Schema> {
        Arc::new(Schema {
            tensors: vec![SchemaTensor {
                name: String::from_utf8(vec![b'a' + tag % 26; bytes])
                    .unwrap()
                    .into(),
                dtype: DType::UInt8,
                shape: Vec::new(),
                lod: 0,
                scalar: false,
            }],
        })
    }

    #[test]
    fn every_schema_is_kept_up_to_the_bound_then_the_oldest_go_but_never_the_last() {
        let mut s = Schemas::default();
        s.insert(0, schema(10, 0));
        s.insert(3, schema(10, 1));
        assert_eq!(s.get(0).unwrap().tensors[0].name.as_ref(), "a".repeat(10));
        assert_eq!(s.get(3).unwrap().tensors[0].name.as_ref(), "b".repeat(10));
        assert!(s.get(1).is_none());
        assert!(
            s.missing(1).contains("which holds none"),
            "{}",
            s.missing(1)
        );
        // 1 MiB schemas: past 64 MiB the oldest are dropped.
        for k in 4..80u64 {
            s.insert(k, schema(1 << 20, k as u8));
        }
        assert!(s.bytes <= STREAM_SCHEMA_BYTES);
        assert!(s.get(0).is_none() && s.get(10).is_none());
        assert!(s.get(79).is_some() && s.get(40).is_some());
        assert!(s.missing(0).contains("no longer"), "{}", s.missing(0));
        // One schema above the bound is still kept: the last always is.
        s.insert(80, schema(STREAM_SCHEMA_BYTES + 1, 0));
        assert!(s.get(80).is_some() && s.get(79).is_none());
        assert_eq!(s.held.len(), 1);
    }
}
