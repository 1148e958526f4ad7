//! Tensor storage: the [`ByteStorage`] trait behind every tensor, [`Buffer`],
//! a shared window of a storage, and [`AlignedBytes`], a 64-byte-aligned byte
//! buffer.
//!
//! An owned [`LodTensor`](crate::LodTensor) keeps its data in a [`Buffer`]: an
//! `Arc<dyn ByteStorage>` plus a byte range. Cloning or slicing a tensor never
//! copies data, and the same bytes can live in a `Vec<T>`, an aligned buffer, a
//! memory-mapped file, or an Arrow buffer. A [`Lod`](crate::Lod)'s levels
//! are windows of one storage too ([`Lod::storage`](crate::Lod::storage)),
//! so a tensor read from a mapped file borrows both its body and its LoD from
//! the map, and keeps the map alive.

mod large;
mod pool;

pub use large::Pages;
pub use pool::BufferPool;

use crate::error::{Error, Result};
use std::alloc::Layout;
use std::fmt;
use std::ops::Range;
use std::panic::RefUnwindSafe;
use std::ptr::NonNull;
use std::sync::Arc;
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

/// Something that owns the bytes of a tensor.
///
/// Implemented for [`AlignedBytes`] and `Vec<T>` for every
/// [`Element`](crate::Element) `T`; the `.lodt` reader implements it for a
/// memory map, the Arrow bridge for an Arrow buffer.
///
/// # Safety
///
/// Zero-copy consumers hand out raw pointers into these bytes (Arrow buffers
/// built over a tensor keep a pointer and an `Arc` of the storage), so an
/// implementation must guarantee, for as long as the storage is alive and
/// shared (behind an `Arc` with other owners):
///
/// - [`ByteStorage::bytes`] returns the same slice every time: same address,
///   same length;
/// - those bytes are not changed (no interior mutability that writes them, no
///   other process or mapping that may write them through this object);
/// - [`ByteStorage::bytes_mut`] is only reachable through `&mut self`, that is
///   when the storage is not shared.
///
/// ```
/// use lodt::buffer::ByteStorage;
/// let v: Vec<u16> = vec![1, 2];
/// assert_eq!(v.bytes(), &[1, 0, 2, 0]);
/// ```
pub unsafe trait ByteStorage: Send + Sync + RefUnwindSafe + 'static {
    /// The bytes.
    fn bytes(&self) -> &[u8];
    /// The bytes, mutably, when the storage can be written in place.
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        None
    }
}

macro_rules! vec_storage {
    ($($t:ty),*) => {$(
        // SAFETY: a `Vec` is not resized or written through `&self`; its
        // buffer stays in place for as long as it lives.
        unsafe impl ByteStorage for Vec<$t> {
            fn bytes(&self) -> &[u8] {
                self.as_bytes()
            }
            fn bytes_mut(&mut self) -> Option<&mut [u8]> {
                Some(self.as_mut_slice().as_mut_bytes())
            }
        }
    )*};
}

vec_storage!(
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
    half::f16,
    half::bf16,
    f32,
    f64
);

// SAFETY: as for the other `Vec`s: nothing changes the buffer through `&self`.
unsafe impl ByteStorage for Vec<bool> {
    fn bytes(&self) -> &[u8] {
        self.as_bytes()
    }
    // No `bytes_mut`: writing arbitrary bytes into a `bool` is not allowed, so
    // mutable access copies into an `AlignedBytes` and checks bools on read.
}

/// One 64-byte, 64-aligned block.
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C, align(64))]
struct Block([u8; 64]);

/// A byte buffer whose start is 64-byte aligned, so it can be viewed as a slice
/// of any [`Element`](crate::Element).
///
/// ```
/// use lodt::buffer::{AlignedBytes, ByteStorage};
/// let b = AlignedBytes::from_slice(&[1, 2, 3]);
/// assert_eq!(b.bytes(), &[1, 2, 3]);
/// assert_eq!(b.bytes().as_ptr() as usize % 64, 0);
/// ```
#[derive(Clone)]
pub struct AlignedBytes {
    blocks: Vec<Block>,
    len: usize,
}

