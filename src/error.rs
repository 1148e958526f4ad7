//! The error type of the LoD model and of LoD tensors.
//!
//! Every constructor that takes user data returns [`Result`]. Each kind of bad
//! input has its own variant, and each variant says what was expected and what
//! was found, so a message such as
//! `invalid LoD at level 1, index 3: offsets must be non-decreasing: expected >= 9, found 4`
//! is enough to find the bad entry.

use crate::dtype::DType;
use std::fmt;

/// A `Result` whose error is the crate's core [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What rule of Paddle's `CheckLoD` a LoD breaks. Carried by [`Error::InvalidLod`].
///
/// ```
/// use lodt::{Lod, Error, LodRule};
/// let err = Lod::try_from_offsets(vec![vec![1, 2, 5]]).unwrap_err();
/// assert!(matches!(err, Error::InvalidLod { rule: LodRule::DoesNotStartAtZero, .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LodRule {
    /// A level has fewer than two offsets (`expected` is 2, `found` is its length).
    TooShort,
    /// A level's first offset is not 0 (`expected` is 0).
    DoesNotStartAtZero,
    /// An offset is smaller than the one before it (`expected` is the previous offset, a lower bound).
    Decreasing,
    /// A level's last offset is not the number of sequences of the next level.
    LevelMismatch,
    /// The last level's last offset is not the tensor's number of rows.
    RowMismatch,
}

impl fmt::Display for LodRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LodRule::TooShort => "a level needs at least 2 offsets",
            LodRule::DoesNotStartAtZero => "a level must start at offset 0",
            LodRule::Decreasing => "offsets must be non-decreasing",
            LodRule::LevelMismatch => {
                "the last offset must equal the number of sequences of the next level"
            }
            LodRule::RowMismatch => "the last offset must equal the tensor's number of rows",
        })
    }
}

/// The error of the LoD model and of LoD tensors.
///
/// ```
/// use lodt::{DType, Error, LodTensor};
/// let t = LodTensor::from_vec(vec![1.0f32, 2.0], vec![2], Default::default()).unwrap();
/// let err = t.as_slice::<i64>().unwrap_err();
/// assert_eq!(err, Error::DTypeMismatch { expected: DType::Int64, found: DType::Float32 });
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A LoD breaks one of Paddle's `CheckLoD` rules.
    #[error("invalid LoD at level {level}, index {index}: {rule}: expected {}{expected}, found {found}", if matches!(rule, LodRule::Decreasing | LodRule::TooShort) { ">= " } else { "" })]
    InvalidLod {
        /// The level (0 is the top level).
        level: usize,
        /// The index of the offending offset within the level.
        index: usize,
        /// The rule that is broken.
        rule: LodRule,
        /// What the rule expects at that place (a lower bound for [`LodRule::Decreasing`] and [`LodRule::TooShort`]).
        expected: u64,
        /// What was found there.
        found: u64,
    },
    /// Typed access or an operation asked for one dtype and the tensor holds another.
    #[error("dtype mismatch: expected {expected}, found {found}")]
    DTypeMismatch {
        /// The dtype asked for.
        expected: DType,
        /// The tensor's dtype.
        found: DType,
    },
    /// A shape that does not fit: the rows do not match the LoD, or two tensors'
    /// element shapes differ.
    #[error("shape mismatch in {what}: expected {expected:?}, found {found:?}")]
    ShapeMismatch {
        /// Which shape is being checked.
        what: &'static str,
        /// The expected shape (or the expected dimensions).
        expected: Vec<u64>,
        /// The shape found.
        found: Vec<u64>,
    },
    /// A data buffer whose byte length is not shape × dtype size.
    #[error(
        "data length mismatch: shape {shape:?} of {dtype} needs {expected} bytes, found {found}"
    )]
    DataLength {
        /// The tensor's dtype.
        dtype: DType,
        /// The tensor's shape.
        shape: Vec<u64>,
        /// The number of bytes the shape and dtype need.
        expected: u64,
        /// The number of bytes given.
        found: u64,
    },
    /// An index or a range outside what exists.
    #[error("{what} out of range: {index} is not below {len}")]
    OutOfRange {
        /// What was indexed ("level", "sequence", "branch index", ...).
        what: &'static str,
        /// The index (or the end of the range) asked for.
        index: u64,
        /// The number of items that exist.
        len: u64,
    },
    /// A `ref_level` for `sequence_expand` that is neither -1 nor a level of `y`.
    #[error("bad ref_level {ref_level}: expected -1 or 0..{levels}")]
    BadRefLevel {
        /// The ref_level given.
        ref_level: i64,
        /// The number of levels of `y`'s LoD.
        levels: usize,
    },
    /// Two things that must agree do not (a count, a number of levels, ...).
    #[error("{what}: expected {expected}, found {found}")]
    Mismatch {
        /// What is compared.
        what: &'static str,
        /// The value required.
        expected: u64,
        /// The value found.
        found: u64,
    },
    /// A size, offset or element count that overflows `u64`/`usize`.
    #[error("arithmetic overflow computing {what}")]
    Overflow {
        /// What was being computed.
        what: &'static str,
    },
    /// Memory for a buffer could not be had: the allocator refused `needed`
    /// bytes. Not damage to the input (a smaller request, more memory or a
    /// lower memory cap reads it), and never reported as such.
    ///
    /// ```
    /// let err = lodt::buffer::AlignedBytes::try_zeroed(1 << 62).err().unwrap();
    /// assert!(matches!(err, lodt::Error::OutOfMemory { needed: 4611686018427387904, .. }));
    /// assert!(err.to_string().starts_with("out of memory: needed "), "{err}");
    /// ```
    #[error("out of memory: needed {needed} bytes for {what}")]
    OutOfMemory {
        /// What the memory was for.
        what: &'static str,
        /// The bytes asked of the allocator.
        needed: u64,
    },
    /// A `bool` tensor holds a byte that is neither 0 nor 1.
    #[error("invalid bool at element {index}: expected 0 or 1, found {found}")]
    InvalidBool {
        /// The element index.
        index: u64,
        /// The byte found.
        found: u8,
    },
    /// An argument that is not valid for the operation (for example, zero parts).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// Why `n` items of `T` could not be allocated: [`Error::Overflow`] when
