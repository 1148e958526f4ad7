//! Conversions between LoD tensors and nested `Vec`s of sequences.
//!
//! A [`Nested`] value is a tree: a [`Nested::Seqs`] node is a list of
//! sequences, a [`Nested::Rows`] leaf holds the values of its rows, flattened
//! (row-major, `rows × element numel` values). Each level of `Seqs` between the
//! root and the leaves is one LoD level:
//!
//! ```text
//!  Seqs[                                 lengths [[2, 1], [3, 2, 4]]
//!    Seqs[ Rows[r0 r1 r2], Rows[r3 r4] ],
//!    Seqs[ Rows[r5 r6 r7 r8] ],          rows r0 .. r8
//!  ]
//! ```
//!
//! A root `Rows` leaf is a plain tensor (no LoD). All nodes at one depth must
//! be of one kind: every leaf at the same depth, and no `Seqs` beside a leaf.
//! A `Seqs` with no children is an empty sequence of its level. If no node is
//! left below some level (each of its sequences is an empty `Seqs`), the LoD
//! ends at that level, with 0 rows.

use crate::buffer::ByteStorage;
use crate::dtype::Element;
use crate::error::{Error, Result, out_of_memory};
use crate::lod::Lod;
use crate::tensor::LodTensor;

/// A nested list of sequences whose leaves hold rows. See the [module docs](self).
///
/// ```
/// use lodt::{Nested, LodTensor};
/// let n = Nested::Seqs(vec![Nested::Rows(vec![1i64, 2, 3]), Nested::Rows(vec![4])]);
/// let t = LodTensor::from_nested(&n, &[])?;
/// assert_eq!(t.lod().to_lengths(), vec![vec![3, 1]]);
/// assert_eq!(t.to_nested::<i64>()?, n);
/// # Ok::<(), lodt::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Nested<T> {
    /// A leaf: the values of its rows, flattened (a multiple of the element's numel).
    Rows(Vec<T>),
    /// A list of sequences, one level up from its children.
    Seqs(Vec<Nested<T>>),
}

impl<T> Nested<T> {
    /// The depth of the first leaf (the number of `Seqs` above it), or `None`
    /// if there is no leaf.
    ///
    /// ```
    /// use lodt::tensor::nested::Nested;
    /// assert_eq!(Nested::Seqs(vec![Nested::Rows(vec![1u8])]).depth(), Some(1));
    /// assert_eq!(Nested::<u8>::Seqs(vec![]).depth(), None);
    /// ```
    pub fn depth(&self) -> Option<usize> {
        let mut node = self;
        let mut depth = 0;
        loop {
            match node {
                Nested::Rows(_) => return Some(depth),
                Nested::Seqs(children) => {
                    node = children.iter().find(|c| c.has_leaf())?;
                    depth += 1;
                }
            }
        }
    }

    /// The tree's LoD and its leaves in order, each leaf's values whole rows
    /// of `element_shape` (the structure [`LodTensor::from_nested`] builds a
    /// tensor from, for leaves of any type: a binding's leaves may hold one
    /// row object each, with `element_shape` `[]`). A root leaf has no LoD.
    ///
    /// It walks the tree level by level (no recursion, however deep), and
    /// allocates only in proportion to the nodes that exist. Errors as
    /// [`LodTensor::from_nested`].
    ///
    /// ```
    /// use lodt::Nested::{Rows, Seqs};
    /// let n = Seqs(vec![Seqs(vec![Rows(vec!["a", "b"]), Rows(vec![])]), Seqs(vec![Rows(vec!["c"])])]);
    /// let (lod, leaves) = n.flatten(&[])?;
    /// assert_eq!(lod.to_lengths(), vec![vec![2, 1], vec![2, 0, 1]]);
    /// assert_eq!(leaves, [&["a", "b"][..], &[], &["c"]]);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn flatten(&self, element_shape: &[usize]) -> Result<(Lod, Vec<&[T]>)> {
        let numel = element_numel(element_shape)?;
        let top = match self {
            Nested::Rows(values) => {
                rows_of(values.len(), numel, element_shape)?;
                return Ok((Lod::empty(), vec![values.as_slice()]));
            }
            Nested::Seqs(top) => top,
        };
        let mut lengths: Vec<Vec<u64>> = Vec::new();
        // The sequences of level `lengths.len()`, in order.
        let mut frontier: Vec<&Nested<T>> = top.iter().collect();
        let mut leaves = Vec::new();
        loop {
            if frontier.iter().all(|n| matches!(n, Nested::Rows(_))) {
                let mut rows = Vec::with_capacity(frontier.len());
                for leaf in &frontier {
                    if let Nested::Rows(values) = leaf {
                        rows.push(rows_of(values.len(), numel, element_shape)? as u64);
                        leaves.push(values.as_slice());
                    }
                }
                lengths.push(rows);
                break;
            }
            // Leaves of this level are at depth `lengths.len() + 1`.
            let depth = lengths.len() + 1;
            if !frontier.iter().all(|n| matches!(n, Nested::Seqs(_))) {
                // Leaves here beside a `Seqs` that claims more levels.
                let deeper = frontier
                    .iter()
                    .find(|n| matches!(n, Nested::Seqs(_)))
                    .map_or(depth + 1, |n| depth + n.depth().unwrap_or(1));
                let first = self.depth().unwrap_or(depth);
                return Err(Error::Mismatch {
                    what: "depth of a leaf (all leaves at one depth, no Seqs beside a leaf)",
                    expected: first as u64,
                    found: if first == depth { deeper } else { depth } as u64,
                });
            }
            let mut level = Vec::with_capacity(frontier.len());
            let mut next = Vec::new();
            for node in &frontier {
                if let Nested::Seqs(children) = node {
                    level.push(children.len() as u64);
                    next.extend(children.iter());
                }
            }
            lengths.push(level);
            if next.is_empty() {
                // No node below: the LoD ends at this level, with 0 rows.
                break;
            }
            frontier = next;
        }
        Ok((Lod::try_from_lengths(&lengths)?, leaves))
    }

    fn has_leaf(&self) -> bool {
        let mut stack = vec![self];
        while let Some(node) = stack.pop() {
            match node {
                Nested::Rows(_) => return true,
                Nested::Seqs(children) => stack.extend(children),
            }
        }
        false
    }
}

