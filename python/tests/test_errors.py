"""Invalid input of every kind raises a Python exception: never a crash,
never a panic (pyo3 would turn one into PanicException, a BaseException)."""

import numpy as np
import pytest

import lodt

JUNK = [None, 1, -1, 2**70, 1.5, "x", b"x", [], [[]], [[-1]], [["a"]], {}, object(), np.zeros((2, 0)), np.float32(1)]
OK = (TypeError, ValueError, IndexError, KeyError, OSError, OverflowError)


def _calls(words, tmp_path):
    f = str(tmp_path / "f.lodt")
    lodt.save(f, {"w": words})
    opened = lodt.open(f)
    sorted_ = lodt.SortedSequences(words)
    return [
        lambda j: lodt.LodTensor(j),
        lambda j: lodt.LodTensor(np.zeros(3), j),
        lambda j: lodt.LodTensor(np.zeros(3), lod=j),
        lambda j: lodt.create_lod_tensor(j, [[1]]),
        lambda j: lodt.create_lod_tensor(np.zeros((1, 1)), j),
        lambda j: words.branch(j),
        lambda j: words.sequence(j, 0),
        lambda j: words.sequence(0, j),
        lambda j: words.slice_level(0, j, 2),
        lambda j: words.slice_rows(j, 2),
        lambda j: words.take(j),
        lambda j: words[j],
        lambda j: words.set_lod(j),
        lambda j: words.copy().set_recursive_sequence_lengths(j),
        lambda j: words.num_sequences(j),
        lambda j: lodt.sequence_expand(words, j),
        lambda j: lodt.sequence_expand(j, words),
        lambda j: lodt.split(words, j),
        lambda j: lodt.merge(j),
        lambda j: lodt.merge([words, j]),
        lambda j: lodt.pad(j),
        lambda j: lodt.pad(words, j),
        lambda j: lodt.unpad(j, [[1]]),
        lambda j: lodt.unpad(np.zeros((1, 1)), j),
        lambda j: lodt.SortedSequences(j),
        lambda j: sorted_.segment_inputs(j),
        lambda j: sorted_.concat_outputs(j),
        lambda j: lodt.Batch(j),
        lambda j: lodt.Batch({"w": words}, j),
        lambda j: lodt.Batch({"w": words}).take(j),
        lambda j: lodt.LodTensor.from_arrow(j),
        lambda j: lodt.Batch.from_arrow(j),
        lambda j: lodt.open(j),
        lambda j: opened[j],
        lambda j: opened.row(j),
        lambda j: opened.take(j),
        lambda j: opened.batch_rows(j),
        lambda j: lodt.save(j, {"w": words}),
        lambda j: lodt.save(str(tmp_path / "g.lodt"), j),
        lambda j: lodt.Writer(j),
        lambda j: lodt.Writer(str(tmp_path / "h.lodt"), j),
        lambda j: lodt.verify(j),
        lambda j: lodt.recover(j),
        lambda j: lodt.convert(j, str(tmp_path / "x.lodt")),
        lambda j: lodt.convert(f, j),
        lambda j: lodt.read_paddle(j),
        lambda j: lodt.read_paddle_combined(j),
        lambda j: lodt.write_paddle(str(tmp_path / "p.pdtensor"), j),
        lambda j: lodt._lodt._tensor_from_state(j, [1], [], b"\0", True),
        lambda j: lodt._lodt._tensor_from_state("float32", j, [], b"\0", True),
        lambda j: lodt._lodt._tensor_from_state("uint8", [1], j, b"\0", True),
        lambda j: lodt._lodt._tensor_from_state("bool", [1], [], j, True),
    ]


def test_junk_arguments_raise(words, tmp_path, monkeypatch):
    # Junk like "x" is a valid relative path: keep what it writes in tmp_path.
    monkeypatch.chdir(tmp_path)
    calls = _calls(words, tmp_path)
    for call in calls:
        for j in JUNK:
            # Junk a call accepts (None as "no value", [] as an empty list,
            # "x" as a relative path) may return; anything else must be one
            # of the ordinary exceptions.
            try:
                call(j)
            except OK:
                pass
    # An object of no type lodt takes reaches every call's validation: each
    # raises, none returns and none panics.
    returned = []
    for i, call in enumerate(calls):
        try:
            call(object())
            returned.append(i)
        except OK:
            pass
    assert returned == [], f"calls {returned} accepted object()"


def test_hostile_unpickling_raises():
    make = lodt._lodt._tensor_from_state
    for args in [
        ("float64", [2**62, 2**62], [], b"", True),
        ("float32", [2], [[0, 5]], b"\0" * 8, True),
        ("bool", [2], [], b"\x02\x00", True),
        ("complex64", [1], [], b"\0" * 8, True),
        ("uint8", [3], [[0, 3], [0, 1]], b"abc", False),
    ]:
        with pytest.raises(OK):
            make(*args)


def test_bool_bytes_are_checked_from_numpy():
    raw = np.frombuffer(b"\x00\x01\x02", dtype=np.bool_)
    with pytest.raises(ValueError, match="invalid bool at element 2"):
        lodt.LodTensor(raw)
