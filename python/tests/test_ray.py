"""lodt datasets in Ray Data (`lodt.ray`), on a local Ray (`ray.init(num_cpus=2)`):
reads at several parallelisms, writes through parts and one commit, a
failing write, a filtering transform, the round trip, torch batches, S3 (moto)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'lodt[ray]')")
pa = pytest.importorskip("pyarrow")
pytest.importorskip("ray.data")

import pyarrow.compute as pc  # noqa: E402

import lodt  # noqa: E402
import lodt.ray as lray  # noqa: E402
from conftest import _AZURITE_KEY  # noqa: E402  (the azurite fixture is in conftest)

SHARDS = 4
BATCHES_PER_SHARD = 3
PER_BATCH = 10
TOTAL = SHARDS * BATCHES_PER_SHARD * PER_BATCH


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture
def preserve_order():
    ctx = ray.data.DataContext.get_current()
    old = ctx.execution_options.preserve_order
    ctx.execution_options.preserve_order = True
    yield
    ctx.execution_options.preserve_order = old


def _batch(first: int, n: int) -> lodt.Batch:
    """Sequences ``first .. first+n``: ``words`` (int64, 1 level, rows [1])
    holds the id then its length-1 followers; ``frames`` (float32, 2 levels,
    rows [2]) has 1 to 3 sub-sequences of 1 to 2 rows."""
    rng = np.random.default_rng(first)
    word_lens, words = [], []
    sub_counts, sub_lens, frames = [], [], []
    for i in range(first, first + n):
        k = int(rng.integers(1, 7))
        word_lens.append(k)
        words += [i * 1000 + j for j in range(k)]
        subs = int(rng.integers(1, 4))
        sub_counts.append(subs)
        for s in range(subs):
            m = int(rng.integers(1, 3))
            sub_lens.append(m)
            frames += [[i + 0.5, s + 0.25 * r] for r in range(m)]
    w = lodt.create_lod_tensor(np.array(words, dtype=np.int64).reshape(-1, 1), [word_lens])
    f = lodt.create_lod_tensor(np.array(frames, dtype=np.float32), [sub_counts, sub_lens])
    patch = (np.arange(len(words) * 4, dtype=np.int16) % 97).reshape(-1, 2, 2)
    p = lodt.create_lod_tensor(patch, [word_lens])
    return lodt.Batch({"words": w, "frames": f, "patch": p})


def _batches(start: int = 0):
    return [_batch(start + b * PER_BATCH, PER_BATCH) for b in range(SHARDS * BATCHES_PER_SHARD)]


def _write_multishard(path, batches) -> dict:
    # One write (a create, then appends) per shard of BATCHES_PER_SHARD batches.
    for s in range(SHARDS):
        chunk = batches[s * BATCHES_PER_SHARD : (s + 1) * BATCHES_PER_SHARD]
        totals = lodt.write_dataset(path, chunk, mode="append" if s else "create")
    assert totals["shards"] == SHARDS, totals
    return totals


def _rows(tables) -> list[str]:
    """Every row as canonical JSON text (a multiset key)."""
    out = []
    for t in tables:
        out += [json.dumps(r, sort_keys=True) for r in t.to_pylist()]
    return out


def _expected(batches) -> list[str]:
    return _rows(lray._ray_table(b) for b in batches)


def _ids(tables) -> list[int]:
    ids = []
    for t in tables:
        ids += [int(seq[0][0]) // 1000 for seq in t.column("words").to_pylist()]
    return ids


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("ray") / "src"
    batches = _batches()
    _write_multishard(path, batches)
    return path, batches


def test_planning_reads_the_manifest_only(source):
    path, batches = source
    src = lray.LodtDatasource(path)
    tasks = src.get_read_tasks(8)
    assert len(tasks) == 8
    assert sum(t.metadata.num_rows for t in tasks) == TOTAL
    assert all(t.metadata.num_rows > 0 and t.metadata.size_bytes > 0 for t in tasks)
    # The schema from the manifest is the schema of the data.
    assert tasks[0].metadata.schema == lray._ray_table(batches[0]).schema
    files = {f for t in tasks for f in t.metadata.input_files}
    assert len(files) == SHARDS
    # More tasks than batches: one per batch.
    assert len(src.get_read_tasks(1000)) == SHARDS * BATCHES_PER_SHARD
    assert src.estimate_inmemory_data_size() == sum(
        s["bytes"] for s in json.loads((path / "lodt-dataset.json").read_text())["shards"]
    )
    only = lray.LodtDatasource(path, ["frames"])
    assert only.get_read_tasks(1)[0].metadata.schema.names == ["frames"]
    with pytest.raises(ValueError, match="no tensor named"):
        lray.LodtDatasource(path, ["nope"])
    with pytest.raises(FileNotFoundError):
        lray.LodtDatasource(path.parent / "missing")


@pytest.mark.parametrize("parallelism", [1, 2, 8])
def test_read_every_sequence_exactly_once(local_ray, source, parallelism):
    path, batches = source
    ds = lray.read_lodt(path, override_num_blocks=parallelism)
    tables = list(ds.iter_batches(batch_size=None, batch_format="pyarrow"))
    ids = _ids(tables)
    assert sorted(ids) == list(range(TOTAL))
    assert sorted(_rows(tables)) == sorted(_expected(batches))
    # The LoD survived as nested lists.
    frames = tables[0].schema.field("frames").type
    assert pa.types.is_large_list(frames) and pa.types.is_large_list(frames.value_type)
    assert frames.value_type.value_type == pa.list_(pa.float32(), 2)
    assert tables[0].schema.field("patch").type.value_type == pa.list_(pa.list_(pa.int16(), 2), 2)


def test_read_a_subset_of_tensors(local_ray, source):
    path, _ = source
    ds = lray.read_lodt(path, ["frames"], override_num_blocks=2)
    assert ds.columns() == ["frames"]
    assert ds.count() == TOTAL


def test_round_trip_in_order(local_ray, source, tmp_path, preserve_order):
    path, batches = source
    out = tmp_path / "copy"
    totals = lray.write_lodt(lray.read_lodt(path, override_num_blocks=3), out, shard_bytes=1 << 20)
    assert totals["sequences"] == TOTAL
    assert lodt._lodt.DatasetReader(out).verify()["sequences"] == TOTAL
    got = lodt.Dataset(out, batch_size=TOTAL)
    (one,) = list(got)
    want = lodt.Dataset(path, batch_size=TOTAL)
    (two,) = list(want)
    for name in ("words", "frames", "patch"):
        assert one[name].shape() == two[name].shape()
        assert one[name].lod() == two[name].lod()
        np.testing.assert_array_equal(np.asarray(one[name]), np.asarray(two[name]))
    # No part is left behind.
    assert not [n for n in os.listdir(out) if "part" in n]


def test_round_trip_as_a_multiset(local_ray, source, tmp_path):
    path, batches = source
    out = tmp_path / "copy"
    lray.write_lodt(lray.read_lodt(path, override_num_blocks=8), out, shard_bytes=4096)
    back = list(lray.read_lodt(out).iter_batches(batch_size=None, batch_format="pyarrow"))
    assert sorted(_rows(back)) == sorted(_expected(batches))
    manifest = json.loads((out / "lodt-dataset.json").read_text())
    assert len(manifest["shards"]) > 1
    assert all(s["name"].startswith("ray-") for s in manifest["shards"])
    assert not [n for n in os.listdir(out) if n.startswith("lodt-dataset.part.")]


def test_filter_keeps_lods_valid(local_ray, source, tmp_path):
    path, batches = source

    def long_only(t: pa.Table) -> pa.Table:
        return t.filter(pc.greater_equal(pc.list_value_length(t["words"]), 3))

    ds = lray.read_lodt(path, override_num_blocks=4).map_batches(long_only, batch_format="pyarrow")
    out = tmp_path / "long"
    totals = lray.write_lodt(ds, out)
    want = [
        r
        for r in _expected(batches)
        if len(json.loads(r)["words"]) >= 3
    ]
    assert 0 < len(want) < TOTAL
    assert totals["sequences"] == len(want)
    assert lodt._lodt.DatasetReader(out).verify()["sequences"] == len(want)
    reader = lodt.Dataset(out, batch_size=7)
    seen = 0
    for b in reader:
        words, frames = b["words"], b["frames"]
        assert all(n >= 3 for n in words.recursive_sequence_lengths()[0])
        assert len(frames.recursive_sequence_lengths()) == 2
        frames.validate()
        words.validate()
        seen += b.num_rows
    assert seen == len(want)
    back = list(lray.read_lodt(out).iter_batches(batch_size=None, batch_format="pyarrow"))
    assert sorted(_rows(back)) == sorted(want)


def _dying_sinks():
    """Sinks whose every write task raises after writing 5 blocks (defined
    here, so that Ray pickles them by value for its workers)."""

    class DiesMidway(lray.LodtDatasink):
        def write(self, blocks, ctx):
            def first_five():
                for i, block in enumerate(blocks):
                    if i == 5:
                        raise RuntimeError("write task died mid-way")
                    yield block

            super().write(first_five(), ctx)

    class DiesMidwayNoCleanup(DiesMidway):
        def on_write_failed(self, error):
            pass

    return DiesMidway, DiesMidwayNoCleanup


def test_a_failing_write_changes_nothing(local_ray, source, tmp_path):
    path, batches = source
    _DiesMidway, _DiesMidwayNoCleanup = _dying_sinks()
    out = tmp_path / "existing"
    lodt.write_dataset(out, batches[:2])
    before = (out / "lodt-dataset.json").read_bytes()
    names_before = sorted(os.listdir(out))
    ds = lray.read_lodt(path, override_num_blocks=2)
    # Without the cleanup: the tasks had written shards (2 KiB each) when they died.
    with pytest.raises(Exception, match="died mid-way"):
        ds.write_datasink(_DiesMidwayNoCleanup(out, mode="append", shard_bytes=2048))
    assert (out / "lodt-dataset.json").read_bytes() == before
    assert len([n for n in os.listdir(out) if n.startswith("ray-")]) >= 2
    # With it (write_lodt's sink): the manifest and the directory are as they were
    # (the job's shards, and the unlisted ones a dead job left, are deleted).
    with pytest.raises(Exception, match="died mid-way"):
        ds.write_datasink(_DiesMidway(out, mode="append", shard_bytes=2048))
    assert (out / "lodt-dataset.json").read_bytes() == before
    assert sorted(os.listdir(out)) == names_before
    assert lodt._lodt.DatasetReader(out).verify()["sequences"] == 2 * PER_BATCH
    # An existing dataset is not replaced by mode="create".
    with pytest.raises(FileExistsError):
        lray.write_lodt(lray.read_lodt(path), out)
    assert (out / "lodt-dataset.json").read_bytes() == before


def test_parts_of_failed_attempts_are_never_listed(local_ray, source, tmp_path):
    path, batches = source
    out = tmp_path / "retried"
    # What a task attempt that wrote its part and then died leaves behind.
    stray = "ray-0123456789ab-000000-deadbeef"
    lodt.write_dataset(out, batches[:3], mode="part", writer_id=stray)
    assert any(n.startswith(stray) for n in os.listdir(out))
    totals = lray.write_lodt(lray.read_lodt(path, override_num_blocks=2), out)
    assert totals["sequences"] == TOTAL
    assert not any(stray in n for n in os.listdir(out))
    manifest = json.loads((out / "lodt-dataset.json").read_text())
    assert not any(s["name"].startswith(stray) for s in manifest["shards"])


def test_append_adds_to_an_existing_dataset(local_ray, source, tmp_path):
    path, batches = source
    out = tmp_path / "more"
    lodt.write_dataset(out, _batches(start=TOTAL)[:2])
    totals = lray.write_lodt(lray.read_lodt(path), out, mode="append")
    assert totals["sequences"] == TOTAL + 2 * PER_BATCH
    ids = _ids(lray.read_lodt(out).iter_batches(batch_size=None, batch_format="pyarrow"))
    assert sorted(ids) == list(range(TOTAL + 2 * PER_BATCH))


def test_append_to_a_dataset_written_by_ray(local_ray, source, tmp_path):
    path, batches = source
    out = tmp_path / "twice"
    lray.write_lodt(lray.read_lodt(path, override_num_blocks=2), out)
    first = json.loads((out / "lodt-dataset.json").read_text())["shards"]
    # The default writes 2.0 shards; the append asks for 1.0 ones beside them.
    assert {s["format_version"] for s in first} == {"2.0"}
    totals = lray.write_lodt(
        lray.read_lodt(path, override_num_blocks=3), out, mode="append", format_version="1.0"
    )
    assert totals["sequences"] == 2 * TOTAL
    manifest = json.loads((out / "lodt-dataset.json").read_text())["shards"]
    assert manifest[: len(first)] == first
    assert {s["format_version"] for s in manifest[len(first) :]} == {"1.0"}
    assert all(lodt.File(out / s["name"]).version == (int(s["format_version"][0]), 0) for s in manifest)
    assert all((out / s["name"]).exists() for s in manifest)
    assert lodt._lodt.DatasetReader(out).verify()["sequences"] == 2 * TOTAL
    ids = _ids(lray.read_lodt(out).iter_batches(batch_size=None, batch_format="pyarrow"))
    assert sorted(ids) == sorted(list(range(TOTAL)) * 2)


def test_torch_batches_give_lods_back(local_ray, source):
    torch = pytest.importorskip("torch")
    path, batches = source
    ds = lray.read_lodt(path, override_num_blocks=2)
    seen = 0
    for b in ds.iter_torch_batches(batch_size=16, collate_fn=lray.collate_fn(ds.schema(), "batch")):
        assert isinstance(b, lodt.Batch)
        words = b["words"]
        for k, seq in enumerate(words):
            first = int(np.asarray(seq)[0, 0])
            i = first // 1000
            assert np.asarray(seq)[:, 0].tolist() == [i * 1000 + j for j in range(len(seq))]
        assert len(b["frames"].lod()) == 2
        assert b["patch"].shape()[1:] == [2, 2]
        assert b["patch"].lod() == words.lod()
        seen += b.num_rows
    assert seen == TOTAL
    padded = next(iter(ds.iter_torch_batches(batch_size=8, collate_fn=lray.collate_fn(ds.schema(), "padded"))))
    dense, lengths = padded["frames"]
    assert dense.shape[0] == 8 and dense.shape[-1] == 2
    assert len(lengths) == 2 and int(lengths[0].sum()) == len(lengths[1])
    ds = lray.read_lodt(path, ["words"], override_num_blocks=2)
    nested = next(iter(ds.iter_torch_batches(batch_size=8, collate_fn=lray.collate_fn(ds.schema(), "nested"))))
    assert nested["words"].is_nested and nested["words"].size(0) == 8
    with pytest.raises(ValueError, match="schema"):
        lray.to_lod_batch({"words": np.zeros(3)})
    # The same from Arrow batches, no numpy detour.
    for b in lray.iter_lod_batches(ds, batch_size=50):
        assert b["words"].lod() == lodt.Batch.from_arrow(pa.table(b))["words"].lod()
    assert isinstance(torch.tensor(0), torch.Tensor)


# -- S3 (moto) -----------------------------------------------------------------


@pytest.fixture
def s3_options(s3):
    """The storage options of conftest's moto server."""
    return s3[1]


