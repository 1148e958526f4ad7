"""Packed mini-batches into torch (spec/DATASET.md 7.4): every token once,
attention over a packed batch equal to attention per sequence, [R, L] rows,
exact resume, jagged tensors at every level, and elastic resume across real
torch.distributed processes (gloo on 127.0.0.1)."""

import json
import socket

import numpy as np
import pytest

import lodt
from conftest import torch_or_skip

torch = torch_or_skip()
import lodt.torch as lt  # noqa: E402

N = 300
DIM = 8


def lengths():
    rng = np.random.default_rng(5)
    return rng.integers(1, 40, N)


def batches():
    """Sequence i: `x` [len_i, DIM] float32 (row r of it: i + r / 1000 in
    column 0), `words` 2 levels (sentences of tokens), `label` i."""
    lens = lengths()
    first = 0
    for size in [37, 50, 13, 80, 45, 75]:
        ids = np.arange(first, first + size)
        ls = lens[ids]
        x = np.concatenate([np.stack([np.full(n, i + np.arange(n) / 1000.0)] + [np.random.default_rng(i).standard_normal(n) for _ in range(DIM - 1)], axis=1) for i, n in zip(ids, ls)]).astype(np.float32)
        sents = [[int(n) // 2, int(n) - int(n) // 2] if n > 1 else [int(n)] for n in ls]
        words = lodt.LodTensor(
            np.arange(int(ls.sum()), dtype=np.int64),
            recursive_seq_lens=[[len(s) for s in sents], [w for s in sents for w in s]],
        )
        yield lodt.Batch(
            {
                "x": lodt.LodTensor(x, recursive_seq_lens=[ls.tolist()]),
                "words": words,
                "label": lodt.LodTensor(ids.astype(np.int64)),
            }
        )
        first += size
    assert first == N


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("pack") / "ds"
    lodt.write_dataset(p, batches(), shard_bytes=8000, fsync=False)
    return p


def labels(b):
    return [int(i) for i in np.asarray(b["label"]).ravel()]


def make(path, **kw):
    options = dict(shuffle=True, seed=3, packing=lodt.Packing(64, buffer=40), rows_of="x")
    options.update(kw)
    return lodt.Dataset(path, **options)


def test_every_token_once_and_every_bin_within_budget(path):
    lens = lengths()
    seen = []
    tokens = 0
    for b in make(path):
        ids = labels(b)
        rows = b["x"].shape()[0]
        assert rows == sum(lens[i] for i in ids)
        assert rows <= 64
        col = np.asarray(b["x"])[:, 0]
        expect = np.concatenate([i + np.arange(lens[i]) / 1000.0 for i in ids]).astype(np.float32)
        np.testing.assert_array_equal(col, expect)
        seen += ids
        tokens += rows
    assert sorted(seen) == list(range(N))
    assert tokens == int(lens.sum())


def reference_attention(q, k, v):
    return torch.softmax(q @ k.T / q.shape[-1] ** 0.5, dim=-1) @ v


def test_attention_over_a_packed_batch_equals_attention_per_sequence(path):
    checked = 0
    for b in make(path):
        vl = lt.varlen(b, tensor="x")
        x = vl.values[:, 1:].double()  # the normal columns (column 0 says where a row comes from)
        assert vl.cu_seqlens.dtype == torch.int32 and int(vl.cu_seqlens[0]) == 0
        assert int(vl.cu_seqlens[-1]) == x.shape[0]
        seqlens = vl.cu_seqlens[1:] - vl.cu_seqlens[:-1]
        assert vl.max_seqlen == int(seqlens.max())
        # Block-diagonal mask from cu_seqlens.
        seg = torch.repeat_interleave(torch.arange(len(seqlens)), seqlens.long())
        mask = seg[:, None] == seg[None, :]
        scores = (x @ x.T) / x.shape[-1] ** 0.5
        packed = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ x
        looped = torch.cat(
            [reference_attention(x[a:e], x[a:e], x[a:e]) for a, e in zip(vl.cu_seqlens[:-1].tolist(), vl.cu_seqlens[1:].tolist())]
        )
        torch.testing.assert_close(packed, looped, rtol=1e-9, atol=1e-9)
        # position_ids restart at each sequence.
        expect = torch.cat([torch.arange(int(n)) for n in seqlens])
        assert torch.equal(vl.position_ids, expect)
        checked += 1
    assert checked > 10


def test_fixed_rows_of_length_l(path):
    lens = lengths()
    seen = []
    for b in make(path, packing=lodt.Packing(32, rows=4)):
        vl = lt.varlen(b, level=0, tensor="x")
        starts = vl.row_starts.tolist()
        assert 2 <= len(starts) <= 5
        ids = labels(b)
        k = 0
        for r in range(len(starts) - 1):
            row = vl.row_cu_seqlens[starts[r] : starts[r + 1]].tolist()
            n = len(row) - 1
            assert row == [0] + np.cumsum([lens[i] for i in ids[k : k + n]]).tolist()
            assert row[-1] <= 32 or n == 1
            k += n
        assert k == len(ids)
        seen += ids
    assert sorted(seen) == list(range(N))


@pytest.mark.parametrize("rows", [None, 3])
def test_resume_mid_epoch_gives_the_identical_rest(path, rows):
    ds = make(path, packing=lodt.Packing(48, rows=rows))
    ds.set_epoch(2)
    full = [labels(b) for b in ds]
    for k in [0, 1, 5, len(full) - 1]:
        a = make(path, packing=lodt.Packing(48, rows=rows))
        a.set_epoch(2)
        it = iter(a)
        for _ in range(k):
            next(it)
        state = json.loads(json.dumps(a.state_dict()))
        assert state["loader"]["version"] == 2
        b = make(path, packing=lodt.Packing(48, rows=rows))
        b.load_state_dict(state)
        assert [labels(x) for x in b] == full[k:], k


@pytest.mark.parametrize("world,workers", [(2, 0), (3, 2), (4, 1)])
def test_every_rank_yields_as_many_packed_batches_and_every_token_once(path, world, workers):
    lens = lengths()
    counts, seen = [], []
    for rank in range(world):
        ds = make(path, packing=lodt.Packing(96), rank=rank, world_size=world)
        ds.set_epoch(1)
        n = 0
        for b in lt.DataLoader(ds, num_workers=workers):
            ids = labels(b)
            assert b["x"].shape()[0] == sum(lens[i] for i in ids)
            seen += ids
            n += 1
        counts.append(n)
    assert len(set(counts)) == 1, counts
    assert sorted(seen) == list(range(N))
    # Without equal counts, some rank differs here (what the option fixes).
    if world == 4:
        plain = [sum(1 for _ in make(path, packing=lodt.Packing(96, equal=False), rank=r, world_size=world)) for r in range(world)]
        assert len(set(plain)) > 1 and max(plain) == counts[0], (plain, counts)


@pytest.mark.parametrize("rows", [None, 3])
def test_resume_of_an_equal_count_rank_gives_the_identical_rest(path, rows):
    def ds():
        d = make(path, packing=lodt.Packing(48, rows=rows), rank=1, world_size=3)
        d.set_epoch(2)
        return d

    full = [labels(b) for b in ds()]
    for k in [1, 4, len(full) - 1]:
        a = ds()
        it = iter(a)
        for _ in range(k):
            next(it)
        state = json.loads(json.dumps(a.state_dict()))
        assert state["loader"]["version"] == 3 and state["loader"]["packing"]["equal"] is True
        b = ds()
        b.load_state_dict(state)
        assert [labels(x) for x in b] == full[k:], k


def test_unreachable_equal_counts_are_a_value_error(path):
    # 200 ranks of 300 sequences: ranks 0-99 get 2, the others 1. A budget
    # of 1 row packs each sequence alone: 2 mini-batches on rank 0, which a
    # rank of 1 sequence cannot match.
    ds = make(path, packing=lodt.Packing(1), rank=0, world_size=200)
    with pytest.raises(ValueError, match="fewer than the 2 mini-batches"):
        list(ds)


@pytest.mark.parametrize("rows", [None, 2])
def test_truncation_cuts_long_sequences_and_reports_them(path, rows):
    lens = lengths()
    seen, cuts = [], {}
    for b in make(path, packing=lodt.Packing(16, rows=rows, truncate=True)):
        ids = labels(b)
        kept = [min(int(lens[i]), 16) for i in ids]
        assert b["x"].recursive_sequence_lengths() == [kept]
        assert b["words"].shape()[0] == sum(kept)  # aligned with x: cut too
        col = np.asarray(b["x"])[:, 0]
        expect = np.concatenate([i + np.arange(k) / 1000.0 for i, k in zip(ids, kept)]).astype(np.float32)
        np.testing.assert_array_equal(col, expect)
        text = b.metadata.get("lodt.pack.truncated")
        got = dict(tuple(int(v) for v in kv.split(":")) for kv in text.split(",")) if text else {}
        assert got == {i: int(lens[i]) for i in ids if lens[i] > 16}
        cuts.update(got)
        seen += ids
    assert sorted(seen) == list(range(N))
    assert cuts == {i: int(lens[i]) for i in range(N) if lens[i] > 16}
    # Without truncation, a long sequence comes whole, alone.
    for b in make(path, packing=lodt.Packing(16, rows=rows)):
        for k in b["x"].recursive_sequence_lengths()[0]:
            assert k <= 16 or len(labels(b)) == 1 or rows
    with pytest.raises(ValueError, match="pack_truncate needs pack_tokens"):
        lodt.Dataset(path, pack_truncate=True)


def test_jagged_tensors_at_every_level_both_ways(path):
    b = next(iter(make(path)))
    words = b["words"]
    jagged, outer = lt.to_jagged(words)
    # The innermost level: values shared, not copied.
    assert jagged.values().data_ptr() == words.numpy().ctypes.data
    assert jagged.offsets().tolist() == [0] + np.cumsum(words.recursive_sequence_lengths()[1]).tolist()
    # The outer level in rows.
    sent_rows = np.cumsum(words.recursive_sequence_lengths()[1])
    per_seq = np.cumsum(words.recursive_sequence_lengths()[0])
    assert outer[0].tolist() == [0] + sent_rows[per_seq - 1].tolist()
    back = lt.from_jagged(jagged, outer)
    assert back.lod() == words.lod()
    np.testing.assert_array_equal(back.numpy(), words.numpy())
    with pytest.raises(ValueError, match="boundaries"):
        lt.from_jagged(jagged, [outer[0] + 1])


def test_collate_functions_in_data_loader_workers(path):
    ds = make(path)
    seen = []
    for item in lt.DataLoader(ds, num_workers=2, collate_fn=lt.JaggedCollate()):
        jagged, outer = item["words"]
        assert jagged.is_nested and len(outer) == 1
        seen += item["label"].tolist()
    assert sorted(seen) == list(range(N))
    total = 0
    for vl in lt.DataLoader(make(path), num_workers=2, collate_fn=lt.VarlenCollate(tensor="x")):
        assert isinstance(vl, lt.Varlen)
        total += int(vl.cu_seqlens[-1])
    assert total == int(lengths().sum())


# -- elastic resume with real processes --------------------------------------


def _dataset(path, packed):
    if packed:
        return lodt.Dataset(path, shuffle=True, seed=11, packing=lodt.Packing(64, buffer=20), rows_of="x")
    return lodt.Dataset(path, batch_size=4, shuffle=True, seed=11)


def _first_run(rank, world, port, path, out, packed):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        ds = _dataset(path, packed)
        ds.set_epoch(1)
        ids = []
        it = iter(lt.DataLoader(ds, num_workers=0))
        for _ in range(2 + rank):  # the ranks stop out of step
            ids += labels(next(it))
        with open(f"{out}.first.{rank}", "w") as f:
            json.dump({"ids": ids, "state": ds.state_dict()}, f)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _second_run(rank, world, port, path, out, old_world, packed):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        states = [json.load(open(f"{out}.first.{r}"))["state"] for r in range(old_world)]
        ds = _dataset(path, packed)
        ds.load_state_dict(lodt.Dataset.merge_states(states))
        ds.set_epoch(1)
        batches = [labels(b) for b in lt.DataLoader(ds, num_workers=0)]
        with open(f"{out}.second.{rank}", "w") as f:
            json.dump(batches, f)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("packed", [False, True], ids=["batches", "packed"])
def test_four_ranks_stop_two_resume_and_every_sequence_comes_once(path, tmp_path, packed):
    import torch.multiprocessing as mp

    out = str(tmp_path / "run")
    mp.spawn(_first_run, args=(4, _port(), str(path), out, packed), nprocs=4, join=True)
    first = [json.load(open(f"{out}.first.{r}"))["ids"] for r in range(4)]
    if not packed:
        assert [len(f) for f in first] == [8, 12, 16, 20]
    mp.spawn(_second_run, args=(2, _port(), str(path), out, 4, packed), nprocs=2, join=True)
    second_batches = [json.load(open(f"{out}.second.{r}")) for r in range(2)]
    if packed:  # two ranks: equal packed counts by default
        assert len(second_batches[0]) == len(second_batches[1])
    second = [[i for b in rank for i in b] for rank in second_batches]
    assert all(second)
    union = [i for part in first + second for i in part]
    assert len(union) == len(set(union)) == N
    assert sorted(union) == list(range(N))
