//! The checks of an Arrow IPC message before arrow-ipc decodes it: its
//! framing, and every length, offset and count of a record batch against
//! the schema and the bytes present.

use super::*;

/// The flatbuffer of an encapsulated IPC message: `0xFFFFFFFF`, an `i32`
/// length and the flatbuffer, or (before Arrow 0.15) the length and the
/// flatbuffer. An error when `bytes` is too short for what it claims.
pub(crate) fn message_flatbuffer(bytes: &[u8]) -> std::result::Result<&[u8], String> {
    let word = |at: usize| -> Option<[u8; 4]> { bytes.get(at..at + 4)?.try_into().ok() };
    let Some(first) = word(0) else {
        return Err(format!(
            "{} bytes are too short for a message length",
            bytes.len()
        ));
    };
    let (len, start) = if first == [0xFF; 4] {
        let Some(len) = word(4) else {
            return Err("the message ends after its continuation marker".into());
        };
        (i32::from_le_bytes(len), 8)
    } else {
        (i32::from_le_bytes(first), 4)
    };
    let len = usize::try_from(len).map_err(|_| format!("negative message length {len}"))?;
    bytes.get(start..start + len).ok_or_else(|| {
        format!(
            "the message claims {len} bytes of metadata, {} are there",
            bytes.len() - start
        )
    })
}

/// Parses (and verifies) an IPC message flatbuffer.
pub(crate) fn parse_message(
    flatbuffer: &[u8],
) -> std::result::Result<arrow_ipc::Message<'_>, String> {
    arrow_ipc::root_as_message(flatbuffer).map_err(|e| format!("unreadable message: {e}"))
}

/// Checks an IPC record batch message against the schema (whose types
/// [`check_schema`] accepted) and the `body_len` bytes of its body: every
/// buffer inside the body, every node length and null count in range, every
/// buffer long enough for its node, every fixed-size list child long enough.
/// arrow-ipc checks none of the first and slices the body where the message
/// says, which panics when a buffer lies outside it; arrow's array validation,
/// which runs after that, checks the rest (offsets, values).
pub(crate) fn check_record_batch(
    batch: &arrow_ipc::RecordBatch<'_>,
    body_len: usize,
    schema: &Schema,
) -> std::result::Result<(), String> {
    if let Some(compression) = batch.compression() {
        return Err(format!(
            "compressed bodies ({:?}) are not supported",
            compression.codec()
        ));
    }
    let rows = batch.length();
    if rows < 0 {
        return Err(format!("negative row count {rows}"));
    }
    let nodes = batch.nodes().ok_or("the message has no field nodes")?;
    let buffers = batch.buffers().ok_or("the message has no buffer list")?;
    for (i, b) in buffers.iter().enumerate() {
        let (offset, length) = (b.offset(), b.length());
        let end = i128::from(offset) + i128::from(length);
        if offset < 0 || length < 0 || end > body_len as i128 {
            return Err(format!(
                "buffer {i} (offset {offset}, {length} bytes) lies outside the {body_len}-byte body"
            ));
        }
    }
    let mut walk = Walk {
        nodes: nodes.iter().map(|n| (n.length(), n.null_count())).collect(),
        buffers: buffers.iter().map(|b| b.length() as u64).collect(),
        node: 0,
        buffer: 0,
    };
    for field in schema.fields() {
        let length = walk.array(field.name(), field.data_type())?;
        if length != rows as u64 {
            return Err(format!(
                "column {:?} has {length} rows, the batch {rows}",
                field.name()
            ));
        }
    }
    Ok(())
}

/// Walks the field nodes and buffers of a record batch message in schema order.
struct Walk {
    nodes: Vec<(i64, i64)>,
    buffers: Vec<u64>,
    node: usize,
    buffer: usize,
}

impl Walk {
    fn next_buffer(&mut self, column: &str) -> std::result::Result<u64, String> {
        let len = self.buffers.get(self.buffer).copied().ok_or_else(|| {
            format!(
                "column {column:?}: the message has {} buffers, the schema needs more",
                self.buffers.len()
            )
        })?;
        self.buffer += 1;
        Ok(len)
    }

    /// Checks the node (and buffers, and children) of one array of type
    /// `data_type` and returns its length.
    fn array(&mut self, column: &str, data_type: &DataType) -> std::result::Result<u64, String> {
        let index = self.node;
        let (length, null_count) = self.nodes.get(index).copied().ok_or_else(|| {
            format!(
                "column {column:?}: the message has {} field nodes, the schema needs more",
                self.nodes.len()
            )
        })?;
        self.node += 1;
        if length < 0 || null_count < 0 || null_count > length {
            return Err(format!(
                "column {column:?}: field node {index} has length {length} and null count {null_count}"
            ));
        }
        let length = length as u64;
        let short = |what: &str, needed: Option<u64>, found: u64| {
            format!(
                "column {column:?}: field node {index} of length {length} needs {} bytes of {what}, its buffer has {found}",
                needed.map_or_else(|| "more than 2^64".to_owned(), |n| n.to_string())
            )
        };
        let bitmap = length.div_ceil(8);
        let validity = self.next_buffer(column)?;
        if null_count > 0 && validity < bitmap {
            return Err(short("validity bitmap", Some(bitmap), validity));
        }
        match data_type {
            DataType::List(child) | DataType::LargeList(child) => {
                let width = if matches!(data_type, DataType::List(_)) {
                    4
                } else {
                    8
                };
                let offsets = self.next_buffer(column)?;
                let needed = length.checked_add(1).and_then(|n| n.checked_mul(width));
                if length > 0 && needed.is_none_or(|n| offsets < n) {
                    return Err(short("offsets", needed, offsets));
                }
                // arrow's offset validation views the whole buffer as
                // offsets, and panics on a partial one.
                if offsets % width != 0 {
                    return Err(format!(
                        "column {column:?}: field node {index} has an offsets buffer of {offsets} bytes, not a multiple of {width}"
                    ));
                }
                self.array(column, child.data_type())?;
            }
            DataType::FixedSizeList(child, size) => {
                let child_length = self.array(column, child.data_type())?;
                let needed = length.checked_mul(u64::try_from(*size).unwrap_or(u64::MAX));
                if needed.is_none_or(|n| child_length < n) {
                    return Err(format!(
                        "column {column:?}: field node {index} holds {length} lists of {size}, its child has {child_length} values"
                    ));
                }
            }
            // A variable-shape tensor column (check_schema lets no other
            // struct through): a validity bitmap, then the children.
            DataType::Struct(children) => {
                for child in children {
                    let child_length = self.array(column, child.data_type())?;
                    if child_length < length {
                        return Err(format!(
                            "column {column:?}: field node {index} is a struct of {length} rows, its child {:?} has {child_length}",
                            child.name()
                        ));
                    }
                }
            }
            DataType::Boolean => {
                let values = self.next_buffer(column)?;
                if values < bitmap {
                    return Err(short("values", Some(bitmap), values));
                }
            }
            other => {
                let width = other
                    .primitive_width()
                    .ok_or_else(|| format!("column {column:?}: unsupported type {other}"))?
                    as u64;
                let values = self.next_buffer(column)?;
                let needed = length.checked_mul(width);
                if needed.is_none_or(|n| values < n) {
                    return Err(short("values", needed, values));
                }
            }
        }
        Ok(length)
    }
}