/// their size does not fit in an allocation at all (above `isize::MAX`
/// bytes), else [`Error::OutOfMemory`] (the allocator refused them).
pub(crate) fn out_of_memory<T>(n: usize, what: &'static str) -> Error {
    allocation_failed(
        (n as u64).saturating_mul(std::mem::size_of::<T>() as u64),
        what,
    )
}

/// Why `bytes` bytes could not be allocated (see [`out_of_memory`]).
pub(crate) fn allocation_failed(bytes: u64, what: &'static str) -> Error {
    if bytes > isize::MAX as u64 {
        Error::Overflow { what }
    } else {
        Error::OutOfMemory {
            what,
            needed: bytes,
        }
    }
}

/// Tensor names for an error message, comma-separated, each escaped as `{:?}`
/// escapes it but without the quotes: plain names read as they are, and a
/// name from a hostile file cannot put a control character, a bidirectional
/// override or a line break into the message. Past the first 32 names, only
/// their count is given, so a batch of many tensors keeps its errors short.
pub(crate) fn name_list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    const SHOWN: usize = 32;
    let mut out = String::new();
    let mut count = 0usize;
    for name in names {
        if count < SHOWN {
            if count > 0 {
                out.push_str(", ");
            }
            let quoted = format!("{name:?}");
            out.push_str(quoted.get(1..quoted.len() - 1).unwrap_or_default());
        }
        count += 1;
    }
    if count > SHOWN {
        out.push_str(&format!(", ... ({} more)", count - SHOWN));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::name_list;

    #[test]
    fn name_lists_escape_and_stay_short() {
        assert_eq!(name_list(["words", "labels"]), "words, labels");
        assert_eq!(
            name_list(["x\nverify: ok", "\u{1b}[2J", "a\u{202e}b\\"]),
            "x\\nverify: ok, \\u{1b}[2J, a\\u{202e}b\\\\"
        );
        let many: Vec<String> = (0..100).map(|i| format!("t{i}")).collect();
        let list = name_list(many.iter().map(String::as_str));
        assert!(list.starts_with("t0, t1, "), "{list}");
        assert!(list.ends_with("t31, ... (68 more)"), "{list}");
    }
}
