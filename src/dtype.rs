//! Element types: the [`DType`] tag and the [`Element`] trait that ties each tag
//! to a Rust type for checked, zero-copy typed access.
//!
//! | `DType`    | Rust type      | numpy name | bytes |
//! |------------|----------------|------------|-------|
//! | `Bool`     | `bool`         | bool       | 1     |
//! | `Int8`     | `i8`           | int8       | 1     |
//! | `Int16`    | `i16`          | int16      | 2     |
//! | `Int32`    | `i32`          | int32      | 4     |
//! | `Int64`    | `i64`          | int64      | 8     |
//! | `UInt8`    | `u8`           | uint8      | 1     |
//! | `UInt16`   | `u16`          | uint16     | 2     |
//! | `UInt32`   | `u32`          | uint32     | 4     |
//! | `UInt64`   | `u64`          | uint64     | 8     |
//! | `Float16`  | `half::f16`    | float16    | 2     |
//! | `BFloat16` | `half::bf16`   | bfloat16   | 2     |
//! | `Float32`  | `f32`          | float32    | 4     |
//! | `Float64`  | `f64`          | float64    | 8     |

use crate::error::{Error, Result};
/// The 16-bit float types, re-exported from `half` (what [`with_element!`](crate::with_element) binds for float16 and bfloat16).
pub use half::{bf16, f16};
use std::fmt;
use std::str::FromStr;

/// The element type of a tensor.
///
/// ```
/// use lodt::DType;
/// assert_eq!(DType::Float32.size(), 4);
/// assert_eq!(DType::BFloat16.name(), "bfloat16");
/// assert_eq!("int64".parse::<DType>().unwrap(), DType::Int64);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DType {
    /// `bool`, one byte holding 0 or 1.
    Bool = 0,
    /// `i8`.
    Int8 = 1,
    /// `i16`.
    Int16 = 2,
    /// `i32`.
    Int32 = 3,
    /// `i64`.
    Int64 = 4,
    /// `u8`.
    UInt8 = 5,
    /// `u16`.
    UInt16 = 6,
    /// `u32`.
    UInt32 = 7,
    /// `u64`.
    UInt64 = 8,
    /// IEEE 754 binary16 ([`half::f16`]).
    Float16 = 9,
    /// bfloat16 ([`half::bf16`]).
    BFloat16 = 10,
    /// `f32`.
    Float32 = 11,
    /// `f64`.
    Float64 = 12,
}

impl DType {
    /// Every dtype, in tag order.
    ///
    /// ```
    /// assert_eq!(lodt::DType::ALL.len(), 13);
    /// ```
    pub const ALL: [DType; 13] = [
        DType::Bool,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Float16,
        DType::BFloat16,
        DType::Float32,
        DType::Float64,
    ];

    /// The size of one element in bytes.
    ///
    /// ```
    /// assert_eq!(lodt::DType::Int16.size(), 2);
    /// ```
    pub const fn size(self) -> usize {
        match self {
            DType::Bool | DType::Int8 | DType::UInt8 => 1,
            DType::Int16 | DType::UInt16 | DType::Float16 | DType::BFloat16 => 2,
            DType::Int32 | DType::UInt32 | DType::Float32 => 4,
            DType::Int64 | DType::UInt64 | DType::Float64 => 8,
        }
    }

