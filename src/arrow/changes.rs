//! What a conversion through lodt does to Arrow column types: lodt writes
//! `LargeList` (or `List`) levels over a primitive leaf or the element shape
//! as its [`TensorType`] says, so a `list<int64>` column comes back as
//! `large_list<int64>`, an `arrow.fixed_shape_tensor` leaf as nested
//! fixed-size lists (or a `fixed_size_list` leaf as the tensor extension,
//! with [`TensorType::FixedShape`]).

use super::{ArrowOptions, FIXED_SHAPE_TENSOR, ListType, TensorType};
use arrow_schema::{DataType, Field, Schema};

/// A column whose type a conversion changes.
///
/// ```
/// use arrow_schema::{DataType, Field, Schema};
/// use lodt::arrow::{type_changes, ArrowOptions, ListType};
/// let item = Field::new("item", DataType::Int64, true);
/// let schema = Schema::new(vec![Field::new("tokens", DataType::List(item.into()), true)]);
/// let changes = type_changes(&schema, &ArrowOptions::default());
/// assert_eq!(changes[0].to_string(), "tokens: list<int64> becomes large_list<int64>");
/// assert!(type_changes(&schema, &ArrowOptions::default().with_list_type(ListType::List)).is_empty());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct TypeChange {
    /// The column.
    pub column: String,
    /// Its type in the input.
    pub from: String,
    /// Its type as lodt writes it.
    pub to: String,
}

impl std::fmt::Display for TypeChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} becomes {}", self.column, self.from, self.to)
    }
}

/// The columns of `schema` whose type changes when lodt reads them and
/// writes them back with `options` (its list and tensor types; see
/// [`TypeChange`]). Columns
/// lodt does not read (strings, structs, ...) are left out: reading them is
/// an error of its own.
///
/// See [`TypeChange`] for an example.
pub fn type_changes(schema: &Schema, options: &ArrowOptions) -> Vec<TypeChange> {
    let written = Some((options.list_type, options.tensor_type));
    schema
        .fields()
        .iter()
        .filter_map(|field| {
            let from = describe(field, None)?;
            let to = describe(field, written)?;
            (from != to).then(|| TypeChange {
                column: field.name().clone(),
                from,
                to,
            })
        })
        .collect()
}

/// The type of `field` in pyarrow's words; with `written` (list and tensor
/// types), as lodt writes it. `None` for a type lodt does not read.
fn describe(field: &Field, written: Option<(ListType, TensorType)>) -> Option<String> {
    match field.data_type() {
        DataType::List(child) | DataType::LargeList(child) => {
            let inner = describe(child, written)?;
            let large = match written {
                Some((list_type, _)) => list_type == ListType::LargeList,
                None => matches!(field.data_type(), DataType::LargeList(_)),
            };
            Some(format!(
                "{}<{inner}>",
                if large { "large_list" } else { "list" }
            ))
        }
        DataType::FixedSizeList(..) => {
            let extension = field
                .metadata()
                .get("ARROW:extension:name")
                .is_some_and(|n| n == FIXED_SHAPE_TENSOR);
            let (mut shape, mut leaf) = (Vec::new(), field);
            while let DataType::FixedSizeList(child, size) = leaf.data_type() {
                shape.push(size.to_string());
                leaf = child;
            }
            let value = primitive(leaf.data_type())?;
            let metadata = field.metadata().get("ARROW:extension:metadata");
            let fixed_shape = match written {
                Some((_, tensor_type)) => tensor_type == TensorType::FixedShape,
                None => extension,
            };
            if fixed_shape {
                // The extension's own shape is kept; plain lists become one.
                let shape = match metadata {
                    Some(meta) if extension => meta.clone(),
                    _ => format!("[{}]", shape.join(", ")),
                };
                Some(format!("{FIXED_SHAPE_TENSOR}<{value}, {shape}>"))
            } else {
                // Nested lists of the extension's shape, or of the sizes.
                if extension {
                    let dims = super::tensor::extension_dims(metadata?)?;
                    shape = dims.iter().map(u64::to_string).collect();
                }
                let mut out = value.to_string();
                for size in shape.iter().rev() {
                    out = format!("fixed_size_list<{out}, {size}>");
                }
                Some(out)
            }
        }
        other => primitive(other).map(str::to_owned),
    }
}

/// pyarrow's name of a primitive type lodt reads.
fn primitive(data_type: &DataType) -> Option<&'static str> {
    Some(match data_type {
        DataType::Boolean => "bool",
        DataType::Int8 => "int8",
        DataType::Int16 => "int16",
        DataType::Int32 => "int32",
        DataType::Int64 => "int64",
        DataType::UInt8 => "uint8",
        DataType::UInt16 => "uint16",
        DataType::UInt32 => "uint32",
        DataType::UInt64 => "uint64",
        DataType::Float16 => "halffloat",
        DataType::Float32 => "float",
        DataType::Float64 => "double",
        _ => return None,
    })
}
