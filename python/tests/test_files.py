"""Files: .lodt reading in place (zero copy), writing, append, recover,
verify, convert, Paddle files; every file of tests/data and spec/vectors
read from Python and checked against their expected JSON."""

import gc
import json
import os
import shutil
import subprocess
import sys
import pickle

import numpy as np
import pytest

import lodt
from conftest import DATA, VECTORS, in_span, pyarrow_or_skip


def test_open_read_in_place(sample_file):
    f = lodt.open(sample_file)
    assert len(f) == 3 and f.metadata == {"source": "tests"} and f.version == (2, 0)  # the default
    assert f.mmap and f.path == sample_file
    span = f._map_span()
    for k, batch in enumerate(f):
        assert list(batch) == ["words", "frames", "labels"]
        assert batch.metadata == {"step": str(k)}
        for name, t in batch.items():
            assert in_span(np.asarray(t), span), name
            for s in t:
                assert in_span(np.asarray(s), span)
    w = f[1]["words"]
    assert np.shares_memory(np.asarray(w.branch(0)), np.asarray(w)) or w.num_sequences(0) == 0
    assert f[-1] == f[2]
    with pytest.raises(IndexError, match="batch index 3 out of range"):
        f[3]
    with pytest.raises(KeyError):
        f[0]["nope"]
    assert f.verify()["batches"] == 3


def test_map_outlives_the_file_object(sample_file):
    f = lodt.open(sample_file)
    expected = np.array(f[0]["frames"])
    arr = np.asarray(f[0]["frames"].branch(0))
    sub = arr[0]
    del f
    gc.collect()
    # Only the arrays hold the map now; reading them is safe.
    assert np.array_equal(sub, expected[0])
    assert type(arr.base).__name__ == "_StorageOwner"


def test_positional_reads(sample_file, tmp_path):
    f = lodt.open(sample_file, mmap=False)
    assert not f.mmap and f[0] == lodt.open(sample_file)[0]
    # mmap=False means positional reads, as for Dataset and the CLI: a file
    # cut short by another program after it was opened is an error, never a
    # crash (SIGBUS) as a map's missing pages would be.
    cut = tmp_path / "cut.lodt"
    shutil.copyfile(sample_file, cut)
    g = lodt.File(os.fspath(cut), mmap=False)
    with open(cut, "r+b") as fh:
        fh.truncate(200)
    with pytest.raises((ValueError, OSError)):
        g[2]


def test_rows_and_take(sample_file):
    f = lodt.open(sample_file)
    assert f.num_rows == 12 and [f.batch_rows(k) for k in range(3)] == [4, 4, 4]
    row = f.row(5)
    assert row["labels"].tolist() == [11] and row.metadata == {"step": "1"}
    assert row["words"] == f[1]["words"].slice_level(0, 1, 2)
    assert in_span(np.asarray(row["frames"]), f._map_span())
    taken = f.take([11, 0, 5])
    assert taken["labels"].tolist() == [23, 0, 11]
    assert taken["frames"] == lodt.merge([f.row(i)["frames"] for i in (11, 0, 5)])
    assert f.take([-1])["labels"].tolist() == [23]
    with pytest.raises(IndexError):
        f.row(12)


def test_writer_append_and_abort(tmp_path, words):
    path = tmp_path / "a.lodt"
    with lodt.Writer(path, {"k": "v"}) as w:
        w.write(lodt.Batch({"words": words}, {"i": "0"}))
        assert w.batches_written == 1
    with lodt.Writer(path, append=True) as w:
        w.write({"words": words}, metadata={"i": "1"})
    f = lodt.open(path)
    assert len(f) == 2 and f.metadata == {"k": "v"} and f[1].metadata == {"i": "1"}
    # An exception inside the block discards a new file.
    with pytest.raises(RuntimeError):
        with lodt.Writer(tmp_path / "b.lodt") as w:
            w.write({"words": words})
            raise RuntimeError("stop")
    assert not (tmp_path / "b.lodt").exists()
    w = lodt.Writer(tmp_path / "c.lodt")
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.write({"words": words})
    assert len(lodt.open(tmp_path / "c.lodt")) == 0


