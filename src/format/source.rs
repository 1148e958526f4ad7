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

use super::error::{FormatError, Result};
use super::storage::MappedFile;
use crate::buffer::{AlignedBytes, Buffer, ByteStorage};
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

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

    /// The whole file as one storage, when the source has it (a map or bytes
    /// in memory).
    fn whole(&self) -> Option<&Arc<dyn ByteStorage>> {
        None
    }

    /// What the source reads, for messages (a path or a URI).
    fn describe(&self) -> String;
}

/// How a range is about to be read ([`RangeSource::will_read`]).
///
/// ```
/// assert_ne!(lodt::format::Pattern::Random, lodt::format::Pattern::Sequential);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// Batches in no particular order: read what is asked, nothing around it
    /// (`MADV_RANDOM` / `POSIX_FADV_RANDOM`, then `WILLNEED` on the batch).
    Random,
    /// Batches in file order: read ahead (`MADV_SEQUENTIAL` /
    /// `POSIX_FADV_SEQUENTIAL`, then `WILLNEED` on the batches ahead).
    Sequential,
}

impl Pattern {
    fn code(self) -> u8 {
        match self {
            Pattern::Random => 1,
            Pattern::Sequential => 2,
        }
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

/// A file read through a read-only memory map (see [`MappedFile`] for the
/// caveat about files changed underneath). Ranges are windows of the map.
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
}

impl MmapSource {
    /// Maps the file at `path`.
    ///
    /// ```
    /// assert!(lodt::format::MmapSource::open("/no/such/file").is_err());
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = File::open(path)
            .map_err(|e| FormatError::io(format!("opening {}", path.display()), e))?;
        let map = Arc::new(MappedFile::from_file(&file, path)?);
        Ok(MmapSource {
            storage: map.clone(),
            map,
            file,
            path: path.to_path_buf(),
            pattern: CurrentPattern::default(),
        })
    }
}

impl RangeSource for MmapSource {
    fn len(&self) -> u64 {
        self.storage.bytes().len() as u64
    }
    fn read_ranges(&self, ranges: &[Range<u64>]) -> std::io::Result<Vec<Buffer>> {
        windows(&self.storage, ranges)
    }
    fn read_open_ranges(&self, ranges: &[Range<u64>]) -> std::io::Result<Vec<Buffer>> {
        let len = self.len();
        ranges
            .iter()
            .map(|r| pread_range(&self.file, len, r))
            .collect()
    }
    fn will_read(&self, ranges: &[Range<u64>], pattern: Pattern) {
        if self.pattern.change_to(pattern) {
            self.map.advise_pattern(pattern);
        }
        for r in ranges {
            // In range of the map (usize): `will_need` clamps the end.
            if let Ok(start) = usize::try_from(r.start) {
                let end = usize::try_from(r.end).unwrap_or(usize::MAX);
                self.map.will_need(start..end);
            }
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
    /// Opens the file at `path` for positional reads.
    ///
    /// ```
    /// assert!(lodt::format::PreadSource::open("/no/such/file").is_err());
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let ctx = || format!("opening {}", path.display());
        let file = File::open(path).map_err(|e| FormatError::io(ctx(), e))?;
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

/// Range `r` of `file` (of `len` bytes), read into a 64-aligned buffer.
fn pread_range(file: &File, len: u64, r: &Range<u64>) -> std::io::Result<Buffer> {
    if r.start > r.end || r.end > len {
        return Err(eof(r, len));
    }
    let n = usize::try_from(r.end - r.start)
        .map_err(|_| std::io::Error::other("range larger than memory"))?;
    let mut bytes = AlignedBytes::try_zeroed(n)
        .map_err(|_| std::io::Error::other(format!("cannot allocate {n} bytes")))?;
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
        ranges
            .iter()
            .map(|r| pread_range(&self.file, self.len, r))
            .collect()
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
    fn open_hint(&self) -> OpenHint {
        LOCAL_OPEN_HINT
    }
    fn describe(&self) -> String {
        self.path.display().to_string()
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
        })
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
    source
        .read_ranges(std::slice::from_ref(&r))
        .map_err(|e| FormatError::io(ctx(), e))?
        .pop()
        .ok_or_else(|| FormatError::io(ctx(), short_answer()))
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
