//! [`Conversion`]: a reader and a writer opened for one conversion, with the
//! re-batching of its options; what [`convert`] runs and what a front end
//! runs to show progress and say how the batches were regrouped.

use super::*;
use crate::batch::rebatch::{Rebatch, RebatchReport};

/// A conversion, opened: the input's reader (re-batched as
/// [`ConvertOptions::batch_rows`] or [`ConvertOptions::batch_bytes`] ask;
/// by default every batch is kept as it is) and the output's writer.
/// [`Conversion::run`] copies; [`convert`] is `Conversion::open` then `run`.
///
/// ```
/// use lodt::batch::rebatch::BatchBytes;
/// use lodt::convert::{Conversion, ConvertOptions};
/// let dir = tempfile::tempdir()?;
/// let input = "spec/vectors/multi_batch.lodt"; // 3 small batches, metadata step=0, 1, 2
/// let kept = Conversion::open(input, dir.path().join("kept.lodt"), &ConvertOptions::default())?;
/// assert_eq!(kept.num_batches(), Some(3));
/// let done = kept.run(|_| {})?;
/// assert_eq!((done.stats.batches, done.rebatch), (3, None));
/// let options = ConvertOptions { batch_bytes: Some(BatchBytes::DEFAULT), ..Default::default() };
/// let done = Conversion::open(input, dir.path().join("sized.lodt"), &options)?.run(|_| {})?;
/// let report = done.rebatch.unwrap();
/// assert_eq!((report.input, report.passed, report.merged), (3, 3, 0)); // their metadata differ
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Conversion {
    source: Source,
    writer: BoxBatchWriter<'static, ConvertError>,
}

/// The batches a conversion reads: as they come, or re-batched by size
/// (kept typed, for its [`RebatchReport`]).
enum Source {
    Plain(BoxBatchReader<'static, ConvertError>),
    Sized(Box<Rebatch<BoxBatchReader<'static, ConvertError>>>),
}

/// What a [`Conversion`] did.
///
/// See [`Conversion`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Converted {
    /// What was written.
    pub stats: WriteStats,
    /// What re-batching by size ([`ConvertOptions::batch_bytes`]) did:
    /// batches kept, split and merged; `None` without it.
    pub rebatch: Option<RebatchReport>,
}

impl Conversion {
    /// Opens a conversion of `input` to `output`, each placed by its path
    /// ([`Endpoint::input`], [`Endpoint::output`]): refuses an `output` that
    /// is `input` itself before anything is opened for writing
    /// ([`AtomicError::SameFile`]), opens the reader, then creates the
    /// writer (given the input's file or dataset metadata).
    ///
    /// See [`Conversion`].
    pub fn open(
        input: impl AsRef<Path>,
        output: impl AsRef<Path>,
        options: &ConvertOptions,
    ) -> Result<Conversion, ConvertError> {
        let (input, output) = (input.as_ref(), output.as_ref());
        let (from, to) = (Endpoint::input(input)?, Endpoint::output(output)?);
        Conversion::open_as(input, from, output, to, options)
    }

    /// [`Conversion::open`] with the endpoints given (a format named apart
    /// from the path's extension, as the CLI's `--from` and `--to`).
    ///
    /// ```
    /// use lodt::convert::{Conversion, ConvertOptions, Endpoint, Format};
    /// let dir = tempfile::tempdir()?;
    /// let (input, output) = ("tests/data/paddle/seed_2level_int64.pdtensor", dir.path().join("t.bin"));
    /// let c = Conversion::open_as(input, Endpoint::File(Format::PaddleTensor), &output, Endpoint::File(Format::Lodt), &ConvertOptions::default())?;
    /// assert_eq!(c.run(|_| {})?.stats.tensors, 1);
    /// assert_eq!(lodt::LodtFile::open(&output)?.num_batches(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_as(
        input: impl AsRef<Path>,
        from: Endpoint,
        output: impl AsRef<Path>,
        to: Endpoint,
        options: &ConvertOptions,
    ) -> Result<Conversion, ConvertError> {
        let (input, output) = (input.as_ref(), output.as_ref());
        crate::atomic::ensure_distinct(input, output)?;
        let reader = from.open_reader(input, &options.without_batching())?;
        let writer = to.create_writer(output, reader.metadata(), options)?;
        Conversion::from_parts(reader, writer, options)
    }

