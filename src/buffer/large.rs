//! Large buffers made by a copy ([`Buffer::try_concat`]): an anonymous memory
//! map, as numpy uses for large arrays. Filling fresh 4 KiB pages costs a
//! page fault each, which dominated gathering tens of MiB; transparent huge
//! pages cut the faults 512-fold, and a map faulted in by one call takes none
//! while it is filled.

use super::{Buffer, ByteStorage};
use crate::error::{Error, Result};
use std::sync::Arc;

/// How a large buffer made by a copy gets its pages.
///
/// ```
/// use lodt::buffer::{Buffer, Pages};
/// let b = Buffer::try_concat(&[b"ab", b"c"], Pages::Huge)?;
/// assert_eq!(b.as_slice(), b"abc");
/// # Ok::<(), lodt::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// Transparent huge pages where the OS offers them: the fewest page
    /// faults. The kernel may stall in compaction to find them when memory is
    /// fragmented (for example by a large page cache).
    Huge,
    /// Small pages, all faulted in by one call (`MAP_POPULATE`): filling takes
    /// no page fault, and no compaction can stall it.
    Prefaulted,
}

/// Below this size a heap allocation is faster: glibc's malloc serves it
/// from the heap and reuses freed memory (its mmap threshold adapts up to
/// 32 MiB), so repeated copies fault no page in.
const MAP_AT: usize = 32 << 20;

/// An anonymous map of `len >= 1` bytes, written only before it is shared.
struct MappedBytes {
    map: memmap2::MmapMut,
    len: usize,
}

// SAFETY: the map is created once and never remapped or resized; its bytes
// are written only through `&mut self` (in `Buffer::try_concat`, before the
// storage is put behind an `Arc`), and `bytes` always returns the same window.
unsafe impl ByteStorage for MappedBytes {
    fn bytes(&self) -> &[u8] {
        &self.map[..self.len]
    }
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        Some(&mut self.map[..self.len])
    }
}

impl Buffer {
    /// `parts` copied one after another into one new buffer, in one pass (no
    /// zero-fill first). Below 32 MiB the bytes go to the heap; larger ones to
    /// an anonymous map whose pages come as `pages` says. Running out of
    /// memory is an error, not an abort. Heap allocations are 16-byte aligned
    /// and maps page-aligned: enough for every dtype.
    ///
    /// ```
    /// use lodt::buffer::{Buffer, Pages};
    /// let big = vec![7u8; 40 << 20];
    /// let b = Buffer::try_concat(&[&big, b"xy"], Pages::Prefaulted)?;
    /// assert_eq!(b.len(), (40 << 20) + 2);
    /// assert_eq!(&b.as_slice()[(40 << 20) - 1..], &[7, b'x', b'y']);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn try_concat(parts: &[&[u8]], pages: Pages) -> Result<Buffer> {
        let len = total_len(parts)?;
        let no_memory = crate::error::allocation_failed(len as u64, "a concatenated buffer");
        if len < MAP_AT {
            let mut data: Vec<u8> = Vec::new();
            data.try_reserve_exact(len).map_err(|_| no_memory)?;
            for part in parts {
                data.extend_from_slice(part);
            }
            return Ok(Buffer::from_storage(Arc::new(data)));
        }
        let map = match pages {
            Pages::Huge => {
                let map = memmap2::MmapMut::map_anon(len).map_err(|_| no_memory)?;
                #[cfg(target_os = "linux")]
                {
                    // A hint: without transparent huge pages the map still works.
                    let _ = map.advise(memmap2::Advice::HugePage);
                }
                map
            }
            Pages::Prefaulted => memmap2::MmapOptions::new()
                .len(len)
                .populate()
                .map_anon()
                .map_err(|_| no_memory)?,
        };
        let mut storage = MappedBytes { map, len };
        if let Some(dst) = storage.bytes_mut() {
            fill(dst, parts);
        }
        Ok(Buffer::from_storage(Arc::new(storage)))
    }
}

/// The sum of the parts' lengths, or an error if it overflows.
pub(super) fn total_len(parts: &[&[u8]]) -> Result<usize> {
    parts
        .iter()
        .try_fold(0usize, |n, p| n.checked_add(p.len()))
        .ok_or(Error::Overflow {
            what: "concatenated buffer",
        })
}

/// `parts` copied one after another to the start of `dst`, which holds at
/// least their total length (what does not fit is not copied).
pub(super) fn fill(dst: &mut [u8], parts: &[&[u8]]) {
    let mut at = 0usize;
    for part in parts {
        if let Some(window) = dst.get_mut(at..at + part.len()) {
            window.copy_from_slice(part);
        }
        at += part.len();
    }
}
