//! [`column_fit`]: which tensors of a `.lodt` file fit an output that has
//! one row count per batch (Arrow, Parquet, a dataset) and one metadata map
//! per file (Arrow, Parquet).

use super::*;
use crate::format::LodtFile;

/// Which tensors of a `.lodt` input can be converted together, and whether
/// its batch metadata varies: what a front end suggests (`--columns`,
/// `--metadata first`) when such a conversion fails.
///
/// See [`column_fit`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ColumnFit {
    /// The tensors whose top-level row counts ([`LodTensor::top_level_rows`](crate::LodTensor::top_level_rows);
    /// 1 for a 0-D tensor) agree with the first tensor's in every batch, in
    /// the order read.
    pub agreeing: Vec<String>,
    /// Every tensor read (the first batch's, or the columns asked), in the
    /// order read.
    pub all: Vec<String>,
    /// Whether some batch's metadata differs from the first batch's.
    pub metadata_varies: bool,
}

impl ColumnFit {
    /// Whether some tensor read does not agree ([`ColumnFit::agreeing`] is
    /// not every tensor): the conversion needs a column selection.
    ///
    /// See [`column_fit`].
    pub fn needs_columns(&self) -> bool {
        self.agreeing.len() < self.all.len()
    }
}

/// Which tensors of the `.lodt` file at `input`, read with `columns`
/// (`None`: every tensor; the first column asked sets the row count), agree
/// in their top-level row counts in every batch, and whether the batch
/// metadata varies. `None` when it cannot tell: not a readable `.lodt` file,
/// no batch, or a batch with none of the tensors.
///
/// ```
/// use lodt::{Batch, Lod, LodTensor, Writer};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("ragged.lodt");
/// let words = LodTensor::from_vec(vec![1i64, 2, 3], vec![3], Lod::try_from_lengths(&[vec![1, 2]])?)?;
/// let labels = LodTensor::from_vec(vec![0u8, 1], vec![2], Lod::empty())?;
/// let extra = LodTensor::from_vec(vec![7u8; 3], vec![3], Lod::empty())?; // 3 rows, not 2
/// let mut w = Writer::create(&path, Default::default())?;
/// w.write(&Batch::try_from_tensors([("words", words), ("labels", labels), ("extra", extra)])?)?;
/// w.finish()?;
/// let fit = lodt::convert::column_fit(&path, None).unwrap();
/// assert_eq!(fit.agreeing, ["words", "labels"]);
/// assert!(fit.needs_columns() && !fit.metadata_varies);
/// let asked = ["extra".to_string(), "words".to_string()];
/// assert_eq!(lodt::convert::column_fit(&path, Some(&asked)).unwrap().agreeing, ["extra"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn column_fit(input: impl AsRef<Path>, columns: Option<&[String]>) -> Option<ColumnFit> {
    let file = LodtFile::open(input).ok()?;
    let mut agreeing: Option<Vec<String>> = None;
    let mut all: Vec<String> = Vec::new();
    let mut first_metadata = None;
    let mut metadata_varies = false;
    for k in 0..file.num_batches() {
        let batch = file.batch(k).ok()?;
        match &first_metadata {
            None => first_metadata = Some(batch.metadata().clone()),
            Some(m) => metadata_varies |= m != batch.metadata(),
        }
        let mut rows = Vec::new();
        for t in batch.tensors() {
            let (name, v) = t.ok()?;
            if columns.is_some_and(|c| !c.iter().any(|n| n == name)) {
                continue;
            }
            let count = if v.is_scalar() { 1 } else { v.top_level_rows() };
            rows.push((name.to_owned(), count));
        }
        if let Some(columns) = columns {
            // In the order asked: the first column sets the count.
            rows.sort_by_key(|(name, _)| columns.iter().position(|n| n == name));
        }
        let first = rows.first()?.1;
        let agree: Vec<String> = rows
            .iter()
            .filter(|(_, n)| *n == first)
            .map(|(name, _)| name.clone())
            .collect();
        if all.is_empty() {
            all = rows.into_iter().map(|(name, _)| name).collect();
        }
        agreeing = Some(match agreeing {
            None => agree,
            Some(kept) => kept.into_iter().filter(|n| agree.contains(n)).collect(),
        });
    }
    Some(ColumnFit {
        agreeing: agreeing?,
        all,
        metadata_varies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Lod, LodTensor};

    fn tensor(rows: usize) -> LodTensor {
        LodTensor::from_vec(vec![0u8; rows], vec![rows], Lod::empty()).unwrap()
    }

    #[test]
    fn the_agreeing_tensors_are_those_that_agree_in_every_batch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("two.lodt");
        let mut w = crate::Writer::create(&path, Default::default()).unwrap();
        // Batch 0: a, b, c agree (2 rows); batch 1: c has 3 rows.
        let mut b0 =
            Batch::try_from_tensors([("a", tensor(2)), ("b", tensor(2)), ("c", tensor(2))])
                .unwrap();
        b0.metadata_mut().insert("step".into(), "0".into());
        let mut b1 =
            Batch::try_from_tensors([("a", tensor(1)), ("b", tensor(1)), ("c", tensor(3))])
                .unwrap();
        b1.metadata_mut().insert("step".into(), "1".into());
        w.write(&b0).unwrap();
        w.write(&b1).unwrap();
        w.finish().unwrap();
        let fit = column_fit(&path, None).unwrap();
        assert_eq!(fit.agreeing, ["a", "b"]);
        assert_eq!(fit.all, ["a", "b", "c"]);
        assert!(fit.needs_columns());
        assert!(fit.metadata_varies);
        let asked = vec!["b".to_string(), "a".to_string()];
        let fit = column_fit(&path, Some(&asked)).unwrap();
        assert_eq!(
            (fit.agreeing.clone(), fit.all.clone()),
            (
                vec!["b".to_string(), "a".to_string()],
                vec!["b".to_string(), "a".to_string()]
            )
        );
        assert!(!fit.needs_columns());
        // Not a .lodt file: cannot tell.
        assert_eq!(column_fit("tests/data/arrow/batch0.parquet", None), None);
    }
}
