"""lodt.Dataset gathers mini-batches into buffers recycled from mini-batches
whose arrays died: numpy arrays of a batch that is still held never change
while later batches are gathered, and a dead batch's buffer is filled again."""

import gc

import numpy as np

import lodt

DIM = 64


def write(path):
    """12 batches of 6 documents of 40-90 rows of float32[64] (10-23 KiB
    per document: a mini-batch of 8 is a pooled buffer); each value names its
    document, row and column."""

    def gen():
        doc = 0
        for _ in range(12):
            lengths = [40 + (doc + i) * 7 % 51 for i in range(6)]
            values = np.concatenate(
                [
                    (doc + i) * 100_000 + np.arange(n * DIM, dtype=np.float32).reshape(n, DIM)
                    for i, n in enumerate(lengths)
                ]
            )
            ids = np.repeat(np.arange(doc, doc + 6, dtype=np.int64), lengths).reshape(-1, 1)
            doc += 6
            yield {"x": lodt.create_lod_tensor(values, [lengths]), "id": lodt.create_lod_tensor(ids, [lengths])}

    lodt.write_dataset(path, gen(), fsync=False)


def expected(ds, ids):
    """The batch's arrays gathered anew (Dataset.take copies into fresh memory)."""
    b = ds.take([int(i) for i in ids])
    return np.array(b["x"]), np.array(b["id"])


def data_address(a):
    return a.__array_interface__["data"][0]


def test_arrays_of_held_batches_keep_their_values_while_later_batches_are_gathered(tmp_path):
    write(tmp_path / "d")
    for prefetch in (0, 2):
        ds = lodt.Dataset(tmp_path / "d", batch_size=8, shuffle=True, seed=5, return_ids=True, prefetch=prefetch)
        held = []
        previous = None
        for k, (ids, b) in enumerate(ds):
            x, i = np.asarray(b["x"]), np.asarray(b["id"])
            del b
            # The previous batch's arrays, checked now that this batch (and,
            # with a prefetch thread, the next ones) was gathered.
            if previous is not None:
                p_ids, p_x, p_i = previous
                want_x, want_i = expected(ds, p_ids)
                np.testing.assert_array_equal(p_x, want_x)
                np.testing.assert_array_equal(p_i, want_i)
            previous = (ids, x, i)
            if k % 3 == 0:
                held.append((ids, x, i))
            del x, i
        assert len(held) == 3
        for ids, x, i in held:
            want_x, want_i = expected(ds, ids)
            np.testing.assert_array_equal(x, want_x)
            np.testing.assert_array_equal(i, want_i)
        # Live arrays never share memory.
        assert len({data_address(x) for _, x, _ in held}) == len(held)


def test_a_dead_batchs_buffer_is_filled_again(tmp_path):
    write(tmp_path / "d")
    ds = lodt.Dataset(tmp_path / "d", batch_size=8, prefetch=0)
    addresses = []
    for b in ds:
        x = np.asarray(b["x"])
        addresses.append(data_address(x))
        # The array (a view of the buffer) outlives the batch object; when
        # both are gone the buffer goes back to the dataset's pool.
        del b, x
        gc.collect()
    # Each batch died before the next was gathered: one buffer served all 9.
    assert len(addresses) == 9
    assert len(set(addresses)) == 1, addresses
