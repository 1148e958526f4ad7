//! `lodt info`, `verify` and `show` on URIs: a `.lodt` file and a dataset
//! served over HTTP by a server on 127.0.0.1 started by the test.

use crate::dataset_util;
use crate::remote_util;

use dataset_util::{make_batch, write_dataset};
use remote_util::Server;
use std::process::Command;

fn lodt(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lodt"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn info_verify_and_show_read_urls() {
    let server = Server::start();
    let batches: Vec<lodt::Batch> = (0..4).map(|k| make_batch(k * 10, 10)).collect();
    let bytes = lodt::format::to_bytes(batches.iter(), Default::default()).unwrap();
    server.put("a.lodt", bytes);
    let dir = tempfile::tempdir().unwrap();
    let n = write_dataset(dir.path(), &[20, 20, 20], 2 << 10);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        server.put(&format!("ds/{name}"), std::fs::read(entry.path()).unwrap());
    }

    let url = server.url("a.lodt");
    let (code, out, err) = lodt(&["info", &url, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["batches"]
            .as_array()
            .map(Vec::len)
            .or(v["num_batches"].as_u64().map(|n| n as usize)),
        Some(4),
        "{out}"
    );

    let (code, out, err) = lodt(&["verify", &url]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ok"), "{out}");

    let (code, out, err) = lodt(&["show", &url, "--batch", "1", "--tensor", "label", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["values"],
        serde_json::json!((10..20).collect::<Vec<i64>>()),
        "{out}"
    );

    let ds = server.url("ds");
    let (code, out, err) = lodt(&["info", &ds, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["num_sequences"].as_u64(), Some(n), "{out}");
    let (code, out, err) = lodt(&["verify", &ds]);
    assert_eq!(code, 0, "{err}{out}");

    // A missing object: exit 1 and the URL named.
    let missing = server.url("none.lodt");
    let (code, _, err) = lodt(&["info", &missing]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&missing), "{err}");
}
