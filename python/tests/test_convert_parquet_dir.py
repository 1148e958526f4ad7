"""``lodt.convert(src, dst, to="parquet-dir")``: a directory of Parquet
shards ``part-00000.parquet``, ... of about ``shard_bytes``, read by pyarrow
as one table and by ``lodt.convert`` as one input, written all or nothing."""

import os

import numpy as np
import pytest

import lodt

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pads = pytest.importorskip("pyarrow.dataset")


def batch(k, rows):
    lengths = [1 + (i + k) % 4 for i in range(rows)]
    ids = np.arange(sum(lengths), dtype=np.int64) + 1000 * k
    return {
        "ids": lodt.create_lod_tensor(ids, [lengths]),
        "label": np.arange(rows, dtype=np.float32) + 10 * k,
    }


def write_input(path, batches):
    with lodt.Writer(path) as w:
        for b in batches:
            w.write(b)


def expected_rows(batches):
    ids, labels = [], []
    for b in batches:
        t = b["ids"]
        offsets = t.lod()[0]
        values = np.asarray(t).ravel().tolist()
        ids += [values[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
        labels += b["label"].tolist()
    return ids, labels


def test_shards_in_order_read_by_pyarrow_and_by_lodt_as_the_input(tmp_path):
    batches = [batch(k, 30 + 7 * k) for k in range(10)]
    src = tmp_path / "in.lodt"
    write_input(src, batches)
    dst = tmp_path / "shards"
    done = lodt.convert(src, dst, to="parquet-dir", shard_bytes=2048, compression="zstd")
    assert done == {"batches": 10, "tensors": 20}
    names = sorted(os.listdir(dst))
    assert len(names) >= 3
    assert names == [f"part-{i:05}.parquet" for i in range(len(names))]
    # Every shard holds whole batches (a row group each), in order.
    groups = [pq.ParquetFile(dst / n).metadata.num_row_groups for n in names]
    assert sum(groups) == 10 and min(groups) >= 1
    assert {pq.ParquetFile(dst / n).metadata.row_group(0).column(0).compression for n in names} == {"ZSTD"}

    ids, labels = expected_rows(batches)
    table = pq.read_table(dst)
    assert table.column_names == ["ids", "label"]
    assert table.column("ids").to_pylist() == ids
    assert table.column("label").to_pylist() == labels
    dataset = pads.dataset(dst, format="parquet")
    assert sorted(os.path.basename(f) for f in dataset.files) == names
    assert dataset.to_table().equals(table)

    # lodt reads the directory back as one input: the same batches.
    back = tmp_path / "back.lodt"
    assert lodt.convert(dst, back) == {"batches": 10, "tensors": 20}
    f = lodt.open(back)
    assert len(f) == 10
    for k, b in enumerate(batches):
        assert f[k]["ids"] == b["ids"]
        assert f[k]["label"].tolist() == b["label"].tolist()
    # No temporary directory is left beside the output.
    assert sorted(os.listdir(tmp_path)) == ["back.lodt", "in.lodt", "shards"]


def test_a_dataset_input_and_the_default_shard_size(tmp_path):
    batches = [batch(k, 5) for k in range(4)]
    lodt.write_dataset(tmp_path / "train", batches, shard_bytes=512)
    assert lodt.Dataset(tmp_path / "train").num_shards > 1
    dst = tmp_path / "pq"
    lodt.convert(tmp_path / "train", dst, to="parquet-dir")   # 256 MiB shards: one here
    assert os.listdir(dst) == ["part-00000.parquet"]
    ids, labels = expected_rows(batches)
    assert pq.read_table(dst).column("ids").to_pylist() == ids


def test_all_or_nothing_and_clear_errors(tmp_path):
    src = tmp_path / "mixed.lodt"
    good = [batch(k, 4) for k in range(3)]
    write_input(src, [*good, {"other": np.arange(3, dtype=np.uint8)}])
    dst = tmp_path / "out"
    # The fourth batch has another schema: nothing is left, not even the
    # shards written before it.
    with pytest.raises(ValueError, match="batch 3"):
        lodt.convert(src, dst, to="parquet-dir", shard_bytes=1)
    assert sorted(os.listdir(tmp_path)) == ["mixed.lodt"]

    # A destination that is not an empty directory is refused and kept.
    dst.mkdir()
    (dst / "mine.txt").write_text("keep")
    ok = tmp_path / "ok.lodt"
    write_input(ok, good)
    with pytest.raises(FileExistsError, match="not empty"):
        lodt.convert(ok, dst, to="parquet-dir")
    assert os.listdir(dst) == ["mine.txt"]
    # An empty one is taken.
    (dst / "mine.txt").unlink()
    lodt.convert(ok, dst, to="parquet-dir")
    assert os.listdir(dst) == ["part-00000.parquet"]

    with pytest.raises(ValueError, match="parquet-dir"):
        lodt.convert(ok, tmp_path / "x", to="csv")
    with pytest.raises(ValueError, match="shard size"):
        lodt.convert(ok, tmp_path / "one.parquet", shard_bytes=1024)
    # `to` names a file format too, whatever the path's extension.
    lodt.convert(ok, tmp_path / "plain", to="parquet")
    assert pq.read_table(tmp_path / "plain").num_rows == 12
