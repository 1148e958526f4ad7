//! The boundary between lodt and the decoders of foreign formats (arrow-ipc
//! and parquet): what the readers check before handing bytes to them, and
//! [`contain`], the one place where a panic of theirs is caught.
//!
//! arrow-rs and parquet trust parts of their input: arrow-ipc slices a
//! message body at whatever offsets the message claims, parquet asserts that
//! column chunk offsets are not negative, and both have panicking paths that
//! a corrupt file can reach. The readers therefore
//!
//! 1. refuse columns lodt cannot read before decoding them ([`check_schema`]),
//!    so only the primitive, list and fixed-size list decoders ever run;
//! 2. check every length, offset and count a message or footer gives against
//!    the schema and the bytes really present ([`check_record_batch`],
//!    [`check_parquet_metadata`]), so no buffer is sliced out of range and no
//!    allocation is sized by an unchecked field, and walk the Thrift of a
//!    Parquet footer and page headers for what parquet mishandles
//!    ([`check_parquet_schema_depth`], [`check_parquet_page_headers`]);
//! 3. run each remaining decoder call inside [`contain`], which turns a panic
//!    into [`ArrowError::Decode`](crate::arrow::ArrowError::Decode) naming the file and section (arrow-rs validates
//!    every array it decodes from IPC; Parquet output is validated with
//!    `ArrayData::validate_full` inside the boundary too).
//!
//! A caught panic still runs the process's panic hook (which prints it, by
//! default); the library installs no hook. The `lodt` binary installs a quiet
//! one. Containment needs `panic = "unwind"` (Rust's default).

use super::{Error, Result};
use arrow_schema::{DataType, Schema};
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs `decode`, a call into arrow-rs or parquet (named by `decoder`) on
/// input from `file`, and turns a panic into [`ArrowError::Decode`](crate::arrow::ArrowError::Decode) for the
/// `section` being read. Errors that `decode` returns pass through.
///
/// The callers hand in closures whose state is discarded after a panic:
/// the IPC readers decode a message from a buffer they own, and the Parquet
/// reader drops the row group reader that panicked. That is why asserting
/// unwind safety is sound here.
pub(crate) fn contain<T>(
    decoder: &'static str,
    file: &str,
    section: impl FnOnce() -> String,
    decode: impl FnOnce() -> Result<T>,
) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(decode)) {
        Ok(result) => result,
        Err(payload) => Err(Error::Decode {
            file: file.to_owned(),
            section: section(),
            message: format!("{decoder} panicked: {}", panic_message(payload.as_ref())),
        }),
    }
}

/// The message of a panic payload (`panic!` gives a `&str` or a `String`).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_owned()
    }
}

/// An [`ArrowError::Decode`](crate::arrow::ArrowError::Decode) for `section` of `file`.
pub(crate) fn decode_error(file: &str, section: &str, message: impl Into<String>) -> Error {
    Error::Decode {
        file: file.to_owned(),
        section: section.to_owned(),
        message: message.into(),
    }
}

/// Checks that every column of `schema` has a type lodt reads (lists, large
/// lists and fixed-size lists of booleans, integers and floats), so that no
/// other decoder of arrow-rs or parquet runs on untrusted input. The error is
/// the one [`from_arrow`](super::from_arrow) gives for such a column.
pub(crate) fn check_schema(schema: &Schema) -> Result<()> {
    for field in schema.fields() {
        // A variable-shape tensor column (`variable_shape::kind`) is a
        // struct of such types; its layout is checked when it is read.
        match (super::variable_shape::kind(field), field.data_type()) {
            (Some(_), DataType::Struct(children)) => {
                for child in children {
                    check_type(field.name(), child.data_type())?;
                }
            }
            _ => check_type(field.name(), field.data_type())?,
        }
    }
    Ok(())
}

/// [`check_schema`] for one type of column `column`.
fn check_type(column: &str, data_type: &DataType) -> Result<()> {
    let mut data_type = data_type;
    {
        loop {
            match data_type {
                DataType::List(child) | DataType::LargeList(child) => {
                    data_type = child.data_type();
                }
                DataType::FixedSizeList(child, size) if *size >= 0 => {
                    data_type = child.data_type();
                }
                DataType::Boolean
                | DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
                | DataType::UInt64
                | DataType::Float16
                | DataType::Float32
                | DataType::Float64 => break,
                other => {
                    return Err(Error::Unsupported {
                        column: column.to_owned(),
                        data_type: other.to_string(),
                    });
                }
            }
        }
    }
    Ok(())
}

mod ipc_checks;
#[cfg(feature = "parquet")]
mod parquet_checks;
#[cfg(feature = "parquet")]
mod thrift;

