//! Tensor storage: the [`ByteStorage`] trait behind every owned tensor, and
//! [`AlignedBytes`], a 64-byte-aligned byte buffer.
//!
//! An owned [`LodTensor`] keeps its data in an
//! `Arc<dyn ByteStorage>`, so cloning a tensor never copies data and the same
//! bytes can live in a `Vec<T>`, an aligned buffer, or a memory-mapped file.

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::lod::check_view_levels;
use crate::lod_view::LodView;
use crate::tensor::LodTensor;
use crate::view::LodTensorView;
use std::ops::Range;
use std::panic::RefUnwindSafe;
use std::sync::Arc;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Something that owns the bytes of a tensor.
///
/// Implemented for [`AlignedBytes`] and `Vec<T>` for every [`Element`] `T`; a
/// file reader implements it for a region of a memory map.
///
/// Contract: while a storage is shared (behind an `Arc` with other owners),
/// [`ByteStorage::bytes`] returns the same bytes, in the same place, unchanged.
/// Implementations must keep it: zero-copy consumers (views, Arrow buffers)
/// rely on it. (Changing the bytes behind `&self` needs `unsafe`; returning a
/// different slice on a later call is a contract violation, though the
/// memory a consumer holds stays valid for as long as the storage lives.)
///
/// ```
/// use lodt::buffer::ByteStorage;
/// let v: Vec<u16> = vec![1, 2];
/// assert_eq!(v.bytes(), &[1, 0, 2, 0]);
/// ```
pub trait ByteStorage: Send + Sync + RefUnwindSafe + 'static {
    /// The bytes.
    fn bytes(&self) -> &[u8];
    /// The bytes, mutably, when the storage can be written in place.
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        None
    }
}

