//! Writing Paddle's stream format, byte for byte what `SerializeToStream` writes.

use super::desc::{PaddleDType, TensorDesc};
use super::error::PaddleError;
use crate::tensor::LodTensor;
use std::io::Write;

/// The bytes of a record before its data: versions, LoD, `TensorDesc`.
///
/// Fails, before anything is written, for a dtype Paddle lacks or a dim
/// above `i64::MAX`.
pub(crate) fn header(view: &LodTensor) -> Result<Vec<u8>, PaddleError> {
    let dtype = view.dtype();
    let paddle_dtype =
        PaddleDType::from_dtype(dtype).ok_or(PaddleError::UnsupportedDType { dtype })?;
    let dims = view
        .shape()
        .iter()
        .map(|&d| {
            i64::try_from(d).map_err(|_| PaddleError::TooLarge {
                what: "a dimension",
                found: d as u64,
                max: i64::MAX as u64,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let desc = TensorDesc {
        data_type: i64::from(paddle_dtype.code()),
        dims,
    }
    .encode();
    let desc_len = i32::try_from(desc.len()).map_err(|_| PaddleError::TooLarge {
        what: "the TensorDesc length",
        found: desc.len() as u64,
        max: i32::MAX as u64,
    })?;

    let lod = view.lod();
    if lod.num_levels() > crate::lod::MAX_LOD_LEVELS {
        return Err(PaddleError::TooLarge {
            what: "the LoD level count (lodt reads Paddle files of at most 64 levels)",
            found: lod.num_levels() as u64,
            max: crate::lod::MAX_LOD_LEVELS as u64,
        });
    }
    for level in 0..lod.num_levels() {
        if lod.num_sequences(level)? == 0 {
            return Err(PaddleError::LodNotWritable {
                source: crate::Error::InvalidLod {
                    level,
                    index: 0,
                    rule: crate::LodRule::TooShort,
                    expected: 2,
                    found: 1,
                },
            });
        }
    }
    let lod_bytes: usize = (0..lod.num_levels())
        .map(|l| 8 + 8 * lod.num_sequences(l).map_or(0, |n| n + 1))
        .sum();
    let mut out = Vec::with_capacity(12 + lod_bytes + 8 + desc.len());
    out.extend_from_slice(&0u32.to_le_bytes()); // LoDTensor version
    out.extend_from_slice(&(lod.num_levels() as u64).to_le_bytes());
    for level in 0..lod.num_levels() {
        let offsets = lod.offsets(level)?;
        out.extend_from_slice(&(offsets.len() as u64).saturating_mul(8).to_le_bytes());
        for offset in offsets {
            out.extend_from_slice(&offset.to_le_bytes());
        }
    }
    out.extend_from_slice(&0u32.to_le_bytes()); // Tensor version
    out.extend_from_slice(&desc_len.to_le_bytes());
    out.extend_from_slice(&desc);
    Ok(out)
}

/// Writes one record: header, then the raw little-endian data.
pub(crate) fn write_record<W: Write + ?Sized>(
    header: &[u8],
    view: &LodTensor,
    writer: &mut W,
) -> Result<(), PaddleError> {
    writer.write_all(header)?;
    writer.write_all(view.as_bytes())?;
    Ok(())
}
