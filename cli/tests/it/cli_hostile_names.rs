//! Tensor names and metadata from a hostile file reach the terminal escaped:
//! no command prints a raw control character, a bidirectional override or a
//! line separator, so no name can clear the screen or forge an output line,
//! and `--json` still decodes to the exact names.

use lodt::{Batch, Lod, LodTensor, LodtFile, format};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

/// Names that try to forge a line, clear the screen, return the carriage,
/// reverse the text, use a C1 CSI, a line separator, a tab, DEL and a backslash.
const HOSTILE: [&str; 8] = [
    "x\nverify: ok",
    "\u{1b}[2Jclear",
    "over\rwrite",
    "rtl\u{202e}txt.exe",
    "c1\u{9b}31m",
    "line\u{2028}sep",
    "tab\tdel\u{7f}",
    "back\\slash",
];

/// Runs lodt; returns (exit code, stdout, stderr).
fn lodt<S: AsRef<OsStr>>(args: &[S]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lodt"))
        .args(args)
        .output()
        .expect("the lodt binary runs");
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).expect("output is UTF-8");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

/// Whether `c` would act on a terminal (a line feed only ends a line).
fn unsafe_char(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// Asserts that `out` has no unsafe character and no forged line.
fn assert_clean(what: &str, out: &str) {
    if let Some(c) = out.chars().find(|&c| unsafe_char(c)) {
        panic!("{what}: raw {c:?} in {out:?}");
    }
    assert!(
        !out.lines()
            .any(|l| l.trim_start().starts_with("verify: ok")),
        "{what}: forged line in {out:?}"
    );
}

/// A file whose tensor names, metadata keys and values are all hostile.
fn hostile_file(dir: &Path) -> std::path::PathBuf {
    let mut batch = Batch::new();
    for (i, name) in HOSTILE.iter().enumerate() {
        let lod = Lod::try_from_lengths(&[vec![1, 2]]).unwrap();
        let t = LodTensor::from_vec(vec![i as i32; 3], vec![3], lod).unwrap();
        batch.push(*name, t).unwrap();
    }
    for (i, s) in HOSTILE.iter().enumerate() {
        batch
            .metadata_mut()
            .insert(format!("{s}{i}"), format!("value {s}"));
    }
    let meta: BTreeMap<String, String> = HOSTILE
        .iter()
        .map(|s| (format!("file {s}"), s.to_string()))
        .collect();
    let path = dir.join("hostile.lodt");
    let mut w = format::Writer::create(&path, meta).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
    path
}

#[test]
fn info_escapes_names_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let file = hostile_file(dir.path());
    let (code, out, err) = lodt(&[OsStr::new("info"), file.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert_clean("info", &out);
    assert!(out.contains("  x\\nverify: ok "), "{out}");
    assert!(out.contains("\\x1b[2Jclear"), "{out}");
    assert!(out.contains("over\\rwrite"), "{out}");
    assert!(out.contains("rtl\\u{202e}txt.exe"), "{out}");
    assert!(out.contains("c1\\u{9b}31m"), "{out}");
    assert!(out.contains("line\\u{2028}sep"), "{out}");
    assert!(out.contains("tab\\tdel\\x7f"), "{out}");
    assert!(out.contains("back\\\\slash"), "{out}");
    // Metadata keys and values, of the file and of the batch.
    assert!(out.contains("file x\\nverify: ok=x\\nverify: ok"), "{out}");
    assert!(
        out.contains("x\\nverify: ok0=value x\\nverify: ok"),
        "{out}"
    );
    // Five header lines, the schema (a line per tensor), the batches (a
    // header and one batch line), the totals (a header, a line per tensor,
    // the bytes): nothing forged.
    assert_eq!(
        out.lines().count(),
        5 + HOSTILE.len() + 2 + 1 + HOSTILE.len() + 1,
        "{out}"
    );
}

#[test]
fn info_json_decodes_to_the_exact_names() {
    let dir = tempfile::tempdir().unwrap();
    let file = hostile_file(dir.path());
    let (code, out, err) = lodt(&[OsStr::new("info"), file.as_os_str(), OsStr::new("--json")]);
    assert_eq!(code, 0, "{err}");
    assert_clean("info --json", &out);
    assert_eq!(out.lines().count(), 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = v["batches"][0]["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, HOSTILE);
    for (i, s) in HOSTILE.iter().enumerate() {
        assert_eq!(v["metadata"][format!("file {s}")], *s);
        assert_eq!(
            v["batches"][0]["metadata"][format!("{s}{i}")],
            format!("value {s}")
        );
    }
}

#[test]
fn show_escapes_the_name_and_json_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = hostile_file(dir.path());
    for (i, name) in HOSTILE.iter().enumerate() {
        let args = [
            OsStr::new("show"),
            file.as_os_str(),
            OsStr::new("--tensor"),
            OsStr::new(name),
        ];
        let (code, out, err) = lodt(&args);
        assert_eq!(code, 0, "{err}");
        assert_clean("show", &out);
        let header = out.lines().next().unwrap();
        assert!(header.starts_with("tensor  "), "{out}");
        assert!(header.ends_with(" (batch 0)"), "{out}");
        assert!(out.contains(&format!("rows 1..3: {i} {i}")), "{out}");

        let mut json_args = args.to_vec();
        json_args.push(OsStr::new("--json"));
        let (code, out, err) = lodt(&json_args);
        assert_eq!(code, 0, "{err}");
        assert_clean("show --json", &out);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["name"], *name);
        assert_eq!(v["values"], serde_json::json!([i, i, i]));
    }
}

#[test]
fn errors_that_list_names_escape_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = hostile_file(dir.path());
    // No --tensor: the names to choose from.
    let (code, out, err) = lodt(&[OsStr::new("show"), file.as_os_str()]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert_clean("show without --tensor", &err);
    assert!(
        err.contains("choose one with --tensor: x\\nverify: ok, "),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // An unknown name, itself hostile: the library's message.
    let (code, _, err) = lodt(&[
        OsStr::new("show"),
        file.as_os_str(),
        OsStr::new("--tensor"),
        OsStr::new("nope\u{1b}]0;title\u{7}"),
    ]);
    assert_eq!(code, 2);
    assert_clean("show --tensor unknown", &err);
    assert!(
        err.contains("no tensor \"nope\\u{1b}]0;title\\u{7}\"; it has: x\\nverify: ok, "),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn verify_names_a_damaged_tensor_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let file = hostile_file(dir.path());
    let (code, out, err) = lodt(&[OsStr::new("verify"), file.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert_clean("verify", &out);
    // Damage the body of the tensor named "x\nverify: ok".
    let at = LodtFile::open(&file)
        .unwrap()
        .tensor_buffers(0, HOSTILE[0])
        .unwrap()
        .body
        .start;
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[at] ^= 1;
    std::fs::write(&file, bytes).unwrap();
    let (code, out, err) = lodt(&[OsStr::new("verify"), file.as_os_str()]);
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert_clean("verify (damaged)", &err);
    assert!(err.contains("tensor \"x\\nverify: ok\""), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn convert_keeps_names_and_escapes_messages() {
    let dir = tempfile::tempdir().unwrap();
    let file = hostile_file(dir.path());
    for ext in ["arrow", "arrows", "parquet", "lodt"] {
        let out_path = dir.path().join(format!("out\u{1b}[2J.{ext}"));
        let (code, out, err) = lodt(&[
            OsStr::new("convert"),
            file.as_os_str(),
            out_path.as_os_str(),
        ]);
        assert_eq!(code, 0, "{err}");
        assert_clean("convert", &out);
        assert!(out.contains("out\\x1b[2J."), "{out}");
        // The names come back exact, through the format.
        for name in HOSTILE {
            let (code, out, err) = lodt(&[
                OsStr::new("show"),
                out_path.as_os_str(),
                OsStr::new("--tensor"),
                OsStr::new(name),
                OsStr::new("--json"),
            ]);
            assert_eq!(code, 0, "{ext}: {err}");
            assert_clean("show --json of a converted file", &out);
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            assert_eq!(v["name"], name);
        }
    }
    // A .pdtensor holds one tensor: the error lists the names, escaped.
    let pd = dir.path().join("one.pdtensor");
    let (code, _, err) = lodt(&[OsStr::new("convert"), file.as_os_str(), pd.as_os_str()]);
    assert_eq!(code, 2, "{err}");
    assert_clean("convert to .pdtensor", &err);
    assert!(err.contains("(x\\nverify: ok, \\u{1b}[2Jclear, "), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}