    /// A conversion of a reader opened apart (a pipe, stdin: see
    /// [`Format::open_stream`]) to a writer created apart
    /// ([`Format::create_stream_writer`]). `reader` must not be re-batched
    /// already (open it with [`ConvertOptions::without_batching`]): the
    /// re-batching of `options` is applied here.
    ///
    /// ```
    /// use lodt::convert::{Conversion, ConvertOptions, Format};
    /// let options = ConvertOptions { batch_rows: Some(1), ..Default::default() };
    /// let bytes = std::fs::read("tests/data/paddle/seed_2level_int64.pdtensor")?;
    /// let reader = Format::PaddleTensor.open_stream(std::io::Cursor::new(bytes), "stdin", &Default::default())?;
    /// let writer = Format::ArrowStream.create_stream_writer(std::io::sink(), Default::default(), &options)?;
    /// let done = Conversion::from_parts(reader, writer, &options)?.run(|_| {})?;
    /// assert_eq!(done.stats.batches, 3); // three top-level sequences, one per batch
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_parts(
        reader: BoxBatchReader<'static, ConvertError>,
        writer: BoxBatchWriter<'static, ConvertError>,
        options: &ConvertOptions,
    ) -> Result<Conversion, ConvertError> {
        let source = match (options.batch_rows, options.batch_bytes) {
            (Some(_), Some(_)) => {
                return Err(ConvertError::Unsupported(
                    "batch rows and batch bytes exclude each other: give one".into(),
                ));
            }
            (Some(rows), None) => Source::Plain(Box::new(rebatch(reader, rows)?)),
            (None, Some(bytes)) => Source::Sized(Box::new(rebatch_bytes(reader, bytes)?)),
            (None, None) => Source::Plain(reader),
        };
        Ok(Conversion { source, writer })
    }

    /// The number of batches the input holds, where it is known up front
    /// and the batches are not regrouped (for a progress bar).
    ///
    /// See [`Conversion`].
    pub fn num_batches(&self) -> Option<usize> {
        match &self.source {
            Source::Plain(reader) => reader.num_batches(),
            Source::Sized(_) => None,
        }
    }

    /// Copies every batch, calling `progress` after each one written, and
    /// finishes the writer (which puts the output in place).
    ///
    /// See [`Conversion`].
    pub fn run(self, progress: impl FnMut(&WriteStats)) -> Result<Converted, ConvertError> {
        match self.source {
            Source::Plain(reader) => {
                let ((), stats) = copy_reading_ahead(reader, self.writer, progress)?;
                Ok(Converted {
                    stats,
                    rebatch: None,
                })
            }
            Source::Sized(mut reader) => {
                let ((), stats) = copy(&mut *reader, self.writer, progress)?;
                Ok(Converted {
                    stats,
                    rebatch: Some(reader.report()),
                })
            }
        }
    }
}

/// [`copy`] with the reader on a thread of its own, one batch ahead: the
/// next batch is read (decoded, for Parquet or a compressed file) while the
/// writer writes the current one, so a conversion whose reading and writing
/// both take CPU uses two cores. At most two batches are in memory (the one
/// written and the one read ahead). A write that fails stops the reader.
fn copy_reading_ahead(
    reader: BoxBatchReader<'static, ConvertError>,
    writer: BoxBatchWriter<'static, ConvertError>,
    progress: impl FnMut(&WriteStats),
) -> Result<((), WriteStats), ConvertError> {
    let (send, receive) = std::sync::mpsc::sync_channel::<Result<Batch, ConvertError>>(0);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            for batch in reader {
                let failed = batch.is_err();
                // The writer stopped (an error): read no further.
                if send.send(batch).is_err() || failed {
                    return;
                }
            }
        });
        copy(receive, writer, progress)
    })
}
