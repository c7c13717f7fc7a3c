"""`mcpsync serve --processes N`: what is typed wrong fails before gunicorn starts (exit 2), a
missing extra or a target the workers cannot load exits 1 saying why, `--help` says what the
option does, and nothing of gunicorn is imported unless more than one process is asked for.
The workers themselves are integration/test_processes.py's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner, Result

from mcpsync.cli import cli

from .._timeouts import LONG
from ._serving import serve_env
from .test_serve_imports import _imported_while_serving, _unwanted


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="mcpsync", catch_exceptions=False)


def serve_child(*args: str, python: tuple[str, ...] = ("-m", "mcpsync"), cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m mcpsync serve ARGS` as a real process (gunicorn forks: not in this process)."""
    return subprocess.run(
        [sys.executable, *python, "serve", *args],
        capture_output=True, text=True, timeout=LONG * 2, stdin=subprocess.DEVNULL, env=serve_env(), cwd=cwd,
    )


def test_processes_without_http_is_a_usage_error() -> None:
    result = run("serve", "--processes", "2")
    assert result.exit_code == 2, result.output
    assert "--processes applies to --http only" in result.stderr


def test_processes_must_be_at_least_one() -> None:
    result = run("serve", "--http", "127.0.0.1:0", "--processes", "0")
    assert result.exit_code == 2, result.output
    assert "--processes" in result.stderr and "0" in result.stderr


def test_streams_that_would_take_every_connection_are_a_usage_error() -> None:
    result = run("serve", "--http", "127.0.0.1:0", "--processes", "2", "--max-streams", "20", "--max-connections", "10")
    assert result.exit_code == 2, result.output
    assert "--max-streams" in result.stderr and "below --max-connections" in result.stderr


def test_help_says_what_processes_do_and_what_makes_them_one_server() -> None:
    result = run("serve", "--help")
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "--processes INTEGER RANGE" in text
    assert "run by gunicorn (the gunicorn extra)" in text
    assert "--bus redis://... is what makes them one server" in text
    assert "each worker has its own sessions and listens" in text
    assert "--processes 4 --bus redis://127.0.0.1:6379/0" in text  # the example line


def test_without_gunicorn_the_error_names_the_extra() -> None:
    hide = "import sys; sys.modules['gunicorn'] = None; from mcpsync.cli import cli; cli(prog_name='mcpsync')"
    done = serve_child("--http", "127.0.0.1:0", "--processes", "2", python=("-c", hide))
    assert done.returncode == 1, done.stderr
    assert "gunicorn, which is not installed: pip install 'mcpsync[gunicorn]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_target_the_workers_cannot_load_stops_them_all_with_its_reason(tmp_path: Path) -> None:
    """Loaded in each worker (after the fork), so the reason comes from a worker; gunicorn then
    stops every worker instead of restarting them forever, and the command exits 1."""
    done = serve_child("--http", "127.0.0.1:0", "--processes", "2", "missing.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "mcpsync: " in done.stderr and "missing.py" in done.stderr
    assert "App failed to load" in done.stderr


def test_a_plain_serve_imports_nothing_of_gunicorn(tmp_path: Path) -> None:
    imported = _imported_while_serving(cwd=tmp_path)
    assert "mcpsync.server" in imported, "the child did not report its imports"
    assert _unwanted(imported, ("gunicorn", "mcpsync.gunicorn", "mcpsync.processes")) == []
