//! [`LodTensor`]: an owned, dense, row-major tensor plus a LoD whose last level
//! indexes its rows.
//!
//! ```text
//!  shape [15, 1], dtype int64, lod {{0, 3, 4, 6}{0, 3, 5, 9, 10, 12, 15}}
//!
//!  data:  r0 r1 r2 | r3 r4 | r5 r6 r7 r8 | r9 | r10 r11 | r12 r13 r14
//!         '---- article 0 ---------------'    '----- article 2 ------'
//!                                      article 1
//! ```
//!
//! Data and LoD are both behind `Arc`s: cloning a tensor copies neither, and
//! two tensors may share one LoD (Paddle's `ShareConstLODFrom`); changing a
//! shared LoD copies it first (`ShareMutableLODFrom`, copy-on-write).

use crate::buffer::{AlignedBytes, ByteStorage, make_mut};
use crate::dtype::{DType, Element, check_bools};
use crate::error::{Error, Result};
use crate::lod::Lod;
use crate::view::LodTensorView;
use std::fmt;
use std::sync::Arc;

/// An owned LoD tensor. See the [module docs](self).
///
/// ```
/// use lodt::{Lod, LodTensor};
/// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
/// let t = LodTensor::from_vec((0..15i64).collect(), vec![15, 1], lod).unwrap();
/// let article2 = t.branch(&[2]).unwrap();
/// assert_eq!(article2.as_slice::<i64>().unwrap(), &[10, 11, 12, 13, 14]);
/// assert_eq!(article2.lod().to_lod().to_lengths(), vec![vec![2, 3]]);
/// ```
#[derive(Clone)]
pub struct LodTensor {
    dtype: DType,
    shape: Vec<usize>,
    lod: Arc<Lod>,
    data: Arc<dyn ByteStorage>,
}

/// The number of elements and bytes of a shape, checked for overflow.
pub(crate) fn checked_byte_len(dtype: DType, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
        .ok_or(Error::Overflow {
            what: "tensor byte size (shape × dtype size)",
        })
}

pub(crate) fn shape_u64(shape: &[usize]) -> Vec<u64> {
    shape.iter().map(|&d| d as u64).collect()
}

/// Checks a LoD (given by its number of levels and rows) against a shape: a
/// tensor with a LoD has rank >= 1 and as many rows as the LoD's last offset.
pub(crate) fn check_lod_fits_shape(
    shape: &[usize],
    lod_levels: usize,
    lod_rows: Option<u64>,
) -> Result<()> {
    if lod_levels == 0 {
        return Ok(());
    }
    let expected = vec![lod_rows.unwrap_or(0)];
    match shape.first() {
        None => Err(Error::ShapeMismatch {
            what: "shape of a tensor with a LoD (needs rank >= 1)",
            expected,
            found: Vec::new(),
        }),
        Some(&rows) if lod_rows != Some(rows as u64) => Err(Error::ShapeMismatch {
            what: "rows against the LoD's last offset",
            expected,
            found: vec![rows as u64],
        }),
        Some(_) => Ok(()),
    }
}

/// Checks the parts of a tensor against each other: data length against shape
/// × dtype, the LoD against the rows, and bool bytes. Shared by every
/// constructor of owned tensors and views.
pub(crate) fn check_parts(
    dtype: DType,
    shape: &[usize],
    lod_levels: usize,
    lod_rows: Option<u64>,
    data: &[u8],
) -> Result<()> {
    let expected = checked_byte_len(dtype, shape)?;
    if data.len() != expected {
        return Err(Error::DataLength {
            dtype,
            shape: shape_u64(shape),
            expected: expected as u64,
            found: data.len() as u64,
        });
    }
    check_lod_fits_shape(shape, lod_levels, lod_rows)?;
    if dtype == DType::Bool {
        check_bools(data)?;
    }
    Ok(())
}