    /// numpy's name for the dtype (`bfloat16` for the type numpy lacks).
    ///
    /// ```
    /// assert_eq!(lodt::DType::UInt32.name(), "uint32");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::UInt8 => "uint8",
            DType::UInt16 => "uint16",
            DType::UInt32 => "uint32",
            DType::UInt64 => "uint64",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
        }
    }

    /// The dtype with tag `tag` (the `repr(u8)` value), if there is one.
    ///
    /// ```
    /// use lodt::DType;
    /// assert_eq!(DType::from_tag(11), Some(DType::Float32));
    /// assert_eq!(DType::from_tag(200), None);
    /// ```
    pub fn from_tag(tag: u8) -> Option<DType> {
        DType::ALL.get(usize::from(tag)).copied()
    }

    /// Whether the dtype is a floating-point type.
    ///
    /// ```
    /// assert!(lodt::DType::BFloat16.is_float());
    /// assert!(!lodt::DType::Int8.is_float());
    /// ```
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            DType::Float16 | DType::BFloat16 | DType::Float32 | DType::Float64
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = Error;

    /// Parses numpy's dtype names.
    fn from_str(s: &str) -> Result<Self> {
        DType::ALL
            .iter()
            .copied()
            .find(|d| d.name() == s)
            .ok_or_else(|| Error::InvalidArgument(format!("unknown dtype {s:?}")))
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Runs `$body` with the type name `$T` bound to the Rust element type of
/// `$dtype` (a [`DType`]): the one dispatch over dtypes, so that code generic
/// over [`Element`] is reached from a runtime dtype without a 13-arm match of
/// its own.
///
/// ```
/// use lodt::{with_element, DType, Element};
/// fn size_of_dtype(d: DType) -> usize {
///     with_element!(d, T => std::mem::size_of::<T>())
/// }
/// assert_eq!(size_of_dtype(DType::BFloat16), 2);
/// let t = lodt::LodTensor::from_vec(vec![1.5f32, 2.5], vec![2], Default::default()).unwrap();
/// let text: Vec<String> = with_element!(t.dtype(), T => {
///     t.as_slice::<T>().unwrap().iter().map(|x| x.to_string()).collect()
/// });
/// assert_eq!(text, ["1.5", "2.5"]);
/// ```
#[macro_export]
macro_rules! with_element {
    ($dtype:expr, $T:ident => $body:expr) => {{
        match $dtype {
            $crate::DType::Bool => {
                type $T = bool;
                $body
            }
            $crate::DType::Int8 => {
                type $T = i8;
                $body
            }
            $crate::DType::Int16 => {
                type $T = i16;
                $body
            }
            $crate::DType::Int32 => {
                type $T = i32;
                $body
            }
            $crate::DType::Int64 => {
                type $T = i64;
                $body
            }
            $crate::DType::UInt8 => {
                type $T = u8;
                $body
            }
            $crate::DType::UInt16 => {
                type $T = u16;
                $body
            }
            $crate::DType::UInt32 => {
                type $T = u32;
                $body
            }
            $crate::DType::UInt64 => {
                type $T = u64;
                $body
            }
            $crate::DType::Float16 => {
                type $T = $crate::dtype::f16;
                $body
            }
            $crate::DType::BFloat16 => {
                type $T = $crate::dtype::bf16;
                $body
            }
            $crate::DType::Float32 => {
                type $T = f32;
                $body
            }
            $crate::DType::Float64 => {
                type $T = f64;
                $body
            }
        }
    }};
}

/// A Rust type that a tensor can hold. Sealed: implemented for the thirteen
/// types of the table in the [module docs](self).
///
/// ```
/// use lodt::{DType, Element};
/// assert_eq!(<f32 as Element>::DTYPE, DType::Float32);
/// let bytes = 1.5f32.to_le_bytes();
/// assert_eq!(f32::slice_from_bytes(&bytes).unwrap(), &[1.5]);
/// ```
pub trait Element:
    sealed::Sealed + Copy + Send + Sync + fmt::Debug + PartialEq + Default + 'static
{
    /// The dtype tag of this type.
    const DTYPE: DType;

    /// Views `bytes` as a slice of `Self` with no copy. Fails when the length is
    /// not a multiple of the element size, when `bytes` is misaligned for
    /// `Self`, or (for `bool`) when a byte is neither 0 nor 1.
    fn slice_from_bytes(bytes: &[u8]) -> Result<&[Self]>;

    /// Views a slice of `Self` as its bytes.
    fn slice_as_bytes(values: &[Self]) -> &[u8];

    /// Views mutable `bytes` as a mutable slice of `Self` with no copy (the same
    /// checks as [`Element::slice_from_bytes`]).
    fn slice_from_bytes_mut(bytes: &mut [u8]) -> Result<&mut [Self]>;

    /// The value as JSON, as `lodt show --json` and the test vectors print it
    /// (`spec/FORMAT.md` section 11): integers and bools as such, floats as
    /// the shortest decimal that reads back (float16 and bfloat16 through
    /// their exact float32 value), NaN and infinities as the strings `"NaN"`,
    /// `"Infinity"` and `"-Infinity"`.
    ///
    /// ```
    /// use lodt::Element;
    /// assert_eq!((0.1f32.to_json(), f64::NAN.to_json(), true.to_json()), ("0.1".into(), "\"NaN\"".into(), "true".into()));
    /// ```
    fn to_json(self) -> String;
}

fn cast_error<T>(bytes: &[u8]) -> Error {
    let size = std::mem::size_of::<T>();
    if !bytes.len().is_multiple_of(size) {
        Error::Mismatch {
            what: "byte length as a multiple of the element size",
            expected: (bytes.len() - bytes.len() % size) as u64,
            found: bytes.len() as u64,
        }
    } else {
        Error::Mismatch {
            what: "data alignment",
            expected: std::mem::align_of::<T>() as u64,
            found: (bytes.as_ptr() as usize % std::mem::align_of::<T>()) as u64,
        }
    }
}

macro_rules! plain_element {
    ($($t:ty => $d:ident, |$x:ident| $json:expr);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn slice_from_bytes(bytes: &[u8]) -> Result<&[Self]> {
                <[$t] as zerocopy::FromBytes>::ref_from_bytes(bytes).map_err(|_| cast_error::<$t>(bytes))
            }
            fn slice_as_bytes(values: &[Self]) -> &[u8] {
                zerocopy::IntoBytes::as_bytes(values)
            }
            fn slice_from_bytes_mut(bytes: &mut [u8]) -> Result<&mut [Self]> {
                let err = cast_error::<$t>(bytes);
                <[$t] as zerocopy::FromBytes>::mut_from_bytes(bytes).map_err(|_| err)
            }
            fn to_json(self) -> String {
                let $x = self;
                $json
            }
        }
    )*};
}