impl AlignedBytes {
    /// `len` zero bytes.
    ///
    /// For sizes the program sets: like `Vec`, it aborts when the memory
    /// cannot be had and panics when `len` does not fit in the address
    /// space. [`AlignedBytes::try_zeroed`] returns an error instead, for
    /// sizes that come from input.
    ///
    /// ```
    /// assert_eq!(lodt::buffer::AlignedBytes::zeroed(3).len(), 3);
    /// ```
    pub fn zeroed(len: usize) -> Self {
        let n = len.div_ceil(64);
        match Block::new_vec_zeroed(n) {
            Ok(blocks) => AlignedBytes { blocks, len },
            // As `Vec` does when memory runs out: abort, or panic when the
            // size does not fit in the address space.
            Err(_) => match Layout::array::<Block>(n) {
                Ok(layout) => std::alloc::handle_alloc_error(layout),
                Err(_) => panic!("capacity overflow"),
            },
        }
    }

    /// `len` zero bytes, or an error instead of an abort when the memory
    /// cannot be had (for sizes computed from input, such as an operation's output).
    ///
    /// ```
    /// use lodt::buffer::AlignedBytes;
    /// assert_eq!(AlignedBytes::try_zeroed(3).unwrap().len(), 3);
    /// assert!(AlignedBytes::try_zeroed(usize::MAX).is_err());
    /// ```
    pub fn try_zeroed(len: usize) -> Result<Self> {
        // Zeroed by the allocator (`alloc_zeroed`): a large allocation comes
        // as fresh pages the kernel has zeroed, with no pass over them here.
        let blocks = Block::new_vec_zeroed(len.div_ceil(64))
            .map_err(|_| crate::error::allocation_failed(len as u64, "a buffer"))?;
        Ok(AlignedBytes { blocks, len })
    }

    /// A copy of `bytes`.
    ///
    /// ```
    /// assert_eq!(lodt::buffer::AlignedBytes::from_slice(&[7]).as_slice(), &[7]);
    /// ```
    pub fn from_slice(bytes: &[u8]) -> Self {
        let mut b = AlignedBytes::zeroed(bytes.len());
        b.as_mut_slice().copy_from_slice(bytes);
        b
    }

    /// The number of bytes.
    ///
    /// ```
    /// assert_eq!(lodt::buffer::AlignedBytes::zeroed(0).len(), 0);
    /// ```
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    ///
    /// ```
    /// assert!(lodt::buffer::AlignedBytes::zeroed(0).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    ///
    /// ```
    /// assert_eq!(lodt::buffer::AlignedBytes::zeroed(2).as_slice(), &[0, 0]);
    /// ```
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.blocks.as_bytes()[..self.len]
    }

    /// The bytes, mutably.
    ///
    /// ```
    /// let mut b = lodt::buffer::AlignedBytes::zeroed(1);
    /// b.as_mut_slice()[0] = 9;
    /// assert_eq!(b.as_slice(), &[9]);
    /// ```
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.blocks.as_mut_bytes()[..len]
    }
}

// SAFETY: the blocks are a `Vec` that is never resized, and only written
// through `&mut self`.
unsafe impl ByteStorage for AlignedBytes {
    fn bytes(&self) -> &[u8] {
        self.as_slice()
    }
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        Some(self.as_mut_slice())
    }
}

/// A shared, immutable window of a [`ByteStorage`]: an `Arc` of the storage and
/// a byte range in it. Cloning and slicing are O(1) and copy no bytes.
///
/// ```
/// use lodt::buffer::Buffer;
/// let whole = Buffer::from_vec(vec![1u8, 2, 3, 4]);
/// let middle = whole.slice(1..3)?;
/// assert_eq!(middle.as_slice(), &[2, 3]);
/// assert!(middle.shares_storage(&whole));
/// # Ok::<(), lodt::Error>(())
/// ```
#[derive(Clone)]
pub struct Buffer {
    storage: Arc<dyn ByteStorage>,
    /// The start of the window, `storage.bytes()[range].as_ptr()`, kept so
    /// that reading the bytes is a pointer and a length, not a call through
    /// the storage's vtable. (The range's start is computed from it when
    /// asked for: a buffer stays small, 32 bytes, and moves cheaply.)
    ptr: NonNull<u8>,
    /// The length of the window in bytes.
    len: usize,
}

