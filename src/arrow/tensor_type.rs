//! [`TensorType`]: the one place that decides how a tensor row with an
//! element shape becomes Arrow (`spec/ARROW.md`, section 1). Every export
//! ([`to_arrow`](super::to_arrow), the IPC and Parquet writers, Python's
//! PyCapsule methods and `to_arrow`, `lodt convert --tensor-type`, Ray
//! blocks) goes through [`TensorType::element_array`].
//!
//! Adding a mapping is local: a variant, its [name](TensorType::name), its
//! place in [`TensorType::ALL`], its arm in [`TensorType::element_array`]
//! (and in [`TensorType::requested_by`] if a requested Arrow type names it).

use super::{ArrowError, FIXED_SHAPE_TENSOR, Result, VARIABLE_SHAPE_TENSOR};
use arrow_array::{ArrayRef, FixedSizeListArray};
use arrow_schema::extension::{EXTENSION_TYPE_METADATA_KEY, EXTENSION_TYPE_NAME_KEY};
use arrow_schema::{DataType, Field, Metadata};
use std::sync::Arc;

/// How the rows of a tensor with a non-empty element shape `S` are written
/// to Arrow (rows of an empty element shape are the primitive leaf whatever
/// the choice). Reading accepts every form and gives the same tensor.
///
/// ```
/// use lodt::arrow::TensorType;
/// assert_eq!(TensorType::default(), TensorType::NestedLists);
/// assert_eq!("fixed_shape".parse::<TensorType>()?, TensorType::FixedShape);
/// assert_eq!(TensorType::NestedLists.to_string(), "nested_lists");
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TensorType {
    /// `S = [n1, ..., nk]` as `k` nested `FixedSizeList`s of sizes `n1`
    /// (outermost) to `nk`, each value field nullable and named `item`, no
    /// extension: the form awkward, Hugging Face datasets, DuckDB, Polars and
    /// Ray read as nested arrays of the element shape (the default).
    #[default]
    NestedLists,
    /// One `FixedSizeList<T, prod(S)>` whose field carries Arrow's canonical
    /// `arrow.fixed_shape_tensor` extension with shape `S`.
    FixedShape,
    /// A tensor of exactly one LoD level (and a pair `x` + `x.shape`) as an
    /// `arrow.variable_shape_tensor` column, one Arrow row per sequence
    /// (`spec/ARROW.md`, section 9.2); the rows of other tensors as
    /// [`TensorType::NestedLists`].
    VariableShape,
}

impl TensorType {
    /// Every mapping, in the order of the variants.
    ///
    /// ```
    /// assert_eq!(lodt::arrow::TensorType::ALL.len(), 3);
    /// ```
    pub const ALL: [TensorType; 3] = [
        TensorType::NestedLists,
        TensorType::FixedShape,
        TensorType::VariableShape,
    ];

