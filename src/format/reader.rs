//! [`LodtFile`]: random access to a `.lodt` file through a memory map (or an
//! in-memory copy), with zero-copy views and owned tensors.

use super::Version;
use super::batch_meta::BatchMeta;
use super::buffers::TensorBuffers;
use super::error::{ErrorSite, FilePart, FormatError, Result};
use super::layout::{
    INDEX_ENTRY_LEN, IndexEntry, STRUCT_LEN, Sealed64, TRAILER_TAG, Trailer, check_footer_region,
    file_start_len, pad64, parse_file_start, read_struct, same_crc,
};
use super::pattern::Pattern;
use super::schema::Schema;
use super::section::{self, Section};
use super::source::{MemorySource, MmapSource, OpenReads, PreadSource, RangeSource, read_one};
use crate::buffer::{AlignedBytes, Buffer, ByteStorage};
use crate::{Batch, LodTensor};
use std::collections::BTreeMap;
use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// How [`LodtFile::open_with`] reads a file.
///
/// ```
/// use lodt::format::{Advice, ReadOptions};
/// assert!(ReadOptions::default().mmap);
/// assert_eq!(ReadOptions::default().advice, Advice::Auto);
/// assert!(!ReadOptions::default().check_bodies);
/// let pread = ReadOptions { mmap: false, ..Default::default() };
/// # let _ = pread;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// Read through a memory map (the default): batches are windows of the
    /// map, no copy. `false` reads with positional reads: each batch is copied
    /// into memory when touched, and a file truncated by another process gives
    /// an error instead of `SIGBUS`.
    pub mmap: bool,
    /// The access hints given to the OS (they matter when the file is not in
    /// the page cache): [`Advice::Auto`] by default.
    pub advice: Advice,
    /// Check the checksums of a batch's tensor bodies the first time the
    /// batch is touched, before any tensor of it is handed out, for a memory
    /// map too (see [`LodtFile::with_check_bodies`]). Off by default: a
    /// mapped batch's bodies are checked only by [`LodtFile::verify`], and
    /// touching a batch costs no read of its bodies. On, the first touch of
    /// a batch reads its bodies once (one CRC32 pass: about 27 GB/s from the
    /// page cache on a recent x86 core, `bench/RESULTS.md`, plus reading them
    /// from disk when they are not in the page cache); later touches cost
    /// nothing more. Batches read with positional reads
    /// (`mmap: false`) are checked whatever this says.
    pub check_bodies: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            mmap: true,
            advice: Advice::Auto,
            check_bodies: false,
        }
    }
}

/// The access pattern a [`LodtFile`] announces to its source
/// ([`RangeSource::will_read`]) when a batch is first touched. On a file that
/// is not in the page cache, it decides how much is read from disk: with no
/// advice, the first touch of a mapped page reads up to the device's
/// read-ahead (often megabytes) around it.
///
/// ```
/// use lodt::format::{Advice, LodtFile, ReadOptions};
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("x.lodt");
/// # lodt::format::save_batch(&path, &lodt::Batch::new())?;
/// // A scan that touches batches in an order of its own, all of them:
/// let file = LodtFile::open_with(&path, &ReadOptions { advice: Advice::Sequential, ..Default::default() })?;
/// # let _ = file;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Advice {
    /// Chosen by the API used (the default):
    /// - [`LodtFile::batch`] (and what calls it: [`LodtFile::read_batch`],
    ///   [`LodtFile::tensor_buffers`]): [`Pattern::Random`] on that batch's
    ///   section, which is read in large requests and nothing around it;
    ///   except that a batch touched first right after the batch before it
    ///   (`batch(k)` for `k` in order) counts as a scan;
    /// - [`LodtFile::batches`], [`LodtFile::verify`] and scans:
    ///   [`Pattern::Sequential`] on the next 16 MiB of batches (read ahead).
    ///
    /// What a source does with the hint is its own: see
    /// [`MmapSource`](super::MmapSource) and [`PreadSource`](super::PreadSource).
    #[default]
    Auto,
    /// [`Pattern::Random`] whatever the API.
    Random,
    /// [`Pattern::Sequential`] whatever the API.
    Sequential,
    /// No hint: the OS's defaults.
    Off,
}

/// What a batch is read for ([`LodtFile::meta`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    /// Its tensors are handed out: its bodies are checked first where the
    /// reader checks them.
    TensorsOut,
    /// Its structure alone (`verify` checks every byte itself).
    Structure,
}

/// How far ahead a scan asks the source to fetch.
const READ_AHEAD: u64 = 16 << 20;

/// How much of a 2.0 batch is read to find the schema its head holds,
/// when the file is read through a copy: one request for any head up to
/// this size (a longer one takes a second).
const HEAD_GUESS: u64 = 16 << 10;

/// No batch has this number, nor the one after it (so batch 0, touched
/// first, is not taken for the start of a scan).
const NOT_A_BATCH: usize = usize::MAX - 1;

/// An open `.lodt` file: random access to every batch, with views that borrow
/// the file's bytes (no copy).
///
/// [`LodtFile::open`] maps the file; [`LodtFile::read`] and
/// [`LodtFile::from_bytes`] hold it in memory. Either way the reader:
///
/// - checks the file header, the footer and its index when opening (O(1) in
///   the file size, O(batches) integer checks);
/// - checks a batch's header, metadata, checksum table, buffer layout, LoD
///   checksums, LoD rules and body lengths the first time the batch is
///   accessed, before any view of it is handed out (and remembers the result);
/// - checks the body checksums of every batch read from a source that copies
///   its bytes (positional reads, [`LodtFile::read`], an object store, a disk
///   cache: a [`RangeSource`] with no [`RangeSource::whole`]), each time the
///   batch is read and before any view of it is handed out; for a memory
///   map or bytes in memory, only with [`LodtFile::with_check_bodies`]
///   (the first time the batch is touched), and always in
///   [`LodtFile::verify`] (`spec/FORMAT.md` §7.1).
///
/// `LodtFile` is `Send + Sync`: many threads may read one file.
///
/// ```
/// use lodt::{Batch, Lod, LodTensor, format::{self, LodtFile}};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("words.lodt");
/// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]])?;
/// let words = LodTensor::from_vec((0..15i64).collect(), vec![15, 1], lod)?;
/// format::save_tensor(&path, "words", &words)?;
///
/// let file = LodtFile::open(&path)?;
/// let view = file.batch(0)?.tensor("words")?;      // borrows the map
/// assert_eq!(view.branch(&[0, 2])?.as_slice::<i64>()?, &[5, 6, 7, 8]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LodtFile {
    source: Arc<dyn RangeSource>,
    /// The whole file as one buffer, when the source has it (a map or bytes
    /// in memory): batches are windows of it, borrowed.
    whole: Option<Buffer>,
    len: u64,
    version: Version,
    metadata: BTreeMap<String, String>,
    /// The index, copied out of the file (24 bytes per batch) so that an
    /// append rewriting the footer in place never changes what this reader sees.
    entries: Vec<IndexEntry>,
    batches: Vec<OnceLock<Box<BatchMeta>>>,
    /// Whether each batch's bodies were checked (with `check_bodies`, for a
    /// source that has the whole file: it does not change).
    bodies_checked: Vec<AtomicBool>,
    /// Check the bodies of a batch of the whole file on its first touch.
    check_bodies: bool,
    footer_offset: u64,
    advice: Advice,
    /// The last batch touched for the first time ([`NOT_A_BATCH`]: none yet).
    last_touched: AtomicUsize,
    /// How far a scan has asked the source to fetch ahead (a file offset).
    ahead: AtomicU64,
    /// The 2.0 schema looked up last (the batch whose head holds it).
    last_schema: std::sync::Mutex<Option<(u64, Arc<Schema>)>>,
}

