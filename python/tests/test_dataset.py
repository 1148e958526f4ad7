"""Sharded datasets from Python: write_dataset, lodt.Dataset's metadata,
random access, shuffled epochs, rank partitions, resume, and errors. The
torch DataLoader tests are in test_dataset_torch.py."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import lodt

N_BATCHES = 12


def make_batch(k, n, first):
    """Batch ``k`` of ``n`` documents, ids ``first..first+n``: ``tokens``
    (documents → sentences → int64 tokens), ``emb`` (float32 [rows, 4], one
    row per sentence) and ``label`` (the id)."""
    sentences = [(first + i) % 3 + 1 for i in range(n)]
    lengths = [(j % 4) + 1 for j in range(sum(sentences))]
    ids = np.repeat(np.arange(first, first + n), [sum(lengths[sum(sentences[:i]):sum(sentences[:i + 1])]) for i in range(n)])
    tokens = lodt.create_lod_tensor((ids * 1000 + np.arange(len(ids))).astype(np.int64).reshape(-1, 1), [sentences, lengths])
    emb = lodt.create_lod_tensor(
        np.repeat(np.arange(first, first + n), sentences).astype(np.float32)[:, None] * np.ones((1, 4), np.float32),
        [sentences],
    )
    label = lodt.LodTensor(np.arange(first, first + n, dtype=np.int64))
    return {"tokens": tokens, "emb": emb, "label": label}


def batch_sizes():
    # Sizes vary (1 to 9 documents).
    return [(k * 5) % 9 + 1 for k in range(N_BATCHES)]


def all_batches():
    first = 0
    for k, n in enumerate(batch_sizes()):
        yield make_batch(k, n, first)
        first += n


TOTAL = sum(batch_sizes())


@pytest.fixture
def dataset_dir(tmp_path):
    path = tmp_path / "train"
    totals = lodt.write_dataset(path, all_batches(), shard_bytes=3000, metadata={"split": "train"}, fsync=False)
    assert totals["sequences"] == TOTAL
    return path


def labels(batch):
    return [int(x) for x in np.asarray(batch["label"]).ravel()]


def epoch_ids(ds):
    return [i for b in ds for i in labels(b)]


def test_write_dataset_and_metadata(dataset_dir):
    ds = lodt.Dataset(dataset_dir)
    assert len(ds) == ds.num_sequences == TOTAL
    assert ds.num_shards >= 3
    assert ds.num_batches == N_BATCHES
    assert sum(s["sequences"] for s in ds.shards) == TOTAL
    assert ds.num_bytes == sum(os.path.getsize(dataset_dir / s["name"]) for s in ds.shards)
    assert ds.metadata == {"split": "train"}
    assert [(t["name"], t["dtype"], t["element_shape"], t["lod_levels"]) for t in ds.schema] == [
        ("tokens", "int64", [1], 2),
        ("emb", "float32", [4], 1),
        ("label", "int64", [], 0),
    ]
    assert ds.manifest["format"] == "lodt-dataset"
    assert ds.verify() == {"shards": ds.num_shards, "bytes": ds.num_bytes, "batches": N_BATCHES, "sequences": TOTAL}


def test_the_shard_index_is_written_and_rebuilt(dataset_dir):
    """Every write leaves one shard index, named on the manifest's first line;
    without it the dataset reads the same from its JSON, and write_index
    rebuilds it (spec/DATASET.md 3.2)."""
    indexes = lambda: sorted(n for n in os.listdir(dataset_dir) if n.startswith("lodt-dataset.index."))
    (name,) = indexes()
    with open(dataset_dir / "lodt-dataset.json") as f:
        first = f.readline()
    assert f'"index":{{"name":"{name}"' in first
    assert lodt.write_index(dataset_dir) is False
    with_index = [labels(b) for b in lodt.Dataset(dataset_dir, shuffle=True, seed=5, batch_size=4)]
    os.remove(dataset_dir / name)
    ds = lodt.Dataset(dataset_dir, shuffle=True, seed=5, batch_size=4)
    assert len(ds) == TOTAL and ds.num_batches == N_BATCHES
    assert [labels(b) for b in ds] == with_index
    assert lodt.write_index(dataset_dir) is True
    assert len(indexes()) == 1 and indexes() != [name]
    assert [labels(b) for b in lodt.Dataset(dataset_dir, shuffle=True, seed=5, batch_size=4)] == with_index
    with pytest.raises(FileNotFoundError):
        lodt.write_index(dataset_dir / "missing")
    assert not (dataset_dir / "missing").exists()


def test_random_access_matches_what_was_written(dataset_dir):
    ds = lodt.Dataset(dataset_dir)
    written = {}
    for b in all_batches():
        for i, label in enumerate(np.asarray(b["label"])):
            written[int(label)] = (b["tokens"].sequence(0, i), b["emb"].sequence(0, i))
    for i in [0, 1, 7, TOTAL - 1]:
        seq = ds[i]
        assert isinstance(seq, lodt.Batch)
        assert list(seq.keys()) == ["tokens", "emb", "label"]
        assert labels(seq) == [i]
        tokens, emb = written[i]
        assert np.array_equal(np.asarray(seq["tokens"]), np.asarray(tokens))
        assert seq["tokens"].recursive_sequence_lengths() == [[len(tokens.recursive_sequence_lengths()[0])], tokens.recursive_sequence_lengths()[0]]
        assert np.array_equal(np.asarray(seq["emb"]), np.asarray(emb))
    assert labels(ds[-1]) == [TOTAL - 1]
    taken = ds.take([5, 2, -1, 5])
    assert labels(taken) == [5, 2, TOTAL - 1, 5]
    assert taken["tokens"].num_levels == 2 and taken["tokens"].recursive_sequence_lengths()[0] == [
        (5 % 3) + 1, (2 % 3) + 1, ((TOTAL - 1) % 3) + 1, (5 % 3) + 1
    ]
    empty = ds.take([])
    assert list(empty.keys()) == ["tokens", "emb", "label"] and empty.num_rows == 0
    assert (empty["tokens"].num_levels, empty["emb"].shape()) == (2, [0, 4])
    with pytest.raises(IndexError, match="out of range"):
        ds[TOTAL]
    with pytest.raises(IndexError):
        ds.take([TOTAL])


def test_unshuffled_epoch_is_dataset_order_in_lod_batches(dataset_dir):
    ds = lodt.Dataset(dataset_dir, batch_size=5)
    batches = list(ds)
    assert all(isinstance(b, lodt.Batch) for b in batches)
    assert [b.num_rows for b in batches[:-1]] == [5] * (len(batches) - 1)
    assert epoch_ids(ds) == list(range(TOTAL))
    first = batches[0]
    # Mini-batches keep every LoD level: 5 documents of their sentences.
    assert first["tokens"].recursive_sequence_lengths()[0] == [i % 3 + 1 for i in range(5)]
    assert first["emb"].shape() == [sum(i % 3 + 1 for i in range(5)), 4]


def test_shuffle_every_sequence_once_new_order_each_epoch(dataset_dir):
    ds = lodt.Dataset(dataset_dir, batch_size=4, shuffle=True, seed=11)
    orders = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        assert ds.epoch == epoch
        ids = epoch_ids(ds)
        assert sorted(ids) == list(range(TOTAL))
        orders.append(ids)
    assert orders[0] != orders[1] != orders[2]
    assert orders[0] != list(range(TOTAL))
    # Deterministic: another Dataset with the same seed and epoch agrees.
    again = lodt.Dataset(dataset_dir, batch_size=7, shuffle=True, seed=11)
    again.set_epoch(1)
    assert epoch_ids(again) == orders[1]
    other = lodt.Dataset(dataset_dir, batch_size=4, shuffle=True, seed=12)
    assert epoch_ids(other) != orders[0]


@pytest.mark.parametrize("world", [2, 3])
def test_rank_partitions_are_disjoint_and_cover(dataset_dir, world):
    parts = []
    for rank in range(world):
        ds = lodt.Dataset(dataset_dir, batch_size=3, shuffle=True, seed=5, rank=rank, world_size=world)
        ds.set_epoch(2)
        parts.append(epoch_ids(ds))
    assert sum(len(p) for p in parts) == TOTAL
    assert sorted(i for p in parts for i in p) == list(range(TOTAL))
    assert max(len(p) for p in parts) - min(len(p) for p in parts) <= 1
    # "drop": equal counts, the remainder dropped.
    dropped = [
        epoch_ids(lodt.Dataset(dataset_dir, rank=r, world_size=world, remainder="drop")) for r in range(world)
    ]
    assert {len(p) for p in dropped} == {TOTAL // world}
    assert len(set(i for p in dropped for i in p)) == (TOTAL // world) * world


def test_return_ids_and_row_budget(dataset_dir):
    ds = lodt.Dataset(dataset_dir, max_rows=6, rows_of="emb", return_ids=True, shuffle=True, seed=2)
    seen = []
    for ids, batch in ds:
        assert ids.dtype == np.int64
        assert ids.tolist() == labels(batch)
        rows = batch["emb"].shape()[0]
        assert rows <= 6 or len(ids) == 1
        seen.extend(ids.tolist())
    assert sorted(seen) == list(range(TOTAL))


@pytest.mark.parametrize("steps", [0, 1, 4, 7])
def test_resume_continues_with_the_next_batch(dataset_dir, steps):
    def make():
        return lodt.Dataset(dataset_dir, batch_size=3, shuffle=True, seed=9, shuffle_buffer=8)

    full = make()
    full.set_epoch(1)
    uninterrupted = [labels(b) for b in full]

    ds = make()
    ds.set_epoch(1)
    it = iter(ds)
    head = [labels(next(it)) for _ in range(steps)]
    state = json.loads(json.dumps(ds.state_dict()))  # survives JSON
    assert state["loader"]["epoch"] == 1
    assert state["loader"]["consumed"] == {"0": sum(len(h) for h in head)}

    resumed = make()
    resumed.load_state_dict(state)
    assert resumed.epoch == 1
    resumed.set_epoch(1)  # the usual loop calls set_epoch: the loaded position stays
    rest = [labels(b) for b in resumed]
    assert head + rest == uninterrupted
    # After the epoch, set_epoch moves on to the next one from its start.
    resumed.set_epoch(2)
    assert sorted(epoch_ids(resumed)) == list(range(TOTAL))


def test_resume_on_another_world_size(dataset_dir):
    def make(rank, world):
        return lodt.Dataset(dataset_dir, batch_size=2, shuffle=True, seed=4, rank=rank, world_size=world)

    consumed, states = [], []
    for rank, steps in [(0, 3), (1, 1)]:
        ds = make(rank, 2)
        it = iter(ds)
        for _ in range(steps):
            consumed.extend(labels(next(it)))
        states.append(ds.state_dict())
    # One rank's state alone cannot place three ranks.
    with pytest.raises(ValueError, match="merged"):
        make(0, 3).load_state_dict(states[0])
    merged = lodt.Dataset.merge_states(states)
    rest = []
    for rank in range(3):
        ds = make(rank, 3)
        ds.load_state_dict(merged)
        rest.extend(epoch_ids(ds))
    assert sorted(consumed + rest) == list(range(TOTAL))


def test_state_errors(dataset_dir, tmp_path):
    ds = lodt.Dataset(dataset_dir, shuffle=True, seed=1)
    state = ds.state_dict()
    with pytest.raises(ValueError, match="shuffle"):
        lodt.Dataset(dataset_dir, shuffle=True, seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="remainder"):
        lodt.Dataset(dataset_dir, shuffle=True, seed=1, remainder="drop").load_state_dict(state)
    other = tmp_path / "other"
    lodt.write_dataset(other, make_batch(0, 3, 0), fsync=False)
    with pytest.raises(ValueError, match="another dataset"):
        lodt.Dataset(other, shuffle=True, seed=1).load_state_dict(state)
    with pytest.raises(ValueError, match="not a dataset state"):
        ds.load_state_dict({"epoch": 3})
    with pytest.raises(TypeError):
        ds.load_state_dict("state")  # type: ignore[arg-type]
    # A failed load leaves the dataset as it was.
    assert sorted(epoch_ids(ds)) == list(range(TOTAL))


def test_bad_options_and_paths(dataset_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match="not a lodt dataset"):
        lodt.Dataset(tmp_path / "nothing")
    with pytest.raises(ValueError, match="at least 1 sequence"):
        lodt.Dataset(dataset_dir, batch_size=0)
    with pytest.raises(ValueError, match="remainder"):
        lodt.Dataset(dataset_dir, remainder="some")
    with pytest.raises(ValueError, match="rank 2 of world size 2"):
        lodt.Dataset(dataset_dir, rank=2, world_size=2)
    with pytest.raises(ValueError, match="both rank and world_size"):
        lodt.Dataset(dataset_dir, rank=0)
    with pytest.raises(ValueError, match="does not have"):
        lodt.Dataset(dataset_dir, max_rows=5, rows_of="nope")


def test_damaged_shard_is_an_error_naming_it(dataset_dir):
    ds = lodt.Dataset(dataset_dir)
    shard = ds.shards[1]["name"]
    data = bytearray((dataset_dir / shard).read_bytes())
    data[-40] ^= 0xFF  # inside the footer
    (dataset_dir / shard).write_bytes(bytes(data))
    fresh = lodt.Dataset(dataset_dir)
    with pytest.raises(ValueError, match=shard):
        list(fresh)
    with pytest.raises(ValueError, match=shard):
        fresh.verify()
    (dataset_dir / shard).write_bytes(bytes(data[:100]))
    with pytest.raises(ValueError, match=shard):
        lodt.Dataset(dataset_dir)[ds.shards[0]["sequences"]]  # shard 1's first sequence


def test_append_parts_and_schema_checks(tmp_path):
    path = tmp_path / "d"
    lodt.write_dataset(path, [make_batch(0, 3, 0)], fsync=False)
    with pytest.raises(FileExistsError, match="already holds"):
        lodt.write_dataset(path, [make_batch(1, 2, 3)])
    totals = lodt.write_dataset(path, [make_batch(1, 2, 3), lodt.Batch(make_batch(2, 4, 5))], mode="append", fsync=False)
    assert (totals["shards"], totals["sequences"]) == (2, 9)
    assert epoch_ids(lodt.Dataset(path)) == list(range(9))
    # A batch of another schema is refused; the manifest stays as it was.
    bad = dict(make_batch(3, 2, 9))
    bad["label"] = lodt.LodTensor(np.zeros(2, dtype=np.float32))
    before = (path / "lodt-dataset.json").read_bytes()
    with pytest.raises(ValueError, match="schema"):
        lodt.write_dataset(path, [make_batch(3, 2, 9), bad], mode="append", fsync=False)
    assert (path / "lodt-dataset.json").read_bytes() == before
    # Two parallel writers, then a merge.
    a = lodt.write_dataset(path, [make_batch(4, 2, 9)], mode="part", writer_id="a", fsync=False)
    b = lodt.write_dataset(path, [make_batch(5, 1, 11)], mode="part", writer_id="b", fsync=False)
    assert (a["sequences"], b["sequences"]) == (2, 1)
    assert len(lodt.Dataset(path)) == 9  # not merged yet
    merged = lodt.commit_parts(path)
    assert merged["sequences"] == 12
    assert epoch_ids(lodt.Dataset(path)) == list(range(12))
    with pytest.raises(ValueError, match="writer_id"):
        lodt.write_dataset(path, [], mode="part")
    with pytest.raises(ValueError, match="mode"):
        lodt.write_dataset(path, [], mode="overwrite")


def test_dataset_writer_streams_and_aborts(tmp_path):
    path = tmp_path / "w"
    with lodt.DatasetWriter(path, shard_bytes=1500, fsync=False) as w:
        for k in range(4):
            w.write(make_batch(k, 3, 3 * k))
        assert w.batches_written == 4
    assert len(lodt.Dataset(path)) == 12
    with pytest.raises(RuntimeError, match="stop"):
        with lodt.DatasetWriter(path, mode="append", fsync=False) as w:
            w.write(make_batch(9, 3, 12))
            raise RuntimeError("stop")
    assert len(lodt.Dataset(path)) == 12  # abandoned: manifest unchanged


def test_rust_panic_surfaces_as_runtime_error():
    with pytest.raises(RuntimeError, match="panic"):
        lodt._lodt._panic_for_test()


def test_dataset_pickles_without_its_handles(dataset_dir):
    import pickle

    ds = lodt.Dataset(dataset_dir, batch_size=4, shuffle=True, seed=3)
    ds.set_epoch(2)
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.epoch == 2 and len(copy) == TOTAL
    assert epoch_ids(copy) == epoch_ids(ds)


@pytest.mark.torch
def test_opening_a_dataset_imports_no_framework(dataset_dir):
    # torch is installed: lodt.Dataset is torch's kind only once torch is
    # imported, and opening, counting and iterating import nothing.
    code = f"""
