"""Sequence operations: split, merge, pad, unpad, SortedSequences."""

import numpy as np
import pytest

import lodt


def test_split_and_merge(words):
    parts = lodt.split(words, 2)
    assert [p.recursive_sequence_lengths() for p in parts] == [[[3, 1], [3, 2, 4, 1]], [[2], [2, 3]]]
    assert all(np.shares_memory(np.asarray(p), np.asarray(words)) for p in parts)
    assert lodt.merge(parts) == words
    assert len(lodt.split(words, 8)) == 3
    with pytest.raises(ValueError, match="at least one"):
        lodt.merge([])
    with pytest.raises(TypeError, match="dtype mismatch"):
        lodt.merge([words, lodt.LodTensor(np.zeros((1, 1), np.float32), [[1], [1]])])
    with pytest.raises(ValueError):
        lodt.split(words, 0)


def test_pad_and_unpad(words):
    padded, lengths = lodt.pad(words, -1)
    assert padded.shape == (3, 3, 4, 1) and lengths == [[3, 1, 2], [3, 2, 4, 1, 2, 3]]
    assert padded[2, 1, :, 0].tolist() == [12, 13, 14, -1]
    assert not padded.flags.writeable
    assert lodt.unpad(padded, lengths) == words
    x = lodt.create_lod_tensor(np.array([1.5, 2.5, 3.5], np.float32), [[1, 2]])
    p, l = lodt.pad(x)
    assert p.tolist() == [[1.5, 0.0], [2.5, 3.5]] and l == [[1, 2]]
    assert lodt.pad(lodt.LodTensor(np.array([True, False]), [[2]]), True)[0].tolist() == [[True, False]]
    with pytest.raises(ValueError, match="does not fit"):
        lodt.pad(words, 2**70)
    with pytest.raises(ValueError):
        lodt.unpad(np.zeros((2, 4)), [[2, 5]])


def test_sorted_sequences_restore(words):
    s = lodt.SortedSequences(words, 1)
    assert s.order == [2, 0, 5, 1, 4, 3] and s.sorted_lengths == [4, 3, 3, 2, 2, 1]
    assert s.batch_sizes == [6, 5, 3, 1] and s.num_steps == 4 and len(s) == 6
    steps = s.segment_inputs(words)
    assert [np.asarray(x).ravel().tolist() for x in steps][0] == [5, 0, 12, 3, 10, 9]
    assert s.concat_outputs(steps) == words
    top = lodt.SortedSequences([[0, 3, 4, 6]])
    assert top.order == [0, 2, 1]
    with pytest.raises(IndexError):
        lodt.SortedSequences(words, 2)
    with pytest.raises(ValueError):
        s.concat_outputs(steps[:2])


def test_sequence_expand_errors():
    x = lodt.create_lod_tensor(np.zeros((4, 1), np.float32), [[1, 3]])
    y = lodt.create_lod_tensor(np.zeros((6, 1), np.float32), [[1, 3], [1, 2, 1, 2]])
    with pytest.raises(ValueError, match="bad ref_level 5"):
        lodt.sequence_expand(x, y, 5)
    with pytest.raises(ValueError, match="rank of sequence_expand's x"):
        lodt.sequence_expand(lodt.LodTensor(np.zeros(2)), y, 0)
    # y may be given as offsets.
    assert lodt.sequence_expand(x, [[0, 1, 4]], 0).recursive_sequence_lengths() == [[1, 3, 3, 3]]
