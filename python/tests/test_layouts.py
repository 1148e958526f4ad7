"""Directories other tools write, read by ``lodt.convert`` as one input:
Hugging Face ``datasets``' ``save_to_disk`` (with the real ``datasets``
package) and a directory of Parquet files (written by pyarrow)."""

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


@pytest.mark.torch
def test_an_mds_directory_written_by_streaming_converts_as_written(tmp_path):
    streaming = pytest.importorskip("streaming")
    rng = np.random.default_rng(9)
    columns = {"ids": "ndarray:int32", "any": "ndarray", "text": "str", "n": "int", "f": "float32", "grid": "ndarray:uint8:2,2"}
    samples = []
    for i in range(120):
        samples.append(
            {
                "ids": rng.integers(0, 50000, size=int(rng.integers(1, 40))).astype(np.int32),
                "any": rng.random((int(rng.integers(1, 5)), 3)).astype(np.float64),
                "text": f"document {i}",
                "n": i * 7,
                "f": np.float32(i / 4),
                "grid": np.full((2, 2), i % 256, np.uint8),
            }
        )
    for compression in (None, "zstd"):
        out = tmp_path / f"mds-{compression}"
        with streaming.MDSWriter(out=str(out), columns=columns, compression=compression, size_limit=4096) as w:
            for s in samples:
                w.write(s)
        if compression:
            for raw in out.glob("*.mds"):
                raw.unlink()  # only the zstd shards remain
        lodt.convert(out, tmp_path / f"train-{compression}")
        ds = lodt.Dataset(tmp_path / f"train-{compression}")
        assert len(ds) == 120 and ds.num_shards >= 1
        for i in (0, 1, 63, 119):
            got, want = ds[i], samples[i]
            assert np.asarray(got["ids"]).ravel().tolist() == want["ids"].tolist()
            assert np.allclose(np.asarray(got["any"]).reshape(-1, 3), want["any"])
            assert bytes(np.asarray(got["text"]).ravel()).decode() == want["text"]
            assert got["n"].tolist() == [want["n"]] and got["f"].tolist() == [want["f"]]
            assert np.asarray(got["grid"]).reshape(2, 2).tolist() == want["grid"].tolist()
