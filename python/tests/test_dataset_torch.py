"""lodt.Dataset with a real torch DataLoader (0 and 2 workers) and
torch.distributed (gloo on 127.0.0.1): every sequence exactly once per
epoch, a new order each epoch, disjoint rank partitions, and resume from
state_dict equal to the uninterrupted stream."""

import socket

import numpy as np
import pytest

import lodt
from conftest import torch_or_skip
from test_dataset import TOTAL, all_batches, labels

torch = torch_or_skip()
import lodt.torch as lt  # noqa: E402
from torch.utils.data import DataLoader, IterableDataset  # noqa: E402


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("ds") / "train"
    lodt.write_dataset(path, all_batches(), shard_bytes=3000, fsync=False)
    return path


def make(path, **kw):
    options = dict(batch_size=3, shuffle=True, seed=21, shuffle_buffer=16)
    options.update(kw)
    return lodt.Dataset(path, **options)


def stream(loader):
    return [labels(b) for b in loader]


def test_is_an_iterable_dataset(dataset_dir):
    ds = make(dataset_dir)
    assert isinstance(ds, IterableDataset)
    assert len(ds) == TOTAL


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("tracked", [False, True], ids=["torch.DataLoader", "lodt.torch.DataLoader"])
def test_every_sequence_once_per_epoch_new_order_each(dataset_dir, workers, tracked):
    ds = make(dataset_dir)
    if tracked:
        loader = lt.DataLoader(ds, num_workers=workers)
    else:
        loader = DataLoader(ds, batch_size=None, num_workers=workers)
    orders = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        batches = list(loader)
        assert all(isinstance(b, lodt.Batch) for b in batches)
        ids = [i for b in batches for i in labels(b)]
        assert sorted(ids) == list(range(TOTAL)), f"epoch {epoch}"
        orders.append(ids)
    assert orders[0] != orders[1] != orders[2]
    # The same epoch read again gives the same order.
    ds.set_epoch(1)
    assert [i for b in loader for i in labels(b)] == orders[1]


