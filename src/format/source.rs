//! [`RangeSource`]: where the `.lodt` reader gets its bytes. The reader asks
//! for byte ranges (the header, footer and index when a file is opened, then
//! one batch's section when that batch is first touched), never for the whole
//! file, so the same reader works over a memory map, positional reads, bytes
//! in memory, or (behind the same trait) an object store.
//!
//! | source | made by | bytes handed out | a file truncated underneath |
//! |---|---|---|---|
//! | [`MmapSource`] | [`LodtFile::open`](super::LodtFile::open) | windows of the map (no copy) | `SIGBUS` when a lost page is touched |
//! | [`PreadSource`] | [`LodtFile::open_with`](super::LodtFile::open_with) `{ mmap: false }` | one 64-aligned copy per range | an error ([`std::io::ErrorKind::UnexpectedEof`]) |
//! | [`MemorySource`] | [`LodtFile::from_bytes`](super::LodtFile::from_bytes), [`LodtFile::read`](super::LodtFile::read) | windows of the bytes | cannot happen |
//!
//! A source is synchronous, `Send + Sync`, and can fetch several ranges in one
//! call ([`RangeSource::read_ranges`]): a remote source turns one call into one
//! round of requests and owns whatever runtime it needs.
//!
//! A source with the whole file ([`RangeSource::whole`]: a map, bytes in
//! memory) hands out windows of it; any other source copies the bytes it
//! reads, and the reader checks every batch section it reads from one
//! against the batch's checksum table, bodies included, before any tensor of
//! it is handed out (`spec/FORMAT.md` §7.1): a copy damaged on its way (a
//! disk, a network, a proxy, a cache) is an error naming the source and the
//! batch, never values.

use super::error::{FormatError, Result};
use super::pattern::Pattern;
use super::regular::open_regular;
use super::storage::MappedFile;
use crate::buffer::{AlignedBytes, Buffer, ByteStorage};
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// A random-access source of a file's bytes.
///
/// ```
/// use lodt::format::{MemorySource, RangeSource};
/// let src = MemorySource::new(std::sync::Arc::new(vec![1u8, 2, 3, 4]), "four bytes");
/// assert_eq!(src.len(), 4);
/// let got = src.read_ranges(&[0..1, 2..4])?;
/// assert_eq!((got[0].as_slice(), got[1].as_slice()), (&[1][..], &[3, 4][..]));
/// # Ok::<(), std::io::Error>(())
/// ```
pub trait RangeSource: Send + Sync {
    /// The size of the file in bytes, fixed when the source was made.
    fn len(&self) -> u64;

    /// Whether the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads each range completely, in one round of requests. A range past
    /// the end is an error ([`std::io::ErrorKind::UnexpectedEof`]). The
    /// returned buffers are aligned to 8 bytes or more.
    fn read_ranges(&self, ranges: &[Range<u64>]) -> std::io::Result<Vec<Buffer>>;

    /// Reads one range completely ([`RangeSource::read_ranges`] of one).
    fn read_range(&self, range: Range<u64>) -> std::io::Result<Buffer> {
        self.read_ranges(std::slice::from_ref(&range))?
            .pop()
            .ok_or_else(short_answer)
    }

    /// How many bytes a first read at open should take from the start and from
    /// the end of the file. By default 64 bytes each, then what they point
    /// to. The local sources take a page from the start and 64 KiB from the
    /// end, which holds the footer of up to 2,700 batches: a read costs about
    /// as much whatever its size, so opening costs one read at each end; a
    /// remote source asks for more at once too, to save round trips.
    fn open_hint(&self) -> OpenHint {
        OpenHint { head: 64, tail: 64 }
    }

    /// Reads ranges that the reader parses while opening the file and does
    /// not keep (the header and file metadata, the footer and index, the
    /// trailer). By default, [`RangeSource::read_ranges`]. [`MmapSource`]
    /// reads them with positional reads, so that opening a mapped file faults
    /// no page of the map (on Linux a page fault with no advice reads up to
    /// the device's read-ahead, often megabytes, around the page).
    fn read_open_ranges(&self, ranges: &[Range<u64>]) -> std::io::Result<Vec<Buffer>> {
        self.read_ranges(ranges)
    }