def test_save_forms(tmp_path, words):
    lodt.save(tmp_path / "one.lodt", {"w": words})
    lodt.save(tmp_path / "many.lodt", [{"w": words}, lodt.Batch({"w": words.branch(0)})], metadata={"m": "1"})
    assert lodt.open(tmp_path / "one.lodt")[0]["w"] == words
    many = lodt.open(tmp_path / "many.lodt")
    assert len(many) == 2 and many[1]["w"] == words.branch(0) and many.metadata == {"m": "1"}
    with pytest.raises(TypeError):
        lodt.save(tmp_path / "bad.lodt", 5)


def test_recover_a_cut_file(tmp_path, words):
    path = tmp_path / "cut.lodt"
    lodt.save(path, [{"w": words}] * 3)
    data = path.read_bytes()
    path.write_bytes(data[:-100])
    with pytest.raises(ValueError, match="no valid footer"):
        lodt.open(path)
    report = lodt.recover(path)
    assert report["rewritten"] and report["batches"] == 3
    assert len(lodt.open(path)) == 3


def test_damage_is_detected(tmp_path, words):
    path = tmp_path / "d.lodt"
    lodt.save(path, {"w": lodt.LodTensor(np.arange(1000.0))})
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum mismatch"):
        lodt.verify(path)
    with pytest.raises(ValueError, match="checksum mismatch"):
        lodt.open(path).verify()


def test_hostile_bytes_raise_never_crash(tmp_path, sample_file):
    """Every truncation and many bit flips of a file: an exception or a valid read."""
    data = sample_file.read_bytes()
    path = tmp_path / "h.lodt"
    rng = np.random.default_rng(1)
    cuts = list(range(0, len(data), 97)) + [len(data) - 1]
    flips = [(int(i), 1 << int(b)) for i, b in zip(rng.integers(0, len(data), 150), rng.integers(0, 8, 150))]
    cases = [data[:n] for n in cuts] + [bytes(data[:i]) + bytes([data[i] ^ m]) + data[i + 1:] for i, m in flips]
    for bad in cases:
        path.write_bytes(bad)
        try:
            f = lodt.open(path)
            for batch in f:
                for t in batch.values():
                    with np.errstate(all="ignore"):
                        np.asarray(t).sum()
                    list(t) if t.ndim and t.num_levels else None
            f.verify()
        except (ValueError, OSError, IndexError, KeyError):
            pass
    with pytest.raises(ValueError, match="not a .lodt file"):
        path.write_bytes(b"hello, world" * 10)
        lodt.open(path)


def test_errors_name_the_file():
    with pytest.raises(FileNotFoundError, match="/no/such.lodt"):
        lodt.open("/no/such.lodt")
    with pytest.raises(FileNotFoundError):
        lodt.read_paddle("/no/such.pdtensor")


def test_pickle_reopens_by_path(sample_file):
    f = lodt.open(sample_file)
    g = pickle.loads(pickle.dumps(f))
    assert g.path == f.path and g[0] == f[0]
    b = pickle.loads(pickle.dumps(f[0]))
    assert b == f[0] and not in_span(np.asarray(b["words"]), f._map_span())


GIL_CASE = """
import sys, threading
from http.server import ThreadingHTTPServer
import lodt
import range_server

range_server.ROOT = sys.argv[1]
server = ThreadingHTTPServer(("127.0.0.1", 0), range_server._Files)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()
f = lodt.open(f"http://127.0.0.1:{server.server_address[1]}/big.lodt")
print(f.verify()["batches"])
"""