pub(crate) use ipc_checks::{check_record_batch, message_flatbuffer, parse_message};
#[cfg(feature = "parquet")]
pub(crate) use parquet_checks::{
    check_parquet_metadata, check_parquet_page_headers, check_parquet_schema_depth, plain_bits,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_decode_error_naming_file_and_section() {
        let err = contain::<()>(
            "arrow-ipc",
            "x.arrow",
            || "record batch 3".into(),
            || panic!("boom {}", 7),
        )
        .unwrap_err();
        match err {
            Error::Decode {
                file,
                section,
                message,
            } => {
                assert_eq!(
                    (file.as_str(), section.as_str()),
                    ("x.arrow", "record batch 3")
                );
                assert_eq!(message, "arrow-ipc panicked: boom 7");
            }
            other => panic!("expected Decode, got {other:?}"),
        }
        let ok = contain("parquet", "f", String::new, || Ok(5)).unwrap();
        assert_eq!(ok, 5);
    }

    #[cfg(feature = "parquet")]
    #[test]
    fn the_schema_depth_of_lodt_files_is_two_groups_per_level_and_the_root() {
        use crate::{Batch, Lod, LodTensor};
        for (levels, shape, depth) in [(0, vec![3], 1), (1, vec![3], 3), (32, vec![3, 2], 67)] {
            let lod = if levels == 0 {
                Lod::empty()
            } else {
                let mut lengths = vec![vec![1u64]; levels];
                lengths[levels - 1] = vec![3];
                Lod::try_from_lengths(&lengths).unwrap()
            };
            let n: usize = shape.iter().product();
            let tensor = LodTensor::from_vec(vec![1i32; n], shape, lod).unwrap();
            let batch = Batch::try_from_tensors([("x", tensor)]).unwrap();
            let (bytes, _) = crate::arrow::parquet::write_parquet(
                Vec::new(),
                [Ok::<_, crate::Error>(batch)],
                &Default::default(),
            )
            .unwrap();
            let footer_len =
                u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap());
            let footer = &bytes[bytes.len() - 8 - footer_len as usize..bytes.len() - 8];
            let read = thrift::read_footer(footer);
            assert_eq!(read.end, Some(footer.len()));
            let children = read.children.unwrap();
            assert_eq!(
                thrift::schema_depth(&children, 1000),
                depth,
                "{levels} levels"
            );
        }
        // cut short
        assert!(thrift::read_footer(&[0x19, 0x1C]).children.is_none());
    }

    /// The footer of a Parquet file (between the data and the last 8 bytes).
    #[cfg(feature = "parquet")]
    fn parquet_footer(bytes: &[u8]) -> &[u8] {
        let n = bytes.len();
        let len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
        &bytes[n - 8 - len..n - 8]
    }

    #[cfg(feature = "parquet")]
    #[test]
    fn the_footer_walk_reads_real_footers_to_their_last_byte() {
        // Written by pyarrow (statistics, key-value metadata, logical types,
        // encoding stats, size statistics) and by lodt.
        for name in [
            "arrow/batch0.parquet",
            "arrow/batch1.parquet",
            "max_ratio_zstd.parquet",
            "max_ratio_snappy.parquet",
            "max_ratio_lz4.parquet",
        ] {
            let bytes =
                std::fs::read(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap();
            let footer = parquet_footer(&bytes);
            let read = thrift::read_footer(footer);
            assert_eq!(read.refused, None, "{name}");
            assert_eq!(read.end, Some(footer.len()), "{name}");
            assert!(read.children.unwrap().len() > 1, "{name}");
        }
    }

    #[cfg(feature = "parquet")]
    #[test]
    fn a_page_header_keeps_each_data_page_header_apart() {
        // type 0 (DATA_PAGE), sizes 1 and 1; field 5 (num_values 1, encoding
        // 8 = RLE_DICTIONARY, level encodings 0); field 8 (num_values 1, no
        // nulls, 1 row, encoding 0 = PLAIN, level lengths 0).
        let bytes = [
            0x15, 0x00, 0x15, 0x02, 0x15, 0x02, //
            0x2C, 0x15, 0x02, 0x15, 0x10, 0x15, 0x00, 0x15, 0x00, 0x00, //
            0x3C, 0x15, 0x02, 0x15, 0x00, 0x15, 0x02, 0x15, 0x00, 0x15, 0x00, 0x15, 0x00, 0x00,
            0x00,
        ];
        let (len, header) = thrift::skim_page_header(&bytes).unwrap_or_else(|_| panic!());
        assert_eq!(len, bytes.len());
        assert_eq!(header.page_type, Some(0));
        // parquet decodes a DATA_PAGE by field 5: the check must see
        // RLE_DICTIONARY there, not field 8's PLAIN.
        assert_eq!(header.data_page, Some(Some(8)));
        assert_eq!(header.data_page_v2, Some(Some(0)));
        // Without field 5 (its header byte turned into field 15's).
        let mut without = bytes;
        without[6] = 0xCC;
        let (_, header) = thrift::skim_page_header(&without).unwrap_or_else(|_| panic!());
        assert_eq!(header.data_page, None);
    }

    #[test]
    fn message_framing_is_checked() {
        assert!(message_flatbuffer(&[0xFF; 6]).is_err());
        assert!(message_flatbuffer(&[0xFF, 0xFF, 0xFF, 0xFF, 9, 0, 0, 0, 1]).is_err());
        assert_eq!(message_flatbuffer(&[2, 0, 0, 0, 7, 8, 9]).unwrap(), &[7, 8]);
        assert_eq!(
            message_flatbuffer(&[0xFF, 0xFF, 0xFF, 0xFF, 1, 0, 0, 0, 5]).unwrap(),
            &[5]
        );
        assert!(message_flatbuffer(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]).is_err());
    }
}
