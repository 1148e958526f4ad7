//! The index file (`.idx`) of a Megatron indexed dataset, parsed and
//! written byte for byte as megatron-core's `_IndexWriter` lays it out
//! (`spec/MEGATRON.md`).

use super::error::{MegatronError, Result};
use crate::dtype::DType;

/// The first 9 bytes of every index file.
pub const MAGIC: &[u8; 9] = b"MMIDIDX\x00\x00";

/// The index version this module reads and writes.
pub const VERSION: u64 = 1;

/// The bytes before the arrays: magic, version, dtype code, two counts.
pub(super) const HEADER_BYTES: u64 = 9 + 8 + 1 + 8 + 8;

/// Megatron's code of a dtype (its `DType` enum), or `None` for the lodt
/// dtypes it has no code for.
///
/// ```
/// use lodt::{DType, megatron::{dtype_code, dtype_of_code}};
/// assert_eq!(dtype_code(DType::Int32), Some(4));
/// assert_eq!(dtype_code(DType::UInt16), Some(8));
/// assert_eq!(dtype_code(DType::UInt32), None);
/// assert_eq!(dtype_of_code(7), Some(DType::Float32));
/// assert_eq!(dtype_of_code(9), None);
/// ```
pub fn dtype_code(dtype: DType) -> Option<u8> {
    CODES.iter().find(|(_, d)| *d == dtype).map(|(c, _)| *c)
}

/// The dtype of Megatron's code `code`, or `None` for an unknown code.
///
/// See [`dtype_code`].
pub fn dtype_of_code(code: u8) -> Option<DType> {
    CODES.iter().find(|(c, _)| *c == code).map(|(_, d)| *d)
}

const CODES: [(u8, DType); 8] = [
    (1, DType::UInt8),
    (2, DType::Int8),
    (3, DType::Int16),
    (4, DType::Int32),
    (5, DType::Int64),
    (6, DType::Float64),
    (7, DType::Float32),
    (8, DType::UInt16),
];

/// A parsed index: the dtype of the tokens, each sequence's length (in
/// tokens) and byte offset in the data file, and the document boundaries
/// (`documents[d]..documents[d + 1]` are document `d`'s sequences).
///
/// ```
/// use lodt::{DType, megatron::MegatronIndex};
/// let index = MegatronIndex::try_new(DType::Int32, vec![3, 1, 2], vec![2, 3])?;
/// assert_eq!(index.pointers(), &[0, 12, 16]);
/// let bytes = index.to_bytes();
/// assert_eq!(&bytes[..9], b"MMIDIDX\0\0");
/// let back = MegatronIndex::parse(&bytes, "x.idx", 24)?;
/// assert_eq!(back, index);
/// assert_eq!(back.num_documents(), 2);
/// # Ok::<(), lodt::megatron::MegatronError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MegatronIndex {
    dtype: DType,
    lengths: Vec<u32>,
    pointers: Vec<u64>,
    documents: Vec<u64>,
}

impl MegatronIndex {
    /// The index of sequences of `lengths` tokens of `dtype` laid out back
    /// to back (as megatron-core's builder lays them), whose documents end
    /// at the sequence indices `document_ends` (nondecreasing, the last the
    /// number of sequences; the leading 0 is implied).
    ///
    /// See the [type-level example](MegatronIndex).
    pub fn try_new(dtype: DType, lengths: Vec<u32>, document_ends: Vec<u64>) -> Result<Self> {
        let code_err = || {
            MegatronError::Unsupported(format!(
                "a Megatron dataset holds uint8, int8, int16, int32, int64, float32, float64 or uint16 tokens, not {dtype}"
            ))
        };
        dtype_code(dtype).ok_or_else(code_err)?;
        let mut pointers = Vec::new();
        pointers
            .try_reserve_exact(lengths.len())
            .map_err(|_| crate::Error::OutOfMemory {
                needed: (lengths.len() as u64).saturating_mul(8),
                what: "a Megatron index's pointers",
            })?;
        let mut at = 0u64;
        for &len in &lengths {
            pointers.push(at);
            at = (len as u64)
                .checked_mul(dtype.size() as u64)
                .and_then(|b| at.checked_add(b))
                .ok_or(crate::Error::Overflow {
                    what: "a Megatron sequence pointer",
                })?;
        }
        let mut documents = Vec::new();
        documents
            .try_reserve_exact(document_ends.len() + 1)
            .map_err(|_| crate::Error::OutOfMemory {
                needed: (document_ends.len() as u64).saturating_mul(8),
                what: "a Megatron index's documents",
            })?;
        documents.push(0);
        documents.extend(document_ends);
        let index = MegatronIndex {
            dtype,
            lengths,
            pointers,
            documents,
        };
        index.check_documents().map_err(|(expected, found)| {
            MegatronError::Unsupported(format!(
                "document ends: expected {expected} (the leading 0 implied), found {found}"
            ))
        })?;
        Ok(index)
    }

