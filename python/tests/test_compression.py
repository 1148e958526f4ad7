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
    with lodt.Writer(plain) as w:  # the default: 2.0, uncompressed
        for b in batches:
            w.write(b)
    assert lodt.File(plain).version == (2, 0)
    if codec == "none":
        assert path.read_bytes() == plain.read_bytes()
    else:
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
    lodt.write_dataset(path, [tokens_batch(k * 8) for k in range(2)], shard_bytes=1, format_version="1.0")
    # Appended with the defaults: 2.0 shards beside the 1.0 ones.
    lodt.write_dataset(path, [tokens_batch(16)], shard_bytes=1, mode="append")
    lodt.write_dataset(path, [tokens_batch(24)], shard_bytes=1, mode="append", compression="zstd")
    manifest = json.loads((path / "lodt-dataset.json").read_text())
    assert [s["format_version"] for s in manifest["shards"]] == ["1.0", "1.0", "2.0", "2.0"]
    ds = lodt.Dataset(path, batch_size=8)
    docs = sorted(int(x) for b in ds for x in np.asarray(b["doc"]))
    assert docs == list(range(32))
    assert ds.verify()["shards"] == 4


def test_convert_writes_either_version_with_a_codec(tmp_path):
    src = tmp_path / "src.lodt"
    with lodt.Writer(src, format_version="1.0") as w:
        w.write(tokens_batch(0))
    assert lodt.File(src).version == (1, 0)
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


def test_every_writer_writes_2_0_by_default_and_1_0_on_request(tmp_path):
    batch = tokens_batch(0)
    version = lambda p: lodt.File(p).version  # noqa: E731
    for requested, expected in ((None, (2, 0)), ("1.0", (1, 0)), ("2.0", (2, 0))):
        kw = {} if requested is None else {"format_version": requested}
        d = tmp_path / str(requested)
        d.mkdir()
        with lodt.Writer(d / "w.lodt", **kw) as w:
            w.write(batch)
        lodt.save(d / "s.lodt", batch, **kw)
        lodt.convert(d / "w.lodt", d / "c.lodt", **kw)
        assert [version(d / n) for n in ("w.lodt", "s.lodt", "c.lodt")] == [expected] * 3
        assert lodt.File(d / "s.lodt")[0] == lodt.File(d / "c.lodt")[0] == batch
        assert (d / "w.lodt").read_bytes() == (d / "s.lodt").read_bytes() == (d / "c.lodt").read_bytes()
        lodt.write_dataset(d / "ds", [batch], **kw)
        with lodt.DatasetWriter(d / "ds", mode="append", **kw) as w:
            w.write(batch)
        manifest = json.loads((d / "ds" / "lodt-dataset.json").read_text())
        want = "%d.%d" % expected
        assert [s["format_version"] for s in manifest["shards"]] == [want, want]
        assert all(version(d / "ds" / s["name"]) == expected for s in manifest["shards"])
    with pytest.raises(ValueError, match="needs format version 2.0"):
        lodt.save(tmp_path / "bad.lodt", batch, format_version="1.0", compression="lz4")


def test_an_append_keeps_the_file_s_version(tmp_path):
    path = tmp_path / "v1.lodt"
    with lodt.Writer(path, format_version="1.0") as w:
        w.write(tokens_batch(0))
    with lodt.Writer(path, append=True) as w:  # the defaults write 2.0 files, not 2.0 batches here
        w.write(tokens_batch(8))
    f = lodt.File(path)
    assert f.version == (1, 0) and len(f) == 2 and f[1] == tokens_batch(8)
    assert f.verify()["batches"] == 2
    with pytest.raises(ValueError, match="needs format version 2.0"):
        lodt.Writer(path, append=True, compression="zstd")
    whole = tmp_path / "whole.lodt"
    lodt.save(whole, [tokens_batch(0), tokens_batch(8)], format_version="1.0")
    assert whole.read_bytes() == path.read_bytes()


@pytest.mark.parametrize("found, asked", [("1.0", "2.0"), ("2.0", "1.0")])
def test_an_append_refuses_an_explicit_version_other_than_the_file_s(tmp_path, found, asked):
    path = tmp_path / "f.lodt"
    lodt.save(path, [tokens_batch(0)], format_version=found)
    before = path.read_bytes()
    with pytest.raises(ValueError, match=f"is format {found}; asked to append format {asked}"):
        lodt.Writer(path, append=True, format_version=asked)
    assert path.read_bytes() == before  # untouched, and readable as before
    with lodt.File(path) as f:
        assert f.version == tuple(map(int, found.split("."))) and len(f) == 1
        assert f[0] == tokens_batch(0) and f.verify()["batches"] == 1
    # No version (None): the file's; the file's own, explicitly: the same.
    for k, version in [(8, None), (16, found)]:
        with lodt.Writer(path, append=True, format_version=version) as w:
            w.write(tokens_batch(k))
    whole = tmp_path / "whole.lodt"
    lodt.save(whole, [tokens_batch(k) for k in (0, 8, 16)], format_version=found)
    assert whole.read_bytes() == path.read_bytes()


def test_an_explicit_version_on_a_dataset_append_is_the_new_shards_(tmp_path):
    lodt.write_dataset(tmp_path / "ds", [tokens_batch(0)])  # 2.0 shards
    lodt.write_dataset(tmp_path / "ds", [tokens_batch(8)], mode="append", format_version="1.0")
    manifest = json.loads((tmp_path / "ds" / "lodt-dataset.json").read_text())
    assert [s["format_version"] for s in manifest["shards"]] == ["2.0", "1.0"]
    assert len(lodt.Dataset(tmp_path / "ds")) == 16
