//! A minimal codec for Paddle's `TensorDesc` protobuf message (proto2), written
//! as explicit byte code: no protobuf crate.
//!
//! ```text
//!  message TensorDesc {
//!    required VarType.Type data_type = 1;   // tag 0x08, varint
//!    repeated int64 dims = 2;               // tag 0x10 per dim (unpacked), or
//!  }                                        // tag 0x12, length, varints (packed)
//!
//!  f32 [5, 1]:  08 05  10 05  10 01
//!               |  |   |  |   '--'-- dims[1] = 1
//!               |  |   '--'--------- dims[0] = 5
//!               '--'---------------- data_type = FP32 (5)
//! ```
//!
//! Decoding follows protobuf's wire rules: fields may come in any order, a
//! repeated `data_type` keeps the last value, packed and unpacked `dims` are both
//! accepted (and may be mixed), and unknown fields of wire types 0, 1, 2 and 5
//! are skipped. It is stricter than protobuf where protobuf would accept
//! something no Paddle version writes: a known field with the wrong wire type,
//! a group (wire types 3 and 4), field number 0, a varint longer than 10 bytes
//! or wider than 64 bits, and a missing `data_type` are errors.
//!
//! Encoding writes what Paddle writes: `data_type`, then every dim unpacked.

use std::fmt;

/// A Paddle data type (`VarType.Type`) that a tensor may hold, with its
/// protobuf enum value.
///
/// | Paddle       | value | lodt                 |
/// |--------------|-------|----------------------|
/// | `BOOL`       | 0     | `Bool`               |
/// | `INT16`      | 1     | `Int16`              |
/// | `INT32`      | 2     | `Int32`              |
/// | `INT64`      | 3     | `Int64`              |
/// | `FP16`       | 4     | `Float16`            |
/// | `FP32`       | 5     | `Float32`            |
/// | `FP64`       | 6     | `Float64`            |
/// | `UINT8`      | 20    | `UInt8`              |
/// | `INT8`       | 21    | `Int8`               |
/// | `BF16`       | 22    | `BFloat16`           |
/// | `COMPLEX64`  | 23    | none (rejected)      |
/// | `COMPLEX128` | 24    | none (rejected)      |
///
/// lodt's `UInt16`, `UInt32` and `UInt64` have no Paddle data type.
///
/// ```
/// use lodt::{paddle::PaddleDType, DType};
/// assert_eq!(PaddleDType::from_code(5), Some(PaddleDType::Fp32));
/// assert_eq!(PaddleDType::Fp32.to_dtype(), Some(DType::Float32));
/// assert_eq!(PaddleDType::Complex64.to_dtype(), None);
/// assert_eq!(PaddleDType::from_dtype(DType::UInt32), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaddleDType {
    /// `BOOL` (0).
    Bool,
    /// `INT16` (1).
    Int16,
    /// `INT32` (2).
    Int32,
    /// `INT64` (3).
    Int64,
    /// `FP16` (4).
    Fp16,
    /// `FP32` (5).
    Fp32,
    /// `FP64` (6).
    Fp64,
    /// `UINT8` (20).
    UInt8,
    /// `INT8` (21).
    Int8,
    /// `BF16` (22).
    Bf16,
    /// `COMPLEX64` (23): two `f32`s; lodt cannot hold it.
    Complex64,
    /// `COMPLEX128` (24): two `f64`s; lodt cannot hold it.
    Complex128,
}

impl PaddleDType {
    /// Every Paddle data type this module knows, in enum-value order.
    ///
    /// ```
    /// assert_eq!(lodt::paddle::PaddleDType::ALL.len(), 12);
    /// ```
    pub const ALL: [PaddleDType; 12] = [
        PaddleDType::Bool,
        PaddleDType::Int16,
        PaddleDType::Int32,
        PaddleDType::Int64,
        PaddleDType::Fp16,
        PaddleDType::Fp32,
        PaddleDType::Fp64,
        PaddleDType::UInt8,
        PaddleDType::Int8,
        PaddleDType::Bf16,
        PaddleDType::Complex64,
        PaddleDType::Complex128,
    ];

