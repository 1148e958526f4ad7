"""`lodt.ray.write_lodt` when answers are lost (issue 28 §1): the parts'
and the merge's manifest writes on S3 (moto, through the fault proxy) lose
their answers, and a write task is retried by Ray after it committed its
part. Every sequence ends up in the dataset exactly once, and the job says
it succeeded."""

from __future__ import annotations

import json
import os

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'lodt[ray]')")
pytest.importorskip("ray.data")

import lodt  # noqa: E402
import lodt.ray as lray  # noqa: E402
from fault_proxy import Fault, FaultProxy, conditional  # noqa: E402
from test_ray import TOTAL, _ids, local_ray, source  # noqa: E402,F401  (fixtures)


def _ids_of(uri: str, options: dict | None = None) -> list[int]:
    ds = lray.read_lodt(uri, storage_options=options)
    return sorted(_ids(ds.iter_batches(batch_size=None, batch_format="pyarrow")))


@pytest.mark.parametrize("fault", ["drop_response", "412_after_success"])
def test_a_ray_write_whose_answers_are_lost_is_committed_once(local_ray, source, s3, fault):  # noqa: F811
    path, _ = source
    port, options = s3
    with FaultProxy(port) as proxy:
        o = dict(options, aws_endpoint=proxy.endpoint, timeout="5s")
        uri = f"s3://data/ray-faults-{fault}"
        if fault == "drop_response":
            # Every part's commit and the merge lose their answers.
            proxy.add(Fault("drop_response", method="PUT", path="lodt-dataset", when=conditional, times=None))
        else:
            # The merge's answer is a 500; the client's retry is refused (412).
            proxy.add(Fault("status_after", method="PUT", path="lodt-dataset.json", when=conditional, status=500))
            proxy.add(Fault("status", method="PUT", path="lodt-dataset.json", when=conditional, status=412))
        totals = lray.write_lodt(lray.read_lodt(path, override_num_blocks=3), uri, shard_bytes=4096, storage_options=o)
        proxy.clear()
        dropped = [entry for entry in proxy.log if "dropped" in entry[2] or "answered" in entry[2]]
        assert dropped, proxy.log
    assert totals["sequences"] == TOTAL
    assert totals["commit_id"].startswith("ray-")
    assert _ids_of(uri, options) == list(range(TOTAL))
    assert lodt.list_parts(uri, storage_options=options) == []
    reader = lodt._lodt.DatasetReader(uri, storage_options=options)
    # Every shard the manifest lists is there, whole.
    assert reader.verify()["sequences"] == TOTAL
    assert json.loads(reader.manifest_json())["commits"][-1] == totals["commit_id"]


def _commits_then_dies():
    """A sink class defined here, so that Ray pickles it by value for its
    workers."""

    class CommitsThenDies(lray.LodtDatasink):
        """A sink whose first attempt of each write task commits its part and
        then fails (as a worker lost after its commit): Ray retries the task."""

        def __init__(self, *args, marks: str, **kwargs):
            super().__init__(*args, **kwargs)
            self.marks = marks

        def write(self, blocks, ctx):
            blocks = list(blocks)
            before = set(os.listdir(self.uri)) if os.path.isdir(self.uri) else set()
            super().write(blocks, ctx)
            new = [n for n in os.listdir(self.uri) if n not in before and n.endswith(".lodt")]
            mark = os.path.join(self.marks, f"task-{ctx.task_idx}")
            if os.path.exists(mark):
                # A retried attempt: record how many shards it wrote.
                with open(os.path.join(self.marks, f"retry-{ctx.task_idx}"), "w") as f:
                    f.write(str(len(new)))
                return
            open(mark, "w").close()
            raise RuntimeError("the task died after committing its part")

    return CommitsThenDies


def test_a_retried_write_task_writes_nothing_again(local_ray, source, tmp_path):  # noqa: F811
    path, _ = source
    out = tmp_path / "retried"
    marks = tmp_path / "marks"
    marks.mkdir()
    sink = _commits_then_dies()(out, shard_bytes=2048, marks=str(marks))
    ds = lray.read_lodt(path, override_num_blocks=2)
    ds.write_datasink(sink, ray_remote_args={"max_retries": 2, "retry_exceptions": True})
    retries = [n for n in os.listdir(marks) if n.startswith("retry-")]
    assert retries, os.listdir(marks)  # attempts died after committing; Ray retried them
    # The retried attempts found their task's committed part and wrote nothing.
    assert [(marks / n).read_text() for n in retries] == ["0"] * len(retries)
    assert _ids_of(str(out)) == list(range(TOTAL))
    manifest = json.loads((out / "lodt-dataset.json").read_text())
    assert manifest["commits"][-1] == sink.commit_id


def test_write_lodt_again_with_the_id_of_a_committed_job_writes_nothing(local_ray, source, tmp_path):  # noqa: F811
    path, _ = source
    out = tmp_path / "again"
    first = lray.write_lodt(lray.read_lodt(path, override_num_blocks=2), out, commit_id="nightly-1")
    before = sorted(os.listdir(out))
    again = lray.write_lodt(lray.read_lodt(path, override_num_blocks=2), out, commit_id="nightly-1")
    assert first["sequences"] == again["sequences"] == TOTAL
    assert sorted(os.listdir(out)) == before
    assert _ids_of(str(out)) == list(range(TOTAL))
