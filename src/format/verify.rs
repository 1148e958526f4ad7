//! [`verify`]: checks every checksum and rule of a `.lodt` file.

use super::LodtFile;
use super::error::Result;
use super::section;
use std::path::Path;

/// What [`verify`] checked.
///
/// ```
/// let r = lodt::format::VerifyReport::default();
/// assert_eq!(r.batches, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// The number of batches.
    pub batches: usize,
    /// The number of tensors, over all batches.
    pub tensors: usize,
    /// The file's size in bytes (every byte was checked).
    pub file_bytes: u64,
    /// The bytes of tensor bodies.
    pub body_bytes: u64,
}

/// Opens (maps) the file at `path` and checks every byte of it: see
/// [`LodtFile::verify`].
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("v.lodt");
/// let t = lodt::LodTensor::from_vec(vec![1u8, 2, 3], vec![3], Default::default())?;
/// lodt::format::save_tensor(&path, "t", &t)?;
/// assert_eq!(lodt::format::verify(&path)?.body_bytes, 3);
/// let mut bytes = std::fs::read(&path)?;
/// let n = bytes.len();
/// bytes[n / 2] ^= 0x10;
/// std::fs::write(&path, &bytes)?;
/// assert!(lodt::format::verify(&path).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn verify(path: impl AsRef<Path>) -> Result<VerifyReport> {
    LodtFile::open(path)?.verify()
}

impl LodtFile {
    /// Checks every byte of the file: the header, footer and index (already
    /// checked by opening), and for every batch its header, metadata, checksum
    /// table, LoD, the checksum of every buffer (bodies included), that every
    /// padding byte is zero and that each tensor follows the LoD tensor rules.
    /// Stops at the first failure, whose error names the part, batch and tensor.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![1.0f32; 4], vec![4], Default::default())?;
    /// let bytes = lodt::format::to_bytes([&lodt::Batch::try_from_tensors([("t", t)])?], Default::default())?;
    /// let report = lodt::format::LodtFile::from_bytes(&bytes)?.verify()?;
    /// assert_eq!((report.batches, report.tensors, report.body_bytes), (1, 1, 16));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn verify(&self) -> Result<VerifyReport> {
        self.verify_with_progress(&mut |_, _| {})
    }

    /// [`LodtFile::verify`], calling `progress(bytes_done, bytes_total)` after
    /// each buffer.
    ///
    /// ```
    /// let bytes = lodt::format::to_bytes([&lodt::Batch::new()], Default::default())?;
    /// let file = lodt::format::LodtFile::from_bytes(&bytes)?;
    /// let mut last = 0;
    /// file.verify_with_progress(&mut |done, _| last = done)?;
    /// assert_eq!(last, bytes.len() as u64);
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    pub fn verify_with_progress(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport> {
        let total = self.file_size();
        let mut report = VerifyReport {
            batches: self.num_batches(),
            file_bytes: total,
            ..VerifyReport::default()
        };
        for k in 0..self.num_batches() {
            let (meta, bytes, offset) = self.checked_batch(k)?;
            let mut done = offset + meta.data_start as u64;
            progress(done, total);
            section::check_buffers(bytes.as_slice(), meta, offset, &mut |n| {
                done += n;
                progress(done, total);
            })?;
            report.tensors += meta.tensors.len();
            report.body_bytes += meta.body_bytes();
        }
        progress(total, total);
        Ok(report)
    }
}
