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
//! Data and LoD offsets both live in shared, immutable buffers: cloning a
//! tensor copies neither, and slicing one ([`LodTensor::branch`],
//! [`LodTensor::sequence`], [`LodTensor::slice_level`],
//! [`LodTensor::slice_rows`]) returns another owned tensor over windows of the
//! same buffers in O(levels). A tensor read from a memory-mapped file keeps the
//! map alive, so slices outlive the file handle. Two tensors may share one LoD
//! (Paddle's `ShareConstLODFrom`); changing a shared LoD never writes it in
//! place (`ShareMutableLODFrom`, copy-on-write). Writing data in place
//! ([`LodTensor::as_mut_slice`]) copies shared or mapped data first.
//!
//! There is no borrowed view type: an owned slice costs one reference count
//! for its body and, when it keeps LoD levels, one for its LoD (the levels
//! are windows of one shared block), which a borrow would not; in exchange it
//! can be sent to another thread, stored, returned from a function, or handed
//! to Python or Arrow. A tensor is 128 bytes, so returning one costs a few
//! vector moves.

pub mod json;
pub mod nested;

mod check;
mod top;
mod typed_shape;

pub(crate) use check::{check_lod_fits_shape, check_parts, checked_byte_len};
pub use json::{row_json, row_json_capped, tensor_json};

use crate::buffer::{AlignedBytes, Buffer, ByteStorage};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::lod::Lod;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use typed_shape::TypedShape;

/// The most rows without bytes (rows of a zero-width element shape, such as
/// `[n, 0]`) that an operation allocating per row, per sequence or per time
/// step handles: 2^24. Such rows cost nothing to claim (a 704-byte file holds
/// 2^40 of them), so their count bounds no allocation; past this limit
/// [`LodTensor::check_rows_without_bytes`] is an [`Error::InvalidArgument`]
/// instead of an allocation sized by the claim. Operations on the bytes
/// (slicing, copying, writing `.lodt` and Arrow IPC) have no such limit.
///
/// ```
/// assert_eq!(lodt::tensor::MAX_ROWS_WITHOUT_BYTES, 1 << 24);
/// ```
pub const MAX_ROWS_WITHOUT_BYTES: usize = 1 << 24;

/// An owned LoD tensor. See the [module docs](self).
///
/// ```
/// use lodt::{Lod, LodTensor};
/// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
/// let t = LodTensor::from_vec((0..15i64).collect(), vec![15, 1], lod).unwrap();
/// let article2 = t.branch(&[2]).unwrap();
/// assert_eq!(article2.as_slice::<i64>().unwrap(), &[10, 11, 12, 13, 14]);
/// assert_eq!(article2.lod().to_lengths(), vec![vec![2, 3]]);
/// ```
#[derive(Clone)]
pub struct LodTensor {
    /// The element type and the shape (up to four dimensions inline: a
    /// slice allocates nothing).
    shape: TypedShape,
    lod: Lod,
    data: Buffer,
}

