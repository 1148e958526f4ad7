"""A shuffled epoch from moto's S3 server through a slow link (the fault
proxy with a first-byte delay and pacing, as python/bench/bench_wan.py uses
it): every sequence exactly once at each world size, resume mid-epoch on the
same and on another world size, and an epoch under 10 % injected 503s."""

import numpy as np
import pytest

import lodt
from fault_proxy import FaultProxy, slow_down


def _batch(first, n):
    lengths = [(first + i) % 7 + 1 for i in range(n)]
    tokens = np.repeat(np.arange(first, first + n, dtype=np.int32), lengths).reshape(-1, 1)
    return {"tokens": lodt.create_lod_tensor(tokens, [lengths])}


N = 240


@pytest.fixture(scope="module")
def link(s3):
    port, options = s3
    url = "s3://data/wan-epoch"
    lodt.write_dataset(url, [_batch(k * 20, 20) for k in range(N // 20)], shard_bytes=2000, storage_options=options)
    with FaultProxy(port, first_byte_delay=0.005, bytes_per_second=50e6) as proxy:
        yield url, {**options, "aws_endpoint": proxy.endpoint}, proxy


def _ds(link, rank, world, **kw):
    url, options, _ = link
    return lodt.Dataset(url, batch_size=8, shuffle=True, seed=3, rank=rank, world_size=world,
                        return_ids=True, storage_options=options, **kw)


def _ids(ds):
    out = []
    for ids, b in ds:
        t = b["tokens"]
        first = np.asarray(t)[np.asarray(t.lod()[0][:-1], dtype=np.int64), 0]
        assert first.tolist() == ids.tolist()  # each sequence's tokens are its id
        out += ids.tolist()
    return out


@pytest.mark.parametrize("world", [1, 2, 4])
def test_each_sequence_once_at_each_world_size(link, world):
    _, _, proxy = link
    proxy.reset_stats()
    parts = [_ids(_ds(link, r, world)) for r in range(world)]
    assert sorted(sum(parts, [])) == list(range(N))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert proxy.stats()["gets"] > 0 and proxy.stats()["faults"] == 0


@pytest.mark.parametrize("old,new", [(2, 2), (2, 3), (4, 1)])
def test_resume_mid_epoch(link, old, new):
    seen, states = [], []
    for r in range(old):
        ds = _ds(link, r, old)
        it = iter(ds)
        for _ in range(3):
            seen += next(it)[0].tolist()
        states.append(ds.state_dict())
    merged = lodt.Dataset.merge_states(states) if new != old else None
    rest = []
    for r in range(new):
        ds = _ds(link, r, new)
        ds.load_state_dict(merged if merged is not None else states[r])
        rest += _ids(ds)
    assert len(seen) == 3 * 8 * old
    assert sorted(seen + rest) == list(range(N))


def test_epoch_under_injected_slowdowns(link):
    _, _, proxy = link
    proxy.reset_stats()
    # 10 % of GETs at random, and surely the 2nd and 5th (an epoch here is a few dozen GETs).
    fault = proxy.add(slow_down(0.1))
    proxy.faults.insert(0, slow_down(1.0, times=1, skip=1))
    proxy.faults.insert(0, slow_down(1.0, times=1, skip=4))
    try:
        parts = [_ids(_ds(link, r, 2)) for r in range(2)]
    finally:
        proxy.clear()
    assert sorted(sum(parts, [])) == list(range(N))
    assert proxy.stats()["faults"] >= 2 and proxy.stats()["faults"] >= fault.applied