impl LodTensor {
    /// A tensor over `data`, which is kept as it is (no copy) when it is
    /// aligned for `dtype`, and copied into an aligned buffer otherwise.
    ///
    /// Checks that `data` holds exactly `shape` × `dtype.size()` bytes, that
    /// the LoD's last offset equals `shape[0]`, and that bools are 0 or 1.
    ///
    /// ```
    /// use lodt::{buffer::AlignedBytes, DType, Lod, LodTensor};
    /// let bytes = AlignedBytes::from_slice(&[1, 0, 2, 0, 3, 0]);
    /// let lod = Lod::try_from_offsets(vec![vec![0, 1, 3]]).unwrap();
    /// let t = LodTensor::try_new(DType::UInt16, vec![3], bytes, lod).unwrap();
    /// assert_eq!(t.as_slice::<u16>().unwrap(), &[1, 2, 3]);
    /// ```
    pub fn try_new(
        dtype: DType,
        shape: Vec<usize>,
        data: impl ByteStorage,
        lod: Lod,
    ) -> Result<Self> {
        Self::try_from_parts(dtype, shape, Arc::new(data), Arc::new(lod))
    }

    /// Like [`LodTensor::try_new`], from shared parts: an `Arc`'d storage and an
    /// `Arc`'d LoD that other tensors may hold too.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lodt::{buffer::ByteStorage, DType, Lod, LodTensor};
    /// let data: Arc<dyn ByteStorage> = Arc::new(vec![1i32, 2, 3]);
    /// let lod = Arc::new(Lod::try_from_offsets(vec![vec![0, 3]]).unwrap());
    /// let t = LodTensor::try_from_parts(DType::Int32, vec![3], data, lod.clone()).unwrap();
    /// assert!(Arc::ptr_eq(t.lod_arc(), &lod));
    /// ```
    pub fn try_from_parts(
        dtype: DType,
        shape: Vec<usize>,
        data: Arc<dyn ByteStorage>,
        lod: Arc<Lod>,
    ) -> Result<Self> {
        check_parts(
            dtype,
            &shape,
            lod.num_levels(),
            lod.num_rows(),
            data.bytes(),
        )?;
        let data = if (data.bytes().as_ptr() as usize).is_multiple_of(dtype.size()) {
            data
        } else {
            Arc::new(AlignedBytes::from_slice(data.bytes()))
        };
        Ok(LodTensor {
            dtype,
            shape,
            lod,
            data,
        })
    }

    /// Assembles a tensor from parts already checked against each other (a
    /// view's parts, or the output of an operation that keeps the invariants).
    pub(crate) fn from_checked_parts(
        dtype: DType,
        shape: Vec<usize>,
        data: Arc<dyn ByteStorage>,
        lod: Arc<Lod>,
    ) -> Self {
        LodTensor {
            dtype,
            shape,
            lod,
            data,
        }
    }

