//! [`Writer`]: writes a `.lodt` file batch by batch, never seeking back.

use super::LodtFile;
use super::aligned::Spool;
use super::error::{FormatError, Result};
use super::layout::{
    BATCH_TAG, BatchHeader, BatchMetaJson, BufferJson, FileHeader, FileMetaJson, FooterHeader,
    IndexEntry, MAX_METADATA_LEN, STRUCT_LEN, Sealed64, TensorJson, Trailer, crc32, pad64,
};
use super::storage::MappedFile;
use crate::Batch;
use crate::atomic::{self, AtomicFile, WriterLock};
use crate::batch::WriteStats;
use crate::buffer::Buffer;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use zerocopy::IntoBytes;
use zerocopy::little_endian::{U32, U64};

/// Zero bytes for padding.
const ZEROS: [u8; 64] = [0; 64];

/// Buffers checksummed on the writing thread are checksummed and written in
/// chunks of this size, so that the write copies each chunk from cache
/// (measured: 2 MiB beat 256 KiB, 1 MiB and 4 MiB).
const CHUNK: usize = 2 << 20;

/// How the writer computes checksums: buffers of at least `offload_min`
/// bytes (that live in a shared [`Buffer`]) are checksummed on a helper
/// thread, in parts of `part` bytes, while the writing thread writes them.
#[derive(Debug, Clone, Copy)]
struct CrcPlan {
    offload_min: usize,
    part: usize,
}

impl CrcPlan {
    /// Off the writing thread from 128 KiB (below, sending the work costs
    /// about what computing it does), in 1 MiB parts; on the writing thread
    /// alone on a machine of one core.
    fn default_for_machine() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        CrcPlan {
            offload_min: if cores > 1 { 128 << 10 } else { usize::MAX },
            part: 1 << 20,
        }
    }
}

/// Options of a file [`Writer`].
///
/// ```
/// let opts = lodt::format::WriteOptions { fsync: false };
/// assert!(lodt::format::WriteOptions::default().fsync);
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions {
    /// Flush the file (and its directory) to disk before `finish` returns, so
    /// a power cut cannot leave a renamed but empty file. On by default.
    pub fsync: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions { fsync: true }
    }
}

/// The output of a file [`Writer`]: a buffered file and what `finish` does
/// with it.
///
/// - For a new file ([`Writer::create`]): an [`AtomicFile`], renamed over
///   the destination by `finish`. Dropped uncommitted, the temporary file is
///   deleted and the destination is untouched.
/// - For an append ([`Writer::append`]): the file itself, under its
///   [`WriterLock`](crate::atomic::WriterLock). If a write fails, or if the
///   sink is dropped before `finish` committed the new footer, the append is
///   rolled back: the file is cut back to its length before the append and
///   its old footer is written back, so it is byte for byte what it was.
///
/// ```
/// use lodt::format::{FileSink, Writer};
/// let dir = tempfile::tempdir()?;
/// let mut w: Writer<FileSink> = Writer::create(dir.path().join("x.lodt"), Default::default())?;
/// let _sink: FileSink = w.finish()?; // committed: renamed into place
/// assert!(dir.path().join("x.lodt").exists());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct FileSink {
    out: Out,
    fsync: bool,
}

#[derive(Debug)]
enum Out {
    /// A new file; `None` once committed.
    New(Option<AtomicFile>),
    /// Appending in place.
    Append(Append),
}

/// An append in progress, and what rolling it back needs.
#[derive(Debug)]
struct Append {
    /// The file, a duplicate of the lock's descriptor; `None` once committed
    /// or rolled back.
    file: Option<File>,
    /// The file's writer lock, held until the append is committed or rolled back.
    lock: Option<WriterLock>,
    path: PathBuf,
    /// Where the old footer starts (and the new batches).
    footer_offset: u64,
    /// The old footer and trailer: the bytes from `footer_offset` to the old end.
    old_footer: Vec<u8>,
    fsync: bool,
}

impl Append {
    /// Undoes the append: drops unwritten bytes, cuts the file back to its
    /// old length and writes the old footer back. A no-op once committed or
    /// rolled back.
    fn roll_back(&mut self) -> std::io::Result<()> {
        let Some(mut file) = self.file.take() else {
            return Ok(());
        };
        let old_len = self.footer_offset + self.old_footer.len() as u64;
        // Cut first: it frees space, which a full disk needs.
        file.set_len(old_len)?;
        file.seek(SeekFrom::Start(self.footer_offset))?;
        file.write_all(&self.old_footer)?;
        if self.fsync {
            file.sync_all()?;
        }
        self.lock = None;
        Ok(())
    }