    /// A hint: `ranges` are about to be read, as part of an access `pattern`.
    /// A source may pass it on to the OS (`madvise`, `posix_fadvise`) or start
    /// fetching the ranges; errors are ignored. The default does nothing.
    ///
    /// The reader calls it when a batch is first touched: with
    /// [`Pattern::Random`] and that batch's section for
    /// [`LodtFile::batch`](super::LodtFile::batch), with
    /// [`Pattern::Sequential`] and the next few MiB of batches for
    /// [`LodtFile::verify`](super::LodtFile::verify),
    /// [`LodtFile::batches`](super::LodtFile::batches) and batches touched in
    /// order (see [`ReadOptions::advice`](super::ReadOptions::advice)).
    ///
    /// ```
    /// use lodt::format::{MemorySource, Pattern, RangeSource};
    /// let src = MemorySource::new(std::sync::Arc::new(vec![0u8; 128]), "x");
    /// src.will_read(&[0..64], Pattern::Random); // bytes in memory: nothing to do
    /// ```
    fn will_read(&self, ranges: &[Range<u64>], pattern: Pattern) {
        let _ = (ranges, pattern);
    }

    /// A hint: every one of `ranges` (sorted by offset, disjoint) is about to
    /// be read, now, by a gather ([`LodtFile::take`](super::LodtFile::take),
    /// [`LodtFile::prefetch`](super::LodtFile::prefetch)). A source should
    /// start fetching all of them at once, in offset order, and return
    /// without waiting for them; errors are ignored. The default does
    /// nothing. [`MmapSource`] asks the OS for each range not in memory
    /// (`MADV_WILLNEED`, which queues the reads and returns);
    /// [`PreadSource`] likewise (`POSIX_FADV_WILLNEED`).
    ///
    /// ```
    /// use lodt::format::{MemorySource, RangeSource};
    /// let src = MemorySource::new(std::sync::Arc::new(vec![0u8; 128]), "x");
    /// src.will_gather(&[0..64, 96..128]); // bytes in memory: nothing to do
    /// ```
    fn will_gather(&self, ranges: &[Range<u64>]) {
        let _ = ranges;
    }

    /// The whole file as one storage, when the source has it (a map or bytes
    /// in memory). The reader then takes each batch's section as a window of
    /// it (borrowed: reaching a batch takes no reference count) instead of
    /// calling [`RangeSource::read_range`], so a source that returns it must
    /// read ranges as windows of it, with no other effect.
    fn whole(&self) -> Option<&Arc<dyn ByteStorage>> {
        None
    }

    /// Drops any copy of bytes `range` the source keeps (a disk cache
    /// entry), after the reader found the bytes read for it damaged; whether
    /// there was one, so that reading the range again fetches it anew. The
    /// reader then reads the batch again, once. The default keeps nothing:
    /// `false`.
    ///
    /// ```
    /// use lodt::format::{MemorySource, RangeSource};
    /// let src = MemorySource::new(std::sync::Arc::new(vec![0u8; 64]), "x");
    /// assert!(!src.discard(&(0..64))); // bytes in memory: nothing to drop
    /// ```
    fn discard(&self, range: &Range<u64>) -> bool {
        let _ = range;
        false
    }

    /// What the source reads, for messages (a path or a URI).
    fn describe(&self) -> String;

    /// Whether the source reads a local file that
    /// [`recover`](super::recover()) can repair (what messages about a
    /// damaged footer suggest). By default `false`; the map and the
    /// positional reads of a local file say `true`.
    ///
    /// ```
    /// use lodt::format::{MemorySource, RangeSource};
    /// let src = MemorySource::new(std::sync::Arc::new(vec![0u8; 64]), "x");
    /// assert!(!src.is_local_file());
    /// ```
    fn is_local_file(&self) -> bool {
        false
    }
}

/// The pattern last set on a source (0: none yet), so that it is set once
/// per change rather than once per batch.
#[derive(Default)]
struct CurrentPattern(AtomicU8);

impl CurrentPattern {
    /// Whether `pattern` differs from the current one (and records it).
    fn change_to(&self, pattern: Pattern) -> bool {
        self.0.swap(pattern.code(), Ordering::Relaxed) != pattern.code()
    }
}

