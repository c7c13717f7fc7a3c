"""The lowest PyJWT the `auth` extra allows is a version the verifier's tests have run.

.venv pins PyJWT to the newest release; a user's `pip install mcpsync[auth]` may resolve anything
from the extra's floor up. So the floor is read from pyproject.toml (never written here, so the two
cannot drift), scripts/floor-venv builds .venv-floor with exactly that PyJWT, and the tests that
exercise PyJWT (signatures, headers, claims, the JWKS) run again with that venv's python, from the
repository root, against the working tree. Under the old floor, 2.8.0, every token check raised
TypeError; under 2.9 to 2.11 an unknown critical header was accepted: either would fail here.
"""

from __future__ import annotations

import os
import re
import tomllib
from typing import Any

import pytest
from wire import REPO_ROOT

pytestmark = pytest.mark.timeout(180)  # a first build of .venv-floor (scripts/test makes it beforehand) plus the run

FLOOR_VENV_TIMEOUT = 120.0
RUN_TIMEOUT = 50.0
FLOOR_TESTS = [
    "tests/auth/test_jwt.py",
    "tests/auth/test_attack_tokens.py",
    "tests/auth/test_client_credentials.py",
    "tests/auth/test_introspection.py",
    "tests/auth/test_resource.py",
]


def pyjwt_floor() -> str:
    with open(REPO_ROOT / "pyproject.toml", "rb") as file:
        auth = tomllib.load(file)["project"]["optional-dependencies"]["auth"]
    (floor,) = [match.group(1) for item in auth if (match := re.fullmatch(r"PyJWT\[crypto\]>=([0-9][0-9.]*)", item))]
    return floor


def release(version: str) -> list[int]:
    """A plain release number as a list, trailing zeros dropped: "2.12" and "2.12.0" are one version."""
    parts = [int(part) for part in version.split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return parts


def test_the_verifier_tests_pass_with_the_lowest_pyjwt_the_auth_extra_allows(bounded: Any) -> None:
    floor = pyjwt_floor()
    built = bounded([str(REPO_ROOT / "scripts" / "floor-venv")], timeout=FLOOR_VENV_TIMEOUT, cwd=REPO_ROOT)
    assert built.returncode == 0, built.stderr
    python = built.stdout.strip().splitlines()[-1]
    env = {name: value for name, value in os.environ.items() if name not in ("VIRTUAL_ENV", "PYTHONHOME")}
    env["PYTHONPATH"] = str(REPO_ROOT)  # the working tree's mcpsync and tests, not an installed copy
    version = bounded([python, "-c", "import jwt, mcpsync; print(jwt.__version__, mcpsync.__file__)"], timeout=30.0, cwd=REPO_ROOT, env=env)
    assert version.returncode == 0, version.stderr
    found, imported = version.stdout.split()
    assert (release(found), imported) == (release(floor), str(REPO_ROOT / "mcpsync" / "__init__.py"))
    run = bounded([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *FLOOR_TESTS], timeout=RUN_TIMEOUT, cwd=REPO_ROOT, env=env)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.returncode == 0, f"PyJWT {floor}: {summary}\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    assert re.fullmatch(r"\d+ passed(, \d+ warnings?)? in [0-9.]+s( \([0-9:]+\))?", summary), summary  # nothing skipped, nothing failed
