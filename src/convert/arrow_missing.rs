//! Without the `arrow` feature, Arrow and Parquet files are refused.

use super::{ConvertError, ConvertOptions, Format, missing};
use crate::batch::{BoxBatchReader, BoxBatchWriter};
use std::fs::File;
use std::io::Read;

pub(super) fn open_reader(
    format: Format,
    _: File,
    _: String,
    _: &ConvertOptions,
) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
    Err(missing(format))
}

pub(super) fn open_stream(
    format: Format,
    _: Box<dyn Read + Send>,
    _: String,
    _: &ConvertOptions,
) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
    Err(missing(format))
}

pub(super) fn create_writer<W>(
    format: Format,
    _: W,
    _: &ConvertOptions,
) -> Result<BoxBatchWriter<'static, ConvertError>, ConvertError> {
    Err(missing(format))
}
