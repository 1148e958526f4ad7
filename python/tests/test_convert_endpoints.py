"""``lodt.convert`` reads and writes dataset directories as ``lodt convert``
does (the crate places both paths), and keeps every batch by default."""

import numpy as np
import pytest

import lodt


def _file(path):
    lengths = [[2, 1, 3]]
    words = lodt.create_lod_tensor(np.arange(6, dtype=np.int64).reshape(6, 1), lengths)
    with lodt.Writer(path, metadata={"source": "test"}) as w:
        for k in range(4):
            w.write({"words": words, "label": np.array([k, k, k])}, metadata={"step": str(k)})


def test_a_new_path_with_no_extension_is_a_dataset_and_reads_back(tmp_path):
    src = tmp_path / "in.lodt"
    _file(src)
    out = tmp_path / "train"
    assert lodt.convert(src, out, shard_bytes=1) == {"batches": 4, "tensors": 8}
    ds = lodt.Dataset(out)
    assert ds.num_sequences == 12
    back = tmp_path / "back.lodt"
    assert lodt.convert(out, back)["batches"] == 4
    f, g = lodt.open(src), lodt.open(back)
    assert g.metadata == {"source": "test"}
    for k in range(4):
        assert g[k].metadata == {"step": str(k)}
        assert g[k]["words"] == f[k]["words"]
        assert g[k]["label"].tolist() == [k, k, k]


def test_batches_are_kept_by_default_and_regrouped_on_request(tmp_path):
    src = tmp_path / "in.lodt"
    _file(src)
    kept = tmp_path / "kept.parquet"
    assert lodt.convert(src, kept, metadata="first")["batches"] == 4
    # Never across a metadata change: each batch here has its own.
    assert lodt.convert(src, tmp_path / "ones.lodt", batch_rows=1)["batches"] == 12


def test_a_path_it_cannot_place_names_the_dataset_option(tmp_path):
    src = tmp_path / "in.lodt"
    _file(src)
    with pytest.raises(ValueError, match="or a dataset directory"):
        lodt.convert(src, tmp_path / "out.csv")
    with pytest.raises(ValueError, match="applies to a dataset output"):
        lodt.convert(src, tmp_path / "out.lodt", shard_bytes=1024)
    lodt.convert(src, tmp_path / "d")
    with pytest.raises(FileExistsError):
        lodt.convert(src, tmp_path / "d")
