"""LodTensor: construction, dtypes, zero-copy slicing and numpy views,
iteration, pickling, errors."""

import copy
import pickle

import numpy as np
import pytest

import lodt

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_numpy_dtype_round_trips(dtype):
    data = (np.arange(12) % 2).astype(dtype).reshape(6, 2)
    t = lodt.LodTensor(data, [[2, 4]])
    assert t.dtype == dtype
    a = np.asarray(t)
    assert a.dtype == np.dtype(dtype) and a.shape == (6, 2)
    np.testing.assert_array_equal(a, data)
    assert pickle.loads(pickle.dumps(t)) == t


def test_bfloat16_through_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install 'lodt[bfloat16]')")
    data = np.array([1.5, -2.0, 0.1, 1e30], dtype=ml_dtypes.bfloat16)
    t = lodt.LodTensor(data, [[1, 3]])
    assert t.dtype == "bfloat16"
    np.testing.assert_array_equal(np.asarray(t), data)
    assert np.asarray(t).dtype == data.dtype
    bits = t.numpy(bfloat16_as_uint16=True)
    assert bits.dtype == np.uint16 and bits.tolist() == data.view(np.uint16).tolist()


def test_non_native_and_strided_input_is_normalized():
    assert lodt.LodTensor(np.array([1, 2], dtype=">i4")).tolist() == [1, 2]
    assert lodt.LodTensor(np.arange(12).reshape(3, 4)[:, ::2]).tolist() == [[0, 2], [4, 6], [8, 10]]
    assert lodt.LodTensor([[1.0, 2.0], [3.0, 4.0]]).shape() == [2, 2]
    scalar = lodt.LodTensor(np.float64(2.5))
    assert scalar.shape() == [] and np.asarray(scalar).item() == 2.5


def test_unsupported_dtypes_are_type_errors():
    for bad in [np.array(["a"]), np.array([1 + 2j]), np.array([object()]), np.array(["2020-01-01"], "datetime64[D]")]:
        with pytest.raises(TypeError, match="unsupported dtype"):
            lodt.LodTensor(bad)


def test_numpy_view_is_read_only_and_shared(words):
    a = np.asarray(words)
    assert not a.flags.writeable
    assert np.shares_memory(a, np.asarray(words))
    with pytest.raises(ValueError):
        a[0, 0] = 7
    c = np.array(words)  # a copy
    assert c.flags.writeable and not np.shares_memory(c, a)
    assert np.asarray(words, dtype=np.float64).dtype == np.float64
    assert np.shares_memory(np.asarray(words, dtype=np.int64), a)
    with pytest.raises(ValueError, match="without a copy"):
        np.asarray(words, dtype=np.float64, copy=False)
    assert np.asarray(words, copy=False) is not None


def test_slices_share_memory_and_follow_the_guide(words):
    whole = np.asarray(words)
    art2 = words.branch(2)
    assert art2.tolist() == [[[10], [11]], [[12], [13], [14]]]
    assert art2.lod() == [[0, 2, 5]]
    assert np.shares_memory(np.asarray(art2), whole)
    s02 = words.branch(0, 2)
    assert np.asarray(s02).ravel().tolist() == [5, 6, 7, 8] and s02.lod() == []
    assert words[0, 2] == s02 and words[2] == art2
    assert words.branch(-1, -1) == words.branch(2, 1)
    assert words.sequence(1, 4).tolist() == [[10], [11]]
    sl = words.slice_level(0, 1, 3)
    assert sl.recursive_sequence_lengths() == [[1, 2], [1, 2, 3]]
    assert np.shares_memory(np.asarray(sl), whole)
    assert words[1:3] == sl
    rows = words.slice_rows(3, 5)
    assert rows.lod() == [] and rows.tolist() == [[3], [4]]
    # Slices of slices.
    assert art2.branch(1) == words.branch(2, 1)


def test_iteration_over_sequences(words):
    arts = list(words)
    assert len(words) == 3 and len(arts) == 3
    assert [a.recursive_sequence_lengths() for a in arts] == [[[3, 2, 4]], [[1]], [[2, 3]]]
    sentences = words.sequences(1)
    assert [s.shape()[0] for s in sentences] == [3, 2, 4, 1, 2, 3]
    assert all(np.shares_memory(np.asarray(s), np.asarray(words)) for s in sentences)
    plain = lodt.LodTensor(np.arange(6).reshape(3, 2))
    assert [r.tolist() for r in plain] == [[0, 1], [2, 3], [4, 5]]
    assert plain[1].shape() == [2] and plain[-1].tolist() == [4, 5]