/// The bytes a local source reads first when a file is opened, from each end:
/// a page holds the header and the file metadata; 64 KiB of the end holds the
/// footer, index and trailer of a file of up to 2,700 batches, so opening one
/// costs a read at each end (a smaller read costs as much: the OS reads whole
/// pages, and more around them).
const LOCAL_OPEN_HINT: OpenHint = OpenHint {
    head: 4096,
    tail: 64 << 10,
};

/// How much of the start and of the end of a file the first read at open
/// takes ([`RangeSource::open_hint`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenHint {
    /// Bytes from the start (at least the 64-byte file header).
    pub head: u64,
    /// Bytes from the end (at least the 64-byte trailer; more takes the footer
    /// and index in the same read).
    pub tail: u64,
}

fn eof(range: &Range<u64>, len: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        format!(
            "bytes {}..{} asked of a source of {len} bytes",
            range.start, range.end
        ),
    )
}

/// Windows of one storage holding the whole file.
fn windows(storage: &Arc<dyn ByteStorage>, ranges: &[Range<u64>]) -> std::io::Result<Vec<Buffer>> {
    let len = storage.bytes().len() as u64;
    ranges
        .iter()
        .map(|r| {
            if r.start > r.end || r.end > len {
                return Err(eof(r, len));
            }
            Buffer::try_new(storage.clone(), r.start as usize..r.end as usize)
                .map_err(|e| std::io::Error::other(e.to_string()))
        })
        .collect()
}

/// A window of one storage holding the whole file.
fn window(storage: &Arc<dyn ByteStorage>, r: Range<u64>) -> std::io::Result<Buffer> {
    let len = storage.bytes().len() as u64;
    if r.start > r.end || r.end > len {
        return Err(eof(&r, len));
    }
    Buffer::try_new(storage.clone(), r.start as usize..r.end as usize)
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// A file read through a read-only memory map (see [`MappedFile`] for the
/// caveat about files changed underneath). Ranges are windows of the map.
///
/// Opening reads the header and footer with positional reads (no page of
/// the map is faulted) and advises the map `MADV_HUGEPAGE`. Access hints
/// ([`RangeSource::will_read`]): a batch touched at random is fetched with
/// `MADV_WILLNEED` (just its section, in large requests), until random
/// access has asked for an eighth of the file; then, and for scans
/// (`MADV_SEQUENTIAL`), the OS's own read-ahead reads large aligned blocks
/// (2 to 4 MiB folios on Linux 5.18 and later). Pages fetched with
/// `MADV_WILLNEED` are 4 KiB pages, each mapped on its own; read-ahead into
/// 2 MiB folios makes a warm mapped read of the same bytes several times
/// cheaper, so scans leave it to the OS.
///
/// ```
/// use lodt::format::{MmapSource, RangeSource};
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("x.bin");
/// std::fs::write(&path, b"abcd")?;
/// let src = MmapSource::open(&path)?;
/// assert_eq!(src.read_ranges(&[1..3])?[0].as_slice(), b"bc");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MmapSource {
    map: Arc<MappedFile>,
    storage: Arc<dyn ByteStorage>,
    /// The mapped file, for the positional reads of [`RangeSource::read_open_ranges`].
    file: File,
    path: PathBuf,
    pattern: CurrentPattern,
    /// The bytes asked for with [`Pattern::Random`] so far.
    random_bytes: AtomicU64,
}

/// A section of a batch touched at random is fetched whole up to this size;
/// of a larger one, the first and the last [`WILLNEED_EDGE`] bytes (its
/// header, metadata, LoD and checksum table: a caller may want little of
/// its bodies).
const WILLNEED_WHOLE: u64 = 8 << 20;

/// How many ranges of a gather [`MmapSource`] checks before asking for
/// them all ([`RangeSource::will_gather`]).
const GATHER_SAMPLE: usize = 64;
const WILLNEED_EDGE: u64 = 2 << 20;

/// Once random access has asked for more than this fraction of a mapped file
/// (1 / `DENSE`), the source stops fetching each section: the access covers
/// the file, and the map's own faults read large aligned blocks around each
/// page (2-4 MiB with `MADV_HUGEPAGE`), which costs fewer, larger reads.
const DENSE: u64 = 8;

