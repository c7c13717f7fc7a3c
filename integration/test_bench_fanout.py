"""scripts/bench-fanout, the listen fan-out benchmark, run as a real process against both real servers
(`mcpsync serve integration/dynamic_app.py --http` and the official SDK's uvicorn peer).

A quick run (20 listens, one repeat) must exit 0, print the table with a valid row per server and
the ratio table, and write sane figures to --json: every stream got the change, arrivals ordered,
the server's threads and peak RSS read. A server that cannot hold N listens must give an INVALID row
that says why, and exit status 1, not a crash.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from wire import REPO_ROOT, base_env

pytestmark = pytest.mark.timeout(150)

BENCH = REPO_ROOT / "scripts" / "bench-fanout"
PROCESS_LIMIT_S = 120  # a quick run takes a few seconds; the bound is for a hang


def bench(bounded: Any, peers_python: str, *options: str) -> Any:
    args = [sys.executable, str(BENCH), "--counts", "20", "--repeat", "1", "--peers-python", peers_python,
            "--open-timeout", "30", "--fanout-timeout", "30", *options]
    return bounded(args, timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)


def test_a_quick_run_against_both_servers(bounded: Any, peers_python: str, tmp_path: Path) -> None:
    raw = tmp_path / "raw.json"
    done = bench(bounded, peers_python, "--json", str(raw))
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    mcpsync_row = next(line for line in rows if line.startswith("| mcpsync | 20 |"))
    sdk_row = next(line for line in rows if line.startswith("| SDK 2.3.0 | 20 |"))
    for row in (mcpsync_row, sdk_row):
        assert "yes (1/1 runs)" in row and "INVALID" not in row, row
    assert any(line.startswith("| N | fan-out: SDK / mcpsync") for line in rows), done.stdout
    ratio = next(line for line in rows if line.startswith("| 20 | "))
    assert "n/a" not in ratio, ratio

    runs = json.loads(raw.read_text())["runs"]
    assert sorted(r["server"] for r in runs) == ["mcpsync", "sdk"]
    for run in runs:
        assert run["ok"] is True and run["reason"] is None, run
        assert run["opened"] == 20 and run["got"] == 20, run
        assert all(r["got"] == 20 and r["call_error"] is None for r in run["rounds"]), run
        assert 0 < run["first_ms"] <= run["p50_ms"] <= run["fanout_ms"], run
        assert run["call_ms"] > 0, run
        assert run["threads_peak"] >= 1 and run["rss_peak_kib"] > 1024, run
        assert run["duplicates"] == 0, run


def test_a_server_that_refuses_listens_gives_an_invalid_row(bounded: Any, peers_python: str) -> None:
    done = bench(bounded, peers_python, "--servers", "sdk", "--sdk-arg=--max-subscriptions=10")
    assert done.returncode == 1, f"{done.stdout}\n{done.stderr}"
    row = next(line for line in done.stdout.splitlines() if line.startswith("| SDK 2.3.0 | 20 |"))
    assert "**INVALID** 1/1 runs: 10 of 20 listens not opened" in row, row
    assert "Subscription limit reached" in row, row
    assert "Traceback" not in done.stderr, done.stderr