impl std::fmt::Debug for LodtFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LodtFile")
            .field("version", &self.version)
            .field("batches", &self.entries.len())
            .field("source", &self.source.describe())
            .field("bytes", &self.len)
            .finish()
    }
}

impl LodtFile {
    /// Maps the file at `path` and checks its header and footer.
    ///
    /// A memory map shows the file's current bytes: if another program
    /// truncates the file while it is open, reading the lost part raises
    /// `SIGBUS` and kills the process (see [`MappedFile`](super::MappedFile)). lodt's own writers
    /// never do that (saving renames a new file over the old one, and an open
    /// map keeps the old one). For files that may change underneath, use
    /// [`LodtFile::open_with`] with positional reads.
    ///
    /// A file that does not parse while its writer lock is held (an append
    /// or a recovery is running: see [`WriterLock`](crate::atomic::WriterLock))
    /// gives [`AtomicError::Locked`](crate::atomic::AtomicError::Locked)
    /// rather than [`FormatError::NoFooter`]: it is not damaged, only
    /// unfinished. One that changed while it was read (an append that just
    /// ended) is opened again (FORMAT.md §9, "Readers during an append").
    ///
    /// ```
    /// let err = lodt::format::LodtFile::open("/no/such.lodt").unwrap_err();
    /// assert!(err.to_string().contains("/no/such.lodt"));
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, &ReadOptions::default())
    }

    /// Opens the file at `path` as `options` say: through a memory map (the
    /// default) or with positional reads (`mmap: false`: no map, so a file
    /// truncated by another process gives an error, never `SIGBUS`; each batch
    /// is read into memory when it is touched).
    ///
    /// ```
    /// use lodt::format::{LodtFile, ReadOptions};
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("x.lodt");
    /// let t = lodt::LodTensor::from_vec(vec![1.5f32, 2.5], vec![2], Default::default())?;
    /// lodt::format::save_tensor(&path, "x", &t)?;
    /// let file = LodtFile::open_with(&path, &ReadOptions { mmap: false, ..Default::default() })?;
    /// assert_eq!(file.batch(0)?.tensor("x")?.as_slice::<f32>()?, &[1.5, 2.5]);
    /// assert!(file.storage().is_none()); // no map, no whole-file storage
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_with(path: impl AsRef<Path>, options: &ReadOptions) -> Result<Self> {
        let path = path.as_ref();
        let file = open_settled(path, || {
            Ok(if options.mmap {
                Arc::new(MmapSource::open(path)?)
            } else {
                Arc::new(PreadSource::open(path)?)
            })
        })?;
        Ok(file
            .with_advice(options.advice)
            .with_check_bodies(options.check_bodies))
    }

    /// The same file, checking (with `check`) the body checksums of a batch
    /// of a memory map or of bytes in memory the first time the batch is
    /// touched ([`LodtFile::batch`] and what calls it), before any tensor of
    /// it is handed out: a damaged body is then an error
    /// ([`FormatError::BadRead`] naming the file, batch and tensor) rather
    /// than values. It costs one read of the batch's bodies, once (see
    /// [`ReadOptions::check_bodies`]). Batches read from a source that copies
    /// its bytes are checked on every read whatever this says.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![7u8; 8], vec![8], Default::default())?;
    /// let mut bytes = lodt::format::to_bytes([&lodt::Batch::try_from_tensors([("t", t)])?], Default::default())?;
    /// let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// let body = file.tensor_buffers(0, "t")?.body;
    /// bytes[body.start] ^= 1; // a damaged body byte
    /// let lazy = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(lazy.batch(0)?.tensor("t")?.as_bytes()[0], 6); // not checked
    /// let checked = lodt::format::LodtFile::from_bytes(&bytes)?.with_check_bodies(true);
    /// assert!(checked.check_bodies());
    /// let err = checked.batch(0).unwrap_err();
    /// assert!(err.to_string().starts_with("bytes in memory: checksum mismatch in batch 0, tensor \"t\", body"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_check_bodies(mut self, check: bool) -> Self {
        self.check_bodies = check;
        self
    }

    /// Whether the bodies of a batch of a memory map or of bytes in memory
    /// are checked on its first touch ([`LodtFile::with_check_bodies`]).
    ///
    /// ```
    /// let bytes = lodt::format::to_bytes([], Default::default())?;
    /// assert!(!lodt::format::LodtFile::from_bytes(&bytes)?.check_bodies());
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn check_bodies(&self) -> bool {
        self.check_bodies
    }

    /// The same file, giving the source the access hints `advice` says (see
    /// [`Advice`]; [`LodtFile::open_with`] takes them from its options).
    ///
    /// ```
    /// use lodt::format::{Advice, LodtFile};
    /// let bytes = lodt::format::to_bytes([&lodt::Batch::new()], Default::default())?;
    /// let file = LodtFile::from_bytes(&bytes)?.with_advice(Advice::Off);
    /// assert_eq!(file.advice(), Advice::Off);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn with_advice(mut self, advice: Advice) -> Self {
        self.advice = advice;
        self
    }

    /// The access hints this reader gives its source.
    ///
    /// ```
    /// let bytes = lodt::format::to_bytes([], Default::default())?;
    /// let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.advice(), lodt::format::Advice::Auto);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn advice(&self) -> Advice {
        self.advice
    }

    /// Reads the whole file at `path` into memory (no map), then checks it like
    /// [`LodtFile::open`]. The copy's batches are checked as those of a
    /// copying source are: their bodies too, the first time each batch is
    /// touched ([`LodtFile::with_check_bodies`]).
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("x.lodt");
    /// let t = lodt::LodTensor::from_vec(vec![1.5f32, 2.5], vec![2], Default::default())?;
    /// lodt::format::save_tensor(&path, "x", &t)?;
    /// let file = lodt::format::LodtFile::read(&path)?;
    /// assert_eq!(file.batch(0)?.tensor("x")?.as_slice::<f32>()?, &[1.5, 2.5]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let ctx = || format!("reading {}", path.display());
        let file = open_settled(path, || {
            let mut file =
                super::regular::open_regular(path).map_err(|e| FormatError::io(ctx(), e))?;
            let len = file
                .metadata()
                .map_err(|e| FormatError::io(ctx(), e))?
                .len();
            let len = usize::try_from(len).map_err(|_| FormatError::NotLodt {
                reason: format!("a file of {len} bytes does not fit in memory"),
            })?;
            let mut bytes = AlignedBytes::zeroed(len);
            file.read_exact(bytes.as_mut_slice())
                .map_err(|e| FormatError::io(ctx(), e))?;
            Ok(Arc::new(MemorySource::new(
                Arc::new(bytes),
                path.display().to_string(),
            )))
        })?;
        Ok(file.with_check_bodies(true))
    }

    /// Checks a file held in memory (copied into a 64-aligned buffer).
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![7u8], vec![1], Default::default())?;
    /// let bytes = lodt::format::to_bytes([&lodt::Batch::try_from_tensors([("t", t)])?], Default::default())?;
    /// let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.num_batches(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        Self::from_storage(Arc::new(AlignedBytes::from_slice(bytes)))
    }

    /// Checks a file held in any storage. Storage not aligned to 64 bytes is
    /// copied into an aligned buffer first (views need aligned offsets).
    ///
    /// ```
    /// use std::sync::Arc;
    /// let t = lodt::LodTensor::from_vec(vec![7u8], vec![1], Default::default())?;
    /// let bytes = lodt::format::to_bytes([&lodt::Batch::try_from_tensors([("t", t)])?], Default::default())?;
    /// let file = lodt::format::LodtFile::from_storage(Arc::new(bytes))?;
    /// assert_eq!(file.batch(0)?.tensor("t")?.as_bytes(), &[7]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_storage(storage: Arc<dyn ByteStorage>) -> Result<Self> {
        Self::from_source(Arc::new(MemorySource::new(storage, "bytes in memory")))
    }

    /// Opens a file through any [`RangeSource`]: reads the header, the footer
    /// and the index (a first read of [`RangeSource::open_hint`] bytes from
    /// each end, then whatever else they need), and nothing else. A batch's
    /// section is read when the batch is touched.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lodt::format::{LodtFile, MemorySource};
    /// let t = lodt::LodTensor::from_vec(vec![7u8], vec![1], Default::default())?;
    /// let bytes = lodt::format::to_bytes([&lodt::Batch::try_from_tensors([("t", t)])?], Default::default())?;
    /// let file = LodtFile::from_source(Arc::new(MemorySource::new(Arc::new(bytes), "demo")))?;
    /// assert_eq!(file.batch(0)?.tensor("t")?.as_bytes(), &[7]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_source(source: Arc<dyn RangeSource>) -> Result<Self> {
        let len = source.len();
        let open = |reads: &OpenReads<'_>| -> Result<_> {
            let head = reads.get(0..len.min(STRUCT_LEN))?;
            let need = file_start_len(head.as_slice()).min(len);
            let start = reads.get(0..need)?;
            let (version, metadata, data_start) = parse_file_start(start.as_slice())?;
            let (footer_offset, entries) = parse_footer(reads, len, data_start, version.major)?;
            Ok((version, metadata, footer_offset, entries))
        };
        let reads = OpenReads::start(source.as_ref())?;
        let opened = match open(&reads) {
            // Bytes copied from the file (an object store, positional
            // reads) may have been damaged on the way: a check of the
            // header or footer that fails is a read error, retried once
            // with the bytes fetched anew. Only a failure that persists is
            // damage; and only a local file gets `lodt recover` advice.
            Err(e) if source.whole().is_none() && damaged_at_open(&e) => {
                reads.discard();
                drop(reads);
                let again = OpenReads::start(source.as_ref())?;
                let opened = open(&again);
                drop(again);
                opened.map_err(|e| {
                    if source.is_local_file() || !damaged_at_open(&e) {
                        e
                    } else {
                        damaged_remote(source.as_ref(), e)
                    }
                })?
            }
            other => {
                drop(reads);
                other?
            }
        };
        let (version, metadata, footer_offset, entries) = opened;
        let batches = (0..entries.len()).map(|_| OnceLock::new()).collect();
        let bodies_checked = (0..entries.len()).map(|_| AtomicBool::new(false)).collect();
        let whole = source.whole().map(|s| Buffer::from_storage(s.clone()));
        Ok(LodtFile {
            source,
            whole,
            len,
            version,
            metadata,
            entries,
            batches,
            bodies_checked,
            check_bodies: false,
            footer_offset,
            advice: Advice::Auto,
            last_touched: AtomicUsize::new(NOT_A_BATCH),
            ahead: AtomicU64::new(0),
            last_schema: std::sync::Mutex::new(None),
        })
    }

    /// The file's format version.
    ///
    /// ```
    /// # let bytes = lodt::format::to_bytes([], Default::default())?;
    /// let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.version().to_string(), "2.0"); // the writer's default
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn version(&self) -> Version {
        self.version
    }

    /// The file's key/value metadata.
    ///
    /// ```
    /// let meta = [("source".to_string(), "demo".to_string())].into();
    /// let bytes = lodt::format::to_bytes([], meta)?;
    /// let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.metadata()["source"], "demo");
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// The number of batches.
    ///
    /// ```
    /// let bytes = lodt::format::to_bytes([], Default::default())?;
    /// assert_eq!(lodt::format::LodtFile::from_bytes(&bytes)?.num_batches(), 0);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn num_batches(&self) -> usize {
        self.entries.len()
    }

    /// The file's size in bytes.
    ///
    /// ```
    /// let bytes = lodt::format::to_bytes([], Default::default())?;
    /// assert_eq!(lodt::format::LodtFile::from_bytes(&bytes)?.file_size(), bytes.len() as u64);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn file_size(&self) -> u64 {
        self.len
    }

    /// The storage holding the whole file, when the source has one (the map
    /// after [`LodtFile::open`], the bytes after [`LodtFile::from_bytes`];
    /// `None` for positional reads).
    ///
    /// ```
    /// let bytes = lodt::format::to_bytes([], Default::default())?;
    /// let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.storage().unwrap().bytes(), &bytes[..]);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn storage(&self) -> Option<&Arc<dyn ByteStorage>> {
        self.source.whole()
    }

    /// The source the file's bytes come from.
    ///
    /// ```
    /// let bytes = lodt::format::to_bytes([], Default::default())?;
    /// let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.source().len(), bytes.len() as u64);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn source(&self) -> &Arc<dyn RangeSource> {
        &self.source
    }

    /// The index entries.
    pub(crate) fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// The file offset where the footer starts (the end of the last batch).
    pub(crate) fn footer_offset(&self) -> u64 {
        self.footer_offset
    }

    /// The byte range of batch `k` within the file.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![7u8], vec![1], Default::default())?;
    /// let bytes = lodt::format::to_bytes([&lodt::Batch::try_from_tensors([("t", t)])?], Default::default())?;
    /// let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.batch_range(0)?.start % 64, 0);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    #[inline]
    pub fn batch_range(&self, k: usize) -> Result<Range<u64>> {
        let e = self.entry(k)?;
        Ok(e.offset.get()..e.offset.get() + e.length.get())
    }

    #[inline]
    fn entry(&self, k: usize) -> Result<&IndexEntry> {
        match self.entries.get(k) {
            Some(e) => Ok(e),
            None => Err(self.no_such_batch(k)),
        }
    }

    /// The error for batch `k`, which the file does not have.
    pub(crate) fn no_such_batch(&self, k: usize) -> FormatError {
        FormatError::NoSuchBatch {
            index: k,
            count: self.entries.len(),
        }
    }

    /// The bytes of batch `k` (in range: checked when the footer was
    /// parsed): a window of the whole file when the source has it
    /// ([`RangeSource::whole`]), otherwise read from the source: one range,
    /// nothing of other batches.
    #[inline]
    fn section(&self, k: usize) -> Result<(Section<'_>, u64)> {
        let r = self.batch_range(k)?;
        if let Some(whole) = &self.whole {
            // Inside the file (checked with the footer); a range past
            // `usize` fails `borrowed`'s check.
            let at = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
            let (start, end) = (at(r.start), at(r.end));
            return Ok((Section::borrowed(whole, start..end)?, r.start));
        }
        let source = self.source.as_ref();
        let section = read_one(source, r.clone(), || {
            format!(
                "reading batch {k} (bytes {}..{}) of {}",
                r.start,
                r.end,
                source.describe()
            )
        })?;
        Ok((Section::owned(section), r.start))
    }

    /// Batch `k`, checked on first access, when the API used reads batches
    /// in pattern `api` (for the hints given to the source on first access);
    /// `use_` says whether its tensors are handed out (then its bodies are
    /// checked: every read of a copying source, the first touch with
    /// `check_bodies`) or only its structure is wanted (`verify`, which
    /// checks every byte itself, and [`LodtFile::check_batches`]).
    #[inline]
    fn meta(
        &self,
        k: usize,
        api: Option<Pattern>,
        use_: Use,
    ) -> Result<(&BatchMeta, Section<'_>, u64)> {
        let Some(cell) = self.batches.get(k) else {
            return Err(self.no_such_batch(k));
        };
        if let Some(meta) = cell.get()
            && self.whole.is_some()
            && (use_ == Use::Structure || !self.bodies_pending(k))
        {
            let (section, offset) = self.section(k)?;
            return Ok((meta, section, offset));
        }
        self.meta_checked(k, cell, api, use_)
    }

    /// Whether batch `k` of the whole file is still to have its bodies
    /// checked before it is handed out.
    #[inline]
    fn bodies_pending(&self, k: usize) -> bool {
        self.check_bodies
            && self
                .bodies_checked
                .get(k)
                .is_some_and(|c| !c.load(Ordering::Acquire))
    }

    /// [`LodtFile::meta`] past the fast path: a first touch, a read from a
    /// copying source, or bodies to check. A copy that fails a check is read
    /// again once if the source kept a copy of it (a disk cache entry, which
    /// [`RangeSource::discard`] drops); the error names the source.
    fn meta_checked<'a>(
        &'a self,
        k: usize,
        cell: &'a OnceLock<Box<BatchMeta>>,
        api: Option<Pattern>,
        use_: Use,
    ) -> Result<(&'a BatchMeta, Section<'a>, u64)> {
        if let Some(api) = api
            && cell.get().is_none()
        {
            self.hint(k, api);
        }
        if self.whole.is_some() {
            let (section, offset) = self.section(k)?;
            let meta = self.parsed(k, cell, section.bytes(), offset)?.0;
            if use_ == Use::TensorsOut && self.bodies_pending(k) {
                section::check_unchecked_buffers(section.bytes(), meta, false)
                    .map_err(|e| self.bad_read(e))?;
                if let Some(done) = self.bodies_checked.get(k) {
                    done.store(true, Ordering::Release);
                }
            }
            return Ok((meta, section, offset));
        }
        let attempt = || -> Result<(&'a BatchMeta, Section<'a>, u64)> {
            let (section, offset) = self.section(k)?;
            let (meta, parsed_now) = self.parsed(k, cell, section.bytes(), offset)?;
            if use_ == Use::TensorsOut {
                // The LoD of a batch parsed from this copy was checked by
                // the parse; a batch parsed from an earlier copy has all of
                // this copy's buffers checked.
                section::check_unchecked_buffers(section.bytes(), meta, !parsed_now)?;
            }
            Ok((meta, section, offset))
        };
        let damaged = |e: &FormatError| e.location().is_some();
        let result = match attempt() {
            Err(e) if damaged(&e) && self.batch_range(k).is_ok_and(|r| self.source.discard(&r)) => {
                attempt()
            }
            other => other,
        };
        result.map_err(|e| if damaged(&e) { self.bad_read(e) } else { e })
    }

    /// `e`, a failed check of bytes read, naming the file they were read from.
    fn bad_read(&self, e: FormatError) -> FormatError {
        FormatError::BadRead {
            file: self.source.describe(),
            source: Box::new(e),
        }
    }

    /// The metadata of batch `k`: parsed and checked from `bytes` (the
    /// section, at file offset `offset`) and kept, unless it was before;
    /// whether it was parsed now.
    fn parsed<'a>(
        &self,
        k: usize,
        cell: &'a OnceLock<Box<BatchMeta>>,
        bytes: &[u8],
        offset: u64,
    ) -> Result<(&'a BatchMeta, bool)> {
        if let Some(meta) = cell.get() {
            return Ok((meta, false));
        }
        let meta = self.parse_batch(k, bytes, offset)?;
        Ok((cell.get_or_init(|| Box::new(meta)), true))
    }

    /// Parses and checks batch `k` (its section `bytes`, at `offset`)
    /// against its index entry.
    fn parse_batch(&self, k: usize, bytes: &[u8], offset: u64) -> Result<BatchMeta> {
        let meta = section::parse_any(self.version.major, bytes, offset, k as u64, &mut |j| {
            self.schema_of(j)
        })?;
        let e = self.entry(k)?;
        let at = || ErrorSite::batch(k as u64, FilePart::Index);
        same_crc(at(), e.header_crc.get(), meta.header_crc)?;
        same_crc(at(), e.table_crc.get(), meta.table_crc)?;
        Ok(meta)
    }

    /// The 2.0 schema held by batch `j`'s head: from its parsed metadata,
    /// the last schema looked up, or its head, read and checked alone.
    fn schema_of(&self, j: u64) -> Result<Arc<Schema>> {
        let jj = usize::try_from(j).unwrap_or(usize::MAX);
        if let Some(m) = self.batches.get(jj).and_then(|c| c.get())
            && m.holds_schema
            && let Some(s) = &m.schema
        {
            return Ok(s.clone());
        }
        if let Ok(last) = self.last_schema.lock()
            && let Some((at, s)) = last.as_ref()
            && *at == j
        {
            return Ok(s.clone());
        }
        let schema = if self.whole.is_some() {
            let (section, offset) = self.section(jj)?;
            super::v2::head_schema(section.bytes(), offset, j)?
        } else {
            // The head alone, in one read where it fits in HEAD_GUESS bytes
            // (a schema is names, dtypes and shapes: small); its first 64
            // bytes tell its length, and a longer head is read whole after.
            let r = self.batch_range(jj)?;
            let source = self.source.as_ref();
            let ctx = || format!("reading the head of batch {j} of {}", source.describe());
            let first = read_one(source, r.start..r.end.min(r.start + HEAD_GUESS), ctx)?;
            let (_, head_len) = super::v2::parse_fixed(first.as_slice(), r.start, j)?;
            if head_len <= first.len() as u64 {
                super::v2::head_schema(first.as_slice(), r.start, j)?
            } else {
                let head = read_one(source, r.start..(r.start + head_len).min(r.end), ctx)?;
                super::v2::head_schema(head.as_slice(), r.start, j)?
            }
        };
        if let Ok(mut last) = self.last_schema.lock() {
            *last = Some((j, schema.clone()));
        }
        Ok(schema)
    }

    /// Tells the source how batch `k`, touched for the first time, is about
    /// to be read (see [`Advice`]): its section alone for random access; for
    /// a scan, the next [`READ_AHEAD`] bytes of batches, asked again once
    /// less than half of that is left ahead.
    fn hint(&self, k: usize, api: Pattern) {
        let previous = self.last_touched.swap(k, Ordering::Relaxed);
        let pattern = match self.advice {
            Advice::Off => return,
            Advice::Random => Pattern::Random,
            Advice::Sequential => Pattern::Sequential,
            Advice::Auto if previous.wrapping_add(1) == k => Pattern::Sequential,
            Advice::Auto => api,
        };
        let Ok(r) = self.batch_range(k) else {
            return;
        };
        match pattern {
            Pattern::Random => self.source.will_read(&[r], Pattern::Random),
            Pattern::Sequential => {
                let ahead = self.ahead.load(Ordering::Relaxed);
                if ahead >= r.end && ahead - r.start >= READ_AHEAD / 2 {
                    return;
                }
                // From what is not asked yet to READ_AHEAD past the batch's
                // start, or the first READ_AHEAD bytes of a larger batch (the
                // OS's own read-ahead follows a sequential read).
                let from = ahead.max(r.start);
                let to = r
                    .start
                    .saturating_add(READ_AHEAD)
                    .min(self.footer_offset)
                    .max(from.saturating_add(READ_AHEAD).min(r.end));
                if from < to {
                    self.ahead.fetch_max(to, Ordering::Relaxed);
                    let ahead = from..to;
                    self.source
                        .will_read(std::slice::from_ref(&ahead), Pattern::Sequential);
                }
            }
        }
    }

    /// Batch `k`, as a view borrowing the file. Its metadata and LoD are
    /// checked the first time it is accessed.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1i32, 2], vec![2], Default::default())?;
    /// let bytes = lodt::format::to_bytes([&lodt::Batch::try_from_tensors([("t", t)])?], Default::default())?;
    /// let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.batch(0)?.names().collect::<Vec<_>>(), vec!["t"]);
    /// assert!(file.batch(1).is_err());
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    ///
    /// The first touch of a batch tells the source to read its section (see
    /// [`Advice`]).
    #[inline]
    pub fn batch(&self, k: usize) -> Result<BatchView<'_>> {
        self.batch_as(k, Some(Pattern::Random))
    }

    /// Batch `k` with no hint to the source on its first touch: for a
    /// caller that fetched what it reads itself (a gather,
    /// [`LodtFile::prefetch`]).
    #[inline]
    pub(crate) fn batch_unhinted(&self, k: usize) -> Result<BatchView<'_>> {
        self.batch_as(k, None)
    }

    /// Whether batch `k` was parsed already (touched before).
    pub(crate) fn batch_parsed(&self, k: usize) -> bool {
        self.batches.get(k).is_some_and(|c| c.get().is_some())
    }

    /// Whether batches are windows of the whole file (a map, bytes in
    /// memory): then a tensor's buffer range is its file offsets.
    pub(crate) fn has_whole(&self) -> bool {
        self.whole.is_some()
    }

    /// Batch `k`, touched by an API that reads batches in pattern `api`
    /// (`None`: no hint).
    #[inline]
    fn batch_as(&self, k: usize, api: Option<Pattern>) -> Result<BatchView<'_>> {
        let (meta, section, offset) = self.meta(k, api, Use::TensorsOut)?;
        let section = section::decoded(section, meta).map_err(|e| self.bad_read(e))?;
        Ok(BatchView {
            k,
            meta,
            section,
            offset,
        })
    }

    /// Every batch, in order.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1i32, 2], vec![2], Default::default())?;
    /// let b = lodt::Batch::try_from_tensors([("t", t)])?;
    /// let bytes = lodt::format::to_bytes([&b, &b], Default::default())?;
    /// let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.batches().filter(|b| b.is_ok()).count(), 2);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    ///
    /// The source is told to read ahead ([`Pattern::Sequential`]).
    pub fn batches(&self) -> impl ExactSizeIterator<Item = Result<BatchView<'_>>> + '_ {
        (0..self.num_batches()).map(|k| self.batch_as(k, Some(Pattern::Sequential)))
    }

    /// The buffers of tensor `name` of batch `batch`: byte ranges inside a
    /// storage (the whole file's, [`LodtFile::storage`], for a map or bytes in
    /// memory) of each LoD level's offsets and of the body, for
    /// consumers that want the ranges themselves (a tensor over them is
    /// [`BatchView::tensor`]).
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1i32, 2], vec![2], lodt::Lod::try_from_lengths(&[vec![2]])?)?;
    /// let bytes = lodt::format::to_bytes([&lodt::Batch::try_from_tensors([("t", t.clone())])?], Default::default())?;
    /// let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// let parts = file.tensor_buffers(0, "t")?;
    /// assert_eq!(parts.body.start % 64, 0);
    /// assert_eq!(parts.to_tensor()?, t);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tensor_buffers(&self, batch: usize, name: &str) -> Result<TensorBuffers> {
        let view = self.batch(batch)?;
        let t = view.position(name)?;
        let tm = view.meta.tensors.get(t).ok_or_else(|| view.no_such(name))?;
        // Ranges within the section's storage (the whole file for a map or
        // bytes in memory, the section alone for positional reads).
        let abs = |b: usize| view.section.in_storage(view.meta.view(b));
        Ok(TensorBuffers {
            storage: view.section.storage().clone(),
            dtype: tm.dtype,
            shape: tm.shape.to_vec(),
            lod: tm.lod.iter().map(|&b| abs(b)).collect(),
            body: abs(tm.body),
        })
    }

    /// Batch `k` as an owned [`Batch`] whose tensors' bodies and LoD offsets
    /// are windows of the file's storage (no copy). The tensors keep the
    /// storage (the map) alive after the `LodtFile` is dropped.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1i32, 2], vec![2], Default::default())?;
    /// let b = lodt::Batch::try_from_tensors([("t", t)])?;
    /// let bytes = lodt::format::to_bytes([&b], Default::default())?;
    /// let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.read_batch(0)?, b);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn read_batch(&self, k: usize) -> Result<Batch> {
        self.batch(k)?.to_batch()
    }

    /// Checks every batch's header, metadata, checksum table, layout and LoD
    /// now, rather than on first access (bodies are not read: see
    /// [`LodtFile::verify`] for that).
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1i32, 2], vec![2], Default::default())?;
    /// let b = lodt::Batch::try_from_tensors([("t", t)])?;
    /// let bytes = lodt::format::to_bytes([&b, &b], Default::default())?;
    /// lodt::format::LodtFile::from_bytes(&bytes)?.check_batches()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_batches(&self) -> Result<()> {
        for k in 0..self.num_batches() {
            self.meta(k, Some(Pattern::Sequential), Use::Structure)?;
        }
        Ok(())
    }

    /// Batch `k`'s metadata and section, checked (its structure, as a scan
    /// touches it).
    pub(crate) fn checked_batch(&self, k: usize) -> Result<(&BatchMeta, Buffer, u64)> {
        let (meta, section, offset) = self.meta(k, Some(Pattern::Sequential), Use::Structure)?;
        Ok((meta, section.to_buffer()?, offset))
    }

    /// Batch `k`'s metadata and section, checked, for `verify` (a scan):
    /// the file's own parse when it has one or reads copies; a batch of a
    /// file held whole (mapped, or in memory) that was not parsed yet is
    /// parsed without keeping the parse, which its checker drops when done
    /// with it (a verify does not leave every batch's metadata to be freed,
    /// one batch after the other, when the file is dropped). The section
    /// borrows the file's bytes where the file is held whole (no reference
    /// count shared by the checking threads).
    pub(crate) fn verify_batch(&self, k: usize) -> Result<(MetaRef<'_>, Section<'_>)> {
        let Some(cell) = self.batches.get(k) else {
            return Err(self.no_such_batch(k));
        };
        if cell.get().is_some() || self.whole.is_none() {
            let (meta, section, _) = self.meta(k, Some(Pattern::Sequential), Use::Structure)?;
            return Ok((MetaRef::Kept(meta), section));
        }
        self.hint(k, Pattern::Sequential);
        let (section, offset) = self.section(k)?;
        let meta = self.parse_batch(k, section.bytes(), offset)?;
        Ok((MetaRef::Own(Arc::new(meta)), section))
    }
}