impl MmapSource {
    /// Maps the file at `path`, which must be a regular file (see
    /// [`open_regular`]).
    ///
    /// ```
    /// assert!(lodt::format::MmapSource::open("/no/such/file").is_err());
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = open_regular(path)
            .map_err(|e| FormatError::io(format!("opening {}", path.display()), e))?;
        let map = Arc::new(MappedFile::from_file(&file, path)?);
        map.advise_huge_pages();
        Ok(MmapSource {
            storage: map.clone(),
            map,
            file,
            path: path.to_path_buf(),
            pattern: CurrentPattern::default(),
            random_bytes: AtomicU64::new(0),
        })
    }

    /// `MADV_WILLNEED` on bytes `r` of the map, in requests of at most
    /// [`WILLNEED_EDGE`] (the OS reads at most its read-ahead size, or the
    /// device's largest request, per call).
    fn will_need(&self, r: Range<u64>) {
        let (Ok(start), Ok(end)) = (usize::try_from(r.start), usize::try_from(r.end)) else {
            return;
        };
        let step = WILLNEED_EDGE as usize;
        let mut at = start;
        while at < end {
            let to = end.min(at.saturating_add(step));
            self.map.will_need(at..to);
            at = to;
        }
    }

    /// Whether the first and the last page of `r` are in memory: then the
    /// section is taken to be read already, and `MADV_WILLNEED` (which looks
    /// up every page of the range: about 60 µs for a warm 4 MiB section) is
    /// skipped. Two `mincore` calls, about a microsecond.
    fn resident(&self, r: &Range<u64>) -> bool {
        let (Ok(first), Ok(last)) = (usize::try_from(r.start), usize::try_from(r.end)) else {
            return false;
        };
        r.start < r.end && self.map.resident(first) && self.map.resident(last - 1)
    }

    /// Whether random access, asking for `n` more bytes, is still sparse
    /// (less than 1 / [`DENSE`] of the file asked for so far).
    fn sparse(&self, n: u64) -> bool {
        let before = self.random_bytes.fetch_add(n, Ordering::Relaxed);
        before.saturating_add(n) <= self.len() / DENSE
    }
}

impl RangeSource for MmapSource {
    fn len(&self) -> u64 {
        self.storage.bytes().len() as u64
    }
    fn read_ranges(&self, ranges: &[Range<u64>]) -> std::io::Result<Vec<Buffer>> {
        windows(&self.storage, ranges)
    }
    fn read_range(&self, range: Range<u64>) -> std::io::Result<Buffer> {
        window(&self.storage, range)
    }
    fn read_open_ranges(&self, ranges: &[Range<u64>]) -> std::io::Result<Vec<Buffer>> {
        pread_ranges(&self.file, self.len(), ranges)
    }
    /// [`Pattern::Random`]: fetches each range (`MADV_WILLNEED`: read in
    /// large requests, and nothing around it), while random access is sparse
    /// (it has asked for less than an eighth of the file).
    /// [`Pattern::Sequential`]: advises the map sequential and leaves the
    /// rest to the OS's read-ahead, which on a map advised `MADV_HUGEPAGE`
    /// (done at open) reads 2 MiB folios ahead. Asking for the ranges ahead
    /// (`MADV_WILLNEED`) was measured no faster cold, and it fills the page
    /// cache with 4 KiB pages, which made every later mapped read of them 3
    /// to 5 times slower (one page-table entry per page instead of per 2 MiB).
    fn will_read(&self, ranges: &[Range<u64>], pattern: Pattern) {
        match pattern {
            Pattern::Random => {
                let asked: u64 = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
                if !self.sparse(asked) {
                    return;
                }
                for r in ranges {
                    let len = r.end.saturating_sub(r.start);
                    if self.resident(r) {
                        continue;
                    }
                    if len <= WILLNEED_WHOLE {
                        self.will_need(r.clone());
                    } else {
                        self.will_need(r.start..r.start + WILLNEED_EDGE);
                        self.will_need(r.end - WILLNEED_EDGE..r.end);
                    }
                }
            }
            Pattern::Sequential => {
                if self.pattern.change_to(pattern) {
                    self.map.advise_pattern(pattern);
                }
            }
        }
    }
    /// Every range asked of the OS (`MADV_WILLNEED`, in requests of at most
    /// 2 MiB): the reads are queued at once, in offset order, and the faults
    /// of the gather that follows wait for them instead of each reading on
    /// its own. No cut-off for dense access (as [`Pattern::Random`] has): the
    /// caller asked for these bytes alone. Unless a sample of the ranges
    /// (the first and last page of up to 64 of them, spread
    /// over the list) is all in memory: the gather is then taken to be warm
    /// and nothing is asked (asking costs a look-up of every page, about as
    /// much as a warm gather's copy).
    fn will_gather(&self, ranges: &[Range<u64>]) {
        let step = (ranges.len() / GATHER_SAMPLE).max(1);
        if ranges.iter().step_by(step).all(|r| self.resident(r)) {
            return;
        }
        for r in ranges {
            self.will_need(r.clone());
        }
    }
    fn open_hint(&self) -> OpenHint {
        LOCAL_OPEN_HINT
    }
    fn whole(&self) -> Option<&Arc<dyn ByteStorage>> {
        Some(&self.storage)
    }
    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn is_local_file(&self) -> bool {
        true
    }
}

