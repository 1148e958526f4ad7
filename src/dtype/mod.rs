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

/// The 16-bit float types, re-exported from `half` (what [`with_element!`](crate::with_element) binds for float16 and bfloat16).
pub use half::{bf16, f16};
use std::fmt;

mod element;

pub use element::Element;
pub(crate) use element::check_bools;

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
