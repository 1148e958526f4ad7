//! MDS column encodings, and the tensors lodt builds from them.

use super::error::{MdsError, Result};
use crate::buffer::AlignedBytes;
use crate::dtype::DType;
use crate::lod::Lod;
use crate::tensor::LodTensor;

/// An MDS column encoding lodt reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// A numpy scalar (`uint8` … `float64`), or `int` (int64).
    Scalar(DType),
    /// `str` or `bytes`: bytes, one sequence per sample.
    Bytes,
    /// `ndarray[:DTYPE[:SHAPE]]`.
    NdArray {
        dtype: Option<DType>,
        shape: Option<Vec<usize>>,
    },
}

/// MDS's names of numpy dtypes (its scalar encodings and `ndarray` dtypes).
fn named(name: &str) -> Option<DType> {
    Some(match name {
        "uint8" => DType::UInt8,
        "int8" => DType::Int8,
        "uint16" => DType::UInt16,
        "int16" => DType::Int16,
        "uint32" => DType::UInt32,
        "int32" => DType::Int32,
        "uint64" => DType::UInt64,
        "int64" => DType::Int64,
        "float16" => DType::Float16,
        "float32" => DType::Float32,
        "float64" => DType::Float64,
        _ => return None,
    })
}

/// The dtype of an `ndarray` value's dtype byte.
fn coded(code: u8) -> Option<DType> {
    Some(match code {
        8 => DType::UInt8,
        9 => DType::Int8,
        16 => DType::UInt16,
        17 => DType::Int16,
        18 => DType::Float16,
        32 => DType::UInt32,
        33 => DType::Int32,
        34 => DType::Float32,
        64 => DType::UInt64,
        65 => DType::Int64,
        66 => DType::Float64,
        _ => return None,
    })
}

impl Encoding {
    /// The encoding an index names, or why lodt does not read it.
    pub(crate) fn parse(text: &str) -> std::result::Result<Encoding, String> {
        if text == "int" {
            return Ok(Encoding::Scalar(DType::Int64));
        }
        if text == "str" || text == "bytes" {
            return Ok(Encoding::Bytes);
        }
        if let Some(dtype) = named(text) {
            return Ok(Encoding::Scalar(dtype));
        }
        let mut parts = text.split(':');
        if parts.next() == Some("ndarray") {
            let dtype = match parts.next() {
                None => None,
                Some(d) => Some(
                    named(d).ok_or_else(|| format!("ndarray dtype {d:?} is not one MDS writes"))?,
                ),
            };
            let shape = match parts.next() {
                None => None,
                Some(s) => Some(
                    s.split(',')
                        .map(|d| d.parse::<usize>().ok().filter(|&d| d >= 1))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| format!("ndarray shape {s:?}: expected dimensions >= 1"))?,
                ),
            };
            if parts.next().is_none() {
                return Ok(Encoding::NdArray { dtype, shape });
            }
        }
        Err(format!(
            "lodt does not read MDS columns encoded as {text:?} (it reads int, numpy scalars, str, bytes and ndarray); choose the other columns with --columns"
        ))
    }

    /// The bytes every value takes, for the encodings of a fixed size.
    pub(crate) fn fixed_size(&self) -> Option<u64> {
        match self {
            Encoding::Scalar(d) => Some(d.size() as u64),
            Encoding::NdArray {
                dtype: Some(d),
                shape: Some(s),
            } => s
                .iter()
                .try_fold(d.size() as u64, |a, &x| a.checked_mul(x as u64)),
            _ => None,
        }
    }
}

/// One column of a shard being gathered: the values' bytes, and per sample
/// its rows (for the encodings of variable size).
pub(crate) struct Column {
    encoding: Encoding,
    data: Vec<u8>,
    lengths: Vec<u64>,
    dtype: Option<DType>,
    inner: Option<Vec<usize>>,
}

impl Column {
    pub(crate) fn new(encoding: Encoding) -> Column {
        let (dtype, inner) = match &encoding {
            Encoding::Scalar(d) => (Some(*d), Some(Vec::new())),
            Encoding::Bytes => (Some(DType::UInt8), Some(Vec::new())),
            Encoding::NdArray { dtype, shape } => (*dtype, shape.clone()),
        };
        Column {
            encoding,
            data: Vec::new(),
            lengths: Vec::new(),
            dtype,
            inner,
        }
    }