def test_take_gathers_top_level_sequences(words):
    t = words.take([2, 0, 2])
    assert t.recursive_sequence_lengths() == [[2, 3, 2], [2, 3, 3, 2, 4, 2, 3]]
    assert np.asarray(t).ravel().tolist() == [10, 11, 12, 13, 14, 0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14]
    empty = words.take([])
    assert empty.shape() == [0, 1] and empty.num_levels == 2
    with pytest.raises(IndexError):
        words.take([3])
    plain = lodt.LodTensor(np.arange(4))
    assert plain.take([3, 1]).tolist() == [3, 1]


def test_tolist_and_properties(words):
    assert words.ndim == 2 and words.num_levels == 2 and words.rows == 15
    assert words.element_shape == [1] and words.nbytes == 120
    assert words.num_sequences(0) == 3 and words.num_sequences(1) == 6
    assert words.tolist()[1] == [[[9]]]
    assert "recursive_sequence_lengths=[[3, 1, 2], [3, 2, 4, 1, 2, 3]]" in repr(words)


def test_equality_copy_and_pickle(words):
    assert words == words.copy()
    assert not np.shares_memory(np.asarray(words.copy()), np.asarray(words))
    assert copy.copy(words) == words and copy.deepcopy(words) == words
    assert words != lodt.LodTensor(np.asarray(words))
    with pytest.raises(TypeError):
        hash(words)
    for t in [words, words.branch(2), lodt.LoDTensor(), lodt.LodTensor(np.float32(1))]:
        assert pickle.loads(pickle.dumps(t)) == t
    bad = lodt.LodTensor(np.zeros(3))
    bad.set_recursive_sequence_lengths([[1]])
    back = pickle.loads(pickle.dumps(bad))
    assert not back.has_valid_recursive_sequence_lengths() and back.lod() == [[0, 1]]


def test_set_replaces_without_touching_views(words):
    t = lodt.LodTensor(np.arange(3.0))
    view = np.asarray(t)
    t.set(np.arange(5.0))
    assert view.tolist() == [0.0, 1.0, 2.0]
    assert np.asarray(t).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_invalid_lods_raise_the_rust_message():
    cases = [
        ([[0, 3, 2]], "invalid LoD at level 0, index 2: offsets must be non-decreasing: expected >= 3, found 2"),
        ([[1, 3]], "invalid LoD at level 0, index 0: a level must start at offset 0: expected 0, found 1"),
        ([[0]], "invalid LoD at level 0, index 0: a level needs at least 2 offsets: expected >= 2, found 1"),
        ([[0, 1], [0, 1, 2]], "the last offset must equal the number of sequences of the next level"),
    ]
    for lod, message in cases:
        with pytest.raises(ValueError) as e:
            lodt.LodTensor(np.zeros(2), lod=lod)
        assert message in str(e.value)
    with pytest.raises(ValueError, match="rows against the LoD's last offset"):
        lodt.create_lod_tensor(np.zeros((5, 1)), [[2, 2]])
    with pytest.raises(TypeError):
        lodt.LodTensor(np.zeros(2), lod=[[0, -1]])
    with pytest.raises(TypeError):
        lodt.LodTensor(np.zeros(2), lod="nope")
    with pytest.raises(TypeError):
        lodt.LodTensor(np.zeros(2), [[2]], lod=[[0, 2]])


def test_index_errors():
    t = lodt.create_lod_tensor(np.zeros((3, 1)), [[1, 2]])
    with pytest.raises(IndexError):
        t.branch(2)
    with pytest.raises(IndexError):
        t[5]
    with pytest.raises(IndexError):
        t.sequence(3, 0)
    with pytest.raises(IndexError):
        t.slice_level(0, 1, 3)
    with pytest.raises(IndexError):
        t.slice_rows(2, 4)
    with pytest.raises(ValueError, match="step 1"):
        t[::2]
    with pytest.raises(TypeError):
        t["x"]
    with pytest.raises(TypeError):
        len(lodt.LodTensor(np.float32(1)))
    with pytest.raises(ValueError, match="no data"):
        np.asarray(lodt.LoDTensor())