def test_gil_is_released_during_verify(tmp_path):
    # verify() of a file whose bytes come from a server on a Python thread of
    # the same process finishes only if verify lets that thread run: with the
    # GIL held through the call, the server could never answer it. (In its
    # own process, under a watchdog: a held GIL would block this one too.)
    path = tmp_path / "big.lodt"
    chunk = np.ones(1 << 18, dtype=np.float64)
    with lodt.Writer(path, fsync=False) as w:
        for _ in range(4):
            w.write({"x": chunk})
    env = dict(os.environ, PYTHONPATH=os.path.dirname(__file__))
    run = subprocess.run(
        [sys.executable, "-c", GIL_CASE, str(tmp_path)], capture_output=True, text=True, timeout=120, env=env
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["4"]


def _values(t):
    if t.dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install 'lodt[bfloat16]')")
        return np.asarray(t).astype(np.float64).ravel().tolist()
    return np.asarray(t).ravel().tolist()


def _expected_values(values, dtype):
    special = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
    values = [special.get(v, v) if isinstance(v, str) else v for v in values]
    if dtype == "bfloat16":
        import ml_dtypes

        return np.array(values, dtype=np.float64).astype(ml_dtypes.bfloat16).astype(np.float64).tolist()
    return np.array(values, dtype=np.dtype(dtype)).astype(np.float64 if dtype != "bool" else bool).tolist()


def _same(a, b):
    return np.array_equal(np.array(a, dtype=object), np.array(b, dtype=object)) or np.allclose(
        np.array(a, dtype=np.float64), np.array(b, dtype=np.float64), rtol=0, atol=0, equal_nan=True
    )


VECTOR_RECORDS = sorted(p.name for p in VECTORS.glob("*.json"))


@pytest.mark.parametrize("record", VECTOR_RECORDS)
def test_spec_vectors(record):
    stem, batch, rest = record[: -len(".json")].split(".", 2)
    name, _, branch = rest.partition(".branch-")
    expected = json.loads((VECTORS / record).read_text())
    t = lodt.open(VECTORS / f"{stem}.lodt")[int(batch[1:])][name]
    if branch:
        t = t.branch(*[int(i) for i in branch.split("-")])
    assert t.dtype == expected["dtype"] and t.shape() == expected["shape"]
    assert t.lod() == expected["lod"]
    assert _same(_values(t), _expected_values(expected["values"], expected["dtype"]))


def test_empty_vector_file():
    f = lodt.open(VECTORS / "empty.lodt")
    assert len(f) == 0 and f.num_rows == 0 and f.verify()["batches"] == 0


PADDLE = json.loads((DATA / "paddle" / "expected.json").read_text())


@pytest.mark.parametrize("record", PADDLE["tensors"], ids=lambda r: r["file"])
def test_paddle_fixtures(record, tmp_path):
    t = lodt.read_paddle(DATA / "paddle" / record["file"])
    assert t.dtype == record["dtype"] and t.shape() == record["shape"]
    assert t.lod() == record["lod"]
    assert t.recursive_sequence_lengths() == record["recursive_sequence_lengths"]
    assert _same(_values(t), _expected_values(record["values"], record["dtype"]))
    out = tmp_path / "back.pdtensor"
    lodt.write_paddle(out, t)
    assert out.read_bytes() == (DATA / "paddle" / record["file"]).read_bytes()


def test_paddle_combined(tmp_path):
    combined = PADDLE["combined"]
    names = [f.split(".")[0] for f in combined["order"]]
    batch = lodt.read_paddle_combined(DATA / "paddle" / combined["file"], names)
    assert list(batch) == names
    for name, file in zip(names, combined["order"]):
        assert batch[name] == lodt.read_paddle(DATA / "paddle" / file)
    out = tmp_path / "back.pdparams"
    lodt.write_paddle(out, batch)
    assert out.read_bytes() == (DATA / "paddle" / combined["file"]).read_bytes()
    lodt.write_paddle(tmp_path / "list.pdparams", list(batch.values()))
    assert (tmp_path / "list.pdparams").read_bytes() == out.read_bytes()
    with pytest.raises(ValueError, match="names"):
        lodt.read_paddle_combined(DATA / "paddle" / combined["file"], ["a"])
    with pytest.raises(ValueError):
        lodt.write_paddle(tmp_path / "u.pdtensor", lodt.LodTensor(np.zeros(2, np.uint32)))


ARROW = json.loads((DATA / "arrow" / "expected.json").read_text())


