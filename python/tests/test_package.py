"""The package itself: the installed abi3 wheel, stubs and docstrings,
and optional dependencies that are missing."""

import inspect
import os
import pathlib
import subprocess
import sys

import pytest

import lodt


def test_tested_package_is_the_installed_wheel():
    if not os.environ.get("LODT_EXPECT_WHEEL"):
        pytest.skip("not run by scripts/test (LODT_EXPECT_WHEEL unset): may be a development install")
    package = pathlib.Path(lodt.__file__).parent
    assert "site-packages" in package.parts
    native = [p.name for p in package.iterdir() if p.name.startswith("_lodt.")]
    assert any(n.endswith(".abi3.so") or n.endswith(".pyd") for n in native), native


def test_typing_files_ship_with_the_package():
    package = pathlib.Path(lodt.__file__).parent
    assert (package / "py.typed").exists()
    assert (package / "_lodt.pyi").exists()


def test_every_public_name_has_a_docstring():
    missing = []
    for name in lodt.__all__:
        obj = getattr(lodt, name)
        if name == "__version__":
            continue
        if not (inspect.getdoc(obj) or "").strip():
            missing.append(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not callable(member) and not isinstance(member, property) and not inspect.isgetsetdescriptor(member):
                    continue
                if not (inspect.getdoc(member) or "").strip():
                    missing.append(f"{name}.{attr}")
    assert not missing, missing


def test_torch_module_is_documented():
    pytest.importorskip("torch", reason="torch is not installed (pip install 'lodt[torch]')")
    import lodt.torch as lt

    for name in lt.__all__:
        assert (inspect.getdoc(getattr(lt, name)) or "").strip(), name


def test_version():
    assert lodt.__version__.count(".") == 2


def _without(module, code):
    """Runs ``code`` in a fresh interpreter in which ``module`` cannot be imported."""
    prelude = f"import sys; sys.modules[{module!r}] = None\n"
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True)


def test_missing_torch_names_the_extra():
    r = _without("torch", "import lodt, numpy as np\nlodt.LodTensor(np.zeros(2), [[2]]).to_torch()")
    assert r.returncode != 0 and "ImportError" in r.stderr and "pip install 'lodt[torch]'" in r.stderr


def test_missing_ml_dtypes_names_the_extra():
    code = (
        "import lodt\n"
        "t = lodt.LodTensor._from_state if False else lodt._lodt._tensor_from_state('bfloat16', [1], [], b'\\x80\\x3f', True)\n"
        "assert t.numpy(bfloat16_as_uint16=True).tolist() == [16256]\n"
        "import numpy as np\nnp.asarray(t)\n"
    )
    r = _without("ml_dtypes", code)
    assert r.returncode != 0 and "ImportError" in r.stderr and "pip install 'lodt[bfloat16]'" in r.stderr


def test_missing_pyarrow_is_not_needed():
    r = _without("pyarrow", "import lodt, numpy as np\nt = lodt.LodTensor(np.zeros(2), [[2]])\nt.__arrow_c_array__()\nprint('ok')")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