def test_workers_split_each_rank_and_ranks_are_disjoint(dataset_dir):
    parts = []
    for rank in range(2):
        ds = make(dataset_dir, rank=rank, world_size=2)
        ds.set_epoch(3)
        parts.append([i for b in lt.DataLoader(ds, num_workers=2) for i in labels(b)])
    assert not set(parts[0]) & set(parts[1])
    assert sorted(parts[0] + parts[1]) == list(range(TOTAL))
    # 4 consumers (rank × 2 workers + worker) of 14, 14, 13, 13 sequences.
    counts = [-(-(TOTAL - c) // 4) for c in range(4)]
    assert [len(p) for p in parts] == [counts[0] + counts[1], counts[2] + counts[3]]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("steps", [1, 4, 5])
def test_resume_from_state_dict_equals_uninterrupted(dataset_dir, workers, steps):
    full = make(dataset_dir)
    full.set_epoch(2)
    uninterrupted = stream(lt.DataLoader(full, num_workers=workers))

    ds = make(dataset_dir)
    ds.set_epoch(2)
    it = iter(lt.DataLoader(ds, num_workers=workers))
    head = [labels(next(it)) for _ in range(steps)]
    state = ds.state_dict()
    del it  # the job dies; workers had prefetched more than was delivered
    assert state["loader"]["consumers"] == max(workers, 1)
    assert sum(state["loader"]["consumed"].values()) == sum(len(h) for h in head)

    resumed = make(dataset_dir)
    resumed.load_state_dict(state)
    resumed.set_epoch(2)
    rest = stream(lt.DataLoader(resumed, num_workers=workers))
    assert head + rest == uninterrupted
    # The resumed run's own state, at its end, says the epoch is complete.
    end = resumed.state_dict()["loader"]
    assert sum(end["consumed"].values()) == TOTAL


def test_resume_with_another_worker_count(dataset_dir):
    ds = make(dataset_dir)
    it = iter(lt.DataLoader(ds, num_workers=2))
    head = [i for _ in range(3) for i in labels(next(it))]
    state = ds.state_dict()
    del it
    resumed = make(dataset_dir)
    resumed.load_state_dict(state)  # 2 consumers -> 1: the rest of the epoch
    rest = [i for b in lt.DataLoader(resumed, num_workers=0) for i in labels(b)]
    assert sorted(head + rest) == list(range(TOTAL))


def test_collate_fn_runs_in_the_workers(dataset_dir):
    ds = make(dataset_dir, return_ids=True)
    loader = lt.DataLoader(ds, num_workers=2, collate_fn=lambda item: (item[0], lt.to_torch(item[1]["emb"])))
    seen = []
    for ids, emb in loader:
        assert isinstance(emb, torch.Tensor) and emb.is_nested
        assert [float(seq[0, 0]) for seq in emb.unbind()] == [float(i) for i in ids]
        seen.extend(int(i) for i in ids)
    assert sorted(seen) == list(range(TOTAL))
    assert sum(ds.state_dict()["loader"]["consumed"].values()) == TOTAL


def test_data_loader_refuses_what_it_cannot_track(dataset_dir):
    ds = make(dataset_dir)
    with pytest.raises(ValueError, match="batch_size"):
        lt.DataLoader(ds, batch_size=4)
    with pytest.raises(ValueError, match="persistent_workers"):
        lt.DataLoader(ds, num_workers=1, persistent_workers=True)
    with pytest.raises(TypeError, match="lodt.Dataset"):
        lt.DataLoader([1, 2, 3])


def _rank_main(rank, world, port, path, out):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        ds = lodt.Dataset(path, batch_size=2, shuffle=True, seed=8)
        ds.set_epoch(1)
        ids = [i for b in lt.DataLoader(ds, num_workers=0) for i in labels(b)]
        state = ds.state_dict()["loader"]
        with open(f"{out}.{rank}", "w") as f:
            f.write(" ".join(map(str, ids)) + "\n" + " ".join(state["consumed"]) + "\n")
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_torch_distributed_rank_and_world_size(dataset_dir, tmp_path):
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = str(tmp_path / "ids")
    mp.spawn(_rank_main, args=(2, port, str(dataset_dir), out), nprocs=2, join=True)
    parts = []
    for rank in range(2):
        ids_line, consumers_line = open(f"{out}.{rank}").read().splitlines()
        parts.append([int(x) for x in ids_line.split()])
        assert consumers_line.split() == [str(rank)]  # consumer = rank (1 worker)
    assert not set(parts[0]) & set(parts[1])
    assert sorted(parts[0] + parts[1]) == list(range(TOTAL))


def test_spawned_workers_open_the_dataset_themselves(dataset_dir):
    ds = make(dataset_dir)
    ds.set_epoch(4)
    loader = lt.DataLoader(ds, num_workers=2, multiprocessing_context="spawn")
    it = iter(loader)
    head = [labels(next(it)) for _ in range(3)]
    state = ds.state_dict()
    rest = stream(it)
    assert sorted(i for b in head + rest for i in b) == list(range(TOTAL))
    resumed = make(dataset_dir)
    resumed.load_state_dict(state)
    assert stream(lt.DataLoader(resumed, num_workers=2)) == rest


@pytest.mark.parametrize("kind", ["plain", "packed"])
def test_a_checkpoint_right_after_a_resume_is_the_loaded_state(dataset_dir, kind):
    extra = {"packing": lodt.Packing(8)} if kind == "packed" else {}
    full = make(dataset_dir, **extra)
    uninterrupted = stream(lt.DataLoader(full, num_workers=2))
    ds = make(dataset_dir, **extra)
    it = iter(lt.DataLoader(ds, num_workers=2))
    head = [labels(next(it)) for _ in range(3)]
    state = ds.state_dict()
    del it
    # Preempted again at once: the checkpoint taken before the first step
    # of the resumed run is the state it was resumed from.
    again = make(dataset_dir, **extra)
    again.load_state_dict(state)
    assert again.state_dict() == state
    resumed = make(dataset_dir, **extra)
    resumed.load_state_dict(again.state_dict())
    assert head + stream(lt.DataLoader(resumed, num_workers=2)) == uninterrupted


def test_states_a_loader_never_wrote_are_refused_at_load(dataset_dir):
    ds = make(dataset_dir)
    it = iter(lt.DataLoader(ds, num_workers=0))
    next(it)
    state = ds.state_dict()
    del it
    assert state["loader"]["consumers"] == 1
    # next_worker not a worker number.
    for bad in ("x", -1, 1.5, True):
        with pytest.raises(ValueError, match="next_worker"):
            make(dataset_dir).load_state_dict({**state, "next_worker": bad})
    # Two consumers, but only consumer 0's count: no worker 1 could resume.
    two = {**state, "loader": {**state["loader"], "consumers": 2}}
    with pytest.raises(ValueError, match="no count for consumer 1"):
        make(dataset_dir).load_state_dict(two)
    # A count beyond the consumer's share.
    big = {**state, "loader": {**state["loader"], "consumed": {"0": TOTAL + 1}}}
    with pytest.raises(ValueError, match="share"):
        make(dataset_dir).load_state_dict(big)


def test_workers_report_their_cursor_and_a_late_checkpoint_resumes_exactly(tmp_path):
    # Past 65,536 positions each worker's state has a cursor (spec/DATASET.md
    # 7.3); the workers send it with a mini-batch only when it moves, and
    # state_dict() puts it back.
    path = tmp_path / "big"
    x = lodt.create_lod_tensor(np.arange(140_000, dtype=np.int32).reshape(-1, 1), [[1] * 140_000])
    lodt.write_dataset(path, [{"x": x}], fsync=False)
    opts = dict(batch_size=512, shuffle=True, seed=3, shuffle_buffer=300)
    ids = lambda b: b["x"].numpy().ravel().tolist()  # noqa: E731
    whole = [ids(b) for b in lt.DataLoader(lodt.Dataset(path, **opts), num_workers=2)]
    ds = lodt.Dataset(path, **opts)
    it = iter(lt.DataLoader(ds, num_workers=2))
    head = [ids(next(it)) for _ in range(200)]  # 102,400 sequences
    state = ds.state_dict()
    del it
    cursor = state["loader"]["cursor"]
    assert cursor["epoch"] == 0 and cursor["position"] == 65_536 and len(cursor["buffer"]) == 300
    resumed = lodt.Dataset(path, **opts)
    resumed.load_state_dict(state)
    rest = [ids(b) for b in lt.DataLoader(resumed, num_workers=2)]
    assert head + rest == whole
