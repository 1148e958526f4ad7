//! Tensor storage: the [`ByteStorage`] trait behind every owned tensor, and
//! [`AlignedBytes`], a 64-byte-aligned byte buffer.
//!
//! An owned [`LodTensor`](crate::LodTensor) keeps its data in an
//! `Arc<dyn ByteStorage>`, so cloning a tensor never copies data and the same
//! bytes can live in a `Vec<T>`, an aligned buffer, or a memory-mapped file.

use std::panic::RefUnwindSafe;
use std::sync::Arc;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Something that owns the bytes of a tensor.
///
/// Implemented for [`AlignedBytes`] and `Vec<T>` for every [`Element`] `T`; a
/// file reader implements it for a region of a memory map.
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

vec_storage!(i8, i16, i32, i64, u8, u16, u32, u64, half::f16, half::bf16, f32, f64);

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
