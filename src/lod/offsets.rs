//! [`Offsets`]: one level of a LoD, borrowed from the LoD's shared block.

use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};
use zerocopy::IntoBytes;

/// One level of a [`Lod`](crate::Lod): a window of `u64` offsets in the
/// LoD's shared block, borrowed from the LoD (`&Offsets`, from
/// [`Lod::level`](crate::Lod::level) and [`Lod::levels`](crate::Lod::levels)).
///
/// The window holds the raw offsets as stored; the level's offsets are those
/// values minus the first one ("rebased on read"), so a slice of a LoD is a
/// narrower window of the same block, made in O(1) with no offset copied:
///
/// ```text
///  block:  [0, 3, 5, 9, 10, 12, 15]      window [10, 12, 15] reads as [0, 2, 5]
/// ```
///
/// Equality, hashing and [`Offsets::to_vec`] see the rebased values. A level
/// holds at least one offset.
///
/// ```
/// use lodt::Lod;
/// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]])?;
/// let (article2, rows) = lod.branch(&[2])?;
/// assert_eq!(rows, 10..15);
/// let level = article2.level(0).unwrap();
/// assert_eq!(level.raw(), &[10, 12, 15]);
/// assert_eq!(level.to_vec(), vec![0, 2, 5]);
/// assert_eq!(*level, vec![0, 2, 5]);
/// # Ok::<(), lodt::Error>(())
/// ```
#[repr(transparent)]
pub struct Offsets([u64]);

impl Offsets {
    /// The raw window `raw` as a level (no check: the LoD that hands it out
    /// was validated, and holds at least one offset per level).
    pub(crate) fn from_raw(raw: &[u64]) -> &Offsets {
        let ptr = raw as *const [u64] as *const Offsets;
        // SAFETY: `Offsets` is `repr(transparent)` over `[u64]`, so both
        // have the same layout and pointer metadata (the length); the
        // reference keeps the lifetime of `raw`.
        unsafe { &*ptr }
    }

    /// The raw offsets of the window, not rebased. The first is the level's base.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]])?;
    /// assert_eq!(lod.level(0).unwrap().raw(), &[0, 2, 5]);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn raw(&self) -> &[u64] {
        &self.0
    }

    /// The first raw offset, which the level's offsets are relative to.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]])?;
    /// assert_eq!(lod.branch(&[2])?.0.level(0).unwrap().base(), 10);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn base(&self) -> u64 {
        self.0.first().copied().unwrap_or(0)
    }

    /// The number of offsets (one more than the number of sequences).
    ///
    /// ```
    /// assert_eq!(lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]])?.level(0).unwrap().len(), 3);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false for a level of a LoD: a level holds at least one offset.
    ///
    /// ```
    /// assert!(!lodt::Lod::try_from_offsets(vec![vec![0, 2]])?.level(0).unwrap().is_empty());
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The number of sequences (`len() - 1`).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]])?;
    /// assert_eq!(lod.level(0).unwrap().num_sequences(), 2);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn num_sequences(&self) -> usize {
        self.len().saturating_sub(1)
    }

    /// Offset `i`, rebased.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]])?;
    /// let (b, _) = lod.branch(&[2])?;
    /// let level = b.level(0).unwrap();
    /// assert_eq!((level.get(1), level.get(3)), (Some(2), None));
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn get(&self, i: usize) -> Option<u64> {
        self.0.get(i).map(|&o| o - self.base())
    }

    /// The offsets, rebased.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]])?;
    /// assert_eq!(lod.level(0).unwrap().iter().collect::<Vec<_>>(), vec![0, 2, 5]);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn iter(&self) -> OffsetsIter<'_> {
        OffsetsIter {
            raw: self.0.iter(),
            base: self.base(),
        }
    }

    /// The lengths of the sequences.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]])?;
    /// assert_eq!(lod.level(0).unwrap().lengths().collect::<Vec<_>>(), vec![2, 3]);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn lengths(&self) -> impl ExactSizeIterator<Item = u64> + DoubleEndedIterator + '_ {
        self.0.windows(2).map(|w| w[1] - w[0])
    }

    /// The offsets, rebased, copied into a `Vec`.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]])?;
    /// assert_eq!(lod.level(0).unwrap().to_vec(), vec![0, 2, 5]);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn to_vec(&self) -> Vec<u64> {
        self.iter().collect()
    }

    /// The rebased offsets as little-endian bytes, as files store them:
    /// borrowed from the block when the level is not a slice (its first
    /// offset is 0), a rebased copy otherwise.
    ///
    /// ```
    /// use std::borrow::Cow;
    /// let lod = lodt::Lod::try_from_lengths(&[vec![1, 2]])?;
    /// assert!(matches!(lod.level(0).unwrap().rebased_bytes(), Cow::Borrowed(_)));
    /// let (tail, _) = lod.slice_level(0, 1, 2)?;
    /// let bytes = tail.level(0).unwrap().rebased_bytes();
    /// assert_eq!((bytes.len(), &bytes[..8], bytes[8]), (16, &[0u8; 8][..], 2));
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn rebased_bytes(&self) -> Cow<'_, [u8]> {
        if self.base() == 0 && cfg!(target_endian = "little") {
            Cow::Borrowed(self.0.as_bytes())
        } else {
            Cow::Owned(self.iter().flat_map(u64::to_le_bytes).collect())
        }
    }
}

