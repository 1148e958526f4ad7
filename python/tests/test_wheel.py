"""The wheel users install: built by scripts/wheel, it installs into a fresh
venv with numpy and pyarrow only, on a PATH without cargo or rustc, and the
README's Python quickstart (its parts without torch or an object store) runs
there. The versions of the crate, the Python package and the CHANGELOG agree.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest

import lodt

REPO = pathlib.Path(__file__).resolve().parents[2]


def _crate_version(path: pathlib.Path) -> str:
    return tomllib.loads(path.read_text())["package"]["version"]


def test_versions_agree():
    crate = _crate_version(REPO / "Cargo.toml")
    assert _crate_version(REPO / "python" / "Cargo.toml") == crate
    assert _crate_version(REPO / "cli" / "Cargo.toml") == crate
    assert lodt.__version__ == crate
    released = re.findall(r"^## \[?(\d+\.\d+\.\d+)\]?", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert released and released[0] == crate, f"CHANGELOG's newest release {released[:1]} != {crate}"


def quickstart_blocks(text: str) -> list[str]:
    """The README's ```python blocks that need neither torch nor an object store."""
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)
    return [b for b in blocks if "torch" not in b and "LODT_S3" not in b and "s3://" not in b]


def _wheel() -> pathlib.Path:
    path = os.environ.get("LODT_WHEEL")
    if not path:
        pytest.skip("LODT_WHEEL is not set (scripts/test sets it to the wheel scripts/wheel built)")
    return pathlib.Path(path)


def test_the_wheel_is_abi3_manylinux_2_28():
    wheel = _wheel()
    assert re.fullmatch(r"lodt-[\d.]+-cp310-abi3-manylinux_2_28_x86_64\.whl", wheel.name), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert any(re.fullmatch(r"lodt/_lodt\.abi3\.so", n) for n in names), names
    assert "lodt/_lodt.pyi" in names and "lodt/py.typed" in names


def test_the_wheel_installs_and_runs_the_quickstart_without_rust(tmp_path):
    wheel = _wheel()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    # A PATH with the new venv and the system's tools only: no cargo, no rustc.
    path = os.pathsep.join([str(venv / "bin"), "/usr/local/bin", "/usr/bin", "/bin"])
    assert shutil.which("cargo", path=path) is None and shutil.which("rustc", path=path) is None
    env = {"PATH": path, "HOME": str(tmp_path), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    pip = [str(py), "-m", "pip", "install", "--quiet", "--only-binary", ":all:"]
    subprocess.run(pip + ["numpy", "pyarrow", str(wheel)], check=True, env=env, cwd=tmp_path)
    listed = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze"], check=True, env=env,
                            capture_output=True, text=True).stdout
    installed = {line.split("==")[0].lower() for line in listed.split()}
    assert installed - {"pip", "setuptools"} == {"lodt", "numpy", "pyarrow"}, installed

    blocks = quickstart_blocks((REPO / "README.md").read_text())
    assert blocks, "README.md has no Python quickstart"
    work = tmp_path / "work"
    work.mkdir()
    script = work / "quickstart.py"
    script.write_text("\n\n".join(blocks))
    run = subprocess.run([str(py), str(script)], env=env, cwd=work, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-4000:]
    where = subprocess.run([str(py), "-c", "import lodt; print(lodt.__file__)"], env=env, cwd=work,
                           capture_output=True, text=True, check=True).stdout
    assert str(venv) in where
