//! [`BufferPool`]: large buffers made by a copy that go back to a pool when
//! their last user drops them, to be filled again by the next copy. A
//! training loop gathers mini-batches of about the same size one after
//! another; a fresh buffer per mini-batch costs a page fault per page filled
//! (or the kernel's zeroing of huge pages), a recycled one none.

use super::{Buffer, ByteStorage};
use crate::error::{Error, Result};
use std::sync::{Arc, Mutex, Weak};

/// Below this size a copy goes to the heap, as with [`Buffer::try_concat`]:
/// malloc reuses small freed blocks without faulting pages in again.
const POOLED_FROM: usize = 64 << 10;

/// A pooled region's size is a multiple of this below [`HUGE`] ...
const SMALL_STEP: usize = 64 << 10;

/// ... and a multiple of a huge page from there on (transparent huge pages
/// are asked for).
const HUGE: usize = 2 << 20;

/// Large buffers recycled between copies of about the same size: what
/// [`Dataset`](crate::dataset::Dataset)'s loaders gather each mini-batch
/// into.
///
/// [`BufferPool::try_concat`] copies into a free region at least as large
/// as the result (the last one given back, unless it is twice as large or
/// more: then the smallest), or into a new one when none fits;
/// when the last [`Buffer`] (or slice of one, or numpy array over one) of a
/// region is dropped, the region goes back to the pool, which keeps at most
/// `keep` free regions (the largest) and unmaps the others. A region is
/// reused only once nothing refers to it any more, so a buffer's bytes
/// never change while it is alive. Copies below 64 KiB go to the heap.
/// Clones share the pool.
///
/// ```
/// use lodt::buffer::BufferPool;
/// let pool = BufferPool::new(2);
/// let big = vec![7u8; 1 << 20];
/// let a = pool.try_concat(&[&big, b"x"])?;
/// let at = a.as_slice().as_ptr();
/// assert_eq!(pool.free_regions(), 0);
/// drop(a); // the region goes back to the pool ...
/// assert_eq!(pool.free_regions(), 1);
/// let b = pool.try_concat(&[b"y", &big])?; // ... and is filled again
/// assert_eq!(b.as_slice().as_ptr(), at);
/// assert_eq!(&b.as_slice()[..2], b"y\x07");
/// # Ok::<(), lodt::Error>(())
/// ```
#[derive(Clone)]
pub struct BufferPool {
    inner: Arc<Inner>,
}

struct Inner {
    /// The free regions, in no order.
    free: Mutex<Vec<memmap2::MmapMut>>,
    /// How many free regions are kept.
    keep: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferPool")
            .field("free_regions", &self.free_regions())
            .field("keep", &self.keep())
            .finish()
    }
}

impl BufferPool {
    /// A pool that keeps up to `keep` free regions.
    ///
    /// ```
    /// assert_eq!(lodt::buffer::BufferPool::new(4).keep(), 4);
    /// ```
    pub fn new(keep: usize) -> Self {
        BufferPool {
            inner: Arc::new(Inner {
                free: Mutex::new(Vec::new()),
                keep: keep.into(),
            }),
        }
    }

