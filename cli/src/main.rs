//! `lodt`: inspect, check, repair and demo `.lodt` files.
//!
//! One module per subcommand; each has an `Args` (clap) and a `run`. To add
//! a subcommand, add a module, a variant to [`Command`] and an arm in `main`.

mod common;
mod convert;
mod dataset;
mod demo;
mod head;
mod index;
mod info;
mod invocation;
mod log;
mod recover;
mod show;
mod state;
mod stats;
mod suggest;
mod verify;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Inspect, check and repair .lodt files (LoD tensor datasets).
#[derive(Parser)]
#[command(name = "lodt", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print a file's version, batches and tensors (name, dtype, shape, LoD levels, rows, sizes), or a dataset's shards.
    Info(info::Args),
    /// Print one tensor, or one slice of it, as text or JSON.
    Show(show::Args),
    /// Summarise every tensor: sequences per level, rows, length min/p50/p99/max/mean and a histogram.
    Stats(stats::Args),
    /// Print the first rows as JSON lines: one object per top-level row, a key per tensor (values capped; --full for all).
    Head(head::HeadArgs),
    /// Print every row as JSON lines (as head does, values capped; --full for all), streaming.
    Cat(head::Args),
    /// Check every checksum, padding byte and LoD rule (of a file, or of every shard of a dataset); exit 1 on a failure.
    Verify(verify::Args),
    /// Rebuild the footer of a file whose writer was interrupted.
    Recover(recover::Args),
    /// Write a sample dataset, reopen it, slice it and verify it.
    Demo(demo::Args),
    /// Convert between .lodt, Parquet, Arrow IPC (file, stream) and Paddle files, by extension.
    Convert(convert::Args),
    /// Write a dataset's shard index (what readers open instead of its JSON manifest) if it lacks one.
    Index(index::Args),
    /// Look into a saved loader state or checkpoint (`state show`), or dry-run its resume (`state check`).
    State(state::Args),
    /// A dataset's versions, oldest first: number, time, commit id, operation, sequences and bytes added and removed.
    Log(log::LogArgs),
    /// Names a version of a dataset (default: the current one), for good: a tag never moves.
    Tag(log::TagArgs),
}

/// The last panic's report (message, location and, with `RUST_BACKTRACE`,
/// backtrace), kept by the quiet hook.
static LAST_PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Replaces the default panic hook, which prints every panic, with one that
/// only records it. The library catches panics of the Arrow and Parquet
/// decoders and reports them as errors (exit code 1), so those must not
/// print; a panic that reaches `main` is printed there.
fn install_quiet_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let backtrace = std::backtrace::Backtrace::capture();
        let report = match backtrace.status() {
            std::backtrace::BacktraceStatus::Captured => format!("{info}\n{backtrace}"),
            _ => info.to_string(),
        };
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = Some(report);
        }
    }));
}

/// Makes a write past the file-size limit (`RLIMIT_FSIZE`, `ulimit -f`) fail
/// with `EFBIG` instead of killing the process with `SIGXFSZ` (as Python
/// does): the writer then deletes its temporary file, `recover` tries its
/// repair in place, and the error is reported.
#[cfg(unix)]
fn ignore_sigxfsz() {
    // SAFETY: `signal` with `SIG_IGN` installs no handler code (nothing runs
    // in signal context); it is called at the start of `main`, before any
    // thread is started, and `SIGXFSZ` is a valid signal number.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

fn main() -> ExitCode {
    #[cfg(unix)]
    ignore_sigxfsz();
    install_quiet_panic_hook();
    match std::panic::catch_unwind(run) {
        Ok(code) => code,
        Err(_) => {
            let report = LAST_PANIC
                .lock()
                .ok()
                .and_then(|mut last| last.take())
                .unwrap_or_else(|| "panicked".into());
            eprintln!("internal error (a bug in lodt, please report it): {report}");
            ExitCode::from(101)
        }
    }
}

fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with code 0; usage errors to stderr with 2.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let result = match cli.command {
        Command::Info(args) => info::run(args),
        Command::Show(args) => show::run(args),
        Command::Stats(args) => stats::run(args),
        Command::Head(args) => head::head(args),
        Command::Cat(args) => head::cat(args),
        Command::Verify(args) => verify::run(args),
        Command::Recover(args) => recover::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Index(args) => index::run(args),
        Command::State(args) => state::run(args),
        Command::Log(args) => log::log(args),
        Command::Tag(args) => log::tag(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => e.report(),
    }
}
