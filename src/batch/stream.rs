//! The contract every file format implements: a [`BatchReader`] is an
//! iterator of batches that also tells what it knows up front (file metadata,
//! the number of batches, random access); a [`BatchWriter`] takes one batch at
//! a time and ends the file with [`BatchWriter::finish`].
//!
//! ```text
//!  reader (any format) ──Batch, Batch, …──▶ writer (any format) ──finish──▶ output
//!        BatchReader           write_all / copy          BatchWriter
//! ```
//!
//! | format                      | reader                                   | writer |
//! |-----------------------------|------------------------------------------|--------|
//! | `.lodt`, mapped             | `format::LodtFileReader` (random access) | `format::Writer` |
//! | `.lodt`, streamed           | `format::StreamReader`                   | `format::Writer` |
//! | Arrow IPC file / stream     | `arrow::ipc::IpcFileReader` / `IpcStreamReader` | `arrow::ipc::IpcFileWriter` / `IpcStreamWriter` |
//! | Parquet                     | `arrow::parquet::ParquetReader`          | `arrow::parquet::ParquetWriter` |
//! | Paddle tensor / `save_combine` | `paddle::PaddleBatchReader` (random access) | `paddle::PaddleBatchWriter` |
//!
//! Each has its own error type ([`BatchReader::Error`], [`BatchWriter::Error`]);
//! [`ErrInto`] converts it, so readers and writers of different formats meet
//! behind one error type (`lodt::convert` does that for every format it knows).
//!
//! This module is below the formats: it knows none of them, they implement it.
//!
//! ```
//! use lodt::batch::{write_all, BatchReader, BatchWriter};
//! use lodt::{format, Batch, LodTensor};
//! let t = LodTensor::from_vec(vec![1i64, 2, 3], vec![3], Default::default())?;
//! let batch = Batch::try_from_tensors([("x", t)])?;
//!
//! // Any writer: here a .lodt file in memory.
//! let writer = format::Writer::try_new(Vec::new(), Default::default())?;
//! let (bytes, stats) = write_all(writer, [Ok::<_, lodt::Error>(batch.clone()), Ok(batch.clone())])?;
//! assert_eq!((stats.batches, stats.rows), (2, 6));
//!
//! // Any reader: an iterator of batches that knows its metadata up front.
//! let reader = format::StreamReader::try_new(&bytes[..])?;
//! assert!(BatchReader::metadata(&reader).is_empty());
//! assert_eq!(reader.collect::<Result<Vec<_>, _>>()?, vec![batch.clone(), batch]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::Batch;
use std::collections::BTreeMap;
use std::marker::PhantomData;

/// A reader of batches: an iterator of `Result<Batch, Self::Error>`, in file
/// order, that also tells what the file says before its first batch.
///
/// Implemented by every format's reader (see the [module docs](self)), by
/// [`ErrInto`], by `Box<R>` and `&mut R`, and by the
/// [`rebatch`](super::rebatch::rebatch) adapter.
///
/// ```
/// use lodt::batch::BatchReader;
/// use lodt::{format, Batch, LodtFile};
/// let bytes = format::to_bytes([&Batch::new(), &Batch::new()], [("k".into(), "v".into())].into())?;
/// let mut reader = LodtFile::from_bytes(&bytes)?.into_reader();
/// assert_eq!(reader.num_batches(), Some(2));
/// assert_eq!(reader.metadata()["k"], "v");
/// assert!(reader.random_access());
/// assert_eq!(reader.read_batch(1).transpose()?, Some(Batch::new()));
/// assert_eq!(reader.count(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait BatchReader: Iterator<Item = Result<Batch, <Self as BatchReader>::Error>> {
    /// The reader's error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The file-level key/value metadata, known before the first batch
    /// (empty when the format has none). Each batch has metadata of its own
    /// ([`Batch::metadata`]).
    ///
    /// See the [trait-level example](BatchReader).
    fn metadata(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    /// The number of batches, when the file tells it before they are read
    /// (`None` for a stream).
    ///
    /// See the [trait-level example](BatchReader).
    fn num_batches(&self) -> Option<usize> {
        None
    }

    /// Whether [`BatchReader::read_batch`] reads any batch directly.
    ///
    /// See the [trait-level example](BatchReader).
    fn random_access(&self) -> bool {
        false
    }

    /// Batch `index` (0 is the first), read directly and without moving the
    /// iterator, where the format has random access; `None` where it has not
    /// (read the batches in order instead). An index past the last batch is
    /// `Some(Err(..))`.
    ///
    /// See the [trait-level example](BatchReader).
    fn read_batch(&mut self, index: usize) -> Option<Result<Batch, Self::Error>> {
        let _ = index;
        None
    }

    /// This reader, with its errors converted to `E` (see [`ErrInto`]).
    ///
    /// ```
    /// use lodt::batch::BatchReader;
    /// use lodt::format::{self, FormatError, StreamReader};
    /// let bytes = format::to_bytes([&lodt::Batch::new()], Default::default())?;
    /// let mut reader = StreamReader::try_new(&bytes[..])?.err_into::<lodt::convert::ConvertError>();
    /// assert!(matches!(reader.next(), Some(Ok(_))));
    /// # Ok::<(), FormatError>(())
    /// ```
    fn err_into<E>(self) -> ErrInto<Self, E>
    where
        Self: Sized,
        E: From<Self::Error>,
    {
        ErrInto::new(self)
    }
}

