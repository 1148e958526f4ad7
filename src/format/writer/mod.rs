//! [`Writer`]: writes a `.lodt` file batch by batch, never seeking back.
//!
//! One concern per file: the writer itself (here: the order of what it
//! writes, padding, the index, `finish`), its file output and what `finish`
//! does with it ([`FileSink`], `sink.rs`), the batch layout computed before a
//! batch is written and the footer (`plan.rs`), and the checksum helper
//! thread (`crc.rs`).

mod crc;
mod plan;
mod sink;
#[cfg(test)]
mod tests;

pub(crate) use plan::footer_bytes;
pub use sink::FileSink;

use super::LodtFile;
use super::aligned::Spool;
use super::error::{FormatError, Result};
use super::layout::{FileHeader, FileMetaJson, IndexEntry, MAX_METADATA_LEN, STRUCT_LEN, crc32};
use super::storage::MappedFile;
use super::v2::{self, Compression, SchemaState};
use crate::Batch;
use crate::atomic::{self, AtomicFile, WriterLock};
use crate::batch::WriteStats;
use crate::buffer::Buffer;
use crc::{CrcPlan, CrcThread, Parts};
use plan::{Plan, plan_batch};
use sink::{Append, Out};
use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;
use zerocopy::IntoBytes;
use zerocopy::little_endian::{U32, U64};

/// Zero bytes for padding.
const ZEROS: [u8; 64] = [0; 64];

/// Buffers checksummed on the writing thread are checksummed and written in
/// chunks of this size, so that the write copies each chunk from cache
/// (measured: 2 MiB beat 256 KiB, 1 MiB and 4 MiB).
const CHUNK: usize = 2 << 20;

/// Options of a file [`Writer`].
///
/// ```
/// let opts = lodt::format::WriteOptions { fsync: false, ..Default::default() };
/// assert!(lodt::format::WriteOptions::default().fsync);
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions {
    /// Flush the file (and its directory) to disk before `finish` returns, so
    /// a power cut cannot leave a renamed but empty file. On by default.
    pub fsync: bool,
    /// The format version asked for. `None` (the default): a new file is
    /// written in 2.0 (`spec/FORMAT.md` §12: the schema once, a compact
    /// batch head, compressed buffers on request) and an append writes the
    /// version of its file. `Some(version)`: a new file is written in
    /// `version` (1.0 for readers that predate 2.0), and an append to a file
    /// of another version is refused, before anything is written (a file
    /// holds one version).
    ///
    /// ```
    /// use lodt::format::{Compression, LodtFile, Version, WriteOptions, Writer};
    /// let options = WriteOptions { compression: Compression::Zstd { level: 3 }, ..Default::default() };
    /// assert_eq!(options.format_version, None); // 2.0 for a new file
    /// let t = lodt::LodTensor::from_vec(vec![7i64; 1000], vec![1000], Default::default())?;
    /// let mut w = Writer::try_new_with(Vec::new(), Default::default(), options)?;
    /// w.write(&lodt::Batch::try_from_tensors([("t", t.clone())])?)?;
    /// let bytes = w.finish()?;
    /// assert!(bytes.len() < 1000); // 8,000 bytes of values, compressed
    /// let file = LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.version().to_string(), "2.0");
    /// assert_eq!(file.read_batch(0)?.get("t"), Some(&t));
    /// // 1.0, for readers that predate 2.0 (no compression):
    /// let v1 = WriteOptions { format_version: Some(Version { major: 1, minor: 0 }), ..Default::default() };
    /// let mut w = Writer::try_new_with(Vec::new(), Default::default(), v1)?;
    /// w.write(&lodt::Batch::try_from_tensors([("t", t)])?)?;
    /// assert_eq!(LodtFile::from_bytes(&w.finish()?)?.version().to_string(), "1.0");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// An append with no version writes its file's; an explicit one must be
    /// the file's:
    ///
    /// ```
    /// use lodt::format::{LodtFile, Version, WriteOptions, Writer};
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("old.lodt");
    /// let v1 = WriteOptions { format_version: Some(Version { major: 1, minor: 0 }), ..Default::default() };
    /// let t = lodt::LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?;
    /// let batch = lodt::Batch::try_from_tensors([("t", t)])?;
    /// let mut w = Writer::create_with(&path, Default::default(), v1)?;
    /// w.write(&batch)?;
    /// w.finish()?;
    /// let mut w = Writer::append(&path)?; // no version: the file's, 1.0
    /// w.write(&batch)?;
    /// w.finish()?;
    /// let mut w = Writer::append_with(&path, v1)?; // 1.0, as asked
    /// w.write(&batch)?;
    /// w.finish()?;
    /// let v2 = WriteOptions { format_version: Some(Version { major: 2, minor: 0 }), ..Default::default() };
    /// let err = Writer::append_with(&path, v2).unwrap_err();
    /// assert!(err.to_string().contains("is format 1.0; asked to append format 2.0"), "{err}");
    /// let file = LodtFile::open(&path)?;
    /// assert_eq!((file.version().to_string(), file.num_batches()), ("1.0".into(), 3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub format_version: Option<super::Version>,
    /// How a 2.0 file's buffers are compressed (each kept compressed only
    /// if that makes it smaller); [`Compression::None`] by default, and the
    /// only choice for 1.0.
    pub compression: Compression,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            fsync: true,
            format_version: None,
            compression: Compression::None,
        }
    }
}