def _check_arrow_batch(batch, columns):
    assert list(batch) == [c["column"] for c in columns]
    for c in columns:
        t = batch[c["column"]]
        assert t.dtype == c["dtype"] and t.element_shape == c["element_shape"]
        assert t.lod() == c["lod"]
        assert _same(_values(t), _expected_values(c["values"], c["dtype"]))


@pytest.mark.parametrize("entry", ARROW["files"], ids=lambda e: e["parquet"])
@pytest.mark.parametrize("kind", ["parquet", "arrow_ipc"])
def test_arrow_fixtures_through_convert(entry, kind, tmp_path):
    out = tmp_path / "x.lodt"
    stats = lodt.convert(DATA / "arrow" / entry[kind], out)
    assert stats["batches"] == 1
    _check_arrow_batch(lodt.open(out)[0], entry["columns"])


@pytest.mark.parametrize("entry", ARROW["files"], ids=lambda e: e["parquet"])
def test_arrow_fixtures_through_pyarrow(entry):
    pa = pyarrow_or_skip()
    import pyarrow.parquet as pq

    table = pq.read_table(DATA / "arrow" / entry["parquet"])
    _check_arrow_batch(lodt.Batch.from_arrow(table), entry["columns"])
    import pyarrow.ipc as ipc

    with pa.memory_map(str(DATA / "arrow" / entry["arrow_ipc"])) as source:
        ipc_table = ipc.open_file(source).read_all()
    _check_arrow_batch(lodt.Batch.from_arrow(ipc_table), entry["columns"])


def test_convert_round_trips(tmp_path, sample_file):
    # Arrow files store one metadata map: drop the per-batch "step" first.
    plain = tmp_path / "plain.lodt"
    lodt.save(plain, [lodt.Batch(b.items()) for b in lodt.open(sample_file)])
    sample_file = plain
    f = lodt.open(sample_file)
    for ext in ["arrow", "arrows", "lodt"]:
        out = tmp_path / f"x.{ext}"
        assert lodt.convert(sample_file, out)["batches"] == 3
        back = tmp_path / f"back_{ext}.lodt"
        lodt.convert(out, back)
        g = lodt.open(back)
        for k in range(3):
            assert [g[k][n] == f[k][n] for n in f[k]] == [True] * 3
    regrouped = tmp_path / "re.lodt"
    lodt.convert(sample_file, regrouped, batch_rows=5)
    assert [lodt.open(regrouped).batch_rows(k) for k in range(3)] == [5, 5, 2]
    with pytest.raises(ValueError, match="cannot tell the format"):
        lodt.convert(sample_file, tmp_path / "x.csv")


def test_safe_write_refusals_are_os_errors(tmp_path, sample_file):
    with pytest.raises(OSError, match="same file"):
        lodt.convert(sample_file, sample_file)
    (tmp_path / "dir.lodt").mkdir()
    with pytest.raises(OSError):
        lodt.save(tmp_path / "dir.lodt", {"x": np.zeros(2)})
    assert len(lodt.open(sample_file)) == 3


def test_writer_format_2_0_compressed(tmp_path, words):
    for compression in ("none", "lz4", "zstd", "zstd:9"):
        path = tmp_path / f"{compression.replace(':', '_')}.lodt"
        with lodt.Writer(path, format_version="2.0", compression=compression) as w:
            w.write({"words": words})
            w.write({"words": words})
        f = lodt.open(path)
        assert f.version == (2, 0) and len(f) == 2
        assert f[1]["words"] == words
        assert f.verify()["batches"] == 2
    with pytest.raises(ValueError, match="compression lz4 needs format version 2.0"):
        lodt.Writer(tmp_path / "x.lodt", format_version="1.0", compression="lz4")
    with lodt.Writer(tmp_path / "implied.lodt", compression="lz4") as w:  # a codec implies 2.0
        w.write({"words": words})
    assert lodt.open(tmp_path / "implied.lodt").version == (2, 0)
    with pytest.raises(ValueError, match='found "gzip"'):
        lodt.Writer(tmp_path / "y.lodt", format_version="2.0", compression="gzip")
