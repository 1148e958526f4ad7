"""Dataset versions and tags (spec/DATASET.md section 3.3) through the wheel:
``lodt.Dataset(path, version=N | "TAG")``, ``lodt.log``, ``lodt.tag``,
``lodt.tags``, locally and on S3 (moto)."""

import numpy as np
import pytest

import lodt


def _batch(first: int, n: int) -> dict:
    return {"id": np.arange(first, first + n, dtype=np.int64)}


def _ids(ds: lodt.Dataset) -> list[int]:
    return sorted(int(i) for b in ds for i in np.asarray(b["id"]).ravel())


def _three_versions(path, **kw) -> None:
    lodt.write_dataset(path, [_batch(0, 5)], **kw)
    lodt.write_dataset(path, [_batch(5, 3)], mode="append", **kw)
    lodt.write_dataset(path, [_batch(8, 4)], mode="append", **kw)


def test_versions_log_and_tags(tmp_path):
    path = tmp_path / "train"
    _three_versions(path)
    log = lodt.log(path)
    assert [(r["version"], r["operation"], r["sequences"], r["sequences_added"]) for r in log] == [
        (1, "create", 5, 5),
        (2, "append", 8, 3),
        (3, "append", 12, 4),
    ]
    assert all(r["time"].endswith("Z") and r["sequences_removed"] == 0 and r["bytes_removed"] == 0 for r in log)
    assert log[2]["bytes"] == sum(r["bytes_added"] for r in log)
    # Each version reads what the dataset was at that commit.
    for r in log:
        ds = lodt.Dataset(path, version=r["version"], batch_size=4)
        assert (ds.version, len(ds)) == (r["version"], r["sequences"])
        assert _ids(ds) == list(range(r["sequences"]))
        assert ds.commit["commit_id"] == r["commit_id"]
    current = lodt.Dataset(path)
    assert (current.version, current.commit["operation"]) == (3, "append")

    assert lodt.tag(path, "base", 1)["version"] == 1
    assert lodt.tag(path, "base", 1)["version"] == 1  # idempotent
    with pytest.raises(FileExistsError, match="never moves"):
        lodt.tag(path, "base", 2)
    assert lodt.tag(path, "latest")["version"] == 3
    assert [(t["name"], t["version"]) for t in lodt.tags(path)] == [("base", 1), ("latest", 3)]
    ds = lodt.Dataset(path, version="base")
    assert (ds.version, len(ds)) == (1, 5)
    lodt.write_dataset(path, [_batch(12, 1)], mode="append")
    assert len(lodt.Dataset(path, version="latest")) == 12
    assert len(lodt.Dataset(path)) == 13

    with pytest.raises(KeyError, match="no version 9"):
        lodt.Dataset(path, version=9)
    with pytest.raises(KeyError, match="no tag"):
        lodt.Dataset(path, version="nope")
    with pytest.raises(KeyError, match="no version 7"):
        lodt.tag(path, "later", 7)
    with pytest.raises(ValueError, match="not all digits"):
        lodt.tag(path, "12")
    with pytest.raises(TypeError):
        lodt.Dataset(path, version=1.5)
    with pytest.raises(TypeError):
        lodt.Dataset(path, version=True)


def test_a_state_resumes_on_its_version(tmp_path):
    path = tmp_path / "train"
    lodt.write_dataset(path, [_batch(0, 6), _batch(6, 6)], shard_bytes=1)
    ds = lodt.Dataset(path, batch_size=4, shuffle=True, seed=1)
    it = iter(ds)
    first = next(it)
    state = ds.state_dict()
    lodt.write_dataset(path, [_batch(12, 6)], mode="append")
    # Resumed on the version it was made on: the rest of that epoch, as if
    # nothing had been appended.
    rest = lodt.Dataset(path, batch_size=4, shuffle=True, seed=1, version=1)
    rest.load_state_dict(state)
    got = sorted(int(i) for b in rest for i in np.asarray(b["id"]).ravel())
    seen = sorted(int(i) for i in np.asarray(first["id"]).ravel())
    assert sorted(got + seen) == list(range(12))


def test_versions_on_s3(s3):
    _, options = s3
    uri = "s3://data/versions"
    _three_versions(uri, storage_options=options)
    log = lodt.log(uri, storage_options=options)
    assert [r["version"] for r in log] == [1, 2, 3]
    for r in log:
        ds = lodt.Dataset(uri, version=r["version"], storage_options=options)
        assert _ids(ds) == list(range(r["sequences"]))
    assert lodt.tag(uri, "run-1", 2, storage_options=options)["version"] == 2
    with pytest.raises(FileExistsError):
        lodt.tag(uri, "run-1", 3, storage_options=options)
    assert len(lodt.Dataset(uri, version="run-1", storage_options=options)) == 8
