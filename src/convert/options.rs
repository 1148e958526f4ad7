//! [`ConvertOptions`]: how to convert.

use super::*;

/// How to convert. The defaults keep the input as it is: every batch as
/// it comes (no re-batching), every tensor, the input's metadata.
///
/// ```
/// let options = lodt::convert::ConvertOptions { batch_rows: Some(32), ..Default::default() };
/// assert!(options.names.is_none());
/// ```
#[derive(Debug, Clone, Default)]
pub struct ConvertOptions {
    /// Names for the tensors of an input whose format stores none (Paddle),
    /// in file order (default `tensor0`, `tensor1`, …). An error for other
    /// inputs.
    pub names: Option<Vec<String>>,
    /// Regroup the top-level rows into batches of this many rows (never
    /// across a metadata change). `None`, with no
    /// [`ConvertOptions::batch_bytes`] either: every batch is kept as it is.
    pub batch_rows: Option<usize>,
    /// Write Arrow `List` (32-bit offsets) instead of `LargeList`.
    pub small_lists: bool,
    /// Regroup the rows by size (see [`BatchBytes`]; [`BatchBytes::DEFAULT`]
    /// keeps batches of 1 MiB to 64 MiB and splits or merges the others to
    /// about 16 MiB); excludes [`ConvertOptions::batch_rows`].
    pub batch_bytes: Option<BatchBytes>,
    /// A dataset output, or a directory of Parquet files: the target size
    /// of a shard in bytes (`None`:
    /// [`DEFAULT_SHARD_BYTES`](crate::dataset::DEFAULT_SHARD_BYTES)). An
    /// error for a file output.
    pub shard_bytes: Option<u64>,
    /// Read only these tensors (Arrow and Parquet columns), in this order.
    /// For Arrow and Parquet inputs the other columns are not decoded, so a
    /// file with columns lodt cannot read (strings) converts with the others
    /// selected.
    pub columns: Option<Vec<String>>,
    /// Parquet output: the page compression (`None`: Snappy, as pyarrow).
    /// Other outputs refuse a codec other than `Compression::None`.
    #[cfg(feature = "arrow")]
    pub compression: Option<crate::arrow::ParquetCompression>,
    /// Arrow and Parquet input: what to do with null lists.
    #[cfg(feature = "arrow")]
    pub null_lists: crate::arrow::NullLists,
    /// Parquet input: the most bytes one batch may decode to
    /// ([`ArrowOptions::decode_budget`](crate::arrow::ArrowOptions::decode_budget);
    /// `None`: [`DEFAULT_DECODE_BUDGET`](crate::arrow::DEFAULT_DECODE_BUDGET)).
    #[cfg(feature = "arrow")]
    pub decode_budget: Option<u64>,
    /// Arrow and Parquet output: what to do with batches whose metadata
    /// differs from the first batch's.
    #[cfg(feature = "arrow")]
    pub metadata_policy: crate::arrow::MetadataPolicy,
    /// Arrow and Parquet output: how rows with an element shape are written
    /// (nested fixed-size lists by default, or the tensor extension).
    #[cfg(feature = "arrow")]
    pub tensor_type: crate::arrow::TensorType,
    /// `.lodt` output (and a dataset's shards): the format version (`None`:
    /// the default, 2.0; 1.0 for readers that predate it) and the compression of the
    /// buffers (none by default; 2.0 only). Other outputs refuse a
    /// compression here.
    pub lodt: crate::format::WriteOptions,
}

impl ConvertOptions {
    /// These options without re-batching ([`ConvertOptions::batch_rows`]
    /// and [`ConvertOptions::batch_bytes`] unset): how a reader is opened
    /// for [`Conversion::from_parts`](super::Conversion::from_parts), which
    /// re-batches itself.
    ///
    /// ```
    /// let o = lodt::convert::ConvertOptions { batch_rows: Some(8), small_lists: true, ..Default::default() };
    /// let reading = o.without_batching();
    /// assert_eq!((reading.batch_rows, reading.small_lists), (None, true));
    /// ```
    pub fn without_batching(&self) -> ConvertOptions {
        ConvertOptions {
            batch_rows: None,
            batch_bytes: None,
            ..self.clone()
        }
    }

