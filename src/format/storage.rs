//! Storages a file's bytes live in: [`MappedFile`] (a read-only memory map) and
//! a growable 64-aligned buffer for the sequential reader.

use super::error::{FormatError, Result};
use super::pattern::Pattern;
use crate::buffer::ByteStorage;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// A whole file mapped read-only into memory: a [`ByteStorage`], so tensors
/// can borrow its bytes with no copy.
///
/// **Caveat:** a mapping shows the file's current bytes. If another process
/// truncates the file while it is mapped, touching the lost pages raises
/// `SIGBUS` (the process dies); if it rewrites bytes in place, they change
/// under the reader. Writers in this crate never do either to a finished file
/// (saving replaces the file by renaming a new one over it, and appending only
/// adds bytes). For files that other programs may modify, read them into memory
/// instead ([`LodtFile::read`](super::LodtFile::read)).
///
/// ```
/// use lodt::buffer::ByteStorage;
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("x.bin");
/// std::fs::write(&path, b"abc")?;
/// let map = lodt::format::MappedFile::open(&path)?;
/// assert_eq!(map.bytes(), b"abc");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MappedFile {
    map: memmap2::Mmap,
}

impl MappedFile {
    /// Maps the file at `path` read-only. Anything but a regular file (a
    /// FIFO, a device) is refused (see [`open_regular`](super::open_regular)).
    ///
    /// ```
    /// assert!(lodt::format::MappedFile::open("/no/such/file").is_err());
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = super::regular::open_regular(path)
            .map_err(|e| FormatError::io(format!("opening {}", path.display()), e))?;
        Self::from_file(&file, path)
    }

    /// Maps the open `file` (whose path is `path`, for messages) read-only.
    pub(crate) fn from_file(file: &File, path: &Path) -> Result<Self> {
        // SAFETY: `Mmap::map` is unsafe because the mapped bytes can change or
        // vanish while they are borrowed as `&[u8]`: another process may write
        // the file in place (the slice's contents change behind Rust's back) or
        // truncate it (touching pages past the new end raises SIGBUS and kills
        // the process). This cannot be prevented from here; it is documented
        // on `MappedFile` and `LodtFile::open`, which point users of shared,
        // changing files to `LodtFile::read`. lodt's own writers never modify
        // a finished file in place except by appending, and readers copy the
        // only part an append rewrites (the footer index); the truncations
        // lodt does (rolling back a failed append to the file's length before
        // it, recovering a file in place) only remove bytes past every batch
        // a reader could have found through a valid footer.
        let map = unsafe { memmap2::Mmap::map(file) }
            .map_err(|e| FormatError::io(format!("mapping {}", path.display()), e))?;
        Ok(MappedFile { map })
    }

    /// Tells the OS the map will be read from start to end (a hint; errors are ignored).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("x.bin");
    /// # std::fs::write(&path, b"abc")?;
    /// lodt::format::MappedFile::open(&path)?.advise_sequential();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn advise_sequential(&self) {
        #[cfg(unix)]
        {
            let _ = self.map.advise(memmap2::Advice::Sequential);
            let _ = self.map.advise(memmap2::Advice::WillNeed);
        }
    }

    /// Sets the access pattern of the whole map (`madvise` `MADV_RANDOM` or
    /// `MADV_SEQUENTIAL`; a hint, errors are ignored). The pattern is the
    /// map's, not a range's: advising ranges would split the mapping into
    /// one kernel mapping per range.
    pub(crate) fn advise_pattern(&self, pattern: Pattern) {
        #[cfg(unix)]
        {
            let advice = match pattern {
                Pattern::Random => memmap2::Advice::Random,
                Pattern::Sequential => memmap2::Advice::Sequential,
            };
            let _ = self.map.advise(advice);
        }
        #[cfg(not(unix))]
        let _ = pattern;
    }

    /// Asks the OS to back the map with huge pages where it can
    /// (`MADV_HUGEPAGE`; a hint, errors are ignored). On Linux 5.18 and later
    /// a page fault on a file map with this advice reads the 2 MiB-aligned
    /// block around the page (twice that unless the map is advised random)
    /// into 2 MiB page-cache folios, mapped with one page-table entry each:
    /// large reads when cold, and cheap faults when warm.
    pub(crate) fn advise_huge_pages(&self) {
        #[cfg(target_os = "linux")]
        let _ = self.map.advise(memmap2::Advice::HugePage);
    }

    /// Drops the map's pages from this process's resident set
    /// (`MADV_DONTNEED`; a hint, errors are ignored): after a pass over the
    /// whole map (a checksum), the process keeps only the pages it touches
    /// again; they come back from the page cache on the next touch, with the
    /// same bytes.
    pub(crate) fn release_pages(&self) {
        #[cfg(unix)]
        {
            // SAFETY: `MADV_DONTNEED` is unsafe in general because, on a
            // private mapping with modified (copied-on-write) pages, it
            // discards the modifications. This map is read-only (`Mmap::map`:
            // `PROT_READ`, `MAP_SHARED`), so it has no modified pages: the
            // dropped pages are read again from the file on the next touch,
            // with the same bytes, and every `&[u8]` into the map stays valid.
            let _ = unsafe {
                self.map
                    .unchecked_advise(memmap2::UncheckedAdvice::DontNeed)
            };
        }
    }

    /// Whether the page holding byte `offset` of the map is in memory
    /// (`mincore`: in the page cache for a file the caller owns or may write,
    /// else mapped into this process). `false` where unknown: past the end,
    /// on an error, or off Linux.
    pub(crate) fn resident(&self, offset: usize) -> bool {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            if offset >= self.map.len() {
                return false;
            }
            let mut status = 0u8;
            // SAFETY: sysconf reads no memory of ours. The map starts on a
            // page boundary and `offset` is inside it, so the page-aligned
            // address `page` lies inside the mapping; mincore of 1 byte from
            // there covers one page and writes one status byte into `status`,
            // a valid `u8` of ours.
            let rc = unsafe {
                let size = usize::try_from(libc::sysconf(libc::_SC_PAGESIZE)).unwrap_or(0);
                if !size.is_power_of_two() {
                    return false;
                }
                let page = (self.map.as_ptr() as usize + offset) & !(size - 1);
                libc::mincore(page as *mut libc::c_void, 1, &mut status)
            };
            rc == 0 && status & 1 == 1
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            let _ = offset;
            false
        }
    }

    /// Asks the OS to start reading `range` of the map now (`MADV_WILLNEED`:
    /// the pages are read in large requests, and the faults that follow wait
    /// for them instead of each reading its own; a hint, errors are ignored).
    pub(crate) fn will_need(&self, range: std::ops::Range<usize>) {
        #[cfg(unix)]
        {
            let end = range.end.min(self.map.len());
            if range.start < end {
                let _ = self.map.advise_range(
                    memmap2::Advice::WillNeed,
                    range.start,
                    end - range.start,
                );
            }
        }
        #[cfg(not(unix))]
        let _ = range;
    }
}

