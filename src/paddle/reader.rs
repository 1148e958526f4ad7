//! Reading Paddle's stream format: one record parser over any [`BufRead`], with
//! every length checked before it sizes an allocation.
//!
//! When the input's total length is known (a slice, a file), each length field
//! is checked against the bytes left and a bad one is an error before anything
//! is allocated. When it is not (a plain [`Read`]), bytes are read in bounded
//! chunks and buffers grow only with the bytes that actually arrive, so a
//! hostile length costs at most one chunk before the stream runs dry.

use super::desc::{PaddleDType, TensorDesc};
use super::error::PaddleError;
use crate::buffer::{AlignedBytes, Buffer};
use crate::error::{Error, LodRule};
use crate::lod::Lod;
use crate::tensor::{LodTensor, check_lod_fits_shape, checked_byte_len};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;
use zerocopy::IntoBytes;

/// The largest buffer grown in one step from an unverified length.
const CHUNK: usize = 1 << 16;

/// A byte source that counts its offset and, when known, the bytes left.
pub(crate) struct Input<R> {
    reader: R,
    offset: u64,
    remaining: Option<u64>,
}

impl<R: BufRead> Input<R> {
    /// A source of `remaining` bytes (`None`: unknown, read until EOF).
    pub(crate) fn new(reader: R, remaining: Option<u64>) -> Self {
        Input {
            reader,
            offset: 0,
            remaining,
        }
    }

    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The bytes left, when known.
    pub(crate) fn remaining(&self) -> Option<u64> {
        self.remaining
    }

