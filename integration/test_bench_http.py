"""scripts/bench-http --auth, the cost of a JWT-protected endpoint, run as a real process: the open
mcpsync server, the protected one (`serve --auth-jwks-url ...`) and the protected one without a
token cache, each with real RS256 tokens against the bench's own loopback JWKS.

A quick run must exit 0 with every request valid (the protected servers answered 200 to every
client's token and 401 to a request without one), print a row per server and cell, both ratio
tables with figures, the in-process verify costs, and show that each protected server fetched the
key set once. The figures themselves are the docs' (docs/dev/benchmarks.rst), never asserted: speed
is not a test. Without PyJWT the auth mode must say what is missing and exit 2, not crash.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from wire import REPO_ROOT, base_env

pytestmark = pytest.mark.timeout(150)

BENCH = REPO_ROOT / "scripts" / "bench-http"
PROCESS_LIMIT_S = 120  # a quick run takes about 10 s; the bound is for a hang
SERVERS = ("mcpsync", "mcpsync+jwt", "mcpsync+jwt-nocache")
CELLS = [(era, concurrency) for era in ("2026-07-28", "handshake") for concurrency in (1, 4)]


def test_a_quick_auth_run_is_valid_and_reports_both_ratios(bounded: Any, tmp_path: Path) -> None:
    raw = tmp_path / "raw.json"
    args = [sys.executable, str(BENCH), "--auth", "--requests", "200", "--warmup", "20", "--repeat", "1",
            "--concurrency", "1,4", "--json", str(raw)]
    done = bounded(args, timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    for server in SERVERS:
        for era, concurrency in CELLS:
            row = next(line for line in rows if line.startswith(f"| {server} | {era} | {concurrency} |"))
            cells = [cell.strip() for cell in row.strip("|").split("|")]
            assert cells[6] == "0" and "n/a" not in row, row  # errors, and every figure there
    for title in ("protected (cached tokens) / open req/s", "protected, no cache / open req/s"):
        assert any(title in line for line in rows), done.stdout
    ratio_rows = [line for line in rows if line.startswith(("| 2026-07-28 | ", "| handshake | "))]
    assert len(ratio_rows) == 2 * len(CELLS), done.stdout
    for row in ratio_rows:
        assert "n/a" not in row and "INVALID" not in row, row
    assert sum(("PASS" in row or "FAIL" in row) for row in ratio_rows) == len(CELLS), done.stdout
    assert "JwtVerifier.verify of a cached token" in done.stdout, done.stdout
    assert "--auth-jwks-url http://127.0.0.1:" in done.stdout, done.stdout

    report = json.loads(raw.read_text())
    runs = report["runs"]
    assert sorted({r["server"] for r in runs}) == sorted(SERVERS)
    assert len(runs) == len(SERVERS) * len(CELLS)
    for run in runs:
        assert run["ok"] is True and run["errors"] == 0 and run["warmup_errors"] == 0, run
        assert run["requests"] == 200, run
    costs = report["verify_costs_us"]
    assert set(costs) == {"verify_cached_us", "verify_fresh_us", "authenticate_cached_us"}
    assert all(0 < value < 1e6 for value in costs.values()), costs
    # One fetch per protected server (the key set is kept across requests), one for the in-process timing.
    assert report["jwks_fetches"] == 2 + 1, report["jwks_fetches"]


def test_without_pyjwt_the_auth_mode_says_so(bounded: Any, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "jwt"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named jwt (hidden by the test)')\n")
    args = [sys.executable, str(BENCH), "--auth", "--requests", "10", "--repeat", "1"]
    done = bounded(args, timeout=60, env=base_env(extra_pythonpath=[str(shadow.parent)]), cwd=REPO_ROOT)
    assert done.returncode == 2, f"{done.stdout}\n{done.stderr}"
    assert "--auth needs PyJWT and cryptography" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
