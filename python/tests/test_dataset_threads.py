"""Dataset.state_dict() from another thread while one thread iterates: never
an error, and every captured state resumes to exactly the rest of the
epoch (issue 28 §5)."""

import json
import threading

import numpy as np

import lodt

from test_dataset import dataset_dir, labels  # noqa: F401 - the fixture

PASSES = 12


def _open(path):
    return lodt.Dataset(path, batch_size=3, shuffle=True, seed=7, prefetch=2)


def test_state_dict_from_another_thread_resumes_to_the_rest_of_the_epoch(dataset_dir):  # noqa: F811
    full = [labels(b) for b in _open(dataset_dir)]
    assert len(full) > 5
    ds = _open(dataset_dir)
    received = [0]
    captured = []  # (batches received before the call, state, received after)
    errors = []
    done = threading.Event()
    cond = threading.Condition()

    def capture():
        try:
            while not done.is_set():
                before = received[0]
                state = ds.state_dict()
                with cond:
                    captured.append((before, state, received[0]))
                    cond.notify_all()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)
            with cond:
                cond.notify_all()

    thread = threading.Thread(target=capture)
    thread.start()
    try:
        for _ in range(PASSES):
            ds.set_epoch(0)
            received[0] = 0
            got = []
            for batch in ds:
                got.append(labels(batch))
                received[0] = len(got)
                # Let the other thread take two states at this position (it
                # keeps calling in between, during next() and close()).
                with cond:
                    seen = len(captured)
                    assert cond.wait_for(lambda: errors or len(captured) >= seen + 2, timeout=120)
                assert not errors, errors
            assert got == full
    finally:
        done.set()
        thread.join()
    assert not errors, errors
    assert len(captured) >= 2 * PASSES * len(full)

    # Each distinct state resumes to full[k:] for a k the iterating thread
    # had reached (or was handing out) while the state was taken.
    checked = 0
    by_text = {}
    for before, state, after in captured:
        by_text.setdefault(json.dumps(state, sort_keys=True), []).append((before, after))
    for text, spans in by_text.items():
        resumed = _open(dataset_dir)
        resumed.load_state_dict(json.loads(text))
        rest = [labels(b) for b in resumed]
        k = len(full) - len(rest)
        assert rest == full[k:]
        assert any(before <= k <= after + 1 for before, after in spans), (k, spans)
        checked += 1
    assert checked >= len(full)  # a state at every position was resumed
    assert np.array_equal(sorted(sum(full, [])), np.arange(sum(len(b) for b in full)))
