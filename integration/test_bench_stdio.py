"""scripts/bench, the stdio benchmark, run as a real process against its three real servers: mcpsync,
the floor loop and the official SDK (from `.venv-peers`).

A quick run (a few hundred requests, one repeat) must exit 0 and print what docs/dev/benchmarks.rst
says it prints: a row per server, era and concurrency, the ratios, and a PASS or FAIL line per
target (which of the two is the machine's business, not the test's). It must also leave mcpsync's
bytecode written, every module of it, so that its start-up figure is not the compiler's.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from wire import REPO_ROOT, base_env

pytestmark = pytest.mark.timeout(240)

BENCH = REPO_ROOT / "scripts" / "bench"
PROCESS_LIMIT_S = 200  # a quick run takes some 15 s, most of it the SDK's start-ups; the bound is for a hang
SERVERS = ("mcpsync", "floor", "mcp SDK")


def test_a_quick_run_reports_every_cell_its_ratios_and_its_targets(bounded: Any, peers_python: str, tmp_path: Path) -> None:
    raw = tmp_path / "raw.json"
    done = bounded([sys.executable, str(BENCH), "--requests", "200", "--warmup", "50", "--repeat", "1",
                    "--peers-python", peers_python, "--json", str(raw)],
                   timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"

    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    cells = {(cell[0].strip().split(" 2.")[0], cell[1].strip(), cell[2].strip()) for cell in rows[1:]}
    assert cells == {(server, era, c) for server in SERVERS for era in ("legacy", "modern") for c in ("1", "16")}, done.stdout
    for cell in rows[1:]:
        assert float(cell[3].replace(",", "")) > 0, cell  # req/s
        assert float(cell[8].replace(",", "")) > 0, cell  # start-up ms

    ratios = [line for line in done.stdout.splitlines() if "mcpsync / SDK" in line and "mcpsync / floor" in line]
    assert len(ratios) == 4, done.stdout
    targets = [line for line in done.stdout.splitlines() if line.startswith(("- PASS", "- FAIL"))]
    assert any("start-up <= 4x the floor's" in line for line in targets), done.stdout
    assert any("peak RSS" in line for line in targets), done.stdout
    assert len(targets) == 11, done.stdout

    runs = json.loads(raw.read_text())["runs"]
    assert len(runs) == 12 and all(run["failure"] is None and run["report"]["errors"] == 0 for run in runs), runs

    sources = sorted((REPO_ROOT / "mcpsync").rglob("*.py"))
    uncompiled = [str(path) for path in sources if not Path(importlib.util.cache_from_source(str(path))).is_file()]
    assert uncompiled == [], "scripts/bench left these without bytecode"