impl WriteOptions {
    /// The options for a format version and a compression as the CLI and
    /// Python spell them (`"1.0"`/`"2.0"`; `"none"`, `"lz4"`, `"zstd"`,
    /// `"zstd:LEVEL"`): no version is `None`, the default (2.0 for a new
    /// file, the file's own for an append; see
    /// [`WriteOptions::format_version`]). 1.0 has no compression, so asking
    /// for both is an error.
    ///
    /// ```
    /// use lodt::format::{Compression, Version, WriteOptions};
    /// let o = WriteOptions::for_codec(None, "zstd")?;
    /// assert_eq!((o.format_version, o.compression), (None, Compression::Zstd { level: 3 }));
    /// assert_eq!(WriteOptions::for_codec(None, "none")?.format_version, None);
    /// let v = |text: &str| WriteOptions::for_codec(Some(text), "none").map(|o| o.format_version);
    /// assert_eq!(v("1.0")?, Some(Version { major: 1, minor: 0 }));
    /// assert_eq!(v("2.0")?, Some(Version { major: 2, minor: 0 }));
    /// assert!(v("3.0").is_err());
    /// assert!(WriteOptions::for_codec(Some("1.0"), "lz4").is_err());
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn for_codec(format_version: Option<&str>, compression: &str) -> Result<WriteOptions> {
        let compression: Compression = compression.parse()?;
        let format_version = format_version.map(str::parse).transpose()?;
        let options = WriteOptions {
            format_version,
            compression,
            ..Default::default()
        };
        options.major()?;
        Ok(options)
    }

    /// Checks the version and the compression: the major version of a new
    /// file (1 or 2; the default, [`MAJOR_VERSION`](super::MAJOR_VERSION),
    /// when no version is asked for).
    fn major(&self) -> Result<u16> {
        let Some(version) = self.format_version else {
            return Ok(super::MAJOR_VERSION);
        };
        match (version.major, version.minor) {
            (1, 0) if self.compression != Compression::None => {
                Err(FormatError::Unwritable(format!(
                    "compression {} needs format version 2.0, the options ask for 1.0",
                    self.compression
                )))
            }
            (1, 0) => Ok(1),
            (2, 0) => Ok(2),
            (major, minor) => Err(FormatError::Unwritable(format!(
                "expected format version 1.0 or 2.0, found {major}.{minor}"
            ))),
        }
    }

    /// Checks the options against the version `found` of the file `path`
    /// they append to: an explicit version must be the file's, and a
    /// compression needs a 2.0 file.
    fn check_append(&self, path: &Path, found: super::Version) -> Result<()> {
        self.major()?;
        if let Some(asked) = self.format_version
            && asked != found
        {
            return Err(FormatError::Unwritable(format!(
                "{} is format {found}; asked to append format {asked} (a file holds one \
                 version: append with no format version to write the file's, or convert the file)",
                path.display()
            )));
        }
        if found.major < 2 && self.compression != Compression::None {
            return Err(FormatError::Unwritable(format!(
                "compression {} needs format version 2.0, {} is version {found}",
                self.compression,
                path.display(),
            )));
        }
        Ok(())
    }
}

