//! [`Format::sniff`]: a file's format from its first bytes.

use super::*;

impl Format {
    /// The format of the regular file at `path` by its first bytes (its
    /// magic number), whatever its extension: `.lodt` (`\x89LODT\r\n\x1a\n`),
    /// Parquet (`PAR1`), an Arrow IPC file (`ARROW1`) or an Arrow IPC stream
    /// (a continuation marker, `ff ff ff ff`). `None` for anything else (Paddle
    /// files have no magic number), and for a path that is not a regular
    /// file: a FIFO is not opened, since opening one waits for a writer.
    ///
    /// ```
    /// use lodt::convert::Format;
    /// assert_eq!(Format::sniff("tests/data/arrow/batch0.parquet"), Some(Format::Parquet));
    /// assert_eq!(Format::sniff("spec/vectors/multi_batch.lodt"), Some(Format::Lodt));
    /// let dir = tempfile::tempdir()?;
    /// let renamed = dir.path().join("data.bin");
    /// std::fs::copy("tests/data/arrow/batch0.parquet", &renamed)?;
    /// assert_eq!(Format::sniff(&renamed), Some(Format::Parquet));
    /// assert_eq!(Format::sniff("tests/data/paddle/combined.pdparams"), None);
    /// assert_eq!(Format::sniff(dir.path()), None); // a directory
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn sniff(path: impl AsRef<Path>) -> Option<Format> {
        let mut file = format::open_regular(path).ok()?;
        let mut head = [0u8; 9];
        let mut n = 0;
        while n < head.len() {
            match std::io::Read::read(&mut file, &mut head[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        Format::from_magic(&head[..n])
    }

    /// The format whose magic number `head` (a file's first bytes) starts
    /// with, as [`Format::sniff`] reads them.
    ///
    /// ```
    /// use lodt::convert::Format;
    /// assert_eq!(Format::from_magic(b"ARROW1\0\0"), Some(Format::ArrowFile));
    /// assert_eq!(Format::from_magic(&[0xff, 0xff, 0xff, 0xff, 0x10]), Some(Format::ArrowStream));
    /// assert_eq!(Format::from_magic(b"PAR"), None); // too short
    /// ```
    pub fn from_magic(head: &[u8]) -> Option<Format> {
        if head.starts_with(&format::MAGIC) {
            Some(Format::Lodt)
        } else if head.starts_with(b"PAR1") {
            Some(Format::Parquet)
        } else if head.starts_with(b"ARROW1") {
            Some(Format::ArrowFile)
        } else if head.starts_with(&[0xff, 0xff, 0xff, 0xff]) {
            Some(Format::ArrowStream)
        } else if head.starts_with(crate::megatron::MAGIC) {
            Some(Format::Megatron) // the index file of the pair
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_numbers_name_their_formats() {
        assert_eq!(Format::from_magic(&format::MAGIC), Some(Format::Lodt));
        assert_eq!(Format::from_magic(b"PAR1...."), Some(Format::Parquet));
        assert_eq!(Format::from_magic(b"ARROW1"), Some(Format::ArrowFile));
        assert_eq!(Format::from_magic(&[0xff; 8]), Some(Format::ArrowStream));
        assert_eq!(Format::from_magic(b"MMIDIDX\0\0"), Some(Format::Megatron));
        assert_eq!(Format::from_magic(b""), None);
        assert_eq!(Format::from_magic(&format::MAGIC[..8]), None);
        assert_eq!(Format::from_magic(b"\x89LODX\r\n\x1a\n"), None);
    }

    #[test]
    fn a_short_or_missing_file_sniffs_as_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let short = dir.path().join("short");
        std::fs::write(&short, b"AR").unwrap();
        assert_eq!(Format::sniff(&short), None);
        assert_eq!(Format::sniff(dir.path().join("missing")), None);
    }
}