    /// A tensor holding a copy of `bytes` (little-endian elements).
    ///
    /// ```
    /// use lodt::{DType, Lod, LodTensor};
    /// let t = LodTensor::from_bytes(DType::Float32, vec![1], &1.5f32.to_le_bytes(), Lod::empty()).unwrap();
    /// assert_eq!(t.as_slice::<f32>().unwrap(), &[1.5]);
    /// ```
    pub fn from_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8], lod: Lod) -> Result<Self> {
        Self::try_new(dtype, shape, AlignedBytes::from_slice(bytes), lod)
    }

    /// A tensor that takes ownership of `values` with no copy.
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![1, 3]]).unwrap();
    /// let t = LodTensor::from_vec(vec![1.1f32, 2.2, 3.3, 4.4], vec![4, 1], lod).unwrap();
    /// assert_eq!(t.shape(), &[4, 1]);
    /// ```
    pub fn from_vec<T: Element>(values: Vec<T>, shape: Vec<usize>, lod: Lod) -> Result<Self>
    where
        Vec<T>: ByteStorage,
    {
        Self::try_new(T::DTYPE, shape, values, lod)
    }

    /// The element type.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![true], vec![1], Default::default()).unwrap();
    /// assert_eq!(t.dtype(), lodt::DType::Bool);
    /// ```
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape, `[rows, d1, d2, ...]` (empty for a 0-D tensor).
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![0u8; 6], vec![3, 2], Default::default()).unwrap();
    /// assert_eq!(t.shape(), &[3, 2]);
    /// ```
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The number of rows (`shape[0]`; a 0-D tensor counts as one row).
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![0u8; 6], vec![3, 2], Default::default()).unwrap();
    /// assert_eq!(t.rows(), 3);
    /// ```
    pub fn rows(&self) -> usize {
        self.shape.first().copied().unwrap_or(1)
    }

    /// The number of top-level rows: the sequences of the top LoD level, or
    /// the rows when the tensor has no LoD (a 0-D tensor counts as one row).
    /// This is the tensor's number of rows in an Arrow `RecordBatch`, and what
    /// re-batching regroups.
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![1, 2]])?;
    /// assert_eq!(LodTensor::from_vec(vec![0u8; 3], vec![3], lod)?.top_level_rows(), 2);
    /// assert_eq!(LodTensor::from_vec(vec![0u8; 3], vec![3], Lod::empty())?.top_level_rows(), 3);
    /// assert_eq!(LodTensor::from_vec(vec![0u8], vec![], Lod::empty())?.top_level_rows(), 1);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn top_level_rows(&self) -> usize {
        match self.lod.level(0) {
            Some(level) => level.len().saturating_sub(1),
            None => self.rows(),
        }
    }

    /// The shape of one row (`shape[1..]`).
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![0f32; 24], vec![2, 3, 4], Default::default()).unwrap();
    /// assert_eq!(t.element_shape(), &[3, 4]);
    /// ```
    pub fn element_shape(&self) -> &[usize] {
        self.shape.get(1..).unwrap_or(&[])
    }

    /// The number of elements (the product of the shape).
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![0f32; 24], vec![2, 3, 4], Default::default()).unwrap();
    /// assert_eq!(t.numel(), 24);
    /// ```
    pub fn numel(&self) -> usize {
        self.data.bytes().len() / self.dtype.size()
    }

    /// The LoD.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2]]).unwrap();
    /// let t = lodt::LodTensor::from_vec(vec![1u8, 2], vec![2], lod.clone()).unwrap();
    /// assert_eq!(t.lod(), &lod);
    /// ```
    pub fn lod(&self) -> &Lod {
        &self.lod
    }

    /// The shared LoD, to hand to another tensor.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1u8], vec![1], Default::default()).unwrap();
    /// assert_eq!(t.lod_arc().num_levels(), 0);
    /// ```
    pub fn lod_arc(&self) -> &Arc<Lod> {
        &self.lod
    }

    /// Replaces the LoD, checking it against the rows.
    ///
    /// ```
    /// let mut t = lodt::LodTensor::from_vec(vec![1u8, 2, 3], vec![3], Default::default()).unwrap();
    /// t.set_lod(lodt::Lod::try_from_lengths(&[vec![1, 2]]).unwrap()).unwrap();
    /// assert!(t.set_lod(lodt::Lod::try_from_lengths(&[vec![1, 1]]).unwrap()).is_err());
    /// ```
    pub fn set_lod(&mut self, lod: Lod) -> Result<()> {
        self.set_shared_lod(Arc::new(lod))
    }

    /// Uses `lod`, an `Arc` other tensors may share, as this tensor's LoD
    /// (Paddle's `ShareConstLODFrom` is `t.set_shared_lod(other.lod_arc().clone())`).
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![2, 1]]).unwrap();
    /// let x = LodTensor::from_vec(vec![1f32, 2., 3.], vec![3], lod).unwrap();
    /// let mut y = LodTensor::from_vec(vec![0i64; 3], vec![3], Default::default()).unwrap();
    /// y.set_shared_lod(x.lod_arc().clone()).unwrap();
    /// assert!(std::sync::Arc::ptr_eq(x.lod_arc(), y.lod_arc()));
    /// ```
    pub fn set_shared_lod(&mut self, lod: Arc<Lod>) -> Result<()> {
        check_lod_fits_shape(&self.shape, lod.num_levels(), lod.num_rows())?;
        self.lod = lod;
        Ok(())
    }

    /// Changes the LoD in place. A LoD shared with other tensors is copied
    /// first, so they keep theirs (Paddle's `ShareMutableLODFrom`, copy-on-write).
    /// If the changed LoD no longer fits the rows, the change is undone and the
    /// error returned.
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![2, 1]]).unwrap();
    /// let x = LodTensor::from_vec(vec![1f32, 2., 3.], vec![3], lod).unwrap();
    /// let mut y = x.clone();
    /// y.update_lod(|lod| *lod = Lod::try_from_lengths(&[vec![1, 1, 1]]).unwrap()).unwrap();
    /// assert_eq!(x.lod().to_lengths(), vec![vec![2, 1]]);
    /// assert_eq!(y.lod().to_lengths(), vec![vec![1, 1, 1]]);
    /// ```
    pub fn update_lod(&mut self, change: impl FnOnce(&mut Lod)) -> Result<()> {
        let mut lod = (*self.lod).clone();
        change(&mut lod);
        check_lod_fits_shape(&self.shape, lod.num_levels(), lod.num_rows())?;
        *Arc::make_mut(&mut self.lod) = lod;
        Ok(())
    }

    /// The raw little-endian bytes.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1u16], vec![1], Default::default()).unwrap();
    /// assert_eq!(t.as_bytes(), &[1, 0]);
    /// ```
    pub fn as_bytes(&self) -> &[u8] {
        self.data.bytes()
    }

    /// The shared storage.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1u16], vec![1], Default::default()).unwrap();
    /// assert_eq!(t.storage().bytes(), &[1, 0]);
    /// ```
    pub fn storage(&self) -> &Arc<dyn ByteStorage> {
        &self.data
    }

    /// The data as `&[T]`, with no copy; an error if `T` is not the dtype.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1i8, -1], vec![2], Default::default()).unwrap();
    /// assert_eq!(t.as_slice::<i8>().unwrap(), &[1, -1]);
    /// assert!(t.as_slice::<u8>().is_err());
    /// ```
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        self.view().as_slice()
    }

    /// The data as `&mut [T]`. Shared or read-only storage is copied first.
    ///
    /// ```
    /// let mut t = lodt::LodTensor::from_vec(vec![1i32, 2], vec![2], Default::default()).unwrap();
    /// let u = t.clone();
    /// t.as_mut_slice::<i32>().unwrap()[0] = 7;
    /// assert_eq!(t.as_slice::<i32>().unwrap(), &[7, 2]);
    /// assert_eq!(u.as_slice::<i32>().unwrap(), &[1, 2]);
    /// ```
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T]> {
        if T::DTYPE != self.dtype {
            return Err(Error::DTypeMismatch {
                expected: T::DTYPE,
                found: self.dtype,
            });
        }
        T::slice_from_bytes_mut(make_mut(&mut self.data))
    }

    /// A borrowed view of the whole tensor.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default()).unwrap();
    /// assert_eq!(t.view().rows(), 2);
    /// ```
    pub fn view(&self) -> LodTensorView<'_> {
        LodTensorView::from_trusted(
            self.dtype,
            &self.shape,
            self.lod.as_view(),
            self.data.bytes(),
        )
    }

    /// The `<i, j, ...>`-slice, as a view (no copy). See [`LodTensorView::branch`].
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let t = LodTensor::from_vec((0..15u32).collect(), vec![15], lod).unwrap();
    /// assert_eq!(t.branch(&[0, 2]).unwrap().as_slice::<u32>().unwrap(), &[5, 6, 7, 8]);
    /// ```
    pub fn branch(&self, path: &[usize]) -> Result<LodTensorView<'_>> {
        self.view().branch(path)
    }

    /// Sequence `index` of level `level`, as a view (Paddle's `Slice(level, sequence)`).
    /// See [`LodTensorView::sequence`].
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let t = LodTensor::from_vec((0..15u32).collect(), vec![15], lod).unwrap();
    /// assert_eq!(t.sequence(1, 3).unwrap().as_slice::<u32>().unwrap(), &[9]);
    /// ```
    pub fn sequence(&self, level: usize, index: usize) -> Result<LodTensorView<'_>> {
        self.view().sequence(level, index)
    }
}