/// Writes a `.lodt` file one batch at a time, streaming: each batch is written
/// as soon as it is given, and the writer never seeks back. `finish` writes
/// the footer. The writer keeps 24 bytes of index per batch; a file writer
/// also keeps the bytes of the latest batch past its last 64 KiB file offset
/// (the last of its buffer bytes, under 64 KiB, and the checksum table after
/// them) until the next batch or `finish` lets them go out on a 64 KiB file
/// offset (the page cache takes aligned writes faster). It holds a reference
/// to the batch's last buffer rather than a copy, which keeps that buffer's
/// memory alive until then (and makes a `make_mut` on it copy).
///
/// - [`Writer::create`] writes a new file atomically: into a temporary file in
///   the same directory, renamed over the destination by `finish` (after an
///   fsync). Readers that mapped the old file keep the old bytes. If the
///   writer is dropped without `finish`, the temporary file is deleted and the
///   destination is untouched.
/// - [`Writer::append`] adds batches to an existing file in place.
/// - [`Writer::try_new`] writes to any [`Write`] (a pipe, stdout, a `Vec<u8>`).
///
/// ```
/// use lodt::{Batch, Lod, LodTensor, format::{LodtFile, Writer}};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("data.lodt");
/// let mut w = Writer::create(&path, [("source".to_string(), "doc".to_string())].into())?;
/// for i in 0..3i64 {
///     let lod = Lod::try_from_lengths(&[vec![1, 2]])?;
///     let words = LodTensor::from_vec(vec![i, i + 1, i + 2], vec![3], lod)?;
///     let labels = LodTensor::from_vec(vec![i, -i], vec![2], Lod::empty())?;
///     w.write(&Batch::try_from_tensors([("words", words), ("labels", labels)])?)?;
/// }
/// w.finish()?;
/// let file = LodtFile::open(&path)?;
/// assert_eq!(file.num_batches(), 3);
/// assert_eq!(file.batch(2)?.tensor("labels")?.as_slice::<i64>()?, &[2, -2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Writer<W: Write> {
    sink: Option<W>,
    /// The number of bytes written so far (the offset of the next section).
    pos: u64,
    entries: Vec<IndexEntry>,
    commit: Option<fn(&mut W, u64) -> Result<()>>,
    sync: Option<fn(&mut W) -> Result<()>>,
    /// Appending in place.
    appending: bool,
    failed: bool,
    /// What this writer wrote (not counting the batches an append found).
    stats: WriteStats,
    crc_plan: CrcPlan,
    /// The checksum thread, started on the first buffer large enough.
    crc_thread: Option<CrcThread>,
    /// For files: what is written waits here until it can go out in aligned
    /// runs (`format/aligned.rs`). Other sinks get each piece as it comes.
    spool: Option<Spool>,
    /// The major version written (1 or 2).
    major: u16,
    /// How 2.0 buffers are compressed.
    compression: Compression,
    /// The 2.0 schema in force.
    schema: Option<SchemaState>,
}

impl<W: Write> std::fmt::Debug for Writer<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("batches", &self.entries.len())
            .field("bytes", &self.pos)
            .finish()
    }
}

impl Writer<FileSink> {
    /// Starts a new file at `path` with file-level key/value metadata. The
    /// bytes go to a temporary file in the same directory until
    /// [`Writer::finish`] renames it to `path`.
    ///
    /// See the [type-level example](Writer).
    pub fn create(path: impl AsRef<Path>, metadata: BTreeMap<String, String>) -> Result<Self> {
        Self::create_with(path, metadata, WriteOptions::default())
    }

