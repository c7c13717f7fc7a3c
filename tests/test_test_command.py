"""scripts/test --help: a new user asking what the test command does gets its text, and nothing is
installed, built or run (before, `--help` went to pytest after the whole set-up: Debian packages,
two venvs, the npm peers).

Run with a PATH of its own: the few commands the help needs, and stand-ins that record being called
for every command the set-up would run first.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "test"
NEEDED = ("bash", "dirname", "sed")
SET_UP = ("python3", "apt-get", "id", "npm", "node", "timeout", "sha256sum")


def test_help_prints_the_usage_and_sets_nothing_up(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.log"
    for name in NEEDED:
        real = shutil.which(name)
        assert real is not None, name
        (bin_dir / name).symlink_to(real)
    for name in SET_UP:
        stand_in = bin_dir / name
        stand_in.write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\n')
        stand_in.chmod(0o755)

    for flag in ("--help", "-h"):
        done = subprocess.run([str(bin_dir / "bash"), str(SCRIPT), flag], env={"PATH": str(bin_dir)},
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("scripts/test: the one command that sets everything up"), done.stdout
        assert "scripts/test tests/protocol" in done.stdout and "set -euo" not in done.stdout, done.stdout
        assert not calls.exists(), calls.read_text()