    /// The name as the CLI and Python take it: `nested_lists`, `fixed_shape`
    /// or `variable_shape`.
    ///
    /// ```
    /// assert_eq!(lodt::arrow::TensorType::FixedShape.name(), "fixed_shape");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            TensorType::NestedLists => "nested_lists",
            TensorType::FixedShape => "fixed_shape",
            TensorType::VariableShape => "variable_shape",
        }
    }

    /// The mapping a requested Arrow field asks for: the one whose extension
    /// name is on `field` or on a field of its type's tree
    /// (`arrow.fixed_shape_tensor`: [`TensorType::FixedShape`];
    /// `arrow.variable_shape_tensor`: [`TensorType::VariableShape`]), else
    /// [`TensorType::NestedLists`].
    ///
    /// ```
    /// use arrow_schema::{DataType, Field};
    /// use lodt::arrow::TensorType;
    /// let item = Field::new("item", DataType::Float32, true);
    /// let plain = Field::new("x", DataType::FixedSizeList(item.into(), 4), false);
    /// assert_eq!(TensorType::requested_by(&plain), TensorType::NestedLists);
    /// let ext = plain.clone().with_metadata([("ARROW:extension:name", "arrow.fixed_shape_tensor")]);
    /// assert_eq!(TensorType::requested_by(&ext), TensorType::FixedShape);
    /// let var = plain.with_metadata([("ARROW:extension:name", "arrow.variable_shape_tensor")]);
    /// assert_eq!(TensorType::requested_by(&var), TensorType::VariableShape);
    /// ```
    pub fn requested_by(field: &Field) -> TensorType {
        let mut field = field;
        loop {
            match field
                .metadata()
                .get(EXTENSION_TYPE_NAME_KEY)
                .map(String::as_str)
            {
                Some(FIXED_SHAPE_TENSOR) => return TensorType::FixedShape,
                Some(VARIABLE_SHAPE_TENSOR) => return TensorType::VariableShape,
                _ => {}
            }
            match field.data_type() {
                DataType::List(child)
                | DataType::LargeList(child)
                | DataType::FixedSizeList(child, _) => field = child,
                _ => return TensorType::NestedLists,
            }
        }
    }

    /// The rows of a tensor of element shape `element_shape` (non-empty),
    /// over `leaf` (every value, flat), and the metadata of the field that
    /// holds them. `rows` is the number of tensor rows; `column` names the
    /// column in errors (`prod(S)` must fit in `i32`).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use arrow_array::{Array, ArrayRef, Int8Array};
    /// use lodt::arrow::TensorType;
    /// let leaf: ArrayRef = Arc::new(Int8Array::from((0..16).collect::<Vec<i8>>()));
    /// let (array, meta) = TensorType::NestedLists.element_array("x", leaf.clone(), &[2, 4], 2)?;
    /// assert_eq!(array.data_type().to_string(), "FixedSizeList(2 x FixedSizeList(4 x Int8))");
    /// assert!(meta.is_empty());
    /// let (array, meta) = TensorType::FixedShape.element_array("x", leaf, &[2, 4], 2)?;
    /// assert_eq!(array.data_type().to_string(), "FixedSizeList(8 x Int8)");
    /// assert_eq!(meta["ARROW:extension:metadata"], r#"{"shape":[2,4]}"#);
    /// # Ok::<(), lodt::arrow::ArrowError>(())
    /// ```
    pub fn element_array(
        self,
        column: &str,
        leaf: ArrayRef,
        element_shape: &[usize],
        rows: usize,
    ) -> Result<(ArrayRef, Metadata)> {
        let size = fixed_size(
            column,
            element_shape
                .iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d)),
        )?;
        match self {
            // Variable-shape columns are made whole by `to_arrow`; the rows
            // of other tensors are nested lists.
            TensorType::NestedLists | TensorType::VariableShape => {
                // Level j (from the outside) holds rows * n1 * ... * nj
                // lists of n(j+1) values; built innermost first.
                let mut lengths = Vec::with_capacity(element_shape.len());
                let mut length = rows;
                for &d in element_shape {
                    lengths.push(length);
                    length = length.checked_mul(d).ok_or_else(|| too_big(column))?;
                }
                let mut array = leaf;
                for (&d, &length) in element_shape.iter().zip(&lengths).rev() {
                    array = fixed_list(array, fixed_size(column, Some(d))?, length)?;
                }
                Ok((array, Metadata::new()))
            }
            TensorType::FixedShape => {
                let array = fixed_list(leaf, size, rows)?;
                // The canonical extension, with the metadata written as the
                // Arrow spec shows it (`{"shape":[...]}`, no null optional keys).
                let metadata = Metadata::new()
                    .with(EXTENSION_TYPE_NAME_KEY, FIXED_SHAPE_TENSOR)
                    .with(
                        EXTENSION_TYPE_METADATA_KEY,
                        serde_json::json!({ "shape": element_shape }).to_string(),
                    );
                Ok((array, metadata))
            }
        }
    }
}

fn too_big(column: &str) -> ArrowError {
    ArrowError::Overflow {
        column: column.to_owned(),
        what: "element size",
        value: u128::MAX,
        limit: i32::MAX as u128,
    }
}

/// A `FixedSizeList` size: `size` (`None`: overflowed) as an `i32`.
fn fixed_size(column: &str, size: Option<usize>) -> Result<i32> {
    let size = size.ok_or_else(|| too_big(column))?;
    i32::try_from(size).map_err(|_| ArrowError::Overflow {
        column: column.to_owned(),
        what: "element size",
        value: size as u128,
        limit: i32::MAX as u128,
    })
}

