"""A rank's checkpoint (spec/DATASET.md 7.5) from Python: the object
lodt.Dataset.state_dict() returns, what load_state_dict() refuses, the worker
rotation and consumer numbering (the crate's), without torch."""

import json
import os

import numpy as np
import pytest

import lodt
from lodt import _lodt

from test_dataset import TOTAL, dataset_dir, epoch_ids, labels  # noqa: F401


def test_state_dict_is_the_checkpoint_object(dataset_dir):
    ds = lodt.Dataset(dataset_dir, batch_size=4, shuffle=True, seed=3)
    it = iter(ds)
    first = [labels(next(it)) for _ in range(2)]
    state = ds.state_dict()
    assert sorted(state) == ["loader", "next_worker", "version"]
    assert state["version"] == lodt.dataset.STATE_VERSION == _lodt.CHECKPOINT_VERSION == 1
    assert state["next_worker"] == 0
    assert state["loader"]["consumers"] == 1 and state["loader"]["consumed"] == {"0": 8}
    # The crate reads it back as it wrote it.
    assert json.loads(_lodt.checkpoint_from_json(json.dumps(state))) == state
    resumed = lodt.Dataset(dataset_dir, batch_size=4, shuffle=True, seed=3)
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state  # nothing delivered since: the loaded checkpoint
    rest = [labels(b) for b in resumed]
    whole = [labels(b) for b in lodt.Dataset(dataset_dir, batch_size=4, shuffle=True, seed=3)]
    assert first + rest == whole


def test_inspect_state_reports_progress_and_the_dataset(dataset_dir, tmp_path):
    ranks = [lodt.Dataset(dataset_dir, batch_size=4, shuffle=True, seed=3, rank=r, world_size=2) for r in range(2)]
    for ds, steps in zip(ranks, (2, 1)):
        it = iter(ds)
        for _ in range(steps):
            next(it)
    states = [ds.state_dict() for ds in ranks]
    one = lodt.inspect_state(states[0])
    assert (one["partition"], one["epoch"], one["consumers"], one["complete"]) == ("round_robin", 0, 2, False)
    assert one["next_worker"] == 0 and one["delivered"] == 8
    merged = lodt.Dataset.merge_states(states)
    r = lodt.inspect_state(merged, dataset=dataset_dir)
    assert r["complete"] and r["delivered"] == 12 and r["remaining"] == TOTAL - 12
    assert [(c["consumer"], c["delivered"]) for c in r["per_consumer"]] == [(0, 8), (1, 4)]
    assert sum(c["share"] for c in r["per_consumer"]) == TOTAL
    assert r["shuffle"] == {"seed": 3, "buffer": 16384} and r["remainder"] == "keep"
    assert r["dataset_mismatch"] is None
    # The bare loader state says the same, without a next worker.
    assert lodt.inspect_state(merged["loader"])["delivered"] == 12
    assert lodt.inspect_state(merged["loader"])["next_worker"] is None
    other = tmp_path / "other"
    lodt.write_dataset(other, [{"x": np.arange(3, dtype=np.int64)}])
    assert "saved on a dataset of" in lodt.inspect_state(merged, dataset=other)["dataset_mismatch"]
    with pytest.raises(ValueError):
        lodt.inspect_state({"version": 7})
    with pytest.raises(TypeError):
        lodt.inspect_state("not a dict")  # type: ignore[arg-type]


