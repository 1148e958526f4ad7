//! [`Pattern`]: how a reader is about to read a file's batches, the advice a
//! source ([`RangeSource::will_read`](super::RangeSource::will_read)) and a
//! memory map ([`MappedFile`](super::MappedFile)) act on.

/// How a range is about to be read ([`RangeSource::will_read`](super::RangeSource::will_read)).
///
/// ```
/// assert_ne!(lodt::format::Pattern::Random, lodt::format::Pattern::Sequential);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// Batches in no particular order: read what is asked, nothing around it
    /// (a map: `MADV_WILLNEED` on the batch while random access is sparse;
    /// positional reads: `POSIX_FADV_RANDOM`).
    Random,
    /// Batches in file order: read ahead (a map: `MADV_SEQUENTIAL`, and the
    /// OS reads ahead; positional reads: `POSIX_FADV_SEQUENTIAL`, then
    /// `POSIX_FADV_WILLNEED` on the batches ahead).
    Sequential,
}

impl Pattern {
    /// The pattern's code, as a source records the one last set.
    pub(super) fn code(self) -> u8 {
        match self {
            Pattern::Random => 1,
            Pattern::Sequential => 2,
        }
    }
}
