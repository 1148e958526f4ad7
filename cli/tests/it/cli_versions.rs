//! `lodt log DIR`, `lodt tag DIR NAME [N]` and `lodt info DIR --version`:
//! a dataset's versions and tags (spec/DATASET.md section 3.3), run as a
//! user would.

use crate::dataset_util::make_batch;
use lodt::dataset::DatasetWriter;
use std::path::Path;
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

/// A dataset of three versions: a create of 4 sequences, appends of 3 and 5.
fn three_versions(dir: &Path) {
    let mut w = DatasetWriter::create(dir, Default::default()).unwrap();
    w.write(&make_batch(0, 4)).unwrap();
    w.finish().unwrap();
    for (first, n) in [(4, 3), (7, 5)] {
        let mut w = DatasetWriter::append(dir, Default::default()).unwrap();
        w.write(&make_batch(first, n)).unwrap();
        w.finish().unwrap();
    }
}

#[test]
fn log_tag_and_info_of_a_version() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("train");
    three_versions(&dir);
    let d = dir.to_str().unwrap();

    let (code, out, err) = lodt(&["tag", d, "base", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("tag base names version 1"), "{out}");
    assert_eq!(lodt(&["tag", d, "base", "1"]).0, 0); // idempotent
    let (code, _, err) = lodt(&["tag", d, "base", "2"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("never moves"), "{err}");
    assert_eq!(lodt(&["tag", d, "now"]).0, 0);
    let (code, _, err) = lodt(&["tag", d, "12"]);
    assert_eq!(code, 2, "{err}");

    let (code, out, err) = lodt(&["log", d]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    let fields = |l: &str| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let v1 = fields(lines[1]);
    assert_eq!(
        (v1[0].as_str(), v1[3].as_str(), v1[4].as_str()),
        ("1", "create", "4")
    );
    assert_eq!(v1.last().unwrap(), "base");
    let v3 = fields(lines[3]);
    assert_eq!(
        (
            v3[0].as_str(),
            v3[3].as_str(),
            v3[4].as_str(),
            v3[5].as_str()
        ),
        ("3", "append", "5", "0")
    );
    assert_eq!(v3.last().unwrap(), "now");

    let (code, out, err) = lodt(&["log", d, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let added: Vec<u64> = v["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["sequences_added"].as_u64().unwrap())
        .collect();
    assert_eq!(added, [4, 3, 5]);
    assert_eq!(v["tags"][0]["name"], "base");

    let (code, out, err) = lodt(&["info", d, "--version", "2", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["num_sequences"].as_u64(), v["dataset_version"].as_u64()),
        (Some(7), Some(2))
    );
    let (code, out, err) = lodt(&["info", d, "--version", "base"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("4 sequences") && out.contains("version   1 (create"),
        "{out}"
    );
    let (code, _, err) = lodt(&["info", d, "--version", "9"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("no version 9") && err.contains("latest is version 3"),
        "{err}"
    );
    let (code, _, err) = lodt(&["info", d, "--version", "nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("no tag \"nope\""), "{err}");
}