    /// The protobuf enum value.
    ///
    /// ```
    /// assert_eq!(lodt::paddle::PaddleDType::Bf16.code(), 22);
    /// ```
    pub const fn code(self) -> i32 {
        match self {
            PaddleDType::Bool => 0,
            PaddleDType::Int16 => 1,
            PaddleDType::Int32 => 2,
            PaddleDType::Int64 => 3,
            PaddleDType::Fp16 => 4,
            PaddleDType::Fp32 => 5,
            PaddleDType::Fp64 => 6,
            PaddleDType::UInt8 => 20,
            PaddleDType::Int8 => 21,
            PaddleDType::Bf16 => 22,
            PaddleDType::Complex64 => 23,
            PaddleDType::Complex128 => 24,
        }
    }

    /// The data type with protobuf enum value `code`, if it is one of the table.
    ///
    /// ```
    /// use lodt::paddle::PaddleDType;
    /// assert_eq!(PaddleDType::from_code(20), Some(PaddleDType::UInt8));
    /// assert_eq!(PaddleDType::from_code(7), None); // LOD_TENSOR: a variable type
    /// ```
    pub fn from_code(code: i64) -> Option<PaddleDType> {
        PaddleDType::ALL
            .into_iter()
            .find(|d| i64::from(d.code()) == code)
    }

    /// Paddle's name (`FP32`, `INT64`, ...).
    ///
    /// ```
    /// assert_eq!(lodt::paddle::PaddleDType::Complex128.name(), "COMPLEX128");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            PaddleDType::Bool => "BOOL",
            PaddleDType::Int16 => "INT16",
            PaddleDType::Int32 => "INT32",
            PaddleDType::Int64 => "INT64",
            PaddleDType::Fp16 => "FP16",
            PaddleDType::Fp32 => "FP32",
            PaddleDType::Fp64 => "FP64",
            PaddleDType::UInt8 => "UINT8",
            PaddleDType::Int8 => "INT8",
            PaddleDType::Bf16 => "BF16",
            PaddleDType::Complex64 => "COMPLEX64",
            PaddleDType::Complex128 => "COMPLEX128",
        }
    }

    /// The lodt dtype, or `None` for the complex types.
    ///
    /// ```
    /// use lodt::{paddle::PaddleDType, DType};
    /// assert_eq!(PaddleDType::Fp16.to_dtype(), Some(DType::Float16));
    /// ```
    pub const fn to_dtype(self) -> Option<crate::DType> {
        use crate::DType;
        Some(match self {
            PaddleDType::Bool => DType::Bool,
            PaddleDType::Int16 => DType::Int16,
            PaddleDType::Int32 => DType::Int32,
            PaddleDType::Int64 => DType::Int64,
            PaddleDType::Fp16 => DType::Float16,
            PaddleDType::Fp32 => DType::Float32,
            PaddleDType::Fp64 => DType::Float64,
            PaddleDType::UInt8 => DType::UInt8,
            PaddleDType::Int8 => DType::Int8,
            PaddleDType::Bf16 => DType::BFloat16,
            PaddleDType::Complex64 | PaddleDType::Complex128 => return None,
        })
    }

    /// The Paddle data type of a lodt dtype, or `None` for `uint16`, `uint32`
    /// and `uint64`, which Paddle lacks.
    ///
    /// ```
    /// use lodt::{paddle::PaddleDType, DType};
    /// assert_eq!(PaddleDType::from_dtype(DType::Int8), Some(PaddleDType::Int8));
    /// assert_eq!(PaddleDType::from_dtype(DType::UInt64), None);
    /// ```
    pub const fn from_dtype(dtype: crate::DType) -> Option<PaddleDType> {
        use crate::DType;
        Some(match dtype {
            DType::Bool => PaddleDType::Bool,
            DType::Int8 => PaddleDType::Int8,
            DType::Int16 => PaddleDType::Int16,
            DType::Int32 => PaddleDType::Int32,
            DType::Int64 => PaddleDType::Int64,
            DType::UInt8 => PaddleDType::UInt8,
            DType::Float16 => PaddleDType::Fp16,
            DType::BFloat16 => PaddleDType::Bf16,
            DType::Float32 => PaddleDType::Fp32,
            DType::Float64 => PaddleDType::Fp64,
            DType::UInt16 | DType::UInt32 | DType::UInt64 => return None,
        })
    }
}