import pickle, sys
import lodt
ds = lodt.Dataset({str(dataset_dir)!r}, batch_size=4, shuffle=True, seed=1)
assert len(ds) > 0
ids = sorted(int(i) for b in ds for i in b["label"].numpy())
assert ids == list(range({TOTAL})), ids
pickle.loads(pickle.dumps(ds))
assert not [m for m in sys.modules if m.split(".")[0] in ("torch", "tensorflow", "jax")], "a framework was imported"
import torch.utils.data as data
assert not isinstance(ds, data.IterableDataset)
later = lodt.Dataset({str(dataset_dir)!r}, batch_size=4, shuffle=True, seed=1)
assert isinstance(later, data.IterableDataset) and isinstance(later, lodt.Dataset)
assert isinstance(pickle.loads(pickle.dumps(ds)), data.IterableDataset)
got = sorted(int(i) for b in data.DataLoader(later, batch_size=None, num_workers=2) for i in b["label"].numpy())
assert got == list(range({TOTAL})), got
import lodt.torch
got = sorted(int(i) for b in lodt.torch.DataLoader(ds, num_workers=2) for i in b["label"].numpy())
assert got == list(range({TOTAL})), got
assert isinstance(ds, data.IterableDataset)
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_works_without_torch(dataset_dir):
    code = f"""
import sys
sys.modules["torch"] = None  # as if torch were not installed
import lodt
ds = lodt.Dataset({str(dataset_dir)!r}, batch_size=4, shuffle=True, seed=1)
assert type(ds).__mro__[1] is object, type(ds).__mro__
ids = sorted(int(i) for b in ds for i in b["label"].numpy())
assert ids == list(range({TOTAL})), ids
try:
    import lodt.torch
except ImportError as e:
    assert "lodt[torch]" in str(e), e
else:
    raise AssertionError("lodt.torch imported without torch")
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