/// A file read with positional reads (`pread`): each range is copied into a
/// 64-aligned buffer. No map, so a file truncated by another process gives an
/// error, never a signal.
///
/// ```
/// use lodt::format::{PreadSource, RangeSource};
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("x.bin");
/// std::fs::write(&path, b"abcd")?;
/// let src = PreadSource::open(&path)?;
/// assert_eq!(src.read_ranges(&[2..4])?[0].as_slice(), b"cd");
/// std::fs::write(&path, b"ab")?; // truncated underneath
/// assert!(src.read_ranges(&[2..4]).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PreadSource {
    file: File,
    len: u64,
    path: PathBuf,
    pattern: CurrentPattern,
}

impl PreadSource {
    /// Opens the file at `path`, which must be a regular file (see
    /// [`open_regular`]), for positional reads.
    ///
    /// ```
    /// assert!(lodt::format::PreadSource::open("/no/such/file").is_err());
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let ctx = || format!("opening {}", path.display());
        let file = open_regular(path).map_err(|e| FormatError::io(ctx(), e))?;
        let len = file
            .metadata()
            .map_err(|e| FormatError::io(ctx(), e))?
            .len();
        Ok(PreadSource {
            file,
            len,
            path: path.to_path_buf(),
            pattern: CurrentPattern::default(),
        })
    }
}

/// Ranges of `file` (of `len` bytes), each read into a 64-aligned buffer.
/// Several ranges are all asked of the OS first (`POSIX_FADV_WILLNEED`), so
/// that their reads from disk overlap (opening a cold file reads both of its
/// ends in about the time of one read).
fn pread_ranges(file: &File, len: u64, ranges: &[Range<u64>]) -> std::io::Result<Vec<Buffer>> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if ranges.len() > 1 {
        for r in ranges {
            if r.start < r.end && r.end <= len {
                fadvise(file, r.clone(), libc::POSIX_FADV_WILLNEED);
            }
        }
    }
    ranges.iter().map(|r| pread_range(file, len, r)).collect()
}

/// Range `r` of `file` (of `len` bytes), read into a 64-aligned buffer.
fn pread_range(file: &File, len: u64, r: &Range<u64>) -> std::io::Result<Buffer> {
    if r.start > r.end || r.end > len {
        return Err(eof(r, len));
    }
    let n = usize::try_from(r.end - r.start)
        .map_err(|_| std::io::Error::other("range larger than memory"))?;
    let mut bytes = AlignedBytes::try_zeroed(n).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::OutOfMemory,
            format!("out of memory: needed {n} bytes for a read of the file"),
        )
    })?;
    read_exact_at(file, bytes.as_mut_slice(), r.start)?;
    Ok(Buffer::from_storage(Arc::new(bytes)))
}

/// `posix_fadvise` (a hint: errors are ignored; nothing where it does not exist).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn fadvise(file: &File, range: Range<u64>, advice: libc::c_int) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (
        libc::off_t::try_from(range.start),
        libc::off_t::try_from(range.end.saturating_sub(range.start)),
    ) else {
        return;
    };
    // SAFETY: posix_fadvise reads no memory of ours; the descriptor is open
    // for as long as `file` is borrowed.
    let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), offset, len, advice) };
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(not(unix))]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let n =
            std::os::windows::fs::FileExt::seek_read(file, &mut buf[done..], offset + done as u64)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        done += n;
    }
    Ok(())
}