    /// Sets how an `output` file is encoded from the CLI's and Python's
    /// spelling (`--format-version`, `--compression`; `None`: not given).
    /// For `.lodt` files and datasets: the format version and the buffer
    /// codec of [`ConvertOptions::lodt`]
    /// ([`WriteOptions::for_codec`](crate::format::WriteOptions::for_codec):
    /// `none`, `lz4`, `zstd`, `zstd:LEVEL`; a codec implies 2.0). For
    /// Parquet: the page codec of [`ConvertOptions::compression`] (`none`,
    /// `snappy`, `zstd`, `lz4`). Other outputs take neither.
    ///
    /// ```
    /// use lodt::convert::{ConvertOptions, Format};
    /// use lodt::format::Compression;
    /// let mut o = ConvertOptions::default();
    /// o.set_output_codec(Format::Lodt, None, Some("zstd:9"))?;
    /// assert_eq!(o.lodt.compression, Compression::Zstd { level: 9 });
    /// assert_eq!(o.lodt.format_version, None); // the default: 2.0
    /// o.set_output_codec(Format::Lodt, Some("1.0"), None)?;
    /// assert_eq!(o.lodt.format_version.map(|v| v.to_string()).as_deref(), Some("1.0"));
    /// assert!(o.set_output_codec(Format::Lodt, None, Some("snappy")).is_err());
    /// assert!(o.set_output_codec(Format::Lodt, Some("1.0"), Some("lz4")).is_err());
    /// assert!(o.set_output_codec(Format::ArrowFile, None, Some("zstd")).is_err());
    /// assert!(o.set_output_codec(Format::Parquet, Some("2.0"), None).is_err());
    /// o.set_output_codec(Format::Parquet, None, Some("none"))?;
    /// assert_eq!(o.compression, Some(lodt::arrow::ParquetCompression::None));
    /// # Ok::<(), lodt::convert::ConvertError>(())
    /// ```
    pub fn set_output_codec(
        &mut self,
        output: Format,
        format_version: Option<&str>,
        compression: Option<&str>,
    ) -> Result<(), ConvertError> {
        let unsupported = |e: &dyn std::fmt::Display| ConvertError::Unsupported(e.to_string());
        if output == Format::Lodt {
            let fsync = self.lodt.fsync;
            self.lodt = crate::format::WriteOptions {
                fsync,
                ..crate::format::WriteOptions::for_codec(
                    format_version,
                    compression.unwrap_or("none"),
                )
                .map_err(|e| unsupported(&e))?
            };
            return Ok(());
        }
        if let Some(v) = format_version {
            return Err(ConvertError::Unsupported(format!(
                "a format version ({v}) applies to .lodt output, not to a {} file",
                output.extension()
            )));
        }
        match compression {
            None => Ok(()),
            #[cfg(feature = "arrow")]
            Some(text) if output == Format::Parquet => {
                let codec: crate::arrow::ParquetCompression = text
                    .parse()
                    .map_err(|e: crate::arrow::ArrowError| unsupported(&e))?;
                self.compression = Some(codec);
                Ok(())
            }
            Some("none") => Ok(()),
            Some(text) => Err(ConvertError::Unsupported(format!(
                "compression ({text}) applies to .lodt and Parquet output; a {} file is written uncompressed",
                output.extension()
            ))),
        }
    }
}

#[cfg(feature = "arrow")]
impl ConvertOptions {
    /// The Arrow options of Arrow and Parquet output:
    /// [`ConvertOptions::small_lists`] and [`ConvertOptions::tensor_type`].
    ///
    /// ```
    /// use lodt::{arrow::{ListType, TensorType}, convert::ConvertOptions};
    /// let o = ConvertOptions { small_lists: true, tensor_type: TensorType::FixedShape, ..Default::default() };
    /// let arrow = o.arrow_write_options();
    /// assert_eq!((arrow.list_type, arrow.tensor_type), (ListType::List, TensorType::FixedShape));
    /// ```
    pub fn arrow_write_options(&self) -> crate::arrow::ArrowOptions {
        let list_type = if self.small_lists {
            crate::arrow::ListType::List
        } else {
            crate::arrow::ListType::LargeList
        };
        crate::arrow::ArrowOptions::default()
            .with_list_type(list_type)
            .with_tensor_type(self.tensor_type)
    }
}
