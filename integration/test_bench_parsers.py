"""scripts/bench-http-parsers, the measurement behind the choice of httptools, runs and reports
all three figures (the numbers themselves are the closing note's, never asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "bench-http-parsers"


def test_it_reports_h11_and_httptools_per_request() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--requests", "200", "--rounds", "1"], capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr
    rows = dict(line.split() for line in done.stdout.splitlines()[1:4])
    assert set(rows) == {"h11", "h11-frame", "httptools"}
    assert all(float(value) > 0 for value in rows.values())
    assert "h11 / httptools:" in done.stdout
