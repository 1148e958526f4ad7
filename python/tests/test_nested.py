"""Nested sequences to LoD tensors from Python: lodt.from_nested (the
crate's LodTensor::from_nested structure) from lists and from Ray's numpy
object arrays, lodt.create_lod_tensor on top of it, and row offsets to a LoD
(torch's jagged form, the crate's Lod::try_from_row_offsets)."""

import numpy as np
import pytest

import lodt
from lodt import _lodt


def test_lists_nested_once_per_level():
    t = lodt.from_nested([[[1, 2], [3]], [[4, 5, 6]]], 2)
    assert t.lod() == [[0, 2, 3], [0, 2, 3, 6]]
    assert t.dtype == "int64" and np.asarray(t).tolist() == [1, 2, 3, 4, 5, 6]
    # Rows of an element shape; an empty sequence does not change the dtype.
    t = lodt.from_nested([[[1.5, 2.0], [3.0, 4.0]], [], [[5.0, 6.0]]])
    assert t.shape() == [3, 2] and t.dtype == "float64"
    assert t.recursive_sequence_lengths() == [[2, 0, 1]]
    assert lodt.from_nested([[1, 2], []]).dtype == "int64"
    # levels=0: the rows of a plain tensor.
    plain = lodt.from_nested([[1, 2], [3, 4]], 0)
    assert plain.lod() == [] and plain.shape() == [2, 2]
    # Tuples and generators are sequences too.
    assert lodt.from_nested(((1, 2), (x for x in [3]))).lod() == [[0, 2, 3]]


def test_rays_object_arrays_are_stacked_into_rows():
    # Ray's numpy form of a 1-level column of [2] elements: object arrays of object arrays.
    seq = lambda *rows: np.array([np.array(r) for r in rows] + [None], dtype=object)[:-1]  # noqa: E731
    column = np.array([seq([1, 2], [3, 4]), seq([5, 6])] + [None], dtype=object)[:-1]
    t = lodt.from_nested(column, 1)
    assert t.lod() == [[0, 2, 3]] and t.shape() == [3, 2]
    assert np.asarray(t).tolist() == [[1, 2], [3, 4], [5, 6]]
    # A dense column (every sequence the same length) is nested too.
    t = lodt.from_nested(np.arange(6, dtype=np.int32).reshape(2, 3), 1)
    assert t.lod() == [[0, 3, 6]] and t.dtype == "int32"


def test_bad_nesting_is_an_error_that_says_where():
    with pytest.raises(TypeError, match="the item at depth 1 is not a sequence, found int"):
        lodt.from_nested([[1], 2], 2)
    with pytest.raises(ValueError, match="at most 64 LoD levels"):
        lodt.from_nested([], 65)
    with pytest.raises(ValueError):
        lodt.from_nested([], 1)  # a level with no sequence
    with pytest.raises(ValueError):
        lodt.from_nested([[[1, 2], [3]]], 1)  # ragged rows


def test_create_lod_tensor_keeps_paddles_rows_of_one():
    t = lodt.create_lod_tensor([[1, 2], [3]], [[2, 1]])
    assert t.shape() == [3, 1] and t.dtype == "int64" and t.lod() == [[0, 2, 3]]
    t = lodt.create_lod_tensor([[[1, 2]], [[3, 4], [5, 6]]], None)
    assert t.shape() == [3, 2] and t.lod() == [[0, 1, 3]]
    with pytest.raises(ValueError, match=r"the lists have lengths \[\[2, 1\]\], recursive_seq_lens is \[\[1, 2\]\]"):
        lodt.create_lod_tensor([[1, 2], [3]], [[1, 2]])


def test_row_offsets_become_indices_of_the_level_below():
    assert _lodt.lod_from_row_offsets([[0, 9, 10, 15], [0, 3, 5, 9, 10, 12, 15]]) == [
        [0, 3, 4, 6],
        [0, 3, 5, 9, 10, 12, 15],
    ]
    with pytest.raises(ValueError, match="outer level 0: row offset 4 is not a boundary"):
        _lodt.lod_from_row_offsets([[0, 4, 15], [0, 3, 5, 9, 10, 12, 15]])
    with pytest.raises(ValueError, match="level 0: row offset -1 is negative"):
        _lodt.lod_from_row_offsets([[-1, 15], [0, 15]])
