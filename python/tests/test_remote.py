"""`.lodt` files read from an S3-compatible server (moto's server mode,
started by conftest on 127.0.0.1 with a free port) through `lodt.open(uri)`."""

from __future__ import annotations

import numpy as np
import pytest

import lodt

def _upload(port: int, key: str, data: bytes) -> None:
    import urllib.request

    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/data/{key}",
        data=data,
        method="PUT",
        headers={"Content-Type": "application/octet-stream"},
    )
    urllib.request.urlopen(req, timeout=60).close()


def test_open_a_file_on_s3(s3, tmp_path):
    port, options = s3
    words = lodt.create_lod_tensor(np.arange(10, dtype=np.int64).reshape(10, 1), [[2, 1], [3, 3, 4]])
    path = tmp_path / "a.lodt"
    lodt.save(path, [{"words": words}, {"words": words.branch(1)}])
    _upload(port, "a.lodt", path.read_bytes())
    remote = lodt.open("s3://data/a.lodt", storage_options=options)
    local = lodt.open(path)
    assert len(remote) == 2
    for k in range(2):
        r, l = remote[k]["words"], local[k]["words"]
        assert r.lod() == l.lod()
        np.testing.assert_array_equal(np.array(r), np.array(l))
    assert remote.verify()["batches"] == 2
    f = lodt.File("s3://data/a.lodt", storage_options=options)
    assert f[1]["words"].recursive_sequence_lengths() == [[4]]


def test_a_missing_object_is_a_clear_error(s3):
    _, options = s3
    with pytest.raises(Exception, match="s3://data/none.lodt"):
        lodt.open("s3://data/none.lodt", storage_options=options)


def _batch(first: int, n: int) -> dict:
    lens = [(i % 3) + 1 for i in range(first, first + n)]
    values = np.concatenate([np.full(l, i, dtype=np.int64) for i, l in zip(range(first, first + n), lens)])
    return {
        "tokens": lodt.create_lod_tensor(values.reshape(-1, 1), [lens]),
        "id": np.arange(first, first + n, dtype=np.int64),
    }


def test_datasets_on_s3(s3):
    _, options = s3
    uri = "s3://data/ds"
    totals = lodt.write_dataset(
        uri, [_batch(k * 10, 10) for k in range(12)], shard_bytes=2048, storage_options=options
    )
    assert totals["sequences"] == 120 and totals["shards"] >= 3
    ds = lodt.Dataset(uri, batch_size=7, shuffle=True, seed=3, storage_options=options)
    assert len(ds) == 120
    seen = []
    for batch in ds:
        ids = np.array(batch["id"]).ravel().tolist()
        tokens = batch["tokens"]
        # Each sequence's tokens all equal its id.
        for j, i in enumerate(ids):
            np.testing.assert_array_equal(np.array(tokens.sequence(0, j)).ravel(), np.full((i % 3) + 1, i))
        seen.extend(ids)
    assert sorted(seen) == list(range(120))
    assert seen != list(range(120))  # shuffled

    # Two appenders: the first to close wins, the second raises and adds nothing.
    a = lodt.DatasetWriter(uri, mode="append", shard_bytes=2048, storage_options=options)
    b = lodt.DatasetWriter(uri, mode="append", shard_bytes=2048, storage_options=options)
    a.write(_batch(1000, 5))
    b.write(_batch(2000, 5))
    a.close()
    with pytest.raises(BlockingIOError, match="changed by another writer"):
        b.close()
    ds = lodt.Dataset(uri, storage_options=options)
    assert len(ds) == 125
    assert np.array(ds[120]["id"]).ravel().tolist() == [1000]

    # Creating over it is refused; a missing dataset is FileNotFoundError.
    with pytest.raises(FileExistsError):
        lodt.write_dataset(uri, [_batch(0, 1)], storage_options=options)
    with pytest.raises(FileNotFoundError, match="s3://data/nothing"):
        lodt.Dataset("s3://data/nothing", storage_options=options)


def test_datasets_on_azure(azurite):
    options = azurite
    uri = "az://data/train"
    totals = lodt.write_dataset(
        uri, [_batch(k * 10, 10) for k in range(6)], shard_bytes=2048, storage_options=options
    )
    assert totals["sequences"] == 60 and totals["shards"] >= 2
    ds = lodt.Dataset(uri, batch_size=8, storage_options=options)
    ids = [i for b in ds for i in np.array(b["id"]).ravel().tolist()]
    assert ids == list(range(60))
    for i in (0, 31, 59):
        np.testing.assert_array_equal(np.array(ds[i]["tokens"]).ravel(), np.full((i % 3) + 1, i))
    # A shard read as a single file by URI (Azure: HEAD, then the tail).
    shard = ds.shards[0]["name"]
    f = lodt.open(f"{uri}/{shard}", storage_options=options)
    assert f.verify()["batches"] == ds.shards[0]["batches"]
    # The conditional manifest put: the second appender loses.
    a = lodt.DatasetWriter(uri, mode="append", storage_options=options)
    b = lodt.DatasetWriter(uri, mode="append", storage_options=options)
    a.write(_batch(500, 3))
    b.write(_batch(600, 3))
    a.close()
    with pytest.raises(BlockingIOError, match="changed by another writer"):
        b.close()
    assert len(lodt.Dataset(uri, storage_options=options)) == 63
