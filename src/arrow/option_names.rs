//! The names of the option enums as the CLI and Python take them
//! (`--null-lists error|empty`, `--metadata error|first`,
//! `--tensor-type nested_lists|fixed_shape`), parsed in one
//! place so every front end spells them and their errors the same way.

use super::{ArrowError, MetadataPolicy, NullLists, TensorType};

impl NullLists {
    /// The name: `error` or `empty`.
    ///
    /// ```
    /// assert_eq!(lodt::arrow::NullLists::Empty.name(), "empty");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            NullLists::Error => "error",
            NullLists::Empty => "empty",
        }
    }
}

impl std::str::FromStr for NullLists {
    type Err = ArrowError;

    /// `error` or `empty`.
    ///
    /// ```
    /// use lodt::arrow::NullLists;
    /// assert_eq!("empty".parse::<NullLists>()?, NullLists::Empty);
    /// assert_eq!("x".parse::<NullLists>().unwrap_err().to_string(),
    ///     "invalid argument: expected error or empty, found \"x\"");
    /// # Ok::<(), lodt::arrow::ArrowError>(())
    /// ```
    fn from_str(s: &str) -> Result<Self, ArrowError> {
        by_name([NullLists::Error, NullLists::Empty], NullLists::name, s)
    }
}

impl MetadataPolicy {
    /// The name: `error` or `first` ([`MetadataPolicy::KeepFirst`]).
    ///
    /// ```
    /// assert_eq!(lodt::arrow::MetadataPolicy::KeepFirst.name(), "first");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            MetadataPolicy::Error => "error",
            MetadataPolicy::KeepFirst => "first",
        }
    }
}

impl std::str::FromStr for MetadataPolicy {
    type Err = ArrowError;

    /// `error` or `first`.
    ///
    /// ```
    /// use lodt::arrow::MetadataPolicy;
    /// assert_eq!("first".parse::<MetadataPolicy>()?, MetadataPolicy::KeepFirst);
    /// assert!("keep".parse::<MetadataPolicy>().is_err());
    /// # Ok::<(), lodt::arrow::ArrowError>(())
    /// ```
    fn from_str(s: &str) -> Result<Self, ArrowError> {
        by_name(
            [MetadataPolicy::Error, MetadataPolicy::KeepFirst],
            MetadataPolicy::name,
            s,
        )
    }
}

impl std::str::FromStr for TensorType {
    type Err = ArrowError;

    /// A [`TensorType::name`]: `nested_lists`, `fixed_shape` or `variable_shape`.
    ///
    /// ```
    /// use lodt::arrow::TensorType;
    /// assert_eq!("nested_lists".parse::<TensorType>()?, TensorType::NestedLists);
    /// assert_eq!("x".parse::<TensorType>().unwrap_err().to_string(),
    ///     "invalid argument: expected nested_lists or fixed_shape or variable_shape, found \"x\"");
    /// # Ok::<(), lodt::arrow::ArrowError>(())
    /// ```
    fn from_str(s: &str) -> Result<Self, ArrowError> {
        by_name(TensorType::ALL, TensorType::name, s)
    }
}

impl std::fmt::Display for TensorType {
    /// The [name](TensorType::name).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The value of `values` whose `name` is `s`, or an error that lists the names.
fn by_name<T: Copy, const N: usize>(
    values: [T; N],
    name: fn(T) -> &'static str,
    s: &str,
) -> Result<T, ArrowError> {
    values.into_iter().find(|v| name(*v) == s).ok_or_else(|| {
        let names: Vec<&str> = values.into_iter().map(name).collect();
        ArrowError::InvalidArgument(format!("expected {}, found {s:?}", names.join(" or ")))
    })
}
