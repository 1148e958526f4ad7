//! [`LodTensorView`]: a borrowed LoD tensor, the result of every slice.
//!
//! A view borrows its bytes and its LoD windows from whatever owns them (a
//! [`LodTensor`], or a memory-mapped file), so slicing copies no tensor data:
//!
//! ```text
//!   LodTensor (15 rows)            <2>-slice view
//!   data  [r0 ........ r14]   ->   data  &data[r10 .. r15]
//!   lod   level 0 [0,3,4,6]        lod   window [10, 12, 15]  (reads as [0, 2, 5])
//!         level 1 [0,3,5,9,10,12,15]
//! ```

use crate::buffer::AlignedBytes;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::lod_view::LodView;
use crate::tensor::{LodTensor, check_parts, checked_byte_len};
use std::ops::Range;
use std::sync::Arc;

/// A borrowed, possibly sliced LoD tensor. `Send + Sync`; cheap to clone.
///
/// ```
/// use lodt::{Lod, LodTensor};
/// let lod = Lod::try_from_lengths(&[vec![3, 1, 2]]).unwrap();
/// let frames = LodTensor::from_vec(vec![0u8; 6 * 4 * 3], vec![6, 4, 3], lod).unwrap();
/// let video0 = frames.branch(&[0]).unwrap();
/// assert_eq!(video0.shape(), vec![3, 4, 3]);
/// assert_eq!(video0.as_bytes().len(), 36);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LodTensorView<'a> {
    dtype: DType,
    rows: usize,
    element_shape: &'a [usize],
    scalar: bool,
    row_bytes: usize,
    lod: LodView<'a>,
    data: &'a [u8],
}

impl<'a> LodTensorView<'a> {
    /// A view over `data` with full shape `shape` (`[rows, ...]`, or empty for
    /// a 0-D tensor) and LoD `lod`, with the same checks as
    /// [`LodTensor::try_new`].
    ///
    /// ```
    /// use lodt::{DType, LodTensorView, LodView};
    /// let level = [0u64, 1, 2];
    /// let lod = LodView::try_new(vec![&level[..]]).unwrap();
    /// let shape = [2usize];
    /// let v = LodTensorView::try_new(DType::UInt8, &shape, lod, &[7, 8]).unwrap();
    /// assert_eq!(v.as_slice::<u8>().unwrap(), &[7, 8]);
    /// ```
    pub fn try_new(
        dtype: DType,
        shape: &'a [usize],
        lod: LodView<'a>,
        data: &'a [u8],
    ) -> Result<Self> {
        check_parts(dtype, shape, lod.num_levels(), lod.num_rows(), data)?;
        Ok(Self::from_trusted(dtype, shape, lod, data))
    }

    /// Assembles a view from parts already checked against each other.
    pub(crate) fn from_trusted(
        dtype: DType,
        shape: &'a [usize],
        lod: LodView<'a>,
        data: &'a [u8],
    ) -> Self {
        let (rows, element_shape, scalar) = match shape.split_first() {
            Some((&rows, rest)) => (rows, rest, false),
            None => (1, shape, true),
        };
        // The caller checked that the whole shape's byte size fits in usize.
        // The row's alone may not when there are no rows (shape [0, 2^40,
        // 2^40]): then no row is ever read, and 0 is as good as any width.
        let row_bytes = checked_byte_len(dtype, element_shape).unwrap_or(0);
        LodTensorView {
            dtype,
            rows,
            element_shape,
            scalar,
            row_bytes,
            lod,
            data,
        }
    }