    /// Rolls back after `e` and says so in the error.
    fn fail(&mut self, e: std::io::Error) -> std::io::Error {
        let kind = e.kind();
        let path = self.path.display().to_string();
        match self.roll_back() {
            Ok(()) => std::io::Error::new(
                kind,
                format!("{e}; the append to {path} was rolled back: the file is as it was before"),
            ),
            Err(undo) => std::io::Error::new(
                kind,
                format!(
                    "{e}; rolling back the append to {path} failed too ({undo}): run `lodt recover` on it"
                ),
            ),
        }
    }

    fn out(&mut self) -> std::io::Result<&mut File> {
        self.file.as_mut().ok_or_else(|| {
            std::io::Error::other(format!(
                "the append to {} is over (committed or rolled back)",
                self.path.display()
            ))
        })
    }
}

impl Drop for Append {
    fn drop(&mut self) {
        // Not committed: undo (best effort; `recover` repairs what this cannot).
        let _ = self.roll_back();
    }
}

/// The error of a finished (committed) new-file sink.
fn finished() -> std::io::Error {
    std::io::Error::other("the file is finished")
}

impl Write for FileSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf).map(|()| buf.len())
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match &mut self.out {
            Out::New(w) => w.as_mut().ok_or_else(finished)?.write_all(buf),
            Out::Append(a) => match a.out()?.write_all(buf) {
                Ok(()) => Ok(()),
                Err(e) => Err(a.fail(e)),
            },
        }
    }
    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        match &mut self.out {
            Out::New(w) => w.as_mut().ok_or_else(finished)?.write_vectored(bufs),
            Out::Append(a) => match a.out()?.write_vectored(bufs) {
                // A file that takes nothing of a non-empty write is full (or
                // broken): roll back now, as for any other failed write.
                Ok(0) if bufs.iter().any(|b| !b.is_empty()) => Err(a.fail(std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    "the file took no bytes",
                ))),
                Ok(n) => Ok(n),
                // One system call, which a signal may interrupt: the caller
                // retries it, and the append goes on.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Err(e),
                Err(e) => Err(a.fail(e)),
            },
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.out {
            Out::New(w) => w.as_mut().ok_or_else(finished)?.flush(),
            Out::Append(a) => match a.out()?.flush() {
                Ok(()) => Ok(()),
                Err(e) => Err(a.fail(e)),
            },
        }
    }
}

impl FileSink {
    fn path(&self) -> PathBuf {
        match &self.out {
            Out::New(Some(w)) => w.path().to_path_buf(),
            Out::New(None) => PathBuf::new(),
            Out::Append(a) => a.path.clone(),
        }
    }

    /// Flushes and, with `fsync`, syncs the data to disk (appending only).
    fn sync(&mut self) -> Result<()> {
        let ctx = format!("writing {}", self.path().display());
        self.flush().map_err(|e| FormatError::io(ctx.clone(), e))?;
        let fsync = self.fsync;
        if let Out::Append(a) = &mut self.out
            && fsync
        {
            let r = a.out().and_then(|w| w.sync_all());
            if let Err(e) = r {
                return Err(FormatError::io(ctx, a.fail(e)));
            }
        }
        Ok(())
    }

