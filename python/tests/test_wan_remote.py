"""A shuffled epoch from moto's S3 server through a slow link (the fault
proxy with a first-byte delay and pacing, as python/bench/bench_wan.py uses
it), in both partitions: every sequence exactly once at each world size,
resume mid-epoch on the same and on another world size, an epoch under 10 %
injected 503s, and the bytes each partition fetches."""

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


PARTITIONS = ["round_robin", "locality"]


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


@pytest.mark.parametrize("partition", PARTITIONS)
@pytest.mark.parametrize("world", [1, 2, 4])
def test_each_sequence_once_at_each_world_size(link, world, partition):
    _, _, proxy = link
    proxy.reset_stats()
    parts = [_ids(_ds(link, r, world, partition=partition, cache_dir=False)) for r in range(world)]
    assert sorted(sum(parts, [])) == list(range(N))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert proxy.stats()["gets"] > 0 and proxy.stats()["faults"] == 0


@pytest.mark.parametrize("partition", PARTITIONS)
@pytest.mark.parametrize("old,new", [(2, 2), (2, 3), (4, 1)])
def test_resume_mid_epoch(link, old, new, partition):
    seen, states = [], []
    for r in range(old):
        ds = _ds(link, r, old, partition=partition)
        it = iter(ds)
        for _ in range(3):
            seen += next(it)[0].tolist()
        states.append(ds.state_dict())
    merged = lodt.Dataset.merge_states(states) if new != old else None
    rest = []
    for r in range(new):
        # The default partition follows the state's.
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


def test_the_default_partition_of_a_remote_dataset_is_locality(link):
    # Consecutive positions of the windowed order: rank 0's first ids are
    # the first of the locality order, not every 2nd of round robin's.
    first = {p: _ids(_ds(link, 0, 2, partition=p)) for p in PARTITIONS}
    assert _ids(_ds(link, 0, 2)) == first["locality"] != first["round_robin"]
    with pytest.raises(ValueError, match="partition"):
        _ds(link, 0, 1, partition="blocks")


@pytest.fixture(scope="module")
def wide(s3):
    """960 sequences of ~4 KiB in 120 batches of 8 and shards of ~512 KiB."""
    port, options = s3
    url = "s3://data/wan-wide"
    batches = []
    for k in range(120):
        lengths = [(8 * k + i) % 7 + 1 for i in range(8)]
        ids = np.arange(8 * k, 8 * k + 8, dtype=np.int32)
        rows = np.repeat(ids, lengths)[:, None] * np.ones((1, 256), dtype=np.int32)
        batches.append({"tokens": lodt.create_lod_tensor(rows, [lengths])})
    lodt.write_dataset(url, batches, shard_bytes=512 << 10, storage_options=options)
    with FaultProxy(port, first_byte_delay=0.002) as proxy:
        yield url, {**options, "aws_endpoint": proxy.endpoint}, proxy


def test_locality_fetches_each_byte_about_once_across_consumers(wide):
    url, options, proxy = wide
    total = lodt.Dataset(url, storage_options=options).num_bytes
    fetched = {}
    for partition in PARTITIONS:
        proxy.reset_stats()
        parts = []
        for r in range(4):
            ds = lodt.Dataset(url, batch_size=8, shuffle=True, seed=5, shuffle_buffer=8, rank=r, world_size=4,
                              return_ids=True, storage_options=options, cache_dir=False, partition=partition)
            parts.append([i for ids, _ in ds for i in ids.tolist()])
        assert sorted(sum(parts, [])) == list(range(960))
        fetched[partition] = proxy.stats()["get_bytes"]
    # Four consumers without a shared cache: round robin fetches nearly the
    # whole dataset per consumer, locality about once in all, besides the
    # opening read (the last 256 KiB) of the 3 shards two neighbours share
    # (the blocks of 240 sequences end inside shards of about 120).
    assert fetched["round_robin"] > 3 * total
    assert fetched["locality"] <= 1.1 * total + 3 * (256 << 10)