def test_s3_round_trip(local_ray, source, s3_options):
    path, batches = source
    uri = "s3://data/ray-copy"
    totals = lray.write_lodt(
        lray.read_lodt(path, override_num_blocks=4), uri, shard_bytes=4096, storage_options=s3_options
    )
    assert totals["sequences"] == TOTAL
    back = list(
        lray.read_lodt(uri, storage_options=s3_options, override_num_blocks=2).iter_batches(
            batch_size=None, batch_format="pyarrow"
        )
    )
    assert sorted(_rows(back)) == sorted(_expected(batches))
    assert lodt._lodt.DatasetReader(uri, storage_options=s3_options).verify()["sequences"] == TOTAL
    assert lodt.list_parts(uri, storage_options=s3_options) == []


def test_missing_ray_names_the_extra():
    code = "import sys; sys.modules['ray'] = None\nimport lodt.ray"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr and "lodt[ray]" in proc.stderr


def test_every_public_name_is_documented():
    import inspect

    for name in lray.__all__:
        obj = getattr(lray, name)
        assert (inspect.getdoc(obj) or "").strip(), name
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and callable(member):
                    assert (inspect.getdoc(member) or "").strip(), f"{name}.{attr}"


# -- every scheme lodt writes: the same code path ----------------------------------


def _stray_part(uri: str, options: dict, batches) -> str:
    """What a task attempt of a failed write_lodt job leaves: a finished part
    (another job's id) that no manifest lists."""
    stray = lodt._lodt.PartJob("ray").new_writer_id(0)
    lodt.write_dataset(uri, batches[:2], mode="part", writer_id=stray, storage_options=options)
    assert [p["writer_id"] for p in lodt.list_parts(uri, storage_options=options)] == [stray]
    return stray


