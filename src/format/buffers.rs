//! [`TensorBuffers`]: where the buffers of one tensor lie inside one shared
//! storage, and the checked, zero-copy way from those ranges to a tensor.

use crate::buffer::{Buffer, ByteStorage};
use crate::dtype::DType;
use crate::error::Result;
use crate::lod::Lod;
use crate::tensor::LodTensor;
use std::ops::Range;
use std::sync::Arc;

/// Where the buffers of one tensor lie inside one shared storage (for example
/// a memory-mapped `.lodt` file): the byte range of each LoD level's `u64`
/// offsets (little-endian, top level first) and of the body.
///
/// ```text
///  storage: | ... | level 0 u64s | ... | level 1 u64s | ... | body bytes | ... |
///                   lod[0]               lod[1]               body
/// ```
///
/// [`TensorBuffers::to_tensor`] checks the ranges and the LoD and returns a
/// tensor over windows of the storage (no copy).
///
/// ```
/// use std::sync::Arc;
/// use lodt::{buffer::{AlignedBytes, ByteStorage}, format::TensorBuffers, DType};
/// let mut bytes = Vec::new();
/// for o in [0u64, 1, 3] { bytes.extend_from_slice(&o.to_le_bytes()); }
/// bytes.extend_from_slice(&[7, 8, 9]);
/// let storage: Arc<dyn ByteStorage> = Arc::new(AlignedBytes::from_slice(&bytes));
/// let parts = TensorBuffers { storage, dtype: DType::UInt8, shape: vec![3], lod: vec![0..24], body: 24..27 };
/// let t = parts.to_tensor()?;
/// assert_eq!(t.as_slice::<u8>()?, &[7, 8, 9]);
/// assert_eq!(t.lod().to_lengths(), vec![vec![1, 2]]);
/// # Ok::<(), lodt::Error>(())
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
    /// The tensor, over windows of the storage (no copy of offsets or body;
    /// a body misaligned for its dtype is copied), checked like a stored
    /// tensor: ranges inside the storage, offsets 8-aligned,
    /// [`check_view_levels`](crate::lod::check_view_levels) (`CheckLoD`, plus
    /// levels of zero sequences below an empty slice), data length, bools.
    ///
    /// See the [type-level example](TensorBuffers).
    pub fn to_tensor(&self) -> Result<LodTensor> {
        let whole = Buffer::from_storage(self.storage.clone());
        let lod = Lod::try_from_buffer(&whole, &self.lod)?;
        let body = whole.slice(self.body.clone())?;
        LodTensor::try_from_parts(self.dtype, self.shape.clone(), body, lod)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::AlignedBytes;
    use crate::error::Error;

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
        assert_eq!(t.lod().to_offsets(), [vec![0], vec![0]]);
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
