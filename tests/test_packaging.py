"""What a built wheel carries: py.typed (PEP 561), without which a user's type checker ignores
mcpsync's annotations, every subpackage, and the version written once in mcpsync/_version.py; and
where the build's settings live: setuptools' own in setup.cfg, the rest in pyproject.toml, none in both.

The wheel is built (by pip, in its isolated build environment) from a copy of what an sdist holds,
so the build writes nothing into the working tree.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import mcpsync

ROOT = Path(__file__).resolve().parent.parent
BUILD_TIMEOUT = 240.0

pytestmark = pytest.mark.timeout(BUILD_TIMEOUT + 30)


def test_the_wheel_ships_py_typed_and_the_version(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(ROOT / "mcpsync", source / "mcpsync", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "setup.cfg", "README.rst"):
        shutil.copy(ROOT / name, source / name)
    wheels = tmp_path / "wheels"
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(wheels), str(source)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = wheels.glob("*.whl")
    assert wheel.name.startswith(f"mcpsync-{mcpsync.__version__}-")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {"mcpsync/py.typed", "mcpsync/_version.py"} <= names
    packages = {str(path.parent.relative_to(ROOT)) for path in (ROOT / "mcpsync").rglob("__init__.py")}
    assert packages <= {name.rsplit("/", 1)[0] for name in names}, "a subpackage is missing from the wheel"


def test_setuptools_settings_live_in_setup_cfg_and_nowhere_else() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "setuptools" not in pyproject.get("tool", {}), "setuptools' settings belong in setup.cfg"
    setup_cfg = configparser.ConfigParser()
    setup_cfg.read(ROOT / "setup.cfg")
    assert setup_cfg["metadata"]["version"] == "attr: mcpsync._version.__version__"
    assert pyproject["project"]["dynamic"] == ["version"]
    # Everything else of the metadata is in [project]; none of it is said again in setup.cfg.
    assert set(setup_cfg["metadata"]) == {"version"}