    /// Parses an index file's `bytes` (`path` names it in errors), checking
    /// every field against the layout and every sequence against the data
    /// file's `bin_len` bytes. Nothing is allocated beyond what the bytes
    /// hold: the counts must match the file's length exactly.
    ///
    /// ```
    /// use lodt::{DType, megatron::MegatronIndex};
    /// let bytes = MegatronIndex::try_new(DType::UInt16, vec![4], vec![1])?.to_bytes();
    /// assert!(MegatronIndex::parse(&bytes, "x.idx", 8).is_ok());
    /// let err = MegatronIndex::parse(&bytes, "x.idx", 7).unwrap_err().to_string();
    /// assert!(err.contains("sequence 0") && err.contains("at most 7"), "{err}");
    /// let err = MegatronIndex::parse(&bytes[..40], "x.idx", 8).unwrap_err().to_string();
    /// assert!(err.contains("file length"), "{err}");
    /// # Ok::<(), lodt::megatron::MegatronError>(())
    /// ```
    pub fn parse(bytes: &[u8], path: &str, bin_len: u64) -> Result<Self> {
        let corrupt = |what: &str, expected: String, found: String| MegatronError::Corrupt {
            path: path.to_owned(),
            what: what.to_owned(),
            expected,
            found,
        };
        if (bytes.len() as u64) < HEADER_BYTES {
            return Err(corrupt(
                "file length",
                format!("at least {HEADER_BYTES} bytes"),
                format!("{} bytes", bytes.len()),
            ));
        }
        if &bytes[..9] != MAGIC {
            return Err(corrupt(
                "magic",
                format!("{MAGIC:?}"),
                format!("{:?}", &bytes[..9]),
            ));
        }
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
        let version = u64_at(9);
        if version != VERSION {
            return Err(corrupt("version", VERSION.to_string(), version.to_string()));
        }
        let code = bytes[17];
        let dtype = dtype_of_code(code)
            .ok_or_else(|| corrupt("dtype code", "1 to 8".into(), code.to_string()))?;
        let (sequences, document_count) = (u64_at(18), u64_at(26));
        let need = sequences
            .checked_mul(12)
            .and_then(|s| document_count.checked_mul(8).and_then(|d| s.checked_add(d)))
            .and_then(|a| a.checked_add(HEADER_BYTES));
        let len = bytes.len() as u64;
        if need != Some(len) {
            return Err(length_error(path, need, len, sequences, document_count));
        }
        let n = sequences as usize; // fits: 12 n bytes exist
        let arrays = &bytes[HEADER_BYTES as usize..];
        let (lens, rest) = arrays.split_at(4 * n);
        let (ptrs, docs) = rest.split_at(8 * n);
        let mut lengths = Vec::with_capacity(n);
        for (i, c) in lens.chunks_exact(4).enumerate() {
            let v = i32::from_le_bytes(c.try_into().unwrap_or([0; 4]));
            let v = u32::try_from(v).map_err(|_| {
                corrupt(
                    &format!("the length of sequence {i}"),
                    ">= 0".into(),
                    v.to_string(),
                )
            })?;
            lengths.push(v);
        }
        let size = dtype.size() as u64;
        let mut pointers = Vec::with_capacity(n);
        for (i, c) in ptrs.chunks_exact(8).enumerate() {
            let p = i64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
            let end = u64::try_from(p).ok().and_then(|p| {
                (lengths[i] as u64)
                    .checked_mul(size)
                    .and_then(|b| p.checked_add(b))
            });
            match end {
                Some(end) if end <= bin_len => pointers.push(p as u64),
                _ => {
                    return Err(corrupt(
                        &format!(
                            "sequence {i} (pointer {p}, {} tokens of {size} bytes)",
                            lengths[i]
                        ),
                        format!("an end at most {bin_len}, the data file's length"),
                        end.map_or("an overflow".into(), |e| e.to_string()),
                    ));
                }
            }
        }
        // Sequences never share tokens (megatron-core lays them back to
        // back): all of them fit in the data file, which bounds every batch.
        let total = lengths
            .iter()
            .map(|&l| l as u64)
            .sum::<u64>()
            .saturating_mul(size);
        if total > bin_len {
            return Err(corrupt(
                "the sequences' tokens",
                format!("at most {bin_len} bytes, the data file's length"),
                format!("{total} bytes"),
            ));
        }
        let mut documents = Vec::with_capacity(docs.len() / 8);
        for c in docs.chunks_exact(8) {
            let d = i64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
            documents.push(u64::try_from(d).unwrap_or(u64::MAX));
        }
        let index = MegatronIndex {
            dtype,
            lengths,
            pointers,
            documents,
        };
        index
            .check_documents()
            .map_err(|(expected, found)| corrupt("the document indices", expected, found))?;
        Ok(index)
    }

