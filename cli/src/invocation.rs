//! How to run this binary again, as the user can type it: `lodt` when the
//! `lodt` on `PATH` is this binary, the `cargo run -p lodt-cli --` form when
//! cargo ran it, else its path.

use std::path::{Path, PathBuf};

/// The command that runs this binary, for hints such as the demo's `next:`.
pub fn command() -> String {
    let exe = std::env::current_exe().ok();
    let exe = exe.as_deref().and_then(|p| p.canonicalize().ok());
    if let (Some(exe), Some(found)) = (&exe, on_path("lodt"))
        && found.canonicalize().ok().as_ref() == Some(exe)
    {
        return "lodt".into();
    }
    // `cargo run` sets CARGO_PKG_NAME for the program it runs.
    if std::env::var_os("CARGO_PKG_NAME").is_some_and(|n| n == "lodt-cli") {
        let release = exe
            .as_deref()
            .and_then(Path::parent)
            .is_some_and(|d| d.ends_with("release"));
        return if release {
            "cargo run --release -p lodt-cli --".into()
        } else {
            "cargo run -p lodt-cli --".into()
        };
    }
    match exe {
        Some(exe) => crate::common::path(&exe),
        None => "lodt".into(),
    }
}

/// The first `name` on `PATH` that is a file.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}