/// Opens the file at `path` through the sources `source` makes, telling a
/// file being written from a damaged one (FORMAT.md §9, "Readers during an
/// append"): a file that does not parse while a writer holds its lock is
/// [`AtomicError::Locked`](crate::atomic::AtomicError::Locked); one that
/// changed while it was read (an append that just ended) is opened again.
fn open_settled(
    path: &Path,
    source: impl Fn() -> Result<Arc<dyn RangeSource>>,
) -> Result<LodtFile> {
    let mut reopens = 0;
    loop {
        let before = Identity::of(path);
        match LodtFile::from_source(source()?) {
            Ok(file) => return Ok(file),
            Err(e @ (FormatError::Io { .. } | FormatError::NotLodt { .. })) => return Err(e),
            Err(e) => {
                super::hooks::at(super::hooks::Point::OpenFooterFailed);
                let being_written = crate::atomic::AtomicError::Locked {
                    path: path.to_path_buf(),
                };
                if crate::atomic::is_locked(path) {
                    return Err(being_written.into());
                }
                if Identity::of(path) == before {
                    return Err(e);
                }
                reopens += 1;
                if reopens > MAX_REOPENS {
                    return Err(being_written.into());
                }
            }
        }
    }
}

/// Whether `e`, from opening a file, says its header or footer bytes are
/// damaged (rather than unreadable, or of an unknown version).
fn damaged_at_open(e: &FormatError) -> bool {
    e.location().is_some()
        || matches!(
            e,
            FormatError::NoFooter { .. } | FormatError::NotLodt { .. }
        )
}

