//! What a manifest records of the commit that made its version
//! ([`CommitRecord`], `spec/DATASET.md` section 3.3) and the times it
//! records: the types the manifest, the shard index and the writer share,
//! apart from the versions' logic (`versions.rs`).

use super::error::{DatasetError, Result};
use super::names::valid_commit_id;
use serde::{Deserialize, Serialize};

/// The operation of a version made by a dataset written before versions, or
/// rewritten by a writer that does not know them (section 3.3).
pub const UNRECORDED: &str = "unrecorded";

/// What a manifest records of the commit that made its version (the
/// manifest's `commit` field, `spec/DATASET.md` section 3.3).
///
/// `sequences` and `bytes` are the version's totals; the `_added` and
/// `_removed` counts compare them with the version it was made from (a
/// create, an append and a merge only add).
///
/// ```
/// use lodt::{Batch, LodTensor};
/// use lodt::dataset::{Dataset, DatasetWriter};
/// # let dir = tempfile::tempdir()?;
/// let batch = Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?)])?;
/// let mut w = DatasetWriter::create(dir.path(), Default::default())?;
/// w.write(&batch)?;
/// let record = w.finish()?.commit.unwrap();
/// assert_eq!((record.version, record.operation.as_str(), record.sequences_added), (1, "create", 2));
/// assert!(record.time.as_deref().unwrap().ends_with('Z'));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitRecord {
    /// The version's number: 1 for the first commit, one more for each.
    pub version: u64,
    /// When it was committed: UTC, `YYYY-MM-DDTHH:MM:SSZ` (absent for an
    /// [`UNRECORDED`] version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// The commit id of the write that made it (section 3.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_id: Option<String>,
    /// What made it: `create`, `append`, `merge` (or [`UNRECORDED`]).
    pub operation: String,
    /// The version's top-level sequences.
    pub sequences: u64,
    /// The version's shard bytes.
    pub bytes: u64,
    /// Sequences added since the version it was made from.
    pub sequences_added: u64,
    /// Sequences removed since the version it was made from.
    pub sequences_removed: u64,
    /// Shard bytes added since the version it was made from.
    pub bytes_added: u64,
    /// Shard bytes removed since the version it was made from.
    pub bytes_removed: u64,
}

impl CommitRecord {
    /// The rules of section 3.3 on a record: an operation of 1 to 32
    /// lowercase letters, digits, `_` or `-`; a valid commit id; a time of
    /// at most 64 bytes.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        let op = &self.operation;
        if op.is_empty()
            || op.len() > 32
            || !op
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-'))
        {
            return Err(format!(
                "operation {op:?}: expected 1 to 32 lowercase ASCII letters, digits, '_' or '-'"
            ));
        }
        if let Some(id) = &self.commit_id
            && !valid_commit_id(id)
        {
            return Err(format!("commit id {id:?} is not a valid commit id"));
        }
        if self.time.as_ref().is_some_and(|t| t.len() > 64) {
            return Err("time: longer than 64 bytes".into());
        }
        Ok(())
    }
}

/// The current time in UTC as `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil from days (H. Hinnant's algorithm), for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Checks a time given for a version's record: `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn check_time(time: &str) -> Result<()> {
    let b = time.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let ok = b.len() == 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'Z';
    if ok {
        Ok(())
    } else {
        Err(DatasetError::InvalidArgument(format!(
            "commit time {time:?}: expected UTC as YYYY-MM-DDTHH:MM:SSZ"
        )))
    }
}