// SAFETY: `ptr` points into `storage`, which the buffer keeps alive and which
// is `Send + Sync`; the buffer only reads through it (`&self`), as reading
// `storage.bytes()` would. Writing (`make_mut`) needs `&mut self` and a
// uniquely owned storage.
unsafe impl Send for Buffer {}
// SAFETY: as for `Send`: shared access only reads the storage's bytes.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// The whole of `storage`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lodt::buffer::{Buffer, ByteStorage};
    /// let storage: Arc<dyn ByteStorage> = Arc::new(vec![1u8, 2]);
    /// assert_eq!(Buffer::from_storage(storage).len(), 2);
    /// ```
    pub fn from_storage(storage: Arc<dyn ByteStorage>) -> Self {
        let bytes = storage.bytes();
        let (len, ptr) = (bytes.len(), NonNull::from(bytes).cast::<u8>());
        Buffer { storage, ptr, len }
    }

    /// A buffer that takes ownership of `values` with no copy.
    ///
    /// ```
    /// let b = lodt::buffer::Buffer::from_vec(vec![1u16]);
    /// assert_eq!(b.as_slice(), &[1, 0]);
    /// ```
    pub fn from_vec<T>(values: Vec<T>) -> Self
    where
        Vec<T>: ByteStorage,
    {
        Buffer::from_storage(Arc::new(values))
    }

    /// The bytes `range` of `storage`; an error if the range is not inside it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lodt::buffer::{Buffer, ByteStorage};
    /// let storage: Arc<dyn ByteStorage> = Arc::new(vec![1u8, 2, 3]);
    /// assert_eq!(Buffer::try_new(storage.clone(), 1..3)?.as_slice(), &[2, 3]);
    /// assert!(Buffer::try_new(storage, 2..4).is_err());
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn try_new(storage: Arc<dyn ByteStorage>, range: Range<usize>) -> Result<Self> {
        let bytes = storage.bytes();
        check_range(&range, bytes.len())?;
        let window = &bytes[range];
        let (len, ptr) = (window.len(), NonNull::from(window).cast::<u8>());
        Ok(Buffer { storage, ptr, len })
    }

    /// The bytes `range` of this buffer (relative to its start), sharing the
    /// storage; an error if the range is not inside the buffer.
    ///
    /// ```
    /// let b = lodt::buffer::Buffer::from_vec(vec![1u8, 2, 3]);
    /// assert_eq!(b.slice(2..3)?.as_slice(), &[3]);
    /// assert!(b.slice(2..4).is_err());
    /// # Ok::<(), lodt::Error>(())
    /// ```
    #[inline]
    pub fn slice(&self, range: Range<usize>) -> Result<Self> {
        check_range(&range, self.len)?;
        let window = &self.as_slice()[range];
        Ok(Buffer {
            storage: self.storage.clone(),
            ptr: NonNull::from(window).cast::<u8>(),
            len: window.len(),
        })
    }

    /// The bytes.
    ///
    /// ```
    /// assert_eq!(lodt::buffer::Buffer::from_vec(vec![7u8]).as_slice(), &[7]);
    /// ```
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` and the range's length were taken from
        // `storage.bytes()[range]` when the buffer was made (in range,
        // checked). The storage lives as long as `self` (its `Arc`), and the
        // `ByteStorage` contract keeps its bytes at the same address, with the
        // same length and unchanged, while it is shared; when it is not,
        // only `make_mut` (`&mut self`) writes them, in place.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The number of bytes.
    ///
    /// ```
    /// assert_eq!(lodt::buffer::Buffer::from_vec(vec![0u32; 2]).len(), 8);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    ///
    /// ```
    /// assert!(lodt::buffer::Buffer::from_vec(Vec::<u8>::new()).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The storage the buffer is a window of.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lodt::buffer::{Buffer, ByteStorage};
    /// let storage: Arc<dyn ByteStorage> = Arc::new(vec![1u8, 2]);
    /// let b = Buffer::try_new(storage.clone(), 0..1)?;
    /// assert!(Arc::ptr_eq(b.storage(), &storage));
    /// # Ok::<(), lodt::Error>(())
    /// ```
    #[inline]
    pub fn storage(&self) -> &Arc<dyn ByteStorage> {
        &self.storage
    }

    /// The byte range of the buffer within its storage.
    ///
    /// ```
    /// let b = lodt::buffer::Buffer::from_vec(vec![1u8, 2, 3]);
    /// assert_eq!(b.slice(1..2)?.range(), 1..2);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn range(&self) -> Range<usize> {
        // The window lies in the storage's bytes (checked when made).
        let start =
            (self.ptr.as_ptr() as usize).wrapping_sub(self.storage.bytes().as_ptr() as usize);
        start..start + self.len
    }

    /// Whether both buffers are windows of the same storage.
    ///
    /// ```
    /// use lodt::buffer::Buffer;
    /// let b = Buffer::from_vec(vec![1u8, 2]);
    /// assert!(b.slice(0..1)?.shares_storage(&b));
    /// assert!(!Buffer::from_vec(vec![1u8, 2]).shares_storage(&b));
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn shares_storage(&self, other: &Buffer) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }

    /// The bytes, mutably. A buffer that shares its storage, covers only part
    /// of it, or sits on read-only storage (a memory map) is first copied into
    /// a fresh [`AlignedBytes`] (copy-on-write).
    ///
    /// ```
    /// use lodt::buffer::Buffer;
    /// let mut a = Buffer::from_vec(vec![1u8, 2]);
    /// let b = a.clone();
    /// a.make_mut()[0] = 9;
    /// assert_eq!((a.as_slice(), b.as_slice()), (&[9, 2][..], &[1, 2][..]));
    /// ```
    pub fn make_mut(&mut self) -> &mut [u8] {
        let all = self.storage.bytes();
        let whole = self.ptr.as_ptr().cast_const() == all.as_ptr() && self.len == all.len();
        let writable =
            whole && Arc::get_mut(&mut self.storage).is_some_and(|s| s.bytes_mut().is_some());
        if !writable {
            *self = Buffer::from_storage(Arc::new(AlignedBytes::from_slice(self.as_slice())));
        }
        match Arc::get_mut(&mut self.storage).and_then(|s| s.bytes_mut()) {
            Some(bytes) => bytes,
            // Unreachable: the storage was just replaced by a uniquely owned,
            // writable AlignedBytes. Return an empty slice rather than panic.
            None => &mut [],
        }
    }
}