impl<'a> IntoIterator for &'a Offsets {
    type Item = u64;
    type IntoIter = OffsetsIter<'a>;
    /// The offsets, rebased ([`Offsets::iter`]).
    fn into_iter(self) -> OffsetsIter<'a> {
        self.iter()
    }
}

/// The rebased offsets of a level ([`Offsets::iter`]).
///
/// ```
/// let lod = lodt::Lod::try_from_lengths(&[vec![1, 2]])?;
/// let (tail, _) = lod.slice_level(0, 1, 2)?;
/// let mut it = tail.level(0).unwrap().iter();
/// assert_eq!((it.len(), it.next(), it.next_back()), (2, Some(0), Some(2)));
/// # Ok::<(), lodt::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct OffsetsIter<'a> {
    raw: std::slice::Iter<'a, u64>,
    base: u64,
}

impl Iterator for OffsetsIter<'_> {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        self.raw.next().map(|&o| o - self.base)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.raw.size_hint()
    }
}

impl DoubleEndedIterator for OffsetsIter<'_> {
    fn next_back(&mut self) -> Option<u64> {
        self.raw.next_back().map(|&o| o - self.base)
    }
}

impl ExactSizeIterator for OffsetsIter<'_> {}

impl std::iter::FusedIterator for OffsetsIter<'_> {}

impl AsRef<[u64]> for Offsets {
    /// The raw offsets ([`Offsets::raw`]).
    fn as_ref(&self) -> &[u64] {
        self.raw()
    }
}

impl PartialEq for Offsets {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Offsets {}

impl PartialEq<[u64]> for Offsets {
    fn eq(&self, other: &[u64]) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter().copied())
    }
}

impl PartialEq<Vec<u64>> for Offsets {
    fn eq(&self, other: &Vec<u64>) -> bool {
        *self == other[..]
    }
}

impl<const N: usize> PartialEq<[u64; N]> for Offsets {
    fn eq(&self, other: &[u64; N]) -> bool {
        *self == other[..]
    }
}

impl PartialEq<Offsets> for Vec<u64> {
    fn eq(&self, other: &Offsets) -> bool {
        *other == self[..]
    }
}

impl PartialEq<Offsets> for [u64] {
    fn eq(&self, other: &Offsets) -> bool {
        *other == *self
    }
}

impl Hash for Offsets {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.len().hash(state);
        for o in self.iter() {
            o.hash(state);
        }
    }
}

impl serde::Serialize for Offsets {
    /// A list of the rebased offsets.
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl fmt::Debug for Offsets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}