impl RangeSource for PreadSource {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_ranges(&self, ranges: &[Range<u64>]) -> std::io::Result<Vec<Buffer>> {
        pread_ranges(&self.file, self.len, ranges)
    }
    fn will_read(&self, ranges: &[Range<u64>], pattern: Pattern) {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            if self.pattern.change_to(pattern) {
                let advice = match pattern {
                    Pattern::Random => libc::POSIX_FADV_RANDOM,
                    Pattern::Sequential => libc::POSIX_FADV_SEQUENTIAL,
                };
                fadvise(&self.file, 0..0, advice);
            }
            // A random read reads exactly its range anyway; ranges ahead of a
            // sequential one are fetched now, while the caller works.
            if pattern == Pattern::Sequential {
                for r in ranges {
                    fadvise(&self.file, r.clone(), libc::POSIX_FADV_WILLNEED);
                }
            }
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let _ = (ranges, pattern, &self.pattern);
    }
    /// Each range asked of the OS (`POSIX_FADV_WILLNEED`: queued at once,
    /// in offset order), so that the positional reads that follow find it
    /// in the page cache.
    fn will_gather(&self, ranges: &[Range<u64>]) {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        for r in ranges {
            fadvise(&self.file, r.clone(), libc::POSIX_FADV_WILLNEED);
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let _ = ranges;
    }
    fn open_hint(&self) -> OpenHint {
        LOCAL_OPEN_HINT
    }
    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn is_local_file(&self) -> bool {
        true
    }
}

/// A file held in memory. Ranges are windows of the bytes.
///
/// ```
/// use lodt::format::{MemorySource, RangeSource};
/// let src = MemorySource::new(std::sync::Arc::new(b"abc".to_vec()), "abc");
/// assert_eq!(src.read_ranges(&[0..2])?[0].as_slice(), b"ab");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct MemorySource {
    storage: Arc<dyn ByteStorage>,
    name: String,
}

impl MemorySource {
    /// A source over `storage`, described as `name` in messages. Storage that
    /// is not 64-aligned is copied into an aligned buffer (tensors are read in
    /// place and need aligned buffers).
    ///
    /// ```
    /// use lodt::format::{MemorySource, RangeSource};
    /// assert_eq!(MemorySource::new(std::sync::Arc::new(vec![0u8; 3]), "x").len(), 3);
    /// ```
    pub fn new(storage: Arc<dyn ByteStorage>, name: impl Into<String>) -> Self {
        let storage: Arc<dyn ByteStorage> =
            if (storage.bytes().as_ptr() as usize).is_multiple_of(64) {
                storage
            } else {
                Arc::new(AlignedBytes::from_slice(storage.bytes()))
            };
        MemorySource {
            storage,
            name: name.into(),
        }
    }
}

impl RangeSource for MemorySource {
    fn len(&self) -> u64 {
        self.storage.bytes().len() as u64
    }
    fn read_ranges(&self, ranges: &[Range<u64>]) -> std::io::Result<Vec<Buffer>> {
        windows(&self.storage, ranges)
    }
    fn read_range(&self, range: Range<u64>) -> std::io::Result<Buffer> {
        window(&self.storage, range)
    }
    fn whole(&self) -> Option<&Arc<dyn ByteStorage>> {
        Some(&self.storage)
    }
    fn describe(&self) -> String {
        self.name.clone()
    }
}

/// The reads of one open: the first read's head and tail, then anything else
/// read on demand. Ranges inside the head or tail cost nothing more.
pub(crate) struct OpenReads<'a> {
    source: &'a dyn RangeSource,
    head: Buffer,
    tail: Buffer,
    tail_start: u64,
    /// Every range read, for [`OpenReads::discard`].
    read: std::sync::Mutex<Vec<Range<u64>>>,
}