def test_check_state_dry_runs_the_rest_of_the_epoch(dataset_dir, tmp_path):
    def saved(remainder):
        ranks = [
            lodt.Dataset(dataset_dir, batch_size=4, shuffle=True, seed=3, rank=r, world_size=2, remainder=remainder)
            for r in range(2)
        ]
        for ds, steps in zip(ranks, (2, 1)):
            it = iter(ds)
            for _ in range(steps):
                next(it)
        return lodt.Dataset.merge_states([ds.state_dict() for ds in ranks])

    merged = saved("keep")
    left = TOTAL - 12
    same = lodt.check_state(merged, dataset_dir)
    assert same["holds"] and same["first_offence"] is None
    assert (same["sequences"], same["delivered_before"], same["remaining"]) == (TOTAL, 12, left)
    # Shares of 2: ceil((TOTAL - c) / 2), less 8 and 4.
    assert same["per_consumer"] == [(TOTAL + 1) // 2 - 8, TOTAL // 2 - 4]
    assert (same["world_size"], same["workers"], same["state_consumers"]) == (2, 1, 2)
    assert (same["repeated"], same["skipped"], same["dropped"], same["repeats"]) == (0, 0, 0, 0)
    assert same["seconds"] >= 0
    # Resumed on 3 ranks of 2 workers: the rest dealt anew to 6.
    six = lodt.check_state(merged, os.fspath(dataset_dir), world_size=3, workers=2)
    assert six["holds"] and six["per_consumer"] == [-(-(left - c) // 6) for c in range(6)]
    # With drop, the tail of the deal that 6 cannot share is counted, not a failure.
    dropped = lodt.check_state(saved("drop"), dataset_dir, world_size=6)
    assert dropped["holds"] and dropped["dropped"] == left % 6
    assert dropped["per_consumer"] == [left // 6] * 6
    repeated = lodt.check_state(saved("repeat"), dataset_dir, world_size=6)
    assert repeated["holds"] and repeated["repeats"] == -left % 6
    # A rank's own checkpoint has one count of two: refused, saying why.
    ds = lodt.Dataset(dataset_dir, batch_size=4, rank=0, world_size=2)
    with pytest.raises(ValueError, match="state check needs every consumer's count"):
        lodt.check_state(ds.state_dict(), dataset_dir)
    other = tmp_path / "other"
    lodt.write_dataset(other, [{"x": np.arange(3, dtype=np.int64)}])
    with pytest.raises(ValueError, match="saved on another dataset"):
        lodt.check_state(merged, other)
    with pytest.raises(TypeError):
        lodt.check_state("not a dict", dataset_dir)  # type: ignore[arg-type]


def test_a_bare_loader_state_and_merged_states_resume_from_worker_0(dataset_dir):
    ds = lodt.Dataset(dataset_dir, batch_size=5)
    it = iter(ds)
    next(it)
    bare = ds.state_dict()["loader"]
    again = lodt.Dataset(dataset_dir, batch_size=5)
    again.load_state_dict(bare)
    assert again.state_dict() == {"version": 1, "loader": bare, "next_worker": 0}
    merged = lodt.Dataset.merge_states([ds.state_dict()])
    assert merged == {"version": 1, "loader": bare, "next_worker": 0}
    assert sorted(epoch_ids(again)) == list(range(5, TOTAL))


def test_load_refuses_each_broken_field_with_its_reason(dataset_dir):
    ds = lodt.Dataset(dataset_dir)
    state = ds.state_dict()
    cases = [
        ({**state, "version": 2}, "dataset state version 2; this lodt reads version 1"),
        ({"loader": state["loader"]}, "dataset state version null"),
        ({**state, "next_worker": "x"}, 'next_worker must be an integer >= 0, found "x"'),
        ({**state, "next_worker": True}, "next_worker must be an integer >= 0, found true"),
        ({**state, "next_worker": 1}, "next_worker 1 is not one of this rank's 1 workers"),
        ({**state, "loader": [1]}, "loader must be a loader state (an object), found an array"),
        ({"epoch": 3}, "not a dataset state: expected the object of Dataset.state_dict()"),
        ({**state, "loader": {**state["loader"], "frontier": "a"}}, "not a loader state"),
    ]
    for bad, reason in cases:
        with pytest.raises(ValueError) as e:
            lodt.Dataset(dataset_dir).load_state_dict(bad)
        assert reason in str(e.value), (bad, str(e.value))
    with pytest.raises(TypeError, match="a dataset state is a dict, found list"):
        ds.load_state_dict([state])  # type: ignore[arg-type]
    # Refused before anything changed: the dataset still starts its epoch 0.
    assert sorted(epoch_ids(ds)) == list(range(TOTAL))


def test_worker_rotation_and_consumers_are_the_crates():
    loader = {"version": 1, "sequences": 12, "fingerprint": 0, "shuffle": None, "remainder": "keep",
              "epoch": 0, "frontier": 0, "skip": [], "consumers": 6,
              "consumed": {str(c): 1 for c in range(3)}}
    text = _lodt.checkpoint_to_json(json.dumps(loader), 2)
    assert json.loads(text) == {"version": 1, "loader": loader, "next_worker": 2}
    assert _lodt.checkpoint_workers(text, 2) == 3       # 6 consumers: 2 ranks of 3 workers
    assert _lodt.checkpoint_first_worker(text, 2, 3) == 2
    assert _lodt.checkpoint_first_worker(text, 3, 3) == 0  # other consumers: a new deal
    with pytest.raises(ValueError, match="next_worker 2 is not one of this rank's 1 workers"):
        _lodt.checkpoint_workers(text, 4)
    assert [_lodt.served_worker(w, 2, 3) for w in range(3)] == [2, 0, 1]
    assert [_lodt.next_worker(last, 2, 3) for last in (None, 0, 1, 2)] == [2, 1, 2, 0]
    assert _lodt.consumer(1, 2, 2, 3) == (6, 5)
    with pytest.raises(ValueError, match="rank 2 of world size 2"):
        _lodt.consumer(2, 2, 0, 1)
    merged = json.loads(_lodt.merge_checkpoints([text]))
    assert merged["next_worker"] == 0 and merged["loader"] == loader


def test_read_tasks_are_planned_by_the_crate(dataset_dir):
    reader = _lodt.DatasetReader(str(dataset_dir))
    manifest = json.loads(reader.manifest_json())
    tasks = _lodt.plan_reads(reader.manifest_json(), 3)
    assert 1 <= len(tasks) <= 3
    # Contiguous, every batch once, in dataset order.
    planned = [(name, b) for plan, _, _ in tasks for name, batches in plan for b in batches]
    stored = [(s["name"], b) for s in manifest["shards"] for b in range(s["batches"])]
    assert planned == stored
    assert sum(rows for _, rows, _ in tasks) == TOTAL
    assert sum(size for _, _, size in tasks) <= reader.num_bytes
    # About equal: no task holds more than its third plus one batch.
    biggest = max(max(s["batch_sequences"]) for s in manifest["shards"])
    assert max(rows for _, rows, _ in tasks) <= TOTAL // 3 + biggest
    assert len(_lodt.plan_reads(reader.manifest_json(), 1)) == 1
    assert np.sum([len(p) for p, _, _ in _lodt.plan_reads(reader.manifest_json(), 1000)]) >= len(manifest["shards"])


def test_a_late_state_carries_a_cursor_and_resumes_exactly(tmp_path):
    # 140,000 one-row sequences: a state past 65,536 positions of the
    # shuffled order holds the order's cursor (spec/DATASET.md 7.3).
    path = tmp_path / "big"
    lengths = [1] * 140_000
    x = lodt.create_lod_tensor(np.arange(140_000, dtype=np.int32).reshape(-1, 1), [lengths])
    lodt.write_dataset(path, [{"x": x}])
    opts = dict(batch_size=256, shuffle=True, seed=5, shuffle_buffer=500)
    whole = [b["x"].numpy().ravel().tolist() for b in lodt.Dataset(path, **opts)]
    ds = lodt.Dataset(path, **opts)
    it = iter(ds)
    first = [next(it)["x"].numpy().ravel().tolist() for _ in range(400)]  # 102,400 positions
    state = ds.state_dict()
    cursor = state["loader"]["cursor"]
    assert cursor["position"] == 65_536 and cursor["drawn"] == 66_036 and len(cursor["buffer"]) == 500
    assert all(len(w) == 16 for w in cursor["rng"])
    saved = json.loads(json.dumps(state))  # through JSON, as a checkpoint file
    resumed = lodt.Dataset(path, **opts)
    resumed.load_state_dict(saved)
    rest = [b["x"].numpy().ravel().tolist() for b in resumed]
    assert first + rest == whole
    # The same state without its cursor resumes the same sequences.
    del saved["loader"]["cursor"]
    walked = lodt.Dataset(path, **opts)
    walked.load_state_dict(saved)
    assert [b["x"].numpy().ravel().tolist() for b in walked] == rest
    # A broken cursor is refused before anything changes.
    bad = json.loads(json.dumps(state))
    bad["loader"]["cursor"]["buffer"][0] = bad["loader"]["cursor"]["buffer"][1]
    with pytest.raises(ValueError, match="twice"):
        lodt.Dataset(path, **opts).load_state_dict(bad)
