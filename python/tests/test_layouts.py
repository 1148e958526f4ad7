"""Directories other tools write, read by ``lodt.convert`` as one input:
Hugging Face ``datasets``' ``save_to_disk`` (with the real ``datasets``
package), MDS (directories MosaicML Streaming wrote, in tests/data/mds) and a
directory of Parquet files (written by pyarrow)."""

import json
import pathlib

import numpy as np
import pytest

import lodt


def test_a_directory_of_parquet_files_converts_in_name_order(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    d = tmp_path / "pq"
    d.mkdir()
    for k, rows in enumerate([[[1, 2], [3]], [[4, 5, 6]], [[7], [8], [9, 10]]]):
        table = pa.table({"input_ids": pa.array(rows, pa.list_(pa.int32())), "k": pa.array([k] * len(rows))})
        pq.write_table(table, d / f"part-{k:05}.parquet")
    lodt.convert(d, tmp_path / "train")
    ds = lodt.Dataset(tmp_path / "train")
    assert len(ds) == 6
    ids = [np.asarray(ds[i]["input_ids"]).ravel().tolist() for i in range(6)]
    assert ids == [[1, 2], [3], [4, 5, 6], [7], [8], [9, 10]]
    assert [ds[i]["k"].tolist() for i in range(6)] == [[0], [0], [1], [2], [2], [2]]


@pytest.mark.consumers
def test_a_hugging_face_save_to_disk_directory_converts_as_saved(tmp_path):
    datasets = pytest.importorskip("datasets")
    rng = np.random.default_rng(5)
    rows = [rng.integers(0, 50000, size=int(n)).astype(np.int32).tolist() for n in rng.integers(1, 30, size=200)]
    hf = datasets.Dataset.from_dict(
        {"input_ids": rows, "label": list(range(200))},
        features=datasets.Features({"input_ids": datasets.Sequence(datasets.Value("int32")), "label": datasets.Value("int64")}),
    )
    hf.save_to_disk(str(tmp_path / "hf"), num_shards=3)
    lodt.convert(tmp_path / "hf", tmp_path / "train")
    ds = lodt.Dataset(tmp_path / "train")
    assert len(ds) == 200
    back = datasets.load_from_disk(str(tmp_path / "hf"))
    for i in (0, 1, 99, 199):
        assert np.asarray(ds[i]["input_ids"]).ravel().tolist() == back[i]["input_ids"]
        assert ds[i]["label"].tolist() == [back[i]["label"]]


def test_mds_directories_written_by_mosaicml_streaming_convert_as_written(tmp_path):
    """tests/data/mds: written by MosaicML Streaming's own MDSWriter
    (tests/data/mds/make.py, in a venv of its own: it pins numpy < 2.2), raw
    and zstd, with the values it was given in expected.json."""
    data = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "mds"
    expected = json.loads((data / "expected.json").read_text())
    for layout in ("raw", "zstd"):
        lodt.convert(data / layout, tmp_path / f"train-{layout}")
        ds = lodt.Dataset(tmp_path / f"train-{layout}")
        assert len(ds) == len(expected) == 40 and ds.num_shards >= 1
        for i, want in enumerate(expected):
            got = ds[i]
            assert np.asarray(got["ids"]).ravel().tolist() == want["ids"], (layout, i)
            assert np.asarray(got["any"]).reshape(-1, 3).tolist() == want["any"]
            assert bytes(np.asarray(got["text"]).ravel()).decode() == want["text"]
            assert got["n"].tolist() == [want["n"]] and got["f"].tolist() == [want["f"]]
            assert np.asarray(got["grid"]).reshape(2, 2).tolist() == want["grid"]