impl<'a> OpenReads<'a> {
    /// Takes the source's [`OpenHint`] from each end in one read (one range
    /// when they overlap).
    pub(crate) fn start(source: &'a dyn RangeSource) -> Result<Self> {
        let len = source.len();
        let hint = source.open_hint();
        let head_len = hint.head.max(64).min(len);
        let tail_len = hint.tail.max(64).min(len);
        let tail_start = len - tail_len;
        let ctx = || format!("reading the start and end of {}", source.describe());
        let (head, tail) = if head_len >= tail_start {
            let whole = read_open_one(source, 0..len, ctx)?;
            (whole.clone(), whole)
        } else {
            let mut got = source
                .read_open_ranges(&[0..head_len, tail_start..len])
                .map_err(|e| FormatError::io(ctx(), e))?;
            let tail = got.pop();
            let head = got.pop();
            match (head, tail) {
                (Some(h), Some(t)) => (h, t),
                _ => return Err(FormatError::io(ctx(), short_answer())),
            }
        };
        Ok(OpenReads {
            source,
            tail_start: if head_len >= tail_start {
                0
            } else {
                tail_start
            },
            head,
            tail,
            read: std::sync::Mutex::new(if head_len >= tail_start {
                std::iter::once(0..len).collect()
            } else {
                vec![0..head_len, tail_start..len]
            }),
        })
    }

    /// Tells the source to drop any copy it keeps of the ranges read
    /// ([`RangeSource::discard`]), so that reading them again fetches them
    /// anew.
    pub(crate) fn discard(&self) {
        if let Ok(read) = self.read.lock() {
            for r in read.iter() {
                self.source.discard(r);
            }
        }
    }

    /// Bytes `r` of the file.
    pub(crate) fn get(&self, r: Range<u64>) -> Result<Buffer> {
        if r.end <= self.head.len() as u64 {
            return self
                .head
                .slice(r.start as usize..r.end as usize)
                .map_err(FormatError::Core);
        }
        if r.start >= self.tail_start {
            let (s, e) = (r.start - self.tail_start, r.end - self.tail_start);
            return self
                .tail
                .slice(s as usize..e as usize)
                .map_err(FormatError::Core);
        }
        let source = self.source;
        if let Ok(mut read) = self.read.lock() {
            read.push(r.clone());
        }
        read_open_one(source, r.clone(), || {
            format!(
                "reading bytes {}..{} of {}",
                r.start,
                r.end,
                source.describe()
            )
        })
    }
}

fn short_answer() -> std::io::Error {
    std::io::Error::other("the source returned fewer ranges than asked")
}

/// One range of `source`, as a buffer.
pub(crate) fn read_one(
    source: &dyn RangeSource,
    r: Range<u64>,
    ctx: impl Fn() -> String,
) -> Result<Buffer> {
    source.read_range(r).map_err(|e| FormatError::io(ctx(), e))
}

/// One range of `source`, read as [`RangeSource::read_open_ranges`] does.
fn read_open_one(
    source: &dyn RangeSource,
    r: Range<u64>,
    ctx: impl Fn() -> String,
) -> Result<Buffer> {
    source
        .read_open_ranges(std::slice::from_ref(&r))
        .map_err(|e| FormatError::io(ctx(), e))?
        .pop()
        .ok_or_else(|| FormatError::io(ctx(), short_answer()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_access_to_a_map_is_sparse_until_an_eighth_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.bin");
        std::fs::write(&path, vec![0u8; 64 << 10]).unwrap();
        let src = MmapSource::open(&path).unwrap();
        assert!(src.sparse(4096));
        assert!(src.sparse(4096)); // 8 KiB of 64 KiB: an eighth
        assert!(!src.sparse(1));
        // The hints themselves are only hints: reading is unchanged.
        src.will_read(&[0..100, 1000..70_000], Pattern::Random);
        src.will_read(&[0..100, 200..300], Pattern::Sequential);
        let got = src.read_ranges(&[10..20, 30..31]).unwrap();
        assert_eq!(got[0].as_slice(), &[0; 10]);
    }

    #[test]
    fn opening_a_mapped_file_reads_with_positional_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.bin");
        std::fs::write(&path, (0..=255u8).collect::<Vec<_>>()).unwrap();
        let src = MmapSource::open(&path).unwrap();
        let got = src.read_open_ranges(&[0..4, 250..256]).unwrap();
        assert_eq!(got[0].as_slice(), &[0, 1, 2, 3]);
        assert_eq!(got[1].as_slice(), &[250, 251, 252, 253, 254, 255]);
        // A copy, not a window of the map.
        let map = src.whole().unwrap().bytes().as_ptr_range();
        assert!(!map.contains(&got[0].as_slice().as_ptr()));
        assert!(src.read_open_ranges(&[0..1, 250..257]).is_err());
    }
}
