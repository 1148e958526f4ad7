//! [`open_regular`]: opening a local file that is read by ranges, and
//! refusing, at once and with a clear error, anything that is not a regular
//! file (a FIFO, a device, a socket, a directory).

use std::fs::File;
use std::path::Path;

/// Opens the file at `path` for reading if it is a regular file (after
/// following symbolic links), and refuses anything else with an error of kind
/// [`std::io::ErrorKind::InvalidInput`] that says what it is: a FIFO (named
/// pipe), a device, a socket or a directory has no size and cannot be read
/// by ranges, and opening a FIFO would wait, forever, for a writer.
///
/// On Linux the file is opened without waiting (`O_NONBLOCK`, cleared again
/// before it is returned), so a FIFO is refused at once; elsewhere its type
/// is looked at before it is opened, too. Readers that read in order
/// and accept pipes (the stream reader, `lodt convert` from stdin) do not use
/// it.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// let err = lodt::format::open_regular(dir.path()).unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
/// assert!(err.to_string().contains("is a directory, not a regular file"));
/// let path = dir.path().join("x.lodt");
/// std::fs::write(&path, b"abc")?;
/// assert_eq!(lodt::format::open_regular(&path)?.metadata()?.len(), 3);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn open_regular(path: impl AsRef<Path>) -> std::io::Result<File> {
    let path = path.as_ref();
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let file = {
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
        options.open(path)?
    };
    // Elsewhere, the type is looked at before opening too.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let file = {
        let kind = std::fs::metadata(path)?.file_type();
        if !kind.is_file() {
            return Err(not_regular(path, &kind));
        }
        File::open(path)?
    };
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(not_regular(path, &kind));
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    clear_nonblocking(&file)?;
    Ok(file)
}

/// The error for `path`, of type `kind`, which is not a regular file.
fn not_regular(path: &Path, kind: &std::fs::FileType) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "{} is {}, not a regular file: a .lodt, Parquet or Arrow IPC file is read by ranges and needs one (a pipe is read in order by the stream readers: `lodt convert - OUT --format lodt`, `StreamReader`)",
            path.display(),
            file_kind(kind)
        ),
    )
}

/// What a file that is not a regular file is, for messages.
fn file_kind(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// Clears `O_NONBLOCK` on `file` (set by [`open_regular`] so that opening a
/// FIFO does not wait).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn clear_nonblocking(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl with F_GETFL/F_SETFL reads and sets the status flags of
    // a descriptor that is open for as long as `file` is borrowed; it touches
    // no memory of ours.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