    /// Makes the written file the destination: renames a new file into
    /// place, or ends an append (the file is `end` bytes long).
    fn commit(&mut self, end: u64) -> Result<()> {
        match &mut self.out {
            Out::New(w) => {
                let atomic = w
                    .take()
                    .ok_or_else(|| FormatError::io("committing", finished()))?;
                atomic.commit()?;
            }
            Out::Append(_) => {
                self.sync()?;
                let Out::Append(a) = &mut self.out else {
                    return Ok(());
                };
                // An append never makes the file shorter; drop stale bytes if
                // it somehow would have.
                let r = a.out().and_then(|file| {
                    if file.metadata()?.len() > end {
                        file.set_len(end)?;
                    }
                    Ok(())
                });
                if let Err(e) = r {
                    let e = a.fail(e);
                    return Err(FormatError::io(
                        format!("appending to {}", a.path.display()),
                        e,
                    ));
                }
                // Committed: nothing to roll back, and the lock is released.
                a.file = None;
                a.lock = None;
            }
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
    /// let opts = lodt::format::WriteOptions { fsync: false };
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
        let mut w = Writer::start(sink, metadata, Some(Spool::new(0)))?;
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

    /// [`Writer::append`] with options.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("log.lodt");
    /// # lodt::format::save_batch(&path, &lodt::Batch::new())?;
    /// let opts = lodt::format::WriteOptions { fsync: false };
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
        let entries: Vec<IndexEntry> = existing.entries().to_vec();
        let end = existing.footer_offset();
        let old_footer = existing
            .storage()
            .and_then(|s| s.bytes().get(end as usize..))
            .unwrap_or_default()
            .to_vec();
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
        Self::start(sink, metadata, None)
    }

    /// [`Writer::try_new`], queuing what it writes in `spool` (when given)
    /// until whole aligned runs can go out.
    fn start(sink: W, metadata: BTreeMap<String, String>, spool: Option<Spool>) -> Result<Self> {
        let meta = serde_json::to_vec(&FileMetaJson { metadata })
            .map_err(|e| FormatError::Unwritable(format!("file metadata: {e}")))?;
        if meta.len() as u64 > MAX_METADATA_LEN {
            return Err(FormatError::Unwritable(format!(
                "the file metadata takes {} bytes of JSON, above the limit of {MAX_METADATA_LEN}",
                meta.len()
            )));
        }
        let header = FileHeader::new(&meta);
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
        let plan = plan_batch(batch, self.entries.len() as u64, self.pos)?;
        // Large buffers go to the checksum thread first, to be checksummed
        // while this thread writes the header and the buffers.
        let offloaded = self.offload(&plan);
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

    /// Sends the parts of each large, shared buffer of `plan` to the checksum
    /// thread (started if need be); returns their jobs, per buffer (`None`:
    /// checksummed on this thread).
    fn offload(&mut self, plan: &Plan<'_>) -> Vec<Option<Vec<Arc<CrcJob>>>> {
        let crc_plan = self.crc_plan;
        let mut out = Vec::with_capacity(plan.buffers.len());
        for shared in &plan.shared {
            let jobs = match shared {
                Some(b) if b.len() >= crc_plan.offload_min => {
                    if self.crc_thread.is_none() {
                        self.crc_thread = CrcThread::start();
                    }
                    self.crc_thread
                        .as_ref()
                        .map(|t| t.submit(b, crc_plan.part.max(1)))
                }
                _ => None,
            };
            out.push(jobs);
        }
        out
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
        offloaded: Vec<Option<Vec<Arc<CrcJob>>>>,
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
                    // A file's spool holds each chunk of a shared buffer, and
                    // writes it out while it is still in cache.
                    let spooled = self.spool.is_some();
                    let mut h = crc32fast::Hasher::new();
                    for (i, chunk) in b.chunks(CHUNK).enumerate() {
                        h.update(chunk);
                        let start = i * CHUNK;
                        let piece = shared
                            .as_ref()
                            .filter(|_| spooled)
                            .and_then(|s| s.slice(start..start + chunk.len()).ok());
                        self.put_shared(chunk, piece.as_ref())?;
                        if chunk.len() == CHUNK {
                            self.drain(false)?;
                        }
                    }
                    crcs.push(h.finalize());
                }
            }
        }
        // Out to the file while the checksum thread works.
        self.drain(false)?;
        if let Some(thread) = &self.crc_thread {
            for (i, jobs) in pending {
                if let Some(c) = crcs.get_mut(i) {
                    *c = thread.collect(&jobs);
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
struct Plan<'b> {
    header: BatchHeader,
    meta: Vec<u8>,
    /// LoD buffers are borrowed, or rebased copies of sliced levels.
    buffers: Vec<Cow<'b, [u8]>>,
    /// Each buffer's bytes as a shared [`Buffer`], when they are one (a body,
    /// a level that starts at 0), which the checksum thread can hold.
    shared: Vec<Option<Buffer>>,
    /// The file offset of each buffer.
    offsets: Vec<u64>,
}

/// The state of a [`CrcJob`].
const PENDING: u8 = 0;
const TAKEN: u8 = 1;
const DONE: u8 = 2;

/// The checksum of one part of a buffer, computed by whichever of the
/// checksum thread and the writing thread takes it first.
struct CrcJob {
    bytes: Buffer,
    state: AtomicU8,
    crc: AtomicU32,
}

impl CrcJob {
    /// Takes the job if nobody has; then computes and stores its checksum.
    fn run(&self, done: &(Mutex<()>, Condvar)) -> bool {
        if self
            .state
            .compare_exchange(PENDING, TAKEN, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        self.crc
            .store(crc32(self.bytes.as_slice()), Ordering::Relaxed);
        // Under the lock, so that a waiter cannot miss the notification.
        let _guard = done.0.lock().unwrap_or_else(|e| e.into_inner());
        self.state.store(DONE, Ordering::Release);
        done.1.notify_all();
        true
    }
}

/// A thread that checksums large buffers while the writer writes them.
///
/// Two threads reading the same bytes compete for memory bandwidth, but a
/// buffer is checksummed about four times faster than it is copied into the
/// page cache, so the checksum hides behind the write. The writing thread
/// never waits for a part the thread has not started: it takes it.
struct CrcThread {
    jobs: Option<mpsc::Sender<Arc<CrcJob>>>,
    done: Arc<(Mutex<()>, Condvar)>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl CrcThread {
    /// Starts the thread (`None` if the OS refuses: checksums are then
    /// computed on the writing thread).
    fn start() -> Option<Self> {
        let (tx, rx) = mpsc::channel::<Arc<CrcJob>>();
        let done = Arc::new((Mutex::new(()), Condvar::new()));
        let theirs = done.clone();
        let handle = std::thread::Builder::new()
            .name("lodt-crc".into())
            .spawn(move || {
                for job in rx {
                    job.run(&theirs);
                }
            })
            .ok()?;
        Some(CrcThread {
            jobs: Some(tx),
            done,
            handle: Some(handle),
        })
    }

    /// Sends `bytes` in parts of `part` bytes; returns the jobs, in order.
    fn submit(&self, bytes: &Buffer, part: usize) -> Vec<Arc<CrcJob>> {
        let len = bytes.len();
        let mut jobs = Vec::with_capacity(len.div_ceil(part).max(1));
        let mut start = 0;
        loop {
            let end = len.min(start + part);
            // In range: start <= end <= len.
            let window = bytes.slice(start..end).unwrap_or_else(|_| bytes.clone());
            let job = Arc::new(CrcJob {
                bytes: window,
                state: AtomicU8::new(PENDING),
                crc: AtomicU32::new(0),
            });
            if let Some(tx) = &self.jobs {
                // A thread that is gone leaves its jobs pending: collect
                // computes them.
                let _ = tx.send(job.clone());
            }
            jobs.push(job);
            start = end;
            if start >= len {
                return jobs;
            }
        }
    }

    /// The checksum of the buffer whose parts are `jobs`: the parts' checksums
    /// combined, computing here any part not taken yet, waiting for those
    /// being computed.
    fn collect(&self, jobs: &[Arc<CrcJob>]) -> u32 {
        for job in jobs.iter().rev() {
            job.run(&self.done);
        }
        let mut h = crc32fast::Hasher::new();
        for job in jobs {
            let mut guard = self.done.0.lock().unwrap_or_else(|e| e.into_inner());
            while job.state.load(Ordering::Acquire) != DONE {
                guard = self.done.1.wait(guard).unwrap_or_else(|e| e.into_inner());
            }
            drop(guard);
            let part = crc32fast::Hasher::new_with_initial_len(
                job.crc.load(Ordering::Relaxed),
                job.bytes.len() as u64,
            );
            h.combine(&part);
        }
        h.finalize()
    }
}

impl Drop for CrcThread {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop.
        self.jobs = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Lays out `batch`, whose section starts at file offset `start`: the
/// metadata JSON, every buffer's offset, the header.
fn plan_batch(batch: &Batch, index: u64, start: u64) -> Result<Plan<'_>> {
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
        if t.shape().len() > super::MAX_DIMS || t.lod().num_levels() > super::MAX_LOD_LEVELS {
            return Err(FormatError::Unwritable(format!(
                "tensor {name:?} has {} dimensions and {} LoD levels; the format allows {} and {}",
                t.shape().len(),
                t.lod().num_levels(),
                super::MAX_DIMS,
                super::MAX_LOD_LEVELS
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Lod, LodTensor};

    /// Batches with buffers of many sizes: empty, tiny, not a multiple of a
    /// part, large; slices (windows of a larger buffer, LoD levels that do
    /// not start at 0 and so are rebased copies).
    fn batches() -> Vec<Batch> {
        let mut out = Vec::new();
        for (k, rows) in [0usize, 1, 3, 1000, 4099, 20_000, 300_000]
            .into_iter()
            .enumerate()
        {
            let values: Vec<f32> = (0..rows).map(|i| (i * 31 + k) as f32).collect();
            let lod = if rows < 2 {
                Lod::empty()
            } else {
                Lod::try_from_lengths(&[vec![1, rows as u64 - 1]]).unwrap()
            };
            let x = LodTensor::from_vec(values, vec![rows], lod).unwrap();
            let ids: Vec<i64> = (0..rows as i64 * 3).collect();
            let lod = if rows == 0 {
                Lod::empty()
            } else {
                Lod::try_from_lengths(&[vec![3u64; rows]]).unwrap()
            };
            let words = LodTensor::from_vec(ids, vec![rows * 3], lod).unwrap();
            let mut b = Batch::try_from_tensors([("x", x), ("words", words.clone())]).unwrap();
            if rows > 4 {
                // A slice: its body is a window of `words`' buffer, its LoD a
                // rebased copy.
                let part = words.slice_level(0, 1, rows - 1).unwrap();
                b.push("part", part).unwrap();
            }
            out.push(b);
        }
        out
    }

    fn write_with(plan: CrcPlan) -> (Vec<u8>, bool) {
        let mut w = Writer::try_new(Vec::new(), Default::default()).unwrap();
        w.crc_plan = plan;
        for b in batches() {
            w.write(&b).unwrap();
        }
        let threaded = w.crc_thread.is_some();
        (w.finish().unwrap(), threaded)
    }

    #[test]
    fn checksums_off_the_writing_thread_equal_the_serial_ones() {
        let serial = CrcPlan {
            offload_min: usize::MAX,
            part: 1,
        };
        let (expected, threaded) = write_with(serial);
        assert!(!threaded);
        crate::format::LodtFile::from_bytes(&expected)
            .unwrap()
            .verify()
            .unwrap();
        for (offload_min, part) in [(0, 1 << 20), (1, 1000), (100, 4099), (4096, 65_536)] {
            let (got, threaded) = write_with(CrcPlan { offload_min, part });
            assert!(threaded);
            assert!(
                got == expected,
                "offload from {offload_min} B in parts of {part} B"
            );
        }
        // And the machine's default.
        assert!(write_with(CrcPlan::default_for_machine()).0 == expected);
    }

    /// Files go through the spool (aligned runs, shared buffers held):
    /// their bytes are the ones any other sink gets, created or appended.
    #[test]
    fn files_hold_the_bytes_any_sink_gets() {
        let dir = tempfile::tempdir().unwrap();
        let options = WriteOptions { fsync: false };
        let serial = CrcPlan {
            offload_min: usize::MAX,
            part: 1,
        };
        for plan in [serial, CrcPlan::default_for_machine()] {
            let (expected, _) = write_with(plan);
            let path = dir.path().join("f.lodt");
            let mut w = Writer::create_with(&path, Default::default(), options).unwrap();
            w.crc_plan = plan;
            for b in batches() {
                w.write(&b).unwrap();
            }
            w.finish().unwrap();
            assert!(std::fs::read(&path).unwrap() == expected);
            let mut w = Writer::append_with(&path, options).unwrap();
            w.crc_plan = plan;
            for b in batches() {
                w.write(&b).unwrap();
            }
            w.finish().unwrap();
            let file = LodtFile::open(&path).unwrap();
            file.verify().unwrap();
            assert_eq!(file.num_batches(), 2 * batches().len());
            let last = file.batch(file.num_batches() - 1).unwrap();
            assert!(last.to_batch().unwrap() == batches().pop().unwrap());
        }
    }

    #[test]
    fn a_part_the_thread_has_not_taken_is_computed_by_the_writer() {
        // No thread: `collect` computes every part itself.
        let thread = CrcThread {
            jobs: None,
            done: Arc::new((Mutex::new(()), Condvar::new())),
            handle: None,
        };
        let bytes = Buffer::from_storage(Arc::new(
            (0..10_000u32).map(|i| i as u8).collect::<Vec<_>>(),
        ));
        let jobs = thread.submit(&bytes, 333);
        assert_eq!(jobs.len(), 31);
        assert_eq!(thread.collect(&jobs), crc32(bytes.as_slice()));
        let empty = Buffer::from_storage(Arc::new(Vec::<u8>::new()));
        let jobs = thread.submit(&empty, 333);
        assert_eq!(thread.collect(&jobs), crc32(&[]));
    }
}