plain_element!(
    i8 => Int8, |x| x.to_string();
    i16 => Int16, |x| x.to_string();
    i32 => Int32, |x| x.to_string();
    i64 => Int64, |x| x.to_string();
    u8 => UInt8, |x| x.to_string();
    u16 => UInt16, |x| x.to_string();
    u32 => UInt32, |x| x.to_string();
    u64 => UInt64, |x| x.to_string();
    f16 => Float16, |x| float32_json(x.to_f32());
    bf16 => BFloat16, |x| float32_json(x.to_f32());
    f32 => Float32, |x| float32_json(x);
    f64 => Float64, |x| float64_json(x);
);

fn non_finite_json(nan: bool, positive: bool) -> String {
    match (nan, positive) {
        (true, _) => "\"NaN\"".into(),
        (false, true) => "\"Infinity\"".into(),
        (false, false) => "\"-Infinity\"".into(),
    }
}

/// The shortest JSON number that reads back as `x` (as an f32), or a string
/// for NaN and infinities.
pub(crate) fn float32_json(x: f32) -> String {
    if x.is_finite() {
        serde_json::to_string(&x).unwrap_or_else(|_| "null".into())
    } else {
        non_finite_json(x.is_nan(), x > 0.0)
    }
}

/// The shortest JSON number that reads back as `x`, or a string for NaN and
/// infinities.
pub(crate) fn float64_json(x: f64) -> String {
    if x.is_finite() {
        serde_json::to_string(&x).unwrap_or_else(|_| "null".into())
    } else {
        non_finite_json(x.is_nan(), x > 0.0)
    }
}

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn slice_from_bytes(bytes: &[u8]) -> Result<&[Self]> {
        check_bools(bytes)?;
        <[bool] as zerocopy::TryFromBytes>::try_ref_from_bytes(bytes)
            .map_err(|_| cast_error::<bool>(bytes))
    }
    fn slice_as_bytes(values: &[Self]) -> &[u8] {
        zerocopy::IntoBytes::as_bytes(values)
    }
    fn slice_from_bytes_mut(bytes: &mut [u8]) -> Result<&mut [Self]> {
        check_bools(bytes)?;
        let err = cast_error::<bool>(bytes);
        <[bool] as zerocopy::TryFromBytes>::try_mut_from_bytes(bytes).map_err(|_| err)
    }
    fn to_json(self) -> String {
        self.to_string()
    }
}

/// Checks that every byte of a `bool` buffer is 0 or 1.
pub(crate) fn check_bools(bytes: &[u8]) -> Result<()> {
    match bytes.iter().position(|&b| b > 1) {
        Some(i) => Err(Error::InvalidBool {
            index: i as u64,
            found: bytes[i],
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
            assert_eq!(DType::from_tag(d as u8), Some(d));
        }
        assert!("complex64".parse::<DType>().is_err());
    }

    #[test]
    fn bool_bytes_are_checked() {
        assert_eq!(
            bool::slice_from_bytes(&[0, 1, 1]).unwrap(),
            &[false, true, true]
        );
        assert_eq!(
            bool::slice_from_bytes(&[0, 2]).unwrap_err(),
            Error::InvalidBool { index: 1, found: 2 }
        );
    }

    #[test]
    fn odd_lengths_are_rejected() {
        assert!(matches!(
            u16::slice_from_bytes(&[0, 1, 2]).unwrap_err(),
            Error::Mismatch { found: 3, .. }
        ));
    }

    #[test]
    fn floats_round_trip_and_non_finite_are_strings() {
        assert_eq!(float32_json(0.1), "0.1");
        assert_eq!(float32_json(1.0), "1.0");
        assert_eq!(float32_json(-0.0), "-0.0");
        assert_eq!(float32_json(f32::INFINITY), "\"Infinity\"");
        assert_eq!(float32_json(f32::NEG_INFINITY), "\"-Infinity\"");
        assert_eq!(float64_json(f64::NAN), "\"NaN\"");
        assert_eq!(float64_json(1e300), "1e+300");
        for x in [f32::MIN_POSITIVE, f32::MAX, 1.0 / 3.0, 16777217.0] {
            assert_eq!(float32_json(x).parse::<f32>().unwrap(), x);
        }
        assert_eq!(float32_json(f16::from_f32(0.1).to_f32()), "0.099975586");
    }
}
