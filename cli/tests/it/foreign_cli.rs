//! The repro files of issue 9 through the CLI: errors naming the file and
//! section, no panic message, exit code 1.

use std::process::Command;

fn lodt(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lodt"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn the_cli_reports_the_repro_files_as_errors_without_panic_messages() {
    for (path, section) in [
        ("../tests/data/repro/panic_ipc.arrow", "record batch 0"),
        ("../tests/data/repro/panic_pq.parquet", "row group 0 column"),
        (
            "../tests/data/repro/dict_page_missing.parquet",
            "row group 0",
        ),
    ] {
        let (code, out, err) = lodt(&["show", path, "--json"]);
        assert_eq!(code, 1, "{path}: {err}");
        assert_eq!(out, "", "{path}");
        assert!(
            err.starts_with(&format!("error: {path}: {section}")),
            "{path}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{path}: {err}");
        assert!(!err.contains("panicked at"), "{path}: {err}");
        assert!(!err.contains("RUST_BACKTRACE"), "{path}: {err}");
        let (code, _, err) = lodt(&["convert", path, "out-never-written.lodt"]);
        assert_eq!(code, 1, "{path}: {err}");
        assert!(!err.contains("panicked at"), "{path}: {err}");
    }
}