/// `e`, damage found twice at open in the bytes of a source that is not a
/// local file (an object store): named after the source, with no advice to
/// run `lodt recover`, which repairs local files only.
fn damaged_remote(source: &dyn RangeSource, e: FormatError) -> FormatError {
    let e = match e {
        FormatError::NoFooter { reason } => FormatError::corrupt(
            ErrorSite::file(FilePart::Trailer),
            format!(
                "no valid footer: {reason} (the same when read again); `lodt recover` repairs \
                 local files: copy the object and recover the copy"
            ),
        ),
        other => other,
    };
    FormatError::BadRead {
        file: source.describe(),
        source: Box::new(e),
    }
}

/// How many times [`LodtFile::open_with`] opens again a file that changed
/// while it was read (FORMAT.md §9, "Readers during an append").
const MAX_REOPENS: u32 = 8;

/// What tells that a file changed: device, inode, length, modification time.
#[derive(PartialEq, Eq)]
struct Identity(Option<(u64, u64, u64, Option<std::time::SystemTime>)>);

impl Identity {
    fn of(path: &Path) -> Self {
        Identity(std::fs::metadata(path).ok().map(|m| {
            #[cfg(unix)]
            let (dev, ino) = {
                use std::os::unix::fs::MetadataExt;
                (m.dev(), m.ino())
            };
            #[cfg(not(unix))]
            let (dev, ino) = (0, 0);
            (dev, ino, m.len(), m.modified().ok())
        }))
    }
}