impl From<Arc<dyn ByteStorage>> for Buffer {
    /// The whole storage ([`Buffer::from_storage`]).
    fn from(storage: Arc<dyn ByteStorage>) -> Self {
        Buffer::from_storage(storage)
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("range", &self.range())
            .field("len", &self.len())
            .finish()
    }
}

#[inline]
pub(crate) fn check_range(range: &Range<usize>, len: usize) -> Result<()> {
    if range.end > len {
        return Err(Error::OutOfRange {
            what: "buffer byte range end",
            index: range.end as u64,
            len: len as u64 + 1,
        });
    }
    if range.start > range.end {
        return Err(Error::OutOfRange {
            what: "buffer byte range start",
            index: range.start as u64,
            len: range.end as u64 + 1,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_buffers_are_zero_and_aligned_at_every_size() {
        // Small sizes come from the heap, large ones as fresh pages; a
        // freed buffer's memory handed out again must be zero too.
        for len in [0, 1, 63, 64, 65, 4096, 200_000, 3 << 20] {
            let mut dirty = AlignedBytes::zeroed(len);
            dirty.as_mut_slice().fill(0xAB);
            drop(dirty);
            for b in [
                AlignedBytes::zeroed(len),
                AlignedBytes::try_zeroed(len).unwrap(),
            ] {
                assert_eq!(b.len(), len);
                assert_eq!(b.as_slice().as_ptr() as usize % 64, 0);
                assert!(b.as_slice().iter().all(|&x| x == 0), "{len} bytes");
            }
        }
    }

    #[test]
    fn make_mut_copies_a_partial_window() {
        let whole = Buffer::from_vec(vec![1u8, 2, 3]);
        let mut part = whole.slice(1..3).unwrap();
        part.make_mut()[0] = 7;
        assert_eq!(part.as_slice(), &[7, 3]);
        assert_eq!(whole.as_slice(), &[1, 2, 3]);
        assert!(!part.shares_storage(&whole));
    }

    #[test]
    fn make_mut_writes_a_unique_vec_in_place() {
        let mut b = Buffer::from_vec(vec![1u32]);
        let before = b.as_slice().as_ptr();
        b.make_mut()[0] = 2;
        assert_eq!(b.as_slice().as_ptr(), before);
    }
}
