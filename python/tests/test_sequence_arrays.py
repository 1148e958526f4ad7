"""Random access one sequence at a time: Dataset.sequence_arrays (numpy
arrays, no Batch built) and the random-access cache's cache_bytes option,
on raw and compressed datasets."""

import numpy as np
import pytest

import lodt


def documents(first, n):
    """Documents ``first..first+n``: document ``d`` has ``d % 3 + 1``
    sentences of ``j % 4 + 1`` tokens; token ``t`` of document ``d`` is
    ``d * 1000 + t``; ``emb`` one float32 row [d, d] per sentence; ``label``
    the id."""
    sentences = [(first + i) % 3 + 1 for i in range(n)]
    lengths = [(j % 4) + 1 for j in range(sum(sentences))]
    values = []
    at = 0
    for i, s in enumerate(sentences):
        rows = sum(lengths[at:at + s])
        at += s
        values.extend((first + i) * 1000 + t for t in range(rows))
    tokens = lodt.create_lod_tensor(np.array(values, np.int64), [sentences, lengths])
    emb = lodt.create_lod_tensor(np.repeat(np.arange(first, first + n), sentences).astype(np.float32)[:, None] * np.ones((1, 2), np.float32), [sentences])
    label = lodt.LodTensor(np.arange(first, first + n, dtype=np.int64))
    return {"tokens": tokens, "emb": emb, "label": label}, lengths, sentences


def write(path, compression):
    batches, expected, first = [], {}, 0
    for n in (5, 7, 3, 9):
        b, lengths, sentences = documents(first, n)
        batches.append(b)
        at = 0
        for i, s in enumerate(sentences):
            expected[first + i] = lengths[at:at + s]
            at += s
        first += n
    lodt.write_dataset(path, batches, shard_bytes=2000, compression=compression, fsync=False)
    return expected


@pytest.mark.parametrize("compression", ["none", "zstd", "lz4"])
def test_sequence_arrays_gives_each_tensors_rows_and_rebased_inner_offsets(tmp_path, compression):
    expected = write(tmp_path / "ds", compression)
    ds = lodt.Dataset(tmp_path / "ds")
    assert len(ds) == 24
    for d in [0, 4, 5, 11, 23, 7, 7]:
        arrays = ds.sequence_arrays(d)
        assert sorted(arrays) == ["emb", "label", "tokens", "tokens.lod1"]
        lengths = expected[d]
        assert arrays["tokens"].dtype == np.int64
        assert arrays["tokens"].tolist() == [d * 1000 + t for t in range(sum(lengths))]
        assert arrays["tokens.lod1"].dtype == np.int64
        assert arrays["tokens.lod1"].tolist() == np.concatenate([[0], np.cumsum(lengths)]).tolist()
        assert arrays["emb"].shape == (d % 3 + 1, 2)
        assert arrays["emb"].tolist() == [[float(d), float(d)]] * (d % 3 + 1)
        assert arrays["label"].tolist() == [d]
        # The same values as the Batch of ds[d].
        batch = ds[d]
        assert np.array_equal(np.asarray(batch["tokens"]), arrays["tokens"])
        assert np.array_equal(np.asarray(batch["emb"]), arrays["emb"])
        # Read-only (shared memory), never writable by accident.
        assert not arrays["tokens"].flags.writeable
    assert ds.sequence_arrays(-1)["label"].tolist() == [23]
    with pytest.raises(IndexError, match="sequence out of range: 24 is not below 24"):
        ds.sequence_arrays(24)
    with pytest.raises(IndexError, match="sequence -25 out of range: the dataset has 24"):
        ds.sequence_arrays(-25)


def test_sequence_arrays_of_a_mapped_raw_shard_are_views_of_the_map(tmp_path):
    write(tmp_path / "ds", "none")
    reader = lodt._lodt.DatasetReader(tmp_path / "ds")
    arrays = reader.sequence_arrays(6)
    # A view, not a copy: numpy's base is lodt's owner of the map.
    assert not arrays["tokens"].flags.owndata
    assert type(arrays["tokens"].base).__name__ == "_StorageOwner"
    start, length = arrays["tokens"].base.span()
    assert (start, length) == (arrays["tokens"].ctypes.data, arrays["tokens"].nbytes)
    # And it outlives the reader.
    del reader
    assert arrays["tokens"].tolist()[:2] == [6000, 6001]


def test_cache_bytes_is_an_option_and_reads_agree_with_or_without_the_cache(tmp_path):
    write(tmp_path / "ds", "zstd")
    assert lodt._lodt.DatasetReader(tmp_path / "ds").cache_bytes == 256 << 20
    assert lodt._lodt.DatasetReader(tmp_path / "ds", cache_bytes=0).cache_bytes == 0
    cached = lodt.Dataset(tmp_path / "ds", cache_bytes=1 << 20)
    uncached = lodt.Dataset(tmp_path / "ds", cache_bytes=0)
    assert cached._native().cache_bytes == 1 << 20
    order = [3, 20, 3, 4, 21, 0, 23, 12]
    for d in order:
        a, b = cached.sequence_arrays(d), uncached.sequence_arrays(d)
        assert a.keys() == b.keys()
        for k in a:
            assert np.array_equal(a[k], b[k]), (d, k)
    assert np.asarray(cached.take(order)["label"]).tolist() == order
    assert np.asarray(uncached.take(order)["label"]).tolist() == order
    for bad in [-1, 1.5, "64M", True]:
        with pytest.raises(ValueError, match="cache_bytes is a number of bytes >= 0"):
            lodt.Dataset(tmp_path / "ds", cache_bytes=bad)
