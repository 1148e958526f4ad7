//! The `.lodt` side of the [`BatchReader`] / [`BatchWriter`] contract: a
//! [`LodtFile`] read in order or at random ([`LodtFileReader`]), the
//! [`StreamReader`], and the [`Writer`]. Built on their public API only.

use super::error::FormatError;
use super::{LodtFile, StreamReader, Writer};
use crate::batch::{Batch, BatchReader, BatchWriter, WriteStats};
use std::collections::BTreeMap;
use std::io::{Read, Write};

/// A [`LodtFile`] as a [`BatchReader`]: its batches in order (as
/// [`LodtFile::read_batch`] reads them, tensors over the file's storage), and
/// any batch at random ([`BatchReader::read_batch`]). Made by
/// [`LodtFile::into_reader`].
///
/// ```
/// use lodt::batch::BatchReader;
/// use lodt::{format, Batch, LodTensor, LodtFile};
/// let t = LodTensor::from_vec(vec![1i32, 2], vec![2], Default::default())?;
/// let batch = Batch::try_from_tensors([("t", t)])?;
/// let bytes = format::to_bytes([&Batch::new(), &batch], Default::default())?;
/// let mut reader = LodtFile::from_bytes(&bytes)?.into_reader();
/// assert_eq!(reader.num_batches(), Some(2));
/// assert_eq!(reader.read_batch(1).transpose()?, Some(batch.clone()));
/// assert_eq!(reader.collect::<Result<Vec<_>, _>>()?, vec![Batch::new(), batch]);
/// # Ok::<(), format::FormatError>(())
/// ```
#[derive(Debug)]
pub struct LodtFileReader {
    file: LodtFile,
    next: usize,
}

impl LodtFile {
    /// This file as a [`BatchReader`], from its first batch.
    ///
    /// See [`LodtFileReader`].
    pub fn into_reader(self) -> LodtFileReader {
        LodtFileReader::from(self)
    }
}

impl From<LodtFile> for LodtFileReader {
    /// Reads `file` from its first batch.
    ///
    /// ```
    /// let bytes = lodt::format::to_bytes([], Default::default())?;
    /// let reader = lodt::format::LodtFileReader::from(lodt::LodtFile::from_bytes(&bytes)?);
    /// assert_eq!(reader.count(), 0);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    fn from(file: LodtFile) -> Self {
        LodtFileReader { file, next: 0 }
    }
}

impl LodtFileReader {
    /// The file.
    ///
    /// ```
    /// let bytes = lodt::format::to_bytes([], Default::default())?;
    /// let reader = lodt::LodtFile::from_bytes(&bytes)?.into_reader();
    /// assert_eq!(reader.file().num_batches(), 0);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn file(&self) -> &LodtFile {
        &self.file
    }

    /// The file back.
    ///
    /// ```
    /// let bytes = lodt::format::to_bytes([], Default::default())?;
    /// let file = lodt::LodtFile::from_bytes(&bytes)?.into_reader().into_file();
    /// assert_eq!(file.num_batches(), 0);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn into_file(self) -> LodtFile {
        self.file
    }
}

impl Iterator for LodtFileReader {
    type Item = Result<Batch, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.file.num_batches() {
            return None;
        }
        let batch = self.file.read_batch(self.next);
        // An error ends the iteration, as for the other readers.
        self.next = if batch.is_ok() {
            self.next + 1
        } else {
            usize::MAX
        };
        Some(batch)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.file.num_batches().saturating_sub(self.next);
        (left.min(1), Some(left))
    }
}

impl std::iter::FusedIterator for LodtFileReader {}

impl BatchReader for LodtFileReader {
    type Error = FormatError;

    fn metadata(&self) -> BTreeMap<String, String> {
        self.file.metadata().clone()
    }

    fn num_batches(&self) -> Option<usize> {
        Some(self.file.num_batches())
    }

    fn random_access(&self) -> bool {
        true
    }

    fn read_batch(&mut self, index: usize) -> Option<Result<Batch, FormatError>> {
        Some(self.file.read_batch(index))
    }
}

/// Every checksum is checked as the batches stream by; the batch count is
/// not known up front.
///
/// ```
/// use lodt::batch::BatchReader;
/// let bytes = lodt::format::to_bytes([&lodt::Batch::new()], [("k".into(), "v".into())].into())?;
/// let reader = lodt::format::StreamReader::try_new(&bytes[..])?;
/// assert_eq!(BatchReader::metadata(&reader)["k"], "v");
/// assert_eq!(reader.num_batches(), None);
/// # Ok::<(), lodt::format::FormatError>(())
/// ```
impl<R: Read> BatchReader for StreamReader<R> {
    type Error = FormatError;

    fn metadata(&self) -> BTreeMap<String, String> {
        StreamReader::metadata(self).clone()
    }
}

/// See [`Writer`]: `finish` writes the footer (and, for a new file, renames
/// it into place).
///
/// ```
/// use lodt::batch::{write_all, BatchWriter};
/// let w = lodt::format::Writer::try_new(Vec::new(), Default::default())?;
/// let (bytes, stats) = write_all(w, [Ok::<_, lodt::Error>(lodt::Batch::new())])?;
/// assert_eq!((stats.batches, lodt::LodtFile::from_bytes(&bytes)?.num_batches()), (1, 1));
/// # Ok::<(), lodt::format::FormatError>(())
/// ```
impl<W: Write> BatchWriter for Writer<W> {
    type Error = FormatError;
    type Output = W;

    fn write(&mut self, batch: &Batch) -> Result<(), FormatError> {
        Writer::write(self, batch)
    }

    fn stats(&self) -> WriteStats {
        Writer::stats(self)
    }

    fn finish(&mut self) -> Result<W, FormatError> {
        Writer::finish(self)
    }
}