impl fmt::Display for PaddleDType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A decoded `TensorDesc`: the raw `data_type` enum value (see
/// [`PaddleDType::from_code`]) and the dims, as stored.
///
/// ```
/// use lodt::paddle::TensorDesc;
/// let desc = TensorDesc { data_type: 5, dims: vec![5, 1] };
/// let bytes = desc.encode();
/// assert_eq!(bytes, [0x08, 0x05, 0x10, 0x05, 0x10, 0x01]);
/// assert_eq!(TensorDesc::decode(&bytes).unwrap(), desc);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TensorDesc {
    /// The `data_type` field (field 1), a `VarType.Type` enum value.
    pub data_type: i64,
    /// The `dims` field (field 2), outermost first. Empty for a 0-D tensor.
    pub dims: Vec<i64>,
}

/// Why a `TensorDesc` could not be decoded. `at` is the byte position within
/// the message.
///
/// ```
/// use lodt::paddle::{DescError, TensorDesc};
/// assert_eq!(TensorDesc::decode(&[0x10, 0x05]).unwrap_err(), DescError::MissingDataType);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DescError {
    /// The message ends inside a field.
    #[error(
        "the message ends inside {what} at byte {at}: expected {needed} more bytes, found {available}"
    )]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Where it starts.
        at: usize,
        /// How many bytes it needs (for a varint, at least 1).
        needed: u64,
        /// How many bytes are left.
        available: u64,
    },
    /// A varint longer than 10 bytes, or wider than 64 bits.
    #[error("malformed varint at byte {at}: expected at most 10 bytes encoding 64 bits")]
    Varint {
        /// Where the varint starts.
        at: usize,
    },
    /// A field key with field number 0, or above protobuf's maximum.
    #[error("invalid field number at byte {at}: expected 1..=536870911, found {found}")]
    FieldNumber {
        /// Where the key starts.
        at: usize,
        /// The field number found.
        found: u64,
    },
    /// A known field encoded with a wire type it cannot have.
    #[error("field {field} ({name}) at byte {at} has wire type {found}: expected {expected}")]
    WireType {
        /// The field number.
        field: u32,
        /// The field name.
        name: &'static str,
        /// Where the key starts.
        at: usize,
        /// The wire type(s) allowed.
        expected: &'static str,
        /// The wire type found.
        found: u8,
    },
    /// A wire type that is not supported: groups (3, 4) or the invalid 6 and 7.
    #[error("unsupported wire type {found} (field {field}) at byte {at}: expected 0, 1, 2 or 5")]
    UnsupportedWireType {
        /// The field number.
        field: u32,
        /// Where the key starts.
        at: usize,
        /// The wire type found.
        found: u8,
    },
    /// The required `data_type` field is absent.
    #[error("the required field 1 (data_type) is missing")]
    MissingDataType,
}

/// Protobuf's largest field number.
const MAX_FIELD: u64 = (1 << 29) - 1;

