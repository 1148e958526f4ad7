//! The adapters a conversion plugs between a reader and a writer: tensor
//! selection, counted readers, checked writers, and the sinks a writer
//! commits (a pipe, an atomic file).

use super::*;

/// Whether `path` is a regular file (following links): not a pipe, a
/// socket or a device.
pub(super) fn is_regular(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// The error for a format read from a pipe that needs to seek.
pub(super) fn not_streamable(format: Format, name: &str) -> ConvertError {
    let streamable: Vec<String> = Format::ALL
        .iter()
        .filter(|f| f.capabilities().streamable)
        .map(|f| f.extension())
        .collect();
    ConvertError::Unsupported(format!(
        "{name} is a pipe or a device, and the {} format needs a seekable file (its footer is at the end); the formats read from a pipe are {}",
        format.name(),
        streamable.join(", ")
    ))
}

/// The tensor names of [`ConvertOptions::names`], borrowed.
pub(super) fn paddle_names(options: &ConvertOptions) -> Option<Vec<&str>> {
    options
        .names
        .as_ref()
        .map(|n| n.iter().map(String::as_str).collect())
}

/// A reader that keeps only some tensors of each batch, in a given order.
pub(super) struct Selected<R> {
    pub(super) inner: R,
    pub(super) columns: Vec<String>,
    pub(super) index: usize,
}

impl<R: BatchReader<Error = ConvertError>> Iterator for Selected<R> {
    type Item = Result<Batch, ConvertError>;

    fn next(&mut self) -> Option<Self::Item> {
        let batch = match self.inner.next()? {
            Ok(batch) => batch,
            Err(e) => return Some(Err(e)),
        };
        let index = self.index;
        self.index += 1;
        let mut out = Batch::new();
        *out.metadata_mut() = batch.metadata().clone();
        for column in &self.columns {
            let Some(tensor) = batch.get(column) else {
                return Some(Err(ConvertError::Unsupported(format!(
                    "batch {index} has no tensor {column:?}; it has: {}",
                    crate::error::name_list(batch.names())
                ))));
            };
            if let Err(e) = out.push(column.clone(), tensor.clone()) {
                return Some(Err(e.into()));
            }
        }
        Some(Ok(out))
    }
}

impl<R: BatchReader<Error = ConvertError>> BatchReader for Selected<R> {
    type Error = ConvertError;

    fn metadata(&self) -> BTreeMap<String, String> {
        self.inner.metadata()
    }

    fn num_batches(&self) -> Option<usize> {
        self.inner.num_batches()
    }
}

/// A pipe or stdout, buffered; [`Commit`] flushes it.
pub(super) struct StreamSink(pub(super) BufWriter<Box<dyn std::io::Write + Send>>);

impl std::io::Write for StreamSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl Commit for StreamSink {
    fn commit(mut self) -> Result<(), ConvertError> {
        std::io::Write::flush(&mut self).map_err(|source| ConvertError::Io {
            path: "the output stream".into(),
            source,
        })
    }
}

pub(super) fn open(path: &Path) -> Result<File, ConvertError> {
    File::open(path).map_err(|source| ConvertError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// A new file at `path`, buffered, renamed into place by [`Commit`].
pub(super) fn sink(path: &Path) -> Result<BufWriter<AtomicFile>, ConvertError> {
    Ok(BufWriter::new(AtomicFile::create(path)?))
}

/// What a file writer's output needs once the writer is finished.
pub(super) trait Commit {
    /// Puts the file in place.
    fn commit(self) -> Result<(), ConvertError>;
}

/// The Megatron writer puts its two files in place itself, in `finish`.
impl Commit for crate::megatron::MegatronIndex {
    fn commit(self) -> Result<(), ConvertError> {
        Ok(())
    }
}

/// The `.lodt` writer renames its file itself, in `finish`.
impl Commit for FileSink {
    fn commit(self) -> Result<(), ConvertError> {
        Ok(())
    }
}

impl Commit for BufWriter<AtomicFile> {
    fn commit(self) -> Result<(), ConvertError> {
        let file = self.into_inner().map_err(|e| {
            let (source, sink) = e.into_parts();
            AtomicError::Io {
                action: "writing",
                path: sink.get_ref().temp_path().to_path_buf(),
                source,
            }
        })?;
        file.commit()?;
        Ok(())
    }
}

/// A file writer that refuses what its format cannot hold and commits its
/// output when it finishes.
pub(super) struct Checked<W> {
    pub(super) inner: W,
    pub(super) format: Format,
}

impl<W> Checked<W> {
    fn one_tensor_error(&self, found: &str) -> ConvertError {
        ConvertError::Unsupported(format!(
            "a {} file holds exactly one tensor, {found} (choose one with --columns, or columns= in Python)",
            self.format.extension()
        ))
    }
}

impl<W> BatchWriter for Checked<W>
where
    W: BatchWriter,
    W::Output: Commit,
    ConvertError: From<W::Error>,
{
    type Error = ConvertError;
    type Output = ();

    fn write(&mut self, batch: &Batch) -> Result<(), ConvertError> {
        let capabilities = self.format.capabilities();
        if let Some(max) = capabilities.max_batches
            && self.inner.stats().batches >= max as u64
        {
            return Err(ConvertError::Unsupported(format!(
                "a {} file holds {}, but the input has more",
                self.format.extension(),
                match max {
                    1 => "one set of tensors (one batch)".to_string(),
                    n => format!("{n} batches"),
                }
            )));
        }
        match capabilities.tensors_per_batch {
            Some(1) if batch.len() != 1 => {
                return Err(self.one_tensor_error(&format!(
                    "the input batch has {} ({})",
                    batch.len(),
                    crate::error::name_list(batch.names())
                )));
            }
            Some(n) if batch.len() != n => {
                return Err(ConvertError::Unsupported(format!(
                    "a {} file holds exactly {n} tensors, the input batch has {}",
                    self.format.extension(),
                    batch.len()
                )));
            }
            _ => {}
        }
        Ok(self.inner.write(batch)?)
    }

    fn stats(&self) -> WriteStats {
        self.inner.stats()
    }

    fn finish(&mut self) -> Result<(), ConvertError> {
        if self.format.capabilities().tensors_per_batch.is_some() && self.stats().batches == 0 {
            return Err(self.one_tensor_error("the input has no batch"));
        }
        self.inner.finish()?.commit()
    }
}

/// A reader whose batch count is known from elsewhere (a `.lodt` footer read
/// beside the stream).
pub(super) struct Counted<R> {
    pub(super) inner: R,
    pub(super) total: usize,
}

impl<R: BatchReader> Iterator for Counted<R> {
    type Item = R::Item;

    fn next(&mut self) -> Option<R::Item> {
        self.inner.next()
    }
}

impl<R: BatchReader> BatchReader for Counted<R> {
    type Error = R::Error;

    fn metadata(&self) -> BTreeMap<String, String> {
        self.inner.metadata()
    }

    fn num_batches(&self) -> Option<usize> {
        Some(self.total)
    }
}
