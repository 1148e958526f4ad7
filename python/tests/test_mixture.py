"""Weighted mixtures of datasets from Python (``lodt.Mixture``): the
proportions, the stopping rules, resume, ranks, object-store sources, the
torch DataLoader, and errors."""

import math

import numpy as np
import pytest

import lodt


def write(path, n, first=0, **kwargs):
    """A dataset of ``n`` sequences: ``label`` (int64, the sequence's id in
    it) and ``tokens`` (int32, ``id % 4 + 1`` tokens, one LoD level)."""

    def batches():
        for start in range(0, n, 64):
            ids = np.arange(start, min(start + 64, n))
            lengths = [int(i) % 4 + 1 for i in ids]
            tokens = np.repeat(ids, lengths).astype(np.int32) + first
            yield {
                "label": lodt.LodTensor(ids.astype(np.int64)),
                "tokens": lodt.create_lod_tensor(tokens, [lengths]),
            }

    lodt.write_dataset(path, batches(), shard_bytes=4096, fsync=False, **kwargs)
    return path


@pytest.fixture
def two(tmp_path):
    """A large (600) and a small (50) dataset."""
    return lodt.Dataset(write(tmp_path / "large", 600)), lodt.Dataset(write(tmp_path / "small", 50))


def stream(mix):
    """Every id of one pass, each batch checked against its sequences."""
    out = []
    for ids, batch in mix:
        labels = np.asarray(batch["label"]).ravel()
        for i, id in enumerate(ids):
            k, local = mix.source_of(int(id))
            assert labels[i] == local
            assert batch["tokens"].sequence(0, i).numpy().size == local % 4 + 1
        out.extend(int(i) for i in ids)
    return out


def test_is_a_dataset_with_the_same_batch_options(two):
    mix = lodt.Mixture(list(two), [1, 1], seed=3, batch_size=7)
    assert isinstance(mix, lodt.Dataset)
    batches = list(mix)
    assert all(len(np.asarray(b["label"])) <= 7 for b in batches)
    assert sum(len(np.asarray(b["label"])) for b in batches) == len(mix)
    rows = lodt.Mixture(list(two), [1, 1], seed=3, max_rows=10, rows_of="tokens")
    for b in rows:
        assert b["tokens"].shape()[0] <= 10 or len(np.asarray(b["label"])) == 1


def test_proportions_are_within_binomial_bounds_over_100000_draws(two):
    weights = [0.7, 0.3]
    draws = 100_000
    mix = lodt.Mixture(list(two), weights, seed=5, stop=draws, batch_size=4096, return_ids=True, shuffle=True)
    assert len(mix) == draws
    counts = [0, 0]
    for ids, _ in mix:
        small = np.asarray(ids) >= 600
        counts[1] += int(small.sum())
        counts[0] += int((~small).sum())
    assert sum(counts) == draws
    for k, w in enumerate(weights):
        sigma = math.sqrt(draws * w * (1 - w))
        assert abs(counts[k] - draws * w) < 5 * sigma, (k, counts, sigma)


def test_first_exhausted_stops_at_the_small_source(two):
    mix = lodt.Mixture(list(two), [1, 1], seed=1, shuffle=True, return_ids=True)
    ids = stream(mix)
    assert len(ids) == len(set(ids)) == len(mix)
    assert sorted(i for i in ids if i >= 600) == list(range(600, 650))
    assert len([i for i in ids if i < 600]) < 600