// A tensor is built and returned by every slice; within 128 bytes the
// compiler moves it with vector stores, beyond it with a call to `memcpy`
// (measured: a third of the time of reaching a tensor of a batch).
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<LodTensor>() <= 128);

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
        Self::try_from_parts(dtype, shape, Buffer::from_storage(Arc::new(data)), lod)
    }

    /// Like [`LodTensor::try_new`], from shared parts: a [`Buffer`] (a window
    /// of a storage other tensors may hold too) and a LoD (whose offsets are
    /// shared when it is a clone of another tensor's).
    ///
    /// ```
    /// use lodt::{buffer::Buffer, DType, Lod, LodTensor};
    /// let data = Buffer::from_vec(vec![1i32, 2, 3]);
    /// let lod = Lod::try_from_offsets(vec![vec![0, 3]]).unwrap();
    /// let t = LodTensor::try_from_parts(DType::Int32, vec![3], data.clone(), lod.clone()).unwrap();
    /// assert!(t.lod().ptr_eq(&lod));
    /// assert!(t.buffer().shares_storage(&data));
    /// ```
    pub fn try_from_parts(dtype: DType, shape: Vec<usize>, data: Buffer, lod: Lod) -> Result<Self> {
        check_parts(
            dtype,
            &shape,
            lod.num_levels(),
            lod.num_rows(),
            data.as_slice(),
        )?;
        let data = if (data.as_slice().as_ptr() as usize).is_multiple_of(dtype.size()) {
            data
        } else {
            Buffer::from_storage(Arc::new(AlignedBytes::from_slice(data.as_slice())))
        };
        Ok(Self::from_checked_parts(dtype, &shape, data, lod))
    }

    /// Assembles a tensor from parts already checked against each other (a
    /// slice's parts, or the output of an operation that keeps the invariants).
    #[inline]
    pub(crate) fn from_checked_parts(
        dtype: DType,
        shape: &[usize],
        data: Buffer,
        lod: Lod,
    ) -> Self {
        LodTensor {
            shape: TypedShape::new(dtype, shape),
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
        self.shape.dtype()
    }

    /// The shape, `[rows, d1, d2, ...]` (empty for a 0-D tensor).
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![0u8; 6], vec![3, 2], Default::default()).unwrap();
    /// assert_eq!(t.shape(), &[3, 2]);
    /// ```
    pub fn shape(&self) -> &[usize] {
        self.shape.dims()
    }

    /// The number of rows (`shape[0]`; a 0-D tensor counts as one row).
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![0u8; 6], vec![3, 2], Default::default()).unwrap();
    /// assert_eq!(t.rows(), 3);
    /// ```
    #[inline]
    pub fn rows(&self) -> usize {
        self.shape().first().copied().unwrap_or(1)
    }

    /// Whether the tensor is 0-D (a scalar, with an empty shape).
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// assert!(LodTensor::from_vec(vec![1u8], vec![], Lod::empty())?.is_scalar());
    /// assert!(!LodTensor::from_vec(vec![1u8], vec![1], Lod::empty())?.is_scalar());
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn is_scalar(&self) -> bool {
        self.shape().is_empty()
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
            Some(level) => level.num_sequences(),
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
        self.shape().get(1..).unwrap_or(&[])
    }

    /// The number of elements (the product of the shape).
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![0f32; 24], vec![2, 3, 4], Default::default()).unwrap();
    /// assert_eq!(t.numel(), 24);
    /// ```
    pub fn numel(&self) -> usize {
        self.data.len() / self.dtype().size()
    }

    /// The number of elements of one row (the product of the element shape).
    /// Never overflows: when that product would not fit in `usize` the tensor
    /// has no rows, and this is 0.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![0f32; 24], vec![2, 3, 4], Default::default()).unwrap();
    /// assert_eq!(t.row_numel(), 12);
    /// ```
    pub fn row_numel(&self) -> usize {
        self.row_bytes() / self.dtype().size()
    }

    /// Checks that `count` items an operation `what` allocates for (rows,
    /// sequences or time steps of this tensor) are bounded by bytes: always
    /// when rows hold bytes, and up to [`MAX_ROWS_WITHOUT_BYTES`] when they
    /// hold none (a zero-width element shape). Otherwise an
    /// [`Error::InvalidArgument`] giving the count, the shape and the limit.
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let rows = 1usize << 40;
    /// let lod = Lod::try_from_offsets(vec![vec![0, rows as u64]])?;
    /// let t = LodTensor::from_vec(Vec::<f32>::new(), vec![rows, 0], lod)?;
    /// let err = t.check_rows_without_bytes(rows, "printing a row").unwrap_err();
    /// assert!(err.to_string().contains("1099511627776 rows of element shape [0]"), "{err}");
    /// assert!(t.check_rows_without_bytes(10, "printing a row").is_ok());
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn check_rows_without_bytes(&self, count: usize, what: &str) -> Result<()> {
        if self.row_bytes() > 0 || self.shape().is_empty() || count <= MAX_ROWS_WITHOUT_BYTES {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "{what}: {count} rows of element shape {:?} hold no bytes, and lodt allocates per row \
             for at most {MAX_ROWS_WITHOUT_BYTES} such rows (MAX_ROWS_WITHOUT_BYTES)",
            self.element_shape()
        )))
    }

    /// The number of bytes of one row.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![0f32; 6], vec![2, 3], Default::default()).unwrap();
    /// assert_eq!(t.row_bytes(), 12);
    /// ```
    #[inline]
    pub fn row_bytes(&self) -> usize {
        // The whole shape's byte size fits in usize (checked when the tensor
        // was made). The row's alone may not when there are no rows (shape
        // [0, 2^40, 2^40]): then no row is ever read, and 0 is as good as
        // any width.
        checked_byte_len(self.dtype(), self.element_shape()).unwrap_or(0)
    }

    /// The LoD. Clone it to share it with another tensor (O(levels), no
    /// offset copied).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2]]).unwrap();
    /// let t = lodt::LodTensor::from_vec(vec![1u8, 2], vec![2], lod.clone()).unwrap();
    /// assert_eq!(t.lod(), &lod);
    /// ```
    pub fn lod(&self) -> &Lod {
        &self.lod
    }

    /// Replaces the LoD, checking it against the rows. A clone of another
    /// tensor's LoD shares its offsets (Paddle's `ShareConstLODFrom` is
    /// `y.set_lod(x.lod().clone())`).
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let x = LodTensor::from_vec(vec![1f32, 2., 3.], vec![3], Lod::try_from_lengths(&[vec![2, 1]])?)?;
    /// let mut y = LodTensor::from_vec(vec![0i64; 3], vec![3], Lod::empty())?;
    /// y.set_lod(x.lod().clone())?;
    /// assert!(x.lod().ptr_eq(y.lod()));
    /// assert!(y.set_lod(Lod::try_from_lengths(&[vec![1, 1]])?).is_err());
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn set_lod(&mut self, lod: Lod) -> Result<()> {
        check_lod_fits_shape(self.shape.dims(), lod.num_levels(), lod.num_rows())?;
        self.lod = lod;
        Ok(())
    }

    /// Changes the LoD. Other tensors sharing it keep theirs (Paddle's
    /// `ShareMutableLODFrom`, copy-on-write: LoD buffers are never written in
    /// place). If the changed LoD no longer fits the rows, the change is
    /// undone and the error returned.
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
        let mut lod = self.lod.clone();
        change(&mut lod);
        self.set_lod(lod)
    }

    /// The raw little-endian bytes.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1u16], vec![1], Default::default()).unwrap();
    /// assert_eq!(t.as_bytes(), &[1, 0]);
    /// ```
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        self.data.as_slice()
    }

    /// The buffer holding the bytes: a window of a shared storage.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1u16], vec![1], Default::default()).unwrap();
    /// assert_eq!(t.buffer().as_slice(), &[1, 0]);
    /// ```
    pub fn buffer(&self) -> &Buffer {
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
        self.check_dtype::<T>()?;
        T::slice_from_bytes(self.data.as_slice())
    }

    fn check_dtype<T: Element>(&self) -> Result<()> {
        if T::DTYPE != self.dtype() {
            return Err(Error::DTypeMismatch {
                expected: T::DTYPE,
                found: self.dtype(),
            });
        }
        Ok(())
    }

    /// The data as `&mut [T]`. Shared, partial or read-only storage is
    /// copied first (copy-on-write).
    ///
    /// ```
    /// let mut t = lodt::LodTensor::from_vec(vec![1i32, 2], vec![2], Default::default()).unwrap();
    /// let u = t.clone();
    /// t.as_mut_slice::<i32>().unwrap()[0] = 7;
    /// assert_eq!(t.as_slice::<i32>().unwrap(), &[7, 2]);
    /// assert_eq!(u.as_slice::<i32>().unwrap(), &[1, 2]);
    /// ```
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T]> {
        self.check_dtype::<T>()?;
        T::slice_from_bytes_mut(self.data.make_mut())
    }

    /// A copy of the tensor into fresh storage of its own (data and offsets):
    /// what to keep when a small slice should not hold a large file or buffer
    /// alive.
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![1, 3]]).unwrap();
    /// let t = LodTensor::from_vec(vec![1u8, 2, 3, 4], vec![4], lod).unwrap();
    /// let own = t.branch(&[1]).unwrap().compact();
    /// assert_eq!(own.as_slice::<u8>().unwrap(), &[2, 3, 4]);
    /// assert!(!own.buffer().shares_storage(t.buffer()));
    /// ```
    pub fn compact(&self) -> LodTensor {
        LodTensor::from_checked_parts(
            self.dtype(),
            self.shape.dims(),
            Buffer::from_storage(Arc::new(AlignedBytes::from_slice(self.as_bytes()))),
            self.lod.compact(),
        )
    }

    /// The tensor with `lod` over rows `rows` of this one. No copy.
    #[inline]
    fn with_rows(&self, lod: Lod, rows: Range<u64>) -> Result<Self> {
        let row_bytes = self.row_bytes();
        let start = (rows.start as usize).checked_mul(row_bytes);
        let end = (rows.end as usize).checked_mul(row_bytes);
        let data = match (start, end) {
            (Some(s), Some(e)) if s <= e && e <= self.data.len() => self.data.slice(s..e)?,
            _ => {
                return Err(Error::OutOfRange {
                    what: "row range",
                    index: rows.end,
                    len: self.rows() as u64 + 1,
                });
            }
        };
        Ok(LodTensor {
            shape: self.shape.with_rows((rows.end - rows.start) as usize),
            lod,
            data,
        })
    }

    /// The `<i, j, ...>`-slice: follows one index per level from the top and
    /// returns the sequence reached, with the levels below it, as a tensor
    /// that shares this one's data and offsets. O(levels); no copy.
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let t = LodTensor::from_vec((0..15u32).collect(), vec![15], lod).unwrap();
    /// assert_eq!(t.branch(&[0, 2]).unwrap().as_slice::<u32>().unwrap(), &[5, 6, 7, 8]);
    /// let s = t.branch(&[2, 0]).unwrap();
    /// assert_eq!((s.lod().num_levels(), s.as_slice::<u32>().unwrap()), (0, &[10, 11][..]));
    /// ```
    #[inline]
    pub fn branch(&self, path: &[usize]) -> Result<Self> {
        if path.is_empty() {
            // The whole tensor (its LoD alone cannot tell the rows of a plain tensor).
            return Ok(self.clone());
        }
        let (lod, rows) = self.lod.branch(path)?;
        self.with_rows(lod, rows)
    }

    /// Sequences `begin..end` of level `level`, keeping `level` as the top
    /// level (Paddle's `LODSliceShared(level, begin, end)`). O(levels); no copy.
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let t = LodTensor::from_vec((0..15i64).collect(), vec![15], lod).unwrap();
    /// let s = t.slice_level(0, 1, 3).unwrap();
    /// assert_eq!(s.lod().to_lengths(), vec![vec![1, 2], vec![1, 2, 3]]);
    /// assert_eq!(s.rows(), 6);
    /// ```
    pub fn slice_level(&self, level: usize, begin: usize, end: usize) -> Result<Self> {
        let (lod, rows) = self.lod.slice_level(level, begin, end)?;
        self.with_rows(lod, rows)
    }

    /// Rows `begin..end` as a plain tensor with no LoD (Paddle's
    /// `Tensor::Slice(begin, end)`, which ignores the LoD). No copy. An error
    /// for a 0-D tensor, which has no rows to cut.
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![1, 3]]).unwrap();
    /// let t = LodTensor::from_vec(vec![1u8, 2, 3, 4], vec![4], lod).unwrap();
    /// let rows = t.slice_rows(1, 3).unwrap();
    /// assert_eq!((rows.as_slice::<u8>().unwrap(), rows.lod().num_levels()), (&[2, 3][..], 0));
    /// assert!(t.slice_rows(3, 5).is_err());
    /// ```
    pub fn slice_rows(&self, begin: usize, end: usize) -> Result<Self> {
        if self.is_scalar() {
            return Err(Error::ShapeMismatch {
                what: "row slice of a 0-D tensor (needs rank >= 1)",
                expected: vec![1],
                found: Vec::new(),
            });
        }
        if end > self.rows() {
            return Err(Error::OutOfRange {
                what: "row range end",
                index: end as u64,
                len: self.rows() as u64 + 1,
            });
        }
        if begin > end {
            return Err(Error::OutOfRange {
                what: "row range start",
                index: begin as u64,
                len: end as u64 + 1,
            });
        }
        self.with_rows(Lod::empty(), begin as u64..end as u64)
    }

    /// Sequence `index` of level `level`, with the levels below it (the general
    /// `Slice(level, sequence)` of the design doc; level 0 is top-level
    /// slicing). O(levels); no copy.
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let t = LodTensor::from_vec((0..15i64).collect(), vec![15], lod).unwrap();
    /// assert_eq!(t.sequence(1, 4).unwrap().as_slice::<i64>().unwrap(), &[10, 11]);
    /// assert_eq!(t.sequence(0, 1).unwrap().lod().to_lengths(), vec![vec![1]]);
    /// ```
    pub fn sequence(&self, level: usize, index: usize) -> Result<Self> {
        let (lod, rows) = self.lod.sequence(level, index)?;
        self.with_rows(lod, rows)
    }

    /// The sequences of level `level`, in order, each a tensor sharing this
    /// one's data.
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![1, 3]]).unwrap();
    /// let t = LodTensor::from_vec(vec![1u8, 2, 3, 4], vec![4], lod).unwrap();
    /// let seqs: Vec<_> = t.sequences(0).unwrap().map(|s| s.as_bytes().len()).collect();
    /// assert_eq!(seqs, vec![1, 3]);
    /// ```
    pub fn sequences(&self, level: usize) -> Result<impl ExactSizeIterator<Item = Self> + '_> {
        let count = self.lod.num_sequences(level)?;
        Ok((0..count).map(move |i| {
            // In range by construction: i < num_sequences(level).
            self.sequence(level, i).unwrap_or_else(|_| self.clone())
        }))
    }
}