struct Decoder<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    fn varint(&mut self, what: &'static str) -> Result<u64, DescError> {
        let at = self.pos;
        let mut value = 0u64;
        for i in 0..10u32 {
            let Some(&byte) = self.bytes.get(self.pos) else {
                return Err(DescError::Truncated {
                    what,
                    at,
                    needed: u64::from(i) + 1,
                    available: u64::from(i),
                });
            };
            self.pos += 1;
            // The tenth byte holds bit 63 only.
            if i == 9 && byte > 1 {
                return Err(DescError::Varint { at });
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DescError::Varint { at })
    }

    fn skip(&mut self, len: u64, what: &'static str, at: usize) -> Result<&'a [u8], DescError> {
        let available = self.remaining();
        match usize::try_from(len) {
            Ok(n) if n <= available => {
                let bytes: &'a [u8] = self.bytes;
                let start = self.pos;
                self.pos += n;
                Ok(bytes.get(start..self.pos).unwrap_or(&[]))
            }
            _ => Err(DescError::Truncated {
                what,
                at,
                needed: len,
                available: available as u64,
            }),
        }
    }
}

impl TensorDesc {
    /// Decodes a `TensorDesc` message. See the [module docs](self) for what is
    /// accepted.
    ///
    /// ```
    /// use lodt::paddle::TensorDesc;
    /// // Packed dims (tag 0x12) are accepted too.
    /// let desc = TensorDesc::decode(&[0x08, 0x03, 0x12, 0x02, 0x0f, 0x01]).unwrap();
    /// assert_eq!(desc, TensorDesc { data_type: 3, dims: vec![15, 1] });
    /// ```
    pub fn decode(bytes: &[u8]) -> Result<TensorDesc, DescError> {
        let mut d = Decoder { bytes, pos: 0 };
        let mut data_type = None;
        let mut dims = Vec::new();
        while d.remaining() > 0 {
            let at = d.pos;
            let key = d.varint("a field key")?;
            let field = key >> 3;
            let wire = (key & 7) as u8;
            if field == 0 || field > MAX_FIELD {
                return Err(DescError::FieldNumber { at, found: field });
            }
            let field = field as u32;
            match (field, wire) {
                (1, 0) => data_type = Some(d.varint("data_type")? as i64),
                (1, _) => {
                    return Err(DescError::WireType {
                        field,
                        name: "data_type",
                        at,
                        expected: "0 (varint)",
                        found: wire,
                    });
                }
                (2, 0) => dims.push(d.varint("a dim")? as i64),
                (2, 2) => {
                    let len = d.varint("the length of packed dims")?;
                    let packed = d.skip(len, "packed dims", at)?;
                    let mut inner = Decoder {
                        bytes: packed,
                        pos: 0,
                    };
                    let base = d.pos - packed.len();
                    while inner.remaining() > 0 {
                        let dim = inner.varint("a packed dim").map_err(|e| rebase(e, base))?;
                        dims.push(dim as i64);
                    }
                }
                (2, _) => {
                    return Err(DescError::WireType {
                        field,
                        name: "dims",
                        at,
                        expected: "0 (varint) or 2 (packed)",
                        found: wire,
                    });
                }
                (_, 0) => {
                    d.varint("an unknown varint field")?;
                }
                (_, 1) => {
                    d.skip(8, "an unknown 64-bit field", at)?;
                }
                (_, 2) => {
                    let len = d.varint("the length of an unknown field")?;
                    d.skip(len, "an unknown length-delimited field", at)?;
                }
                (_, 5) => {
                    d.skip(4, "an unknown 32-bit field", at)?;
                }
                (_, _) => {
                    return Err(DescError::UnsupportedWireType {
                        field,
                        at,
                        found: wire,
                    });
                }
            }
        }
        let data_type = data_type.ok_or(DescError::MissingDataType)?;
        Ok(TensorDesc { data_type, dims })
    }

    /// Encodes the message as Paddle does: `data_type`, then each dim unpacked.
    ///
    /// ```
    /// use lodt::paddle::TensorDesc;
    /// let desc = TensorDesc { data_type: 0, dims: vec![] };
    /// assert_eq!(desc.encode(), [0x08, 0x00]);
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.push(0x08);
        put_varint(&mut out, self.data_type as u64);
        for &dim in &self.dims {
            out.push(0x10);
            put_varint(&mut out, dim as u64);
        }
        out
    }

    /// The length of [`TensorDesc::encode`]'s output.
    ///
    /// ```
    /// use lodt::paddle::TensorDesc;
    /// assert_eq!(TensorDesc { data_type: 5, dims: vec![300] }.encoded_len(), 5);
    /// ```
    pub fn encoded_len(&self) -> usize {
        1 + varint_len(self.data_type as u64)
            + self
                .dims
                .iter()
                .map(|&d| 1 + varint_len(d as u64))
                .sum::<usize>()
    }
}