/// Parses the trailer, the footer header and the index; checks that the
/// batches tile the file from `data_start` to the footer.
fn parse_footer(
    reads: &OpenReads<'_>,
    len: u64,
    data_start: u64,
    major: u16,
) -> Result<(u64, Vec<IndexEntry>)> {
    // The smallest batch section: 128 bytes in 1.0, 64 in 2.0.
    let min_len = if major >= 2 {
        STRUCT_LEN
    } else {
        2 * STRUCT_LEN
    };
    let min = data_start + 2 * STRUCT_LEN;
    if len < min {
        return Err(FormatError::NoFooter {
            reason: format!(
                "the file has {len} bytes, fewer than the {min} a file with this header and an empty footer has"
            ),
        });
    }
    let trailer_offset = len - STRUCT_LEN;
    let trailer_bytes = reads.get(trailer_offset..len)?;
    let trailer: Trailer = read_struct(
        trailer_bytes.as_slice(),
        trailer_offset,
        ErrorSite::file(FilePart::Trailer),
    )?;
    if trailer.tag != TRAILER_TAG {
        return Err(FormatError::NoFooter {
            reason: "the last 64 bytes are not a trailer".into(),
        });
    }
    trailer.check_crc(ErrorSite::file(FilePart::Trailer))?;
    let footer_offset = trailer.footer_offset.get();
    let count = trailer.batch_count.get();
    let corrupt = |part, reason: String| Err(FormatError::corrupt(ErrorSite::file(part), reason));
    // The index must fit between the footer header and the trailer.
    let index_len = count.checked_mul(INDEX_ENTRY_LEN).filter(|&l| l <= len);
    let expected_footer = index_len
        .and_then(pad64)
        .and_then(|padded| trailer_offset.checked_sub(padded + STRUCT_LEN));
    let Some((_, expected_footer)) = index_len.zip(expected_footer) else {
        return corrupt(
            FilePart::Trailer,
            format!("an index of {count} batches does not fit in a file of {len} bytes"),
        );
    };
    if footer_offset != expected_footer || footer_offset < data_start {
        return corrupt(
            FilePart::Trailer,
            format!(
                "footer offset {footer_offset}, expected {expected_footer} for {count} batches"
            ),
        );
    }
    // In range: footer_offset + 64 + padded index + 64 == len.
    let region = reads.get(footer_offset..len)?;
    let entries = check_footer_region(region.as_slice(), footer_offset, count, "the trailer")?;
    // The batches tile [data_start, footer_offset).
    let mut next = data_start;
    for (k, e) in entries.iter().enumerate() {
        let (offset, length) = (e.offset.get(), e.length.get());
        if offset != next || length < min_len || !length.is_multiple_of(64) {
            return Err(FormatError::corrupt(
                ErrorSite::batch(k as u64, FilePart::Index),
                format!(
                    "entry says {length} bytes at {offset}; expected a multiple of 64 of at least {min_len} at {next}"
                ),
            ));
        }
        next = offset.checked_add(length).filter(|&e| e <= footer_offset).ok_or_else(|| {
            FormatError::corrupt(
                ErrorSite::batch(k as u64, FilePart::Index),
                format!("batch of {length} bytes at {offset} runs past the footer at {footer_offset}"),
            )
        })?;
    }
    if next != footer_offset {
        return corrupt(
            FilePart::Index,
            format!("the batches end at {next}, the footer starts at {footer_offset}"),
        );
    }
    Ok((footer_offset, entries))
}

