//! What every subcommand shares: the error type and exit codes, stdout that
//! survives a closed pipe, progress bars, and size formatting.

use indicatif::{ProgressBar, ProgressStyle};
use lodt::format::FormatError;
use std::fmt;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

/// An error that ends the program: printed as `error: ...` with its exit code.
#[derive(Debug)]
pub struct CliError {
    message: String,
    code: u8,
}

/// Exit code of a failed check or a library error.
pub const FAILURE: u8 = 1;
/// Exit code of a usage error (bad arguments, unknown batch or tensor).
pub const USAGE: u8 = 2;

impl CliError {
    /// A failure (exit code 1).
    pub fn failure(message: impl fmt::Display) -> Self {
        CliError {
            message: message.to_string(),
            code: FAILURE,
        }
    }

    /// A usage error (exit code 2).
    pub fn usage(message: impl fmt::Display) -> Self {
        CliError {
            message: message.to_string(),
            code: USAGE,
        }
    }

    /// The reader went away (`lodt show ... | head`): stop quietly.
    fn closed_pipe() -> Self {
        CliError {
            message: String::new(),
            code: 0,
        }
    }

    /// Prints the error (unless the pipe closed) and returns the exit code.
    pub fn report(self) -> ExitCode {
        if !self.message.is_empty() {
            eprintln!("error: {}", self.message);
        }
        ExitCode::from(self.code)
    }
}

impl From<FormatError> for CliError {
    fn from(e: FormatError) -> Self {
        match e {
            FormatError::NoSuchBatch { .. } | FormatError::NoSuchTensor { .. } => {
                CliError::usage(e)
            }
            e => CliError::failure(e),
        }
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            CliError::closed_pipe()
        } else {
            CliError::failure(format!("writing the output: {e}"))
        }
    }
}

/// Buffered, locked stdout.
pub fn stdout() -> std::io::BufWriter<std::io::StdoutLock<'static>> {
    std::io::BufWriter::new(std::io::stdout().lock())
}

/// Flushes `out`, mapping a closed pipe to a quiet exit.
pub fn finish(mut out: impl Write) -> Result<(), CliError> {
    out.flush()?;
    Ok(())
}

/// A progress bar of `total` bytes on stderr, hidden when stderr is not a
/// terminal (so scripts and logs see none).
pub fn progress(total: u64, message: &'static str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{msg:>10} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(message);
    bar
}

/// A byte count for people: `12.3 MiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `[a, b, c]`.
pub fn list<T: fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    let items: Vec<String> = items.into_iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// `k=v, k2=v2`, or `-` when empty.
pub fn pairs(map: &std::collections::BTreeMap<String, String>) -> String {
    if map.is_empty() {
        return "-".into();
    }
    map.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A progress bar counting `total` items, hidden when stderr is not a terminal.
pub fn progress_count(total: u64, message: &'static str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template("{msg:>10} [{bar:30}] {pos}/{len} {eta}")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(message);
    bar
}
