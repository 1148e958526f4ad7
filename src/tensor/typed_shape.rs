//! [`TypedShape`]: a tensor's element type and shape, packed in 40 bytes.
//!
//! Up to four dimensions live inline, so a slice of a tensor of rank 4 or
//! less allocates nothing; the element type sits in the bytes the inline
//! form leaves over. Small, a [`LodTensor`](super::LodTensor) stays within
//! 128 bytes, which the compiler moves with a few vector stores instead of a
//! call to `memcpy` (each move of a larger tensor, when one is built and
//! returned, costs a call).

use crate::dtype::DType;

/// How many dimensions live inline.
const INLINE_DIMS: usize = 4;

/// A tensor's element type and shape.
#[derive(Clone)]
pub(crate) enum TypedShape {
    /// Rank up to [`INLINE_DIMS`]: `dims[..rank]`.
    Inline {
        dtype: DType,
        rank: u8,
        dims: [usize; INLINE_DIMS],
    },
    /// A larger rank.
    Heap { dtype: DType, dims: Box<[usize]> },
}

impl TypedShape {
    /// `dtype` and `shape`.
    #[inline]
    pub(crate) fn new(dtype: DType, shape: &[usize]) -> Self {
        match shape.len() {
            rank @ 0..=INLINE_DIMS => {
                let mut dims = [0; INLINE_DIMS];
                dims[..rank].copy_from_slice(shape);
                TypedShape::Inline {
                    dtype,
                    rank: rank as u8,
                    dims,
                }
            }
            _ => TypedShape::Heap {
                dtype,
                dims: shape.into(),
            },
        }
    }

    /// The element type.
    #[inline]
    pub(crate) fn dtype(&self) -> DType {
        match self {
            TypedShape::Inline { dtype, .. } | TypedShape::Heap { dtype, .. } => *dtype,
        }
    }

    /// The dimensions.
    #[inline]
    pub(crate) fn dims(&self) -> &[usize] {
        match self {
            TypedShape::Inline { rank, dims, .. } => dims.get(..*rank as usize).unwrap_or(&[]),
            TypedShape::Heap { dims, .. } => dims,
        }
    }

    /// The same type and shape with `rows` rows (the first dimension); the
    /// shape has rank 1 or more (a 0-D tensor has no rows to cut).
    #[inline]
    pub(crate) fn with_rows(&self, rows: usize) -> Self {
        let mut out = self.clone();
        let first = match &mut out {
            TypedShape::Inline { dims, .. } => dims.first_mut(),
            TypedShape::Heap { dims, .. } => dims.first_mut(),
        };
        if let Some(d) = first {
            *d = rows;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_ranks_read_back() {
        let s = TypedShape::new(DType::Float32, &[2, 3, 4, 5]);
        assert!(matches!(s, TypedShape::Inline { .. }));
        assert_eq!((s.dtype(), s.dims()), (DType::Float32, &[2, 3, 4, 5][..]));
        assert_eq!(s.with_rows(7).dims(), &[7, 3, 4, 5]);
        let big = TypedShape::new(DType::Int8, &[1, 2, 3, 4, 5]);
        assert!(matches!(big, TypedShape::Heap { .. }));
        assert_eq!(big.with_rows(0).dims(), &[0, 2, 3, 4, 5]);
        assert_eq!(big.dtype(), DType::Int8);
        assert_eq!(TypedShape::new(DType::Bool, &[]).dims(), &[] as &[usize]);
        assert_eq!(std::mem::size_of::<TypedShape>(), 40);
    }
}
