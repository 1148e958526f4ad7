"""Every batch read by ranges from S3, or with positional reads, is checked
against its checksums, bodies included, before any tensor of it is handed
out (spec/FORMAT.md 7.1): one byte flipped in a GET body (by the fault proxy,
in front of moto's S3 server) or on disk is an error naming the file and the
batch, from ``lodt.File`` / ``lodt.open`` and from ``lodt.Dataset``. A
memory map is checked lazily unless ``check_bodies=True``."""

from __future__ import annotations

import re

import numpy as np
import pytest
from fault_proxy import Fault, FaultProxy
from test_remote import _upload

import lodt

# Values whose bytes occur nowhere else in a file: a batch's body is found by
# searching for them.
BASE = 0x5A5A_0000_0000


def _values(k: int, n: int = 40_000) -> np.ndarray:
    return (np.arange(n, dtype=np.int64) + BASE + k * 1_000_000).reshape(n, 1)


def _batch(k: int, n: int = 40_000) -> dict:
    v = _values(k, n)
    lens = [len(v) // 4] * 4
    return {"v": lodt.create_lod_tensor(v, [lens]), "id": np.arange(4 * k, 4 * k + 4, dtype=np.int64)}


def _body_offset(data: bytes, k: int, n: int = 40_000) -> int:
    """The file offset of batch ``k``'s ``v`` body (of ``n`` values)."""
    at = data.find(_values(k, n).tobytes())
    assert at > 0
    return at


def _through(proxy: FaultProxy, options: dict) -> dict:
    return {**options, "aws_endpoint": proxy.endpoint}


def _flips(proxy: FaultProxy) -> int:
    return sum("flipped" in what for _, _, what in proxy.log)


def test_a_flipped_byte_in_a_ranged_get_body_is_an_error_from_file(s3, tmp_path):
    port, options = s3
    path = tmp_path / "f.lodt"
    lodt.save(path, [_batch(k) for k in range(6)])
    data = path.read_bytes()
    # Larger than the first read (256 KiB from the end): batch 1 comes with
    # a ranged GET of its own.
    assert len(data) > 1 << 20
    _upload(port, "flip/f.lodt", data)
    local = lodt.open(path)
    for opener in (lodt.open, lodt.File):
        with FaultProxy(port) as proxy:
            at = _body_offset(data, 1) + 8 * 12_345 + 3
            proxy.add(Fault("flip", method="GET", path="/data/flip/f.lodt", at=at, times=None, mask=0x20))
            f = opener("s3://data/flip/f.lodt", storage_options=_through(proxy, options))
            np.testing.assert_array_equal(np.array(f[0]["v"]), np.array(local[0]["v"]))
            with pytest.raises(ValueError, match=r's3://data/flip/f\.lodt: checksum mismatch in batch 1, tensor "v", body'):
                f[1]
            assert _flips(proxy) == 1
            # Every read is checked, not only the first.
            with pytest.raises(ValueError, match="batch 1"):
                f[1]
            assert _flips(proxy) == 2
            np.testing.assert_array_equal(np.array(f[2]["v"]), np.array(local[2]["v"]))


def test_a_flip_in_the_first_read_is_an_error_too(s3, tmp_path):
    """A batch that came with the open's suffix read is checked as well: a
    byte damaged once in transit is fetched again (the kept bytes are
    dropped, as a damaged cache entry is) and read right; damage that
    persists is an error."""
    port, options = s3
    path = tmp_path / "small.lodt"
    lodt.save(path, [_batch(0, 4000)])
    data = path.read_bytes()
    assert len(data) < 256 << 10
    _upload(port, "flip/small.lodt", data)
    at = _body_offset(data, 0, 4000) + 5
    with FaultProxy(port) as proxy:
        proxy.add(Fault("flip", method="GET", path="/data/flip/small.lodt", at=at))
        f = lodt.open("s3://data/flip/small.lodt", storage_options=_through(proxy, options))
        np.testing.assert_array_equal(np.array(f[0]["v"]), _values(0, 4000))
        assert _flips(proxy) == 1
    with FaultProxy(port) as proxy:
        proxy.add(Fault("flip", method="GET", path="/data/flip/small.lodt", at=at, times=None))
        f = lodt.open("s3://data/flip/small.lodt", storage_options=_through(proxy, options))
        with pytest.raises(ValueError, match=r"s3://data/flip/small\.lodt: checksum mismatch in batch 0"):
            f[0]["v"]
        assert _flips(proxy) >= 1


def test_a_flipped_byte_in_a_shard_get_body_is_an_error_from_dataset(s3, tmp_path):
    port, options = s3
    # Written locally, then put on the server object by object.
    local = tmp_path / "flipds"
    lodt.write_dataset(local, [_batch(k) for k in range(8)], shard_bytes=2 << 20)
    for p in local.iterdir():
        _upload(port, f"flipds/{p.name}", p.read_bytes())
    uri = "s3://data/flipds"
    shards = sorted(p.name for p in local.iterdir() if p.suffix == ".lodt")
    assert len(shards) >= 2
    shard = shards[-1]
    data = (local / shard).read_bytes()
    k = next(k for k in range(8) if data.find(_values(k).tobytes()) > 0)
    at = _body_offset(data, k) + 8 * 20_000
    with FaultProxy(port) as proxy:
        proxy.add(Fault("flip", method="GET", path=f"/data/flipds/{shard}", at=at, times=None, mask=0x01))
        ds = lodt.Dataset(uri, batch_size=4, storage_options=_through(proxy, options))
        with pytest.raises(ValueError, match=rf"{shard}.*checksum mismatch in batch \d+, tensor \"v\", body"):
            for _ in ds:
                pass
        assert _flips(proxy) >= 1
    # Without the proxy, every sequence reads.
    ds = lodt.Dataset(uri, batch_size=4, storage_options=options)
    assert sum(len(np.array(b["id"])) for b in ds) == 32


def _damaged(tmp_path, name: str = "d.lodt") -> tuple:
    path = tmp_path / name
    lodt.save(path, [_batch(k) for k in range(3)])
    data = bytearray(path.read_bytes())
    data[_body_offset(bytes(data), 2) + 1001] ^= 0x04
    path.write_bytes(bytes(data))
    return path


def test_positional_reads_check_bodies_and_maps_do_when_asked(tmp_path):
    path = _damaged(tmp_path)
    mismatch = re.escape(f"{path}: ") + r'checksum mismatch in batch 2, tensor "v", body'
    # Positional reads (mmap=False): checked.
    for f in (lodt.open(path, mmap=False), lodt.File(path, mmap=False)):
        np.array(f[0]["v"])
        with pytest.raises(ValueError, match=mismatch):
            f[2]
    # Mapped: lazy by default (the damaged value shows), checked when asked.
    lazy = lodt.open(path)
    assert not np.array_equal(np.array(lazy[2]["v"]), _values(2))
    for f in (lodt.open(path, check_bodies=True), lodt.File(path, check_bodies=True)):
        np.testing.assert_array_equal(np.array(f[1]["v"]), _values(1))
        with pytest.raises(ValueError, match=mismatch):
            f[2]
    with pytest.raises(ValueError, match=r'checksum mismatch in batch 2, tensor "v", body'):
        lodt.verify(path)


def test_dataset_positional_reads_check_bodies(tmp_path):
    d = tmp_path / "ds"
    lodt.write_dataset(d, [_batch(k) for k in range(4)], shard_bytes=1 << 30)
    (shard,) = [p for p in d.iterdir() if p.suffix == ".lodt"]
    data = bytearray(shard.read_bytes())
    data[_body_offset(bytes(data), 3) + 77] ^= 0x10
    shard.write_bytes(bytes(data))
    mismatch = rf'{shard.name}.*checksum mismatch in batch \d+, tensor "v", body'
    for kwargs in ({"mmap": False}, {"check_bodies": True}):
        with pytest.raises(ValueError, match=mismatch):
            for _ in lodt.Dataset(d, batch_size=4, **kwargs):
                pass
    # Mapped and lazy: every sequence reads (the damaged value included).
    assert sum(len(np.array(b["id"])) for b in lodt.Dataset(d, batch_size=4)) == 16
