//! Where a Megatron dataset's two files are, from a path naming either.

use std::path::{Path, PathBuf};

/// The index and data files (`PREFIX.idx`, `PREFIX.bin`) of the Megatron
/// dataset at `path`: its prefix (as megatron-core names datasets), or
/// either file.
///
/// ```
/// use lodt::megatron::files;
/// use std::path::PathBuf;
/// let pair = (PathBuf::from("d/c.idx"), PathBuf::from("d/c.bin"));
/// assert_eq!(files("d/c.idx".as_ref()), pair);
/// assert_eq!(files("d/c.bin".as_ref()), pair);
/// assert_eq!(files("d/c".as_ref()), pair);
/// assert_eq!(files("d/c.text_document".as_ref()).0, PathBuf::from("d/c.text_document.idx"));
/// ```
pub fn files(path: &Path) -> (PathBuf, PathBuf) {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let prefix = match ext.as_deref() {
        Some("idx" | "bin") => path.with_extension(""),
        _ => path.to_path_buf(),
    };
    let with = |ext: &str| {
        let mut p = prefix.clone().into_os_string();
        p.push(".");
        p.push(ext);
        PathBuf::from(p)
    };
    (with("idx"), with("bin"))
}