/// The number of values of one row of `element_shape`.
fn element_numel(element_shape: &[usize]) -> Result<usize> {
    element_shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or(Error::Overflow {
            what: "element numel",
        })
}

fn leaf_error(element_shape: &[usize], len: usize) -> Error {
    Error::ShapeMismatch {
        what: "values of a leaf against the element shape (a whole number of rows)",
        expected: element_shape.iter().map(|&d| d as u64).collect(),
        found: vec![len as u64],
    }
}

impl LodTensor {
    /// Builds a tensor from nested sequences whose rows have shape
    /// `element_shape` (Paddle's `create_lod_tensor` from nested lists). The
    /// depth of the leaves is the number of LoD levels.
    ///
    /// Errors: leaves at different depths ([`Error::Mismatch`]), a leaf whose
    /// number of values is not a multiple of the element's numel
    /// ([`Error::ShapeMismatch`]), a level with no sequence ([`Error::InvalidLod`],
    /// as `CheckLoD` rejects it).
    ///
    /// ```
    /// use lodt::{Nested::{Rows, Seqs}, LodTensor};
    /// let n = Seqs(vec![Seqs(vec![Rows(vec![1f32, 2., 3., 4.]), Rows(vec![5., 6.])]),
    ///                   Seqs(vec![Rows(vec![7., 8.])])]);
    /// let t = LodTensor::from_nested(&n, &[2])?;
    /// assert_eq!(t.shape(), &[4, 2]);
    /// assert_eq!(t.lod().to_lengths(), vec![vec![2, 1], vec![2, 1, 1]]);
    /// let mixed = Seqs(vec![Rows(vec![1f32, 2.]), Seqs(vec![])]);
    /// assert!(LodTensor::from_nested(&mixed, &[2]).is_err());
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn from_nested<T: Element>(nested: &Nested<T>, element_shape: &[usize]) -> Result<Self>
    where
        Vec<T>: ByteStorage,
    {
        let (lod, leaves) = nested.flatten(element_shape)?;
        let mut total = 0usize;
        for leaf in &leaves {
            total = total.checked_add(leaf.len()).ok_or(Error::Overflow {
                what: "values of the leaves",
            })?;
        }
        let mut values = Vec::new();
        values
            .try_reserve_exact(total)
            .map_err(|_| out_of_memory::<T>(total, "the values of nested sequences"))?;
        for leaf in &leaves {
            values.extend_from_slice(leaf);
        }
        let rows = rows_of(values.len(), element_numel(element_shape)?, element_shape)?;
        let mut shape = Vec::with_capacity(1 + element_shape.len());
        shape.push(rows);
        shape.extend_from_slice(element_shape);
        LodTensor::from_vec(values, shape, lod)
    }