// SAFETY: the map is read-only and never remapped while this object lives, so
// `bytes` returns the same slice every time. lodt's writers never change the
// bytes of a committed batch in place (new files are renamed into place;
// appends only add bytes and rewrite the footer, which no tensor points
// into). Another program that rewrites the file in place breaks every reader
// of a shared mapping, lodt's included; `LodtFile::open` documents this and
// positional reads avoid it.
unsafe impl ByteStorage for MappedFile {
    fn bytes(&self) -> &[u8] {
        &self.map
    }
}

/// One 64-byte, 64-aligned block.
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C, align(64))]
struct Block([u8; 64]);

/// A 64-aligned byte buffer that grows as data arrives, so reading a section
/// whose header announces a huge length allocates only about as much as the
/// source actually delivers.
pub(crate) struct GrowBuf {
    blocks: Vec<Block>,
    len: usize,
}

impl GrowBuf {
    /// A buffer holding a copy of `head`.
    pub fn from_head(head: &[u8]) -> Self {
        let mut b = GrowBuf {
            blocks: vec![Block([0; 64]); head.len().div_ceil(64)],
            len: head.len(),
        };
        b.as_mut_slice().copy_from_slice(head);
        b
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.blocks.as_mut_bytes()[..len]
    }

    /// Appends exactly `n` bytes from `r`, growing step by step. On a short
    /// read, returns how many bytes did arrive.
    pub fn fill_from(&mut self, r: &mut dyn Read, n: usize) -> std::io::Result<Result<(), usize>> {
        const FIRST_STEP: usize = 1 << 20;
        let target = match self.len.checked_add(n) {
            Some(t) => t,
            None => return Ok(Err(0)),
        };
        let start = self.len;
        while self.len < target {
            let cap = self.blocks.len() * 64;
            if self.len == cap {
                let want = cap.saturating_mul(2).max(FIRST_STEP).min(target);
                let blocks = want.div_ceil(64);
                // Fallible: a section length no checksum vouches for yet, or
                // a large one on a small machine, is an error, not an abort.
                self.blocks
                    .try_reserve_exact(blocks - self.blocks.len())
                    .map_err(|_| {
                        std::io::Error::new(
                            std::io::ErrorKind::OutOfMemory,
                            format!("no memory for a buffer of {want} bytes"),
                        )
                    })?;
                self.blocks.resize(blocks, Block([0; 64]));
            }
            let cap = self.blocks.len() * 64;
            let end = cap.min(target);
            let dst = &mut self.blocks.as_mut_bytes()[self.len..end];
            match r.read(dst) {
                Ok(0) => return Ok(Err(self.len - start)),
                Ok(got) => self.len += got,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Ok(()))
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.blocks.as_bytes()[..self.len]
    }
}

// SAFETY: the blocks are only resized through `&mut self` while filling,
// before the buffer is shared; afterwards nothing changes them.
unsafe impl ByteStorage for GrowBuf {
    fn bytes(&self) -> &[u8] {
        self.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_just_written_is_resident_and_past_the_end_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.bin");
        std::fs::write(&path, vec![7u8; 3 * 4096 + 10]).unwrap();
        let map = MappedFile::open(&path).unwrap();
        // Written by this process (its owner): mincore reports the page cache.
        #[cfg(target_os = "linux")]
        {
            assert!(map.resident(0));
            assert!(map.resident(3 * 4096 + 9));
        }
        assert!(!map.resident(3 * 4096 + 10));
        assert!(!map.resident(usize::MAX));
    }

    #[test]
    fn growbuf_grows_and_stays_aligned() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
        let mut b = GrowBuf::from_head(&data[..64]);
        let mut src = &data[64..];
        assert_eq!(b.fill_from(&mut src, data.len() - 64).unwrap(), Ok(()));
        assert_eq!(b.as_slice(), &data[..]);
        assert_eq!(b.as_slice().as_ptr() as usize % 64, 0);
    }

    #[test]
    fn growbuf_reports_short_reads_without_huge_allocations() {
        let mut b = GrowBuf::from_head(&[1; 64]);
        let mut src: &[u8] = &[2; 100];
        assert_eq!(b.fill_from(&mut src, 1 << 40).unwrap(), Err(100));
        assert!(b.blocks.len() * 64 <= 2 << 20);
    }
}
