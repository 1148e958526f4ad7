//! The Arrow IPC and Parquet side of [`Format`].

use super::{Commit, ConvertError, ConvertOptions, Format};
use crate::arrow::ipc::{IpcFileReader, IpcFileWriter, IpcStreamReader, IpcStreamWriter};
use crate::arrow::{ArrowOptions, ArrowWriteOptions};
use crate::batch::{BatchReader, BoxBatchReader, BoxBatchWriter};
use arrow_schema::SchemaRef;
use std::fs::File;
use std::io::{Read, Write};

fn read_options(options: &ConvertOptions) -> ArrowOptions {
    let budget = options
        .decode_budget
        .unwrap_or(crate::arrow::DEFAULT_DECODE_BUDGET);
    ArrowOptions::default()
        .with_null_lists(options.null_lists)
        .with_decode_budget(budget)
}

/// The reader of `file`, whose errors name it `name` (with the section).
pub(super) fn open_reader(
    format: Format,
    file: File,
    name: String,
    options: &ConvertOptions,
) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
    let arrow = read_options(options);
    let columns = options.columns.as_deref();
    Ok(match format {
        Format::ArrowFile => {
            let reader = IpcFileReader::try_new_named(file, name, &arrow)?;
            match columns {
                Some(c) => Box::new(reader.with_columns(c)?.err_into()),
                None => Box::new(reader.err_into()),
            }
        }
        Format::ArrowStream => open_stream(format, Box::new(file), name, options)?,
        _ => parquet_reader(file, name, &arrow, columns)?,
    })
}

/// The reader of an IPC stream read from `reader`.
pub(super) fn open_stream(
    format: Format,
    reader: Box<dyn Read + Send>,
    name: String,
    options: &ConvertOptions,
) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
    debug_assert_eq!(format, Format::ArrowStream);
    let reader = IpcStreamReader::try_new_named(reader, name, &read_options(options))?;
    Ok(match options.columns.as_deref() {
        Some(c) => Box::new(reader.with_columns(c)?.err_into()),
        None => Box::new(reader.err_into()),
    })
}

/// The Arrow schema of `file`.
pub(super) fn schema(format: Format, file: File, name: String) -> Result<SchemaRef, ConvertError> {
    let options = ArrowOptions::default();
    Ok(match format {
        Format::ArrowFile => IpcFileReader::try_new_named(file, name, &options)?.schema(),
        Format::ArrowStream => IpcStreamReader::try_new_named(file, name, &options)?.schema(),
        _ => parquet_schema(file, name)?,
    })
}

pub(super) fn create_writer<W>(
    format: Format,
    sink: W,
    options: &ConvertOptions,
) -> Result<BoxBatchWriter<'static, ConvertError>, ConvertError>
where
    W: Write + Send + Commit + 'static,
{
    let mut write = ArrowWriteOptions::default()
        .with_arrow(options.arrow_write_options())
        .with_metadata_policy(options.metadata_policy);
    write.compression = options.compression;
    Ok(match format {
        Format::ArrowFile => format.checked(IpcFileWriter::new(sink, &write)),
        Format::ArrowStream => format.checked(IpcStreamWriter::new(sink, &write)),
        _ => parquet_writer(format, sink, &write)?,
    })
}

#[cfg(feature = "parquet")]
fn parquet_reader(
    file: File,
    name: String,
    options: &ArrowOptions,
    columns: Option<&[String]>,
) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
    let reader = crate::arrow::parquet::ParquetReader::try_new_named(file, name, options)?;
    Ok(match columns {
        Some(c) => Box::new(reader.with_columns(c)?.err_into()),
        None => Box::new(reader.err_into()),
    })
}

#[cfg(feature = "parquet")]
fn parquet_schema(file: File, name: String) -> Result<SchemaRef, ConvertError> {
    let reader =
        crate::arrow::parquet::ParquetReader::try_new_named(file, name, &Default::default())?;
    Ok(reader.schema().clone())
}

#[cfg(feature = "parquet")]
fn parquet_writer<W>(
    format: Format,
    sink: W,
    options: &ArrowWriteOptions,
) -> Result<BoxBatchWriter<'static, ConvertError>, ConvertError>
where
    W: Write + Send + Commit + 'static,
{
    let writer = crate::arrow::parquet::ParquetWriter::try_new(sink, options)?;
    Ok(format.checked(writer))
}

#[cfg(not(feature = "parquet"))]
fn parquet_reader(
    _: File,
    _: String,
    _: &ArrowOptions,
    _: Option<&[String]>,
) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
    Err(super::missing(Format::Parquet))
}

#[cfg(not(feature = "parquet"))]
fn parquet_schema(_: File, _: String) -> Result<SchemaRef, ConvertError> {
    Err(super::missing(Format::Parquet))
}

#[cfg(not(feature = "parquet"))]
fn parquet_writer<W>(
    format: Format,
    _: W,
    _: &ArrowWriteOptions,
) -> Result<BoxBatchWriter<'static, ConvertError>, ConvertError> {
    Err(super::missing(format))
}