def _round_trip(uri: str, options: dict, source) -> None:
    path, batches = source
    stray = _stray_part(uri, options, batches)
    totals = lray.write_lodt(
        lray.read_lodt(path, override_num_blocks=3), uri, shard_bytes=4096, storage_options=options
    )
    assert totals["sequences"] == TOTAL and totals["commit_id"].startswith("ray-")
    back = list(
        lray.read_lodt(uri, storage_options=options, override_num_blocks=2).iter_batches(
            batch_size=None, batch_format="pyarrow"
        )
    )
    assert sorted(_rows(back)) == sorted(_expected(batches))
    reader = lodt._lodt.DatasetReader(uri, storage_options=options)
    assert reader.verify()["sequences"] == TOTAL
    manifest = json.loads(reader.manifest_json())
    # The stray part was deleted, not merged; no part is left.
    assert not any(s["name"].startswith(stray) for s in manifest["shards"])
    assert lodt.list_parts(uri, storage_options=options) == []
    # Appending a second job keeps the first job's shards.
    again = lray.write_lodt(
        lray.read_lodt(path, override_num_blocks=2), uri, mode="append", shard_bytes=4096,
        storage_options=options,
    )
    assert again["sequences"] == 2 * TOTAL
    assert json.loads(lodt._lodt.DatasetReader(uri, storage_options=options).manifest_json())[
        "shards"
    ][: len(manifest["shards"])] == manifest["shards"]


def test_write_lodt_on_s3_cleans_up_and_round_trips(local_ray, source, s3_options):
    _round_trip("s3://data/ray-scheme", s3_options, source)


def test_write_lodt_on_azure_round_trips(local_ray, source, azurite):  # noqa: F811
    # Before, write_lodt refused az:// ("writes to local directories and s3:// URIs").
    # Ray's workers were started before the fixture set AZURITE_BLOB_STORAGE_URL:
    # the options name the emulator's endpoint themselves.
    endpoint = os.environ["AZURITE_BLOB_STORAGE_URL"]
    options = {
        "azure_storage_account_name": "devstoreaccount1",
        "azure_storage_account_key": _AZURITE_KEY,
        "azure_storage_endpoint": f"{endpoint}/devstoreaccount1",
        "azure_allow_http": "true",
    }
    _round_trip("az://data/ray-azure", options, source)


def test_write_lodt_takes_path_like_locations(local_ray, source, tmp_path):
    import pathlib

    out = pathlib.Path(tmp_path) / "pathlike"
    totals = lray.write_lodt(lray.read_lodt(source[0], override_num_blocks=2), out)
    assert totals["sequences"] == TOTAL
    assert len(lodt.Dataset(out)) == TOTAL