    /// The element type.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1u8], vec![1], Default::default()).unwrap();
    /// assert_eq!(t.view().dtype(), lodt::DType::UInt8);
    /// ```
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The number of rows in the view.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default()).unwrap();
    /// assert_eq!(t.view().rows(), 2);
    /// ```
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The shape of one row.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![0u8; 6], vec![2, 3], Default::default()).unwrap();
    /// assert_eq!(t.view().element_shape(), &[3]);
    /// ```
    pub fn element_shape(&self) -> &'a [usize] {
        self.element_shape
    }

    /// The full shape, `[rows, element_shape...]` (empty for a 0-D tensor).
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![0u8; 6], vec![2, 3], Default::default()).unwrap();
    /// assert_eq!(t.view().shape(), vec![2, 3]);
    /// ```
    pub fn shape(&self) -> Vec<usize> {
        if self.scalar {
            return Vec::new();
        }
        let mut shape = Vec::with_capacity(1 + self.element_shape.len());
        shape.push(self.rows);
        shape.extend_from_slice(self.element_shape);
        shape
    }

    /// The number of elements of one row (the product of the element shape).
    /// Never overflows: when that product would not fit in `usize` the view
    /// has no rows, and this is 0.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![0f32; 24], vec![2, 3, 4], Default::default()).unwrap();
    /// assert_eq!(t.view().row_numel(), 12);
    /// ```
    pub fn row_numel(&self) -> usize {
        self.row_bytes / self.dtype.size()
    }

    /// The number of bytes of one row.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![0f32; 6], vec![2, 3], Default::default()).unwrap();
    /// assert_eq!(t.view().row_bytes(), 12);
    /// ```
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// The LoD of the view (rebased on read; see [`LodView`]).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![1, 2]]).unwrap();
    /// let t = lodt::LodTensor::from_vec(vec![0u8; 3], vec![3], lod.clone()).unwrap();
    /// assert_eq!(t.view().lod().to_lod(), lod);
    /// ```
    pub fn lod(&self) -> &LodView<'a> {
        &self.lod
    }

    /// The bytes of the view's rows.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![3u8, 4], vec![2], Default::default()).unwrap();
    /// assert_eq!(t.view().as_bytes(), &[3, 4]);
    /// ```
    pub fn as_bytes(&self) -> &'a [u8] {
        self.data
    }

    /// The data as `&[T]`, with no copy; an error if `T` is not the dtype.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1u64, 2], vec![2], Default::default()).unwrap();
    /// assert_eq!(t.view().as_slice::<u64>().unwrap(), &[1, 2]);
    /// ```
    pub fn as_slice<T: Element>(&self) -> Result<&'a [T]> {
        if T::DTYPE != self.dtype {
            return Err(Error::DTypeMismatch {
                expected: T::DTYPE,
                found: self.dtype,
            });
        }
        T::slice_from_bytes(self.data)
    }

    fn with_rows(&self, lod: LodView<'a>, rows: Range<u64>) -> Result<Self> {
        let start = (rows.start as usize).checked_mul(self.row_bytes);
        let end = (rows.end as usize).checked_mul(self.row_bytes);
        let data = match (start, end) {
            (Some(s), Some(e)) => self.data.get(s..e),
            _ => None,
        }
        .ok_or(Error::OutOfRange {
            what: "row range",
            index: rows.end,
            len: self.rows as u64 + 1,
        })?;
        Ok(LodTensorView {
            rows: (rows.end - rows.start) as usize,
            scalar: false,
            lod,
            data,
            ..self.clone()
        })
    }

    /// The `<i, j, ...>`-slice: follows one index per level from the top and
    /// returns the sequence reached, with the levels below it. O(levels); no
    /// copy of offsets or data.
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let t = LodTensor::from_vec((0..15i64).collect(), vec![15, 1], lod).unwrap();
    /// let s = t.view().branch(&[2, 0]).unwrap();
    /// assert_eq!((s.lod().num_levels(), s.as_slice::<i64>().unwrap()), (0, &[10, 11][..]));
    /// ```
    pub fn branch(&self, path: &[usize]) -> Result<Self> {
        if path.is_empty() {
            // The whole view (its LoD alone cannot tell the rows of a plain tensor).
            return Ok(self.clone());
        }
        let (lod, rows) = self.lod.branch(path)?;
        self.with_rows(lod, rows)
    }

    /// Sequences `begin..end` of level `level`, keeping `level` as the top
    /// level (Paddle's `LODSliceShared(level, begin, end)`).
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let t = LodTensor::from_vec((0..15i64).collect(), vec![15], lod).unwrap();
    /// let s = t.view().slice_level(0, 1, 3).unwrap();
    /// assert_eq!(s.lod().to_lod().to_lengths(), vec![vec![1, 2], vec![1, 2, 3]]);
    /// assert_eq!(s.rows(), 6);
    /// ```
    pub fn slice_level(&self, level: usize, begin: usize, end: usize) -> Result<Self> {
        let (lod, rows) = self.lod.slice_level(level, begin, end)?;
        self.with_rows(lod, rows)
    }

    /// Rows `begin..end` as a plain view with no LoD (Paddle's
    /// `Tensor::Slice(begin, end)`, which ignores the LoD). No copy. An error
    /// for a 0-D view, which has no rows to cut.
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![1, 3]]).unwrap();
    /// let t = LodTensor::from_vec(vec![1u8, 2, 3, 4], vec![4], lod).unwrap();
    /// let rows = t.view().slice_rows(1, 3).unwrap();
    /// assert_eq!((rows.as_slice::<u8>().unwrap(), rows.lod().num_levels()), (&[2, 3][..], 0));
    /// assert!(t.view().slice_rows(3, 5).is_err());
    /// ```
    pub fn slice_rows(&self, begin: usize, end: usize) -> Result<Self> {
        if self.scalar {
            return Err(Error::ShapeMismatch {
                what: "row slice of a 0-D tensor (needs rank >= 1)",
                expected: vec![1],
                found: Vec::new(),
            });
        }
        if end > self.rows {
            return Err(Error::OutOfRange {
                what: "row range end",
                index: end as u64,
                len: self.rows as u64 + 1,
            });
        }
        if begin > end {
            return Err(Error::OutOfRange {
                what: "row range start",
                index: begin as u64,
                len: end as u64 + 1,
            });
        }
        self.with_rows(LodView::empty(), begin as u64..end as u64)
    }

    /// Sequence `index` of level `level`, with the levels below it (the general
    /// `Slice(level, sequence)` of the design doc; level 0 is top-level slicing).
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let t = LodTensor::from_vec((0..15i64).collect(), vec![15], lod).unwrap();
    /// assert_eq!(t.view().sequence(1, 4).unwrap().as_slice::<i64>().unwrap(), &[10, 11]);
    /// assert_eq!(t.view().sequence(0, 1).unwrap().lod().to_lod().to_lengths(), vec![vec![1]]);
    /// ```
    pub fn sequence(&self, level: usize, index: usize) -> Result<Self> {
        let (lod, rows) = self.lod.slice_level(level, index, index + 1)?;
        let (lod, _) = lod.branch(&[0])?;
        self.with_rows(lod, rows)
    }

    /// The sequences of level `level`, in order, as views.
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![1, 3]]).unwrap();
    /// let t = LodTensor::from_vec(vec![1u8, 2, 3, 4], vec![4], lod).unwrap();
    /// let seqs: Vec<_> = t.view().sequences(0).unwrap().map(|s| s.as_bytes().len()).collect();
    /// assert_eq!(seqs, vec![1, 3]);
    /// ```
    pub fn sequences(&self, level: usize) -> Result<impl ExactSizeIterator<Item = Self> + '_> {
        let count = self.lod.num_sequences(level)?;
        Ok((0..count).map(move |i| {
            // In range by construction: i < num_sequences(level).
            self.sequence(level, i).unwrap_or_else(|_| self.clone())
        }))
    }

    /// Copies the view into an owned tensor with a rebased LoD.
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![1, 3]]).unwrap();
    /// let t = LodTensor::from_vec(vec![1u8, 2, 3, 4], vec![4], lod).unwrap();
    /// let owned = t.branch(&[1]).unwrap().to_owned();
    /// assert_eq!(owned.as_slice::<u8>().unwrap(), &[2, 3, 4]);
    /// assert_eq!(owned.lod().num_levels(), 0);
    /// ```
    pub fn to_owned(&self) -> LodTensor {
        LodTensor::from_checked_parts(
            self.dtype,
            self.shape(),
            Arc::new(AlignedBytes::from_slice(self.data)),
            Arc::new(self.lod.to_lod()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Lod;

    fn seed_tensor() -> LodTensor {
        let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
        LodTensor::from_vec((0..15i64).collect(), vec![15, 1], lod).unwrap()
    }

    #[test]
    fn seed_branch_slices() {
        let t = seed_tensor();
        let b2 = t.branch(&[2]).unwrap();
        assert_eq!(b2.as_slice::<i64>().unwrap(), &[10, 11, 12, 13, 14]);
        assert_eq!(b2.lod().to_lod().levels(), &[vec![0, 2, 5]]);
        let b20 = t.branch(&[2, 0]).unwrap();
        assert_eq!(b20.as_slice::<i64>().unwrap(), &[10, 11]);
        assert_eq!(b20.lod().num_levels(), 0);
        let b02 = t.branch(&[0, 2]).unwrap();
        assert_eq!(b02.as_slice::<i64>().unwrap(), &[5, 6, 7, 8]);
        // Slicing a slice: the <2>-slice's <0>-slice is the <2,0>-slice.
        assert_eq!(b2.branch(&[0]).unwrap(), b20);
    }

    #[test]
    fn the_empty_branch_is_the_whole_view() {
        let t = seed_tensor();
        assert_eq!(t.branch(&[]).unwrap(), t.view());
        let plain = LodTensor::from_vec(vec![1u8, 2, 3], vec![3], Lod::empty()).unwrap();
        assert_eq!(plain.branch(&[]).unwrap().rows(), 3);
        let scalar = LodTensor::from_vec(vec![1u8], vec![], Lod::empty()).unwrap();
        assert_eq!(scalar.branch(&[]).unwrap().shape(), Vec::<usize>::new());
    }

    #[test]
    fn views_borrow_the_tensor_data() {
        let t = seed_tensor();
        let range = t.as_bytes().as_ptr_range();
        let b = t.branch(&[1]).unwrap();
        assert!(range.contains(&b.as_bytes().as_ptr()));
        assert_eq!(b.as_slice::<i64>().unwrap(), &[9]);
    }

    #[test]
    fn out_of_range_slices_are_errors() {
        let t = seed_tensor();
        assert!(matches!(t.branch(&[3]), Err(Error::OutOfRange { .. })));
        assert!(t.view().slice_level(0, 2, 4).is_err());
        assert!(t.view().sequence(2, 0).is_err());
    }

    #[test]
    fn sequences_iterate_a_level() {
        let t = seed_tensor();
        let lens: Vec<usize> = t.view().sequences(1).unwrap().map(|s| s.rows()).collect();
        assert_eq!(lens, vec![3, 2, 4, 1, 2, 3]);
        let firsts: Vec<i64> = t
            .view()
            .sequences(0)
            .unwrap()
            .map(|s| s.as_slice::<i64>().unwrap()[0])
            .collect();
        assert_eq!(firsts, vec![0, 9, 10]);
    }

    #[test]
    fn to_owned_rebases() {
        let t = seed_tensor();
        let owned = t.branch(&[2]).unwrap().to_owned();
        assert_eq!(owned.shape(), &[5, 1]);
        assert_eq!(owned.lod().levels(), &[vec![0, 2, 5]]);
    }

    #[test]
    fn views_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<LodTensorView<'static>>();
        check::<LodTensor>();
    }
}