    /// [`Writer::create`] with options.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("a.lodt");
    /// let opts = lodt::format::WriteOptions { fsync: false, ..Default::default() };
    /// lodt::format::Writer::create_with(&path, Default::default(), opts)?.finish()?;
    /// assert_eq!(lodt::format::LodtFile::open(&path)?.num_batches(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_with(
        path: impl AsRef<Path>,
        metadata: BTreeMap<String, String>,
        options: WriteOptions,
    ) -> Result<Self> {
        let file = AtomicFile::create_with(path, options.fsync)?;
        let sink = FileSink {
            out: Out::New(Some(file)),
            fsync: options.fsync,
        };
        let mut w = Writer::start(sink, metadata, Some(Spool::new(0)), &options)?;
        w.commit = Some(FileSink::commit);
        Ok(w)
    }

    /// Opens an existing file to add batches after its last one. The file's
    /// metadata stays as it is.
    ///
    /// The append takes the file's [`WriterLock`]: while it lasts, another
    /// append, a [`recover`](super::recover) or a replacement of the file
    /// fails with [`AtomicError::Locked`](crate::atomic::AtomicError::Locked)
    /// (and this one fails so if another writer holds it). Readers take no
    /// lock.
    ///
    /// The new batches overwrite the old footer, in place; `finish` writes
    /// the new footer. Existing batches are never modified and the file never
    /// shrinks below its length at the start of the append, so readers that
    /// opened it before keep working. Until `finish`, the file has no valid
    /// footer: new readers get [`AtomicError::Locked`](crate::atomic::AtomicError::Locked)
    /// from [`LodtFile::open`].
    ///
    /// The append is all or nothing: if a write fails (a full disk, say), or
    /// if the writer is dropped without `finish`, it is rolled back: the file
    /// is cut back to its old length and its old footer is written back. If
    /// the process dies before `finish`, [`recover`](super::recover) rebuilds
    /// the footer and keeps every batch, old and new, that was completely
    /// written.
    ///
    /// ```
    /// use lodt::{Batch, LodTensor, format};
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("log.lodt");
    /// let b = Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?;
    /// format::save_batch(&path, &b)?;
    /// let mut w = format::Writer::append(&path)?;
    /// w.write(&b)?;
    /// assert!(format::Writer::append(&path).is_err()); // one writer at a time
    /// w.finish()?;
    /// assert_eq!(format::LodtFile::open(&path)?.num_batches(), 2);
    ///
    /// let mut w = format::Writer::append(&path)?;
    /// w.write(&b)?;
    /// drop(w); // no finish: rolled back
    /// assert_eq!(format::LodtFile::open(&path)?.num_batches(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append(path: impl AsRef<Path>) -> Result<Self> {
        Self::append_with(path, WriteOptions::default())
    }

    /// [`Writer::append`] with options. The batches are written in the
    /// file's version: with [`WriteOptions::format_version`] `None` (the
    /// default) whatever it is, and with `Some(version)` only if it is
    /// `version`; another is refused, and the file is left as it was. A
    /// compression needs a 2.0 file.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("log.lodt");
    /// # lodt::format::save_batch(&path, &lodt::Batch::new())?;
    /// let opts = lodt::format::WriteOptions { fsync: false, ..Default::default() };
    /// lodt::format::Writer::append_with(&path, opts)?.finish()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append_with(path: impl AsRef<Path>, options: WriteOptions) -> Result<Self> {
        let lock = WriterLock::acquire(path)?;
        let path = lock.path().to_path_buf();
        atomic::clean_stale_temps(&path);
        // Copy what is needed out of the map and drop it before writing: the
        // footer is about to be overwritten.
        let existing =
            LodtFile::from_storage(Arc::new(MappedFile::from_file(lock.file(), &path)?))?;
        options.check_append(&path, existing.version())?;
        let entries: Vec<IndexEntry> = existing.entries().to_vec();
        let end = existing.footer_offset();
        let old_footer = existing
            .storage()
            .and_then(|s| s.bytes().get(end as usize..))
            .unwrap_or_default()
            .to_vec();
        let major = existing.version().major;
        let schema = match entries.len().checked_sub(1) {
            Some(last) if major >= 2 => {
                let meta = existing.checked_batch(last)?.0;
                meta.schema.clone().map(|schema| SchemaState {
                    batch: meta.schema_at,
                    schema,
                })
            }
            _ => None,
        };
        drop(existing);
        let ctx = || format!("appending to {}", path.display());
        let mut file = lock
            .file()
            .try_clone()
            .map_err(|e| FormatError::io(ctx(), e))?;
        file.seek(SeekFrom::Start(end))
            .map_err(|e| FormatError::io(ctx(), e))?;
        let sink = FileSink {
            out: Out::Append(Append {
                file: Some(file),
                lock: Some(lock),
                path,
                footer_offset: end,
                old_footer,
                fsync: options.fsync,
            }),
            fsync: options.fsync,
        };
        Ok(Writer {
            sink: Some(sink),
            pos: end,
            entries,
            commit: Some(FileSink::commit),
            sync: Some(FileSink::sync),
            appending: true,
            failed: false,
            stats: WriteStats::default(),
            crc_plan: CrcPlan::default_for_machine(),
            crc_thread: None,
            spool: Some(Spool::new(end)),
            major,
            compression: options.compression,
            schema,
        })
    }
}

