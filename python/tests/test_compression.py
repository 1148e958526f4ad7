"""Format 2.0 from Python: compressed files, datasets of both versions, and
conversion, through the options of Writer, write_dataset, DatasetWriter and
convert."""

from __future__ import annotations

import json

import numpy as np
import pytest

import lodt


def tokens_batch(first: int, docs: int = 8) -> lodt.Batch:
    lengths = [50 + (first + d) % 7 for d in range(docs)]
    ids = (np.arange(sum(lengths), dtype=np.int32) + first) % 50  # repetitive: compresses
    t = lodt.create_lod_tensor(ids, [lengths])
    return lodt.Batch({"tokens": t, "doc": lodt.LodTensor(np.arange(first, first + docs, dtype=np.int64))})


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd", "zstd:9"])
def test_a_writer_compresses_and_the_file_reads_back(tmp_path, codec):
    batches = [tokens_batch(k * 8) for k in range(3)]
    path = tmp_path / "t.lodt"
    with lodt.Writer(path, format_version="2.0", compression=codec) as w:
        for b in batches:
            w.write(b)
    with lodt.File(path) as f:
        assert f.version == (2, 0)
        assert [f[k] for k in range(len(f))] == batches
        assert f.verify()["batches"] == 3
    plain = tmp_path / "plain.lodt"
    with lodt.Writer(plain) as w:
        for b in batches:
            w.write(b)
    assert lodt.File(plain).version == (1, 0)
    if codec != "none":
        assert path.stat().st_size * 2 < plain.stat().st_size


def test_a_codec_implies_2_0_and_1_0_refuses_one(tmp_path):
    with lodt.Writer(tmp_path / "a.lodt", compression="lz4") as w:
        w.write(tokens_batch(0))
    assert lodt.File(tmp_path / "a.lodt").version == (2, 0)
    with pytest.raises(ValueError, match="needs format version 2.0"):
        lodt.Writer(tmp_path / "b.lodt", format_version="1.0", compression="zstd")
    with pytest.raises(ValueError, match="expected a compression"):
        lodt.Writer(tmp_path / "c.lodt", compression="gzip")
    assert not (tmp_path / "b.lodt").exists() and not (tmp_path / "c.lodt").exists()


def test_a_dataset_mixes_versions_and_the_manifest_records_each(tmp_path):
    path = tmp_path / "ds"
    lodt.write_dataset(path, [tokens_batch(k * 8) for k in range(2)], shard_bytes=1)
    lodt.write_dataset(
        path, [tokens_batch(16 + k * 8) for k in range(2)], shard_bytes=1, mode="append", compression="zstd"
    )
    manifest = json.loads((path / "lodt-dataset.json").read_text())
    assert [s["format_version"] for s in manifest["shards"]] == ["1.0", "1.0", "2.0", "2.0"]
    ds = lodt.Dataset(path, batch_size=8)
    docs = sorted(int(x) for b in ds for x in np.asarray(b["doc"]))
    assert docs == list(range(32))
    assert ds.verify()["shards"] == 4


def test_convert_writes_either_version_with_a_codec(tmp_path):
    src = tmp_path / "src.lodt"
    with lodt.Writer(src) as w:
        w.write(tokens_batch(0))
    dst = tmp_path / "dst.lodt"
    lodt.convert(src, dst, compression="zstd")
    assert lodt.File(dst).version == (2, 0) and lodt.File(dst)[0] == lodt.File(src)[0]
    back = tmp_path / "back.lodt"
    lodt.convert(dst, back, format_version="1.0")
    assert back.read_bytes() == src.read_bytes()
    with pytest.raises(ValueError, match="applies to .lodt and Parquet output"):
        lodt.convert(src, tmp_path / "x.arrow", compression="zstd")
    with pytest.raises(ValueError, match="format version"):
        lodt.convert(src, tmp_path / "x.parquet", format_version="2.0")