    /// The tensor as nested sequences (Paddle's user-guide `LodTensor_to_Tensor`,
    /// for every level): one `Seqs` level per LoD level, leaves holding each
    /// last-level sequence's rows (a root leaf without a LoD).
    ///
    /// An error if `T` is not the dtype, or if rows have zero elements and the
    /// tensor has rows: flattened leaves could not say how many rows they hold.
    ///
    /// ```
    /// use lodt::{Nested::{Rows, Seqs}, Lod, LodTensor};
    /// let t = LodTensor::from_vec(vec![1.1f32, 2.2, 3.3, 4.4], vec![4, 1],
    ///                             Lod::try_from_lengths(&[vec![1, 3]])?)?;
    /// assert_eq!(t.to_nested::<f32>()?, Seqs(vec![Rows(vec![1.1]), Rows(vec![2.2, 3.3, 4.4])]));
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn to_nested<T: Element>(&self) -> Result<Nested<T>> {
        let values = self.as_slice::<T>()?;
        let numel = self.row_numel();
        if numel == 0 && self.rows() > 0 && !self.shape().is_empty() {
            return Err(Error::InvalidArgument(format!(
                "cannot express {} rows of element shape {:?} (no values) as flattened leaves",
                self.rows(),
                self.element_shape()
            )));
        }
        let lod = self.lod();
        let levels = lod.num_levels();
        let Some(last) = levels.checked_sub(1) else {
            return Ok(Nested::Rows(values.to_vec()));
        };
        // Bottom-up: leaves of the last level, then one grouping per level above.
        let mut nodes: Vec<Nested<T>> = lod
            .offsets(last)?
            .collect::<Vec<_>>()
            .windows(2)
            .map(|w| {
                // In range: the tensor's rows match its LoD.
                let (b, e) = (w[0] as usize * numel, w[1] as usize * numel);
                Nested::Rows(values[b..e].to_vec())
            })
            .collect();
        for l in (0..last).rev() {
            let offsets: Vec<u64> = lod.offsets(l)?.collect();
            let mut children = nodes.into_iter();
            nodes = offsets
                .windows(2)
                .map(|w| Nested::Seqs(children.by_ref().take((w[1] - w[0]) as usize).collect()))
                .collect();
        }
        Ok(Nested::Seqs(nodes))
    }
}

/// The number of rows `len` values make, or an error if they are not whole rows.
fn rows_of(len: usize, numel: usize, element_shape: &[usize]) -> Result<usize> {
    match numel {
        0 if len == 0 => Ok(0),
        0 => Err(leaf_error(element_shape, len)),
        n if len.is_multiple_of(n) => Ok(len / n),
        _ => Err(leaf_error(element_shape, len)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Nested::{Rows, Seqs};

    #[test]
    fn seed_two_levels_round_trip() {
        let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
        let t = LodTensor::from_vec((0..15i32).collect(), vec![15], lod).unwrap();
        let n = t.to_nested::<i32>().unwrap();
        let Seqs(articles) = &n else {
            panic!("expected Seqs")
        };
        assert_eq!(articles.len(), 3);
        assert_eq!(
            articles[2],
            Seqs(vec![Rows(vec![10, 11]), Rows(vec![12, 13, 14])])
        );
        assert_eq!(LodTensor::from_nested(&n, &[]).unwrap(), t);
    }

    #[test]
    fn plain_tensor_is_a_root_leaf() {
        let t = LodTensor::from_vec(vec![1u16, 2, 3, 4], vec![2, 2], Lod::empty()).unwrap();
        let n = t.to_nested::<u16>().unwrap();
        assert_eq!(n, Rows(vec![1, 2, 3, 4]));
        assert_eq!(LodTensor::from_nested(&n, &[2]).unwrap(), t);
    }

    #[test]
    fn bad_nesting_is_rejected() {
        let mixed = Seqs(vec![Rows(vec![1u8]), Seqs(vec![Rows(vec![2])])]);
        assert!(matches!(
            LodTensor::from_nested(&mixed, &[]),
            Err(Error::Mismatch { .. })
        ));
        let ragged = Seqs(vec![Rows(vec![1u8, 2, 3])]);
        assert_eq!(
            LodTensor::from_nested(&ragged, &[2]).unwrap_err(),
            Error::ShapeMismatch {
                what: "values of a leaf against the element shape (a whole number of rows)",
                expected: vec![2],
                found: vec![3]
            }
        );
        assert!(matches!(
            LodTensor::from_nested(&Seqs(Vec::<Nested<u8>>::new()), &[]),
            Err(Error::InvalidLod { .. })
        ));
    }

    #[test]
    fn empty_sequences_fit_any_depth() {
        let n = Seqs(vec![Seqs(vec![]), Seqs(vec![Rows(vec![5u8])])]);
        let t = LodTensor::from_nested(&n, &[]).unwrap();
        assert_eq!(t.lod().to_offsets(), [vec![0, 0, 1], vec![0, 1]]);
        let n = Seqs(vec![Seqs::<u8>(vec![]), Seqs(vec![])]);
        let t = LodTensor::from_nested(&n, &[3]).unwrap();
        assert_eq!(
            (t.lod().to_offsets(), t.shape()),
            (vec![vec![0, 0, 0]], &[0, 3][..])
        );
    }
}
