//! The [`Element`] trait: each Rust element type tied to its [`DType`], with
//! checked, zero-copy typed access to bytes; and the parsing of dtype names.

use super::{DType, bf16, f16};
use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

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

/// A Rust type that a tensor can hold. Sealed: implemented for the thirteen
/// types of the table in the [module docs](crate::dtype).
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