impl fmt::Debug for LodTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LodTensor")
            .field("dtype", &self.dtype())
            .field("shape", &self.shape())
            .field("lod", &self.lod.to_string())
            .field("bytes", &self.data.len())
            .finish()
    }
}

impl PartialEq for LodTensor {
    /// Tensors are equal when dtype, shape, LoD and bytes are equal.
    fn eq(&self, other: &Self) -> bool {
        self.dtype() == other.dtype()
            && self.shape() == other.shape()
            && self.lod == other.lod
            && self.as_bytes() == other.as_bytes()
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
        assert!(x.lod().ptr_eq(y.lod()));
        let err = y.update_lod(|l| *l = Lod::try_from_lengths(&[vec![5]]).unwrap());
        assert!(err.is_err());
        assert!(x.lod().ptr_eq(y.lod()));
        y.update_lod(|l| l.append_lengths(&[vec![0]]).unwrap())
            .unwrap();
        assert_eq!(y.lod().to_lengths(), vec![vec![2, 1, 0]]);
        assert_eq!(x.lod().to_lengths(), vec![vec![2, 1]]);
    }

    fn seed_tensor() -> LodTensor {
        let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
        LodTensor::from_vec((0..15i64).collect(), vec![15, 1], lod).unwrap()
    }

    #[test]
    fn seed_branch_slices() {
        let t = seed_tensor();
        let b2 = t.branch(&[2]).unwrap();
        assert_eq!(b2.as_slice::<i64>().unwrap(), &[10, 11, 12, 13, 14]);
        assert_eq!(b2.lod().to_offsets(), [vec![0, 2, 5]]);
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
        assert_eq!(t.branch(&[]).unwrap(), t);
        let plain = LodTensor::from_vec(vec![1u8, 2, 3], vec![3], Lod::empty()).unwrap();
        assert_eq!(plain.branch(&[]).unwrap().rows(), 3);
        let scalar = LodTensor::from_vec(vec![1u8], vec![], Lod::empty()).unwrap();
        assert_eq!(scalar.branch(&[]).unwrap().shape(), &[] as &[usize]);
    }

    #[test]
    fn slices_share_the_tensor_data() {
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
        assert!(t.slice_level(0, 2, 4).is_err());
        assert!(t.sequence(2, 0).is_err());
    }

    #[test]
    fn sequences_iterate_a_level() {
        let t = seed_tensor();
        let lens: Vec<usize> = t.sequences(1).unwrap().map(|s| s.rows()).collect();
        assert_eq!(lens, vec![3, 2, 4, 1, 2, 3]);
        let firsts: Vec<i64> = t
            .sequences(0)
            .unwrap()
            .map(|s| s.as_slice::<i64>().unwrap()[0])
            .collect();
        assert_eq!(firsts, vec![0, 9, 10]);
    }

    #[test]
    fn compact_rebases() {
        let t = seed_tensor();
        let owned = t.branch(&[2]).unwrap().compact();
        assert_eq!(owned.shape(), &[5, 1]);
        assert_eq!(owned.lod().to_offsets(), [vec![0, 2, 5]]);
    }

    #[test]
    fn tensors_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<LodTensor>();
        check::<crate::Lod>();
    }
}