    /// The index file's bytes, as megatron-core writes them.
    ///
    /// See the [type-level example](MegatronIndex).
    pub fn to_bytes(&self) -> Vec<u8> {
        let n = self.lengths.len();
        let mut out = Vec::with_capacity(HEADER_BYTES as usize + 12 * n + 8 * self.documents.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.push(dtype_code(self.dtype).unwrap_or(0));
        out.extend_from_slice(&(n as u64).to_le_bytes());
        out.extend_from_slice(&(self.documents.len() as u64).to_le_bytes());
        for &len in &self.lengths {
            out.extend_from_slice(&(len as i32).to_le_bytes());
        }
        for &p in &self.pointers {
            out.extend_from_slice(&(p as i64).to_le_bytes());
        }
        for &d in &self.documents {
            out.extend_from_slice(&(d as i64).to_le_bytes());
        }
        out
    }

    /// The dtype of the tokens.
    ///
    /// See the [type-level example](MegatronIndex).
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Each sequence's length, in tokens.
    ///
    /// See the [type-level example](MegatronIndex).
    pub fn lengths(&self) -> &[u32] {
        &self.lengths
    }

    /// Each sequence's byte offset in the data file.
    ///
    /// See the [type-level example](MegatronIndex).
    pub fn pointers(&self) -> &[u64] {
        &self.pointers
    }

    /// The document boundaries: `0`, then the sequence index each document
    /// ends at (one more entry than documents).
    ///
    /// ```
    /// use lodt::{DType, megatron::MegatronIndex};
    /// let index = MegatronIndex::try_new(DType::Int64, vec![1, 1, 1], vec![2, 3])?;
    /// assert_eq!(index.documents(), &[0, 2, 3]);
    /// # Ok::<(), lodt::megatron::MegatronError>(())
    /// ```
    pub fn documents(&self) -> &[u64] {
        &self.documents
    }

    /// The number of documents.
    ///
    /// See the [type-level example](MegatronIndex).
    pub fn num_documents(&self) -> usize {
        self.documents.len().saturating_sub(1)
    }

    /// Whether every document is one sequence (then lodt reads the dataset
    /// as a 1-level tensor).
    ///
    /// ```
    /// use lodt::{DType, megatron::MegatronIndex};
    /// assert!(MegatronIndex::try_new(DType::Int32, vec![2, 5], vec![1, 2])?.one_sequence_per_document());
    /// assert!(!MegatronIndex::try_new(DType::Int32, vec![2, 5], vec![2])?.one_sequence_per_document());
    /// # Ok::<(), lodt::megatron::MegatronError>(())
    /// ```
    pub fn one_sequence_per_document(&self) -> bool {
        self.documents.len() == self.lengths.len() + 1
            && self
                .documents
                .iter()
                .enumerate()
                .all(|(i, &d)| d == i as u64)
    }

    /// Whether the sequences `range` lie back to back in the data file.
    pub(super) fn contiguous(&self, range: std::ops::Range<usize>) -> bool {
        let size = self.dtype.size() as u64;
        (range.start..range.end.saturating_sub(1))
            .all(|i| self.pointers[i] + self.lengths[i] as u64 * size == self.pointers[i + 1])
    }

    /// Checks the document boundaries: at least the leading 0, starting at
    /// 0, nondecreasing, ending at the number of sequences. The error is
    /// what was expected and what was found.
    fn check_documents(&self) -> std::result::Result<(), (String, String)> {
        let n = self.lengths.len() as u64;
        match (self.documents.first(), self.documents.last()) {
            (Some(0), Some(&last)) if last == n => {}
            (first, last) => {
                return Err((
                    format!("0 first and {n} (the sequence count) last"),
                    format!("{first:?} first and {last:?} last"),
                ));
            }
        }
        if let Some(w) = self.documents.windows(2).position(|w| w[1] < w[0]) {
            return Err((
                format!(
                    "nondecreasing indices (entry {} >= {})",
                    w + 1,
                    self.documents[w]
                ),
                self.documents[w + 1].to_string(),
            ));
        }
        Ok(())
    }
}

/// The error for an index of `len` bytes whose counts need `need` (`None`:
/// more than a `u64`): a multimodal index (a mode per sequence after the
/// document index) is named as such.
fn length_error(
    path: &str,
    need: Option<u64>,
    len: u64,
    sequences: u64,
    document_count: u64,
) -> MegatronError {
    let found = format!("{len} bytes");
    if need.and_then(|n| n.checked_add(sequences)) == Some(len) {
        return MegatronError::Unsupported(format!(
            "{path} is a multimodal Megatron index (a mode per sequence after the document indices): lodt reads token datasets only"
        ));
    }
    let expected = match need {
        Some(n) => {
            format!("{n} bytes for {sequences} sequences and {document_count} document indices")
        }
        None => {
            format!("a size that fits {sequences} sequences and {document_count} document indices")
        }
    };
    MegatronError::Corrupt {
        path: path.to_owned(),
        what: "file length".into(),
        expected,
        found,
    }
}
