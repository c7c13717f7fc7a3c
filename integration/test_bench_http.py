"""scripts/bench-http, run as a real process: wrk drives the floor, mcpsync and the official SDK over
real sockets, and the script's figures are only worth reading if every request it counted was a good
one. So these tests check the benchmark's honesty, never its speed (the figures are the docs',
docs/dev/benchmarks.rst):

- a quick run completes and reports every cell, with no failed request, and its ratio tables;
- a server whose tool fails one call in fifty (HTTP 200, a result with isError) makes the run exit 1
  and says what failed: the check is on every response, not on a sample;
- a server that refuses the call (HTTP 400: it has no `echo` tool) likewise, in both eras;
- no wrk: exit 2 and a sentence, not a traceback; the Python driver's options likewise;
- `--auth`: the JWT-protected servers with real RS256 tokens against the bench's own loopback JWKS,
  every request valid, both ratio tables; without PyJWT it says what is missing and exits 2.
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
PROCESS_LIMIT_S = 120  # a quick run takes 15 to 30 s; the bound is for a hang
QUICK = ["--duration", "1", "--warmup", "0", "--repeat", "1", "--concurrency", "1,4"]
CELLS = [(era, concurrency) for era in ("2026-07-28", "handshake") for concurrency in (1, 4)]
FLAKY_APP = '''
import itertools
from mcpsync import Service

service = Service("flaky")
calls = itertools.count(1)


@service.tool
def echo(text: str) -> str:
    """The text back, but every 50th call fails (a tool error: HTTP 200, isError)."""
    if next(calls) % 50 == 0:
        raise ValueError("the 50th call fails")
    return text
'''
NO_ECHO_APP = '''
from mcpsync import Service

service = Service("no-echo")


@service.tool
def other(text: str) -> str:
    """Not the tool the bench calls."""
    return text
'''


def table_rows(stdout: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in stdout.splitlines() if line.startswith("| ")]


def test_a_quick_run_reports_every_cell_with_every_request_good(bounded: Any, tmp_path: Path,
                                                                peers_python: str) -> None:
    raw = tmp_path / "raw.json"
    args = [sys.executable, str(BENCH), *QUICK, "--peers-python", peers_python, "--json", str(raw)]
    done = bounded(args, timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    assert "driven by wrk" in done.stdout, done.stdout
    rows = table_rows(done.stdout)
    for server in ("floor", "mcpsync", "SDK 2.3.0"):
        for era, concurrency in CELLS:
            row = next(r for r in rows if r[:3] == [server, era, str(concurrency)])
            assert row[6] == "0" and "n/a" not in row, row  # errors, and every figure there
    ratios = [r for r in rows if r[0] in ("2026-07-28", "handshake")]
    assert [(r[0], r[1]) for r in ratios] == [(era, str(c)) for era, c in CELLS], done.stdout
    for row in ratios:
        assert "n/a" not in " ".join(row) and "INVALID" not in " ".join(row), row
        assert "PASS" in row[3] or "FAIL" in row[3], row  # mcpsync / SDK, every cell
        # mcpsync / floor: the targets are for concurrency 1 and 16.
        assert ("PASS" in row[6] or "FAIL" in row[6]) if row[1] == "1" else row[6] == "no target", row

    runs = json.loads(raw.read_text())["runs"]
    assert len(runs) == 3 * len(CELLS)
    for run in runs:
        assert run["ok"] is True and run["errors"] == 0 and run["warmup_errors"] == 0, run
        assert run["requests"] > 0 and run["server_cpu_us_per_req"] > 0 and run["p99_us"] >= run["p50_us"] > 0, run
        assert run["wrk_threads"] == (1 if run["concurrency"] == 1 else 2), run


def test_the_http_server_alone_answers_every_request_of_both_eras(bounded: Any) -> None:
    """`httpd` (mcpsync's HTTP server with a few-line WSGI application) runs only when named, and
    passes the same checks as the others: every answer 200 with the echoed text, in both eras (the
    handshake era's session made and deleted)."""
    args = [sys.executable, str(BENCH), *QUICK, "--servers", "httpd"]
    done = bounded(args, timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    rows = table_rows(done.stdout)
    assert [row[:3] for row in rows if row[0] == "httpd"] == [["httpd", era, str(c)] for era, c in CELLS], done.stdout
    for row in rows:
        if row[0] == "httpd":
            assert row[6] == "0" and "n/a" not in row, row


def test_one_failed_call_in_fifty_fails_the_run(bounded: Any, tmp_path: Path) -> None:
    app = tmp_path / "flaky_app.py"
    app.write_text(FLAKY_APP)
    raw = tmp_path / "raw.json"
    args = [sys.executable, str(BENCH), *QUICK, "--servers", "mcpsync", "--concurrency", "4",
            "--mcpsync-target", str(app), "--json", str(raw)]
    done = bounded(args, timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 1, f"{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    for run in json.loads(raw.read_text())["runs"]:
        assert run["ok"] is False, run
        # About one in fifty, counted one by one: neither none nor every request.
        assert 0 < run["errors"] < run["requests"] / 10, run
        assert "without the echo result" in run["first_error"] and '"isError":true' in run["first_error"], run
    rows = table_rows(done.stdout)
    for era in ("2026-07-28", "handshake"):
        row = next(r for r in rows if r[:3] == ["mcpsync", era, "4"])
        assert row[3] == "n/a" and "(1 invalid run)" in row[6], row  # no figure from a run with failures
    assert done.stdout.count("INVALID run: mcpsync") == 2, done.stdout


def test_a_refused_call_fails_the_run_in_both_eras(bounded: Any, tmp_path: Path) -> None:
    app = tmp_path / "no_echo_app.py"
    app.write_text(NO_ECHO_APP)
    raw = tmp_path / "raw.json"
    args = [sys.executable, str(BENCH), *QUICK, "--servers", "mcpsync", "--concurrency", "1",
            "--mcpsync-target", str(app), "--json", str(raw)]
    done = bounded(args, timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 1, f"{done.stdout}\n{done.stderr}"
    runs = json.loads(raw.read_text())["runs"]
    assert {r["era"] for r in runs} == {"2026-07-28", "handshake"}
    for run in runs:
        assert run["ok"] is False and run["errors"] == run["requests"] > 0, run
        assert "Unknown tool" in run["first_error"], run
    modern = next(r for r in runs if r["era"] == "2026-07-28")
    assert modern["first_error"].startswith("HTTP 400: "), modern


def test_without_wrk_it_says_so(bounded: Any, tmp_path: Path) -> None:
    args = [sys.executable, str(BENCH), *QUICK, "--servers", "mcpsync", "--wrk", str(tmp_path / "no-wrk")]
    done = bounded(args, timeout=60, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 2, f"{done.stdout}\n{done.stderr}"
    assert "install Debian's wrk" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_python_drivers_options_say_where_they_went(bounded: Any) -> None:
    for gone in (["--requests", "2000"], ["--driver-procs", "4"]):
        done = bounded([sys.executable, str(BENCH), *gone], timeout=60, env=base_env(), cwd=REPO_ROOT)
        assert done.returncode == 2, f"{done.stdout}\n{done.stderr}"
        assert "went with the Python driver: wrk runs for --duration seconds" in done.stderr, done.stderr


def test_a_quick_auth_run_is_valid_and_reports_both_ratios(bounded: Any, tmp_path: Path) -> None:
    servers = ("mcpsync", "mcpsync+jwt", "mcpsync+jwt-nocache")
    raw = tmp_path / "raw.json"
    args = [sys.executable, str(BENCH), "--auth", *QUICK, "--json", str(raw)]
    done = bounded(args, timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    rows = table_rows(done.stdout)
    for server in servers:
        for era, concurrency in CELLS:
            row = next(r for r in rows if r[:3] == [server, era, str(concurrency)])
            assert row[6] == "0" and "n/a" not in row, row
    for title in ("protected (cached tokens) / open req/s", "protected, no cache / open req/s"):
        assert any(title in line for line in lines), done.stdout
    ratio_rows = [line for line in lines if line.startswith(("| 2026-07-28 | ", "| handshake | "))]
    assert len(ratio_rows) == 2 * len(CELLS), done.stdout
    for row in ratio_rows:
        assert "n/a" not in row and "INVALID" not in row, row
    assert sum(("PASS" in row or "FAIL" in row) for row in ratio_rows) == len(CELLS), done.stdout
    assert "JwtVerifier.verify of a cached token" in done.stdout, done.stdout
    assert "--auth-jwks-url http://127.0.0.1:" in done.stdout, done.stdout

    report = json.loads(raw.read_text())
    runs = report["runs"]
    assert sorted({r["server"] for r in runs}) == sorted(servers)
    assert len(runs) == len(servers) * len(CELLS)
    for run in runs:
        assert run["ok"] is True and run["errors"] == 0 and run["warmup_errors"] == 0, run
        assert run["requests"] > 0, run
    costs = report["verify_costs_us"]
    assert set(costs) == {"verify_cached_us", "verify_fresh_us", "authenticate_cached_us"}
    assert all(0 < value < 1e6 for value in costs.values()), costs
    # One fetch per protected server (the key set is kept across requests), one for the in-process timing.
    assert report["jwks_fetches"] == 2 + 1, report["jwks_fetches"]


def test_without_pyjwt_the_auth_mode_says_so(bounded: Any, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "jwt"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named jwt (hidden by the test)')\n")
    args = [sys.executable, str(BENCH), "--auth", *QUICK]
    done = bounded(args, timeout=60, env=base_env(extra_pythonpath=[str(shadow.parent)]), cwd=REPO_ROOT)
    assert done.returncode == 2, f"{done.stdout}\n{done.stderr}"
    assert "--auth needs PyJWT and cryptography" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