/// A writer of batches into one file or stream: [`BatchWriter::write`] one
/// batch at a time, then [`BatchWriter::finish`] to end the file (a footer,
/// an end-of-stream marker, an atomic rename) and get the output back.
///
/// Implemented by every format's writer (see the [module docs](self)), by
/// [`ErrInto`], by `Box<W>` and `&mut W`. A writer dropped before `finish`
/// leaves an incomplete output (a file writer leaves the destination
/// untouched). After `finish`, `write` and `finish` are errors.
///
/// ```
/// use lodt::batch::BatchWriter;
/// use lodt::{format, Batch, LodTensor};
/// fn save<W: BatchWriter>(mut writer: W, batch: &Batch) -> Result<W::Output, W::Error> {
///     writer.write(batch)?;
///     assert_eq!(writer.stats().batches, 1);
///     writer.finish()
/// }
/// let t = LodTensor::from_vec(vec![0.5f32; 4], vec![2, 2], Default::default())?;
/// let batch = Batch::try_from_tensors([("w", t)])?;
/// let bytes = save(format::Writer::try_new(Vec::new(), Default::default())?, &batch)?;
/// assert_eq!(lodt::LodtFile::from_bytes(&bytes)?.read_batch(0)?, batch);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait BatchWriter {
    /// The writer's error.
    type Error: std::error::Error + Send + Sync + 'static;
    /// What [`BatchWriter::finish`] returns: the underlying sink, or `()`.
    type Output;

    /// Writes one batch.
    ///
    /// See the [trait-level example](BatchWriter).
    fn write(&mut self, batch: &Batch) -> Result<(), Self::Error>;

    /// What was written so far.
    ///
    /// See the [trait-level example](BatchWriter).
    fn stats(&self) -> WriteStats;

    /// Ends the file and returns the output. Takes `&mut self`, so that a
    /// boxed `dyn BatchWriter` can be finished; the writer is spent after it.
    ///
    /// See the [trait-level example](BatchWriter).
    fn finish(&mut self) -> Result<Self::Output, Self::Error>;

    /// This writer, with its errors converted to `E` (see [`ErrInto`]).
    ///
    /// ```
    /// use lodt::batch::BatchWriter;
    /// use lodt::format::Writer;
    /// use lodt::convert::ConvertError;
    /// let mut w = Writer::try_new(Vec::new(), Default::default())?.err_into::<ConvertError>();
    /// w.write(&lodt::Batch::new())?;
    /// assert!(!w.finish()?.is_empty());
    /// # Ok::<(), ConvertError>(())
    /// ```
    fn err_into<E>(self) -> ErrInto<Self, E>
    where
        Self: Sized,
        E: From<Self::Error>,
    {
        ErrInto::new(self)
    }
}

/// A boxed reader of any format, with error type `E`: what
/// `lodt::convert::Format::open_reader` returns.
///
/// ```
/// use lodt::batch::{BatchReader, BoxBatchReader};
/// use lodt::format::{self, FormatError, StreamReader};
/// let bytes = format::to_bytes([&lodt::Batch::new()], Default::default())?;
/// let reader: BoxBatchReader<'_, FormatError> = Box::new(StreamReader::try_new(&bytes[..])?);
/// assert_eq!(reader.num_batches(), None);
/// assert_eq!(reader.count(), 1);
/// # Ok::<(), FormatError>(())
/// ```
pub type BoxBatchReader<'a, E> =
    Box<dyn BatchReader<Error = E, Item = Result<Batch, E>> + Send + 'a>;

