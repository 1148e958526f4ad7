"""Packing as one options object (``lodt.Packing``) and the one native
``loader()``: the object's values, pickling (DataLoader workers under spawn),
the same stream as the deprecated ``pack_*`` keywords (which warn), and the
errors of wrong combinations."""

import pickle
import warnings

import numpy as np
import pytest

import lodt
from lodt import _lodt


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("packing") / "ds"
    lengths = [5, 3, 4, 2, 7, 1, 6, 6, 2, 9, 3, 3]
    x = lodt.LodTensor(np.arange(sum(lengths), dtype=np.int32), recursive_seq_lens=[lengths])
    lodt.write_dataset(p, [lodt.Batch({"x": x})], fsync=False)
    return p


def ids(ds):
    return [[int(i) for i in got] for got, _ in ds]


def test_packing_holds_its_options_and_pickles():
    p = lodt.Packing(16, rows=2, buffer=40, equal=False, truncate=True)
    assert (p.tokens, p.rows, p.buffer, p.equal, p.truncate) == (16, 2, 40, False, True)
    assert repr(p) == "Packing(tokens=16, rows=2, buffer=40, equal=False, truncate=True)"
    assert lodt.Packing(8) == lodt.Packing(8, rows=None, buffer=1000, equal=None, truncate=False)
    assert lodt.Packing(8) != lodt.Packing(9)
    again = pickle.loads(pickle.dumps(p))
    assert again == p and repr(again) == repr(p)


def test_packing_gives_the_stream_of_the_deprecated_keywords(path):
    new = lodt.Dataset(path, packing=lodt.Packing(10, rows=2, buffer=6), return_ids=True)
    with pytest.warns(DeprecationWarning, match="packing=lodt.Packing"):
        old = lodt.Dataset(path, pack_tokens=10, pack_rows=2, pack_buffer=6, return_ids=True)
    assert old.packing == new.packing
    got = ids(new)
    assert got == ids(old)
    assert sorted(i for b in got for i in b) == list(range(12))
    # A packed dataset pickles with its options (DataLoader workers, spawn).
    assert ids(pickle.loads(pickle.dumps(new))) == got
    # Without packing: batches of batch_size, no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain = lodt.Dataset(path, batch_size=5, return_ids=True)
    assert [len(b) for b in ids(plain)] == [5, 5, 2]


def test_wrong_packing_arguments_are_clear_errors(path):
    with pytest.raises(ValueError, match="not both"):
        lodt.Dataset(path, packing=lodt.Packing(8), pack_tokens=8)
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="pack_truncate needs pack_tokens"):
        lodt.Dataset(path, pack_truncate=True)
    with pytest.raises(TypeError, match="lodt.Packing"):
        lodt.Dataset(path, packing={"tokens": 8})
    with pytest.raises(ValueError, match="max_rows .* or packing"):
        lodt.Dataset(path, packing=lodt.Packing(8), max_rows=8)
    with pytest.raises(ValueError, match="at least 1"):
        lodt.Dataset(path, packing=lodt.Packing(0))


def test_the_native_loader_reads_datasets_and_mixtures_only(path):
    reader = _lodt.DatasetReader(str(path))
    mixture = _lodt.MixtureReader([reader, reader], [1.0, 1.0], seed=2, stop="all_exhausted")
    first = _lodt.loader(reader, batch_size=4).next_with_ids()
    assert first is not None and first[0] == [0, 1, 2, 3]
    mixed = _lodt.loader(mixture, batch_size=4, prefetch=0)
    seen = []
    while (item := mixed.next_with_ids()) is not None:
        seen.extend(item[0])
    assert set(seen) == set(range(24))  # every sequence of both sources (one may repeat)
    with pytest.raises(TypeError, match="DatasetReader or a MixtureReader"):
        _lodt.loader("not a dataset")
    with pytest.raises(ValueError, match='remainder must be "keep", "drop" or "repeat"'):
        _lodt.loader(reader, remainder="all")
