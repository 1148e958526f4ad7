"""Issue 28 §3: tiny valid inputs whose counts are free end in a clear error
or in bounded memory, never in an abort (SIGABRT, "memory allocation of N
bytes failed") that no ``except`` can catch.

Each case runs in a child Python under a 4 GB address-space cap
(``RLIMIT_AS``), so a regression fails the test (the child dies or prints
no result) instead of killing pytest or eating the machine's memory.
"""

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CAP = 4 << 30
ROOT = Path(__file__).resolve().parents[2]


def _cap():
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def run_capped(code):
    """Runs ``code`` in a child Python under the cap; returns the JSON the
    child printed last (the test fails if the child dies, e.g. by SIGABRT)."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        preexec_fn=_cap,
        env=dict(os.environ),
        timeout=600,
    )
    assert out.returncode == 0, f"child exited {out.returncode}: {out.stderr[-2000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def big_row_group(tmp_path_factory):
    """500,000 rows of 1,000 int64 zeros in one row group, written by pyarrow
    (tests/data/make_big_row_group.py): about 130 KB, 4 GB decoded."""
    sys.path.insert(0, str(ROOT / "tests" / "data"))
    try:
        import make_big_row_group
    finally:
        sys.path.pop(0)
    path = tmp_path_factory.mktemp("big") / "big.parquet"
    rows, width = make_big_row_group.make(str(path))
    assert (rows, width) == (500_000, 1_000)
    assert path.stat().st_size < 200_000
    return path


def test_convert_big_row_group_streams_in_bounded_batches(big_row_group, tmp_path):
    out = tmp_path / "out.parquet"
    got = run_capped(f"""
        import json, lodt, pyarrow.parquet as pq
        stats = lodt.convert({str(big_row_group)!r}, {str(out)!r})
        f = pq.ParquetFile({str(out)!r})
        first = f.read_row_group(0).column("x")[0].as_py()
        print(json.dumps({{"rows": f.metadata.num_rows, "batches": stats["batches"],
                          "first": [len(first), sum(first)]}}))
    """)
    assert got["rows"] == 500_000
    assert got["first"] == [1000, 0]
    # 12,000 bytes a row by the footer: 22,369 rows per 256 MiB batch.
    assert got["batches"] == 23


def test_decode_budget_too_small_for_one_row_is_a_clear_error(big_row_group, tmp_path):
    got = run_capped(f"""
        import json, lodt
        try:
            lodt.convert({str(big_row_group)!r}, {str(tmp_path / "o.lodt")!r}, decode_budget=4096)
            print(json.dumps({{"error": None}}))
        except Exception as e:
            print(json.dumps({{"error": type(e).__name__ + ": " + str(e)}}))
    """)
    assert got["error"] is not None
    assert "decode budget of 4096 bytes" in got["error"]
    assert "one row decodes to about 12000 bytes" in got["error"]


def test_decode_budget_cuts_batches(big_row_group, tmp_path):
    out = tmp_path / "o.parquet"
    got = run_capped(f"""
        import json, lodt, pyarrow.parquet as pq
        stats = lodt.convert({str(big_row_group)!r}, {str(out)!r}, decode_budget=64 << 20)
        m = pq.ParquetFile({str(out)!r}).metadata
        print(json.dumps({{"first_rows": m.row_group(0).num_rows, "batches": stats["batches"]}}))
    """)
    # 12,000 bytes a row by the footer: 5,592 rows per 64 MiB batch.
    assert got == {"first_rows": 5592, "batches": 90}


ZERO_WIDTH = """
    import json, lodt, numpy as np
    rows = 1 << 40
    wide = lodt.LodTensor(np.zeros((rows, 0), np.float32), lod=[[0, rows]])
"""


def test_zero_width_rows_to_parquet_is_a_clear_error(tmp_path):
    src, dst = tmp_path / "wide.lodt", tmp_path / "wide.parquet"
    got = run_capped(ZERO_WIDTH + f"""
    lodt.save({str(src)!r}, {{"x": wide}})
    size = __import__("os").path.getsize({str(src)!r})
    assert lodt.verify({str(src)!r})["batches"] == 1
    try:
        lodt.convert({str(src)!r}, {str(dst)!r})
        print(json.dumps({{"error": None, "size": size}}))
    except Exception as e:
        print(json.dumps({{"error": type(e).__name__ + ": " + str(e), "size": size}}))
    """)
    assert got["size"] < 4096
    assert "1099511627776 rows of element shape [0] hold no bytes" in got["error"]
    assert "MAX_ROWS_WITHOUT_BYTES" in got["error"]


def test_zero_width_rows_segment_inputs_is_a_clear_error():
    got = run_capped(ZERO_WIDTH + """
    s = lodt.SortedSequences(wide)
    try:
        s.segment_inputs(wide)
        print(json.dumps({"error": None}))
    except Exception as e:
        print(json.dumps({"error": type(e).__name__ + ": " + str(e), "steps": s.num_steps}))
    """)
    assert got["steps"] == 1 << 40
    assert got["error"].startswith("ValueError")
    assert "segment_inputs" in got["error"] and "MAX_ROWS_WITHOUT_BYTES" in got["error"]


@pytest.mark.parametrize("length", [10**12, 2**63])
def test_batch_sizes_of_huge_steps_is_a_clear_error(length):
    got = run_capped(f"""
        import json, lodt
        s = lodt.SortedSequences([[0, {length}]])
        try:
            s.batch_sizes
            print(json.dumps({{"error": None}}))
        except Exception as e:
            print(json.dumps({{"error": type(e).__name__ + ": " + str(e),
                              "steps": s.num_steps,
                              "at": [s.batch_size(0), s.batch_size({length} - 1), s.batch_size({length})]}}))
    """)
    assert got["error"].startswith("ValueError")
    assert f"{length} time steps" in got["error"]
    assert got["steps"] == length
    assert got["at"] == [1, 1, 0]


def test_batch_sizes_small_is_a_list():
    import lodt

    assert lodt.SortedSequences([[0, 4, 6, 9]]).batch_sizes == [3, 3, 2, 1]


def test_huge_prefetch_is_a_clear_error(tmp_path):
    got = run_capped(f"""
        import json, lodt, numpy as np
        x = lodt.LodTensor(np.arange(6, dtype=np.int32), lod=[[0, 1, 3, 6]])
        lodt.write_dataset({str(tmp_path / "ds")!r}, [{{"x": x}}], fsync=False)
        ds = lodt.Dataset({str(tmp_path / "ds")!r}, batch_size=2, prefetch=10**8)
        try:
            n = sum(1 for _ in ds)
            print(json.dumps({{"error": None, "n": n}}))
        except Exception as e:
            print(json.dumps({{"error": type(e).__name__ + ": " + str(e)}}))
    """)
    assert got["error"] is not None
    assert "prefetch 100000000" in got["error"]
    assert "at most 1024" in got["error"]


def test_prefetch_at_the_cap_works(tmp_path):
    import lodt
    import numpy as np

    x = lodt.LodTensor(np.arange(6, dtype=np.int32), lod=[[0, 1, 3, 6]])
    lodt.write_dataset(str(tmp_path / "ds"), [{"x": x}], fsync=False)
    ds = lodt.Dataset(str(tmp_path / "ds"), batch_size=2, prefetch=1024)
    assert [b["x"].recursive_sequence_lengths() for b in ds] == [[[1, 2]], [[3]]]