    /// Whether the input is exhausted.
    pub(crate) fn at_end(&mut self) -> Result<bool, PaddleError> {
        if self.remaining == Some(0) {
            return Ok(true);
        }
        loop {
            match self.reader.fill_buf() {
                Ok(buf) => return Ok(buf.is_empty()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Fails early when `needed` bytes are known not to be there.
    fn check_len(&self, field: &'static str, offset: u64, needed: u64) -> Result<(), PaddleError> {
        match self.remaining {
            Some(available) if needed > available => Err(PaddleError::Truncated {
                field,
                offset,
                needed,
                available,
            }),
            _ => Ok(()),
        }
    }

    /// Reads into `buf` until it is full or the input ends; returns the count.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, PaddleError> {
        let mut got = 0;
        while let Some(rest) = buf.get_mut(got..) {
            if rest.is_empty() {
                break;
            }
            match self.reader.read(rest) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        }
        self.offset += got as u64;
        if let Some(r) = self.remaining.as_mut() {
            *r = r.saturating_sub(got as u64);
        }
        Ok(got)
    }

    /// Reads exactly `buf.len()` bytes of field `field` that starts at `offset`.
    fn exact(
        &mut self,
        buf: &mut [u8],
        field: &'static str,
        offset: u64,
        needed: u64,
        before: u64,
    ) -> Result<(), PaddleError> {
        let got = self.fill(buf)?;
        if got < buf.len() {
            return Err(PaddleError::Truncated {
                field,
                offset,
                needed,
                available: before + got as u64,
            });
        }
        Ok(())
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], PaddleError> {
        let offset = self.offset;
        self.check_len(field, offset, N as u64)?;
        let mut buf = [0u8; N];
        self.exact(&mut buf, field, offset, N as u64, 0)?;
        Ok(buf)
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, PaddleError> {
        self.array(field).map(u32::from_le_bytes)
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, PaddleError> {
        self.array(field).map(u64::from_le_bytes)
    }

    /// Reads `len` bytes in chunks of at most [`CHUNK`], handing each to `sink`.
    fn chunked(
        &mut self,
        len: u64,
        field: &'static str,
        mut sink: impl FnMut(&[u8]),
    ) -> Result<(), PaddleError> {
        let offset = self.offset;
        self.check_len(field, offset, len)?;
        let mut buf = vec![0u8; usize::try_from(len).map_or(CHUNK, |n| n.min(CHUNK))];
        let mut done = 0u64;
        while done < len {
            let n = usize::try_from(len - done).map_or(buf.len(), |n| n.min(buf.len()));
            let chunk = buf.get_mut(..n).unwrap_or(&mut []);
            self.exact(chunk, field, offset, len, done)?;
            sink(chunk);
            done += n as u64;
        }
        Ok(())
    }

    /// Reads `len` bytes into a vector.
    fn bytes(&mut self, len: u64, field: &'static str) -> Result<Vec<u8>, PaddleError> {
        let mut out = Vec::new();
        if self.remaining.is_some() {
            self.check_len(field, self.offset, len)?;
            out.reserve(usize::try_from(len).unwrap_or(0));
        }
        self.chunked(len, field, |chunk| out.extend_from_slice(chunk))?;
        Ok(out)
    }

    /// Reads `byte_size / 8` little-endian `u64`s (`byte_size` is a multiple of 8).
    fn u64s(&mut self, byte_size: u64, field: &'static str) -> Result<Vec<u64>, PaddleError> {
        let mut out = Vec::new();
        if self.remaining.is_some() {
            self.check_len(field, self.offset, byte_size)?;
            out.reserve(usize::try_from(byte_size / 8).unwrap_or(0));
        }
        // CHUNK is a multiple of 8, so every chunk holds whole values.
        self.chunked(byte_size, field, |chunk| {
            out.extend(chunk.chunks_exact(8).map(|b| {
                let mut word = [0u8; 8];
                word.copy_from_slice(b);
                u64::from_le_bytes(word)
            }))
        })?;
        Ok(out)
    }

    /// Reads `len` bytes of tensor data into storage aligned for every dtype.
    fn data(&mut self, len: usize, field: &'static str) -> Result<Buffer, PaddleError> {
        let offset = self.offset;
        self.check_len(field, offset, len as u64)?;
        if self.remaining.is_some() {
            // Checked against the input's real length: safe to allocate.
            let mut buf = AlignedBytes::zeroed(len);
            self.exact(buf.as_mut_slice(), field, offset, len as u64, 0)?;
            return Ok(Buffer::from_storage(Arc::new(buf)));
        }
        // Unknown length: grow 8-aligned words with the bytes that arrive.
        let mut words: Vec<u64> = Vec::new();
        let mut done = 0usize;
        while done < len {
            let n = (len - done).min(CHUNK);
            words.resize((done + n).div_ceil(8), 0);
            let dst = words
                .as_mut_bytes()
                .get_mut(done..done + n)
                .unwrap_or(&mut []);
            self.exact(dst, field, offset, len as u64, done as u64)?;
            done += n;
        }
        Ok(Buffer::try_new(Arc::new(words), 0..len)?)
    }
}

fn too_short(level: usize, offset: u64, found: u64) -> PaddleError {
    PaddleError::Lod {
        offset,
        source: Error::InvalidLod {
            level,
            index: 0,
            rule: LodRule::TooShort,
            expected: 2,
            found,
        },
    }
}

/// Reads one record (`SerializeToStream` output) from `input`.
pub(crate) fn read_record<R: BufRead>(input: &mut Input<R>) -> Result<LodTensor, PaddleError> {
    let start = input.offset();
    let version = input.u32("LoDTensor version")?;
    if version != 0 {
        return Err(PaddleError::Version {
            field: "LoDTensor version",
            offset: start,
            found: version,
        });
    }

    let lod_offset = input.offset();
    let count = input.u64("LoD level count")?;
    if count > crate::lod::MAX_LOD_LEVELS as u64 {
        return Err(PaddleError::TooManyLevels {
            offset: lod_offset,
            found: count,
            max: crate::lod::MAX_LOD_LEVELS as u64,
        });
    }
    // Each level needs at least its 8-byte size field.
    input.check_len("LoD levels", input.offset(), count.saturating_mul(8))?;
    let mut levels = Vec::new();
    let mut level = 0usize;
    while (level as u64) < count {
        let at = input.offset();
        let size = input.u64("LoD level byte size")?;
        if !size.is_multiple_of(8) {
            return Err(PaddleError::LevelByteSize {
                level,
                offset: at,
                found: size,
            });
        }
        if size < 16 {
            return Err(too_short(level, lod_offset, size / 8));
        }
        levels.push(input.u64s(size, "LoD level offsets")?);
        level += 1;
    }
    let lod = Lod::try_from_offsets(levels).map_err(|source| PaddleError::Lod {
        offset: lod_offset,
        source,
    })?;

    let at = input.offset();
    let tensor_version = input.u32("Tensor version")?;
    if tensor_version != 0 {
        return Err(PaddleError::Version {
            field: "Tensor version",
            offset: at,
            found: tensor_version,
        });
    }
    let at = input.offset();
    let desc_len = i32::from_le_bytes(input.array("TensorDesc length")?);
    let desc_len = u64::try_from(desc_len).map_err(|_| PaddleError::NegativeDescLength {
        offset: at,
        found: desc_len,
    })?;
    let desc_offset = input.offset();
    let desc_bytes = input.bytes(desc_len, "TensorDesc")?;
    let desc = TensorDesc::decode(&desc_bytes).map_err(|source| PaddleError::Desc {
        offset: desc_offset,
        source,
    })?;
    let paddle_dtype = PaddleDType::from_code(desc.data_type).ok_or(PaddleError::UnknownDType {
        offset: desc_offset,
        found: desc.data_type,
    })?;
    let dtype = paddle_dtype.to_dtype().ok_or(PaddleError::ComplexDType {
        offset: desc_offset,
        found: paddle_dtype.name(),
    })?;
    let overflow = || PaddleError::DimsOverflow {
        offset: desc_offset,
        dtype,
        dims: desc.dims.clone(),
    };
    let mut shape = Vec::with_capacity(desc.dims.len());
    for (index, &dim) in desc.dims.iter().enumerate() {
        if dim < 0 {
            return Err(PaddleError::NegativeDim {
                offset: desc_offset,
                index,
                found: dim,
            });
        }
        shape.push(usize::try_from(dim).map_err(|_| overflow())?);
    }
    let byte_len = checked_byte_len(dtype, &shape).map_err(|_| overflow())?;
    check_lod_fits_shape(&shape, lod.num_levels(), lod.num_rows()).map_err(|source| {
        PaddleError::Tensor {
            offset: start,
            source,
        }
    })?;

    let data = input.data(byte_len, "tensor data")?;
    LodTensor::try_from_parts(dtype, shape, data, lod).map_err(|source| PaddleError::Tensor {
        offset: start,
        source,
    })
}

/// Reads exactly one record, then requires the end of the input.
pub(crate) fn read_single<R: BufRead>(mut input: Input<R>) -> Result<LodTensor, PaddleError> {
    let tensor = read_record(&mut input)?;
    if !input.at_end()? {
        return Err(PaddleError::TrailingBytes {
            offset: input.offset(),
            count: input.remaining(),
        });
    }
    Ok(tensor)
}

/// Reads records until the input ends.
pub(crate) fn read_all<R: BufRead>(input: Input<R>) -> Result<Vec<LodTensor>, PaddleError> {
    PaddleReader::from_input(input).collect()
}

/// Opens a file as an input of known length.
pub(crate) fn open(path: &Path) -> Result<Input<BufReader<File>>, PaddleError> {
    let file = File::open(path)?;
    let metadata = file.metadata()?;
    // Only a regular file's length is known up front; a pipe or device
    // reports 0, and is read to its end with bounded chunks instead.
    let len = metadata.is_file().then_some(metadata.len());
    Ok(Input::new(BufReader::new(file), len))
}

/// Reads the tensors of a combined stream one at a time: an iterator of
/// `Result<LodTensor, PaddleError>` that stops after the first error.
///
/// Memory holds one tensor at a time, so it suits large parameter files.
///
/// ```
/// use lodt::{paddle, LodTensor};
/// let a = LodTensor::from_vec(vec![1f32, 2.0], vec![2], Default::default())?;
/// let b = LodTensor::from_vec(vec![7i64], vec![1], Default::default())?;
/// let bytes = paddle::combined_to_bytes([&a, &b])?;
/// let mut reader = paddle::PaddleReader::new(&bytes[..]);
/// assert_eq!(reader.next().unwrap()?, a);
/// assert_eq!(reader.next().unwrap()?, b);
/// assert!(reader.next().is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PaddleReader<R> {
    input: Input<R>,
    index: usize,
    done: bool,
}

impl<R: Read> PaddleReader<BufReader<R>> {
    /// Reads from `reader` until it ends (its length is not known in advance,
    /// so lengths are checked as the bytes arrive).
    ///
    /// ```
    /// let mut empty = lodt::paddle::PaddleReader::new(std::io::empty());
    /// assert!(empty.next().is_none());
    /// ```
    pub fn new(reader: R) -> Self {
        Self::from_input(Input::new(BufReader::new(reader), None))
    }

    /// Reads records from the first `len` bytes of `reader` (for example a
    /// file of known size): a length field that claims more than is left is an
    /// error before anything is allocated. Nothing past `len` is returned.
    ///
    /// ```
    /// let bytes = [0u8; 4];
    /// let mut r = lodt::paddle::PaddleReader::with_len(&bytes[..], 4);
    /// assert!(r.next().unwrap().is_err()); // a version, then nothing
    /// ```
    pub fn with_len(reader: R, len: u64) -> Self {
        Self::from_input(Input::new(BufReader::new(reader), Some(len)))
    }
}

impl PaddleReader<BufReader<File>> {
    /// Reads the file at `path`, whose size bounds every length field.
    ///
    /// ```
    /// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/paddle/combined.pdparams");
    /// let mut count = 0;
    /// for tensor in lodt::paddle::PaddleReader::open(path)? {
    ///     assert!(tensor?.numel() > 0);
    ///     count += 1;
    /// }
    /// assert_eq!(count, 8);
    /// # Ok::<(), lodt::paddle::PaddleError>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PaddleError> {
        Ok(Self::from_input(open(path.as_ref())?))
    }
}

impl<R: BufRead> PaddleReader<R> {
    fn from_input(input: Input<R>) -> Self {
        PaddleReader {
            input,
            index: 0,
            done: false,
        }
    }

    /// The number of tensors read so far.
    ///
    /// ```
    /// let r = lodt::paddle::PaddleReader::new(std::io::empty());
    /// assert_eq!(r.tensors_read(), 0);
    /// ```
    pub fn tensors_read(&self) -> usize {
        self.index
    }

    /// The stream offset of the next record.
    ///
    /// ```
    /// let r = lodt::paddle::PaddleReader::new(std::io::empty());
    /// assert_eq!(r.offset(), 0);
    /// ```
    pub fn offset(&self) -> u64 {
        self.input.offset()
    }
}

impl<R: BufRead> Iterator for PaddleReader<R> {
    type Item = Result<LodTensor, PaddleError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let result = match self.input.at_end() {
            Ok(true) => {
                self.done = true;
                return None;
            }
            Ok(false) => read_record(&mut self.input),
            Err(e) => Err(e),
        };
        let index = self.index;
        self.index += 1;
        Some(result.map_err(|e| {
            self.done = true;
            PaddleError::InTensor {
                index,
                source: Box::new(e),
            }
        }))
    }
}

impl<R: BufRead> std::iter::FusedIterator for PaddleReader<R> {}