/// One batch of an open file: named tensor views borrowing the file.
///
/// ```
/// use lodt::{Batch, LodTensor};
/// let mut b = Batch::new();
/// b.push("x", LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?)?;
/// b.metadata_mut().insert("split".into(), "train".into());
/// let bytes = lodt::format::to_bytes([&b], Default::default())?;
/// let file = lodt::format::LodtFile::from_bytes(&bytes)?;
/// let batch = file.batch(0)?;
/// assert_eq!(batch.metadata()["split"], "train");
/// assert_eq!(batch.tensor("x")?.as_bytes(), &[1, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct BatchView<'a> {
    k: usize,
    meta: &'a BatchMeta,
    /// The batch's bytes (a window of the map, or a copy read for it).
    section: Section<'a>,
    offset: u64,
}

impl std::fmt::Debug for BatchView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchView")
            .field("index", &self.k)
            .field("tensors", &self.meta.names())
            .finish()
    }
}

impl<'a> BatchView<'a> {
    /// The batch's index in the file.
    ///
    /// ```
    /// # let bytes = lodt::format::to_bytes([&lodt::Batch::new()], Default::default())?;
    /// # let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.batch(0)?.index(), 0);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn index(&self) -> usize {
        self.k
    }

    /// The number of tensors.
    ///
    /// ```
    /// # let bytes = lodt::format::to_bytes([&lodt::Batch::new()], Default::default())?;
    /// # let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.batch(0)?.len(), 0);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.meta.tensors.len()
    }

    /// Whether the batch has no tensor.
    ///
    /// ```
    /// # let bytes = lodt::format::to_bytes([&lodt::Batch::new()], Default::default())?;
    /// # let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert!(file.batch(0)?.is_empty());
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.meta.tensors.is_empty()
    }

    /// The tensor names, in order.
    ///
    /// ```
    /// # let bytes = lodt::format::to_bytes([&lodt::Batch::new()], Default::default())?;
    /// # let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.batch(0)?.names().count(), 0);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn names(&self) -> impl ExactSizeIterator<Item = &'a str> + 'a {
        self.meta.tensors.iter().map(|t| &*t.name)
    }

    /// The batch's key/value metadata.
    ///
    /// ```
    /// # let bytes = lodt::format::to_bytes([&lodt::Batch::new()], Default::default())?;
    /// # let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert!(file.batch(0)?.metadata().is_empty());
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn metadata(&self) -> &'a BTreeMap<String, String> {
        &self.meta.metadata
    }

    /// The byte range of the batch within the file.
    ///
    /// ```
    /// # let bytes = lodt::format::to_bytes([&lodt::Batch::new()], Default::default())?;
    /// # let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.batch(0)?.byte_range(), file.batch_range(0)?);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn byte_range(&self) -> Range<u64> {
        self.offset..self.offset + self.meta.section_len
    }

    /// The total size of the tensor bodies, in bytes.
    ///
    /// ```
    /// # let t = lodt::LodTensor::from_vec(vec![1u16, 2], vec![2], Default::default())?;
    /// # let bytes = lodt::format::to_bytes([&lodt::Batch::try_from_tensors([("t", t)])?], Default::default())?;
    /// # let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.batch(0)?.body_bytes(), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn body_bytes(&self) -> u64 {
        self.meta.body_bytes()
    }

    fn no_such(&self, name: &str) -> FormatError {
        FormatError::NoSuchTensor {
            batch: self.k,
            name: name.to_owned(),
            available: self.meta.names(),
        }
    }

    fn position(&self, name: &str) -> Result<usize> {
        self.meta.find(name).ok_or_else(|| self.no_such(name))
    }

    /// The tensor named `name`: an owned tensor whose offsets and body are
    /// windows of the file's storage (no copy; O(levels)).
    ///
    /// ```
    /// # let t = lodt::LodTensor::from_vec(vec![1u16, 2], vec![2], Default::default())?;
    /// # let bytes = lodt::format::to_bytes([&lodt::Batch::try_from_tensors([("t", t)])?], Default::default())?;
    /// # let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// let batch = file.batch(0)?;
    /// assert_eq!(batch.tensor("t")?.as_slice::<u16>()?, &[1, 2]);
    /// let err = batch.tensor("nope").unwrap_err();
    /// assert!(err.to_string().contains("it has: t"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn tensor(&self, name: &str) -> Result<LodTensor> {
        let t = self.position(name)?;
        section::tensor(&self.section, self.meta, t)
    }

    /// The `i`-th tensor and its name.
    ///
    /// ```
    /// # let t = lodt::LodTensor::from_vec(vec![1u16, 2], vec![2], Default::default())?;
    /// # let bytes = lodt::format::to_bytes([&lodt::Batch::try_from_tensors([("t", t)])?], Default::default())?;
    /// # let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// assert_eq!(file.batch(0)?.tensor_at(0)?.0, "t");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tensor_at(&self, i: usize) -> Result<(&'a str, LodTensor)> {
        let tensor = section::tensor(&self.section, self.meta, i)?;
        Ok((&*self.meta.tensors[i].name, tensor))
    }

    /// Every tensor with its name, in order.
    ///
    /// ```
    /// # let t = lodt::LodTensor::from_vec(vec![1u16, 2], vec![2], Default::default())?;
    /// # let bytes = lodt::format::to_bytes([&lodt::Batch::try_from_tensors([("t", t)])?], Default::default())?;
    /// # let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// for t in file.batch(0)?.tensors() {
    ///     let (name, view) = t?;
    ///     assert_eq!((name, view.rows()), ("t", 2));
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tensors(&self) -> impl ExactSizeIterator<Item = Result<(&'a str, LodTensor)>> + 'a {
        let this = self.clone();
        (0..self.meta.tensors.len()).map(move |i| this.tensor_at(i))
    }

    /// The batch as an owned [`Batch`] whose tensors are windows of the
    /// file's storage (no copy).
    ///
    /// ```
    /// # let t = lodt::LodTensor::from_vec(vec![1u16, 2], vec![2], Default::default())?;
    /// # let bytes = lodt::format::to_bytes([&lodt::Batch::try_from_tensors([("t", t)])?], Default::default())?;
    /// # let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// let owned = file.batch(0)?.to_batch()?;
    /// assert_eq!(owned.get("t").unwrap().as_slice::<u16>()?, &[1, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn to_batch(&self) -> Result<Batch> {
        let mut batch = Batch::new();
        *batch.metadata_mut() = self.meta.metadata.clone();
        for t in self.tensors() {
            let (name, tensor) = t?;
            batch.push(name, tensor)?;
        }
        Ok(batch)
    }
}

/// A checked batch's metadata as [`LodtFile::verify_batch`] gives it: the
/// file's own, or a parse of the caller's (shared by the threads checking
/// the batch, freed by the last of them).
#[derive(Clone)]
pub(crate) enum MetaRef<'a> {
    Kept(&'a BatchMeta),
    Own(Arc<BatchMeta>),
}

impl std::ops::Deref for MetaRef<'_> {
    type Target = BatchMeta;
    fn deref(&self) -> &BatchMeta {
        match self {
            MetaRef::Kept(m) => m,
            MetaRef::Own(m) => m,
        }
    }
}