    /// Adds one sample's value (`value`: its bytes in the sample).
    pub(crate) fn push(&mut self, mut value: &[u8]) -> std::result::Result<(), String> {
        let rows = match &self.encoding {
            Encoding::Scalar(_) => 1,
            Encoding::Bytes => value.len() as u64,
            Encoding::NdArray { dtype, shape } => {
                let dtype = match dtype {
                    Some(d) => *d,
                    None => {
                        let (&code, rest) = value.split_first().ok_or("an empty ndarray value")?;
                        value = rest;
                        coded(code).ok_or_else(|| format!("the ndarray dtype code {code}"))?
                    }
                };
                if self.dtype.is_some_and(|d| d != dtype) {
                    return Err(format!(
                        "ndarray values of one dtype ({:?}), found {dtype}",
                        self.dtype
                    ));
                }
                self.dtype = Some(dtype);
                let dims: Vec<usize> = match shape {
                    Some(s) => s.clone(),
                    None => {
                        let (&byte, rest) = value.split_first().ok_or("no ndarray shape byte")?;
                        let (ndim, width) = ((byte >> 2) as usize, 1usize << (byte & 3));
                        let need = ndim * width;
                        if rest.len() < need {
                            return Err(format!(
                                "{need} bytes of ndarray shape, found {}",
                                rest.len()
                            ));
                        }
                        let (head, tail) = rest.split_at(need);
                        value = tail;
                        head.chunks_exact(width)
                            .map(|c| {
                                let mut b = [0u8; 8];
                                b[..width].copy_from_slice(c);
                                usize::try_from(u64::from_le_bytes(b)).unwrap_or(usize::MAX)
                            })
                            .collect()
                    }
                };
                if dims.is_empty() {
                    return Err("an ndarray of at least one dimension".into());
                }
                let inner = dims[1..].to_vec();
                // A row's bytes must fit a usize even when the array has no
                // rows (dims[0] = 0 makes the count below 0 whatever the
                // other dimensions are).
                if inner
                    .iter()
                    .try_fold(dtype.size(), |a, &d| a.checked_mul(d))
                    .is_none()
                {
                    return Err(format!(
                        "ndarray rows of at most {} bytes, found rows of shape {inner:?} of {dtype}",
                        usize::MAX
                    ));
                }
                match &self.inner {
                    Some(known) if *known != inner && shape.is_none() => {
                        return Err(format!(
                            "ndarray rows of one shape {known:?}, found {inner:?}"
                        ));
                    }
                    _ => self.inner = Some(inner),
                }
                let count = dims.iter().try_fold(dtype.size(), |a, &d| a.checked_mul(d));
                match count {
                    Some(count) if count == value.len() => {}
                    Some(count) => {
                        return Err(format!(
                            "{count} bytes of ndarray values, found {}",
                            value.len()
                        ));
                    }
                    None => {
                        return Err(format!(
                            "an ndarray of at most {} bytes, found shape {dims:?} of {dtype}",
                            usize::MAX
                        ));
                    }
                }
                if shape.is_some() { 1 } else { dims[0] as u64 }
            }
        };
        if let Encoding::Scalar(d) = self.encoding
            && value.len() != d.size()
        {
            return Err(format!("{} bytes, found {}", d.size(), value.len()));
        }
        self.data
            .try_reserve(value.len())
            .map_err(|_| "memory for a column".to_string())?;
        self.data.extend_from_slice(value);
        self.lengths.push(rows);
        Ok(())
    }

    /// The column's tensor: a row per sample for fixed-size encodings (rows
    /// of the static shape), else a 1-level tensor of a sequence per sample.
    pub(crate) fn finish(self) -> Result<LodTensor> {
        let dtype = self.dtype.unwrap_or(DType::UInt8);
        let inner = self.inner.unwrap_or_default();
        let fixed = matches!(
            self.encoding,
            Encoding::Scalar(_) | Encoding::NdArray { shape: Some(_), .. }
        );
        let row_bytes = inner
            .iter()
            .try_fold(dtype.size(), |a, &d| a.checked_mul(d))
            .ok_or(crate::Error::Overflow {
                what: "the bytes of an MDS ndarray row",
            })?;
        let rows = self.data.len().checked_div(row_bytes).unwrap_or(0);
        let (mut shape, lod) = if fixed {
            let mut shape = vec![self.lengths.len()];
            if let Encoding::NdArray { shape: Some(s), .. } = &self.encoding {
                shape.extend(s.iter().copied());
            }
            (shape, Lod::empty())
        } else {
            let lod = Lod::try_from_lengths(&[self.lengths]).map_err(MdsError::Core)?;
            (vec![rows], lod)
        };
        if !fixed {
            shape.extend(inner);
        }
        let bytes = AlignedBytes::from_slice(&self.data);
        Ok(LodTensor::try_new(dtype, shape, bytes, lod)?)
    }
}
