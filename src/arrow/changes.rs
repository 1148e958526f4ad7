//! What a conversion through lodt does to Arrow column types: lodt writes
//! `LargeList` (or `List`) levels over a primitive leaf or a
//! `FixedSizeList` carrying the `arrow.fixed_shape_tensor` extension, so a
//! `list<int64>` column comes back as `large_list<int64>`, a
//! `fixed_size_list<float32, 16>` leaf as a tensor extension.

use super::{FIXED_SHAPE_TENSOR, ListType};
use arrow_schema::{DataType, Field, Schema};

/// A column whose type a conversion changes.
///
/// ```
/// use arrow_schema::{DataType, Field, Schema};
/// use lodt::arrow::{type_changes, ListType};
/// let item = Field::new("item", DataType::Int64, true);
/// let schema = Schema::new(vec![Field::new("tokens", DataType::List(item.into()), true)]);
/// let changes = type_changes(&schema, ListType::LargeList);
/// assert_eq!(changes[0].to_string(), "tokens: list<int64> becomes large_list<int64>");
/// assert!(type_changes(&schema, ListType::List).is_empty());
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
/// writes them back with `list_type` levels (see [`TypeChange`]). Columns
/// lodt does not read (strings, structs, ...) are left out: reading them is
/// an error of its own.
///
/// See [`TypeChange`] for an example.
pub fn type_changes(schema: &Schema, list_type: ListType) -> Vec<TypeChange> {
    schema
        .fields()
        .iter()
        .filter_map(|field| {
            let from = describe(field, None)?;
            let to = describe(field, Some(list_type))?;
            (from != to).then(|| TypeChange {
                column: field.name().clone(),
                from,
                to,
            })
        })
        .collect()
}

/// The type of `field` in pyarrow's words; with `written`, as lodt writes it.
/// `None` for a type lodt does not read.
fn describe(field: &Field, written: Option<ListType>) -> Option<String> {
    match field.data_type() {
        DataType::List(child) | DataType::LargeList(child) => {
            let inner = describe(child, written)?;
            let large = match written {
                Some(list_type) => list_type == ListType::LargeList,
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
            if extension || written.is_some() {
                // The extension's own shape is kept; plain lists become one.
                let shape = match field.metadata().get("ARROW:extension:metadata") {
                    Some(meta) if extension => meta.clone(),
                    _ => format!("[{}]", shape.join(", ")),
                };
                Some(format!("{FIXED_SHAPE_TENSOR}<{value}, {shape}>"))
            } else {
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
