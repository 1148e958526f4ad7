"""Every ```python block of README.md and docs/*.md runs (issue 30).

One test per page: the page's ``python`` blocks run in order, in one
namespace, with a fresh temporary directory as the working directory. Blocks
that use an object store read ``LODT_S3_ENDPOINT``, ``LODT_S3_BUCKET`` and
``LODT_S3_OPTIONS`` (JSON ``storage_options``) from the environment, which
this test sets from the ``s3`` fixture (moto) when a page mentions them.

A block is skipped only when its first line is the marker comment
``# docs-test: skip (<reason>)``; the test then reports the page as skipped
after running every other block, naming the reason. A block whose first line
is ``# docs-test: requires (<module>)`` runs when that optional module imports,
and is skipped the same way, naming it, when it does not. Output shown in a page
belongs in ``text`` blocks, which are not run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import re
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
ALL_PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("**/*.md")])
SKIP_MARKER = re.compile(r"^#\s*docs-test:\s*skip\s*\((?P<reason>[^)]+)\)\s*$")
REQUIRES_MARKER = re.compile(r"^#\s*docs-test:\s*requires\s*\((?P<module>[\w.]+)\)\s*$")
# A fenced block: the opening fence's indentation, its info string, its body.
FENCE = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>```+|~~~+)[ ]*(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)[ ]*$", re.M | re.S)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """The ``python`` blocks of a Markdown page: (line number, source)."""
    blocks = []
    for m in FENCE.finditer(text):
        info = m["info"].strip().split()
        if info and info[0] in ("python", "py", "python3"):
            line = text.count("\n", 0, m.start()) + 2
            blocks.append((line, m["body"]))
    return blocks


def test_fence_parser_finds_blocks_in_order():
    text = "a\n```python\nx = 1\n```\n\n```text\nnot run\n```\n```python\ny = x + 1\n```\n"
    assert python_blocks(text) == [(3, "x = 1\n"), (10, "y = x + 1\n")]


def test_skip_marker():
    assert SKIP_MARKER.match("# docs-test: skip (needs a GPU)")["reason"] == "needs a GPU"
    assert not SKIP_MARKER.match("# docs-test: skip")          # a reason is required
    assert not SKIP_MARKER.match("import lodt  # docs-test: skip (x)")
    assert REQUIRES_MARKER.match("# docs-test: requires (tensorflow)")["module"] == "tensorflow"
    assert not REQUIRES_MARKER.match("# docs-test: requires")


# The pages with python blocks (a page of prose and ``text`` blocks has nothing to run).
PAGES = [p for p in ALL_PAGES if python_blocks(p.read_text(encoding="utf-8"))]


def test_the_guide_has_examples():
    names = {str(p.relative_to(REPO)) for p in PAGES}
    assert {"docs/index.md", "docs/python.md"} <= names, names


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_page_examples_run(page, tmp_path, monkeypatch, request):
    text = page.read_text(encoding="utf-8")
    blocks = python_blocks(text)
    if "LODT_S3_" in text:
        port, options = request.getfixturevalue("s3")
        monkeypatch.setenv("LODT_S3_ENDPOINT", options["aws_endpoint"])
        monkeypatch.setenv("LODT_S3_BUCKET", "data")
        monkeypatch.setenv("LODT_S3_OPTIONS", json.dumps(options))
        for key, value in options.items():
            monkeypatch.setenv(key.upper(), value)
    monkeypatch.chdir(tmp_path)
    try:
        skipped = _run_page(page, text, blocks)
    finally:
        _stop_ray()
    if skipped:
        pytest.skip(f"{page.name}: blocks skipped by marker: " + "; ".join(skipped))


def _stop_ray():
    """A page that starts Ray stops it; if it failed first, this does (so the
    Ray tests that follow start their own)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def _run_page(page: pathlib.Path, text: str, blocks: list[tuple[int, str]]) -> list[str]:
    """Runs the blocks in order in one namespace; returns the skipped ones."""
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    skipped = []
    for line, source in blocks:
        first = source.lstrip().splitlines()[0] if source.strip() else ""
        marker = SKIP_MARKER.match(first)
        if marker:
            skipped.append(f"line {line}: {marker['reason']}")
            continue
        requires = REQUIRES_MARKER.match(first)
        if requires and importlib.util.find_spec(requires["module"]) is None:
            skipped.append(f"line {line}: {requires['module']} is not installed")
            continue
        # Compiled with the page's path and line numbers: a failure's
        # traceback points at the page's line.
        code = compile("\n" * (line - 1) + source, str(page), "exec")
        try:
            exec(code, namespace)
        except Exception as e:
            tb = e.__traceback__
            while tb.tb_next is not None and tb.tb_frame.f_code.co_filename != str(page):
                tb = tb.tb_next
            at = tb.tb_lineno if tb.tb_frame.f_code.co_filename == str(page) else line
            text_line = text.splitlines()[at - 1].strip() if at <= text.count("\n") + 1 else ""
            raise AssertionError(
                f"{page.relative_to(REPO)}:{at} (block at line {line}) failed: "
                f"{type(e).__name__}: {e}\n    {text_line}"
            ) from e
    return skipped


def test_the_architecture_page_names_every_module_of_the_crate():
    """docs/architecture.md's table names every file of src/: a top-level
    file by its path, a file in a folder by its name on the folder's row."""
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    missing = []
    for path in sorted((REPO / "src").rglob("*.rs")):
        rel = path.relative_to(REPO).as_posix()
        folder = rel.rsplit("/", 1)[0] + "/"
        if f"`{rel}`" in page:
            continue
        # src/a/b/c.rs: on the row of `src/a/` (a sub-folder's files, `b/`, there too).
        top = "/".join(rel.split("/")[:2]) + "/"
        if any(f"`{top}`" in row and f"`{path.name}`" in row for row in rows):
            continue
        if folder != top and any(f"`{top}`" in row and f"`{folder[len(top):]}`" in row for row in rows):
            continue
        if path.name == "mod.rs" and any(f"`{folder}`" in row or f"`{folder[len(top):]}`" in row for row in rows if f"`{top}`" in row):
            continue  # a folder's module root, named by its folder
        if path.name.endswith("_tests.rs") or path.name == "tests.rs":
            continue  # a module's unit tests, beside it
        missing.append(rel)
    assert not missing, f"docs/architecture.md does not name: {missing}"