def test_all_exhausted_repeats_the_small_source_and_delivers_all_of_the_large(two):
    mix = lodt.Mixture(list(two), [1, 1], seed=2, stop="all_exhausted", shuffle=True, return_ids=True)
    ids = stream(mix)
    assert sorted(i for i in ids if i < 600) == list(range(600))
    small = [i for i in ids if i >= 600]
    assert len(small) > 400
    for p in range(len(small) // 50):  # each full pass is the whole small source
        assert sorted(small[p * 50:(p + 1) * 50]) == list(range(600, 650))


def test_resume_mid_epoch_equals_the_uninterrupted_stream(two):
    def make():
        return lodt.Mixture(list(two), [2, 1], seed=4, stop="all_exhausted", shuffle=True,
                            shuffle_buffer=64, batch_size=9, return_ids=True)

    whole = stream(make())
    for steps in (1, 10, 40):
        mix = make()
        it = iter(mix)
        got = [int(i) for _ in range(steps) for i in next(it)[0]]
        state = mix.state_dict()
        assert state["loader"]["mixture"]["weights"] == [2.0, 1.0]
        it.close()
        again = make()
        again.load_state_dict(state)
        assert got + stream(again) == whole


def test_two_ranks_are_disjoint_and_complete(two):
    def make(**kw):
        return lodt.Mixture(list(two), [0.5, 0.5], seed=6, shuffle=True, return_ids=True, batch_size=5, **kw)

    one = stream(make())
    ranks = [stream(make(rank=r, world_size=2)) for r in range(2)]
    assert ranks[0] == one[0::2] and ranks[1] == one[1::2]
    assert not set(ranks[0]) & set(ranks[1])
    assert sorted(ranks[0] + ranks[1]) == sorted(one)


def test_resume_on_another_world_size(two):
    def make(rank, world):
        return lodt.Mixture(list(two), [1, 1], seed=7, shuffle=True, return_ids=True, batch_size=4,
                            rank=rank, world_size=world)

    seen, states = [], []
    for rank, steps in ((0, 5), (1, 2)):
        mix = make(rank, 2)
        it = iter(mix)
        seen += [int(i) for _ in range(steps) for i in next(it)[0]]
        states.append(mix.state_dict())
        it.close()
    merged = lodt.Mixture.merge_states(states)
    for rank in range(3):
        mix = make(rank, 3)
        mix.load_state_dict(merged)
        seen += stream(mix)
    whole = make(0, 1)
    assert sorted(seen) == sorted(stream(whole))


def test_an_object_store_source(s3, tmp_path):
    _, options = s3
    uri = "s3://data/mixture-source"
    write(uri, 120, storage_options=options)
    remote = lodt.Dataset(uri, storage_options=options)
    local = lodt.Dataset(write(tmp_path / "local", 80))
    mix = lodt.Mixture([remote, local], [1, 1], seed=8, stop="all_exhausted", shuffle=True, return_ids=True)
    ids = stream(mix)
    assert set(ids) == set(range(200))
    # Packed, two ranks (equal counts): the lengths come from both sources,
    # the S3 one included.
    union, counts = [], []
    for rank in range(2):
        part = lodt.Mixture([remote, local], [1, 1], seed=8, stop="all_exhausted", shuffle=True, return_ids=True,
                            packing=lodt.Packing(12), rows_of="tokens", rank=rank, world_size=2)
        union += stream(part)
        counts.append(sum(1 for _ in part))
    assert counts[0] == counts[1]
    assert sorted(union) == sorted(ids)


def test_torch_data_loader_workers_split_the_stream(two):
    torch_data = pytest.importorskip("lodt.torch")
    mix = lodt.Mixture(list(two), [1, 1], seed=9, shuffle=True, batch_size=6)
    single = sorted(int(x) for b in mix for x in np.asarray(b["label"]).ravel())
    loader = torch_data.DataLoader(mix, num_workers=2)
    got = sorted(int(x) for b in loader for x in np.asarray(b["label"]).ravel())
    assert got == single
    state = mix.state_dict()
    assert state["loader"]["consumers"] == 2


def test_torch_data_loader_with_workers_resumes_exactly(two):
    lt = pytest.importorskip("lodt.torch")

    def make():
        m = lodt.Mixture(list(two), [2, 1], seed=10, stop="all_exhausted", shuffle=True, batch_size=8)
        m.set_epoch(1)
        return m

    def labels(loader):
        return [[int(x) for x in np.asarray(b["label"]).ravel()] for b in loader]

    whole = labels(lt.DataLoader(make(), num_workers=2))
    mix = make()
    it = iter(lt.DataLoader(mix, num_workers=2))
    head = [[int(x) for x in np.asarray(next(it)["label"]).ravel()] for _ in range(5)]
    state = mix.state_dict()
    del it  # the job stops; workers had read ahead
    resumed = make()
    resumed.load_state_dict(state)
    assert head + labels(lt.DataLoader(resumed, num_workers=2)) == whole


def test_spawned_workers_open_the_sources_themselves(two):
    lt = pytest.importorskip("lodt.torch")
    mix = lodt.Mixture(list(two), [1, 1], seed=11, shuffle=True, batch_size=16)
    expected = sorted(int(x) for b in mix for x in np.asarray(b["label"]).ravel())
    loader = lt.DataLoader(mix, num_workers=2, multiprocessing_context="spawn")
    got = sorted(int(x) for b in loader for x in np.asarray(b["label"]).ravel())
    assert got == expected


def test_errors(two, tmp_path):
    a, b = two
    with pytest.raises(ValueError, match="2 sources and 1 weights"):
        lodt.Mixture([a, b], [1])
    with pytest.raises(ValueError, match="finite and at least 0"):
        lodt.Mixture([a, b], [1, -2])
    with pytest.raises(ValueError, match="at least one must be positive"):
        lodt.Mixture([a, b], [0, 0])
    with pytest.raises(ValueError, match="stop must be"):
        lodt.Mixture([a, b], [1, 1], stop="sometimes")
    with pytest.raises(TypeError, match="storage_options is an option of each source"):
        lodt.Mixture([a, b], [1, 1], storage_options={})
    with pytest.raises(TypeError, match="source 1 must be a lodt.Dataset"):
        lodt.Mixture([a, "b"], [1, 1])
    other = lodt.Dataset(lodt_other(tmp_path))
    with pytest.raises(ValueError, match="another schema"):
        lodt.Mixture([a, other], [1, 1])
    # A dataset's state on a mixture, and another mixture's state.
    mix = lodt.Mixture([a, b], [1, 1])
    with pytest.raises(ValueError, match="single dataset's loader"):
        mix.load_state_dict(a.state_dict())
    with pytest.raises(ValueError, match="another mixture"):
        lodt.Mixture([a, b], [1, 3]).load_state_dict(mix.state_dict())


def lodt_other(tmp_path):
    path = tmp_path / "other"
    lodt.write_dataset(path, [{"x": lodt.LodTensor(np.zeros(3, np.uint8))}], fsync=False)
    return path


def test_totals_are_the_sources_totals(two):
    mix = lodt.Mixture(list(two), [1, 1], seed=3)
    assert mix.num_batches == sum(d.num_batches for d in two)
    assert mix.num_bytes == sum(d.num_bytes for d in two) > 0


def packed(two, **kw):
    options = dict(seed=4, stop="all_exhausted", shuffle=True, return_ids=True, packing=lodt.Packing(16, buffer=30), rows_of="tokens")
    options.update(kw)
    return lodt.Mixture(list(two), [1, 1], **options)


def test_a_packed_mixture_splits_between_two_ranks_disjoint_complete_and_equal(two):
    whole = sorted(stream(packed(two, packing=None, rows_of=None, batch_size=64)))
    union, counts = [], []
    for rank in range(2):
        mix = packed(two, rank=rank, world_size=2)
        n = 0
        for ids, batch in mix:
            assert batch["tokens"].shape()[0] <= 16
            n += 1
        counts.append(n)
        union += stream(mix)
    assert counts[0] == counts[1]  # equal packed counts with two ranks
    assert sorted(union) == whole
    assert len(whole) > len(set(whole))  # all_exhausted repeats the small source


def test_a_packed_mixture_resumes_into_the_uninterrupted_rest(two):
    def mix():
        m = packed(two, rank=1, world_size=2)
        m.set_epoch(1)
        return m

    full = [[int(i) for i in ids] for ids, _ in mix()]
    for k in [1, len(full) // 2, len(full) - 1]:
        a = mix()
        it = iter(a)
        for _ in range(k):
            next(it)
        state = a.state_dict()
        assert "mixture" in state["loader"] and state["loader"]["packing"]["equal"] is True
        b = mix()
        b.load_state_dict(state)
        assert [[int(i) for i in ids] for ids, _ in b] == full[k:], k


def test_take_verify_and_totals_come_from_the_crate(two):
    a, b = two
    mix = lodt.Mixture([a, b], [1, 1], seed=3)
    # Mixture ids: a's 0..599, then b's 600..649; one batch, in the order given.
    batch = mix.take([601, 5, 649, -1])
    assert np.asarray(batch["label"]).ravel().tolist() == [1, 5, 49, 49]
    assert batch["tokens"].lod()[0][-1] == (1 % 4 + 1) + (5 % 4 + 1) + 2 * (49 % 4 + 1)
    with pytest.raises(IndexError, match="650"):
        mix.take([650])
    totals = {key: getattr(a, "num_" + key) + getattr(b, "num_" + key) for key in ("shards", "bytes", "batches")}
    assert mix.verify() == {**totals, "sequences": 650}
    assert (mix.num_shards, mix.num_bytes, mix.num_batches) == (totals["shards"], totals["bytes"], totals["batches"])
    with pytest.raises(IndexError, match="past the sources' 650 sequences"):
        mix.source_of(650)
