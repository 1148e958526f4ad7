//! A tensor of a `.lodt` file as an Arrow array over the file's own bytes.
//!
//! ```text
//!  mapped .lodt file:  | header | … | level 0 u64s | level 1 u64s | body | … | footer |
//!                                     │              │              │
//!  LargeListArray:          offsets ──┘   child offsets ──┘   values ┘   (no copy)
//! ```

use super::{ArrowOptions, Result, to_arrow};
use crate::format::LodtFile;
use arrow_array::ArrayRef;
use arrow_schema::Field;

/// Tensor `name` of batch `batch` of `file` as an Arrow array whose offsets
/// and values are the file's own bytes: no copy, and O(levels) work, since
/// the file's reader validated the batch's LoDs when the batch was first read
/// (the tensor it reads is a window of the file's storage, and [`to_arrow`]
/// shares it). The array keeps the file's storage (its memory map) alive.
///
/// With [`ListType::List`](super::ListType::List), 32-bit offsets must be
/// computed, which copies the offsets (values are still shared).
///
/// ```
/// use arrow_array::cast::AsArray;
/// let lod = lodt::Lod::try_from_lengths(&[vec![2, 1]])?;
/// let t = lodt::LodTensor::from_vec(vec![1.5f32, 2.5, 3.5], vec![3], lod)?;
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("x.lodt");
/// lodt::format::save_tensor(&path, "x", &t)?;
/// let file = lodt::LodtFile::open(&path)?;
/// let (_, array) = lodt::arrow::lodt_tensor_to_arrow(&file, 0, "x", &Default::default())?;
/// assert_eq!(array.as_list::<i64>().value_offsets(), &[0, 2, 3]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn lodt_tensor_to_arrow(
    file: &LodtFile,
    batch: usize,
    name: &str,
    options: &ArrowOptions,
) -> Result<(Field, ArrayRef)> {
    let tensor = file.batch(batch)?.tensor(name)?;
    to_arrow(name, &tensor, options)
}