/// A boxed writer of any format, with error type `E` and output `O`: what
/// `lodt::convert::Format::create_writer` returns.
///
/// ```
/// use lodt::batch::{BatchWriter, BoxBatchWriter};
/// use lodt::format::{FormatError, Writer};
/// let mut w: BoxBatchWriter<'_, FormatError, Vec<u8>> = Box::new(Writer::try_new(Vec::new(), Default::default())?);
/// w.write(&lodt::Batch::new())?;
/// assert!(w.finish()?.len() > 256);
/// # Ok::<(), FormatError>(())
/// ```
pub type BoxBatchWriter<'a, E, O = ()> = Box<dyn BatchWriter<Error = E, Output = O> + Send + 'a>;

/// What a [`BatchWriter`] wrote.
///
/// ```
/// use lodt::{batch::WriteStats, Batch, Lod, LodTensor};
/// let lod = Lod::try_from_lengths(&[vec![2, 1]])?;
/// let words = LodTensor::from_vec(vec![1i64, 2, 3], vec![3], lod)?;
/// let labels = LodTensor::from_vec(vec![0u8, 1], vec![2], Lod::empty())?;
/// let mut stats = WriteStats::default();
/// stats.add(&Batch::try_from_tensors([("words", words), ("labels", labels)])?);
/// assert_eq!((stats.batches, stats.tensors, stats.rows), (1, 2, 2));
/// # Ok::<(), lodt::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct WriteStats {
    /// The number of batches.
    pub batches: u64,
    /// The number of tensors, over all batches.
    pub tensors: u64,
    /// The number of top-level rows (top-level sequences, or rows of a
    /// 0-level tensor) of each batch's first tensor, over all batches. Arrow
    /// and Parquet need every tensor of a batch to have that many.
    pub rows: u64,
}

impl WriteStats {
    /// Counts one more batch.
    ///
    /// See the [type-level example](WriteStats).
    pub fn add(&mut self, batch: &Batch) {
        self.batches += 1;
        self.tensors += batch.len() as u64;
        self.rows += batch
            .iter()
            .next()
            .map_or(0, |(_, t)| t.top_level_rows() as u64);
    }
}

/// Writes every batch of `batches` with `writer`, then ends the file; returns
/// the output and what was written. Stops at the first error, of the source
/// or of the writer (the writer is then dropped unfinished). Memory holds one
/// batch at a time.
///
/// ```
/// use lodt::{arrow::ipc::IpcStreamWriter, batch::write_all, Batch, LodTensor};
/// let batch = Batch::try_from_tensors([("y", LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?;
/// let writer = IpcStreamWriter::new(Vec::new(), &Default::default());
/// let (bytes, stats) = write_all(writer, [Ok::<_, lodt::Error>(batch)])?;
/// assert_eq!(stats.batches, 1);
/// assert!(!bytes.is_empty());
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
pub fn write_all<W, I, E>(writer: W, batches: I) -> Result<(W::Output, WriteStats), W::Error>
where
    W: BatchWriter,
    I: IntoIterator<Item = Result<Batch, E>>,
    W::Error: From<E>,
{
    copy(batches, writer, |_| {})
}

/// [`write_all`], calling `progress` after each batch with what was written
/// so far: the copy step of a conversion (`reader` is typically a
/// [`BatchReader`]).
///
/// ```
/// use lodt::batch::copy;
/// use lodt::format::{self, StreamReader, Writer};
/// let bytes = format::to_bytes([&lodt::Batch::new(); 3], Default::default())?;
/// let reader = StreamReader::try_new(&bytes[..])?;
/// let mut seen = Vec::new();
/// let (copied, stats) = copy(reader, Writer::try_new(Vec::new(), Default::default())?, |s| seen.push(s.batches))?;
/// assert_eq!((seen, stats.batches), (vec![1, 2, 3], 3));
/// assert_eq!(copied, bytes);
/// # Ok::<(), format::FormatError>(())
/// ```
pub fn copy<W, I, E>(
    reader: I,
    mut writer: W,
    mut progress: impl FnMut(&WriteStats),
) -> Result<(W::Output, WriteStats), W::Error>
where
    W: BatchWriter,
    I: IntoIterator<Item = Result<Batch, E>>,
    W::Error: From<E>,
{
    for batch in reader {
        writer.write(&batch?)?;
        progress(&writer.stats());
    }
    let stats = writer.stats();
    Ok((writer.finish()?, stats))
}