macro_rules! vec_storage {
    ($($t:ty),*) => {$(
        impl ByteStorage for Vec<$t> {
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

impl ByteStorage for Vec<bool> {
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
/// of any [`Element`].
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
    /// ```
    /// assert_eq!(lodt::buffer::AlignedBytes::zeroed(3).len(), 3);
    /// ```
    pub fn zeroed(len: usize) -> Self {
        AlignedBytes {
            blocks: vec![Block([0; 64]); len.div_ceil(64)],
            len,
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
        let mut blocks = Vec::new();
        blocks
            .try_reserve_exact(len.div_ceil(64))
            .map_err(|_| Error::Overflow {
                what: "buffer allocation (too large for memory)",
            })?;
        blocks.resize(len.div_ceil(64), Block([0; 64]));
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

impl ByteStorage for AlignedBytes {
    fn bytes(&self) -> &[u8] {
        self.as_slice()
    }
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        Some(self.as_mut_slice())
    }
}

/// Returns mutable bytes of `storage`, copying it into a fresh [`AlignedBytes`]
/// first when it is shared or read-only (copy-on-write).
pub(crate) fn make_mut(storage: &mut Arc<dyn ByteStorage>) -> &mut [u8] {
    let writable = Arc::get_mut(storage).is_some_and(|s| s.bytes_mut().is_some());
    if !writable {
        *storage = Arc::new(AlignedBytes::from_slice(storage.bytes()));
    }
    match Arc::get_mut(storage).and_then(|s| s.bytes_mut()) {
        Some(bytes) => bytes,
        // Unreachable: the storage was just replaced by a uniquely owned,
        // writable AlignedBytes. Return an empty slice rather than panic.
        None => &mut [],
    }
}

/// A byte range of a shared storage, itself a [`ByteStorage`]: how a tensor
/// borrows its body from a memory-mapped file with no copy.
///
/// ```
/// use std::sync::Arc;
/// use lodt::buffer::{ByteStorage, Region};
/// let whole: Arc<dyn ByteStorage> = Arc::new(vec![1u8, 2, 3, 4]);
/// let region = Region::try_new(whole, 1..3).unwrap();
/// assert_eq!(region.bytes(), &[2, 3]);
/// ```
#[derive(Clone)]
pub struct Region {
    storage: Arc<dyn ByteStorage>,
    range: Range<usize>,
}

impl Region {
    /// The bytes `range` of `storage`; an error if the range is not inside it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lodt::buffer::{ByteStorage, Region};
    /// let whole: Arc<dyn ByteStorage> = Arc::new(vec![1u8, 2]);
    /// assert!(Region::try_new(whole, 1..3).is_err());
    /// ```
    pub fn try_new(storage: Arc<dyn ByteStorage>, range: Range<usize>) -> Result<Self> {
        let len = storage.bytes().len();
        if range.start > range.end || range.end > len {
            return Err(Error::OutOfRange {
                what: "storage byte range",
                index: range.end as u64,
                len: len as u64 + 1,
            });
        }
        Ok(Region { storage, range })
    }

    /// The storage the region is cut from.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lodt::buffer::{ByteStorage, Region};
    /// let whole: Arc<dyn ByteStorage> = Arc::new(vec![1u8, 2]);
    /// let r = Region::try_new(whole.clone(), 0..1).unwrap();
    /// assert!(Arc::ptr_eq(r.storage(), &whole));
    /// ```
    pub fn storage(&self) -> &Arc<dyn ByteStorage> {
        &self.storage
    }

    /// The byte range within the storage.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lodt::buffer::{ByteStorage, Region};
    /// let whole: Arc<dyn ByteStorage> = Arc::new(vec![1u8, 2]);
    /// assert_eq!(Region::try_new(whole, 0..1).unwrap().range(), 0..1);
    /// ```
    pub fn range(&self) -> Range<usize> {
        self.range.clone()
    }
}

impl ByteStorage for Region {
    fn bytes(&self) -> &[u8] {
        // In range: checked by `try_new`, and storages never shrink.
        self.storage.bytes().get(self.range.clone()).unwrap_or(&[])
    }
}

/// Where the buffers of one tensor lie inside one shared storage (for example
/// a memory-mapped `.lodt` file): the byte range of each LoD level's `u64`
/// offsets (little-endian, top level first) and of the body.
///
/// This is what zero-copy consumers (the Arrow bridge) use to wrap the
/// storage's own bytes instead of copying them.
///
/// ```text
///  storage: | ... | level 0 u64s | ... | level 1 u64s | ... | body bytes | ... |
///                   lod[0]               lod[1]               body
/// ```
///
/// ```
/// use std::sync::Arc;
/// use lodt::{buffer::{ByteStorage, TensorBuffers}, DType};
/// let mut bytes = Vec::new();
/// for o in [0u64, 1, 3] { bytes.extend_from_slice(&o.to_le_bytes()); }
/// bytes.extend_from_slice(&[7, 8, 9]);
/// let storage: Arc<dyn ByteStorage> = Arc::new(lodt::buffer::AlignedBytes::from_slice(&bytes));
/// let parts = TensorBuffers { storage, dtype: DType::UInt8, shape: vec![3], lod: vec![0..24], body: 24..27 };
/// let t = parts.to_tensor().unwrap();
/// assert_eq!(t.as_slice::<u8>().unwrap(), &[7, 8, 9]);
/// assert_eq!(t.lod().to_lengths(), vec![vec![1, 2]]);
/// ```
#[derive(Clone)]
pub struct TensorBuffers {
    /// The storage holding every buffer.
    pub storage: Arc<dyn ByteStorage>,
    /// The element type.
    pub dtype: DType,
    /// The full shape, `[rows, ...]`.
    pub shape: Vec<usize>,
    /// The byte range of each LoD level's offsets, top level first.
    pub lod: Vec<Range<usize>>,
    /// The byte range of the body.
    pub body: Range<usize>,
}

impl TensorBuffers {
    /// The offsets of level `level`, borrowed from the storage; an error if the
    /// range is outside the storage, misaligned, or not a whole number of `u64`s.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lodt::{buffer::{AlignedBytes, ByteStorage, TensorBuffers}, DType};
    /// let storage: Arc<dyn ByteStorage> = Arc::new(AlignedBytes::from_slice(&[0; 16]));
    /// let parts = TensorBuffers { storage, dtype: DType::UInt8, shape: vec![0], lod: vec![0..16], body: 0..0 };
    /// assert_eq!(parts.level(0).unwrap(), &[0, 0]);
    /// ```
    pub fn level(&self, level: usize) -> Result<&[u64]> {
        let range = self.lod.get(level).ok_or(Error::OutOfRange {
            what: "level",
            index: level as u64,
            len: self.lod.len() as u64,
        })?;
        u64::slice_from_bytes(self.slice(range.clone())?)
    }

    fn slice(&self, range: Range<usize>) -> Result<&[u8]> {
        let bytes = self.storage.bytes();
        bytes.get(range.clone()).ok_or(Error::OutOfRange {
            what: "storage byte range",
            index: range.end as u64,
            len: bytes.len() as u64 + 1,
        })
    }

    /// A view of the tensor, borrowing the storage, checked like a stored
    /// tensor ([`check_view_levels`]: `CheckLoD`, plus levels of zero
    /// sequences below an empty slice).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lodt::{buffer::{AlignedBytes, ByteStorage, TensorBuffers}, DType};
    /// let storage: Arc<dyn ByteStorage> = Arc::new(AlignedBytes::from_slice(&[5, 6]));
    /// let parts = TensorBuffers { storage, dtype: DType::UInt8, shape: vec![2], lod: vec![], body: 0..2 };
    /// assert_eq!(parts.view().unwrap().as_bytes(), &[5, 6]);
    /// ```
    pub fn view(&self) -> Result<LodTensorView<'_>> {
        let levels = (0..self.lod.len())
            .map(|l| self.level(l))
            .collect::<Result<Vec<_>>>()?;
        check_view_levels(&levels, self.shape.first().map(|&r| r as u64))?;
        let lod = LodView::from_trusted(levels);
        LodTensorView::try_new(self.dtype, &self.shape, lod, self.slice(self.body.clone())?)
    }

    /// An owned tensor whose body borrows the storage (no copy of the body; the
    /// LoD offsets are copied). Validated like [`LodTensor::try_new`].
    ///
    /// See the [type-level example](TensorBuffers).
    pub fn to_tensor(&self) -> Result<LodTensor> {
        let lod = self.view()?.lod().to_lod();
        let body = Region::try_new(self.storage.clone(), self.body.clone())?;
        LodTensor::try_new(self.dtype, self.shape.clone(), body, lod)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(levels: &[&[u64]]) -> (AlignedBytes, Vec<Range<usize>>) {
        let mut bytes = Vec::new();
        let mut ranges = Vec::new();
        for level in levels {
            let start = bytes.len();
            for o in *level {
                bytes.extend_from_slice(&o.to_le_bytes());
            }
            ranges.push(start..bytes.len());
        }
        (AlignedBytes::from_slice(&bytes), ranges)
    }

    #[test]
    fn stored_slices_of_empty_sequences_read_back() {
        let (bytes, lod) = offsets(&[&[0], &[0]]);
        let end = bytes.len();
        let parts = TensorBuffers {
            storage: Arc::new(bytes),
            dtype: DType::Float32,
            shape: vec![0, 2],
            lod,
            body: end..end,
        };
        let t = parts.to_tensor().unwrap();
        assert_eq!(t.lod().levels(), &[vec![0], vec![0]]);
        assert_eq!(t.shape(), &[0, 2]);
    }

    #[test]
    fn bad_stored_levels_are_errors() {
        let (bytes, lod) = offsets(&[&[0], &[0, 1]]);
        let end = bytes.len();
        let parts = TensorBuffers {
            storage: Arc::new(bytes),
            dtype: DType::UInt8,
            shape: vec![1],
            lod,
            body: end..end,
        };
        assert!(matches!(
            parts.to_tensor(),
            Err(Error::InvalidLod { level: 0, .. })
        ));
    }
}