    /// How many free regions the pool keeps.
    ///
    /// ```
    /// assert_eq!(lodt::buffer::BufferPool::new(0).keep(), 0);
    /// ```
    pub fn keep(&self) -> usize {
        self.inner.keep.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Keeps at least `keep` free regions from now on (a loader asks for
    /// what it has in flight).
    ///
    /// ```
    /// let pool = lodt::buffer::BufferPool::new(2);
    /// pool.keep_at_least(6);
    /// pool.keep_at_least(3);
    /// assert_eq!(pool.keep(), 6);
    /// ```
    pub fn keep_at_least(&self, keep: usize) {
        self.inner
            .keep
            .fetch_max(keep, std::sync::atomic::Ordering::Relaxed);
    }

    /// The number of free regions the pool holds now.
    ///
    /// ```
    /// assert_eq!(lodt::buffer::BufferPool::new(2).free_regions(), 0);
    /// ```
    pub fn free_regions(&self) -> usize {
        self.inner.free.lock().map_or(0, |f| f.len())
    }

    /// Unmaps every free region (the memory goes back to the system; buffers
    /// in use are not affected, and still come back when dropped).
    ///
    /// ```
    /// let pool = lodt::buffer::BufferPool::new(2);
    /// drop(pool.try_concat(&[&vec![0u8; 1 << 20]])?);
    /// pool.clear();
    /// assert_eq!(pool.free_regions(), 0);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn clear(&self) {
        let drained = match self.inner.free.lock() {
            Ok(mut free) => std::mem::take(&mut *free),
            Err(_) => Vec::new(),
        };
        drop(drained);
    }

    /// `parts` copied one after another into one buffer, in one pass (no
    /// zero-fill first): a recycled region when one is free and large
    /// enough, else a new one (64 KiB and more; smaller copies go to the
    /// heap). Running out of memory is an error, not an abort. Heap
    /// allocations are 16-byte aligned and regions page-aligned: enough for
    /// every dtype.
    ///
    /// ```
    /// let pool = lodt::buffer::BufferPool::new(1);
    /// let b = pool.try_concat(&[b"ab", b"c"])?;
    /// assert_eq!(b.as_slice(), b"abc");
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn try_concat(&self, parts: &[&[u8]]) -> Result<Buffer> {
        let len = super::large::total_len(parts)?;
        if len < POOLED_FROM {
            return Buffer::try_concat(parts, super::Pages::Huge);
        }
        let map = match self.take(len) {
            Some(map) => map,
            None => new_region(len)?,
        };
        let mut storage = Pooled {
            map: Some(map),
            len,
            pool: Arc::downgrade(&self.inner),
        };
        if let Some(dst) = storage.bytes_mut() {
            // `len` bytes: the parts fit.
            super::large::fill(dst, parts);
        }
        Ok(Buffer::from_storage(Arc::new(storage)))
    }

    /// A free region of at least `len` bytes, taken out: the one given back
    /// last among those less than twice as large (its bytes are the likeliest
    /// to be in the CPU's caches still), else the smallest.
    fn take(&self, len: usize) -> Option<memmap2::MmapMut> {
        // Never waits: a busy pool gives a new region (see `give_back`).
        let mut free = self.inner.free.try_lock().ok()?;
        let fits = |m: &memmap2::MmapMut| m.len() >= len;
        let snug = free
            .iter()
            .rposition(|m| fits(m) && m.len() / 2 < len.max(POOLED_FROM));
        let best = snug.or_else(|| {
            free.iter()
                .enumerate()
                .filter(|(_, m)| fits(m))
                .min_by_key(|(_, m)| m.len())
                .map(|(i, _)| i)
        })?;
        Some(free.remove(best))
    }
}

impl Inner {
    /// A region whose buffer was dropped: kept if the pool has room (the
    /// smallest region is unmapped when it has too many). Never waits for
    /// the lock: a region dropped while another thread holds it (or in a
    /// process forked while one did, where nobody will release it) is
    /// unmapped instead of kept.
    fn give_back(&self, map: memmap2::MmapMut) {
        let keep = self.keep.load(std::sync::atomic::Ordering::Relaxed);
        let dropped = match self.free.try_lock() {
            Ok(mut free) => {
                free.push(map);
                if free.len() > keep {
                    let smallest = free
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, m)| m.len())
                        .map(|(i, _)| i);
                    smallest.map(|i| free.remove(i))
                } else {
                    None
                }
            }
            Err(_) => Some(map),
        };
        // Unmapped outside the lock.
        drop(dropped);
    }
}

/// A new region for `len >= POOLED_FROM` bytes: a little headroom, so that
/// the next slightly larger copy fits too, rounded to 64 KiB or to huge pages.
fn new_region(len: usize) -> Result<memmap2::MmapMut> {
    let want = len.checked_add(len / 16).ok_or(overflow())?;
    let step = if want >= HUGE { HUGE } else { SMALL_STEP };
    let size = want.checked_next_multiple_of(step).ok_or(overflow())?;
    let map = memmap2::MmapMut::map_anon(size).map_err(|_| overflow())?;
    #[cfg(target_os = "linux")]
    if size >= HUGE {
        // A hint: without transparent huge pages the map still works.
        let _ = map.advise(memmap2::Advice::HugePage);
    }
    Ok(map)
}

fn overflow() -> Error {
    Error::Overflow {
        what: "pooled buffer",
    }
}

/// A region of a pool holding `len` bytes; back to the pool when dropped.
struct Pooled {
    /// Always `Some` until dropped.
    map: Option<memmap2::MmapMut>,
    len: usize,
    pool: Weak<Inner>,
}

