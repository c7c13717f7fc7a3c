"""scripts/bench-tasks, run as a real process: wrk creates tasks, reads one and calls the same tool
plainly over real sockets, and a Python client makes the memory phase's tasks; the figures are only
worth reading if every answer counted was a good one. So these tests check the benchmark's honesty,
never its speed (the figures are the docs', docs/dev/benchmarks.rst):

- a quick run completes and reports every cell, with no failed request, its ratio table and the
  memory phase (every task made read back completed);
- a server that refuses creations (its per-caller cap of kept tasks reached) makes the run exit 1
  and says what failed, in the create runs and in the memory phase, while the plain and get runs
  stay valid;
- a task answered for but ending with a tool error (isError, in the task's result) fails the run:
  the tasks are checked after the run, not only their creations;
- no wrk: exit 2 and a sentence, not a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from wire import REPO_ROOT, base_env

pytestmark = pytest.mark.timeout(150)

BENCH = REPO_ROOT / "scripts" / "bench-tasks"
PROCESS_LIMIT_S = 120  # a quick run takes 10 to 20 s; the bound is for a hang
QUICK = ["--duration", "1", "--warmup", "0", "--repeat", "1", "--concurrency", "1,4"]
SHAPES = ("plain", "create", "get")
CAPPED_APP = '''
from mcpsync import Server, Service
from mcpsync.tasks import TaskLimits, TaskRunner

service = Service("capped")


@service.tool(task="optional")
def echo(text: str) -> str:
    """The text back; as a task, until the caller holds 50 of them (the defaults refuse at 1,000)."""
    return text


server = Server("capped", services=[service], tasks=TaskRunner(limits=TaskLimits(max_kept_per_owner=50)))
'''
TOOL_ERROR_APP = '''
from mcpsync import Server, Service, ToolError
from mcpsync.tasks import TaskLimits, TaskRunner

service = Service("tool-error")


@service.tool(task="optional")
def echo(text: str) -> str:
    """Fails as a tool does: a task made of it is created, then ends completed with isError."""
    raise ToolError(f"no echo of {text}")


server = Server("tool-error", services=[service], tasks=TaskRunner(limits=TaskLimits(max_kept_per_owner=100_000, max_kept=100_000)))
'''


def table_rows(stdout: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in stdout.splitlines() if line.startswith("| ")]


def test_a_quick_run_reports_every_cell_with_every_answer_good(bounded: Any, tmp_path: Path) -> None:
    raw = tmp_path / "raw.json"
    args = [sys.executable, str(BENCH), *QUICK, "--tasks", "300", "--json", str(raw)]
    done = bounded(args, timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    assert "command: " in done.stdout and "scripts/bench-tasks --duration 1" in done.stdout, done.stdout
    rows = table_rows(done.stdout)
    for shape in SHAPES:
        for concurrency in (1, 4):
            row = next(r for r in rows if r[:2] == [shape, str(concurrency)])
            assert row[5] == "0" and "n/a" not in row, row  # errors, and every figure there
    ratios = [r for r in rows if r[0] in ("1", "4")]
    assert [r[0] for r in ratios] == ["1", "4"], done.stdout
    for row in ratios:
        assert len(row) == 7 and "n/a" not in " ".join(row), row  # create / plain, get / plain: req/s, CPU, added
    assert next(r for r in rows if r[0] == "per task")[1].endswith("bytes"), done.stdout
    assert "INVALID" not in done.stdout, done.stdout

    report = json.loads(raw.read_text())
    runs = report["runs"]
    assert sorted((r["shape"], r["concurrency"]) for r in runs) == sorted((s, c) for s in SHAPES for c in (1, 4))
    for run in runs:
        assert run["ok"] is True and run["errors"] == 0 and run["warmup_errors"] == 0, run
        assert run["requests"] > 0 and run["server_cpu_us_per_req"] > 0 and run["p99_us"] >= run["p50_us"] > 0, run
        if run["shape"] == "create":  # a fresh server per run: every measured creation is a task kept
            assert run["kept_start"] == 0 and run["kept_end"] == run["requests"], run
    memory = report["memory"]
    assert memory["ok"] is True and memory["tasks"] == 300 and memory["gets"] >= 300, memory
    assert sum(block["creations"] for block in memory["blocks"]) == 300, memory
    assert memory["after_kib"]["VmHWM"] >= memory["before_kib"]["VmHWM"] > 0, memory


def test_a_server_that_refuses_creations_fails_the_run(bounded: Any, tmp_path: Path) -> None:
    app = tmp_path / "capped_app.py"
    app.write_text(CAPPED_APP)
    raw = tmp_path / "raw.json"
    args = [sys.executable, str(BENCH), *QUICK, "--concurrency", "4", "--tasks", "200",
            "--mcpsync-target", str(app), "--json", str(raw)]
    done = bounded(args, timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 1, f"{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    report = json.loads(raw.read_text())
    for run in report["runs"]:
        if run["shape"] == "create":  # 50 created, every later creation refused, each one counted
            assert run["ok"] is False and 0 < run["errors"] < run["requests"], run
            assert "too many tasks" in run["first_error"], run
        else:
            assert run["ok"] is True and run["errors"] == 0, run
    row = next(r for r in table_rows(done.stdout) if r[:2] == ["create", "4"])
    assert row[2] == "n/a" and "(1 invalid run)" in row[5], row  # no figure from a run with failures
    assert done.stdout.count("INVALID run: create") == 1, done.stdout
    memory = report["memory"]
    assert memory["ok"] is False and "too many tasks" in memory["error"], memory
    assert "memory: INVALID" in done.stdout, done.stdout


def test_a_task_ending_with_a_tool_error_fails_the_run(bounded: Any, tmp_path: Path) -> None:
    app = tmp_path / "tool_error_app.py"
    app.write_text(TOOL_ERROR_APP)
    raw = tmp_path / "raw.json"
    args = [sys.executable, str(BENCH), *QUICK, "--concurrency", "1", "--shapes", "create", "--only", "rates",
            "--mcpsync-target", str(app), "--json", str(raw)]
    done = bounded(args, timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 1, f"{done.stdout}\n{done.stderr}"
    report = json.loads(raw.read_text())
    [run] = report["runs"]
    # Every creation was answered well; the task it made did not end well.
    assert run["ok"] is False and "did not end completed with the echoed text" in run["first_error"], run
    assert '"isError": true' in run["first_error"], run
    assert report["memory"] is None, report


def test_without_wrk_it_says_so(bounded: Any, tmp_path: Path) -> None:
    args = [sys.executable, str(BENCH), *QUICK, "--wrk", str(tmp_path / "no-wrk")]
    done = bounded(args, timeout=60, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 2, f"{done.stdout}\n{done.stderr}"
    assert "install Debian's wrk" in done.stderr and "Traceback" not in done.stderr, done.stderr
