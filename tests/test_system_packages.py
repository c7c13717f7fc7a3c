"""scripts/system-packages, the part of the test command that readies the machine itself: on a fresh
Debian machine, as root, it installs what is missing from Debian's packages (so the README's two
commands are all the set-up there is); anywhere else it names the one command to run.

Each case runs the real script with a PATH of its own: stand-ins for the commands the machine has,
none for the one it lacks, and an `apt-get` (and `id`) that record what they were asked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "system-packages"
PRESENT = ("node", "npm", "curl", "redis-server", "nginx", "wrk", "valgrind")


def _machine(tmp_path: Path, *, uid: int, apt: bool = True) -> tuple[dict[str, str], Path]:
    """A PATH where chromium is missing, `id -u` says `uid`, and apt-get (if any) logs its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "apt.log"
    for name in PRESENT:
        _script(bin_dir / name, "exit 0")
    for name in ("bash", "timeout"):
        real = shutil.which(name)
        assert real is not None, name
        (bin_dir / name).symlink_to(real)
    # The interpreter itself (a venv's or a version manager's shim may need a PATH of its own).
    (bin_dir / "python3").symlink_to(os.path.realpath(sys._base_executable))
    _script(bin_dir / "id", f"echo {uid}")
    if apt:
        _script(bin_dir / "apt-get", f'echo "$*" >> {log}')
    return {**os.environ, "PATH": str(bin_dir)}, log


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([shutil.which("bash") or "bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)


def test_as_root_with_apt_get_it_installs_what_is_missing(tmp_path: Path) -> None:
    env, log = _machine(tmp_path, uid=0)
    done = _run(env)
    assert done.returncode == 0, done.stderr
    asked = log.read_text().splitlines()
    assert asked[0] == "update -qq"
    assert asked[1].startswith("install -y -qq") and asked[1].split()[-1] == "chromium", asked
    assert "installing chromium" in done.stderr


def test_without_root_it_names_the_one_command_and_installs_nothing(tmp_path: Path) -> None:
    env, log = _machine(tmp_path, uid=1000)
    done = _run(env)
    assert done.returncode == 1
    assert "missing: chromium; install them (Debian: sudo apt-get install chromium)" in done.stderr
    assert not log.exists()


def test_without_apt_get_it_names_the_packages(tmp_path: Path) -> None:
    env, _ = _machine(tmp_path, uid=0, apt=False)
    done = _run(env)
    assert done.returncode == 1
    assert "missing: chromium" in done.stderr


def test_nothing_missing_is_silent_and_asks_no_network(tmp_path: Path) -> None:
    env, log = _machine(tmp_path, uid=0)
    _script(Path(env["PATH"]) / "chromium", "exit 0")
    done = _run(env)
    assert (done.returncode, done.stderr) == (0, "")
    assert not log.exists()


def test_a_machine_without_wrk_gets_it_from_debian(tmp_path: Path) -> None:
    env, log = _machine(tmp_path, uid=0)
    bin_dir = Path(env["PATH"])
    _script(bin_dir / "chromium", "exit 0")
    (bin_dir / "wrk").unlink()
    done = _run(env)
    assert done.returncode == 0, done.stderr
    asked = log.read_text().splitlines()
    assert asked[0] == "update -qq"
    assert asked[1].split()[-1] == "wrk", asked