impl<W: Write> Writer<W> {
    /// Starts a file on any [`Write`]: writes the file header and metadata
    /// now. There is no atomic rename: what is written is written.
    ///
    /// ```
    /// use lodt::format::{StreamReader, Writer};
    /// let t = lodt::LodTensor::from_vec(vec![1.0f64], vec![1], Default::default())?;
    /// let mut w = Writer::try_new(Vec::new(), Default::default())?;
    /// w.write(&lodt::Batch::try_from_tensors([("t", t)])?)?;
    /// let bytes = w.finish()?;
    /// let batches: Vec<_> = StreamReader::try_new(&bytes[..])?.collect::<Result<_, _>>()?;
    /// assert_eq!(batches.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_new(sink: W, metadata: BTreeMap<String, String>) -> Result<Self> {
        Self::start(sink, metadata, None, &WriteOptions::default())
    }

    /// [`Writer::try_new`] with `options`: its format version and
    /// compression ([`WriteOptions::format_version`]; `fsync` applies to
    /// files only).
    ///
    /// ```
    /// use lodt::format::{Version, WriteOptions, Writer};
    /// let options = WriteOptions { format_version: Some(Version { major: 1, minor: 0 }), ..Default::default() };
    /// let mut w = Writer::try_new_with(Vec::new(), Default::default(), options)?;
    /// w.write(&lodt::Batch::new())?;
    /// let bytes = w.finish()?;
    /// assert_eq!(bytes[12], 1); // the major version
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn try_new_with(
        sink: W,
        metadata: BTreeMap<String, String>,
        options: WriteOptions,
    ) -> Result<Self> {
        Self::start(sink, metadata, None, &options)
    }

    /// [`Writer::try_new`], queuing what it writes in `spool` (when given)
    /// until whole aligned runs can go out.
    fn start(
        sink: W,
        metadata: BTreeMap<String, String>,
        spool: Option<Spool>,
        options: &WriteOptions,
    ) -> Result<Self> {
        let major = options.major()?;
        let meta = serde_json::to_vec(&FileMetaJson { metadata })
            .map_err(|e| FormatError::Unwritable(format!("file metadata: {e}")))?;
        if meta.len() as u64 > MAX_METADATA_LEN {
            return Err(FormatError::Unwritable(format!(
                "the file metadata takes {} bytes of JSON, above the limit of {MAX_METADATA_LEN}",
                meta.len()
            )));
        }
        let header = FileHeader::new(&meta, major);
        let mut w = Writer {
            sink: Some(sink),
            pos: 0,
            entries: Vec::new(),
            commit: None,
            sync: None,
            appending: false,
            failed: false,
            stats: WriteStats::default(),
            crc_plan: CrcPlan::default_for_machine(),
            crc_thread: None,
            spool,
            major,
            compression: options.compression,
            schema: None,
        };
        w.put(header.as_bytes())?;
        w.put(&meta)?;
        w.pad()?;
        Ok(w)
    }

    /// The number of batches in the file so far (including, when appending,
    /// the ones it had).
    ///
    /// ```
    /// let w = lodt::format::Writer::try_new(Vec::new(), Default::default())?;
    /// assert_eq!(w.batches_written(), 0);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn batches_written(&self) -> usize {
        self.entries.len()
    }

    /// The number of bytes written so far.
    ///
    /// ```
    /// let w = lodt::format::Writer::try_new(Vec::new(), Default::default())?;
    /// assert_eq!(w.bytes_written(), 128);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn bytes_written(&self) -> u64 {
        self.pos
    }

    fn sink(&mut self) -> Result<&mut W> {
        if self.failed {
            return Err(FormatError::Unwritable(
                "an earlier write failed; the writer cannot continue".into(),
            ));
        }
        self.sink
            .as_mut()
            .ok_or_else(|| FormatError::Unwritable("the writer is finished".into()))
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.sink()?;
        if let Some(spool) = &mut self.spool {
            spool.copy(bytes);
            self.pos += bytes.len() as u64;
            return Ok(());
        }
        let pos = self.pos;
        let r = self.sink()?.write_all(bytes);
        match r {
            Ok(()) => {
                self.pos += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.failed = true;
                Err(FormatError::io(format!("writing at offset {pos}"), e))
            }
        }
    }

    /// Writes `bytes`, which `shared` holds when given: a file's spool holds
    /// such a buffer instead of copying it (when it is the same memory).
    fn put_shared(&mut self, bytes: &[u8], shared: Option<&Buffer>) -> Result<()> {
        self.sink()?;
        match (&mut self.spool, shared) {
            (Some(spool), Some(b)) if std::ptr::eq(b.as_slice(), bytes) => {
                spool.share(b);
                self.pos += bytes.len() as u64;
                Ok(())
            }
            _ => self.put(bytes),
        }
    }

    /// Writes what the spool holds: up to its last aligned offset, or
    /// (`all`) everything.
    fn drain(&mut self, all: bool) -> Result<()> {
        let Some(spool) = &mut self.spool else {
            return Ok(());
        };
        let sink = match self.sink.as_mut() {
            Some(sink) if !self.failed => sink,
            _ => return Ok(()),
        };
        let at = self.pos;
        let r = if all {
            spool.write_all(sink)
        } else {
            spool.write_aligned(sink)
        };
        r.map_err(|e| {
            self.failed = true;
            FormatError::io(format!("writing the bytes before offset {at}"), e)
        })
    }

    fn pad(&mut self) -> Result<()> {
        let pad = (64 - (self.pos % 64) as usize) % 64;
        self.put(&ZEROS[..pad])
    }

    /// Writes zeros up to file offset `offset` (less than 64 bytes ahead).
    fn pad_to(&mut self, offset: u64) -> Result<()> {
        let gap = offset.checked_sub(self.pos).filter(|&g| g < 64);
        match gap {
            Some(gap) => self.put(&ZEROS[..gap as usize]),
            None => {
                self.failed = true;
                Err(FormatError::Unwritable(format!(
                    "internal layout error: at offset {}, asked to pad to {offset}",
                    self.pos
                )))
            }
        }
    }

    /// Writes one batch ([`BatchWriter::write`](crate::batch::BatchWriter::write)).
    ///
    /// ```
    /// use lodt::{Batch, LodTensor};
    /// let mut w = lodt::format::Writer::try_new(Vec::new(), Default::default())?;
    /// let t = LodTensor::from_vec(vec![true, false], vec![2], Default::default())?;
    /// w.write(&Batch::try_from_tensors([("mask", t)])?)?;
    /// assert_eq!(w.batches_written(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write(&mut self, batch: &Batch) -> Result<()> {
        self.sink()?;
        if self.major >= 2 {
            return self.write_v2(batch);
        }
        let plan = plan_batch(batch, self.entries.len() as u64, self.pos)?;
        // Large buffers go to the checksum thread first, to be checksummed
        // while this thread writes the header and the buffers.
        let offloaded = self.offload(&plan.shared);
        let start = self.pos;
        self.put(plan.header.as_bytes())?;
        self.put(&plan.meta)?;
        self.pad()?;
        let crcs = self.write_buffers(&plan, offloaded)?;
        let mut table: Vec<u8> = crcs.iter().flat_map(|c| c.to_le_bytes()).collect();
        let table_crc = crc32(&table);
        table.extend_from_slice(&table_crc.to_le_bytes());
        self.pad()?;
        self.put(&table)?;
        self.pad()?;
        if self.pos - start != plan.header.section_len.get() {
            self.failed = true;
            return Err(FormatError::Unwritable(format!(
                "internal layout error: wrote {} bytes for a batch planned at {}",
                self.pos - start,
                plan.header.section_len.get()
            )));
        }
        self.entries.push(IndexEntry {
            offset: U64::new(start),
            length: U64::new(self.pos - start),
            header_crc: plan.header.crc,
            table_crc: U32::new(table_crc),
        });
        self.stats.add(batch);
        Ok(())
    }

    /// Writes buffer `b` (whose storage is `shared`, when the batch owns it)
    /// in chunks of [`CHUNK`], each checksummed into `crc` when given: a
    /// file's spool holds each chunk of a shared buffer, and writes it out
    /// while it is still in cache.
    fn put_chunks(
        &mut self,
        b: &[u8],
        shared: Option<&Buffer>,
        mut crc: Option<&mut crc32fast::Hasher>,
    ) -> Result<()> {
        let spooled = self.spool.is_some();
        for (i, chunk) in b.chunks(CHUNK).enumerate() {
            if let Some(h) = crc.as_deref_mut() {
                h.update(chunk);
            }
            let start = i * CHUNK;
            let piece = shared
                .filter(|_| spooled)
                .and_then(|s| s.slice(start..start + chunk.len()).ok());
            self.put_shared(chunk, piece.as_ref())?;
            if chunk.len() == CHUNK {
                self.drain(false)?;
            }
        }
        Ok(())
    }

    /// Writes a 2.0 batch (`spec/FORMAT.md` §12): its head (checksums
    /// computed first), then its buffers, raw ones 64-aligned.
    fn write_v2(&mut self, batch: &Batch) -> Result<()> {
        let index = self.entries.len() as u64;
        let state = self.schema.clone();
        let start = self.pos;
        let enc = v2::encode(
            batch,
            index,
            start,
            &state,
            self.compression,
            &mut |buffers, shared| self.checksums_v2(buffers, shared),
        )?;
        self.put(&enc.head)?;
        for ((b, shared), &at) in enc.buffers.iter().zip(&enc.shared).zip(&enc.offsets) {
            self.pad_to(at)?;
            self.put_chunks(b, shared.as_ref(), None)?;
        }
        self.pad()?;
        if self.pos - start != enc.section_len {
            self.failed = true;
            return Err(FormatError::Unwritable(format!(
                "internal layout error: wrote {} bytes for a batch planned at {}",
                self.pos - start,
                enc.section_len
            )));
        }
        self.entries.push(IndexEntry {
            offset: U64::new(start),
            length: U64::new(enc.section_len),
            header_crc: U32::new(enc.header_crc),
            table_crc: U32::new(enc.table_crc),
        });
        self.schema = Some(enc.state);
        self.stats.add(batch);
        // This batch goes out while the next one's checksums are computed
        // (`checksums_v2` drains the spool): the spool holds one batch, not
        // every batch until `finish`.
        Ok(())
    }

    /// What this writer wrote so far ([`BatchWriter::stats`](crate::batch::BatchWriter::stats)); an append
    /// counts only the batches it added (see [`Writer::batches_written`]).
    ///
    /// ```
    /// use lodt::{Batch, LodTensor};
    /// let mut w = lodt::format::Writer::try_new(Vec::new(), Default::default())?;
    /// let t = LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?;
    /// w.write(&Batch::try_from_tensors([("x", t)])?)?;
    /// assert_eq!((w.stats().batches, w.stats().rows), (1, 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> WriteStats {
        self.stats
    }

    /// The checksums of a 2.0 batch's buffers, which its head holds (so they
    /// are needed before the batch is written): large shared buffers go to
    /// the checksum thread, and the bytes queued before this batch (the
    /// batch before, held by the spool) go out to the file while it
    /// computes them; the others are computed here.
    fn checksums_v2(
        &mut self,
        buffers: &[std::borrow::Cow<'_, [u8]>],
        shared: &[Option<Buffer>],
    ) -> Result<Vec<u32>> {
        let offloaded = self.offload(shared);
        self.drain(false)?;
        let mut crcs = Vec::with_capacity(buffers.len());
        for (b, jobs) in buffers.iter().zip(offloaded) {
            crcs.push(match (jobs, &self.crc_thread) {
                (Some(jobs), Some(thread)) => thread.collect(jobs.jobs()),
                _ => super::section::crc32_large(b),
            });
        }
        Ok(crcs)
    }

    /// Sends the parts of each large buffer of `shared` (a batch's buffers
    /// that are shared [`Buffer`]s) to the checksum thread (started if need
    /// be); returns their jobs, per buffer (`None`: checksummed on this
    /// thread).
    fn offload(&mut self, shared: &[Option<Buffer>]) -> Vec<Option<Parts>> {
        let crc_plan = self.crc_plan;
        let large = |s: &Option<Buffer>| matches!(s, Some(b) if b.len() >= crc_plan.offload_min);
        let buffers: Vec<&Buffer> = shared
            .iter()
            .filter(|s| large(s))
            .filter_map(Option::as_ref)
            .collect();
        if buffers.is_empty() {
            return shared.iter().map(|_| None).collect();
        }
        if self.crc_thread.is_none() {
            self.crc_thread = CrcThread::start();
        }
        let Some(thread) = &self.crc_thread else {
            return shared.iter().map(|_| None).collect();
        };
        let mut parts = thread.submit(&buffers, crc_plan.part.max(1)).into_iter();
        shared
            .iter()
            .map(|s| if large(s) { parts.next() } else { None })
            .collect()
    }

    /// Writes the buffers at their planned offsets and returns their CRC32s.
    ///
    /// A buffer sent to the checksum thread ([`Writer::offload`]) is written
    /// whole while that thread checksums it, then its parts' checksums are
    /// combined (a part the thread has not started is computed here). Other
    /// buffers go out in cache-sized chunks, each checksummed just before it
    /// is written, so the data is read from memory once: the write copies it
    /// from cache.
    fn write_buffers(
        &mut self,
        plan: &Plan<'_>,
        offloaded: Vec<Option<Parts>>,
    ) -> Result<Vec<u32>> {
        let mut crcs = Vec::with_capacity(plan.buffers.len());
        let mut pending = Vec::new();
        let buffers = plan.buffers.iter().zip(&plan.shared);
        for (((b, shared), &at), jobs) in buffers.zip(&plan.offsets).zip(offloaded) {
            self.pad_to(at)?;
            match jobs {
                Some(jobs) => {
                    self.put_shared(b, shared.as_ref())?;
                    pending.push((crcs.len(), jobs));
                    crcs.push(0);
                }
                None => {
                    let mut h = crc32fast::Hasher::new();
                    self.put_chunks(b, shared.as_ref(), Some(&mut h))?;
                    crcs.push(h.finalize());
                }
            }
        }
        // Out to the file while the checksum thread works.
        self.drain(false)?;
        if let Some(thread) = &self.crc_thread {
            for (i, jobs) in pending {
                if let Some(c) = crcs.get_mut(i) {
                    *c = thread.collect(jobs.jobs());
                }
            }
        }
        Ok(crcs)
    }

    /// Writes the footer, then flushes; for [`Writer::create`], syncs and
    /// renames the temporary file to the destination. Returns the sink
    /// ([`BatchWriter::finish`](crate::batch::BatchWriter::finish)); the writer is spent: another `write` or
    /// `finish` is an error.
    ///
    /// ```
    /// let mut w = lodt::format::Writer::try_new(Vec::new(), Default::default())?;
    /// let bytes = w.finish()?;
    /// assert_eq!(bytes.len(), 256); // header + metadata, footer header, trailer
    /// assert!(w.finish().is_err());
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn finish(&mut self) -> Result<W> {
        self.write_footer()?;
        self.sink
            .take()
            .ok_or_else(|| FormatError::Unwritable("the writer is finished".into()))
    }

    /// Writes out what the spool holds and flushes the sink.
    fn flush_all(&mut self) -> Result<()> {
        self.drain(true)?;
        let end = self.pos;
        self.sink()?
            .flush()
            .map_err(|e| FormatError::io(format!("flushing at offset {end}"), e))
    }

    fn write_footer(&mut self) -> Result<()> {
        if self.appending {
            // Make the new batches durable before the footer that points at
            // them, so a crash cannot leave a footer over missing data.
            self.drain(true)?;
            if let Some(sync) = self.sync {
                sync(self.sink()?)?;
            }
            super::hooks::at(super::hooks::Point::AppendBatchesWritten);
        }
        let footer = footer_bytes(&self.entries, self.pos);
        if self.appending {
            let (index, trailer) = footer.split_at(footer.len() - STRUCT_LEN as usize);
            self.put(index)?;
            self.flush_all()?;
            super::hooks::at(super::hooks::Point::AppendFooterWritten);
            self.put(trailer)?;
        } else {
            self.put(&footer)?;
        }
        self.flush_all()?;
        if self.appending {
            super::hooks::at(super::hooks::Point::AppendTrailerWritten);
        }
        let end = self.pos;
        if let Some(commit) = self.commit {
            commit(self.sink()?, end)?;
        }
        Ok(())
    }
}
