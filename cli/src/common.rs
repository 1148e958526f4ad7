//! What every subcommand shares: the error type and exit codes, stdout that
//! survives a closed pipe, progress bars, size formatting, and the escaping
//! of text that comes from files.

use indicatif::{ProgressBar, ProgressStyle};
use lodt::format::FormatError;
use std::borrow::Cow;
use std::fmt;
use std::io::{IsTerminal, Write};
use std::path::Path;
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

    /// The error with `more` appended to its message.
    pub fn with_hint(mut self, more: &str) -> Self {
        self.message.push_str(more);
        self
    }

    /// The reader went away (`lodt show ... | head`): stop quietly.
    fn closed_pipe() -> Self {
        CliError {
            message: String::new(),
            code: 0,
        }
    }

    /// Prints the error (unless the pipe closed) and returns the exit code.
    ///
    /// The message is escaped ([`escape_message`]): the library quotes the
    /// names it puts in errors, but errors of the Arrow and Parquet crates
    /// may carry a column name or a key as it is.
    pub fn report(self) -> ExitCode {
        if !self.message.is_empty() {
            eprintln!("error: {}", escape_message(&self.message));
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

/// Whether `c` must not reach a terminal as it is: a control character (C0,
/// DEL, C1), a bidirectional override, embedding, isolate or mark (which
/// reorder what follows on the line), or a line or paragraph separator.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// Escapes the unsafe characters of `s` (and backslashes, if `backslash`).
fn escape(s: &str, backslash: bool) -> Cow<'_, str> {
    let needs = |c: char| is_unsafe(c) || (backslash && c == '\\');
    if !s.chars().any(needs) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '\\' if backslash => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_unsafe(c) && c.is_ascii() => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)));
            }
            c if is_unsafe(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Text from a file (a tensor name, a metadata key or value, a path) made
/// safe to print: control characters (C0, DEL, C1), bidirectional controls
/// and line or paragraph separators become `\n`, `\r`, `\t`, `\x1b`,
/// `\u{85}`, `\u{202e}`, ..., and a backslash becomes `\\`, so the output
/// reads back unambiguously and no name can move the cursor, clear the
/// screen or forge an output line. Text without such characters is returned
/// as it is.
pub fn escape_text(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

/// A whole message made safe to print, as [`escape_text`] does, except that
/// backslashes are kept: the library quotes names with Rust's `{:?}`, which
/// already escapes them (and every character [`escape_text`] escapes), and
/// escaping its backslashes again would garble them.
pub fn escape_message(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// A path, escaped as [`escape_text`] does.
pub fn path(p: &Path) -> String {
    escape_text(&p.display().to_string()).into_owned()
}

/// Names, escaped ([`escape_text`]) and comma-separated: `a, b, c`; past the
/// first 32, only how many more there are (as the library's errors do).
pub fn names<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    const SHOWN: usize = 32;
    let mut out: Vec<Cow<'_, str>> = Vec::new();
    let mut count = 0usize;
    for name in names {
        if count < SHOWN {
            out.push(escape_text(name));
        }
        count += 1;
    }
    if count > SHOWN {
        out.push(format!("... ({} more)", count - SHOWN).into());
    }
    out.join(", ")
}

/// JSON text (from `serde_json`, which escapes only C0 controls, `"` and
/// `\\`) with every other character [`escape_text`] escapes written as
/// `\uXXXX`, so the JSON decodes to the same strings and prints safely.
/// Such characters can only stand inside JSON strings, where the escape
/// means the same character.
pub fn escape_json(json: &str) -> Cow<'_, str> {
    if !json.chars().any(is_unsafe) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_unsafe(c) {
            // Every unsafe character is in the Basic Multilingual Plane.
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `1 batch`, `2 batches`: a count and its noun, singular or plural.
pub fn plural(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `[a, b, c]`.
pub fn list<T: fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    let items: Vec<String> = items.into_iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// `k=v, k2=v2` (each escaped, [`escape_text`]), or `-` when empty.
pub fn pairs(map: &std::collections::BTreeMap<String, String>) -> String {
    if map.is_empty() {
        return "-".into();
    }
    map.iter()
        .map(|(k, v)| format!("{}={}", escape_text(k), escape_text(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Progress by batches (`lodt verify`): a bar on stderr when it is a
/// terminal; with `forced` (`--progress`) and no terminal, a line on stderr
/// per batch done (for logs); else nothing.
pub struct BatchProgress {
    bar: ProgressBar,
    lines: bool,
    message: &'static str,
    total: u64,
    done: u64,
}

impl BatchProgress {
    pub fn new(total: u64, message: &'static str, forced: bool) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = if terminal {
            let bar = ProgressBar::new(total);
            let style = ProgressStyle::with_template(
                "{msg:>10} [{bar:30}] {pos}/{len} batches {elapsed} {eta}",
            )
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_message(message);
            bar
        } else {
            ProgressBar::hidden()
        };
        BatchProgress {
            bar,
            lines: forced && !terminal,
            message,
            total,
            done: 0,
        }
    }

    /// `done` batches are checked (never decreasing).
    pub fn set(&mut self, done: u64) {
        if done <= self.done {
            return;
        }
        self.done = done;
        self.bar.set_position(done);
        if self.lines {
            eprintln!("{}: {done}/{} batches", self.message, self.total);
        }
    }

    /// Runs `f` with the bar hidden (to print a line).
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    pub fn finish_and_clear(&self) {
        self.bar.finish_and_clear();
    }
}

/// The file offset each batch of `file` ends at, in order: the batches
/// checked once a verify's progress reaches an offset are those ending at
/// or before it.
pub fn batch_ends(file: &lodt::LodtFile) -> Vec<u64> {
    (0..file.num_batches())
        .map(|k| file.batch_range(k).map_or(u64::MAX, |r| r.end))
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_text_escapes_what_acts_on_a_terminal() {
        assert!(matches!(escape_text("words"), Cow::Borrowed("words")));
        assert_eq!(escape_text("x\nverify: ok"), "x\\nverify: ok");
        assert_eq!(
            escape_text("\u{1b}[2J\r\t\0\u{7f}"),
            "\\x1b[2J\\r\\t\\x00\\x7f"
        );
        assert_eq!(escape_text("\u{85}\u{9b}"), "\\u{85}\\u{9b}");
        assert_eq!(
            escape_text("a\u{202e}b\u{2066}\u{200f}\u{61c}\u{2028}\u{2029}"),
            "a\\u{202e}b\\u{2066}\\u{200f}\\u{61c}\\u{2028}\\u{2029}"
        );
        // Unambiguous: a literal backslash-n differs from an escaped line feed.
        assert_eq!(escape_text("a\\nb"), "a\\\\nb");
        // Printable non-ASCII stays as it is.
        assert_eq!(escape_text("naïve 東京 🙂"), "naïve 東京 🙂");
        // Messages keep their backslashes (names in them are already quoted).
        assert_eq!(
            escape_message("no tensor \"a\\nb\"\n\u{1b}"),
            "no tensor \"a\\nb\"\\n\\x1b"
        );
    }

    #[test]
    fn escape_json_decodes_to_the_same_text() {
        let name = "x\nv\u{1b}\u{7f}\u{85}\u{202e}\u{2028}\\\"é";
        let json = serde_json::to_string(&serde_json::json!({ "name": name })).unwrap();
        let safe = escape_json(&json);
        assert!(!safe.chars().any(is_unsafe), "{safe}");
        assert!(safe.contains("\\u007f\\u0085\\u202e\\u2028"), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back["name"], name);
    }

    #[test]
    fn names_are_escaped_and_capped() {
        assert_eq!(names(["a\nb", "c"]), "a\\nb, c");
        let many: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
        let list = names(many.iter().map(String::as_str));
        assert!(list.ends_with("t31, ... (8 more)"), "{list}");
    }
}

/// How a reading command opens a `.lodt` file: `--no-mmap` reads with
/// positional reads instead of a memory map (a file truncated by another
/// process is then an error, never a crash); `--check-bodies` checks a mapped
/// batch's body checksums when it is first read.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct ReadArgs {
    /// Read with positional reads instead of a memory map.
    #[arg(long)]
    pub no_mmap: bool,
    /// Check each batch's body checksums when it is first read, through a
    /// memory map too (one more pass over the bodies). Batches read with
    /// --no-mmap or from a URI are always checked.
    #[arg(long)]
    pub check_bodies: bool,
}

impl ReadArgs {
    /// The crate's open options these flags ask for (credentials of object
    /// stores from the environment).
    pub fn options(&self) -> lodt::location::OpenOptions {
        lodt::location::OpenOptions::default()
            .with_mmap(!self.no_mmap)
            .with_check_bodies(self.check_bodies)
    }

    /// Opens `path` as asked; an error that does not name the file says
    /// which file it is about.
    pub fn open(&self, path: &Path) -> Result<lodt::LodtFile, CliError> {
        lodt::location::open_file(&path.to_string_lossy(), &self.options()).map_err(|e| {
            let text = e.to_string();
            if text.contains(&path.display().to_string()) {
                CliError::from(e)
            } else {
                CliError::failure(format!("{text} (in {})", self::path(path)))
            }
        })
    }
}

/// A format named on the command line (`--format`): an extension without
/// the dot (`lodt`, `parquet`, `arrow`, `feather`, `arrows`, `pdtensor`,
/// `pdparams`, `pdiparams`).
pub fn parse_format(text: &str) -> Result<lodt::convert::Format, String> {
    lodt::convert::Format::from_extension(text.trim_start_matches('.')).ok_or_else(|| {
        format!(
            "unknown format {text:?}: expected lodt, parquet, arrow, feather, arrows, pdtensor, pdparams or pdiparams"
        )
    })
}

/// Whether `path` is `-`: stdin for an input, stdout for an output.
pub fn is_dash(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// The format of an input or output: `--format` if given, else the
/// extension. `-` needs `--format`.
pub fn format_of(
    path: &Path,
    format: Option<lodt::convert::Format>,
) -> Result<lodt::convert::Format, CliError> {
    if let Some(format) = format {
        return Ok(format);
    }
    if is_dash(path) {
        return Err(CliError::usage(
            "- (stdin or stdout) needs --format: lodt, arrows, pdtensor or pdparams to read (the formats read in order); any format to write",
        ));
    }
    lodt::convert::Format::from_path(path).map_err(convert_error)
}

/// Opens any readable input as batches: a file by its extension (or
/// `--format`), or `-`, stdin, in a streamable format.
pub fn open_batches(
    path: &Path,
    format: Option<lodt::convert::Format>,
    options: &lodt::convert::ConvertOptions,
) -> Result<lodt::batch::BoxBatchReader<'static, lodt::convert::ConvertError>, CliError> {
    let format = format_of(path, format)?;
    if is_dash(path) {
        format
            .open_stream(std::io::stdin(), "stdin", options)
            .map_err(convert_error)
    } else {
        format.open_reader(path, options).map_err(convert_error)
    }
}

/// A conversion error for the CLI: usage errors (exit 2) for what the
/// arguments got wrong, and messages that name the CLI's flags where the
/// library names its Rust options.
pub fn convert_error(e: lodt::convert::ConvertError) -> CliError {
    use lodt::arrow::ArrowError;
    use lodt::atomic::AtomicError;
    use lodt::convert::ConvertError;
    match e {
        ConvertError::Arrow(ArrowError::NullList {
            column,
            level,
            index,
        }) => CliError::failure(format!(
            "column {column:?}: null list at level {level}, index {index} (a LoD tensor has no nulls; read null lists as empty sequences with --null-lists empty)"
        )),
        ConvertError::Arrow(ArrowError::MetadataMismatch { batch, key }) => {
            CliError::failure(format!(
                "batch {batch}: metadata differs from the first batch's at key {key:?} (an Arrow or Parquet file stores one metadata map; --metadata first keeps the first batch's)"
            ))
        }
        ConvertError::Arrow(ArrowError::Unsupported { column, data_type }) => {
            CliError::failure(format!(
                "column {column:?}: unsupported Arrow type {data_type}: lodt reads lists of booleans, integers and floats (leave the column out with --columns)"
            ))
        }
        e @ ConvertError::Arrow(ArrowError::NoSuchColumn { .. }) => CliError::usage(e),
        e @ ConvertError::Dataset(
            lodt::dataset::DatasetError::InvalidArgument(_)
            | lodt::dataset::DatasetError::AlreadyExists { .. },
        ) => CliError::usage(e),
        e @ (ConvertError::UnknownExtension { .. }
        | ConvertError::Unsupported(_)
        | ConvertError::Atomic(AtomicError::SameFile { .. })) => CliError::usage(e),
        e => CliError::failure(e),
    }
}

/// The error for `info` or `verify` given a file in another format (by its
/// extension or its first bytes): which commands read it.
pub fn not_lodt(path: &Path, command: &str) -> Option<CliError> {
    use lodt::convert::Format;
    if lodt::location::is_uri(&path.to_string_lossy()) {
        return None; // read by ranges, as a `.lodt` file
    }
    let by_extension = Format::from_path(path).ok().filter(|f| *f != Format::Lodt);
    // Not a FIFO or a device (opening a FIFO waits for a writer): the
    // reader says what it is.
    let sniffed = || Format::sniff(path).filter(|f| *f != Format::Lodt);
    let format = by_extension.or_else(sniffed)?;
    let what = match format {
        Format::Parquet => "a Parquet file",
        Format::ArrowFile => "an Arrow IPC file",
        Format::ArrowStream => "an Arrow IPC stream",
        Format::PaddleTensor => "a Paddle tensor file",
        Format::PaddleCombined => "a Paddle parameters file",
        Format::Megatron => "a Megatron indexed dataset",
        _ => "a file in another format",
    };
    Some(CliError::usage(format!(
        "{} is {what}; lodt {command} reads .lodt files and dataset directories. Read it with lodt stats, lodt show, lodt head or lodt cat, or convert it with lodt convert {} OUT.lodt",
        self::path(path),
        self::path(path),
    )))
}

/// Whether `location` names a dataset ([`lodt::location::is_dataset`]).
pub fn is_dataset(location: &Path) -> bool {
    lodt::location::is_dataset(&location.to_string_lossy())
}

/// The store of the dataset at `location` (a directory or a URI; credentials
/// from the environment), its shards memory-mapped or read by positional reads.
pub fn dataset_store(
    location: &Path,
    mmap: bool,
) -> Result<std::sync::Arc<dyn lodt::dataset::DatasetStore>, lodt::dataset::DatasetError> {
    let options = lodt::location::OpenOptions::default().with_mmap(mmap);
    lodt::location::open_store(&location.to_string_lossy(), &options)
}