/// `length` lists of `size` values of `values`. The value field is nullable
/// (though no value is null): Arrow C++ and pyarrow define the extension's
/// storage as `fixed_size_list<item: T>` with a nullable item, and restore
/// the extension from Parquet only when the storage matches exactly; nested
/// lists use the same field (pyarrow's default). See spec/ARROW.md.
fn fixed_list(values: ArrayRef, size: i32, length: usize) -> Result<ArrayRef> {
    let field = Field::new("item", values.data_type().clone(), true);
    Ok(Arc::new(FixedSizeListArray::try_new_with_length(
        Arc::new(field),
        size,
        values,
        None,
        length,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int32Type;
    use arrow_array::{Array, Int32Array};

    fn leaf(n: i32) -> ArrayRef {
        Arc::new(Int32Array::from((0..n).collect::<Vec<_>>()))
    }

    #[test]
    fn every_name_parses_back_and_an_unknown_one_lists_them() {
        for t in TensorType::ALL {
            assert_eq!(t.name().parse::<TensorType>().unwrap(), t);
            assert_eq!(t.to_string(), t.name());
        }
        let err = "variable".parse::<TensorType>().unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid argument: expected nested_lists or fixed_shape or variable_shape, found \"variable\""
        );
    }

    #[test]
    fn nested_lists_nest_the_element_shape_outermost_first() {
        let (array, meta) = TensorType::NestedLists
            .element_array("x", leaf(24), &[2, 4], 3)
            .unwrap();
        assert!(meta.is_empty());
        let outer = array.as_fixed_size_list();
        assert_eq!((outer.len(), outer.value_length()), (3, 2));
        let inner = outer.values().as_fixed_size_list();
        assert_eq!((inner.len(), inner.value_length()), (6, 4));
        let second_row = outer.value(1);
        let second_row = second_row.as_fixed_size_list();
        let last = second_row.value(1);
        assert_eq!(last.as_primitive::<Int32Type>().values(), &[12, 13, 14, 15]);
    }

    #[test]
    fn nested_lists_of_zero_rows_or_a_zero_dimension_are_empty_lists() {
        let (array, _) = TensorType::NestedLists
            .element_array("x", leaf(0), &[0, 3], 2)
            .unwrap();
        let outer = array.as_fixed_size_list();
        assert_eq!((outer.len(), outer.values().len()), (2, 0));
        let (array, _) = TensorType::NestedLists
            .element_array("x", leaf(0), &[2, 4], 0)
            .unwrap();
        assert_eq!(array.len(), 0);
    }

    #[test]
    fn fixed_shape_is_one_list_with_the_canonical_extension() {
        let (array, meta) = TensorType::FixedShape
            .element_array("x", leaf(24), &[2, 4], 3)
            .unwrap();
        assert_eq!(array.as_fixed_size_list().value_length(), 8);
        assert_eq!(meta[EXTENSION_TYPE_NAME_KEY], FIXED_SHAPE_TENSOR);
        assert_eq!(meta[EXTENSION_TYPE_METADATA_KEY], r#"{"shape":[2,4]}"#);
    }

    #[test]
    fn an_element_size_past_i32_is_an_overflow() {
        for t in TensorType::ALL {
            let err = t
                .element_array("x", leaf(0), &[1 << 20, 1 << 12], 0)
                .unwrap_err();
            assert!(matches!(err, ArrowError::Overflow { .. }), "{t}: {err}");
        }
    }

    #[test]
    fn a_requested_field_names_its_mapping() {
        let item = Arc::new(Field::new("item", DataType::Int32, true));
        let fsl = DataType::FixedSizeList(item, 4);
        let plain = Field::new("x", fsl.clone(), false);
        assert_eq!(TensorType::requested_by(&plain), TensorType::NestedLists);
        let extension = Metadata::new().with(EXTENSION_TYPE_NAME_KEY, FIXED_SHAPE_TENSOR);
        // On a list's item, or on the column field itself (0 LoD levels).
        let ext = Field::new("item", fsl, false).with_metadata(extension.clone());
        let list = Field::new("x", DataType::LargeList(Arc::new(ext)), false);
        assert_eq!(TensorType::requested_by(&list), TensorType::FixedShape);
        let column = plain.with_metadata(extension);
        assert_eq!(TensorType::requested_by(&column), TensorType::FixedShape);
        let int = Field::new("x", DataType::Int32, false);
        assert_eq!(TensorType::requested_by(&int), TensorType::NestedLists);
    }
}
