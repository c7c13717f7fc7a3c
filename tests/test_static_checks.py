"""mypy and ruff run with the tests, as pyproject.toml configures them, and fail with their output.

Each is this interpreter's own (`sys.executable -m ...`, the pinned versions of the `test` extra),
run from the repository root, where pyproject.toml is found and mypy keeps its cache
(`.mypy_cache`, gitignored): a cold cache can take a minute on two cores, a warm one a second or two.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import mcpsync

ROOT = Path(__file__).resolve().parent.parent
CHECK_TIMEOUT = 240.0

pytestmark = pytest.mark.timeout(CHECK_TIMEOUT + 30)


def _check(*args: str) -> None:
    """Run `python -m ARGS` from the repository root; fail with everything it printed unless it passes."""
    done = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=CHECK_TIMEOUT)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}"


def public_modules() -> list[str]:
    """The package root and each module a name it exports is defined in: what a user's own
    `mypy --strict` reads (py.typed), taken from `__all__` so a new export is checked too."""
    modules = {"mcpsync"}
    for name in mcpsync.__all__:
        value = getattr(mcpsync, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            modules.add(value.__module__)
    return sorted(modules)


def test_mypy_strict_passes_on_the_public_modules() -> None:
    """Strict whatever [tool.mypy] says, so loosening it for the internals cannot loosen these."""
    modules = public_modules()
    assert {"mcpsync.server", "mcpsync.client", "mcpsync.errors", "mcpsync.transport.http.endpoint"} <= set(modules)
    _check("mypy", "--strict", *(arg for module in modules for arg in ("-m", module)))


def test_mypy_passes_on_the_whole_package() -> None:
    _check("mypy")


def test_ruff_passes() -> None:
    _check("ruff", "check")