/// A reader or writer whose errors are converted to `E` with `From`: how
/// readers and writers of different formats meet behind one error type.
/// Made by [`BatchReader::err_into`] and [`BatchWriter::err_into`].
///
/// ```
/// use lodt::batch::{BatchReader, ErrInto};
/// use lodt::format::{self, FormatError, StreamReader};
/// let bytes = format::to_bytes([&lodt::Batch::new()], Default::default())?;
/// let reader: ErrInto<_, lodt::convert::ConvertError> = ErrInto::new(StreamReader::try_new(&bytes[..])?);
/// assert_eq!(reader.get_ref().batches_read(), 0);
/// assert_eq!(reader.count(), 1);
/// # Ok::<(), FormatError>(())
/// ```
pub struct ErrInto<T, E> {
    inner: T,
    error: PhantomData<fn() -> E>,
}

impl<T: std::fmt::Debug, E> std::fmt::Debug for ErrInto<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ErrInto").field(&self.inner).finish()
    }
}

impl<T, E> ErrInto<T, E> {
    /// Wraps `inner`.
    ///
    /// See the [type-level example](ErrInto).
    pub fn new(inner: T) -> Self {
        ErrInto {
            inner,
            error: PhantomData,
        }
    }

    /// The wrapped reader or writer.
    ///
    /// See the [type-level example](ErrInto).
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The wrapped reader or writer, mutably.
    ///
    /// ```
    /// use lodt::batch::ErrInto;
    /// let mut w: ErrInto<_, lodt::convert::ConvertError> = ErrInto::new(lodt::format::Writer::try_new(Vec::new(), Default::default())?);
    /// assert_eq!(w.get_mut().bytes_written(), 128);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Unwraps the reader or writer.
    ///
    /// ```
    /// use lodt::batch::ErrInto;
    /// let w: ErrInto<_, lodt::convert::ConvertError> = ErrInto::new(lodt::format::Writer::try_new(Vec::new(), Default::default())?);
    /// assert_eq!(w.into_inner().batches_written(), 0);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn into_inner(self) -> T {
        self.inner
    }
}

impl<R, E> Iterator for ErrInto<R, E>
where
    R: BatchReader,
    E: From<R::Error>,
{
    type Item = Result<Batch, E>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|b| b.map_err(E::from))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<R, E> BatchReader for ErrInto<R, E>
where
    R: BatchReader,
    E: From<R::Error> + std::error::Error + Send + Sync + 'static,
{
    type Error = E;

    fn metadata(&self) -> BTreeMap<String, String> {
        self.inner.metadata()
    }

    fn num_batches(&self) -> Option<usize> {
        self.inner.num_batches()
    }

    fn random_access(&self) -> bool {
        self.inner.random_access()
    }

    fn read_batch(&mut self, index: usize) -> Option<Result<Batch, E>> {
        self.inner.read_batch(index).map(|b| b.map_err(E::from))
    }
}

impl<W, E> BatchWriter for ErrInto<W, E>
where
    W: BatchWriter,
    E: From<W::Error> + std::error::Error + Send + Sync + 'static,
{
    type Error = E;
    type Output = W::Output;

    fn write(&mut self, batch: &Batch) -> Result<(), E> {
        Ok(self.inner.write(batch)?)
    }

    fn stats(&self) -> WriteStats {
        self.inner.stats()
    }

    fn finish(&mut self) -> Result<W::Output, E> {
        Ok(self.inner.finish()?)
    }
}

macro_rules! forward_reader {
    ($($ty:ty),*) => {$(
        impl<R: BatchReader + ?Sized> BatchReader for $ty {
            type Error = R::Error;

            fn metadata(&self) -> BTreeMap<String, String> {
                (**self).metadata()
            }

            fn num_batches(&self) -> Option<usize> {
                (**self).num_batches()
            }

            fn random_access(&self) -> bool {
                (**self).random_access()
            }

            fn read_batch(&mut self, index: usize) -> Option<Result<Batch, R::Error>> {
                (**self).read_batch(index)
            }
        }
    )*};
}

macro_rules! forward_writer {
    ($($ty:ty),*) => {$(
        impl<W: BatchWriter + ?Sized> BatchWriter for $ty {
            type Error = W::Error;
            type Output = W::Output;

            fn write(&mut self, batch: &Batch) -> Result<(), W::Error> {
                (**self).write(batch)
            }

            fn stats(&self) -> WriteStats {
                (**self).stats()
            }

            fn finish(&mut self) -> Result<W::Output, W::Error> {
                (**self).finish()
            }
        }
    )*};
}