// SAFETY: the region is mapped once and never remapped or resized while the
// storage lives; its bytes are written only through `&mut self` (in
// `BufferPool::try_concat`, before the storage is put behind an `Arc`), and
// `bytes` always returns the same window. The region goes back to the pool
// only in `drop`, that is once no `Buffer`, slice or array refers to it any
// more, so the next copy into it changes no live buffer's bytes.
unsafe impl ByteStorage for Pooled {
    fn bytes(&self) -> &[u8] {
        self.map.as_ref().map_or(&[], |m| &m[..self.len])
    }
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        let len = self.len;
        self.map.as_mut().map(|m| &mut m[..len])
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let (Some(map), Some(pool)) = (self.map.take(), self.pool.upgrade()) {
            pool.give_back(map);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_is_reused_only_once_every_buffer_over_it_is_gone() {
        let pool = BufferPool::new(4);
        let a_bytes = vec![1u8; 200 << 10];
        let a = pool.try_concat(&[&a_bytes]).unwrap();
        // A slice keeps the region: the next copy gets another one.
        let slice = a.slice(10..20).unwrap();
        drop(a);
        assert_eq!(pool.free_regions(), 0);
        let b = pool.try_concat(&[&vec![2u8; 200 << 10]]).unwrap();
        assert_ne!(
            b.as_slice().as_ptr(),
            slice.as_slice().as_ptr().wrapping_sub(10)
        );
        assert_eq!(slice.as_slice(), &[1u8; 10]);
        let at = slice.as_slice().as_ptr().wrapping_sub(10);
        drop(slice);
        assert_eq!(pool.free_regions(), 1);
        let c = pool.try_concat(&[&vec![3u8; 100 << 10]]).unwrap();
        assert_eq!(c.as_slice().as_ptr(), at);
        assert_eq!(c.len(), 100 << 10);
        assert!(c.as_slice().iter().all(|&x| x == 3));
        assert!(b.as_slice().iter().all(|&x| x == 2));
    }

    #[test]
    fn a_snug_region_or_else_the_smallest_fitting_is_taken_and_the_largest_kept() {
        let pool = BufferPool::new(2);
        let sizes = [100 << 10, 3 << 20, 1 << 20];
        let bufs: Vec<Buffer> = sizes
            .iter()
            .map(|&n| pool.try_concat(&[&vec![0u8; n]]).unwrap())
            .collect();
        let starts: Vec<*const u8> = bufs.iter().map(|b| b.as_slice().as_ptr()).collect();
        drop(bufs);
        // Three came back, two are kept: the 1 MiB and 3 MiB regions.
        assert_eq!(pool.free_regions(), 2);
        let mid = pool.try_concat(&[&vec![5u8; 900 << 10]]).unwrap();
        assert_eq!(mid.as_slice().as_ptr(), starts[2]);
        let big = pool.try_concat(&[&vec![6u8; 2 << 20]]).unwrap();
        assert_eq!(big.as_slice().as_ptr(), starts[1]);
        assert_eq!(pool.free_regions(), 0);
    }

    #[test]
    fn small_copies_go_to_the_heap_and_a_dropped_pool_frees_returning_regions() {
        let pool = BufferPool::new(2);
        drop(pool.try_concat(&[b"tiny"]).unwrap());
        assert_eq!(pool.free_regions(), 0);
        let b = pool.try_concat(&[&vec![9u8; 1 << 20]]).unwrap();
        drop(pool);
        assert_eq!(b.as_slice()[5], 9);
        drop(b); // unmapped: no pool to go back to
    }

    #[test]
    fn a_buffer_dropped_while_the_pool_is_locked_is_unmapped_without_waiting() {
        let pool = BufferPool::new(2);
        let b = pool.try_concat(&[&vec![1u8; 1 << 20]]).unwrap();
        let held = pool.inner.free.lock().unwrap();
        // As in a child forked while another thread held the lock: no wait.
        drop(b);
        let c = pool.try_concat(&[&vec![2u8; 1 << 20]]).unwrap();
        drop(held);
        assert_eq!(pool.free_regions(), 0);
        assert_eq!(c.as_slice()[7], 2);
    }

    #[test]
    fn a_written_buffer_stays_unique() {
        let pool = BufferPool::new(2);
        let mut b = pool.try_concat(&[&vec![1u8; 1 << 20]]).unwrap();
        let at = b.as_slice().as_ptr();
        b.make_mut()[0] = 4;
        assert_eq!(b.as_slice().as_ptr(), at);
        assert_eq!(&b.as_slice()[..2], &[4, 1]);
    }
}