fn rebase(e: DescError, base: usize) -> DescError {
    match e {
        DescError::Truncated {
            what,
            at,
            needed,
            available,
        } => DescError::Truncated {
            what,
            at: at + base,
            needed,
            available,
        },
        DescError::Varint { at } => DescError::Varint { at: at + base },
        other => other,
    }
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn varint_len(value: u64) -> usize {
    (64 - value.max(1).leading_zeros() as usize).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_every_width() {
        for value in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX, (-1i64) as u64] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(out.len(), varint_len(value), "{value}");
            let mut d = Decoder {
                bytes: &out,
                pos: 0,
            };
            assert_eq!(d.varint("v").unwrap(), value);
            assert_eq!(d.pos, out.len());
        }
        let mut d = Decoder {
            bytes: &[0x96, 0x01],
            pos: 0,
        };
        assert_eq!(d.varint("v").unwrap(), 150);
    }

    #[test]
    fn overlong_and_wide_varints_are_rejected() {
        let eleven = [0x80u8; 10]
            .iter()
            .chain(&[0x00])
            .copied()
            .collect::<Vec<_>>();
        let mut d = Decoder {
            bytes: &eleven,
            pos: 0,
        };
        assert_eq!(d.varint("v").unwrap_err(), DescError::Varint { at: 0 });
        let wide = [0xffu8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        let mut d = Decoder {
            bytes: &wide,
            pos: 0,
        };
        assert_eq!(d.varint("v").unwrap_err(), DescError::Varint { at: 0 });
    }

    #[test]
    fn paddle_encoding_of_the_golden_desc() {
        let desc = TensorDesc {
            data_type: 5,
            dims: vec![5, 1],
        };
        assert_eq!(desc.encode(), [0x08, 0x05, 0x10, 0x05, 0x10, 0x01]);
        assert_eq!(desc.encoded_len(), 6);
    }

    #[test]
    fn unknown_fields_are_skipped_and_last_data_type_wins() {
        let bytes = [
            0x08, 0x03, // data_type = INT64
            0x18, 0x96, 0x01, // field 3 varint
            0x21, 1, 2, 3, 4, 5, 6, 7, 8, // field 4 fixed64
            0x2a, 0x02, 0xaa, 0xbb, // field 5 bytes
            0x35, 1, 2, 3, 4, // field 6 fixed32
            0x10, 0x07, // dims 7
            0x12, 0x02, 0x02, 0x03, // packed dims 2, 3
            0x08, 0x05, // data_type = FP32
        ];
        let desc = TensorDesc::decode(&bytes).unwrap();
        assert_eq!(
            desc,
            TensorDesc {
                data_type: 5,
                dims: vec![7, 2, 3]
            }
        );
    }

    #[test]
    fn negative_values_decode_as_negative() {
        let mut bytes = vec![0x08];
        put_varint(&mut bytes, (-1i64) as u64);
        bytes.push(0x10);
        put_varint(&mut bytes, (-3i64) as u64);
        let desc = TensorDesc::decode(&bytes).unwrap();
        assert_eq!((desc.data_type, &desc.dims[..]), (-1, &[-3][..]));
        assert_eq!(desc.encode(), bytes);
    }

    #[test]
    fn malformed_messages_are_errors() {
        assert_eq!(
            TensorDesc::decode(&[0x09, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap_err(),
            DescError::WireType {
                field: 1,
                name: "data_type",
                at: 0,
                expected: "0 (varint)",
                found: 1
            }
        );
        assert!(matches!(
            TensorDesc::decode(&[0x08, 0x05, 0x15, 0, 0, 0, 0]).unwrap_err(),
            DescError::WireType {
                field: 2,
                at: 2,
                found: 5,
                ..
            }
        ));
        assert_eq!(
            TensorDesc::decode(&[0x08, 0x05, 0x1b]).unwrap_err(),
            DescError::UnsupportedWireType {
                field: 3,
                at: 2,
                found: 3
            }
        );
        assert_eq!(
            TensorDesc::decode(&[0x00]).unwrap_err(),
            DescError::FieldNumber { at: 0, found: 0 }
        );
        assert_eq!(
            TensorDesc::decode(&[0x08]).unwrap_err(),
            DescError::Truncated {
                what: "data_type",
                at: 1,
                needed: 1,
                available: 0
            }
        );
        assert_eq!(
            TensorDesc::decode(&[0x08, 0x05, 0x12, 0x05, 0x01]).unwrap_err(),
            DescError::Truncated {
                what: "packed dims",
                at: 2,
                needed: 5,
                available: 1
            }
        );
        assert_eq!(
            TensorDesc::decode(&[0x08, 0x05, 0x12, 0x01, 0x81]).unwrap_err(),
            DescError::Truncated {
                what: "a packed dim",
                at: 4,
                needed: 2,
                available: 1
            }
        );
        assert_eq!(
            TensorDesc::decode(&[0x2a, 0xff, 0xff, 0xff, 0xff, 0x07]).unwrap_err(),
            DescError::Truncated {
                what: "an unknown length-delimited field",
                at: 0,
                needed: 0x7fff_ffff,
                available: 0
            }
        );
        assert_eq!(
            TensorDesc::decode(&[]).unwrap_err(),
            DescError::MissingDataType
        );
    }

    #[test]
    fn dtype_tables_agree() {
        for p in PaddleDType::ALL {
            assert_eq!(PaddleDType::from_code(i64::from(p.code())), Some(p));
            if let Some(d) = p.to_dtype() {
                assert_eq!(PaddleDType::from_dtype(d), Some(p));
            }
        }
        for d in crate::DType::ALL {
            if let Some(p) = PaddleDType::from_dtype(d) {
                assert_eq!(p.to_dtype(), Some(d));
            }
        }
    }
}