forward_reader!(Box<R>, &mut R);
forward_writer!(Box<W>, &mut W);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LodTensor;

    /// A reader over a vector, with metadata and random access.
    struct VecReader {
        batches: Vec<Batch>,
        next: usize,
    }

    impl Iterator for VecReader {
        type Item = Result<Batch, crate::Error>;
        fn next(&mut self) -> Option<Self::Item> {
            let b = self.batches.get(self.next).cloned()?;
            self.next += 1;
            Some(Ok(b))
        }
    }

    impl BatchReader for VecReader {
        type Error = crate::Error;
        fn metadata(&self) -> BTreeMap<String, String> {
            [("k".to_string(), "v".to_string())].into()
        }
        fn num_batches(&self) -> Option<usize> {
            Some(self.batches.len())
        }
        fn random_access(&self) -> bool {
            true
        }
        fn read_batch(&mut self, index: usize) -> Option<Result<Batch, crate::Error>> {
            Some(
                self.batches
                    .get(index)
                    .cloned()
                    .ok_or(crate::Error::OutOfRange {
                        what: "batch",
                        index: index as u64,
                        len: self.batches.len() as u64,
                    }),
            )
        }
    }

    /// A writer into a vector that fails on a batch named "bad".
    #[derive(Default)]
    struct VecWriter {
        batches: Option<Vec<Batch>>,
        stats: WriteStats,
    }

    impl BatchWriter for VecWriter {
        type Error = crate::Error;
        type Output = Vec<Batch>;
        fn write(&mut self, batch: &Batch) -> Result<(), crate::Error> {
            if batch.get("bad").is_some() {
                return Err(crate::Error::InvalidArgument("bad".into()));
            }
            self.batches
                .get_or_insert_with(Vec::new)
                .push(batch.clone());
            self.stats.add(batch);
            Ok(())
        }
        fn stats(&self) -> WriteStats {
            self.stats
        }
        fn finish(&mut self) -> Result<Vec<Batch>, crate::Error> {
            Ok(self.batches.take().unwrap_or_default())
        }
    }

    fn batch(rows: usize) -> Batch {
        let t = LodTensor::from_vec(vec![0u8; rows], vec![rows], Default::default()).unwrap();
        Batch::try_from_tensors([("x", t)]).unwrap()
    }

    #[test]
    fn boxed_and_borrowed_readers_forward_everything() {
        let mut reader = VecReader {
            batches: vec![batch(1), batch(2)],
            next: 0,
        };
        {
            let borrowed: &mut VecReader = &mut reader;
            assert_eq!(BatchReader::num_batches(&borrowed), Some(2));
            assert_eq!(borrowed.next().unwrap().unwrap(), batch(1));
        }
        let mut boxed: BoxBatchReader<'_, crate::Error> = Box::new(reader);
        assert!(boxed.random_access());
        assert_eq!(boxed.metadata()["k"], "v");
        assert_eq!(boxed.read_batch(0).unwrap().unwrap(), batch(1));
        assert!(boxed.read_batch(2).unwrap().is_err());
        let mut converted = boxed.err_into::<crate::convert::ConvertError>();
        assert_eq!(converted.num_batches(), Some(2));
        assert!(matches!(
            converted.read_batch(5),
            Some(Err(crate::convert::ConvertError::Core(_)))
        ));
        assert_eq!(converted.next().unwrap().unwrap(), batch(2));
        assert!(converted.next().is_none());
    }

    #[test]
    fn copy_counts_reports_and_stops_at_the_first_error() {
        let mut seen = Vec::new();
        let (out, stats) = copy(
            vec![Ok::<_, crate::Error>(batch(2)), Ok(batch(3))],
            VecWriter::default(),
            |s| seen.push((s.batches, s.rows)),
        )
        .unwrap();
        assert_eq!(out, vec![batch(2), batch(3)]);
        assert_eq!(seen, vec![(1, 2), (2, 5)]);
        assert_eq!((stats.batches, stats.tensors, stats.rows), (2, 2, 5));

        let bad = Batch::try_from_tensors([("bad", batch(1).get("x").unwrap().clone())]).unwrap();
        let err = write_all(VecWriter::default(), [Ok::<_, crate::Error>(bad)]).unwrap_err();
        assert_eq!(err, crate::Error::InvalidArgument("bad".into()));
        let source = vec![
            Ok(batch(1)),
            Err(crate::Error::InvalidArgument("source".into())),
        ];
        let mut writer = VecWriter::default();
        let err = write_all(&mut writer, source).unwrap_err();
        assert_eq!(err, crate::Error::InvalidArgument("source".into()));
        assert_eq!(writer.stats().batches, 1);

        let mut boxed: BoxBatchWriter<'_, crate::convert::ConvertError, Vec<Batch>> =
            Box::new(VecWriter::default().err_into());
        boxed.write(&batch(4)).unwrap();
        assert_eq!(boxed.finish().unwrap(), vec![batch(4)]);
    }
}