impl fmt::Debug for LodTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LodTensor")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("lod", &self.lod.to_string())
            .field("bytes", &self.data.bytes().len())
            .finish()
    }
}

impl PartialEq for LodTensor {
    /// Tensors are equal when dtype, shape, LoD and bytes are equal.
    fn eq(&self, other: &Self) -> bool {
        self.view() == other.view()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_parts_have_their_own_errors() {
        assert_eq!(
            LodTensor::from_vec(vec![1u8, 2, 3], vec![2], Lod::empty()).unwrap_err(),
            Error::DataLength {
                dtype: DType::UInt8,
                shape: vec![2],
                expected: 2,
                found: 3
            }
        );
        let lod = Lod::try_from_offsets(vec![vec![0, 2]]).unwrap();
        assert_eq!(
            LodTensor::from_vec(vec![1u8, 2, 3], vec![3], lod).unwrap_err(),
            Error::ShapeMismatch {
                what: "rows against the LoD's last offset",
                expected: vec![2],
                found: vec![3]
            }
        );
        assert!(matches!(
            LodTensor::from_bytes(DType::Bool, vec![2], &[1, 5], Lod::empty()).unwrap_err(),
            Error::InvalidBool { index: 1, found: 5 }
        ));
        assert!(matches!(
            LodTensor::from_bytes(DType::Float64, vec![usize::MAX, 2], &[], Lod::empty())
                .unwrap_err(),
            Error::Overflow { .. }
        ));
    }

    #[test]
    fn zero_d_tensor_has_one_element() {
        let t = LodTensor::from_vec(vec![2.5f64], vec![], Lod::empty()).unwrap();
        assert_eq!((t.rows(), t.numel(), t.shape()), (1, 1, &[][..]));
        let lod = Lod::try_from_offsets(vec![vec![0, 1]]).unwrap();
        assert!(LodTensor::from_vec(vec![2.5f64], vec![], lod).is_err());
    }

    #[test]
    fn misaligned_bytes_are_copied_to_aligned_storage() {
        let raw = [0u8; 17];
        let t = LodTensor::from_bytes(DType::Float64, vec![2], &raw[1..], Lod::empty()).unwrap();
        assert_eq!(t.as_slice::<f64>().unwrap(), &[0.0, 0.0]);
    }

    #[test]
    fn shared_lod_is_copy_on_write() {
        let lod = Lod::try_from_lengths(&[vec![2, 1]]).unwrap();
        let x = LodTensor::from_vec(vec![1f32, 2., 3.], vec![3], lod).unwrap();
        let mut y = x.clone();
        assert!(Arc::ptr_eq(x.lod_arc(), y.lod_arc()));
        let err = y.update_lod(|l| *l = Lod::try_from_lengths(&[vec![5]]).unwrap());
        assert!(err.is_err());
        assert!(Arc::ptr_eq(x.lod_arc(), y.lod_arc()));
        y.update_lod(|l| l.append_lengths(&[vec![0]]).unwrap())
            .unwrap();
        assert_eq!(y.lod().to_lengths(), vec![vec![2, 1, 0]]);
        assert_eq!(x.lod().to_lengths(), vec![vec![2, 1]]);
    }
}
