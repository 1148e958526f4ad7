//! The rules a tensor's parts obey against each other: data length against
//! shape × dtype, the LoD against the rows, bool bytes. Every constructor of
//! tensors (owned, read from a file, converted from Arrow or Paddle) checks
//! with these.

use crate::dtype::{DType, check_bools};
use crate::error::{Error, Result};

/// The number of elements and bytes of a shape, checked for overflow.
pub(crate) fn checked_byte_len(dtype: DType, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
        .ok_or(Error::Overflow {
            what: "tensor byte size (shape × dtype size)",
        })
}

fn shape_u64(shape: &[usize]) -> Vec<u64> {
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
