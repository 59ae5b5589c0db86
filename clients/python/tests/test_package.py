"""The package as it ships: generated types current, its version cordon's, built by
``python -m build`` and installable from the built wheel, one dependency (httpx)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import cordon_client

PACKAGE = Path(__file__).resolve().parent.parent
ROOT = PACKAGE.parent.parent


def test_the_generated_types_are_those_of_the_committed_schemas():
    # Exit 1, naming the file, when schema/ changed and the types were not regenerated.
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen-client-types"), "--check", "--lang", "py"],
        check=True, capture_output=True, text=True,
    )


def test_the_package_and_a_consumer_typecheck_strictly(tmp_path):
    # tests/typecheck_usage.py uses the API as a consumer would, with mistakes mypy must catch.
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "src/cordon_client", "tests/typecheck_usage.py"],
        cwd=PACKAGE, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_version_is_cordons():
    cargo = (ROOT / "Cargo.toml").read_text()
    version = re.search(r'\[workspace\.package\][^\[]*?\nversion = "([^"]+)"', cargo).group(1)
    pyproject = (PACKAGE / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1) == version
    assert cordon_client.VERSION == cordon_client.__version__ == version


def test_python_m_build_makes_a_wheel_that_installs_and_imports(tmp_path):
    # Built from a copy: the build's leftovers (egg-info, build/) stay out of the tree.
    source = tmp_path / "source"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns(
        "__pycache__", ".pytest_cache", "*.egg-info", "build", "dist"))
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        check=True, capture_output=True, text=True,
    )
    wheel = next(out.glob("cordon_client-*-py3-none-any.whl"))
    assert next(out.glob("cordon-client-*.tar.gz")) or next(out.glob("cordon_client-*.tar.gz"))
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "cordon_client/py.typed" in names and "cordon_client/types.py" in names, names
    assert not any(n.startswith("tests/") for n in names), names
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert len(requires) == 1 and requires[0].startswith("Requires-Dist: httpx"), requires
    assert "Requires-Python: >=3.10" in metadata

    # Installed by pip from the wheel file alone into a directory of its own (its one
    # dependency, httpx, is this Python's), imported from outside the source tree.
    target = tmp_path / "installed"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
         "--disable-pip-version-check", "--target", str(target), str(wheel)],
        check=True, capture_output=True, text=True,
    )
    probe = (
        "import cordon_client; c = cordon_client.Client('http://127.0.0.1:9', 't'); "
        "print(cordon_client.VERSION, cordon_client.__file__)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    seen = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, check=True,
                          capture_output=True, text=True).stdout.split()
    assert seen[0] == cordon_client.VERSION
    assert Path(seen[1]).is_relative_to(target), seen
