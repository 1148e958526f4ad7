"""A mixture changed between a checkpoint and its resume (spec/DATASET.md
10.6), with real frames: two ranks on gloo, each reading through
lodt.torch.DataLoader with 2 workers, checkpoint mid-epoch; the mixture is
re-weighted and gets a new source; three ranks resume the merged state with
``allow_changes=True``. Each source's epoch continues exactly once: under
``all_exhausted`` every sequence of every source is delivered, and no
sequence of a pass twice (a source's counts differ by at most one)."""

import json
import socket

import numpy as np

import lodt
from conftest import torch_or_skip

torch = torch_or_skip()
import lodt.torch as lt  # noqa: E402

SIZES = {"web": 90, "code": 40, "books": 60}
OFFSET = {"web": 0, "code": 10_000, "books": 20_000}
BEFORE = (["web", "code"], [3.0, 1.0])
AFTER = (["web", "code", "books"], [1.0, 2.0, 1.0])


def write(path, name):
    n = SIZES[name]
    lengths = [i % 4 + 1 for i in range(n)]
    label = np.arange(n, dtype=np.int64) + OFFSET[name]
    tokens = np.repeat(label, lengths).astype(np.int32)
    lodt.write_dataset(path / name, [{"tokens": lodt.create_lod_tensor(tokens, [lengths]), "label": lodt.LodTensor(label)}], fsync=False)


def source_of(label):
    name = max((o, n) for n, o in OFFSET.items() if o <= label)[1]
    return name, label - OFFSET[name]


def mixture(path, spec):
    names, weights = spec
    sources = [lodt.Dataset(str(path / n)) for n in names]
    return lodt.Mixture(sources, weights=weights, seed=4, stop="all_exhausted", shuffle=True,
                        shuffle_buffer=16, batch_size=4)


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank, world, port, path, out, state_file):
    import pathlib

    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        path = pathlib.Path(path)
        if state_file:
            mix = mixture(path, AFTER)
            with open(state_file) as f:
                mix.load_state_dict(json.load(f), allow_changes=True)
            labels = [int(x) for b in lt.DataLoader(mix, num_workers=2) for x in np.asarray(b["label"]).ravel()]
        else:
            mix = mixture(path, BEFORE)
            it = iter(lt.DataLoader(mix, num_workers=2))
            labels = [int(x) for _ in range(5 + 2 * rank) for x in np.asarray(next(it)["label"]).ravel()]
            del it  # the job stops mid-epoch
        with open(f"{out}.{rank}", "w") as f:
            json.dump({"labels": labels, "state": mix.state_dict()}, f)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _spawn(world, path, out, state_file=None):
    import torch.multiprocessing as mp

    mp.spawn(_rank, args=(world, _port(), str(path), str(out), state_file), nprocs=world, join=True)
    results = []
    for r in range(world):
        with open(f"{out}.{r}") as f:
            results.append(json.load(f))
    return results


def test_a_reweighted_mixture_with_a_new_source_resumes_on_three_ranks_exactly_once(tmp_path):
    for name in SIZES:
        write(tmp_path, name)
    before = _spawn(2, tmp_path, tmp_path / "before")
    first = [x for r in before for x in r["labels"]]
    assert len(first) == 4 * (5 + 7) and len(set(first)) == len(first)
    merged = lodt.Mixture.merge_states([r["state"] for r in before])
    # The strict default still refuses the changed mixture.
    try:
        mixture(tmp_path, AFTER).load_state_dict(merged)
        raise AssertionError("a state of another mixture was accepted")
    except ValueError as e:
        assert "another mixture" in str(e)
    state_file = tmp_path / "merged.json"
    state_file.write_text(json.dumps(merged))
    after = _spawn(3, tmp_path, tmp_path / "after", str(state_file))
    rest = [x for r in after for x in r["labels"]]
    # Disjoint ranks: the three resumed ranks together are the resumed
    # world's stream, which one process reading the same state gives too.
    one = mixture(tmp_path, AFTER)
    one.load_state_dict(merged, allow_changes=True)
    alone = [int(x) for b in one for x in np.asarray(b["label"]).ravel()]
    assert sorted(rest) == sorted(alone)
    assert len(rest) == len(one)
    report = {}
    for name, n in SIZES.items():
        counts = {}
        for x in first + rest:
            src, i = source_of(x)
            if src == name:
                counts[i] = counts.get(i, 0) + 1
        skipped = n - len(counts)
        passes = min(counts.values())
        repeated = sum(1 for c in counts.values() if c > passes + 1)
        report[name] = {"delivered": sum(counts.values()), "passes": passes, "repeated": repeated, "skipped": skipped}
        assert skipped == 0 and repeated == 0, report
        assert max(counts.values()) - passes <= 1, report
    print(report)
    assert report["books"]["delivered"] >= SIZES["books"]
    assert all(source_of(x)[0] != "books" for x in first)
