"""A dataset appended to between a checkpoint and its resume
(spec/DATASET.md 7.3, "A dataset that grew"), with real frames: two ranks
on gloo, each reading through lodt.torch.DataLoader with 2 workers,
checkpoint mid-epoch; the dataset grows; three ranks resume the merged
state. The epoch delivers every sequence the checkpoint knew exactly once
and none of the appended ones; the next epoch delivers all of them."""

import json
import socket

import lodt
from conftest import torch_or_skip
from test_dataset import TOTAL, all_batches, labels, make_batch

torch = torch_or_skip()
import lodt.torch as lt  # noqa: E402

OPTIONS = dict(batch_size=3, shuffle=True, seed=13, shuffle_buffer=16)
ADDED = 20


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank, world, port, path, out, state_file, epoch_after):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        ds = lodt.Dataset(path, **OPTIONS)
        if state_file:
            with open(state_file) as f:
                ds.load_state_dict(json.load(f))
            ids = [i for b in lt.DataLoader(ds, num_workers=2) for i in labels(b)]
        else:
            it = iter(lt.DataLoader(ds, num_workers=2))
            ids = [i for _ in range(3 + rank) for i in labels(next(it))]
            del it  # the job stops mid-epoch
        after = []
        if epoch_after:
            ds.set_epoch(1)
            after = [i for b in lt.DataLoader(ds, num_workers=2) for i in labels(b)]
        with open(f"{out}.{rank}", "w") as f:
            json.dump({"ids": ids, "after": after, "state": ds.state_dict()}, f)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _spawn(world, path, out, state_file=None, epoch_after=False):
    import torch.multiprocessing as mp

    mp.spawn(_rank, args=(world, _port(), str(path), str(out), state_file, epoch_after), nprocs=world, join=True)
    results = []
    for r in range(world):
        with open(f"{out}.{r}") as f:
            results.append(json.load(f))
    return results


def test_a_grown_dataset_resumes_on_three_ranks_exactly_once(tmp_path):
    path = tmp_path / "train"
    lodt.write_dataset(path, all_batches(), shard_bytes=3000, fsync=False)
    before = _spawn(2, path, tmp_path / "before")
    delivered = [i for r in before for i in r["ids"]]
    assert len(delivered) == 3 * (3 + 4) and len(set(delivered)) == len(delivered)
    merged = lodt.Dataset.merge_states([r["state"] for r in before])
    state_file = tmp_path / "merged.json"
    state_file.write_text(json.dumps(merged))
    # The dataset grows between the checkpoint and the resume.
    lodt.write_dataset(path, [make_batch(99, ADDED, TOTAL)], mode="append", fsync=False)
    assert len(lodt.Dataset(path)) == TOTAL + ADDED
    after = _spawn(3, path, tmp_path / "after", str(state_file), epoch_after=True)
    rest = [i for r in after for i in r["ids"]]
    counts = {i: (delivered + rest).count(i) for i in set(delivered + rest)}
    repeated = sorted(i for i, c in counts.items() if c > 1)
    skipped = sorted(set(range(TOTAL)) - set(counts))
    added = sorted(i for i in counts if i >= TOTAL)
    assert (repeated, skipped, added) == ([], [], [])
    assert len(delivered) + len(rest) == TOTAL
    # The next epoch is the grown dataset's, each sequence once over the ranks.
    nxt = sorted(i for r in after for i in r["after"])
    assert nxt == list(range(TOTAL + ADDED))
